/* cmd_info.c - placeholder until the 'info' command lands; replaced by its owner. */
#include "cli/builtin.h"
#include "cli/common.h"

int cmd_info(int argc, char **argv)
{
	die("'info' is not built yet");
}
