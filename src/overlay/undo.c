/* undo.c: take back the copy-up of an operation that then failed.
 *
 * A rename of a lower directory copies the whole subtree up before the
 * upper rename (nsops.c); a quota or a full disk can stop that copy part
 * way, and the rename can still fail after it.  The command changed
 * nothing then, but the copies would stay: byte-identical to the lower
 * files of that moment, journaled as renamed.  Such a copy hides every
 * later host edit of its file, in the view and at apply (the review calls
 * it the command's change, apply a conflict).  So while the operation
 * runs, what its copy-up does to upper/ is logged here (ov->undo): the
 * objects it made (copies, hard links of their other names, parents made
 * to hold them), the directories it made opaque and the whiteouts it
 * dropped from them.  A failed operation that moved nothing takes them
 * back in reverse order, then the journal records it appended
 * (stage_journal_rollback).
 *
 * Invariants: only what the log names is touched, and only while it is
 * the very object (st_dev, st_ino) logged: nothing the command made can
 * go.  It holds the ns write lock from the start of the operation to the
 * end of the undo, so no operation of the command can have changed a copy
 * meanwhile (the descriptors switched to a copy are read-only ones of the
 * lower file; ov_fh_to_upper), and those are switched back.  A step that
 * cannot be taken back (or a log that could not be kept: no memory) keeps
 * the journal, so no copy is ever left without its record.  Crash
 * safety: a stage whose run died in the middle is interrupted, which is
 * never applied nor run again (it is restored from a checkpoint, taken
 * with the view quiesced, or dropped).
 *
 * Caller holds the ns write lock (it protects ov->undo).
 */
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/openat2.h>

#include "overlay/ov-internal.h"
#include "util/cleanup.h"

enum undo_kind {
    UNDO_CREATED,  /* path was made (a copy, a link of its other name) */
    UNDO_OPAQUE,   /* the directory path was made opaque */
    UNDO_WHITEOUT, /* the whiteout at path was removed */
};

/* Paths, not descriptors: a tree holds more directories than a process
 * may hold descriptors.  An upper path is the view's path (no redirects),
 * and no name in upper/ changes while the ns write lock is held. */
struct ov_undo_step {
    enum undo_kind kind;
    char *path; /* relative to upper/ */
    dev_t dev;  /* UNDO_CREATED: the object made */
    ino_t ino;
    bool lower_reg; /* UNDO_CREATED: a regular file copied from the lower file at path */
    bool copy_up;   /* UNDO_CREATED: a copy-up, counted in ov->copy_ups */
};

static void undo_free(struct ov_undo *u) {
    for (size_t i = 0; i < u->n; i++)
        free(u->steps[i].path);
    free(u->steps);
    free(u->gone);
    *u = (struct ov_undo){0};
}

void ov_undo_begin(struct ov *ov, struct ov_undo *u) {
    *u = (struct ov_undo){0};
    if (stage_journal_begin(ov->stage) < 0)
        u->broken = true;
    ov->undo = u;
}

static struct ov_undo_step *push(struct ov *ov, enum undo_kind kind, const char *path) {
    struct ov_undo *u = ov->undo;
    if (!u || u->broken)
        return NULL;
    if (u->n == u->cap) {
        size_t nc = u->cap ? u->cap * 2 : 32;
        struct ov_undo_step *ns = realloc(u->steps, nc * sizeof(*ns));
        if (!ns) {
            u->broken = true;
            return NULL;
        }
        u->steps = ns;
        u->cap = nc;
    }
    struct ov_undo_step *s = &u->steps[u->n];
    *s = (struct ov_undo_step){.kind = kind, .path = strdup(path)};
    if (!s->path) {
        u->broken = true;
        return NULL;
    }
    u->n++;
    return s;
}

void ov_undo_created(struct ov *ov, int dfd, const char *name, const char *path, bool lower_reg, bool copy_up) {
    if (!ov->undo || ov->undo->broken)
        return;
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        ov->undo->broken = true;
        return;
    }
    struct ov_undo_step *s = push(ov, UNDO_CREATED, path);
    if (!s)
        return;
    s->dev = st.st_dev;
    s->ino = st.st_ino;
    s->lower_reg = lower_reg && S_ISREG(st.st_mode);
    s->copy_up = copy_up;
}

void ov_undo_opaque(struct ov *ov, int dir_fd, const char *path) {
    if (!ov->undo || ov->undo->broken)
        return;
    char p[40], v[8];
    if (ov_proc_path(dir_fd, p) < 0) {
        ov->undo->broken = true;
        return;
    }
    ssize_t n = getxattr(p, OV_XATTR_OPAQUE, v, sizeof v);
    if (n == 1 && v[0] == 'y')
        return; /* opaque already */
    if (n < 0 && errno != ENODATA && errno != ENOTSUP) {
        ov->undo->broken = true;
        return;
    }
    push(ov, UNDO_OPAQUE, path);
}

void ov_undo_whiteout(struct ov *ov, const char *dir_path, const char *name) {
    if (!ov->undo || ov->undo->broken)
        return;
    _cleanup_free_ char *path = NULL;
    if (asprintf(&path, "%s%s%s", dir_path, dir_path[0] ? "/" : "", name) < 0) {
        ov->undo->broken = true;
        return;
    }
    push(ov, UNDO_WHITEOUT, path);
}

/* O_PATH descriptor of the upper directory at dir (relative to upper/,
 * "" for upper/ itself), resolved beneath it without following symlinks */
static int upper_dir_open(struct ov *ov, const char *dir) {
    if (!dir[0]) {
        int fd = fcntl(ov->upper_fd, F_DUPFD_CLOEXEC, 3);
        return fd < 0 ? -errno : fd;
    }
    struct open_how how = {
        .flags = O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    long fd = syscall(SYS_openat2, ov->upper_fd, dir, &how, sizeof how);
    return fd < 0 ? -errno : (int)fd;
}

/* s->path split: its directory opened (*ret_dfd), its last name returned */
static const char *step_parent(struct ov *ov, const struct ov_undo_step *s, int *ret_dfd) {
    const char *slash = strrchr(s->path, '/');
    _cleanup_free_ char *dir = slash ? strndup(s->path, (size_t)(slash - s->path)) : strdup("");
    *ret_dfd = dir ? upper_dir_open(ov, dir) : -ENOMEM;
    return slash ? slash + 1 : s->path;
}

/* Remove the object s made, if it still is the one at its name. */
static int undo_created(struct ov *ov, struct ov_undo *u, const struct ov_undo_step *s) {
    _cleanup_close_ int dfd = -1;
    const char *name = step_parent(ov, s, &dfd);
    if (dfd < 0)
        return dfd;
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
    if (st.st_dev != s->dev || st.st_ino != s->ino)
        return -ESTALE;
    bool dir = S_ISDIR(st.st_mode);
    if (s->lower_reg && st.st_nlink <= 1)
        ov_fh_to_lower(ov, &st, s->path); /* its last name: no other will */
    struct timespec mtime = ov_dir_mtime(dfd);
    struct ov_mark m = ov_mark(dfd);
    int r = unlinkat(dfd, name, dir ? AT_REMOVEDIR : 0) < 0 ? -errno : 0;
    ov_account_mark(ov, &m);
    if (r < 0)
        return r;
    ov_dir_mtime_restore(dfd, mtime);
    ov_dir_changed(ov, dfd, name);
    if (dir || st.st_nlink <= 1) {
        stage_origin_forget(ov->stage, st.st_ino);
        if (u->n_gone < u->n)
            u->gone[u->n_gone++] = (struct ov_undo_gone){.dev = st.st_dev, .ino = st.st_ino};
    }
    ov_account_removed(ov, &st);
    if (s->copy_up) /* the run's count of copy-ups (the Bundle's) is of those that stay */
        atomic_fetch_sub(&ov->copy_ups, 1);
    return 0;
}

static int undo_whiteout(struct ov *ov, const struct ov_undo_step *s) {
    _cleanup_close_ int dfd = -1;
    const char *name = step_parent(ov, s, &dfd);
    if (dfd < 0)
        return dfd;
    struct timespec mtime = ov_dir_mtime(dfd);
    struct ov_mark m = ov_mark(dfd);
    int r = mknodat(dfd, name, S_IFCHR | 0000, makedev(0, 0)) < 0 ? -errno : 0;
    ov_account_mark(ov, &m);
    if (r < 0)
        return r;
    ov_dir_mtime_restore(dfd, mtime);
    ov_dir_changed(ov, dfd, name);
    struct stat wst = {.st_mode = S_IFCHR};
    ov_account_added(ov, &wst);
    return 0;
}

static int undo_opaque(struct ov *ov, const struct ov_undo_step *s) {
    _cleanup_close_ int fd = upper_dir_open(ov, s->path);
    if (fd == -ENOENT)
        return 0; /* a copy made by this operation, removed already */
    if (fd < 0)
        return fd;
    char p[40];
    if (ov_proc_path(fd, p) < 0)
        return -EOVERFLOW;
    struct ov_mark m = ov_mark(fd);
    int r = removexattr(p, OV_XATTR_OPAQUE) < 0 && errno != ENODATA ? -errno : 0;
    ov_account_mark(ov, &m);
    ov_dir_changed(ov, fd, NULL); /* merged again */
    return r;
}

static int cmp_gone(const void *a, const void *b) {
    const struct ov_undo_gone *x = a, *y = b;
    if (x->ino != y->ino)
        return x->ino < y->ino ? -1 : 1;
    return x->dev < y->dev ? -1 : x->dev > y->dev;
}

/* Nodes whose upper object the undo removed (the operation's own node and
 * the parents ov_copy_up copied) show their lower object again. */
static void nodes_forget_gone(struct ov *ov, struct ov_undo *u) {
    if (!u->n_gone)
        return;
    qsort(u->gone, u->n_gone, sizeof(*u->gone), cmp_gone);
    pthread_mutex_lock(&ov->tree_lock);
    for (struct ov_node *n = ov->all; n; n = n->all_next) {
        struct stat st;
        if (n->upper_fd < 0 || !n->hashed || fstat(n->upper_fd, &st) < 0)
            continue;
        struct ov_undo_gone key = {.dev = st.st_dev, .ino = st.st_ino};
        if (st.st_nlink || !bsearch(&key, u->gone, u->n_gone, sizeof key, cmp_gone))
            continue;
        close(n->upper_fd);
        n->upper_fd = -1;
        n->owner_state = 0;
        atomic_fetch_sub(&ov->n_upper_fds, 1);
        if (n->type != S_IFDIR)
            n->lower = true; /* ov_copy_up made it upper-only */
    }
    pthread_mutex_unlock(&ov->tree_lock);
}

int ov_undo_rollback(struct ov *ov, struct ov_undo *u) {
    ov->undo = NULL;
    int r = u->broken ? -ENOMEM : 0;
    if (!u->broken && u->n && !(u->gone = calloc(u->n, sizeof(*u->gone))))
        r = -ENOMEM;
    for (size_t i = u->n; r == 0 && i-- > 0;) {
        const struct ov_undo_step *s = &u->steps[i];
        switch (s->kind) {
        case UNDO_CREATED: r = undo_created(ov, u, s); break;
        case UNDO_WHITEOUT: r = undo_whiteout(ov, s); break;
        case UNDO_OPAQUE: r = undo_opaque(ov, s); break;
        }
    }
    nodes_forget_gone(ov, u);
    /* the records go only with every copy they describe */
    if (r == 0)
        r = stage_journal_rollback(ov->stage);
    else
        stage_journal_commit(ov->stage);
    undo_free(u);
    return r;
}

void ov_undo_commit(struct ov *ov, struct ov_undo *u) {
    ov->undo = NULL;
    stage_journal_commit(ov->stage);
    undo_free(u);
}
