/* Unit tests: executor readiness over hand-made probe structs (pure), and the
 * documented shape of probe_to_json / executors_to_json over a real probe. */
#include "evidence/probe.h"
#include "tap.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void good(struct probe_status *s) {
    s->ok = true;
    s->error = 0;
    s->detail[0] = '\0';
}

static void bad(struct probe_status *s, int err) {
    s->ok = false;
    s->error = err;
    strcpy(s->detail, "test");
}

/* A host on which every feature works, as an unprivileged user. */
static void perfect_host(struct host_probe *p) {
    memset(p, 0, sizeof *p);
    p->uid = p->euid = 1000;
    strcpy(p->kernel_release, "6.18.0-test");
    strcpy(p->kernel_machine, "x86_64");
    good(&p->userns.userns);
    good(&p->userns.mount_ns);
    good(&p->userns.pid_ns);
    good(&p->userns.net_ns);
    good(&p->userns.ipc_ns);
    good(&p->userns.uts_ns);
    good(&p->userns.tmpfs_mount);
    p->userns.unprivileged_userns_clone = -1;
    p->userns.max_user_namespaces = 15000;
    p->userns.apparmor_restrict_unprivileged_userns = -1;
    good(&p->fuse.usable);
    p->fuse.exists = p->fuse.is_fuse_chardev = p->fuse.openable = true;
    good(&p->landlock.usable);
    p->landlock.abi = 6;
    p->landlock.lsm_listed = PROBE_YES;
    strcpy(p->landlock.lsm_list, "lockdown,capability,landlock,yama,apparmor");
    good(&p->seccomp.filter);
    p->seccomp.action_errno = p->seccomp.action_kill_process = p->seccomp.action_user_notif = true;
    good(&p->openat2);
    good(&p->sha256);
    good(&p->cgroup.v2);
    good(&p->cgroup.delegated);
    strcpy(p->cgroup.path, "/user.slice/user-1000.slice");
    p->crun.found = true;
    strcpy(p->crun.path, "/usr/bin/crun");
    p->qemu.found = true;
    strcpy(p->qemu.path, "/usr/bin/qemu-system-x86_64");
    good(&p->kvm.usable);
    p->kvm.exists = true;
    good(&p->pidfd_open);
    good(&p->close_range);
    p->no_new_privs = 0;
}

static bool has_missing(const struct executor_readiness *r, const char *key) {
    for (size_t i = 0; i < r->n_missing; i++)
        if (strcmp(r->missing[i], key) == 0)
            return true;
    return false;
}

static bool mentions(const struct executor_readiness *r, const char *text) {
    return strstr(r->remediation, text) != NULL;
}

static size_t count_occurrences(const char *hay, const char *needle) {
    size_t n = 0;
    for (const char *s = hay; (s = strstr(s, needle)); s += strlen(needle))
        n++;
    return n;
}

static bool has_keys(const json_t *o, const char *const *keys, size_t n) {
    if (!json_is_object(o))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!json_object_get(o, keys[i])) {
            printf("#   missing key %s\n", keys[i]);
            return false;
        }
    return true;
}

static bool is_status(const json_t *o) {
    static const char *const k[] = {"ok", "error", "detail"};
    return has_keys(o, k, 3) && json_is_boolean(json_object_get(o, "ok")) &&
           json_is_string(json_object_get(o, "detail")) &&
           (json_is_null(json_object_get(o, "error")) || json_is_string(json_object_get(o, "error")));
}

static void test_readiness(void) {
    struct host_probe p;
    struct executor_readiness r;

    perfect_host(&p);
    executor_readiness_compute(&p, PROBE_EXECUTOR_HOST, &r);
    is_str(r.name, "host", "host readiness is named host");
    ok(r.host_features_ready && r.n_missing == 0 && r.remediation[0] == '\0',
       "all features present => host features ready, nothing missing, no remediation");
    ok(r.ready_plain, "host plain runs are ready");
    ok(r.ready_safe == (bool)PVISOR_HOST_SAFE_IMPLEMENTED,
       "host --safe readiness follows PVISOR_HOST_SAFE_IMPLEMENTED");
#if !PVISOR_HOST_SAFE_IMPLEMENTED
    ok(!r.ready_safe && r.reason && strstr(r.reason, "not implemented in pvisor"),
       "host --safe is never claimed while unimplemented, with a reason");
#endif
    ok(r.n_notes == 0, "no notes on a perfect host");
    perfect_host(&p);
    p.sha256.ok = false;
    p.sha256.error = -EIO;
    executor_readiness_compute(&p, PROBE_EXECUTOR_HOST, &r);
    ok(!r.host_features_ready && has_missing(&r, "sha256") && strstr(r.remediation, "libssl-dev") != NULL,
       "no working SHA-256 => --safe not ready, sha256 missing, remediation says rebuild against libssl-dev");

    /* No userns: unprivileged clone disabled. */
    perfect_host(&p);
    bad(&p.userns.userns, -EPERM);
    bad(&p.userns.mount_ns, -ECANCELED);
    bad(&p.userns.pid_ns, -ECANCELED);
    bad(&p.userns.tmpfs_mount, -ECANCELED);
    p.userns.unprivileged_userns_clone = 0;
    executor_readiness_compute(&p, PROBE_EXECUTOR_HOST, &r);
    ok(!r.host_features_ready && has_missing(&r, "user_namespaces"), "no userns => not ready, user_namespaces missing");
    ok(!has_missing(&r, "mount_namespace") && !has_missing(&r, "tmpfs_in_userns"),
       "untried nested namespaces are not listed, only the root cause");
    ok(mentions(&r, "sysctl -w kernel.unprivileged_userns_clone=1"), "no userns => remediation names the sysctl");
    ok(r.ready_plain, "missing --safe features do not block plain host runs");
    ok(r.remediation[0] >= 'A' && r.remediation[0] <= 'Z' && r.remediation[strlen(r.remediation) - 1] == '.',
       "remediation is one capitalised sentence");

    /* As root the unprivileged sysctl is irrelevant. */
    p.uid = p.euid = 0;
    p.userns.max_user_namespaces = 0;
    bad(&p.userns.userns, -ENOSPC);
    executor_readiness_compute(&p, PROBE_EXECUTOR_HOST, &r);
    ok(mentions(&r, "user.max_user_namespaces") && !mentions(&r, "unprivileged_userns_clone"),
       "max_user_namespaces=0 => remediation raises it (root ignores unprivileged_userns_clone)");

    perfect_host(&p);
    bad(&p.userns.userns, -EACCES);
    p.userns.apparmor_restrict_unprivileged_userns = 1;
    executor_readiness_compute(&p, PROBE_EXECUTOR_HOST, &r);
    ok(mentions(&r, "apparmor_restrict_unprivileged_userns=0"), "AppArmor restriction => remediation names its sysctl");

    /* Namespaces failing for one cause: one clause, not five. */
    perfect_host(&p);
    bad(&p.userns.pid_ns, -EPERM);
    bad(&p.userns.net_ns, -EPERM);
    p.userns.apparmor_restrict_unprivileged_userns = 1;
    executor_readiness_compute(&p, PROBE_EXECUTOR_HOST, &r);
    ok(has_missing(&r, "pid_namespace") && has_missing(&r, "net_namespace") && r.n_missing == 2,
       "each failing namespace is listed");
    ok(count_occurrences(r.remediation, "apparmor_restrict_unprivileged_userns") == 1,
       "identical remediation clauses are given once");

    perfect_host(&p);
    bad(&p.userns.net_ns, -EINVAL);
    executor_readiness_compute(&p, PROBE_EXECUTOR_HOST, &r);
    ok(mentions(&r, "CONFIG_NET_NS"), "EINVAL on CLONE_NEWNET => kernel config remediation");

    perfect_host(&p);
    bad(&p.userns.tmpfs_mount, -EPERM);
    executor_readiness_compute(&p, PROBE_EXECUTOR_HOST, &r);
    ok(has_missing(&r, "tmpfs_in_userns") && !r.host_features_ready, "tmpfs mount failure blocks --safe");

    /* Landlock. */
    perfect_host(&p);
    bad(&p.landlock.usable, -EOPNOTSUPP);
    p.landlock.abi = 0;
    p.landlock.lsm_listed = PROBE_NO;
    strcpy(p.landlock.lsm_list, "lockdown,capability,yama,apparmor");
    executor_readiness_compute(&p, PROBE_EXECUTOR_HOST, &r);
    ok(has_missing(&r, "landlock") && mentions(&r, "lsm=lockdown,capability,yama,apparmor,landlock"),
       "Landlock EOPNOTSUPP => boot with the current lsm= list plus landlock");
    p.landlock.lsm_listed = PROBE_UNKNOWN;
    p.landlock.lsm_list[0] = '\0';
    executor_readiness_compute(&p, PROBE_EXECUTOR_HOST, &r);
    ok(mentions(&r, "lsm="), "Landlock EOPNOTSUPP, LSM list unreadable => remediation still mentions lsm=");
    bad(&p.landlock.usable, -ENOSYS);
    executor_readiness_compute(&p, PROBE_EXECUTOR_HOST, &r);
    ok(mentions(&r, "CONFIG_SECURITY_LANDLOCK") && !mentions(&r, "lsm="),
       "Landlock ENOSYS => kernel config remediation, not lsm=");

    /* /dev/fuse. */
    perfect_host(&p);
    bad(&p.fuse.usable, -EACCES);
    p.fuse.openable = false;
    executor_readiness_compute(&p, PROBE_EXECUTOR_HOST, &r);
    ok(has_missing(&r, "fuse") && mentions(&r, "chmod 0666 /dev/fuse"), "/dev/fuse EACCES => chmod remediation");
    bad(&p.fuse.usable, -ENOENT);
    p.fuse.exists = false;
    executor_readiness_compute(&p, PROBE_EXECUTOR_HOST, &r);
    ok(mentions(&r, "modprobe fuse"), "/dev/fuse absent => modprobe remediation");
    p.fuse.exists = true;
    p.fuse.is_fuse_chardev = false;
    bad(&p.fuse.usable, 0);
    executor_readiness_compute(&p, PROBE_EXECUTOR_HOST, &r);
    ok(mentions(&r, "mknod"), "/dev/fuse wrong node => mknod remediation");

    /* seccomp, openat2. */
    perfect_host(&p);
    bad(&p.seccomp.filter, -EINVAL);
    bad(&p.openat2, -ENOSYS);
    executor_readiness_compute(&p, PROBE_EXECUTOR_HOST, &r);
    ok(has_missing(&r, "seccomp") && has_missing(&r, "openat2") && r.n_missing == 2,
       "seccomp and openat2 failures are both listed");
    ok(mentions(&r, "CONFIG_SECCOMP_FILTER") && mentions(&r, "openat2"), "both get a remediation clause");

    /* cgroup delegation is advisory. */
    perfect_host(&p);
    bad(&p.cgroup.delegated, -EACCES);
    executor_readiness_compute(&p, PROBE_EXECUTOR_HOST, &r);
    ok(r.host_features_ready && r.n_notes == 1, "no cgroup delegation => a note, not a blocker");

    /* An older Landlock: what it leaves out is said, blocking nothing. */
    perfect_host(&p);
    p.landlock.abi = 5;
    executor_readiness_compute(&p, PROBE_EXECUTOR_HOST, &r);
    ok(r.host_features_ready && r.n_notes == 1 && strstr(r.notes[0], "no scopes: --filesystem sandbox is refused"),
       "Landlock ABI 5 => a note: no scopes, --filesystem sandbox refused");
    p.landlock.abi = 2; /* Debian 12's 6.1 */
    executor_readiness_compute(&p, PROBE_EXECUTOR_HOST, &r);
    ok(r.host_features_ready && r.n_notes == 2 && strstr(r.notes[0], "no TCP rights"),
       "Landlock ABI 2 => notes: no TCP rights, no scopes");

    /* oci. */
    perfect_host(&p);
    executor_readiness_compute(&p, PROBE_EXECUTOR_OCI, &r);
    is_str(r.name, "oci", "oci readiness is named oci");
    ok(r.host_features_ready && r.n_missing == 0, "crun + features => oci host features ready");
#if !PVISOR_OCI_IMPLEMENTED
    ok(!r.ready_plain && !r.ready_safe && r.reason && strstr(r.reason, "not implemented"),
       "oci is never ready while not implemented, and says why");
#endif
    p.crun.found = false;
    executor_readiness_compute(&p, PROBE_EXECUTOR_OCI, &r);
    ok(has_missing(&r, "oci_runtime") && mentions(&r, "crun") && !r.host_features_plain,
       "no crun/runc => oci_runtime missing, install crun");
    p.runc.found = true;
    executor_readiness_compute(&p, PROBE_EXECUTOR_OCI, &r);
    ok(!has_missing(&r, "oci_runtime") && r.n_notes == 1, "runc alone satisfies the runtime, with a note");

    /* vm. */
    perfect_host(&p);
    executor_readiness_compute(&p, PROBE_EXECUTOR_VM, &r);
    is_str(r.name, "vm", "vm readiness is named vm");
    ok(r.host_features_ready && r.n_notes == 0, "qemu + kvm => vm host features ready, no notes");
#if !PVISOR_VM_IMPLEMENTED
    ok(!r.ready_plain && !r.ready_safe && r.reason, "vm is never ready while not implemented");
#endif
    p.qemu.found = false;
    bad(&p.kvm.usable, -ENOENT);
    executor_readiness_compute(&p, PROBE_EXECUTOR_VM, &r);
    ok(has_missing(&r, "qemu") && mentions(&r, "qemu-system-x86") && r.n_notes == 1 && !has_missing(&r, "kvm"),
       "no qemu => qemu missing with package; no kvm => only a note (TCG)");

    /* JSON of a hand-made readiness. */
    json_t *j = executor_readiness_to_json(&r);
    static const char *const rk[] = {
        "implemented",         "safe_implemented", "ready_plain", "ready_safe",  "host_features_plain",
        "host_features_ready", "reason",           "missing",     "remediation", "notes"};
    ok(has_keys(j, rk, ARRAY_SIZE(rk)) && json_is_array(json_object_get(j, "missing")) &&
           json_is_string(json_object_get(j, "remediation")),
       "executor_readiness_to_json has the documented keys");
    json_decref(j);
}

static void test_real_probe(void) {
    struct host_probe *p = calloc(1, sizeof *p);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    int r = host_probe_run(p);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ms = (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6;
    ok(r == 0, "host_probe_run ran (r=%d)", r);
    printf("# host_probe_run took %.1f ms\n", ms);
    ok(ms < 2000, "host_probe_run is cheap");
    ok(p->kernel_release[0] != '\0', "kernel release recorded");

    json_t *j = probe_to_json(p);
    static const char *const keys[] = {
        "uid",
        "euid",
        "kernel_release",
        "machine",
        "user_namespaces",
        "mount_namespace",
        "pid_namespace",
        "net_namespace",
        "ipc_namespace",
        "uts_namespace",
        "tmpfs_in_userns",
        "fuse",
        "landlock",
        "seccomp",
        "openat2",
        "sha256",
        "cgroup_v2",
        "crun",
        "runc",
        "qemu",
        "kvm",
        "pidfd_open",
        "close_range",
        "no_new_privs",
    };
    ok(has_keys(j, keys, ARRAY_SIZE(keys)) && json_object_size(j) == ARRAY_SIZE(keys),
       "probe_to_json has exactly the documented top-level keys");
    static const char *const statuses[] = {
        "user_namespaces", "mount_namespace", "pid_namespace", "net_namespace", "ipc_namespace",
        "uts_namespace",   "tmpfs_in_userns", "fuse",          "landlock",      "seccomp",
        "openat2",         "cgroup_v2",       "kvm",           "pidfd_open",    "close_range"};
    bool all = true;
    for (size_t i = 0; j && i < ARRAY_SIZE(statuses); i++)
        if (!is_status(json_object_get(j, statuses[i]))) {
            printf("#   %s is not a status object\n", statuses[i]);
            all = false;
        }
    ok(all, "every feature status has ok/error/detail");
    static const char *const uk[] = {"kernel.unprivileged_userns_clone", "user.max_user_namespaces",
                                     "kernel.apparmor_restrict_unprivileged_userns"};
    ok(has_keys(json_object_get(json_object_get(j, "user_namespaces"), "sysctls"), uk, 3), "userns sysctls present");
    static const char *const fk[] = {"exists", "char_device", "openable"};
    ok(has_keys(json_object_get(j, "fuse"), fk, 3), "fuse keys");
    static const char *const lk[] = {"abi", "lsm_listed", "lsm_list"};
    ok(has_keys(json_object_get(j, "landlock"), lk, 3) &&
           json_is_integer(json_object_get(json_object_get(j, "landlock"), "abi")),
       "landlock keys");
    static const char *const sk[] = {"current_mode", "actions"};
    static const char *const ak[] = {"errno", "kill_process", "user_notif"};
    json_t *sc = json_object_get(j, "seccomp");
    ok(has_keys(sc, sk, 2) && has_keys(json_object_get(sc, "actions"), ak, 3), "seccomp keys");
    static const char *const ck[] = {"path",           "mount",           "delegated",   "dir_writable",
                                     "procs_writable", "parent_writable", "controllers", "subtree_control"};
    json_t *cg = json_object_get(j, "cgroup_v2");
    ok(has_keys(cg, ck, ARRAY_SIZE(ck)) && is_status(json_object_get(cg, "delegated")), "cgroup_v2 keys");
    static const char *const bk[] = {"found", "path"};
    ok(has_keys(json_object_get(j, "crun"), bk, 2) && has_keys(json_object_get(j, "runc"), bk, 2) &&
           has_keys(json_object_get(j, "qemu"), bk, 2),
       "binary keys");
    json_decref(j);

    j = executors_to_json(p);
    static const char *const ek[] = {"host", "oci", "vm"};
    ok(has_keys(j, ek, 3) && json_object_size(j) == 3, "executors_to_json has host, oci, vm");
    ok(json_is_true(json_object_get(json_object_get(j, "host"), "ready_plain")) == (bool)PVISOR_HOST_PLAIN_IMPLEMENTED,
       "host plain readiness equals what the build implements");
    ok(json_is_true(json_object_get(json_object_get(j, "host"), "ready_safe")) ? PVISOR_HOST_SAFE_IMPLEMENTED : 1,
       "host --safe is not claimed by an unimplemented build");
    json_decref(j);
    free(p);
}

/* A sandboxed run's probes: no namespace child; the namespace statuses are
 * "not tried" until the run says what it made, then ok for what it made
 * and still "not tried" for what it did not. */
static void test_in_process_probe(void) {
    struct host_probe *p = calloc(1, sizeof *p);
    ok(host_probe_run_in_process(p) == 0, "host_probe_run_in_process ran");
    struct probe_status *nss[] = {&p->userns.userns, &p->userns.mount_ns, &p->userns.pid_ns,     &p->userns.net_ns,
                                  &p->userns.ipc_ns, &p->userns.uts_ns,   &p->userns.tmpfs_mount};
    bool pending = true;
    for (size_t i = 0; i < ARRAY_SIZE(nss); i++)
        pending = pending && !nss[i]->ok && nss[i]->error == -ECANCELED && strstr(nss[i]->detail, "not tried apart");
    ok(pending, "in process: every namespace status is 'not tried' (ECANCELED), none claimed ok");
    ok(p->userns.max_user_namespaces != 0 && p->fuse.exists == (access("/dev/fuse", F_OK) == 0),
       "in process: the sysctls and the other probes are read");
    struct probe_run_namespaces none = {.user = false};
    probe_namespaces_made_by_run(p, &none);
    ok(!p->userns.userns.ok && p->userns.userns.error == -ECANCELED, "a run that made no user namespace claims none");
    struct probe_run_namespaces made = {
        .user = true, .mount = true, .pid = true, .net = false, .ipc = true, .uts = true, .tmpfs = true};
    snprintf(made.uid_map, sizeof made.uid_map, "0 1000 1");
    probe_namespaces_made_by_run(p, &made);
    ok(p->userns.userns.ok && strstr(p->userns.userns.detail, "uid_map \"0 1000 1\"") && p->userns.mount_ns.ok &&
           p->userns.pid_ns.ok && p->userns.ipc_ns.ok && p->userns.uts_ns.ok && p->userns.tmpfs_mount.ok,
       "what the run made is ok, with its map");
    ok(!p->userns.net_ns.ok && p->userns.net_ns.error == -ECANCELED && strstr(p->userns.net_ns.detail, "made none"),
       "a namespace the run did not make stays 'not tried'");
    json_t *j = probe_to_json(p);
    ok(j && json_is_false(json_object_get(json_object_get(j, "net_namespace"), "ok")) &&
           strcmp(json_string_value(json_object_get(json_object_get(j, "net_namespace"), "error")), "ECANCELED") == 0,
       "and so in the JSON");
    json_decref(j);
    free(p);
}

int main(void) {
    test_readiness();
    test_real_probe();
    test_in_process_probe();
    return tap_done();
}
