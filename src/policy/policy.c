/* policy.c: see policy.h.  Pure: no I/O, no globals, safe to unit-test. */
#include "policy/policy.h"
#include "util/util.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

static const char *const level_names[_LEVEL_MAX] = {
    [LEVEL_NONE] = "none",         [LEVEL_UNENFORCED] = "unenforced",   [LEVEL_COOPERATIVE] = "cooperative",
    [LEVEL_ENFORCED] = "enforced", [LEVEL_UNAVAILABLE] = "unavailable", [LEVEL_PARTIAL] = "partial",
};

static const char *const dimension_names[_DIM_MAX] = {
    [DIM_WORKSPACE_WRITES] = "workspace_writes",
    [DIM_HOST_WRITES] = "host_writes",
    [DIM_READS] = "reads",
    [DIM_SENSITIVE_PATHS] = "sensitive_paths",
    [DIM_NETWORK] = "network",
    [DIM_HOME_CREDENTIALS] = "home_credentials",
    [DIM_CHILD_PROCESSES] = "child_processes",
    [DIM_SYSCALLS] = "syscalls",
    [DIM_DEVICES] = "devices",
    [DIM_IPC] = "ipc",
    [DIM_RESOURCES] = "resources",
};

const char *level_name(enum level l) {
    return (unsigned)l < _LEVEL_MAX ? level_names[l] : "invalid";
}

const char *dimension_name(enum dimension d) {
    return (unsigned)d < _DIM_MAX ? dimension_names[d] : "invalid";
}

const char *executor_name(enum executor_kind e) {
    switch (e) {
    case EXECUTOR_AUTO: return "auto";
    case EXECUTOR_HOST: return "host";
    case EXECUTOR_OCI: return "oci";
    case EXECUTOR_VM: return "vm";
    }
    return "invalid";
}

const char *access_kind_name(enum access_kind k) {
    switch (k) {
    case ACCESS_DENY: return "deny";
    case ACCESS_RO: return "ro";
    case ACCESS_RW: return "rw";
    }
    return "invalid";
}

const char *filesystem_name(enum filesystem_mode f) {
    return f == FILESYSTEM_SANDBOX ? "sandbox" : "host";
}

const char *durability_name(enum durability d) {
    return d == DURABILITY_STRICT ? "strict" : "checkpoint";
}

/* The option tables below list names in their enum's order. */
_Static_assert(EXECUTOR_AUTO == 0 && EXECUTOR_HOST == 1 && EXECUTOR_OCI == 2 && EXECUTOR_VM == 3, "--executor names");
_Static_assert(DURABILITY_CHECKPOINT == 0 && DURABILITY_STRICT == 1, "--stage-durability names");

/* The index of val in names (NULL-terminated), or -1. */
static int choice(const char *val, const char *const *names) {
    for (int i = 0; names[i]; i++)
        if (strcmp(val, names[i]) == 0)
            return i;
    return -1;
}

/* Options that take a value; `--opt=value` and `--opt value` both work. */
enum opt_id {
    OPT_HELP,
    OPT_SAFE,
    OPT_STRICT,
    OPT_FILESYSTEM,
    OPT_EXECUTOR,
    OPT_STAGE,
    OPT_WORKSPACE,
    OPT_DURABILITY,
    OPT_MAX_BYTES,
    OPT_MAX_INODES,
    OPT_PASS_ENV,
    OPT_TIMEOUT,
    OPT_ACCESS,
    OPT_ALLOW_WRITE,
    OPT_LIMIT,
    OPT_NETWORK,
    OPT_ALLOW_NET,
};

static const struct {
    const char *name;
    enum opt_id id;
    bool has_arg;
} run_opts[] = {
    {"--help", OPT_HELP, false},
    {"-h", OPT_HELP, false},
    {"--safe", OPT_SAFE, false},
    {"--strict", OPT_STRICT, false},
    {"--filesystem", OPT_FILESYSTEM, true},
    {"--executor", OPT_EXECUTOR, true},
    {"--stage", OPT_STAGE, true},
    {"--workspace", OPT_WORKSPACE, true},
    {"--stage-durability", OPT_DURABILITY, true},
    {"--stage-max-bytes", OPT_MAX_BYTES, true},
    {"--stage-max-inodes", OPT_MAX_INODES, true},
    {"--pass-env", OPT_PASS_ENV, true},
    {"--timeout", OPT_TIMEOUT, true},
    {"--access", OPT_ACCESS, true},
    {"--allow-write", OPT_ALLOW_WRITE, true},
    {"--limit", OPT_LIMIT, true},
    {"--network", OPT_NETWORK, true},
    {"--allow-net", OPT_ALLOW_NET, true},
};

int policy_parse_duration(const char *s, uint64_t *ret_ms) {
    if (!s || s[0] < '0' || s[0] > '9')
        return -EINVAL;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno)
        return -ERANGE;
    uint64_t mult = 1000;
    if (*end == 's')
        end++;
    else if (*end == 'm')
        mult = 60 * 1000, end++;
    else if (*end == 'h')
        mult = 3600 * 1000, end++;
    if (*end != '\0' || v == 0 || v > 7ULL * 24 * 3600 * 1000 / mult)
        return -EINVAL;
    *ret_ms = v * mult;
    return 0;
}

bool policy_has_limits(const struct run_limits *l) {
    return l->mem_bytes || l->pids || l->cpu_s;
}

bool policy_has_tmpfs_sizes(const struct run_limits *l) {
    return l->tmp_bytes || l->shm_bytes;
}

int policy_parse_limits(const char *spec, struct run_limits *limits, char **ret_error) {
    static const char usage[] =
        "(use: --limit mem=SIZE,pids=N,cpu=DURATION,tmp=SIZE,shm=SIZE; e.g. mem=2G,pids=256,cpu=10m,tmp=4G)";
    const char *p = spec;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *eq = memchr(p, '=', len);
        if (len == 0 || !eq || eq == p || (size_t)(eq - p) + 1 == len)
            return usage_error(ret_error, "--limit: '%.*s' is not KEY=VALUE %s", (int)len, p, usage);
        size_t klen = (size_t)(eq - p);
        /* A bounded copy of the value: the number parsers need a NUL. */
        char val[32];
        size_t vlen = len - klen - 1;
        if (vlen >= sizeof val)
            return usage_error(ret_error, "--limit: the value of '%.*s' is too long", (int)klen, p);
        memcpy(val, eq + 1, vlen);
        val[vlen] = '\0';
        uint64_t *slot;
        int r;
        uint64_t v;
        if (klen == 3 && strncmp(p, "mem", 3) == 0) {
            slot = &limits->mem_bytes;
            r = parse_size(val, POLICY_LIMIT_MEM_MIN, POLICY_LIMIT_MEM_MAX, &v);
            if (r < 0)
                return usage_error(ret_error, "--limit mem: '%s' is not a size from 1M to 1024T (examples: 512M, 2G)",
                                   val);
        } else if (klen == 4 && strncmp(p, "pids", 4) == 0) {
            slot = &limits->pids;
            r = val[strspn(val, "0123456789")] == '\0' ? parse_size(val, 1, POLICY_LIMIT_PIDS_MAX, &v) : -EINVAL;
            if (r < 0)
                return usage_error(ret_error, "--limit pids: '%s' is not a count from 1 to %llu", val,
                                   (unsigned long long)POLICY_LIMIT_PIDS_MAX);
        } else if (klen == 3 && strncmp(p, "cpu", 3) == 0) {
            slot = &limits->cpu_s;
            uint64_t ms;
            r = policy_parse_duration(val, &ms);
            if (r < 0)
                return usage_error(
                    ret_error, "--limit cpu: '%s' is not a CPU time (examples: 90, 30s, 10m, 2h; at most 7 days)", val);
            v = ms / 1000;
        } else if (klen == 3 && (strncmp(p, "tmp", 3) == 0 || strncmp(p, "shm", 3) == 0)) {
            bool tmp = p[0] == 't';
            slot = tmp ? &limits->tmp_bytes : &limits->shm_bytes;
            r = parse_size(val, POLICY_TMPFS_MIN, POLICY_TMPFS_MAX, &v);
            if (r < 0)
                return usage_error(ret_error,
                                   "--limit %s: '%s' is not a size of at least 1M for the sandbox's %s (examples: %s)",
                                   tmp ? "tmp" : "shm", val, tmp ? "/tmp" : "/dev/shm", tmp ? "512M, 4G" : "256M, 1G");
        } else {
            return usage_error(ret_error, "--limit: unknown key '%.*s' (known: mem, pids, cpu, tmp, shm)", (int)klen,
                               p);
        }
        if (*slot)
            return usage_error(ret_error, "--limit: '%.*s' is given twice", (int)klen, p);
        *slot = v;
        if (!end)
            return 0;
        p = end + 1;
    }
}

static bool env_name_ok(const char *s) {
    if (!s[0] || (s[0] >= '0' && s[0] <= '9') || strlen(s) > 255)
        return false;
    for (const char *p = s; *p; p++)
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '_'))
            return false;
    return true;
}

int policy_parse_run(int argc, char **argv, struct run_options *ret_opts, char **ret_error) {
    struct run_options o = {.filesystem = FILESYSTEM_HOST, .executor = EXECUTOR_AUTO};
    int i = 1;
    bool saw_dashdash = false;
    uint32_t seen = 0; /* options that take one value: given once */

    while (i < argc) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0) {
            saw_dashdash = true;
            i++;
            break;
        }
        if (a[0] != '-')
            return usage_error(
                ret_error, "missing '--' before the command '%s' (use: pvisor run [OPTIONS] -- COMMAND [ARGS...])", a);

        const char *eq = strchr(a, '=');
        size_t nlen = eq ? (size_t)(eq - a) : strlen(a);
        int found = -1;
        for (size_t k = 0; k < sizeof run_opts / sizeof run_opts[0]; k++)
            if (strlen(run_opts[k].name) == nlen && strncmp(run_opts[k].name, a, nlen) == 0)
                found = (int)k;
        if (found < 0)
            return usage_error(ret_error, "unknown option '%.*s'", (int)nlen, a);

        const char *val = NULL;
        if (run_opts[found].has_arg) {
            if (eq)
                val = eq + 1;
            else if (i + 1 < argc)
                val = argv[++i];
            else
                return usage_error(ret_error, "option '%s' needs a value", run_opts[found].name);
            if (val[0] == '\0')
                return usage_error(ret_error, "option '%s' needs a non-empty value", run_opts[found].name);
        } else if (eq) {
            return usage_error(ret_error, "option '%.*s' takes no value", (int)nlen, a);
        }
        i++;

        enum opt_id id = run_opts[found].id;
        bool single = run_opts[found].has_arg && id != OPT_PASS_ENV && id != OPT_ACCESS && id != OPT_ALLOW_WRITE &&
                      id != OPT_LIMIT && id != OPT_ALLOW_NET;
        if (single && (seen & (1u << id)))
            return usage_error(ret_error, "'%s' given twice", run_opts[found].name);
        seen |= 1u << id;

        int r;
        switch (id) {
        case OPT_HELP: o.help = true; break;
        case OPT_SAFE: o.safe = true; break;
        case OPT_STRICT: o.strict = true; break;
        case OPT_FILESYSTEM:
            if (strcmp(val, "host") == 0)
                o.filesystem = FILESYSTEM_HOST;
            else if (strcmp(val, "sandbox") == 0)
                o.filesystem = FILESYSTEM_SANDBOX;
            else
                return usage_error(ret_error, "--filesystem must be 'host' or 'sandbox', not '%s'", val);
            break;
        case OPT_EXECUTOR: {
            /* in enum executor_kind's order */
            static const char *const names[] = {"auto", "host", "oci", "vm", NULL};
            int k = choice(val, names);
            if (k < 0)
                return usage_error(ret_error, "--executor must be one of auto, host, oci, vm; not '%s'", val);
            o.executor = (enum executor_kind)k;
            break;
        }
        case OPT_NETWORK: {
            static const char *const names[] = {"none", "loopback", NULL};
            int k = choice(val, names);
            if (k < 0)
                return usage_error(ret_error, "--network must be 'none' or 'loopback', not '%s'", val);
            o.network_loopback = k == 1;
            o.network_set = true;
            break;
        }
        case OPT_ALLOW_NET: {
            if (o.n_allow_net >= EGRESS_MAX_RULES)
                return usage_error(ret_error, "at most %d --allow-net rules", EGRESS_MAX_RULES);
            struct egress_rule rule;
            if (egress_rule_parse(val, &rule, ret_error) < 0)
                return -EINVAL;
            char fa[EGRESS_HOST_MAX + 16], fb[EGRESS_HOST_MAX + 16];
            egress_rule_format(&rule, fa, sizeof fa);
            bool dup = false;
            for (int k = 0; k < o.n_allow_net && !dup; k++) {
                egress_rule_format(&o.allow_net[k], fb, sizeof fb);
                dup = strcmp(fa, fb) == 0;
            }
            if (!dup)
                o.allow_net[o.n_allow_net++] = rule;
            break;
        }
        case OPT_STAGE: o.stage = val; break;
        case OPT_WORKSPACE: o.workspace = val; break;
        case OPT_DURABILITY: {
            static const char *const names[] = {"checkpoint", "strict", NULL}; /* enum durability's order */
            int k = choice(val, names);
            if (k < 0)
                return usage_error(ret_error, "--stage-durability must be 'checkpoint' or 'strict', not '%s'", val);
            o.durability = (enum durability)k;
            o.durability_set = true;
            break;
        }
        case OPT_MAX_BYTES:
            r = parse_size(val, 1, POLICY_STAGE_QUOTA_MAX, &o.stage_max_bytes);
            if (r < 0)
                return usage_error(
                    ret_error, "--stage-max-bytes: '%s' is not a size from 1 to 1024T (examples: 1048576, 512M, 2G)",
                    val);
            break;
        case OPT_TIMEOUT:
            if (policy_parse_duration(val, &o.timeout_ms) < 0)
                return usage_error(ret_error,
                                   "--timeout: '%s' is not a duration from 1 s to 7 days (examples: 90, 30s, 10m, 2h)",
                                   val);
            break;
        case OPT_ACCESS:
        case OPT_ALLOW_WRITE: {
            enum access_kind k = ACCESS_RW;
            const char *path = val;
            if (run_opts[found].id == OPT_ACCESS) {
                if (strncmp(val, "deny:", 5) == 0)
                    k = ACCESS_DENY, path = val + 5;
                else if (strncmp(val, "ro:", 3) == 0)
                    k = ACCESS_RO, path = val + 3;
                else if (strncmp(val, "rw:", 3) == 0)
                    k = ACCESS_RW, path = val + 3;
                else
                    return usage_error(ret_error, "--access must be deny:PATH, ro:PATH or rw:PATH, not '%s'", val);
            }
            if (path[0] == '\0')
                return usage_error(ret_error, "%s needs a path", run_opts[found].name);
            if (o.n_access >= POLICY_MAX_ACCESS)
                return usage_error(ret_error, "at most %d --access/--allow-write rules", POLICY_MAX_ACCESS);
            o.access[o.n_access++] = (struct access_rule){.kind = k, .path = path};
            break;
        }
        case OPT_LIMIT:
            if ((r = policy_parse_limits(val, &o.limits, ret_error)) < 0)
                return r;
            break;
        case OPT_PASS_ENV:
            if (!env_name_ok(val))
                return usage_error(ret_error, "--pass-env: '%s' is not an environment variable name", val);
            if (strcmp(val, "HOME") == 0 || strcmp(val, "PWD") == 0 || strcmp(val, "TMPDIR") == 0 ||
                strcmp(val, "PVISOR_AGENT_SOCKET") == 0)
                return usage_error(
                    ret_error, "--pass-env: %s is set by pvisor inside the sandbox (it names the sandbox's own)", val);
            if (o.n_pass_env >= POLICY_MAX_PASS_ENV)
                return usage_error(ret_error, "--pass-env: at most %d names", POLICY_MAX_PASS_ENV);
            o.pass_env[o.n_pass_env++] = val;
            break;
        case OPT_MAX_INODES:
            r = parse_size(val, 1, POLICY_STAGE_QUOTA_MAX, &o.stage_max_inodes);
            if (r < 0)
                return usage_error(
                    ret_error, "--stage-max-inodes: '%s' is not a count from 1 to 1024T (examples: 1000, 100K)", val);
            break;
        }
    }

    if (o.help) {
        *ret_opts = o;
        return 0;
    }
    if (!saw_dashdash)
        return usage_error(ret_error, "missing '--' and a command (use: pvisor run [OPTIONS] -- COMMAND [ARGS...])");
    if (i >= argc)
        return usage_error(ret_error,
                           "missing the command after '--' (use: pvisor run [OPTIONS] -- COMMAND [ARGS...])");
    if (argv[i][0] == '\0')
        return usage_error(ret_error, "the command after '--' is empty");

    bool stage_opts = o.durability_set || o.stage_max_bytes || o.stage_max_inodes;
    if (stage_opts && !policy_wants_stage(&o))
        return usage_error(ret_error,
                           "--stage-durability/--stage-max-* need a stage: add --stage DIR, --stage auto or --safe");
    if (o.n_access && !policy_wants_sandbox(&o))
        return usage_error(ret_error, "--access/--allow-write only apply to --safe or --filesystem sandbox");
    if (o.n_pass_env && !policy_wants_sandbox(&o))
        return usage_error(
            ret_error,
            "--pass-env only applies to --safe or --filesystem sandbox (other runs inherit the environment)");
    if (o.network_set && !o.safe)
        return usage_error(ret_error, "--network only applies to --safe (other runs keep the host's network)");
    if (o.n_allow_net && !o.safe)
        return usage_error(ret_error, "--allow-net only applies to --safe (other runs keep the host's network)");
    if ((policy_has_limits(&o.limits) || policy_has_tmpfs_sizes(&o.limits)) && !policy_wants_sandbox(&o))
        return usage_error(ret_error, "--limit only applies to --safe or --filesystem sandbox");
    if (o.workspace && o.workspace[0] == '\0')
        return usage_error(ret_error, "--workspace needs a directory");
    /* A plain run stages nothing and runs the command in the current
     * directory over the real files: a --workspace there only changed the
     * directory its Bundle named, which a user took for a staged one. */
    if (o.workspace && !policy_wants_stage(&o))
        return usage_error(ret_error,
                           "--workspace names the directory to stage: add --stage DIR, --stage auto, --safe or "
                           "--filesystem sandbox (a "
                           "plain run stages nothing; it runs the command in the current directory)");

    o.cmd_argc = argc - i;
    o.cmd_argv = argv + i;
    *ret_opts = o;
    return 0;
}

bool policy_wants_sandbox(const struct run_options *o) {
    return o->safe || o->filesystem == FILESYSTEM_SANDBOX;
}

bool policy_denies_network(const struct run_options *o) {
    return o->safe;
}

bool policy_wants_stage(const struct run_options *o) {
    return o->stage != NULL || o->safe || o->filesystem == FILESYSTEM_SANDBOX;
}

uint64_t policy_tmpfs_max(uint64_t cgroup_limit, uint64_t mem_limit, enum tmpfs_bound *ret_by) {
    struct sysinfo si;
    uint64_t mem = 0;
    enum tmpfs_bound by = TMPFS_BY_HOST;
    if (sysinfo(&si) == 0)
        mem = (uint64_t)si.totalram * (si.mem_unit ? si.mem_unit : 1);
    if (cgroup_limit && cgroup_limit != UINT64_MAX && (mem == 0 || cgroup_limit < mem)) {
        mem = cgroup_limit;
        by = TMPFS_BY_CGROUP;
    }
    if (mem_limit && (mem == 0 || mem_limit < mem)) {
        mem = mem_limit;
        by = TMPFS_BY_MEM;
    }
    if (ret_by)
        *ret_by = by;
    return mem / 2;
}

const char *policy_tmpfs_bound_name(enum tmpfs_bound b) {
    switch (b) {
    case TMPFS_BY_CGROUP: return "the memory limit of pvisor's cgroup";
    case TMPFS_BY_MEM: return "--limit mem";
    case TMPFS_BY_HOST:
    default: return "this host's memory";
    }
}

void policy_build(const struct run_options *o, struct policy *ret_policy) {
    struct policy p;
    for (unsigned d = 0; d < _DIM_MAX; d++)
        p.requested[d] = LEVEL_NONE;

    if (policy_wants_stage(o))
        p.requested[DIM_WORKSPACE_WRITES] = LEVEL_ENFORCED;

    if (o->filesystem == FILESYSTEM_SANDBOX || o->safe) {
        p.requested[DIM_HOST_WRITES] = LEVEL_ENFORCED;
        p.requested[DIM_READS] = LEVEL_ENFORCED;
        p.requested[DIM_SENSITIVE_PATHS] = LEVEL_ENFORCED;
        p.requested[DIM_DEVICES] = LEVEL_ENFORCED;
        p.requested[DIM_CHILD_PROCESSES] = LEVEL_ENFORCED;
        p.requested[DIM_SYSCALLS] = LEVEL_ENFORCED;
        p.requested[DIM_IPC] = LEVEL_ENFORCED;
    }
    if (o->safe) {
        p.requested[DIM_NETWORK] = LEVEL_ENFORCED;
        p.requested[DIM_HOME_CREDENTIALS] = LEVEL_ENFORCED;
    }
    /* Resource limits are requested only by explicit --limit: a default
     * limit would break ordinary builds on one host and be meaningless on
     * another.  The baseline rlimits (core 1, nofile, fsize) are always set
     * in the sandbox but do not make the tree's resources bounded. */
    if (policy_has_limits(&o->limits))
        p.requested[DIM_RESOURCES] = LEVEL_ENFORCED;
    *ret_policy = p;
}
