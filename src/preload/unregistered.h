/*
 * unregistered -- the mode of a managed descriptor whose file has no entry
 * in the device (mode.h). A file opened for writing is registered only when
 * it has something for tdax to remember: a sync stream (its second sync
 * within the writeback window, tracking.h), a write that must be durable
 * (RWF_DSYNC, RWF_SYNC), or a path tdax cannot follow (a shared mapping,
 * asynchronous I/O, a stdio stream). Until then its descriptors are in
 * unregistered mode: their writes, truncates and allocations are the
 * kernel's alone, and a file that is never synced costs one load per write.
 * Registering is manage.h's; a registered file goes on in coherent mode.
 */
#ifndef TDAX_UNREGISTERED_H
#define TDAX_UNREGISTERED_H

#include "preload/mode.h"

/* Its table of entry points (mode.h). */
extern const struct tdax_mode_ops tdax_unregistered_mode;

#endif
