#ifndef C_PROCESS_CONTROL_H
#define C_PROCESS_CONTROL_H

/// Marks the calling process non-dumpable (prctl PR_SET_DUMPABLE 0): no core file, and no ptrace or
/// /proc/PID/mem by other processes of the same user. prctl is variadic, which Swift cannot call.
/// Returns 0, or -1 with errno set; always -1 where prctl does not exist.
int livedelivery_make_non_dumpable(void);

/// 1 when the process is dumpable, 0 when not, -1 where it cannot be told.
int livedelivery_is_dumpable(void);

#endif
