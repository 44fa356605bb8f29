/*
 * cmd_status -- what tdax is doing on a device: tdax status, top, metrics,
 * get and set. Each takes argv[0] = its own name and returns the exit status.
 */
#ifndef TDAX_CLI_CMD_STATUS_H
#define TDAX_CLI_CMD_STATUS_H

int cmd_status(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_metrics(int argc, char **argv);
int cmd_get(int argc, char **argv);
int cmd_set(int argc, char **argv);

#endif
