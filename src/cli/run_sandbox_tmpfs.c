/* run_sandbox_tmpfs.c: was the sandbox's private /tmp or /dev/shm full?
 *
 * Both are tmpfs mounts of the sandbox's own (1 GiB, or half of the host's
 * memory when less, and 64 MiB, unless --limit tmp=/shm= says otherwise,
 * one inode per 2 KiB), and a build or a
 * test suite that fills one gets ENOSPC there, which the tool it ran
 * reports as its own mysterious failure.  The sandbox's init hands the
 * supervisor an O_PATH descriptor of each one's root, taken as it was
 * mounted (launch.h); at the run's end the supervisor fstatfs()es them:
 * the numbers are the kernel's, which nothing in the sandbox can forge (it
 * can only fill the mount or not), the descriptors are never in the
 * sandbox (the command's process tree cannot see the supervisor's, in
 * another PID namespace), and nothing is resolved through them.  Holding
 * one keeps the tmpfs (and what is in it) until it is closed, so they are
 * closed as soon as they are read.
 *
 * Limit: what is measured is the end of the run.  A command that filled
 * /tmp and then removed what it wrote before it ended is not seen.
 */
#include "cli/run_sandbox.h"
#include "evidence/bundle.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

static const char *const tmpfs_key[LAUNCH_TMPFS_N] = {"tmp", "shm"};

/* One of init's tmpfs messages, or -EAGAIN when none is waiting.  The
 * descriptor is kept only when its tag names one of the mounts and it is
 * the root directory of a tmpfs. */
static int receive_one(struct sandbox *sb) {
    char data[32];
    int fd;
    ssize_t n = sandbox_receive_end(sb, data, sizeof data, &fd);
    if (n < 0)
        return (int)n;
    int k = -1;
    for (int i = 0; i < LAUNCH_TMPFS_N; i++) {
        char tag[32];
        snprintf(tag, sizeof tag, LAUNCH_TMPFS_TAG_PREFIX "%s\n", launch_tmpfs_path[i]);
        if (strcmp(data, tag) == 0)
            k = i;
    }
    struct statfs sf;
    struct stat st;
    if (fd < 0 || k < 0 || sb->tmpfs_fd[k] >= 0 || fstatfs(fd, &sf) < 0 || sf.f_type != TMPFS_MAGIC ||
        fstat(fd, &st) < 0 || !S_ISDIR(st.st_mode)) {
        if (fd >= 0)
            close(fd);
        return -EPROTO;
    }
    sb->tmpfs_fd[k] = fd;
    return 0;
}

void sandbox_receive_tmpfs(struct sandbox *sb) {
    /* init sent them before it forked the command, so before the report:
     * they are waiting, the last of its messages before the command's end */
    for (int i = 0; i < LAUNCH_TMPFS_N; i++)
        if (receive_one(sb) == -EAGAIN)
            break;
}

static void say_size(uint64_t bytes, char *buf, size_t size) {
    if (bytes >= 1ULL << 30)
        snprintf(buf, size, "%.1f GiB", (double)bytes / (double)(1ULL << 30));
    else
        snprintf(buf, size, "%.1f MiB", (double)bytes / (double)(1ULL << 20));
}

/* The note for mount k, full of blocks (what) or of inodes. */
static void say_full(struct sandbox *sb, int k, const struct statfs *sf, bool blocks, bool inodes) {
    uint64_t size = (uint64_t)sf->f_blocks * (uint64_t)sf->f_bsize;
    uint64_t used = (uint64_t)(sf->f_blocks - sf->f_bfree) * (uint64_t)sf->f_bsize;
    char ssize[32], sused[32], smax[32] = "";
    say_size(size, ssize, sizeof ssize);
    say_size(used, sused, sizeof sused);
    if (sb->tmpfs_max)
        say_size(sb->tmpfs_max, smax, sizeof smax);
    char what[160];
    if (blocks && inodes)
        snprintf(what, sizeof what, "%s of its %s and %llu of its %llu files used", sused, ssize,
                 (unsigned long long)(sf->f_files - sf->f_ffree), (unsigned long long)sf->f_files);
    else if (blocks)
        snprintf(what, sizeof what, "%s of its %s used", sused, ssize);
    else
        snprintf(what, sizeof what, "%llu of its %llu files used: it holds one per 2 KiB of its %s",
                 (unsigned long long)(sf->f_files - sf->f_ffree), (unsigned long long)sf->f_files, ssize);
    bool empty = (blocks && sf->f_bavail == 0) || (inodes && sf->f_ffree == 0);
    char msg[600];
    snprintf(msg, sizeof msg,
             "the sandbox's %s was %sfull when the run ended (%s; a private tmpfs): a write there fails with "
             "'No space left on device' (ENOSPC) once it is full, which the command's tools report as failures of "
             "their own; give it more room with --limit %s=SIZE%s (now %s%s%s%s%s)",
             launch_tmpfs_path[k], empty ? "" : "nearly ", what, tmpfs_key[k],
             !blocks ? ", a larger size for more files" : "", ssize, sb->tmpfs_max ? "; at most half of " : "",
             sb->tmpfs_max ? policy_tmpfs_bound_name(sb->tmpfs_bound) : "", sb->tmpfs_max ? ", " : "", smax);
    bundle_add_warning(sb->ctx->bundle, msg);
    fprintf(stderr, "pvisor run: note: %s\n", msg);
}

void sandbox_finish_tmpfs(struct sandbox *sb) {
    json_t *ev = json_object_get(
        json_object_get(json_object_get(sb->ctx->bundle, "dimensions"), dimension_name(DIM_RESOURCES)), "evidence");
    json_t *rec = json_is_object(ev) ? json_object() : NULL;
    for (int k = 0; k < LAUNCH_TMPFS_N; k++) {
        if (sb->tmpfs_fd[k] < 0)
            continue;
        struct statfs sf;
        int r = fstatfs(sb->tmpfs_fd[k], &sf);
        close(sb->tmpfs_fd[k]); /* what it holds goes with it */
        sb->tmpfs_fd[k] = -1;
        if (r < 0 || !rec || sf.f_blocks == 0 || sf.f_files == 0)
            continue;
        /* full, or nearly: less than 1% of its blocks or its inodes left
         * (tmpfs keeps no reserve: available is free) */
        bool blocks = (uint64_t)sf.f_bavail * 100 < (uint64_t)sf.f_blocks;
        bool inodes = (uint64_t)sf.f_ffree * 100 < (uint64_t)sf.f_files;
        json_object_set_new(rec, launch_tmpfs_path[k],
                            json_pack("{s:I, s:I, s:I, s:I, s:b, s:b}", "size_bytes",
                                      (json_int_t)(sf.f_blocks * (uint64_t)sf.f_bsize), "used_bytes",
                                      (json_int_t)((sf.f_blocks - sf.f_bfree) * (uint64_t)sf.f_bsize), "inodes",
                                      (json_int_t)sf.f_files, "used_inodes", (json_int_t)(sf.f_files - sf.f_ffree),
                                      "blocks_full", blocks, "inodes_full", inodes));
        if (blocks || inodes)
            say_full(sb, k, &sf, blocks, inodes);
    }
    if (rec && json_object_size(rec))
        json_object_set_new(ev, "private_tmpfs", rec);
    else
        json_decref(rec);
}

void sandbox_close_tmpfs(struct sandbox *sb) {
    for (int k = 0; k < LAUNCH_TMPFS_N; k++)
        if (sb->tmpfs_fd[k] >= 0) {
            close(sb->tmpfs_fd[k]);
            sb->tmpfs_fd[k] = -1;
        }
}
