/* cmd_diff.c: `pvisor diff [--stat] [--binary] [RUN|--stage DIR] [PATH...]`: the
 * staged changes as a unified diff against the current workspace.
 *
 * The diff algorithm is diff(1)'s: for each changed regular file or
 * symlink, both sides are opened here (the lower beneath the workspace fd,
 * the upper beneath upper/, never following a symlink; a symlink's target
 * goes through a memfd) and handed to `diff -a -u --label a/P --label b/P
 * /dev/fd/3 /dev/fd/4` by fork+exec (a file added or deleted whole needs
 * no algorithm: its lines are printed here as diff(1) would).  Headers follow git (diff --git, new
 * file mode, deleted file mode, old mode/new mode); files with a NUL byte
 * in their first 8000 bytes are reported as binary, as git does, and files
 * over LC_DIFF_MAX bytes as large (diff(1) holds both sides in memory; a
 * sparse file costs the agent nothing).  The content is the agent's: on a
 * terminal, its control bytes, bidi controls and invisible characters are
 * printed escaped (\xNN), and the blanks at the end of a changed line, so
 * that cursor movements or erased lines cannot hide a line of the diff;
 * into a pipe or a file (a pager such as 'less -R' passes SGR and other
 * escapes to the terminal) its control and bidi bytes are escaped too,
 * and diff says so on stderr; with --patch (or --binary) the diff there
 * is diff(1)'s, byte for byte (for patch(1)), and with --binary a binary
 * file is git's binary patch (diff_binary.c, for git apply). */
#include "cli/cli.h"
#include "cli/diff_binary.h"
#include "lifecycle/lifecycle.h"
#include "stage/stage.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

struct stat_line {
    char *path;
    long plus, minus;
    bool binary;
    uint64_t old_size, new_size;
};

/* The names diff says on stderr it wrote escaped into a pipe or a file. */
#define ESCAPED_NAMES_SHOWN 10

struct diffctx {
    bool stat;
    bool binary; /* --binary: binary files as git's binary patch (diff_binary.c) */
    bool escape; /* stdout is a terminal: what a terminal acts on or shows as nothing escaped */
    bool patch;  /* --patch (or --binary): into a pipe or a file, the content byte for byte */
    struct stat_line *lines;
    size_t n_lines;
    /* into a pipe or a file without --patch: the files whose content had
     * bytes written escaped (a control byte, a bidi control), the first
     * names (displayed) */
    size_t n_escaped;
    char *escaped_names[ESCAPED_NAMES_SHOWN];
    /* into a pipe or a file: the directories created, removed, or whose
     * mode or user xattrs changed, which a patch cannot hold (said on
     * stderr), the first names (displayed) */
    size_t n_dirs;
    char *dir_names[ESCAPED_NAMES_SHOWN];
    int failed;
};

static unsigned git_mode(enum lc_type t, uint32_t mode) {
    switch (t) {
    case LC_REG: return 0100000u | mode;
    case LC_LNK: return 0120000u;
    case LC_DIR: return 0040000u | mode;
    case LC_FIFO: return 0010000u | mode;
    case LC_SOCK: return 0140000u | mode;
    case LC_CHR: return 0020000u | mode;
    case LC_BLK: return 0060000u | mode;
    default: return mode;
    }
}

/* An fd with the content of one side: the file itself, or a memfd holding
 * the symlink target.  -1 for /dev/null. */
static int side_fd(int base_fd, const char *path, enum lc_type t, const char *target) {
    if (t == LC_REG)
        return lc_open_beneath(base_fd, path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
    if (t == LC_LNK && target) {
        int fd = memfd_create("pvisor-diff-link", MFD_CLOEXEC);
        if (fd < 0)
            return -errno;
        size_t len = strlen(target);
        if (write(fd, target, len) != (ssize_t)len) {
            close(fd);
            return -EIO;
        }
        return fd;
    }
    return -1;
}

static bool looks_binary(int fd) {
    if (fd < 0)
        return false;
    char buf[LC_BINARY_PROBE];
    ssize_t n = pread(fd, buf, sizeof buf, 0);
    return n > 0 && memchr(buf, 0, (size_t)n) != NULL;
}

/* Start diff(1) on the two fds (-1: /dev/null) writing to out_fd. */
static pid_t spawn_diff(int a, int b, const char *la, const char *lb, int out_fd) {
    cli_flush_stdout();
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        int na = a >= 0 ? fcntl(a, F_DUPFD, 20) : open("/dev/null", O_RDONLY);
        int nb = b >= 0 ? fcntl(b, F_DUPFD, 20) : open("/dev/null", O_RDONLY);
        if (na < 0 || nb < 0 || (out_fd != STDOUT_FILENO && dup2(out_fd, STDOUT_FILENO) < 0) || dup2(na, 3) < 0 ||
            dup2(nb, 4) < 0)
            _exit(2);
        close_all_fds_except(5, NULL, 0);
        /* SIGPIPE's default action, and no signal blocked that pvisor was
         * started with blocked (as git's: lc_git_run) */
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        /* -a: both sides are text, as looks_binary decided (and review
         * with it); diff(1) would decide by itself from the first
         * st_blksize bytes (2 MiB on a tmpfs with huge pages, 1 MiB on
         * NFS): "Binary files differ" for a script with a NUL in a
         * comment past LC_BINARY_PROBE, shown nowhere */
        execlp("diff", "diff", "-a", "-u", "--label", la, "--label", lb, "/dev/fd/3", "/dev/fd/4", (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Into a pipe or a file, what is escaped of the content: what a
 * terminal acts on when the output reaches one (through 'less -R', cat,
 * a CI log), and the bidirectional controls that reorder what it shows:
 * control bytes but tab, newline, form feed and a carriage return ending
 * a line (CRLF text); DEL; the C1 controls (U+0080-U+009F); U+061C,
 * U+200E-F, U+202A-E, U+2066-9.  Not what a terminal merely shows as
 * nothing or as another character (a zero-width or no-break space) nor a
 * byte that is not UTF-8 (Latin-1 text): the review warns of those
 * (invisible_text), and text with them stays a patch. */
static bool pipe_unsafe(const unsigned char *p, size_t n, size_t l) {
    if (l == 1) {
        unsigned c = p[0];
        if (c == '\t' || c == '\n' || c == '\f')
            return false;
        if (c == '\r')
            return !(n > 1 && p[1] == '\n');
        return c < 0x20 || c == 0x7f;
    }
    uint32_t cp = l == 2 ? p[0] & 0x1f : l == 3 ? p[0] & 0x0f : p[0] & 0x07;
    for (size_t k = 1; k < l; k++)
        cp = (cp << 6) | (p[k] & 0x3f);
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0x61c || cp == 0x200e || cp == 0x200f ||
           (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

/* One line of diff(1)'s output (or of a file added or deleted whole) to
 * stdout, escaped as \xNN where it is not a patch's byte for byte.  On a
 * terminal, what a terminal would act on or show as nothing (term_char):
 * controls but tab and newline (a carriage return too: it can overwrite
 * the line), the C1 controls, bidirectional overrides, invisible
 * characters, bytes that are not UTF-8; and on a changed line (changed:
 * it starts with '+' or '-'), the spaces and tabs at its end, which look
 * like nothing (a line whose only change they are read as unchanged, and
 * a shell's "\\ " ends a command where "\\" went on to the next line).
 * Into a pipe or a file without --patch, pipe_unsafe's.  Whether a byte
 * was escaped. */
static bool put_line(const struct diffctx *d, const char *buf, size_t n, bool changed) {
    const unsigned char *p = (const unsigned char *)buf;
    if (!d->escape && d->patch) {
        fwrite(buf, 1, n, stdout);
        return false;
    }
    /* the trailing blanks of a changed line: from ws to the newline */
    size_t body = n && p[n - 1] == '\n' ? n - 1 : n, ws = body;
    if (d->escape && changed)
        while (ws > 1 && (p[ws - 1] == ' ' || p[ws - 1] == '\t'))
            ws--;
    bool any = false;
    for (size_t i = 0; i < n;) {
        bool unsafe;
        size_t l = term_char(p + i, n - i, &unsafe);
        if (d->escape)
            unsafe = (unsafe && p[i] != '\t' && p[i] != '\n') || (i >= ws && i < body);
        else
            unsafe = pipe_unsafe(p + i, n - i, l);
        any |= unsafe;
        for (size_t k = 0; k < l; k++, i++)
            if (unsafe)
                printf("\\x%02x", p[i]);
            else
                putchar(p[i]);
    }
    return any;
}

/* A file whose content put_line escaped into a pipe or a file: counted,
 * the first named (said on stderr at the end). */
static void note_escaped(struct diffctx *d, const char *label) {
    if (d->escape)
        return;
    if (d->n_escaped < ESCAPED_NAMES_SHOWN)
        d->escaped_names[d->n_escaped] = strdup(label);
    d->n_escaped++;
}

/* diff(1)'s exit status; -EPIPE when SIGPIPE killed it: the reader of
 * the output went away (`pvisor diff | head`). */
static int wait_diff(pid_t pid) {
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return -errno;
    if (WIFSIGNALED(status) && WTERMSIG(status) == SIGPIPE)
        return -EPIPE;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}

static void add_stat(struct diffctx *d, const char *path, long plus, long minus, bool binary, uint64_t os,
                     uint64_t ns) {
    if (d->n_lines % 64 == 0) {
        struct stat_line *nl = realloc(d->lines, (d->n_lines + 64) * sizeof *nl);
        if (!nl)
            return;
        d->lines = nl;
    }
    d->lines[d->n_lines++] = (struct stat_line){strdup(path), plus, minus, binary, os, ns};
}

/* A file added or deleted as a whole: its unified diff is every line with
 * '+' (or '-') under one hunk, which is what diff(1) prints; written here
 * without a diff(1) process per file (a stage of 20,000 new files took
 * minutes).  Nothing at all for an empty file, as diff(1). */
static int one_sided(struct diffctx *d, int fd, bool added, const char *la, const char *lb, const char *label,
                     uint64_t os, uint64_t ns) {
    /* one snapshot, read once (at most LC_DIFF_MAX bytes, checked by the
     * caller): a file that changes meanwhile cannot make the hunk's
     * header disagree with its lines */
    struct stat st;
    if (fstat(fd, &st) < 0)
        return -errno;
    size_t size = st.st_size > (off_t)LC_DIFF_MAX ? LC_DIFF_MAX : (size_t)st.st_size, len = 0;
    _cleanup_free_ char *buf = malloc(size ? size : 1);
    if (!buf)
        return -ENOMEM;
    while (len < size) {
        ssize_t n = pread(fd, buf + len, size - len, (off_t)len);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -errno;
        if (n == 0)
            break; /* it shrank: what is there */
        len += (size_t)n;
    }
    long lines = 0;
    for (size_t i = 0; i < len; i++)
        lines += buf[i] == '\n';
    if (len && buf[len - 1] != '\n')
        lines++;
    if (d->stat) {
        add_stat(d, label, added ? lines : 0, added ? 0 : lines, false, os, ns);
        return 0;
    }
    if (lines == 0)
        return 0; /* diff(1) prints nothing for an empty file */
    printf("--- %s\n+++ %s\n", la, lb);
    if (lines == 1)
        printf(added ? "@@ -0,0 +1 @@\n" : "@@ -1 +0,0 @@\n");
    else
        printf(added ? "@@ -0,0 +1,%ld @@\n" : "@@ -1,%ld +0,0 @@\n", lines);
    bool escaped = false;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(buf + i, '\n', len - i);
        size_t l = nl ? (size_t)(nl - (buf + i)) + 1 : len - i;
        putchar(added ? '+' : '-');
        escaped |= put_line(d, buf + i, l, true);
        if (!nl)
            printf("\n\\ No newline at end of file\n");
        i += l;
    }
    if (escaped)
        note_escaped(d, label);
    return 0;
}

/* A name in a header: prefix (a/ or b/) and the path.  On a terminal the
 * path as displayed (escaped).  Into a pipe or a file as git writes it, so
 * that patch(1) and git apply read it back: in double quotes with C
 * escapes when it holds a control byte, a quote, a backslash or a byte
 * over 0x7f; with tab after it in --- and +++ lines (tab_if_space) when it
 * holds a space, which GNU patch otherwise takes for the end of the name. */
static char *header_name(const struct diffctx *d, const char *prefix, const char *path, bool tab_if_space) {
    char *out = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&out, &len);
    if (!f)
        return NULL;
    if (d->escape) {
        _cleanup_free_ char *p = lc_display_name(path);
        fprintf(f, "%s%s", prefix, p ? p : "?");
    } else {
        bool quote = false;
        for (const unsigned char *c = (const unsigned char *)path; *c; c++)
            if (*c < 0x20 || *c >= 0x7f || *c == '"' || *c == '\\')
                quote = true;
        if (quote)
            fputc('"', f);
        fputs(prefix, f);
        for (const unsigned char *c = (const unsigned char *)path; *c; c++) {
            static const char esc[] = "\a\b\t\n\v\f\r";
            static const char letter[] = "abtnvfr";
            const char *k = *c ? memchr(esc, *c, sizeof esc - 1) : NULL;
            if (!quote)
                fputc(*c, f);
            else if (k)
                fprintf(f, "\\%c", letter[k - esc]);
            else if (*c == '"' || *c == '\\')
                fprintf(f, "\\%c", *c);
            else if (*c < 0x20 || *c >= 0x7f)
                fprintf(f, "\\%03o", *c);
            else
                fputc(*c, f);
        }
        if (quote)
            fputc('"', f);
        if (tab_if_space && strchr(path, ' '))
            fputc('\t', f);
    }
    if (fclose(f) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* Content diff of one path: old side (lower) vs new side (upper); either
 * may be absent (LC_NONE). */
static void content_diff(struct diffctx *d, const struct lc_stage *st, const char *path, const char *label,
                         enum lc_type ot, const char *otarget, enum lc_type nt, const char *ntarget, uint64_t os,
                         uint64_t ns) {
    _cleanup_close_ int a = side_fd(st->ws_fd, path, ot, otarget);
    _cleanup_close_ int b = side_fd(st->upper_fd, path, nt, ntarget);
    if ((ot != LC_NONE && a < 0) || (nt != LC_NONE && b < 0)) {
        fprintf(stderr, "pvisor diff: cannot read %s: %s\n", label, strerror(-(a < -1 ? a : b)));
        d->failed = 1;
        return;
    }
    _cleanup_free_ char *la = ot == LC_NONE ? strdup("/dev/null") : header_name(d, "a/", path, true);
    _cleanup_free_ char *lb = nt == LC_NONE ? strdup("/dev/null") : header_name(d, "b/", path, true);
    _cleanup_free_ char *ba = ot == LC_NONE ? strdup("/dev/null") : header_name(d, "a/", path, false);
    _cleanup_free_ char *bb = nt == LC_NONE ? strdup("/dev/null") : header_name(d, "b/", path, false);
    if (!la || !lb || !ba || !bb)
        return;
    struct stat sa = {0}, sb = {0};
    if ((a >= 0 && fstat(a, &sa) < 0) || (b >= 0 && fstat(b, &sb) < 0)) {
        fprintf(stderr, "pvisor diff: cannot read %s: %s\n", label, strerror(errno));
        d->failed = 1;
        return;
    }
    if ((uint64_t)sa.st_size > LC_DIFF_MAX || (uint64_t)sb.st_size > LC_DIFF_MAX) {
        if (d->stat)
            add_stat(d, label, 0, 0, true, os, ns);
        else
            printf("Large files %s and %s differ (%llu -> %llu bytes; over %u MiB: not shown)\n", ba, bb,
                   (unsigned long long)sa.st_size, (unsigned long long)sb.st_size, LC_DIFF_MAX >> 20);
        return;
    }
    if (looks_binary(a) || looks_binary(b)) {
        if (d->stat)
            add_stat(d, label, 0, 0, true, os, ns);
        else if (d->binary && !d->escape) {
            int r = diff_git_binary(stdout, a, b, LC_DIFF_MAX);
            if (r < 0) {
                fprintf(stderr, "pvisor diff: cannot read %s: %s\n", label, strerror(-r));
                d->failed = 1;
            }
        } else
            printf("Binary files %s and %s differ\n", ba, bb);
        return;
    }
    if (ot == LC_NONE || nt == LC_NONE) {
        if (one_sided(d, ot == LC_NONE ? b : a, ot == LC_NONE, la, lb, label, os, ns) < 0) {
            fprintf(stderr, "pvisor diff: cannot read %s\n", label);
            d->failed = 1;
        }
        return;
    }
    if (!d->stat && !d->escape && d->patch) {
        pid_t pid = spawn_diff(a, b, la, lb, STDOUT_FILENO);
        int rc = pid < 0 ? 2 : wait_diff(pid);
        if (rc == -EPIPE) {
            /* diff(1) wrote to our stdout, whose reader is gone: end as
             * pvisor's own next write would, quietly, not with an error
             * about diff(1) */
            signal(SIGPIPE, SIG_DFL);
            raise(SIGPIPE);
            _exit(128 + SIGPIPE);
        }
        if (rc >= 2 || rc < 0) {
            fprintf(stderr, "pvisor diff: diff(1) failed on %s\n", label);
            d->failed = 1;
        }
        return;
    }
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return;
    pid_t pid = spawn_diff(a, b, la, lb, pfd[1]);
    close(pfd[1]);
    long plus = 0, minus = 0, line = 0;
    FILE *f = fdopen(pfd[0], "r");
    char *buf = NULL;
    size_t cap = 0;
    ssize_t len;
    bool escaped = false;
    while (f && (len = getline(&buf, &cap, f)) >= 0) {
        if (++line <= 2) { /* --- and +++: the names, as header_name gave them */
            if (!d->stat)
                fwrite(buf, 1, (size_t)len, stdout);
            continue;
        }
        if (!d->stat) {
            escaped |= put_line(d, buf, (size_t)len, buf[0] == '+' || buf[0] == '-');
            continue;
        }
        if (buf[0] == '+')
            plus++;
        else if (buf[0] == '-')
            minus++;
    }
    free(buf);
    if (f)
        fclose(f);
    else
        close(pfd[0]);
    if (pid < 0 || wait_diff(pid) >= 2) {
        fprintf(stderr, "pvisor diff: diff(1) failed on %s\n", label);
        d->failed = 1;
    }
    if (escaped)
        note_escaped(d, label);
    if (d->stat)
        add_stat(d, label, plus, minus, false, os, ns);
}

/* On a terminal: the user xattrs apply writes on e's object or removes
 * (lc_entry_xattrs_json), a line each, as in the review: a patch holds
 * none, and neither a changed file's nor a new one's were shown. */
static void show_xattrs(const struct diffctx *d, const struct lc_stage *st, const struct lc_entry *e) {
    if (!d->escape || d->stat)
        return;
    int err = 0;
    json_t *xs = lc_entry_xattrs_json(st, e, &err);
    if (!xs && err < 0)
        printf("user xattrs: could not be read (%s)\n", strerror(-err));
    size_t i;
    const json_t *x;
    json_array_foreach(xs, i, x) {
        _cleanup_free_ char *line = lc_xattr_change_text(x);
        printf("%s\n", line ? line : "?");
    }
    json_decref(xs);
}

static bool diffable(enum lc_type t) {
    return t == LC_REG || t == LC_LNK;
}

/* A directory's change (what: "new", "deleted"; NULL: its mode or xattrs)
 * that no patch holds: said in words on a terminal, as review says it, a
 * line of --stat; into a pipe or a file, counted for the note on stderr. */
static void show_dir(struct diffctx *d, const struct lc_stage *st, const struct lc_entry *e, const char *p,
                     const char *ga, const char *gb, const char *what) {
    if (!d->escape) {
        if (d->n_dirs < ESCAPED_NAMES_SHOWN)
            d->dir_names[d->n_dirs] = strdup(p);
        d->n_dirs++;
        return;
    }
    if (d->stat) {
        add_stat(d, p, 0, 0, false, 0, 0);
        return;
    }
    printf("diff --git %s %s\n", ga, gb);
    if (what && strcmp(what, "deleted") == 0) {
        printf("deleted directory mode %06o\n", git_mode(LC_DIR, e->old_mode));
        return;
    }
    if (what)
        printf("new directory mode %06o\n", git_mode(LC_DIR, e->new_mode));
    else if (e->changes & LC_CH_MODE)
        printf("old mode %06o\nnew mode %06o\n", git_mode(LC_DIR, e->old_mode), git_mode(LC_DIR, e->new_mode));
    if (what || (e->changes & LC_CH_XATTR))
        show_xattrs(d, st, e);
}

static void show_entry(struct diffctx *d, const struct lc_stage *st, const struct lc_entry *e) {
    /* names are agent-chosen: printed with control bytes escaped */
    _cleanup_free_ char *p = lc_display_name(e->path);
    _cleanup_free_ char *ga = header_name(d, "a/", e->path, false), *gb = header_name(d, "b/", e->path, false);
    if (!p || !ga || !gb)
        return;
    enum lc_type ot = e->old_type, nt = e->kind == LC_DELETED ? LC_NONE : e->new_type;
    /* The workspace's version of a path the agent never saw (a masked
     * credential location, a deny rule, a file created after the run) is
     * never printed: the diff may be read by the agent's harness.  Apply
     * refuses such a path as a conflict. */
    if ((!e->pre || e->pre->type == LC_NONE) && ot != LC_NONE) {
        if (ot == LC_DIR)
            return; /* git does not show directories */
        if (d->stat)
            add_stat(d, p, 0, 0, false, 0, 0);
        else
            printf("diff --git %s %s\nContent not shown: the agent never saw the workspace's version of this "
                   "path\n",
                   ga, gb);
        return;
    }
    bool same_kind = ot != LC_NONE && nt != LC_NONE && ot == nt;
    if (same_kind) {
        /* git does not show directories, and a patch holds none: a
         * directory's mode and user xattrs (the workspace root's too,
         * ".") are said in words on a terminal, as review says them;
         * into a pipe or a file, nothing */
        if (ot == LC_DIR) {
            if (e->changes & (LC_CH_MODE | LC_CH_XATTR))
                show_dir(d, st, e, p, ga, gb, NULL);
            return;
        }
        /* Only its user xattrs differ (or its owner): nothing a patch
         * holds.  A "diff --git" line with nothing after it made git apply
         * refuse the whole diff ("bad git-diff - expected /dev/null"); on
         * a terminal it is said in words instead. */
        if (!(e->changes & (LC_CH_MODE | LC_CH_CONTENT | LC_CH_TARGET))) {
            if (d->stat)
                add_stat(d, p, 0, 0, false, 0, 0);
            else if (d->escape) {
                printf("diff --git %s %s\n", ga, gb);
                show_xattrs(d, st, e);
            }
            return;
        }
        if (!d->stat)
            printf("diff --git %s %s\n", ga, gb);
        if ((e->changes & LC_CH_MODE) && !d->stat)
            printf("old mode %o\nnew mode %o\n", git_mode(ot, e->old_mode), git_mode(nt, e->new_mode));
        if (e->changes & LC_CH_XATTR)
            show_xattrs(d, st, e);
        if (e->changes & (LC_CH_CONTENT | LC_CH_TARGET))
            content_diff(d, st, e->path, p, ot, e->old_target, nt, e->new_target, e->old_size, e->new_size);
        else if (d->stat)
            add_stat(d, p, 0, 0, false, 0, 0);
        return;
    }
    /* deletion of the old object (also the first half of a type change) */
    if (ot == LC_DIR)
        show_dir(d, st, e, p, ga, gb, "deleted");
    if (ot != LC_NONE && ot != LC_DIR) {
        if (!d->stat)
            printf("diff --git %s %s\ndeleted file mode %o\n", ga, gb, git_mode(ot, e->old_mode));
        if (diffable(ot))
            content_diff(d, st, e->path, p, ot, e->old_target, LC_NONE, NULL, e->old_size, 0);
    }
    if (nt == LC_DIR)
        show_dir(d, st, e, p, ga, gb, "new");
    if (nt != LC_NONE && nt != LC_DIR) {
        if (!d->stat)
            printf("diff --git %s %s\nnew file mode %o\n", ga, gb, git_mode(nt, e->new_mode));
        if (nt == LC_REG)
            show_xattrs(d, st, e);
        if (diffable(nt))
            content_diff(d, st, e->path, p, LC_NONE, NULL, nt, e->new_target, 0, e->new_size);
    }
}

static bool looks_like_target(const char *a) {
    if (strcmp(a, "latest") == 0)
        return true;
    size_t i = 0;
    while (a[i] >= '0' && a[i] <= '9')
        i++;
    if (i >= 8 && (a[i] == 'T' || a[i] == '\0'))
        return true;
    /* a stage directory is named by a path (lc_cli_arg_is_stage); a bare
     * word is a PATH, also when it holds a file named version */
    if (!lc_cli_arg_is_stage(a))
        return false;
    char v[4096], head[16] = "";
    int m = snprintf(v, sizeof v, "%s/version", a);
    if (m <= 0 || (size_t)m >= sizeof v)
        return false;
    _cleanup_fclose_ FILE *f = fopen(v, "re");
    return f && fgets(head, sizeof head, f) && strncmp(head, "pvisor-stage ", 13) == 0;
}

static bool selected(const char *path, char **paths, size_t n) {
    if (n == 0)
        return true;
    for (size_t i = 0; i < n; i++) {
        size_t l = strlen(paths[i]);
        while (l > 1 && paths[i][l - 1] == '/')
            l--;
        if (strncmp(path, paths[i], l) == 0 && (path[l] == '\0' || path[l] == '/'))
            return true;
    }
    return false;
}

int cmd_diff(int argc, char **argv) {
    struct diffctx d = {.escape = isatty(STDOUT_FILENO) == 1};
    const char *run = NULL, *stage_dir = NULL;
    _cleanup_free_ char **paths = calloc((size_t)argc + 1, sizeof *paths);
    size_t n_paths = 0;
    bool dashdash = false;
    if (!paths)
        return cli_error(PV_EXIT_FAILURE, "diff", "out of memory");
    for (int i = 1; i < argc; i++) {
        char *a = argv[i];
        if (!dashdash && (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0))
            return cli_print_help(cli_find_command("diff"));
        if (!dashdash && strcmp(a, "--") == 0)
            dashdash = true;
        else if (!dashdash && strcmp(a, "--stat") == 0)
            d.stat = true;
        else if (!dashdash && strcmp(a, "--binary") == 0)
            d.binary = d.patch = true; /* for git apply: a patch */
        else if (!dashdash && strcmp(a, "--patch") == 0)
            d.patch = true;
        else if (!dashdash && strcmp(a, "--stage") == 0) {
            int rc = cli_take_value("diff", argc, argv, &i, &stage_dir);
            if (rc)
                return rc;
        } else if (!dashdash && a[0] == '-')
            return cli_usage_error("diff", "unknown option '%s'", a);
        else if (!dashdash && !run && !stage_dir && n_paths == 0 && looks_like_target(a))
            run = a;
        else {
            while (a[0] == '.' && a[1] == '/')
                a += 2;
            if (a[0] == '\0' || a[0] == '/')
                return cli_usage_error("diff", "PATH '%s' must be relative to the workspace", argv[i]);
            paths[n_paths++] = a;
        }
    }
    if (run && stage_dir)
        return cli_usage_error("diff", "give a RUN or --stage DIR, not both");
    if (run && lc_cli_arg_is_stage(run)) {
        stage_dir = run;
        run = NULL;
    }
    _cleanup_free_ char *stage = NULL, *id = NULL;
    int rc = lc_cli_target("diff", run, stage_dir, &stage, &id, NULL);
    if (rc != 0)
        return rc;
    struct lc_stage *st = NULL;
    struct lc_changeset *cs = NULL;
    _cleanup_free_ char *stopped = NULL;
    bool stopped_deleted = false;
    int r = lc_cli_load_changes(stage, &st, &cs, &stopped, &stopped_deleted);
    enum stage_state state;
    /* dropped, or applied and then emptied by a drop: said as apply says
     * it (this said "it holds no changes (dropped?)" of both) */
    if (r == -ENOENT && stage_probe_state(stage, &state) == 0 && (state == STAGE_DROPPED || state == STAGE_APPLIED))
        return cli_error(PV_EXIT_FAILURE, "diff", "nothing to show: the stage %s was %s%s", stage,
                         stage_done_phrase(stage),
                         state == STAGE_APPLIED ? " ('pvisor drop' removed the stage's copy of them)" : "");
    if (r < 0) {
        _cleanup_free_ char *missing = r == -ENOENT ? lc_cli_missing_reason(stage) : NULL;
        cli_error(PV_EXIT_FAILURE, "diff", "cannot read the stage %s: %s", stage,
                  missing                             ? missing
                  : r == -ELOOP || r == -ENAMETOOLONG ? lc_cli_bound_reason(r, stopped)
                                                      : strerror(-r));
        lc_cli_bound_hint("diff", stopped, stopped_deleted, stage);
        lc_cli_unreadable_hint(r, stage, false);
        return PV_EXIT_FAILURE;
    }
    (void)lc_cli_override_unreadable(cs);
    /* An applied stage differs from the workspace only by what was edited
     * there since the apply (a 'git status' refreshes .git/index), and
     * what apply never writes: its diff undoes those edits, and no apply is left to refuse them (said
     * as conflicts "apply refuses", as if the changes were still to come) */
    bool applied = stage_probe_state(stage, &state) == 0 && state == STAGE_APPLIED;
    if (applied && cs->n)
        fprintf(stderr,
                "pvisor diff: note: the stage %s was applied; this is not still to apply: it is how the stage's "
                "copy differs from the workspace now (edits made there since the apply, undone; what apply does not "
                "write: sockets, device nodes, set-id bits)\n",
                stage);
    for (size_t i = 0; i < cs->n; i++)
        if (selected(cs->entries[i].path, paths, n_paths))
            show_entry(&d, st, &cs->entries[i]);
    /* The changeset ID, as the review prints it: on a terminal (after the
     * patch) and with --stat (before its lines: its summary stays the last
     * line); a diff into a pipe or a file stays diff(1)'s, for patch(1).
     * Of a whole sealed stage (with PATHs it would bind changes this diff
     * did not show).  Read after every file the diff read: each is checked
     * to be unchanged since the changeset was read, so the diff showed
     * the bytes the ID covers. */
    char cid[LC_CHANGESET_ID_LEN + 1] = "";
    if ((d.stat || d.escape) && n_paths == 0 && st->sealed && !applied && !lc_apply_pending(stage)) {
        r = lc_stage_changeset_id(st, cs, cid);
        if (r == -EACCES && lc_cli_own_files_override(r))
            r = lc_stage_changeset_id(st, cs, cid);
        lc_cli_note_review_record("diff", st); /* as the review says it */
        if (r < 0) {
            cid[0] = '\0';
            fprintf(stderr, "pvisor diff: no changeset ID: %s%s\n",
                    r == -ESTALE ? "the stage changed while it was read (a run reopened it, or a restore): "
                                   "what this diff shows may be part of each; run it again"
                                 : strerror(-r),
                    r == -ESTALE ? "" : " (a plain 'pvisor apply' refuses until a review names it)");
            d.failed = 1;
        }
    }
    /* A path changed in the workspace since the run: its diff is against
     * the workspace now, so it reads as if the agent undid the user's edit
     * (and applied as a patch, would): said, as review and apply do. */
    size_t n_conflicts = 0;
    for (size_t i = 0; i < cs->n; i++)
        if (!applied && cs->entries[i].conflict && selected(cs->entries[i].path, paths, n_paths)) {
            if (n_conflicts++ == 0)
                fprintf(stderr, "pvisor diff: warning: conflicts, which apply refuses (each says why); where the "
                                "workspace changed since the run, the diff is against it as it is now, so it also "
                                "undoes those edits:\n");
            if (n_conflicts <= 10) {
                _cleanup_free_ char *e = lc_display_name(cs->entries[i].path);
                fprintf(stderr, "  x %s: %s\n", e ? e : "?", cs->entries[i].conflict);
            }
        }
    if (n_conflicts > 10)
        fprintf(stderr, "  ... and %zu more ('pvisor status --review' lists them)\n", n_conflicts - 10);
    /* a PATH under which nothing is staged: said, as apply --path does */
    for (size_t k = 0; k < n_paths; k++) {
        bool any = false;
        for (size_t i = 0; i < cs->n && !any; i++)
            any = selected(cs->entries[i].path, &paths[k], 1);
        if (!any) {
            _cleanup_free_ char *e = term_escape(paths[k]);
            fprintf(stderr, "pvisor diff: no staged change at or under %s", e ? e : "?");
            /* from a subdirectory, a path relative to it (as git takes
             * one) names another path: said, with the one it may mean */
            _cleanup_free_ char *sub = lc_cli_cwd_below(st->workspace);
            _cleanup_free_ char *alt = NULL;
            if (sub && asprintf(&alt, "%s/%s", sub, paths[k]) < 0)
                alt = NULL;
            bool alt_any = false;
            for (size_t i = 0; alt && i < cs->n && !alt_any; i++)
                alt_any = selected(cs->entries[i].path, &alt, 1);
            _cleanup_free_ char *ea = alt_any ? term_escape(alt) : NULL, *ew = sub ? term_escape(st->workspace) : NULL;
            if (ea)
                fprintf(stderr, " (PATHs are relative to the top of the workspace, %s; from here: %s)", ew ? ew : "?",
                        ea);
            else if (sub)
                fprintf(stderr, " (PATHs are relative to the top of the workspace, %s, not to this directory)",
                        ew ? ew : "?");
            fputc('\n', stderr);
            d.failed = 1;
        }
    }
    if (d.stat) {
        if (cid[0])
            printf("Changeset %s (to apply exactly these changes: 'pvisor apply --expect %s')\n", cid, cid);
        size_t w = 0;
        long tp = 0, tm = 0;
        for (size_t i = 0; i < d.n_lines; i++) {
            size_t l = d.lines[i].path ? strlen(d.lines[i].path) : 0;
            if (l > w)
                w = l;
        }
        for (size_t i = 0; i < d.n_lines; i++) {
            struct stat_line *s = &d.lines[i];
            if (!s->path)
                continue;
            if (s->binary) {
                printf(" %-*s | Bin %llu -> %llu bytes\n", (int)w, s->path, (unsigned long long)s->old_size,
                       (unsigned long long)s->new_size);
            } else {
                printf(" %-*s | %ld ", (int)w, s->path, s->plus + s->minus);
                long total = s->plus + s->minus, scale = total > 50 ? total / 50 + 1 : 1;
                for (long k = 0; k < s->plus / scale; k++)
                    putchar('+');
                for (long k = 0; k < s->minus / scale; k++)
                    putchar('-');
                putchar('\n');
            }
            tp += s->plus;
            tm += s->minus;
            free(s->path);
        }
        printf(" %zu file%s changed, %ld insertion%s(+), %ld deletion%s(-)\n", d.n_lines, d.n_lines == 1 ? "" : "s", tp,
               tp == 1 ? "" : "s", tm, tm == 1 ? "" : "s");
        free(d.lines);
    }
    if (cid[0] && !d.stat)
        printf("\nChangeset %s (to apply exactly these changes: 'pvisor apply --expect %s')\n", cid, cid);
    /* into a pipe or a file, the escapes put_line wrote are not the
     * file's bytes: said where the user (or the script that applies it)
     * sees it, with the way to the bytes */
    if (d.n_escaped) {
        fprintf(stderr,
                "pvisor diff: note: %zu file%s content holds control bytes or bidirectional controls (ESC, BEL, a "
                "carriage return not ending a line, U+202E, ...), written here as \\xNN so that a pager (less -R) "
                "or a terminal cannot act on them: this is not a patch of %s (applied, it would write the escapes "
                "as text); 'pvisor diff --patch' writes the bytes as they are: ",
                d.n_escaped, d.n_escaped == 1 ? "'s" : "s'", d.n_escaped == 1 ? "it" : "them");
        for (size_t k = 0; k < d.n_escaped && k < ESCAPED_NAMES_SHOWN; k++)
            fprintf(stderr, "%s%s", k ? ", " : "", d.escaped_names[k] ? d.escaped_names[k] : "?");
        fprintf(stderr, "%s\n", d.n_escaped > ESCAPED_NAMES_SHOWN ? ", ..." : "");
        for (size_t k = 0; k < d.n_escaped && k < ESCAPED_NAMES_SHOWN; k++)
            free(d.escaped_names[k]);
    }
    if (d.n_dirs) {
        fprintf(stderr,
                "pvisor diff: note: %zu director%s created, removed, or with a changed mode or extended attributes, "
                "which a patch cannot hold (on a terminal, and in 'pvisor status --review', they are shown): ",
                d.n_dirs, d.n_dirs == 1 ? "y" : "ies");
        for (size_t k = 0; k < d.n_dirs && k < ESCAPED_NAMES_SHOWN; k++) {
            fprintf(stderr, "%s%s", k ? ", " : "", d.dir_names[k] ? d.dir_names[k] : "?");
            free(d.dir_names[k]);
        }
        fprintf(stderr, "%s\n", d.n_dirs > ESCAPED_NAMES_SHOWN ? ", ..." : "");
    }
    lc_changeset_free(cs);
    lc_stage_free(st);
    return d.failed ? PV_EXIT_FAILURE : PV_EXIT_OK; /* its output lost: exit 1 (main) */
}
