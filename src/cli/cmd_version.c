/* cmd_version.c: `pvisor version`. */
#include "cli/cli.h"
#include "config.h"

#include <stdio.h>

int cmd_version(int argc, char **argv) {
    if (cli_wants_help(argc, argv))
        return cli_print_help(cli_find_command("version"));
    if (argc > 1)
        return cli_usage_error("version", "takes no arguments");
    /* the version reached stdout, or exit 1 (version > /dev/full exited 0) */
    printf("pvisor %s\n", PVISOR_VERSION);
    return cli_output_written("version");
}
