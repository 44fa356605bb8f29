/*
 * notif -- prototype: a seccomp user-notification supervisor
 * (SECCOMP_RET_USER_NOTIF) as a way to see the raw system calls of a program
 * (docs/design.md, "Programs that skip libc"; tdax run --intercept syscall is
 * built on it). A child traps getppid and makes it N times; the parent
 * answers each (1) itself, (2) after borrowing a descriptor of the child's
 * with pidfd_getfd and reading 128 bytes of its memory, as the supervisor
 * does for a write, (3) by letting the kernel make it
 * (SECCOMP_USER_NOTIF_FLAG_CONTINUE). Prints the cost per call of each,
 * against the plain call.
 */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP (1UL << 0)
#endif

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void pass_fd(int sock, int fd, int *out)
{
	char byte = 0, buf[CMSG_SPACE(sizeof(int))] = { 0 };
	struct iovec io = { &byte, 1 };
	struct msghdr m = { .msg_iov = &io, .msg_iovlen = 1, .msg_control = buf, .msg_controllen = sizeof(buf) };
	if (!out) {
		struct cmsghdr *c = CMSG_FIRSTHDR(&m);
		*c = (struct cmsghdr){ .cmsg_len = CMSG_LEN(sizeof(int)), .cmsg_level = SOL_SOCKET,
				       .cmsg_type = SCM_RIGHTS };
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
		sendmsg(sock, &m, 0);
	} else if (recvmsg(sock, &m, 0) == 1) {
		memcpy(out, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof(int));
	}
}

static char data[128] = "what a write would hand over";

static void child(int sock, int n)
{
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_USER_NOTIF),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { 4, f };
	prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
	int fd = (int)syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_NEW_LISTENER, &prog);
	if (fd < 0) {
		perror("notif: seccomp");
		_exit(1);
	}
	pass_fd(sock, fd, NULL);
	close(fd);
	double plain0 = now();
	for (int i = 0; i < n; i++)
		syscall(SYS_getpid);
	double t[4] = { now() };
	for (int way = 0; way < 3; way++) {
		for (int i = 0; i < n; i++)
			syscall(SYS_getppid, (long)data);
		t[way + 1] = now();
	}
	printf("notif: plain %.0f ns; answered %.0f ns; with pidfd_getfd + 128 B read %.0f ns; "
	       "continued %.0f ns\n", (t[0] - plain0) / n * 1e9, (t[1] - t[0]) / n * 1e9,
	       (t[2] - t[1]) / n * 1e9, (t[3] - t[2]) / n * 1e9);
	fflush(stdout);
	_exit(0);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 50000, sv[2], listener = -1;
	socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
	pid_t c = fork();
	if (c == 0)
		child(sv[1], n);
	pass_fd(sv[0], -1, &listener);
	int pidfd = (int)syscall(SYS_pidfd_open, c, 0);
	if (getenv("SYNC_WAKE") && ioctl(listener, SECCOMP_IOCTL_NOTIF_SET_FLAGS, SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP))
		perror("notif: SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP");
	struct seccomp_notif_sizes sz;
	syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sz);
	struct seccomp_notif *req = calloc(1, sz.seccomp_notif);
	struct seccomp_notif_resp *resp = calloc(1, sz.seccomp_notif_resp);
	for (long served = 0;; served++) {
		memset(req, 0, sz.seccomp_notif);
		if (ioctl(listener, SECCOMP_IOCTL_NOTIF_RECV, req) != 0)
			break;
		int way = (int)(served / n);
		*resp = (struct seccomp_notif_resp){ .id = req->id, .val = getppid() };
		if (way == 1) {
			char buf[128];
			struct iovec l = { buf, sizeof(buf) }, r = { (void *)req->data.args[0], sizeof(buf) };
			int fd = (int)syscall(SYS_pidfd_getfd, pidfd, 1, 0);
			process_vm_readv(req->pid, &l, 1, &r, 1, 0);
			close(fd);
		} else if (way == 2) {
			resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
			resp->val = 0;
		}
		ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, resp);
	}
	int st;
	waitpid(c, &st, 0);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
