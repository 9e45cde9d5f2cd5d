#ifndef C_PROCESS_CONTROL_H
#define C_PROCESS_CONTROL_H

/// Marks the calling process non-dumpable (prctl PR_SET_DUMPABLE 0): no core file, and no ptrace or
/// /proc/PID/mem by other processes of the same user. prctl is variadic, which Swift cannot call.
/// Returns 0, or -1 with errno set; always -1 where prctl does not exist.
int livedelivery_make_non_dumpable(void);

/// 1 when the process is dumpable, 0 when not, -1 where it cannot be told.
int livedelivery_is_dumpable(void);

/// Gives the pages the allocator holds free back to the system (glibc's malloc_trim(0), which malloc.h
/// declares and Swift's Glibc module does not). Returns 1 when memory was released, else 0.
int livedelivery_release_free_memory(void);

#endif
