/*
 * cmd_device -- the commands on a device region itself: tdax device create,
 * info and destroy. Each takes the arguments after "device" (argv[0] is the
 * subcommand's name) and returns the exit status.
 */
#ifndef TDAX_CLI_CMD_DEVICE_H
#define TDAX_CLI_CMD_DEVICE_H

int cmd_device_create(int argc, char **argv);
int cmd_device_info(int argc, char **argv);
int cmd_device_destroy(int argc, char **argv);

#endif
