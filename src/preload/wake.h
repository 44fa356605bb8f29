/*
 * wake -- how the write path wakes the write-back thread without calling
 * into it: the policy marks a range for a job and wakes the thread, which
 * waits here between its passes.
 */
#ifndef TDAX_WAKE_H
#define TDAX_WAKE_H

#include <stdint.h>

/* Wake the waiting thread now (cheap when it is already woken). */
void tdax_wake(void);

/* Wait until woken or until timeout_ns have passed. */
void tdax_wake_wait(uint64_t timeout_ns);

/* In the child of a fork: nobody waits, nobody has woken. */
void tdax_wake_after_fork(void);

#endif
