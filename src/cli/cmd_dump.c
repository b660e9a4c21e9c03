/* cmd_dump.c - placeholder until the 'dump' command lands; replaced by its owner. */
#include "cli/builtin.h"
#include "cli/common.h"

int cmd_dump(int argc, char **argv)
{
	die("'dump' is not built yet");
}
