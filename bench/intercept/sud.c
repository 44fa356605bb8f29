/*
 * sud -- prototype: Syscall User Dispatch (prctl PR_SET_SYSCALL_USER_DISPATCH)
 * as a way to see the raw system calls of a program (issue: programs that
 * skip libc; docs/design.md, "Programs that skip libc"). Every system call
 * made outside an allowed address range raises SIGSYS; the handler makes the
 * call itself (the selector byte lets it through) and puts the result in the
 * interrupted context. Prints the cost of a trapped call against a plain one,
 * and whether a new thread and a forked child are still trapped (they are
 * not: the kernel clears the dispatch at clone, so a Go runtime's threads,
 * made with raw clone, would escape unless clone were emulated).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef PR_SET_SYSCALL_USER_DISPATCH
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_ON 1
#endif
enum { ALLOW = 0, BLOCK = 1 };

static volatile char selector = ALLOW;
static volatile long traps;

/* The "application": a raw system call, outside the allowed range. */
__attribute__((noinline, aligned(4096))) static long raw(long nr)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(nr) : "rcx", "r11", "memory");
	return r;
}

static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	greg_t *g = ((ucontext_t *)ctx)->uc_mcontext.gregs;
	selector = ALLOW;
	traps++;
	g[REG_RAX] = syscall(si->si_syscall, g[REG_RDI], g[REG_RSI], g[REG_RDX], g[REG_R10], g[REG_R8],
			     g[REG_R9]);
	selector = BLOCK; /* the sigreturn is made from libc: inside the allowed range */
}

static void *thread(void *arg)
{
	(void)arg;
	raw(SYS_getppid);
	return NULL;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200000;
	struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };
	sigaction(SIGSYS, &sa, NULL);
	/* Allowed: everything above raw()'s page (libc, the vDSO, the stack). */
	unsigned long from = ((unsigned long)raw & ~4095UL) + 4096;
	if (prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON, from, ~0UL - from, &selector)) {
		perror("sud: prctl(PR_SET_SYSCALL_USER_DISPATCH)");
		return 1;
	}
	selector = BLOCK;
	long before = traps;
	pthread_t t;
	pthread_create(&t, NULL, thread, NULL);
	pthread_join(t, NULL);
	int thread_trapped = traps > before;
	pid_t c = fork();
	if (c == 0) {
		before = traps;
		raw(SYS_getppid);
		_exit(traps > before);
	}
	int st;
	waitpid(c, &st, 0);
	double t0 = now();
	for (int i = 0; i < n; i++)
		raw(SYS_getppid);
	double t1 = now();
	selector = ALLOW;
	double t2 = now();
	for (int i = 0; i < n; i++)
		raw(SYS_getppid);
	double t3 = now();
	printf("sud: trapped call %.0f ns, plain %.0f ns; a new thread %s, a forked child %s\n",
	       (t1 - t0) / n * 1e9, (t3 - t2) / n * 1e9, thread_trapped ? "trapped" : "not trapped",
	       WEXITSTATUS(st) ? "trapped" : "not trapped");
	return 0;
}
