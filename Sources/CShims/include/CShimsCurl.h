#ifndef LIVEDELIVERY_CSHIMS_CURL_H
#define LIVEDELIVERY_CSHIMS_CURL_H
// Typed, non-variadic wrappers for the variadic libcurl calls (curl_easy_setopt, curl_easy_getinfo,
// curl_multi_setopt), which Swift cannot import. Only the HTTP2 module uses them.
#include <curl/curl.h>
#include <stddef.h>

/// The shape of CURLOPT_WRITEFUNCTION and CURLOPT_HEADERFUNCTION callbacks.
typedef size_t (*CShims_curl_data_callback)(char *_Nonnull buffer, size_t size, size_t count,
                                             void *_Nullable userdata);

CURLcode CShims_curl_easy_setopt_long(CURL *_Nonnull handle, CURLoption option, long value);
CURLcode CShims_curl_easy_setopt_ptr(CURL *_Nonnull handle, CURLoption option, void *_Nullable value);
CURLcode CShims_curl_easy_setopt_string(CURL *_Nonnull handle, CURLoption option, const char *_Nullable value);
CURLcode CShims_curl_easy_setopt_off_t(CURL *_Nonnull handle, CURLoption option, curl_off_t value);
CURLcode CShims_curl_easy_setopt_slist(CURL *_Nonnull handle, CURLoption option,
                                       struct curl_slist *_Nullable value);
CURLcode CShims_curl_easy_setopt_write_function(CURL *_Nonnull handle, CShims_curl_data_callback _Nullable callback);
CURLcode CShims_curl_easy_setopt_header_function(CURL *_Nonnull handle, CShims_curl_data_callback _Nullable callback);

CURLcode CShims_curl_easy_getinfo_long(CURL *_Nonnull handle, CURLINFO info, long *_Nonnull value);
CURLcode CShims_curl_easy_getinfo_off_t(CURL *_Nonnull handle, CURLINFO info, curl_off_t *_Nonnull value);
CURLcode CShims_curl_easy_getinfo_ptr(CURL *_Nonnull handle, CURLINFO info, void *_Nullable *_Nonnull value);

CURLMcode CShims_curl_multi_setopt_long(CURLM *_Nonnull handle, CURLMoption option, long value);

/// The result of a CURLMSG_DONE message (`msg->data.result`), without touching the union from Swift.
CURLcode CShims_curl_msg_result(const CURLMsg *_Nonnull message);

/// The TCP sockets of one multi handle's connections, so that the event loop can cork them around
/// each `curl_multi_perform` pass (libcurl 7.88 writes every HTTP/2 frame with its own `send`;
/// corked, a pass's frames leave in as few segments as the kernel can make).
/// Event-loop thread only: libcurl calls the callbacks from inside its own calls on that thread.
typedef struct CShims_curl_socket_set CShims_curl_socket_set;

CShims_curl_socket_set *_Nullable CShims_curl_socket_set_create(void);
/// Call only after `curl_multi_cleanup`: libcurl closes sockets through the set.
void CShims_curl_socket_set_destroy(CShims_curl_socket_set *_Nullable set);
/// Makes the sockets `handle` opens known to `set` (CURLOPT_SOCKOPTFUNCTION and
/// CURLOPT_CLOSESOCKETFUNCTION, which closes them as libcurl would).
CURLcode CShims_curl_easy_track_sockets(CURL *_Nonnull handle, CShims_curl_socket_set *_Nonnull set);
/// Sets or clears TCP_CORK on every socket of the set; clearing sends what was held back at once.
void CShims_curl_socket_set_cork(CShims_curl_socket_set *_Nonnull set, int cork);
/// How many sockets are open.
int CShims_curl_socket_set_count(const CShims_curl_socket_set *_Nonnull set);

#endif
