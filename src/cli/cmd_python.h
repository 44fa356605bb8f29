/*
 * cmd_python -- the commands written in Python: tdax bench, trace and sim,
 * handed over to the project's virtual environment. Each takes argv[0] =
 * its own name and returns the exit status when the hand-over fails.
 */
#ifndef TDAX_CLI_CMD_PYTHON_H
#define TDAX_CLI_CMD_PYTHON_H

int cmd_bench(int argc, char **argv);
/* tdax trace info|dump FILE and tdax sim FILE: the simulator package. */
int cmd_trace(int argc, char **argv);

#endif
