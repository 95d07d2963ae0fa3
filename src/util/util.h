/* util.h: small helpers shared by every module (paths, time, numbers, fds).
 *
 * Library code: returns negative errno, never prints, never exits.
 */
#ifndef PVISOR_UTIL_UTIL_H
#define PVISOR_UTIL_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdint.h>
#include <dirent.h>
#include <sys/types.h>

/* Join a and b with one '/', malloc'd. NULL on ENOMEM. */
char *path_join(const char *a, const char *b);
/* Where execvp would find cmd on this process's PATH: cmd itself when it
 * holds a '/' (relative ones joined to cwd), else the first PATH entry
 * (absolute ones only) where it is executable.  malloc'd; NULL when not
 * found or out of memory. */
char *find_in_path(const char *cmd, const char *cwd);

/* printf into a malloc'd string; NULL on ENOMEM. */
char *str_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *str_vprintf(const char *fmt, va_list ap) __attribute__((format(printf, 1, 0)));
/* A usage error: the message, malloc'd, into *ret_error; -EINVAL (-ENOMEM
 * when it could not be made, *ret_error NULL). */
int usage_error(char **ret_error, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Is path equal to dir or below it (component-wise, no resolution)?
 * dir "/" contains every absolute path. */
bool path_within(const char *path, const char *dir);
/* A field [s, s+len) of /proc/self/mountinfo into ret, its octal escapes
 * (\040 for a space) decoded; -ENAMETOOLONG when it does not fit in size. */
int mountinfo_unescape(const char *s, size_t len, char *ret, size_t size);
/* Does one of a and b hold the other (or are they equal)? */
bool path_overlaps(const char *a, const char *b);
/* Is relpath (workspace-relative) a git index: a file "index" in a .git
 * directory or one below it (.git/index, a submodule's
 * .git/modules/M/index, a worktree's .git/worktrees/W/index)? */
bool path_is_git_index(const char *relpath);

/* realpath(path, NULL), the same result and errno, but between
 * realpath_memo_begin() and realpath_memo_end() each directory or file
 * already found to exist and not to be a symlink is not read again (a run's
 * planning resolves some hundred paths below the same few: HOME's
 * credential locations, a toolchain's, each system call a few microseconds
 * on a paravirtualised VM).  A path changed meanwhile is seen as realpath
 * would have seen it at that fact's time: use it for one pass only, single
 * threaded (the planning, before any thread starts). */
void realpath_memo_begin(void);
/* From here to realpath_memo_end, also paths found not to exist are
 * remembered (nothing below them is read again), and a directory below
 * which several names are looked up is listed once (one getdents): a name
 * it does not hold is absent without a system call.  Only for a pass that
 * makes nothing in the directories it resolves paths in (a listing or an
 * absence would be stale): HOME's credential locations. */
void realpath_memo_list_dirs(void);
/* After realpath_memo_list_dirs: is path (whose parent is a path
 * realpath_memo returned) known not to exist, without a system call?
 * false when not known either way. */
bool realpath_memo_absent(const char *path);
void realpath_memo_end(void);
char *realpath_memo(const char *path);

/* The absolute path of path, which need not exist: its parent directory
 * resolved (it must exist: -errno otherwise), its last component as given
 * (-EINVAL for "", "." or "..").  malloc'd. */
int path_abs_parent(const char *path, char **ret_path);
/* Split path (modified: trailing slashes and its last '/' cut) into its
 * parent ("/" or "." when it has none) and last component; -EINVAL when
 * that is "", "." or "..".  Both point into path (or are literals). */
int path_split_last(char *path, const char **ret_parent, const char **ret_base);

/* The absolute path path (absolute) leads to, symlinks resolved, whether
 * or not it exists yet: when it does not, its deepest existing ancestor
 * resolved and the rest as named.  1 and *ret (malloc'd); 0 when that
 * cannot be told (a relative path, or "." or ".." in the missing part);
 * -ENOMEM. */
int path_resolve(const char *path, char **ret);

/* mkdir -p with mode for each missing component (absolute path only). */
int mkdir_p(const char *path, mode_t mode);

/* The pvisor state directory: $XDG_STATE_HOME/pvisor or ~/.local/state/pvisor.
 * Relative XDG_STATE_HOME is ignored, as the XDG spec requires. */
int state_dir(char **ret_path);

/* Is a directory above path (absolute; symlinks resolved, its missing
 * part not looked at) another user's than ours or root's, or may others
 * write in it without the sticky bit?  1 and the first such directory in
 * *ret_bad (malloc'd; when ret_bad is not NULL), 0 when none, -ENOMEM.
 * Whoever may could move path away and put their own in its place. */
int path_parent_unsafe(const char *path, char **ret_bad);

/* The runs directory under state_dir(), created when create is true.
 * -EPERM: the state directory, the runs directory or a directory above
 * them (path_parent_unsafe) is another user's, or others may write in it. */
int runs_dir(bool create, char **ret_path);

/* New run id, sortable by start time: 20261129T093000.123Z-1a2b3c4d. */
int make_run_id(char ret_id[static 32]);
/* ts as a compact UTC stamp, "YYYYMMDDTHHMMSS.mmmZ" (run ids, checkpoint names). */
void format_stamp_utc(const struct timespec *ts, char ret_buf[static 24]);

/* RFC 3339 UTC time with milliseconds ("2026-11-29T09:30:00.123Z"). */
void format_time_utc(const struct timespec *ts, char ret_buf[static 32]);

/* Parse an unsigned decimal with an optional K/M/G/T suffix (binary units)
 * within [min, max]; -EINVAL on junk, -ERANGE outside. */
int parse_size(const char *s, uint64_t min, uint64_t max, uint64_t *ret_value);

/* Write data to dirfd/name atomically: temp file in the same directory,
 * fsync, rename over name, fsync the directory. */
int write_file_atomic(int dirfd, const char *name, const void *data, size_t len, mode_t mode);
/* The same, as durable as asked: not at all (a crash may leave the new
 * name with partial content, or the old name, or the temp file), its bytes
 * before its name, or its name too.  The temp file is
 * ".NAME.XXXXXXXX.tmp". */
enum write_sync { WRITE_NO_SYNC, WRITE_SYNC_FILE, WRITE_SYNC_FILE_AND_DIR };
int write_file_atomic_as(int dirfd, const char *name, const void *data, size_t len, mode_t mode, enum write_sync sync);

/* Read a whole (small, < limit) regular file relative to dirfd into a
 * NUL-terminated malloc'd buffer, without following a final symlink; any
 * other type is -EINVAL, without waiting (a FIFO). */
int read_file_at(int dirfd, const char *name, size_t limit, char **ret_buf, size_t *ret_len);

/* Open the directory name (relative to dir_fd; "." for dir_fd itself) for
 * reading, without following a final symlink, as a DIR stream.  On
 * failure nothing is left open. */
int opendir_at(int dir_fd, const char *name, DIR **ret_dir);

/* A DIR stream over a duplicate of dir_fd (dir_fd stays the caller's),
 * rewound to the start (a dup shares the directory offset). */
int dup_opendir(int dir_fd, DIR **ret_dir);

/* Remove everything below dir_fd (not dir_fd itself) without following a
 * symlink; entries that vanish meanwhile are fine; a directory its owner
 * cannot read, enter or write is made 0700 first (the caller owns the
 * tree); any depth, with one directory open at a time; nesting deeper
 * than max_depth is -ELOOP; a file system mounted inside is -EXDEV (its
 * contents are left alone). */
int remove_tree_contents(int dir_fd, unsigned max_depth);

/* chmod of dirfd/name, never through a symlink there (-EOPNOTSUPP for
 * one); works without /proc. */
int chmod_nofollow_at(int dirfd, const char *name, mode_t mode);

/* chmod of the object fd names (an O_PATH descriptor too, of a fifo or a
 * socket, which fchmod(2) refuses): fchmodat2(AT_EMPTY_PATH), else through
 * /proc/self/fd.  Never a path lookup, so never another object: a caller
 * that made a name in a directory someone else may write opens it with
 * O_PATH|O_NOFOLLOW, checks it, and changes it through that descriptor. */
int chmod_fd(int fd, mode_t mode);

/* The length of the character at p (n > 0 bytes left), and whether a
 * terminal acts on it or shows nothing for it: C0 controls, DEL, the C1
 * controls (U+0080-U+009F, CSI among them), bidirectional marks,
 * embeddings, overrides and isolates, zero-width and invisible characters,
 * line and paragraph separators, a byte that is not UTF-8 (1). */
size_t term_char(const unsigned char *p, size_t n, bool *ret_unsafe);
/* A copy of s for a terminal: each byte of such a character, and '\',
 * as \xNN (malloc'd; NULL when out of memory). */
char *term_escape(const char *s);

/* s's bytes as lowercase hex (malloc'd; NULL when out of memory): how a
 * name or argument that is not UTF-8, which JSON cannot carry, is recorded
 * (as KEY_hex). */
char *hex_encode(const char *s);
/* The bytes that hex (even length, hex digits) spells, NUL-terminated,
 * malloc'd: -EINVAL for anything else, or for a NUL byte among them. */
int hex_decode(const char *hex, char **ret);

/* Remove dir_fd/name and, if it is a directory, everything below it. */
int remove_tree_at(int dir_fd, const char *name, unsigned max_depth);

/* readdir(3) without the "." and ".." entries.  NULL at the end with errno
 * 0, or on an error with errno set: a caller that must see every entry
 * (to cover it) tells the two apart. */
struct dirent *readdir_no_dots(DIR *d);

/* Wrap an open directory descriptor in a DIR stream, taking ownership of
 * fd (closed on failure too). */
int fd_opendir(int fd, DIR **ret_dir);

/* CLOCK_MONOTONIC in milliseconds. */
int64_t monotonic_ms(void);

/* write(2) all of buf, retrying short writes and EINTR. */
int write_all(int fd, const void *buf, size_t len);
/* write(2) the one byte c to a pipe whose reader may be gone: -EPIPE then,
 * without the SIGPIPE that would kill the caller (blocked in this thread
 * for the write, and a pending one taken back).  0, or -errno. */
int write_byte_no_sigpipe(int fd, char c);
/* Write text to dirfd/path (AT_FDCWD: a path) in one write(2), as /proc's
 * id maps and setgroups need: 0, or -errno (-EIO for a short write). */
int write_string_at(int dirfd, const char *path, const char *text);

/* A new user namespace (a child of ours) with these maps, written by us
 * (setgroups denied first when deny_setgroups): its descriptor, or -errno.
 * Made by a child cloned into it (CLONE_VM: no copy of our page tables;
 * the namespace exists when clone returns, so nothing waits for the child
 * to run), killed and reaped before this returns. */
int userns_with_maps(const char *uid_map, const char *gid_map, bool deny_setgroups);

/* unshare(CLONE_NEWUSER | flags), then map inner_uid/inner_gid to the
 * caller's uid and gid (setgroups denied, as an unprivileged map needs);
 * root mapping 0 to 0 maps every id to itself (but -1): that namespace is
 * made with its maps (userns_with_maps) and entered, then flags unshared.
 * The process has every capability in the new namespace, DAC override
 * included over files its own ids own.  *ret_step names the step that
 * failed.  Single-threaded callers only. */
int userns_enter(int flags, uid_t inner_uid, gid_t inner_gid, const char **ret_step);
/* Are we in the initial user namespace?  Uid 0 elsewhere (the verbs'
 * second try, lc_cli_own_files_override) has capabilities only over files
 * whose owner and group it maps, not root's override over every file. */
bool userns_is_initial(void);
/* Does this user namespace show every uid as the host does (the initial
 * one, or one that maps 0..4294967293 to themselves, as a run as root
 * has)?  False when it cannot be told. */
bool userns_ids_are_host(void);

/* A sysctl (path under /proc/sys) as a long; -1 when absent, unreadable
 * or not a number. */
long sysctl_long(const char *path);

/* The namespaces a sandbox makes besides the user namespace (mount, PID,
 * network, IPC, UTS, in that order): the clone flag and its name, the <x> of its
 * count limit user.max_<x>_namespaces, its name in messages, and the kernel
 * option it needs (NULL: always built). */
struct ns_kind {
    int clone_flag;
    const char *flag, *sysctl, *what, *config;
};
#define NS_KINDS 5
extern const struct ns_kind ns_kinds[NS_KINDS];

/* What to do about a namespace the kernel refused with ENOSPC at step (a
 * step naming "CLONE_NEWNS", "CLONE_NEWPID", "CLONE_NEWNET",
 * "CLONE_NEWIPC" or "CLONE_NEWUTS"): its count limit, the sysctl
 * user.max_<x>_namespaces, was reached, here or in a user namespace above
 * this one.  Also for a step that makes or clones a mount ("mount",
 * "open_tree", "covering", "tmpfs" in it): each detached mount is an
 * anonymous mount namespace, counted by the same limit.  Written into
 * buf; NULL for another error or step (the user namespace's own limit is
 * the caller's: its remedy differs by user). */
const char *ns_limit_remedy(const char *step, int err, char *buf, size_t size);

/* Is pid (in our /proc) gone or going already: exited (a zombie), exiting
 * (PF_EXITING), or with a SIGKILL pending (a kill on its way; the kernel
 * adds one to every thread of a process a fatal signal ends, a SIGHUP of
 * its terminal's hangup too)? */
bool pid_dying(pid_t pid);

/* Of pids[0..n), found alive (not pid_dying) once, those still alive: a
 * process a fatal signal is ending shows neither the SIGKILL pending nor
 * PF_EXITING between taking the signal and starting its exit, a moment a
 * loaded machine can preempt it in; they are looked at again 2, 4 and 8 ms
 * later (only while some are alive: none waits for nothing).  Kept in
 * order at the front; returns how many. */
size_t pids_still_alive(pid_t *pids, size_t n);

/* read(2) until len bytes or EOF, retrying EINTR; *ret_got is how many. */
int read_full(int fd, void *buf, size_t len, size_t *ret_got);

/* Move fd to a descriptor >= 3 if it is 0..2 (so dup2 of stdio cannot clobber it). */
int fd_move_above_stdio(int fd);

/* Close every descriptor >= lowfd except those listed. */
int close_all_fds_except(int lowfd, const int *keep, size_t n_keep);

/* A child started as posix_spawn starts one, sharing its parent's memory
 * until its exec (clone(CLONE_VM | CLONE_VFORK) on a stack of its own):
 * AddressSanitizer cannot follow such a child (it warns at the child's
 * first noreturn call, and its checks there are not to be trusted), so
 * its builds fork instead. */
#if defined(__SANITIZE_ADDRESS__)
#define PV_SPAWN_WITH_FORK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PV_SPAWN_WITH_FORK 1
#endif
#endif
#ifndef PV_SPAWN_WITH_FORK
#define PV_SPAWN_WITH_FORK 0
#endif

/* bench/startup-marks.sh: "MARK <CLOCK_MONOTONIC in us> <name>" on stderr
 * at each step of a run's start and end, in a build configured with
 * -Dstartup_marks=true; nothing at all in any other build. */
#ifdef PVISOR_STARTUP_MARKS
void pv_mark(const char *name);
#define PV_MARK(name) pv_mark(name)
#else
#define PV_MARK(name) ((void)0)
#endif

#endif
