/* cmd_help.c: `pvisor help [VERB]` (the overview, or one verb's help). */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

int cmd_help(int argc, char **argv) {
    if (argc > 2)
        return cli_usage_error("help", "takes at most one verb");
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
        return cli_print_help(cli_find_command("help"));
    if (argc == 2) {
        const struct cli_command *c = cli_find_command(argv[1]);
        if (!c)
            return cli_usage_error("help", "unknown verb '%s'", argv[1]);
        return cli_print_help(c);
    }
    cli_print_overview(stdout);
    return PV_EXIT_OK;
}
