/* cmd_autologger.c - placeholder while the command is written. */
#include "cli/builtin.h"
#include "cli/common.h"
int cmd_autologger(int argc, char **argv) { (void)argc; (void)argv; die("not yet"); }
