/* run_sandbox_runtime.c: which host directories a sandboxed command needs
 * projected (read-only) besides the system's: where the command, its link
 * target and its #! interpreter live, the entries of PATH, the roots of
 * the tool managers the environment names; each widened to its toolchain
 * (/opt/<name>, a tool's directory in HOME) unless that holds homes or
 * credential locations, and only toolchains where the agent could have
 * named the directory (the workspace, grants, earlier agents'
 * workspaces).  Moved as is from run_sandbox.c. */
#include "cli/cli.h"
#include "cli/run.h"
#include "cli/run_sandbox.h"
#include "cli/runs.h"
#include "policy/plan_build.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void dirlist_add(struct dirlist *l, const char *d) {
    if (l->n >= MAX_RUNTIME_DIRS || !d || d[0] != '/')
        return;
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->v[i], d) == 0)
            return;
    char *c = strdup(d);
    if (c)
        l->v[l->n++] = c;
}

void dirlist_free(struct dirlist *l) {
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i]);
    l->n = 0;
}

/* Does the directory fd hold a credential location (fd/.ssh, ...), one
 * of plan_credential_paths? */
static bool holds_credentials_at(int fd) {
    struct stat st;
    for (const char *const *c = plan_credential_paths; *c; c++)
        if (fstatat(fd, *c, &st, AT_SYMLINK_NOFOLLOW) == 0)
            return true;
    return false;
}

/* The same, by fd's listing (for scans of many directories): only the
 * locations whose first component it lists are looked up.  Before, such
 * scans looked for ten locations that mark a home, and a directory
 * holding only others (.npmrc, .claude/.credentials.json) was widened
 * over (found by a red-team pass). */
static bool holds_credentials_listed(int fd) {
    _cleanup_closedir_ DIR *d = NULL;
    if (dup_opendir(fd, &d) < 0)
        return holds_credentials_at(fd);
    struct stat st;
    for (struct dirent *de; (de = readdir_no_dots(d));) {
        size_t nl = strlen(de->d_name);
        if (de->d_name[0] != '.' && strcmp(de->d_name, "snap") != 0)
            continue; /* every location starts with a dot name but snap's */
        for (const char *const *c = plan_credential_paths; *c; c++)
            if (strncmp(*c, de->d_name, nl) == 0 && ((*c)[nl] == '\0' || (*c)[nl] == '/') &&
                fstatat(fd, *c, &st, AT_SYMLINK_NOFOLLOW) == 0)
                return true;
    }
    return false;
}

/* The homes /etc/passwd lists (read as a file, not through NSS), read
 * once per run (gather_runtime frees them), up to PASSWD_HOMES_MAX; a
 * longer file is read again for each directory asked about. */
#define PASSWD_HOMES_MAX 65536
static struct {
    bool loaded, overflow; /* overflow: more than the maximum, or no memory */
    char **v;
    size_t n, cap;
} passwd_homes;

static void passwd_homes_load(void) {
    if (passwd_homes.loaded)
        return;
    passwd_homes.loaded = true;
    FILE *f = fopen("/etc/passwd", "re");
    if (!f)
        return;
    for (struct passwd *pw; (pw = fgetpwent(f));) {
        if (!pw->pw_dir || pw->pw_dir[0] != '/')
            continue;
        if (passwd_homes.n == passwd_homes.cap) {
            size_t nc = passwd_homes.cap ? passwd_homes.cap * 2 : 64;
            char **nv = nc <= PASSWD_HOMES_MAX ? realloc(passwd_homes.v, nc * sizeof *nv) : NULL;
            if (!nv) {
                passwd_homes.overflow = true;
                break;
            }
            passwd_homes.v = nv;
            passwd_homes.cap = nc;
        }
        if (!(passwd_homes.v[passwd_homes.n] = strdup(pw->pw_dir))) {
            passwd_homes.overflow = true;
            break;
        }
        passwd_homes.n++;
    }
    fclose(f);
}

static void passwd_homes_free(void) {
    for (size_t i = 0; i < passwd_homes.n; i++)
        free(passwd_homes.v[i]);
    free(passwd_homes.v);
    passwd_homes.v = NULL;
    passwd_homes.n = passwd_homes.cap = 0;
    passwd_homes.loaded = passwd_homes.overflow = false;
}

static bool home_holds_credentials(const char *home, const char *dir) {
    if (home[0] != '/' || !path_within(home, dir))
        return false;
    _cleanup_close_ int hfd = open(home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    return hfd >= 0 && holds_credentials_at(hfd);
}

/* Is a home listed in /etc/passwd at or below dir, and does it hold a
 * credential location? */
static bool passwd_home_within(const char *dir) {
    passwd_homes_load();
    bool hit = false;
    if (!passwd_homes.overflow) {
        for (size_t i = 0; !hit && i < passwd_homes.n; i++)
            hit = home_holds_credentials(passwd_homes.v[i], dir);
        return hit;
    }
    FILE *f = fopen("/etc/passwd", "re");
    for (struct passwd *pw; f && !hit && (pw = fgetpwent(f));)
        hit = pw->pw_dir && home_holds_credentials(pw->pw_dir, dir);
    if (f)
        fclose(f);
    return hit;
}

/* Does any directory below fd, down to depth levels, hold a credential
 * location?  Looks into at most *budget directories; past that, answers
 * closed (a large toolchain, such as Homebrew's Cellar, is not walked
 * whole when closed is false: what is past the budget is taken as holding
 * none). */
static bool creds_below(int fd, int depth, int *budget, bool closed) {
    _cleanup_closedir_ DIR *d = NULL;
    if (depth <= 0 || dup_opendir(fd, &d) < 0)
        return depth > 0 && closed;
    for (struct dirent *de; (de = readdir_no_dots(d));) {
        if (de->d_type != DT_DIR && de->d_type != DT_UNKNOWN)
            continue;
        if (--*budget < 0)
            return closed;
        _cleanup_close_ int sub = openat(fd, de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0 && (holds_credentials_listed(sub) || creds_below(sub, depth - 1, budget, closed)))
            return true;
    }
    /* a listing that failed part way is not its end: what it did not show
     * may hold anything */
    return errno != 0 && closed;
}

/* Is dir a home, or a parent of homes: does it hold a credential location
 * (dir/.ssh), do its subdirectories (dir/bob/.ssh), or is a home listed in
 * /etc/passwd that holds one at any depth below it?  Fails closed past 256
 * subdirectories.  The system hierarchies, projected whole anyway, are
 * not looked into. */
static bool holds_homes(const char *dir) {
    static const char *const system[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"};
    for (size_t i = 0; i < ARRAY_SIZE(system); i++)
        if (path_within(dir, system[i]))
            return false;
    _cleanup_close_ int fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return false; /* not projected: add_runtime_dir wants a directory */
    if (holds_credentials_at(fd) || passwd_home_within(dir))
        return true;
    /* one we may not list (mode 0711) may hold anything: closed */
    _cleanup_close_ int rfd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int budget = 256;
    return rfd < 0 || creds_below(rfd, 1, &budget, true);
}

struct agent_dirs;
static bool agent_holds(const struct agent_dirs *a, const char *real);

/* Map a host directory that a command needs to what should be projected:
 * the top-level tool dir under HOME (~/.pyenv), /opt/<name>, or itself.
 * agent: NULL, or where the agent writes when it may have named dir: then
 * only a toolchain, or dir itself where it leads inside those directories
 * (an earlier run's workspace, whose files the agent saw). */
static bool add_runtime_dir(struct dirlist *l, const char *home, const char *dir, const struct agent_dirs *agent) {
    char buf[PATH_MAX];
    bool tools_only = agent != NULL;
    _cleanup_free_ char *real = realpath_memo(dir);
    const char *d = real ? real : dir;
    const char *root = plan_home_runtime_root(home, d, buf, sizeof buf);
    if (!root && tools_only && agent_holds(agent, real) && !(home && path_within(real, home)))
        root = real; /* as it is: not widened below */
    /* A tool's directory that HOME names but that lives elsewhere
     * (~/.pyenv a link to /data/pyenv): the HOME view shows the link, so
     * the directory it leads to is what the tool needs whole, by the same
     * rules as one outside HOME (below).  Not for what the agent names: its
     * links lead where it chose. */
    _cleanup_free_ char *linked = NULL;
    if (!root && !tools_only && home && real && !path_within(real, home)) {
        char lbuf[PATH_MAX];
        const char *lroot = plan_home_runtime_root(home, dir, lbuf, sizeof lbuf);
        linked = lroot ? realpath_memo(lroot) : NULL;
        if (linked && path_within(d, linked) && !path_within(linked, home))
            root = linked;
    }
    if (home && !root && path_within(d, home))
        return true; /* under HOME but not projectable (credentials, HOME itself) */
    if (!root) {
        /* A tool manager in another home (another user's ~/.pyenv/shims, a
         * PATH kept when HOME was changed): what the same rules as for
         * HOME allow there, taking the directory that holds the first
         * dot-directory for that home: a tool's whole dot-directory, a
         * .local/.config/.cache entry as given, nothing holding a
         * credential location. */
        const char *dot = strstr(d, "/.");
        if (dot && tools_only)
            return false; /* another home's: not for what the agent names */
        if (dot && dot[2] != '\0' && dot[2] != '/' && dot[2] != '.') {
            char other[PATH_MAX];
            size_t hl = (size_t)(dot - d);
            if (hl == 0 || hl >= sizeof other)
                return true;
            memcpy(other, d, hl);
            other[hl] = '\0';
            if (!(root = plan_home_runtime_root(other, d, buf, sizeof buf)))
                return true;
        }
    }
    if (!root && strncmp(d, "/opt/", 5) == 0) {
        size_t dl = strlen(d);
        const char *slash = memchr(d + 5, '/', dl - 5);
        size_t len = slash ? (size_t)(slash - d) : dl;
        if (len < sizeof buf) {
            memcpy(buf, d, len);
            buf[len] = '\0';
            root = buf;
        }
    }
    if (!root && tools_only)
        return false;
    if (!root)
        root = d;
    /* A directory widened from the entry (/opt/app for /opt/app/bin, a
     * tool's dot-directory) holds no home three levels down, or only the
     * entry itself is projected; and no projection is a home of its own
     * (PATH=/home/bob) or a parent of homes. */
    if (!home || !path_within(root, home)) { /* HOME's own are shown by its view, never projected */
        if (strcmp(root, d) != 0) {
            _cleanup_close_ int rfd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
            int budget = 512;
            if (rfd < 0 || creds_below(rfd, 3, &budget, false)) /* unlistable: not widened */
                root = d;
        }
        /* a home /etc/passwd lists deeper down: the entry alone, too */
        if (holds_homes(root) && (strcmp(root, d) == 0 || holds_homes(root = d)))
            return true;
    }
    struct stat st;
    if (stat(root, &st) == 0 && S_ISDIR(st.st_mode) && strcmp(root, "/") != 0)
        dirlist_add(l, root);
    return true;
}

static bool add_dir_of(struct dirlist *l, const char *home, const char *file, const struct agent_dirs *agent) {
    _cleanup_free_ char *c = strdup(file);
    if (!c)
        return true;
    char *slash = strrchr(c, '/');
    if (!slash || slash == c)
        return true;
    *slash = '\0';
    return add_runtime_dir(l, home, c, agent);
}

/* The interpreter of a #! script, if any.  Only a regular file is read,
 * without waiting: the command may be a FIFO the agent left in the
 * workspace, which no exec would run anyway. */
static char *interpreter_of(const char *file) {
    _cleanup_close_ int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return NULL;
    char buf[256];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    if (n < 3 || buf[0] != '#' || buf[1] != '!')
        return NULL;
    buf[n] = '\0';
    char *p = buf + 2;
    while (*p == ' ' || *p == '\t')
        p++;
    char *end = p;
    while (*end && *end != ' ' && *end != '\t' && *end != '\n')
        end++;
    *end = '\0';
    return p[0] == '/' ? strdup(p) : NULL;
}

/* The first symlink on the way to a path as the user names it (HOME=/home/u
 * where /home links to var/home, as Fedora's atomic editions have it; a
 * workspace entered through a link): a read-only projection of a symlink
 * replicates it in the new root (mounts.c), so that absolute paths the
 * user's tools recorded that way resolve inside too.  It shows a link's
 * target string, nothing else; the plan leaves out one inside HOME or
 * overlapping the workspace. */
static void add_logical_link(struct dirlist *l, const char *path) {
    char buf[PATH_MAX];
    if (!path || path[0] != '/' || snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf ||
        path_within(buf, "/proc") || path_within(buf, "/sys") || path_within(buf, "/dev"))
        return; /* the sandbox's own /proc and /dev, no /sys */
    for (char *c = buf + 1; *c;) {
        char *next = strchr(c, '/');
        if (next)
            *next = '\0';
        struct stat st;
        if (lstat(buf, &st) < 0)
            return;
        if (S_ISLNK(st.st_mode)) {
            dirlist_add(l, buf);
            return;
        }
        if (!next)
            return;
        *next = '/';
        c = next + 1;
    }
}

/* Does resolving path meet the workspace: is it, or a directory it goes
 * through (its symlinks followed one at a time), inside one of ws?  There the
 * agent may have made a link (an applied '.venv/bin' -> /srv/data, a
 * workspace that is HOME with its '.local/bin'), so what the path leads to
 * is the agent's choice, not the user's.  Past 40 links: yes. */
static bool within_any(const char *path, char *const *dirs, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (path_within(path, dirs[i]))
            return true;
    return false;
}

/* links_only: whether resolving path follows a symlink that lies in one
 * of ws (the link itself, not what it leads to); *ret_link: that link
 * (malloc'd), when given. */
static bool resolve_meets(const char *path, char *const *ws, size_t n_ws, bool links_only, char **ret_link) {
    char done[PATH_MAX], pending[PATH_MAX];
    if (!path || path[0] != '/' || snprintf(pending, sizeof pending, "%s", path) >= (int)sizeof pending)
        return false;
    done[0] = '\0';
    int links = 0;
    for (char *p = pending;;) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        char *e = strchr(p, '/');
        size_t n = e ? (size_t)(e - p) : strlen(p), dl = strlen(done);
        if (n == 1 && p[0] == '.') {
            p += n;
            continue;
        }
        if (n == 2 && p[0] == '.' && p[1] == '.') {
            char *s = strrchr(done, '/');
            if (s)
                *s = '\0';
            p += n;
            continue;
        }
        if (dl + 1 + n >= sizeof done)
            return true;
        done[dl] = '/';
        memcpy(done + dl + 1, p, n);
        done[dl + 1 + n] = '\0';
        p += n;
        if (!links_only && within_any(done, ws, n_ws))
            return true;
        struct stat st;
        if (lstat(done, &st) < 0)
            return false; /* nothing there: nothing beyond it either */
        if (!S_ISLNK(st.st_mode))
            continue;
        if (links_only && within_any(done, ws, n_ws)) {
            if (ret_link)
                *ret_link = strdup(done);
            return true;
        }
        char target[PATH_MAX], rest[PATH_MAX];
        ssize_t tl = readlink(done, target, sizeof target - 1);
        if (++links > 40 || tl <= 0)
            return links > 40;
        target[tl] = '\0';
        if (snprintf(rest, sizeof rest, "%s/%s", target, p) >= (int)sizeof rest)
            return true;
        memcpy(pending, rest, strlen(rest) + 1);
        p = pending;
        if (target[0] == '/')
            done[0] = '\0';
        else
            done[dl] = '\0';
    }
    return !links_only && within_any(done[0] ? done : "/", ws, n_ws);
}

static bool resolves_through(const char *path, char *const *ws, size_t n_ws) {
    return resolve_meets(path, ws, n_ws, false, NULL);
}

int sandbox_grant_agent_link(const struct run_context *ctx, const char *path, char **ret_link) {
    *ret_link = NULL;
    _cleanup_free_ char *abs = path[0] == '/' ? strdup(path) : path_join(ctx->cwd, path);
    char **w = NULL;
    size_t nw = 0;
    if (!abs)
        return -ENOMEM;
    if (agent_written_list(&w, &nw) < 0)
        w = NULL, nw = 0; /* no record and no Bundles: the workspace alone */
    char **dirs = realloc(w, (nw + 2) * sizeof *dirs);
    if (!dirs) {
        for (size_t i = 0; i < nw; i++)
            free(w[i]);
        free(w);
        return -ENOMEM;
    }
    dirs[nw] = (char *)ctx->workspace; /* borrowed: not freed below */
    bool met = resolve_meets(abs, dirs, nw + 1, true, ret_link);
    for (size_t i = 0; i < nw; i++)
        free(dirs[i]);
    free(dirs);
    return met && *ret_link ? 1 : met ? -ENOMEM : 0;
}

/* Where the agent writes on the host: the workspace (applied changes) and
 * the read-write grants (--allow-write, --access rw:), resolved once; a
 * link left there by an earlier run (a granted '~/.local/bin' replaced by
 * a link to a host directory) is the agent's as much as one applied to the
 * workspace.  And where the agents of the runs recorded in the state
 * directory wrote: the workspace of each whose stage was applied (or is
 * gone, as a drop after an apply cut short leaves it), each read-write
 * grant of theirs.  A run in a subdirectory of such a workspace (a
 * monorepo's package, with the venv at its root active) does not hold
 * what was applied there, but its PATH may name it. */
struct agent_dirs {
    char **dir; /* owned */
    size_t n, cap;
};

/* Takes d (malloc'd).  Not deduplicated: the record holds each directory
 * once already, and a search of a list thousands long (a CI host's fresh
 * workspace per apply) for each of its entries cost a second per 20,000 at
 * every start; a directory twice is only looked at twice. */
static void agent_dirs_take(struct agent_dirs *a, char *d) {
    if (!d || d[0] != '/') {
        free(d);
        return;
    }
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 16;
        char **v = realloc(a->dir, cap * sizeof *v);
        if (!v) {
            free(d);
            return;
        }
        a->dir = v;
        a->cap = cap;
    }
    a->dir[a->n++] = d;
}

static void agent_dirs_add(struct agent_dirs *a, const char *d) {
    if (d)
        agent_dirs_take(a, strdup(d));
}

static void agent_dirs_init(struct agent_dirs *a, const struct run_context *ctx) {
    *a = (struct agent_dirs){0};
    agent_dirs_add(a, ctx->workspace);
    /* this run's read-write grants, which its agent writes directly: the
     * next runs take them for the agent's too (agent_written.c) */
    for (int i = 0; i < ctx->opts->n_access; i++) {
        _cleanup_free_ char *g =
            ctx->opts->access[i].kind == ACCESS_RW ? realpath_memo(ctx->opts->access[i].path) : NULL;
        agent_dirs_add(a, g);
        if (g)
            (void)agent_written_add(g);
    }
    /* and the earlier runs' (the record, built from their Bundles once) */
    char **w = NULL;
    size_t nw = 0;
    if (agent_written_list(&w, &nw) < 0)
        return;
    for (size_t i = 0; i < nw; i++)
        agent_dirs_take(a, w[i]);
    free(w);
}

static void agent_dirs_free(struct agent_dirs *a) {
    for (size_t i = 0; i < a->n; i++)
        free(a->dir[i]);
    free(a->dir);
    *a = (struct agent_dirs){0};
}

/* Is path the agent's to lead somewhere: does resolving it (or real, its
 * resolved form, when given) meet one of those directories? */
static bool agent_writable(const struct agent_dirs *a, const char *path, const char *real) {
    return resolves_through(path, a->dir, a->n) || (real && within_any(real, a->dir, a->n));
}

/* Does real (resolved) lie in one of those directories: it shows what an
 * agent could read there already, wherever links led on the way. */
static bool agent_holds(const struct agent_dirs *a, const char *real) {
    return real && within_any(real, a->dir, a->n);
}

/* A command npm installed (PREFIX/node_modules/.bin/codex, a link to
 * PREFIX/node_modules/@openai/codex/bin/codex.js) loads the rest of its
 * package and its dependencies from the node_modules tree around it (a
 * platform package beside it): the outermost node_modules directory on
 * the way to file is projected too, by add_runtime_dir's rules. */
static void add_node_modules_of(struct dirlist *l, const char *home, const char *file, const struct agent_dirs *agent) {
    static const char nm[] = "/node_modules/";
    const char *at = file ? strstr(file, nm) : NULL;
    if (!at)
        return;
    _cleanup_free_ char *dir = strndup(file, (size_t)(at - file) + sizeof nm - 2);
    if (dir)
        (void)add_runtime_dir(l, home, dir, agent);
}

/* Where a tool manager or environment lives when the user's environment
 * names it (PYENV_ROOT=/srv/pyenv, an activated venv outside HOME): its
 * commands on PATH run the rest of it (a pyenv shim runs
 * $PYENV_ROOT/libexec/pyenv, a venv's python imports its lib/), which the
 * PATH entry alone does not show.  Projected whole, read-only, by the
 * rules of a tool's directory: not HOME's (its view shows those), not one
 * the agent writes unless it leads inside what it writes (the venv of an
 * earlier run's workspace), nothing holding a home or a credential
 * location within three levels.  The variable itself is handed over
 * (plan_build's environment), projected or not. */
static void add_env_tool_roots(struct dirlist *l, const char *home, const struct agent_dirs *agent) {
    for (const char *const *var = plan_tool_root_vars; *var; var++) {
        const char *v = getenv(*var);
        _cleanup_free_ char *real = v && v[0] == '/' ? realpath_memo(v) : NULL;
        if (!real || strcmp(real, "/") == 0 || (home && path_within(real, home)) || plan_under_system_dir(real) ||
            (agent_writable(agent, v, real) && !agent_holds(agent, real)))
            continue;
        _cleanup_close_ int fd = open(real, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int budget = 512;
        if (fd < 0 || creds_below(fd, 3, &budget, true) || holds_homes(real)) /* holds_homes: itself too */
            continue;
        dirlist_add(l, real);
    }
}

void sandbox_gather_runtime(const struct run_context *ctx, const char *home, struct dirlist *l) {
    add_logical_link(l, getenv("HOME"));
    add_logical_link(l, getenv("PWD"));
    _cleanup_free_ char *exe = find_in_path(ctx->opts->cmd_argv[0], ctx->cwd);
    _cleanup_free_ char *real = exe ? realpath_memo(exe) : NULL;
    /* A command in the workspace (or in an earlier run's, or a grant) is
     * the agent's to write (an applied script, a link it made): its #! line
     * or link target may widen what the sandbox reads only to a toolchain
     * (/opt/<name>, a tool's dot-directory), never to any directory it
     * names (#!/srv/data/x would project /srv/data). */
    struct agent_dirs agent;
    agent_dirs_init(&agent, ctx);
    bool in_ws = exe && agent_writable(&agent, exe, real);
    if (exe) {
        const struct agent_dirs *by = in_ws ? &agent : NULL;
        add_dir_of(l, home, exe, by);
        if (real)
            add_dir_of(l, home, real, by);
        add_node_modules_of(l, home, real ? real : exe, by);
        _cleanup_free_ char *interp = interpreter_of(real ? real : exe);
        if (interp) {
            const struct agent_dirs *agents = in_ws || agent_writable(&agent, interp, NULL) ? &agent : NULL;
            bool shown = add_dir_of(l, home, interp, agents);
            _cleanup_free_ char *ri = realpath_memo(interp);
            if (ri)
                shown = add_dir_of(l, home, ri, agents) && shown;
            if (!shown && !plan_under_system_dir(ri ? ri : interp)) {
                _cleanup_free_ char *cmd = term_escape(ctx->opts->cmd_argv[0]), *in = term_escape(interp);
                fprintf(stderr,
                        "pvisor run: warning: %s names the interpreter %s, which the sandbox does not show: a "
                        "command in the workspace (or an earlier run's) is the agent's to write, and its #! line adds "
                        "only toolchains "
                        "(/opt/<name>, a tool's directory in HOME); name the interpreter ('pvisor run --safe -- "
                        "INTERPRETER %s')\n",
                        cmd ? cmd : "?", in ? in : "?", cmd ? cmd : "?");
            }
        }
    }
    const char *path = getenv("PATH");
    _cleanup_free_ char *copy = path ? strdup(path) : NULL;
    char *save = NULL;
    for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d; d = strtok_r(NULL, ":", &save)) {
        if (d[0] != '/')
            continue;
        /* an entry in the workspace (a venv's bin, HOME's .local/bin when
         * HOME is the workspace; an earlier run's) leads where the agent's
         * links there lead: a toolchain only */
        const struct agent_dirs *agents = agent_writable(&agent, d, NULL) ? &agent : NULL;
        add_runtime_dir(l, home, d, agents);
        /* PREFIX/node_modules/.bin: its entries link into that tree (a
         * command run through a shell, sh -c codex) */
        _cleanup_free_ char *rd = realpath_memo(d);
        size_t rl = rd ? strlen(rd) : 0;
        if (rl > 18 && strcmp(rd + rl - 18, "/node_modules/.bin") == 0)
            add_node_modules_of(l, home, rd, agents);
    }
    add_env_tool_roots(l, home, &agent);
    agent_dirs_free(&agent);
    passwd_homes_free();
}
