#include "cli/cli.h"
int cmd_doctor(int argc, char **argv) { return cli_error(1, "doctor", "unavailable"); }
