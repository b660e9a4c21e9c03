/*
 * cmd_ifeo.c - `heaptrail ifeo`, the counterpart of the IFEO TracingFlags
 * value (seeds 000 and 003): a registry of programs under /etc/heaptrail/ifeo
 * (one file per program name) and the loader hook in /etc/ld.so.preload
 * (src/ifeo/hook.c); HEAPTRAIL_ROOT moves both under another root for tests.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/vec.h"
#include "base/paths.h"
#include "cli/builtin.h"
#include "cli/common.h"
#include "cli/opt.h"

static const char usage_text[] =
    "usage: heaptrail ifeo enable PROGRAM [--flags heap]\n"
    "   or: heaptrail ifeo disable PROGRAM\n"
    "   or: heaptrail ifeo list [--format text|json]\n"
    "   or: heaptrail ifeo install | uninstall\n"
    "\n"
    "Trace every new start of PROGRAM (a file name like 'myapp', or a full\n"
    "path for that file only) into the session started with\n"
    "'heaptrail start NAME --ifeo' (or the AutoLogger's). A program started\n"
    "before that session keeps its events in memory until the session starts.\n"
    "'install' puts the loader hook into /etc/ld.so.preload (other entries\n"
    "stay); 'uninstall' takes it out. Setuid and setgid programs are never\n"
    "traced. Changing the registry or the hook needs root.\n"
    "\n"
    "  --flags heap        what to trace (heap, the only one: TracingFlags 1)\n"
    "  --format FMT        list as text (default) or json\n"
    "  -h, --help          show this help\n"
    "\n"
    "examples:\n"
    "  heaptrail ifeo enable myserver && heaptrail ifeo install\n"
    "  heaptrail ifeo list --format json\n"
    "  heaptrail ifeo disable /usr/local/bin/myserver\n";

#define HOOK_NAME "libheaptrail-ifeo.so"

/* Changing the registry or ld.so.preload is root's (under a test root, the owner's). */
static void need_root(const char *what)
{
	if (!getenv("HEAPTRAIL_ROOT") && geteuid() != 0)
		die("%s needs root: the IFEO registry and /etc/ld.so.preload are the system's",
		    what);
}

/* Writes text to path through a temporary file and rename, mode 0644. */
static void write_file(const char *path, const char *text)
{
	char tmp[PATH_MAX + 16];
	snprintf(tmp, sizeof(tmp), "%s.XXXXXX", path);
	int fd = mkstemp(tmp);
	if (fd < 0)
		die("cannot write '%s': %s", path, strerror(errno));
	size_t len = strlen(text);
	if (write(fd, text, len) != (ssize_t)len || fchmod(fd, 0644) < 0 || fsync(fd) < 0) {
		int e = errno;
		close(fd);
		unlink(tmp);
		die("cannot write '%s': %s", path, strerror(e));
	}
	close(fd);
	if (rename(tmp, path) == 0)
		return;
	/* A bind-mounted file cannot be replaced: rewrite it in place. */
	int e = errno;
	unlink(tmp);
	if (e != EBUSY && e != EXDEV)
		die("cannot write '%s': %s", path, strerror(e));
	fd = open(path, O_WRONLY | O_TRUNC | O_CLOEXEC);
	if (fd < 0 || write(fd, text, len) != (ssize_t)len)
		die("cannot write '%s': %s", path, strerror(errno));
	close(fd);
}

/* The whole file into a malloc'd string; NULL when it does not exist. */
static char *read_file(const char *path)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		if (errno == ENOENT)
			return NULL;
		die("cannot read '%s': %s", path, strerror(errno));
	}
	char *buf = NULL;
	size_t cap = 0, len = 0;
	for (;;) {
		if (ht__grow((void **)&buf, &cap, len + 4096 + 1, 1) < 0)
			die("out of memory");
		size_t r = fread(buf + len, 1, cap - len - 1, f);
		len += r;
		if (r == 0)
			break;
	}
	fclose(f);
	buf[len] = 0;
	return buf;
}

static void make_dirs(void)
{
	char path[PATH_MAX];
	const char *parts[] = {"/etc", "/etc/heaptrail", "/etc/heaptrail/ifeo"};
	for (size_t i = 0; i < 3; i++) {
		root_path(path, sizeof(path), parts[i]);
		if (mkdir(path, 0755) < 0 && errno != EEXIST)
			die("cannot create '%s': %s", path, strerror(errno));
	}
}

/* Registry file of a program name, and whether the name is acceptable. */
static void entry_path(char *out, size_t n, const char *name)
{
	if (!*name || !strcmp(name, ".") || !strcmp(name, "..") || strchr(name, '/'))
		die("invalid program name '%s'", name);
	char rel[PATH_MAX];
	snprintf(rel, sizeof(rel), "/etc/heaptrail/ifeo/%s", name);
	root_path(out, n, rel);
}

/* The "path=" lines of an entry, each into paths[] (malloc'd); returns how many. */
static int entry_paths(const char *text, char **paths, int max)
{
	int n = 0;
	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
		if (!strncmp(p, "path=", 5) && n < max)
			paths[n++] = strndup(p + 5, strcspn(p + 5, "\n"));
	return n;
}

static void free_paths(char **paths, int n)
{
	for (int i = 0; i < n; i++)
		free(paths[i]);
}

static void write_entry(const char *file, char **paths, int n)
{
	char *text = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&text, &len);
	if (!m)
		die("out of memory");
	fprintf(
	    m,
	    "# heaptrail IFEO entry (heaptrail ifeo enable): trace every start of this program\n");
	fprintf(m, "flags=heap\n");
	for (int i = 0; i < n; i++)
		fprintf(m, "path=%s\n", paths[i]);
	fclose(m);
	write_file(file, text);
	free(text);
}

#define MAX_PATHS 64

static int ifeo_enable(const char *prog)
{
	need_root("changing the IFEO registry");
	char real[PATH_MAX] = "";
	const char *name = prog;
	if (strchr(prog, '/')) {
		/* A full path: the hook compares the program's resolved path. */
		if (!realpath(prog, real))
			die("cannot enable '%s': %s", prog, strerror(errno));
		name = strrchr(prog, '/') + 1;
	}
	char file[PATH_MAX];
	entry_path(file, sizeof(file), name);
	make_dirs();
	char *old = read_file(file);
	char *paths[MAX_PATHS];
	int n = old ? entry_paths(old, paths, MAX_PATHS) : 0;
	if (old && n == 0 && real[0]) {
		printf("'%s' is enabled for every path already\n", name);
		free(old);
		return 0;
	}
	if (!real[0]) {
		n = 0; /* by name: every path */
	} else {
		bool have = false;
		for (int i = 0; i < n; i++)
			have |= !strcmp(paths[i], real);
		if (!have && n < MAX_PATHS)
			paths[n++] = strdup(real);
	}
	write_entry(file, paths, n);
	printf("enabled '%s'%s%s\n", name, real[0] ? " at " : " (every path)", real);
	free_paths(paths, n);
	free(old);
	return 0;
}

static int ifeo_disable(const char *prog)
{
	need_root("changing the IFEO registry");
	char real[PATH_MAX] = "";
	const char *name = prog;
	if (strchr(prog, '/')) {
		if (!realpath(prog, real))
			snprintf(real, sizeof(real), "%s", prog);
		name = strrchr(prog, '/') + 1;
	}
	char file[PATH_MAX];
	entry_path(file, sizeof(file), name);
	char *old = read_file(file);
	if (!old)
		die("'%s' is not enabled; 'heaptrail ifeo list' shows what is", name);
	char *paths[MAX_PATHS], *keep[MAX_PATHS];
	int n = entry_paths(old, paths, MAX_PATHS), k = 0;
	if (real[0]) {
		for (int i = 0; i < n; i++)
			if (strcmp(paths[i], real))
				keep[k++] = paths[i];
		if (k == n)
			die("'%s' is not enabled at '%s'", name, real);
	}
	if (k == 0) {
		if (unlink(file) < 0)
			die("cannot remove '%s': %s", file, strerror(errno));
	} else {
		write_entry(file, keep, k);
	}
	printf("disabled '%s'%s%s\n", name, real[0] ? " at " : "", real);
	free_paths(paths, n);
	free(old);
	return 0;
}

/* The hook, next to the recorder (base/paths.h). */
static void hook_path(char *out, size_t n)
{
	if (ht__lib_path(HOOK_NAME, out, n) < 0)
		die("cannot find the loader hook '%s'; is heaptrail installed completely?", out);
}

static bool is_hook(const char *tok, size_t len)
{
	size_t hl = strlen(HOOK_NAME);
	return len >= hl && !memcmp(tok + len - hl, HOOK_NAME, hl) &&
	       (len == hl || tok[len - hl - 1] == '/');
}

/* ld.so.preload without our hook (every other entry as it was), plus add if given. */
static char *preload_without_hook(const char *text, const char *add, bool *had)
{
	char *out = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&out, &len);
	if (!m)
		die("out of memory");
	*had = false;
	for (const char *line = text; line && *line;) {
		const char *end = strchrnul(line, '\n');
		/* Entries are separated by spaces, tabs or colons. */
		bool kept_any = false, dropped = false;
		const char *p = line;
		char buf[8192];
		size_t bl = 0;
		while (p < end) {
			size_t sep = strspn(p, " \t:");
			if (p + sep >= end) {
				p = end;
				break;
			}
			p += sep;
			size_t tl = strcspn(p, " \t:\n");
			if (p + tl > end)
				tl = (size_t)(end - p);
			if (is_hook(p, tl)) {
				dropped = true;
				*had = true;
			} else if (bl + tl + 2 < sizeof(buf)) {
				if (kept_any)
					buf[bl++] = ' ';
				memcpy(buf + bl, p, tl);
				bl += tl;
				kept_any = true;
			}
			p += tl;
		}
		if (!dropped)
			fprintf(m, "%.*s\n", (int)(end - line), line); /* untouched, comments too */
		else if (kept_any)
			fprintf(m, "%.*s\n", (int)bl, buf);
		line = *end ? end + 1 : end;
	}
	if (add)
		fprintf(m, "%s\n", add);
	fclose(m);
	return out;
}

/* The hook is loaded into every program, setuid ones included: only root may be able to change it.
 */
static void check_hook_safe(const char *path)
{
	if (getenv("HEAPTRAIL_ROOT"))
		return;
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s", path);
	const char *checks[2] = {path, dir};
	*strrchr(dir, '/') = 0;
	for (int i = 0; i < 2; i++) {
		struct stat st;
		if (stat(checks[i], &st) < 0)
			die("cannot check '%s': %s", checks[i], strerror(errno));
		if (st.st_uid != 0 || (st.st_mode & 022))
			die("'%s' must belong to root and be writable by nobody else: every "
			    "program "
			    "on the system loads the hook",
			    checks[i]);
	}
}

static int ifeo_install(bool install)
{
	need_root(install ? "installing the loader hook" : "removing the loader hook");
	char preload[PATH_MAX], hook[PATH_MAX];
	root_path(preload, sizeof(preload), "/etc/ld.so.preload");
	if (install) {
		hook_path(hook, sizeof(hook));
		check_hook_safe(hook);
		char lib[PATH_MAX + 32];
		snprintf(lib, sizeof(lib), "%.*s/libheaptrail.so", (int)(strrchr(hook, '/') - hook),
			 hook);
		check_hook_safe(lib);
	}
	char *old = read_file(preload);
	bool had;
	char *text = preload_without_hook(old ? old : "", install ? hook : NULL, &had);
	if (!install && !had) {
		printf("the loader hook is not in '%s'\n", preload);
		free(old);
		free(text);
		return 0;
	}
	if (install && old && !strcmp(text, old)) {
		printf("the loader hook is in '%s' already\n", preload);
		free(old);
		free(text);
		return 0;
	}
	if (!install && !text[strspn(text, " \t\n:")]) {
		if (unlink(preload) < 0 && errno != ENOENT) {
			/* A bind-mounted file: empty it instead. */
			write_file(preload, "");
		}
	} else {
		write_file(preload, text);
	}
	printf(install ? "installed the loader hook '%s' in '%s'\n"
		       : "removed the loader hook from '%s%s'\n",
	       install ? hook : "", preload);
	free(old);
	free(text);
	return 0;
}

static int ifeo_list(enum out_format fmt)
{
	char dir[PATH_MAX], preload[PATH_MAX];
	root_path(dir, sizeof(dir), "/etc/heaptrail/ifeo");
	root_path(preload, sizeof(preload), "/etc/ld.so.preload");
	char *pl = read_file(preload);
	bool installed = false;
	if (pl) {
		char *t = preload_without_hook(pl, NULL, &installed);
		free(t);
		free(pl);
	}
	struct dirent **ents = NULL;
	int n = scandir(dir, &ents, NULL, alphasort);
	if (n < 0 && errno != ENOENT)
		die("cannot read '%s': %s", dir, strerror(errno));
	struct jw j;
	if (fmt == FMT_JSON) {
		jw_init(&j, stdout, true);
		jw_obj_begin(&j);
		jw_key(&j, "hook_installed");
		jw_bool(&j, installed);
		jw_key(&j, "programs");
		jw_arr_begin(&j);
	}
	int shown = 0;
	for (int i = 0; i < n; i++) {
		const char *name = ents[i]->d_name;
		if (name[0] == '.' || strchr(name, '~') || strstr(name, ".XXXXXX") ||
		    strlen(name) > 200) {
			free(ents[i]);
			continue;
		}
		char file[PATH_MAX];
		char *text = NULL;
		if ((size_t)snprintf(file, sizeof(file), "%s/%s", dir, name) < sizeof(file))
			text = read_file(file);
		char *paths[MAX_PATHS];
		int np = text ? entry_paths(text, paths, MAX_PATHS) : 0;
		if (fmt == FMT_JSON) {
			jw_obj_begin(&j);
			jw_key(&j, "name");
			jw_str(&j, name);
			jw_key(&j, "flags");
			jw_str(&j, "heap");
			jw_key(&j, "paths");
			jw_arr_begin(&j);
			for (int k = 0; k < np; k++)
				jw_str(&j, paths[k]);
			jw_arr_end(&j);
			jw_obj_end(&j);
		} else {
			printf("%-24s heap  %s", name, np ? "" : "(every path)");
			for (int k = 0; k < np; k++)
				printf("%s%s", k ? ", " : "", paths[k]);
			printf("\n");
		}
		free_paths(paths, np);
		free(text);
		free(ents[i]);
		shown++;
	}
	free(ents);
	if (fmt == FMT_JSON) {
		jw_arr_end(&j);
		jw_obj_end(&j);
		jw_finish(&j);
		return 0;
	}
	if (!shown)
		printf("no program is enabled; 'heaptrail ifeo enable PROGRAM' adds one\n");
	printf("loader hook: %s\n",
	       installed ? "installed"
			 : "not installed; 'heaptrail ifeo install' (as root) puts it in");
	return 0;
}

int cmd_ifeo(int argc, char **argv)
{
	static const char *const subs[] = {"enable", "disable", "list", "install", "uninstall"};
	size_t k = cli_subcommand(argc, argv, "ifeo", usage_text, subs, 5);
	const char *sub = argv[1];
	/* One option table for the subcommands; each says which it takes. */
	enum { I_FLAGS = CLI_LONG, I_FORMAT };
	static const struct cli_opt opts[] = {
	    {"flags", I_FLAGS, required_argument},
	    {"format", I_FORMAT, required_argument},
	    {NULL, 0, 0},
	};
	enum out_format fmt = FMT_TEXT;
	struct cli_parser p;
	cli_init(&p, "ifeo", usage_text, opts, argc - 1, argv + 1, false);
	for (int c; (c = cli_next(&p)) != -1;) {
		if (c == I_FLAGS && strcmp(sub, "enable"))
			die("--flags goes with 'heaptrail ifeo enable'");
		if (c == I_FORMAT && strcmp(sub, "list"))
			die("--format goes with 'heaptrail ifeo list'");
		if (c == I_FLAGS && strcmp(p.val, "heap"))
			die("unknown IFEO flags '%s': heap is the only one", p.val);
		if (c == I_FORMAT && (parse_format(p.val, &fmt) < 0 || fmt == FMT_CSV))
			die("invalid format '%s': text or json", p.val);
	}
	char **ops;
	bool takes_prog = k < 2;
	cli_operands(&p, takes_prog, takes_prog, "program", &ops);
	if (k == 0)
		return ifeo_enable(ops[0]);
	if (k == 1)
		return ifeo_disable(ops[0]);
	if (k == 2)
		return ifeo_list(fmt);
	return ifeo_install(k == 3);
}
