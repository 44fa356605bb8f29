/*
 * supervise -- tdax run in bypass mode stays the parent of the command and
 * writes in what a dead process deferred (supervise.c).
 */
#ifndef TDAX_CLI_SUPERVISE_H
#define TDAX_CLI_SUPERVISE_H

/* Run argv under this process, reaping it and every process that becomes a
 * child of this one, on the device at path; the command's exit status
 * (dies of its signal if it died of one). */
int tdax_supervise(const char *device, char *const argv[]);

#endif
