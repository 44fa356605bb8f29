/*
 * cmd_pin -- tdax pin (argv[0] is "pin"); returns the exit status.
 */
#ifndef TDAX_CLI_CMD_PIN_H
#define TDAX_CLI_CMD_PIN_H

int cmd_pin(int argc, char **argv);

#endif
