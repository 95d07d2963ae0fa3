/* Unit tests: lifecycle path validation, journal parsing (bounds, torn
 * lines, path_hex, duplicates, hostile paths), SHA-256 helpers, the steps
 * of a live checkpoint. */
#include <jansson.h>
#include "lifecycle/lc-internal.h"
#include "tap.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static int write_journal(int dirfd, const char *text) {
    int fd = openat(dirfd, "journal", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

#define REC(p)                                                                                                         \
    "{\"path\":\"" p "\",\"type\":\"reg\",\"mode\":420,\"size\":1,\"sha256\":\""                                       \
    "0000000000000000000000000000000000000000000000000000000000000001\",\"ino\":7,\"op\":\"open\"}\n"

/* ---- git index (lc_git_index_hides_buf) ---- */

struct ibuf {
    unsigned char *b;
    size_t n, cap;
};

static void ib_put(struct ibuf *x, const void *p, size_t n) {
    if (x->n + n > x->cap) {
        x->cap = (x->n + n) * 2 + 64;
        x->b = realloc(x->b, x->cap);
        if (!x->b)
            abort();
    }
    memcpy(x->b + x->n, p, n);
    x->n += n;
}

static void ib_be(struct ibuf *x, uint32_t v, int bytes) {
    unsigned char b[4];
    for (int i = 0; i < bytes; i++)
        b[i] = (unsigned char)(v >> (8 * (bytes - 1 - i)));
    ib_put(x, b, (size_t)bytes);
}

/* git's encode_varint */
static void ib_varint(struct ibuf *x, uint64_t value) {
    unsigned char varint[16];
    unsigned pos = sizeof(varint) - 1;
    varint[pos] = value & 127;
    while (value >>= 7)
        varint[--pos] = 128 | (--value & 127);
    ib_put(x, varint + pos, sizeof varint - pos);
}

struct ient {
    const char *name;
    bool valid, skip;
};

/* An index of version v (2, 3, 4) with object names of hsz bytes: the
 * entries, a TREE extension of 3 bytes, a hash of zeros. */
static struct ibuf make_index(unsigned v, size_t hsz, const struct ient *e, size_t n) {
    struct ibuf x = {0};
    ib_put(&x, "DIRC", 4);
    ib_be(&x, v, 4);
    ib_be(&x, (uint32_t)n, 4);
    const char *prev = "";
    for (size_t i = 0; i < n; i++) {
        size_t start = x.n, len = strlen(e[i].name);
        unsigned char zero[64] = {0};
        ib_put(&x, zero, 24);
        ib_be(&x, 0100644, 4);
        ib_put(&x, zero, 12);
        ib_put(&x, zero, hsz);
        bool ext = e[i].skip;
        ib_be(&x, (e[i].valid ? 0x8000u : 0) | (ext ? 0x4000u : 0) | (len < 0xfff ? (unsigned)len : 0xfffu), 2);
        if (ext)
            ib_be(&x, 0x4000, 2);
        if (v == 4) {
            size_t common = 0, pl = strlen(prev);
            while (common < pl && common < len && prev[common] == e[i].name[common])
                common++;
            ib_varint(&x, pl - common);
            ib_put(&x, e[i].name + common, len - common + 1);
        } else {
            ib_put(&x, e[i].name, len);
            size_t size = (x.n - start + 8) & ~(size_t)7;
            ib_put(&x, zero, size - (x.n - start));
        }
        prev = e[i].name;
    }
    ib_put(&x, "TREE", 4);
    ib_be(&x, 3, 4);
    ib_put(&x, "abc", 3);
    unsigned char h[32] = {0};
    ib_put(&x, h, hsz);
    return x;
}

static size_t hides(const struct ibuf *nw, const struct ibuf *old, char ***names, size_t *n_names) {
    size_t count = 99;
    int r = lc_git_index_hides_buf(nw->b, nw->n, old ? old->b : NULL, old ? old->n : 0, &count, names, n_names);
    return r < 0 ? (size_t)-1 : count;
}

static void free_names(char **names, size_t n) {
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static void test_git_index(void) {
    static const struct ient plain[] = {{"a", false, false}, {"dir/b", false, false}, {"dir/c", false, false}};
    static const struct ient hid[] = {{"a", false, true}, {"dir/b", true, false}, {"dir/c", false, false}};
    for (unsigned v = 2; v <= 4; v++)
        for (size_t hsz = 20; hsz <= 32; hsz += 12) {
            struct ibuf o = make_index(v, hsz, plain, 3), nw = make_index(v == 2 ? 3 : v, hsz, hid, 3);
            char **names = NULL;
            size_t nn = 0;
            size_t c = hides(&nw, &o, &names, &nn);
            ok(c == 2 && nn == 2 && strcmp(names[0], "a") == 0 && strcmp(names[1], "dir/b") == 0,
               "index v%u, %zu-byte names: the skip-worktree and assume-unchanged entries the old one did not have "
               "are named",
               v == 2 ? 3 : v, hsz);
            free_names(names, nn);
            c = hides(&nw, &nw, &names, &nn);
            ok(c == 0, "  ... none when the workspace's index hid them already");
            free_names(names, nn);
            c = hides(&nw, NULL, &names, &nn);
            ok(c == 2, "  ... both when the workspace has no index");
            free_names(names, nn);
            c = hides(&o, NULL, &names, &nn);
            ok(c == 0, "  ... none in an index without those bits");
            free_names(names, nn);
            /* every truncation and many byte changes: no crash, no hang */
            bool fine = true;
            for (size_t cut = 0; cut < nw.n; cut++) {
                size_t cc = 0;
                char **nm = NULL;
                size_t k = 0;
                int r = lc_git_index_hides_buf(nw.b, cut, o.b, o.n, &cc, &nm, &k);
                fine = fine && r == 0 && k <= LC_GIT_HIDES_NAMES;
                free_names(nm, k);
            }
            unsigned seed = 7 * v + (unsigned)hsz;
            for (int t = 0; t < 3000; t++) {
                struct ibuf m = {malloc(nw.n), nw.n, nw.n};
                memcpy(m.b, nw.b, nw.n);
                for (int f = 0; f < 1 + t % 4; f++) {
                    seed = seed * 1103515245 + 12345;
                    m.b[(seed >> 8) % m.n] = (unsigned char)(seed >> 20);
                }
                size_t cc = 0;
                char **nm = NULL;
                size_t k = 0;
                int r = lc_git_index_hides_buf(m.b, m.n, m.b, m.n / 2, &cc, &nm, &k);
                fine = fine && r == 0 && k <= LC_GIT_HIDES_NAMES;
                free_names(nm, k);
                free(m.b);
            }
            ok(fine, "  ... every truncation of it, and 3000 with bytes changed, read without a crash");
            free(o.b);
            free(nw.b);
        }
    /* hostile: an entry count far past the file; a name length past it;
     * unknown extended flags (git dies: nothing hidden); an unknown
     * lower-case extension (git dies too) */
    static const struct ient one[] = {{"x", true, false}};
    struct ibuf x = make_index(2, 20, one, 1);
    char **names = NULL;
    size_t nn = 0;
    x.b[8] = x.b[9] = x.b[10] = x.b[11] = 0xff;
    ok(hides(&x, NULL, &names, &nn) == 0, "an entry count past the file's end: not read whole, nothing hidden");
    free_names(names, nn);
    free(x.b);
    x = make_index(2, 20, one, 1);
    x.b[12 + 60] = 0x8f;
    x.b[12 + 61] = 0xfe;
    ok(hides(&x, NULL, &names, &nn) == 0, "a name length past the file's end: nothing read past it");
    free_names(names, nn);
    free(x.b);
    static const struct ient sk[] = {{"x", false, true}};
    x = make_index(3, 20, sk, 1);
    x.b[12 + 62] = 0x40 | 0x10;
    ok(hides(&x, NULL, &names, &nn) == 0, "unknown extended flags (git refuses the index): nothing hidden");
    free_names(names, nn);
    free(x.b);
    x = make_index(2, 20, one, 1);
    memcpy(x.b + x.n - 20 - 11, "tree", 4);
    ok(hides(&x, NULL, &names, &nn) == 0, "an extension git does not know, not upper case (git refuses it)");
    free_names(names, nn);
    free(x.b);
    /* version 4: a strip longer than the previous name */
    static const struct ient two[] = {{"ab", false, false}, {"ac", true, false}};
    x = make_index(4, 20, two, 2);
    size_t second = 12 + 62 + 1 + 3; /* the first entry: its varint, "ab", NUL */
    ok(x.b[second + 62] == 1, "(the second entry's strip is where it is expected)");
    x.b[second + 62] = 5;
    ok(hides(&x, NULL, &names, &nn) == 0, "index v4: a strip past the previous name (git dies): nothing hidden");
    free_names(names, nn);
    free(x.b);
    /* version 4, names that each keep the previous one and add a byte,
     * all hidden: the names grow to the file's size; reading it costs a
     * pass, not one per entry (was quadratic) */
    struct ibuf g = {0};
    ib_put(&g, "DIRC", 4);
    ib_be(&g, 4, 4);
    const uint32_t n_grow = 120000;
    ib_be(&g, n_grow, 4);
    unsigned char zero[64] = {0};
    for (uint32_t i = 0; i < n_grow; i++) {
        ib_put(&g, zero, 60);
        ib_be(&g, 0x8000u | 0xfffu, 2);
        ib_varint(&g, 0);
        ib_put(&g, "a", 2);
    }
    ib_put(&g, zero, 20);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    size_t gc = hides(&g, &g, &names, &nn);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    ok(gc != (size_t)-1 && secs < 5, "index v4 of %u ever longer hidden names (%zu bytes) read in %.2f s", n_grow, g.n,
       secs);
    free_names(names, nn);
    free(g.b);
}

int main(void) {
    ok(lc_path_valid("a"), "plain name");
    ok(lc_path_valid("a/b/c.txt"), "nested path");
    ok(lc_path_valid(".hidden/..x/x.."), "dot-prefixed names are names");
    ok(!lc_path_valid(""), "empty rejected");
    ok(!lc_path_valid("/etc/passwd"), "absolute rejected");
    ok(!lc_path_valid("a/../b") && !lc_path_valid(".."), "'..' component rejected");
    ok(!lc_path_valid("./a") && !lc_path_valid("a/."), "'.' component rejected");
    ok(!lc_path_valid("a//b") && !lc_path_valid("a/"), "empty component rejected");
    char longp[LC_MAX_PATH + 10];
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = '\0';
    for (size_t i = 200; i < sizeof longp - 1; i += 201)
        longp[i] = '/';
    ok(!lc_path_valid(longp), "overlong path rejected");

    /* What lc_utf8_valid accepts is exactly what jansson takes as a string. */
    static const char *const utf8[] = {"plain",
                                       "caf\xc3\xa9",
                                       "\xe2\x82\xac",
                                       "\xf0\x9d\x84\x9e",
                                       "\xc0\xaf",         /* overlong '/' */
                                       "\xe0\x80\xaf",     /* overlong, 3 bytes */
                                       "\xed\xa0\x80",     /* a surrogate */
                                       "\xf4\x90\x80\x80", /* past U+10FFFF */
                                       "\xff",
                                       "\xc3",
                                       "a\x80\x62"}; /* \x62 is 'b' */
    bool agree = true;
    for (size_t i = 0; i < sizeof utf8 / sizeof *utf8; i++) {
        json_t *js = json_string(utf8[i]);
        agree = agree && (js != NULL) == lc_utf8_valid(utf8[i]) && (i < 4) == lc_utf8_valid(utf8[i]);
        json_decref(js);
    }
    ok(agree,
       "lc_utf8_valid: valid UTF-8 accepted; overlong, surrogate, out-of-range and torn bytes refused, as jansson");

    char dir[] = "/tmp/pvisor-unit-lc.XXXXXX";
    ok(mkdtemp(dir) != NULL, "temp dir");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct lc_preimage *pre = NULL;
    size_t n = 0;

    ok(write_journal(dfd, REC("b") REC("a") REC("b") "{\"path\":\"torn") == 0 && lc_journal_load(dfd, &pre, &n) == 0 &&
           n == 2,
       "two paths, duplicate and torn final line ignored");
    ok(n == 2 && strcmp(pre[0].path, "a") == 0 && lc_preimage_find(pre, n, "b") != NULL &&
           lc_preimage_find(pre, n, "c") == NULL,
       "sorted and searchable");
    ok(n == 2 && pre[0].type == LC_REG && pre[0].mode == 0644 && pre[0].has_sha && pre[0].sha[31] == 1,
       "fields parsed");
    lc_preimages_free(pre, n);

    /* Several records of one path (a resumed run appends what an earlier
     * one recorded too): the first is the preimage, wherever the sort puts
     * the others.  Many other paths around them make the sort move them. */
    {
        char *text = NULL;
        size_t tl = 0;
        FILE *f = open_memstream(&text, &tl);
        for (int i = 0; i < 3000; i++)
            fprintf(f, "{\"path\":\"%s%d\",\"type\":\"reg\",\"mode\":%d,\"size\":1,\"ino\":%d,\"op\":\"open\"}\n",
                    i % 3 == 0 ? "dup" : "p", i % 3 == 0 ? 0 : i, i == 0 ? 0400 : 0401, i + 1);
        fclose(f);
        ok(write_journal(dfd, text) == 0 && lc_journal_load(dfd, &pre, &n) == 0 && n == 2001,
           "1,000 records of one path and 2,000 others: 2,001 paths");
        const struct lc_preimage *d = lc_preimage_find(pre, n, "dup0");
        ok(d && d->mode == 0400 && d->ino == 1, "the journal's first record of a path is its preimage");
        lc_preimages_free(pre, n);
        free(text);
    }

    ok(write_journal(
           dfd, "{\"path_hex\":\"612f62\",\"type\":\"dir\",\"mode\":493,\"size\":0,\"ino\":1,\"op\":\"rmdir\"}\n") ==
               0 &&
           lc_journal_load(dfd, &pre, &n) == 0 && n == 1 && strcmp(pre[0].path, "a/b") == 0 && !pre[0].has_sha,
       "path_hex decoded");
    lc_preimages_free(pre, n);

    ok(write_journal(dfd, REC("../etc/passwd")) == 0 && lc_journal_load(dfd, &pre, &n) == -EBADMSG,
       "'..' in a journal path rejected");
    ok(write_journal(dfd, REC("/etc/passwd")) == 0 && lc_journal_load(dfd, &pre, &n) == -EBADMSG,
       "absolute journal path rejected");
    ok(write_journal(dfd, "{\"path_hex\":\"2e2e2f78\",\"type\":\"reg\",\"mode\":420}\n") == 0 &&
           lc_journal_load(dfd, &pre, &n) == -EBADMSG,
       "'..' hidden in path_hex rejected");
    ok(write_journal(dfd, "{\"path_hex\":\"6100\",\"type\":\"reg\",\"mode\":420}\n") == 0 &&
           lc_journal_load(dfd, &pre, &n) == -EBADMSG,
       "NUL in path_hex rejected");
    ok(write_journal(dfd, "not json\n") == 0 && lc_journal_load(dfd, &pre, &n) == -EBADMSG, "junk line rejected");
    ok(write_journal(dfd, "{\"path\":\"a\",\"type\":\"bogus\",\"mode\":1}\n") == 0 &&
           lc_journal_load(dfd, &pre, &n) == -EBADMSG,
       "unknown type rejected");
    ok(write_journal(dfd, "{\"path\":\"a\",\"type\":\"reg\",\"mode\":420,\"sha256\":\"xyz\"}\n") == 0 &&
           lc_journal_load(dfd, &pre, &n) == -EBADMSG,
       "bad digest rejected");
    ok(write_journal(dfd, "") == 0 && lc_journal_load(dfd, &pre, &n) == 0 && n == 0, "empty journal");
    lc_preimages_free(pre, n);

    unsigned char sha[32];
    char hex[65];
    ok(lc_sha256_buf("abc", 3, sha) == 0, "sha256 of a buffer");
    lc_hex(sha, hex);
    ok(strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad") == 0, "sha256(abc)");
    unsigned char back[32];
    ok(lc_unhex(hex, back, 32) == 0 && memcmp(back, sha, 32) == 0, "hex round trip");
    ok(lc_unhex("zz", back, 1) == -EINVAL && lc_unhex("00", back, 2) == -EINVAL, "bad hex rejected");

    /* live checkpoints in three steps, on a minimal stage layout */
    ok(lc_checkpoint_name_valid("c1") && lc_checkpoint_name_valid("a.b_c-9") && !lc_checkpoint_name_valid("") &&
           !lc_checkpoint_name_valid("..") && !lc_checkpoint_name_valid("a/b") && !lc_checkpoint_name_valid(".x") &&
           !lc_checkpoint_name_valid("-x") &&
           !lc_checkpoint_name_valid("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"),
       "checkpoint names: '/', '..', leading '.' or '-', empty and 65 bytes refused");
    ok(mkdirat(dfd, "upper", 0700) == 0 && write_journal(dfd, REC("f")) == 0, "a minimal stage");
    int mfd = openat(dfd, "meta.json", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int vfd = openat(dfd, "version", O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    ok(mfd >= 0 && vfd >= 0 && write(mfd, "{}\n", 3) == 3 && write(vfd, "pvisor-stage 1\n", 15) == 15,
       "meta.json, version");
    close(mfd);
    close(vfd);
    struct lc_checkpoint_tx *tx = NULL;
    ok(lc_checkpoint_begin(dfd, "../x", &tx) == -EINVAL, "begin refuses a bad name");
    ok(lc_checkpoint_begin(dfd, "c1", &tx) == 0, "begin");
    struct stat cst;
    ok(fstatat(dfd, "checkpoints/.tmp-c1", &cst, 0) == 0, "the copy is built under a temp name");
    ok(lc_checkpoint_commit(tx, "run", NULL) == -EINVAL, "commit before copy is refused");
    ok(lc_checkpoint_copy(tx, false, 0, NULL) == 0, "copy");
    ok(lc_checkpoint_copy(tx, false, 0, NULL) == -EALREADY, "one copy per checkpoint");
    ok(lc_checkpoint_commit(tx, "run-1", NULL) == 0, "commit");
    lc_checkpoint_tx_free(tx);
    char *info = NULL;
    ok(read_file_at(dfd, "checkpoints/c1/checkpoint.json", 4096, &info, NULL) == 0 && strstr(info, "\"live\":true") &&
           strstr(info, "\"run\":\"run-1\""),
       "checkpoint.json marks a live checkpoint and its run");
    free(info);
    ok(fstatat(dfd, "checkpoints/.tmp-c1", &cst, 0) < 0 && fstatat(dfd, "checkpoints/c1/journal", &cst, 0) == 0,
       "published by rename, journal included");
    ok(lc_checkpoint_begin(dfd, "c1", &tx) == -EEXIST, "a taken name is refused");
    ok(lc_checkpoint_begin(dfd, "c2", &tx) == 0, "an abandoned checkpoint ...");
    lc_checkpoint_tx_free(tx);
    ok(fstatat(dfd, "checkpoints/.tmp-c2", &cst, 0) < 0 && fstatat(dfd, "checkpoints/c2", &cst, 0) < 0,
       "... leaves nothing behind");
    int uf = openat(dfd, "upper/f", O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    ok(uf >= 0 && write(uf, "x", 1) == 1, "a file in upper/");
    close(uf);
    atomic_bool cancel = true;
    ok(lc_checkpoint_begin(dfd, "c3", &tx) == 0 && lc_checkpoint_copy(tx, false, 0, &cancel) == -ECANCELED,
       "a cancelled copy stops (the run ended)");
    lc_checkpoint_tx_free(tx);
    ok(fstatat(dfd, "checkpoints/.tmp-c3", &cst, 0) < 0 && fstatat(dfd, "checkpoints/c3", &cst, 0) < 0,
       "... and leaves nothing behind");
    ok(remove_tree_at(dfd, "checkpoints", 16) == 0 && remove_tree_at(dfd, "upper", 4) == 0, "cleanup");
    unlinkat(dfd, "meta.json", 0);
    unlinkat(dfd, "version", 0);

    unlinkat(dfd, "journal", 0);
    close(dfd);
    rmdir(dir);
    /* names as a terminal gets them: what it would act on, escaped */
    static const struct {
        const char *in, *out, *what;
    } disp[] = {
        {"plain-ünïcode.txt", "plain-ünïcode.txt", "UTF-8 letters stay"},
        {"a\033[2Jb", "a\\x1b[2Jb", "C0 controls escaped"},
        {"a\302\233"
         "1Ab",
         "a\\xc2\\x9b1Ab", "a UTF-8 C1 control (CSI) escaped"},
        {"a\233b", "a\\x9bb", "a lone 8-bit CSI (not UTF-8) escaped"},
        {"a\342\200\256b", "a\\xe2\\x80\\xaeb", "a bidi override (U+202E) escaped"},
        {"a\342\201\246b", "a\\xe2\\x81\\xa6b", "a bidi isolate (U+2066) escaped"},
        {"a\\b", "a\\x5cb", "a backslash escaped (the escapes stay unambiguous)"},
        {"a\355\240\200b", "a\\xed\\xa0\\x80b", "a UTF-16 surrogate (not UTF-8) escaped"},
        {"a\340\200\257b", "a\\xe0\\x80\\xafb", "an overlong form escaped"},
        {"\360\237\230\200", "\360\237\230\200", "an emoji stays"},
        {"a\342\200\213b", "a\\xe2\\x80\\x8bb", "a zero-width space escaped"},
        {"a\342\200\250b", "a\\xe2\\x80\\xa8b", "a line separator escaped"},
        {"a\357\273\277b", "a\\xef\\xbb\\xbfb", "a byte order mark escaped"},
        {"a\330\234b", "a\\xd8\\x9cb", "the Arabic letter mark escaped"},
        {"setup\363\240\200\240.py", "setup\\xf3\\xa0\\x80\\xa0.py", "a tag character (U+E0020) escaped"},
        {"a\302\255b", "a\\xc2\\xadb", "a soft hyphen escaped"},
        {"a\357\270\217b", "a\\xef\\xb8\\x8fb", "a variation selector escaped"},
        {"\302\240", "\\xc2\\xa0", "a no-break space escaped"},
        {"a\341\240\215b", "a\\xe1\\xa0\\x8db", "a Mongolian variation selector escaped"},
        {"a\360\235\205\263b", "a\\xf0\\x9d\\x85\\xb3b", "a musical symbol format control escaped"},
        {"a\343\200\200b", "a\\xe3\\x80\\x80b", "an ideographic space escaped"},
    };
    for (size_t i = 0; i < sizeof disp / sizeof disp[0]; i++) {
        char *d = lc_display_name(disp[i].in);
        is_str(d, disp[i].out, "lc_display_name: %s", disp[i].what);
        free(d);
    }
    test_git_index();
    return tap_done();
}
