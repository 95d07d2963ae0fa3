/* probe.h: host feature probes and executor readiness (`pvisor doctor`,
 * "kernel_features" in every Run Bundle).
 *
 * Probes test features, never kernel versions: each one performs the real
 * operation (or the cheapest harmless form of it) as the calling uid and
 * records what happened.  Probing never prints and never fails because a
 * feature is missing: a missing feature is data (ok == false, error = -errno,
 * a detail string).  The whole set takes a few milliseconds.
 *
 * Threading: host_probe_run() fork()s a child that calls unshare(); the
 * caller MUST be single-threaded at that point (probe before starting FUSE
 * or broker threads).  The child only runs code already present in this
 * process and leaves with _exit().
 *
 * Readiness (executor_readiness_compute) is a pure function of a probe
 * struct plus the compile-time PVISOR_*_IMPLEMENTED switches below, so it is
 * unit-tested over hand-made structs.  Honesty rule: a readiness value never
 * says ready for something this binary does not implement.
 */
#ifndef PVISOR_EVIDENCE_PROBE_H
#define PVISOR_EVIDENCE_PROBE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include <jansson.h>

/* What this build of pvisor can actually do.  Flip to 1 only in the change
 * that lands (and tests) the capability. */
#define PVISOR_HOST_PLAIN_IMPLEMENTED 1
#ifdef PVISOR_HAVE_OVERLAY /* --safe needs the staged workspace */
#define PVISOR_HOST_SAFE_IMPLEMENTED 1
#else
#define PVISOR_HOST_SAFE_IMPLEMENTED 0
#endif
#define PVISOR_OCI_IMPLEMENTED 0
#define PVISOR_OCI_SAFE_IMPLEMENTED 0
#define PVISOR_VM_IMPLEMENTED 0
#define PVISOR_VM_SAFE_IMPLEMENTED 0

#define PROBE_DETAIL_MAX 256
#define PROBE_PATH_MAX 512

/* Tri-state for facts we may be unable to read: JSON true/false/null. */
enum probe_tristate {
    PROBE_UNKNOWN = -1,
    PROBE_NO = 0,
    PROBE_YES = 1,
};

/* One probed capability.  ok: it works for this uid.  error: 0 when ok,
 * otherwise the -errno of the step that failed (0 if no syscall failed, e.g.
 * "wrong device numbers").  detail: human text, "" when there is nothing to
 * add. */
struct probe_status {
    bool ok;
    int error;
    char detail[PROBE_DETAIL_MAX];
};

struct probe_userns {
    struct probe_status userns;   /* unshare(CLONE_NEWUSER) + one-ID uid/gid map */
    struct probe_status mount_ns; /* each unshare()d separately inside that userns */
    struct probe_status pid_ns;
    struct probe_status net_ns;
    struct probe_status ipc_ns;
    struct probe_status uts_ns;
    struct probe_status tmpfs_mount; /* mount("tmpfs") inside the new mount ns */
    /* Sysctls that explain a failure; -1 when the file does not exist. */
    long unprivileged_userns_clone;             /* kernel.unprivileged_userns_clone */
    long max_user_namespaces;                   /* user.max_user_namespaces */
    long apparmor_restrict_unprivileged_userns; /* kernel.apparmor_restrict_unprivileged_userns */
};

struct probe_fuse {
    struct probe_status usable; /* /dev/fuse is char 10:229 and open(O_RDWR) works */
    bool exists;
    bool is_fuse_chardev;
    bool openable;
};

struct probe_landlock {
    struct probe_status usable;      /* ABI >= 1 and the LSM is active */
    int abi;                         /* 0 when unusable */
    enum probe_tristate lsm_listed;  /* "landlock" in /sys/kernel/security/lsm */
    char lsm_list[PROBE_DETAIL_MAX]; /* that file's content, "" if unreadable */
};

struct probe_seccomp {
    struct probe_status filter; /* SECCOMP_SET_MODE_FILTER is supported */
    int current_mode;           /* PR_GET_SECCOMP: 0 none, 1 strict, 2 filter; -1 unknown */
    bool action_errno;          /* SECCOMP_GET_ACTION_AVAIL for each action */
    bool action_kill_process;
    bool action_user_notif;
};

struct probe_cgroup {
    struct probe_status v2;                                  /* /sys/fs/cgroup is a cgroup2 mount */
    struct probe_status delegated;                           /* writable, with memory and pids: tree-wide --limit */
    char path[PROBE_PATH_MAX];                               /* "0::" path from /proc/self/cgroup, "" unknown */
    char mount[PROBE_PATH_MAX];                              /* the cgroup2 mount point, "" none */
    bool dir_writable;                                       /* W_OK on our cgroup dir (can mkdir a leaf) */
    bool procs_writable;                                     /* W_OK on our cgroup.procs */
    bool parent_writable;                                    /* W_OK on the parent dir (sibling leaf) */
    bool controller_memory, controller_pids, controller_cpu; /* cgroup.controllers */
    bool subtree_memory, subtree_pids, subtree_cpu;          /* cgroup.subtree_control */
};

struct probe_binary {
    bool found;
    char path[PROBE_PATH_MAX]; /* first X_OK match on $PATH, "" if none */
};

struct probe_kvm {
    struct probe_status usable; /* /dev/kvm exists and open(O_RDWR) works */
    bool exists;
};

struct host_probe {
    uid_t uid; /* real uid the probes ran as */
    uid_t euid;
    char kernel_release[65]; /* uname -r, information only */
    char kernel_machine[65]; /* uname -m */
    struct probe_userns userns;
    struct probe_fuse fuse;
    struct probe_landlock landlock;
    struct probe_seccomp seccomp;
    struct probe_status openat2; /* openat2() with RESOLVE_BENEATH|NO_SYMLINKS|NO_MAGICLINKS */
    struct probe_status sha256;  /* SHA-256 (libcrypto's, linked in) hashes "abc" right */
    struct probe_cgroup cgroup;
    struct probe_binary crun;
    struct probe_binary runc;
    struct probe_binary qemu; /* qemu-system-<machine>, else any qemu-system-* */
    struct probe_kvm kvm;
    struct probe_status pidfd_open;
    struct probe_status close_range;
    int no_new_privs; /* PR_GET_NO_NEW_PRIVS: 0/1, -1 unknown */
};

/* Run every probe as the calling uid and fill *ret_probe (zeroed first).
 * Missing features are recorded, not returned: the result is -errno only
 * when probing itself could not run (fork/pipe failure).  Even then
 * *ret_probe holds everything probed so far.  Caller must be
 * single-threaded (see top of file). */
int host_probe_run(struct host_probe *ret_probe);

/* The same probes but the user namespace's (no child, no fork, no
 * namespace made): for a sandboxed run, which makes a user namespace with
 * the same one-ID map, a mount namespace in it, PID, network, IPC and UTS
 * namespaces and a tmpfs mount there itself, every run.  A child that
 * made them too cost more than every other probe together (forking the
 * supervisor and a network namespace made and torn down).  Until
 * probe_namespaces_made_by_run, those statuses say "not tried" (ECANCELED).
 * Safe in a threaded process. */
int host_probe_run_in_process(struct host_probe *ret_probe);

/* What a sandboxed run made itself, from its supervisor's unshare and the
 * launcher's self-check (namespaces that differ from the supervisor's). */
struct probe_run_namespaces {
    bool user;  /* the supervisor's user namespace, one-ID map */
    bool mount; /* a mount namespace in it */
    bool pid, net, ipc, uts;
    bool tmpfs;       /* the sandbox's tmpfs root, mounted in that namespace */
    char uid_map[96]; /* the user namespace's, its lines joined by "; " */
};
/* Fill host_probe_run_in_process's namespace statuses from what the run
 * made: ok where it made one, "not tried" where it made none. */
void probe_namespaces_made_by_run(struct host_probe *p, const struct probe_run_namespaces *made);

/* The "kernel_features" object (schema in docs; keys are stable).  NULL on
 * ENOMEM. */
json_t *probe_to_json(const struct host_probe *p);

/* Distinct from policy.h's enum executor_kind (which has "auto"). */
enum probe_executor {
    PROBE_EXECUTOR_HOST,
    PROBE_EXECUTOR_OCI,
    PROBE_EXECUTOR_VM,
    PROBE_EXECUTOR_COUNT,
};

#define READINESS_MAX_MISSING 16
#define READINESS_MAX_NOTES 4
#define READINESS_REMEDIATION_MAX 768

struct executor_readiness {
    const char *name;         /* "host", "oci", "vm" (static) */
    bool implemented;         /* this binary can run plain runs on it */
    bool safe_implemented;    /* this binary implements --safe on it */
    bool host_features_plain; /* this host has what a plain run needs */
    bool host_features_ready; /* this host has everything --safe needs */
    bool ready_plain;         /* implemented && host_features_plain */
    bool ready_stage;         /* --stage works here: overlay built, /dev/fuse usable, and
                                         (root, or user + mount namespaces) */
    bool ready_safe;          /* safe_implemented && host_features_ready */
    /* Why ready_plain/ready_safe is false although the host may be fine
     * ("not implemented in pvisor X"); NULL otherwise. Static string. */
    const char *reason;
    /* Keys of what --safe needs (a superset of plain needs) and this host
     * lacks: probe_to_json keys, plus "oci_runtime" (neither crun nor runc). */
    const char *missing[READINESS_MAX_MISSING];
    size_t n_missing;
    /* Advisories that block nothing (e.g. no KVM: TCG is slow). Static. */
    const char *notes[READINESS_MAX_NOTES];
    size_t n_notes;
    /* One sentence fixing the host side, "" when nothing is missing. */
    char remediation[READINESS_REMEDIATION_MAX];
};

/* Pure: readiness of executor kind on the host described by p. */
void executor_readiness_compute(const struct host_probe *p, enum probe_executor kind,
                                struct executor_readiness *ret_readiness);

/* {"implemented","safe_implemented","ready_plain","ready_safe",
 *  "host_features_plain","host_features_ready","reason" (string|null),
 *  "missing" [..],"remediation" (string|null),"notes" [..]}.  NULL on ENOMEM. */
json_t *executor_readiness_to_json(const struct executor_readiness *r);

/* {"host":{..},"oci":{..},"vm":{..}}.  NULL on ENOMEM. */
json_t *executors_to_json(const struct host_probe *p);

#endif
