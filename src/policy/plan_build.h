/* plan_build.h: run options + facts about the host -> a launch plan (pure).
 *
 * The CLI gathers the facts (environment, HOME, which runtime directories
 * exist, where the command's executable lives); this function decides,
 * without touching the system, what the sandbox contains.  Unit-tested.
 */
#ifndef PVISOR_POLICY_PLAN_BUILD_H
#define PVISOR_POLICY_PLAN_BUILD_H

#include "policy/plan.h"
#include "policy/policy.h"

#define PLAN_OTHER_HOMES 8 /* plan_inputs.pw_home */

struct plan_inputs {
    const struct run_options *opts;
    char *const *environ;  /* the supervisor's environment */
    const char *home;      /* absolute, normalised; NULL if unknown */
    const char *workspace; /* absolute, normalised */
    const char *cwd;       /* absolute, normalised */
    uint32_t uid, gid;
    /* Extra read-only projections found by the CLI (the command's
     * executable and interpreter directories, toolchains on PATH).
     * Each must be absolute and normalised. */
    const char *const *runtime_dirs;
    size_t n_runtime_dirs;
    /* --access / --allow-write rules, paths resolved by the CLI (absolute,
     * normalised), in the order given. */
    const struct access_rule *access;
    size_t n_access;
    /* The Run-scoped agent socket on the host, or NULL; projected at
     * PLAN_AGENT_SOCKET_PATH, which PVISOR_AGENT_SOCKET names. */
    const char *agent_socket;
    /* A copy-on-write view of HOME mounted by the supervisor at this host
     * path, projected at HOME (credentials covered); NULL: HOME is an empty
     * tmpfs with allowlisted config files. */
    const char *home_view;
    /* With a HOME view whose server masks the credential locations itself
     * (whiteouts, see overlay_start), only these (relative to HOME) still
     * need covering by a mount: the ones below a symlinked parent.
     * home_view_masks false: every credential location is covered. */
    bool home_view_masks;
    const char *const *home_hide;
    size_t n_home_hide;
    /* Where each of plan_credential_paths leads now (symlinks resolved),
     * parallel to it; an entry or the whole array may be NULL.  A rule
     * that reaches a credential location by either name is refused, one
     * that holds one gets it covered. */
    char *const *cred_real;
    /* plan_moved_credentials(), or NULL: covered where a grant or the
     * workspace holds them, and a grant that reaches into one is refused,
     * as for plan_credential_paths. */
    char *const *cred_moved;
    /* Other homes than HOME whose credential locations are kept from the
     * command too (resolved; NULL when none): the user's as /etc/passwd
     * names it when HOME names another (a fresh HOME an agent harness
     * sets), and under sudo the invoking user's (SUDO_UID), and any of
     * these or HOME by another name (a bind mount) on the way to the
     * workspace or a grant; pw_cred_real as cred_real for each.  Refused as grants, covered where the
     * workspace or a grant shows them. */
    const char *pw_home[PLAN_OTHER_HOMES];
    char *const *pw_cred_real[PLAN_OTHER_HOMES];
    /* Config files under HOME that exist (relative to HOME). */
    const char *const *home_files;
    size_t n_home_files;
    /* rlimits for the command chosen by the supervisor for --limit where no
     * cgroup holds that limit (0: inherit). */
    uint64_t rlimit_as, rlimit_cpu, rlimit_nproc;
    /* policy_tmpfs_max(): /tmp without --limit tmp= is 1 GiB, /dev/shm
     * without shm= 64 MiB, or this when less (0: unknown). */
    uint64_t tmpfs_max;
};

/* Credential locations relative to HOME that are never projected, and are
 * hidden when they fall inside the workspace.  NULL-terminated. */
extern const char *const plan_credential_paths[];

/* Config files relative to HOME projected read-only when present. */
extern const char *const plan_home_config_files[];

/* The credential locations that the user's environment moves away from
 * their place in HOME (XDG_CONFIG_HOME=~/.xdgconf holds gh's token in
 * ~/.xdgconf/gh; GNUPGHOME, DOCKER_CONFIG, KUBECONFIG, CARGO_HOME, ...):
 * a value "~/..." taken in HOME, a relative one in cwd (either may be
 * NULL); absolute, symlinks resolved (one that does not exist yet: its
 * deepest existing ancestor); never "/" nor one that holds HOME; one that
 * is or holds the workspace is listed (plan_build refuses the run).  More
 * than PLAN_MAX_MOVED: -E2BIG (none is dropped).  *ret is NULL-terminated,
 * for plan_moved_free; after each path's NUL, the variable that moved it
 * (plan_moved_variable).  npm's npm_config_userconfig, _globalconfig
 * and _prefix are followed in every letter case the environment spells
 * them in, as npm reads them.  Also, each found as the run starts (the
 * "variable" then says what it is, with a space in it): npm's global
 * config in each version of a node toolchain and Maven's global settings
 * in each version of a Maven toolchain (their versions directories are
 * read), pip's site config (pip.conf) in a venv or conda environment
 * whose bin/ is on PATH, sbt's global settings in HOME/.sbt (*.sbt, the
 * versions' *.sbt and plugins' *.sbt, *.scala: credentials inline), and
 * git's global config files when one, or a file it includes, holds a
 * credential, with the files it includes that do
 * (plan_gitconfig_credential_files). */
#define PLAN_MAX_MOVED 512
int plan_moved_credentials(const char *home, const char *cwd, char ***ret);
/* Add to v (plan_moved_credentials's) the stores found by looking in
 * other, a home that is not HOME (the user's passwd home when HOME names
 * another, sudo's caller's): sbt's global settings in other/.sbt, the
 * toolchains' global configs at their default roots there (~/.nvm,
 * ~/.sdkman, ...), git's global config holding a credential (or
 * including a file that does: "~/" there is other's).  The
 * environment's own stores are HOME's. */
int plan_moved_in_other_home(const char *other, char **v);
const char *plan_moved_variable(const char *entry);
/* Is the entry git's global config, kept from the command because it
 * holds a credential (and with it the user's git settings: said)? */
bool plan_moved_is_gitconfig(const char *entry);
void plan_moved_free(char **v);

/* True when rel (relative to HOME, normalised) is or is inside a credential
 * location. */
bool plan_is_credential_path(const char *rel);
/* Is home "/", inside one of the projected system directories (/usr, /etc,
 * /bin, /sbin, /lib*) or a parent of one?  Such a HOME gets no view of its
 * own (it would show the system's files as the host has them, over their
 * read-only, for root idmapped, projections). */
bool plan_home_is_system(const char *home);
/* Is path inside one of the projected system directories? */
bool plan_under_system_dir(const char *path);

/* The variables that name where a tool manager or environment lives
 * (PYENV_ROOT, RUSTUP_HOME, VIRTUAL_ENV, JAVA_HOME, ...), NULL-terminated.  The run
 * projects the directory each names (when it lies outside HOME and the
 * system directories, by a tool directory's rules) and hands the variable
 * over as it is, so that the tool inside uses the same root as outside: a
 * rustup proxy, `pyenv` or asdf without theirs fall back to the one in
 * HOME, or to none, and Maven or Gradle without JAVA_HOME to the JDK of
 * the `java` on PATH. */
extern const char *const plan_tool_root_vars[];

/* Top-level directory under HOME that a runtime path belongs to, or NULL
 * when it should not be projected whole (credential dirs, .local, .config,
 * pvisor's own state).  ret_buf receives "HOME/<entry>". */
const char *plan_home_runtime_root(const char *home, const char *path, char *ret_buf, size_t size);

#define PLAN_AGENT_SOCKET_PATH "/run/pvisor/agent.sock"

int plan_build(const struct plan_inputs *in, struct launch_plan *ret_plan, char **ret_error);
/* The refusals of plan_build that need HOME's credential locations
 * resolved (in->home, cred_real, pw_home, pw_cred_real, cred_moved,
 * workspace, access), and only those: a workspace in a credential location,
 * a grant of one.  -EPERM and plan_build's message (*ret_error), -ENOMEM,
 * or 0.  For a usage error before the run is recorded. */
int plan_refuse_credentials(const struct plan_inputs *in, char **ret_error);

#endif
