/* limits.c: see limits.h.  Pure: no system calls. */
#include "resources/limits.h"

const char *limit_name(enum limit_kind k) {
    switch (k) {
    case LIMIT_MEM: return "mem";
    case LIMIT_PIDS: return "pids";
    case LIMIT_CPU: return "cpu";
    case _LIMIT_MAX: break;
    }
    return "invalid";
}

const char *limit_mechanism_name(enum limit_mechanism m) {
    switch (m) {
    case LIMIT_MECH_NONE: return "none";
    case LIMIT_MECH_CGROUP: return "cgroup";
    case LIMIT_MECH_RLIMIT_USERNS: return "rlimit-nproc-userns";
    case LIMIT_MECH_RLIMIT_PROCESS: return "rlimit-per-process";
    case LIMIT_MECH_UNAVAILABLE: return "unavailable";
    }
    return "invalid";
}

bool limit_mechanism_tree_wide(enum limit_mechanism m) {
    return m == LIMIT_MECH_CGROUP || m == LIMIT_MECH_RLIMIT_USERNS;
}

uint64_t limits_value(const struct run_limits *req, enum limit_kind k) {
    switch (k) {
    case LIMIT_MEM: return req->mem_bytes;
    case LIMIT_PIDS: return req->pids;
    case LIMIT_CPU: return req->cpu_s;
    case _LIMIT_MAX: break;
    }
    return 0;
}

void limits_decide(const struct run_limits *req, const bool cgroup_ok[_LIMIT_MAX], bool host_root,
                   struct limits_decision *ret) {
    struct limits_decision d = {.level = LEVEL_NONE};
    bool any = false, all_tree = true, none_missing = true;
    for (int k = 0; k < _LIMIT_MAX; k++) {
        uint64_t v = limits_value(req, (enum limit_kind)k);
        if (!v)
            continue;
        any = true;
        enum limit_mechanism m;
        if (cgroup_ok[k])
            m = LIMIT_MECH_CGROUP;
        else if (k == LIMIT_MEM) {
            m = LIMIT_MECH_RLIMIT_PROCESS;
            d.rlimit_as = v;
        } else if (k == LIMIT_CPU) {
            m = LIMIT_MECH_RLIMIT_PROCESS;
            d.rlimit_cpu = v;
        } else if (!host_root) {
            m = LIMIT_MECH_RLIMIT_USERNS;
            d.rlimit_nproc = v;
        } else {
            m = LIMIT_MECH_UNAVAILABLE;
        }
        d.mech[k] = m;
        all_tree = all_tree && limit_mechanism_tree_wide(m);
        none_missing = none_missing && m != LIMIT_MECH_UNAVAILABLE;
    }
    if (any)
        d.level = !none_missing ? LEVEL_UNAVAILABLE : all_tree ? LEVEL_ENFORCED : LEVEL_PARTIAL;
    *ret = d;
}
