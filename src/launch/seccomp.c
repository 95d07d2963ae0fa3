/* seccomp.c: the launcher's seccomp filter (libseccomp).
 *
 * Default allow, with a deny list of the kernel interfaces an agent has no
 * business using and that widen the attack surface or cross the boundary:
 * process inspection (ptrace, process_vm_*), mounts and namespaces, kernel
 * loading, BPF, perf, userfaultfd, keyrings, io_uring (which bypasses
 * seccomp for the operations it queues), handle-based opens, tty input
 * injection (TIOCSTI, TIOCLINUX).  clone3 fails with ENOSYS so libc falls
 * back to clone(2), whose flags can be inspected; clone with any namespace
 * flag fails with EPERM.  Every non-native ABI (i386, x32) kills the
 * process: libseccomp's bad-arch action covers both.
 *
 * socket() and socketpair() take only the families the private network
 * namespace confines (unix, inet, inet6, netlink); every other one fails
 * with EAFNOSUPPORT, as on a kernel without it.  AF_VSOCK (the channel
 * between a VM and its host) is not confined by a network namespace: its
 * ports are the host's.
 *
 * RLIMIT_CORE stays at 1 (launch.c: the one value that keeps core dumps
 * from a host pipe helper as well as from files): setrlimit and prlimit64
 * writes of it succeed without effect, as the intent of a program that
 * lowers it (ssh-agent exits when it cannot) is kept; a prlimit64 that
 * also asks for the old value fails with EPERM instead (it would read
 * garbage).  The resource is an unsigned int: only the low 32 bits count.
 */
#include "launch/launch.h"

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/socket.h>

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
};

int launch_seccomp(const char **ret_step) {
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    if (!ctx) {
        *ret_step = "seccomp_init";
        return -ENOMEM;
    }
    int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (r < 0) {
        *ret_step = "seccomp bad-arch action";
        goto out;
    }
    *ret_step = "seccomp rule";
    for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++) {
        int nr = seccomp_syscall_resolve_name(denied[i]);
        if (nr == __NR_SCMP_ERROR)
            continue; /* not on this architecture */
        if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0)) < 0)
            goto out;
    }
    if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), SCMP_SYS(clone3), 0)) < 0)
        goto out;
    static const unsigned long ns_flags[] = {CLONE_NEWNS,  CLONE_NEWUSER, CLONE_NEWPID,    CLONE_NEWNET,
                                             CLONE_NEWIPC, CLONE_NEWUTS,  CLONE_NEWCGROUP, CLONE_NEWTIME};
    for (size_t i = 0; i < sizeof ns_flags / sizeof ns_flags[0]; i++)
        if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
                                  SCMP_A0(SCMP_CMP_MASKED_EQ, ns_flags[i], ns_flags[i]))) < 0)
            goto out;
    /* Families 0-63 one by one, and anything above (the high bits of
     * the argument, which the kernel ignores, included). */
    for (int f = 0; f < 64; f++) {
        if (f == AF_UNIX || f == AF_INET || f == AF_INET6 || f == AF_NETLINK)
            continue;
        if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1,
                                  SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)f, 0))) < 0 ||
            (r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socketpair), 1,
                                  SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)f, 0))) < 0)
            goto out;
    }
    if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socket), 1, SCMP_A0(SCMP_CMP_GE, 64, 0))) <
            0 ||
        (r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EAFNOSUPPORT), SCMP_SYS(socketpair), 1,
                              SCMP_A0(SCMP_CMP_GE, 64, 0))) < 0)
        goto out;
    const struct scmp_arg_cmp core = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, RLIMIT_CORE);
    if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(0), SCMP_SYS(setrlimit), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffUL, RLIMIT_CORE))) < 0 ||
        (r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(0), SCMP_SYS(prlimit64), 3, core, SCMP_A2(SCMP_CMP_NE, 0, 0),
                              SCMP_A3(SCMP_CMP_EQ, 0, 0))) < 0 ||
        (r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(prlimit64), 3, core, SCMP_A2(SCMP_CMP_NE, 0, 0),
                              SCMP_A3(SCMP_CMP_NE, 0, 0))) < 0)
        goto out;
    static const unsigned long ioctls[] = {TIOCSTI, TIOCLINUX};
    for (size_t i = 0; i < sizeof ioctls / sizeof ioctls[0]; i++)
        if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                                  SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, ioctls[i]))) < 0)
            goto out;
    *ret_step = "seccomp_load";
    r = seccomp_load(ctx);
out:
    seccomp_release(ctx);
    return r;
}
