/* cmd_analyze.c - placeholder until the 'analyze' command lands; replaced by its owner. */
#include "cli/builtin.h"
#include "cli/common.h"

int cmd_analyze(int argc, char **argv)
{
	die("'analyze' is not built yet");
}
