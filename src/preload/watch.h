/*
 * watch -- the device region changing under a running application: removed
 * (`rm`, systemd-logind's RemoveIPC, a tmpfs cleaner), replaced (`device
 * create --force` by someone else) or truncated. From then on, answering a
 * sync from the region would acknowledge what no recovery will ever find,
 * and touching a truncated mapping raises SIGBUS. tdax notices (the
 * write-back pass looks at the region's path; a SIGBUS inside the mapping
 * is caught), makes what was acknowledged durable with a real sync of
 * everything, says so once, and from then on passes every call to the
 * kernel. The application never gets the signal.
 */
#ifndef TDAX_WATCH_H
#define TDAX_WATCH_H

#include <stdbool.h>

/* Catch SIGBUS inside the mapping (at start, once the device is mapped). */
void tdax_watch_start(void);
/* Is the region still the one mapped? If not, give it up (see above).
 * Returns true while it is. Called by the write-back pass. */
bool tdax_watch_check(void);

#endif
