/*
 * wake -- how the write path wakes the write-back thread without calling
 * into it: the policy marks a range for a job and wakes the thread, which
 * waits here between its passes.
 */
#ifndef TDAX_WAKE_H
#define TDAX_WAKE_H

#include <stdbool.h>
#include <stdint.h>

/* Wake the waiting thread now (cheap when it is already woken). */
void tdax_wake(void);

/*
 * The thread is started only once it has work (writeback.h): records to
 * write back (tdax_wake_want, at a process's first record) or a job
 * (tdax_wake). Until then a process that writes and syncs only on the
 * kernel's path stays single-threaded (libc's calls cost more in a
 * process with threads: cancellation points).
 */
void tdax_wake_want(void);
bool tdax_wake_wanted(void);

/* Wait until woken or until timeout_ns have passed; true if woken. */
bool tdax_wake_wait(uint64_t timeout_ns);

/* In the child of a fork: nobody waits, nobody has woken, no work yet. */
void tdax_wake_after_fork(void);

#endif
