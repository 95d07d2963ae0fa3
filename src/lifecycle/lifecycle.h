/* lifecycle.h: what happens to a stage after the run (docs/lifecycle.md).
 *
 * A sealed stage (docs/stage-format.md) is read into a *changeset*: the
 * difference between the stage's upper and the current workspace (the
 * lower), each entry joined with the preimage the journal recorded at the
 * agent's first mutation of that path.  The changeset drives review
 * (status --review), diff and apply; apply writes it into the workspace
 * atomically per file, behind an intent journal, and refuses on any
 * content conflict.
 *
 * Trust: upper/ and every file in the stage are agent-influenced.  Every
 * path is opened relative to a directory fd, one component at a time or
 * with openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS); no symlink in the
 * stage or in the workspace is ever followed.  Sizes are bounded
 * (LC_MAX_PATH, LC_MAX_DEPTH, LC_MAX_ENTRIES).
 *
 * Errors are negative errno; nothing here prints.
 */
#ifndef PVISOR_LIFECYCLE_LIFECYCLE_H
#define PVISOR_LIFECYCLE_LIFECYCLE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <jansson.h>

#define LC_MAX_PATH 4095        /* bytes of a workspace-relative path */
#define LC_MAX_PATH_TEXT "4095" /* the same, for messages */
_Static_assert(LC_MAX_PATH == 4095, "LC_MAX_PATH_TEXT must say LC_MAX_PATH");
#define LC_MAX_DEPTH 256        /* directory nesting below the root */
#define LC_MAX_DEPTH_TEXT "256" /* the same, for messages */
_Static_assert(LC_MAX_DEPTH == 256, "LC_MAX_DEPTH_TEXT must say LC_MAX_DEPTH");
#define LC_MAX_ENTRIES 2000000    /* upper objects + changeset entries */
#define LC_LARGE_FILE (16u << 20) /* warn for new/changed files above this */

enum lc_type { LC_NONE, LC_REG, LC_DIR, LC_LNK, LC_FIFO, LC_SOCK, LC_CHR, LC_BLK };
const char *lc_type_name(enum lc_type t); /* "reg" ... "none" (journal names) */

enum lc_kind {
    LC_ADDED,        /* nothing in the lower at this path */
    LC_DELETED,      /* the lower object is gone in the stage */
    LC_MODIFIED,     /* same type; content, mode, target or xattrs differ */
    LC_TYPE_CHANGED, /* the lower object is replaced by one of another type */
};
const char *lc_kind_name(enum lc_kind k);

/* What differs (LC_MODIFIED / LC_TYPE_CHANGED). */
#define LC_CH_CONTENT (1u << 0) /* regular file bytes */
#define LC_CH_MODE (1u << 1)    /* permission bits */
#define LC_CH_TARGET (1u << 2)  /* symlink target */
#define LC_CH_XATTR (1u << 3)   /* user.* extended attributes */
#define LC_CH_OWNER (1u << 4)   /* owner or group, which apply run by root gives (with another change) */

/* Warnings (review shows them; apply acts on LC_W_SETID and LC_W_SPECIAL). */
#define LC_W_EXEC (1u << 0)                /* a regular file gains an executable bit */
#define LC_W_SETID (1u << 1)               /* setuid or setgid bit */
#define LC_W_GIT_HOOK (1u << 2)            /* below .git/hooks, or core.hooksPath */
#define LC_W_GIT_CONFIG (1u << 3)          /* a .git/config */
#define LC_W_SYMLINK_OUTSIDE (1u << 4)     /* a symlink whose target leaves the workspace */
#define LC_W_LARGE (1u << 5)               /* new content over LC_LARGE_FILE */
#define LC_W_SPECIAL (1u << 6)             /* device node or socket (never applied) */
#define LC_W_HARDLINK (1u << 7)            /* several names of one upper file */
#define LC_W_GIT_WORKTREE (1u << 8)        /* a linked worktree's .git/worktrees/NAME deleted */
#define LC_W_PY_STARTUP (1u << 9)          /* a .pth or site/usercustomize in site-packages, a pyvenv.cfg */
#define LC_W_HOME_STARTUP (1u << 10)       /* HOME in the workspace: a file a shell, login or session runs */
#define LC_W_FIFO (1u << 11)               /* a named pipe (applied: what opens it waits for a writer) */
#define LC_W_GIT_LOCK (1u << 12)           /* a new *.lock in a .git (a git killed mid-way left it) */
#define LC_W_NUL_TEXT (1u << 13)           /* text but for NUL bytes: diff shows it as binary */
#define LC_W_RENAMED_CHANGED (1u << 14)    /* renamed (or in a renamed directory) and its content changed */
#define LC_W_GIT_REDIRECT (1u << 15)       /* a .git file or link, a commondir: where git takes a repository from */
#define LC_W_WORLD_WRITABLE (1u << 16)     /* gains write permission for every user (o+w) */
#define LC_W_CHANGED_DURING_RUN (1u << 17) /* the host changed it during the run, before the agent's first change */
#define LC_W_TOOL_CONFIG (1u << 18)    /* a tool's configuration that makes it run commands (pre-commit, .envrc, ...) */
#define LC_W_STAGE_MARKER (1u << 19)   /* a file "version" that makes its directory look like a pvisor stage */
#define LC_W_CI_CONFIG (1u << 20)      /* a CI pipeline's definition (.github/workflows/..., .gitlab-ci.yml, ...) */
#define LC_W_GIT_HIDES (1u << 21)      /* .git/info/exclude or attributes: hides changes from git status/diff */
#define LC_W_DIFF_HIDDEN (1u << 22)    /* new text diff does not show: the workspace's version is binary or large */
#define LC_W_GIT_REFS (1u << 23)       /* a .git's HEAD, a ref or packed-refs: a branch moved, made or deleted */
#define LC_W_INVISIBLE_TEXT (1u << 24) /* new text with more bidi controls, invisible characters, escapes */
#define LC_W_LOOKALIKE_NAME (1u << 25) /* a name the change adds that is not plain ASCII: may pass for another */
#define LC_W__COUNT 26
/* diff shows a file with a NUL byte in its first LC_BINARY_PROBE bytes as
 * binary (as git does) */
#define LC_BINARY_PROBE 8000
/* diff shows neither side of a file when one is larger than this (diff(1)
 * reads both whole) */
#define LC_DIFF_MAX (64u << 20)
#define LC_DIFF_MAX_TEXT "64 MiB"
const char *lc_warning_name(unsigned bit_index);    /* "exec", "setid", ... */
const char *lc_warning_message(unsigned bit_index); /* "gains an executable bit", ... */

/* One preimage journal record (all fields owned by the changeset). */
struct lc_preimage {
    char *path;
    enum lc_type type;
    uint32_t mode;
    uint64_t size;
    bool has_sha;
    unsigned char sha[32];
    uint64_t ino;
    char op[16];
    size_t seq;              /* position in the journal: of several records of a path, the first is the preimage */
    bool changed_during_run; /* the host changed it during the run, before the agent's first change */
    bool has_xattr_sha;      /* the digest of its user xattrs was recorded (pv_user_xattrs_sha256) */
    unsigned char xattr_sha[32];
    bool has_owner; /* its owner was recorded (a run that saw the host's ids) */
    uint32_t uid, gid;
};

struct lc_entry {
    /* workspace-relative, validated (no "", ".", "..", no leading '/');
     * "." alone: the workspace root's own mode and xattrs (lc_path_is_root) */
    char *path;
    enum lc_kind kind;
    unsigned changes;                /* LC_CH_* */
    unsigned warnings;               /* LC_W_* */
    bool binary;                     /* a regular file added or changed that diff shows as binary */
    enum lc_type old_type, new_type; /* current lower / stage (LC_NONE: absent) */
    uint32_t old_mode, new_mode;     /* & 07777 */
    uint64_t old_size, new_size;
    char *old_target, *new_target; /* symlinks */
    bool old_sha_known;
    unsigned char old_sha[32]; /* of the current lower (reg, lnk) when a preimage exists */
    /* a git index the host's git rewrote since the run, its entries the
     * preimage's (lc_git_index_refreshed): not a conflict; apply takes
     * the current one (old_sha) for the old state */
    bool index_refreshed;
    const struct lc_preimage *pre; /* journal record for this path, or NULL */
    const char *conflict;          /* why apply must refuse this path, or NULL */
    char *renamed_from;            /* review only: lower path this object came from */
    struct timespec new_atime, new_mtime;
    uint64_t upper_ino;
    uint64_t old_ino; /* lower identity when compared (apply re-checks it) */
    struct timespec old_ctime, old_mtime;
    uint64_t old_nlink;
    uint32_t old_uid, old_gid, new_uid, new_gid; /* with LC_CH_OWNER */
    struct timespec new_ctime;                   /* of the upper object when read (lc_changeset_id checks it) */
    /* a git index (path_is_git_index) added or changed whose entries hide
     * files from git that the workspace's did not (skip-worktree,
     * assume-unchanged; LC_W_GIT_HIDES): how many, and the names of the
     * first n_index_hides_names (as git names them: escape to print);
     * index_hides_unread: too large to read, or past what one walk reads
     * of git indexes in all (warned of all the same) */
    size_t index_hides;
#define LC_GIT_INDEX_READ_MAX_MIB 256
#define LC_GIT_INDEX_READ_TOTAL_MIB 1024
    char **index_hides_names;
    size_t n_index_hides_names;
    bool index_hides_unread;
};

struct lc_changeset {
    char *stage_path;
    char *workspace;
    struct lc_entry *entries; /* pre-order: a directory before its children */
    size_t n;
    struct lc_preimage *pre; /* sorted by path */
    size_t n_pre;
    size_t count[4]; /* per lc_kind */
    size_t n_conflicts;
    uint64_t bytes_new; /* bytes of regular files the stage writes */
    uint64_t bytes_old; /* bytes of lower regular files replaced or deleted */
    size_t n_binary;    /* regular files added or changed that diff shows as binary */
    unsigned warnings;  /* union of entry warnings */
    bool keep_owners;   /* read by root: apply gives what it writes the stage's owners (and the ID covers them) */
};

/* An opened stage: its directory, upper/ and the workspace it belongs to
 * (from meta.json).  Opening takes no lock. */
struct lc_stage {
    char *path;
    char *workspace;
    int dir_fd;
    int upper_fd;
    int ws_fd;
    /* set when lc_changeset_load stopped at a bound (-ELOOP: directories
     * nested deeper than LC_MAX_DEPTH; -ENAMETOOLONG: a path longer than
     * LC_MAX_PATH): the workspace-relative directory where it stopped */
    char *stopped_at;
    /* stopped_at is in, or names, workspace objects the command deleted
     * (a whiteout, an opaque or type-changed directory over them): they are
     * not in the stage, so only removing them from the workspace helps */
    bool stopped_deleted;
    /* the 'sealed' marker when the stage was opened (its identity: a run
     * that reopens the stage removes it, and seals with a new one) */
    bool sealed;
    uint64_t seal_ino;
    struct timespec seal_ctime;
    /* lc_stage_changeset_id's record of the ID it gave (STAGE/reviewed):
     * 0, or why it could not be written */
    int review_record_error;
};
int lc_stage_open(const char *path, struct lc_stage **ret_stage);
void lc_stage_free(struct lc_stage *st);

/* Read the stage into a changeset compared against the current lower.
 * Every entry's conflict is computed (content of lower vs the preimage).
 * Errors: -ENAMETOOLONG / -ELOOP (depth) / -E2BIG (entries) for a stage
 * beyond the bounds; -EBADMSG for a malformed journal; -errno otherwise. */
int lc_changeset_load(struct lc_stage *st, struct lc_changeset **ret_cs);
void lc_changeset_free(struct lc_changeset *cs);
/* Index of the entry for path, or SIZE_MAX. */
size_t lc_changeset_find(const struct lc_changeset *cs, const char *path);

/* For the review: entries below the directory git runs the workspace's
 * hooks from when core.hooksPath points into it (outside a .git; husky's
 * '.husky/_' includes the hooks in '.husky/') get LC_W_GIT_HOOK.  Asks
 * git ('git rev-parse --git-path hooks' in the workspace); nothing when
 * git is missing or cannot tell. */
void lc_changeset_mark_hooks_path(struct lc_changeset *cs);
/* Mark the workspace files that the workspace's or the stage's .git/config
 * includes (include.path, includeIf.*.path, and what those include in
 * turn), git_config: git reads them as the repository's config, where
 * core.fsmonitor or core.sshCommand run commands (a project's tracked
 * .gitconfig that its contributors include). */
void lc_changeset_mark_config_includes(struct lc_changeset *cs);

/* For the review: when home (the user's HOME) is or lies in the workspace,
 * the entries of git's global config there (.gitconfig, .config/git/config)
 * get LC_W_GIT_CONFIG: a run whose HOME is there stages its writes to them,
 * and the next git command anywhere reads them; the files a shell, a login
 * or a desktop session runs or reads for the environment (.bashrc,
 * .profile, .zshrc, fish's config, autostart entries, systemd user units,
 * environment.d) get LC_W_HOME_STARTUP, also where a link in HOME
 * leads into the workspace (~/.bashrc -> dotfiles/bashrc). */
void lc_changeset_mark_home_config(struct lc_changeset *cs, const char *home);

/* For the review: each regular file added or whose content changed, text
 * (no NUL in its first LC_BINARY_PROBE bytes) of at most LC_DIFF_MAX
 * bytes, whose new content holds more characters a terminal acts on or
 * shows as nothing or as another (lc_text_char_hidden) than its old one
 * gets LC_W_INVISIBLE_TEXT.  Reads the files beneath st's fds; one that
 * cannot be read is left unwarned. */
void lc_changeset_mark_text(struct lc_changeset *cs, const struct lc_stage *st);

/* Is the character at p (n bytes left, l its length by term_char) one
 * that lc_changeset_mark_text counts: a control byte but tab, newline,
 * form feed and a carriage return before a newline (a line end of CRLF
 * text); DEL; a C1 control; a bidirectional control; a zero-width,
 * invisible or blank character (term_char's unsafe ones).  A byte that
 * is not UTF-8 (Latin-1 text) is not. */
bool lc_text_char_hidden(const unsigned char *p, size_t n, size_t l, bool unsafe);

/* A name with every character that is not printable ASCII written as a
 * code point, \u{e9}, a byte that is not UTF-8 and a control byte as \xNN,
 * and '\' as \x5c: two names that a terminal shows alike (an accented
 * letter composed or decomposed, a Cyrillic letter for a Latin one) read
 * differently (malloc'd; NULL without memory). */
char *lc_name_codepoints(const char *s);

/* The changeset's ID (docs/lifecycle.md, "The changeset ID"): the first
 * LC_CHANGESET_ID_LEN hex digits of a SHA-256 over every entry in order
 * (path, kind, workspace type, the preimage apply checks, and the new
 * object: type, mode, owner and group when cs->keep_owners, a symlink's target,
 * the content and user xattrs of a regular file, the user xattrs of a
 * directory) and the workspace.  Times, warnings and renames are not in
 * it.  The content and xattrs are read here from upper_fd (the stage's
 * upper/, the one cs was read from), each object checked to be the one
 * the walk saw (inode, type, size, ctime) before and after it is read:
 * -ESTALE when one changed since, so the ID never covers bytes other than
 * those of the objects the changeset describes.  -EACCES an unreadable
 * file; other -errno from the file system. */
#define LC_CHANGESET_ID_LEN 32        /* hex digits: 128 bits, collisions out of reach */
#define LC_CHANGESET_ID_LEN_TEXT "32" /* the same, for messages */
_Static_assert(LC_CHANGESET_ID_LEN == 32, "LC_CHANGESET_ID_LEN_TEXT must say LC_CHANGESET_ID_LEN");
int lc_changeset_id(const struct lc_changeset *cs, int upper_fd, char ret_id[LC_CHANGESET_ID_LEN + 1]);
/* The ID of cs, read from st, as review and diff show it: only of a stage
 * that was sealed when st was opened (-ENOMEDIUM: it was not) and still
 * is, by the same seal (-ESTALE: a run reopened it, or a restore replaced
 * its content, since: the changeset may mix two states).  Called only to
 * show the ID: it is recorded as the stage's last reviewed (STAGE/reviewed,
 * "unknown" on -ESTALE), which a plain apply must find the stage's
 * (docs/lifecycle.md, "The changeset ID"); st->review_record_error says
 * when that record could not be written. */
int lc_stage_changeset_id(struct lc_stage *st, const struct lc_changeset *cs, char ret_id[LC_CHANGESET_ID_LEN + 1]);
/* Is s an ID as lc_changeset_id writes it (LC_CHANGESET_ID_LEN hex
 * digits; upper case is taken, and lowered in place)? */
bool lc_changeset_id_valid(char *s);

/* The changeset (and the warnings) as the documented JSON object. */
json_t *lc_changeset_to_json(const struct lc_changeset *cs);

/* Resolve a user's target (docs/lifecycle.md): stage_dir when given; else
 * run (an id, prefix or "latest") or, when NULL, the newest run that has a
 * stage and whose workspace holds the current directory, or else the
 * newest run that has a stage.  Returns the stage path and the run's Bundle (NULL for a stage
 * given by path or a run without a readable one).
 * A run with no Bundle yet whose supervisor lives (runstore.h
 * runs_starting) is passed over when pass_over_starting.
 * Errors: -ENOENT nothing matches; -ENOTUNIQ ambiguous; -ENOMEDIUM the run
 * has no stage (a run named: *ret_bundle is then its Bundle); -EINVAL
 * stage_dir is not a stage (not a directory, no 'version' in it), another
 * errno what kept it from being read (EIO, EACCES); -ENODATA the run named,
 * or (run and stage_dir NULL) a run newer than any staged one, has no
 * readable Bundle, -EINPROGRESS the same of a run still starting:
 * *ret_run_id is then set to its id (owned by the caller). */
int lc_resolve_target(const char *run, const char *stage_dir, bool pass_over_starting, char **ret_stage_path,
                      char **ret_run_id, json_t **ret_bundle);

/* The newest run newer than run_id, of workspace (or none recorded), whose
 * command never ran on a stage of its own (passed over by
 * lc_resolve_target without a RUN): {"run", "state"}, or NULL. */
json_t *lc_newer_never_ran(const char *run_id, const char *workspace);

/* The runs whose Bundles name the stage at path stage, oldest first (its
 * meta.json's list, less the runs whose Bundle is gone or names another
 * directory: a forked stage's): an array of {"run": ID, "bundle": {...}};
 * empty when there is none, NULL only without memory. */
json_t *lc_stage_runs(const char *stage);

/* The other stages of workspace (as the Bundles name it) than stage that
 * are sealed or interrupted (neither applied nor dropped), newest first:
 * an array of {"run", "stage", "state"} (the newest run of each). */
json_t *lc_other_open_stages(const char *workspace, const char *stage);

/* ---- apply (apply.c) ---- */

struct lc_apply_opts {
    const char *const *paths; /* NULL-terminated subset (workspace-relative), or NULL for all */
    bool dry_run;
    bool keep_special_modes; /* keep setuid/setgid (dropped by default) */
    /* progress callback (may be NULL): done/total operations */
    void (*progress)(size_t done, size_t total, void *userdata);
    /* each planned operation ("write", "mkdir", "delete", "chmod", "symlink",
     * "mkfifo"), in order; called for dry runs too (may be NULL) */
    void (*on_op)(const char *action, const char *path, void *userdata);
    void *userdata;
    /* an ID (lc_changeset_id) the changeset must have: any other, and
     * apply refuses (-EKEYREJECTED) before it writes anything; NULL: none */
    const char *expect_id;
    unsigned test_delay_us; /* tests only: pause after each workspace operation */
    bool test_named_temps;  /* tests only: named temp files instead of O_TMPFILE */
};

struct lc_apply_report {
    bool resumed; /* an interrupted apply was completed */
    size_t n_conflicts;
    char **conflict_paths;     /* n_conflicts paths ... */
    const char **conflict_why; /* ... and why (static strings) */
    size_t n_written, n_deleted, n_dirs;
    uint64_t bytes_written;
    size_t n_setid_dropped;
    size_t n_skipped_special;
    char *failed_path; /* the path an operation failed on (errors other than conflicts) */
    /* -ELOOP / -ENAMETOOLONG: the stage could not be read, failed_path is
     * where a bound stopped it (lc_stage.stopped_at); nothing was written */
    bool beyond_bounds;
    bool beyond_bounds_deleted; /* lc_stage.stopped_deleted */
    /* -ENOSPC before anything was written: the bytes the plan's files take
     * and what the workspace's file system has available */
    uint64_t room_need, room_avail;
    /* the changeset's ID when apply computed it (o->expect_id, or the
     * stage's review record), else "" */
    char changeset_id[LC_CHANGESET_ID_LEN + 1];
    /* without o->expect_id: the stage has a review record (STAGE/reviewed),
     * the ID the last review showed ("" none: it could not tell one, or the
     * record is unreadable), and whether it was run by another kind of user
     * (root and not root: IDs over owners, or not) */
    bool reviewed;
#define LC_REVIEWED_NAME "reviewed" /* STAGE/reviewed, for messages */
    char reviewed_id[LC_CHANGESET_ID_LEN + 1];
    bool reviewed_other_user;
};
void lc_apply_report_clear(struct lc_apply_report *r);

/* Apply the stage at stage_path to its workspace.  Takes the stage lock
 * (refuses -EBUSY when held), requires 'sealed' (-ESTALE when the stage is
 * interrupted, -EALREADY when applied or dropped), resumes an interrupted
 * apply first.  On conflicts returns -EEXIST with the report filled and
 * nothing written; -ENOSPC with room_need/room_avail set and nothing
 * written when the files would not fit in the workspace's file system.  -ENOENT: a --path matched nothing.
 * With o->expect_id: -EKEYREJECTED when the changeset's ID is another
 * (rep->changeset_id says which; also with o->paths, the ID is the whole
 * changeset's), or when a file of the stage changed while it was read
 * (rep->changeset_id ""); -EINPROGRESS when an interrupted apply is pending (its
 * intent, not the changeset, decides what the resume writes, and no ID
 * vouches for it); nothing written either way.  Without o->expect_id, a
 * stage whose ID a review or diff showed (lc_stage_changeset_id's record)
 * must still have the last one shown: -EKEYREVOKED when it has another
 * (rep->reviewed_id and rep->changeset_id say which), when that review could
 * not tell one, or its record is unreadable (rep->reviewed_id ""), or it was
 * run by another kind of user (rep->reviewed_other_user), and when a file
 * changed while it was read (rep->changeset_id ""); a resume is not
 * checked (the apply it completes was). */
int lc_apply(const char *stage_path, const struct lc_apply_opts *o, struct lc_apply_report *ret_report);

/* True when the stage holds an unfinished apply's intent journal. */
bool lc_apply_pending(const char *stage_path);

/* ---- drop ---- */

/* Mark the stage dropped (durable marker) and remove upper/, work/, the
 * journal, origin map and checkpoints; version, meta.json, lock and the
 * marker stay so the state remains visible.  -EBUSY while a run holds it;
 * -EINPROGRESS when an interrupted apply is pending (the workspace holds
 * part of the stage) unless force, which also removes apply's temp files.
 * An applied stage keeps its markers and loses the rest (its copy of what
 * apply wrote, its checkpoints): 1. */
int lc_drop(const char *stage_path, bool force);

/* ---- checkpoints (checkpoint.c) ---- */

/* Copy upper/, journal, origin map and meta.json of a sealed stage into
 * STAGE/checkpoints/NAME (NAME: [A-Za-z0-9._-]{1,64}, not starting with
 * '.' or '-'; NULL: "cp-<UTC time>").  -EBUSY running, -ESTALE not sealed,
 * -EEXIST name taken, -EINVAL bad name, -EALREADY applied/dropped,
 * -EINPROGRESS an interrupted apply must be finished first. */
int lc_checkpoint(const char *stage_path, const char *name, char **ret_name);
/* "cp-<UTC time to the millisecond>", the name of a checkpoint not named */
void lc_checkpoint_default_name(char buf[static 64]);
/* Is name a valid checkpoint name ([A-Za-z0-9._-]{1,64}, not starting with
 * '.' or '-'; so never "/", "." or "..")? */
bool lc_checkpoint_name_valid(const char *name);

/* A live checkpoint, in three steps (the run's agent socket).  The caller
 * holds the stage lock (the run does) and passes the stage directory.
 *  begin:  validate the name, create checkpoints/.tmp-NAME (-EINVAL bad
 *          name, -EEXIST taken);
 *  copy:   copy upper/, journal, origin, meta.json and version into it; the
 *          caller guarantees that nothing changes the stage meanwhile (the
 *          overlay is quiesced).  sync=false leaves durability to commit;
 *          max_write (0: none): -ENOSPC rather than write more file data
 *          than this (clones and holes cost nothing); cancel (NULL: none):
 *          -ECANCELED soon after *cancel becomes true;
 *  commit: syncfs, checkpoint.json (with "live":true and "run" when run_id
 *          is given), publish by rename, fsync the directories.  The stage
 *          may change again before it.
 * tx_free removes the temp directory unless the checkpoint was committed. */
struct lc_checkpoint_tx;
int lc_checkpoint_begin(int stage_dir_fd, const char *name, struct lc_checkpoint_tx **ret_tx);
int lc_checkpoint_copy(struct lc_checkpoint_tx *tx, bool sync, uint64_t max_write, const atomic_bool *cancel);
int lc_checkpoint_commit(struct lc_checkpoint_tx *tx, const char *run_id, uint64_t *ret_bytes);
void lc_checkpoint_tx_free(struct lc_checkpoint_tx *tx);

/* Replace the stage's content by checkpoint NAME (the stage may be sealed
 * or interrupted, not running); the result is sealed.  -ENOENT no such
 * committed checkpoint; other errors as lc_checkpoint. */
int lc_restore(const char *stage_path, const char *name);
/* A restore of the stage was cut short after it left 'sealed' (the stage
 * reads 'interrupted', its upper/ may be missing): true, and *ret_name the
 * checkpoint it was restoring (NULL when unknown: an older pvisor's), to
 * be freed.  Running that restore again completes it. */
bool lc_restore_interrupted(const char *stage_path, char **ret_name);
/* A new sealed stage at new_stage (absent or empty directory) from
 * checkpoint (or, when NULL, the sealed stage itself).  -ENOTEMPTY. */
int lc_fork(const char *stage_path, const char *checkpoint, const char *new_stage);
/* Names of the stage's checkpoints, oldest first (JSON array of objects
 * {name, created, bytes, copy}). */
json_t *lc_checkpoints_json(const char *stage_path);
/* The user xattrs apply writes on entry e's object, as apply writes them,
 * that the workspace object does not have as they are, and those apply
 * removes from it (a modified object; a new one's, from a type change
 * too, are all it has): a JSON array of {"name", "old", "new"} by name, a
 * value null where absent, and given in hex as "old_hex"/"new_hex" (a
 * name as "name_hex") when it is not UTF-8 without NUL.  Empty for an
 * object without any; NULL on error, -errno in *ret_err.  Review lists
 * only that they differ, and a new file's not at all. */
json_t *lc_entry_xattrs_json(const struct lc_stage *st, const struct lc_entry *e, int *ret_err);
/* One element of lc_entry_xattrs_json for a terminal: "xattr NAME: OLD ->
 * NEW", each value "none", quoted or in hex, with its size, escaped
 * (lc_display_name) and a long one cut (malloc'd). */
char *lc_xattr_change_text(const json_t *x);

/* ---- shared file helpers (fsutil.c), used by the CLI verbs ---- */

/* openat2(dirfd, path, flags, RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS|RESOLVE_NO_MAGICLINKS) | O_CLOEXEC. */
int lc_open_beneath(int dirfd, const char *path, int flags, mode_t mode);
/* Open the parent directory of a relative path beneath dirfd; *ret_name
 * points into path (the last component).  Of "." (the root entry): dirfd
 * itself, and ".", which names it there. */
int lc_open_parent(int dirfd, const char *path, const char **ret_name);
/* Is path a clean relative path (no "", ".", ".." components, no leading
 * or doubled '/', bounded)? */
bool lc_path_valid(const char *path);
/* Is path ".", the name of the entry of the workspace root's own mode and
 * user xattrs (which lc_path_valid refuses: allowed only for that entry,
 * a directory that stays one)? */
bool lc_path_is_root(const char *path);
int lc_sha256_fd(int fd, unsigned char ret_sha[32]);
/* A name made safe for a terminal: control bytes and '\\' as \\xNN, and
 * every space as \\x20 in a name with one at its start or end or two in
 * a row (which a listing's columns and annotations cannot tell from
 * another name: "b " for "b", "x  -> y" for a link) (malloc'd). */
char *lc_display_name(const char *s);
/* Strict UTF-8: what jansson accepts (no overlong forms, surrogates or
 * code points past U+10FFFF); names that are not are written as KEY_hex. */
bool lc_utf8_valid(const char *s);
void lc_hex(const unsigned char *sha, char ret_hex[65]);

#endif
