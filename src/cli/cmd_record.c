/* cmd_record.c - placeholder until the 'record' command lands; replaced by its owner. */
#include "cli/builtin.h"
#include "cli/common.h"

int cmd_record(int argc, char **argv)
{
	die("'record' is not built yet");
}
