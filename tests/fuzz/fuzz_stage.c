/* fuzz_stage: a whole stage as review, diff and a resumed apply read it,
 * over a fixed small workspace and upper/ (made once): lc_stage_open
 * (version, meta.json), lc_changeset_load (journal, origin map,
 * apply-written, apply-created, apply-intent), the changeset ID and
 * STAGE/reviewed (lc_review_record_read), the intent (lc_intent_load) and
 * the resume's classification of the workspace (lc_apply_classify, which
 * writes nothing).  Input parts (FUZZ_SEP): journal, origin ("@V2@",
 * "@V2L@", "dev=@": fuzz_put_origin), apply-written, apply-created, apply-intent, reviewed,
 * meta.json (empty: a valid one). */
#include "fuzz-common.h"

#include <sys/sysmacros.h>

#include "lifecycle/apply-plan.h"
#include "lifecycle/lc-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char stage_path[512], ws_path[512];
static int stage_fd = -1;

static void mkfile(const char *dir, const char *name, const char *text) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
        abort();
    close(fd);
}

static void mkd(const char *dir, const char *name) {
    char p[1024];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    if (mkdir(p, 0755) < 0 && errno != EEXIST)
        abort();
}

/* workspace: a, b, d/c, d/e/f, l -> a, .git/index (empty)
 * upper: a (changed), n (new), d/ (copied up), d/c (changed), d/g/ new
 * with h, b whiteout (when mknod may make one), l -> n */
static void setup(void) {
    const char *base = fuzz_scratch();
    snprintf(ws_path, sizeof ws_path, "%s/ws", base);
    snprintf(stage_path, sizeof stage_path, "%s/stage", base);
    mkd(base, "ws");
    mkd(base, "stage");
    mkfile(ws_path, "a", "old a\n");
    mkfile(ws_path, "b", "b\n");
    mkd(ws_path, "d");
    mkfile(ws_path, "d/c", "old c\n");
    mkd(ws_path, "d/e");
    mkfile(ws_path, "d/e/f", "f\n");
    mkd(ws_path, ".git");
    mkfile(ws_path, ".git/index", "");
    char p[1024];
    snprintf(p, sizeof p, "%s/l", ws_path);
    if (symlink("a", p) < 0 && errno != EEXIST)
        abort();
    char up[600];
    snprintf(up, sizeof up, "%s/upper", stage_path);
    mkd(stage_path, "upper");
    mkfile(up, "a", "new a\n");
    mkfile(up, "n", "new\n");
    mkd(up, "d");
    mkfile(up, "d/c", "new c\n");
    mkd(up, "d/g");
    mkfile(up, "d/g/h", "h\0h\n");
    snprintf(p, sizeof p, "%s/b", up);
    (void)mknod(p, S_IFCHR | 0600, makedev(0, 0));
    snprintf(p, sizeof p, "%s/l", up);
    if (symlink("n", p) < 0 && errno != EEXIST)
        abort();
    mkfile(stage_path, "version", "pvisor-stage 1\n");
    mkfile(stage_path, "sealed", "2025-01-01T00:00:00Z\n");
    stage_fd = open(stage_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (stage_fd < 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (stage_fd < 0)
        setup();
    struct fuzz_part part[7];
    size_t n = fuzz_split(data, size, part, 7);
    static int upper_fd = -1;
    if (upper_fd < 0 && (upper_fd = openat(stage_fd, "upper", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        abort();
    fuzz_put(stage_fd, "journal", part[0].p, part[0].n);
    fuzz_put_origin(stage_fd, "origin", part[1].p, n > 1 ? part[1].n : 0, upper_fd);
    fuzz_put(stage_fd, LC_APPLY_WRITTEN, n > 2 ? part[2].p : NULL, part[2].n);
    fuzz_put(stage_fd, LC_APPLY_CREATED, n > 3 ? part[3].p : NULL, part[3].n);
    fuzz_put(stage_fd, LC_APPLY_INTENT, n > 4 ? part[4].p : NULL, part[4].n);
    fuzz_put(stage_fd, LC_REVIEWED, n > 5 ? part[5].p : NULL, part[5].n);
    if (n > 6 && part[6].n) {
        fuzz_put(stage_fd, "meta.json", part[6].p, part[6].n);
    } else {
        char meta[700];
        int m = snprintf(meta, sizeof meta, "{\"format\":1,\"workspace\":\"%s\",\"runs\":[\"r\"]}\n", ws_path);
        fuzz_put(stage_fd, "meta.json", meta, (size_t)m);
    }

    char id[LC_CHANGESET_ID_LEN + 1];
    bool keep = false;
    (void)lc_review_record_read(stage_fd, id, &keep);

    struct lc_stage *st = NULL;
    if (lc_stage_open(stage_path, &st) == 0) {
        struct lc_changeset *cs = NULL;
        if (lc_changeset_load(st, &cs) == 0) {
            for (size_t i = 0; i < cs->n; i++)
                if (!lc_path_valid(cs->entries[i].path))
                    abort(); /* every entry names a path inside the workspace */
            (void)lc_changeset_id(cs, st->upper_fd, id);
            lc_changeset_free(cs);
        }
        struct plan p = {0};
        if (lc_intent_load(stage_fd, &p) == 0) {
            for (size_t i = 0; i < p.n; i++)
                if (!lc_path_valid(p.v[i].path))
                    abort();
            struct lc_apply_report rep = {0};
            if (st->upper_fd >= 0)
                (void)lc_apply_classify(st->ws_fd, st->upper_fd, &p, &rep);
            lc_apply_report_clear(&rep);
            lc_plan_free(&p);
        }
        lc_stage_free(st);
    }
    return 0;
}
