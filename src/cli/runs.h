/* runs.h: finding and summarising recorded runs (shared by status, list). */
#ifndef PVISOR_CLI_RUNS_H
#define PVISOR_CLI_RUNS_H

#include <jansson.h>

/* Run ids under the runs directory, newest first (ids sort by start time).
 * *ret_ids is a NULL-terminated malloc'd array of malloc'd strings. */
int runs_list_ids(char ***ret_ids, size_t *ret_n);
void runs_free_ids(char **ids);

/* Resolve "latest", NULL, an id or a unique id prefix to a run id. */
int runs_resolve(const char *query, char **ret_id);

/* Load the Bundle of run id. */
int runs_load_bundle(const char *id, json_t **ret_bundle);

/* The state to show: the Bundle's state, except that a "running" Bundle
 * whose supervisor is gone is "interrupted". */
const char *runs_display_state(const json_t *bundle);

/* The stage's state as it is now on disk (the Bundle records the state at
 * the end of the run; a stage may since have been applied, dropped, or its
 * run killed).  NULL when the run has no stage. */
const char *runs_stage_state(const json_t *bundle);

#endif
