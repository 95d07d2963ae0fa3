/* main.c: argv[1] selects a verb from the command table; each verb lives in
 * its own cmd_*.c file.  Planned verbs are listed (so `pvisor help` shows
 * the whole shape of the tool) but refuse to run with exit status 2. */
#include "cli/cli.h"
#include "config.h"
#include "launch/launch.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct cli_command commands[] = {
    {"run", "Run a command (optionally over a staged workspace)",
     "Usage: pvisor run [OPTIONS] -- COMMAND [ARGS...]\n"
     "\n"
     "Runs COMMAND and records a Run Bundle under $XDG_STATE_HOME/pvisor/runs/ID/.\n"
     "Without options the command runs on the host, unisolated: every dimension\n"
     "of the Bundle says 'unenforced'.\n"
     "\n"
     "Options:\n"
     "  --stage DIR|auto          Stage every workspace write in DIR (created, or a sealed\n"
     "                            stage reopened); 'auto' makes one in the run directory.\n"
     "  --workspace PATH          The workspace to stage (default: the current directory).\n"
     "  --stage-durability MODE   checkpoint (default) or strict.\n"
     "  --stage-max-bytes SIZE    Stage size quota (e.g. 512M); writes past it fail ENOSPC.\n"
     "  --stage-max-inodes N      Stage inode quota; creates past it fail EDQUOT.\n"
     "  --safe                    Staged, sandboxed, network denied (not yet available).\n"
     "  --filesystem host|sandbox Filesystem view of the command (sandbox: not yet available).\n"
     "  --executor auto|host|oci|vm  Executor (only host is available in this build).\n"
     "  --strict                  Refuse to run unless every requested dimension is enforced.\n"
     "  -h, --help                Show this help.\n"
     "\n"
     "Exit status: the command's own status; 128+N when it was killed by signal N;\n"
     "2 for a usage error (nothing done); 125 when pvisor failed before the command\n"
     "ran; 126 command not executable; 127 command not found.\n",
     cmd_run},
    {"status", "Show a run's Bundle (the most recent by default)",
     "Usage: pvisor status [RUN] [--json]\n"
     "\n"
     "Shows what was requested and what was actually enforced for RUN (a run id,\n"
     "a unique prefix of one, or 'latest'; default: the most recent run).\n"
     "  --json     Print the Run Bundle itself (docs/bundle.md).\n",
     cmd_status},
    {"list", "List runs",
     "Usage: pvisor list [--json]\n"
     "\n"
     "Lists recorded runs, newest first: id, state, exit status, start time, command.\n"
     "  --json     A JSON array of run summaries.\n",
     cmd_list},
    {"doctor", "Check what this host can enforce",
     "Usage: pvisor doctor [--json]\n"
     "\n"
     "Probes kernel features (user namespaces, FUSE, Landlock, seccomp, openat2,\n"
     "cgroup v2, OCI runtimes, QEMU/KVM) and says, per executor, whether it can run\n"
     "here and what to change when it cannot.\n"
     "  --json     Machine-readable output.\n",
     cmd_doctor},
    {"version", "Print the version", "Usage: pvisor version\n", cmd_version},
    {"help", "Show help for pvisor or one verb", "Usage: pvisor help [VERB]\n", cmd_help},
    {"diff", "Show staged changes as a patch (planned)", "Usage: pvisor diff [--stat] [PATH...]  (planned)\n", NULL},
    {"apply", "Apply a sealed stage to the workspace (planned)", "Usage: pvisor apply [--dry-run]  (planned)\n", NULL},
    {"drop", "Discard a stage (planned)", "Usage: pvisor drop  (planned)\n", NULL},
    {"checkpoint", "Checkpoint a stage (planned)", "Usage: pvisor checkpoint [--name N]  (planned)\n", NULL},
    {"restore", "Restore a stage from a checkpoint (planned)", "Usage: pvisor restore NAME  (planned)\n", NULL},
    {"fork", "Fork a stage from a checkpoint (planned)", "Usage: pvisor fork [CHECKPOINT] NEW_STAGE  (planned)\n", NULL},
};

const struct cli_command *cli_commands(unsigned *ret_n) {
    *ret_n = sizeof commands / sizeof commands[0];
    return commands;
}

const struct cli_command *cli_find_command(const char *name) {
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

int cli_usage_error(const char *verb, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "pvisor %s: ", verb);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, "\nTry 'pvisor help %s'.\n", verb);
    return PV_EXIT_USAGE;
}

int cli_error(int status, const char *verb, const char *fmt, ...) {
    va_list ap;
    fprintf(stderr, "pvisor %s: ", verb);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    return status;
}

int cli_print_help(const struct cli_command *c) {
    fputs(c->help, stdout);
    return PV_EXIT_OK;
}

bool cli_wants_help(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0)
            return false;
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return true;
    }
    return false;
}

static void print_overview(FILE *f) {
    fprintf(f, "pvisor %s: run untrusted programs over a staged copy of your workspace\n\n", PVISOR_VERSION);
    fprintf(f, "Usage: pvisor VERB [OPTIONS]\n\nVerbs:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nRun 'pvisor help VERB' or 'pvisor VERB --help' for details.\n");
}

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
    print_overview(stdout);
    return PV_EXIT_OK;
}

int cmd_version(int argc, char **argv) {
    if (cli_wants_help(argc, argv))
        return cli_print_help(cli_find_command("version"));
    if (argc > 1)
        return cli_usage_error("version", "takes no arguments");
    printf("pvisor %s\n", PVISOR_VERSION);
    return PV_EXIT_OK;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        print_overview(stderr);
        return PV_EXIT_USAGE;
    }
    const char *verb = argv[1];
    /* The hidden launcher: exec'd by pvisor itself, never listed. */
    if (strcmp(verb, LAUNCH_VERB) == 0)
        return launch_main(argc - 1, argv + 1);
    if (strcmp(verb, "--help") == 0 || strcmp(verb, "-h") == 0)
        return cmd_help(1, argv);
    if (strcmp(verb, "--version") == 0)
        return cmd_version(1, argv);
    const struct cli_command *c = cli_find_command(verb);
    if (!c) {
        fprintf(stderr, "pvisor: unknown verb '%s'\nTry 'pvisor help'.\n", verb);
        return PV_EXIT_USAGE;
    }
    if (!c->run) {
        if (cli_wants_help(argc - 1, argv + 1))
            return cli_print_help(c);
        fprintf(stderr, "pvisor %s: not available in pvisor %s (planned; see 'pvisor help')\n", verb, PVISOR_VERSION);
        return PV_EXIT_USAGE;
    }
    return c->run(argc - 1, argv + 1);
}
