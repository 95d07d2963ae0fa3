/* seccomp-gen.c: builds the launcher's seccomp filter with libseccomp and
 * prints it as a C header (the BPF program, for the architecture this runs
 * on).  Run at build time (src/launch/meson.build): the launcher installs
 * the compiled program as it is, without building it at every start
 * (libseccomp took 0.25-0.35 ms of each --safe start) and without
 * libseccomp at run time.  What the filter does and why: seccomp.c.
 *
 * The filter allows by default, so it fails closed for syscalls nobody
 * reviewed by a guard this file puts in front of libseccomp's program:
 * a native syscall number above the last one reviewed here (file_setattr,
 * Linux 6.17; Linux 6.18 has none newer) or in a hole of the table below
 * it (x86_64: 337-423) returns ENOSYS, as a kernel without it does.  The
 * numbers libseccomp names up to that one are reviewed by the deny list
 * below; the ones it may not name (libseccomp 2.5.4 knows none past
 * futex_requeue, Linux 6.7, and skips a name it does not know) are in
 * newer[] with their numbers.
 *   usage: seccomp-gen > seccomp-filter.h */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <linux/netlink.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sched.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif

static const char *const denied[] = {
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "kcmp",
    "pidfd_getfd",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "move_mount",
    "open_tree",
    "fsopen",
    "fsconfig",
    "fsmount",
    "fspick",
    "mount_setattr",
    "unshare",
    "setns",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "kexec_load",
    "kexec_file_load",
    "init_module",
    "finit_module",
    "delete_module",
    "open_by_handle_at",
    "name_to_handle_at",
    "acct",
    "swapon",
    "swapoff",
    "reboot",
    "syslog",
    "quotactl",
    "quotactl_fd",
    "lookup_dcookie",
    "vhangup",
    "iopl",
    "ioperm",
    "settimeofday",
    "clock_settime",
    "clock_adjtime",
    "adjtimex",
    "uselib",
    "nfsservctl",
    "fanotify_init",
    /* the x86 local descriptor table: 16-bit segments, old attack surface
     * (CVE-2015-5157, -8830); only DOS emulators and old Wine use it */
    "modify_ldt",
};

/* The syscalls since Linux 6.5, each reviewed (errno 0: allowed), by their
 * number in the table every architecture shares from pidfd_send_signal
 * (424) on: alpha's and mips's add an offset, which pidfd_send_signal's
 * number there gives.  libseccomp 2.5.4 names none past futex_requeue. */
struct newer_syscall {
    const char *name;
    int nr;
    int err;
};
static const struct newer_syscall newer[] = {
    {"cachestat", 451, 0},          /* page-cache state of a file it has open, as mincore(2) of a mapping */
    {"fchmodat2", 452, 0},          /* chmod with AT_SYMLINK_NOFOLLOW (glibc's lchmod): chmod's checks */
    {"map_shadow_stack", 453, 0},   /* a shadow stack for a thread of its own (glibc with CET) */
    {"futex_wake", 454, 0},         /* futex2: the process's own synchronisation, as futex(2) */
    {"futex_wait", 455, 0},         /* futex2 */
    {"futex_requeue", 456, 0},      /* futex2 */
    {"statmount", 457, ENOSYS},     /* the mount family (queries, other mount namespaces' too): as before 6.8, */
    {"listmount", 458, ENOSYS},     /* libmount and systemd fall back to /proc/self/mountinfo */
    {"lsm_get_self_attr", 459, 0},  /* its own LSM labels, as /proc/self/attr shows them */
    {"lsm_set_self_attr", 460, 0},  /* as a write to /proc/self/attr, which the LSM itself decides */
    {"lsm_list_modules", 461, 0},   /* the names of the active LSMs */
    {"mseal", 462, 0},              /* seals mappings of its own against change */
    {"setxattrat", 463, 0},         /* the xattr calls by directory fd and flags: the checks of the */
    {"getxattrat", 464, 0},         /* setxattr, getxattr, listxattr and removexattr it may use */
    {"listxattrat", 465, 0},        /* (the same VFS calls, read-only mounts, the stage's own xattrs) */
    {"removexattrat", 466, 0},      /* ditto */
    {"open_tree_attr", 467, EPERM}, /* open_tree that also changes the mount's attributes: the mount family */
    {"file_getattr", 468, 0},       /* FS_IOC_FSGETXATTR by path: ioctl(2) does it on any fd it has */
    {"file_setattr", 469, 0},       /* FS_IOC_FSSETXATTR by path: the ioctl's checks (owner, read-only mounts) */
};
/* x86_64's own, below the shared table.  Only the kernel's uprobe
 * trampolines may call them (SIGILL, ENXIO from anywhere else), the kernel
 * lets both through seccomp unfiltered, and a filter that stopped them
 * would crash a process a host uprobe is set in. */
static const struct newer_syscall newer_x86_64[] = {
    {"uretprobe", 335, 0}, /* Linux 6.11: a uretprobe's return trampoline */
    {"uprobe", 336, 0},    /* Linux 6.18: an optimised uprobe's trampoline */
};
/* The last number reviewed (file_setattr), in the shared table. */
#define NEWER_LAST 469

/* The native number of e (-errno if libseccomp numbers it otherwise). */
static int newer_nr(const struct newer_syscall *e, int shared_base) {
    int nr = e->nr >= 424 ? shared_base + e->nr : e->nr;
    int named = seccomp_syscall_resolve_name(e->name);
    return named == __NR_SCMP_ERROR || named == nr ? nr : -EINVAL;
}

/* Whether the native syscall nr was reviewed here: libseccomp names it (the
 * rules above are by name) or newer[] has it. */
static bool reviewed(uint32_t nr, uint32_t arch, int shared_base) {
    for (size_t i = 0; i < sizeof newer / sizeof newer[0]; i++)
        if (newer_nr(&newer[i], shared_base) == (int)nr)
            return true;
    for (size_t i = 0; arch == SCMP_ARCH_X86_64 && i < sizeof newer_x86_64 / sizeof newer_x86_64[0]; i++)
        if (newer_nr(&newer_x86_64[i], shared_base) == (int)nr)
            return true;
    char *name = seccomp_syscall_resolve_num_arch(arch, (int)nr);
    free(name);
    return name != NULL;
}

/* out[*at], and *at on: a statement, or a jump to the instructions jt and
 * jf (absolute, after *at). */
static void emit(struct sock_filter *out, size_t *at, uint16_t code, uint32_t k, size_t jt, size_t jf) {
    const size_t i = (*at)++;
    const bool jump = BPF_CLASS(code) == BPF_JMP;
    out[i] = (struct sock_filter){
        .code = code, .jt = jump ? (uint8_t)(jt - i - 1) : 0, .jf = jump ? (uint8_t)(jf - i - 1) : 0, .k = k};
}

/* The guard that goes in front of libseccomp's program (whose jumps are
 * relative: it runs unchanged behind it), into out[max]: a native syscall
 * whose number was not reviewed returns ENOSYS, as on a kernel without it,
 * whatever the kernel has; every other one goes on to libseccomp's
 * program, and so do a foreign architecture and, on x86_64, x32's numbers
 * (bit 30), which that program kills.  Only loads of nr and arch,
 * constant jumps and a constant return: the kernel's action cache still
 * sees every allowed syscall as allowed.  Returns its length or -errno. */
static int guard(struct sock_filter *out, size_t max, uint32_t arch, int shared_base) {
    enum { max_holes = 16 };
    uint32_t lo[max_holes], hi[max_holes];
    size_t holes = 0;
    const uint32_t last = (uint32_t)(shared_base + NEWER_LAST);
    for (uint32_t nr = 0; nr <= last + 1; nr++) {
        if (nr <= last && reviewed(nr, arch, shared_base))
            continue;
        if (holes > 0 && hi[holes - 1] == nr - 1) {
            hi[holes - 1] = nr;
            continue;
        }
        if (holes == max_holes)
            return -E2BIG;
        lo[holes] = hi[holes] = nr;
        holes++;
    }
    hi[holes - 1] = UINT32_MAX; /* from last + 1 on, all */
    const bool x32 = arch == SCMP_ARCH_X86_64;
    const size_t n = 3 + x32 + 2 * holes + 1, enosys = n - 1, next = n;
    if (n > max || n > 255) /* a jump goes 255 instructions ahead at most */
        return -E2BIG;
    size_t i = 0;
    emit(out, &i, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch), 0, 0);
    emit(out, &i, BPF_JMP | BPF_JEQ | BPF_K, arch, i + 1, next);
    emit(out, &i, BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr), 0, 0);
    if (x32)
        emit(out, &i, BPF_JMP | BPF_JGE | BPF_K, 0x40000000U /* __X32_SYSCALL_BIT */, next, i + 1);
    for (size_t h = 0; h < holes; h++) {
        /* below this hole and above the ones before: reviewed */
        emit(out, &i, BPF_JMP | BPF_JGE | BPF_K, lo[h], i + 1, next);
        emit(out, &i, BPF_JMP | BPF_JGT | BPF_K, hi[h], h + 1 < holes ? i + 1 : next, enosys);
    }
    emit(out, &i, BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS, 0, 0);
    return (int)i;
}

static int build(scmp_filter_ctx ctx, int shared_base, const char **ret_step) {
    int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (r < 0) {
        *ret_step = "seccomp bad-arch action";
        return r;
    }
    *ret_step = "seccomp rule";
    for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++) {
        int nr = seccomp_syscall_resolve_name(denied[i]);
        if (nr == __NR_SCMP_ERROR)
            continue; /* not on this architecture (the guard has the ones it does not know) */
        if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0)) < 0)
            return r;
    }
    *ret_step = "seccomp rule by number (libseccomp numbers it otherwise)";
    for (size_t i = 0; i < sizeof newer / sizeof newer[0]; i++) {
        int nr = newer_nr(&newer[i], shared_base);
        if (nr < 0)
            return nr;
        if (newer[i].err && (r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(newer[i].err), nr, 0)) < 0)
            return r;
    }
    for (size_t i = 0; i < sizeof newer_x86_64 / sizeof newer_x86_64[0]; i++)
        if (seccomp_arch_native() == SCMP_ARCH_X86_64 && newer_nr(&newer_x86_64[i], shared_base) < 0)
            return -EINVAL;
    *ret_step = "seccomp rule";
    if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0)) < 0)
        return r;
    /* Linux AIO contexts count against fs.aio-max-nr, one limit for the
     * whole host: a sandboxed command that held them all made every other
     * program's io_setup fail (EAGAIN: a database, QEMU).  ENOSYS, as on a
     * kernel without AIO, makes libaio's users fall back to threads. */
    if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(io_setup), 0)) < 0)
        return r;
    static const unsigned long ns_flags[] = {CLONE_NEWNS,  CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET,
                                             CLONE_NEWIPC, CLONE_NEWUTS,  CLONE_NEWCGROUP, CLONE_NEWTIME};
    for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++)
        if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]))) < 0)
            return r;
    /* Families 0-63 one by one, and anything above (the high bits of
     * the argument, which the kernel ignores, included). */
    for (int f = 0; f < 64; f++) {
        if (f == AF_UNIX || f == AF_INET || f == AF_INET6 || f == AF_NETLINK)
            continue;
        if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                                  SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)f, 0))) < 0 ||
            (r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socketpair), 1,
                                  SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)f, 0))) < 0)
            return r;
    }
    if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_GE, 64, 0))) <
            0 ||
        (r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socketpair), 1,
                              SCMP_A0(SCMP_CMP_GE, 64, 0))) < 0)
        return r;
    /* netlink: only the protocols an agent uses, both confined to the
     * run's network namespace: NETLINK_ROUTE (getifaddrs, if_nameindex,
     * `ip addr`: its own loopback) and NETLINK_SOCK_DIAG (`ss`: its own
     * sockets).  The others are host interfaces or attack surface it has
     * no use for: NETLINK_KOBJECT_UEVENT (the host's device events: a USB
     * key plugged in; before Linux 4.18 every network namespace got
     * them), audit, the proc connector (every host process's fork and
     * exec), netfilter (nf_tables), xfrm, generic netlink (dozens of
     * families, some loaded as modules on demand), and a protocol the
     * kernel does not have yet, which socket() asks modprobe to load
     * (net-pf-16-proto-N) on the host.  EPROTONOSUPPORT, the kernel's own
     * answer for a netlink protocol it lacks: libaudit's users
     * (shadow's useradd and passwd, sudo) go on without audit on it,
     * where EACCES or EPERM ends them ("Cannot open audit interface -
     * aborting").  The comparisons are of the whole register: high bits
     * the kernel ignores make the protocol above 4, refused. */
    const struct scmp_arg_cmp netlink = SCMP_A0(SCMP_CMP_EQ, AF_NETLINK, 0);
    if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPROTONOSUPPORT), SCMP_SYS(socket), 2, netlink,
                              SCMP_A2(SCMP_CMP_GT, NETLINK_SOCK_DIAG, 0))) < 0)
        return r;
    for (scmp_datum_t proto = NETLINK_ROUTE + 1; proto < NETLINK_SOCK_DIAG; proto++)
        if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPROTONOSUPPORT), SCMP_SYS(socket), 2, netlink,
                                  SCMP_A2(SCMP_CMP_EQ, proto, 0))) < 0)
            return r;
    /* inet and inet6: the protocols an agent uses (0: the type's own, TCP,
     * UDP, UDP-Lite, ICMP and ICMPv6 echo sockets).  Not MPTCP (262):
     * Landlock's TCP rules do not apply to it, so it bound, listened and
     * connected where they refuse every TCP bind and connect (a red-team
     * pass; its users fall back to TCP on EPROTONOSUPPORT, as on a kernel
     * without it).  Another one the
     * kernel does not have yet makes socket() ask modprobe to load it
     * (net-pf-2-proto-132: SCTP, DCCP, L2TP, SMC) on the host, as root,
     * from inside the run: each a module whose bugs were ways out of
     * unprivileged sandboxes (CVE-2017-6074 in DCCP).  EPROTONOSUPPORT, the
     * kernel's answer for a protocol it lacks; a raw socket's protocol
     * (root's on the host) goes the same way.  Whole-register
     * comparisons: high bits the kernel ignores are above 136, refused. */
    static const scmp_datum_t inet_ok[] = {0, IPPROTO_ICMP, IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMPV6, IPPROTO_UDPLITE};
    const size_t n_ok = sizeof inet_ok / sizeof inet_ok[0];
    static const int inets[] = {AF_INET, AF_INET6};
    for (size_t f = 0; f < 2; f++) {
        const struct scmp_arg_cmp fam = SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)inets[f], 0);
        if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPROTONOSUPPORT), SCMP_SYS(socket), 2, fam,
                                  SCMP_A2(SCMP_CMP_GT, inet_ok[n_ok - 1], 0))) < 0)
            return r;
        /* each gap between two allowed protocols as aligned blocks (the
         * value with its low bits masked off): a few rules, not one per
         * protocol (a program a third the size) */
        for (size_t k = 0; k + 1 < n_ok; k++)
            for (scmp_datum_t lo = inet_ok[k] + 1, hi = inet_ok[k + 1]; lo < hi;) {
                scmp_datum_t size = 1;
                while ((lo & (size * 2 - 1)) == 0 && lo + size * 2 <= hi)
                    size *= 2;
                if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPROTONOSUPPORT), SCMP_SYS(socket), 2, fam,
                                          SCMP_A2(SCMP_CMP_MASKED_EQ, ~(size - 1), lo))) < 0)
                    return r;
                lo += size;
            }
    }
    /* Another process's limits: the command (uid 0, or the user in its
     * own namespace) is the owner of the namespace's init by uid, so
     * prlimit(1, ...) lowered init's: with RLIMIT_NOFILE at 0, init could
     * not count the command's leftover processes, and the Bundle said none
     * were killed when some were.  Setting them by pid is refused (EPERM,
     * as for a process one may not touch), reading them is not; its own
     * limits a process sets with pid 0 (glibc's setrlimit). */
    const struct scmp_arg_cmp core = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, RLIMIT_CORE);
    /* whole-register comparisons, so that the two sets never overlap: a
     * pid of 0 with high bits set (the kernel's 0) is refused as another's */
    const struct scmp_arg_cmp self = SCMP_A0(SCMP_CMP_EQ, 0, 0);
    if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(0), SCMP_SYS(setrlimit), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffUL, RLIMIT_CORE))) < 0 ||
        (r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(0), SCMP_SYS(prlimit64), 4, self, core, SCMP_A2(SCMP_CMP_NE, 0, 0),
                              SCMP_A3(SCMP_CMP_EQ, 0, 0))) < 0 ||
        (r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(prlimit64), 4, self, core,
                              SCMP_A2(SCMP_CMP_NE, 0, 0), SCMP_A3(SCMP_CMP_NE, 0, 0))) < 0 ||
        (r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(prlimit64), 2, SCMP_A0(SCMP_CMP_NE, 0, 0),
                              SCMP_A2(SCMP_CMP_NE, 0, 0))) < 0)
        return r;
    /* A file lease (F_SETLEASE) on a projected host file the user owns (an
     * --access grant, a toolchain): the host's next open of it for writing
     * (a read lease) or at all (a write lease), by any process, even root,
     * blocked for fs.lease-break-time (45 s) while the command was told of
     * it by SIGIO: host processes stalled, and the user's activity seen.
     * EINVAL, as on a host with fs.leases-enable = 0 (F_UNLCK still 0). */
    static const char *const fcntls[] = {"fcntl", "fcntl64"};
    for (size_t i = 0; i < sizeof fcntls / sizeof fcntls[0]; i++) {
        int nr = seccomp_syscall_resolve_name(fcntls[i]);
        if (nr == __NR_SCMP_ERROR)
            continue; /* not on this architecture */
        for (unsigned long type = F_RDLCK; type <= F_WRLCK; type++)
            if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EINVAL), nr, 2,
                                      SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, F_SETLEASE),
                                      SCMP_A2(SCMP_CMP_MASKED_EQ, 0xffffffffUL, type))) < 0)
                return r;
    }
    /* TIOCSETD: a line discipline the kernel has not loaded is a module
     * it asks modprobe for (tty-ldisc-N; dev.tty.ldisc_autoload), on the
     * host, from inside the run, as a protocol is; EPERM, the kernel's
     * answer with autoload off.  A terminal keeps its own (N_TTY). */
    static const unsigned long ioctls[] = {TIOCSTI, TIOCLINUX, TIOCSETD};
    for (size_t i = 0; i < sizeof ioctls / sizeof ioctls[0]; i++)
        if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                                  SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, ioctls[i]))) < 0)
            return r;
    return 0;
}

int main(void) {
    const char *step = "libseccomp has no pidfd_send_signal here (the shared table's first)";
    const uint32_t arch = seccomp_arch_native();
    const int first_shared = seccomp_syscall_resolve_name("pidfd_send_signal");
    const int shared_base = first_shared - 424;
    scmp_filter_ctx ctx = NULL;
    int r = first_shared == __NR_SCMP_ERROR ? -ENOSYS : 0;
    if (r == 0) {
        step = "seccomp_init";
        ctx = seccomp_init(SCMP_ACT_ALLOW);
        r = ctx ? build(ctx, shared_base, &step) : -ENOMEM;
    }
    static struct sock_filter prog[BPF_MAXINSNS];
    int head = 0;
    if (r == 0) {
        step = "the guard of unreviewed numbers";
        r = head = guard(prog, sizeof prog / sizeof prog[0], arch, shared_base);
    }
    int fd = -1;
    if (r >= 0) {
        step = "seccomp_export_bpf";
        fd = memfd_create("seccomp-bpf", MFD_CLOEXEC);
        r = fd < 0 ? -errno : seccomp_export_bpf(ctx, fd);
    }
    const size_t room = sizeof prog - (size_t)head * sizeof prog[0];
    ssize_t n = r == 0 ? pread(fd, prog + head, room, 0) : -1;
    if (r == 0 && (n <= 0 || n % (ssize_t)sizeof prog[0] != 0 || n == (ssize_t)room)) {
        step = "reading the exported program";
        r = -EIO;
    }
    seccomp_release(ctx);
    if (r < 0) {
        fprintf(stderr, "seccomp-gen: %s: error %d\n", step, r);
        return 1;
    }
    n = head + n / (ssize_t)sizeof prog[0];
    printf("/* Generated by seccomp-gen (src/launch/seccomp-gen.c) with libseccomp %u.%u.%u; do not edit. */\n",
           seccomp_version()->major, seccomp_version()->minor, seccomp_version()->micro);
    printf("static const struct sock_filter launch_seccomp_prog[] = {\n");
    for (ssize_t i = 0; i < n; i++)
        printf("    {0x%04x, %u, %u, 0x%08x},\n", prog[i].code, prog[i].jt, prog[i].jf, prog[i].k);
    printf("};\n");
    return ferror(stdout) || fflush(stdout) != 0;
}
