/*
 * format -- creating a device region: make it (device.h), then write a
 * fresh layout into it, each part by its owner, the magic last.
 */
#ifndef TDAX_FORMAT_H
#define TDAX_FORMAT_H

#include "core/device.h"

/* Create and format a device region. Never overwrites without opts->force. */
int tdax_device_create(const struct tdax_create_opts *opts, struct tdax_err *err);

#endif
