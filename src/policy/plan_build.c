/* plan_build.c: see plan_build.h.  No system calls but those that resolve
 * paths and find what exists (and plan_moved_credentials' listing of the
 * node toolchains' versions). */
#include "policy/plan_build.h"
#include "policy/plan_gitconfig.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

extern char **environ;

/* Runtime hierarchies projected read-only when they exist. */
static const char *const runtime_roots[] = {"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc"};

const char *const plan_credential_paths[] = {
    ".ssh",
    ".gnupg",
    ".aws",
    ".azure",
    ".config/gcloud",
    ".kube",
    ".docker",
    ".netrc",
    ".git-credentials",
    ".config/git/credentials", /* git's other default store (XDG) */
    ".npmrc",
    ".pypirc",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".config/gh",
    ".config/hub",
    ".local/share/keyrings",
    ".password-store",
    ".mozilla",
    ".config/google-chrome",
    ".config/chromium",
    ".config/BraveSoftware",
    ".config/microsoft-edge",
    ".config/vivaldi",
    ".config/opera",
    ".thunderbird",
    /* the same browsers and mail clients packaged as snaps (Ubuntu's
     * default Firefox) or flatpaks keep their profiles under ~/snap and
     * ~/.var/app */
    "snap/firefox/common/.mozilla",
    "snap/chromium/common/chromium",
    "snap/thunderbird/common/.thunderbird",
    ".var/app/org.mozilla.firefox/.mozilla",
    ".var/app/com.google.Chrome/config/google-chrome",
    ".var/app/org.chromium.Chromium/config/chromium",
    ".var/app/com.brave.Browser/config/BraveSoftware",
    ".var/app/com.microsoft.Edge/config/microsoft-edge",
    ".var/app/org.mozilla.Thunderbird/.thunderbird",
    ".config/sops/age", /* sops' age private keys */
    ".pki",
    ".vault-token",
    ".terraform.d",
    ".config/op",
    ".gem/credentials",
    /* RubyGems (3.3 on) keeps the API key there when ~/.gem/credentials
     * does not exist: `gem signin` on a fresh account writes it there */
    ".local/share/gem/credentials",
    ".local/state/pvisor",
    ".codex/auth.json",
    ".claude.json",
    ".config/anthropic",
    ".pgpass",
    ".my.cnf",
    ".s3cfg",
    ".boto",
    ".oci",
    ".config/rclone",
    ".config/doctl",
    ".terraformrc",
    ".config/containers/auth.json",
    ".claude/.credentials.json",
    ".config/github-copilot",
    ".gemini/oauth_creds.json",
    ".cache/huggingface/token",
    ".huggingface/token",
    ".kaggle/kaggle.json",
    ".config/glab-cli",
    ".m2/settings.xml",
    ".m2/settings-security.xml",
    ".gradle/gradle.properties",
    ".composer/auth.json",
    ".config/composer/auth.json",
    ".nuget/NuGet/NuGet.Config",
    ".pulumi/credentials.json",
    ".config/.wrangler",
    ".bash_history",
    ".zsh_history",
    ".histfile", /* zsh's history as its setup wizard (zsh-newuser-install) names it */
    ".python_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".node_repl_history",
    ".lesshst",
    ".viminfo",
    ".local/share/fish/fish_history",
    ".ipython/profile_default/history.sqlite",
    /* found missing by a review: the X11 and ICE session cookies, KDE's
     * wallet, atuin's history (and its sync key and session), prezto's
     * zsh history, neovim's (as .viminfo), Subversion's stored passwords,
     * Bitwarden's CLI vault, opencode's tokens, firebase-tools' and other
     * Node CLIs' tokens, Yarn's npmAuthToken, Databricks, Hetzner, ngrok,
     * Cloudflare tunnel and fly.io tokens (its bin/ next to it stays) */
    ".Xauthority",
    ".ICEauthority",
    ".local/share/kwalletd",
    ".kde/share/apps/kwallet",
    ".local/share/atuin",
    ".zhistory",
    ".local/share/nvim/shada",
    ".local/state/nvim/shada",
    ".subversion/auth",
    ".config/Bitwarden CLI",
    ".local/share/opencode/auth.json",
    ".config/configstore",
    ".yarnrc.yml",
    ".databrickscfg",
    ".config/hcloud",
    ".config/ngrok",
    ".ngrok2",
    ".cloudflared",
    ".fly/config.yml",
    /* found missing by running the agent CLIs: gemini-cli reads
     * GEMINI_API_KEY from ~/.gemini/.env (trusted folders) and ~/.env
     * (always), and keeps OAuth tokens, without a keychain, in
     * gemini-credentials.json (encrypted with a key derived from the host
     * and user names) and its MCP and A2A servers' in mcp-/a2a-oauth-
     * tokens.json; claude-code copies ~/.claude.json, API key included,
     * to ~/.claude/backups/ (older versions to ~/.claude.json.backup);
     * codex keeps MCP servers' OAuth tokens in ~/.codex/.credentials.json */
    ".gemini/.env",
    ".env",
    ".gemini/gemini-credentials.json",
    ".gemini/mcp-oauth-tokens.json",
    ".gemini/a2a-oauth-tokens.json",
    ".claude/backups",
    ".claude.json.backup",
    ".codex/.credentials.json",
    /* found missing by a review: package managers' and other tools' stores
     * whose directory also holds configuration the tool needs (the file
     * alone is hidden there): Poetry's repository passwords and tokens
     * (auth.toml, next to config.toml), Bundler's global config (a gem
     * server's credentials as BUNDLE_<HOST>; ~/.bundle holds its cache
     * and plugins too), sbt's and Ivy's credentials files and the
     * credentials.sbt that names them or holds them inline (~/.ivy2 and
     * ~/.sbt hold the caches, the boot and the global settings), helm's
     * registry logins and the repositories it keeps with their passwords
     * (repositories.yaml), davfs2's passwords (secrets; davfs2.conf and
     * the certificates stay), FileZilla's saved and recent servers with
     * their passwords (also in its old ~/.filezilla), pip's user config
     * (an index-url with a password), rclone's old config file; and uv's
     * plain-text credential store and pyx's tokens, directories of their
     * own */
    ".config/pypoetry/auth.toml",
    ".bundle/config",
    ".ivy2/.credentials",
    ".sbt/.credentials",
    ".sbt/1.0/credentials.sbt",
    ".sbt/0.13/credentials.sbt",
    ".config/helm/registry/config.json",
    ".config/helm/repositories.yaml",
    ".davfs2/secrets",
    ".config/filezilla/sitemanager.xml",
    ".config/filezilla/recentservers.xml",
    ".filezilla/sitemanager.xml",
    ".filezilla/recentservers.xml",
    ".config/pip/pip.conf",
    ".pip/pip.conf",
    ".rclone.conf",
    ".local/share/uv/credentials",
    ".local/share/pyx/credentials",
    /* found missing by a red-team pass: git's cookie file (Gerrit's
     * http.cookiefile), the registry tokens of Yarn 1's, pnpm's and Bun's
     * global configs, minikube's and Teleport's client keys, Ollama's
     * identity key (its models beside it stay), Sentry's, CircleCI's,
     * Stripe's, JFrog's, Vercel's, Netlify's, Supabase's and Railway's
     * CLI tokens, Mercurial's user config ([auth] passwords), Linode's;
     * conda's user config (`anaconda token set`, channel tokens) and
     * anaconda-client's tokens */
    ".gitcookies",
    ".yarnrc",
    ".config/pnpm/rc",
    ".bunfig.toml",
    ".minikube",
    ".tsh",
    ".ollama/id_ed25519",
    ".sentryclirc",
    ".circleci/cli.yml",
    ".config/stripe/config.toml",
    ".jfrog",
    ".vercel/auth.json",
    ".local/share/com.vercel.cli/auth.json",
    ".config/netlify/config.json",
    ".supabase/access-token",
    ".railway/config.json",
    ".hgrc",
    ".config/hg/hgrc",
    ".config/linode-cli",
    ".condarc",
    ".local/share/binstar",
    /* found missing by a red-team pass (2026-12-05): Docker's legacy auth
     * file, python-gitlab's tokens, Alibaba Cloud's, Tencent Cloud's, IBM
     * Cloud's, Scaleway's, Cloud Foundry's, gitea tea's, Travis CI's,
     * MinIO client's and s3fs's keys, Kaggle's XDG token, Dart's pub
     * tokens, Snowflake's and dbt's database passwords, mail clients'
     * passwords (msmtp, fetchmail, isync, Emacs' authinfo), WakaTime's
     * key, adb's private key, gsutil's, lftp's and ghstack's stored
     * credentials, gspread's service account, Pidgin's accounts, and the
     * Signal, Slack and Discord desktop profiles (keys and session
     * cookies); the file alone where its directory holds more */
    ".dockercfg",
    ".python-gitlab.cfg",
    ".config/python-gitlab.cfg",
    ".aliyun",
    ".tccli",
    ".bluemix/config.json",
    ".config/scw/config.yaml",
    ".cf/config.json",
    ".config/tea/config.yml",
    ".travis/config.yml",
    ".mc/config.json",
    ".passwd-s3fs",
    ".config/kaggle/kaggle.json",
    ".config/dart/pub-credentials.json",
    ".pub-cache/credentials.json",
    ".snowsql/config",
    ".snowflake/config.toml",
    ".snowflake/connections.toml",
    ".dbt/profiles.yml",
    ".msmtprc",
    ".config/msmtp/config",
    ".fetchmailrc",
    ".mbsyncrc",
    ".authinfo",
    ".authinfo.gpg",
    ".wakatime.cfg",
    ".android/adbkey",
    ".gsutil",
    ".lftp/bookmarks",
    ".local/share/lftp/bookmarks",
    ".ghstackrc",
    ".config/gspread",
    ".purple/accounts.xml",
    ".config/Signal",
    ".config/Slack",
    ".config/discord",
    NULL,
};

const char *const plan_home_config_files[] = {
    ".gitconfig", ".config/git/config", ".config/git/ignore", ".bashrc",
    ".profile",   ".bash_profile",      ".inputrc",           ".vimrc",
    ".zshrc",     ".editorconfig",      ".tmux.conf",         NULL,
};

/* Environment variables handed to the command.  The locale categories
 * by name, not LC_* (ssh's SendEnv LC_* is a common way to carry tokens). */
static const char *const env_allow[] = {"PATH",
                                        "TERM",
                                        "LANG",
                                        "LANGUAGE",
                                        "TZ",
                                        "USER",
                                        "LOGNAME",
                                        "SHELL",
                                        "COLORTERM",
                                        "NO_COLOR",
                                        "TERM_PROGRAM",
                                        "COLUMNS",
                                        "LINES",
                                        "LC_ALL",
                                        "LC_CTYPE",
                                        "LC_COLLATE",
                                        "LC_MESSAGES",
                                        "LC_MONETARY",
                                        "LC_NUMERIC",
                                        "LC_TIME",
                                        "LC_ADDRESS",
                                        "LC_IDENTIFICATION",
                                        "LC_MEASUREMENT",
                                        "LC_NAME",
                                        "LC_PAPER",
                                        "LC_TELEPHONE",
                                        NULL};

const char *const plan_tool_root_vars[] = {"PYENV_ROOT",    "RBENV_ROOT",  "NODENV_ROOT", "GOENV_ROOT",  "PLENV_ROOT",
                                           "JENV_ROOT",     "NVM_DIR",     "VOLTA_HOME",  "SDKMAN_DIR",  "ASDF_DIR",
                                           "ASDF_DATA_DIR", "RUSTUP_HOME", "GOROOT",      "VIRTUAL_ENV", "CONDA_PREFIX",
                                           "JAVA_HOME",     NULL};

bool plan_home_is_system(const char *home) {
    if (!home || strcmp(home, "/") == 0)
        return true;
    for (size_t i = 0; i < sizeof runtime_roots / sizeof runtime_roots[0]; i++)
        if (path_overlaps(home, runtime_roots[i]))
            return true;
    return false;
}

bool plan_under_system_dir(const char *path) {
    for (size_t i = 0; i < sizeof runtime_roots / sizeof runtime_roots[0]; i++)
        if (path_within(path, runtime_roots[i]))
            return true;
    return false;
}

bool plan_is_credential_path(const char *rel) {
    for (const char *const *c = plan_credential_paths; *c; c++)
        if (path_within(rel, *c))
            return true;
    return false;
}

/* Where the user's environment moves a credential location from its place
 * in HOME.  A base directory moves every location below its default
 * (XDG_CONFIG_HOME: ~/.config/gh is XDG_CONFIG_HOME/gh); a tool's own
 * variable names its store itself, or the directory that holds it. */
static const struct {
    const char *var, *home_prefix;
} moved_bases[] = {
    {"XDG_CONFIG_HOME", ".config/"},
    {"XDG_DATA_HOME", ".local/share/"},
    {"XDG_STATE_HOME", ".local/state/"},
    {"XDG_CACHE_HOME", ".cache/"},
};
static const struct {
    const char *var, *file; /* file: inside the directory var names; NULL: var names the store */
} moved_stores[] = {
    {"GNUPGHOME", NULL},
    {"DOCKER_CONFIG", NULL},
    {"REGISTRY_AUTH_FILE", NULL},
    {"AWS_SHARED_CREDENTIALS_FILE", NULL},
    {"AWS_CONFIG_FILE", NULL},
    {"KUBECONFIG", NULL}, /* a list, ':'-separated */
    {"PASSWORD_STORE_DIR", NULL},
    {"CLOUDSDK_CONFIG", NULL},
    {"AZURE_CONFIG_DIR", NULL},
    {"GH_CONFIG_DIR", NULL},
    {"GOOGLE_APPLICATION_CREDENTIALS", NULL},
    {"NETRC", NULL},
    {"PGPASSFILE", NULL},
    {"TF_CLI_CONFIG_FILE", NULL},
    {"RCLONE_CONFIG", NULL},
    {"BOTO_CONFIG", NULL},
    {"OCI_CLI_CONFIG_FILE", NULL},
    {"OP_CONFIG_DIR", NULL},
    {"HF_TOKEN_PATH", NULL},
    {"HISTFILE", NULL},
    {"PYTHON_HISTORY", NULL},
    {"PSQL_HISTORY", NULL},
    {"MYSQL_HISTFILE", NULL},
    {"NODE_REPL_HISTORY", NULL},
    {"SQLITE_HISTORY", NULL},
    {"LESSHISTFILE", NULL},
    {"XAUTHORITY", NULL},
    {"ICEAUTHORITY", NULL},
    {"CLAUDE_CONFIG_DIR", ".credentials.json"},
    {"CLAUDE_CONFIG_DIR", ".claude.json"},
    {"CLAUDE_CONFIG_DIR", "backups"},
    {"CODEX_HOME", "auth.json"},
    {"CODEX_HOME", ".credentials.json"},
    /* gemini-cli's home (its .gemini/ and .env inside) */
    {"GEMINI_CLI_HOME", ".gemini/.env"},
    {"GEMINI_CLI_HOME", ".env"},
    {"GEMINI_CLI_HOME", ".gemini/oauth_creds.json"},
    {"GEMINI_CLI_HOME", ".gemini/gemini-credentials.json"},
    {"GEMINI_CLI_HOME", ".gemini/mcp-oauth-tokens.json"},
    {"GEMINI_CLI_HOME", ".gemini/a2a-oauth-tokens.json"},
    {"KAGGLE_CONFIG_DIR", "kaggle.json"},
    {"HF_HOME", "token"},
    {"CARGO_HOME", "credentials"},
    {"CARGO_HOME", "credentials.toml"},
    {"GRADLE_USER_HOME", "gradle.properties"},
    {"COMPOSER_HOME", "auth.json"},
    {"PULUMI_HOME", "credentials.json"},
    /* found missing by a review: the variables that move the stores of
     * listed tools.  zsh reads its startup files from ZDOTDIR, and the
     * frameworks that set HISTFILE keep the history there (prezto, zim:
     * .zhistory; grml, zsh4humans: .zsh_history; zsh-newuser-install:
     * .histfile); sops reads age keys from SOPS_AGE_KEY_FILE; hub's and
     * glab's tokens, IPython's history, Databricks' and Bitwarden CLI's
     * stores move with their own variables. */
    {"ZDOTDIR", ".zsh_history"},
    {"ZDOTDIR", ".zhistory"},
    {"ZDOTDIR", ".histfile"},
    {"SOPS_AGE_KEY_FILE", NULL},
    {"HUB_CONFIG", NULL},
    {"GLAB_CONFIG_DIR", NULL},
    {"IPYTHONDIR", "profile_default/history.sqlite"},
    {"DATABRICKS_CONFIG_FILE", NULL},
    {"BITWARDENCLI_APPDATA_DIR", NULL},
    /* found missing by a review: the stores that Poetry, Bundler, sbt,
     * helm, pip, uv and pyx move with their own variables (npm's:
     * npm_moved below) */
    {"POETRY_CONFIG_DIR", "auth.toml"},
    {"BUNDLE_USER_CONFIG", NULL},
    {"BUNDLE_USER_HOME", "config"},
    {"SBT_CREDENTIALS", NULL},
    {"HELM_REGISTRY_CONFIG", NULL},
    {"HELM_REPOSITORY_CONFIG", NULL},
    {"HELM_CONFIG_HOME", "registry/config.json"},
    {"HELM_CONFIG_HOME", "repositories.yaml"},
    {"PIP_CONFIG_FILE", NULL},
    {"UV_CREDENTIALS_DIR", NULL},
    {"PYX_CREDENTIALS_DIR", NULL},
    /* pip's "site" config, sys.prefix/pip.conf (an index-url with a
     * password): the environment a venv's or conda's activation names,
     * which the run projects whole as a toolchain (or shows in HOME's
     * view); one whose bin/ is on PATH: add_python_env_pipconfs */
    {"VIRTUAL_ENV", "pip.conf"},
    {"CONDA_PREFIX", "pip.conf"},
    /* found missing by a review: n's prefix (its node and npm, so npm's
     * global config, $N_PREFIX/etc/npmrc), and a Maven installation the
     * user names (its conf/settings.xml: repository passwords) */
    {"N_PREFIX", "etc/npmrc"},
    {"MAVEN_HOME", "conf/settings.xml"},
    {"M2_HOME", "conf/settings.xml"},
};

/* npm reads npm_config_* in any letter case (its config loader matches
 * the prefix case-insensitively and lowercases the rest), so a store
 * named by Npm_Config_Userconfig is as moved as one named by
 * NPM_CONFIG_USERCONFIG: every spelling in the environment is followed.
 * userconfig and globalconfig name the store, prefix the directory of
 * its etc/npmrc (npm's global config). */
static const struct {
    const char *key, *file;
} npm_moved[] = {
    {"npm_config_userconfig", NULL},
    {"npm_config_globalconfig", NULL},
    {"npm_config_prefix", "etc/npmrc"},
};

/* What the "variable" of an entry says when no variable moved it (the
 * store is found where a tool looks by itself): plan_moved_variable's
 * answer holds a space then. */
#define PYTHON_ENV_PIPCONF_WHAT "pip's site config in a Python environment whose bin/ is on PATH"
#define SBT_GLOBAL_WHAT "sbt's global settings, which may hold credentials inline"

/* A tool's global config inside a toolchain a version manager keeps,
 * one directory per version below its root (the variable's, else its
 * default in HOME); the run projects such a toolchain whole (or shows it
 * in HOME's view): each version's file found at start is kept from the
 * command as a moved store is.  npm reads $PREFIX/etc/npmrc, PREFIX the
 * node installation it runs from, and `npm config set -g` writes a
 * registry token there; Maven reads $MAVEN_HOME/conf/settings.xml, whose
 * <servers> hold repository passwords as ~/.m2/settings.xml's do.  A
 * system prefix (/usr/local/etc/npmrc, /usr/share/maven) is not the
 * user's. */
#define NODE_NPMRC_WHAT "npm's global config in a node toolchain"
#define MAVEN_SETTINGS_WHAT "Maven's global settings in a Maven toolchain"
static const struct {
    const char *var, *home_default, *versions, *file, *what;
} toolchain_configs[] = {
    {"NVM_DIR", ".nvm", "versions/node", "etc/npmrc", NODE_NPMRC_WHAT},
    {"NODENV_ROOT", ".nodenv", "versions", "etc/npmrc", NODE_NPMRC_WHAT},
    {"ASDF_DATA_DIR", ".asdf", "installs/nodejs", "etc/npmrc", NODE_NPMRC_WHAT},
    {"VOLTA_HOME", ".volta", "tools/image/node", "etc/npmrc", NODE_NPMRC_WHAT},
    {"FNM_DIR", ".fnm", "node-versions", "installation/etc/npmrc", NODE_NPMRC_WHAT},
    {"FNM_DIR", ".local/share/fnm", "node-versions", "installation/etc/npmrc", NODE_NPMRC_WHAT},
    {"MISE_DATA_DIR", ".local/share/mise", "installs/node", "etc/npmrc", NODE_NPMRC_WHAT},
    {"SDKMAN_DIR", ".sdkman", "candidates/maven", "conf/settings.xml", MAVEN_SETTINGS_WHAT},
    {"ASDF_DATA_DIR", ".asdf", "installs/maven", "conf/settings.xml", MAVEN_SETTINGS_WHAT},
    {"MISE_DATA_DIR", ".local/share/mise", "installs/maven", "conf/settings.xml", MAVEN_SETTINGS_WHAT},
};

/* Add path (absolute) to the NULL-terminated list v (n entries, cap
 * PLAN_MAX_MOVED, -E2BIG beyond it): resolved (symlinks; for a store that
 * does not exist yet, its deepest existing ancestor); neither "/" nor one
 * that holds HOME (hiding it would hide HOME), nor a duplicate.  One that
 * is or holds the workspace is kept: plan_build refuses such a run. */
static int add_moved(char **v, size_t *n, const char *path, const char *home, const char *var) {
    if (path[0] != '/')
        return 0;
    char *real = NULL;
    int r = path_resolve(path, &real);
    if (r <= 0)
        return r;
    /* "PATH\0VAR": the variable after the path (plan_moved_variable) */
    size_t rl = strlen(real), vl = strlen(var);
    char *e = realloc(real, rl + vl + 2);
    if (!e) {
        free(real);
        return -ENOMEM;
    }
    real = e;
    memcpy(real + rl + 1, var, vl + 1);
    bool skip = strcmp(real, "/") == 0 || (home && path_within(home, real));
    for (size_t i = 0; i < *n && !skip; i++)
        skip = strcmp(v[i], real) == 0;
    if (skip) {
        free(real);
        return 0;
    }
    if (*n >= PLAN_MAX_MOVED) {
        free(real);
        return -E2BIG; /* never drop one silently */
    }
    v[(*n)++] = real;
    return 0;
}

/* A variable's value as the tool reads it: "~" and "~/..." are HOME's
 * (GnuPG expands them in GNUPGHOME), a relative one is relative to the
 * directory the command starts in (gh, kubectl, gpg take it so); NULL
 * when it cannot be told (no HOME, no cwd) or out of memory (*ret_oom). */
static char *moved_value(const char *val, const char *home, const char *cwd, bool *ret_oom) {
    char *p = NULL;
    if (val[0] == '/')
        p = strdup(val);
    else if (val[0] == '~' && (val[1] == '\0' || val[1] == '/')) {
        if (!home)
            return NULL;
        p = val[1] ? path_join(home, val + 2) : strdup(home);
    } else if (val[0] == '~' || !cwd) {
        return NULL; /* ~user: not HOME's */
    } else {
        p = path_join(cwd, val);
    }
    *ret_oom = !p;
    return p;
}

/* The default of a toolchain's root in HOME (rel), where the XDG
 * base that holds it (XDG_DATA_HOME for fnm's and mise's) moves it: NULL
 * when it cannot be told, *ret_oom on out of memory. */
static char *toolchain_default_root(const char *home, const char *cwd, const char *rel, bool *ret_oom) {
    for (size_t b = 0; b < sizeof moved_bases / sizeof moved_bases[0]; b++) {
        size_t pl = strlen(moved_bases[b].home_prefix);
        const char *val = getenv(moved_bases[b].var);
        if (strncmp(rel, moved_bases[b].home_prefix, pl) != 0 || !val || !val[0])
            continue;
        _cleanup_free_ char *base = moved_value(val, home, cwd, ret_oom);
        char *p = base ? path_join(base, rel + pl) : NULL;
        *ret_oom = *ret_oom || (base && !p);
        return p;
    }
    char *p = home ? path_join(home, rel) : NULL;
    *ret_oom = home && !p;
    return p;
}

/* Each version's global config (toolchain_configs[t]) below root that
 * exists now, added to v as add_moved does. */
static int add_toolchain_configs(char **v, size_t *n, const char *root, size_t t, const char *home) {
    const char *versions = toolchain_configs[t].versions, *file = toolchain_configs[t].file;
    _cleanup_free_ char *dir = path_join(root, versions);
    if (!dir)
        return -ENOMEM;
    DIR *d = opendir(dir);
    if (!d)
        return 0; /* no such toolchain, or not ours to list */
    int r = 0;
    struct dirent *e;
    while (r >= 0 && (e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        _cleanup_free_ char *ver = path_join(dir, e->d_name);
        _cleanup_free_ char *p = ver ? path_join(ver, file) : NULL;
        struct stat st;
        if (!p)
            r = -ENOMEM;
        else if (lstat(p, &st) == 0)
            r = add_moved(v, n, p, home, toolchain_configs[t].what);
    }
    closedir(d);
    return r;
}

/* Each value of a variable a store moves with, for every name in the
 * environment that spells key in any letter case (npm_moved), added to v
 * as add_moved does (file: inside the directory the value names). */
static int add_npm_moved(char **v, size_t *n, const char *home, const char *cwd) {
    int r = 0;
    bool oom = false;
    for (char **e = environ; e && *e && r >= 0; e++) {
        const char *eq = strchr(*e, '=');
        for (size_t i = 0; eq && eq[1] && i < sizeof npm_moved / sizeof npm_moved[0] && r >= 0; i++) {
            size_t kl = strlen(npm_moved[i].key);
            if ((size_t)(eq - *e) != kl || strncasecmp(*e, npm_moved[i].key, kl) != 0)
                continue;
            char var[64];
            snprintf(var, sizeof var, "%.*s", (int)kl, *e);
            _cleanup_free_ char *full = moved_value(eq + 1, home, cwd, &oom);
            if (!full) {
                r = oom ? -ENOMEM : 0;
                continue;
            }
            _cleanup_free_ char *p = npm_moved[i].file ? path_join(full, npm_moved[i].file) : strdup(full);
            r = p ? add_moved(v, n, p, home, var) : -ENOMEM;
        }
    }
    return r;
}

/* pip reads sys.prefix/pip.conf: a venv (pyvenv.cfg) or conda environment
 * (conda-meta/) whose bin/ is on PATH has its own, which a projection of
 * it (or HOME's view) shows.  Only such entries outside the system's
 * directories are looked at (the system's python is not the user's, and
 * a PATH of system directories costs nothing). */
static int add_python_env_pipconfs(char **v, size_t *n, const char *home) {
    const char *path = getenv("PATH");
    _cleanup_free_ char *copy = path ? strdup(path) : NULL;
    if (path && !copy)
        return -ENOMEM;
    char *save = NULL;
    int r = 0;
    for (char *d = copy ? strtok_r(copy, ":", &save) : NULL; d && r >= 0; d = strtok_r(NULL, ":", &save)) {
        size_t l = strlen(d);
        while (l > 1 && d[l - 1] == '/')
            d[--l] = '\0';
        if (d[0] != '/' || l < 5 || strcmp(d + l - 4, "/bin") != 0)
            continue;
        d[l - 4] = '\0'; /* the environment's root */
        struct stat st;
        if (plan_home_is_system(d)) /* "/", a system directory, in one or holding one */
            continue;
        _cleanup_free_ char *cfg = path_join(d, "pyvenv.cfg"), *meta = path_join(d, "conda-meta");
        _cleanup_free_ char *conf = path_join(d, "pip.conf");
        if (!cfg || !meta || !conf)
            return -ENOMEM;
        if (stat(cfg, &st) == 0 || stat(meta, &st) == 0)
            r = add_moved(v, n, conf, home, PYTHON_ENV_PIPCONF_WHAT);
    }
    return r;
}

/* Does name end in suffix? */
static bool ends_with(const char *name, const char *suffix) {
    size_t nl = strlen(name), sl = strlen(suffix);
    return nl > sl && strcmp(name + nl - sl, suffix) == 0;
}

/* The files in dir (HOME/.sbt, a version of it, its plugins/) that end in
 * one of suffixes (NULL-terminated), each added to v as add_moved does;
 * with versions, its subdirectories named as sbt's versions (0.13, 1.0,
 * 2.0: a digit first) are looked into as well, and their plugins/. */
static int add_sbt_files(char **v, size_t *n, const char *dir, const char *const *suffixes, bool versions,
                         const char *home) {
    DIR *d = opendir(dir);
    if (!d)
        return 0; /* none, or not ours to list */
    int r = 0;
    for (struct dirent *e; r >= 0 && (e = readdir(d));) {
        if (e->d_name[0] == '.')
            continue;
        _cleanup_free_ char *p = path_join(dir, e->d_name);
        if (!p) {
            r = -ENOMEM;
            break;
        }
        bool match = false;
        for (const char *const *s = suffixes; *s && !match; s++)
            match = ends_with(e->d_name, *s);
        struct stat st;
        if (match && plan_is_credential_path(p + strlen(home) + (strcmp(home, "/") != 0)))
            continue; /* credentials.sbt: in the list already */
        if (match && lstat(p, &st) == 0 && !S_ISDIR(st.st_mode)) {
            r = add_moved(v, n, p, home, SBT_GLOBAL_WHAT);
        } else if (versions && e->d_name[0] >= '0' && e->d_name[0] <= '9' &&
                   (e->d_type == DT_DIR || e->d_type == DT_UNKNOWN)) {
            static const char *const sbt[] = {".sbt", NULL}, *const plugin[] = {".sbt", ".scala", NULL};
            _cleanup_free_ char *plugins = path_join(p, "plugins");
            r = plugins ? add_sbt_files(v, n, p, sbt, false, home) : -ENOMEM;
            if (r >= 0)
                r = add_sbt_files(v, n, plugins, plugin, false, home);
        }
    }
    closedir(d);
    return r;
}

/* git's global config holding a credential, or including a file that
 * does (plan_gitconfig.c): such a file is kept from the command whole,
 * and the run says so (plan_moved_is_gitconfig). */
#define GITCONFIG_WHAT "git's global config, which holds a credential"

/* The files to keep from the command for the git config file path
 * (plan_gitconfig_credential_files: it and the files it includes, "~/"
 * there home's), added to v as add_moved does. */
static int add_gitconfig(char **v, size_t *n, const char *path, const char *home) {
    char **files = NULL;
    int r = plan_gitconfig_credential_files(path, home, &files);
    for (size_t i = 0; r >= 0 && files[i]; i++)
        r = add_moved(v, n, files[i], home, GITCONFIG_WHAT);
    plan_moved_free(files);
    return r;
}

/* git's global config files that hold a credential, added to v as
 * add_moved does: GIT_CONFIG_GLOBAL's, ~/.gitconfig and XDG_CONFIG_HOME's
 * git/config (all three: the environment the command gets may not name
 * the first). */
static int add_gitconfigs(char **v, size_t *n, const char *home, const char *cwd) {
    bool oom = false;
    const char *g = getenv("GIT_CONFIG_GLOBAL"), *x = getenv("XDG_CONFIG_HOME");
    _cleanup_free_ char *global = g && g[0] ? moved_value(g, home, cwd, &oom) : NULL;
    _cleanup_free_ char *dot = home ? path_join(home, ".gitconfig") : NULL;
    _cleanup_free_ char *xbase = x && x[0] ? moved_value(x, home, cwd, &oom) : home ? path_join(home, ".config") : NULL;
    _cleanup_free_ char *xdg = xbase ? path_join(xbase, "git/config") : NULL;
    if (oom)
        return -ENOMEM;
    const char *files[] = {global, dot, xdg};
    int r = 0;
    for (size_t i = 0; i < ARRAY_SIZE(files) && r >= 0; i++)
        if (files[i])
            r = add_gitconfig(v, n, files[i], home);
    return r;
}

bool plan_moved_is_gitconfig(const char *entry) {
    return strcmp(plan_moved_variable(entry), GITCONFIG_WHAT) == 0;
}

const char *plan_moved_variable(const char *entry) {
    return entry + strlen(entry) + 1;
}

int plan_moved_credentials(const char *home, const char *cwd, char ***ret) {
    char **v = calloc(PLAN_MAX_MOVED + 1, sizeof *v);
    if (!v)
        return -ENOMEM;
    size_t n = 0;
    int r = 0;
    bool oom = false;
    for (size_t b = 0; b < sizeof moved_bases / sizeof moved_bases[0] && r >= 0; b++) {
        const char *val = getenv(moved_bases[b].var);
        _cleanup_free_ char *base = val && val[0] ? moved_value(val, home, cwd, &oom) : NULL;
        size_t pl = strlen(moved_bases[b].home_prefix);
        r = oom ? -ENOMEM : 0;
        for (const char *const *c = plan_credential_paths; base && *c && r >= 0; c++) {
            if (strncmp(*c, moved_bases[b].home_prefix, pl) != 0)
                continue;
            _cleanup_free_ char *p = path_join(base, *c + pl);
            r = p ? add_moved(v, &n, p, home, moved_bases[b].var) : -ENOMEM;
        }
    }
    for (size_t i = 0; i < sizeof moved_stores / sizeof moved_stores[0] && r >= 0; i++) {
        const char *val = getenv(moved_stores[i].var);
        _cleanup_free_ char *list = val ? strdup(val) : NULL;
        char *save = NULL;
        if (val && !list)
            r = -ENOMEM;
        for (char *e = list ? strtok_r(list, ":", &save) : NULL; e && r >= 0; e = strtok_r(NULL, ":", &save)) {
            _cleanup_free_ char *full = moved_value(e, home, cwd, &oom);
            if (!full) {
                r = oom ? -ENOMEM : 0;
                continue;
            }
            _cleanup_free_ char *p = moved_stores[i].file ? path_join(full, moved_stores[i].file) : strdup(full);
            r = p ? add_moved(v, &n, p, home, moved_stores[i].var) : -ENOMEM;
        }
    }
    if (r >= 0)
        r = add_npm_moved(v, &n, home, cwd);
    if (r >= 0)
        r = add_python_env_pipconfs(v, &n, home);
    if (r >= 0)
        r = add_gitconfigs(v, &n, home, cwd);
    /* sbt's global settings: every *.sbt in ~/.sbt/<version>/ is applied
     * to every build, and ~/.sbt/<version>/plugins/ is built as a project
     * (*.sbt, *.scala): sbt's documentation and the publishing guides put
     * `credentials += Credentials(realm, host, user, password)` there
     * (sonatype.sbt, global.sbt), as sbt 0.12 did in ~/.sbt itself.  Hidden
     * whole: the file alone, found at start; sbt's launcher files
     * (repositories, boot/) stay. */
    if (r >= 0 && home) {
        static const char *const sbt[] = {".sbt", NULL};
        _cleanup_free_ char *dot_sbt = path_join(home, ".sbt");
        r = dot_sbt ? add_sbt_files(v, &n, dot_sbt, sbt, true, home) : -ENOMEM;
    }
    for (size_t i = 0; i < sizeof toolchain_configs / sizeof toolchain_configs[0] && r >= 0; i++) {
        const char *val = getenv(toolchain_configs[i].var);
        _cleanup_free_ char *set = val && val[0] ? moved_value(val, home, cwd, &oom) : NULL;
        _cleanup_free_ char *def =
            oom ? NULL : toolchain_default_root(home, cwd, toolchain_configs[i].home_default, &oom);
        r = oom ? -ENOMEM : 0;
        if (r >= 0 && set)
            r = add_toolchain_configs(v, &n, set, i, home);
        if (r >= 0 && def)
            r = add_toolchain_configs(v, &n, def, i, home);
    }
    if (r < 0) {
        plan_moved_free(v);
        return r;
    }
    *ret = v;
    return 0;
}

int plan_moved_in_other_home(const char *other, char **v) {
    size_t n = 0;
    while (v[n])
        n++;
    static const char *const gitconfigs[] = {".gitconfig", ".config/git/config"};
    for (size_t i = 0; i < ARRAY_SIZE(gitconfigs); i++) {
        _cleanup_free_ char *g = path_join(other, gitconfigs[i]);
        if (!g)
            return -ENOMEM;
        int r = add_gitconfig(v, &n, g, other);
        if (r < 0)
            return r;
    }
    static const char *const sbt[] = {".sbt", NULL};
    _cleanup_free_ char *dot_sbt = path_join(other, ".sbt");
    int r = dot_sbt ? add_sbt_files(v, &n, dot_sbt, sbt, true, other) : -ENOMEM;
    for (size_t i = 0; i < sizeof toolchain_configs / sizeof toolchain_configs[0] && r >= 0; i++) {
        _cleanup_free_ char *root = path_join(other, toolchain_configs[i].home_default);
        r = root ? add_toolchain_configs(v, &n, root, i, other) : -ENOMEM;
    }
    return r;
}

void plan_moved_free(char **v) {
    for (size_t i = 0; v && v[i]; i++)
        free(v[i]);
    free(v);
}

/* Does rel (relative to a home) hold a credential location below it? */
static bool holds_credential(const char *rel) {
    for (const char *const *c = plan_credential_paths; *c; c++)
        if (path_within(*c, rel) && strcmp(*c, rel) != 0)
            return true;
    return false;
}

const char *plan_home_runtime_root(const char *home, const char *path, char *ret_buf, size_t size) {
    if (!home || !path_within(path, home) || strcmp(path, home) == 0)
        return NULL;
    const char *rel = path + strlen(home) + 1;
    const char *slash = strchr(rel, '/');
    size_t len = slash ? (size_t)(slash - rel) : strlen(rel);
    char top[256];
    if (len == 0 || len >= sizeof top)
        return NULL;
    memcpy(top, rel, len);
    top[len] = '\0';
    /* Directories mixing tools with secrets or pvisor state are never
     * projected whole; .local/bin style entries are projected as given. */
    if (plan_is_credential_path(top) || top[0] != '.')
        return NULL;
    /* A top directory mixing tools with secrets (.local, .config, .cache,
     * ~/.cargo with its credentials.toml) is projected only as far as the
     * entry, which must neither be nor hold a credential location. */
    if (strcmp(top, ".local") == 0 || strcmp(top, ".config") == 0 || strcmp(top, ".cache") == 0 ||
        holds_credential(top)) {
        if (!slash || plan_is_credential_path(rel) || holds_credential(rel))
            return NULL;
        int n = snprintf(ret_buf, size, "%s", path);
        return n > 0 && (size_t)n < size ? ret_buf : NULL;
    }
    int n = snprintf(ret_buf, size, "%s/%s", home, top);
    return n > 0 && (size_t)n < size ? ret_buf : NULL;
}

static int cmp_mount(const void *a, const void *b) {
    const struct plan_mount *x = a, *y = b;
    /* Deny rules and covers after every projection: a projection made
     * later on a parent (or on where a symlink leads) would hide them. */
    int h = (x->kind == PLAN_HIDE) - (y->kind == PLAN_HIDE);
    if (h)
        return h;
    int c = strcmp(x->path, y->path);
    if (c)
        return c;
    /* Same path: tmpfs first, then projections, then deny rules on top. */
    static const int rank[] = {[PLAN_TMPFS] = 0, [PLAN_BIND_RO] = 1, [PLAN_BIND_RW] = 2, [PLAN_HIDE] = 3};
    return rank[x->kind] - rank[y->kind];
}

static bool already(const struct launch_plan *p, const char *path) {
    for (size_t i = 0; i < p->n_mounts; i++)
        if (strcmp(p->mounts[i].path, path) == 0)
            return true;
    return false;
}

/* Cover path when one of the first n_proj mounts of p projects it from
 * the host, read-only or read-write; HOME's view (the mount from
 * home_view) is no reason: its server masks what it must, and a grant
 * inside HOME is (it shows the real directory on top of the view). */
static int cover_where_projected(struct launch_plan *p, size_t n_proj, const char *home_view, const char *path) {
    bool cover = false;
    for (size_t i = 0; i < n_proj && !cover; i++) {
        const struct plan_mount *pm = &p->mounts[i];
        if (home_view && pm->source && strcmp(pm->source, home_view) == 0)
            continue;
        cover = (pm->kind == PLAN_BIND_RO || pm->kind == PLAN_BIND_RW) && path_within(path, pm->path);
    }
    return cover && plan_path_ok(path) && !already(p, path) ? plan_add_mount(p, PLAN_HIDE, path, 0) : 0;
}

/* Where a credential location of home leads (real: through a link of its
 * own or a parent's), when that is outside home: covered where a
 * projection shows it. */
static int cover_link_target(struct launch_plan *p, size_t n_proj, const char *home_view, const char *home,
                             const char *real) {
    if (!real || path_within(real, home))
        return 0;
    return cover_where_projected(p, n_proj, home_view, real);
}

/* Is path covered by a read-only runtime root already (no need to project)? */
static bool under_runtime(const struct launch_plan *p, const char *path) {
    for (size_t i = 0; i < p->n_mounts; i++)
        if (p->mounts[i].kind == PLAN_BIND_RO && path_within(path, p->mounts[i].path))
            return true;
    return false;
}

/* Set name=value in the command's environment: replaced where the name
 * is there already (an allowlisted name also given to --pass-env), so no
 * name appears twice (libc's getenv would take the first). */
static int env_push(char ***envp, size_t *n, const char *name, const char *value) {
    char *s;
    if (asprintf(&s, "%s=%s", name, value) < 0)
        return -ENOMEM;
    size_t l = strlen(name);
    for (size_t i = 0; i < *n; i++)
        if (strncmp((*envp)[i], name, l) == 0 && (*envp)[i][l] == '=') {
            free((*envp)[i]);
            (*envp)[i] = s;
            return 0;
        }
    char **nv = realloc(*envp, (*n + 2) * sizeof *nv);
    if (!nv) {
        free(s);
        return -ENOMEM;
    }
    *envp = nv;
    nv[(*n)++] = s;
    nv[*n] = NULL;
    return 0;
}

static const char *env_get(char *const *env, const char *name) {
    size_t l = strlen(name);
    for (char *const *e = env; e && *e; e++)
        if (strncmp(*e, name, l) == 0 && (*e)[l] == '=')
            return *e + l + 1;
    return NULL;
}

/* Set git config key=value for the command, as `git -c` would (over the
 * config files): the next GIT_CONFIG_KEY_n/GIT_CONFIG_VALUE_n after those
 * the user passed (--pass-env; an empty GIT_CONFIG_COUNT is 0 to git); a
 * GIT_CONFIG_COUNT that is not a number is left alone (git refuses to
 * run with it anyway).  A passed GIT_CONFIG_PARAMETERS (what `git -c`
 * hands to the git commands it runs) is read after those and wins: the
 * pair is appended to it as well, in the "'key=value'" form every git
 * reads.  key and value hold no quote. */
static int git_config_push(char ***envp, size_t *n, const char *key, const char *value) {
    const char *count = env_get(*envp, "GIT_CONFIG_COUNT");
    unsigned long k = 0;
    if (count && *count) {
        char *end;
        errno = 0;
        k = strtoul(count, &end, 10);
        if (*end || errno || k >= 1000000)
            return 0;
    }
    char name[48], num[24];
    snprintf(name, sizeof name, "GIT_CONFIG_KEY_%lu", k);
    int r = env_push(envp, n, name, key);
    snprintf(name, sizeof name, "GIT_CONFIG_VALUE_%lu", k);
    if (r >= 0)
        r = env_push(envp, n, name, value);
    snprintf(num, sizeof num, "%lu", k + 1);
    if (r >= 0)
        r = env_push(envp, n, "GIT_CONFIG_COUNT", num);
    const char *params = env_get(*envp, "GIT_CONFIG_PARAMETERS");
    if (r >= 0 && params) {
        _cleanup_free_ char *v = NULL;
        if (asprintf(&v, "%s%s'%s=%s'", params, *params ? " " : "", key, value) < 0)
            return -ENOMEM;
        r = env_push(envp, n, "GIT_CONFIG_PARAMETERS", v);
    }
    return r;
}

/* Hand over the variables of names (NULL-terminated) that env sets. */
static int push_named(char ***envp, size_t *n, char *const *env, const char *const *names) {
    int r = 0;
    for (const char *const *a = names; *a && r >= 0; a++) {
        const char *v = env_get(env, *a);
        if (v)
            r = env_push(envp, n, *a, v);
    }
    return r;
}

static int build_env(const struct plan_inputs *in, struct launch_plan *p) {
    size_t n = 0;
    p->envp = calloc(1, sizeof *p->envp);
    if (!p->envp)
        return -ENOMEM;
    int r = push_named(&p->envp, &n, in->environ, env_allow);
    /* Paths, not secrets: the root the user's tools are configured with
     * (plan_tool_root_vars). */
    if (r >= 0)
        r = push_named(&p->envp, &n, in->environ, plan_tool_root_vars);
    for (int i = 0; i < in->opts->n_pass_env && r >= 0; i++) {
        const char *v = env_get(in->environ, in->opts->pass_env[i]);
        if (v)
            r = env_push(&p->envp, &n, in->opts->pass_env[i], v);
    }
    if (r >= 0 && in->home)
        r = env_push(&p->envp, &n, "HOME", in->home);
    if (r >= 0)
        r = env_push(&p->envp, &n, "PWD", in->cwd);
    if (r >= 0)
        r = env_push(&p->envp, &n, "TMPDIR", "/tmp");
    if (r >= 0 && in->agent_socket)
        r = env_push(&p->envp, &n, "PVISOR_AGENT_SOCKET", PLAN_AGENT_SOCKET_PATH);
    if (r >= 0 && !env_get(in->environ, "PATH"))
        r = env_push(&p->envp, &n, "PATH", "/usr/local/bin:/usr/bin:/bin");
    /* --allow-net: the broker is the way out, for every client that reads
     * the usual variables (curl, git, pip, npm, Python's and Rust's HTTP
     * libraries, the agent CLIs; Node 24's fetch with NODE_USE_ENV_PROXY).
     * Over what the user passed: a host proxy is not reachable from
     * inside. */
    if (p->proxy_port) {
        char url[40];
        egress_proxy_url(p->proxy_port, url, sizeof url);
        /* The usual variables, and those that win over a proxy named in a
         * client's own config file, read inside as well (pip.conf, an
         * npmrc, Cargo's config.toml): a host proxy, often a local one
         * (127.0.0.1:7890), unreachable from inside. */
        static const char *const vars[] = {"HTTPS_PROXY",
                                           "https_proxy",
                                           "HTTP_PROXY",
                                           "http_proxy",
                                           "PIP_PROXY",
                                           "npm_config_proxy",
                                           "npm_config_https_proxy",
                                           "CARGO_HTTP_PROXY"};
        for (size_t i = 0; i < sizeof vars / sizeof vars[0] && r >= 0; i++)
            r = env_push(&p->envp, &n, vars[i], url);
        /* --network loopback: the sandbox's own servers stay direct.
         * Otherwise loopback is the broker's too (TCP there reaches
         * nothing else): localhost:PORT goes to the host's when a rule
         * allows it, a clear 403 when not. */
        for (size_t i = 0; p->loopback_tcp && i < 2 && r >= 0; i++)
            r = env_push(&p->envp, &n, i ? "no_proxy" : "NO_PROXY", "localhost,127.0.0.1,::1");
        if (r >= 0)
            r = env_push(&p->envp, &n, "NODE_USE_ENV_PROXY", "1");
        /* The same names in another case, passed in: Python's urllib
         * reads *_proxy in any case and npm npm_config_* in any case, and
         * which of two spellings wins depends on their order in the
         * environment (Http_proxy or NPM_CONFIG_PROXY naming the host
         * proxy beat the broker's). */
        for (int i = 0; i < in->opts->n_pass_env && r >= 0; i++) {
            const char *name = in->opts->pass_env[i];
            bool proxy = false;
            for (size_t k = 0; k < sizeof vars / sizeof vars[0]; k++)
                proxy = proxy || strcasecmp(name, vars[k]) == 0;
            if (proxy && env_get(p->envp, name))
                r = env_push(&p->envp, &n, name, url);
        }
        if (r >= 0)
            r = git_config_push(&p->envp, &n, "http.proxy", url);
    }
    return r;
}

/* Is path, or a directory holding it, a credential location: by HOME's
 * name, where its link leads, or a store the environment moves?  1 with
 * *ret_what naming it for a message (malloc'd), 0, or -ENOMEM. */
static int in_credential(const struct plan_inputs *in, const char *path, char **ret_what) {
    const char *homes[1 + PLAN_OTHER_HOMES] = {in->home};
    char *const *reals[1 + PLAN_OTHER_HOMES] = {in->cred_real};
    for (int k = 0; k < PLAN_OTHER_HOMES; k++) {
        homes[1 + k] = in->pw_home[k];
        reals[1 + k] = in->pw_cred_real[k];
    }
    for (int h = 0; h < 1 + PLAN_OTHER_HOMES; h++)
        for (size_t c = 0; homes[h] && plan_credential_paths[c]; c++) {
            _cleanup_free_ char *full = path_join(homes[h], plan_credential_paths[c]);
            const char *real = reals[h] ? reals[h][c] : NULL;
            if (!full)
                return -ENOMEM;
            if (path_within(path, full) || (real && path_within(path, real)))
                return (h == 0 ? asprintf(ret_what, "~/%s", plan_credential_paths[c])
                               : asprintf(ret_what,
                                          "%s (in your home as /etc/passwd names it, sudo's caller's, or your home by "
                                          "another name: a bind mount)",
                                          full)) < 0
                           ? -ENOMEM
                           : 1;
        }
    for (size_t c = 0; in->cred_moved && in->cred_moved[c]; c++)
        if (path_within(path, in->cred_moved[c]))
            return (strchr(plan_moved_variable(in->cred_moved[c]), ' ') /* not a variable: what it is */
                        ? asprintf(ret_what, "%s (%s)", in->cred_moved[c], plan_moved_variable(in->cred_moved[c]))
                        : asprintf(ret_what,
                                   "%s (moved there by the environment: %s names it; unset it, or run elsewhere)",
                                   in->cred_moved[c], plan_moved_variable(in->cred_moved[c]))) < 0
                       ? -ENOMEM
                       : 1;
    return 0;
}

/* A workspace that is or lies in a credential location: -EPERM and why
 * (*ret_error), else 0 (or another error). */
static int refuse_workspace_credential(const struct plan_inputs *in, char **ret_error) {
    _cleanup_free_ char *what = NULL;
    int r = in_credential(in, in->workspace, &what);
    if (r <= 0)
        return r;
    if (asprintf(ret_error,
                 "the workspace %s is in the credential location %s, which the sandbox keeps from the command; "
                 "run it in a directory that is not a credential location",
                 in->workspace, what) < 0)
        *ret_error = NULL;
    return -EPERM;
}

/* A grant (not a deny) that is or lies in a credential location: as
 * refuse_workspace_credential. */
static int refuse_grant_credential(const struct plan_inputs *in, const struct access_rule *a, char **ret_error) {
    _cleanup_free_ char *what = NULL;
    int r = a->kind != ACCESS_DENY ? in_credential(in, a->path, &what) : 0;
    if (r <= 0)
        return r;
    if (asprintf(ret_error,
                 "--access %s:%s reaches the credential location %s, which the sandbox keeps from the command; "
                 "grant a path that is not a credential location (hand over a token with --pass-env)",
                 access_kind_name(a->kind), a->path, what) < 0)
        *ret_error = NULL;
    return -EPERM;
}

int plan_refuse_credentials(const struct plan_inputs *in, char **ret_error) {
    *ret_error = NULL;
    int r = refuse_workspace_credential(in, ret_error);
    for (size_t i = 0; i < in->n_access && r >= 0; i++)
        r = refuse_grant_credential(in, &in->access[i], ret_error);
    return r;
}

/* Is the credential location full inside a read-only or read-write grant
 * (*ret_in: the real files are projected there by this name), and is
 * where its link leads (real, when another path) inside one? */
static void in_grants(const struct plan_inputs *in, const char *full, const char *real, bool *ret_in,
                      bool *ret_real_in) {
    *ret_in = *ret_real_in = false;
    for (size_t i = 0; i < in->n_access; i++)
        if (in->access[i].kind != ACCESS_DENY) {
            *ret_in = *ret_in || path_within(full, in->access[i].path);
            *ret_real_in = *ret_real_in || (real && strcmp(real, full) != 0 && plan_path_ok(real) &&
                                            path_within(real, in->access[i].path));
        }
}

int plan_build(const struct plan_inputs *in, struct launch_plan *ret_plan, char **ret_error) {
    struct launch_plan p = {0};
    const struct run_options *o = in->opts;
    int r = 0;
    *ret_error = NULL;

    if (!plan_path_ok(in->workspace) || !plan_path_ok(in->cwd) || (in->home && !plan_path_ok(in->home))) {
        r = -EINVAL;
        goto fail;
    }
    p.uid = in->uid;
    p.gid = in->gid;
    p.unshare_net = policy_denies_network(o);
    p.loopback_tcp = p.unshare_net && o->network_loopback;
    p.proxy_port = p.unshare_net && o->n_allow_net > 0 ? EGRESS_PROXY_PORT : 0;
    p.dns_stub = p.unshare_net && !p.loopback_tcp;
    p.landlock = true;
    p.seccomp = true;
    /* without tmp=: 1 GiB, or half of the memory the run may use when that
     * is less (the kernel's default for a tmpfs): on a small machine, in a
     * container with a memory limit or under --limit mem=, 1 GiB of files
     * in /tmp could take most of it; /dev/shm likewise */
    uint64_t tmp_max = in->tmpfs_max;
    p.tmp_size = o->limits.tmp_bytes                       ? o->limits.tmp_bytes
                 : tmp_max && tmp_max < POLICY_TMP_DEFAULT ? tmp_max
                                                           : POLICY_TMP_DEFAULT;
    p.shm_size = o->limits.shm_bytes                       ? o->limits.shm_bytes
                 : tmp_max && tmp_max < POLICY_SHM_DEFAULT ? tmp_max
                                                           : POLICY_SHM_DEFAULT;
    p.rlimit_nofile = 65536;
    p.rlimit_fsize = o->stage_max_bytes;
    p.rlimit_as = in->rlimit_as;
    p.rlimit_cpu = in->rlimit_cpu;
    p.rlimit_nproc = in->rlimit_nproc;
    if (!(p.cwd = strdup(in->cwd)) || !(p.hostname = strdup("pvisor"))) {
        r = -ENOMEM;
        goto fail;
    }
    p.argv = calloc((size_t)o->cmd_argc + 1, sizeof *p.argv);
    if (!p.argv) {
        r = -ENOMEM;
        goto fail;
    }
    for (int i = 0; i < o->cmd_argc; i++)
        if (!(p.argv[i] = strdup(o->cmd_argv[i]))) {
            r = -ENOMEM;
            goto fail;
        }
    if ((r = build_env(in, &p)) < 0)
        goto fail;

    for (size_t i = 0; i < sizeof runtime_roots / sizeof runtime_roots[0] && r >= 0; i++)
        r = plan_add_mount(&p, PLAN_BIND_RO, runtime_roots[i], 0);
    for (size_t i = 0; plan_dev_nodes[i] && r >= 0; i++)
        r = plan_add_mount(&p, PLAN_BIND_RO, plan_dev_nodes[i], 0); /* writable devices; inodes read-only */
    if (r >= 0)
        r = plan_add_mount(&p, PLAN_TMPFS, "/tmp", p.tmp_size);
    bool home_view = in->home && in->home_view && strcmp(in->home, "/") != 0;
    /* A HOME that is, holds or lies in a system directory (HOME=/bin for
     * Debian's bin user, /etc) gets no tmpfs either: it would hide the
     * system's files; it is what the projections show, read-only, with its
     * credential locations covered (below). */
    bool sys_home = in->home && plan_home_is_system(in->home);
    /* A HOME that is or lies in the workspace is the workspace view's,
     * which masks and seals its credential locations (run_sandbox_home.c): an
     * empty tmpfs there would hide that part of the workspace, and a
     * projected config file would be the lower workspace's. */
    bool ws_home = in->home && !sys_home && path_within(in->home, in->workspace);
    if (r >= 0 && home_view)
        r = plan_add_mount_from(&p, PLAN_BIND_RW, in->home_view, in->home);
    else if (r >= 0 && in->home && !sys_home && !ws_home)
        r = plan_add_mount(&p, PLAN_TMPFS, in->home, 256ULL << 20);
    for (size_t i = 0; i < in->n_home_files && r >= 0 && in->home && !home_view && !ws_home; i++) {
        if (plan_is_credential_path(in->home_files[i]))
            continue;
        char *full = path_join(in->home, in->home_files[i]);
        if (!full) {
            r = -ENOMEM;
            break;
        }
        if (plan_path_ok(full) && !already(&p, full))
            r = plan_add_mount(&p, PLAN_BIND_RO, full, 0);
        free(full);
    }
    for (size_t i = 0; i < in->n_runtime_dirs && r >= 0; i++) {
        const char *d = in->runtime_dirs[i];
        if (!plan_path_ok(d) || under_runtime(&p, d) || already(&p, d))
            continue;
        if (in->home && path_within(d, in->home)) {
            const char *rel = strcmp(d, in->home) == 0 ? "" : d + strlen(in->home) + 1;
            /* With a HOME view, toolchains in HOME are already there, and
             * writable copy-on-write (a package cache, say): a read-only
             * projection on top would only break them. */
            if (!rel[0] || plan_is_credential_path(rel) || home_view)
                continue;
        }
        if (path_overlaps(in->workspace, d))
            continue; /* never project the lower workspace around the overlay */
        r = plan_add_mount(&p, PLAN_BIND_RO, d, 0);
        if (r >= 0)
            p.mounts[p.n_mounts - 1].optional = p.mounts[p.n_mounts - 1].scan_sockets = true;
    }
    if (r >= 0)
        r = plan_add_mount(&p, PLAN_BIND_RW, in->workspace, 0);
    if (r >= 0 && in->agent_socket)
        r = plan_add_mount_from(&p, PLAN_BIND_RW, in->agent_socket, PLAN_AGENT_SOCKET_PATH);
    /* A workspace that is or lies in a credential location (the agent run
     * in ~/.ssh, in the directory ~/.ssh links to, in GNUPGHOME) would show
     * the credentials through the workspace view, whose masks cover only
     * what lies below the workspace, and what the agent writes there (an
     * authorized_keys) would reach the real store on apply: refused, as a
     * grant of one is. */
    if (r >= 0 && (r = refuse_workspace_credential(in, ret_error)) < 0)
        goto fail;
    /* User rules.  A read-write grant inside the workspace would bypass the
     * stage, and one covering it would expose the real workspace: refused. */
    for (size_t i = 0; i < in->n_access && r >= 0; i++) {
        const struct access_rule *a = &in->access[i];
        if (!plan_path_ok(a->path) || strcmp(a->path, "/") == 0) {
            r = -EINVAL;
            if (asprintf(ret_error, "--access: '%s' must be an absolute path other than /", a->path) < 0)
                *ret_error = NULL;
            goto fail;
        }
        if (a->kind == ACCESS_RW && path_overlaps(a->path, in->workspace)) {
            r = -EINVAL;
            if (asprintf(ret_error,
                         "--allow-write/--access rw:%s overlaps the workspace %s, whose writes are staged; "
                         "grant a path outside it",
                         a->path, in->workspace) < 0)
                *ret_error = NULL;
            goto fail;
        }
        if (a->kind != ACCESS_DENY && path_within(in->workspace, a->path)) {
            r = -EINVAL;
            if (asprintf(ret_error, "--access ro:%s would expose the real workspace around the stage", a->path) < 0)
                *ret_error = NULL;
            goto fail;
        }
        /* A grant that is or lies in a credential location (by HOME's
         * name, or where its link leads: a directory the agent could have
         * made a symlink into ~/.ssh before the user granted it) would
         * hand the credential over: refused.  One that holds credential
         * locations gets them covered (below). */
        if ((r = refuse_grant_credential(in, a, ret_error)) < 0)
            goto fail;
        enum plan_mount_kind k = a->kind == ACCESS_DENY ? PLAN_HIDE
                                 : a->kind == ACCESS_RO ? PLAN_BIND_RO
                                                        : PLAN_BIND_RW;
        r = plan_add_mount(&p, k, a->path, 0);
        if (r >= 0)
            p.mounts[p.n_mounts - 1].scan_sockets = k != PLAN_HIDE;
    }
    /* Credentials visible through a HOME view or inside the workspace
     * (e.g. workspace == HOME) are covered by mounts, except those the HOME
     * view's server already masks; those of the user's passwd home (when
     * HOME names another) where the workspace or a grant shows them. */
    for (size_t k = 0; k < PLAN_OTHER_HOMES && r >= 0; k++)
        for (const char *const *c = plan_credential_paths; r >= 0 && in->pw_home[k] && *c; c++) {
            _cleanup_free_ char *full = path_join(in->pw_home[k], *c);
            const char *real = in->pw_cred_real[k] ? in->pw_cred_real[k][c - plan_credential_paths] : NULL;
            if (!full) {
                r = -ENOMEM;
                break;
            }
            bool in_ws = path_within(full, in->workspace) && strcmp(full, in->workspace) != 0;
            bool in_rule, real_in_rule;
            in_grants(in, full, real, &in_rule, &real_in_rule);
            if ((in_ws || in_rule) && !already(&p, full))
                r = plan_add_mount(&p, PLAN_HIDE, full, 0);
            if (r >= 0 && real_in_rule && !already(&p, real))
                r = plan_add_mount(&p, PLAN_HIDE, real, 0);
        }
    for (const char *const *c = plan_credential_paths; r >= 0 && in->home && *c; c++) {
        char *full = path_join(in->home, *c);
        if (!full) {
            r = -ENOMEM;
            break;
        }
        bool in_ws = path_within(full, in->workspace) && strcmp(full, in->workspace) != 0;
        bool in_view = home_view && !path_within(full, in->workspace);
        if (in_view && in->home_view_masks) {
            in_view = false;
            for (size_t k = 0; k < in->n_home_hide; k++)
                in_view = in_view || strcmp(in->home_hide[k], *c) == 0;
        }
        struct stat st;
        bool in_sys = sys_home && !home_view && lstat(full, &st) == 0; /* only those there: mounts are counted */
        /* inside a read-only or read-write grant: the real files are
         * projected there, by this name and by where a link leads */
        const char *real = in->cred_real ? in->cred_real[c - plan_credential_paths] : NULL;
        bool in_rule, real_in_rule;
        in_grants(in, full, real, &in_rule, &real_in_rule);
        if (in_ws || in_view || in_sys || in_rule)
            r = plan_add_mount(&p, PLAN_HIDE, full, 0);
        if (r >= 0 && real_in_rule && !already(&p, real))
            r = plan_add_mount(&p, PLAN_HIDE, real, 0);
        free(full);
    }
    /* Moved credential locations, and where a credential location's link
     * leads outside HOME (~/.aws -> /etc/aws, ~/.ssh -> /opt/keys/alice):
     * covered wherever a projection shows them (the workspace, a grant, a
     * system directory, a toolchain such as CARGO_HOME's bin's parent, a
     * HOME shown as projected), except in HOME's view, whose server masks
     * them (run_sandbox_home.c).  Nothing there: the launcher covers nothing. */
    size_t n_proj = p.n_mounts;
    for (size_t c = 0; r >= 0 && in->cred_moved && in->cred_moved[c]; c++)
        r = cover_where_projected(&p, n_proj, home_view ? in->home_view : NULL, in->cred_moved[c]);
    for (size_t c = 0; r >= 0 && in->home && in->cred_real && plan_credential_paths[c]; c++)
        r = cover_link_target(&p, n_proj, home_view ? in->home_view : NULL, in->home, in->cred_real[c]);
    for (size_t k = 0; k < PLAN_OTHER_HOMES && r >= 0; k++)
        for (size_t c = 0; r >= 0 && in->pw_home[k] && in->pw_cred_real[k] && plan_credential_paths[c]; c++)
            r = cover_link_target(&p, n_proj, NULL, in->pw_home[k], in->pw_cred_real[k][c]);
    if (r < 0)
        goto fail;
    qsort(p.mounts, p.n_mounts, sizeof *p.mounts, cmp_mount);
    *ret_plan = p;
    return 0;
fail:
    if (r == -EINVAL && !*ret_error &&
        asprintf(ret_error, "paths given to the sandbox must be absolute and normalised") < 0)
        *ret_error = NULL;
    plan_free(&p);
    return r;
}
