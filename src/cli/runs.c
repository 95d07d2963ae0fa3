/* runs.c: see runs.h. */
#include "cli/runs.h"
#include "cli/cli.h"
#include "evidence/bundle.h"
#include "util/cleanup.h"
#include "util/util.h"
#ifdef PVISOR_HAVE_OVERLAY
#include "stage/stage.h"
#endif

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

int runs_resolve(const char *query, char **ret_id) {
    char **ids = NULL;
    size_t n = 0;
    int r = runs_list_ids(&ids, &n);
    if (r < 0)
        return r;
    if (n == 0) {
        runs_free_ids(ids);
        return -ENOENT;
    }
    const char *match = NULL;
    if (query && !*query) { /* a prefix of every id, but names none */
        runs_free_ids(ids);
        return -ENOENT;
    }
    if (!query || strcmp(query, "latest") == 0) {
        match = ids[0];
    } else {
        size_t ql = strlen(query);
        for (size_t i = 0; i < n; i++) {
            if (strcmp(ids[i], query) == 0) {
                match = ids[i];
                break;
            }
            if (strncmp(ids[i], query, ql) == 0) {
                if (match) {
                    runs_free_ids(ids);
                    return -ENOTUNIQ;
                }
                match = ids[i];
            }
        }
    }
    char *res = match ? strdup(match) : NULL;
    runs_free_ids(ids);
    if (!match)
        return -ENOENT;
    if (!res)
        return -ENOMEM;
    *ret_id = res;
    return 0;
}

char *runs_command_arg_display(const json_t *command, const json_t *command_hex, size_t i) {
    const char *s = json_string_value(json_array_get(command, i));
    if (s)
        return term_escape(s);
    const char *hex = json_string_value(json_array_get(command_hex, i));
    _cleanup_free_ char *raw = NULL;
    if (!hex || hex_decode(hex, &raw) < 0)
        return NULL;
    return term_escape(raw);
}

/* Is the supervisor recorded in the bundle still alive and still pvisor? */
static bool supervisor_alive(const json_t *b) {
    json_int_t pid = json_integer_value(json_object_get(json_object_get(b, "user"), "supervisor_pid"));
    if (pid <= 0)
        return false;
    char path[64];
    snprintf(path, sizeof path, "/proc/%lld/comm", (long long)pid);
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    if (!f)
        return false;
    char comm[32] = "";
    if (!fgets(comm, sizeof comm, f))
        return false;
    return strncmp(comm, "pvisor", 6) == 0;
}

const char *runs_display_state(const json_t *bundle) {
    const char *s = json_string_value(json_object_get(bundle, "state"));
    if (!s)
        return "unknown";
    if ((strcmp(s, "running") == 0 || strcmp(s, "starting") == 0) && !supervisor_alive(bundle))
        return "interrupted";
    return s;
}

const char *runs_stage_state(const json_t *bundle) {
    const json_t *st = json_object_get(bundle, "stage");
    const char *recorded = json_string_value(json_object_get(st, "state"));
    const char *path = json_string_value(json_object_get(st, "path"));
    if (!path)
        return recorded;
#ifdef PVISOR_HAVE_OVERLAY
    enum stage_state s;
    if (stage_probe_state(path, &s) >= 0)
        return stage_state_name(s);
    return "missing";
#else
    return recorded;
#endif
}

int runs_dir_error(const char *verb, int r) {
    _cleanup_free_ char *sd = NULL;
    (void)state_dir(&sd);
    _cleanup_free_ char *dir = sd ? path_join(sd, "runs") : NULL;
    _cleanup_free_ char *shown = dir ? term_escape(dir) : NULL;
    /* runs_dir: not ours alone (run: before anything ran, PV_EXIT_SETUP) */
    int status = strcmp(verb, "run") == 0 ? PV_EXIT_SETUP : PV_EXIT_FAILURE;
    _cleanup_free_ char *above = NULL;
    if (r == -EPERM && sd && path_parent_unsafe(sd, &above) > 0) {
        _cleanup_free_ char *shown_above = term_escape(above);
        return cli_error(status, verb,
                         "the runs directory %s is below %s, which another user owns or others may write in: they "
                         "could move it away and put runs and stages of theirs in its place; use a directory of your "
                         "own (XDG_STATE_HOME)",
                         shown ? shown : "?", shown_above ? shown_above : "?");
    }
    if (r == -EPERM)
        return cli_error(status, verb,
                         "the runs directory %s (or the state directory holding it) is another user's, or others may "
                         "write in it: whoever owns it could "
                         "replace your runs and stages; use a directory of your own (XDG_STATE_HOME)",
                         shown ? shown : "?");
    return cli_error(PV_EXIT_FAILURE, verb, "cannot read the runs directory %s: %s (set XDG_STATE_HOME to yours)",
                     shown ? shown : "?", strerror(-r));
}

/* The pid of the process whose flock(2) is on the file st describes, from
 * /proc/locks ("N: FLOCK ADVISORY WRITE PID MAJ:MIN:INO 0 EOF", numbers of
 * the device in hex; a waiter's line has "->"), or 0. */
static pid_t flock_holder(const struct stat *st) {
    _cleanup_fclose_ FILE *f = fopen("/proc/locks", "re");
    char line[256];
    while (f && fgets(line, sizeof line, f)) {
        int pid;
        unsigned maj, min;
        unsigned long long ino;
        if (strstr(line, "->") || !strstr(line, " FLOCK "))
            continue;
        const char *p = strstr(line, " FLOCK ");
        if (sscanf(p, " FLOCK %*s %*s %d %x:%x:%llu", &pid, &maj, &min, &ino) == 4 && pid > 0 &&
            maj == major(st->st_dev) && min == minor(st->st_dev) && ino == (unsigned long long)st->st_ino)
            return (pid_t)pid;
    }
    return 0;
}

char *runs_stage_lock_holder(const char *stage_path, bool *ret_run) {
    *ret_run = false;
    _cleanup_free_ char *lock = path_join(stage_path, "lock");
    struct stat st;
    if (!lock || lstat(lock, &st) < 0 || !S_ISREG(st.st_mode))
        return NULL;
    pid_t pid = flock_holder(&st);
    if (pid <= 0)
        return NULL;
    /* its command line: "pvisor VERB ..." (argv[0] as it was run) */
    char path[64], args[256] = "";
    snprintf(path, sizeof path, "/proc/%d/cmdline", (int)pid);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, args, sizeof args - 1) : -1;
    args[n > 0 ? n : 0] = '\0';
    const char *base = strrchr(args, '/') ? strrchr(args, '/') + 1 : args;
    const char *verb = n > 0 && (size_t)(strlen(args) + 1) < (size_t)n ? args + strlen(args) + 1 : "";
    char *out = NULL;
    if (strncmp(base, "pvisor", 6) == 0 && strcmp(verb, "run") == 0) {
        *ret_run = true;
        if (asprintf(&out, "its run (pid %d)", (int)pid) < 0)
            out = NULL;
    } else if (strncmp(base, "pvisor", 6) == 0 && *verb && strspn(verb, "abcdefghijklmnopqrstuvwxyz") == strlen(verb)) {
        if (asprintf(&out, "a 'pvisor %s' (pid %d)", verb, (int)pid) < 0)
            out = NULL;
    } else {
        char comm[32] = "?";
        snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
        _cleanup_fclose_ FILE *c = fopen(path, "re");
        if (c && fgets(comm, sizeof comm, c))
            comm[strcspn(comm, "\n")] = '\0';
        _cleanup_free_ char *shown = term_escape(comm);
        if (asprintf(&out, "process %d (%s)", (int)pid, shown ? shown : "?") < 0)
            out = NULL;
    }
    return out;
}

int runs_stage_busy_error(const char *verb, const char *stage_path, const char *run_advice) {
    bool run;
    _cleanup_free_ char *holder = runs_stage_lock_holder(stage_path, &run);
    if (holder && run)
        return cli_error(PV_EXIT_FAILURE, verb, "refused: the stage %s is in use by %s; %s", stage_path, holder,
                         run_advice);
    if (holder)
        return cli_error(PV_EXIT_FAILURE, verb,
                         "refused: the stage %s is in use by %s; run this again once it has finished", stage_path,
                         holder);
    return cli_error(PV_EXIT_FAILURE, verb,
                     "refused: the stage %s is in use (by its run, or a restore, fork, checkpoint, drop or apply of "
                     "it); if a run, %s; otherwise run this again once that has finished",
                     stage_path, run_advice);
}

void runs_remove_leftovers(const char *id) {
    _cleanup_free_ char *dir = NULL;
    if (!id || runs_dir(false, &dir) < 0)
        return;
    _cleanup_free_ char *p = path_join(dir, id);
    _cleanup_close_ int fd = p ? open(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW) : -1;
    if (fd < 0 || flock(fd, LOCK_EX | LOCK_NB) < 0)
        return;                                       /* its supervisor lives (or starts): it removes them */
    (void)remove_tree_at(fd, "home-stage", UINT_MAX); /* any depth the command made */
    (void)unlinkat(fd, "home-view", AT_REMOVEDIR);
    (void)unlinkat(fd, "agent.sock", 0);
    (void)unlinkat(fd, "bundle.room", 0);
}
