#ifndef LIVEDELIVERY_CSHIMS_PQ_H
#define LIVEDELIVERY_CSHIMS_PQ_H
#include <libpq-fe.h>

#endif
