/* bundle.h: the Run Bundle, one JSON document per run (docs/bundle.md).
 *
 * The bundle is a jansson object built up during a run and rewritten
 * atomically (temp file + fsync + rename + fsync dir) at each state change:
 * "running" when the command starts, then "finished" or "setup_failed".
 * Requested and effective levels are separate fields for every dimension;
 * nothing here ever upgrades an effective level on its own.
 */
#ifndef PVISOR_EVIDENCE_BUNDLE_H
#define PVISOR_EVIDENCE_BUNDLE_H

#include <stdbool.h>

#include <jansson.h>
#include <time.h>

#include "policy/policy.h"

#define BUNDLE_SCHEMA "pvisor.bundle/1"
#define BUNDLE_FILE "bundle.json"

/* A new bundle in state "starting", every dimension {requested from the
 * policy, effective "unenforced", mechanism "none"}.  NULL on ENOMEM. */
json_t *bundle_new(const char *run_id, const struct run_options *o, const struct policy *p, const char *cwd,
                   const char *workspace, const struct timespec *started);

/* Record the effective level of one dimension with its mechanism, evidence
 * (stolen reference, may be NULL) and an optional note; replaces whatever
 * was recorded for the dimension before (evidence only when given). */
int bundle_set_dimension(json_t *b, enum dimension d, enum level effective, const char *mechanism, json_t *evidence,
                         const char *note);

int bundle_set_executor(json_t *b, const char *effective, const char *mechanism);
int bundle_set_string(json_t *b, const char *key, const char *value);
int bundle_set_json(json_t *b, const char *key, json_t *value); /* steals value */
int bundle_add_warning(json_t *b, const char *msg);

/* Record how the command ended: wait_status as from waitpid(2), and the
 * status pvisor itself exits with. */
int bundle_set_exit(json_t *b, int wait_status, int pvisor_status, const struct timespec *ended);

/* Atomically (re)write BUNDLE_FILE in run_dirfd (temp file + rename);
 * durable: also fsync the file before the rename and the directory after. */
int bundle_write(int run_dirfd, const json_t *b, bool durable);

/* Load BUNDLE_FILE from run_dirfd; -EPROTO when it is not a bundle we know. */
int bundle_read(int run_dirfd, json_t **ret_bundle);

#endif
