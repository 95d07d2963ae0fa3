/* run_sandbox.h: supervisor side of the sandbox (see run_sandbox.c). */
#ifndef PVISOR_CLI_RUN_SANDBOX_H
#define PVISOR_CLI_RUN_SANDBOX_H

#include <jansson.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdbool.h>
#include <sys/types.h>
#include <termios.h>

#include "cli/run.h"
#include "agent/agent_socket.h"
#include "launch/launch.h"
#include "net/broker.h"
#include "net/dns.h"
#include "overlay/overlay.h"
#include "stage/stage.h"
#include "policy/plan.h"
#include "policy/plan_build.h"
#include "resources/cgroup.h"
#include "resources/limits.h"

#define SANDBOX_WS_MASK_MAX 4096 /* ~190 credential locations, and where links lead, under each of HOME's names */
/* HOME's view: its credential locations, and those of each other home or
 * name of HOME in it (PLAN_OTHER_HOMES), their link targets, moved stores,
 * stages */
#define SANDBOX_HOME_MASK_MAX 4096

/* What the command wrote in HOME's view, discarded at exit
 * (run_home_discard.c): totals, and by group (the first one or two
 * components of a path relative to HOME). */
#define HOME_DISCARD_MAX_GROUPS 1024
struct home_discard_group {
    char *path;
    uint64_t files, dirs, deleted, bytes;
};
struct home_discard {
    bool counted;
    bool at_least; /* the walk stopped short (a bound, an unreadable directory): lower bounds */
    uint64_t files, dirs, deleted, bytes;
    struct home_discard_group *groups; /* ~/.cache's last, by name */
    size_t n_groups;
    bool groups_truncated; /* more than HOME_DISCARD_MAX_GROUPS: the rest is in the totals alone */
};

struct sandbox {
    struct launch_plan plan;
    int plan_fd; /* sealed memfd with the plan JSON */
    int sync_r, sync_w;
    int go_r, go_w;           /* the supervisor's go-ahead after reading the evidence */
    int end_r, end_w;         /* init's messages (LAUNCH_END_FD): the broker's socket, the count of leftovers */
    int leftovers;            /* init's count of them, once read (-1 before) */
    bool leftovers_uncounted; /* init said it could not count them (LAUNCH_LEFTOVERS_UNKNOWN) */
    int stdio_lost_fd, stdio_lost_errno; /* init said the command's fd 1 or 2 failed a write ("stdio FD ERRNO") */
    bool end_creds;                      /* end_r passes the senders' credentials (the launcher's "end") */
    int tmpfs_fd[LAUNCH_TMPFS_N];        /* init's private /tmp and /dev/shm (run_sandbox_tmpfs.c), or -1 */
    int pass[4];                         /* {plan_fd, sync_w, go_r, end_w}: the launcher's fd 3, 4, 5, 6 */
    /* As root: the idmapped clones of the read-only projections (their
     * descriptors, in the plan too, inherited by the launcher), or why
     * there are none (launch_idmap_projections). */
    int *keep;
    int n_keep;
    bool as_root;         /* pvisor was run by root (getuid() before any namespace) */
    bool home_system;     /* HOME is, holds or lies in a system directory (plan_home_is_system) */
    bool home_in_ws;      /* HOME is or lies in the workspace: the workspace view serves it (staged) */
    int n_home_sys_hides; /* then: its credential locations the plan covers */
    int idmap_failed;     /* projections left plain binds */
    char idmap_why[256];
    char host_userns[64];         /* pvisor's own user namespace as it started (/proc/self/ns/user), "" unknown */
    json_t *report;               /* the launcher's report, once read */
    char rbuf[LAUNCH_REPORT_MAX]; /* sync pipe bytes read but not consumed */
    size_t rlen;
    bool reof;
    bool exec_failed;       /* controls were installed but exec of the command failed */
    const char *refused;    /* set when the supervisor refused to let the command run */
    int interrupted;        /* the go-ahead was not given: this signal was pending (run_interrupted) */
    bool go_given;          /* the command was let go (its exec may still fail) */
    char refused_why[1024]; /* the message for that refusal */
    struct run_context *ctx;
    struct agent_socket *agent; /* the Run-scoped agent socket, or NULL */
    struct broker *broker;      /* the egress broker (--allow-net), or NULL */
    struct dns_stub *dns;       /* the run's name server (plan.dns_stub), or NULL */
    /* The copy-on-write view of HOME (discarded at exit), or home_fd < 0. */
    int home_fd;
    struct stage *home_stage;
    struct overlay *home_ov;
    char *home_view; /* its mount point (run_dir/home-view) */
    char *home_stage_path;
    char *home_path;  /* HOME, resolved */
    char *home_state; /* pvisor's state directory, relative to HOME, when it lies there (the views' no_walk) */
    /* Credential locations (relative to HOME) the view's server masks, and
     * those below a symlinked parent that the launcher covers with mounts
     * instead. */
    const char *home_mask[SANDBOX_HOME_MASK_MAX];
    size_t n_home_mask;
    const char *home_hide[96];
    size_t n_home_hide;
    /* Masks not from the fixed list, owned (also in home_mask): where a
     * credential location reached through a symlink leads inside HOME, and
     * pvisor's own state when XDG_STATE_HOME puts it under HOME, stages
     * kept elsewhere in HOME (stages_elsewhere_list), the credential
     * locations of the other homes in HOME's view (pw_home). */
    char *home_owned_mask[SANDBOX_HOME_MASK_MAX];
    size_t n_home_owned_mask;
    int n_home_other; /* how many of pw_home lie in HOME's view (their credential locations masked there) */
    /* Paths (relative to the workspace, owned) the workspace view's server
     * masks (ws_mask: none at present) and seals (masked, and nothing may
     * be created there): credential locations of HOME that are in the
     * workspace, as named and where their links lead, and --access deny:
     * paths in it. */
    char *ws_mask[SANDBOX_WS_MASK_MAX];
    size_t n_ws_mask;
    char *ws_sealed[SANDBOX_WS_MASK_MAX];
    size_t n_ws_sealed;
    /* Where each of plan_credential_paths leads in HOME now (resolve_loose;
     * an entry is NULL when it leads nowhere), resolved once for the HOME
     * view and the workspace view alike; NULL when there is no HOME. */
    char **cred_real;
    /* Other homes whose credential locations are kept from the command as
     * HOME's are (plan_inputs.pw_home: the user's passwd home when HOME
     * names another, sudo's caller's), and cred_real for each; NULL when
     * none. */
    char *pw_home[PLAN_OTHER_HOMES];
    char **pw_cred_real[PLAN_OTHER_HOMES];
    /* Credential locations the environment moves elsewhere
     * (plan_moved_credentials). */
    char **cred_moved;
    pthread_t home_thread; /* tearing the view down at the end of the run */
    bool home_thread_started;
    /* posted by that thread once home_discard is filled, before it removes
     * the stage (initialised when home_counted_ready) */
    sem_t home_counted;
    bool home_counted_ready, home_count_waited;
    struct home_discard home_discard;
    bool home_rm_failed;
    int home_links_unknown; /* the HOME view's overlay_stats.links_unknown */
    int home_start_r;       /* sandbox_start_home's result, when run on a thread */
    /* --limit: which mechanism holds each limit; the run's cgroup leaf (or
     * NULL) and, when a limit could not use one, why. */
    struct limits_decision limits;
    struct cgroup_run *cg;
    char cg_path[PATH_MAX];      /* the leaf's directory, "" none */
    char cg_hierarchy[PATH_MAX]; /* the leaf as /proc/<pid>/cgroup names it */
    char cg_reason[300];
    /* policy_tmpfs_max of the host's memory, pvisor's cgroup's limit and
     * --limit mem=: the default /tmp's and /dev/shm's bound, and the most
     * a full one is told to take */
    uint64_t tmpfs_max;
    enum tmpfs_bound tmpfs_bound; /* which of the three it is half of */
    /* plan.tty_input: the user's terminal is in raw mode while the command
     * runs (the keys go to its pty); its modes to restore. */
    bool tty_raw;
    struct termios tty_saved;
    pid_t tty_guard;  /* restores tty_saved if we die with the terminal raw (SIGKILL), or 0 */
    int tty_guard_fd; /* its socket: 'd' and close when we restored it ourselves */
    /* The --access/--allow-write rules as resolved ({"kind","path"}; the
     * Bundle's evidence), and how many grant read-write, the number of
     * those in or around HOME among them. */
    json_t *rules;
    json_t *env_dropped; /* names of the variables the command does not get (the Bundle's evidence) */
    int n_rw, n_rw_home;
    int n_grant_missing_creds;     /* credential locations in grants that did not exist at start */
    char grant_missing_first[256]; /* the first of them, for the messages */
};

/* A sandbox that holds nothing yet, on pages of its own that the kernel
 * zero-fills as they are first touched (sandbox_delete unmaps them; release
 * it first): most of its 140 KB (the masks' tables, the report buffer)
 * stays unused, and zeroing it on the stack faulted in every page of it,
 * three times a run.  NULL when out of memory. */
struct sandbox *sandbox_new(struct run_context *ctx);
void sandbox_delete(struct sandbox *sb);
static inline void sandbox_deletep(struct sandbox **sb) {
    sandbox_delete(*sb);
}

/* After the run: how many processes init found alive in the PID namespace
 * when the command ended (killed by its end); 0 when it could not count. */
int sandbox_read_leftovers(struct sandbox *sb);
/* exec_spec.end_ready: has the launcher (pid launcher) said the run's end
 * on LAUNCH_END_FD?  Then true, with its wait status. */
bool sandbox_end_ready(struct sandbox *sb, pid_t launcher, int *ret_wait_status);
/* hooks (may be NULL): what the agent socket does for checkpoint requests. */
/* HOME (resolved) and its credential locations, resolved once before the
 * run is recorded and handed to the planning (run_context.creds). */
struct sandbox_creds {
    char *home;
    char **cred_real;
    char *pw_home[PLAN_OTHER_HOMES];
    char **pw_cred_real[PLAN_OTHER_HOMES];
    char **cred_moved;
};
void sandbox_creds_free(struct sandbox_creds *c);
/* Before the run is recorded: does o reach a credential location the
 * sandbox keeps from the command (a grant of one, a workspace in one)?
 * -EPERM and the message plan_build gives (*ret_error), else 0 and what
 * was resolved in *ret_creds (NULL when it could not be: the planning
 * resolves it again and reports what failed). */
int sandbox_check_credentials(const struct run_options *o, const char *workspace, const char *cwd,
                              struct sandbox_creds **ret_creds, char **ret_error);
int sandbox_prepare(struct run_context *ctx, const struct agent_hooks *hooks, struct sandbox *ret_sb, char **ret_error);
void sandbox_read_report(pid_t child, void *userdata);
bool sandbox_report_ok(const struct sandbox *sb);
/* Why the launcher gave no usable report: its step and message, or how it
 * ended (exec_errno: its own exec failed; wait_status: its end). */
const char *sandbox_report_error(const struct sandbox *sb, int exec_errno, int wait_status, char *buf, size_t size);
void sandbox_record(struct run_context *ctx, const struct sandbox *sb);
void sandbox_release(struct sandbox *sb);
/* The same, but a HOME view still being removed (sandbox_release_home_async)
 * is left to its thread, so that the run's last Bundle is written
 * meanwhile; sandbox_end_home waits for it then. */
void sandbox_release_but_home(struct sandbox *sb);
/* Wait for that removal; true when it failed, which is then a warning in
 * the Bundle (not written: the caller writes it again). */
bool sandbox_end_home(struct sandbox *sb);
/* Once the command's tree is gone: stop the egress broker, record what it
 * brokered in the Bundle ("egress") and say what it refused, and when a
 * command that failed asked it for nothing, that a client may have
 * ignored the proxy (no-op without --allow-net); stop the run's name
 * server, record the names looked up ("dns") and say which. */
void sandbox_finish_egress(struct sandbox *sb, bool command_failed);

/* One of init's messages on LAUNCH_END_FD, without waiting: its bytes in
 * data (at most size - 1, NUL-terminated) and the descriptor it carried
 * (close-on-exec), or -1, in *ret_fd.  Its length, or -errno (-EAGAIN:
 * none waiting; -EPROTO: cut short, its descriptor closed). */
ssize_t sandbox_receive_end(struct sandbox *sb, char *data, size_t size, int *ret_fd);

/* run_sandbox_tmpfs.c: the sandbox's private /tmp and /dev/shm.  After
 * the report (before the go-ahead): take init's descriptors of them from
 * LAUNCH_END_FD.  Once the command's tree is gone: record each one's use
 * in the resources evidence ("private_tmpfs"), say (stderr, a Bundle
 * warning) which was full or nearly, and close them.  Close them without
 * a record (the run ended otherwise). */
void sandbox_receive_tmpfs(struct sandbox *sb);
void sandbox_finish_tmpfs(struct sandbox *sb);
void sandbox_close_tmpfs(struct sandbox *sb);

/* Give the user's terminal its modes back (no-op unless it was made raw). */
void sandbox_restore_tty(struct sandbox *sb);

/* After the fork, in the run's mount namespace: mount the HOME view. */
int sandbox_start_home(struct sandbox *sb);

/* Once the command's whole tree is gone: start unmounting the HOME view and
 * removing its stage on a thread (sandbox_release, or sandbox_end_home,
 * waits for it). */
void sandbox_release_home_async(struct sandbox *sb);

/* Once the run's end is known, before its last Bundle is written: wait
 * for the count of what the command wrote in HOME's view (the teardown's
 * thread takes it before it removes the stage), record it in the Bundle
 * (home_discarded) and, when there was anything, say on stderr that it was
 * discarded.  No-op without that thread. */
void sandbox_note_home_discarded(struct sandbox *sb);
/* run_home_discard.c: count what upper_fd (a view's upper/) holds over
 * lower_fd (its lower) into ret (zeroed; free with home_discard_free);
 * masks: the view's (relative to lower), whose names were never the
 * command's to delete. */
void home_discard_count(int upper_fd, int lower_fd, const char *const *masks, size_t n_masks, struct home_discard *ret);
void home_discard_free(struct home_discard *d);

/* After the fork, before the launcher runs: move it into the run's cgroup
 * leaf (no-op without one). */
int sandbox_attach_cgroup(struct sandbox *sb, pid_t child);

/* exec_spec.watch for the cgroup CPU-time budget (see exec.h). */
int64_t sandbox_cpu_watch(void *userdata);

/* Once the command's tree is gone: read the leaf's counters into the
 * resources evidence, kill what is left, remove the leaf; and say a
 * per-process CPU limit's end (wait_status: the command's, or 0). */
void sandbox_finish_resources(struct sandbox *sb, int wait_status);

/* run_sandbox_home.c, for run_sandbox.c: HOME and its credentials. */
struct plan_inputs;
struct access_rule;
/* HOME (resolved, or NULL) in *ret_home, and the credential locations the
 * sandbox keeps from the command into sb; on failure, what went wrong in
 * *ret_error (or NULL); sb holds what was resolved so far. */
int sandbox_resolve_home_credentials(const char *cwd, const char *workspace, const struct run_options *o,
                                     struct sandbox *sb, char **ret_home, char **ret_error);
/* The credential locations sb holds, as plan_build takes them. */
void sandbox_credentials_into(const struct sandbox *sb, struct plan_inputs *in);
/* Free them (sb's cred_moved, pw_home, pw_cred_real, cred_real). */
void sandbox_release_credentials(struct sandbox *sb);
/* Move those sandbox_check_credentials resolved from sb into c (to_sb
 * false), or back from c into sb (to_sb true). */
void sandbox_move_credentials(struct sandbox_creds *c, struct sandbox *sb, bool to_sb);
/* Count the credential locations inside the grant at path that do not
 * exist at start (a cover needs something to cover). */
void sandbox_grant_missing_creds(const char *home, struct sandbox *sb, const char *path);
/* The workspace view's masks: credential locations in it, other stages,
 * --access deny: paths in it. */
int sandbox_prepare_ws_mask(struct run_context *ctx, const char *home, const struct access_rule *rules, size_t n_rules,
                            struct sandbox *sb);
/* HOME as a copy-on-write view (a throwaway stage in the run directory). */
int sandbox_prepare_home_view(struct run_context *ctx, const char *home, struct sandbox *sb);
/* Stop it and remove its stage; true when the removal failed. */
bool sandbox_release_home_view(struct sandbox *sb);

/* run_sandbox_runtime.c: the host directories the command needs projected
 * (toolchains outside the system's), into l (free with dirlist_free). */
#define MAX_RUNTIME_DIRS 64
struct dirlist {
    char *v[MAX_RUNTIME_DIRS];
    size_t n;
};
void dirlist_free(struct dirlist *l);
/* The warning for overlay_stats.links_unknown r (static storage). */
const char *sandbox_links_unknown_warning(int r);
void sandbox_gather_runtime(const struct run_context *ctx, const char *home, struct dirlist *l);
/* Does resolving path (a read-write grant's, as given) follow a symlink
 * that lies in a directory agents wrote in (the workspace, an applied
 * one, an earlier run's read-write grant: agent_written.c)?  1 and
 * *ret_link (that link, malloc'd); 0; -errno. */
int sandbox_grant_agent_link(const struct run_context *ctx, const char *path, char **ret_link);

#endif
