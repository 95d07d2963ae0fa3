/* Unit tests: `pvisor run` option parsing and policy building. */
#include "policy/policy.h"
#include "tap.h"

#include <errno.h>
#include <stdlib.h>

static int parse(struct run_options *o, char **err, int argc, char **argv) {
    *err = NULL;
    return policy_parse_run(argc, argv, o, err);
}

#define ARGV(...) ((char *[]){"run", __VA_ARGS__, NULL})
#define ARGC(...) ((int)(sizeof((char *[]){"run", __VA_ARGS__}) / sizeof(char *)))
#define PARSE(o, err, ...) parse(o, err, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__))

static void expect_error(const char *what, int r, char *err, const char *needle) {
    ok(r == -EINVAL && err && strstr(err, needle), "%s is rejected mentioning '%s' (got: %s)", what, needle,
       err ? err : "(none)");
    free(err);
}

int main(void) {
    struct run_options o;
    char *err;
    int r;

    r = PARSE(&o, &err, "--", "echo", "hi");
    ok(r == 0 && o.cmd_argc == 2 && strcmp(o.cmd_argv[0], "echo") == 0 && strcmp(o.cmd_argv[1], "hi") == 0,
       "plain command after --");
    ok(!o.safe && !o.strict && o.filesystem == FILESYSTEM_HOST && o.executor == EXECUTOR_AUTO && !o.stage,
       "defaults: no isolation requested");

    r = PARSE(&o, &err, "--stage", "/s", "--workspace=/w", "--stage-durability", "strict", "--stage-max-bytes", "2G",
              "--stage-max-inodes=100K", "--", "make", "-j2");
    ok(r == 0 && strcmp(o.stage, "/s") == 0 && strcmp(o.workspace, "/w") == 0 && o.durability == DURABILITY_STRICT &&
           o.stage_max_bytes == (2ULL << 30) && o.stage_max_inodes == 100 * 1024,
       "stage options with both value forms");
    ok(r == 0 && o.cmd_argc == 2 && strcmp(o.cmd_argv[1], "-j2") == 0, "options after -- belong to the command");

    r = PARSE(&o, &err, "--", "sh", "--safe");
    ok(r == 0 && !o.safe, "--safe after -- is the command's argument");

    r = PARSE(&o, &err, "--help");
    ok(r == 0 && o.help, "--help needs no command");

    r = PARSE(&o, &err, "echo");
    expect_error("command without --", r, err, "missing '--'");
    r = PARSE(&o, &err, "--safe");
    expect_error("no -- at all", r, err, "missing '--'");
    r = PARSE(&o, &err, "--");
    expect_error("-- without command", r, err, "missing the command");
    r = PARSE(&o, &err, "--frob", "--", "x");
    expect_error("unknown option", r, err, "unknown option '--frob'");
    r = PARSE(&o, &err, "--stage");
    expect_error("option without value", r, err, "needs a value");
    r = PARSE(&o, &err, "--stage=", "--", "x");
    expect_error("option with empty value", r, err, "non-empty");
    r = PARSE(&o, &err, "--safe=1", "--", "x");
    expect_error("flag with a value", r, err, "takes no value");
    r = PARSE(&o, &err, "--filesystem", "maybe", "--", "x");
    expect_error("bad --filesystem", r, err, "'host' or 'sandbox'");
    r = PARSE(&o, &err, "--executor", "docker", "--", "x");
    expect_error("bad --executor", r, err, "auto, host, oci, vm");
    r = PARSE(&o, &err, "--stage", "s", "--stage-max-bytes", "-5", "--", "x");
    expect_error("negative size", r, err, "not a size");
    r = PARSE(&o, &err, "--stage", "s", "--stage-max-bytes", "99999999999999999999T", "--", "x");
    expect_error("overflowing size", r, err, "not a size");
    r = PARSE(&o, &err, "--stage-max-bytes", "1M", "--", "x");
    expect_error("quota without a stage", r, err, "need a stage");
    r = PARSE(&o, &err, "--", "");
    expect_error("empty command", r, err, "empty");

    struct policy p;
    PARSE(&o, &err, "--", "x");
    policy_build(&o, &p);
    int none = 1;
    for (unsigned d = 0; d < _DIM_MAX; d++)
        none &= p.requested[d] == LEVEL_NONE;
    ok(none, "plain run requests nothing");

    PARSE(&o, &err, "--stage", "auto", "--", "x");
    policy_build(&o, &p);
    ok(p.requested[DIM_WORKSPACE_WRITES] == LEVEL_ENFORCED && p.requested[DIM_HOST_WRITES] == LEVEL_NONE,
       "--stage requests workspace_writes only");

    PARSE(&o, &err, "--safe", "--", "x");
    policy_build(&o, &p);
    int all = 1;
    for (unsigned d = 0; d < _DIM_MAX; d++)
        all &= d == DIM_RESOURCES ? p.requested[d] == LEVEL_NONE : p.requested[d] == LEVEL_ENFORCED;
    ok(all && policy_wants_stage(&o) && policy_wants_sandbox(&o) && policy_denies_network(&o),
       "--safe requests every dimension but resources enforced, with a stage, network denied");

    PARSE(&o, &err, "--filesystem", "sandbox", "--", "x");
    policy_build(&o, &p);
    ok(p.requested[DIM_HOST_WRITES] == LEVEL_ENFORCED && p.requested[DIM_NETWORK] == LEVEL_NONE &&
           p.requested[DIM_HOME_CREDENTIALS] == LEVEL_NONE && !policy_denies_network(&o),
       "--filesystem sandbox leaves network and HOME unrequested");

    r = PARSE(&o, &err, "--safe", "--pass-env", "GH_TOKEN", "--pass-env=AWS_PROFILE", "--", "x");
    ok(r == 0 && o.n_pass_env == 2 && strcmp(o.pass_env[1], "AWS_PROFILE") == 0, "--pass-env collects names");
    r = PARSE(&o, &err, "--safe", "--pass-env", "BAD-NAME", "--", "x");
    expect_error("--pass-env with a bad name", r, err, "not an environment variable name");
    r = PARSE(&o, &err, "--pass-env", "GH_TOKEN", "--", "x");
    expect_error("--pass-env without a sandbox", r, err, "only applies");
    r = PARSE(&o, &err, "--workspace", "/tmp", "--", "x");
    expect_error("--workspace without a stage", r, err,
                 "add --stage DIR, --stage auto, --safe or --filesystem sandbox");
    r = PARSE(&o, &err, "--workspace", "/tmp", "--stage", "auto", "--", "x");
    ok(r == 0 && strcmp(o.workspace, "/tmp") == 0, "--workspace with --stage is taken");
    r = PARSE(&o, &err, "--safe", "--pass-env", "PVISOR_AGENT_SOCKET", "--", "x");
    expect_error("--pass-env of a name pvisor sets", r, err, "is set by pvisor");

    /* --limit */
    r = PARSE(&o, &err, "--safe", "--limit", "mem=512M,pids=64", "--limit=cpu=10m", "--", "x");
    ok(r == 0 && o.limits.mem_bytes == 512ULL << 20 && o.limits.pids == 64 && o.limits.cpu_s == 600,
       "--limit: a comma list and a repeat merge (mem 512M, pids 64, cpu 10m)");
    policy_build(&o, &p);
    ok(p.requested[DIM_RESOURCES] == LEVEL_ENFORCED, "--limit requests resources enforced");
    r = PARSE(&o, &err, "--filesystem", "sandbox", "--limit", "cpu=90", "--", "x");
    ok(r == 0 && o.limits.cpu_s == 90 && !o.limits.mem_bytes && !o.limits.pids, "--limit cpu=90 is 90 s of CPU time");
    r = PARSE(&o, &err, "--safe", "--limit", "mem=1G", "--limit", "mem=2G", "--", "x");
    expect_error("a limit given twice", r, err, "given twice");
    r = PARSE(&o, &err, "--safe", "--limit", "disk=1G", "--", "x");
    expect_error("an unknown limit", r, err, "unknown key 'disk'");
    r = PARSE(&o, &err, "--safe", "--limit", "mem", "--", "x");
    expect_error("a limit without a value", r, err, "not KEY=VALUE");
    r = PARSE(&o, &err, "--safe", "--limit", "mem=", "--", "x");
    expect_error("a limit with an empty value", r, err, "not KEY=VALUE");
    r = PARSE(&o, &err, "--safe", "--limit", "mem=1G,", "--", "x");
    expect_error("a trailing comma", r, err, "not KEY=VALUE");
    r = PARSE(&o, &err, "--safe", "--limit", "mem=100K", "--", "x");
    expect_error("mem below 1M", r, err, "not a size from 1M");
    /* the range the message names is the one accepted (it said 1P, which no
     * size parses) */
    r = PARSE(&o, &err, "--safe", "--limit", "mem=1024T", "--", "x");
    ok(r == 0 && o.limits.mem_bytes == 1ULL << 50, "--limit mem=1024T, the largest, is accepted");
    r = PARSE(&o, &err, "--safe", "--limit", "mem=1025T", "--", "x");
    expect_error("mem above 1024T", r, err, "not a size from 1M to 1024T");
    r = PARSE(&o, &err, "--safe", "--limit", "mem=lots", "--", "x");
    expect_error("mem that is not a size", r, err, "not a size");
    r = PARSE(&o, &err, "--safe", "--limit", "pids=0", "--", "x");
    expect_error("pids 0", r, err, "not a count");
    r = PARSE(&o, &err, "--safe", "--limit", "pids=1K", "--", "x");
    expect_error("pids with a suffix", r, err, "not a count");
    r = PARSE(&o, &err, "--safe", "--limit", "pids=99999999", "--", "x");
    expect_error("pids above PID_MAX_LIMIT", r, err, "not a count");
    r = PARSE(&o, &err, "--safe", "--limit", "cpu=fast", "--", "x");
    expect_error("cpu that is not a duration", r, err, "not a CPU time");
    r = PARSE(&o, &err, "--safe", "--limit", "cpu=0", "--", "x");
    expect_error("cpu 0", r, err, "not a CPU time");
    r = PARSE(&o, &err, "--safe", "--limit", "mem=123456789012345678901234567890123", "--", "x");
    expect_error("an over-long value", r, err, "too long");
    r = PARSE(&o, &err, "--limit", "pids=10", "--", "x");
    expect_error("--limit without a sandbox", r, err, "--limit only applies");
    r = PARSE(&o, &err, "--safe", "--limit", "tmp=8M,shm=256M", "--", "x");
    ok(r == 0 && o.limits.tmp_bytes == 8ULL << 20 && o.limits.shm_bytes == 256ULL << 20 && !o.limits.mem_bytes,
       "--limit tmp=8M,shm=256M size the private /tmp and /dev/shm");
    policy_build(&o, &p);
    ok(p.requested[DIM_RESOURCES] == LEVEL_NONE && !policy_has_limits(&o.limits) && policy_has_tmpfs_sizes(&o.limits),
       "tmp= and shm= alone request no resources dimension (they are sizes, not limits of the tree)");
    r = PARSE(&o, &err, "--safe", "--limit", "tmp=bad", "--", "x");
    expect_error("tmp that is not a size", r, err, "--limit tmp: 'bad' is not a size of at least 1M");
    r = PARSE(&o, &err, "--safe", "--limit", "shm=512K", "--", "x");
    expect_error("shm under 1M", r, err, "--limit shm: '512K' is not a size of at least 1M");
    r = PARSE(&o, &err, "--safe", "--limit", "tmp=1M,tmp=2M", "--", "x");
    expect_error("tmp given twice", r, err, "given twice");
    r = PARSE(&o, &err, "--stage", "auto", "--limit", "tmp=8M", "--", "x");
    expect_error("--limit tmp without a sandbox", r, err, "--limit only applies");

    is_str(level_name(LEVEL_PARTIAL), "partial", "the partial level is named");
    is_str(dimension_name(DIM_HOME_CREDENTIALS), "home_credentials", "dimension names are the documented ones");
    is_str(level_name(LEVEL_UNAVAILABLE), "unavailable", "level names are the documented ones");
    is_str(level_name((enum level)99), "invalid", "out-of-range level is 'invalid'");
    return tap_done();
}
