/* git.c: what the lifecycle asks the workspace's git (docs/lifecycle.md):
 * where its hooks run from (review), and whether a git index the host
 * rewrote since the run holds the same entries (apply's conflict check:
 * on copies, in a repository of ours), with a bound on its time: a FIFO
 * for a file it reads, or a file system that does not answer, must not
 * hang a review or an apply. */
#include "lifecycle/lc-internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/sha256.h"
#include "util/util.h"

#define GIT_TIMEOUT_MS 5000

/* The signals that end a verb (a Ctrl-C, a kill, a closed terminal):
 * held back while the index check has its directory in /tmp, which
 * dying of one left behind (lc_git_index_refreshed). */
static const int held_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

int lc_git_run(const char *cwd, const char *const *argv, const char *index_file,
               int (*sink)(void *ctx, const char *buf, size_t n), void *ctx) {
    int fd[2];
    if (pipe2(fd, O_CLOEXEC) < 0)
        return -errno;
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fd[0]);
        close(fd[1]);
        return -e;
    }
    if (pid == 0) {
        /* no signal blocked: those lc_git_index_refreshed holds back (see
         * there), and whatever pvisor was started with blocked (a parent's
         * SIGURG, say: the supervisor's views block it), which git would
         * pass on to what it runs; SIGPIPE's default action, as the
         * command's and diff(1)'s (what pvisor was started ignoring else
         * stays ignored: nohup's SIGHUP) */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null < 0 || dup2(fd[1], STDOUT_FILENO) < 0 || dup2(null, STDERR_FILENO) < 0 ||
            dup2(null, STDIN_FILENO) < 0 || (cwd && chdir(cwd) < 0))
            _exit(127);
        /* the workspace's own repository, found from it (or named by
         * argv), whatever the user's shell points git at
         * (GIT_DIR=~/dotfiles.git) */
        static const char *const repo_env[] = {"GIT_DIR",
                                               "GIT_WORK_TREE",
                                               "GIT_COMMON_DIR",
                                               "GIT_INDEX_FILE",
                                               "GIT_OBJECT_DIRECTORY",
                                               "GIT_ALTERNATE_OBJECT_DIRECTORIES",
                                               "GIT_CEILING_DIRECTORIES",
                                               "GIT_NAMESPACE"};
        for (size_t i = 0; i < ARRAY_SIZE(repo_env); i++)
            unsetenv(repo_env[i]);
        if (index_file && setenv("GIT_INDEX_FILE", index_file, 1) < 0)
            _exit(127);
        /* reading an index of ours (a copy, in an empty repository of
         * ours): no config of anyone else's either (under sudo -E HOME is
         * the user's, whose ~/.gitconfig could name files for root to
         * write: trace2.eventTarget) */
        static const char *const config_env[] = {"GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG"};
        for (size_t i = 0; index_file && i < ARRAY_SIZE(config_env); i++)
            unsetenv(config_env[i]);
        if (index_file &&
            (setenv("GIT_CONFIG_NOSYSTEM", "1", 1) < 0 || setenv("GIT_CONFIG_GLOBAL", "/dev/null", 1) < 0 ||
             setenv("HOME", "/", 1) < 0 || unsetenv("XDG_CONFIG_HOME") < 0))
            _exit(127);
        execvp("git", (char *const *)argv);
        _exit(127);
    }
    close(fd[1]);
    char buf[8192];
    bool timed_out = false;
    int r = 0;
    int64_t deadline = monotonic_ms() + GIT_TIMEOUT_MS;
    for (;;) {
        int64_t left = deadline - monotonic_ms();
        struct pollfd pfd = {.fd = fd[0], .events = POLLIN};
        int pr = left > 0 ? poll(&pfd, 1, (int)left) : 0;
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0) {
            timed_out = pr == 0;
            break;
        }
        ssize_t n = read(fd[0], buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (r == 0 && (r = sink(ctx, buf, (size_t)n)) < 0)
            break;
    }
    close(fd[0]);
    if (timed_out || r < 0)
        kill(pid, SIGKILL);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (r < 0)
        return r;
    if (timed_out)
        return -ETIMEDOUT;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* git reads no file of the workspace for this: a repository's config can
 * make even 'git ls-files' run a command (a partial clone's lazy fetch of
 * a sparse index's missing tree runs core.sshCommand; with --git-dir git
 * checks no owner), and root applying into another user's checkout would
 * run theirs.  Both indexes are copied into a private repository of ours
 * (no objects, our config) and read there. */
#define INDEX_MAX (64u << 20) /* the overlay keeps no larger copy */

struct listing {
    struct pv_sha256 *md;
    uint64_t records; /* NUL-terminated records */
};

static int sink_digest(void *ctx, const char *buf, size_t n) {
    struct listing *l = ctx;
    for (size_t i = 0; i < n; i++)
        l->records += buf[i] == '\0';
    return pv_sha256_update(l->md, buf, n) < 0 ? -EIO : 0;
}

/* Copy the index in (at most INDEX_MAX bytes) to dir/name, which must hash
 * to sha; its header's entry count in *ret_entries.  0 or -errno. */
static int copy_index(int in, int dir, const char *name, const unsigned char sha[32], uint64_t *ret_entries) {
    struct stat st;
    if (fstat(in, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > INDEX_MAX || st.st_size < 12)
        return -EINVAL;
    _cleanup_close_ int out = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0)
        return -errno;
    struct pv_sha256 *md = NULL;
    int r = pv_sha256_begin(&md);
    if (r < 0)
        return r;
    unsigned char head[12];
    uint64_t total = 0;
    char buf[65536];
    for (;;) {
        ssize_t n = read(in, buf, sizeof buf);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            r = -errno;
            break;
        }
        if (n == 0)
            break;
        if (total < sizeof head)
            memcpy(head + total, buf, sizeof head - total < (uint64_t)n ? sizeof head - total : (size_t)n);
        total += (uint64_t)n;
        if (total > INDEX_MAX) {
            r = -EFBIG;
            break;
        }
        if (pv_sha256_update(md, buf, (size_t)n) < 0 || write_all(out, buf, (size_t)n) < 0) {
            r = -EIO;
            break;
        }
    }
    unsigned char got[32];
    if (r == 0 && (pv_sha256_end(md, got) < 0 || memcmp(got, sha, 32) != 0 || total < sizeof head ||
                   memcmp(head, "DIRC", 4) != 0))
        r = -EINVAL;
    pv_sha256_free(md);
    if (r == 0)
        *ret_entries = (uint64_t)head[8] << 24 | (uint64_t)head[9] << 16 | (uint64_t)head[10] << 8 | head[11];
    return r;
}

enum algo { ALGO_UNKNOWN, ALGO_SHA1, ALGO_SHA256 };

/* The hash algorithm of the index dir/name (a copy of ours): SHA-256 when
 * it ends in the SHA-256 of what precedes it, else SHA-1; unknown when it
 * ends in zeros (index.skipHash: either).  git reads an index of the other
 * algorithm without a word (it does not check the checksum), as entries
 * of garbage that may well agree. */
static enum algo index_algo(int dir, const char *name) {
    _cleanup_close_ int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || st.st_size < 12 + 32)
        return ALGO_UNKNOWN;
    unsigned char tail[32], got[32];
    if (pread(fd, tail, sizeof tail, st.st_size - 32) != (ssize_t)sizeof tail)
        return ALGO_UNKNOWN;
    static const unsigned char zero[20];
    if (memcmp(tail + 12, zero, sizeof zero) == 0)
        return ALGO_UNKNOWN;
    struct pv_sha256 *md = NULL;
    if (pv_sha256_begin(&md) < 0)
        return ALGO_UNKNOWN;
    char buf[65536];
    off_t left = st.st_size - 32;
    bool ok = true;
    while (ok && left > 0) {
        ssize_t n = read(fd, buf, left < (off_t)sizeof buf ? (size_t)left : sizeof buf);
        ok = n > 0 && pv_sha256_update(md, buf, (size_t)n) == 0;
        left -= n > 0 ? n : 0;
    }
    ok = ok && pv_sha256_end(md, got) == 0;
    pv_sha256_free(md);
    if (!ok)
        return ALGO_UNKNOWN;
    return memcmp(got, tail, 32) == 0 ? ALGO_SHA256 : ALGO_SHA1;
}

/* The SHA-256 of 'git ls-files --stage -z' of the index file index
 * (absolute) in the repository git_dir (ours): its entries' modes, object
 * ids, stages and names, and with -v their flags (assume-unchanged,
 * skip-worktree: the user's, which apply would drop), without the stat
 * data git refreshes.  Every entry
 * the header counts must be listed: git drops a sparse directory it cannot
 * expand (there are no objects here) without failing.  0, or -errno (git
 * failed or is missing). */
static int index_entries_digest(const char *git_dir, const char *index, uint64_t entries, unsigned char ret[32]) {
    _cleanup_free_ char *dir_opt = NULL;
    if (asprintf(&dir_opt, "--git-dir=%s", git_dir) < 0)
        return -ENOMEM;
    const char *const argv[] = {
        "git", dir_opt, "-c", "core.fsmonitor=false", "-c", "protocol.allow=never", "ls-files", "--stage",
        "-v",  "-z",    NULL};
    struct listing l = {.records = 0};
    int r = pv_sha256_begin(&l.md);
    if (r < 0)
        return r;
    r = lc_git_run("/", argv, index, sink_digest, &l);
    if (r == 0 && l.records != entries)
        r = -EPROTO;
    else if (r == 0)
        r = pv_sha256_end(l.md, ret) < 0 ? -EIO : 0;
    else if (r > 0)
        r = -EPROTO;
    pv_sha256_free(l.md);
    return r;
}

/* An empty repository of ours at dir (HEAD, objects/, refs/, config) for
 * the hash algorithm algo. */
static int make_repo(int dir, enum algo algo) {
    static const char head[] = "ref: refs/heads/main\n";
    static const char sha1[] = "[core]\n\trepositoryformatversion = 0\n\tbare = true\n";
    static const char sha256[] =
        "[core]\n\trepositoryformatversion = 1\n\tbare = true\n[extensions]\n\tobjectFormat = sha256\n";
    const char *config = algo == ALGO_SHA256 ? sha256 : sha1;
    if ((mkdirat(dir, "objects", 0700) < 0 && errno != EEXIST) || (mkdirat(dir, "refs", 0700) < 0 && errno != EEXIST))
        return -errno;
    int r = write_file_atomic(dir, "HEAD", head, sizeof head - 1, 0600);
    return r < 0 ? r : write_file_atomic(dir, "config", config, strlen(config), 0600);
}

static void remove_repo(const char *path, int dir) {
    static const char *const files[] = {"HEAD", "config", "before", "now"};
    for (size_t i = 0; i < ARRAY_SIZE(files); i++)
        (void)unlinkat(dir, files[i], 0);
    (void)unlinkat(dir, "objects", AT_REMOVEDIR);
    (void)unlinkat(dir, "refs", AT_REMOVEDIR);
    (void)rmdir(path);
}

#define GIT_TMP_PREFIX "pvisor-git-"
#define GIT_TMP_STALE_S 600 /* far past the check's bound (two git runs of GIT_TIMEOUT_MS and two copies) */

/* Remove the index check's directories in /tmp that a verb killed by
 * SIGKILL (or a crash) left: ours (same owner, 0700, what make_repo
 * makes), older than any check can take.  Each holds copies of a git
 * index, up to 2 x INDEX_MAX. */
static void remove_stale_repos(void) {
    DIR *d = opendir("/tmp");
    if (!d)
        return;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, GIT_TMP_PREFIX, strlen(GIT_TMP_PREFIX)) != 0 ||
            strlen(de->d_name) != strlen(GIT_TMP_PREFIX) + 6)
            continue;
        _cleanup_close_ int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || st.st_uid != geteuid() || (st.st_mode & 07777) != 0700 ||
            st.st_mtim.tv_sec > now.tv_sec - GIT_TMP_STALE_S)
            continue;
        _cleanup_free_ char *path = path_join("/tmp", de->d_name);
        if (path)
            remove_repo(path, fd);
    }
    closedir(d);
}

bool lc_git_index_refreshed(int stage_dir_fd, int dirfd, const char *name, const char *path,
                            const unsigned char pre_sha[32], const unsigned char cur_sha[32]) {
    if (!path_is_git_index(path))
        return false;
    char hex[65];
    lc_hex(pre_sha, hex);
    _cleanup_free_ char *rel = path_join(LC_PREIMAGES, hex);
    /* the copy the overlay kept of the index as the run first changed it,
     * checked against the journal's digest (a copy cut short by a crash
     * is not it), and the workspace's, as the changeset hashed it */
    _cleanup_close_ int kept = rel ? openat(stage_dir_fd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK) : -1;
    _cleanup_close_ int cur = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (kept < 0 || cur < 0)
        return false;
    /* Until the directory is gone again, a SIGINT, SIGTERM, SIGHUP or
     * SIGQUIT waits (the git runs are bounded): dying of one left it,
     * with its copies of the indexes, behind (apply's handler re-raises
     * the signal, review and diff die of it).  One that came meanwhile is
     * delivered when this returns. */
    sigset_t held, old_mask;
    sigemptyset(&held);
    for (size_t i = 0; i < ARRAY_SIZE(held_signals); i++)
        sigaddset(&held, held_signals[i]);
    remove_stale_repos();
    char tmpl[] = "/tmp/" GIT_TMP_PREFIX "XXXXXX"; /* a 0700 directory of ours (TMPDIR may be another's, under sudo) */
    pthread_sigmask(SIG_BLOCK, &held, &old_mask);
    if (!mkdtemp(tmpl)) {
        pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
        return false;
    }
    _cleanup_close_ int dir = open(tmpl, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    _cleanup_free_ char *before_path = path_join(tmpl, "before");
    _cleanup_free_ char *now_path = path_join(tmpl, "now");
    uint64_t n_before = 0, n_now = 0;
    bool same = false;
    if (dir >= 0 && before_path && now_path && copy_index(kept, dir, "before", pre_sha, &n_before) == 0 &&
        copy_index(cur, dir, "now", cur_sha, &n_now) == 0) {
        enum algo algo = index_algo(dir, "before");
        unsigned char before[32], now[32];
        same = algo != ALGO_UNKNOWN && algo == index_algo(dir, "now") && make_repo(dir, algo) == 0 &&
               index_entries_digest(tmpl, before_path, n_before, before) == 0 &&
               index_entries_digest(tmpl, now_path, n_now, now) == 0 && memcmp(before, now, 32) == 0;
    }
    if (dir >= 0)
        remove_repo(tmpl, dir);
    else
        (void)rmdir(tmpl);
    pthread_sigmask(SIG_SETMASK, &old_mask, NULL);
    return same;
}

/* ---- the index's hidden entries (lc_git_index_hides) ----
 *
 * Read here, never by git: the stage's repository's config can make git
 * run commands.  The format as git's read-cache.c reads it (versions 2 to
 * 4): a 12-byte header ("DIRC", version, entry count), the entries, the
 * extensions (signature and big-endian size each), the hash.  An entry:
 * 40 bytes of stat data, the object name (20 bytes, or 32 in a SHA-256
 * repository, which the index does not say: both are tried), 16 bits of
 * flags (0x8000 assume-valid, 0x4000 extended, 0x0fff the name's length,
 * 0x0fff meaning "up to the NUL"), 16 bits of extended flags when
 * extended (0x4000 skip-worktree, 0x2000 intent-to-add; git dies on any
 * other), then the name: NUL-padded to a multiple of 8 bytes in versions
 * 2 and 3; in version 4 a varint of the bytes to take off the end of the
 * previous name, then the rest of the name and a NUL.  Every offset is
 * checked against the buffer, each entry takes at least 40 + 20 + 2
 * bytes, and a name is never longer than the file: a hostile index costs
 * a read of it, no more. */

#define IDX_FLAG_VALID 0x8000u
#define IDX_FLAG_EXTENDED 0x4000u
#define IDX_NAMEMASK 0x0fffu
#define IDX_EXT_SKIP_WORKTREE 0x4000u
#define IDX_EXT_KNOWN 0x6000u /* skip-worktree, intent-to-add */

static uint32_t be32(const unsigned char *p) {
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static unsigned be16(const unsigned char *p) {
    return (unsigned)p[0] << 8 | p[1];
}

/* git's decode_varint (varint.c), bounded by end: -1 past it or on overflow */
static int idx_varint(const unsigned char **pp, const unsigned char *end, uint64_t *ret) {
    const unsigned char *p = *pp;
    if (p >= end)
        return -1;
    unsigned char c = *p++;
    uint64_t val = c & 127;
    while (c & 128) {
        if (p >= end || val + 1 > (UINT64_MAX >> 7))
            return -1;
        val += 1;
        c = *p++;
        val = (val << 7) + (c & 127);
    }
    *pp = p;
    *ret = val;
    return 0;
}

/* One parse of the index in buf with object names of hsz bytes: hidden
 * is called for each entry with either bit; 0 when git would read it
 * whole this way (the entries and the extensions' chain fit; no flag git
 * dies on), -EBADMSG when not (then what hidden was told is void). */
static int idx_parse(const unsigned char *buf, size_t len, size_t hsz,
                     int (*hidden)(void *ctx, const char *name, size_t n), void *ctx) {
    if (len < 12 + hsz || memcmp(buf, "DIRC", 4) != 0)
        return -EBADMSG;
    uint32_t version = be32(buf + 4), count = be32(buf + 8);
    if (version < 2 || version > 4)
        return -EBADMSG;
    const size_t end = len - hsz; /* the entries and extensions end before the hash */
    size_t off = 12;
    _cleanup_free_ char *name = NULL; /* version 4: the previous name, prefix of the next */
    size_t name_len = 0, name_cap = 0;
    for (uint32_t i = 0; i < count; i++) {
        size_t fixed = 40 + hsz + 2;
        if (off > end || end - off < fixed)
            return -EBADMSG;
        const unsigned char *e = buf + off;
        unsigned flags = be16(e + 40 + hsz), ext = 0;
        if (flags & IDX_FLAG_EXTENDED) {
            if (end - off < fixed + 2)
                return -EBADMSG;
            ext = be16(e + fixed);
            if (ext & ~IDX_EXT_KNOWN)
                return -EBADMSG;
            fixed += 2;
        }
        size_t nlen = flags & IDX_NAMEMASK;
        const unsigned char *p = e + fixed, *lim = buf + end;
        size_t ent_size;
        if (version == 4) {
            uint64_t strip;
            if (idx_varint(&p, lim, &strip) < 0)
                return -EBADMSG;
            size_t copy = 0;
            if (i > 0) {
                if (strip > name_len)
                    return -EBADMSG;
                copy = name_len - (size_t)strip;
            }
            if (nlen == IDX_NAMEMASK) {
                const unsigned char *nul = memchr(p, '\0', (size_t)(lim - p));
                if (!nul)
                    return -EBADMSG;
                nlen = (size_t)(nul - p) + copy;
            }
            /* git copies nlen - copy bytes and the one after them */
            if (nlen < copy || (size_t)(lim - p) < nlen - copy + 1)
                return -EBADMSG;
            if (nlen + 1 > name_cap) {
                size_t cap = nlen + 1 > 2 * name_cap ? nlen + 1 : 2 * name_cap;
                char *nn = realloc(name, cap);
                if (!nn)
                    return -ENOMEM;
                name = nn;
                name_cap = cap;
            }
            memcpy(name + copy, p, nlen - copy);
            name[nlen] = '\0';
            name_len = nlen;
            ent_size = (size_t)(p - e) + nlen - copy + 1;
        } else {
            if (nlen == IDX_NAMEMASK) {
                const unsigned char *nul = memchr(p, '\0', (size_t)(lim - p));
                if (!nul)
                    return -EBADMSG;
                nlen = (size_t)(nul - p);
            }
            ent_size = (fixed + nlen + 8) & ~(size_t)7;
            if (end - off < ent_size)
                return -EBADMSG;
        }
        if (end - off < ent_size)
            return -EBADMSG;
        if ((flags & IDX_FLAG_VALID) || (ext & IDX_EXT_SKIP_WORKTREE)) {
            int r = version == 4 ? hidden(ctx, name, nlen) : hidden(ctx, (const char *)p, nlen);
            if (r < 0)
                return r;
        }
        off += ent_size;
    }
    /* the extensions, as git reads them: while 8 bytes fit before the
     * hash; one git does not know whose signature is not upper case ends
     * the read ("index file corrupt"), as does one past the end here */
    while (off <= end && end - off >= 8) {
        const unsigned char *x = buf + off;
        uint32_t xs = be32(x + 4);
        bool known = memcmp(x, "link", 4) == 0 || memcmp(x, "sdir", 4) == 0;
        if (!known && !(x[0] >= 'A' && x[0] <= 'Z'))
            return -EBADMSG;
        if (end - off - 8 < xs)
            return -EBADMSG;
        off += 8 + (size_t)xs;
    }
    return 0;
}

/* The hidden names of one index, sorted (for the old one: what it hid
 * already), or the count and the first few of those another does not
 * (for the new one). */
struct idx_hidden {
    char **names; /* old: all of them (up to a bound); new: the first LC_GIT_HIDES_NAMES */
    size_t n, cap;
    size_t bytes;                 /* of names, bounded */
    const struct idx_hidden *old; /* new: those not to count */
    size_t max_old_len;
    size_t count; /* new: hidden and not in old */
};

#define IDX_HIDDEN_BYTES (64u << 20)

static int idx_name_cmp(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The length of a name git reads as n bytes: cut at a NUL (as every use
 * of it by git is); one longer than any path of a workspace (no file apply
 * writes) is not looked into, so that a version 4 index of ever longer
 * names costs no more than its size. */
static size_t idx_name_len(const char *name, size_t n) {
    return n > LC_MAX_PATH ? n : strnlen(name, n);
}

static int idx_count_nothing(void *ctx, const char *name, size_t n) {
    (void)ctx;
    (void)name;
    (void)n;
    return 0;
}

static int idx_collect_old(void *ctx, const char *name, size_t n) {
    struct idx_hidden *h = ctx;
    size_t l = idx_name_len(name, n);
    if (l > LC_MAX_PATH || h->bytes + l + 1 > IDX_HIDDEN_BYTES)
        return 0; /* past the bound: the rest counts as not hidden before */
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 64;
        char **nn = realloc(h->names, cap * sizeof *nn);
        if (!nn)
            return -ENOMEM;
        h->names = nn;
        h->cap = cap;
    }
    char *s = strndup(name, l);
    if (!s)
        return -ENOMEM;
    h->names[h->n++] = s;
    h->bytes += l + 1;
    if (l > h->max_old_len)
        h->max_old_len = l;
    return 0;
}

static int idx_collect_new(void *ctx, const char *name, size_t n) {
    struct idx_hidden *h = ctx;
    size_t l = idx_name_len(name, n);
    if (h->old && h->old->n && l <= h->old->max_old_len) {
        char key[LC_MAX_PATH + 1];
        if (l < sizeof key) {
            memcpy(key, name, l);
            key[l] = '\0';
            const char *kp = key;
            if (bsearch(&kp, h->old->names, h->old->n, sizeof *h->old->names, idx_name_cmp))
                return 0;
        }
    }
    /* the same name twice (two stages of a conflict, or two parses) once */
    for (size_t i = 0; i < h->n && l <= LC_MAX_PATH; i++)
        if (strlen(h->names[i]) == l && memcmp(h->names[i], name, l) == 0)
            return 0;
    h->count++;
    if (h->n < LC_GIT_HIDES_NAMES) {
        char *s = strndup(name, l > LC_MAX_PATH ? LC_MAX_PATH : l);
        if (!s)
            return -ENOMEM;
        h->names[h->n++] = s;
    }
    return 0;
}

static void idx_hidden_free(struct idx_hidden *h) {
    for (size_t i = 0; i < h->n; i++)
        free(h->names[i]);
    free(h->names);
    *h = (struct idx_hidden){0};
}

/* Every parse git could make of buf (SHA-1 names, SHA-256 names) that
 * reads whole, each entry with a hidden bit told to fn.  -EBADMSG: none
 * reads whole (git refuses the index: it hides nothing). */
static int idx_parse_any(const unsigned char *buf, size_t len, int (*fn)(void *ctx, const char *name, size_t n),
                         void *ctx) {
    static const size_t sizes[] = {20, 32};
    int best = -EBADMSG;
    for (size_t k = 0; k < ARRAY_SIZE(sizes); k++) {
        /* a dry parse first: what a parse that fails half-way told fn
         * would count names of another reading */
        int r = idx_parse(buf, len, sizes[k], idx_count_nothing, NULL);
        if (r == -ENOMEM)
            return r;
        if (r < 0)
            continue;
        r = idx_parse(buf, len, sizes[k], fn, ctx);
        if (r < 0)
            return r;
        best = 0;
    }
    return best;
}

int lc_git_index_hides_buf(const unsigned char *new_buf, size_t new_len, const unsigned char *old_buf, size_t old_len,
                           size_t *ret_count, char ***ret_names, size_t *ret_n) {
    *ret_count = 0;
    *ret_names = NULL;
    *ret_n = 0;
    struct idx_hidden old = {0}, cur = {0};
    int r = 0;
    if (old_buf) {
        r = idx_parse_any(old_buf, old_len, idx_collect_old, &old);
        if (r == -ENOMEM)
            goto out;
        if (r < 0) { /* an old index git could not read hid nothing */
            idx_hidden_free(&old);
            r = 0;
        }
        if (old.n)
            qsort(old.names, old.n, sizeof *old.names, idx_name_cmp);
    }
    cur.names = calloc(LC_GIT_HIDES_NAMES, sizeof *cur.names);
    if (!cur.names) {
        r = -ENOMEM;
        goto out;
    }
    cur.old = &old;
    r = idx_parse_any(new_buf, new_len, idx_collect_new, &cur);
    if (r == -EBADMSG)
        r = 0; /* git refuses it: every git command fails, nothing is hidden */
    if (r < 0)
        goto out;
    *ret_count = cur.count;
    *ret_n = cur.n;
    *ret_names = TAKE_PTR(cur.names);
    cur.n = 0;
out:
    idx_hidden_free(&old);
    idx_hidden_free(&cur);
    return r;
}

/* name in dirfd, a regular file read whole (up to max bytes, and what is
 * left of *budget, which its size is taken from): -EFBIG past max,
 * -EDQUOT past the budget.
 * The budget counts the size, not what the file holds: a sparse index
 * costs the agent no block of its quota, and its holes are read as
 * zeros all the same (thousands of them made every review, diff and apply
 * read hundreds of GiB). */
static int idx_read(int dirfd, const char *name, size_t max, uint64_t *budget, unsigned char **ret, size_t *ret_len) {
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    if (fd < 0)
        return -errno;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EINVAL;
    if ((uint64_t)st.st_size > max)
        return -EFBIG;
    if ((uint64_t)st.st_size > *budget)
        return -EDQUOT;
    *budget -= (uint64_t)st.st_size;
    size_t cap = (size_t)st.st_size, len = 0;
    _cleanup_free_ unsigned char *b = malloc(cap ? cap : 1);
    if (!b)
        return -ENOMEM;
    /* no more than fstat said: a file growing now is read as it was */
    int r = read_full(fd, b, cap, &len);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(b);
    *ret_len = len;
    return 0;
}

int lc_git_index_hides(int upper_dirfd, int lower_dirfd, const char *name, uint64_t *budget, size_t *ret_count,
                       char ***ret_names, size_t *ret_n) {
    *ret_count = 0;
    *ret_names = NULL;
    *ret_n = 0;
    _cleanup_free_ unsigned char *nb = NULL, *ob = NULL;
    size_t nl = 0, ol = 0;
    int r = idx_read(upper_dirfd, name, LC_GIT_INDEX_READ_MAX, budget, &nb, &nl);
    if (r < 0)
        return r == -EDQUOT ? -EFBIG : r;
    if (lower_dirfd >= 0 && (r = idx_read(lower_dirfd, name, LC_GIT_INDEX_READ_MAX, budget, &ob, &ol)) < 0) {
        if (r == -EDQUOT)
            return -EFBIG; /* past the walk's budget: unknown, not "none hidden before" */
        free(ob);
        ob = NULL; /* none, or unreadable: every hidden entry is new */
    }
    return lc_git_index_hides_buf(nb, nl, ob, ol, ret_count, ret_names, ret_n);
}
