/*
 * writeback -- the background thread of a process under tdax: checkpoints
 * the files this process logged to when their records get old, when a file
 * has much logged, or when the device passes its high watermark (RomeFS
 * writes back below 10 % free); seals segments of exited threads; adds the
 * process's counters into the device's.
 */
#ifndef TDAX_WRITEBACK_H
#define TDAX_WRITEBACK_H

/* Start the thread if it is not running in this process (after fork, too)
 * and it has work (wake.h). */
void tdax_writeback_ensure(void);

/* After a sync of a managed file: the thread, if the sync gave it work; a
 * process that has no thread adds its counters into the device's here, as
 * the thread's pass would (`tdax status` shows its syncs). */
void tdax_writeback_after_sync(void);

/* The process exits: the thread's pass, if it is in one, ends first and no
 * other begins; promoted files get their bytes and lose their leases, the
 * block cache's arenas go back to the log, and a last pass checkpoints
 * every file this process logged to. */
void tdax_writeback_last(void);

/* The application's last thread ends (start.h) or a child of clone()
 * returns: the thread ends (it would keep the process from ending), and
 * what it answers for goes (promoted files get their bytes, the leases
 * go); no thread is started again. */
void tdax_writeback_stop(void);

/* The child of a fork has no write-back thread. */
void tdax_writeback_after_fork(void);

#endif
