/* lc-internal.h: helpers shared inside src/lifecycle/ (not a public API). */
#ifndef PVISOR_LIFECYCLE_INTERNAL_H
#define PVISOR_LIFECYCLE_INTERNAL_H

#include <sys/types.h>

#include "lifecycle/lifecycle.h"

/* User xattrs as the agent sees them (see fsutil.c), sorted by name. */
struct lc_xattrs {
    char **names;
    char **values;
    size_t *lens;
    size_t n;
};
int lc_xattrs_read(int fd, bool from_upper, struct lc_xattrs *ret);
bool lc_xattrs_equal(const struct lc_xattrs *a, const struct lc_xattrs *b);
int lc_xattrs_apply(int fd, const struct lc_xattrs *x);
int lc_xattrs_set_new(int fd, const struct lc_xattrs *x);
void lc_xattrs_free(struct lc_xattrs *x);

/* The warnings of entry e of cs from its own change (warnings.c), added to
 * e's and cs's: ust, the upper object (NULL for a deletion); sample_ok: a
 * new *.sample in a .git/hooks that no hook there links to. */
struct stat;
/* into_git: e is a .git file or link, or a commondir, that names a
 * directory inside a .git of the workspace (git_pointer_into_git): no
 * git_redirect, whose config and hooks are warned of there already */
void lc_entry_set_warnings(struct lc_changeset *cs, struct lc_entry *e, const struct stat *ust, bool sample_ok,
                           bool into_git);
/* Is path (workspace-relative) a .git's HEAD, a ref, packed-refs or the
 * state of a merge, rebase or cherry-pick in progress (LC_W_GIT_REFS; a
 * deleted one too)? */
bool lc_path_is_git_ref(const char *path);
/* Does pointer (a .git file's gitdir, a .git link's target, a commondir's
 * text), read at entry path (workspace-relative), name a directory inside a
 * .git of the workspace (a path of it with a ".git" component), as git
 * worktree add and git submodule add make them? */
bool lc_git_pointer_into_git(const char *workspace, const char *path, const char *pointer);

/* changeset-origin.c: the origin map of a stage's upper: the lower inode
 * each copied-up upper object came from. */
struct lc_ino_pair {
    uint64_t upper, lower;
    size_t seq;
    bool hidden; /* a copy of lower that the view showed by its own number (another copy showed lower) */
};
/* The map of this upper, sorted by upper inode (*ret_usable false: none;
 * *ret_legacy: a version 1 map). */
int lc_origin_load(int stage_dir_fd, int upper_fd, struct lc_ino_pair **ret, size_t *ret_n, bool *ret_usable,
                   bool *ret_legacy);
/* The lower inode upper was copied up from, 0: none.  shown_only: only a
 * copy the view showed as that number. */
uint64_t lc_origin_lookup(const struct lc_ino_pair *v, size_t n, uint64_t upper, bool shown_only);
/* Is lower the origin of some upper object (a legacy map's question)? */
bool lc_origin_lower_taken(const struct lc_ino_pair *v, size_t n, uint64_t lower);

/* changeset-annotate.c: once the walk is done, cs's entries put in path
 * order and counted, and the review's annotations added: renames (orig,
 * the origin map), renamed_changed, and the files of directories git takes
 * for a repository (upper_fd, ws_fd: the stage's upper and the workspace). */
void lc_changeset_annotate(struct lc_changeset *cs, const struct lc_ino_pair *orig, size_t n_orig, int upper_fd,
                           int ws_fd);

int lc_sha256_buf(const void *data, size_t len, unsigned char ret_sha[32]);
int lc_unhex(const char *hex, unsigned char *out, size_t out_len);
int lc_readlink_at(int dirfd, const char *name, char **ret_target);
enum lc_type lc_type_of(mode_t m);
enum lc_type lc_type_parse(const char *s);
/* A device node or socket: what apply never creates (warned of as special). */
static inline bool lc_type_special(enum lc_type t) {
    return t == LC_CHR || t == LC_BLK || t == LC_SOCK;
}
/* Copy in to the empty file out, keeping holes: only the data segments
 * (SEEK_DATA/SEEK_HOLE) are copied, then out gets in's size, so a sparse
 * file costs what it holds (an agent's huge sparse file cannot fill the
 * disk through apply or a checkpoint).  size: in's size when the caller
 * knows it, or UINT64_MAX.  budget: the most data bytes it may copy
 * (UINT64_MAX: no limit); a data segment past it stops the copy with
 * -ENOSPC before it is written.  *ret_bytes (optional): data bytes copied. */
int lc_copy_fd(int in, int out, uint64_t size, uint64_t budget, uint64_t *ret_bytes);
/* The same, stopping with -ECANCELED soon after *cancel becomes true
 * (NULL: never). */
int lc_copy_fd_cancel(int in, int out, uint64_t size, uint64_t budget, const atomic_bool *cancel, uint64_t *ret_bytes);
int lc_fd_equal(int a, int b);
int lc_hash_compare_fd(int fd, int other, unsigned char ret_sha[32], bool *ret_equal);

/* git.c: run git (argv, from cwd; the repository variables of the
 * environment unset; with GIT_INDEX_FILE=index_file when not NULL, and
 * then no system, global or environment config either), its
 * output fed to sink, within a bound of time.  git's exit status (0 ok),
 * or -ETIMEDOUT, or the sink's or a system error (negative). */
int lc_git_run(const char *cwd, const char *const *argv, const char *index_file,
               int (*sink)(void *ctx, const char *buf, size_t n), void *ctx);
/* Is the workspace's git index at path (workspace-relative; name in
 * dirfd, hashing to cur_sha), which the journal recorded as pre_sha, only
 * refreshed by git since the run (a 'git status' on the host rewrites its
 * stat data): the same entries as the copy the overlay kept of it
 * (STAGE/preimages/<sha>)?  Both are read by git as copies in a
 * repository of ours: no config or file of the workspace's repository is
 * read.  False when that cannot be told (no copy, no git, a sparse or
 * split index). */
bool lc_git_index_refreshed(int stage_dir_fd, int dirfd, const char *name, const char *path,
                            const unsigned char pre_sha[32], const unsigned char cur_sha[32]);

/* The entries a git index hides from git (skip-worktree, assume-unchanged)
 * that another does not: name in upper_dirfd (the stage's) against the
 * same name in lower_dirfd (the workspace's; -1 or absent: none hidden
 * before).  Parsed here (git.c), git never run: versions 2 to 4, SHA-1 or
 * SHA-256 object names, bounded; an index git could not read hides
 * nothing.  *ret_count: how many, *ret_names the first LC_GIT_HIDES_NAMES
 * (*ret_n of them, malloc'd, as git names them: check before printing).
 * -EFBIG: larger than LC_GIT_INDEX_READ_MAX, or than what is *budget
 * left of the bytes of git indexes a walk reads in all (each read takes
 * its size from it), not read. */
#define LC_GIT_HIDES_NAMES 5
#define LC_GIT_INDEX_READ_MAX ((size_t)LC_GIT_INDEX_READ_MAX_MIB << 20)
#define LC_GIT_INDEX_READ_TOTAL ((uint64_t)LC_GIT_INDEX_READ_TOTAL_MIB << 20)
int lc_git_index_hides(int upper_dirfd, int lower_dirfd, const char *name, uint64_t *budget, size_t *ret_count,
                       char ***ret_names, size_t *ret_n);
/* The same over two buffers (old_buf NULL: none); for tests. */
int lc_git_index_hides_buf(const unsigned char *new_buf, size_t new_len, const unsigned char *old_buf, size_t old_len,
                           size_t *ret_count, char ***ret_names, size_t *ret_n);

/* Journal loading (changeset.c): records sorted by path, one per path,
 * the preimages as later subset applies left them (STAGE/apply-written). */
int lc_journal_load(int stage_dir_fd, struct lc_preimage **ret, size_t *ret_n);
void lc_preimages_free(struct lc_preimage *p, size_t n);
const struct lc_preimage *lc_preimage_find(const struct lc_preimage *p, size_t n, const char *path);

/* Remove the temp files an interrupted apply (STAGE/apply-intent) may have
 * left in the workspace, and those of an apply whose intent rename a crash
 * lost (the intent's temp file names them; apply.c).  A version of the
 * user's that a crash left at a temp name goes back to its path (upper_fd:
 * the stage's upper/, to tell it from ours; < 0: only removed). */
int lc_apply_remove_temps(int stage_dir_fd, int ws_fd, int upper_fd);

/* The stage markers and files this module owns (docs/lifecycle.md). */
#define LC_APPLY_INTENT "apply-intent"
#define LC_APPLIED "applied"
#define LC_APPLY_CREATED "apply-created"
#define LC_APPLY_WRITTEN "apply-written"
#define LC_PREIMAGES "preimages" /* copies of git indexes as the run first changed them (the overlay's) */
#define LC_DROPPED "dropped"
#define LC_CHECKPOINTS "checkpoints"
#define LC_REVIEWED LC_REVIEWED_NAME /* the ID the last review or diff showed (changeset-id.c) */

/* STAGE/reviewed: write id (NULL or "": the review could tell none) and
 * whether it covers owners; read it back into ret_id ("" for none):
 * -ENOENT no record, -EBADMSG a malformed one. */
int lc_review_record_write(int dir_fd, const char *id, bool keep_owners);
int lc_review_record_read(int dir_fd, char ret_id[LC_CHANGESET_ID_LEN + 1], bool *ret_keep_owners);

#endif
