/* stage.c: stage lifecycle (create / reopen / seal / probe), format v1.
 *
 * Layout (docs/stage-format.md): version, meta.json, upper/, work/, journal,
 * origin, lock, sealed (marker, published last), applied/dropped (reserved).
 *
 * Invariants:
 *  - While a run uses the stage, 'lock' is flock(LOCK_EX)'ed by it and the
 *    'sealed' marker is absent (removed durably before the run starts).
 *  - 'sealed' is published only after every upper file and directory, the
 *    journal and the origin map are durable.
 *  - work/ is scratch space for atomic copy-up; it is emptied on open.
 * Trust: the stage path is chosen by the user (trusted); file contents are
 * parsed with bounds.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "stage/stage-internal.h"
#include "util/cleanup.h"
#include "util/util.h"

const char *stage_state_name(enum stage_state s) {
    switch (s) {
    case STAGE_CREATED: return "created";
    case STAGE_RUNNING: return "running";
    case STAGE_SEALED: return "sealed";
    case STAGE_INTERRUPTED: return "interrupted";
    case STAGE_APPLIED: return "applied";
    case STAGE_DROPPED: return "dropped";
    }
    return "unknown";
}

int stage_upper_fd(const struct stage *s) {
    return s->upper_fd;
}
int stage_dir_fd(const struct stage *s) {
    return s->dir_fd;
}
int stage_work_fd(const struct stage *s) {
    return s->work_fd;
}
enum stage_durability stage_durability(const struct stage *s) {
    return s->durability;
}

/* Write dir_fd/name atomically: name.tmp, rename.  sync_bytes: fsync the
 * temp file before the rename; sync_name: fsync the directory after it.
 * A name.tmp already there (a crash's, or put there by whoever made the
 * directory) is removed and the temp file created anew: opened in place,
 * a hard link there to a file outside the stage had that file written,
 * and a FIFO there made the open wait for ever. */
static int publish_file(int dir_fd, const char *name, const void *buf, size_t len, bool sync_bytes, bool sync_name) {
    char tmp[64];
    int m = snprintf(tmp, sizeof tmp, "%s.tmp", name);
    if (m < 0 || (size_t)m >= sizeof tmp)
        return -ENAMETOOLONG;
    if (unlinkat(dir_fd, tmp, 0) < 0 && errno != ENOENT)
        return -errno;
    _cleanup_close_ int fd = openat(dir_fd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return -errno;
    int r = write_all(fd, buf, len);
    if (r < 0)
        return r;
    if (sync_bytes && fsync(fd) < 0)
        return -errno;
    if (renameat(dir_fd, tmp, dir_fd, name) < 0)
        return -errno;
    if (sync_name && fsync(dir_fd) < 0)
        return -errno;
    return 0;
}

/* Read a small file (bounded) into a NUL-terminated buffer.  Only a
 * regular file: a FIFO (in a directory named with --stage that is not
 * ours) is not waited on. */
static int read_small(int dir_fd, const char *name, size_t max, char **ret) {
    _cleanup_close_ int fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EINVAL;
    _cleanup_free_ char *buf = malloc(max + 1);
    if (!buf)
        return -ENOMEM;
    size_t got = 0;
    for (;;) {
        ssize_t n = read(fd, buf + got, max - got);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            break;
        got += (size_t)n;
        if (got == max)
            return -EFBIG;
    }
    buf[got] = '\0';
    *ret = TAKE_PTR(buf);
    return (int)got;
}

static bool exists_at(int dir_fd, const char *name) {
    struct stat st;
    return fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Is the directory (relative to dir_fd) empty?  1 yes, 0 no, -errno. */
static int dir_is_empty(int dir_fd, const char *name) {
    _cleanup_closedir_ DIR *d = NULL;
    int rd = opendir_at(dir_fd, name, &d);
    if (rd < 0)
        return rd;
    return readdir_no_dots(d) ? 0 : 1;
}

static off_t size_at(int dir_fd, const char *name) {
    struct stat st;
    if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return 0;
    return st.st_size;
}

static int rfc3339_now(char *buf, size_t len) {
    time_t t = time(NULL);
    struct tm tm;
    if (!gmtime_r(&t, &tm) || strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        return -EINVAL;
    return 0;
}

/* Load meta.json (validated: format 1, workspace string, runs array). */
static int meta_load(int dir_fd, json_t **ret) {
    _cleanup_free_ char *txt = NULL;
    int r = read_small(dir_fd, "meta.json", 1 << 20, &txt);
    if (r < 0)
        return r == -ENOENT ? -EINVAL : r;
    json_error_t jerr;
    json_t *m = json_loads(txt, 0, &jerr);
    if (!m || !json_is_object(m))
        goto bad;
    if (json_integer_value(json_object_get(m, "format")) != STAGE_FORMAT_VERSION) {
        json_decref(m);
        return -EPROTO;
    }
    if (!json_is_string(json_object_get(m, "workspace")) || !json_is_array(json_object_get(m, "runs")))
        goto bad;
    *ret = m;
    return 0;
bad:
    json_decref(m);
    return -EINVAL;
}

static int meta_store(int dir_fd, json_t *m, bool sync) {
    _cleanup_free_ char *txt = json_dumps(m, JSON_INDENT(2) | JSON_ENSURE_ASCII);
    if (!txt)
        return -ENOMEM;
    size_t len = strlen(txt);
    _cleanup_free_ char *withnl = malloc(len + 2);
    if (!withnl)
        return -ENOMEM;
    memcpy(withnl, txt, len);
    withnl[len] = '\n';
    return publish_file(dir_fd, "meta.json", withnl, len + 1, sync, sync);
}

/* Initialise an empty, locked directory as a fresh stage, its first run
 * recorded. */
static int stage_init_layout(int dir_fd, const char *workspace, const char *run_id, bool sync) {
    if (mkdirat(dir_fd, "upper", 0755) < 0 && errno != EEXIST)
        return -errno;
    if (mkdirat(dir_fd, "work", 0700) < 0 && errno != EEXIST)
        return -errno;
    _cleanup_close_ int j = openat(dir_fd, "journal", O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (j < 0)
        return -errno;
    char now[40];
    int r = rfc3339_now(now, sizeof now);
    if (r < 0)
        return r;
    json_t *m = json_pack("{s:i, s:s, s:s, s:[s]}", "format", STAGE_FORMAT_VERSION, "workspace", workspace, "created",
                          now, "runs", run_id);
    if (!m)
        return -ENOMEM;
    r = meta_store(dir_fd, m, sync);
    json_decref(m);
    if (r < 0)
        return r;
    /* version last: its presence means "this is a stage". */
    return publish_file(dir_fd, "version", STAGE_VERSION_LINE, strlen(STAGE_VERSION_LINE), sync, sync);
}

static int check_version(int dir_fd) {
    _cleanup_free_ char *v = NULL;
    int r = read_small(dir_fd, "version", 256, &v);
    if (r < 0)
        return r == -ENOENT ? -EINVAL : r;
    if (strcmp(v, STAGE_VERSION_LINE) == 0)
        return 0;
    if (strncmp(v, "pvisor-stage ", 13) == 0)
        return -EPROTO;
    return -EINVAL;
}

/* Anything recorded?  (journal or upper non-empty, or a run in meta). */
static int stage_has_content(int dir_fd) {
    if (size_at(dir_fd, "journal") > 0)
        return 1;
    int r = dir_is_empty(dir_fd, "upper");
    if (r == 0)
        return 1;
    json_t *m = NULL;
    if (meta_load(dir_fd, &m) == 0) {
        size_t n = json_array_size(json_object_get(m, "runs"));
        json_decref(m);
        if (n > 0)
            return 1;
    }
    return 0;
}

static void stage_close_fds(struct stage *s) {
    int *fds[] = {&s->upper_fd, &s->work_fd, &s->journal_fd, &s->origin_fd, &s->lock_fd, &s->dir_fd};
    for (size_t i = 0; i < ARRAY_SIZE(fds); i++) {
        if (*fds[i] >= 0)
            close(*fds[i]);
        *fds[i] = -1;
    }
}

void stage_free(struct stage *s) {
    if (!s)
        return;
    stage_close_fds(s); /* closing lock_fd releases the flock */
    stage_maps_free(s);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

/* The seal's marker takes room (an inode, a block) when the run ends, and
 * other programs may have filled the file system by then: the seal failed
 * with ENOSPC, and the stage stayed interrupted for good, its finished work
 * out of apply's reach.  So its file is made when the stage opens,
 * "sealed.tmp", MARKER_ROOM bytes; the seal writes into it and renames it
 * (publish_marker).  Best effort: without it the seal makes the file. */
#define MARKER_ROOM 64
static void reserve_marker(int dir_fd) {
    /* made anew (publish_file): never written through a link */
    (void)unlinkat(dir_fd, "sealed.tmp", 0);
    _cleanup_close_ int fd =
        openat(dir_fd, "sealed.tmp", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);
    if (fd < 0)
        return;
    char pad[MARKER_ROOM];
    memset(pad, ' ', sizeof pad - 1);
    pad[sizeof pad - 1] = '\n';
    if (write_all(fd, pad, sizeof pad) < 0)
        (void)unlinkat(dir_fd, "sealed.tmp", 0);
}

/* Write the marker into the reserved "sealed.tmp" (overwritten in place,
 * then cut to len: nothing new to allocate) and rename it to "sealed";
 * without one, as any other file (publish_file). */
static int publish_marker(int dir_fd, const char *buf, size_t len, bool sync_name) {
    _cleanup_close_ int fd = openat(dir_fd, "sealed.tmp", O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
    struct stat st;
    /* ours has one name: another (a hard link made since) is not written */
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_nlink != 1 || (size_t)st.st_size < len)
        return publish_file(dir_fd, "sealed", buf, len, false, sync_name);
    /* the time is for people: a copy-on-write file system (btrfs) needs
     * room to rewrite it in place, and the name alone is the marker */
    ssize_t w = pwrite(fd, buf, len, 0);
    if (w != (ssize_t)len && !(w < 0 && (errno == ENOSPC || errno == EDQUOT)))
        return w < 0 ? -errno : -EIO;
    if (w == (ssize_t)len && ftruncate(fd, (off_t)len) < 0 && errno != ENOSPC && errno != EDQUOT)
        return -errno;
    if (renameat(dir_fd, "sealed.tmp", dir_fd, "sealed") < 0)
        return -errno;
    if (sync_name && fsync(dir_fd) < 0)
        return -errno;
    return 0;
}

static int stage_open_impl(struct stage *s, const char *path, const char *workspace_abs, const char *run_id) {
    s->dir_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->dir_fd < 0 && errno == ENOENT) {
        if (mkdir(path, 0700) < 0 && errno != EEXIST)
            return -errno;
        s->dir_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    }
    if (s->dir_fd < 0)
        return -errno;

    bool fresh = !exists_at(s->dir_fd, "version");
    if (fresh) {
        int e = dir_is_empty(s->dir_fd, ".");
        if (e < 0)
            return e;
        /* Allow a directory that holds only a lock file (a racing creator
         * that had not finished); anything else is not ours. */
        if (e == 0 &&
            !(exists_at(s->dir_fd, "lock") && !exists_at(s->dir_fd, "meta.json") && !exists_at(s->dir_fd, "upper")))
            return -EINVAL;
    } else {
        int r = check_version(s->dir_fd);
        if (r < 0)
            return r;
    }

    /* upper/ holds the command's files with their modes, set-id bits and
     * directories others may write in among them (as root: a setuid-root
     * program): only the stage's owner may enter it.  A --stage DIR that
     * existed (made 0755 by mkdir) was kept as it was, and any local user
     * ran such a program from DIR/upper while the run went on and after
     * (found by a red-team pass). */
    struct stat dst;
    if (fstat(s->dir_fd, &dst) < 0)
        return -errno;
    /* another user's (made first in /tmp: root adopted it, and its owner
     * changed the stage after root's review; found by a red-team pass) */
    if (dst.st_uid != geteuid())
        return -EPERM;
    if ((dst.st_mode & 077) && fchmod(s->dir_fd, dst.st_mode & 07700) < 0)
        return -errno;
    s->lock_fd = openat(s->dir_fd, "lock", O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (s->lock_fd < 0)
        return -errno;
    if (flock(s->lock_fd, LOCK_EX | LOCK_NB) < 0)
        return errno == EWOULDBLOCK ? -EBUSY : -errno;

    bool sync = s->durability != STAGE_DURABILITY_NONE;
    bool created = !exists_at(s->dir_fd, "version");
    if (created) {
        /* Checkpoint durability flushes nothing a run writes before its
         * seal, so a new stage's layout is flushed there too (a power loss
         * before it leaves at most an unsealed stage, as it would leave the
         * run's writes); strict keeps it durable before the first write. */
        bool sync_layout = s->durability == STAGE_DURABILITY_STRICT;
        s->layout_unsynced = !sync_layout && sync;
        int r = stage_init_layout(s->dir_fd, workspace_abs, run_id, sync_layout);
        if (r < 0)
            return r;
    } else {
        int r = check_version(s->dir_fd);
        if (r < 0)
            return r;
    }

    json_t *meta = NULL;
    int r = meta_load(s->dir_fd, &meta);
    if (r < 0)
        return r;
    if (strcmp(json_string_value(json_object_get(meta, "workspace")), workspace_abs) != 0) {
        json_decref(meta);
        return -EXDEV;
    }
    /* The run appends to the journal and may rewrite the origin map:
     * pvisor gives each one name, and another name of a hard link may be
     * a file outside the stage.  Refused before 'sealed' goes. */
    static const char *const written[] = {"journal", "origin"};
    for (size_t i = 0; i < ARRAY_SIZE(written); i++) {
        struct stat wst;
        if (fstatat(s->dir_fd, written[i], &wst, AT_SYMLINK_NOFOLLOW) == 0 && wst.st_nlink > 1) {
            json_decref(meta);
            return -EMLINK;
        }
    }
    if (exists_at(s->dir_fd, "applied") || exists_at(s->dir_fd, "dropped")) {
        json_decref(meta);
        return -EALREADY;
    }
    /* A half-finished apply rolls forward from this upper: a new run must
     * not change it first (docs/lifecycle.md, apply-intent). */
    if (exists_at(s->dir_fd, "apply-intent")) {
        json_decref(meta);
        return -EINPROGRESS;
    }
    if (created) {
        /* nothing to check: stage_init_layout recorded this run */
    } else if (!exists_at(s->dir_fd, "sealed")) {
        int c = stage_has_content(s->dir_fd);
        if (c != 0) {
            json_decref(meta);
            return c < 0 ? c : -ESTALE;
        }
    } else {
        /* gone before this run, whose death must not read as that
         * restore's (lc_restore_interrupted) */
        stage_remove_leftovers(s->dir_fd);
        /* Durably leave 'sealed': a crash from here on reads 'interrupted'. */
        if (unlinkat(s->dir_fd, "sealed", 0) < 0 || (sync && fsync(s->dir_fd) < 0)) {
            json_decref(meta);
            return -errno;
        }
    }
    if (!created) /* a fresh stage's meta.json names this run already */
        r = json_array_append_new(json_object_get(meta, "runs"), json_string(run_id)) < 0 ? -EINVAL : 0;
    if (r == 0 && !created)
        r = meta_store(s->dir_fd, meta, sync);
    json_decref(meta);
    if (r < 0)
        return r;

    s->upper_fd = openat(s->dir_fd, "upper", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (s->upper_fd < 0)
        return -errno;
    if (mkdirat(s->dir_fd, "work", 0700) < 0 && errno != EEXIST)
        return -errno;
    s->work_fd = openat(s->dir_fd, "work", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (s->work_fd < 0)
        return -errno;
    r = remove_tree_contents(s->work_fd, 4096);
    if (r < 0)
        return r;
    r = stage_journal_load(s);
    if (r < 0)
        return r;
    r = stage_origin_load(s);
    if (r < 0)
        return r;
    s->journal_fd = openat(s->dir_fd, "journal", O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (s->journal_fd < 0)
        return -errno;
    /* one name, as pvisor makes it: the run appends to it, and a hard
     * link's other name may be a file outside the stage */
    struct stat jst;
    if (fstat(s->journal_fd, &jst) < 0)
        return -errno;
    if (jst.st_nlink > 1)
        return -EMLINK;
    reserve_marker(s->dir_fd);
    return 0;
}

void stage_remove_leftovers(int dir_fd) {
    if (!exists_at(dir_fd, "sealed"))
        return; /* an interrupted restore's: it completes them */
    (void)remove_tree_at(dir_fd, ".restore", 4096);
    (void)remove_tree_at(dir_fd, ".restore-old", 4096);
    _cleanup_closedir_ DIR *d = NULL; /* its own offset: the caller may be listing dir_fd */
    if (opendir_at(dir_fd, ".", &d) < 0)
        return;
    struct dirent *de;
    while ((de = readdir_no_dots(d))) {
        size_t l = strlen(de->d_name);
        if (strncmp(de->d_name, ".sealed.", 8) == 0 && l > 12 && strcmp(de->d_name + l - 4, ".tmp") == 0)
            (void)unlinkat(dir_fd, de->d_name, 0);
    }
}

/* A stage with nothing open yet (stage_free frees it as it is). */
static struct stage *stage_new(enum stage_durability d) {
    struct stage *s = calloc(1, sizeof(*s));
    if (!s)
        return NULL;
    s->dir_fd = s->upper_fd = s->work_fd = s->lock_fd = s->journal_fd = s->origin_fd = -1;
    s->durability = d;
    pthread_mutex_init(&s->lock, NULL);
    return s;
}

int stage_open_for_run(const char *path, const char *workspace_abs, const char *run_id, enum stage_durability d,
                       struct stage **ret_stage) {
    if (!path || !workspace_abs || workspace_abs[0] != '/' || !run_id || !ret_stage)
        return -EINVAL;
    struct stage *s = stage_new(d);
    if (!s)
        return -ENOMEM;
    int r = stage_open_impl(s, path, workspace_abs, run_id);
    if (r < 0) {
        stage_free(s);
        return r;
    }
    *ret_stage = s;
    return 0;
}

static int throwaway_open_impl(struct stage *s, const char *path) {
    if (mkdir(path, 0700) < 0)
        return -errno;
    s->dir_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (s->dir_fd < 0)
        return -errno;
    if (mkdirat(s->dir_fd, "upper", 0755) < 0 || mkdirat(s->dir_fd, "work", 0700) < 0)
        return -errno;
    s->upper_fd = openat(s->dir_fd, "upper", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    s->work_fd = openat(s->dir_fd, "work", O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (s->upper_fd < 0 || s->work_fd < 0)
        return -errno;
    s->journal_fd = openat(s->dir_fd, "journal", O_WRONLY | O_APPEND | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (s->journal_fd < 0)
        return -errno;
    return stage_origin_load(s);
}

int stage_open_throwaway(const char *path, struct stage **ret_stage) {
    if (!path || !ret_stage)
        return -EINVAL;
    struct stage *s = stage_new(STAGE_DURABILITY_NONE);
    if (!s)
        return -ENOMEM;
    int r = throwaway_open_impl(s, path);
    if (r < 0) {
        stage_free(s);
        return r;
    }
    *ret_stage = s;
    return 0;
}

/* fsync every directory and regular file below fd (syncfs covers data on
 * most file systems, but fsync per object is what POSIX promises), down to
 * SYNC_TREE_DEPTH levels: the walk holds two descriptors per level, and an
 * agent's tree thousands of levels deep made the seal fail (EMFILE), which
 * left its stage 'interrupted'; below that depth the seal's syncfs is what
 * makes it durable (as it is on Linux for everything). */
#define SYNC_TREE_DEPTH 64
static int sync_tree(int fd, unsigned depth) {
    if (depth >= SYNC_TREE_DEPTH)
        return fsync(fd) < 0 && errno != EINVAL ? -errno : 0;
    _cleanup_closedir_ DIR *d = NULL;
    int rd = opendir_at(fd, ".", &d);
    if (rd < 0)
        return rd;
    struct dirent *de;
    while ((de = readdir_no_dots(d))) {
        if (de->d_type == DT_DIR) {
            _cleanup_close_ int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
            if (sub < 0)
                return -errno;
            int r = sync_tree(sub, depth + 1);
            if (r < 0)
                return r;
        } else if (de->d_type == DT_REG) {
            _cleanup_close_ int f = openat(dirfd(d), de->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
            if (f < 0)
                return -errno;
            if (fsync(f) < 0 && errno != EINVAL)
                return -errno;
        }
    }
    if (fsync(dirfd(d)) < 0 && errno != EINVAL)
        return -errno;
    return 0;
}

int stage_seal(struct stage *s, bool changed) {
    if (!s)
        return -EINVAL;
    bool sync = s->durability != STAGE_DURABILITY_NONE;
    bool sync_content = sync && changed;
    /* The stage directory and upper/ are one file system: this covers the
     * content and a layout created without a flush. */
    if (sync_content && syncfs(s->dir_fd) < 0)
        return -errno;
    int r = sync_content ? sync_tree(s->upper_fd, 0) : 0;
    if (r < 0)
        return r;
    if (sync_content && (fsync(s->journal_fd) < 0 || fsync(s->origin_fd) < 0))
        return -errno;
    char now[40];
    r = rfc3339_now(now, sizeof now);
    if (r < 0)
        return r;
    char buf[64];
    int m = snprintf(buf, sizeof buf, "%s\n", now);
    if (m < 0 || (size_t)m >= sizeof buf)
        return -EOVERFLOW;
    /* Its name is the marker (its bytes, the time, are for people): the
     * directory's fsync makes it durable after everything above.  A stage
     * this run created and left unchanged holds nothing a power loss could
     * lose, so nothing of it is flushed: lost, it reads as an empty
     * interrupted stage (or none), which `drop` removes. */
    bool sync_marker = sync && (changed || !s->layout_unsynced);
    r = publish_marker(s->dir_fd, buf, (size_t)m, sync_marker);
    if (r == 0 && sync_content)
        s->layout_unsynced = false;
    return r;
}

const char *stage_done_phrase(const char *path) {
    enum stage_state state = STAGE_SEALED;
    if (stage_probe_state(path, &state) < 0)
        return "applied or dropped";
    return state == STAGE_DROPPED   ? "dropped: its changes were discarded"
           : state == STAGE_APPLIED ? "applied: its changes are in the workspace"
                                    : "applied or dropped";
}

int stage_version_magic_at(int dirfd, const char *path) {
    static const char magic[] = "pvisor-stage ";
    _cleanup_close_ int fd = openat(dirfd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return 0;
    char buf[sizeof magic - 1];
    ssize_t n = read(fd, buf, sizeof buf);
    if (n < 0)
        return -errno;
    /* shorter than the magic (a project's own "1.0"): not one */
    return n == (ssize_t)sizeof buf && memcmp(buf, magic, sizeof buf) == 0;
}

int stage_probe_empty(const char *path) {
    _cleanup_close_ int dir_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0)
        return -errno;
    if (size_at(dir_fd, "journal") > 0)
        return 0;
    int r = dir_is_empty(dir_fd, "upper");
    return r < 0 ? r : r > 0;
}

int stage_probe_state(const char *path, enum stage_state *ret_state) {
    _cleanup_close_ int dir_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd < 0)
        return -errno;
    int r = check_version(dir_fd);
    if (r < 0) {
        /* an empty directory is not a stage yet */
        return r;
    }
    enum stage_state st;
    if (exists_at(dir_fd, "applied"))
        st = STAGE_APPLIED;
    else if (exists_at(dir_fd, "dropped"))
        st = STAGE_DROPPED;
    else {
        /* O_NONBLOCK: a FIFO named lock (a stage not made by pvisor) is
         * not waited on (status, review, diff and drop hung on one) */
        _cleanup_close_ int lk = openat(dir_fd, "lock", O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
        bool running = false;
        if (lk >= 0) {
            if (flock(lk, LOCK_SH | LOCK_NB) < 0) {
                if (errno != EWOULDBLOCK)
                    return -errno;
                running = true;
            } else {
                flock(lk, LOCK_UN);
            }
        }
        if (running)
            st = STAGE_RUNNING;
        else if (exists_at(dir_fd, "sealed"))
            st = STAGE_SEALED;
        else {
            r = stage_has_content(dir_fd);
            if (r < 0)
                return r;
            st = r ? STAGE_INTERRUPTED : STAGE_CREATED;
        }
    }
    *ret_state = st;
    return 0;
}

bool stage_is_whiteout(const struct stat *st) {
    return S_ISCHR(st->st_mode) && st->st_rdev == makedev(0, 0);
}
