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

/* A SIGBUS at addr (fault.h's handler asks): true if it is inside the
 * mapping, which the region's truncation took away -- then zero pages
 * are mapped there for the access to complete, and the region is given
 * up at the next check. */
bool tdax_watch_sigbus(const void *addr);
/* Is the region still the one mapped? If not, give it up (see above).
 * Returns true while it is. Called by the write-back pass. */
bool tdax_watch_check(void);

#endif
