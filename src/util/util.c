/* util.c: see util.h.  No global state; every function is thread-safe (the
 * realpath memo, in pathmemo.c, is the exception it documents). */
#include "util/util.h"
#include "util/cleanup.h"

#include <ctype.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>

char *path_join(const char *a, const char *b) {
    size_t la = strlen(a);
    while (la > 1 && a[la - 1] == '/')
        la--;
    while (*b == '/')
        b++;
    char *r;
    if (asprintf(&r, "%.*s%s%s", (int)la, a, (la == 1 && a[0] == '/') ? "" : "/", b) < 0)
        return NULL;
    return r;
}

char *find_in_path(const char *cmd, const char *cwd) {
    if (strchr(cmd, '/'))
        return cmd[0] == '/' ? strdup(cmd) : path_join(cwd, cmd);
    const char *path = getenv("PATH");
    if (!path)
        path = "/usr/local/bin:/usr/bin:/bin";
    _cleanup_free_ char *copy = strdup(path);
    if (!copy)
        return NULL;
    char *save = NULL;
    for (char *d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
        if (d[0] != '/')
            continue;
        char *f = path_join(d, cmd);
        if (f && access(f, X_OK) == 0)
            return f;
        free(f);
    }
    return NULL;
}

char *str_vprintf(const char *fmt, va_list ap) {
    char *s = NULL;
    return vasprintf(&s, fmt, ap) < 0 ? NULL : s;
}

int usage_error(char **ret_error, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *m = str_vprintf(fmt, ap);
    va_end(ap);
    *ret_error = m;
    return m ? -EINVAL : -ENOMEM;
}

char *str_printf(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    char *s = str_vprintf(fmt, ap);
    va_end(ap);
    return s;
}

bool path_within(const char *path, const char *dir) {
    if (strcmp(dir, "/") == 0)
        return path[0] == '/';
    size_t l = strlen(dir);
    return strncmp(path, dir, l) == 0 && (path[l] == '\0' || path[l] == '/');
}

bool path_overlaps(const char *a, const char *b) {
    return path_within(a, b) || path_within(b, a);
}

bool path_is_git_index(const char *relpath) {
    const char *base = strrchr(relpath, '/');
    if (!base || strcmp(base + 1, "index") != 0)
        return false;
    for (const char *c = relpath; c < base; c = strchr(c, '/') + 1)
        if (strncmp(c, ".git/", 5) == 0)
            return true;
    return false;
}

int path_split_last(char *path, const char **ret_parent, const char **ret_base) {
    size_t l = strlen(path);
    while (l > 1 && path[l - 1] == '/')
        path[--l] = '\0';
    char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (strcmp(base, ".") == 0 || strcmp(base, "..") == 0 || base[0] == '\0')
        return -EINVAL;
    *ret_parent = slash ? (slash == path ? "/" : path) : ".";
    if (slash)
        *slash = '\0';
    *ret_base = base;
    return 0;
}

int mkdir_p(const char *path, mode_t mode) {
    if (path[0] != '/')
        return -EINVAL;
    _cleanup_free_ char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == '\0') {
            char c = *s;
            *s = '\0';
            if (mkdir(p, mode) < 0 && errno != EEXIST)
                return -errno;
            *s = c;
            if (c == '\0')
                break;
        }
    }
    struct stat st;
    if (stat(path, &st) < 0)
        return -errno;
    return S_ISDIR(st.st_mode) ? 0 : -ENOTDIR;
}

/* ts in UTC with milliseconds: 20261129T133758.420Z (compact) or
 * 2026-11-29T13:37:58.420Z */
static void format_utc_ms(const struct timespec *ts, bool compact, char *ret_buf, size_t size) {
    struct tm tm;
    gmtime_r(&ts->tv_sec, &tm);
    char t[24];
    size_t n = strftime(t, sizeof t, compact ? "%Y%m%dT%H%M%S" : "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(ret_buf, size, "%.*s.%03dZ", (int)n, t, (int)((ts->tv_nsec / 1000000) % 1000));
}

void format_stamp_utc(const struct timespec *ts, char ret_buf[static 24]) {
    format_utc_ms(ts, true, ret_buf, 24);
}

int make_run_id(char ret_id[static 32]) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint32_t rnd;
    if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
        return -EIO;
    char t[24];
    format_stamp_utc(&ts, t);
    int n = snprintf(ret_id, 32, "%s-%08" PRIx32, t, rnd);
    return (n > 0 && n < 32) ? 0 : -EOVERFLOW;
}

void format_time_utc(const struct timespec *ts, char ret_buf[static 32]) {
    format_utc_ms(ts, false, ret_buf, 32);
}

int parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *ret_value) {
    if (!s || !isdigit((unsigned char)s[0]))
        return -EINVAL;
    errno = 0;
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno == ERANGE)
        return -ERANGE;
    unsigned shift = 0;
    switch (*end) {
    case '\0': break;
    case 'k':
    case 'K':
        shift = 10;
        end++;
        break;
    case 'm':
    case 'M':
        shift = 20;
        end++;
        break;
    case 'g':
    case 'G':
        shift = 30;
        end++;
        break;
    case 't':
    case 'T':
        shift = 40;
        end++;
        break;
    default: return -EINVAL;
    }
    if (*end == 'i' && shift)
        end++;
    if (*end == 'B' && shift)
        end++;
    if (*end != '\0')
        return -EINVAL;
    if (shift && v > (UINT64_MAX >> shift))
        return -ERANGE;
    uint64_t r = (uint64_t)v << shift;
    if (r < min || r > max)
        return -ERANGE;
    *ret_value = r;
    return 0;
}

int write_file_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode) {
    return write_file_atomic_as(dirfd, name, data, len, mode, WRITE_SYNC_FILE_AND_DIR);
}

int write_file_atomic_as(int dirfd, const char *name, const void *data, size_t len, mode_t mode, enum write_sync sync) {
    char tmp[NAME_MAX + 1];
    uint32_t rnd;
    if (getrandom(&rnd, sizeof rnd, 0) != sizeof rnd)
        return -EIO;
    int n = snprintf(tmp, sizeof tmp, ".%s.%08" PRIx32 ".tmp", name, rnd);
    if (n < 0 || (size_t)n >= sizeof tmp)
        return -ENAMETOOLONG;
    _cleanup_close_ int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode);
    if (fd < 0)
        return -errno;
    int r = write_all(fd, data, len);
    if (r == 0 && sync != WRITE_NO_SYNC && fsync(fd) < 0)
        r = -errno;
    if (r == 0 && renameat(dirfd, tmp, dirfd, name) < 0)
        r = -errno;
    if (r < 0) {
        unlinkat(dirfd, tmp, 0);
        return r;
    }
    if (sync == WRITE_SYNC_FILE_AND_DIR && fsync(dirfd) < 0 && errno != EINVAL && errno != EBADF)
        return -errno;
    return 0;
}

int read_file_at(int dirfd, const char *name, size_t limit, char **ret_buf, size_t *ret_len) {
    /* Not blocking: a FIFO by that name (an applied '.git' the run reads
     * before the sandbox exists) would wait for a writer that never comes;
     * only a regular file is read. */
    _cleanup_close_ int fd = openat(dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -errno;
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    if (!S_ISREG(st.st_mode))
        return -EINVAL;
    if ((uint64_t)st.st_size >= limit)
        return -EFBIG;
    /* procfs/sysfs files report size 0 and may only answer the first read
     * (at offset 0): start with a page so one read() gets them whole. */
    size_t cap = (size_t)st.st_size + 1, len = 0;
    if (cap < 4096)
        cap = 4096 < limit ? 4096 : limit;
    _cleanup_free_ char *buf = malloc(cap);
    if (!buf)
        return -ENOMEM;
    for (;;) {
        if (len + 1 >= cap) {
            if (cap >= limit)
                return -EFBIG;
            cap = cap * 2 > limit ? limit : cap * 2;
            char *nb = realloc(buf, cap);
            if (!nb)
                return -ENOMEM;
            buf = nb;
        }
        ssize_t n = read(fd, buf + len, cap - len - 1);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            break;
        len += (size_t)n;
    }
    buf[len] = '\0';
    if (ret_len)
        *ret_len = len;
    *ret_buf = TAKE_PTR(buf);
    return 0;
}

int fd_move_above_stdio(int fd) {
    if (fd > 2)
        return fd;
    int n = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (n < 0)
        return -errno;
    close(fd);
    return n;
}

int close_all_fds_except(int lowfd, const int *keep, size_t n_keep) {
    /* Walk the gaps between kept fds and close each range with close_range(). */
    int lo = lowfd;
    for (;;) {
        int next = INT_MAX;
        for (size_t i = 0; i < n_keep; i++)
            if (keep[i] >= lo && keep[i] < next)
                next = keep[i];
        if (next > lo) {
            unsigned hi = next == INT_MAX ? ~0U : (unsigned)next - 1;
            if (syscall(SYS_close_range, (unsigned)lo, hi, 0) < 0)
                return -errno;
        }
        if (next == INT_MAX)
            return 0;
        lo = next + 1;
    }
}

int fd_opendir(int fd, DIR **ret_dir) {
    if (fd < 0)
        return -EBADF;
    DIR *d = fdopendir(fd);
    if (!d) {
        int r = -errno;
        close(fd);
        return r;
    }
    *ret_dir = d;
    return 0;
}

struct dirent *readdir_no_dots(DIR *d) {
    struct dirent *de;
    errno = 0;
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            return de;
    return NULL;
}

int dup_opendir(int dir_fd, DIR **ret_dir) {
    int fd = fcntl(dir_fd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
        return -errno;
    int r = fd_opendir(fd, ret_dir);
    if (r >= 0)
        rewinddir(*ret_dir);
    return r;
}

int opendir_at(int dir_fd, const char *name, DIR **ret_dir) {
    int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0)
        return -errno;
    return fd_opendir(fd, ret_dir);
}

int write_string_at(int dirfd, const char *path, const char *text) {
    _cleanup_close_ int fd = openat(dirfd, path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    size_t len = strlen(text);
    ssize_t n = write(fd, text, len);
    return n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
}

int write_byte_no_sigpipe(int fd, char c) {
    sigset_t pipe_set, old;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
    int r = write(fd, &c, 1) == 1 ? 0 : -errno;
    if (r == -EPIPE) {
        struct timespec zero = {0, 0};
        while (sigtimedwait(&pipe_set, NULL, &zero) < 0 && errno == EINTR)
            ;
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return r;
}

int write_all(int fd, const void *buf, size_t len) {
    const char *p = buf;
    while (len > 0) {
        ssize_t n = write(fd, p, len);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int read_full(int fd, void *buf, size_t len, size_t *ret_got) {
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (n == 0)
            break;
        got += (size_t)n;
    }
    *ret_got = got;
    return 0;
}

int64_t monotonic_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int chmod_nofollow_at(int dirfd, const char *name, mode_t mode) {
#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
    /* fchmodat2 (Linux 6.6) refuses a symlink itself (EOPNOTSUPP); glibc's
     * emulation needs /proc, which a caller may lack: without the call, a
     * check that name is no symlink first (callers hold the lock that
     * keeps others from swapping it meanwhile) */
    if (syscall(SYS_fchmodat2, dirfd, name, mode, AT_SYMLINK_NOFOLLOW) == 0)
        return 0;
    /* a seccomp profile older than the call may answer EPERM for it */
    if (errno != ENOSYS && errno != EPERM)
        return -errno;
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return -errno;
    if (S_ISLNK(st.st_mode)) {
        errno = EOPNOTSUPP;
        return -EOPNOTSUPP;
    }
    return fchmodat(dirfd, name, mode, 0) < 0 ? -errno : 0;
}

int chmod_fd(int fd, mode_t mode) {
    if (syscall(SYS_fchmodat2, fd, "", mode, AT_EMPTY_PATH) == 0)
        return 0;
    if (errno != ENOSYS && errno != EPERM && errno != EINVAL)
        return -errno;
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    return fchmodat(AT_FDCWD, proc, mode, 0) < 0 ? -errno : 0;
}

size_t term_char(const unsigned char *p, size_t n, bool *ret_unsafe) {
    unsigned c = p[0];
    if (c < 0x80) {
        *ret_unsafe = c < 0x20 || c == 0x7f;
        return 1;
    }
    size_t len = c >= 0xc2 && c <= 0xdf ? 2 : (c & 0xf0) == 0xe0 ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    *ret_unsafe = true; /* not UTF-8: one byte (a lone C1 byte acts on an 8-bit terminal) */
    if (len == 0 || len > n)
        return 1;
    uint32_t cp = len == 2 ? c & 0x1f : len == 3 ? c & 0x0f : c & 0x07;
    for (size_t i = 1; i < len; i++) {
        if ((p[i] & 0xc0) != 0x80)
            return 1;
        cp = (cp << 6) | (p[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 1;
    /* C1 controls; Unicode's default-ignorable code points (the soft
     * hyphen, the combining grapheme joiner, the Arabic letter mark, the
     * Hangul, Khmer and Mongolian fillers, variation selectors and vowel
     * separator, zero-width characters and the directional marks,
     * embeddings, overrides and isolates, the invisible operators and
     * deprecated format characters, the byte order mark, shorthand format
     * controls, musical symbol format controls, tags); line and paragraph
     * separators, interlinear annotations; and the spaces other than
     * U+0020 (no-break, ogham, en to hair, narrow, medium, ideographic,
     * braille blank): what shows nothing, moves text, or passes for
     * something else on a terminal */
    *ret_unsafe = cp <= 0xa0 || cp == 0xad || cp == 0x34f || cp == 0x61c || cp == 0x115f || cp == 0x1160 ||
                  cp == 0x1680 || (cp >= 0x17b4 && cp <= 0x17b5) || (cp >= 0x180b && cp <= 0x180f) ||
                  (cp >= 0x2000 && cp <= 0x200f) || (cp >= 0x2028 && cp <= 0x202f) || (cp >= 0x205f && cp <= 0x206f) ||
                  cp == 0x2800 || cp == 0x3000 || cp == 0x3164 || (cp >= 0xfe00 && cp <= 0xfe0f) || cp == 0xfeff ||
                  cp == 0xffa0 || (cp >= 0xfff9 && cp <= 0xfffb) || (cp >= 0x1bca0 && cp <= 0x1bca3) ||
                  (cp >= 0x1d173 && cp <= 0x1d17a) || (cp >= 0xe0000 && cp <= 0xe0fff);
    return len;
}

char *term_escape(const char *s) {
    size_t n = strlen(s);
    char *out = malloc(4 * n + 1);
    if (!out)
        return NULL;
    char *o = out;
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        bool unsafe;
        size_t l = term_char(p + i, n - i, &unsafe);
        for (size_t k = 0; k < l; k++, i++) {
            if (unsafe || p[i] == '\\')
                o += sprintf(o, "\\x%02x", p[i]);
            else
                *o++ = (char)p[i];
        }
    }
    *o = '\0';
    return out;
}

char *hex_encode(const char *s) {
    static const char digits[] = "0123456789abcdef";
    size_t n = strlen(s);
    char *out = malloc(2 * n + 1);
    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[(unsigned char)s[i] >> 4];
        out[2 * i + 1] = digits[(unsigned char)s[i] & 15];
    }
    out[2 * n] = '\0';
    return out;
}

static int hex_digit(char c) {
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int hex_decode(const char *hex, char **ret) {
    size_t n = strlen(hex);
    if (n % 2)
        return -EINVAL;
    char *out = malloc(n / 2 + 1);
    if (!out)
        return -ENOMEM;
    for (size_t i = 0; i < n; i += 2) {
        int hi = hex_digit(hex[i]), lo = hex_digit(hex[i + 1]);
        if (hi < 0 || lo < 0 || (hi | lo) == 0) {
            free(out);
            return -EINVAL;
        }
        out[i / 2] = (char)(hi << 4 | lo);
    }
    out[n / 2] = '\0';
    *ret = out;
    return 0;
}

/* Decode mountinfo's octal escapes (\040 for a space) of field [s, s+len). */
int mountinfo_unescape(const char *s, size_t len, char *ret, size_t size) {
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (c == '\\' && i + 3 < len && s[i + 1] >= '0' && s[i + 1] <= '3' && s[i + 2] >= '0' && s[i + 2] <= '7' &&
            s[i + 3] >= '0' && s[i + 3] <= '7') {
            c = (char)((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
            i += 3;
        }
        if (o + 1 >= size)
            return -ENAMETOOLONG;
        ret[o++] = c;
    }
    ret[o] = '\0';
    return 0;
}

#ifdef PVISOR_STARTUP_MARKS
void pv_mark(const char *name) {
    int e = errno;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    char line[128];
    int n = snprintf(line, sizeof line, "MARK %lld %s\n", (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000, name);
    if (n > 0 && (size_t)n < sizeof line)
        (void)!write(STDERR_FILENO, line, (size_t)n);
    errno = e;
}
#endif
