/*
 * cmd_autologger.c - `heaptrail autologger`, heap tracing from boot (the
 * AutoLogger of seed 000): a systemd unit that starts the IFEO session
 * "autologger" before ordinary services, with the loader hook installed and
 * a size limit (docs/sessions.md); nothing here asks systemd to start it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/builtin.h"
#include "cli/common.h"
#include "cli/opt.h"
#include "heaptrail/control.h"

static const char usage_text[] =
    "usage: heaptrail autologger enable [-o FILE] [--max-size SIZE] [--stacks LIST]\n"
    "                                   [--buffer-size SIZE] [--buffers N]\n"
    "   or: heaptrail autologger disable\n"
    "   or: heaptrail autologger status\n"
    "   or: heaptrail autologger unit [options of enable]\n"
    "\n"
    "Trace from boot: 'enable' installs a systemd unit that starts the session\n"
    "'autologger' early in boot (before ordinary services) with the IFEO loader\n"
    "hook, so programs enabled with 'heaptrail ifeo enable' are traced from\n"
    "their first allocation. 'heaptrail stop autologger' writes the trace; so\n"
    "does shutdown. The previous boot's trace is kept as FILE.prev. 'unit'\n"
    "prints the unit without installing it. Needs root.\n"
    "\n"
    "  -o FILE             the trace (default /var/log/heaptrail/boot.htr)\n"
    "  --max-size SIZE     the session ends once the trace is this big (default 1G)\n"
    "  --stacks LIST       as for 'heaptrail start'\n"
    "  --buffer-size SIZE  bytes per thread buffer\n"
    "  --buffers N         number of thread buffers\n"
    "  -h, --help          show this help\n"
    "\n"
    "examples:\n"
    "  heaptrail autologger unit -o /var/log/heaptrail/boot.htr --max-size 2G\n"
    "  heaptrail autologger enable && heaptrail ifeo enable myserver\n"
    "  heaptrail autologger status\n";

#define UNIT_NAME "heaptrail-autologger.service"
#define SESSION "autologger"

struct opts {
	const char *file, *max_size, *stacks, *buffer_size, *buffers;
};

/* Checks the values the way 'heaptrail start' will at boot, so a typo fails now. */
static void parse_opts(int argc, char **argv, struct opts *o)
{
	o->file = "/var/log/heaptrail/boot.htr";
	o->max_size = "1G";
	enum { A_MAXSIZE = CLI_LONG, A_STACKS, A_BUFSIZE, A_BUFFERS };
	static const struct cli_opt opts[] = {
	    {"output", 'o', required_argument},
	    {"max-size", A_MAXSIZE, required_argument},
	    {"stacks", A_STACKS, required_argument},
	    {"buffer-size", A_BUFSIZE, required_argument},
	    {"buffers", A_BUFFERS, required_argument},
	    {NULL, 0, 0},
	};
	struct cli_parser p;
	cli_init(&p, "autologger", usage_text, opts, argc, argv, false);
	for (int c; (c = cli_next(&p)) != -1;) {
		const char **slot = c == 'o'	     ? &o->file
				    : c == A_MAXSIZE ? &o->max_size
				    : c == A_STACKS  ? &o->stacks
				    : c == A_BUFSIZE ? &o->buffer_size
						     : &o->buffers;
		*slot = p.val;
	}
	char **rest;
	cli_operands(&p, 0, 0, "", &rest);
	if (o->file[0] != '/')
		die("the boot trace needs an absolute path, not '%s'", o->file);
	if (strpbrk(o->file, " \t\n\"'\\%$"))
		die("the path '%s' has characters a unit file would need quoted; pick a plainer "
		    "one",
		    o->file);
	uint64_t v;
	if (parse_size(o->max_size, &v) < 0 || !v)
		die("invalid size '%s': like 512M or 2G", o->max_size);
	if (o->stacks) {
		enum ht_event_type ev[16];
		parse_stack_events(o->stacks, ev);
	}
	if (o->buffer_size &&
	    (parse_size(o->buffer_size, &v) < 0 || v < 4096 || v > (1u << 30) || (v & (v - 1))))
		die("invalid buffer size '%s': a power of two from 4K to 1G", o->buffer_size);
	if (o->buffers &&
	    (strtoul(o->buffers, NULL, 10) < 1 || strtoul(o->buffers, NULL, 10) > 65536 ||
	     strspn(o->buffers, "0123456789") != strlen(o->buffers)))
		die("invalid buffer count '%s': 1 to 65536", o->buffers);
}

static void self_path(char *out, size_t n)
{
	ssize_t len = readlink("/proc/self/exe", out, n - 1);
	if (len <= 0)
		die("cannot find the heaptrail binary: %s", strerror(errno));
	out[len] = 0;
}

/*
 * The unit. DefaultDependencies=no and Before=sysinit.target put it ahead
 * of every ordinary service (those are ordered after basic.target, which
 * follows sysinit.target); it needs the file systems for the trace.
 */
static char *unit_text(const struct opts *o)
{
	char exe[PATH_MAX];
	self_path(exe, sizeof(exe));
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", o->file);
	*strrchr(dir, '/') = 0;
	const char *mv = access("/usr/bin/mv", X_OK) == 0 ? "/usr/bin/mv" : "/bin/mv";
	char *text = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);
	if (!m)
		die("out of memory");
	fprintf(m,
		"# heaptrail AutoLogger: heap tracing from boot of the programs enabled with\n"
		"# 'heaptrail ifeo enable'. Written by 'heaptrail autologger enable'.\n"
		"[Unit]\n"
		"Description=heaptrail AutoLogger (heap tracing from boot)\n"
		"DefaultDependencies=no\n"
		"After=local-fs.target\n"
		"Before=sysinit.target shutdown.target\n"
		"Conflicts=shutdown.target\n"
		"RequiresMountsFor=%s\n"
		"\n"
		"[Service]\n"
		"Type=forking\n"
		"ExecStartPre=-%s -f %s %s.prev\n"
		"ExecStart=%s start " SESSION " --ifeo --force -q -o %s --max-size %s",
		dir, mv, o->file, o->file, exe, o->file, o->max_size);
	if (o->stacks)
		fprintf(m, " --stacks %s", o->stacks);
	if (o->buffer_size)
		fprintf(m, " --buffer-size %s", o->buffer_size);
	if (o->buffers)
		fprintf(m, " --buffers %s", o->buffers);
	fprintf(m,
		"\n"
		"ExecStop=%s stop -q " SESSION "\n"
		"TimeoutStopSec=600\n"
		"\n"
		"[Install]\n"
		"WantedBy=sysinit.target\n",
		exe);
	fclose(m);
	return text;
}

static void need_root(void)
{
	if (!getenv("HEAPTRAIL_ROOT") && geteuid() != 0)
		die("the AutoLogger needs root: it installs a system unit and the IFEO loader "
		    "hook");
}

static void mkdirs(const char *path, mode_t mode)
{
	char buf[PATH_MAX];
	snprintf(buf, sizeof(buf), "%s", path);
	for (char *p = buf + 1; *p; p++)
		if (*p == '/') {
			*p = 0;
			if (mkdir(buf, 0755) < 0 && errno != EEXIST)
				die("cannot create '%s': %s", buf, strerror(errno));
			*p = '/';
		}
	if (mkdir(buf, mode) < 0 && errno != EEXIST)
		die("cannot create '%s': %s", buf, strerror(errno));
}

static int autologger_enable(const struct opts *o)
{
	need_root();
	char unit[PATH_MAX], wants[PATH_MAX], link[PATH_MAX], tracedir[PATH_MAX];
	root_path(unit, sizeof(unit), "/etc/systemd/system/" UNIT_NAME);
	root_path(wants, sizeof(wants), "/etc/systemd/system/sysinit.target.wants");
	root_path(link, sizeof(link), "/etc/systemd/system/sysinit.target.wants/" UNIT_NAME);
	root_path(tracedir, sizeof(tracedir), o->file);
	*strrchr(tracedir, '/') = 0;
	mkdirs(wants, 0755);
	mkdirs(tracedir, 0700);
	char *text = unit_text(o);
	char tmp[PATH_MAX + 8];
	snprintf(tmp, sizeof(tmp), "%s.new", unit);
	FILE *f = fopen(tmp, "we");
	if (!f || fputs(text, f) < 0 || fclose(f) != 0 || chmod(tmp, 0644) < 0 ||
	    rename(tmp, unit) < 0)
		die("cannot write '%s': %s", unit, strerror(errno));
	free(text);
	/* What 'systemctl enable' does, without asking systemd to do anything now. */
	unlink(link);
	if (symlink("../" UNIT_NAME, link) < 0)
		die("cannot create '%s': %s", link, strerror(errno));
	char *install[] = {"ifeo", "install", NULL};
	int rc = cmd_ifeo(2, install);
	if (rc)
		return rc;
	printf("enabled the AutoLogger: '%s'\n"
	       "the session starts at the next boot; 'systemctl daemon-reload' makes systemd see "
	       "it now,\n"
	       "'heaptrail stop " SESSION "' writes '%s'\n",
	       unit, o->file);
	return 0;
}

static int autologger_disable(void)
{
	need_root();
	char unit[PATH_MAX], link[PATH_MAX];
	root_path(unit, sizeof(unit), "/etc/systemd/system/" UNIT_NAME);
	root_path(link, sizeof(link), "/etc/systemd/system/sysinit.target.wants/" UNIT_NAME);
	bool had = access(unit, F_OK) == 0;
	if (unlink(link) < 0 && errno != ENOENT)
		die("cannot remove '%s': %s", link, strerror(errno));
	if (unlink(unit) < 0 && errno != ENOENT)
		die("cannot remove '%s': %s", unit, strerror(errno));
	if (!had) {
		printf("the AutoLogger is not enabled\n");
		return 0;
	}
	printf("disabled the AutoLogger (a running session goes on until 'heaptrail stop " SESSION
	       "');\nthe IFEO loader hook stays; 'heaptrail ifeo uninstall' removes it\n");
	return 0;
}

static int autologger_status(void)
{
	char unit[PATH_MAX], link[PATH_MAX];
	root_path(unit, sizeof(unit), "/etc/systemd/system/" UNIT_NAME);
	root_path(link, sizeof(link), "/etc/systemd/system/sysinit.target.wants/" UNIT_NAME);
	struct stat st;
	bool installed = stat(unit, &st) == 0, enabled = lstat(link, &st) == 0;
	printf("unit:     %s (%s)\n", unit,
	       installed ? (enabled ? "enabled" : "installed, not enabled") : "not installed");
	if (installed) {
		FILE *f = fopen(unit, "re");
		char line[8192];
		while (f && fgets(line, sizeof(line), f))
			if (!strncmp(line, "ExecStart=", 10))
				printf("starts:   %s", line + 10);
		if (f)
			fclose(f);
	}
	struct ht_trace_properties p = HT_TRACE_PROPERTIES_INIT;
	pid_t pids[256];
	unsigned np = 256;
	int rc = ht_query_heap_trace(0, SESSION, &p, pids, &np);
	if (rc == 0)
		printf("session:  running (pid %d): %u process%s, %llu events, %llu lost, trace "
		       "'%s'\n",
		       (int)p.daemon_pid, np, np == 1 ? "" : "es",
		       (unsigned long long)p.events_written, (unsigned long long)p.events_lost,
		       p.file);
	else
		printf("session:  not running\n");
	return 0;
}

int cmd_autologger(int argc, char **argv)
{
	static const char *const subs[] = {"enable", "disable", "status", "unit"};
	cli_subcommand(argc, argv, "autologger", usage_text, subs, 4);
	const char *sub = argv[1];
	struct opts o = {0};
	/* The subcommand stands in for the program name of its options. */
	if (!strcmp(sub, "enable") || !strcmp(sub, "unit")) {
		parse_opts(argc - 1, argv + 1, &o);
		if (!strcmp(sub, "enable"))
			return autologger_enable(&o);
		char *text = unit_text(&o);
		fputs(text, stdout);
		free(text);
		return 0;
	}
	/* disable, status: no options, no operands */
	static const struct cli_opt none[] = {{NULL, 0, 0}};
	struct cli_parser p;
	cli_init(&p, "autologger", usage_text, none, argc - 1, argv + 1, false);
	while (cli_next(&p) != -1)
		;
	char **rest;
	cli_operands(&p, 0, 0, "", &rest);
	return !strcmp(sub, "disable") ? autologger_disable() : autologger_status();
}
