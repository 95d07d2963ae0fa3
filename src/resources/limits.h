/* limits.h: which mechanism installs each --limit, and what that is worth
 * (pure, no system calls; unit-tested).
 *
 * Tree-wide mechanisms bound the command's whole process tree together:
 *  - a cgroup v2 leaf (memory.max, pids.max; CPU time from cpu.stat, which
 *    the supervisor watches and ends with cgroup.kill);
 *  - for pids without a cgroup: RLIMIT_NPROC, which the kernel counts per
 *    (user namespace, uid).  The command runs in a user namespace of its
 *    own, so the count is this run's processes and threads only.  The
 *    kernel never applies RLIMIT_NPROC to host uid 0, so as root it is
 *    unavailable.
 * Per-process mechanisms (RLIMIT_AS for mem, RLIMIT_CPU for cpu) bound each
 * process on its own: N processes may use N times the limit.  The resources
 * dimension is `enforced` only when every requested limit is tree-wide,
 * `unavailable` when one has no mechanism at all, `partial` otherwise.
 */
#ifndef PVISOR_RESOURCES_LIMITS_H
#define PVISOR_RESOURCES_LIMITS_H

#include <stdbool.h>
#include <stdint.h>

#include "policy/policy.h"

enum limit_kind { LIMIT_MEM, LIMIT_PIDS, LIMIT_CPU, _LIMIT_MAX };

enum limit_mechanism {
    LIMIT_MECH_NONE,           /* not requested */
    LIMIT_MECH_CGROUP,         /* the run's cgroup v2 leaf: the whole tree */
    LIMIT_MECH_RLIMIT_USERNS,  /* RLIMIT_NPROC in the run's own user namespace: the whole tree */
    LIMIT_MECH_RLIMIT_PROCESS, /* a per-process rlimit: each process on its own */
    LIMIT_MECH_UNAVAILABLE,    /* requested, nothing here can install it */
};

struct limits_decision {
    enum limit_mechanism mech[_LIMIT_MAX];
    /* rlimits the launcher sets on the command (0: inherit). */
    uint64_t rlimit_as, rlimit_cpu, rlimit_nproc;
    enum level level; /* LEVEL_NONE when nothing was requested */
};

/* Decide per limit: the cgroup when cgroup_ok[k] (the run's leaf can take
 * limit k), else the rlimit fallback.  host_root: the command's processes
 * belong to host uid 0 (RLIMIT_NPROC does not apply to it). */
void limits_decide(const struct run_limits *req, const bool cgroup_ok[_LIMIT_MAX], bool host_root,
                   struct limits_decision *ret);

/* The requested value of limit k (bytes, count, CPU seconds); 0: none. */
uint64_t limits_value(const struct run_limits *req, enum limit_kind k);

const char *limit_name(enum limit_kind k);                /* "mem", "pids", "cpu" */
const char *limit_mechanism_name(enum limit_mechanism m); /* documented in docs/bundle.md */
bool limit_mechanism_tree_wide(enum limit_mechanism m);

#endif
