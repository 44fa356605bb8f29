/*
 * vforkclose -- a vfork child that closes a descriptor on its way out, as
 * a shell's or a spawner's child may before it execs: vfork, close(FD) in
 * the child, _exit. Then, in the parent, write LINE through FD and sync
 * it, twice. For tests/py/test_holes.py: under tdax, in a process that has
 * not attached, the child's close must not change what the parent knows
 * of FD.
 *
 * usage: tdax-vforkclose FD LINE
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: tdax-vforkclose FD LINE\n");
		return 2;
	}
	int fd = atoi(argv[1]);
	pid_t pid = vfork();
	if (pid == 0) {
		close(fd);
		_exit(0);
	}
	if (pid < 0 || waitpid(pid, NULL, 0) != pid) {
		perror("vfork");
		return 1;
	}
	size_t n = strlen(argv[2]);
	for (int i = 0; i < 2; i++) {
		if (write(fd, argv[2], n) != (ssize_t)n || fdatasync(fd) != 0) {
			perror("write");
			return 1;
		}
	}
	return 0;
}
