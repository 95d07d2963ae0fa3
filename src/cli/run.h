/* run.h: the body of `pvisor run` once the request has been accepted and
 * its run directory exists (cli/run_exec.c).  Shared by the plain and the
 * staged paths so the Bundle is written the same way for both. */
#ifndef PVISOR_CLI_RUN_H
#define PVISOR_CLI_RUN_H

#include <jansson.h>
#include <signal.h>
#include <stdbool.h>

#include "evidence/probe.h"
#include "policy/policy.h"

struct sandbox_creds;

struct run_context {
    const struct run_options *opts;
    const struct policy *policy;
    const char *run_id;
    const char *run_dir;
    int run_dirfd;
    const char *workspace; /* absolute, resolved */
    const char *cwd;       /* absolute */
    /* A sandboxed run: HOME's credential locations as resolved before the
     * run was recorded, taken by the planning (sandbox_prepare); or NULL. */
    struct sandbox_creds *creds;
    json_t *bundle; /* borrowed; updated and rewritten as the run goes */
    /* The host probes run in a child while the run is set up; their JSON
     * arrives on probe_fd and goes into the Bundle (run_probe_collect);
     * the child exits once it has written it. */
    int probe_fd; /* -1: none pending */
    pid_t probe_pid;
    /* A sandboxed run's probes, taken in the supervisor without the user
     * namespace's child (run_probe_in_process): kept until the sandbox's
     * evidence shows the namespaces the run made itself; or NULL. */
    struct host_probe *probe;
    /* A run cut short by a SIGINT, SIGTERM or SIGHUP sent to pvisor and
     * relayed to the command: pvisor ends by that signal once the run is
     * recorded (cli_end_by_signal), as a program that was interrupted
     * should, whatever the command exited with on it; 0: none. */
    int end_signal;
    /* From the run directory's creation, the SIGINT, SIGTERM and SIGHUP
     * pvisor relays are held back (blocked) until the command runs: one
     * that came before is this run's end (run_interrupted), not pvisor's
     * death half-way.  child_sigmask: the mask before, the command's. */
    sigset_t child_sigmask;
    bool held_signals;
    int start_interrupted; /* pending when the command was to start */
};

/* Runs the command and returns pvisor's exit status. */
int run_execute(struct run_context *ctx);

/* Whether this build can stage a workspace (--stage). */
bool run_stage_supported(void);

struct exec_spec;
struct exec_result;

/* A warning about the run: into the Bundle, and on stderr ("pvisor run:
 * warning: ..."); at most 2 KiB. */
void run_warn(json_t *bundle, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Record a failure before the command ran (state setup_failed), print it,
 * return 125. */
int run_fail_setup(struct run_context *ctx, const char *reason);

/* Hold back the SIGINT, SIGTERM and SIGHUP pvisor relays (not one it was
 * started ignoring) from now on (ctx->held_signals); which of them is
 * pending (the first), or 0. */
void run_hold_signals(struct run_context *ctx);
int run_pending_interrupt(void);

/* The run was interrupted by sig before its command started: recorded
 * (state interrupted, exit.interrupted_by), said once; returns 128+sig and
 * sets ctx->end_signal, so pvisor ends by it. */
int run_interrupted(struct run_context *ctx, int sig);

/* Write the Bundle that says "running" (a sandboxed run: once the
 * launcher was exec'd, before the command may start). */
int run_write_running(struct run_context *ctx);
/* Write the Bundle as it is now. */
int run_write_bundle(struct run_context *ctx);
/* The warning for a final Bundle run_write_bundle could not write (r < 0;
 * nothing for r >= 0). */
void run_warn_bundle_unwritten(int r);

/* Record how the command ended (r: result of starting it) and return
 * pvisor's exit status. */
int run_finish(struct run_context *ctx, int r, const struct exec_result *res);

/* The staged path (cli/run_stage.c). */
int run_execute_staged(struct run_context *ctx,
                       int (*run_command)(struct run_context *, struct exec_spec *, struct exec_result *));

/* Absolute path of the stage directory (--stage DIR, or run_dir/stage for
 * 'auto'), without creating it; the parent of DIR must exist. */
int run_stage_path(const struct run_context *ctx, char **ret_path);

/* Refuse a stage location that contains the workspace or lies inside it.
 * On error *ret_error is a malloc'd message. */
int run_check_stage_location(const struct run_context *ctx, char **ret_error);
/* Can the Bundle and the stage's meta.json record path as a JSON string
 * (valid UTF-8)?  The workspace and stage paths must be: they are looked
 * up by name. */
bool run_path_recordable(const char *path);

/* The first dimension the policy requested that the Bundle does not record
 * as effectively enforced, or NULL (--strict); why: each such dimension,
 * its level and the Bundle's first note on it ("resources is partial: ..."). */
const char *run_strict_violation(const struct run_context *ctx, char *why, size_t size);

/* Grace period between a forwarded termination signal and SIGKILL. */
int run_kill_grace_ms(void);

/* Host feature probes into the Bundle's kernel_features. */
void run_probe_into_bundle(json_t *bundle);

/* Start the host probes in a child (single-threaded callers only); collect
 * them into the Bundle (waits for the child; a no-op when none is pending). */
void run_probe_start(struct run_context *ctx);
/* A sandboxed run's probes: in the supervisor, without a child (see
 * host_probe_run_in_process); the namespaces come from the sandbox's
 * evidence (run_probe_namespaces_made). */
void run_probe_in_process(struct run_context *ctx);
void run_probe_namespaces_made(struct run_context *ctx, const struct probe_run_namespaces *made);
void run_probe_collect(struct run_context *ctx);

#endif
