/* cmd_help.c: `pvisor help [VERB]` (the overview, or one verb's help). */
#include "cli/cli.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* The text reached stdout, or exit 1 (as help > /dev/full exited 0). */
static int written(void) {
    if (fflush(stdout) == EOF || ferror(stdout))
        return cli_error(PV_EXIT_FAILURE, "help", "cannot write the help: %s", strerror(errno));
    return PV_EXIT_OK;
}

int cmd_help(int argc, char **argv) {
    if (argc > 2)
        return cli_usage_error("help", "takes at most one verb");
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        cli_print_help(cli_find_command("help"));
        return written();
    }
    if (argc == 2) {
        const struct cli_command *c = cli_find_command(argv[1]);
        /* the verbs are in the overview, not in help's own help */
        if (!c)
            return cli_error(PV_EXIT_USAGE, "help", "unknown verb '%s'\nTry 'pvisor help' for the list of verbs.",
                             argv[1]);
        cli_print_help(c);
        return written();
    }
    cli_print_overview(stdout);
    return written();
}
