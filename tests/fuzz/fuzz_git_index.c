/* fuzz_git_index: the .git/index reader review uses (lc_git_index_hides_buf,
 * src/lifecycle/git.c).  Input: the stage's index, then the workspace's
 * (FUZZ_SEP; absent: none). */
#include "fuzz-common.h"

#include "lifecycle/lc-internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct fuzz_part part[2];
    size_t n = fuzz_split(data, size, part, 2);
    /* copies of their exact length, so ASan sees any read past them */
    unsigned char *nb = malloc(part[0].n + 1), *ob = n > 1 ? malloc(part[1].n + 1) : NULL;
    if (!nb || (n > 1 && !ob))
        abort();
    memcpy(nb, part[0].p, part[0].n);
    if (ob)
        memcpy(ob, part[1].p, part[1].n);
    size_t count = 0, nn = 0;
    char **names = NULL;
    if (lc_git_index_hides_buf(nb, part[0].n, ob, ob ? part[1].n : 0, &count, &names, &nn) == 0) {
        if (nn > LC_GIT_HIDES_NAMES || nn > count)
            abort();
        for (size_t i = 0; i < nn; i++)
            free(names[i]);
        free(names);
    }
    free(nb);
    free(ob);
    return 0;
}
