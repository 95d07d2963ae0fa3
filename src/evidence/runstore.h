/* runstore.h: recorded runs on disk (see runstore.c). */
#ifndef PVISOR_EVIDENCE_RUNSTORE_H
#define PVISOR_EVIDENCE_RUNSTORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Run ids under the runs directory, newest first (ids sort by start time).
 * *ret_ids is a NULL-terminated malloc'd array of malloc'd strings. */
int runs_list_ids(char ***ret_ids, size_t *ret_n);
void runs_free_ids(char **ids);

/* Load the Bundle of run id. */
int runs_load_bundle(const char *id, json_t **ret_bundle);

/* A run's supervisor holds a shared flock(2) on the run's directory for
 * as long as it lives (runs_hold); until it writes the first Bundle, that
 * lock is how others tell a run still starting from one whose supervisor
 * died before writing any.  runs_starting: the lock of run id is held. */
int runs_hold(int run_dirfd);
bool runs_starting(const char *id);

/* The "schema" of run id's Bundle when it is another than this pvisor
 * reads ("pvisor.bundle/2": a newer pvisor recorded the run; its stage may
 * well be there), else NULL.  As the Bundle has it (not escaped);
 * malloc'd. */
char *runs_bundle_other_schema(const char *id);

#endif
