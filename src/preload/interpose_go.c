/*
 * interpose_go -- a Go program's system calls, seen in its own process
 * (tdax run --intercept rewrite; docs/design.md, "Programs that skip
 * libc"). A dynamically linked Go program (cgo: Debian's etcd) loads
 * libtdax.so but never calls libc's write or fdatasync: its runtime makes
 * every call of package syscall -- and so of os, net and x/sys/unix --
 * through one function, Syscall6 (Go 1.19 and later), whose body is the
 * argument moves and a SYSCALL. At start, before the runtime runs, the
 * last move and the SYSCALL (five bytes) become a jump to a stub beside
 * the program's text, which jumps to tdax_gort_entry here: it moves to a
 * stack of the thread's own (a goroutine's is a few KiB, with no guard
 * page; the thread's stack is unmapped when it exits), hands the call to
 * syscall(2)'s hook (interpose_syscall.c, the same table a libc program's
 * raw calls take), and returns the kernel's way (-errno) to the
 * instruction after the SYSCALL.
 *
 * runtime.exit (exit_group, never libc's exit) is rewritten the same way
 * into a jump to tdax_gort_exit_entry: tdax's exit work (start.h) runs
 * before the process ends, as atexit runs it for a libc program.
 *
 * Only these two functions are rewritten, found by their exact bytes
 * (program.h: each once in the program's text, or neither is rewritten).
 * A Go library in a libc program (c-shared) is rewritten the same way when
 * its runtime starts its first thread (the pthread_create hook's look,
 * tdax_go_thread_made_by, below).
 * The runtime's other calls (futex, epoll, anonymous mmap, signals,
 * clone) have sites of their own and never name a file. A Go program in
 * which they are not found, or cannot be rewritten, goes blind
 * (interpose.h): every sync the kernel's.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "core/env.h"
#include "core/program.h"
#include "core/sys.h"
#include "core/util.h"
#include "preload/interpose.h"
#include "preload/start.h"
#include "preload/state.h"

#define STACK 262144    /* a thread's stack for the hooks, bytes (no guard page) */
#define EXIT_STACK 65536 /* the exit's (one thread gets to run it) */
#define STR_(x) #x
#define STR(x) STR_(x) /* for the stub's text */

/* This thread's stack (its top), mapped at its first call; where its
 * registers wait meanwhile. Read by the stub (initial-exec TLS). */
__attribute__((visibility("hidden"))) __thread uintptr_t tdax_gort_stack TDAX_TLS;
__attribute__((visibility("hidden"))) __thread uint64_t tdax_gort_spill[7] TDAX_TLS;
/* The instruction after the rewritten SYSCALL. */
__attribute__((visibility("hidden"))) uintptr_t tdax_gort_back;
/* A thread could not map a stack: its calls went to the kernel unseen. */
__attribute__((visibility("hidden"))) _Atomic uint8_t tdax_gort_unseen;
/* The first thread in runtime.exit runs the exit work on this stack. */
__attribute__((visibility("hidden"))) int tdax_gort_exiting;
__attribute__((visibility("hidden"), aligned(16))) uint8_t tdax_gort_exit_stack[EXIT_STACK];

/*
 * The stub's target. In: rax the call's number, rbx its first argument
 * (the rewritten MOVQ BX, DI is made here), rsi, rdx, r10, r8, r9 the
 * rest -- Syscall6's registers at its SYSCALL. Out: rax the result as the
 * kernel gives it, rdx as a SYSCALL leaves it, xmm15 zero (Go's ABI), the
 * rest of what Go keeps (rbx, rbp, r12-r15) kept by the C call.
 */
__asm__(".text\n"
	".p2align 4\n"
	".globl tdax_gort_entry\n"
	".hidden tdax_gort_entry\n"
	".type tdax_gort_entry, @function\n"
	"tdax_gort_entry:\n"
	"\tmov %rbx, %rdi\n"
	"\tmovq tdax_gort_stack@gottpoff(%rip), %r11\n"
	"\tmovq %fs:(%r11), %r11\n"
	"\ttest %r11, %r11\n"
	"\tjz 2f\n"
	"1:\tmov %rsp, -8(%r11)\n" /* Go's stack pointer, at the top of ours */
	"\tmov %rdx, -16(%r11)\n"
	"\tlea -32(%r11), %rsp\n"
	"\tmov %rax, (%rsp)\n" /* the number: the seventh argument */
	"\tmov %r10, %rcx\n"
	"\tcall tdax_gort_call\n"
	"\tmov 16(%rsp), %rdx\n"
	"\tmov 24(%rsp), %rsp\n"
	"\txorps %xmm15, %xmm15\n"
	"\tjmp *tdax_gort_back(%rip)\n"
	/* No stack yet: map one with a raw call (nothing of C's may run on
	 * a goroutine's stack), the registers kept in TLS meanwhile. */
	"2:\tmovq tdax_gort_spill@gottpoff(%rip), %r11\n"
	"\tmov %rax, %fs:0(%r11)\n"
	"\tmov %rdi, %fs:8(%r11)\n"
	"\tmov %rsi, %fs:16(%r11)\n"
	"\tmov %rdx, %fs:24(%r11)\n"
	"\tmov %r10, %fs:32(%r11)\n"
	"\tmov %r8, %fs:40(%r11)\n"
	"\tmov %r9, %fs:48(%r11)\n"
	"\tmov $9, %eax\n" /* mmap(NULL, STACK, RW, PRIVATE|ANONYMOUS|NORESERVE, -1, 0) */
	"\txor %edi, %edi\n"
	"\tmov $" STR(STACK) ", %esi\n"
	"\tmov $3, %edx\n"
	"\tmov $0x4022, %r10d\n"
	"\tmov $-1, %r8\n"
	"\txor %r9d, %r9d\n"
	"\tsyscall\n"
	"\tcmp $-4095, %rax\n"
	"\tjae 3f\n"
	"\tadd $" STR(STACK) ", %rax\n"
	"\tmovq tdax_gort_stack@gottpoff(%rip), %rcx\n"
	"\tmov %rax, %fs:(%rcx)\n"
	"\tmov %rax, %r11\n"
	"\tcall 4f\n"
	"\tjmp 1b\n"
	/* No memory for one: this call goes to the kernel unseen, and the
	 * process goes blind at the next call that reaches C. */
	"3:\tmovb $1, tdax_gort_unseen(%rip)\n"
	"\tcall 4f\n"
	"\tsyscall\n"
	"\tjmp *tdax_gort_back(%rip)\n"
	/* The registers back from TLS (a call: the return address goes to
	 * Go's stack for an instant, as any call of Syscall6 itself does). */
	"4:\tmovq tdax_gort_spill@gottpoff(%rip), %rcx\n"
	"\tmov %fs:0(%rcx), %rax\n"
	"\tmov %fs:8(%rcx), %rdi\n"
	"\tmov %fs:16(%rcx), %rsi\n"
	"\tmov %fs:24(%rcx), %rdx\n"
	"\tmov %fs:32(%rcx), %r10\n"
	"\tmov %fs:40(%rcx), %r8\n"
	"\tmov %fs:48(%rcx), %r9\n"
	"\tret\n"
	".size tdax_gort_entry, .-tdax_gort_entry\n"
	/* runtime.exit's: edi the status. A second thread that gets here
	 * waits for the first one's exit_group. */
	".p2align 4\n"
	".globl tdax_gort_exit_entry\n"
	".hidden tdax_gort_exit_entry\n"
	".type tdax_gort_exit_entry, @function\n"
	"tdax_gort_exit_entry:\n"
	"\tmov $1, %eax\n"
	"\txchg %eax, tdax_gort_exiting(%rip)\n"
	"\ttest %eax, %eax\n"
	"\tjnz 1f\n"
	"\tlea tdax_gort_exit_stack+" STR(EXIT_STACK) "(%rip), %rsp\n"
	"\tcall tdax_gort_exit\n"
	"1:\tmov $34, %eax\n" /* pause */
	"\tsyscall\n"
	"\tjmp 1b\n"
	".size tdax_gort_exit_entry, .-tdax_gort_exit_entry\n");

__attribute__((visibility("hidden"))) void tdax_gort_entry(void);
__attribute__((visibility("hidden"))) void tdax_gort_exit_entry(void);
__attribute__((visibility("hidden"), noreturn)) void tdax_gort_exit(int status);
__attribute__((visibility("hidden"))) long tdax_gort_call(long a, long b, long c, long d, long e, long f,
							   long nr);

/* A file's data, read or written: nothing in tdax's tables changes, so no
 * look at who calls (a vfork child's calls go to its pipe anyway). */
static bool data_call(long nr)
{
	return nr == SYS_read || nr == SYS_write || nr == SYS_pread64 || nr == SYS_pwrite64 ||
	       nr == SYS_readv || nr == SYS_writev || nr == SYS_preadv || nr == SYS_pwritev ||
	       nr == SYS_preadv2 || nr == SYS_pwritev2 || nr == SYS_fsync || nr == SYS_fdatasync;
}

/*
 * A thread's stack goes when the thread does (a pthread key's destructor):
 * a C thread that calls into a Go library once and exits -- a server's
 * thread a request -- would leave its 256 KiB (and a mapping) behind.
 */
static pthread_key_t stack_key;
static bool stack_key_made;
static __thread bool stack_kept TDAX_TLS;

static void stack_gone(void *top)
{
	tdax_gort_stack = 0; /* (a later call of this thread maps another) */
	tdax_sys_munmap((char *)top - STACK, STACK);
}

static void stack_key_make(void)
{
	stack_key_made = pthread_key_create(&stack_key, stack_gone) == 0;
}

static void stack_keep(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;
	stack_kept = true;
	pthread_once(&once, stack_key_make);
	if (stack_key_made)
		pthread_setspecific(stack_key, (void *)tdax_gort_stack);
}

long tdax_gort_call(long a, long b, long c, long d, long e, long f, long nr)
{
	if (!stack_kept)
		stack_keep();
	if (atomic_load_explicit(&tdax_gort_unseen, memory_order_relaxed))
		tdax_go_blind();
	/* Go's os/exec runs the child of its vfork (a raw clone) on this
	 * thread's memory until it execs: its dup3, fcntl and execve are the
	 * kernel's alone, or they would change the parent's tables. */
	long r = !data_call(nr) && (uint32_t)tdax_syscall(SYS_getpid) != tdax_pid()
			 ? tdax_syscall(nr, a, b, c, d, e, f)
			 : syscall(nr, a, b, c, d, e, f);
	return r == -1 ? -errno : r;
}

void tdax_gort_exit(int status)
{
	tdax_at_exit();
	for (;;)
		tdax_syscall(SYS_exit_group, status);
}

/* A Go runtime's sites (the main program's, or a Go library's), and where
 * its object's text is. */
struct program {
	uintptr_t site[TDAX_GO_SITES]; /* the bytes to rewrite, or 0 */
	int sites[TDAX_GO_SITES];      /* how many matches */
	uintptr_t lo;                  /* its lowest address */
};

/* Where the object info is loaded, into p->lo. */
static void lowest(const struct dl_phdr_info *info, struct program *p)
{
	p->lo = UINTPTR_MAX;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t at = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && at < p->lo)
			p->lo = at;
	}
}

/* The sites in the executable segments of the object info. */
static void scan(const struct dl_phdr_info *info, struct program *p)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
			continue;
		uintptr_t at = info->dlpi_addr + ph->p_vaddr;
		for (int w = 0; w < TDAX_GO_SITES; w++) {
			int n = 0;
			long off = tdax_program_go_site((const void *)at, ph->p_filesz, w, &n);
			p->sites[w] += n;
			if (off >= 0)
				p->site[w] = at + (uintptr_t)off;
		}
	}
}

static int look(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	lowest(info, data);
	scan(info, data);
	return 1; /* the first object is the program */
}

/* The one runtime rewritten (tdax_gort_back is its): the program's, or a
 * Go library's; 0 while none is. */
static _Atomic uintptr_t rewritten_lo;

/* A page for the stubs within a jump's reach of the sites, below the
 * program (what lies above it is the heap's to grow into). */
static uint8_t *stub_page(uintptr_t lo, uintptr_t far, long page)
{
	for (uintptr_t at = (lo & ~(uintptr_t)(page - 1)) - (uintptr_t)page;
	     at >= 0x10000 && at < lo && far - at < (1u << 30); at -= 1u << 20) {
		void *m = tdax_sys_mmap((void *)at, (size_t)page, PROT_READ | PROT_WRITE,
					MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
		if (m == (void *)at)
			return m;
		if (m != MAP_FAILED)
			tdax_sys_munmap(m, (size_t)page);
	}
	return NULL;
}

/* The len bytes at site made a jump to stub, padded with NOPs: 0, or -1. */
static int jump(uintptr_t site, size_t len, const uint8_t *stub, long page)
{
	uintptr_t first = site & ~(uintptr_t)(page - 1);
	size_t span = (size_t)(site + len - first);
	if (tdax_syscall(SYS_mprotect, first, span, PROT_READ | PROT_WRITE | PROT_EXEC) != 0)
		return -1;
	uint8_t code[16] = { 0xe9 };
	int32_t rel = (int32_t)((intptr_t)stub - (intptr_t)(site + 5));
	memcpy(code + 1, &rel, 4);
	memset(code + 5, 0x90, len - 5);
	memcpy((void *)site, code, len);
	tdax_syscall(SYS_mprotect, first, span, PROT_READ | PROT_EXEC);
	return 0;
}

/* Rewrite both sites: NULL, or why not. */
static const char *rewrite(const struct program *p)
{
	for (int w = 0; w < TDAX_GO_SITES; w++)
		if (p->sites[w] != 1)
			return p->sites[w] ? "a function of its runtime is there twice"
					   : "its runtime is not one of the forms tdax knows (Go 1.19 or later)";
	uintptr_t far = p->site[TDAX_GO_SYSCALL6] > p->site[TDAX_GO_EXIT] ? p->site[TDAX_GO_SYSCALL6]
										: p->site[TDAX_GO_EXIT];
	long page = sysconf(_SC_PAGESIZE);
	uint8_t *stubs = stub_page(p->lo, far, page);
	if (!stubs)
		return "no room for a stub within 1 GiB below its text";
	/* Each: movabs $target, %r11; jmp *%r11 (r11 is a SYSCALL's to clobber). */
	const uintptr_t target[TDAX_GO_SITES] = { [TDAX_GO_SYSCALL6] = (uintptr_t)tdax_gort_entry,
						  [TDAX_GO_EXIT] = (uintptr_t)tdax_gort_exit_entry };
	for (int w = 0; w < TDAX_GO_SITES; w++) {
		uint8_t *stub = stubs + 16 * w;
		stub[0] = 0x49, stub[1] = 0xbb;
		memcpy(stub + 2, &target[w], 8);
		stub[10] = 0x41, stub[11] = 0xff, stub[12] = 0xe3;
	}
	if (tdax_syscall(SYS_mprotect, stubs, page, PROT_READ | PROT_EXEC) != 0)
		return "the stubs' page cannot be made executable";
	tdax_gort_back = p->site[TDAX_GO_SYSCALL6] + tdax_program_go_site_len(TDAX_GO_SYSCALL6);
	for (int w = 0; w < TDAX_GO_SITES; w++)
		if (jump(p->site[w], tdax_program_go_site_len(w), stubs + 16 * w, page) != 0)
			return "its text cannot be made writable";
	return NULL;
}

/* Before main and before Go's runtime starts a thread. A program that is
 * not Go (a libc one a Go program started) has nothing to rewrite: the
 * hooks see it. */
__attribute__((constructor)) static void gort_start(void)
{
	const char *how = getenv("TDAX_INTERCEPT");
	if (!how || strcmp(how, "rewrite"))
		return;
	char self[PATH_MAX];
	if (tdax_program_kind("/proc/self/exe", false, self, sizeof(self)) != TDAX_PROGRAM_GO)
		return;
	struct program p = { 0 };
	dl_iterate_phdr(look, &p);
	(void)tdax_pid(); /* learnt here, where no vfork child can be the one to learn it */
	const char *why = rewrite(&p);
	if (!why) {
		atomic_store(&rewritten_lo, p.lo);
		return;
	}
	tdax_go_blind();
	if (!tdax_env_on("TDAX_QUIET"))
		tdax_warn("this Go program's calls cannot be seen (%s): every sync goes to the kernel%s", why, "");
}

/* ---- a Go library in a libc program ------------------------------------ */

/*
 * A Go library (-buildmode=c-shared) in a program the libc hooks serve,
 * linked at build time or opened by dlopen: its runtime makes its calls as
 * a Go program's does, and a write of it to a descriptor tdax manages
 * would be lost at a power cut after the program's lightweight sync. Its
 * runtime starts its first thread through the program's pthread_create
 * (cgo's C part, from the library's initializer), before any of its Go
 * code runs: there its Syscall6 and runtime.exit are rewritten as a Go
 * program's are (one runtime a process: tdax_gort_back), unless
 * --intercept libc says the hooks alone; a library that is not rewritten
 * makes the process blind (interpose.h). A Go main program's own threads
 * are not a library's: tdax run rewrote it, or supervises it.
 */
struct golib {
	uintptr_t caller;
	const char *name;   /* the library holding caller, if it has a Go runtime */
	struct program rt;  /* its sites, if it is not the one rewritten already */
};

static int golib_look(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	struct golib *g = data;
	bool holds = false, go = false;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t at = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_LOAD && g->caller - at < ph->p_memsz)
			holds = true;
		else if (ph->p_type == PT_NOTE && tdax_program_go_notes((const void *)at, ph->p_filesz))
			go = true;
	}
	if (!holds)
		return 0;
	if (!go || !info->dlpi_name[0]) /* ("": the main program) */
		return 1;
	lowest(info, &g->rt);
	if (g->rt.lo == atomic_load(&rewritten_lo))
		return 1; /* (its runtime's next thread) */
	g->name = info->dlpi_name;
	scan(info, &g->rt);
	return 1;
}

/* Why the Go library g cannot be seen, or NULL once it is rewritten. */
static const char *golib_rewrite(struct golib *g)
{
	const char *how = getenv("TDAX_INTERCEPT");
	if (how && !strcmp(how, "libc"))
		return "--intercept libc";
	uintptr_t none = 0;
	if (!atomic_compare_exchange_strong(&rewritten_lo, &none, g->rt.lo))
		return "another Go runtime in this process is rewritten already";
	(void)tdax_pid(); /* (learnt before any vfork child of the library's) */
	const char *why = rewrite(&g->rt);
	if (why)
		atomic_store(&rewritten_lo, UINTPTR_MAX); /* (tdax_gort_back may be half set: no other) */
	return why;
}

void tdax_go_thread_made_by(uintptr_t caller)
{
	if (tdax_rt.blind)
		return;
	struct golib g = { .caller = caller };
	dl_iterate_phdr(golib_look, &g);
	const char *why = g.name ? golib_rewrite(&g) : NULL;
	if (why) {
		tdax_go_blind();
		if (!tdax_env_on("TDAX_QUIET"))
			tdax_warn("a Go library (%s) makes its calls unseen (%s): every sync of this "
				  "process goes to the kernel", g.name, why);
	}
}
