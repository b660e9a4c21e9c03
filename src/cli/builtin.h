/*
 * builtin.h - the commands of the heaptrail CLI, one file each (cmd_NAME.c),
 * listed in the command table of heaptrail.c. Each takes argv with argv[0]
 * being the command name and returns the process exit status.
 */
#ifndef HT_CLI_BUILTIN_H
#define HT_CLI_BUILTIN_H

int cmd_record(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_dump(int argc, char **argv);
int cmd_analyze(int argc, char **argv);
int cmd_table(int argc, char **argv);
int cmd_timeline(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_symbolize(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_start(int argc, char **argv);
int cmd_update(int argc, char **argv);
int cmd_stop(int argc, char **argv);
int cmd_flush(int argc, char **argv);
int cmd_sessions(int argc, char **argv);
int cmd_ifeo(int argc, char **argv);
int cmd_autologger(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_snapshot(int argc, char **argv);

/*
 * Shared by the commands that name processes and events (cmd_start.c,
 * cmd_update.c, cmd_record.c): a --stacks list into event
 * types (returns how many; dies on a bad name), a --pid list appended to
 * out[n..max) (returns the new count; dies when malformed), the operands
 * after the session name of `start`/`update` (more pids after a --pid,
 * appended the same way; anything else is too many arguments), and the
 * message for a failed control call on session name.
 */
#include <sys/types.h>
#include "heaptrail/trace.h"
int parse_stack_events(const char *list, enum ht_event_type *out);
int parse_pid_option(const char *list, pid_t *out, unsigned n, unsigned max);
unsigned parse_pids_after_name(const char *cmd, char **ops, int nops, pid_t *pids, unsigned npids);
_Noreturn void session_error(const char *verb, const char *name, int rc);

#endif
