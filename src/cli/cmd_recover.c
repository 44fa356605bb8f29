/*
 * cmd_recover -- tdax recover: bring the files with records in a device up
 * to date (replay after a reboot, else sync), and report it as text or JSON.
 */
#include <limits.h>
#include <stdio.h>

#include "cli/args.h"
#include "cli/cmd_recover.h"
#include "cli/config.h"
#include "cli/out.h"
#include "core/device.h"
#include "core/recover.h"

static const char recover_help[] =
	"usage: tdax recover [--device PATH | --configured] [--power-failure] [--discard-unmatched]\n"
	"                    [--json]\n"
	"\n"
	"Bring every file with records in the device up to date, then release them.\n"
	"If the machine rebooted since the device was last used (or --power-failure is\n"
	"given, for a simulated power cut), records are replayed onto their files in\n"
	"sequence order; otherwise the page cache has the data and each file is only\n"
	"fdatasync'ed. Files are opened only if they are still the registered file, and\n"
	"only with the privileges of the user who wrote them. Safe to interrupt and re-run.\n"
	"  --discard-unmatched  release records of files that no longer exist or were\n"
	"                       replaced (otherwise they are kept and reported)\n"
	"  --configured         every region of the configuration file: [device] path and\n"
	"                       each boot_recover (tdax-recover.service, at boot); one report\n"
	"                       each, the worst exit status\n"
	"exit status: 0 all recovered, 1 error, 2 usage, 3 some files keep their records\n";

static void print_report_json(const char *path, const struct tdax_recover_report *r)
{
	printf("{\"device\": ");
	json_str(stdout, path);
	printf(", \"mode\": \"%s\", \"records\": %llu, \"applied\": %llu, \"bytes\": %llu, "
	       "\"corrupt\": %llu, \"torn\": %llu, \"segments_sealed\": %u, \"seconds\": %.6f, "
	       "\"files\": [", r->replay ? "replay" : "checkpoint", (unsigned long long)r->records,
	       (unsigned long long)r->applied, (unsigned long long)r->bytes,
	       (unsigned long long)r->corrupt, (unsigned long long)r->torn, r->sealed, r->seconds);
	for (uint32_t i = 0; i < r->nfiles; i++) {
		const struct tdax_recover_file *f = &r->files[i];
		printf("%s{\"path\": ", i ? ", " : "");
		json_str(stdout, f->path);
		printf(", \"records\": %llu, \"bytes\": %llu, \"outcome\": \"%s\", \"reason\": ",
		       (unsigned long long)f->records, (unsigned long long)f->bytes,
		       tdax_outcome_name(f->outcome));
		json_str(stdout, f->reason);
		printf("}");
	}
	printf("], \"damaged\": [");
	for (uint32_t i = 0; i < r->ndamage; i++) {
		const struct tdax_recover_damage *d = &r->damage[i];
		printf("%s{\"kind\": \"%s\", \"segment\": %u, \"position\": %llu", i ? ", " : "",
		       d->torn ? "torn" : "corrupt", d->seg, (unsigned long long)d->pos);
		if (d->readable)
			printf(", \"file\": %u, \"seq\": %llu, \"offset\": %llu, \"length\": %u",
			       d->file, (unsigned long long)d->seq, (unsigned long long)d->off, d->len);
		printf("}");
	}
	printf("]}\n");
}

static void print_report_text(const char *path, const struct tdax_recover_report *r)
{
	printf("tdax recover ");
	text_str(stdout, path, PATH_MAX);
	printf(": %s mode (%s)\n", r->replay ? "replay" : "checkpoint",
	       r->replay ? "page cache lost: records applied to files"
			 : "same boot: files synced, nothing replayed");
	printf("  %llu live records in %u files; %llu applied (%llu bytes); %u dead writers' "
	       "segments sealed; %.3f s\n", (unsigned long long)r->records, r->nfiles,
	       (unsigned long long)r->applied, (unsigned long long)r->bytes, r->sealed, r->seconds);
	for (uint32_t i = 0; i < r->nfiles; i++) {
		const struct tdax_recover_file *f = &r->files[i];
		printf("  %-13s ", tdax_outcome_name(f->outcome));
		text_str(stdout, f->path, sizeof(f->path));
		printf(": %llu records%s", (unsigned long long)f->records, f->reason[0] ? ": " : "");
		text_str(stdout, f->reason, sizeof(f->reason));
		printf("\n");
	}
	printf("  %llu corrupt records skipped, %llu torn tails (writes in flight)\n",
	       (unsigned long long)r->corrupt, (unsigned long long)r->torn);
	for (uint32_t i = 0; i < r->ndamage; i++) {
		const struct tdax_recover_damage *d = &r->damage[i];
		printf("  %s record at segment %u offset %llu", d->torn ? "torn" : "corrupt", d->seg,
		       (unsigned long long)d->pos);
		if (d->readable)
			printf(": file #%u seq %llu offset %llu length %u", d->file,
			       (unsigned long long)d->seq, (unsigned long long)d->off, d->len);
		printf("\n");
	}
}

/* Recover the region at path as a asks; the exit status. */
static int recover_one(const char *path, const struct dev_args *a)
{
	struct tdax_device *dev;
	struct tdax_err e;
	if (tdax_device_open(path, admin_flags(path), &dev, &e))
		return fail(&e);
	struct tdax_recover_opts o = { .power_failure = a->power_failure, .discard_unmatched = a->discard };
	struct tdax_recover_report r;
	int rc = tdax_recover(dev, &o, &r, &e);
	tdax_device_close(dev);
	if (rc < 0)
		return fail(&e);
	if (a->json)
		print_report_json(path, &r);
	else
		print_report_text(path, &r);
	tdax_recover_report_free(&r);
	return rc ? EXIT_INCOMPLETE : EXIT_OK;
}

int cmd_recover(int argc, char **argv)
{
	struct dev_args a = { 0 };
	int rc = parse_dev_args("recover", recover_help, argc, argv, "djpxc", &a);
	if (rc >= 0)
		return rc;
	if (!a.configured)
		return recover_one(a.path, &a);
	/* Every region, even after one failed: the others' files wait too.
	 * The worst status: failure, then records kept, then success. */
	if (!tdax_conf.nboot) {
		fprintf(stderr, "tdax recover: --configured, but %s names no region ([device] path, "
			"boot_recover); nothing to do\n", tdax_conf.read ? tdax_conf.path : "no configuration file");
		return EXIT_OK;
	}
	int worst = EXIT_OK;
	for (int i = 0; i < tdax_conf.nboot; i++) {
		rc = recover_one(tdax_conf.boot[i], &a);
		if (rc == EXIT_FAIL || (rc == EXIT_INCOMPLETE && worst == EXIT_OK))
			worst = rc;
	}
	return worst;
}
