/* Unit tests: which mechanism holds each --limit (resources/limits.c) and
 * the cgroup file parsers (resources/cgroup.c). */
#include "resources/cgroup.h"
#include "resources/limits.h"
#include "tap.h"

#include <errno.h>
#include <stdint.h>

int main(void) {
    struct limits_decision d;
    struct run_limits all = {.mem_bytes = 1ULL << 30, .pids = 100, .cpu_s = 60};
    bool cg_all[_LIMIT_MAX] = {true, true, true}, cg_none[_LIMIT_MAX] = {false, false, false};
    bool cg_cpu[_LIMIT_MAX] = {false, false, true};

    limits_decide(&(struct run_limits){0}, cg_none, false, &d);
    ok(d.level == LEVEL_NONE && !d.rlimit_as && !d.rlimit_cpu && !d.rlimit_nproc, "no --limit: nothing decided");

    limits_decide(&all, cg_all, true, &d);
    ok(d.level == LEVEL_ENFORCED && d.mech[LIMIT_MEM] == LIMIT_MECH_CGROUP && d.mech[LIMIT_PIDS] == LIMIT_MECH_CGROUP &&
           d.mech[LIMIT_CPU] == LIMIT_MECH_CGROUP && !d.rlimit_as && !d.rlimit_cpu && !d.rlimit_nproc,
       "a cgroup holding every limit: enforced, no rlimits");

    limits_decide(&all, cg_none, false, &d);
    ok(d.level == LEVEL_PARTIAL && d.mech[LIMIT_MEM] == LIMIT_MECH_RLIMIT_PROCESS &&
           d.mech[LIMIT_CPU] == LIMIT_MECH_RLIMIT_PROCESS && d.mech[LIMIT_PIDS] == LIMIT_MECH_RLIMIT_USERNS &&
           d.rlimit_as == 1ULL << 30 && d.rlimit_cpu == 60 && d.rlimit_nproc == 100,
       "no cgroup, not root: rlimits, partial");

    limits_decide(&all, cg_none, true, &d);
    ok(d.level == LEVEL_UNAVAILABLE && d.mech[LIMIT_PIDS] == LIMIT_MECH_UNAVAILABLE && !d.rlimit_nproc,
       "no cgroup, host root: pids unavailable (RLIMIT_NPROC exempts uid 0)");

    limits_decide(&(struct run_limits){.pids = 10}, cg_none, false, &d);
    ok(d.level == LEVEL_ENFORCED && d.mech[LIMIT_PIDS] == LIMIT_MECH_RLIMIT_USERNS,
       "pids alone, not root: RLIMIT_NPROC in the run's user namespace is tree-wide");

    limits_decide(&all, cg_cpu, false, &d);
    ok(d.level == LEVEL_PARTIAL && d.mech[LIMIT_CPU] == LIMIT_MECH_CGROUP && !d.rlimit_cpu && d.rlimit_as,
       "cpu in the cgroup, mem per process: partial");

    is_str(limit_mechanism_name(LIMIT_MECH_RLIMIT_PROCESS), "rlimit-per-process", "mechanism names");
    is_str(limit_mechanism_name(LIMIT_MECH_CGROUP), "cgroup", "mechanism names (cgroup)");
    ok(!limit_mechanism_tree_wide(LIMIT_MECH_RLIMIT_PROCESS) && limit_mechanism_tree_wide(LIMIT_MECH_RLIMIT_USERNS),
       "per-process rlimits are not tree-wide");

    char buf[256], root[256];
    ok(cgroup_parse_self("12:pids:/x\n1:name=systemd:/\n0::/user.slice/a b.scope\n", buf, sizeof buf) == 0 &&
           strcmp(buf, "/user.slice/a b.scope") == 0,
       "/proc/self/cgroup: the 0:: line");
    ok(cgroup_parse_self("4:memory:/a\n", buf, sizeof buf) == -ENOENT, "/proc/self/cgroup without 0:: (v1 only)");
    const char *v1 = "9:name=systemd:/\n7:cpu,cpuacct:/c\n4:memory:/process_api/95ea\n0::/\n";
    ok(cgroup_parse_self_v1(v1, "memory", buf, sizeof buf) == 0 && strcmp(buf, "/process_api/95ea") == 0,
       "/proc/self/cgroup: the v1 memory line");
    ok(cgroup_parse_self_v1(v1, "cpuacct", buf, sizeof buf) == 0 && strcmp(buf, "/c") == 0 &&
           cgroup_parse_self_v1(v1, "cpu", buf, sizeof buf) == 0 && strcmp(buf, "/c") == 0,
       "/proc/self/cgroup: a controller among several of one hierarchy");
    ok(cgroup_parse_self_v1("0::/a\n7:cpu,cpuacct:/c\n3:memoryx:/m\n", "memory", buf, sizeof buf) == -ENOENT &&
           cgroup_parse_self_v1("0::/memory\n", "memory", buf, sizeof buf) == -ENOENT,
       "/proc/self/cgroup: no memory hierarchy (v2 only, a longer name, the path is not a controller)");

    const char *hybrid = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
                         "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory\n"
                         "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime shared:10 - cgroup2 cgroup2 rw\n";
    ok(cgroup_parse_mountinfo(hybrid, "/", buf, sizeof buf, root, sizeof root) == 0 &&
           strcmp(buf, "/sys/fs/cgroup/unified") == 0 && strcmp(root, "/") == 0,
       "mountinfo: the hybrid layout's cgroup2 mount");
    const char *v2 = "25 20 0:23 / /sys/fs/cgroup rw,nosuid,nodev,noexec - cgroup2 cgroup2 rw,nsdelegate\n";
    ok(cgroup_parse_mountinfo(v2, "/user.slice", buf, sizeof buf, root, sizeof root) == 0 &&
           strcmp(buf, "/sys/fs/cgroup") == 0,
       "mountinfo: a pure v2 mount, no optional fields");
    const char *nested = "90 80 0:23 /ctr /mnt/cg\\040x rw shared:3 master:1 - cgroup2 cgroup2 rw\n";
    ok(cgroup_parse_mountinfo(nested, "/ctr/sub", buf, sizeof buf, root, sizeof root) == 0 &&
           strcmp(buf, "/mnt/cg x") == 0 && strcmp(root, "/ctr") == 0,
       "mountinfo: a bind of a subtree, escaped space decoded");
    ok(cgroup_parse_mountinfo(nested, "/other", buf, sizeof buf, root, sizeof root) == -ENOENT,
       "mountinfo: a cgroup2 mount whose root does not hold our cgroup is not ours");
    ok(cgroup_parse_mountinfo("1 2 0:1 / /x rw - cgroup2fake a rw\n", "/", buf, sizeof buf, root, sizeof root) ==
           -ENOENT,
       "mountinfo: only the cgroup2 type");

    int64_t v;
    const char *events = "low 0\nhigh 0\nmax 12\noom 1\noom_kill 1\n";
    ok(cgroup_keyed_value(events, "oom_kill", &v) == 0 && v == 1, "keyed file: oom_kill");
    ok(cgroup_keyed_value(events, "max", &v) == 0 && v == 12, "keyed file: max, not a prefix match");
    ok(cgroup_keyed_value(events, "oom_group_kill", &v) == -ENOENT, "keyed file: an absent key");
    ok(cgroup_keyed_value("usage_usec 18446744\nmax max\n", "max", &v) == 0 && v == INT64_MAX,
       "keyed file: 'max' is unlimited");
    ok(cgroup_keyed_value("populated x\n", "populated", &v) == -EINVAL, "keyed file: junk is refused");
    ok(cgroup_list_has("cpuset cpu io memory pids", "cpu") && !cgroup_list_has("cpuset io", "cpu"),
       "controller lists match whole words");
    return tap_done();
}
