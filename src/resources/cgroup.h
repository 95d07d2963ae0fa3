/* cgroup.h: the run's cgroup v2 leaf, when a delegated hierarchy allows it.
 *
 * Where: the "0::" line of /proc/self/cgroup names the supervisor's cgroup
 * C relative to the cgroup2 hierarchy, whose mount point comes from
 * /proc/self/mountinfo (pure v2 hosts mount it on /sys/fs/cgroup, hybrid
 * ones on /sys/fs/cgroup/unified).  C is usable when the invoking user can
 * write C, C/cgroup.procs and C/cgroup.subtree_control (a delegated
 * subtree, e.g. `systemd-run --user --scope -p Delegate=yes`, or root).
 *
 * Shape, following cgroup v2's rules:
 *   C/pvisor-<run>            the command's leaf: memory.max (+ memory.swap.max
 *                             0), pids.max; its CPU time is read from cpu.stat
 *   C/pvisor-<run>-supervisor the supervisor, moved here only when C is not
 *                             the root and memory/pids must be enabled in
 *                             C/cgroup.subtree_control ("no internal
 *                             processes": C itself must then hold none)
 * A controller missing from C/cgroup.controllers (not delegated, or bound
 * to a cgroup v1 hierarchy) leaves that limit to the caller's fallback;
 * cpu needs no controller (cpu.stat exists in every cgroup).  Enabling
 * fails with EBUSY when other processes share C: the supervisor moves back.
 * At the end everything is undone in reverse order: cgroup.kill, wait until
 * the leaf is empty, rmdir, controllers we enabled disabled, the supervisor
 * back in C.  If the supervisor is killed, an empty leaf may remain: the
 * supervisor holds a flock(2) on its leaf for the run's life, and the next
 * run in C removes the leaves nobody holds that are empty and older than a
 * minute (as does the delegating scope's end).
 *
 * The leaf also holds pvisor's launcher and the PID namespace's init (two
 * small single-threaded processes): pids.max is the request plus
 * CGROUP_LAUNCHER_TASKS, so pids=N means N processes and threads of the
 * command, as with RLIMIT_NPROC; their memory (a few MiB) counts in mem.
 *
 * Inside the sandbox there is no /sys and no mount, so the command cannot
 * move itself out of its leaf.  Library code: returns -errno, never prints.
 */
#ifndef PVISOR_RESOURCES_CGROUP_H
#define PVISOR_RESOURCES_CGROUP_H

#include <limits.h>
#include <linux/limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "policy/policy.h"
#include "resources/limits.h"

#define CGROUP_LAUNCHER_TASKS 2

struct cgroup_where {
    char mount[PATH_MAX];   /* the cgroup2 mount point; "" when none */
    char path[PATH_MAX];    /* own cgroup in the hierarchy ("/" = its root) */
    char dir[PATH_MAX];     /* own cgroup's directory (mount + path) */
    bool is_root;           /* own cgroup is the hierarchy's root */
    bool memory, pids, cpu; /* listed in own cgroup.controllers */
    bool writable;          /* dir, cgroup.procs and cgroup.subtree_control writable */
    char reason[256];       /* why it is unusable; "" when usable */
};

/* Find the own cgroup v2 directory and what it offers.  0 when it exists
 * and is writable; -ENOENT (no cgroup v2 / not in it), -EACCES (not
 * writable), other -errno; ret->reason says which in words. */
int cgroup_locate(struct cgroup_where *ret);

struct cgroup_run;

/* Create the run's leaf for the requested limits (see the top of file).
 * ret_ok[k] tells which limits the leaf holds.  Returns 0 with *ret_run
 * NULL when none could be taken (ret_reason says why), -errno only for
 * allocation failures.  Must be called while single-threaded. */
int cgroup_run_create(const struct cgroup_where *w, const struct run_limits *want, const char *run_id,
                      struct cgroup_run **ret_run, bool ret_ok[_LIMIT_MAX], char *ret_reason, size_t reason_size);

/* Move pid (not yet exec'd; its children follow it) into the leaf. */
int cgroup_run_attach(struct cgroup_run *run, pid_t pid);

struct dirent;
/* Is de (read from the directory parent_fd) a leaf a dead run left: a
 * "pvisor-*" directory not changed for a minute, that no live supervisor
 * holds locked (each flocks its leaf for the run's life)?  Then a
 * descriptor of it, locked (the lock goes with it), else -1. */
int cgroup_stale_leaf_open(int parent_fd, const struct dirent *de);

/* The CPU time budget (cpu=): milliseconds until it could next be used up,
 * or 0 when it is, in which case the leaf was killed (cgroup.kill).  -1:
 * no budget. */
int64_t cgroup_run_cpu_watch(struct cgroup_run *run);

struct cgroup_stats {
    /* -1: unknown (the file is missing on this kernel). */
    int64_t memory_peak, memory_max_events, oom_events, oom_kill_events;
    int64_t pids_peak, pids_max_events;
    int64_t cpu_usage_usec;
    bool cpu_budget_exhausted; /* cgroup_run_cpu_watch() killed the leaf */
};

/* Read the counters, kill what is left, remove the leaf and undo the
 * changes to C; frees run (NULL is fine).  ret_stats may be NULL.
 * Returns 0, or the first -errno of the cleanup (what remains). */
int cgroup_run_finish(struct cgroup_run *run, struct cgroup_stats *ret_stats);

/* The leaf's path, for the evidence. */
const char *cgroup_run_path(const struct cgroup_run *run);

/* The smallest memory limit of this process's cgroup and of those above
 * it up to the hierarchy's top as this process sees it: cgroup v2's
 * memory.max and cgroup v1's memory.limit_in_bytes, read at their usual
 * mount points (/sys/fs/cgroup when it is a cgroup2 mount, and
 * /sys/fs/cgroup/memory when it is a cgroup v1 one).  A container's
 * memory limit, which a tmpfs's pages count against.  UINT64_MAX when none
 * is set or none can be read. */
uint64_t cgroup_memory_limit(void);

/* Pure parsers (unit-tested). */
/* The path of the "0::" line of /proc/self/cgroup text. */
int cgroup_parse_self(const char *text, char *ret, size_t size);
/* The path of the cgroup v1 line of /proc/self/cgroup text whose
 * hierarchy has controller ("4:memory:/a", "7:cpu,cpuacct:/b"). */
int cgroup_parse_self_v1(const char *text, const char *controller, char *ret, size_t size);
/* The first cgroup2 mount in /proc/self/mountinfo text whose root contains
 * path: its mount point and root (octal escapes decoded). */
int cgroup_parse_mountinfo(const char *text, const char *path, char *ret_mount, size_t mount_size, char *ret_root,
                           size_t root_size);
/* The value of key in a flat keyed file ("key value" lines); "max" is
 * INT64_MAX.  -ENOENT when absent. */
int cgroup_keyed_value(const char *text, const char *key, int64_t *ret);
/* Is word in a space-separated list (cgroup.controllers)? */
bool cgroup_list_has(const char *list, const char *word);

#endif
