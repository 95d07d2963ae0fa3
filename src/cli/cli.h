/* cli.h: the command table and the conventions every verb follows.
 *
 * The CLI is the one layer that turns errors into messages: library code
 * returns -errno, a verb prints one line a user can act on and returns an
 * exit status.  Verbs receive argv with argv[0] == the verb's name.
 *
 * Exit statuses (documented in README.md):
 *   0..124   the command's own status (pvisor run), or success/failure of a verb
 *   2        usage error: nothing was done, nothing was written
 *   3        a lifecycle verb did its work (apply applied, drop dropped...)
 *            but its report could not be written to stdout
 *   125      pvisor failed before the command ran (setup, refused policy)
 *   126      the command was found but could not be executed
 *   127      the command was not found
 *   128+N    the command was killed by signal N
 */
#ifndef PVISOR_CLI_CLI_H
#define PVISOR_CLI_CLI_H

#include <locale.h>
#include <stdbool.h>
#include <stdio.h>

#define PV_EXIT_OK 0
#define PV_EXIT_FAILURE 1
#define PV_EXIT_USAGE 2
#define PV_EXIT_UNREPORTED 3
#define PV_EXIT_SETUP 125
#define PV_EXIT_NOEXEC 126
#define PV_EXIT_NOTFOUND 127

/* End pvisor by sig (its default action, unblocked), after stdio is
 * flushed: a shell that was sent the same Ctrl-C then stops its script too
 * (it goes on after a child that merely exited 130).  Returns 128+sig only
 * if the signal did not end the process. */
int cli_end_by_signal(int sig);

/* Terminal cells of s, decoded as UTF-8 (utf8: a C.UTF-8 locale, or 0
 * when there is none: a cell per character then): wide (CJK) characters
 * take two, combining ones none.  What term_escape leaves is valid and
 * printable UTF-8, but a character wcwidth does not know (unassigned in
 * the C library's Unicode, a newer emoji) is -1 there: a terminal shows
 * it in a cell, so one is counted; so is each byte that is not UTF-8. */
size_t cli_columns(const char *s, locale_t utf8);
/* s (not yet escaped: no escape is cut in two) cut in place to at most max
 * cells, never inside a character: its start (head cells at most), "...",
 * and its end ("...project/sub" with head 0). */
void cli_cut(char *s, size_t max, size_t head, locale_t utf8);

struct cli_command {
    const char *name;
    const char *summary; /* one line for `pvisor help` */
    const char *help;    /* full text for `pvisor help VERB` / `pvisor VERB --help` */
    int (*run)(int argc, char **argv);
    /* The options that take a value, which may then be given as
     * "--OPT=VALUE" too (main splits it in two); NULL-terminated, or NULL
     * (run parses its own, policy.c). */
    const char *const *value_opts;
};

int cmd_run(int argc, char **argv);
int cmd_status(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_doctor(int argc, char **argv);
int cmd_version(int argc, char **argv);
int cmd_help(int argc, char **argv);
#ifdef PVISOR_HAVE_LIFECYCLE
/* Stage lifecycle verbs (cmd_diff.c, cmd_apply.c, cmd_drop.c, cmd_review.c,
 * cmd_checkpoint.c, cmd_restore.c, cmd_fork.c). */
int cmd_diff(int argc, char **argv);
int cmd_apply(int argc, char **argv);
int cmd_drop(int argc, char **argv);
int cmd_checkpoint(int argc, char **argv);
int cmd_restore(int argc, char **argv);
int cmd_fork(int argc, char **argv);
/* A name for a checkpoint not named, of the stage whose directory is
 * stage_dir_fd (cmd_checkpoint.c): "cp-<UTC ms>", or with -2, -3, ... when
 * the stage has a checkpoint (or anything else) by that name, one made
 * within the millisecond, an earlier run's; at most tries names are
 * looked at, the last of them is *buf then. */
#define LC_CLI_CHECKPOINT_NAME_MAX 80
void lc_cli_checkpoint_default_name(int stage_dir_fd, unsigned tries, char buf[static LC_CLI_CHECKPOINT_NAME_MAX]);
/* `pvisor status --review [RUN|STAGE] [--json]` */
/* stage_dir: --stage DIR (then arg is NULL) */
int cmd_review(const char *arg, const char *stage_dir, bool as_json);
/* Shared by the lifecycle verbs (cmd_review.c): resolve RUN / --stage DIR
 * to a stage path (printing the error; returns an exit status), and tell a
 * positional STAGE directory from a RUN id. */
struct json_t;
int lc_cli_target(const char *verb, const char *run, const char *stage_dir, char **ret_stage, char **ret_run,
                  struct json_t **ret_bundle);
bool lc_cli_arg_is_stage(const char *arg);
/* The current directory relative to the workspace ws when it is a
 * directory below its top ("src/lib"; malloc'd), else NULL: a PATH of
 * diff and apply --path is relative to the top, which a user in a
 * subdirectory may not expect (a hint names the path from there). */
char *lc_cli_cwd_below(const char *ws);

/* An ordinary user's copy of a stage or checkpoint failed with EACCES (the
 * agent made something unreadable: the run's server could read it, having
 * DAC override in its user namespace): enter a user namespace of our own,
 * with the same override over our own files, for a second try (we are its
 * uid 0, so that what we exec has it too).  True when the caller should try
 * again. */
bool lc_cli_own_files_override(int r);
/* lc_stage_open and lc_changeset_load, a second time with that override
 * after EACCES; on failure *ret_st and *ret_cs are NULL, and *ret_stopped
 * (when ret_stopped is not NULL) the stage's stopped_at (malloc'd) or NULL,
 * *ret_stopped_deleted (when not NULL) its stopped_deleted. */
struct lc_stage;
struct lc_changeset;
/* After a review that showed a changeset ID (lc_stage_changeset_id): when
 * the record a plain apply compares with could not be written, say so on
 * stderr for verb (its ID is then not the one apply checks). */
void lc_cli_note_review_record(const char *verb, const struct lc_stage *st);
int lc_cli_load_changes(const char *stage, struct lc_stage **ret_st, struct lc_changeset **ret_cs, char **ret_stopped,
                        bool *ret_stopped_deleted);
/* Why the stage could not be read, for r = -ELOOP or -ENAMETOOLONG;
 * stopped: where a bound stopped the walk (lc_stage.stopped_at), or NULL. */
const char *lc_cli_bound_reason(int r, const char *stopped);
/* After that error: name where it stopped and how to keep the rest of the
 * stage (nothing when stopped is NULL); deleted: lc_stage.stopped_deleted. */
void lc_cli_bound_hint(const char *verb, const char *stopped, bool deleted, const char *stage);
/* Before reading the contents of cs as an ordinary user: enter that
 * override when a file the changeset compares lacks our read permission
 * (the agent's chmod 000, or one of ours in the workspace).  True when
 * entered. */
bool lc_cli_override_unreadable(const struct lc_changeset *cs);
/* Print, after a verb's error r, how to get past an unreadable stage when
 * r is -EACCES (the agent can take its own read permission away); writes:
 * the verb writes in the workspace, where EACCES has another cause too. */
void lc_cli_unreadable_hint(int r, const char *stage, bool writes);
/* Why the stage at stage could not be opened with ENOENT (its state is
 * neither dropped nor applied): its directory gone, its workspace gone
 * (review and diff compare the stage with it), or no upper/; malloc'd, or
 * NULL: none of those.  Said as it is: "it holds no changes (dropped?)"
 * and "No such file or directory" were said of a workspace moved away,
 * of a stage holding the changes. */
char *lc_cli_missing_reason(const char *stage);
#endif

/* Interrupted applies by workspace (pending_apply.c): apply records the
 * stage before it writes, and clears the record once nothing of the stage
 * is pending; find returns 1 with the stage and workspace (malloc'd) of an
 * interrupted apply, other than except_stage's, into a workspace that
 * overlaps workspace, 0 when there is none, or -errno. */
bool pending_apply_intent(const char *stage); /* an apply of the stage was cut short */
int pending_apply_record(const char *stage, const char *workspace);
void pending_apply_clear(const char *stage);
int pending_apply_find(const char *workspace, const char *except_stage, char **ret_stage, char **ret_workspace);
/* Applies at the same time (pending_apply.c): ws_lock_apply holds the
 * workspace (exclusive) and its ancestors (shared) until ws_lock_release:
 * 0, or -EWOULDBLOCK while another apply holds one of them.
 * ws_apply_running: an apply into workspace or a directory around it is
 * going on now (whatever its state directory). */
struct ws_lock {
    int *fd;
    size_t n;
};
int ws_lock_apply(const char *workspace, struct ws_lock *l);
void ws_lock_release(struct ws_lock *l);
bool ws_apply_running(const char *workspace);

/* The directories agents wrote in with no review between (agent_written.c):
 * a workspace a stage is applied to, a read-write grant of a sandboxed
 * run.  add records path (absolute) once; list gives them all (malloc'd,
 * NULL-terminated).  Both first build a missing record from the recorded
 * runs' Bundles; list answers from them when no record can be had. */
int agent_written_add(const char *path);
int agent_written_list(char ***ret, size_t *ret_n);
/* The stages kept outside the state directory (agent_written.c): add
 * records one (a stage in the state directory is not recorded), list as
 * above. */
int stages_elsewhere_add(const char *path);
int stages_elsewhere_list(char ***ret, size_t *ret_n);

/* The table (cli/main.c).  Planned verbs have run == NULL. */
const struct cli_command *cli_find_command(const char *name);
const struct cli_command *cli_commands(unsigned *ret_n);

/* Print "pvisor VERB: MESSAGE" and a hint to stderr; returns PV_EXIT_USAGE. */
int cli_usage_error(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A single-valued option argv[*i] ("--stage DIR"): *dst = the next
 * argument (*i advanced), or a usage error when it is missing, empty or
 * the option was given before (*dst set).  Returns 0, or the exit status. */
int cli_take_value(const char *verb, int argc, char **argv, int *i, const char **dst);
/* s (NULL: "-") as term_escape writes it, for printing a Bundle's field:
 * valid until 32 more calls, or cli_esc_free(). */
const char *cli_esc(const char *s);
void cli_esc_free(void);
/* After a verb wrote its output to stdout: flush it; PV_EXIT_OK when all of
 * it got there, else "pvisor VERB: cannot write the output: ERROR" on
 * stderr and PV_EXIT_FAILURE (a program whose output was lost failed: a
 * script's 'pvisor status --json > f && ...' goes on with an empty f).
 * main checks every verb that returns PV_EXIT_OK this way (run aside: its
 * status is the command's). */
int cli_output_written(const char *verb);
/* fflush(stdout), keeping the error of a write that fails for
 * cli_output_written and cli_report_written to name (a verb flushes
 * stdout before diff(1) writes to it, or before an error on stderr). */
void cli_flush_stdout(void);
/* The same after a verb that did its work (applied, dropped, made a
 * checkpoint) printed its report: a lost report must not read as a
 * failure of the work (a script would retry, or drop, an applied stage),
 * so it says what was done (the message, as "the stage %s was applied")
 * and returns PV_EXIT_UNREPORTED. */
int cli_report_written(const char *verb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Print "pvisor VERB: MESSAGE" to stderr; returns status. */
int cli_error(int status, const char *verb, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* Print the list of verbs. */
void cli_print_overview(FILE *f);

/* Print text to stdout, then cli_output_written(verb). */
int cli_write_text(const char *verb, const char *text);
/* Print the help of a verb to stdout; returns 0, or 1 when it could not be
 * written (cli_output_written). */
int cli_print_help(const struct cli_command *c);
/* True when argv[1..] is exactly "--help" or "-h" (a verb's help request). */
bool cli_wants_help(int argc, char **argv);

#endif
