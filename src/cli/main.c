/* main.c: argv[1] selects a verb from the command table; each verb lives in
 * its own cmd_*.c file.  Planned verbs are listed (so `pvisor help` shows
 * the whole shape of the tool) but refuse to run with exit status 2. */
#include "cli/cli.h"
#include "config.h"
#include "launch/launch.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

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
     "  --workspace PATH          The workspace to stage (default: the current directory);\n"
     "                            needs --stage, --safe or --filesystem sandbox.  COMMAND starts\n"
     "                            in the current directory all the same: run pvisor in PATH.\n"
     "  --stage-durability MODE   checkpoint (default) or strict.\n"
     "  --stage-max-bytes SIZE    Stage size quota (512M, 2G; at most 1024T): blocks of files,\n"
     "                            directories, symlinks; writes and creates past it fail ENOSPC.\n"
     "                            Sandboxed, it is also each file's size limit (RLIMIT_FSIZE):\n"
     "                            a write past SIZE in any one file, in /tmp too, gets SIGXFSZ.\n"
     "  --stage-max-inodes N      Stage inode quota (at most 1024T); creates past it fail EDQUOT.\n"
     "  --safe                    Staged workspace + sandbox + no network (docs/security-model.md).\n"
     "  --network none|loopback   With --safe: none (default: no TCP at all), or loopback: TCP\n"
     "                            on the sandbox's own loopback (a test suite's local server);\n"
     "                            the host's network stays out of reach either way.\n"
     "  --allow-net HOST[:PORT]   With --safe: let the command reach HOST (port 443 unless\n"
     "                            given) through pvisor's egress broker, an HTTP proxy (https\n"
     "                            tunnels and plain http) that HTTPS_PROXY and friends name\n"
     "                            inside; repeatable (64 rules).  HOST: a name\n"
     "                            (api.openai.com), *.NAME for the names below NAME, an IPv4\n"
     "                            address or [an IPv6 one].  There is no DNS inside: a client\n"
     "                            that ignores HTTPS_PROXY (Node 20's fetch, Java, ssh) does\n"
     "                            not get out.  A name never leads to loopback, private or\n"
     "                            link-local addresses (only 'localhost' to loopback).  What\n"
     "                            was reached and refused is in the Bundle and\n"
     "                            'pvisor status --review'.\n"
     "  --filesystem host|sandbox host: the host's view; sandbox: a synthetic root, staged.\n"
     "                            --safe is sandbox whatever this says.\n"
     "  --executor auto|host|oci|vm  Executor (only host is available in this build).\n"
     "  --strict                  Refuse to run unless every requested dimension is enforced.\n"
     "  --timeout DURATION        Terminate the command after DURATION (90, 30s, 10m, 2h;\n"
     "                            at most 7 days).\n"
     "  --limit mem=SIZE,pids=N,cpu=DURATION\n"
     "                            Resource limits for a sandboxed command's whole tree:\n"
     "                            memory (1M to 1024T: 512M, 2G), processes+threads, CPU\n"
     "                            time (30s, 10m; at most 7 days); repeatable.  A delegated\n"
     "                            cgroup v2 holds them; without one, per-process rlimits (the\n"
     "                            Bundle says which; --strict refuses those).  A limit nothing\n"
     "                            here can install refuses the run (see 'pvisor doctor').\n"
     "  --limit tmp=SIZE,shm=SIZE The size of the sandbox's private /tmp (1G without it) and\n"
     "                            /dev/shm (64M), or half of the memory the run may use when\n"
     "                            less: the host's, pvisor's cgroup's limit, or mem=; tmpfs,\n"
     "                            one file per 2 KiB of the size; from 1M to that half (their\n"
     "                            files are kept in memory).  A run that ends with one full\n"
     "                            says so.\n"
     "  --pass-env NAME           Hand environment variable NAME to a sandboxed command\n"
     "                            (repeatable, 64 names; not HOME, PWD, TMPDIR,\n"
     "                            PVISOR_AGENT_SOCKET, which pvisor sets).\n"
     "  --access deny:P|ro:P|rw:P Sandbox rule for host path P: hide it, project it read-only,\n"
     "                            or read-write (writes land on the host directly); never a\n"
     "                            credential location (~/.ssh, ...), which stays hidden.\n"
     "                            Repeatable: 64 rules with --allow-write.\n"
     "  --allow-write PATH        Same as --access rw:PATH.\n"
     "  -h, --help                Show this help.\n"
     "\n"
     "On a terminal a sandboxed command gets a terminal (pty) of its own, relayed to\n"
     "yours; while it runs in the foreground your terminal is in raw mode, every key\n"
     "(Ctrl-C included) goes to the command; 'kill PID' of pvisor ends the run. Keys\n"
     "not read when it ends are discarded. Its output reaches your terminal unfiltered.\n"
     "\n"
     "Exit status: the command's own status; 128+N when it was killed by signal N;\n"
     "124 when --timeout ended it and it exited by itself on the SIGTERM (as timeout(1));\n"
     "sent SIGINT, SIGTERM or SIGHUP, pvisor relays it and, the run recorded, ends by\n"
     "that signal itself (128+N), whatever the command exited with on it;\n"
     "2 for a usage error (nothing done); 125 when pvisor failed before the command\n"
     "ran; 126 command not executable; 127 command not found.\n",
     cmd_run, NULL},
    {"status", "Show a run's Bundle (the most recent by default)",
     "Usage: pvisor status [RUN] [--json]\n"
     "       pvisor status --review [RUN|STAGE|--stage DIR] [--json]\n"
     "\n"
     "Shows what was requested and what was actually enforced for RUN (a run id,\n"
     "a unique prefix of one, or 'latest'; default: the most recent run).\n"
     "  --json     Print the Run Bundle itself (docs/bundle.md).\n"
     "  --review   Review a stage before applying it: its state, every change, warnings\n"
     "             (new executables, setuid bits, .git/hooks, symlinks leaving the\n"
     "             workspace...) and the Safety boundary (docs/lifecycle.md).\n"
     "             STAGE is a stage directory, given as a path (./NAME for one here),\n"
     "             or as --stage DIR (as diff, apply and drop take it).\n",
     cmd_status, (const char *const[]){"--stage", NULL}},
    {"list", "List runs",
     "Usage: pvisor list [--json]\n"
     "\n"
     "Lists recorded runs, newest first: id, state, exit status, the stage's state, start\n"
     "time, workspace (~ for HOME; a long one keeps its end) and command.\n"
     "  --json     A JSON array of run summaries (docs/bundle.md).\n",
     cmd_list, NULL},
    {"doctor", "Check what this host can enforce",
     "Usage: pvisor doctor [--json]\n"
     "\n"
     "Probes kernel features (user namespaces, FUSE, Landlock, seccomp, openat2,\n"
     "cgroup v2, OCI runtimes, QEMU/KVM) and says, per executor, whether it can run\n"
     "here and what to change when it cannot.\n"
     "  --json     Machine-readable output.\n",
     cmd_doctor, NULL},
    {"version", "Print the version", "Usage: pvisor version\n", cmd_version, NULL},
    {"help", "Show help for pvisor or one verb", "Usage: pvisor help [VERB]\n", cmd_help, NULL},
#ifdef PVISOR_HAVE_LIFECYCLE
#define LC_RUN(f) f
#define LC_SUM(s) s
#else
#define LC_RUN(f) NULL
#define LC_SUM(s) s " (not in this build: needs the stage overlay)"
#endif
    {"diff", LC_SUM("Show staged changes as a patch"),
     "Usage: pvisor diff [--stat] [--patch] [--binary] [RUN|--stage DIR] [-- PATH...]\n"
     "\n"
     "Prints the changes staged by RUN (default: the newest staged run of the\n"
     "workspace you are in) as a unified diff against the current workspace, produced by diff(1).\n"
     "Binary files are reported, not dumped; mode and symlink changes are shown as\n"
     "git shows them. PATHs (workspace-relative) limit the output.\n"
     "  --stage DIR   The stage directory to show (instead of a RUN; a RUN with a '/',\n"
     "                such as ./NAME, is one too).\n"
     "  --stat        A per-file summary of inserted and deleted lines.\n"
     "  --patch       Into a pipe or a file, the content byte for byte (for patch(1) and\n"
     "                'git apply'); without it control bytes and bidi controls in the\n"
     "                content are written as \\xNN there (said on stderr), as on a terminal.\n"
     "  --binary      Binary files as git's binary patch (their bytes, deflated), so that\n"
     "                'git apply' writes them too (implies --patch); not on a terminal.\n",
     LC_RUN(cmd_diff), (const char *const[]){"--stage", NULL}},
    {"apply", LC_SUM("Apply a sealed stage to the workspace"),
     "Usage: pvisor apply [RUN|--stage DIR] [--path P]... [--dry-run] [--keep-special-modes]\n"
     "                    [--expect ID]\n"
     "\n"
     "Writes the changes staged by RUN (default: the newest staged run of the workspace\n"
     "you are in) into the real workspace. Every path the agent changed must still be what the\n"
     "agent saw (type, mode, SHA-256 of the content); on any conflict nothing is\n"
     "written and each conflicting path is named. Each file is replaced atomically;\n"
     "an interrupted apply is completed by the next 'pvisor apply'. Running and\n"
     "interrupted stages are refused; an applied stage cannot be applied again.\n"
     "A stage that was reviewed ('pvisor status --review', or 'pvisor diff' on a terminal\n"
     "or with --stat) is applied only while it is the changeset that review showed: a\n"
     "run or a restore on it since is refused, writing nothing (review it again).\n"
     "  --stage DIR            The stage directory to apply (instead of a RUN; a RUN\n"
     "                         with a '/', such as ./NAME, is one too; not a symlink).\n"
     "                         A stage no run's Bundle names (a fork) is applied only\n"
     "                         from inside its workspace.\n"
     "  --path P               Apply only P and what is below it (repeatable;\n"
     "                         the stage is then not marked applied).\n"
     "  -n, --dry-run          List what would be done; write nothing.\n"
     "  --keep-special-modes   Keep setuid/setgid bits of files (dropped by default).\n"
     "  --expect ID            Apply only the changeset with this ID, the one 'pvisor\n"
     "                         status --review' and 'pvisor diff' print; refuse, writing\n"
     "                         nothing, when the stage changed since (with --path too:\n"
     "                         the ID is the whole changeset's).\n"
     "\n"
     "Exit status: 0 applied, 1 refused (conflict, stage state, another changeset)\n"
     "or failed, 2 usage, 3 applied but this report could not be written (stdout).\n",
     LC_RUN(cmd_apply), (const char *const[]){"--stage", "--expect", "--path", NULL}},
    {"drop", LC_SUM("Discard a stage"),
     "Usage: pvisor drop [RUN|--stage DIR] [--force]\n"
     "\n"
     "Discards the changes staged by RUN (default: the newest staged run of the\n"
     "workspace you are in). The workspace is not touched. Refused while the run is going.\n"
     "The stage directory keeps only a 'dropped' marker and its metadata: its\n"
     "checkpoints go too (the message names them; 'pvisor fork CHECKPOINT DIR' first\n"
     "keeps one).\n"
     "  --stage DIR   The stage directory to drop (instead of a RUN; a RUN with a '/',\n"
     "                such as ./NAME, is one too).\n"
     "  --force       Drop even though an interrupted apply is pending (the part\n"
     "                already written stays in the workspace).\n",
     LC_RUN(cmd_drop), (const char *const[]){"--stage", NULL}},
    {"checkpoint", LC_SUM("Checkpoint a stage"),
     "Usage: pvisor checkpoint [--name N] [RUN|--stage DIR]\n"
     "       pvisor checkpoint --list [RUN|--stage DIR]\n"
     "\n"
     "Saves a durable, self-contained copy of a sealed stage (its upper, journal and\n"
     "metadata; reflinked where the file system can, copied otherwise) under\n"
     "STAGE/checkpoints/N (default name: cp-<UTC time>, then -2, -3... if taken).\n"
     "A running stage is checkpointed from inside the run: the command sends\n"
     "'checkpoint [N]' on $PVISOR_AGENT_SOCKET (--safe).\n"
     "  --name N      Name of the checkpoint (letters, digits, '.', '_', '-').\n"
     "  --list        List the stage's checkpoints.\n"
     "  --stage DIR   The stage (instead of a RUN; default: the newest staged run\n"
     "                of the workspace you are in).\n",
     LC_RUN(cmd_checkpoint), (const char *const[]){"--stage", "--name", NULL}},
    {"restore", LC_SUM("Restore a stage from a checkpoint"),
     "Usage: pvisor restore NAME [RUN|--stage DIR]\n"
     "\n"
     "Replaces the content of a stopped stage (sealed or interrupted) with its\n"
     "checkpoint NAME; the stage is sealed afterwards.\n"
     "  --stage DIR   The stage (instead of a RUN; default: the newest staged run\n"
     "                of the workspace you are in).\n",
     LC_RUN(cmd_restore), (const char *const[]){"--stage", NULL}},
    {"fork", LC_SUM("Fork a new stage from a checkpoint"),
     "Usage: pvisor fork [CHECKPOINT] NEW_STAGE [--run RUN|--stage DIR]\n"
     "\n"
     "Creates NEW_STAGE (absent or empty), a sealed stage holding CHECKPOINT of the\n"
     "source stage, or the source stage itself when no CHECKPOINT is given.\n"
     "  --run RUN     The source stage is RUN's (default: the newest staged run of\n"
     "                the workspace you are in).\n"
     "  --stage DIR   The source stage directory.\n"
     "NEW_STAGE must lie outside the workspace; the fork is applied from inside it.\n",
     LC_RUN(cmd_fork), (const char *const[]){"--stage", "--run", NULL}},
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

#define CLI_ESC_RING 32
static char *esc_ring[CLI_ESC_RING];
static unsigned esc_at;

const char *cli_esc(const char *s) {
    char **slot = &esc_ring[esc_at++ % CLI_ESC_RING];
    free(*slot);
    *slot = term_escape(s ? s : "-");
    return *slot ? *slot : "?";
}

void cli_esc_free(void) {
    for (size_t i = 0; i < CLI_ESC_RING; i++) {
        free(esc_ring[i]);
        esc_ring[i] = NULL;
    }
}

int cli_take_value(const char *verb, int argc, char **argv, int *i, const char **dst) {
    const char *opt = argv[*i];
    if (*i + 1 >= argc || argv[*i + 1][0] == '\0')
        return cli_usage_error(verb, "%s needs a value", opt);
    if (*dst)
        return cli_usage_error(verb, "%s given twice", opt);
    *dst = argv[++*i];
    return 0;
}

/* The cells of the character at *s, *s moved past it (see cli_columns);
 * in the locale utf8, when there is one. */
static size_t char_cells(const char **s, mbstate_t *st, bool utf8) {
    wchar_t wc;
    size_t k = utf8 ? mbrtowc(&wc, *s, strnlen(*s, MB_LEN_MAX), st) : 1;
    if (!utf8 || k == (size_t)-1 || k == (size_t)-2 || k == 0) {
        (*s)++;
        while (!utf8 && (**s & 0xc0) == 0x80) /* a cell per character */
            (*s)++;
        memset(st, 0, sizeof *st);
        return 1;
    }
    *s += k;
    int w = wcwidth(wc);
    return w >= 0 ? (size_t)w : 1;
}

size_t cli_columns(const char *s, locale_t utf8) {
    locale_t old = utf8 ? uselocale(utf8) : (locale_t)0;
    size_t n = 0;
    mbstate_t st;
    memset(&st, 0, sizeof st);
    while (*s)
        n += char_cells(&s, &st, utf8);
    if (utf8)
        uselocale(old);
    return n;
}

void cli_cut(char *s, size_t max, size_t head, locale_t utf8) {
    size_t n = cli_columns(s, utf8);
    if (n <= max || max < 4 || head > max - 3)
        return;
    locale_t old = utf8 ? uselocale(utf8) : (locale_t)0;
    mbstate_t st; /* initial between whole characters (char_cells) */
    memset(&st, 0, sizeof st);
    char *h = s; /* after the start kept: whole characters, head cells at most */
    size_t kept = 0;
    for (const char *c = h; *c;) {
        size_t w = char_cells(&c, &st, utf8);
        if (kept + w > head)
            break;
        kept += w;
        h = s + (c - s);
    }
    memset(&st, 0, sizeof st);
    const char *c = h;
    size_t rest = n - kept;
    while (*c && kept + 3 + rest > max) /* at least 4 cells go: as many bytes at least */
        rest -= char_cells(&c, &st, utf8);
    if (utf8)
        uselocale(old);
    if (c - h >= 3) {
        memmove(h + 3, c, strlen(c) + 1);
        memcpy(h, "...", 3);
    }
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

/* The error of the first write to stdout that failed, in a flush
 * (cli_flush_stdout, stdout_lost), or 0: the stream keeps only that there
 * was one (ferror), and a verb flushes it before it starts diff(1) or
 * prints an error. */
static int stdout_errno;

void cli_flush_stdout(void) {
    errno = 0;
    if (fflush(stdout) == EOF && !stdout_errno)
        stdout_errno = errno;
}

/* stdout flushed: NULL, or why what was written to it did not all get
 * there */
static const char *stdout_lost(void) {
    cli_flush_stdout();
    if (stdout_errno)
        return strerror(stdout_errno);
    return ferror(stdout) ? "a write to stdout failed" : NULL;
}

int cli_output_written(const char *verb) {
    const char *why = stdout_lost();
    if (why)
        return cli_error(PV_EXIT_FAILURE, verb, "cannot write the output: %s", why);
    return PV_EXIT_OK;
}

int cli_report_written(const char *verb, const char *fmt, ...) {
    const char *why = stdout_lost();
    if (!why)
        return PV_EXIT_OK;
    va_list ap;
    fprintf(stderr, "pvisor %s: ", verb);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fprintf(stderr, ", but its report could not be written: %s (exit status %d: done, not reported)\n", why,
            PV_EXIT_UNREPORTED);
    return PV_EXIT_UNREPORTED;
}

int cli_write_text(const char *verb, const char *text) {
    /* a text past stdio's buffer is written in fputs: its error kept */
    if (fputs(text, stdout) == EOF && !stdout_errno)
        stdout_errno = errno;
    return cli_output_written(verb);
}

int cli_print_help(const struct cli_command *c) {
    return cli_write_text(c->name, c->help);
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

void cli_print_overview(FILE *f) {
    fprintf(f, "pvisor %s: run untrusted programs over a staged copy of your workspace\n\n", PVISOR_VERSION);
    fprintf(f, "Usage: pvisor VERB [OPTIONS]\n\nVerbs:\n");
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\nRun 'pvisor help VERB' or 'pvisor VERB --help' for details, 'pvisor --version'\nfor the version.\n");
}

/* argv[0..*argc) with each "--OPT=VALUE" of opts (before a "--") made two
 * arguments, into *ret (malloc'd, NULL-terminated; the strings are
 * argv's, a VALUE a suffix of its argument), *argc updated; *ret NULL when
 * there is none. */
static int split_value_opts(const char *const *opts, int *argc, char **argv, char ***ret) {
    *ret = NULL;
    int extra = 0;
    for (int i = 0; i < *argc && strcmp(argv[i], "--") != 0; i++)
        for (const char *const *o = opts; *o; o++)
            if (strncmp(argv[i], *o, strlen(*o)) == 0 && argv[i][strlen(*o)] == '=')
                extra++;
    if (!extra)
        return 0;
    char **v = calloc((size_t)*argc + (size_t)extra + 1, sizeof *v);
    if (!v)
        return -ENOMEM;
    int n = 0;
    bool done = false;
    for (int i = 0; i < *argc; i++) {
        const char *const *o = opts;
        done = done || strcmp(argv[i], "--") == 0;
        while (!done && *o && !(strncmp(argv[i], *o, strlen(*o)) == 0 && argv[i][strlen(*o)] == '='))
            o++;
        if (!done && *o) {
            argv[i][strlen(*o)] = '\0'; /* "--stage" */
            v[n++] = argv[i];
            v[n++] = argv[i] + strlen(*o) + 1;
        } else
            v[n++] = argv[i];
    }
    *argc = n;
    *ret = v;
    return 0;
}

#ifdef PVISOR_STARTUP_MARKS
static void mark_exit(void) {
    PV_MARK("S_exit");
}
#endif

int main(int argc, char **argv) {
    if (argc < 2) {
        cli_print_overview(stderr);
        return PV_EXIT_USAGE;
    }
    const char *verb = argv[1];
#ifdef PVISOR_STARTUP_MARKS
    if (strcmp(verb, "run") == 0) {
        PV_MARK("S0");
        atexit(mark_exit);
    }
#endif
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
    /* "--stage=DIR" as "--stage DIR" (run takes both itself) */
    _cleanup_free_ char **split = NULL;
    int n = argc - 1;
    if (c->value_opts && split_value_opts(c->value_opts, &n, argv + 1, &split) < 0) {
        fprintf(stderr, "pvisor %s: out of memory\n", verb);
        return PV_EXIT_FAILURE;
    }
    /* A verb that was interrupted (run: a relayed SIGINT, SIGTERM or
     * SIGHUP) returns minus the signal, once its work is recorded and its
     * resources are released. */
    int status = c->run(n, split ? split : argv + 1);
    cli_esc_free();
    if (status < 0)
        return cli_end_by_signal(-status);
    /* output that could not be written: a failure (status, diff, list
     * exited 0 into a full disk); a verb that did work says so itself
     * (cli_report_written) */
    if (status == PV_EXIT_OK && strcmp(c->name, "run") != 0)
        return cli_output_written(verb);
    return status;
}

int cli_end_by_signal(int sig) {
    fflush(NULL);
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigemptyset(&dfl.sa_mask);
    sigaction(sig, &dfl, NULL);
    sigset_t m;
    sigemptyset(&m);
    sigaddset(&m, sig);
    raise(sig);
    sigprocmask(SIG_UNBLOCK, &m, NULL);
    return 128 + sig;
}
