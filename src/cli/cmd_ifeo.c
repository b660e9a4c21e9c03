/* cmd_ifeo.c - placeholder while the command is written. */
#include "cli/builtin.h"
#include "cli/common.h"
int cmd_ifeo(int argc, char **argv) { (void)argc; (void)argv; die("not yet"); }
