#include "CProcessControl.h"

#if defined(__linux__)
#include <malloc.h>
#include <sys/prctl.h>

int livedelivery_release_free_memory(void) {
#if defined(__GLIBC__)
    return malloc_trim(0);
#else
    return 0;
#endif
}

int livedelivery_make_non_dumpable(void) { return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0); }

int livedelivery_is_dumpable(void) { return prctl(PR_GET_DUMPABLE, 0, 0, 0, 0); }
#else
#include <errno.h>

int livedelivery_release_free_memory(void) { return 0; }

int livedelivery_make_non_dumpable(void) {
    errno = ENOSYS;
    return -1;
}

int livedelivery_is_dumpable(void) { return -1; }
#endif
