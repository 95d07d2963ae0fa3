/* seccomp-gen.c: builds the launcher's seccomp filter with libseccomp and
 * prints it as a C header (the BPF program, for the architecture this runs
 * on).  Run at build time (src/launch/meson.build): the launcher installs
 * the compiled program as it is, without building it at every start
 * (libseccomp took 0.25-0.35 ms of each --safe start) and without
 * libseccomp at run time.  What the filter does and why: seccomp.c.
 *   usage: seccomp-gen > seccomp-filter.h */
#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <sched.h>
#include <seccomp.h>
#include <stdint.h>
#include <stdio.h>
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
};

static int build(scmp_filter_ctx ctx, const char **ret_step) {
    int r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
    if (r < 0) {
        *ret_step = "seccomp bad-arch action";
        return r;
    }
    *ret_step = "seccomp rule";
    for (size_t i = 0; i < sizeof denied / sizeof denied[0]; i++) {
        int nr = seccomp_syscall_resolve_name(denied[i]);
        if (nr == __NR_SCMP_ERROR)
            continue; /* not on this architecture */
        if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0)) < 0)
            return r;
    }
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
    const struct scmp_arg_cmp core = SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, RLIMIT_CORE);
    if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(0), SCMP_SYS(setrlimit), 1,
                              SCMP_A0(SCMP_CMP_MASKED_EQ, 0xffffffffUL, RLIMIT_CORE))) < 0 ||
        (r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(0), SCMP_SYS(prlimit64), 3, core, SCMP_A2(SCMP_CMP_NE, 0, 0),
                              SCMP_A3(SCMP_CMP_EQ, 0, 0))) < 0 ||
        (r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(prlimit64), 3, core, SCMP_A2(SCMP_CMP_NE, 0, 0),
                              SCMP_A3(SCMP_CMP_NE, 0, 0))) < 0)
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
    static const unsigned long ioctls[] = {TIOCSTI, TIOCLINUX};
    for (size_t i = 0; i < sizeof ioctls / sizeof ioctls[0]; i++)
        if ((r = seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
                                  SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, ioctls[i]))) < 0)
            return r;
    return 0;
}

int main(void) {
    const char *step = "seccomp_init";
    scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
    int r = ctx ? build(ctx, &step) : -ENOMEM;
    int fd = -1;
    if (r == 0) {
        step = "seccomp_export_bpf";
        fd = memfd_create("seccomp-bpf", MFD_CLOEXEC);
        r = fd < 0 ? -errno : seccomp_export_bpf(ctx, fd);
    }
    static struct sock_filter prog[BPF_MAXINSNS];
    ssize_t n = r == 0 ? pread(fd, prog, sizeof prog, 0) : -1;
    if (r == 0 && (n <= 0 || n % (ssize_t)sizeof prog[0] != 0 || n == (ssize_t)sizeof prog)) {
        step = "reading the exported program";
        r = -EIO;
    }
    seccomp_release(ctx);
    if (r < 0) {
        fprintf(stderr, "seccomp-gen: %s: error %d\n", step, r);
        return 1;
    }
    printf("/* Generated by seccomp-gen (src/launch/seccomp-gen.c) with libseccomp %u.%u.%u; do not edit. */\n",
           seccomp_version()->major, seccomp_version()->minor, seccomp_version()->micro);
    printf("static const struct sock_filter launch_seccomp_prog[] = {\n");
    for (ssize_t i = 0; i < n / (ssize_t)sizeof prog[0]; i++)
        printf("    {0x%04x, %u, %u, 0x%08x},\n", prog[i].code, prog[i].jt, prog[i].jf, prog[i].k);
    printf("};\n");
    return ferror(stdout) || fflush(stdout) != 0;
}
