/* warnings.c: what the review warns of (docs/lifecycle.md, "Warnings"):
 * each entry's warnings from its own change (lc_entry_set_warnings, during
 * the walk of the stage), and those that need the workspace's git or the
 * reviewing user's HOME (lc_changeset_mark_hooks_path,
 * lc_changeset_mark_home_config, after it); their names and messages. */
#include "lifecycle/lc-internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/gitconfig.h"
#include "util/util.h"

/* The files a shell, a login or a desktop session runs or takes its
 * environment from (HOME-relative), and the directories of such files. */
static const char *const startup_files[] = {".bashrc",
                                            ".bash_profile",
                                            ".bash_login",
                                            ".bash_logout",
                                            ".bash_aliases",
                                            ".profile",
                                            ".zshrc",
                                            ".zshenv",
                                            ".zprofile",
                                            ".zlogin",
                                            ".zlogout",
                                            ".kshrc",
                                            ".mkshrc",
                                            ".cshrc",
                                            ".tcshrc",
                                            ".login",
                                            ".xprofile",
                                            ".xsession",
                                            ".xsessionrc",
                                            ".xinitrc",
                                            ".Xresources",
                                            ".pam_environment",
                                            ".config/fish/config.fish"};
static const char *const startup_dirs[] = {".config/fish/conf.d",
                                           ".config/fish/functions",
                                           ".config/fish/completions",
                                           ".config/autostart",
                                           ".config/systemd/user",
                                           ".config/environment.d",
                                           ".bashrc.d",
                                           ".profile.d"};

const char *lc_warning_name(unsigned i) {
    static const char *const names[] = {
        "exec",           "setid",         "git_hook",        "git_config",     "symlink_outside", "large",
        "special",        "hardlink",      "git_worktree",    "python_startup", "home_startup",    "fifo",
        "git_lock",       "nul_text",      "renamed_changed", "git_redirect",   "world_writable",  "changed_during_run",
        "tool_config",    "stage_marker",  "ci_config",       "git_hides",      "diff_hidden",     "git_refs",
        "invisible_text", "lookalike_name"};
    return i < ARRAY_SIZE(names) ? names[i] : "unknown";
}

/* Can a symlink target t, resolved from a directory depth levels below the
 * workspace root, lead outside it?  Lexically: more leading ".." than depth.
 * A ".." after a name is not lexical (the name may be a symlink: a/l1 -> ..
 * and a/l2 -> l1/.. is the workspace's parent), so it counts as outside. */
static bool target_escapes(const char *t, long depth) {
    bool named = false;
    for (const char *c = t; *c;) {
        const char *e = strchrnul(c, '/');
        size_t n = (size_t)(e - c);
        if (n == 2 && c[0] == '.' && c[1] == '.') {
            if (named || --depth < 0)
                return true;
        } else if (n > 0 && !(n == 1 && c[0] == '.')) {
            named = true;
        }
        c = *e ? e + 1 : e;
    }
    return false;
}

/* Is rest, a path below a .git directory, HEAD, a ref or packed-refs (of
 * the repository, a linked worktree's HEAD, a submodule's under
 * modules/NAME/)?  The agent's commits are shown only as git objects, and
 * once a branch points to them a checkout or reset brings their content
 * into the user's files; a deleted ref drops the user's branch. */
static bool git_ref_rest(const char *rest) {
    const char *base = strrchr(rest, '/');
    base = base ? base + 1 : rest;
    if (strncmp(rest, "logs/", 5) == 0 || strstr(rest, "/logs/")) /* reflogs */
        return false;
    /* a merge, cherry-pick, revert or rebase left in progress: the user's
     * next 'git commit' or '--continue' takes the agent's commits, and a
     * rebase's todo list runs its 'exec' lines */
    static const char *const in_progress[] = {"MERGE_HEAD", "CHERRY_PICK_HEAD", "REVERT_HEAD", "REBASE_HEAD"};
    for (size_t i = 0; i < ARRAY_SIZE(in_progress); i++)
        if (strcmp(base, in_progress[i]) == 0)
            return true;
    static const char *const state_dirs[] = {"rebase-merge/", "rebase-apply/", "sequencer/"};
    for (size_t i = 0; i < ARRAY_SIZE(state_dirs); i++) {
        const char *d = strstr(rest, state_dirs[i]);
        if (d && (d == rest || d[-1] == '/'))
            return true;
    }
    return strcmp(base, "HEAD") == 0 || strcmp(base, "packed-refs") == 0 || strncmp(rest, "refs/", 5) == 0 ||
           strstr(rest, "/refs/");
}

/* The length of the git directory's name that the component at c is
 * (".git", or a bare repository's "NAME.git": 'git clone --bare' and
 * 'git init --bare' name one so, and git runs its hooks and reads its
 * config and refs as a .git's when the user pushes to it or runs git in
 * it), when a path goes on below it; 0 otherwise. */
static size_t git_dir_len(const char *c) {
    const char *s = strchr(c, '/');
    size_t n = s ? (size_t)(s - c) : 0;
    return n >= 4 && memcmp(s - 4, ".git", 4) == 0 ? n : 0;
}

bool lc_path_is_git_ref(const char *path) {
    for (const char *c = path;;) {
        size_t gl = git_dir_len(c);
        if (gl && git_ref_rest(c + gl + 1))
            return true;
        const char *s = strchr(c, '/');
        if (!s)
            return false;
        c = s + 1;
    }
}

/* Warnings for rest, a path below a .git directory: git runs the hooks of
 * every git directory in it (.git/hooks, a submodule's
 * .git/modules/NAME/hooks) and reads the config of each (config, and
 * config.worktree of the main and of linked worktrees), where core.hooksPath,
 * core.fsmonitor or core.sshCommand run commands. */
static unsigned git_dir_warnings(const char *rest, bool sample, bool into_git, unsigned wn) {
    const char *base = strrchr(rest, '/');
    base = base ? base + 1 : rest;
    if (strcmp(base, "config") == 0 || strcmp(base, "config.worktree") == 0)
        wn |= LC_W_GIT_CONFIG;
    /* a git directory's commondir names the directory git reads the
     * config, hooks, refs and objects from (any directory, none of it
     * named .git): as a config change */
    if (strcmp(base, "commondir") == 0 && !into_git)
        wn |= LC_W_GIT_REDIRECT;
    /* info/exclude hides files from git status, info/attributes can make
     * a file's changes binary or not diffed (-diff) in git diff: neither
     * is a file git shows, so after the apply git hides what the agent
     * chose */
    size_t rl = strlen(rest);
    if ((rl >= 12 && strcmp(rest + rl - 12, "info/exclude") == 0 && (rl == 12 || rest[rl - 13] == '/')) ||
        (rl >= 15 && strcmp(rest + rl - 15, "info/attributes") == 0 && (rl == 15 || rest[rl - 16] == '/')))
        wn |= LC_W_GIT_HIDES;
    /* and info itself made a symlink: git reads the exclude and the
     * attributes of whatever it points to, which are not below a .git
     * (found by a red-team pass; a new info directory is not warned of
     * here, lc_entry_set_warnings: its files are) */
    if (git_ref_rest(rest))
        wn |= LC_W_GIT_REFS;
    else if (strcmp(base, "info") == 0)
        wn |= LC_W_GIT_HIDES;
    for (const char *c = rest;;) {
        if (strcmp(c, "hooks") == 0)
            wn |= LC_W_GIT_HOOK;
        else if (strncmp(c, "hooks/", 6) == 0 && sample && !strchr(c + 6, '/'))
            wn &= ~LC_W_EXEC;
        else if (strncmp(c, "hooks/", 6) == 0)
            wn |= LC_W_GIT_HOOK;
        const char *s = strchr(c, '/');
        if (!s)
            break;
        c = s + 1;
    }
    return wn;
}

/* sample_ok: a *.sample in a .git/hooks may go unwarned (visit says: new,
 * and no hook there is a link to it) */
bool lc_git_pointer_into_git(const char *workspace, const char *path, const char *pointer) {
    char buf[2 * LC_MAX_PATH + 2];
    size_t wl = strlen(workspace);
    const char *rel;
    if (pointer[0] == '/') {
        if (strncmp(pointer, workspace, wl) != 0 || (pointer[wl] != '/' && pointer[wl] != '\0'))
            return false;
        rel = pointer + wl + (pointer[wl] == '/');
        snprintf(buf, sizeof buf, "%s", rel);
    } else {
        const char *slash = strrchr(path, '/'); /* relative to the entry's directory */
        int n = snprintf(buf, sizeof buf, "%.*s%s%s", slash ? (int)(slash - path) : 0, path, slash ? "/" : "", pointer);
        if (n < 0 || (size_t)n >= sizeof buf)
            return false;
    }
    /* lexically, component by component: ".." above the workspace, or a
     * path without a .git in it, is not one git made */
    char out[sizeof buf];
    size_t ol = 0;
    bool in_git = false;
    for (char *save = NULL, *c = strtok_r(buf, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (strcmp(c, ".") == 0)
            continue;
        if (strcmp(c, "..") == 0) {
            if (ol == 0)
                return false;
            while (ol > 0 && out[ol - 1] != '/')
                ol--;
            ol -= ol > 0;
            out[ol] = '\0';
            continue;
        }
        size_t cl = strlen(c);
        memcpy(out + ol, ol ? "/" : "", ol ? 1 : 0);
        ol += ol ? 1 : 0;
        memcpy(out + ol, c, cl + 1);
        ol += cl;
    }
    for (char *save = NULL, *c = ol ? strtok_r(out, "/", &save) : NULL; c && !in_git; c = strtok_r(NULL, "/", &save))
        in_git = strcmp(c, ".git") == 0;
    return in_git;
}

/* A file that makes a tool the user runs here run commands of its own
 * choosing, in the workspace at path (relative; base its last component):
 * git hook managers (pre-commit, lefthook), direnv, npm/pnpm/yarn's
 * rc files (script-shell, node-options, yarnPath, a pnpmfile), cargo's
 * config (a runner, rustc-wrapper), VS Code's tasks (one that runs at
 * folder open) and settings, and the wrappers of Gradle and Maven, which
 * download and run the build tool a URL names; rustup's toolchain file
 * (its 'path' makes every cargo and rustc here, rust-analyzer's at
 * folder open included, run the programs of a directory it names), mise's
 * config (its hooks and env._.source run at each cd of a shell that
 * activates mise), a dev container's (its initializeCommand runs on the
 * host when the editor opens the folder in the container), a VS Code
 * workspace file, and the start-up files of pdb, irb, pry, gdb and lldb;
 * link: the entry is a symlink. */
static bool tool_config(const char *path, const char *base, bool link) {
    static const char *const names[] = {
        ".pre-commit-config.yaml", ".pre-commit-config.yml", "lefthook.yml", "lefthook.yaml", ".lefthook.yml",
        ".lefthook.yaml", "lefthook-local.yml", "lefthook-local.yaml", ".envrc", ".npmrc", ".yarnrc", ".yarnrc.yml",
        ".pnpmfile.cjs", "gradle-wrapper.properties", "maven-wrapper.properties", "rust-toolchain",
        "rust-toolchain.toml", "mise.toml", ".mise.toml", "mise.local.toml", ".mise.local.toml", ".devcontainer.json",
        /* run at the tool's start in that
                                         * directory: pdb's commands, irb's
                                         * and pry's Ruby, gdb's and lldb's
                                         * commands (where their safe paths
                                         * allow a local one) */
        ".pdbrc", ".irbrc", ".pryrc", ".gdbinit", ".lldbinit"};
    static const char *const tails[] = {
        ".cargo/config",         ".cargo/config.toml",       ".vscode/tasks.json",
        ".vscode/settings.json", ".mvn/extensions.xml",      ".mise/config.toml",
        ".config/mise.toml",     ".config/mise/config.toml", ".devcontainer/devcontainer.json"};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (strcmp(base, names[i]) == 0)
            return true;
    /* a VS Code workspace file: its tasks run at folder open, as
     * .vscode/tasks.json's do */
    size_t bl = strlen(base);
    if (bl > 15 && strcmp(base + bl - 15, ".code-workspace") == 0)
        return true;
    size_t pl = strlen(path);
    for (size_t i = 0; i < ARRAY_SIZE(tails); i++) {
        size_t tl = strlen(tails[i]);
        if (pl >= tl && strcmp(path + pl - tl, tails[i]) == 0 && (pl == tl || path[pl - tl - 1] == '/'))
            return true;
        /* a directory of such a file as a symlink (.vscode -> vs, and an
         * inner one: .config/mise -> ../misc, found by a red-team pass):
         * the tool reads vs/tasks.json, which matches no name of its own */
        for (const char *s = strchr(tails[i], '/'); link && s; s = strchr(s + 1, '/')) {
            size_t dl = (size_t)(s - tails[i]);
            if (pl >= dl && strncmp(path + pl - dl, tails[i], dl) == 0 && (pl == dl || path[pl - dl - 1] == '/'))
                return true;
        }
    }
    /* a dev container's other configurations, each in a folder of its own
     * (.devcontainer/NAME/devcontainer.json): the editor offers them all,
     * and their initializeCommand runs on the host as the main one's does */
    /* (and such a folder made a symlink: .devcontainer/evil -> ../misc) */
    if (link && pl > 14) {
        const char *folder = memrchr(path, '/', pl);
        size_t fl = folder ? (size_t)(folder - path) : 0;
        if (folder && fl >= 13 && strncmp(folder - 13, ".devcontainer", 13) == 0 && (fl == 13 || folder[-14] == '/'))
            return true;
    }
    if (strcmp(base, "devcontainer.json") == 0 && pl > 18) {
        const char *folder = memrchr(path, '/', pl - 18); /* the '/' before NAME */
        size_t fl = folder ? (size_t)(folder - path) : 0;
        if (folder && fl >= 13 && strncmp(folder - 13, ".devcontainer", 13) == 0 && (fl == 13 || folder[-14] == '/'))
            return true;
    }
    return false;
}

/* A CI service's pipeline definition, in the workspace at path (relative;
 * base its last component): what it names runs on the service's machines
 * at the next push, with the secrets the repository gives its jobs
 * (deploy keys, registry and cloud tokens): GitHub's, Gitea's and
 * Forgejo's workflows and GitHub's local actions, GitLab's, CircleCI's,
 * Jenkins', Travis', Azure Pipelines', Bitbucket's, Buildkite's, Drone's,
 * Woodpecker's, AppVeyor's, Cirrus', Google Cloud Build's. */
static bool ci_config(const char *path, const char *base) {
    static const char *const names[] = {
        ".gitlab-ci.yml",          "Jenkinsfile", ".travis.yml",     "azure-pipelines.yml", "azure-pipelines.yaml",
        "bitbucket-pipelines.yml", ".drone.yml",  ".woodpecker.yml", ".woodpecker.yaml",    "appveyor.yml",
        ".appveyor.yml",           ".cirrus.yml", "cloudbuild.yaml", "cloudbuild.yml"};
    /* every file below these directories */
    static const char *const dirs[] = {".github/workflows/", ".gitea/workflows/", ".forgejo/workflows/", ".circleci/",
                                       ".buildkite/",        ".woodpecker/",      ".azure-pipelines/",   ".gitlab/ci/"};
    for (size_t i = 0; i < ARRAY_SIZE(names); i++)
        if (strcmp(base, names[i]) == 0)
            return true;
    /* a local action a workflow uses (uses: ./.github/actions/x) */
    if ((strcmp(base, "action.yml") == 0 || strcmp(base, "action.yaml") == 0) &&
        (strncmp(path, ".github/", 8) == 0 || strstr(path, "/.github/")))
        return true;
    for (size_t i = 0; i < ARRAY_SIZE(dirs); i++) {
        size_t dl = strlen(dirs[i]);
        for (const char *c = path; c; c = strchr(c, '/'), c = c ? c + 1 : NULL)
            if (strncmp(c, dirs[i], dl) == 0 && c[dl])
                return true;
    }
    return false;
}

/* Does name hold a byte beyond printable ASCII? */
static bool odd_name(const char *name) {
    for (const unsigned char *c = (const unsigned char *)name; *c; c++)
        if (*c < 0x20 || *c >= 0x7f)
            return true;
    return false;
}

char *lc_name_codepoints(const char *s) {
    size_t n = strlen(s);
    char *out = malloc(10 * n + 1), *o = out; /* \u{10ffff} from 4 bytes; \xNN from 1 */
    if (!out)
        return NULL;
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        bool unsafe;
        size_t l = term_char(p + i, n - i, &unsafe);
        if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\') {
            *o++ = (char)p[i++];
        } else if (l > 1) { /* UTF-8 (term_char checked it) */
            uint32_t cp = l == 2 ? p[i] & 0x1f : l == 3 ? p[i] & 0x0f : p[i] & 0x07;
            for (size_t k = 1; k < l; k++)
                cp = (cp << 6) | (p[i + k] & 0x3f);
            o += sprintf(o, "\\u{%x}", cp);
            i += l;
        } else {
            o += sprintf(o, "\\x%02x", p[i++]);
        }
    }
    *o = '\0';
    return out;
}

void lc_entry_set_warnings(struct lc_changeset *cs, struct lc_entry *e, const struct stat *ust, bool sample_ok,
                           bool into_git) {
    unsigned wn = 0;
    const char *p = e->path;
    if (e->kind != LC_DELETED) {
        if (e->new_type == LC_REG && (e->new_mode & 0111) && !(e->old_type == LC_REG && (e->old_mode & 0111)))
            wn |= LC_W_EXEC;
        if ((e->new_mode & 06000) && !((e->old_mode & 06000) == (e->new_mode & 06000) && e->old_type == e->new_type))
            wn |= LC_W_SETID;
        /* applied as is: any local user may then change the file, or add
         * and replace files in the directory (a sticky one: add) */
        if (e->new_type != LC_LNK && (e->new_mode & 0002) && !(e->old_type != LC_NONE && (e->old_mode & 0002)))
            wn |= LC_W_WORLD_WRITABLE;
        if (e->new_type == LC_REG && e->new_size > LC_LARGE_FILE)
            wn |= LC_W_LARGE;
        if (lc_type_special(e->new_type))
            wn |= LC_W_SPECIAL;
        if (e->new_type == LC_FIFO && e->old_type != LC_FIFO)
            wn |= LC_W_FIFO;
        if (e->new_type == LC_REG && ust && ust->st_nlink > 1)
            wn |= LC_W_HARDLINK;
        if (e->new_type == LC_LNK && e->new_target) {
            const char *t = e->new_target;
            size_t wl = strlen(cs->workspace);
            if (t[0] == '/') {
                /* /WS/../../etc is not inside /WS: the rest is checked as a
                 * target of a link in the workspace root */
                if (!(strncmp(t, cs->workspace, wl) == 0 && (t[wl] == '/' || t[wl] == '\0')) ||
                    target_escapes(t + wl, 0))
                    wn |= LC_W_SYMLINK_OUTSIDE;
            } else {
                long depth = 0; /* of the link's directory */
                for (const char *c = p; *c; c++)
                    depth += *c == '/';
                if (target_escapes(t, depth))
                    wn |= LC_W_SYMLINK_OUTSIDE;
            }
        }
    }
    const char *base = strrchr(p, '/');
    base = base ? base + 1 : p;
    size_t bl = strlen(base);
    /* .git/hooks/... and .git/config anywhere in the tree; git never runs
     * a hook named *.sample (git init makes a dozen, executable): neither
     * a hook nor an exec warning, which buried the ones that matter */
    bool sample = sample_ok && bl > 7 && strcmp(base + bl - 7, ".sample") == 0;
    /* git creates NAME.lock next to what it changes (index.lock, HEAD.lock,
     * a ref's, config.lock) and renames it over NAME when done: one that
     * is left was made by a git the run's end killed, and once applied
     * every git command that takes that lock fails ("File exists") */
    bool lock = e->kind != LC_DELETED && e->new_type == LC_REG && e->old_type != LC_REG && bl > 5 &&
                strcmp(base + bl - 5, ".lock") == 0;
    /* a .git that is a file ("gitdir: PATH") or a link makes git, run in
     * that directory or below it (a shell prompt that shows the branch
     * runs it at each cd), take the repository it names, config and hooks
     * included, from any directory of the workspace */
    if (e->kind != LC_DELETED && e->new_type != LC_DIR && strcmp(base, ".git") == 0 && !into_git)
        wn |= LC_W_GIT_REDIRECT;
    if (e->kind != LC_DELETED && e->new_type != LC_DIR && tool_config(p, base, e->new_type == LC_LNK))
        wn |= LC_W_TOOL_CONFIG;
    if (e->kind != LC_DELETED && e->new_type != LC_DIR && ci_config(p, base))
        wn |= LC_W_CI_CONFIG;
    for (const char *c = p;;) {
        size_t gl = git_dir_len(c);
        if (gl) {
            wn = git_dir_warnings(c + gl + 1, sample, into_git, wn);
            if (lock)
                wn |= LC_W_GIT_LOCK;
            /* a ref's directory (refs/heads/feature/): its refs are listed */
            if ((e->kind == LC_DELETED ? e->old_type : e->new_type) == LC_DIR)
                wn &= ~LC_W_GIT_REFS;
        }
        /* Python runs every .pth (its "import" lines) of an environment's
         * site-packages, and imports sitecustomize / usercustomize (a .py,
         * a sourceless .pyc, an extension, or a package) at each start; a
         * site-packages that becomes a symlink brings another directory's */
        if (e->kind != LC_DELETED && e->new_type != LC_DIR &&
            (strncmp(c, "site-packages/", 14) == 0 || strncmp(c, "dist-packages/", 14) == 0)) {
            const char *m = c + 14;
            size_t ml = strcspn(m, "./");
            if ((!strchr(m, '/') && bl > 4 && strcmp(base + bl - 4, ".pth") == 0) ||
                ((ml == 13 && strncmp(m, "sitecustomize", 13) == 0) ||
                 (ml == 13 && strncmp(m, "usercustomize", 13) == 0)))
                wn |= LC_W_PY_STARTUP;
        }
        if (e->kind != LC_DELETED && e->new_type == LC_LNK &&
            (strcmp(c, "site-packages") == 0 || strcmp(c, "dist-packages") == 0))
            wn |= LC_W_PY_STARTUP;
        /* a venv's pyvenv.cfg names the interpreter ('home') whose standard
         * library every start imports, and whether the system's
         * site-packages (and their .pth) join */
        if (e->kind != LC_DELETED && strcmp(c, "pyvenv.cfg") == 0)
            wn |= LC_W_PY_STARTUP;
        const char *s = strchr(c, '/');
        if (!s)
            break;
        c = s + 1;
    }
    if (e->kind == LC_DELETED || e->new_type == LC_DIR) /* a deleted exclude hides nothing */
        wn &= ~LC_W_GIT_HIDES;
    /* a name the change adds (a new entry, or the new name of a renamed
     * one) with a character beyond printable ASCII: a terminal shows
     * "café" composed (NFC) and decomposed (NFD) alike, a Cyrillic 'а' as
     * a Latin 'a', and a control, bidi or invisible character is shown
     * escaped but read past.  Only the entry whose own last component it
     * is: the files below a new directory of such a name are not warned
     * of each. */
    if (e->kind == LC_ADDED && odd_name(base)) {
        const char *rb = e->renamed_from ? strrchr(e->renamed_from, '/') : NULL;
        rb = rb ? rb + 1 : e->renamed_from;
        if (!rb || strcmp(rb, base) != 0)
            wn |= LC_W_LOOKALIKE_NAME;
    }
    e->warnings |= wn;
    cs->warnings |= wn;
}

/* path (absolute, path_within ws) relative to ws: "" when it is ws. */
static const char *below(const char *path, const char *ws) {
    size_t wl = strcmp(ws, "/") == 0 ? 0 : strlen(ws);
    return path[wl] == '/' ? path + wl + 1 : path + wl;
}

/* Is every path below the workspace-relative directory rel warned of as a
 * git hook by its name: rel is, or is below, a 'hooks' inside a .git (the
 * rule of git_dir_warnings)? */
static bool hooks_by_name(const char *rel) {
    bool in_git = false;
    for (const char *c = rel; *c;) {
        size_t n = strcspn(c, "/");
        if (in_git && n == 5 && strncmp(c, "hooks", 5) == 0)
            return true;
        if (n == 4 && strncmp(c, ".git", 4) == 0)
            in_git = true;
        c += n;
        c += *c == '/';
    }
    return false;
}

struct capture {
    char buf[PATH_MAX + 2];
    size_t len;
};

static int sink_capture(void *ctx, const char *buf, size_t n) {
    struct capture *c = ctx;
    if (n > sizeof c->buf - 1 - c->len)
        return -E2BIG;
    memcpy(c->buf + c->len, buf, n);
    c->len += n;
    return 0;
}

/* Normalize the workspace-relative path in (names joined by '/', "." and
 * ".." among them) into out: NULL when a ".." leads above the workspace. */
static char *rel_normalize(const char *in, char *out, size_t size) {
    size_t len = 0;
    for (const char *c = in; *c;) {
        while (*c == '/')
            c++;
        size_t n = strcspn(c, "/");
        if (n == 0 || (n == 1 && c[0] == '.')) {
            c += n;
            continue;
        }
        if (n == 2 && c[0] == '.' && c[1] == '.') {
            if (len == 0)
                return NULL;
            char *s = memrchr(out, '/', len);
            len = s ? (size_t)(s - out) : 0;
        } else {
            if (len + (len > 0) + n + 1 > size)
                return NULL;
            if (len > 0)
                out[len++] = '/';
            memcpy(out + len, c, n);
            len += n;
        }
        c += n;
    }
    out[len] = '\0';
    return out;
}

/* rel (workspace-relative) as the workspace the stage makes resolves it:
 * through the symlinks the stage adds or changes, which the workspace
 * does not have yet (an include of '../conf/local.cfg' where the
 * workspace has no conf/, and the agent's 'ln -s misc conf': git reads
 * misc/local.cfg after the apply; found by a red-team pass), and the
 * workspace's own links on the way after one of those.  Component by
 * component, as the kernel does: a link's target relative to its
 * directory, or absolute (normalized) inside the workspace ws; a ".."
 * after a link's name goes up from where the link led.  Malloc'd; NULL
 * when it leads outside the workspace, through 40 links, or no link the
 * stage made is on its way (rel as the workspace has it). */
static char *stage_link_resolve(const struct lc_changeset *cs, int wfd, const char *ws, const char *rel) {
    char out[PATH_MAX] = "", rem[2 * PATH_MAX + 2], link[PATH_MAX], wsn[PATH_MAX];
    if (snprintf(rem, sizeof rem, "%s", rel) >= (int)sizeof rem || !rel_normalize(ws, wsn, sizeof wsn))
        return NULL;
    size_t ol = 0;
    bool moved = false;
    int hops = 0;
    for (char *c = rem; *c;) {
        while (*c == '/')
            c++;
        size_t n = strcspn(c, "/");
        if (n == 0 || (n == 1 && c[0] == '.')) {
            c += n;
            continue;
        }
        if (n == 2 && c[0] == '.' && c[1] == '.') {
            if (ol == 0)
                return NULL; /* above the workspace */
            char *up = memrchr(out, '/', ol);
            ol = up ? (size_t)(up - out) : 0;
            out[ol] = '\0';
            c += n;
            continue;
        }
        if (ol + 1 + n + 1 > sizeof out)
            return NULL;
        size_t was = ol;
        if (ol)
            out[ol++] = '/';
        memcpy(out + ol, c, n);
        ol += n;
        out[ol] = '\0';
        c += n;
        /* out is now a candidate: a link, the stage's or the workspace's? */
        const char *target = NULL;
        size_t k = lc_changeset_find(cs, out);
        const struct lc_entry *e = k == SIZE_MAX ? NULL : &cs->entries[k];
        if (e && e->kind != LC_DELETED && e->new_type == LC_LNK && e->new_target && e->new_target[0]) {
            target = e->new_target;
            moved = true;
        } else if (!e && wfd >= 0) {
            ssize_t ll = readlinkat(wfd, out, link, sizeof link - 1);
            if (ll > 0) {
                link[ll] = '\0';
                target = link;
            }
        }
        if (!target)
            continue;
        if (++hops > 40)
            return NULL;
        ol = was; /* the link's directory */
        out[ol] = '\0';
        char next[2 * PATH_MAX + 2], tn[PATH_MAX];
        const char *t = target;
        if (t[0] == '/') { /* from the top: inside the workspace, or not */
            /* (rel_normalize drops the leading '/': both relative to /) */
            size_t wl = strlen(wsn);
            if (!rel_normalize(t, tn, sizeof tn) ||
                (wl && (strncmp(tn, wsn, wl) != 0 || (tn[wl] != '\0' && tn[wl] != '/'))))
                return NULL;
            t = tn + wl + (wl && tn[wl] == '/');
            ol = 0;
            out[0] = '\0';
        }
        int m = snprintf(next, sizeof next, "%s/%s", t, c);
        if (m < 0 || (size_t)m >= sizeof next)
            return NULL;
        memcpy(rem, next, (size_t)m + 1);
        c = rem;
    }
    return moved ? strdup(out) : NULL;
}

/* The hooks directory dir (absolute or workspace-relative, as
 * core.hooksPath or 'git rev-parse --git-path hooks' name it) as
 * workspace-relative prefixes in pre[0..1] (malloc'd; left NULL when it
 * does not lie inside the workspace, outside a .git, or cannot be told).
 * pre[1] is husky's: with core.hooksPath '.husky/_', its stubs run the
 * hooks in '.husky/'. */
static void hooks_prefixes(const char *workspace, const char *dir_in, char *pre[2]) {
    _cleanup_free_ char *abs = dir_in[0] == '/' ? strdup(dir_in) : path_join(workspace, dir_in);
    _cleanup_free_ char *dir = NULL, *ws = realpath(workspace, NULL);
    if (!abs || !ws || path_resolve(abs, &dir) <= 0)
        return;
    if (strcmp(dir, ws) == 0) { /* core.hooksPath '.': the hooks are files at the top */
        pre[0] = strdup("");
        return;
    }
    const char *rel = path_within(dir, ws) ? below(dir, ws) : "";
    if (!*rel)
        return;
    /* a 'hooks' below a .git (any .git's) is warned of by name, new
     * samples spared (git_dir_warnings); another directory there
     * (core.hooksPath .git/myhooks) is not, and is marked here */
    if (hooks_by_name(rel))
        return;
    pre[0] = strdup(rel);
    size_t rl = strlen(rel);
    if (rl > 2 && strcmp(rel + rl - 2, "/_") == 0)
        pre[1] = strndup(rel, rl - 2);
}

/* The directory git runs the workspace's hooks from, as git itself names
 * it from the workspace ('git rev-parse --git-path hooks': core.hooksPath
 * when set, from any config git reads, else the .git's hooks), as
 * hooks_prefixes gives it. */
static void hooks_path_in_workspace(const char *workspace, char *pre[2]) {
    pre[0] = pre[1] = NULL;
    struct capture c = {.len = 0};
    static const char *const argv[] = {"git", "rev-parse", "--git-path", "hooks", NULL};
    /* git blocks where the workspace's repository has a FIFO for a file it
     * reads (HEAD, config: an apply writes FIFOs), or a file system does
     * not answer: the review goes on without it (lc_git_run's bound) */
    int r = lc_git_run(workspace, argv, NULL, sink_capture, &c);
    char *out = c.buf;
    size_t len = c.len;
    out[len] = '\0';
    if (r != 0 || len == 0 || out[len - 1] != '\n')
        return;
    out[len - 1] = '\0';
    hooks_prefixes(workspace, out, pre);
}

/* The config file rel beneath dir_fd (a regular file, no symlink
 * followed), opened for a git that reads it as /dev/fd/N (not
 * close-on-exec), or -1. */
static int open_config_at(int dir_fd, const char *rel) {
    int cfd = dir_fd < 0 ? -1 : lc_open_beneath(dir_fd, rel, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
    struct stat st;
    if (cfd >= 0 && (fstat(cfd, &st) < 0 || !S_ISREG(st.st_mode) || fcntl(cfd, F_SETFD, 0) < 0)) {
        close(cfd);
        return -1;
    }
    return cfd;
}

static int open_git_config(int dir_fd) {
    return open_config_at(dir_fd, ".git/config");
}

/* 'git config --file /dev/fd/cfd' with args (a3 may be NULL), its output
 * to sink; git's exit status or -errno. */
static int git_config_fd_to(int cfd, const char *a1, const char *a2, const char *a3,
                            int (*sink)(void *ctx, const char *buf, size_t n), void *ctx) {
    char file[32];
    snprintf(file, sizeof file, "/dev/fd/%d", cfd);
    const char *const argv[] = {"git", "config", "--file", file, a1, a2, a3, NULL};
    return lc_git_run("/", argv, NULL, sink, ctx);
}

/* git_config_fd_to, its output captured (c->buf, NUL-terminated). */
static int git_config_fd(int cfd, const char *a1, const char *a2, const char *a3, struct capture *c) {
    c->len = 0;
    int r = git_config_fd_to(cfd, a1, a2, a3, sink_capture, c);
    c->buf[c->len] = '\0';
    return r;
}

/* Does the config cfd include other files (include.path, includeIf)?
 * What those set is not read here (a relative path is resolved against
 * the including file's directory, which /dev/fd/N is not): an agent's
 * 'include.path = ../x' with 'core.hooksPath' in x named a hooks
 * directory the review did not see. */
static bool config_includes(int cfd) {
    struct capture c = {.len = 0};
    if (cfd < 0)
        return false;
    int r = git_config_fd(cfd, "--name-only", "--get-regexp", "^include", &c);
    return r == 0 ? c.len > 0 : r == -E2BIG; /* more than a buffer of them: some */
}

/* The core.hooksPath that the stage's own .git/config sets, when the stage
 * adds or changes that file, as hooks_prefixes gives it: once applied, git
 * runs the hooks from there, which the workspace's git does not say yet
 * (tested: the agent's 'git config core.hooksPath .githooks' and an edit
 * of the tracked .githooks/pre-commit were no git_hook, only the config's
 * git_config).  *ret_unknown: the stage's or the workspace's config
 * includes other files, whose hooksPath is not read (config_includes). */
static void hooks_path_in_stage(const struct lc_changeset *cs, char *pre[2], bool *ret_unknown) {
    pre[0] = pre[1] = NULL;
    *ret_unknown = false;
    _cleanup_close_ int wfd = open(cs->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_close_ int wcfd = open_git_config(wfd);
    *ret_unknown = config_includes(wcfd);
    bool changed = false;
    for (size_t i = 0; i < cs->n && !changed; i++)
        changed = cs->entries[i].kind != LC_DELETED && cs->entries[i].new_type == LC_REG &&
                  strcmp(cs->entries[i].path, ".git/config") == 0;
    if (!changed)
        return;
    _cleanup_free_ char *upper = path_join(cs->stage_path, "upper");
    _cleanup_close_ int ufd = upper ? open(upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    _cleanup_close_ int cfd = open_git_config(ufd);
    if (cfd < 0)
        return;
    if (config_includes(cfd))
        *ret_unknown = true;
    struct capture c = {.len = 0};
    int r = git_config_fd(cfd, "--get", "core.hooksPath", NULL, &c);
    char *out = c.buf;
    size_t len = c.len;
    if (r != 0 || len < 2 || out[len - 1] != '\n' || out[0] == '~')
        return;
    out[len - 1] = '\0';
    hooks_prefixes(cs->workspace, out, pre);
}

#define CONFIG_INCLUDES_MAX 64

/* config_included's reader of 'git config --null --get-regexp': each
 * record ("key\nvalue\0": an includeIf condition may hold a space, a value
 * a newline) taken as it streams in, so there is no bound on the output; a
 * record longer than rec (a path no file has) is skipped. */
struct includes_sink {
    const char *ws, *from, *home;
    const struct lc_changeset *cs;
    int wfd;
    char **inc;
    size_t *n;
    bool *overflow; /* a file past the CONFIG_INCLUDES_MAX was included */
    char rec[2 * PATH_MAX + 2];
    size_t len;
    bool skipping;
};

/* Add r (workspace-relative) to the included files. */
static void include_add(struct includes_sink *s, const char *r) {
    /* a file neither the workspace nor the stage has is no config git
     * reads (it skips a missing include): not one of the
     * CONFIG_INCLUDES_MAX (an agent's bogus includes took them all, and
     * the one that mattered was not warned of) */
    bool there = false;
    for (size_t i = 0; i < s->cs->n && !there; i++)
        there = s->cs->entries[i].kind != LC_DELETED && strcmp(s->cs->entries[i].path, r) == 0;
    struct stat st;
    if (!there && (s->wfd < 0 || fstatat(s->wfd, r, &st, AT_SYMLINK_NOFOLLOW) < 0))
        return;
    bool known = false;
    for (size_t k = 0; k < *s->n && !known; k++)
        known = strcmp(s->inc[k], r) == 0;
    if (!known && *s->n >= CONFIG_INCLUDES_MAX)
        *s->overflow = true;
    else if (!known && (s->inc[*s->n] = strdup(r)))
        ++*s->n;
}

static void include_record(struct includes_sink *s) {
    const char *v = memchr(s->rec, '\n', s->len);
    if (!v || !*++v)
        return;
    _cleanup_free_ char *abs = NULL, *res = NULL;
    if (gitconfig_include_path(v, s->from, s->home, &abs) <= 0)
        return;
    /* where the stage's symlinks lead it: from the path as written (a link
     * of the workspace's that the stage changes is on it), and as the
     * workspace resolves it */
    if (path_within(abs, s->ws) && strcmp(abs, s->ws) != 0) {
        _cleanup_free_ char *staged = stage_link_resolve(s->cs, s->wfd, s->ws, below(abs, s->ws));
        if (staged && staged[0])
            include_add(s, staged);
    }
    if (path_resolve(abs, &res) <= 0 || !path_within(res, s->ws) || strcmp(res, s->ws) == 0)
        return;
    const char *r = below(res, s->ws);
    include_add(s, r);
    _cleanup_free_ char *staged = stage_link_resolve(s->cs, s->wfd, s->ws, r);
    if (staged && staged[0])
        include_add(s, staged);
}

static int sink_includes(void *ctx, const char *buf, size_t n) {
    struct includes_sink *s = ctx;
    while (n) {
        const char *nul = memchr(buf, '\0', n);
        size_t part = nul ? (size_t)(nul - buf) : n;
        if (part > sizeof s->rec - 1 - s->len) {
            s->skipping = true;
        } else {
            memcpy(s->rec + s->len, buf, part);
            s->len += part;
        }
        if (nul) {
            s->rec[s->len] = '\0';
            if (!s->skipping)
                include_record(s);
            s->len = 0;
            s->skipping = false;
            part++;
        }
        buf += part;
        n -= part;
    }
    return 0;
}

/* Add to inc (workspace-relative, malloc'd; *n of CONFIG_INCLUDES_MAX,
 * none twice) the workspace files the config cfd, at rel in the workspace
 * ws (resolved), includes: include.path and includeIf.*.path, a relative
 * one against rel's directory, as git resolves them
 * (gitconfig_include_path); "~/" is HOME's. */
static void config_included(const struct lc_changeset *cs, int wfd, const char *ws, int cfd, const char *rel,
                            char **inc, size_t *n, bool *overflow) {
    if (cfd < 0)
        return;
    const char *home = getenv("HOME");
    _cleanup_free_ char *from = path_join(ws, rel);
    _cleanup_free_ struct includes_sink *s = from ? calloc(1, sizeof *s) : NULL;
    if (!s)
        return;
    *s = (struct includes_sink){.ws = ws,
                                .from = from,
                                .home = home && home[0] == '/' ? home : NULL,
                                .cs = cs,
                                .wfd = wfd,
                                .inc = inc,
                                .n = n,
                                .overflow = overflow};
    (void)git_config_fd_to(cfd, "--null", "--get-regexp", "^include(if\\..*)?\\.path$", sink_includes, s);
}

void lc_changeset_mark_config_includes(struct lc_changeset *cs) {
    if (!cs->n)
        return;
    _cleanup_free_ char *ws = realpath(cs->workspace, NULL);
    _cleanup_free_ char *upper = path_join(cs->stage_path, "upper");
    _cleanup_close_ int wfd = open(cs->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    _cleanup_close_ int ufd = upper ? open(upper, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    if (!ws)
        return;
    char *inc[CONFIG_INCLUDES_MAX];
    size_t n = 0;
    bool overflow = false;
    /* the workspace's .git/config, the stage's, then what they include
     * (each as the stage has it when the run changed it), in turn */
    for (size_t k = 0; k <= n && k <= CONFIG_INCLUDES_MAX; k++) {
        const char *rel = k == 0 ? ".git/config" : inc[k - 1];
        const struct lc_entry *staged = NULL;
        for (size_t i = 0; i < cs->n && !staged; i++)
            if (strcmp(cs->entries[i].path, rel) == 0)
                staged = &cs->entries[i];
        bool in_stage = staged && staged->kind != LC_DELETED && staged->new_type == LC_REG;
        if (k == 0 || !in_stage) {
            _cleanup_close_ int cfd = open_config_at(wfd, rel);
            config_included(cs, wfd, ws, cfd, rel, inc, &n, &overflow);
        }
        if (in_stage) {
            _cleanup_close_ int cfd = open_config_at(ufd, rel);
            config_included(cs, wfd, ws, cfd, rel, inc, &n, &overflow);
        }
    }
    /* more included files than are looked at (only an agent's making:
     * each a file of the workspace or the stage): what the others include
     * is not known, so every file or symlink added or changed may be a
     * config git reads, and is warned of as one */
    for (size_t i = 0; i < cs->n; i++) {
        bool hit = overflow && cs->entries[i].kind != LC_DELETED &&
                   (cs->entries[i].new_type == LC_REG || cs->entries[i].new_type == LC_LNK);
        for (size_t k = 0; k < n && !hit; k++)
            hit = strcmp(cs->entries[i].path, inc[k]) == 0;
        if (hit) {
            cs->entries[i].warnings |= LC_W_GIT_CONFIG;
            cs->warnings |= LC_W_GIT_CONFIG;
        }
    }
    for (size_t k = 0; k < n; k++)
        free(inc[k]);
}

/* The names git runs as hooks (githooks(5)). */
static bool git_hook_name(const char *name) {
    static const char *const hooks[] = {"applypatch-msg",
                                        "pre-applypatch",
                                        "post-applypatch",
                                        "pre-commit",
                                        "pre-merge-commit",
                                        "prepare-commit-msg",
                                        "commit-msg",
                                        "post-commit",
                                        "pre-rebase",
                                        "post-checkout",
                                        "post-merge",
                                        "pre-push",
                                        "pre-receive",
                                        "update",
                                        "proc-receive",
                                        "post-receive",
                                        "post-update",
                                        "reference-transaction",
                                        "push-to-checkout",
                                        "pre-auto-gc",
                                        "post-rewrite",
                                        "sendemail-validate",
                                        "fsmonitor-watchman",
                                        "p4-changelist",
                                        "p4-prepare-changelist",
                                        "p4-post-changelist",
                                        "p4-pre-submit",
                                        "post-index-change"};
    for (size_t i = 0; i < ARRAY_SIZE(hooks); i++)
        if (strcmp(name, hooks[i]) == 0)
            return true;
    return false;
}

void lc_changeset_mark_hooks_path(struct lc_changeset *cs) {
    if (!cs->n)
        return;
    /* the hooks directory git names now, and the one the stage's own
     * .git/config names (husky's each second) */
    char *pre[8] = {NULL};
    hooks_path_in_workspace(cs->workspace, pre);
    bool unknown;
    hooks_path_in_stage(cs, pre + 2, &unknown);
    /* and each where the stage's symlinks lead it (a hooksPath whose
     * directory the workspace does not have, made a symlink by the stage);
     * 4 + k keeps k's parity (husky's) */
    _cleanup_free_ char *ws = realpath(cs->workspace, NULL);
    _cleanup_close_ int wfd = open(cs->workspace, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (size_t k = 0; k < 4 && ws; k++)
        if (pre[k] && pre[k][0])
            pre[4 + k] = stage_link_resolve(cs, wfd, ws, pre[k]);
    for (size_t i = 0; i < cs->n; i++) {
        struct lc_entry *e = &cs->entries[i];
        /* a config that includes others may name any hooks directory: a
         * file with a hook's name anywhere may be one */
        const char *base = strrchr(e->path, '/');
        if (unknown && e->kind != LC_DELETED && git_hook_name(base ? base + 1 : e->path)) {
            e->warnings |= LC_W_GIT_HOOK;
            cs->warnings |= LC_W_GIT_HOOK;
        }
        for (size_t k = 0; k < 8; k++) {
            if (!pre[k])
                continue;
            bool hook;
            if (!pre[k][0]) { /* the workspace's top: its files with a hook's name */
                hook = !strchr(e->path, '/') && git_hook_name(e->path);
            } else {
                size_t pl = strlen(pre[k]);
                /* husky's own directory: its hooks are its direct files */
                hook = strncmp(e->path, pre[k], pl) == 0 &&
                       (e->path[pl] == '\0' || (e->path[pl] == '/' && (k % 2 == 0 || !strchr(e->path + pl + 1, '/'))));
            }
            if (hook) {
                e->warnings |= LC_W_GIT_HOOK;
                cs->warnings |= LC_W_GIT_HOOK;
            }
        }
    }
    for (size_t k = 0; k < 8; k++)
        free(pre[k]);
}

/* Is rel (HOME-relative) such a file, or one in such a directory? */
static bool home_startup_file(const char *rel) {
    for (size_t k = 0; k < ARRAY_SIZE(startup_files); k++)
        if (strcmp(rel, startup_files[k]) == 0)
            return true;
    for (size_t k = 0; k < ARRAY_SIZE(startup_dirs); k++)
        if (path_within(rel, startup_dirs[k]) && strcmp(rel, startup_dirs[k]) != 0)
            return true;
    return false;
}

/* Where in the workspace ws (relative to it) HOME's startup file or
 * directory name is, when a link in HOME leads there (a dotfile manager's
 * ~/.bashrc -> dotfiles/bashrc): the change is made, and listed, there.
 * NULL when it is not a link into ws. */
static char *linked_rel(const char *h, const char *ws, const char *name) {
    _cleanup_free_ char *p = path_join(h, name);
    _cleanup_free_ char *real = p ? realpath(p, NULL) : NULL;
    if (!real || strcmp(real, p) == 0 || !path_within(real, ws) || !*below(real, ws))
        return NULL;
    return strdup(below(real, ws));
}

void lc_changeset_mark_home_config(struct lc_changeset *cs, const char *home) {
    /* git's global config, where core.hooksPath, core.fsmonitor or
     * core.sshCommand run commands in every repository */
    static const char *const git_files[] = {".gitconfig", ".config/git/config"};
    _cleanup_free_ char *h = home && home[0] == '/' ? realpath(home, NULL) : NULL;
    _cleanup_free_ char *ws = h ? realpath(cs->workspace, NULL) : NULL;
    if (!h || !ws || !path_within(h, ws))
        return;
    const char *rel = below(h, ws); /* HOME in the workspace, "" when it is */
    char *linked_files[ARRAY_SIZE(startup_files)], *linked_dirs[ARRAY_SIZE(startup_dirs)];
    for (size_t k = 0; k < ARRAY_SIZE(startup_files); k++)
        linked_files[k] = linked_rel(h, ws, startup_files[k]);
    for (size_t k = 0; k < ARRAY_SIZE(startup_dirs); k++)
        linked_dirs[k] = linked_rel(h, ws, startup_dirs[k]);
    for (size_t i = 0; i < cs->n; i++) {
        struct lc_entry *e = &cs->entries[i];
        unsigned w = 0;
        if (e->kind != LC_DELETED) {
            for (size_t k = 0; k < ARRAY_SIZE(linked_files); k++)
                if (linked_files[k] && strcmp(e->path, linked_files[k]) == 0)
                    w |= LC_W_HOME_STARTUP;
            for (size_t k = 0; k < ARRAY_SIZE(linked_dirs); k++)
                if (linked_dirs[k] && path_within(e->path, linked_dirs[k]) && strcmp(e->path, linked_dirs[k]) != 0)
                    w |= LC_W_HOME_STARTUP;
        }
        size_t rl = strlen(rel);
        if (!rl || (strncmp(e->path, rel, rl) == 0 && e->path[rl] == '/')) {
            const char *in_home = e->path + rl + (rl != 0);
            for (size_t k = 0; k < ARRAY_SIZE(git_files); k++)
                if (strcmp(in_home, git_files[k]) == 0)
                    w |= LC_W_GIT_CONFIG;
            if (e->kind != LC_DELETED && home_startup_file(in_home))
                w |= LC_W_HOME_STARTUP;
        }
        e->warnings |= w;
        cs->warnings |= w;
    }
    for (size_t k = 0; k < ARRAY_SIZE(linked_files); k++)
        free(linked_files[k]);
    for (size_t k = 0; k < ARRAY_SIZE(linked_dirs); k++)
        free(linked_dirs[k]);
}

bool lc_text_char_hidden(const unsigned char *p, size_t n, size_t l, bool unsafe) {
    if (!unsafe)
        return false;
    if (l == 1 && p[0] >= 0x80) /* not UTF-8 (a lone 0x9B: CSI on an 8-bit terminal, counted) */
        return p[0] < 0xa0;
    if (p[0] == '\t' || p[0] == '\n' || p[0] == '\f')
        return false;
    return !(p[0] == '\r' && n > 1 && p[1] == '\n');
}

/* How many characters lc_text_char_hidden counts in fd (read from 0, at
 * most LC_DIFF_MAX bytes), stopping past stop; -errno. */
static long long hidden_chars(int fd, long long stop) {
    unsigned char buf[65536 + 8];
    size_t have = 0;
    off_t off = 0;
    long long count = 0;
    bool eof = false;
    while (count <= stop && (!eof || have)) {
        if (!eof) {
            ssize_t r = pread(fd, buf + have, sizeof buf - 8 - have, off);
            if (r < 0 && errno == EINTR)
                continue;
            if (r < 0)
                return -errno;
            eof = r == 0 || off + r >= (off_t)LC_DIFF_MAX;
            have += (size_t)r;
            off += r;
        }
        /* a character may go on past the buffer: up to 4 bytes (and the
         * newline after a carriage return) are kept for the next read */
        size_t end = eof ? have : have > 5 ? have - 5 : 0, i = 0;
        while (i < end && count <= stop) {
            if (buf[i] >= 0x20 && buf[i] < 0x7f) {
                i++;
                continue;
            }
            bool unsafe;
            size_t l = term_char(buf + i, have - i, &unsafe);
            count += lc_text_char_hidden(buf + i, have - i, l, unsafe);
            i += l;
        }
        memmove(buf, buf + i, have - i);
        have -= i;
        if (eof && i == 0 && have)
            break; /* cannot happen: at the end every byte is taken */
    }
    return count;
}

/* Is fd text (no NUL in its first LC_BINARY_PROBE bytes) of at most
 * LC_DIFF_MAX bytes? */
static bool text_fd(int fd) {
    struct stat st;
    char probe[LC_BINARY_PROBE];
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > LC_DIFF_MAX)
        return false;
    ssize_t n = pread(fd, probe, sizeof probe, 0);
    return n >= 0 && !memchr(probe, 0, (size_t)n);
}

/* Is path a loose git object, objects/XX/HEX (of any repository: one
 * git takes by its content, not named .git, too)? */
static bool loose_object(const char *path) {
    size_t n = strlen(path);
    const char *name = strrchr(path, '/');
    if (!name || n < 11)
        return false;
    size_t nl = n - (size_t)(name + 1 - path);
    if ((nl != 38 && nl != 62) || strspn(name + 1, "0123456789abcdef") != nl || name - path < 10)
        return false;
    const char *dir = name - 2;
    return strspn(dir, "0123456789abcdef") == 2 && strncmp(dir - 8, "objects/", 8) == 0 &&
           (dir - 8 == path || dir[-9] == '/');
}

void lc_changeset_mark_text(struct lc_changeset *cs, const struct lc_stage *st) {
    for (size_t i = 0; i < cs->n; i++) {
        struct lc_entry *e = &cs->entries[i];
        if (e->kind == LC_DELETED || e->new_type != LC_REG || (e->kind == LC_MODIFIED && !(e->changes & LC_CH_CONTENT)))
            continue;
        /* what git keeps (objects, deflated: binary without a NUL often,
         * the index, refs) is no text anyone reads as such */
        bool git = false;
        for (const char *c = e->path; c && !git; c = strchr(c, '/'), c = c ? c + 1 : NULL)
            git = git_dir_len(c) > 0;
        if (git || loose_object(e->path))
            continue;
        _cleanup_close_ int nfd = lc_open_beneath(st->upper_fd, e->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
        if (!text_fd(nfd))
            continue;
        /* the workspace's version, the one the agent saw (never one it
         * did not: the count would tell of it) */
        long long old = 0;
        if (e->old_type == LC_REG && e->pre && e->pre->type == LC_REG) {
            _cleanup_close_ int ofd = lc_open_beneath(st->ws_fd, e->path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK, 0);
            old = text_fd(ofd) ? hidden_chars(ofd, LLONG_MAX - 1) : 0;
            if (old < 0)
                continue;
        }
        if (hidden_chars(nfd, old) > old) {
            e->warnings |= LC_W_INVISIBLE_TEXT;
            cs->warnings |= LC_W_INVISIBLE_TEXT;
        }
    }
}

const char *lc_warning_message(unsigned bit) {
    switch (1u << bit) {
    case LC_W_EXEC: return "gains an executable bit";
    case LC_W_SETID:
        return "setuid/setgid bit (a file's are dropped by apply unless --keep-special-modes; a directory keeps them)";
    case LC_W_GIT_HOOK: return "git hook (runs on your next git command)";
    case LC_W_GIT_CONFIG: return "git configuration changed (can run commands)";
    case LC_W_SYMLINK_OUTSIDE: return "symlink pointing outside the workspace";
    case LC_W_LARGE: return "large file";
    case LC_W_SPECIAL: return "device node or socket (never applied)";
    case LC_W_HARDLINK: return "hard-linked in the stage (applied as separate files)";
    case LC_W_FIFO: return "named pipe (applied: a program that opens it waits for a writer)";
    case LC_W_GIT_LOCK:
        return "git lock file left by a git that did not finish (the run ended or killed it): applied, git commands "
               "that take this lock fail until it is removed";
    case LC_W_GIT_HIDES:
        return "changes what git shows (info/exclude hides files from git status; info/attributes can make "
               "changes binary or undiffed in git diff; an index's skip-worktree and assume-unchanged entries "
               "hide their files' changes from both): after the apply, git may hide what the agent chose";
    case LC_W_CI_CONFIG:
        return "defines a CI pipeline (a workflow, .gitlab-ci.yml, ...): what it names runs on the CI service at your "
               "next push, with the secrets the repository gives its jobs";
    case LC_W_STAGE_MARKER:
        return "makes its directory look like a pvisor stage (a 'version' file that starts 'pvisor-stage '): once "
               "applied, later sandboxed runs' commands do not see that directory";
    case LC_W_TOOL_CONFIG:
        return "configures a tool to run commands (pre-commit or lefthook at your next git commit, direnv, npm, "
               "yarn or pnpm, cargo, rustup's toolchain path, mise, VS Code's tasks, a dev container, the Gradle "
               "or Maven wrapper's download): they run at your next use of that tool here";
    case LC_W_CHANGED_DURING_RUN:
        return "changed on the host during the run, before the command first changed it: the stage holds the "
               "command's version, which may not keep that edit (apply takes the edit for what the command saw; "
               "compare with 'pvisor diff')";
    case LC_W_WORLD_WRITABLE:
        return "writable by every user of this machine once applied (mode o+w): anyone may change it, or what is "
               "in it";
    case LC_W_HOME_STARTUP: return "runs when a shell, a login or your session starts (HOME is in the workspace)";
    case LC_W_GIT_REDIRECT:
        return "names the repository git uses here (a .git file or link, a commondir, the HEAD of a directory git "
               "takes for a repository): its config and hooks, wherever they are, run commands on your next git "
               "command";
    case LC_W_NUL_TEXT:
        return "text with NUL bytes in it: diff shows it as binary and not its content (shells, C compilers, node "
               "and git read such a file, skipping or keeping the NULs); read it with 'cat -v'";
    case LC_W_DIFF_HIDDEN:
        return "its new content is text that diff does not show: the workspace's version is binary or "
               "over " LC_DIFF_MAX_TEXT
               ", so diff prints only 'Binary files ... differ' (or 'Large files'); read the new content in the "
               "stage (upper/ and this path)";
    case LC_W_GIT_REFS:
        return "moves git history (HEAD, a branch or tag made, moved or deleted, or a merge, rebase or cherry-pick "
               "left in progress): what its commits hold is shown here only as git objects; once applied, 'git log "
               "-p' shows them, a checkout, reset, commit or '--continue' brings their content into your files, "
               "and a rebase's todo list runs its 'exec' lines";
    case LC_W_RENAMED_CHANGED:
        return "renamed (or in a renamed directory), and not what it was renamed from: its content or mode (a "
               "symlink's target) differs, or it is new in that directory; diff shows it whole as added, not what "
               "changed";
    case LC_W_INVISIBLE_TEXT:
        return "its new text holds more of what a terminal or an editor does not show as it is than before: a "
               "bidirectional override or isolate (\"Trojan Source\": the code reads in another order than a "
               "compiler takes it), a zero-width, invisible or no-break space character, an escape sequence or "
               "another control byte (ESC, BEL, backspace, a carriage return not ending a line); diff shows each "
               "as \\xNN, a pager (less -R), an editor or a web view may not";
    case LC_W_LOOKALIKE_NAME:
        return "a name that is not plain ASCII (shown after it with its characters as code points): it may pass "
               "for another name on a terminal (an accented letter composed or decomposed, NFC or NFD; a letter "
               "of another script, a Cyrillic 'a' for a Latin one; an invisible, bidirectional or control "
               "character)";
    case LC_W_PY_STARTUP:
        return "runs at every start of Python in that environment (.pth, site/usercustomize, pyvenv.cfg)";
    case LC_W_GIT_WORKTREE:
        return "a linked worktree's git metadata is deleted (git worktree remove, prune or gc; in a sandbox a worktree "
               "outside the workspace looks missing): applying this breaks that worktree";
    }
    return "";
}
