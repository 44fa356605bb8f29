/*
 * zpoline -- prototype: rewriting a program's system-call sites so they call
 * into tdax (zpoline, USENIX ATC'23), with the sites found the way lazypoline
 * finds them: Syscall User Dispatch traps a site's first call, the SIGSYS
 * handler rewrites its two-byte `syscall` into `call *%rax` (also two bytes)
 * and makes the call; from then on the site jumps to the address that is the
 * system call's number, in a trampoline mapped at address 0 (a run of `nop`
 * down to a jump into the hook), and costs a function call. No disassembler:
 * the kernel names each site.
 *
 * Prints the cost of a call through a rewritten site (the hook makes the
 * call; the hook answers it itself), of a site's first call (SIGSYS and the
 * rewrite), and of the plain call; and which calls are seen: a new thread's
 * and a forked child's through a site already rewritten, and a new thread's
 * through a site nobody has called yet (not: the kernel clears the dispatch
 * at clone, so such a site is rewritten only once a trapped thread calls it).
 *
 * Needs page 0: CAP_SYS_RAWIO (root) or vm.mmap_min_addr=0. Not covered: a
 * site in the red zone's leaf function (the `call` pushes its return address
 * below the stack pointer, where such a function keeps data), code that
 * checks or generates itself, and the vector registers (the hook must save
 * what it uses; this one is compiled without them).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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
enum { NOPS = 512 }; /* above every system call number */

static volatile char selector = ALLOW;
static volatile long hooked, rewritten, answer_itself;
static long cached_ppid;

/* The "application": raw system calls in a page of their own, outside the
 * range Syscall User Dispatch allows (everything above it: libc, the
 * vDSO). Two functions, two sites. */
__attribute__((noinline, aligned(4096))) static long raw(long nr)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(nr) : "rcx", "r11", "memory");
	return r;
}

__attribute__((noinline)) static long raw_other(long nr)
{
	long r;
	__asm__ volatile("syscall" : "=a"(r) : "a"(nr) : "rcx", "r11", "memory");
	return r;
}

/* The hook: a rewritten site's call, its arguments as the kernel takes them. */
long zp_hook(long a1, long a2, long a3, long a4, long a5, long a6, long nr);
__attribute__((target("general-regs-only"))) long zp_hook(long a1, long a2, long a3, long a4, long a5,
							 long a6, long nr)
{
	hooked++;
	if (answer_itself && nr == SYS_getppid)
		return cached_ppid;
	/* (libc's syscall() lies in the allowed range: not trapped again) */
	long r = syscall(nr, a1, a2, a3, a4, a5, a6);
	return r < 0 ? -errno : r;
}

/* The trampoline jumps here with the return address (after the site) on
 * the stack; a system call keeps every register but rax, rcx and r11. */
void zp_entry(void);
__asm__(".text\n"
	".globl zp_entry\n"
	"zp_entry:\n"
	"	push %rbp\n"
	"	mov %rsp, %rbp\n"
	"	and $-16, %rsp\n"
	"	push %rdi\n"
	"	push %rsi\n"
	"	push %rdx\n"
	"	push %r10\n"
	"	push %r8\n"
	"	push %r9\n"
	"	mov %r10, %rcx\n"
	"	sub $8, %rsp\n"
	"	push %rax\n" /* the number: the seventh argument */
	"	call zp_hook\n"
	"	add $16, %rsp\n"
	"	pop %r9\n"
	"	pop %r8\n"
	"	pop %r10\n"
	"	pop %rdx\n"
	"	pop %rsi\n"
	"	pop %rdi\n"
	"	leave\n"
	"	ret\n");

/* Page 0: NOPS `nop`s, then movabs $zp_entry, %r11; jmp *%r11. */
static int map_trampoline(void)
{
	uint8_t *t = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
			  -1, 0);
	if (t != 0) {
		fprintf(stderr, "zpoline: cannot map page 0 (%s): it needs CAP_SYS_RAWIO or vm.mmap_min_addr=0\n",
			strerror(errno));
		return -1;
	}
	__asm__("" : "+r"(t)); /* (address 0 is memory here, whatever C thinks of it) */
	uintptr_t entry = (uintptr_t)zp_entry;
	memset(t, 0x90, NOPS);
	t[NOPS] = 0x49, t[NOPS + 1] = 0xbb; /* movabs imm64, %r11 */
	memcpy(t + NOPS + 2, &entry, 8);
	t[NOPS + 10] = 0x41, t[NOPS + 11] = 0xff, t[NOPS + 12] = 0xe3; /* jmp *%r11 */
	return mprotect(t, 4096, PROT_READ | PROT_EXEC);
}

/* A site's first call: rewrite it (syscall, 0f 05 -> call *%rax, ff d0) and
 * make this call as the kernel would have. */
static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
	(void)sig;
	greg_t *g = ((ucontext_t *)ctx)->uc_mcontext.gregs;
	uint8_t *site = (uint8_t *)g[REG_RIP] - 2;
	uintptr_t page = (uintptr_t)site & ~4095UL, len = (((uintptr_t)site + 1) & ~4095UL) + 4096 - page;
	selector = ALLOW;
	if (site[0] == 0x0f && site[1] == 0x05 &&
	    mprotect((void *)page, len, PROT_READ | PROT_WRITE | PROT_EXEC) == 0) {
		site[0] = 0xff, site[1] = 0xd0;
		mprotect((void *)page, len, PROT_READ | PROT_EXEC);
		rewritten++;
	}
	long r = syscall(si->si_syscall, g[REG_RDI], g[REG_RSI], g[REG_RDX], g[REG_R10], g[REG_R8], g[REG_R9]);
	g[REG_RAX] = r < 0 ? -errno : r;
	selector = BLOCK; /* the sigreturn is made from libc: inside the allowed range */
}

static void *thread(void *arg)
{
	return (void *)(intptr_t)(arg ? raw_other(SYS_getppid) : raw(SYS_getppid));
}

/* Did a call of raw() (other: raw_other()) by a new thread reach the hook? */
static int seen_in_thread(int other)
{
	long before = hooked + rewritten;
	pthread_t t;
	pthread_create(&t, NULL, thread, other ? (void *)1 : NULL);
	pthread_join(t, NULL);
	return hooked + rewritten > before;
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static double per_call_ns(int n)
{
	double t0 = now();
	for (int i = 0; i < n; i++)
		if (raw(SYS_getppid) != cached_ppid)
			abort();
	return (now() - t0) / n * 1e9;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 200000;
	cached_ppid = getppid();
	if (map_trampoline() != 0)
		return 2;
	double plain = per_call_ns(n);
	struct sigaction sa = { .sa_sigaction = on_sigsys, .sa_flags = SA_SIGINFO };
	sigaction(SIGSYS, &sa, NULL);
	/* Allowed: everything above the pages of raw() and raw_other(). */
	uintptr_t last = (uintptr_t)raw > (uintptr_t)raw_other ? (uintptr_t)raw : (uintptr_t)raw_other;
	unsigned long from = ((last + 64) & ~4095UL) + 4096;
	if (prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON, from, ~0UL - from, &selector)) {
		perror("zpoline: prctl(PR_SET_SYSCALL_USER_DISPATCH)");
		return 1;
	}
	selector = BLOCK;
	double t0 = now();
	if (raw(SYS_getppid) != cached_ppid || rewritten != 1)
		return fprintf(stderr, "zpoline: the first call did not rewrite its site\n"), 1;
	double first = (now() - t0) * 1e9;
	int thread_seen = seen_in_thread(0), other_seen = seen_in_thread(1);
	pid_t c = fork();
	if (c == 0) {
		long before = hooked;
		raw(SYS_getppid);
		_exit(hooked > before);
	}
	int st;
	waitpid(c, &st, 0);
	long h0 = hooked;
	double through = per_call_ns(n);
	answer_itself = 1;
	double itself = per_call_ns(n);
	if (hooked - h0 != 2L * n)
		return fprintf(stderr, "zpoline: %ld of %d calls reached the hook\n", hooked - h0, 2 * n), 1;
	printf("zpoline: rewritten site %.0f ns (the hook answers itself: %.0f ns), plain %.0f ns, a site's "
	       "first call %.1f us; a new thread %s, a forked child %s, a new thread's first call of a new "
	       "site %s\n",
	       through, itself, plain, first / 1e3, thread_seen ? "trapped" : "not trapped",
	       WIFEXITED(st) && WEXITSTATUS(st) ? "trapped" : "not trapped", other_seen ? "trapped" : "not trapped");
	return 0;
}
