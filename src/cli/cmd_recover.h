/*
 * cmd_recover -- tdax recover (argv[0] is "recover"); returns the exit
 * status.
 */
#ifndef TDAX_CLI_CMD_RECOVER_H
#define TDAX_CLI_CMD_RECOVER_H

int cmd_recover(int argc, char **argv);

#endif
