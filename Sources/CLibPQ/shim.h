#ifndef LIVEDELIVERY_CLIBPQ_SHIM_H
#define LIVEDELIVERY_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
