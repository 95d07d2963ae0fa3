/* stage.h: the on-disk stage (format v1, see docs/stage-format.md).
 *
 * A stage is one directory holding the copy-on-write upper of a run, the
 * preimage journal and the lifecycle markers.  This module owns the format:
 * creation, reopening a sealed stage for another run, the run lock, the
 * preimage journal (first mutation of each lower object), the inode-origin
 * side file, and sealing.  It never touches the lower (the workspace).
 *
 * Trust: the stage directory is written by the supervisor only; its contents
 * are nevertheless parsed defensively (bounded line lengths, version check).
 *
 * Errors are negative errno; nothing here prints.
 *
 * Thread safety: stage_journal_*, stage_origin_* and stage_stats_* may be
 * called concurrently from FUSE worker threads (one internal mutex,
 * a leaf lock: no other lock is taken while holding it).  stage_open_for_run,
 * stage_seal and stage_free are single-threaded (no FUSE thread may run).
 */
#ifndef PVISOR_STAGE_STAGE_H
#define PVISOR_STAGE_STAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STAGE_FORMAT_VERSION 1

enum stage_durability {
    STAGE_DURABILITY_CHECKPOINT, /* records appended, synced at seal */
    STAGE_DURABILITY_STRICT,     /* record fdatasync'ed before the mutation */
    STAGE_DURABILITY_NONE,       /* a throwaway stage (the HOME view): nothing is ever synced */
};

enum stage_state {
    STAGE_CREATED,     /* initialised, nothing recorded */
    STAGE_RUNNING,     /* lock held by a live supervisor */
    STAGE_SEALED,      /* completion marker present, lock free */
    STAGE_INTERRUPTED, /* no marker, lock free, something recorded */
    STAGE_APPLIED,     /* 'applied' marker (reserved for apply) */
    STAGE_DROPPED,     /* 'dropped' marker (reserved for drop) */
};

const char *stage_state_name(enum stage_state s);

struct stage;

/* One preimage journal record: the state of a lower object just before its
 * first mutation through the overlay.  All strings are borrowed. */
struct stage_preimage {
    const char *path;   /* relative to the workspace, "." for the root */
    const char *type;   /* reg dir lnk fifo sock chr blk */
    uint32_t mode;      /* st_mode & 07777 */
    uint64_t size;      /* st_size */
    const char *sha256; /* lowercase hex; regular files and symlinks; else NULL */
    uint64_t ino;       /* lower st_ino */
    const char *op;     /* name of the first mutating operation */
    /* regular files and directories: pv_user_xattrs_sha256 of the lower
     * object, lowercase hex, taken before the copy-up read them; NULL:
     * not recorded (a stage of an older pvisor, another type) */
    const char *xattrs_sha256;
    /* the lower object changed (ctime) after the overlay started: the host
     * changed it during the run, before this first mutation */
    bool changed_during_run;
    /* its owner, when the server sees the host's ids (a run as root; an
     * ordinary user's sees only its own): a root apply gives what it
     * writes the stage object's owner, so a chown since is a conflict */
    bool has_owner;
    uint32_t uid, gid;
};

/* Create a stage at path (absent, or an empty directory) or reopen a sealed
 * stage of the same workspace for another run.  Takes the run lock (held
 * until stage_free), durably removes the 'sealed' marker (a crash during the
 * run then leaves 'interrupted'), appends run_id to meta.json, loads the
 * journal (paths already recorded are not recorded again) and the origin map,
 * and empties work/.  The stage directory is made 0700 (its owner's alone:
 * upper/ holds the command's set-id programs).
 * Errors: -ENOTDIR path is not a directory; -EBUSY another run holds the
 * lock; -ESTALE interrupted; -EALREADY applied or dropped; -EINPROGRESS an
 * apply of the stage was interrupted (finish it with `pvisor apply`); -EXDEV stage of
 * another workspace; -EINVAL not a stage; -EPROTO unknown format version;
 * -EPERM another user's directory; other -errno from the file system. */
int stage_open_for_run(const char *path, const char *workspace_abs, const char *run_id, enum stage_durability d,
                       struct stage **ret_stage);

/* A throwaway stage for one run's view whose writes are discarded (the
 * HOME view): a new directory at path (-EEXIST if anything is there), with
 * only what the overlay uses (upper/, work/, the journal and the origin
 * map), no run lock, meta.json, version or seal marker: never a stage
 * another run, apply or review can open (stage_open_for_run calls it not
 * a stage).  Durability none.  The caller removes the directory after
 * stage_free. */
int stage_open_throwaway(const char *path, struct stage **ret_stage);

/* O_DIRECTORY fds owned by the stage (valid until stage_free). */
int stage_upper_fd(const struct stage *s);
int stage_work_fd(const struct stage *s); /* scratch dir on the upper's fs */
int stage_dir_fd(const struct stage *s);  /* the stage directory itself */

enum stage_durability stage_durability(const struct stage *s);

/* True if a record for this path already exists (this or an earlier run). */
bool stage_journal_contains(struct stage *s, const char *path);

/* Append rec unless its path was recorded before.  Returns 1 if appended, 0
 * if already present, -errno on failure (the caller must then fail the
 * mutation).  Strict durability: the record is fdatasync'ed before return. */
int stage_journal_append(struct stage *s, const struct stage_preimage *rec);

/* A transaction of appends: the records appended after stage_journal_begin
 * are taken back by stage_journal_rollback (the journal is cut back to its
 * length at the begin, strict: synced, and their paths are no longer
 * recorded) or kept by stage_journal_commit; either ends it.  For an
 * operation that journaled objects it then left as they were (a rename
 * that failed after its copy-up was undone: overlay/undo.c).  One at a
 * time, and no other append may run meanwhile (the overlay's ns write
 * lock).  rollback: 0, or -errno with the records kept (-ENOMEM: one of
 * them could not be remembered). */
int stage_journal_begin(struct stage *s);
void stage_journal_commit(struct stage *s);
int stage_journal_rollback(struct stage *s);

/* Inode-origin map (side file 'origin'): upper st_ino -> lower st_ino for
 * objects copied up from the lower, so st_ino stays stable across copy-up
 * and across reopening the stage, and review can tell a directory copied
 * up from the workspace from one the command made.  origin_add appends
 * (strict: synced) and records every copy-up; a copy of a lower number a
 * live copy shows already (two file systems in the workspace, whose
 * numbers repeat) is recorded as not shown: stage_origin_get does not
 * answer for it, and the view gives it its own number.  origin_forget
 * records that the upper inode is gone (it may be reused). */
int stage_origin_add(struct stage *s, uint64_t upper_ino, uint64_t lower_ino);
int stage_origin_forget(struct stage *s, uint64_t upper_ino);
bool stage_origin_get(struct stage *s, uint64_t upper_ino, uint64_t *ret_lower_ino);
/* Is lower_ino the origin of a live upper inode (one stage_origin_get
 * answers for)?  Then that copy reports lower_ino as its st_ino, and a
 * lower object still having that number (a name of it the host made or
 * moved there after the copy-up) must not. */
bool stage_origin_lower_mapped(struct stage *s, uint64_t lower_ino);

/* The origin map's text (docs/stage-format.md, "origin"), shared by the
 * run's loader, the review (lifecycle/changeset.c) and the copies of
 * checkpoints and forks.  Its header names the file system of upper/ by
 * an identity that survives a remount (statfs's f_fsid, else the file
 * system's UUID, else st_dev) and upper/'s own inode number: the map's
 * numbers mean something only for that directory on that file system. */
#define STAGE_ORIGIN_HEADER_MAX 256

/* The header line (with its newline) of a map of the upper directory
 * upper_fd into buf.  legacy: the map began as a version 1 map, which has
 * no line for a copy whose lower number another copy showed.  Returns the
 * length, or -errno (fstat/fstatfs of upper_fd; -EOVERFLOW: size). */
int stage_origin_header(int upper_fd, bool legacy, char *buf, size_t size);

/* Is line (len bytes, the map's first line without its newline) the
 * header of a map of upper_fd?  1: yes, and *ret_legacy says whether the
 * map may lack lines as a version 1 map does (a version 1 header, which
 * names st_dev alone, or a version 2 one marked legacy); 0: no (another
 * file system or directory, an unknown version, a malformed header);
 * -errno: upper_fd could not be examined. */
int stage_origin_header_check(int upper_fd, const char *line, size_t len, bool *ret_legacy);

enum stage_origin_line {
    STAGE_ORIGIN_SHOWN = 1, /* "U L": the view shows U as L */
    STAGE_ORIGIN_HIDDEN,    /* "U L +": U is a copy of L, shown by its own number */
    STAGE_ORIGIN_FORGET,    /* "U -": U is gone */
};
/* Parse one map line after the header (len bytes, without its newline):
 * an enum stage_origin_line with *ret_upper and *ret_lower (0 for
 * FORGET), or -EINVAL. */
int stage_origin_parse_line(const char *line, size_t len, uint64_t *ret_upper, uint64_t *ret_lower);

/* Make everything durable (upper files and dirs, journal, origin map, and
 * a new stage's layout when it was created unflushed) and publish the
 * 'sealed' marker (temp file + rename + fsync dir; the name is the marker).
 * changed = false: nothing wrote to the stage since it was opened (its
 * content is as durable as the previous seal left it): only the marker, and
 * not even that for a stage this run created unflushed (it holds nothing). */
int stage_seal(struct stage *s, bool changed);

/* Release the lock and every resource.  NULL is fine. */
void stage_free(struct stage *s);

/* Read-only state probe (for status/list); takes no lasting lock. */
int stage_probe_state(const char *path, enum stage_state *ret_state);
/* Does the stage at path hold no change (no preimage recorded, nothing in
 * upper/: a run that only read)?  1 yes, 0 no, -errno. */
int stage_probe_empty(const char *path);

/* Does dirfd/path start as a stage's version file ("pvisor-stage ", which
 * makes a directory a stage)?  1 yes; 0 no (shorter than that too), or not
 * a regular file; -errno when it cannot be opened or read (-ELOOP: a
 * symlink).  Only its first bytes are read, whatever its size.  Never
 * waits: opened non-blocking, a fifo is not read. */
int stage_version_magic_at(int dirfd, const char *path);

/* For a refusal of a stage that is done (-EALREADY): "applied: its
 * changes are in the workspace", "dropped: its changes were discarded",
 * or "applied or dropped" when the probe cannot tell. */
const char *stage_done_phrase(const char *path);

/* Of a sealed stage (dir_fd: its directory; the caller holds it, by its
 * lock or as its run): remove what a restore killed before it left
 * 'sealed' (.restore, a whole copy of the checkpoint) or after it sealed
 * again (.restore-old) left, and a stray temp file of 'sealed'.  Nothing
 * when the stage is not sealed: an interrupted restore's own, which
 * running it again completes. */
void stage_remove_leftovers(int dir_fd);

/* Is st (an upper object's, lstat) a whiteout: the character device 0/0
 * that hides the lower object of its name (docs/stage-format.md)? */
struct stat;
bool stage_is_whiteout(const struct stat *st);

#endif
