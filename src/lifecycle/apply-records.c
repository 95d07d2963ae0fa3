/* apply-records.c: what an apply reads and leaves in the stage beside its
 * intent (split from apply.c): the directories it created
 * (STAGE/apply-created), the 'applied' marker, the review record it
 * compares with (STAGE/reviewed) and what it records of it after a
 * subset. */
#include "lifecycle/apply-plan.h"
#include "lifecycle/lc-internal.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* After an apply: remember the directories it created (see load_ours in
 * changeset.c).  Appended to what earlier subsets recorded. */
/* STAGE/apply-created: each directory an apply created, as a
 * NUL-terminated workspace path (older pvisor wrote one per line; a file
 * without a NUL is read that way: load_ours). */
int lc_apply_record_created_dirs(int dir_fd, const struct plan *p) {
    _cleanup_free_ char *old = NULL;
    size_t old_len = 0;
    int r = read_file_at(dir_fd, LC_APPLY_CREATED, 64u << 20, &old, &old_len);
    if (r < 0 && r != -ENOENT)
        return r;
    size_t extra = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i].old_type == LC_NONE && p->v[i].new_type == LC_DIR)
            extra += strlen(p->v[i].path) + 1;
    if (extra == 0)
        return 0;
    _cleanup_free_ char *buf = malloc(old_len + extra + 1);
    if (!buf)
        return -ENOMEM;
    size_t n = 0;
    if (old && old_len) {
        memcpy(buf, old, old_len);
        n = old_len;
        /* an older pvisor's file, one path per line: made NUL-terminated,
         * or load_ours would read it as one path with newlines */
        if (!memchr(old, '\0', old_len))
            for (size_t k = 0; k < n; k++)
                if (buf[k] == '\n')
                    buf[k] = '\0';
    }
    for (size_t i = 0; i < p->n; i++)
        if (p->v[i].old_type == LC_NONE && p->v[i].new_type == LC_DIR) {
            size_t l = strlen(p->v[i].path);
            memcpy(buf + n, p->v[i].path, l);
            buf[n + l] = '\0'; /* a name may hold a newline */
            n += l + 1;
        }
    return write_file_atomic(dir_fd, LC_APPLY_CREATED, buf, n, 0600);
}

bool lc_apply_pending(const char *stage_path) {
    _cleanup_close_ int d = open(stage_path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    return d >= 0 && fstatat(d, LC_APPLY_INTENT, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Mark the stage applied: the intent becomes the 'applied' marker (one
 * rename: there is never a moment with both or neither).  Only the
 * marker's existence is read; its content is the plan that was applied.
 * execute() made every workspace change durable just before, so the
 * marker can never be durable without them.  The rename itself is made
 * durable before apply reports success: were it lost after the user went
 * on working, the intent's roll-forward would redo a path the user had
 * since put back to its old content. */
int lc_apply_mark_applied(int dir_fd) {
    if (renameat(dir_fd, LC_APPLY_INTENT, dir_fd, LC_APPLIED) < 0)
        return -errno;
    if (fsync(dir_fd) < 0) {
        /* the marker is not known to be durable: the intent goes back,
         * and the stage reads as an apply to complete (the next one finds
         * every path in its final state and marks it).  Left as it was,
         * no intent made the failure read "Nothing was written to the
         * workspace", after every change was written. */
        int r = -errno;
        (void)renameat(dir_fd, LC_APPLIED, dir_fd, LC_APPLY_INTENT);
        return r;
    }
    return 0;
}

/* Without --expect, a stage whose changeset ID a review or diff showed
 * (STAGE/reviewed) is applied only while it has the last ID shown: a run
 * on it, a restore, since the review made apply write changes no one
 * reviewed (docs/lifecycle.md, "The changeset ID").  0: never reviewed,
 * or the one reviewed; *ret_checked: it was compared. */
int lc_apply_check_reviewed(const struct lc_stage *st, const struct lc_changeset *cs, struct lc_apply_report *rep,
                            bool *ret_checked) {
    *ret_checked = false;
    bool owners = false;
    int r = lc_review_record_read(st->dir_fd, rep->reviewed_id, &owners);
    if (r == -ENOENT)
        return 0;
    rep->reviewed = true;
    if (r < 0) {
        rep->reviewed_id[0] = '\0';
        return r == -EBADMSG ? -EKEYREVOKED : r;
    }
    if (!rep->reviewed_id[0])
        return -EKEYREVOKED;
    if (owners != cs->keep_owners) {
        rep->reviewed_other_user = true;
        return -EKEYREVOKED;
    }
    r = lc_changeset_id(cs, st->upper_fd, rep->changeset_id);
    if (r < 0) {
        rep->changeset_id[0] = '\0';
        return r == -ESTALE ? -EKEYREVOKED : r;
    }
    if (strcmp(rep->changeset_id, rep->reviewed_id) != 0)
        return -EKEYREVOKED;
    *ret_checked = true;
    return 0;
}

/* After a subset apply of the changeset the last review showed, what is
 * left of it is recorded as reviewed: part of what that review showed
 * (the stage unchanged under the lock), with an ID of its own.  Best
 * effort: without it, the next plain apply refuses and asks for a review. */
void lc_apply_record_rest_reviewed(struct lc_stage *st) {
    struct lc_changeset *rest = NULL;
    char id[LC_CHANGESET_ID_LEN + 1];
    if (lc_changeset_load(st, &rest) == 0 && lc_changeset_id(rest, st->upper_fd, id) == 0)
        (void)lc_review_record_write(st->dir_fd, id, rest->keep_owners);
    lc_changeset_free(rest);
}
