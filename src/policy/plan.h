/* plan.h: the launch plan, the immutable list of what the hidden launcher
 * (`pvisor __launch`) must set up before it execs the command.
 *
 * The supervisor builds it (it alone looks at the host: resolving the
 * executable, HOME, the environment) and hands it to the launcher as JSON
 * on a descriptor; the launcher only executes it.  Every path in a plan is
 * absolute and normalised (no "." or ".." components, no trailing slash);
 * plan_from_json() refuses anything else, so a plan cannot name a path the
 * supervisor did not mean.  Bounded: at most PLAN_MAX_* entries.
 */
#ifndef PVISOR_POLICY_PLAN_H
#define PVISOR_POLICY_PLAN_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#define PLAN_MAX_MOUNTS 2048
#define PLAN_MAX_ARGS 4096
#define PLAN_MAX_ENV 512
#define PLAN_MAX_BYTES (1u << 20)

enum plan_mount_kind {
    PLAN_BIND_RO, /* read-only (+exec) projection of a host path */
    PLAN_BIND_RW, /* read-write projection (the staged workspace, grants) */
    PLAN_TMPFS,   /* empty private tmpfs, writes discarded at exit */
    PLAN_HIDE,    /* an empty read-only tmpfs/file over a path (deny rule) */
};

struct plan_mount {
    enum plan_mount_kind kind;
    char *path;    /* absolute target path inside the sandbox */
    char *source;  /* host path to project there; NULL: the same as path */
    uint64_t size; /* PLAN_TMPFS: size limit in bytes */
    int fd;        /* PLAN_BIND_RO: the source as a detached (idmapped) mount the launcher inherits, or -1 */
    bool optional; /* PLAN_BIND_RO found by the supervisor (a toolchain, a link on the way to HOME): left out
                    * when the launcher may not reach it */
    /* PLAN_BIND_*: a host tree outside the system hierarchies (a toolchain,
     * an --access grant) whose unix sockets the launcher covers: a
     * read-only mount does not stop a connect, and Landlock before ABI 9
     * has no right for it (mounts.c, cover_sockets) */
    bool scan_sockets;
};

struct launch_plan {
    char **argv; /* NULL-terminated */
    char **envp; /* NULL-terminated, already reduced to the allowlist */
    /* argv[0] as the supervisor found it on the command's PATH, or NULL:
     * exec'd first (no PATH search, whose misses cost a lookup in a FUSE
     * view each); if that fails, argv[0] is searched on PATH as before. */
    char *exec_path;
    char *cwd; /* inside the sandbox */
    char *hostname;
    uint32_t uid, gid; /* ids the command sees (the invoking user's) */
    bool unshare_net;  /* private network namespace (deny-all) */
    bool
        loopback_tcp; /* ... in which TCP on its own loopback is allowed (--network loopback): no Landlock TCP rights */
    /* The egress broker's port on the sandbox's loopback (--allow-net), or
     * 0: init listens there and hands the socket to the supervisor over
     * LAUNCH_END_FD; Landlock admits TCP connect to it (and nothing else,
     * unless loopback_tcp). */
    uint16_t proxy_port;
    /* The run's name server (net/dns.h): init binds UDP on the sandbox's
     * 127.0.0.1:53, shows an /etc/resolv.conf naming it and hands the
     * socket to the supervisor over LAUNCH_END_FD.  With a private network
     * namespace but no --network loopback (where the command may serve
     * port 53 itself). */
    bool dns_stub;
    bool landlock; /* install Landlock (required: failure aborts) */
    bool seccomp;  /* install the seccomp filter (required) */
    /* The command gets a pty of the sandbox's own devpts as its controlling
     * terminal, in place of those of fd 0-2 that are the user's terminal;
     * the namespace's init relays between the two (launch.c, struct term). */
    bool tty;
    bool tty_input;    /* ... and the user's keys (fd 0, in the foreground) go to it */
    uint64_t tmp_size; /* /tmp tmpfs size */
    uint64_t shm_size; /* /dev/shm tmpfs size (0: 64 MiB) */
    uint64_t rlimit_nofile, rlimit_fsize, rlimit_nproc, rlimit_as; /* 0 = inherit */
    uint64_t rlimit_cpu;       /* seconds; 0 = inherit.  Soft at N (SIGXCPU), hard at N + 1 (SIGKILL) */
    struct plan_mount *mounts; /* applied in order */
    size_t n_mounts;
};

/* Add a mount; path is copied.  -EINVAL for a path that is not absolute and
 * normalised, -E2BIG past PLAN_MAX_MOUNTS. */
int plan_add_mount(struct launch_plan *p, enum plan_mount_kind kind, const char *path, uint64_t size);

/* Add a projection of host path source at path (bind kinds only). */
int plan_add_mount_from(struct launch_plan *p, enum plan_mount_kind kind, const char *source, const char *path);

/* True when path is absolute, has no empty, "." or ".." component and no
 * trailing slash (except "/" itself). */
bool plan_path_ok(const char *path);

json_t *plan_to_json(const struct launch_plan *p);
int plan_from_json(const json_t *j, struct launch_plan *ret_plan);
void plan_free(struct launch_plan *p); /* frees the contents, not p */

const char *plan_mount_kind_name(enum plan_mount_kind k);

/* The exact device nodes of the host's /dev every sandbox gets (projected
 * read-only: their inodes cannot change, the devices read and write);
 * nothing else of it unless an --access rule names it.  NULL-terminated. */
extern const char *const plan_dev_nodes[];

#endif
