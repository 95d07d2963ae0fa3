/* seccomp.c: the launcher's seccomp filter.
 *
 * Default allow, with a deny list of the kernel interfaces an agent has no
 * business using and that widen the attack surface or cross the boundary:
 * process inspection (ptrace, process_vm_*), mounts and namespaces, kernel
 * loading, BPF, perf, userfaultfd, keyrings, quotas, io_uring (which bypasses
 * seccomp for the operations it queues), handle-based opens, tty input
 * injection (TIOCSTI, TIOCLINUX).  clone3 fails with ENOSYS so libc falls
 * back to clone(2), whose flags can be inspected; clone with any namespace
 * flag fails with EPERM.  io_setup fails with ENOSYS: Linux AIO contexts
 * count against fs.aio-max-nr, a limit shared by the whole host, which
 * a command could take whole (other programs' io_setup then failed).  Every non-native ABI (i386, x32) kills the
 * process: libseccomp's bad-arch action covers both.  fcntl(F_SETLEASE)
 * of a read or write lease fails with EINVAL, as with fs.leases-enable = 0:
 * a lease on a projected host file the user owns (a grant) held every host
 * process's open of it back for fs.lease-break-time and told the command.
 *
 * The rules are in seccomp-gen.c: libseccomp compiles them at build time
 * into the BPF program this file installs, and the launcher reports its
 * SHA-256 and length in its self-check.  A syscall number nobody reviewed
 * there (x86_64: 337-423, and above file_setattr, 469, the last of Linux
 * 6.18) fails with ENOSYS, as on a kernel without it: the filter allows by
 * default, and a call a later kernel adds must not be allowed unseen.
 * Newer calls libseccomp has no name for are denied by number:
 * open_tree_attr (EPERM, as open_tree), statmount and listmount (ENOSYS:
 * libmount falls back to /proc/self/mountinfo).
 *
 * socket() and socketpair() take only the families the private network
 * namespace confines (unix, inet, inet6, netlink); every other one fails
 * with EAFNOSUPPORT, as on a kernel without it.  AF_VSOCK (the channel
 * between a VM and its host) is not confined by a network namespace: its
 * ports are the host's.  Of netlink, only NETLINK_ROUTE and
 * NETLINK_SOCK_DIAG (the run's own interfaces and sockets); every other
 * protocol (uevents, audit, the proc connector, netfilter, xfrm, generic
 * netlink, one the kernel would load as a module) fails with
 * EPROTONOSUPPORT, as for a protocol the kernel lacks.
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
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/sha256.h"

/* The program, built by libseccomp at build time (seccomp-gen.c, where the
 * rules are): launch_seccomp_prog[]. */
#include "seccomp-filter.h"

int launch_seccomp(const char **ret_step) {
    /* The program's bad-arch action is SECCOMP_RET_KILL_PROCESS (Linux
     * 4.14).  A kernel without it reads that as SECCOMP_RET_KILL_THREAD,
     * which kills only the thread of a non-native syscall: the agent's
     * other threads go on.  libseccomp refused such a kernel when it built
     * the filter here; a program compiled in advance must ask. */
    uint32_t kill_process = SECCOMP_RET_KILL_PROCESS;
    *ret_step = "seccomp bad-arch action";
    if (syscall(SYS_seccomp, SECCOMP_GET_ACTION_AVAIL, 0, &kill_process) < 0)
        return -errno; /* EOPNOTSUPP: the kernel lacks it (doctor: seccomp.actions.kill_process false) */
    struct sock_fprog prog = {
        .len = (unsigned short)(sizeof launch_seccomp_prog / sizeof launch_seccomp_prog[0]),
        .filter = (struct sock_filter *)launch_seccomp_prog,
    };
    *ret_step = "installing the seccomp filter";
    return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) == 0 ? 0 : -errno;
}

unsigned launch_seccomp_digest(unsigned char ret[32]) {
    if (pv_sha256_buf(launch_seccomp_prog, sizeof launch_seccomp_prog, ret) < 0)
        return 0;
    return (unsigned)(sizeof launch_seccomp_prog / sizeof launch_seccomp_prog[0]);
}
