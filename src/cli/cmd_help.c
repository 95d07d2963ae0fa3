/* cmd_help.c: `pvisor help [VERB]` (the overview, or one verb's help). */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

int cmd_help(int argc, char **argv) {
    if (argc > 2)
        return cli_usage_error("help", "takes at most one verb");
    /* each text reached stdout, or exit 1 (help > /dev/full exited 0) */
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
        return cli_print_help(cli_find_command("help"));
    if (argc == 2) {
        const struct cli_command *c = cli_find_command(argv[1]);
        /* the verbs are in the overview, not in help's own help */
        if (!c)
            return cli_error(PV_EXIT_USAGE, "help", "unknown verb '%s'\nTry 'pvisor help' for the list of verbs.",
                             argv[1]);
        return cli_write_text("help", c->help);
    }
    cli_print_overview(stdout);
    return cli_output_written("help");
}
