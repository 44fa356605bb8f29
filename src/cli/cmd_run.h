/*
 * cmd_run -- tdax run (argv[0] is "run"); returns the exit status when
 * the command cannot be started (otherwise it becomes the command), or in
 * bypass mode the command's (cli/supervise.h).
 */
#ifndef TDAX_CLI_CMD_RUN_H
#define TDAX_CLI_CMD_RUN_H

int cmd_run(int argc, char **argv);

#endif
