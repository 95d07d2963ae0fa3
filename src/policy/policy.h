/* policy.h: `pvisor run` options -> an immutable policy (pure, no syscalls).
 *
 * Parsing produces struct run_options; policy_build() derives, per
 * dimension, the level the user *requested*.  What the executor actually
 * installs (the *effective* level) is decided elsewhere and recorded beside
 * it in the Run Bundle; the two are never merged.
 */
#ifndef PVISOR_POLICY_POLICY_H
#define PVISOR_POLICY_POLICY_H

#include <stdbool.h>
#include <stdint.h>

#include "net/egress.h"

enum level {
    LEVEL_NONE,        /* not requested */
    LEVEL_UNENFORCED,  /* ambient host access */
    LEVEL_COOPERATIVE, /* works only if the agent honours it */
    LEVEL_ENFORCED,    /* kernel-enforced, not bypassable by the agent tree */
    LEVEL_UNAVAILABLE, /* requested, but this host/build cannot install it */
    LEVEL_PARTIAL,     /* kernel-enforced on each process, not on the whole tree */
    _LEVEL_MAX,
};

enum dimension {
    DIM_WORKSPACE_WRITES,
    DIM_HOST_WRITES,
    DIM_READS,
    DIM_SENSITIVE_PATHS,
    DIM_NETWORK,
    DIM_HOME_CREDENTIALS,
    DIM_CHILD_PROCESSES,
    DIM_SYSCALLS,
    DIM_DEVICES,
    DIM_IPC,
    DIM_RESOURCES,
    _DIM_MAX,
};

enum filesystem_mode { FILESYSTEM_HOST, FILESYSTEM_SANDBOX };

#define POLICY_MAX_PASS_ENV 64
#define POLICY_MAX_ACCESS 64

enum access_kind { ACCESS_DENY, ACCESS_RO, ACCESS_RW };

struct access_rule {
    enum access_kind kind;
    const char *path; /* as given; the CLI resolves it */
};
enum executor_kind { EXECUTOR_AUTO, EXECUTOR_HOST, EXECUTOR_OCI, EXECUTOR_VM };

/* --stage-max-bytes and --stage-max-inodes: at most 1024T each.  The launch
 * plan and the Bundle carry them as JSON integers (int64): a larger value
 * was accepted, then recorded as negative and refused by the launcher. */
#define POLICY_STAGE_QUOTA_MAX (1ULL << 50)

/* --limit: resource limits for the command's whole process tree (0 = not
 * requested).  How each is installed (a cgroup v2 leaf, or a weaker
 * per-process rlimit) is decided by the supervisor and recorded per limit. */
#define POLICY_LIMIT_MEM_MIN (1ULL << 20)         /* 1 MiB */
#define POLICY_LIMIT_MEM_MAX (1ULL << 50)         /* 1 PiB */
#define POLICY_LIMIT_PIDS_MAX 4194304ULL          /* PID_MAX_LIMIT */
#define POLICY_LIMIT_CPU_MAX_S (7ULL * 24 * 3600) /* a week of CPU time */
/* tmp=SIZE, shm=SIZE: the size of the sandbox's private /tmp and /dev/shm
 * (tmpfs, one inode per 2 KiB of it), not limits of the tree: the kernel
 * holds them whatever the host.  The supervisor bounds them further by
 * the memory the run may use (cmd_run.c: at most half of the host's, or
 * of its cgroup's limit or mem= when less: policy_tmpfs_max). */
#define POLICY_TMPFS_MIN (1ULL << 20)    /* 1 MiB */
#define POLICY_TMPFS_MAX (1ULL << 50)    /* 1 PiB (parsing; the host's memory bounds it first) */
#define POLICY_TMP_DEFAULT (1ULL << 30)  /* /tmp without tmp=: 1 GiB, or plan_inputs.tmpfs_max when less */
#define POLICY_SHM_DEFAULT (64ULL << 20) /* /dev/shm without shm=: 64 MiB, or plan_inputs.tmpfs_max when less */
/* What bounds the sandbox's /tmp and /dev/shm (policy_tmpfs_max). */
enum tmpfs_bound {
    TMPFS_BY_HOST,   /* the host's memory */
    TMPFS_BY_CGROUP, /* the memory limit of pvisor's cgroup */
    TMPFS_BY_MEM,    /* --limit mem= */
};
/* The largest tmpfs size a run takes for the sandbox's /tmp and /dev/shm:
 * half of the least of the host's memory (sysinfo's total RAM, a tmpfs's
 * default size: their files are kept in memory), cgroup_limit (the memory
 * limit of pvisor's cgroup, a container's: the tmpfs's pages count
 * against it; UINT64_MAX or 0: none) and mem_limit (--limit mem=, the
 * memory the run's tree may use; 0: none); 0 when none is known.
 * *ret_by (may be NULL): which was the least. */
uint64_t policy_tmpfs_max(uint64_t cgroup_limit, uint64_t mem_limit, enum tmpfs_bound *ret_by);
/* "this host's memory", "the memory limit of pvisor's cgroup", "--limit mem" */
const char *policy_tmpfs_bound_name(enum tmpfs_bound b);
struct run_limits {
    uint64_t mem_bytes; /* mem=SIZE: memory of the tree */
    uint64_t pids;      /* pids=N: processes and threads alive at once */
    uint64_t cpu_s;     /* cpu=DURATION: CPU time, in seconds */
    uint64_t tmp_bytes; /* tmp=SIZE: the private /tmp's size */
    uint64_t shm_bytes; /* shm=SIZE: the private /dev/shm's size */
};
enum durability { DURABILITY_CHECKPOINT, DURABILITY_STRICT };

struct run_options {
    bool help;
    bool safe;
    bool strict;
    enum filesystem_mode filesystem;
    enum executor_kind executor;
    const char *stage;     /* NULL: none; "auto": owned stage in the run dir */
    const char *workspace; /* NULL: the current directory */
    enum durability durability;
    bool durability_set;
    uint64_t stage_max_bytes;                       /* 0 = unlimited */
    uint64_t stage_max_inodes;                      /* 0 = unlimited */
    uint64_t timeout_ms;                            /* --timeout; 0 = none */
    bool network_loopback;                          /* --network loopback: TCP on the sandbox's own loopback */
    bool network_set;                               /* --network given */
    struct egress_rule allow_net[EGRESS_MAX_RULES]; /* --allow-net, in order: the egress broker's allowlist */
    int n_allow_net;
    struct run_limits limits;                     /* --limit, merged */
    const char *pass_env[POLICY_MAX_PASS_ENV];    /* --pass-env NAME, in order */
    struct access_rule access[POLICY_MAX_ACCESS]; /* --access, --allow-write, in order */
    int n_access;
    int n_pass_env;
    int cmd_argc;
    char **cmd_argv; /* points into the caller's argv; NULL-terminated */
};

struct policy {
    enum level requested[_DIM_MAX];
};

const char *level_name(enum level l);
const char *dimension_name(enum dimension d);
const char *executor_name(enum executor_kind e);
const char *access_kind_name(enum access_kind k); /* "deny", "ro", "rw" */
const char *filesystem_name(enum filesystem_mode f);
const char *durability_name(enum durability d);

/* Parse `run` arguments (argv[0] is the verb).  On a usage error returns
 * -EINVAL and a malloc'd one-line message in *ret_error (the caller prints
 * it and frees it).  ret_opts is written only on success. */
int policy_parse_run(int argc, char **argv, struct run_options *ret_opts, char **ret_error);

/* Parse a duration: N, Ns, Nm, Nh (seconds by default), 1 s .. 7 days. */
int policy_parse_duration(const char *s, uint64_t *ret_ms);

/* Parse one --limit value, "KEY=VALUE[,KEY=VALUE...]" with KEY one of mem
 * (a size: 512M, 2G), pids (a count), cpu (a duration of CPU time: 90,
 * 30s, 10m, 2h), tmp and shm (sizes, 1M up), merging into *limits.  A key already set (here or by an
 * earlier --limit) is an error.  On -EINVAL *ret_error is a malloc'd
 * one-line message; *limits may then be partly updated. */
int policy_parse_limits(const char *spec, struct run_limits *limits, char **ret_error);

/* True when a limit of the command's tree (mem, pids, cpu) was given: the
 * resources dimension is requested. */
bool policy_has_limits(const struct run_limits *l);
/* True when tmp= or shm= was given. */
bool policy_has_tmpfs_sizes(const struct run_limits *l);

/* Requested level per dimension for these options. */
void policy_build(const struct run_options *o, struct policy *ret_policy);

/* True when the options ask for a stage (explicit --stage, or implied). */
bool policy_wants_stage(const struct run_options *o);

/* True when the options ask for the sandbox boundary (--safe or
 * --filesystem sandbox). */
bool policy_wants_sandbox(const struct run_options *o);

/* Whether the network is denied (--safe). */
bool policy_denies_network(const struct run_options *o);

#endif
