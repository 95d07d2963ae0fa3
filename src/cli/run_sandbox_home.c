/* run_sandbox_home.c: HOME and its credentials, for --filesystem sandbox
 * and --safe.
 *
 * Which credential locations the run keeps from the command (HOME's,
 * where the environment moves them, other homes': the passwd home,
 * sudo's caller's, HOME by another name) and where they lead now; the
 * masks of the workspace's view (credential locations in it, other
 * stages) and of HOME's copy-on-write view; that view's throwaway stage,
 * started on a thread and removed at the end.  run_sandbox.c builds the
 * plan from them.
 */
#include "cli/cli.h"
#include "cli/run.h"
#include "cli/run_sandbox.h"
#include "cli/runs.h"
#include "evidence/bundle.h"
#include "launch/launch.h"
#include "policy/plan_build.h"
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
#include <sys/stat.h>
#include <unistd.h>

/* Where the host's path HOME/rel leads now, the last component followed
 * too when it is a symlink (dangling or not), or NULL when a parent is
 * missing or the links loop.  Owned by the caller. */
static char *resolve_loose(const char *home, const char *rel) {
    _cleanup_free_ char *path = path_join(home, rel);
    for (int hops = 0; path && hops < 40; hops++) {
        char *slash = strrchr(path, '/');
        if (!slash || slash == path)
            return NULL;
        *slash = '\0';
        _cleanup_free_ char *dir = realpath_memo(path);
        *slash = '/';
        if (!dir)
            return NULL;
        char *p = path_join(dir, slash + 1);
        if (!p)
            return NULL;
        free(path);
        path = p;
        if (realpath_memo_absent(path)) /* as readlink's ENOENT below */
            return TAKE_PTR(path);
        char target[PATH_MAX];
        ssize_t n = readlink(path, target, sizeof target - 1);
        if (n < 0)
            return errno == EINVAL || errno == ENOENT ? TAKE_PTR(path) : NULL;
        target[n] = '\0';
        *strrchr(path, '/') = '\0';
        p = target[0] == '/' ? strdup(target) : path_join(path, target);
        free(path);
        path = p;
    }
    return NULL;
}

/* Mask rel (relative to HOME) too, unless it is already: a copy the
 * sandbox owns (freed with the view). */
static int add_owned_mask(struct sandbox *sb, const char *rel) {
    for (size_t i = 0; i < sb->n_home_mask; i++)
        if (strcmp(sb->home_mask[i], rel) == 0)
            return 0;
    if (sb->n_home_owned_mask >= ARRAY_SIZE(sb->home_owned_mask) || sb->n_home_mask >= ARRAY_SIZE(sb->home_mask))
        return -E2BIG; /* never drop one silently */
    char *m = strdup(rel);
    if (!m)
        return -ENOMEM;
    sb->home_owned_mask[sb->n_home_owned_mask++] = m;
    sb->home_mask[sb->n_home_mask++] = m;
    return 0;
}

/* A credential location reached through a symlink (its own, or a
 * parent's): what the link leads to now, when that is inside HOME, is
 * masked by the view's server as well.  The launcher's mount (for a
 * symlinked parent) resolves an absolute link outside the view, and a
 * mask names paths as the view does. */
static int mask_link_target(const char *home, const char *cred, const char *real, struct sandbox *sb) {
    _cleanup_free_ char *full = path_join(home, cred);
    if (!full)
        return -ENOMEM;
    if (!real || strcmp(real, full) == 0 || !path_within(real, home) || strcmp(real, home) == 0)
        return 0;
    return add_owned_mask(sb, real + strlen(home) + 1);
}

/* Add abs, when it is inside the workspace ws, to list (relative to ws,
 * owned; SANDBOX_WS_MASK_MAX entries). */
static int add_ws_mask(char **list, size_t *n, const char *ws, const char *abs) {
    if (!abs || !path_within(abs, ws) || strcmp(abs, ws) == 0)
        return 0;
    const char *rel = abs + strlen(ws) + (strcmp(ws, "/") != 0);
    for (size_t i = 0; i < *n; i++)
        if (strcmp(list[i], rel) == 0)
            return 0;
    if (*n >= SANDBOX_WS_MASK_MAX)
        return -E2BIG; /* never drop one silently */
    if (!(list[*n] = strdup(rel)))
        return -ENOMEM;
    (*n)++;
    return 0;
}

/* What the workspace view's server masks: a cover mount on a FUSE view
 * is not a boundary (the kernel drops it with the dentry when a lookup
 * fails, which the agent can cause; nothing covers what the host creates
 * later).  HOME's credential locations that fall in the workspace, as
 * HOME names them (HOME is or is in the workspace) and where a link leads
 * (a dotfiles repository: ~/.ssh -> dotfiles/ssh); and --access deny:
 * paths in it, sealed: nothing may be created there either. */
static int mask_stages_elsewhere(struct run_context *ctx, struct sandbox *sb);

int sandbox_prepare_ws_mask(struct run_context *ctx, const char *home, const struct access_rule *rules, size_t n_rules,
                            struct sandbox *sb) {
    const char *ws = ctx->workspace;
    int r = 0;
    for (size_t i = 0; home && plan_credential_paths[i] && r >= 0; i++) {
        _cleanup_free_ char *full = path_join(home, plan_credential_paths[i]);
        if (!full)
            return -ENOMEM;
        /* Sealed too: what the agent put there would reach the real
         * HOME on apply (an authorized_keys, say). */
        r = add_ws_mask(sb->ws_sealed, &sb->n_ws_sealed, ws, full);
        if (r >= 0)
            r = add_ws_mask(sb->ws_sealed, &sb->n_ws_sealed, ws, sb->cred_real[i]);
    }
    /* The user's own home as /etc/passwd names it, when HOME names
     * another (a fresh HOME that an agent harness or a CI job sets): its
     * credential locations in the workspace (the run in that home, or in
     * a directory that holds it) were readable through the view. */
    for (size_t k = 0; k < PLAN_OTHER_HOMES; k++)
        for (size_t i = 0; sb->pw_home[k] && plan_credential_paths[i] && r >= 0; i++) {
            _cleanup_free_ char *full = path_join(sb->pw_home[k], plan_credential_paths[i]);
            if (!full)
                return -ENOMEM;
            r = add_ws_mask(sb->ws_sealed, &sb->n_ws_sealed, ws, full);
            if (r >= 0)
                r = add_ws_mask(sb->ws_sealed, &sb->n_ws_sealed, ws, sb->pw_cred_real[k][i]);
        }
    for (size_t i = 0; sb->cred_moved && sb->cred_moved[i] && r >= 0; i++)
        r = add_ws_mask(sb->ws_sealed, &sb->n_ws_sealed, ws, sb->cred_moved[i]);
    for (size_t i = 0; i < n_rules && r >= 0; i++)
        if (rules[i].kind == ACCESS_DENY)
            r = add_ws_mask(sb->ws_sealed, &sb->n_ws_sealed, ws, rules[i].path);
    /* --access deny: paths in HOME's view: masked by its server as well
     * (the launcher's cover alone is not a boundary on a FUSE view, see
     * above) */
    for (size_t i = 0; i < n_rules && r >= 0 && sb->home_fd >= 0; i++)
        if (rules[i].kind == ACCESS_DENY && path_within(rules[i].path, sb->home_path) &&
            strcmp(rules[i].path, sb->home_path) != 0)
            r = add_owned_mask(sb, rules[i].path + strlen(sb->home_path) + (strcmp(sb->home_path, "/") != 0));
    if (r >= 0)
        r = mask_stages_elsewhere(ctx, sb);
    return r;
}

/* Is the directory at path (still) a stage: does it hold a stage's
 * version file (as the views' own check: stage_version_magic_at)?  A
 * recorded stage the user removed leaves its path to whatever the user
 * puts there next (a project, maybe with a 'version' file of its own,
 * which was taken for a stage when over 256 bytes), which is not to be
 * hidden.  When that cannot be told (unreadable), it is taken for one. */
static bool still_a_stage(const char *path) {
    _cleanup_close_ int d = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d < 0)
        return errno != ENOTDIR && errno != ENOENT;
    int r = stage_version_magic_at(d, "version");
    if (r == -ENOENT || r == -ENOTDIR || r == -ELOOP)
        return false; /* none, or a symlink */
    return r != 0;
}

/* The stages kept outside the state directory (another run's, or this
 * one's: `--stage DIR`, `fork ... DIR`) hold what agents wrote, and a
 * command saw them through its HOME view or its workspace view when they
 * lay there (the state directory itself is masked): masked in HOME's view,
 * masked and sealed in the workspace's (what the agent put there would
 * meet the stage on apply).  A stage gone since (removed, moved: no stage
 * there now, maybe a directory of the user's) is skipped.  Past the views'
 * mask limits a stage is said in the Bundle, not hidden. */
static int mask_stages_elsewhere(struct run_context *ctx, struct sandbox *sb) {
    char **v = NULL;
    size_t n = 0;
    if (stages_elsewhere_list(&v, &n) < 0)
        return 0; /* no record and no Bundles to read: no stage is known */
    int r = 0;
    unsigned over = 0;
    const char *first_over = NULL;
    for (size_t i = 0; i < n && r >= 0; i++) {
        _cleanup_free_ char *real = realpath_memo(v[i]);
        if (!real || !still_a_stage(real))
            continue;
        r = add_ws_mask(sb->ws_sealed, &sb->n_ws_sealed, ctx->workspace, real);
        if (r >= 0 && sb->home_fd >= 0 && path_within(real, sb->home_path) && strcmp(real, sb->home_path) != 0)
            r = add_owned_mask(sb, real + strlen(sb->home_path) + (strcmp(sb->home_path, "/") != 0));
        if (r == -E2BIG) {
            over++;
            first_over = first_over ? first_over : v[i];
            r = 0;
        }
    }
    if (over) {
        char w[600];
        snprintf(w, sizeof w,
                 "%u stage(s) kept in HOME or the workspace (%.300s%s) could not be hidden from the command: more "
                 "than the views can mask; drop old stages ('pvisor drop') or keep them outside HOME",
                 over, first_over, over > 1 ? ", ..." : "");
        bundle_add_warning(ctx->bundle, w);
        fprintf(stderr, "pvisor run: warning: %s\n", w);
    }
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
    return r;
}

/* Which credential locations the HOME view's server masks itself (absent
 * also when the host creates them during the run), and which sit below a
 * parent that is not a real directory (a symlink, say): the mask names
 * paths as the view does, so what that symlink leads to is covered by a
 * mount instead
 * (and masked where it leads, mask_link_target). */
static int classify_credentials(const char *home, int home_fd, struct sandbox *sb) {
    for (size_t i = 0; plan_credential_paths[i]; i++) {
        const char *const *c = &plan_credential_paths[i];
        bool linked = false;
        char parent[PATH_MAX];
        snprintf(parent, sizeof parent, "%s", *c);
        for (char *slash = strchr(parent, '/'); slash && !linked; slash = strchr(slash + 1, '/')) {
            *slash = '\0';
            struct stat st;
            linked = fstatat(home_fd, parent, &st, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISDIR(st.st_mode);
            *slash = '/';
        }
        if (sb->n_home_hide >= ARRAY_SIZE(sb->home_hide) || sb->n_home_mask >= ARRAY_SIZE(sb->home_mask))
            return -E2BIG; /* never drop one silently */
        if (linked)
            sb->home_hide[sb->n_home_hide++] = *c;
        else
            sb->home_mask[sb->n_home_mask++] = *c;
        int r = mask_link_target(home, *c, sb->cred_real[i], sb);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Where each of plan_credential_paths leads in home now (resolve_loose),
 * in *ret (NULL-padded). */
static int resolve_credentials(const char *home, char ***ret) {
    size_t n = 0;
    while (plan_credential_paths[n])
        n++;
    if (!(*ret = calloc(n + 1, sizeof **ret)))
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        (*ret)[i] = resolve_loose(home, plan_credential_paths[i]);
    return 0;
}

static void free_credentials(char ***v) {
    for (size_t i = 0; *v && plan_credential_paths[i]; i++)
        free((*v)[i]);
    free(*v);
    *v = NULL;
}

/* Add h (resolved, owned: taken) to sb->pw_home unless it is HOME, "/",
 * or there already; -E2BIG past PLAN_OTHER_HOMES (never dropped
 * silently). */
static int add_home_path(char *h, const char *home_real, struct sandbox *sb) {
    bool skip = !h || strcmp(h, "/") == 0 || (home_real && strcmp(home_real, h) == 0);
    size_t k = 0;
    for (; k < PLAN_OTHER_HOMES && sb->pw_home[k] && !skip; k++)
        skip = strcmp(sb->pw_home[k], h) == 0;
    if (skip) {
        free(h);
        return 0;
    }
    if (k == PLAN_OTHER_HOMES) {
        free(h);
        return -E2BIG;
    }
    sb->pw_home[k] = h;
    return resolve_credentials(h, &sb->pw_cred_real[k]);
}

/* Add uid's home (as /etc/passwd names it) to sb->pw_home unless it is
 * HOME, "/", or there already. */
static int add_other_home(uid_t uid, const char *home_real, struct sandbox *sb) {
    struct passwd *pw = getpwuid(uid);
    char *h = pw && pw->pw_dir && pw->pw_dir[0] == '/' ? realpath_memo(pw->pw_dir) : NULL;
    return add_home_path(h, home_real, sb);
}

/* Another name of a home (home, resolved) around the directory exposed
 * (the workspace, a grant; resolved): a directory on the way to exposed
 * that is, by identity, home or one of its parents under another path (a
 * bind mount: /home/alice also at /srv/alice, /home at /mnt/data/home, a
 * btrfs subvolume reached from the pool's top).  The home's credential
 * locations lie there by that name, which no mask or cover, matching
 * paths, knew: the workspace view and the grant showed them.  Added to
 * sb->pw_home when it overlaps exposed. */
static int add_home_aliases(const char *home, const char *exposed, const char *home_real, struct sandbox *sb) {
    struct ancestor {
        dev_t dev;
        ino_t ino;
        size_t len; /* home's first len bytes name it */
    } anc[64];
    size_t n = 0;
    char buf[PATH_MAX];
    if (!home || !exposed || snprintf(buf, sizeof buf, "%s", home) >= (int)sizeof buf)
        return 0;
    /* home and its parents, "/" aside (it holds every path by its name) */
    for (size_t len = strlen(buf); len > 1 && n < ARRAY_SIZE(anc);) {
        struct stat st;
        buf[len] = '\0';
        if (stat(buf, &st) == 0)
            anc[n++] = (struct ancestor){st.st_dev, st.st_ino, len};
        char *slash = strrchr(buf, '/');
        len = slash ? (size_t)(slash - buf) : 0;
    }
    if (snprintf(buf, sizeof buf, "%s", exposed) >= (int)sizeof buf)
        return 0;
    int r = 0;
    for (size_t len = strlen(buf); len > 1 && r >= 0;) {
        struct stat st;
        buf[len] = '\0';
        bool known = stat(buf, &st) == 0;
        for (size_t i = 0; known && i < n && r >= 0; i++) {
            if (st.st_dev != anc[i].dev || st.st_ino != anc[i].ino ||
                (len == anc[i].len && strncmp(buf, home, len) == 0))
                continue; /* another directory, or this one by its own name */
            char *alias = NULL;
            if (asprintf(&alias, "%s%s", buf, home + anc[i].len) < 0)
                return -ENOMEM;
            if (path_overlaps(alias, exposed))
                r = add_home_path(alias, home_real, sb);
            else
                free(alias);
        }
        char *slash = strrchr(buf, '/');
        len = slash ? (size_t)(slash - buf) : 0;
    }
    return r;
}

/* Mountinfo line [line, end): its device ("major:minor"), root and mount
 * point; false when the line is not one. */
static bool mountinfo_line(const char *line, const char *end, char dev[static 32], char root[static PATH_MAX],
                           char mp[static PATH_MAX]) {
    const char *f[5];
    size_t fl[5];
    const char *p = line;
    for (int n = 0; n < 5; n++) {
        if (p >= end)
            return false;
        const char *sp = memchr(p, ' ', (size_t)(end - p));
        f[n] = p;
        fl[n] = sp ? (size_t)(sp - p) : (size_t)(end - p);
        p = sp ? sp + 1 : end;
    }
    return mountinfo_unescape(f[2], fl[2], dev, 32) == 0 && mountinfo_unescape(f[3], fl[3], root, PATH_MAX) == 0 &&
           mountinfo_unescape(f[4], fl[4], mp, PATH_MAX) == 0;
}

/* Add path as a credential location the run keeps from the command
 * ("PATH\0WHAT" in sb->cred_moved, as plan_moved_credentials' entries:
 * masked in the views, covered in grants, a grant of it refused), unless
 * it is there. */
#define CRED_MOUNT_WHAT "a mount of a credential location"
#define WS_MOUNT_WHAT "another name of the workspace (a mount of it), which would reach the real workspace"
static int add_kept_mount(struct sandbox *sb, const char *path, const char *what) {
    if (!sb->cred_moved)
        return 0;
    size_t n = 0;
    for (; sb->cred_moved[n]; n++)
        if (strcmp(sb->cred_moved[n], path) == 0)
            return 0;
    if (n >= PLAN_MAX_MOVED)
        return -E2BIG; /* never drop one silently */
    size_t pl = strlen(path), wl = strlen(what);
    char *e = malloc(pl + wl + 2);
    if (!e)
        return -ENOMEM;
    memcpy(e, path, pl + 1);
    memcpy(e + pl + 1, what, wl + 1);
    sb->cred_moved[n] = e;
    return 0;
}

/* A mount of a part of home (rel, relative to it: the mount's root) at mp:
 * when rel is or lies in a credential location, mp is one too; when it
 * holds some (~/.config at mp), each is, at mp plus the rest of its path.
 * Only where mp overlaps what the command is shown (exposed): a bind
 * mount of ~/.ssh into the workspace or a grant, a file bind mount of
 * ~/.ssh/id_rsa at ~/k, showed the key while home_credentials said
 * enforced (found by a red-team pass). */
static int add_cred_mounts(const char *rel, const char *mp, char *const *exposed, size_t n_exposed,
                           struct sandbox *sb) {
    bool shown = false;
    for (size_t i = 0; i < n_exposed && !shown; i++)
        shown = exposed[i] && path_overlaps(mp, exposed[i]);
    if (!shown)
        return 0;
    if (plan_is_credential_path(rel))
        return add_kept_mount(sb, mp, CRED_MOUNT_WHAT);
    size_t rl = strlen(rel);
    int r = 0;
    for (const char *const *c = plan_credential_paths; *c && r >= 0; c++) {
        if (strncmp(*c, rel, rl) != 0 || (*c)[rl] != '/')
            continue;
        _cleanup_free_ char *p = path_join(mp, *c + rl + 1);
        r = p ? add_kept_mount(sb, p, CRED_MOUNT_WHAT) : -ENOMEM;
    }
    return r;
}

/* Read the line of mountinfo at *line into dev, root and mp, and move
 * *line past it: false at the end; *ret_ok false for a line that could not
 * be read. */
static bool mountinfo_next(const char **line, char dev[static 32], char root[static PATH_MAX], char mp[static PATH_MAX],
                           bool *ret_ok) {
    if (!**line)
        return false;
    const char *nl = strchr(*line, '\n');
    const char *end = nl ? nl : *line + strlen(*line);
    *ret_ok = mountinfo_line(*line, end, dev, root, mp);
    *line = nl ? nl + 1 : end;
    return true;
}

/* fs, a path on a mount's file system at or below its root, by the
 * mount's point mp (malloc'd; NULL: out of memory). */
static char *name_at_mount(const char *fs, const char *root, const char *mp) {
    const char *rest = strcmp(root, "/") != 0 ? fs + strlen(root) : strcmp(fs, "/") != 0 ? fs : "";
    char *p = NULL;
    return asprintf(&p, "%s%s", strcmp(mp, "/") == 0 && *rest ? "" : mp, rest) < 0 ? NULL : p;
}

/* The file system path (its device "MAJ:MIN" in dev, the path on it in fs)
 * of path (resolved), from the mount it is on (the longest mount point
 * holding it, the last such line: the one on top).  False when not found. */
static bool fs_path_of(const char *path, const char *mountinfo, char dev_out[static 32], char fs[static PATH_MAX]) {
    char dev[32], root[PATH_MAX], mp[PATH_MAX];
    size_t best = 0;
    bool ok;
    dev_out[0] = fs[0] = '\0';
    for (const char *line = mountinfo; mountinfo_next(&line, dev, root, mp, &ok);)
        if (ok && path_within(path, mp) && strlen(mp) >= best) {
            const char *rest = path + (strcmp(mp, "/") == 0 ? 0 : strlen(mp));
            if (snprintf(fs, PATH_MAX, "%s%s", strcmp(root, "/") == 0 && *rest ? "" : root, rest) < PATH_MAX) {
                snprintf(dev_out, 32, "%s", dev);
                best = strlen(mp);
            }
        }
    return dev_out[0] && fs[0];
}

/* Another name of the workspace (resolved), or of a part of it, that a
 * mount gives in a grant (exposed[2..)): a bind mount of the workspace in
 * an --access rw: grant let the command write the real workspace past
 * the stage while workspace_writes said enforced (a grant of it by a
 * symlink is refused; found by a red-team pass).  Kept from the command
 * as a credential location is (covered in the grant; a grant in it
 * refused).  Not in HOME's view: a copy-on-write view, whose writes are
 * discarded (and HOME's other names would carry such an entry onto the
 * workspace itself: a workspace in a bind mount of HOME in HOME). */
static int add_workspace_mount_aliases(const char *workspace, char *const *exposed, size_t n_exposed,
                                       const char *mountinfo, struct sandbox *sb) {
    char wdev[32], wfs[PATH_MAX], dev[32], root[PATH_MAX], mp[PATH_MAX];
    if (!workspace || !mountinfo || !fs_path_of(workspace, mountinfo, wdev, wfs))
        return 0;
    int r = 0;
    bool ok;
    for (const char *line = mountinfo; r >= 0 && mountinfo_next(&line, dev, root, mp, &ok);) {
        if (!ok || strcmp(dev, wdev) != 0 || !path_overlaps(root, wfs))
            continue;
        /* root holds the workspace: the workspace at mp plus the rest of
         * its path; root in it: mp is a part of it */
        _cleanup_free_ char *alias = path_within(wfs, root) ? name_at_mount(wfs, root, mp) : strdup(mp);
        if (!alias)
            return -ENOMEM;
        if (path_overlaps(alias, workspace))
            continue; /* the workspace itself, or a mount in it: the view's */
        /* in a grant; or a grant in it (refused then, as a grant of a
         * credential location is) */
        bool shown = false;
        for (size_t i = 2; i < n_exposed && !shown; i++)
            shown = exposed[i] && (path_within(alias, exposed[i]) || path_within(exposed[i], alias));
        if (shown)
            r = add_kept_mount(sb, alias, WS_MOUNT_WHAT);
    }
    return r;
}

/* Another name of a home (home, resolved) that a mount gives inside or
 * around what the command is shown (exposed[0..n_exposed), resolved; NULL
 * entries skipped: the workspace, each grant, and HOME itself, whose view
 * showed a bind mount of HOME below HOME, ~/mirror/.ssh): the ancestor
 * walk of add_home_aliases sees only the directories on the way to an
 * exposed path, not a bind mount of home (or of a parent of it) below it
 * (/home/alice also at /srv/alice, /srv granted: /srv/alice/.ssh was
 * shown while home_credentials said enforced), nor home on the file
 * system an exposed path is a mount of (/data/users/alice bind-mounted at
 * /home/alice, /data granted).  Each mount of home's file system whose
 * root holds home shows it at its mount point plus the rest of home's
 * path: that name, where it overlaps an exposed path and is home by
 * identity, is added to sb->pw_home.  mountinfo is read twice for each
 * home, whatever the number of exposed paths. */
static int add_home_mount_aliases(const char *home, char *const *exposed, size_t n_exposed, const char *home_real,
                                  const char *mountinfo, struct sandbox *sb) {
    struct stat hst;
    if (!home || !mountinfo || stat(home, &hst) < 0)
        return 0;
    char dev[32], root[PATH_MAX], mp[PATH_MAX], hdev[32], hfs[PATH_MAX];
    if (!fs_path_of(home, mountinfo, hdev, hfs))
        return 0;
    int r = 0;
    bool ok;
    for (const char *line = mountinfo; r >= 0 && mountinfo_next(&line, dev, root, mp, &ok);) {
        if (ok && strcmp(dev, hdev) == 0 && strcmp(root, hfs) != 0 && path_within(root, hfs)) {
            /* a mount of a part of home (its root below home's path) */
            r = add_cred_mounts(root + strlen(hfs) + (strcmp(hfs, "/") != 0), mp, exposed, n_exposed, sb);
            continue;
        }
        if (!ok || strcmp(dev, hdev) != 0 || !path_within(hfs, root))
            continue;
        char *alias = name_at_mount(hfs, root, mp);
        if (!alias)
            return -ENOMEM;
        bool shown = false;
        for (size_t i = 0; i < n_exposed && !shown; i++)
            shown = exposed[i] && path_overlaps(alias, exposed[i]);
        struct stat ast;
        if (strcmp(alias, home) != 0 && shown && stat(alias, &ast) == 0 && ast.st_dev == hst.st_dev &&
            ast.st_ino == hst.st_ino)
            r = add_home_path(alias, home_real, sb);
        else
            free(alias);
    }
    return r;
}

/* The stores the environment moves that lie in HOME (a toolchain's npmrc
 * in ~/.nvm, GNUPGHOME=~/.gpg2) by each other name of HOME in
 * sb->pw_home: those names had the default credential locations kept
 * (pw_cred_real) but not these, which a grant of that name showed
 * (~/.nvm/versions/node/V/etc/npmrc by the bind mount's path).  Added to
 * sb->cred_moved ("PATH\0VAR", at most PLAN_MAX_MOVED: -E2BIG). */
static int add_moved_by_home_names(const char *home_real, struct sandbox *sb) {
    struct stat hst, ast;
    if (!home_real || !sb->cred_moved || stat(home_real, &hst) < 0)
        return 0;
    size_t n0 = 0;
    while (sb->cred_moved[n0])
        n0++;
    size_t n = n0;
    for (size_t k = 0; k < PLAN_OTHER_HOMES && sb->pw_home[k]; k++) {
        const char *alias = sb->pw_home[k];
        if (stat(alias, &ast) < 0 || ast.st_dev != hst.st_dev || ast.st_ino != hst.st_ino) {
            /* the passwd home or sudo's caller's: the environment names
             * HOME's stores, but what is found by looking in a home (a
             * node toolchain's npmrc, sbt's settings) is that home's too:
             * an nvm node of it on PATH projected its npmrc (found by a
             * red-team pass) */
            int r = plan_moved_in_other_home(alias, sb->cred_moved);
            if (r < 0)
                return r;
            while (sb->cred_moved[n])
                n++;
            continue;
        }
        for (size_t i = 0; i < n0; i++) {
            const char *m = sb->cred_moved[i];
            if (!path_within(m, home_real) || strcmp(m, home_real) == 0)
                continue;
            const char *var = plan_moved_variable(m);
            char *e = NULL;
            int len = asprintf(&e, "%s%s%c%s", alias, m + strlen(home_real) - (strcmp(home_real, "/") == 0), '\0', var);
            if (len < 0)
                return -ENOMEM;
            bool dup = false;
            for (size_t j = 0; j < n && !dup; j++)
                dup = strcmp(sb->cred_moved[j], e) == 0;
            if (dup) {
                free(e);
                continue;
            }
            if (n >= PLAN_MAX_MOVED) {
                free(e);
                return -E2BIG; /* never drop one silently */
            }
            sb->cred_moved[n++] = e;
        }
    }
    return 0;
}

/* Fill sb->pw_home and sb->pw_cred_real (see run_sandbox.h): the user's
 * passwd home when HOME names another, and under sudo (run as root) the
 * caller's, whose home is often the workspace or holds it (sudo sets HOME
 * to root's), and as doas and pkexec name it.  Those variables only add
 * what is kept from the command.  Then
 * the other names of each of those homes and HOME that the workspace or a
 * grant (o's rules; deny rules aside) shows (add_home_aliases). */
static int resolve_pw_home(const char *home, const char *workspace, const struct run_options *o, struct sandbox *sb) {
    _cleanup_free_ char *home_real = home ? realpath_memo(home) : NULL;
    int r = add_other_home(getuid(), home_real, sb);
    /* the caller's uid as sudo and run0 (SUDO_UID) and pkexec
     * (PKEXEC_UID) name it, its name as doas does (DOAS_USER) */
    static const char *const uid_vars[] = {"SUDO_UID", "PKEXEC_UID"};
    for (size_t i = 0; i < ARRAY_SIZE(uid_vars) && r >= 0 && getuid() == 0; i++) {
        const char *su = getenv(uid_vars[i]);
        char *end = NULL;
        unsigned long v = su && *su ? strtoul(su, &end, 10) : 0;
        if (end && !*end && v > 0 && v < UINT32_MAX)
            r = add_other_home((uid_t)v, home_real, sb);
    }
    const char *doas = getuid() == 0 ? getenv("DOAS_USER") : NULL;
    struct passwd *dpw = doas && *doas ? getpwnam(doas) : NULL;
    if (r >= 0 && dpw && dpw->pw_uid != 0)
        r = add_other_home(dpw->pw_uid, home_real, sb);
    const char *homes[1 + PLAN_OTHER_HOMES] = {home_real};
    for (size_t k = 0; k < PLAN_OTHER_HOMES; k++)
        homes[1 + k] = sb->pw_home[k]; /* those found so far: the array grows below */
    _cleanup_free_ char *mountinfo = NULL;
    if (r >= 0) /* without it, the mounts' other names are not looked for */
        (void)read_file_at(AT_FDCWD, "/proc/self/mountinfo", 16u << 20, &mountinfo, NULL);
    /* what the command is shown: HOME (its view), the workspace, then each
     * grant (resolved once, not once per home; a deny rule or one that
     * does not resolve: NULL).  HOME's own entry is for the mounts below
     * it alone: the walk to it meets no other name. */
    size_t n_exposed = 2 + (o ? (size_t)o->n_access : 0);
    char **exposed = calloc(n_exposed, sizeof *exposed);
    if (!exposed)
        return -ENOMEM;
    exposed[0] = (char *)home_real;
    exposed[1] = (char *)workspace;
    for (size_t i = 2; i < n_exposed; i++)
        exposed[i] = o->access[i - 2].kind != ACCESS_DENY ? realpath_memo(o->access[i - 2].path) : NULL;
    for (size_t h = 0; h < ARRAY_SIZE(homes) && r >= 0; h++) {
        for (size_t i = 1; homes[h] && i < n_exposed && r >= 0; i++)
            if (exposed[i])
                r = add_home_aliases(homes[h], exposed[i], home_real, sb);
        if (r >= 0 && homes[h])
            r = add_home_mount_aliases(homes[h], exposed, n_exposed, home_real, mountinfo, sb);
    }
    if (r >= 0)
        r = add_workspace_mount_aliases(workspace, exposed, n_exposed, mountinfo, sb);
    for (size_t i = 2; i < n_exposed; i++)
        free(exposed[i]);
    free(exposed);
    if (r >= 0)
        r = add_moved_by_home_names(home_real, sb);
    return r;
}

/* The credential locations of the other homes in sb->pw_home that lie in
 * HOME's view (HOME names a parent of the passwd home, HOME=/home for
 * /home/alice; HOME bound again below itself, ~/mirror): the view's
 * server masks them by that name, and where a link of theirs leads in
 * HOME (mask_link_target), as HOME's own; before, only the workspace and
 * the grants kept them, and HOME's view showed ~/alice/.ssh.  A home in
 * the workspace is the workspace view's (prepare_ws_mask).  The number of
 * such homes in *ret_n. */
static int mask_other_homes(const char *home, const char *workspace, struct sandbox *sb, int *ret_n) {
    int r = 0;
    *ret_n = 0;
    size_t hl = strlen(home) + (strcmp(home, "/") != 0);
    for (size_t k = 0; k < PLAN_OTHER_HOMES && sb->pw_home[k] && r >= 0; k++) {
        const char *h = sb->pw_home[k];
        if (!path_within(h, home) || strcmp(h, home) == 0 || path_within(h, workspace))
            continue;
        ++*ret_n;
        for (size_t i = 0; plan_credential_paths[i] && r >= 0; i++) {
            _cleanup_free_ char *full = path_join(h, plan_credential_paths[i]);
            if (!full)
                return -ENOMEM;
            r = add_owned_mask(sb, full + hl);
            if (r >= 0 && sb->pw_cred_real[k])
                r = mask_link_target(home, full + hl, sb->pw_cred_real[k][i], sb);
        }
    }
    return r;
}

/* HOME as a copy-on-write view: every write the command makes there goes
 * to a throwaway stage in the run directory, removed at exit.  Not used
 * when HOME is inside the workspace (the workspace is that view already). */
int sandbox_prepare_home_view(struct run_context *ctx, const char *home, struct sandbox *sb) {
    struct stat st;
    if (plan_home_is_system(home) || path_within(home, ctx->workspace) || stat(home, &st) < 0 || !S_ISDIR(st.st_mode))
        return 0;
    sb->home_view = path_join(ctx->run_dir, "home-view");
    sb->home_stage_path = path_join(ctx->run_dir, "home-stage");
    sb->home_path = strdup(home);
    if (!sb->home_view || !sb->home_stage_path || !sb->home_path)
        return -ENOMEM;
    int fd = open(home, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    sb->home_fd = fd;
    int r = classify_credentials(home, fd, sb); /* the view itself is made by sandbox_start_home */
    if (r >= 0)
        r = mask_other_homes(home, ctx->workspace, sb, &sb->n_home_other);
    if (r < 0)
        return r;
    /* credential stores the environment moves to elsewhere in HOME */
    for (size_t i = 0; sb->cred_moved && sb->cred_moved[i] && r >= 0; i++)
        if (path_within(sb->cred_moved[i], home) && strcmp(sb->cred_moved[i], home) != 0)
            r = add_owned_mask(sb, sb->cred_moved[i] + strlen(home) + (strcmp(home, "/") != 0));
    if (r < 0)
        return r;
    /* pvisor's own state under HOME elsewhere than .local/state/pvisor
     * (XDG_STATE_HOME): other runs' stages and Bundles, and this run's own
     * HOME view, whose mount point the view would otherwise contain. */
    _cleanup_free_ char *sd = NULL;
    _cleanup_free_ char *real = state_dir(&sd) == 0 ? realpath_memo(sd) : NULL;
    if (!real || !path_within(real, home) || strcmp(real, home) == 0)
        return 0;
    const char *rel = real + strlen(home) + (strcmp(home, "/") != 0);
    if (!(sb->home_state = strdup(rel)))
        return -ENOMEM;
    return plan_is_credential_path(rel) ? 0 : add_owned_mask(sb, rel);
}

int sandbox_start_home(struct sandbox *sb) {
    if (sb->home_fd < 0)
        return 0;
    if (mkdir(sb->home_view, 0700) < 0)
        return -errno;
    int r = stage_open_throwaway(sb->home_stage_path, &sb->home_stage);
    PV_MARK("H_stage");
    if (r < 0)
        return r;
    struct overlay_params p = {
        .lower_fd = sb->home_fd,
        .stage = sb->home_stage,
        .mountpoint = sb->home_view,
        /* the stage quotas bound the throwaway HOME stage too (a quota of
         * its own): otherwise HOME would be the way around them */
        .max_bytes = sb->ctx->opts->stage_max_bytes,
        .max_inodes = sb->ctx->opts->stage_max_inodes,
        .mask = sb->home_mask,
        .n_mask = sb->n_home_mask,
        .own_group = !sb->as_root, /* root's namespace maps every id */
        .hide_stages = true,       /* a stage made in HOME during the run too */
        .no_walk = sb->home_state,
    };
    return overlay_start(&p, &sb->home_ov);
}

/* Unmount the view, forget its stage: HOME writes are discarded.  Runs on
 * a thread of its own at the end of a run (sandbox_release_home_async):
 * touches nothing but the view's own state. */
static void *home_teardown(void *arg) {
    struct sandbox *sb = arg;
    struct overlay_stats stats = {0};
    overlay_stop_stats(sb->home_ov, &stats);
    sb->home_links_unknown = stats.links_unknown;
    sb->home_ov = NULL;
    /* At the end of a run (on its thread): what the command wrote there,
     * before it goes; the view is unmounted, nothing writes the stage any
     * more.  Not counted on a failure's release, which says nothing of it. */
    if (sb->home_counted_ready) {
        if (sb->home_stage && sb->home_fd >= 0 && !sb->home_discard.counted)
            home_discard_count(stage_upper_fd(sb->home_stage), sb->home_fd, sb->home_mask, sb->n_home_mask,
                               &sb->home_discard);
        sem_post(&sb->home_counted); /* sandbox_note_home_discarded */
    }
    stage_free(sb->home_stage);
    sb->home_stage = NULL;
    if (sb->home_fd >= 0) {
        close(sb->home_fd);
        sb->home_fd = -1;
        /* Never follows what the command made (no symlinks followed). */
        int r = remove_tree_at(AT_FDCWD, sb->home_stage_path, UINT_MAX); /* any depth the command made */
        sb->home_rm_failed = r < 0 && r != -ENOENT;                      /* never made: nothing to remove */
        rmdir(sb->home_view);
    }
    return NULL;
}

void sandbox_release_home_async(struct sandbox *sb) {
    if (sb->home_fd < 0 || sb->home_thread_started)
        return;
    sb->home_counted_ready = sem_init(&sb->home_counted, 0, 0) == 0;
    sb->home_thread_started = pthread_create(&sb->home_thread, NULL, home_teardown, sb) == 0;
    if (!sb->home_thread_started && sb->home_counted_ready) {
        sem_destroy(&sb->home_counted);
        sb->home_counted_ready = false;
    }
}

#define HOME_RM_FAILED "the discarded HOME view's stage could not be removed completely"

const char *sandbox_links_unknown_warning(int r) {
    static char w[400];
    snprintf(w, sizeof w,
             "the credential directories could not be looked through for hard links of their files (%s): every "
             "file with other names was hidden from the command's views (a local git clone's objects, a package "
             "store's links); a large directory among them (a browser profile) is the usual cause",
             r == -E2BIG ? "more than 200,000 entries" : strerror(-r));
    return w;
}

/* True when the stage's removal failed (a warning in the Bundle then). */
bool sandbox_release_home_view(struct sandbox *sb) {
    if (sb->home_thread_started) {
        PV_MARK("E_home_join");
        pthread_join(sb->home_thread, NULL);
        PV_MARK("E_home_joined");
        sb->home_thread_started = false;
    } else {
        home_teardown(sb);
    }
    bool failed = sb->home_rm_failed && sb->ctx;
    if (failed)
        bundle_add_warning(sb->ctx->bundle, HOME_RM_FAILED);
    sb->home_rm_failed = false;
    if (sb->home_links_unknown && sb->ctx) {
        const char *w = sandbox_links_unknown_warning(sb->home_links_unknown);
        bundle_add_warning(sb->ctx->bundle, w);
        fprintf(stderr, "pvisor run: warning: %s\n", w);
        failed = true; /* the Bundle is written again */
    }
    sb->home_links_unknown = 0;
    home_discard_free(&sb->home_discard);
    if (sb->home_counted_ready)
        sem_destroy(&sb->home_counted);
    sb->home_counted_ready = sb->home_count_waited = false;
    free(sb->home_view);
    free(sb->home_stage_path);
    free(sb->home_path);
    free(sb->home_state);
    sb->home_state = NULL;
    for (size_t i = 0; i < sb->n_home_owned_mask; i++)
        free(sb->home_owned_mask[i]);
    sb->n_home_owned_mask = 0;
    sb->home_view = sb->home_stage_path = sb->home_path = NULL;
    return failed;
}

/* Credential locations inside the grant at path that do not exist at
 * start: a cover mount needs something to cover, so one the host creates
 * during the run is shown there (and one the command creates in a
 * read-write grant is the host's). */
static void note_missing(struct sandbox *sb, const char *where) {
    if (sb->n_grant_missing_creds++ == 0)
        snprintf(sb->grant_missing_first, sizeof sb->grant_missing_first, "%s", where);
}

/* (A location named by HOME that is a link, its target missing, counts
 * too: the link has nothing to cover either.) */
/* The same for one home (home: HOME, another home, or HOME by another
 * name; reals: where its locations lead, or NULL). */
static void grant_missing_in(const char *home, char *const *reals, struct sandbox *sb, const char *path) {
    struct stat st;
    for (size_t i = 0; home && plan_credential_paths[i]; i++) {
        _cleanup_free_ char *full = path_join(home, plan_credential_paths[i]);
        const char *real = reals ? reals[i] : NULL;
        if (full && path_within(full, path) && lstat(full, &st) < 0)
            note_missing(sb, full);
        else if (real && path_within(real, path) && lstat(real, &st) < 0)
            note_missing(sb, real);
    }
}

void sandbox_grant_missing_creds(const char *home, struct sandbox *sb, const char *path) {
    struct stat st;
    grant_missing_in(home, sb->cred_real, sb, path);
    /* the other homes and HOME's other names: a grant of a bind mount of
     * HOME, or of the passwd home, showed a location the host created
     * during the run while home_credentials said enforced and --strict
     * ran (found by a red-team pass) */
    for (size_t k = 0; k < PLAN_OTHER_HOMES && sb->pw_home[k]; k++)
        grant_missing_in(sb->pw_home[k], sb->pw_cred_real[k], sb, path);
    for (size_t i = 0; sb->cred_moved && sb->cred_moved[i]; i++)
        if (path_within(sb->cred_moved[i], path) && lstat(sb->cred_moved[i], &st) < 0)
            note_missing(sb, sb->cred_moved[i]);
}

/* The credential locations sb->cred_moved, pw_home, pw_cred_real and
 * cred_real name (filled by sandbox_resolve_home_credentials). */
void sandbox_release_credentials(struct sandbox *sb) {
    free_credentials(&sb->cred_real);
    for (size_t k = 0; k < PLAN_OTHER_HOMES; k++) {
        free_credentials(&sb->pw_cred_real[k]);
        free(sb->pw_home[k]);
        sb->pw_home[k] = NULL;
    }
    plan_moved_free(sb->cred_moved);
    sb->cred_moved = NULL;
}

/* The credential locations sb holds, as plan_build takes them. */
void sandbox_credentials_into(const struct sandbox *sb, struct plan_inputs *in) {
    in->cred_real = sb->cred_real;
    in->cred_moved = sb->cred_moved;
    for (size_t k = 0; k < PLAN_OTHER_HOMES; k++) {
        in->pw_home[k] = sb->pw_home[k];
        in->pw_cred_real[k] = sb->pw_cred_real[k];
    }
}

/* HOME (resolved, or NULL) in *ret_home, and the credential locations the
 * sandbox keeps from the command into sb: where the environment moves
 * them, the other homes', where HOME's lead now.  On failure, what went
 * wrong in *ret_error (or NULL); sb holds what was resolved so far. */
int sandbox_resolve_home_credentials(const char *cwd, const char *workspace, const struct run_options *o,
                                     struct sandbox *sb, char **ret_home, char **ret_error) {
    const char *h = getenv("HOME");
    *ret_home = h && h[0] == '/' ? realpath_memo(h) : NULL;
    int r = plan_moved_credentials(*ret_home, cwd, &sb->cred_moved);
    if (r < 0) {
        if ((r == -E2BIG ? asprintf(ret_error,
                                    "the environment moves more than %d credential locations (KUBECONFIG, say, "
                                    "names too many files, the node toolchains hold too many npmrc files, or "
                                    "~/.sbt too many global settings files): "
                                    "the sandbox cannot keep them all from the command",
                                    PLAN_MAX_MOVED)
                         : asprintf(ret_error, "cannot list the credential locations the environment moves: %s",
                                    strerror(-r))) < 0)
            *ret_error = NULL;
        return r;
    }
    if ((r = resolve_pw_home(*ret_home, workspace, o, sb)) < 0) {
        if ((r == -E2BIG
                 ? asprintf(ret_error,
                            "the workspace and the grants reach your home by more than %d names (bind "
                            "mounts of it), or by names that hold more than %d credential locations the "
                            "environment moves: the sandbox cannot keep the credential locations there from "
                            "the command; grant fewer directories",
                            PLAN_OTHER_HOMES, PLAN_MAX_MOVED)
                 : asprintf(ret_error, "cannot resolve the credential locations of your home: %s", strerror(-r))) < 0)
            *ret_error = NULL;
        return r;
    }
    if (*ret_home && (r = resolve_credentials(*ret_home, &sb->cred_real)) < 0) {
        if (asprintf(ret_error, "cannot prepare the copy-on-write view of HOME (%s): %s", *ret_home, strerror(-r)) < 0)
            *ret_error = NULL;
        return r;
    }
    return 0;
}

/* Moves the credential locations sandbox_check_credentials resolved from
 * sb into c (to_sb false) or back from c into sb (to_sb true). */
void sandbox_move_credentials(struct sandbox_creds *c, struct sandbox *sb, bool to_sb) {
#define MOVE(a, b) ((a) = (b), (b) = NULL)
    if (to_sb) {
        MOVE(sb->cred_real, c->cred_real);
        MOVE(sb->cred_moved, c->cred_moved);
        for (size_t k = 0; k < PLAN_OTHER_HOMES; k++) {
            MOVE(sb->pw_home[k], c->pw_home[k]);
            MOVE(sb->pw_cred_real[k], c->pw_cred_real[k]);
        }
    } else {
        MOVE(c->cred_real, sb->cred_real);
        MOVE(c->cred_moved, sb->cred_moved);
        for (size_t k = 0; k < PLAN_OTHER_HOMES; k++) {
            MOVE(c->pw_home[k], sb->pw_home[k]);
            MOVE(c->pw_cred_real[k], sb->pw_cred_real[k]);
        }
    }
#undef MOVE
}

void sandbox_creds_free(struct sandbox_creds *c) {
    if (!c)
        return;
    _cleanup_(sandbox_deletep) struct sandbox *sb = sandbox_new(NULL);
    if (sb) {
        sandbox_move_credentials(c, sb, true);
        sandbox_release_credentials(sb);
    } else {
        /* no mapping to be had: the same frees, through the heap */
        struct sandbox *tmp = calloc(1, sizeof *tmp);
        if (tmp) {
            sandbox_move_credentials(c, tmp, true);
            sandbox_release_credentials(tmp);
            free(tmp);
        }
    }
    free(c->home);
    free(c);
}

static int check_credentials(const struct run_options *o, const char *workspace, const char *cwd,
                             struct sandbox_creds **ret_creds, char **ret_error) {
    *ret_creds = NULL;
    *ret_error = NULL;
    _cleanup_(sandbox_deletep) struct sandbox *sb = sandbox_new(NULL);
    if (!sb)
        return 0; /* the planning resolves them again */
    _cleanup_free_ char *home = NULL, *ignored = NULL;
    int r = sandbox_resolve_home_credentials(cwd, workspace, o, sb, &home, &ignored);
    if (r < 0) {
        /* the planning resolves them again, and says what failed */
        sandbox_release_credentials(sb);
        return 0;
    }
    struct access_rule rules[POLICY_MAX_ACCESS];
    char *resolved[POLICY_MAX_ACCESS] = {0};
    size_t n_rules = 0;
    for (int i = 0; i < o->n_access && i < POLICY_MAX_ACCESS; i++)
        if ((resolved[n_rules] = realpath_memo(o->access[i].path)))
            rules[n_rules] = (struct access_rule){.kind = o->access[i].kind, .path = resolved[n_rules]}, n_rules++;
    struct plan_inputs in = {
        .access = rules,
        .n_access = n_rules,
        .home = home,
        .workspace = workspace,
        .cwd = cwd,
    };
    sandbox_credentials_into(sb, &in);
    /* plan_build's own refusals of them (the planning makes them again,
     * with the same resolution: the host may change in between) */
    _cleanup_free_ char *err = NULL;
    r = plan_refuse_credentials(&in, &err);
    for (size_t k = 0; k < n_rules; k++)
        free(resolved[k]);
    if (r == -EPERM && err) {
        sandbox_release_credentials(sb);
        *ret_error = TAKE_PTR(err);
        return -EPERM;
    }
    /* kept for the planning, which would resolve the same again (the
     * credential locations are most of its time) */
    struct sandbox_creds *c = calloc(1, sizeof *c);
    if (c) {
        c->home = TAKE_PTR(home);
        sandbox_move_credentials(c, sb, false);
        *ret_creds = c;
    }
    sandbox_release_credentials(sb);
    return 0;
}

/* Each a pass of resolving some hundred paths below the same few
 * directories (HOME's credential locations, the toolchains'): realpath's
 * reads of the symlinks that are not remembered across the pass. */
int sandbox_check_credentials(const struct run_options *o, const char *workspace, const char *cwd,
                              struct sandbox_creds **ret_creds, char **ret_error) {
    realpath_memo_begin();
    realpath_memo_list_dirs(); /* it resolves paths only, makes none */
    int r = check_credentials(o, workspace, cwd, ret_creds, ret_error);
    realpath_memo_end();
    return r;
}
