/* fuzz_stage_open: a stage reopened for another run (stage_open_for_run:
 * version, meta.json, the journal, the origin map, the markers) and
 * probed by status (stage_probe_state).  Input parts (FUZZ_SEP): version,
 * meta.json ("@WS@" is the workspace the run names), journal, origin
 * ("@V2@", "@V2L@", "dev=@": fuzz_put_origin), then a byte whose bits make the
 * markers sealed, applied, dropped, apply-intent. */
#include "fuzz-common.h"

#include "stage/stage.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define WS "/fuzz-workspace"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char path[512];
    static int dir_fd = -1;
    if (dir_fd < 0) {
        snprintf(path, sizeof path, "%s/stage", fuzz_scratch());
        if (mkdir(path, 0700) < 0 || (dir_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
            abort();
        if (mkdirat(dir_fd, "upper", 0755) < 0)
            abort();
    }
    struct fuzz_part part[5];
    size_t n = fuzz_split(data, size, part, 5);
    fuzz_put(dir_fd, "version", part[0].p, part[0].n);
    /* meta.json with @WS@ made the workspace */
    {
        const uint8_t *p = part[1].p;
        size_t len = n > 1 ? part[1].n : 0;
        char *out = malloc(len * sizeof WS + 1), *o = out;
        if (!out)
            abort();
        for (size_t i = 0; i < len; i++) {
            if (i + 4 <= len && memcmp(p + i, "@WS@", 4) == 0) {
                memcpy(o, WS, sizeof WS - 1);
                o += sizeof WS - 1;
                i += 3;
                continue;
            }
            *o++ = (char)p[i];
        }
        fuzz_put(dir_fd, "meta.json", out, (size_t)(o - out));
        free(out);
    }
    fuzz_put(dir_fd, "journal", part[2].p, n > 2 ? part[2].n : 0);
    static int upper_fd = -1;
    if (upper_fd < 0 && (upper_fd = openat(dir_fd, "upper", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        abort();
    fuzz_put_origin(dir_fd, "origin", part[3].p, n > 3 ? part[3].n : 0, upper_fd);
    unsigned bits = n > 4 && part[4].n ? part[4].p[0] : 1;
    static const char *const markers[] = {"sealed", "applied", "dropped", "apply-intent"};
    for (unsigned i = 0; i < 4; i++)
        fuzz_put(dir_fd, markers[i], (bits >> i) & 1 ? "x\n" : NULL, 2);

    enum stage_state state;
    (void)stage_probe_state(path, &state);
    struct stage *s = NULL;
    if (stage_open_for_run(path, WS, "run-1", STAGE_DURABILITY_NONE, &s) == 0) {
        uint64_t l;
        (void)stage_journal_contains(s, "a");
        (void)stage_origin_get(s, 1, &l);
        stage_free(s);
    }
    return 0;
}
