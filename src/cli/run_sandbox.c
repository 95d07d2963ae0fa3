/* run_sandbox.c: the supervisor's half of --filesystem sandbox / --safe.
 *
 * Gathers the host facts the pure plan builder needs (HOME, which config
 * files exist; where the command and its interpreter live and the
 * toolchain directories on PATH come from run_sandbox_runtime.c; HOME's
 * credentials, the views' masks and HOME's view from
 * run_sandbox_home.c), builds the launch plan and hands it to the
 * launcher on a memfd; the run's cgroup leaf and what is released at
 * the end.  The launcher's
 * report and end messages are read in run_sandbox_report.c; its
 * self-check evidence becomes the Bundle's per-dimension entries in
 * run_sandbox_record.c.
 */
#include "cli/cli.h"
#include "cli/run.h"
#include "cli/run_sandbox.h"
#include "cli/runs.h"
#include "evidence/bundle.h"
#include "launch/launch.h"
#include "policy/plan_build.h"
#include "policy/plan_gitconfig.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

extern char **environ;

/* The file to exec for the command: the host's PATH search, when it is
 * the one execvp would make inside (a name without a slash, the same PATH)
 * and every directory it looks in shows the host's files there: absolute
 * (an empty or relative entry is the working directory) and outside the
 * workspace (whose view may hold staged files).  Else NULL: the launcher
 * searches PATH itself. */
static void plan_set_exec_path(struct launch_plan *p, const char *workspace) {
    const char *host = getenv("PATH");
    const char *cmd = p->argv[0];
    const char *inside = NULL;
    for (char **e = p->envp; e && *e; e++)
        if (strncmp(*e, "PATH=", 5) == 0)
            inside = *e + 5;
    if (strchr(cmd, '/') || !host || !inside || strcmp(host, inside) != 0)
        return;
    _cleanup_free_ char *copy = strdup(host);
    char *rest = copy;
    for (char *d; copy && (d = strsep(&rest, ":"));) {
        _cleanup_free_ char *real = d[0] == '/' ? realpath_memo(d) : NULL;
        if (d[0] != '/' || path_within(d, workspace) || (real && path_within(real, workspace)))
            return;
        char *f = path_join(d, cmd);
        if (f && access(f, X_OK) == 0) {
            p->exec_path = f;
            return;
        }
        free(f);
    }
}

/* Does an --access/--allow-write rule (not deny:) show path? */
static bool access_grants(const struct run_context *ctx, const char *path) {
    for (int i = 0; i < ctx->opts->n_access; i++) {
        const struct access_rule *a = &ctx->opts->access[i];
        _cleanup_free_ char *ra = a->kind != ACCESS_DENY ? realpath_memo(a->path) : NULL;
        if (ra && path_within(path, ra))
            return true;
    }
    return false;
}

/* A workspace without a .git of its own inside a repository's checkout (a
 * subdirectory of it): git looks for the repository in the directories
 * above, which the sandbox does not show (under HOME, its view does, but
 * the workspace is a file system of its own there, where git's search
 * stops), and fails ("not a git repository"), where an agent may well
 * make a repository of its own ('git init'), nested in the user's once
 * applied.  Looked for as git does, up to the file system's boundary. */
static void warn_git_above(struct run_context *ctx, dev_t ws_dev) {
    _cleanup_free_ char *dir = strdup(ctx->workspace);
    if (!dir || dir[0] != '/')
        return;
    while (strcmp(dir, "/") != 0) {
        char *slash = strrchr(dir, '/');
        if (slash == dir)
            dir[1] = '\0';
        else
            *slash = '\0';
        struct stat st;
        if (stat(dir, &st) < 0 || st.st_dev != ws_dev)
            return;
        _cleanup_free_ char *git = path_join(dir, ".git");
        if (!git || lstat(git, &st) < 0)
            continue;
        /* no --access grant helps: one shows that .git in the sandbox, but
         * git's search stops at the workspace's own file system (the
         * overlay) before it, and GIT_DISCOVERY_ACROSS_FILESYSTEM does not
         * reach the command (tested) */
        _cleanup_free_ char *shown = term_escape(dir); /* printed on the terminal */
        if (!shown)
            return;
        run_warn(ctx->bundle,
                 "the workspace is a subdirectory of the git repository %.300s, whose .git is outside the "
                 "workspace: git in the sandbox does not reach it and fails ('not a git repository'), and a 'git "
                 "init' there would make a repository nested in yours; to let the command use git, run in %.300s",
                 shown, shown);
        return;
    }
}

/* A workspace that is a linked worktree or a submodule checkout has a
 * .git file naming its repository elsewhere ("gitdir: PATH").  When that
 * lies outside the workspace and no --access/--allow-write rule grants
 * it, the sandbox does not show it and every git command fails there
 * ("not a git repository"): say so before the command runs. */
static void warn_git_outside(struct run_context *ctx) {
    _cleanup_free_ char *buf = NULL;
    size_t len = 0;
    _cleanup_close_ int ws = open(ctx->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat wst, gst;
    if (ws < 0 || fstat(ws, &wst) < 0)
        return;
    if (fstatat(ws, ".git", &gst, AT_SYMLINK_NOFOLLOW) < 0) {
        if (errno == ENOENT)
            warn_git_above(ctx, wst.st_dev);
        return;
    }
    if (read_file_at(ws, ".git", 4096, &buf, &len) < 0 || strncmp(buf, "gitdir: ", 8) != 0)
        return;
    char *gd = buf + 8;
    gd[strcspn(gd, "\r\n")] = '\0';
    if (!gd[0])
        return;
    _cleanup_free_ char *abs = gd[0] == '/' ? strdup(gd) : path_join(ctx->workspace, gd);
    if (!abs)
        return;
    _cleanup_free_ char *real = realpath_memo(abs);
    const char *gitdir = real ? real : abs;
    /* a linked worktree's gitdir names the main repository's .git in its
     * commondir file: git needs both, and the second holds the first */
    _cleanup_free_ char *cbuf = NULL, *cabs = NULL, *common = NULL;
    _cleanup_close_ int gfd = open(gitdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (gfd >= 0 && read_file_at(gfd, "commondir", 4096, &cbuf, &len) >= 0) {
        cbuf[strcspn(cbuf, "\r\n")] = '\0';
        if (cbuf[0])
            cabs = cbuf[0] == '/' ? strdup(cbuf) : path_join(gitdir, cbuf);
        common = cabs ? realpath_memo(cabs) : NULL;
    }
    const char *repo = common && !path_within(gitdir, common) ? gitdir : common ? common : gitdir;
    if (path_within(gitdir, ctx->workspace) && (!common || path_within(common, ctx->workspace)))
        return;
    if (access_grants(ctx, repo))
        return;
    /* repo is the .git file's text when it names nothing that exists: the
     * workspace's (an agent's, once applied), printed on the user's
     * terminal and kept in the Bundle, so escaped (term_escape) */
    _cleanup_free_ char *shown = term_escape(repo);
    if (!shown)
        return;
    run_warn(ctx->bundle,
             "the workspace is a linked git worktree or a submodule: its repository %.300s is outside the workspace, "
             "which the sandbox does not show, so git fails there ('not a git repository'); run in the main "
             "repository's checkout, or let git read it with --access ro:%.300s (a commit still fails)",
             shown, shown);
}

/* --pass-env NAME with NAME unset here hands nothing over: said, since a
 * misspelt name (OPENAI_KEY for OPENAI_API_KEY) otherwise shows only as
 * the command's own failure inside. */
static void warn_pass_env_unset(struct run_context *ctx) {
    for (int i = 0; i < ctx->opts->n_pass_env; i++) {
        if (getenv(ctx->opts->pass_env[i]))
            continue;
        run_warn(ctx->bundle, "--pass-env %.64s: %.64s is not set here; nothing was handed over for it",
                 ctx->opts->pass_env[i], ctx->opts->pass_env[i]);
    }
}

/* The variables of the caller's environment the command does not get (the
 * allowlist, --pass-env), by name, into sb->env_dropped for the Bundle;
 * and, when build tools' own variables are among them (PYTHONPATH,
 * GOFLAGS, CC...), one line saying so: they went silently, and the
 * command's failure inside (an import error, GOPROXY back to its
 * default) did not say why (found by a review).  Names only, never
 * values. */
#define ENV_DROPPED_MAX 256
static void note_env_dropped(struct sandbox *sb) {
    /* not EDITOR, CI and the like: set in most shells and CI jobs, they
     * would make the note a line of every run */
    static const char *const tools[] = {
        "PYTHONPATH",  "PYTHONHOME",      "GOFLAGS",          "GOPROXY",           "GOPRIVATE",
        "GONOSUMDB",   "GOPATH",          "NODE_OPTIONS",     "NODE_PATH",         "CC",
        "CXX",         "CFLAGS",          "CXXFLAGS",         "CPPFLAGS",          "LDFLAGS",
        "MAKEFLAGS",   "PKG_CONFIG_PATH", "LD_LIBRARY_PATH",  "JAVA_TOOL_OPTIONS", "MAVEN_OPTS",
        "GRADLE_OPTS", "RUSTFLAGS",       "CARGO_TARGET_DIR",
    };
    extern char **environ;
    sb->env_dropped = json_array();
    char shown[256] = "";
    size_t n_shown = 0;
    for (char **e = environ; e && *e && sb->env_dropped; e++) {
        const char *eq = strchr(*e, '=');
        size_t nl = eq ? (size_t)(eq - *e) : strlen(*e);
        bool kept = false;
        for (char **k = sb->plan.envp; k && *k && !kept; k++)
            kept = strncmp(*k, *e, nl) == 0 && (*k)[nl] == '=';
        if (kept || !nl)
            continue;
        _cleanup_free_ char *name = strndup(*e, nl);
        if (!name)
            break;
        if (json_array_size(sb->env_dropped) < ENV_DROPPED_MAX)
            json_array_append_new(sb->env_dropped, json_string(name)); /* NULL (not UTF-8): not added */
        for (size_t i = 0; i < ARRAY_SIZE(tools); i++)
            if (strcmp(name, tools[i]) == 0 && strlen(shown) + nl + 3 < sizeof shown) {
                snprintf(shown + strlen(shown), sizeof shown - strlen(shown), "%s%s", n_shown++ ? ", " : "", name);
                break;
            }
    }
    if (n_shown)
        fprintf(stderr,
                "pvisor run: note: the command does not get %s: --safe hands over only an allowlist of the "
                "environment (the Bundle lists what it left out); --pass-env NAME hands one over\n",
                shown);
}

struct sandbox *sandbox_new(struct run_context *ctx) {
    void *p = mmap(NULL, sizeof(struct sandbox), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    struct sandbox *sb = p;
    sb->plan_fd = sb->sync_r = sb->sync_w = sb->go_r = sb->go_w = sb->end_r = sb->end_w = -1;
    sb->home_fd = -1;
    for (int k = 0; k < LAUNCH_TMPFS_N; k++)
        sb->tmpfs_fd[k] = -1;
    sb->leftovers = -1;
    sb->ctx = ctx;
    return sb;
}

void sandbox_delete(struct sandbox *sb) {
    if (!sb)
        return;
    if (sb->home_thread_started) /* not joined by sandbox_end_home: it uses sb */
        pthread_join(sb->home_thread, NULL);
    munmap(sb, sizeof *sb);
}

/* The workspace's own .git/config holding a credential (a remote's URL
 * with a token: a clone made with one, CI's checkout): the workspace is
 * the command's to read, so it reads that too, unlike the same line in
 * git's global config (kept from it).  Said, not hidden: git needs the
 * file (found by a red-team pass). */
static void warn_workspace_git_credential(struct run_context *ctx) {
    _cleanup_free_ char *path = path_join(ctx->workspace, ".git/config");
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    if (!path || read_file_at(AT_FDCWD, path, 4 << 20, &text, &len) < 0 ||
        !plan_gitconfig_text_holds_credential(text, len))
        return;
    _cleanup_free_ char *e = term_escape(path);
    run_warn(ctx->bundle,
             "%s holds a credential (a URL with a token, an http.extraHeader, a token or password key): "
             "the command can read it, as it reads everything in the workspace; to keep it from the command, "
             "move the token to a credential helper's store (git remote set-url NAME URL-without-it, then "
             "~/.git-credentials, which the sandbox hides)",
             e ? e : ".git/config");
}

static int prepare(struct run_context *ctx, const struct agent_hooks *hooks, struct sandbox *ret_sb, char **ret_error) {
    /* ret_sb holds nothing yet (sandbox_new); on failure it is released
     * again (sandbox_release) */
    struct sandbox *sb = ret_sb;
    /* (a workspace under the sandbox's own /dev, /proc or /sys is a usage
     * error before the run is recorded: cmd_run.c, resolve_workspace; so
     * is a grant of a credential location: sandbox_check_credentials) */
    _cleanup_free_ char *home = NULL;
    int r = 0;
    if (ctx->creds) {
        /* resolved before the run was recorded (sandbox_check_credentials) */
        home = TAKE_PTR(ctx->creds->home);
        sandbox_move_credentials(ctx->creds, sb, true);
        ctx->creds = NULL;
    } else if ((r = sandbox_resolve_home_credentials(ctx->cwd, ctx->workspace, ctx->opts, sb, &home, ret_error)) < 0) {
        sandbox_release(sb);
        return r;
    }
    for (size_t i = 0; sb->cred_moved && sb->cred_moved[i]; i++)
        if (plan_moved_is_gitconfig(sb->cred_moved[i])) {
            _cleanup_free_ char *e = term_escape(sb->cred_moved[i]);
            run_warn(ctx->bundle,
                     "%s holds a credential (a URL with a token, an http.extraHeader, a token or password key), "
                     "or includes a file that does: "
                     "it is kept from the command, and your git settings there with it (user.name, aliases); "
                     "keep the token in a credential helper's store (~/.git-credentials, which the sandbox hides "
                     "too) to give the command the rest",
                     e ? e : "git's global config");
        }
    warn_workspace_git_credential(ctx);
    if (home && (r = sandbox_prepare_home_view(ctx, home, sb)) < 0) {
        if ((r == -E2BIG
                 ? asprintf(ret_error,
                            "cannot prepare the copy-on-write view of HOME (%s): more than %d paths to mask "
                            "there (the credential locations of HOME and of every other home or name of HOME "
                            "it holds, and the stores the environment moves there); set HOME to a directory "
                            "that holds fewer",
                            home, SANDBOX_HOME_MASK_MAX)
                 : asprintf(ret_error, "cannot prepare the copy-on-write view of HOME (%s): %s%s", home, strerror(-r),
                            r == -EACCES ? " (HOME names a directory you cannot read: set HOME to your own home)"
                                         : "")) < 0)
            *ret_error = NULL;
        sandbox_release(sb);
        return r;
    }

    PV_MARK("Q_homeview");
    warn_git_outside(ctx);
    warn_pass_env_unset(ctx);
    struct dirlist rt = {0};
    sandbox_gather_runtime(ctx, home, &rt);
    const char *home_files[32];
    size_t n_home_files = 0;
    for (const char *const *f = plan_home_config_files; home && *f && n_home_files < 32; f++) {
        _cleanup_free_ char *full = path_join(home, *f);
        struct stat st;
        if (full && lstat(full, &st) == 0 && (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode)))
            home_files[n_home_files++] = *f;
    }

    /* Resolve --access paths: absolute, symlinks resolved (the rule names
     * what the path means now); a missing path is an error. */
    struct access_rule rules[POLICY_MAX_ACCESS];
    char *resolved[POLICY_MAX_ACCESS] = {0};
    size_t n_rules = 0;
    for (int i = 0; i < ctx->opts->n_access; i++) {
        resolved[i] = realpath_memo(ctx->opts->access[i].path);
        /* a read-write grant that leads somewhere through a link an agent
         * could have left (an earlier run's '--allow-write ~/.cache' made
         * ~/.cache/pip a link to ~/.config/systemd/user, and a later
         * '--allow-write ~/.cache/pip' wrote a unit there) */
        _cleanup_free_ char *link = NULL;
        if (resolved[i] && ctx->opts->access[i].kind == ACCESS_RW &&
            (r = sandbox_grant_agent_link(ctx, ctx->opts->access[i].path, &link)) != 0) {
            if (r < 0 ? asprintf(ret_error, "--access/--allow-write '%s': %s", ctx->opts->access[i].path,
                                 strerror(-r)) < 0
                      : asprintf(ret_error,
                                 "--access rw:/--allow-write '%s' leads to %s through the link %s, in a directory "
                                 "agents wrote in (the workspace, or an earlier run's read-write grant): a link an "
                                 "agent left there chooses what the command may write; name the directory itself "
                                 "(--allow-write %s) if that is the one you mean",
                                 ctx->opts->access[i].path, resolved[i], link, resolved[i]) < 0)
                *ret_error = NULL;
            r = r < 0 ? r : -EPERM;
            for (int k = 0; k <= i; k++)
                free(resolved[k]);
            dirlist_free(&rt);
            sandbox_release(sb);
            return r;
        }
        if (!resolved[i]) {
            r = -errno;
            if (asprintf(ret_error, "--access/--allow-write '%s': %s", ctx->opts->access[i].path, strerror(errno)) < 0)
                *ret_error = NULL;
            for (int k = 0; k < i; k++)
                free(resolved[k]);
            dirlist_free(&rt);
            sandbox_release(sb); /* HOME's view, the masks */
            return r;
        }
        rules[n_rules++] = (struct access_rule){.kind = ctx->opts->access[i].kind, .path = resolved[i]};
    }
    PV_MARK("Q_rt");
    if ((r = sandbox_prepare_ws_mask(ctx, home, rules, n_rules, sb)) < 0) {
        if (r == -E2BIG ? asprintf(ret_error,
                                   "cannot list what the workspace view must mask: more than %d paths (the "
                                   "credential locations of every name of HOME the workspace holds, --access deny: "
                                   "rules, stages kept in it); run in a directory that holds fewer",
                                   SANDBOX_WS_MASK_MAX) < 0
                        : asprintf(ret_error, "cannot list what the workspace view must mask: %s", strerror(-r)) < 0)
            *ret_error = NULL;
        for (size_t k = 0; k < n_rules; k++)
            free(resolved[k]);
        dirlist_free(&rt);
        sandbox_release(sb);
        return r;
    }

    PV_MARK("Q_wsmask");
    /* The agent socket lives in the run directory (private to the user). */
    _cleanup_free_ char *sock = path_join(ctx->run_dir, "agent.sock");
    json_t *status = json_pack("{s:s, s:s, s:s?, s:s}", "run_id", ctx->run_id, "workspace", ctx->workspace, "stage",
                               json_string_value(json_object_get(json_object_get(ctx->bundle, "stage"), "path")),
                               "state", "running");
    _cleanup_free_ char *status_s = status ? json_dumps(status, JSON_COMPACT) : NULL;
    json_decref(status);
    int ar = sock && status_s ? agent_socket_open(sock, status_s, hooks, &sb->agent) : -ENOMEM;
    if (ar < 0) {
        char w[300];
        snprintf(w, sizeof w, "no agent socket for this run (%s: %s)", sock ? sock : "?", strerror(-ar));
        bundle_add_warning(ctx->bundle, w);
        sb->agent = NULL;
    }

    /* --limit: a cgroup leaf where the host delegates one (while we are
     * still single-threaded: the supervisor may have to move itself), the
     * per-process rlimits for the rest. */
    const struct run_limits *lim = &ctx->opts->limits;
    if (policy_has_limits(lim)) {
        struct cgroup_where *w = calloc(1, sizeof *w);
        bool ok[_LIMIT_MAX] = {false};
        r = w ? 0 : -ENOMEM;
        if (w) {
            (void)cgroup_locate(w);
            r = cgroup_run_create(w, lim, ctx->run_id, &sb->cg, ok, sb->cg_reason, sizeof sb->cg_reason);
        }
        if (sb->cg) {
            snprintf(sb->cg_path, sizeof sb->cg_path, "%s", cgroup_run_path(sb->cg));
            const char *leaf = strrchr(sb->cg_path, '/');
            snprintf(sb->cg_hierarchy, sizeof sb->cg_hierarchy, "%s%s", strcmp(w->path, "/") == 0 ? "" : w->path,
                     leaf ? leaf : "");
        }
        free(w);
        if (r < 0) {
            dirlist_free(&rt);
            for (size_t k = 0; k < n_rules; k++)
                free(resolved[k]);
            sandbox_release(sb);
            return r;
        }
        limits_decide(lim, ok, getuid() == 0, &sb->limits);
    }

    sb->tmpfs_max = policy_tmpfs_max(cgroup_memory_limit(), ctx->opts->limits.mem_bytes, &sb->tmpfs_bound);
    struct plan_inputs in = {
        .rlimit_as = sb->limits.rlimit_as,
        .rlimit_cpu = sb->limits.rlimit_cpu,
        .rlimit_nproc = sb->limits.rlimit_nproc,
        .tmpfs_max = sb->tmpfs_max,
        .agent_socket = sb->agent ? sock : NULL,
        .home_view = sb->home_fd >= 0 ? sb->home_view : NULL,
        .home_view_masks = sb->home_fd >= 0,
        .home_hide = sb->home_hide,
        .n_home_hide = sb->n_home_hide,
        .access = rules,
        .n_access = n_rules,
        .opts = ctx->opts,
        .environ = environ,
        .home = home,
        .workspace = ctx->workspace,
        .cwd = ctx->cwd,
        .uid = (uint32_t)getuid(),
        .gid = (uint32_t)getgid(),
        .runtime_dirs = (const char *const *)rt.v,
        .n_runtime_dirs = rt.n,
        .home_files = home_files,
        .n_home_files = n_home_files,
    };
    PV_MARK("Q_agent");
    sandbox_credentials_into(sb, &in);
    r = plan_build(&in, &sb->plan, ret_error);
    PV_MARK("Q_plan");
    if (r >= 0)
        note_env_dropped(sb);
    dirlist_free(&rt);
    sb->rules = json_array();
    for (size_t k = 0; k < n_rules; k++) {
        if (rules[k].kind != ACCESS_DENY)
            sandbox_grant_missing_creds(home, sb, rules[k].path);
        json_array_append_new(sb->rules,
                              json_pack("{s:s, s:s}", "kind", access_kind_name(rules[k].kind), "path", rules[k].path));
        if (rules[k].kind == ACCESS_RW) {
            sb->n_rw++;
            sb->n_rw_home += home && path_overlaps(rules[k].path, home);
        }
        free(resolved[k]);
    }
    if (r < 0) {
        sandbox_release(sb);
        return r;
    }
    plan_set_exec_path(&sb->plan, ctx->workspace);
    /* A pty for the command whenever one of its descriptors is a terminal
     * (it must hold none of the user's: launch.c, struct term); the keys
     * go to it when its stdin is the terminal and pvisor runs in that
     * terminal's foreground (as exec_run hands the foreground over: in a
     * pipeline, another member may be the one reading the terminal). */
    sb->plan.tty_input = isatty(STDIN_FILENO) == 1 && tcgetpgrp(STDIN_FILENO) == getpgrp();
    sb->plan.tty = isatty(STDIN_FILENO) == 1 || isatty(STDOUT_FILENO) == 1 || isatty(STDERR_FILENO) == 1;
    /* As root the command would own root's files in the projections: they
     * are idmapped (idmap.c), while we are in the initial user namespace. */
    sb->as_root = getuid() == 0;
    /* before enter_private_namespace makes the run's: what the command's
     * user namespace is compared with (sandbox_record) */
    ssize_t un = readlink("/proc/self/ns/user", sb->host_userns, sizeof sb->host_userns - 1);
    sb->host_userns[un > 0 ? un : 0] = '\0';
    sb->home_system = home && plan_home_is_system(home);
    sb->home_in_ws = home && !sb->home_system && path_within(home, ctx->workspace);
    if (sb->as_root) {
        int n = launch_idmap_projections(&sb->plan, home, &sb->idmap_failed, sb->idmap_why, sizeof sb->idmap_why);
        if (n > 0 && !(sb->keep = calloc((size_t)n, sizeof *sb->keep))) {
            sandbox_release(sb);
            return -ENOMEM;
        }
        for (size_t i = 0; n > 0 && i < sb->plan.n_mounts; i++)
            if (sb->plan.mounts[i].fd >= 0)
                sb->keep[sb->n_keep++] = sb->plan.mounts[i].fd;
    }

    PV_MARK("Q_idmap");
    for (size_t i = 0; sb->home_system && i < sb->plan.n_mounts; i++)
        if (sb->plan.mounts[i].kind == PLAN_HIDE && strcmp(home, "/") != 0 &&
            path_within(sb->plan.mounts[i].path, home))
            sb->n_home_sys_hides++;

    json_t *j = plan_to_json(&sb->plan);
    _cleanup_free_ char *s = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!s) {
        sandbox_release(sb); /* the agent socket, HOME's view, the plan */
        return -ENOMEM;
    }
    size_t len = strlen(s);
    if (len > PLAN_MAX_BYTES) { /* the launcher reads at most that much */
        if (asprintf(ret_error,
                     "the command's arguments and environment take %zu bytes in the sandbox's launch plan, which "
                     "holds at most %u (arguments that are not UTF-8 count twice)",
                     len, PLAN_MAX_BYTES) < 0)
            *ret_error = NULL;
        sandbox_release(sb);
        return -E2BIG;
    }
    sb->plan_fd = memfd_create("pvisor-plan", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (sb->plan_fd < 0 || write(sb->plan_fd, s, len) != (ssize_t)len || lseek(sb->plan_fd, 0, SEEK_SET) < 0 ||
        fcntl(sb->plan_fd, F_ADD_SEALS, F_SEAL_WRITE | F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
        r = -errno;
        sandbox_release(sb);
        return r;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0) {
        r = -errno;
        sandbox_release(sb);
        return r;
    }
    sb->sync_r = p[0];
    sb->sync_w = p[1];
    if (pipe2(p, O_CLOEXEC) < 0) {
        r = -errno;
        sandbox_release(sb);
        return r;
    }
    sb->go_r = p[0];
    sb->go_w = p[1];
    /* a socket: init hands the egress broker's listening socket over it */
    if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, p) < 0) {
        r = -errno;
        sandbox_release(sb);
        return r;
    }
    sb->end_r = p[0];
    sb->end_w = p[1];
    if (fcntl(sb->end_r, F_SETFL, O_NONBLOCK) < 0) {
        r = -errno;
        sandbox_release(sb);
        return r;
    }
    sb->pass[0] = sb->plan_fd;
    sb->pass[1] = sb->sync_w;
    sb->pass[2] = sb->go_r;
    sb->pass[3] = sb->end_w;
    return 0;
}

int sandbox_attach_cgroup(struct sandbox *sb, pid_t child) {
    return sb->cg ? cgroup_run_attach(sb->cg, child) : 0;
}

int64_t sandbox_cpu_watch(void *userdata) {
    struct sandbox *sb = userdata;
    return sb->limits.mech[LIMIT_CPU] == LIMIT_MECH_CGROUP ? cgroup_run_cpu_watch(sb->cg) : -1;
}

static json_t *stat_json(int64_t v) {
    return v < 0 ? json_null() : json_integer(v);
}

void sandbox_finish_resources(struct sandbox *sb, int wait_status) {
    /* --limit cpu as RLIMIT_CPU (no cgroup leaf: an ordinary user's on most
     * hosts): the command killed by SIGXCPU was told of by root's cgroup
     * budget only, and the user saw a bare exit status 152 */
    if (sb->limits.mech[LIMIT_CPU] == LIMIT_MECH_RLIMIT_PROCESS && WIFSIGNALED(wait_status) &&
        WTERMSIG(wait_status) == SIGXCPU) {
        char w[192];
        snprintf(w, sizeof w,
                 "the command used up its CPU time (--limit cpu=%llus, per process here: RLIMIT_CPU) and was "
                 "killed by SIGXCPU",
                 (unsigned long long)sb->ctx->opts->limits.cpu_s);
        bundle_add_warning(sb->ctx->bundle, w);
        fprintf(stderr, "pvisor run: %s\n", w);
    }
    if (!sb->cg)
        return;
    struct cgroup_stats st;
    int r = cgroup_run_finish(sb->cg, &st);
    sb->cg = NULL;
    json_t *b = sb->ctx->bundle;
    json_t *ev =
        json_object_get(json_object_get(json_object_get(b, "dimensions"), dimension_name(DIM_RESOURCES)), "evidence");
    if (json_is_object(ev))
        json_object_set_new(ev, "observed",
                            json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:b}", "memory_peak_bytes",
                                      stat_json(st.memory_peak), "memory_max_events", stat_json(st.memory_max_events),
                                      "oom_events", stat_json(st.oom_events), "oom_kill_events",
                                      stat_json(st.oom_kill_events), "pids_peak", stat_json(st.pids_peak),
                                      "pids_max_events", stat_json(st.pids_max_events), "cpu_usage_usec",
                                      stat_json(st.cpu_usage_usec), "cpu_budget_exhausted", st.cpu_budget_exhausted));
    char w[PATH_MAX + 128];
    if (st.cpu_budget_exhausted) {
        snprintf(w, sizeof w, "the run used up its CPU time (--limit cpu=%llus); its whole process tree was killed",
                 (unsigned long long)sb->ctx->opts->limits.cpu_s);
        bundle_add_warning(b, w);
        fprintf(stderr, "pvisor run: %s\n", w);
    }
    if (st.oom_kill_events > 0) {
        snprintf(w, sizeof w, "--limit mem: the kernel killed %lld process(es) of the run for memory",
                 (long long)st.oom_kill_events);
        bundle_add_warning(b, w);
    }
    if (st.pids_max_events > 0) {
        snprintf(w, sizeof w, "--limit pids: %lld fork(s) of the run were refused", (long long)st.pids_max_events);
        bundle_add_warning(b, w);
    }
    if (r < 0) {
        snprintf(w, sizeof w, "the run's cgroup %s could not be removed: %s", sb->cg_path, strerror(-r));
        bundle_add_warning(b, w);
    }
}

bool sandbox_end_home(struct sandbox *sb) {
    return sb->home_thread_started && sandbox_release_home_view(sb);
}

static void release(struct sandbox *sb, bool keep_home_thread);

void sandbox_release(struct sandbox *sb) {
    release(sb, false);
}

void sandbox_release_but_home(struct sandbox *sb) {
    release(sb, true);
}

static void release(struct sandbox *sb, bool keep_home_thread) {
    sandbox_restore_tty(sb);
    json_decref(sb->rules);
    json_decref(sb->env_dropped);
    sb->env_dropped = NULL;
    sb->rules = NULL;
    sandbox_release_credentials(sb);
    for (size_t i = 0; i < sb->n_ws_mask; i++)
        free(sb->ws_mask[i]);
    for (size_t i = 0; i < sb->n_ws_sealed; i++)
        free(sb->ws_sealed[i]);
    sb->n_ws_mask = sb->n_ws_sealed = 0;
    if (sb->plan_fd >= 0)
        close(sb->plan_fd);
    if (sb->sync_r >= 0)
        close(sb->sync_r);
    if (sb->sync_w >= 0)
        close(sb->sync_w);
    if (sb->end_r >= 0)
        close(sb->end_r);
    if (sb->end_w >= 0)
        close(sb->end_w);
    if (sb->go_r >= 0)
        close(sb->go_r);
    if (sb->go_w >= 0)
        close(sb->go_w);
    sb->plan_fd = sb->sync_r = sb->sync_w = sb->go_r = sb->go_w = sb->end_r = sb->end_w = -1;
    sandbox_close_tmpfs(sb);
    json_decref(sb->report);
    sb->report = NULL;
    if (sb->agent && sb->ctx) {
        agent_socket_stop(sb->agent);
        json_t *a = json_object_get(sb->ctx->bundle, "agent_socket"); /* may hold the checkpoints */
        if (!json_is_object(a)) {
            a = json_object();
            bundle_set_json(sb->ctx->bundle, "agent_socket", a);
        }
        json_object_set_new(a, "available", json_true());
        json_object_set_new(a, "requests", json_integer((json_int_t)agent_socket_requests(sb->agent)));
    }
    agent_socket_close(sb->agent);
    sb->agent = NULL;
    broker_free(sb->broker);
    sb->broker = NULL;
    dns_stub_free(sb->dns);
    sb->dns = NULL;
    if (!keep_home_thread || !sb->home_thread_started)
        (void)sandbox_release_home_view(sb);
    launch_idmap_close(&sb->plan);
    free(sb->keep);
    sb->keep = NULL;
    sb->n_keep = 0;
    plan_free(&sb->plan);
    if (sb->cg) /* a failure path: sandbox_finish_resources() did not run */
        (void)cgroup_run_finish(sb->cg, NULL);
    sb->cg = NULL;
}

int sandbox_prepare(struct run_context *ctx, const struct agent_hooks *hooks, struct sandbox *ret_sb,
                    char **ret_error) {
    realpath_memo_begin();
    int r = prepare(ctx, hooks, ret_sb, ret_error);
    realpath_memo_end();
    return r;
}
