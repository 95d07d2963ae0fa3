/* Unit tests: util helpers. */
#include "util/gitconfig.h"
#include "util/sha256.h"
#include "util/util.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <limits.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <sys/stat.h>
#include <unistd.h>

static void tohex(const unsigned char *d, char out[65]) {
    for (int i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* Does realpath_memo of t/rel give realpath's result and errno?  Says
 * where not. */
static bool memo_agrees(const char *t, const char *rel, const char *what, int round) {
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s%s", t, rel);
    errno = 0;
    char *want = realpath(path, NULL);
    int want_errno = want ? 0 : errno;
    errno = 0;
    char *got = realpath_memo(path);
    int got_errno = got ? 0 : errno;
    bool same = !want == !got && (!want || strcmp(want, got) == 0) && (want || want_errno == got_errno);
    if (!same)
        printf("#   %sround %d %s: realpath %s (%d), realpath_memo %s (%d)\n", what, round, rel, want ? want : "-",
               want_errno, got ? got : "-", got_errno);
    free(want);
    free(got);
    return same;
}

/* realpath_memo against glibc's realpath: the same result and errno over
 * a tree of symlinks (absolute, relative, chains, loops, into a file, ..),
 * cold and then with everything remembered. */
static void test_realpath_memo(void) {
    char tmpl[] = "/tmp/pvisor-rpmemo.XXXXXX";
    char *t = mkdtemp(tmpl);
    if (!t) {
        ok(false, "mkdtemp for realpath_memo");
        return;
    }
    char b[PATH_MAX];
#define MK(fmt, ...) (snprintf(b, sizeof b, fmt, __VA_ARGS__), b)
    mkdir(MK("%s/d", t), 0755);
    mkdir(MK("%s/d/e", t), 0755);
    close(open(MK("%s/d/f", t), O_CREAT | O_WRONLY, 0644));
    (void)!symlink("d", MK("%s/rel", t));
    (void)!symlink(MK("%s/d/e", t), MK("%s/abs", t));
    (void)!symlink("../d/f", MK("%s/d/e/up", t));
    (void)!symlink("rel/e", MK("%s/chain", t));
    (void)!symlink("loop2", MK("%s/loop1", t));
    (void)!symlink("loop1", MK("%s/loop2", t));
    (void)!symlink("nowhere", MK("%s/dangling", t));
    (void)!symlink("d/f", MK("%s/tofile", t));
    (void)!symlink("/", MK("%s/root", t));
    (void)!symlink(".", MK("%s/dot", t));
    static const char *const rel[] = {
        "",          "/",          "/d",          "/d/",      "/d/e",       "/d/f",        "/d/f/",
        "/d/f/..",   "/d/f/.",     "/d/f/x",      "/d/e/..",  "/d/./e/.",   "/d//e///",    "/rel",
        "/rel/",     "/rel/e",     "/rel/f",      "/rel/f/",  "/abs",       "/abs/..",     "/abs/up",
        "/abs/up/",  "/chain/up",  "/chain/../d", "/loop1",   "/loop1/x",   "/dangling",   "/dangling/",
        "/tofile",   "/tofile/",   "/tofile/..",  "/missing", "/missing/x", "/d/missing",  "/root/tmp",
        "/root/../", "/dot/dot/d", "/dot/../d",   "/../..",   "/d/e/up/..", "/rel/../rel", "/d/../rel/e/up",
    };
    bool same = true;
    for (int round = 0; round < 3; round++) {
        if (round == 1)
            realpath_memo_begin();
        for (size_t i = 0; i < sizeof rel / sizeof *rel; i++)
            same = memo_agrees(t, rel[i], "", round) && same;
    }
    realpath_memo_end();
    ok(same, "realpath_memo gives realpath's result and errno, cold and remembered");
    /* past the table's first size (256) and through its growth to the
     * most it keeps (4,096 paths): 3,000 directories, each with a link to
     * the one before; every one again after all were remembered */
    mkdir(MK("%s/many", t), 0755);
    bool grown = true;
    realpath_memo_begin();
    for (int round = 0; round < 2 && grown; round++)
        for (int i = 0; i < 3000; i++) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/many/d%d", t, i);
            if (round == 0) {
                mkdir(path, 0755);
                if (i > 0) {
                    char target[32], link[PATH_MAX];
                    snprintf(target, sizeof target, "d%d", i - 1);
                    snprintf(link, sizeof link, "%s/many/d%d/prev", t, i);
                    (void)!symlink(MK("%s/many/%s", t, target), link);
                }
            }
            if (i > 0 && i % 7 == 0) /* through the link: d(i-1) */
                snprintf(path, sizeof path, "%s/many/d%d/prev/.", t, i);
            char *want = realpath(path, NULL), *got = realpath_memo(path);
            if (!want || !got || strcmp(want, got) != 0) {
                printf("#   round %d %s: realpath %s, realpath_memo %s\n", round, path, want ? want : "-",
                       got ? got : "-");
                grown = false;
            }
            free(want);
            free(got);
            if (!grown)
                break;
        }
    realpath_memo_end();
    ok(grown, "realpath_memo over 3,000 directories and links (its table grown) gives realpath's result");
    /* realpath_memo_list_dirs: absences remembered, a directory listed at
     * its fourth lookup (lst: present and absent names, links, a file); one
     * too large to list in one read (big) looked up the same way */
    mkdir(MK("%s/lst", t), 0755);
    mkdir(MK("%s/lst/sub", t), 0755);
    mkdir(MK("%s/big", t), 0755);
    for (int i = 0; i < 10; i++)
        close(open(MK("%s/lst/a%d", t, i), O_CREAT | O_WRONLY, 0644));
    (void)!symlink("sub", MK("%s/lst/ln", t));
    (void)!symlink("none", MK("%s/lst/dangl", t));
    (void)!symlink("../lst", MK("%s/lst/sub/up", t));
    for (int i = 0; i < 400; i++) /* ~100 bytes an entry: past one read of 32 KB */
        close(open(MK("%s/big/%090d", t, i), O_CREAT | O_WRONLY, 0644));
    static const char *const lst[] = {
        "/lst/a0",    "/lst/m0",     "/lst/a1",       "/lst/m1",    "/lst/a9",     "/lst/m2",        "/lst/m2/x",
        "/lst/m2/..", "/lst/ln",     "/lst/ln/up/a3", "/lst/dangl", "/lst/dangl/", "/lst/sub/up/m3", "/lst/a5/",
        "/lst/a5/x",  "/lst/sub/..", "/lst/m4",       "/lst/A0",    "/lst/a",      "/lst/a00",       "/lst/sub/m5",
        "/big/m0",    "/big/m1",     "/big/m2",       "/big/m3",    "/big/m4",     "/big/m5",
    };
    bool listed_same = true;
    realpath_memo_begin();
    realpath_memo_list_dirs();
    for (int round = 0; round < 2; round++)
        for (size_t i = 0; i < sizeof lst / sizeof *lst; i++)
            listed_same = memo_agrees(t, lst[i], "listed, ", round) && listed_same;
    /* big's first name, after its lookups: present though never listed */
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/big/%090d", t, 0);
    char *got = realpath_memo(path);
    listed_same = listed_same && got && strcmp(got, path) == 0;
    free(got);
    realpath_memo_end();
    ok(listed_same, "realpath_memo with directories listed gives realpath's result and errno");
    char *r = realpath_memo("relative");
    ok(!r || r[0] == '/', "realpath_memo of a relative path is realpath's");
    free(r);
    char cmd[PATH_MAX + 16];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", t);
    (void)!system(cmd);
#undef MK
}

/* gitconfig_parse's variables, one "section|sub|key|value" a line ("-"
 * for none), into a buffer */
struct gc_out {
    char buf[1024];
    size_t len;
};
static int gc_collect(const char *section, const char *sub, const char *key, const char *value, void *userdata) {
    struct gc_out *o = userdata;
    int w = snprintf(o->buf + o->len, sizeof o->buf - o->len, "%s|%s|%s|%s\n", section, sub ? sub : "-", key,
                     value ? value : "-");
    if (w > 0 && (size_t)w < sizeof o->buf - o->len)
        o->len += (size_t)w;
    return 0;
}
static const char *gc_vars(const char *text, int *ret) {
    static struct gc_out o;
    o.len = 0;
    o.buf[0] = '\0';
    *ret = gitconfig_parse(text, strlen(text), gc_collect, &o);
    return o.buf;
}

static void test_gitconfig(void) {
    int r;
    const char *v = gc_vars("[User]\n\tName = Alice # a comment\n[url \"https://x@h/\"] insteadOf = \"a;b\" ; c\n"
                            "[http]\n\textraHeader\n",
                            &r);
    is_str(v, "user|-|name|Alice\nurl|https://x@h/|insteadof|a;b\nhttp|-|extraheader|-\n",
           "gitconfig_parse: sections, subsections, a key on its header's line, quotes, comments, a key alone");
    ok(r == 0, "... read to the end");
    v = gc_vars(
        "[remote]\nurl = https://alice:\\\ns3cret@example.com\n# x = y \\\n[a \"b\\\"c\"]\n k = \"one\\ttwo\" \\\n"
        "  three\n",
        &r);
    is_str(v, "remote|-|url|https://alice:s3cret@example.com\na|b\"c|k|one\ttwo   three\n",
           "gitconfig_parse: a backslash continues a value on the next line (not a comment; blanks kept as git "
           "keeps them), escapes applied");
    v = gc_vars("[include]\npath = a\n[includeIf \"gitdir:~/w/\"]\r\npath = ~/b\n[Include.X]\npath = c\n", &r);
    is_str(v, "include|-|path|a\nincludeif|gitdir:~/w/|path|~/b\ninclude|x|path|c\n",
           "gitconfig_parse: include sections, CRLF, the old [section.sub] spelling");
    ok(gitconfig_is_include("include", NULL, "path") && gitconfig_is_include("includeif", "gitdir:~/w/", "path") &&
           !gitconfig_is_include("include", "x", "path") && !gitconfig_is_include("includeif", NULL, "path") &&
           !gitconfig_is_include("include", NULL, "paths"),
       "gitconfig_is_include: include.path and includeIf.<cond>.path only");
    v = gc_vars("[a]\nk = v\nbad line\n[b]\nk = w\n", &r);
    ok(r == 1 && strcmp(v, "a|-|k|v\n") == 0, "gitconfig_parse: a line git rejects ends the walk (1)");
    v = gc_vars("k = v\n", &r);
    ok(r == 1 && !v[0], "gitconfig_parse: a key before any section is rejected");
    v = gc_vars("[a]\nk = \"open\n", &r);
    ok(r == 1, "gitconfig_parse: a quote not closed on its line is rejected");

    char *p = NULL;
    ok(gitconfig_include_path("~/.gitconfig-work", "/h/.gitconfig", "/h", &p) == 1 &&
           strcmp(p, "/h/.gitconfig-work") == 0,
       "gitconfig_include_path: ~/ is home's");
    free(p);
    p = NULL;
    ok(gitconfig_include_path("x/y", "/h/dot/gitconfig", "/h", &p) == 1 && strcmp(p, "/h/dot/x/y") == 0,
       "gitconfig_include_path: a relative path is relative to the including file's directory");
    free(p);
    p = NULL;
    ok(gitconfig_include_path("/etc/x", NULL, NULL, &p) == 1 && strcmp(p, "/etc/x") == 0,
       "gitconfig_include_path: an absolute one as written");
    free(p);
    p = NULL;
    ok(gitconfig_include_path("~/x", "/h/c", NULL, &p) == 0 && gitconfig_include_path("x", NULL, "/h", &p) == 0 &&
           gitconfig_include_path("~no-such-user-pvisor/x", "/h/c", "/h", &p) == 0 &&
           gitconfig_include_path("%(prefix)/x", "/h/c", "/h", &p) == 0 && !p,
       "gitconfig_include_path: none without a home, a file to be relative to, or such a user");
    p = NULL;
    ok(gitconfig_include_path("~root/x", "/h/c", "/h", &p) == 1 && p && p[0] == '/' &&
           strcmp(p + strlen(p) - 2, "/x") == 0,
       "gitconfig_include_path: ~user/ is that user's home");
    free(p);
}

int main(void) {
    test_realpath_memo();
    test_gitconfig();
    uint64_t v = 0;
    ok(parse_size("0", 0, 10, &v) == 0 && v == 0, "parse_size 0");
    ok(parse_size("512M", 1, UINT64_MAX, &v) == 0 && v == 512ULL << 20, "parse_size 512M");
    ok(parse_size("1GiB", 1, UINT64_MAX, &v) == 0 && v == 1ULL << 30, "parse_size 1GiB");
    ok(parse_size("16E", 1, UINT64_MAX, &v) == -EINVAL, "unknown suffix rejected");
    ok(parse_size("17179869184T", 1, UINT64_MAX, &v) == -ERANGE, "overflow rejected");
    ok(parse_size("", 1, 10, &v) == -EINVAL && parse_size("x", 1, 10, &v) == -EINVAL, "junk rejected");
    ok(parse_size("11", 1, 10, &v) == -ERANGE, "above max rejected");
    ok(parse_size(" 5", 1, 10, &v) == -EINVAL && parse_size("+5", 1, 10, &v) == -EINVAL, "sign/space rejected");

    ok(path_within("/a/b", "/a") && path_within("/a", "/a") && path_within("/x", "/"), "path_within: inside and equal");
    ok(!path_within("/ab", "/a") && !path_within("/a", "/a/b") && !path_within("rel", "/"),
       "path_within: prefix is not inside");
    ok(path_within(".ssh/id", ".ssh") && !path_within(".sshx", ".ssh"), "path_within: relative paths");
    ok(path_overlaps("/a/b", "/a") && path_overlaps("/a", "/a/b") && path_overlaps("/a", "/a") &&
           !path_overlaps("/ab", "/a") && !path_overlaps("/a/x", "/a/y"),
       "path_overlaps: either holds the other");

    char *p = path_join("/a/", "/b");
    is_str(p, "/a/b", "path_join trims slashes");
    free(p);
    p = path_join("/", "x");
    is_str(p, "/x", "path_join at root");
    free(p);

    char id1[32], id2[32];
    ok(make_run_id(id1) == 0 && make_run_id(id2) == 0 && strcmp(id1, id2) != 0 && strlen(id1) == 29,
       "run ids are unique and fixed-length (%s)", id1);

    char dir[] = "/tmp/pvisor-ut.XXXXXX";
    ok(mkdtemp(dir) != NULL, "temp dir");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    {
        /* path_resolve: symlinks resolved, a missing rest kept as named */
        char real[PATH_MAX], link[PATH_MAX + 8], q[PATH_MAX + 32], want[PATH_MAX + 32];
        char *r1 = NULL, *r2 = NULL, *r3 = NULL;
        ok(realpath(dir, real) != NULL && mkdirat(dfd, "prd", 0700) == 0 && symlinkat("prd", dfd, "prl") == 0,
           "path_resolve: a directory and a link to it");
        snprintf(link, sizeof link, "%s/prl", dir);
        snprintf(q, sizeof q, "%s/prl/new//deeper/", dir);
        snprintf(want, sizeof want, "%s/prd/new/deeper", real);
        ok(path_resolve(link, &r1) == 1 && r1 && strcmp(r1 + strlen(real), "/prd") == 0, "path_resolve: existing");
        ok(path_resolve(q, &r2) == 1 && r2 && strcmp(r2, want) == 0, "path_resolve: missing parts below a link (%s)",
           r2 ? r2 : "-");
        snprintf(q, sizeof q, "%s/prl/new/../x", dir);
        ok(path_resolve(q, &r3) == 0 && path_resolve("rel/x", &r3) == 0 && !r3,
           "path_resolve: '..' in the missing part, or a relative path, cannot be told");
        free(r1);
        free(r2);
        unlinkat(dfd, "prl", 0);
        unlinkat(dfd, "prd", AT_REMOVEDIR);
    }
    ok(write_file_atomic(dfd, "f", "hello", 5, 0600) == 0, "write_file_atomic");
    char *buf = NULL;
    size_t len = 0;
    ok(read_file_at(dfd, "f", 1024, &buf, &len) == 0 && len == 5 && strcmp(buf, "hello") == 0, "read back");
    free(buf);
    ok(write_file_atomic(dfd, "f", "bye", 3, 0600) == 0 && read_file_at(dfd, "f", 1024, &buf, &len) == 0 &&
           strcmp(buf, "bye") == 0,
       "atomic replace");
    free(buf);
    ok(read_file_at(dfd, "f", 2, &buf, &len) == -EFBIG, "size limit enforced");
    ok(symlinkat("f", dfd, "l") == 0 && read_file_at(dfd, "l", 1024, &buf, &len) == -ELOOP,
       "read_file_at does not follow a final symlink");
    struct stat st;
    ok(fstatat(dfd, "f", &st, 0) == 0 && (st.st_mode & 0777) == 0600, "mode applied");
    unlinkat(dfd, "f", 0);
    unlinkat(dfd, "l", 0);
    close(dfd);
    rmdir(dir);

    int pfd = open("/proc/sys/kernel", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    buf = NULL;
    int pr = read_file_at(pfd, "pid_max", 64, &buf, &len);
    ok(pr == 0 && atol(buf) >= 300 && len > 0 && buf[len - 1] == '\n',
       "read_file_at reads a whole procfs file in one read (pid_max %ld)", pr == 0 ? atol(buf) : -1L);
    free(buf);
    close(pfd);

    char nested[] = "/tmp/pvisor-ut-mk.XXXXXX";
    ok(mkdtemp(nested) != NULL, "temp dir 2");
    char *deep = path_join(nested, "a/b/c");
    ok(mkdir_p(deep, 0700) == 0 && mkdir_p(deep, 0700) == 0, "mkdir_p twice");
    ok(mkdir_p("relative/x", 0700) == -EINVAL, "mkdir_p refuses relative paths");
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", nested);
    ok(system(cmd) == 0, "cleanup");
    free(deep);
    /* SHA-256 (libcrypto's, linked statically): FIPS 180 vectors, and the
     * incremental form equals the one-shot one across update boundaries. */
    unsigned char d[32], d2[32];
    char hex[65];
    ok(pv_sha256_buf("", 0, d) == 0 &&
           (tohex(d, hex), strcmp(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855") == 0),
       "SHA-256 of the empty string");
    ok(pv_sha256_buf("abc", 3, d) == 0 &&
           (tohex(d, hex), strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0),
       "SHA-256 of \"abc\"");
    static unsigned char big[1 << 20];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (unsigned char)(i * 131 + 7);
    struct pv_sha256 *h = NULL;
    int hr = pv_sha256_begin(&h);
    for (size_t off = 0; hr == 0 && off < sizeof big; off += 4093)
        hr = pv_sha256_update(h, big + off, off + 4093 <= sizeof big ? 4093 : sizeof big - off);
    if (hr == 0)
        hr = pv_sha256_end(h, d);
    pv_sha256_free(h);
    ok(hr == 0 && pv_sha256_buf(big, sizeof big, d2) == 0 && memcmp(d, d2, 32) == 0,
       "SHA-256 in 4,093-byte pieces equals one buffer");
    /* FIPS 180-2 long message: one million 'a', fed in pieces */
    memset(big, 'a', sizeof big);
    hr = pv_sha256_begin(&h);
    for (size_t left = 1000000; hr == 0 && left > 0; left -= left < 9973 ? left : 9973)
        hr = pv_sha256_update(h, big, left < 9973 ? left : 9973);
    if (hr == 0)
        hr = pv_sha256_end(h, d);
    pv_sha256_free(h);
    ok(hr == 0 && (tohex(d, hex), strcmp(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0") == 0),
       "SHA-256 of a million 'a' in pieces");
    /* pv_user_xattrs_sha256: user.* only, independent of the order they
     * were set in, any value change changes it; O_PATH descriptors too */
    {
        char xt[] = "/tmp/pvisor-xattr.XXXXXX";
        char *xd = mkdtemp(xt);
        char fa[64], fb[64];
        snprintf(fa, sizeof fa, "%s/a", xd ? xd : "/nonexistent");
        snprintf(fb, sizeof fb, "%s/b", xd ? xd : "/nonexistent");
        int a = open(fa, O_RDWR | O_CREAT | O_CLOEXEC, 0600), b = open(fb, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
        unsigned char da[32], db[32], dn[32];
        int r0 = pv_user_xattrs_sha256(a, dn);
        ok(fsetxattr(a, "user.one", "1", 1, 0) == 0, "user xattrs on /tmp (stages need them)");
        {
            fsetxattr(a, "user.two", "22", 2, 0);
            fsetxattr(b, "user.two", "22", 2, 0);
            fsetxattr(b, "user.one", "1", 1, 0);
            ok(r0 == 1 && pv_sha256_buf("", 0, d) == 0 && memcmp(dn, d, 32) == 0,
               "xattrs digest: none is the empty string's digest");
            int pa = open(fa, O_PATH | O_CLOEXEC);
            ok(pv_user_xattrs_sha256(pa, da) == 1 && pv_user_xattrs_sha256(b, db) == 1 && memcmp(da, db, 32) == 0,
               "xattrs digest: the same attributes set in another order, read through O_PATH too, give one digest");
            ok(memcmp(da, dn, 32) != 0, "xattrs digest: attributes change it");
            fsetxattr(b, "user.two", "23", 2, 0);
            ok(pv_user_xattrs_sha256(b, db) == 1 && memcmp(da, db, 32) != 0,
               "xattrs digest: a value change changes it");
            fsetxattr(b, "user.two", "22", 2, 0);
            (void)fsetxattr(b, "trusted.x", "t", 1, 0); /* root only; ignored either way */
            ok(pv_user_xattrs_sha256(b, db) == 1 && memcmp(da, db, 32) == 0,
               "xattrs digest: only user.* attributes count");
            if (pa >= 0)
                close(pa);
        }
        if (a >= 0)
            close(a);
        if (b >= 0)
            close(b);
        unlink(fa);
        unlink(fb);
        if (xd)
            rmdir(xd);
    }
    /* chmod_nofollow_at: a directory's mode, never a symlink's target; also
     * where a seccomp profile answers EPERM for fchmodat2 (a child with
     * such a filter) */
    {
        char ct[] = "/tmp/pvisor-chmod.XXXXXX";
        char *cd = mkdtemp(ct);
        int cfd = cd ? open(cd, O_RDONLY | O_DIRECTORY) : -1;
        ok(cfd >= 0 && mkdirat(cfd, "d", 0755) == 0 && mkdirat(cfd, "target", 0755) == 0 &&
               symlinkat("target", cfd, "link") == 0,
           "chmod scratch");
        struct stat cst;
        ok(chmod_nofollow_at(cfd, "d", 0700) == 0 && fstatat(cfd, "d", &cst, 0) == 0 && (cst.st_mode & 07777) == 0700,
           "chmod_nofollow_at changes a directory's mode");
        ok(chmod_nofollow_at(cfd, "link", 0700) == -EOPNOTSUPP && fstatat(cfd, "target", &cst, 0) == 0 &&
               (cst.st_mode & 07777) == 0755,
           "chmod_nofollow_at refuses a symlink and leaves its target alone");
        pid_t pid = fork();
        if (pid == 0) {
            struct sock_filter f[] = {
                BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
                BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 452, 0, 1),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
                BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
            };
            struct sock_fprog prog = {.len = 4, .filter = f};
            if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
                _exit(2);
            struct stat s2;
            _exit(chmod_nofollow_at(cfd, "d", 0750) == 0 && fstatat(cfd, "d", &s2, 0) == 0 &&
                          (s2.st_mode & 07777) == 0750 && chmod_nofollow_at(cfd, "link", 0700) == -EOPNOTSUPP
                      ? 0
                      : 1);
        }
        int wst = -1;
        waitpid(pid, &wst, 0);
        ok(WIFEXITED(wst) && WEXITSTATUS(wst) == 0,
           "chmod_nofollow_at works, and still refuses a symlink, where fchmodat2 is answered with EPERM");
        if (cfd >= 0) {
            remove_tree_contents(cfd, UINT_MAX);
            close(cfd);
            rmdir(cd);
        }
    }
    /* remove_tree_contents: any depth, unreadable directories, never into a mount */
    char tmpl[] = "/tmp/pvisor-rmtree.XXXXXX";
    char *top = mkdtemp(tmpl);
    char path[PATH_MAX], tree[256], out[256];
    snprintf(tree, sizeof tree, "%s/tree", top ? top : "/nonexistent");
    snprintf(out, sizeof out, "%s/out", top ? top : "/nonexistent");
    ok(top && mkdir(tree, 0755) == 0 && mkdir(out, 0755) == 0, "scratch directories");
    size_t plen = (size_t)snprintf(path, sizeof path, "%s", tree);
    for (int i = 0; i < 300 && plen + 3 < sizeof path; i++) { /* 300 deep: past PATH_MAX at the end */
        plen += (size_t)snprintf(path + plen, sizeof path - plen, "/d");
        mkdir(path, 0755);
    }
    snprintf(path, sizeof path, "%s/locked", tree);
    mkdir(path, 0755);
    snprintf(path, sizeof path, "%s/locked/f", tree);
    close(open(path, O_WRONLY | O_CREAT, 0600));
    snprintf(path, sizeof path, "%s/locked", tree);
    chmod(path, 0);
    int tfd = open(tree, O_RDONLY | O_DIRECTORY);
    ok(remove_tree_contents(tfd, UINT_MAX) == 0 && rmdir(tree) == 0,
       "remove_tree_contents: a 300-deep tree and a mode-000 directory go");
    if (geteuid() == 0) {
        snprintf(path, sizeof path, "%s/canary", out);
        close(open(path, O_WRONLY | O_CREAT, 0600));
        snprintf(path, sizeof path, "%s/a/mnt", tree);
        mkdir(tree, 0755);
        snprintf(path, sizeof path, "%s/a", tree);
        mkdir(path, 0755);
        snprintf(path, sizeof path, "%s/a/mnt", tree);
        mkdir(path, 0755);
        bool mounted = mount(out, path, NULL, MS_BIND, NULL) == 0;
        close(tfd);
        tfd = open(tree, O_RDONLY | O_DIRECTORY);
        int r = mounted ? remove_tree_contents(tfd, UINT_MAX) : -EXDEV;
        snprintf(path, sizeof path, "%s/canary", out);
        ok(mounted && r == -EXDEV && access(path, F_OK) == 0,
           "remove_tree_contents: a bind mount in the tree is not entered (-EXDEV)");
        snprintf(path, sizeof path, "%s/a/mnt", tree);
        if (mounted)
            umount(path);
    } else {
        ok(1, "# SKIP a bind mount in the tree: needs root to mount");
    }
    if (tfd >= 0)
        close(tfd);
    if (top) {
        int topfd = open(top, O_RDONLY | O_DIRECTORY);
        remove_tree_contents(topfd, UINT_MAX);
        close(topfd);
        rmdir(top);
    }
    return tap_done();
}
