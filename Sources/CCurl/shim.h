#ifndef LIVEDELIVERY_CCURL_SHIM_H
#define LIVEDELIVERY_CCURL_SHIM_H
#include <curl/curl.h>
#endif
