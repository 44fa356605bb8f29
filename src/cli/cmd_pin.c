/*
 * cmd_pin -- tdax pin: an operator's explicit mapping for an unmodified
 * application (thesis section 7.2; docs/durability.md "Explicit
 * mappings"). The ranges of a file are upgraded and pinned -- logged for
 * every process under tdax that writes them, kept out of re-evaluation and
 * pressure, and upgraded past the reserve -- for as long as this command
 * runs: the pins are its pid, and they go with it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cmd_pin.h"
#include "cli/out.h"
#include "core/control.h"
#include "core/device.h"
#include "core/env.h"
#include "core/files.h"
#include "core/ranges.h"
#include "core/sys.h"
#include "core/util.h"
#include "policy/track.h"

static const char pin_help[] =
	"usage: tdax pin [--device PATH] [--range START:END] [--for SECONDS] FILE\n"
	"\n"
	"Keep FILE's ranges under bytes START..END (default: the file as it is now, at\n"
	"least one range) upgraded while this command runs: every process under tdax\n"
	"that writes them logs the writes and has its syncs of FILE answered from the\n"
	"device, whatever the policy decides (not under --policy never), and device\n"
	"pressure downgrades other ranges first. For a file an application is known to\n"
	"sync often. Runs until SIGINT or SIGTERM (or SECONDS); the pins go with it.\n"
	"START and END take k, M, G suffixes; END may be past the file's end (a log that\n"
	"grows). tdax status shows the pins. Needs write access to FILE.\n"
	"exit status: 0 unpinned on a signal or at the time, 1 error, 2 usage\n";

static volatile sig_atomic_t stop;

static void on_stop(int sig)
{
	(void)sig;
	stop = 1;
}

/* "START:END" into bytes; end 0: not given. */
static int parse_range(const char *s, uint64_t *start, uint64_t *end)
{
	const char *colon = strchr(s, ':');
	char a[64];
	if (!colon || (size_t)(colon - s) >= sizeof(a))
		return -1;
	memcpy(a, s, (size_t)(colon - s));
	a[colon - s] = '\0';
	if (tdax_parse_size(a, start) != 0 || tdax_parse_size(colon + 1, end) != 0 || *end <= *start)
		return -1;
	return 0;
}

/* Pin ranges first..last of (idx, gen) for this process; how many are
 * pinned and logged now (a range whose job runs is pinned at the next
 * look). -1 if the range table is full. */
static long pin(struct tdax_device *dev, uint32_t idx, uint32_t gen, uint64_t first, uint64_t last)
{
	long n = 0;
	for (uint64_t rno = first; rno <= last; rno++) {
		struct tdax_range *r = tdax_ranges_get(dev, idx, gen, (uint32_t)rno, true);
		if (!r)
			return -1;
		tdax_ranges_pin(r);
		n += tdax_track_pin(&r->t);
	}
	return n;
}

static void unpin(struct tdax_device *dev, uint32_t idx, uint32_t gen, uint64_t first, uint64_t last)
{
	for (uint64_t rno = first; rno <= last; rno++) {
		struct tdax_range *r = tdax_ranges_get(dev, idx, gen, (uint32_t)rno, false);
		if (r)
			tdax_ranges_unpin(r);
	}
}

int cmd_pin(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "device", required_argument, 0, 'd' }, { "range", required_argument, 0, 'r' },
		{ "for", required_argument, 0, 't' },    { "allow-shared", no_argument, 0, 'a' },
		{ "help", no_argument, 0, 'h' },         { 0, 0, 0, 0 },
	};
	const char *path = tdax_env_device();
	uint64_t start = 0, end = 0, seconds = 0;
	int c;
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'h': fputs(pin_help, stdout); return EXIT_OK;
		case 'd': path = optarg; break;
		case 'a': setenv("TDAX_ALLOW_SHARED", "1", 1); break;
		case 'r':
			if (parse_range(optarg, &start, &end) != 0)
				return usage_error("pin", "--range '%s' is not START:END with START < END", optarg);
			break;
		case 't':
			if (tdax_parse_size(optarg, &seconds) != 0 || seconds == 0)
				return usage_error("pin", "--for '%s' is not a number of seconds", optarg);
			break;
		default: return usage_error("pin", "%s", "unknown option");
		}
	}
	if (optind != argc - 1)
		return usage_error("pin", "%s", "one FILE to pin");
	const char *file = argv[optind];
	struct tdax_err e;
	char real[TDAX_FILE_PATH_MAX + 1];
	struct stat st;
	if (access(file, W_OK) != 0)
		return tdax_errf(&e, "cannot pin %s: %s; give a file you may write", file, strerror(errno)),
		       fail(&e);
	int fd = tdax_sys_open(file, O_RDONLY | O_CLOEXEC, 0);
	if (fd < 0 || tdax_sys_fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) ||
	    tdax_fd_path(fd, real, sizeof(real)) < 0) {
		tdax_errf(&e, "cannot pin %s: %s", file, fd < 0 ? strerror(errno) : "not a regular file");
		if (fd >= 0)
			tdax_sys_close(fd);
		return fail(&e);
	}
	struct tdax_device *dev;
	if (tdax_device_open(path, admin_flags(path), &dev, &e)) {
		tdax_sys_close(fd);
		return fail(&e);
	}
	uint32_t idx, gen;
	bool created;
	int rc = tdax_files_register(dev, fd, real, &idx, &gen, &created, &e);
	tdax_sys_close(fd); /* the pins need no descriptor: an open breaks the writers' leases */
	if (rc != 0) {
		tdax_device_close(dev);
		return fail(&e);
	}
	struct tdax_tunables t;
	tdax_control_get(dev, &t);
	uint32_t shift = tdax_ranges_gran(&tdax_file_at(dev, idx)->rt, &t) + 12;
	if (!end)
		end = (uint64_t)st.st_size > 0 ? (uint64_t)st.st_size : 1;
	uint64_t first = start >> shift, last = (end - 1) >> shift;
	long n = pin(dev, idx, gen, first, last);
	if (n < 0) {
		unpin(dev, idx, gen, first, last);
		tdax_device_close(dev);
		tdax_errf(&e, "cannot pin %s: the device's range table is full; pin a smaller --range, or "
			  "make the device with more --max-ranges", real);
		return fail(&e);
	}
	printf("tdax pin: %" PRIu64 " ranges of %s (bytes %" PRIu64 "..%" PRIu64 ") pinned, %ld upgraded; "
	       "SIGINT or SIGTERM lets them go\n", last - first + 1, real, first << shift,
	       ((last + 1) << shift) - 1, n);
	fflush(stdout);
	struct sigaction sa = { .sa_handler = on_stop };
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	uint64_t until = seconds ? tdax_now_ns() + seconds * 1000000000ull : UINT64_MAX;
	const struct timespec tick = { 0, 100000000 };
	rc = EXIT_OK;
	while (!stop && tdax_now_ns() < until) {
		nanosleep(&tick, NULL);
		/* A range whose job ran meanwhile, or whose pin another process
		 * held and let go, is pinned again; a file gone takes its pins. */
		if (tdax_file_at(dev, idx)->gen != gen) {
			tdax_errf(&e, "%s was removed or replaced: its pins went with it", real);
			rc = fail(&e);
			break;
		}
		pin(dev, idx, gen, first, last);
	}
	unpin(dev, idx, gen, first, last);
	tdax_device_close(dev);
	return rc;
}
