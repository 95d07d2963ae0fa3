/* launch.h: the hidden launcher, `pvisor __launch`.
 *
 * The supervisor re-executes its own binary as the launcher so that the
 * launcher starts single-threaded, with nothing inherited but what the
 * supervisor chose: fd 0-2 (the command's stdio), LAUNCH_PLAN_FD (the JSON
 * launch plan, read once) and LAUNCH_SYNC_FD (write end of the report pipe).
 *
 * Protocol on LAUNCH_SYNC_FD: exactly one JSON object, then EOF when the
 * command is exec'd (the fd is close-on-exec).  {"ok":true,"evidence":{...}}
 * means every control was installed and the command is being exec'd;
 * {"ok":false,"step":"...","errno":N,"message":"..."} means setup failed
 * and the command never ran (launcher exits 125).  EOF without a report
 * means the launcher died: the supervisor treats it as a setup failure.
 */
#ifndef PVISOR_LAUNCH_LAUNCH_H
#define PVISOR_LAUNCH_LAUNCH_H

#include <stdint.h>

#define LAUNCH_PLAN_FD 3
#define LAUNCH_SYNC_FD 4
#define LAUNCH_VERB "__launch"
#define LAUNCH_REPORT_MAX (64u << 10)

struct launch_plan;

int launch_main(int argc, char **argv);

/* Steps (src/launch/: mounts.c, landlock.c, seccomp.c).  Each returns -errno and sets *ret_step to a
 * static description of what failed. */
int launch_build_root(const struct launch_plan *p, const char **ret_step);
int launch_landlock(const struct launch_plan *p, int *ret_abi, uint64_t *ret_handled_fs,
                    uint64_t *ret_handled_net, uint64_t *ret_scoped, const char **ret_step);
int launch_seccomp(const char **ret_step);

#endif
