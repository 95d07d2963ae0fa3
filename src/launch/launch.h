/* launch.h: the hidden launcher, `pvisor __launch`.
 *
 * The supervisor re-executes its own binary as the launcher so that the
 * launcher starts single-threaded, with nothing inherited but what the
 * supervisor chose: fd 0-2 (the command's stdio), LAUNCH_PLAN_FD (the JSON
 * launch plan, read once) and LAUNCH_SYNC_FD (write end of the report pipe).
 *
 * Protocol on LAUNCH_SYNC_FD: one JSON object and a newline.
 * {"ok":false,"step":"...","errno":N,"message":"..."} means setup failed and
 * the command never ran (launcher exits 125).  {"ok":true,"evidence":{...}}
 * means every control is installed; the command then waits for one byte on
 * LAUNCH_GO_FD (read end of a pipe, from the supervisor): 'g' execs it,
 * anything else or EOF makes it exit 125 without running (this is how
 * --strict refuses after seeing the evidence, before any command code
 * runs).  If exec itself fails, a second object {"ok":false,"step":"exec"}
 * follows.  EOF then means the command was exec'd (the fds are
 * close-on-exec) or the launcher died; no report at all is a setup failure.
 *
 * LAUNCH_END_FD (a SOCK_SEQPACKET socket; the supervisor holds its peer):
 * with plan.dns_stub, init first sends "dns\n" with the UDP socket of the
 * run's name server, then with plan.proxy_port "proxy\n" with the
 * listening socket of the egress broker (SCM_RIGHTS), before the command
 * is forked;
 * then, for each of the sandbox's private tmpfs mounts /tmp and /dev/shm,
 * "tmpfs PATH\n" with an O_PATH descriptor of its root, taken as
 * it was mounted (launch_tmpfs_fd): the supervisor fstatfs()es it at the
 * run's end to say whether it was full (the kernel's numbers: nothing in
 * the sandbox can forge them, and the command never holds the
 * descriptor);
 * then "leftovers N\n", which init writes when the command has ended, N
 * the processes still alive in the PID namespace, which its end kills
 * (LAUNCH_LEFTOVERS_UNKNOWN when it could not list its /proc);
 * then the launcher, once init is gone (and with it every process of the
 * PID namespace), writes "end S\n", S the wait status it exits with:
 * the supervisor stops the views and seals the stage while the kernel
 * tears down the launcher's namespaces, and reaps it only after.  Init
 * and the launcher hold it (the command closes every descriptor above 2);
 * the supervisor takes "end" from the launcher alone (SCM_CREDENTIALS).
 * Nothing written means init or the launcher was killed first (the
 * supervisor's SIGKILL) or set-up failed.
 *
 * The launcher is exec'd while the supervisor still mounts the workspace
 * and HOME views (exec_spec.early_exec); LAUNCH_READY_FD carries one byte
 * once they are in place (EOF: they could not be, the launcher exits 125
 * without a report).  It reads the plan and makes the run's PID, IPC, UTS
 * and network namespaces meanwhile (a failure there is reported, as any
 * other step's), but not its mount namespace (it must be copied with the
 * views in it), and forks nothing (it may still be on its way into the
 * run's cgroup) before that.
 */
#ifndef PVISOR_LAUNCH_LAUNCH_H
#define PVISOR_LAUNCH_LAUNCH_H

#include <stddef.h>
#include <stdint.h>

#define LAUNCH_PLAN_FD 3
#define LAUNCH_SYNC_FD 4
#define LAUNCH_GO_FD 5
#define LAUNCH_END_FD 6
#define LAUNCH_LEFTOVERS_UNKNOWN "leftovers ?\n"
#define LAUNCH_READY_FD 7
#define LAUNCH_VERB "__launch"
#define LAUNCH_REPORT_MAX (64u << 10)

/* The private tmpfs mounts whose use the supervisor reports: their roots
 * as O_PATH descriptors (close-on-exec) that launch_build_root takes as it
 * mounts each, before anything can be mounted over it (an --access grant
 * of /tmp), or -1; init hands them over and closes them before the command
 * is forked. */
enum { LAUNCH_TMPFS_TMP, LAUNCH_TMPFS_SHM, LAUNCH_TMPFS_N };
extern int launch_tmpfs_fd[LAUNCH_TMPFS_N];
/* Their paths inside ("/tmp", "/dev/shm"); the message handing one over
 * is LAUNCH_TMPFS_TAG_PREFIX, its path and a newline. */
extern const char *const launch_tmpfs_path[LAUNCH_TMPFS_N];
#define LAUNCH_TMPFS_TAG_PREFIX "tmpfs "

struct launch_plan;

int launch_main(int argc, char **argv);

/* As root, before leaving the initial user namespace: replace each
 * read-only projection outside home (unless home holds /etc or /usr) by an
 * idmapped clone (uid/gid 0 shown as 65534; plan mount "fd",
 * close-on-exec: exec_spec.keep_fds hands them over).  Returns how many;
 * *ret_failed counts those left plain binds (a file system without
 * idmapped mounts), why names the first.  idmap.c. */
int launch_idmap_projections(struct launch_plan *p, const char *home, int *ret_failed, char *why, size_t why_size);
/* Close the clones (the supervisor's copies, once the launcher has them). */
void launch_idmap_close(struct launch_plan *p);

/* Steps (src/launch/: mounts.c, landlock.c, seccomp.c).  Each returns -errno and sets *ret_step to a
 * static description of what failed. */
int launch_build_root(const struct launch_plan *p, const char **ret_step);

/* What launch_build_root found of host unix sockets in the projected trees
 * marked scan_sockets (mounts.c): how many it covered (in toolchains and
 * grants, and in grants alone), the --access paths it scanned, those it
 * could not scan whole, the toolchains it could not (to their shallower
 * limits), and rw: grants that are a socket, handed over as asked (the
 * first LAUNCH_SCAN_LIST of each).  Read by the self-check. */
#define LAUNCH_SCAN_LIST 16
struct launch_socket_scan {
    unsigned covered, covered_in_grants;
    char *scanned[LAUNCH_SCAN_LIST], *incomplete[LAUNCH_SCAN_LIST], *tools_incomplete[LAUNCH_SCAN_LIST],
        *handed_over[LAUNCH_SCAN_LIST];
    unsigned n_scanned, n_incomplete, n_tools_incomplete, n_handed_over;
};
extern struct launch_socket_scan launch_socket_scan;
int launch_landlock(const struct launch_plan *p, int *ret_abi, uint64_t *ret_handled_fs, uint64_t *ret_handled_net,
                    uint64_t *ret_scoped, const char **ret_step);
int launch_seccomp(const char **ret_step);
/* The installed program's SHA-256 into ret; returns its length in
 * instructions (0 if it could not be hashed). */
unsigned launch_seccomp_digest(unsigned char ret[32]);

#endif
