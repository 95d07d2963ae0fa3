/* cmd_doctor.c: `pvisor doctor [--json]`: what this host offers, per
 * feature, and what each executor can do here with this build.
 *
 * The probes run as the invoking uid (evidence/probe.c); this file only
 * renders them.  Exit 0 whenever the probes ran, however many features are
 * missing; 1 only when probing itself failed (fork/pipe).  Must run before
 * any thread is started (the userns probe forks).
 */
#include "cli/cli.h"
#include "config.h"
#include "evidence/probe.h"
#include "resources/cgroup.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const char *status_word(const struct probe_status *s) {
    if (s->ok)
        return "ok";
    return s->error == -ECANCELED ? "skipped" : "missing";
}

static void row(const char *label, const char *word, const char *detail) {
    printf("  %-20s %-8s %s\n", label, word, detail ? detail : "");
}

static void status_row(const char *label, const struct probe_status *s) {
    row(label, status_word(s), s->detail);
}

static void binary_row(const char *label, const struct probe_binary *b) {
    row(label, b->found ? "ok" : "missing", b->found ? b->path : "not found on $PATH");
}

static void print_features(const struct host_probe *p) {
    printf("pvisor %s doctor: kernel %s (%s), uid %u\n\n", PVISOR_VERSION,
           p->kernel_release[0] ? p->kernel_release : "?", p->kernel_machine[0] ? p->kernel_machine : "?",
           (unsigned)p->euid);
    printf("  %-20s %-8s %s\n", "FEATURE", "STATUS", "DETAIL");
    status_row("user namespaces", &p->userns.userns);
    status_row("  mount namespace", &p->userns.mount_ns);
    status_row("  pid namespace", &p->userns.pid_ns);
    status_row("  net namespace", &p->userns.net_ns);
    status_row("  ipc namespace", &p->userns.ipc_ns);
    status_row("  uts namespace", &p->userns.uts_ns);
    status_row("  tmpfs mount", &p->userns.tmpfs_mount);
    status_row("/dev/fuse", &p->fuse.usable);
    status_row("landlock", &p->landlock.usable);
    status_row("seccomp filters", &p->seccomp.filter);
    status_row("openat2", &p->openat2);
    status_row("SHA-256 (libcrypto)", &p->sha256);
    status_row("cgroup v2", &p->cgroup.v2);
    status_row("  delegation", &p->cgroup.delegated);
    binary_row("crun", &p->crun);
    binary_row("runc", &p->runc);
    binary_row("qemu-system-*", &p->qemu);
    status_row("/dev/kvm", &p->kvm.usable);
    status_row("pidfd_open", &p->pidfd_open);
    status_row("close_range", &p->close_range);
    row("no_new_privs", "info",
        p->no_new_privs < 0 ? "unknown"
        : p->no_new_privs   ? "already set on pvisor"
                            : "not set (settable)");
}

/* Where runs are recorded, and whether this uid can record one there:
 * every run (plain ones too) writes its Bundle there first, and failed
 * with 125 where the features above said nothing was missing.  Nothing
 * is created: the nearest existing directory on the way is checked. */
static void print_state_dir(void) {
    _cleanup_free_ char *runs = NULL;
    int r = runs_dir(false, &runs);
    const char *x = getenv("XDG_STATE_HOME");
    const char *ignored = x && x[0] && x[0] != '/' ? " (XDG_STATE_HOME is relative, so ignored)" : "";
    if (r == -EPERM) {
        _cleanup_free_ char *sd = NULL, *above = NULL;
        (void)state_dir(&sd);
        bool below = sd && path_parent_unsafe(sd, &above) > 0;
        _cleanup_free_ char *shown = sd ? term_escape(sd) : NULL, *shown_above = above ? term_escape(above) : NULL;
        if (below)
            printf("State:  refused: %s is below %s, which another user owns or others may write in: every run "
                   "fails; set XDG_STATE_HOME to a directory of your own%s\n",
                   shown ? shown : "?", shown_above ? shown_above : "?", ignored);
        else
            printf("State:  refused: %s (or its runs/) is another user's, or others may write in it: every run "
                   "fails; set XDG_STATE_HOME to a directory of your own%s\n",
                   shown ? shown : "?", ignored);
        return;
    }
    if (r < 0) {
        printf("State:  missing: no state directory (%s): set XDG_STATE_HOME or HOME to an absolute path%s\n",
               strerror(-r), ignored);
        return;
    }
    _cleanup_free_ char *at = strdup(runs);
    if (!at) {
        printf("State:  %s: out of memory\n", runs);
        return;
    }
    struct stat st;
    int e = 0;
    for (;;) {
        if (stat(at, &st) == 0) {
            e = !S_ISDIR(st.st_mode) ? ENOTDIR : access(at, W_OK | X_OK) < 0 ? errno : 0;
            break;
        }
        char *slash = strrchr(at, '/');
        if (errno != ENOENT || !slash) {
            e = errno;
            break;
        }
        if (slash == at)
            slash[1] = '\0';
        else
            *slash = '\0';
    }
    _cleanup_free_ char *shown = term_escape(runs), *shown_at = term_escape(at);
    if (e == 0)
        printf("State:  %s (runs are recorded there)%s\n", shown ? shown : "?", ignored);
    else
        printf("State:  missing: runs cannot be recorded in %s (%s: %s): every run fails; set XDG_STATE_HOME to a "
               "directory you can write%s\n",
               shown ? shown : "?", shown_at ? shown_at : "?", strerror(e), ignored);
}

#define DOCTOR_LEAVES_MAX 64

/* The leaves of runs whose supervisor died (kill -9, the OOM killer) in
 * pvisor's cgroup, as the next run with --limit there finds them: named
 * "pvisor-*", unchanged for a minute, not flock'ed by a live supervisor
 * (each holds its leaf's lock for the run's life); an empty one that run
 * removes, one still holding processes (a live run's "-supervisor" sibling
 * is not one) it cannot.  Doctor removes none.  A JSON array of
 * {"path", "populated"}; NULL when pvisor has no cgroup v2 directory. */
static json_t *stale_leaves(void) {
    struct cgroup_where *w = calloc(1, sizeof *w); /* large: off the stack */
    if (!w)
        return NULL;
    int r = cgroup_locate(w);
    _cleanup_close_ int dfd = r == 0 || r == -EACCES ? open(w->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) : -1;
    _cleanup_closedir_ DIR *d = NULL;
    json_t *found = dfd >= 0 && dup_opendir(dfd, &d) == 0 ? json_array() : NULL;
    struct dirent *de;
    while (found && json_array_size(found) < DOCTOR_LEAVES_MAX && (de = readdir_no_dots(d))) {
        _cleanup_close_ int fd = cgroup_stale_leaf_open(dfd, de);
        if (fd < 0)
            continue;
        _cleanup_free_ char *events = NULL;
        bool populated = read_file_at(fd, "cgroup.events", 4096, &events, NULL) < 0 || strstr(events, "populated 1");
        size_t n = strlen(de->d_name);
        if (populated && n > 11 && strcmp(de->d_name + n - 11, "-supervisor") == 0)
            continue; /* a live supervisor moved there */
        _cleanup_free_ char *path = path_join(w->dir, de->d_name);
        json_array_append_new(found, json_pack("{s:s, s:b}", "path", path ? path : de->d_name, "populated", populated));
    }
    free(w);
    return found;
}

static void print_stale_leaves(const json_t *leaves) {
    size_t n = json_array_size(leaves), n_empty = 0;
    if (!n)
        return;
    printf("Cgroup: %zu%s cgroup %s of runs whose supervisor died (kill -9, the OOM killer):\n", n,
           n == DOCTOR_LEAVES_MAX ? " or more" : "", n == 1 ? "leaf" : "leaves");
    for (size_t i = 0; i < n; i++) {
        const json_t *l = json_array_get(leaves, i);
        _cleanup_free_ char *e = term_escape(json_string_value(json_object_get(l, "path")));
        bool populated = json_is_true(json_object_get(l, "populated"));
        n_empty += !populated;
        if (populated)
            printf("  %s: processes of that run are still in it; end them with 'echo 1 > %s/cgroup.kill', then "
                   "rmdir it\n",
                   e ? e : "?", e ? e : "?");
        else
            printf("  %s: empty\n", e ? e : "?");
    }
    if (n_empty)
        printf("  (the next run with --limit started in this cgroup removes the empty ones; or rmdir them)\n");
}

static void print_executor(const struct executor_readiness *r) {
    char label[16];
    (void)snprintf(label, sizeof label, "%s:", r->name);
    printf("%-6s plain runs: %s; --stage: %s; --safe: %s", label, r->ready_plain ? "yes" : "no",
           r->ready_stage ? "yes" : "no", r->ready_safe ? "yes" : "no");
    const char *sep = " — ";
    if (r->reason) {
        printf("%s%s", sep, r->reason);
        sep = "; ";
        if (r->host_features_ready)
            printf(" (this host has the features it needs)");
    }
    if (r->n_missing > 0) {
        printf("%shost lacks", sep);
        for (size_t i = 0; i < r->n_missing; i++)
            printf("%s%s", i ? ", " : " ", r->missing[i]);
        if (r->remediation[0])
            printf(": %s", r->remediation);
    }
    printf("\n");
    for (size_t i = 0; i < r->n_notes; i++)
        printf("       note: %s\n", r->notes[i]);
}

static int print_json(const struct host_probe *p) {
    json_t *features = probe_to_json(p);
    json_t *executors = executors_to_json(p);
    if (!features || !executors) {
        json_decref(features);
        json_decref(executors);
        return -ENOMEM;
    }
    json_t *leaves = stale_leaves();
    json_t *o = json_pack("{s:s, s:o, s:o, s:o}", "pvisor_version", PVISOR_VERSION, "features", features, "executors",
                          executors, "stale_cgroup_leaves", leaves ? leaves : json_array());
    if (!o)
        return -ENOMEM;
    int r = json_dumpf(o, stdout, JSON_INDENT(2)) < 0 ? -EIO : 0;
    json_decref(o);
    if (r == 0 && fputc('\n', stdout) == EOF)
        r = -EIO;
    return r;
}

int cmd_doctor(int argc, char **argv) {
    bool as_json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return cli_print_help(cli_find_command("doctor"));
        if (strcmp(argv[i], "--json") == 0)
            as_json = true;
        else if (argv[i][0] == '-')
            return cli_usage_error("doctor", "unknown option '%s'", argv[i]);
        else
            return cli_usage_error("doctor", "unexpected argument '%s' (doctor takes no arguments)", argv[i]);
    }

    /* Large (path buffers): keep it off the stack. */
    struct host_probe *p = calloc(1, sizeof *p);
    if (!p)
        return cli_error(PV_EXIT_FAILURE, "doctor", "out of memory");
    int probe_r = host_probe_run(p);

    int r;
    if (as_json) {
        r = print_json(p);
    } else {
        print_features(p);
        printf("\n");
        print_state_dir();
        json_t *leaves = stale_leaves();
        print_stale_leaves(leaves);
        json_decref(leaves);
        printf("\nExecutors (this build: pvisor %s)\n", PVISOR_VERSION);
        for (int k = 0; k < PROBE_EXECUTOR_COUNT; k++) {
            struct executor_readiness er;
            executor_readiness_compute(p, (enum probe_executor)k, &er);
            print_executor(&er);
        }
        r = 0; /* its output lost: exit 1 (main), with the error */
    }
    free(p);

    if (probe_r < 0)
        return cli_error(PV_EXIT_FAILURE, "doctor", "probing failed: %s", strerror(-probe_r));
    if (r == -EIO) /* a write to stdout failed: its error */
        return cli_output_written("doctor");
    if (r < 0)
        return cli_error(PV_EXIT_FAILURE, "doctor", "cannot write the report: %s", strerror(-r));
    return PV_EXIT_OK;
}
