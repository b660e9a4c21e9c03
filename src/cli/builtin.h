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

#endif
