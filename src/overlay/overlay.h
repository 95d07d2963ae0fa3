/* overlay.h: WorkspaceOverlay, the FUSE copy-on-write view of the workspace.
 *
 * The server runs inside the (trusted) supervisor, never inside the agent's
 * sandbox.  It merges the real workspace (lower, read-only to us) with the
 * stage's upper/ directory (kernel-overlayfs "userxattr" layout) and serves
 * the result on a FUSE mount placed over the workspace's own path in the
 * caller's private mount namespace.  Every write lands in the stage.
 *
 * Trust: everything the agent sends (names, sizes, offsets, xattr names) is
 * untrusted.  All access to lower and upper is fd-relative and never follows
 * a symlink (single-component *at() calls with O_NOFOLLOW, or openat2 with
 * RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS for lower paths).
 *
 * Errors are negative errno; nothing here prints (set PVISOR_OVERLAY_DEBUG=1
 * to get libfuse's request trace on stderr).
 */
#ifndef PVISOR_OVERLAY_OVERLAY_H
#define PVISOR_OVERLAY_OVERLAY_H

#include <stdint.h>

#include "stage/stage.h"

struct overlay_params {
    int lower_fd;           /* O_DIRECTORY fd of the workspace, opened BEFORE mounting over it; borrowed */
    struct stage *stage;    /* upper/, work/, journal, origin map; borrowed, must outlive the overlay */
    const char *mountpoint; /* absolute path to mount on (normally the workspace path itself) */
    uint64_t max_bytes;     /* 0 = unlimited; bytes allocated in upper -> ENOSPC */
    uint64_t max_inodes;    /* 0 = unlimited; inodes in upper -> EDQUOT */
    unsigned n_threads;     /* most worker threads (started as needed); 0 = default (4) */
    /* Relative lower paths (normalised, no "." or "..") that are never part
     * of the view, nor anything below them, whatever the host puts there
     * during the run: lookups, listings, copy-ups and renames of their
     * parents skip them.  The command may create its own object at such a
     * path (it lives in the upper only and never merges with the lower).
     * Paths are matched as the view names them: a masked path reached
     * through a symlinked parent (a different path) is not masked. */
    const char *const *mask;
    size_t n_mask;
    /* Masked as above, and sealed: the command cannot create anything at
     * or below them either (-EACCES), e.g. --access deny: paths. */
    const char *const *sealed;
    size_t n_sealed;
    /* Another tree's masked locations (HOME's, for the workspace's view),
     * relative to link_fd (opened before the run's mount namespace; read
     * by overlay_start alone, none of the three kept): a regular file there, or one inside a directory there,
     * is hidden from this view under any other name it has (a hard link
     * of ~/.ssh/id_rsa in the workspace).  n_link_mask 0: none. */
    int link_fd;
    const char *const *link_mask;
    size_t n_link_mask;
    /* A mask (of mask or link_mask, by the same string) not looked
     * through for such files: pvisor's state directory in HOME, whose
     * runs and stages hold what agents wrote, not credentials, and may be
     * many (past the walk's bound every file with other names is hidden).
     * NULL: none. */
    const char *no_walk;
    /* The clients are in a user namespace that maps only our uid and gid
     * (--filesystem sandbox): our own objects whose group is another (a
     * supplementary group, a setgid directory's) are shown with our gid.
     * Unmapped there, that group would make the kernel refuse every write
     * (EACCES) and removal (EOVERFLOW) of the user's own files; for an
     * object we own the owner's bits decide, whatever its group, so
     * nothing the command may do changes. */
    bool own_group;
    /* Lower directories that are pvisor stages (they hold a regular file
     * "version" that starts "pvisor-stage ") are not part of the view,
     * whenever they became one: another run's stage made in HOME while
     * this run goes on (--stage ~/st, a fork) held that run's staged
     * files.  Checked at each lookup and listing (the kernel looks names
     * up again after lower_cache_ms).  For the sandbox's views. */
    bool hide_stages;
    int lower_cache_ms; /* how long the kernel may cache attributes and names of objects
                               still backed by the lower (host edits show up after at most
                               this long): 0 = default (1000), -1 = never (slow: every stat
                               is a round trip) */
};

struct overlay;

/* Mount FUSE on p->mountpoint in the caller's current mount namespace (the
 * caller has unshare()d a private one and made / MS_REC|MS_SLAVE) and start
 * the worker threads; returns once the mount is live.  No fusermount: the
 * server opens /dev/fuse and calls mount(2) itself with
 * default_permissions,allow_other (allow_other is confined by the kernel to
 * the mounting user namespace and its descendants).  The caller must not
 * fork without exec afterwards. */
int overlay_start(const struct overlay_params *p, struct overlay **ret_ov);

/* Lazily unmount, stop and join the threads, release everything.  Files the
 * agent still holds open afterwards fail with ENOTCONN.  NULL is fine. */
int overlay_stop(struct overlay *ov);

/* Bring the server to a quiescent point: wait until no operation that
 * changes the stage (upper/, journal, origin map) is in flight, and hold
 * every new one back until overlay_resume.  Reads of open files go on;
 * lookups and other namespace reads wait.  While quiesced, upper/ and the
 * stage files are a consistent state of the merged view (what every
 * completed write(2) left; as with any snapshot of a live file system, a
 * write the kernel split into several requests may be cut between them,
 * and dirty pages of a shared mmap not yet written back are not there).
 * The caller must not touch the mount itself in between (it would wait on
 * itself); it works on the stage through its own descriptors. */
void overlay_quiesce(struct overlay *ov);
void overlay_resume(struct overlay *ov);

struct overlay_stats {
    uint64_t copy_ups;       /* objects copied up from the lower this run */
    uint64_t whiteouts;      /* whiteouts created this run */
    uint64_t quota_refusals; /* operations refused by the stage quota or the file system's reserve */
    uint64_t dir_listings;   /* directory listings read from the layers (not a kept one reused) */
    uint64_t upper_bytes;    /* bytes allocated in upper (tracked) */
    uint64_t upper_inodes;   /* inodes in upper (tracked) */
    bool mutated;            /* false: nothing of the stage can have changed this run */
    int links_unknown;       /* -errno: the masked directories could not be looked through for hard links
                              * (-E2BIG: too many entries), and every file with other names was hidden; 0 */
};
void overlay_get_stats(struct overlay *ov, struct overlay_stats *ret_stats);
/* As overlay_stop; *ret_stats (if not NULL) gets the statistics once every
 * handle is closed: a file the command removed while open gives its blocks
 * back at its last release, and the kernel's releases still queued when
 * the command's last process exits are never served (those handles are
 * closed here).  Unchanged if ov is NULL. */
int overlay_stop_stats(struct overlay *ov, struct overlay_stats *ret_stats);

/* Bytes the command may still write before the stage's file system reaches
 * the reserve the overlay keeps free (2%, at most 128 MiB), and that
 * reserve.  Returns -errno if the file system cannot be asked. */
int overlay_room(struct overlay *ov, uint64_t *ret_room, uint64_t *ret_reserve);

#endif
