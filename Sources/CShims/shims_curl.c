#include "CShimsCurl.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

_Static_assert(sizeof(curl_off_t) == 8, "curl_off_t is expected to be 64 bits");

CURLcode CShims_curl_easy_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode CShims_curl_easy_setopt_ptr(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode CShims_curl_easy_setopt_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode CShims_curl_easy_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode CShims_curl_easy_setopt_slist(CURL *handle, CURLoption option, struct curl_slist *value) {
    return curl_easy_setopt(handle, option, value);
}

CURLcode CShims_curl_easy_setopt_write_function(CURL *handle, CShims_curl_data_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_WRITEFUNCTION, callback);
}

CURLcode CShims_curl_easy_setopt_header_function(CURL *handle, CShims_curl_data_callback callback) {
    return curl_easy_setopt(handle, CURLOPT_HEADERFUNCTION, callback);
}

CURLcode CShims_curl_easy_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

CURLcode CShims_curl_easy_getinfo_off_t(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

CURLcode CShims_curl_easy_getinfo_ptr(CURL *handle, CURLINFO info, void **value) {
    return curl_easy_getinfo(handle, info, value);
}

CURLMcode CShims_curl_multi_setopt_long(CURLM *handle, CURLMoption option, long value) {
    return curl_multi_setopt(handle, option, value);
}

CURLcode CShims_curl_msg_result(const CURLMsg *message) {
    return message->data.result;
}

struct CShims_curl_socket_set {
    curl_socket_t *sockets;
    int count;
    int capacity;
};

CShims_curl_socket_set *CShims_curl_socket_set_create(void) {
    return calloc(1, sizeof(CShims_curl_socket_set));
}

void CShims_curl_socket_set_destroy(CShims_curl_socket_set *set) {
    if (set == NULL) return;
    free(set->sockets);
    free(set);
}

static int CShims_curl_sockopt(void *clientp, curl_socket_t fd, curlsocktype purpose) {
    CShims_curl_socket_set *set = clientp;
    if (purpose != CURLSOCKTYPE_IPCXN) return CURL_SOCKOPT_OK;
    if (set->count == set->capacity) {
        int capacity = set->capacity == 0 ? 8 : set->capacity * 2;
        curl_socket_t *grown = realloc(set->sockets, (size_t)capacity * sizeof(curl_socket_t));
        // Without room the socket is simply never corked: correct, only slower.
        if (grown == NULL) return CURL_SOCKOPT_OK;
        set->sockets = grown;
        set->capacity = capacity;
    }
    set->sockets[set->count++] = fd;
    return CURL_SOCKOPT_OK;
}

static int CShims_curl_closesocket(void *clientp, curl_socket_t fd) {
    CShims_curl_socket_set *set = clientp;
    for (int i = 0; i < set->count; i++) {
        if (set->sockets[i] == fd) {
            set->sockets[i] = set->sockets[--set->count];
            break;
        }
    }
    return close(fd);
}

CURLcode CShims_curl_easy_track_sockets(CURL *handle, CShims_curl_socket_set *set) {
    CURLcode result = curl_easy_setopt(handle, CURLOPT_SOCKOPTFUNCTION, CShims_curl_sockopt);
    if (result == CURLE_OK) result = curl_easy_setopt(handle, CURLOPT_SOCKOPTDATA, (void *)set);
    if (result == CURLE_OK) result = curl_easy_setopt(handle, CURLOPT_CLOSESOCKETFUNCTION, CShims_curl_closesocket);
    if (result == CURLE_OK) result = curl_easy_setopt(handle, CURLOPT_CLOSESOCKETDATA, (void *)set);
    return result;
}

void CShims_curl_socket_set_cork(CShims_curl_socket_set *set, int cork) {
    int value = cork ? 1 : 0;
    for (int i = 0; i < set->count; i++) {
        // Not TCP (a Unix socket, say): nothing to cork, and nothing lost.
        (void)setsockopt(set->sockets[i], IPPROTO_TCP, TCP_CORK, &value, sizeof(value));
    }
}

int CShims_curl_socket_set_count(const CShims_curl_socket_set *set) {
    return set->count;
}
