/*
 * config -- the configuration file (config.h): its settings, their
 * checks, their environment variables, and `tdax config check|show`.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <ini.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/config.h"
#include "cli/out.h"
#include "core/control.h"
#include "core/env.h"

struct tdax_config tdax_conf;

enum kind {
	K_PATH,   /* an absolute path */
	K_BOOL,   /* yes/no, true/false, on/off, 1/0 -> "1" or "0" */
	K_CHOICE, /* one of `choices` (space-separated) */
	K_NUM,    /* a whole number in lo..hi */
	K_SIZE,   /* a size (4096, 32M, 1GiB) in lo..hi */
	K_GLOB,   /* an absolute fnmatch(3) pattern; repeatable, joined with ':' */
};

/* What the file may say. A setting without an environment variable is
 * handled by name below ([run] warnings, [device] boot_recover,
 * every key of [tunables]). */
static const struct setting {
	const char *section, *key, *env;
	enum kind kind;
	const char *choices;
	int wb; /* [writeback]: the index of its variable and range in tdax_wb_vars (core/env.h); else -1 */
} settings[] = {
	{ "device", "path", "TDAX_DEVICE", K_PATH, NULL, -1 },
	{ "device", "allow_shared", "TDAX_ALLOW_SHARED", K_BOOL, NULL, -1 },
	{ "device", "boot_recover", NULL, K_PATH, NULL, -1 },
	{ "run", "mode", "TDAX_MODE", K_CHOICE, "coherent bypass", -1 },
	{ "run", "policy", "TDAX_POLICY", K_CHOICE, "adaptive thesis always never", -1 },
	{ "run", "intercept", "TDAX_INTERCEPT", K_CHOICE, "auto libc rewrite syscall", -1 },
	{ "run", "warnings", NULL, K_CHOICE, "quiet normal verbose", -1 },
	{ "writeback", "interval_ms", NULL, K_NUM, NULL, TDAX_WB_INTERVAL_MS },
	{ "writeback", "age_ms", NULL, K_NUM, NULL, TDAX_WB_AGE_MS },
	{ "writeback", "bytes", NULL, K_SIZE, NULL, TDAX_WB_BYTES },
	{ "writeback", "high_pct", NULL, K_NUM, NULL, TDAX_WB_HIGH_PCT },
	{ "paths", "include", "TDAX_INCLUDE", K_GLOB, NULL, -1 },
	{ "paths", "exclude", "TDAX_EXCLUDE", K_GLOB, NULL, -1 },
};
#define NSETTINGS (sizeof(settings) / sizeof(settings[0]))

/* The parse in progress: the first error wins (ini_parse gives its line). */
struct parse {
	struct tdax_config *c;
	char error[512];
	bool seen[NSETTINGS];
};

/* Note what is wrong with value (the first error only); 0 stops the line. */
static int __attribute__((format(printf, 3, 4))) bad(struct parse *p, const char *value, const char *fmt, ...)
{
	if (!p->error[0]) {
		char what[384];
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(what, sizeof(what), fmt, ap);
		va_end(ap);
		snprintf(p->error, sizeof(p->error), "%s ('%.100s')", what, value);
	}
	return 0;
}

static bool is_choice(const char *choices, const char *v)
{
	size_t n = strlen(v);
	for (const char *c = choices; *c;) {
		size_t len = strcspn(c, " ");
		if (len == n && strncmp(c, v, n) == 0)
			return true;
		c += len + (c[len] == ' ');
	}
	return false;
}

static int as_bool(const char *v)
{
	static const char *yes[] = { "yes", "true", "on", "1" }, *no[] = { "no", "false", "off", "0" };
	for (int i = 0; i < 4; i++) {
		if (strcasecmp(v, yes[i]) == 0)
			return 1;
		if (strcasecmp(v, no[i]) == 0)
			return 0;
	}
	return -1;
}

/* The environment variable a setting gives, if any. */
static const char *env_of(const struct setting *s)
{
	return s->wb >= 0 ? tdax_wb_vars[s->wb].name : s->env;
}

static int check_number(const struct setting *s, const char *v)
{
	const struct tdax_env_number *range = &tdax_wb_vars[s->wb];
	uint64_t n;
	char *end;
	errno = 0;
	if (s->kind == K_SIZE) {
		if (tdax_parse_size(v, &n) != 0)
			return -1;
	} else {
		n = strtoull(v, &end, 10);
		if (errno || end == v || *end || v[0] == '-')
			return -1;
	}
	return n >= range->lo && n <= range->hi ? 0 : -1;
}

/* The environment entry of name, made if new. */
static char *env_slot(struct tdax_config *c, const char *name)
{
	for (int i = 0; i < c->nenv; i++)
		if (strcmp(c->env[i].name, name) == 0)
			return c->env[i].value;
	c->env[c->nenv].name = name;
	c->env[c->nenv].value[0] = '\0';
	return c->env[c->nenv++].value;
}

static int tunable(struct parse *p, const char *key, const char *value)
{
	struct tdax_config *c = p->c;
	for (int i = 0; i < c->ntunables; i++)
		if (strncmp(c->tunables[i], key, strlen(key)) == 0 && c->tunables[i][strlen(key)] == '=')
			return bad(p, value, "[tunables] %s is given twice", key);
	if (c->ntunables == TDAX_CONFIG_MAX_TUNABLES)
		return bad(p, value, "[tunables] %s: too many tunables", key);
	char *kv = c->tunables[c->ntunables];
	snprintf(kv, sizeof(c->tunables[0]), "%s=%s", key, value);
	c->tunable_kv[c->ntunables] = kv;
	struct tdax_tunables t = TDAX_DEFAULT_TUNABLES;
	struct tdax_err e;
	/* The key and the number alone here; the set is checked at the end. */
	if (tdax_control_parse(&t, &kv, 1, &e) != 0 && !strstr(e.msg, "refused"))
		return bad(p, value, "[tunables] %s: %s", key, e.msg);
	c->ntunables++;
	return 1;
}

static int handler(void *user, const char *section, const char *key, const char *value)
{
	struct parse *p = user;
	struct tdax_config *c = p->c;
	if (strcmp(section, "tunables") == 0)
		return tunable(p, key, value);
	size_t i = 0;
	while (i < NSETTINGS && (strcmp(settings[i].section, section) || strcmp(settings[i].key, key)))
		i++;
	if (i == NSETTINGS) {
		if (!*section)
			return bad(p, value, "'%s' is outside any [section]", key);
		return bad(p, value, "unknown setting [%s] %s (see tdax config --help)", section, key);
	}
	const struct setting *s = &settings[i];
	bool repeatable = s->kind == K_GLOB || strcmp(s->key, "boot_recover") == 0;
	if (p->seen[i] && !repeatable)
		return bad(p, value, "[%s] %s is given twice", section, key);
	p->seen[i] = true;
	switch (s->kind) {
	case K_PATH:
		if (value[0] != '/')
			return bad(p, value, "[%s] %s: not an absolute path", section, key);
		break;
	case K_GLOB:
		if (value[0] != '/' || strchr(value, ':'))
			return bad(p, value, "[%s] %s: a pattern is an absolute path (no ':')", section, key);
		break;
	case K_BOOL:
		if (as_bool(value) < 0)
			return bad(p, value, "[%s] %s: not yes or no", section, key);
		break;
	case K_CHOICE:
		if (!is_choice(s->choices, value))
			return bad(p, value, "[%s] %s: not one of: %s", section, key, s->choices);
		break;
	case K_NUM:
	case K_SIZE:
		if (check_number(s, value) != 0)
			return bad(p, value, "[%s] %s: not %s in %llu..%llu", section, key,
				   s->kind == K_SIZE ? "a size" : "a whole number",
				   (unsigned long long)tdax_wb_vars[s->wb].lo,
				   (unsigned long long)tdax_wb_vars[s->wb].hi);
		break;
	}
	if (strcmp(key, "boot_recover") == 0) {
		if (c->nboot == TDAX_CONFIG_MAX_BOOT - 1) /* room for [device] path */
			return bad(p, value, "[device] %s: more than %d regions", key, TDAX_CONFIG_MAX_BOOT - 1);
		snprintf(c->boot[c->nboot++], sizeof(c->boot[0]), "%s", value);
	} else if (strcmp(key, "warnings") == 0) {
		if (strcmp(value, "normal") != 0)
			snprintf(env_slot(c, strcmp(value, "quiet") == 0 ? "TDAX_QUIET" : "TDAX_VERBOSE"),
				 sizeof(c->env[0].value), "1");
	} else if (s->kind == K_BOOL) {
		snprintf(env_slot(c, env_of(s)), sizeof(c->env[0].value), "%d", as_bool(value));
	} else if (s->kind == K_GLOB) {
		char *v = env_slot(c, env_of(s));
		size_t len = strlen(v);
		if (len + strlen(value) + 2 > sizeof(c->env[0].value))
			return bad(p, value, "[%s] %s: the patterns are too long together", section, key);
		snprintf(v + len, sizeof(c->env[0].value) - len, "%s%s", len ? ":" : "", value);
	} else if (env_of(s)) {
		snprintf(env_slot(c, env_of(s)), sizeof(c->env[0].value), "%s", value);
	}
	return 1;
}

int tdax_config_load(const char *file, struct tdax_config *c, struct tdax_err *err)
{
	memset(c, 0, sizeof(*c));
	const char *env = secure_getenv("TDAX_CONFIG");
	bool named = file || env;
	if (!file)
		file = env ? env : TDAX_CONFIG_DEFAULT;
	if (!*file)
		return 0; /* TDAX_CONFIG="": no file */
	snprintf(c->path, sizeof(c->path), "%s", file);
	if (!named && access(file, F_OK) != 0 && errno == ENOENT)
		return 0;
	struct parse p = { .c = c };
	/* Debian's libinih takes its options at run time: stop at the first
	 * error (so that its line is the one the message describes), and take
	 * lines as long as a path. */
	ini_stop_on_first_error = true;
	ini_use_stack = false;
	ini_allow_realloc = true;
	ini_max_line = 8192;
	int line = ini_parse(file, handler, &p);
	if (line < 0)
		return tdax_errf(err, "%s: cannot read the configuration file: %s%s", file,
				 line == -1 ? strerror(errno) : "out of memory",
				 named ? " (TDAX_CONFIG names it; unset it or point it at a file)" : "");
	if (line > 0)
		return tdax_errf(err, "%s:%d: %s; fix the line (tdax config check %s)", file, line,
				 p.error[0] ? p.error : "not 'KEY = VALUE', '[section]' or a comment", file);
	/* The tunables as a set (downgrade <= upgrade, ...). */
	struct tdax_tunables t = TDAX_DEFAULT_TUNABLES;
	struct tdax_err why;
	if (c->ntunables && tdax_control_parse(&t, c->tunable_kv, c->ntunables, &why) != 0)
		return tdax_errf(err, "%s: [tunables]: %s", file, why.msg);
	/* [device] path is recovered at boot, before the others. */
	for (int i = 0; i < c->nenv; i++) {
		if (strcmp(c->env[i].name, "TDAX_DEVICE") != 0)
			continue;
		memmove(c->boot[1], c->boot[0], (size_t)c->nboot * sizeof(c->boot[0]));
		snprintf(c->boot[0], sizeof(c->boot[0]), "%s", c->env[i].value);
		c->nboot++;
	}
	c->read = true;
	return 0;
}

void tdax_config_export(const struct tdax_config *c)
{
	bool talk = getenv("TDAX_QUIET") || getenv("TDAX_VERBOSE");
	for (int i = 0; i < c->nenv; i++) {
		bool warnings = strcmp(c->env[i].name, "TDAX_QUIET") == 0 ||
				strcmp(c->env[i].name, "TDAX_VERBOSE") == 0;
		if (!(warnings && talk))
			setenv(c->env[i].name, c->env[i].value, 0);
	}
}

void tdax_config_print(FILE *f, const struct tdax_config *c)
{
	for (int i = 0; i < c->nenv; i++) {
		fprintf(f, "  %s=", c->env[i].name);
		text_str(f, c->env[i].value, sizeof(c->env[i].value));
		const char *now = getenv(c->env[i].name);
		if (now && strcmp(now, c->env[i].value) != 0)
			fputs("   (the environment's value wins)", f);
		fputc('\n', f);
	}
	for (int i = 0; i < c->ntunables; i++)
		fprintf(f, "  tunable %s   (set on the device by tdax run)\n", c->tunables[i]);
	for (int i = 0; i < c->nboot; i++) {
		fputs("  recovered at boot: ", f);
		text_str(f, c->boot[i], sizeof(c->boot[i]));
		fputc('\n', f);
	}
}

static const char config_help[] =
	"usage: tdax config check [FILE]\n"
	"       tdax config show\n"
	"\n"
	"check: read FILE (default $TDAX_CONFIG, else " TDAX_CONFIG_DEFAULT ") and say\n"
	"       what it sets, or the line that is wrong (exit 1).\n"
	"show:  what the configuration file gives the other commands.\n"
	"\n"
	"The file (INI; comments start with # or ; at the beginning of a line):\n"
	"  [device]    path = REGION          the device when no --device or TDAX_DEVICE\n"
	"              allow_shared = no      TDAX_ALLOW_SHARED\n"
	"              boot_recover = REGION  also recovered by tdax recover --configured\n"
	"                                     (repeatable; path is always recovered)\n"
	"  [run]       mode = coherent        coherent | bypass (tdax run --mode)\n"
	"              policy = adaptive      adaptive | thesis | always | never\n"
	"              intercept = auto       auto | libc | rewrite | syscall (tdax run --intercept)\n"
	"              warnings = normal      quiet | normal | verbose\n"
	"  [writeback] interval_ms = 10  age_ms = 1000  bytes = 32M  high_pct = 90\n"
	"  [tunables]  the policy's, as tdax get names them; set on the device by tdax run\n"
	"  [paths]     include = /var/lib/redis/*   exclude = /var/lib/redis/tmp-*\n"
	"              (repeatable; fnmatch patterns where * also matches '/': a file is\n"
	"              managed if no include is given or one matches, and no exclude does)\n"
	"Precedence: command line > environment > file > built-in default.\n";

int cmd_config(int argc, char **argv)
{
	if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
		fputs(config_help, argc < 2 ? stderr : stdout);
		return argc < 2 ? EXIT_USAGE : EXIT_OK;
	}
	bool check = strcmp(argv[1], "check") == 0;
	if ((!check && strcmp(argv[1], "show") != 0) || argc > (check ? 3 : 2))
		return usage_error("config", "%s", "expected 'check [FILE]' or 'show'");
	struct tdax_config c;
	struct tdax_err e;
	if (tdax_config_load(check && argc == 3 ? argv[2] : NULL, &c, &e) != 0)
		return fail(&e);
	if (!c.path[0] || !c.read) {
		printf("no configuration file (%s)\n",
		       c.path[0] ? "absent: " TDAX_CONFIG_DEFAULT : "TDAX_CONFIG is empty");
		return EXIT_OK;
	}
	text_str(stdout, c.path, sizeof(c.path));
	printf(check ? ": ok\n" : ":\n");
	tdax_config_print(stdout, &c);
	return EXIT_OK;
}
