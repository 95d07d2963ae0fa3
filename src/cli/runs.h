/* runs.h: finding and summarising recorded runs (shared by status, list). */
#ifndef PVISOR_CLI_RUNS_H
#define PVISOR_CLI_RUNS_H

#include <jansson.h>
#include <stdbool.h>

#include "evidence/runstore.h"

/* Resolve "latest", NULL, an id or a unique id prefix to a run id. */
int runs_resolve(const char *query, char **ret_id);

/* The state to show: the Bundle's state, except that a "running" Bundle
 * whose supervisor is gone is "interrupted". */
const char *runs_display_state(const json_t *bundle);

/* The stage's state as it is now on disk (the Bundle records the state at
 * the end of the run; a stage may since have been applied, dropped, or its
 * run killed).  NULL when the run has no stage. */
const char *runs_stage_state(const json_t *bundle);

/* Argument i of the Bundle's command, escaped for a terminal (term_escape):
 * from command, or from command_hex when it is not UTF-8.  malloc'd; NULL
 * when the Bundle has no such argument or out of memory. */
char *runs_command_arg_display(const json_t *bundle_command, const json_t *bundle_command_hex, size_t i);

/* Report (cli_error, for verb) that the runs directory could not be read
 * (-r an errno), naming which one (XDG_STATE_HOME's or HOME's): a
 * misplaced one said only "Permission denied".  Returns the exit status. */
int runs_dir_error(const char *verb, int r);

/* Who holds the lock of the stage at stage_path now, for a message: "its
 * run (pid N)", "a 'pvisor restore' (pid N)", "process N (COMM)"; NULL
 * when that cannot be told (no such lock in /proc/locks: another PID
 * namespace, a file system whose inodes it names otherwise).  *ret_run:
 * the holder is a run.  malloc'd. */
char *runs_stage_lock_holder(const char *stage_path, bool *ret_run);

/* Report (cli_error, for verb) that the stage's lock is held, naming what
 * holds it (runs_stage_lock_holder): a run, with run_advice ("stop the run
 * first"); another verb (a restore, a fork), to be waited for; "stop its
 * run first" was said of a restore too.  Returns the exit status. */
int runs_stage_busy_error(const char *verb, const char *stage_path, const char *run_advice);

/* What run id's supervisor leaves in its run directory while the run
 * runs and removes at its end: the HOME view's writes ("home-stage", any
 * depth), its mount point, the agent socket, the Bundle's room.  A
 * supervisor killed (kill -9, the OOM killer) left them for good (the HOME
 * writes, said to be discarded at the run's end, and a drop of the run's
 * stage kept them).  Removed only when no supervisor holds the run
 * directory's lock (runs_hold); best effort. */
void runs_remove_leftovers(const char *id);

#endif
