#ifndef LIVEDELIVERY_CSHIMS_CURL_H
#define LIVEDELIVERY_CSHIMS_CURL_H
#include <curl/curl.h>

#endif
