/* fuzz_journal: the preimage journal and STAGE/apply-written as review,
 * diff and apply read them (lc_journal_load), and the journal and the
 * origin map as a run reopening the stage reads them (stage_journal_load,
 * stage_origin_load).  Input: journal, apply-written, origin (FUZZ_SEP;
 * "@V2@", "@V2L@" and "dev=@" in it: fuzz_put_origin). */
#include "fuzz-common.h"

#include "lifecycle/lc-internal.h"
#include "stage/stage-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int dir_fd = -1;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (dir_fd < 0 && (dir_fd = open(fuzz_scratch(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        abort();
    struct fuzz_part part[3];
    size_t n = fuzz_split(data, size, part, 3);
    fuzz_put(dir_fd, "journal", part[0].p, part[0].n);
    fuzz_put(dir_fd, LC_APPLY_WRITTEN, n > 1 ? part[1].p : NULL, part[1].n);

    struct lc_preimage *v = NULL;
    size_t nv = 0;
    if (lc_journal_load(dir_fd, &v, &nv) == 0) {
        for (size_t i = 0; i < nv; i++) {
            /* sorted, one per path, each path valid */
            if (!lc_preimage_find(v, nv, v[i].path) || (i && strcmp(v[i - 1].path, v[i].path) >= 0))
                abort();
            if (strcmp(v[i].path, ".") != 0 && !lc_path_valid(v[i].path))
                abort();
        }
        lc_preimages_free(v, nv);
    }

    /* the run's side: a struct stage as stage_open_for_run leaves it (the
     * scratch directory stands for upper/: the map's header names it) */
    struct stage s = {
        .dir_fd = dir_fd, .upper_fd = dir_fd, .work_fd = -1, .lock_fd = -1, .journal_fd = -1, .origin_fd = -1};
    pthread_mutex_init(&s.lock, NULL);
    (void)stage_journal_load(&s);
    fuzz_put_origin(dir_fd, "origin", part[2].p, n > 2 ? part[2].n : 0, dir_fd);
    if (stage_origin_load(&s) == 0) {
        uint64_t l;
        for (uint64_t u = 0; u < 64; u++) {
            (void)stage_origin_get(&s, u, &l);
            /* another copy of a number shown already is recorded, not shown */
            if (u > 0 && u < 4 && stage_origin_lower_mapped(&s, u) && !stage_origin_get(&s, 1000 + u, &l) &&
                stage_origin_add(&s, 1000 + u, u) == 0 && stage_origin_get(&s, 1000 + u, &l))
                abort();
            (void)stage_origin_forget(&s, u);
        }
        (void)stage_origin_lower_mapped(&s, 1);
        (void)stage_journal_contains(&s, "a");
    }
    if (s.origin_fd >= 0)
        close(s.origin_fd);
    stage_maps_free(&s);
    pthread_mutex_destroy(&s.lock);
    return 0;
}
