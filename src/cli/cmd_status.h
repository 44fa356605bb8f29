/*
 * cmd_status -- what tdax is doing on a device: tdax status, top, metrics,
 * get and set. Each takes argv[0] = its own name and returns the exit status.
 */
#ifndef TDAX_CLI_CMD_STATUS_H
#define TDAX_CLI_CMD_STATUS_H

#include <stdio.h>

int cmd_status(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_metrics(int argc, char **argv);
int cmd_get(int argc, char **argv);
int cmd_set(int argc, char **argv);

/* What tdax metrics prints: the device's metrics in the Prometheus text
 * format, to out (tdax exporter serves the same over HTTP). */
struct tdax_device;
void tdax_metrics_write(FILE *out, const struct tdax_device *dev);

#endif
