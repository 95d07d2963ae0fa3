/* cmd_review.c: `pvisor status --review [RUN|STAGE] [--json]` (what the
 * agent changed, what deserves a second look, and which boundary held), and
 * the target resolution shared by the lifecycle verbs (diff, apply, drop).
 * The JSON document (schema pvisor.review/1) is documented in
 * docs/lifecycle.md and only ever gains fields. */
#include "cli/cli.h"
#include "cli/runs.h"
#include "evidence/bundle.h"
#include "lifecycle/lifecycle.h"
#include "net/dns.h"
#include "policy/policy.h"
#include "stage/stage.h"
#include "util/cleanup.h"
#include "util/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *lc_cli_cwd_below(const char *ws) {
    _cleanup_free_ char *cwd = getcwd(NULL, 0);
    size_t l = ws ? strlen(ws) : 0;
    if (!cwd || !l || !path_within(cwd, ws))
        return NULL;
    while (l > 1 && ws[l - 1] == '/')
        l--;
    const char *rest = cwd + l;
    while (*rest == '/')
        rest++;
    return *rest ? strdup(rest) : NULL;
}

/* The newest stage was chosen without a name: other stages of its
 * workspace that are neither applied nor dropped are said on stderr (a
 * later trivial run, a mistyped command, made the newest stage; the
 * agent's would otherwise go unmentioned, and an apply of the empty one
 * marks it applied as if that were the work). */
/* The other open stages of workspace ws, said on stderr: those holding
 * changes first (newest first), then how many hold none (runs that only
 * read: tests, checks).  A bare apply whose own stage (the newest run's)
 * holds none, where another holds changes, is refused: it wrote nothing
 * and exited 0, and the stage with the agent's work was hidden behind
 * "..." after three empty ones (found by a review).  Returns
 * PV_EXIT_FAILURE when refused, else PV_EXIT_OK. */
static int note_other_stages(const char *verb, const char *ws, const char *stage) {
    json_t *others = lc_other_open_stages(ws, stage);
    size_t n = json_array_size(others), n_full = 0, n_sealed_full = 0;
    for (size_t i = 0; i < n; i++) {
        const json_t *o = json_array_get(others, i);
        bool full = !json_is_true(json_object_get(o, "empty"));
        n_full += full;
        /* an interrupted one cannot be applied: no reason to refuse */
        n_sealed_full += full && strcmp(json_string_value(json_object_get(o, "state")), "sealed") == 0;
    }
    int r = PV_EXIT_OK;
    if (n_sealed_full > 0 && strcmp(verb, "apply") == 0 && stage_probe_empty(stage) == 1) {
        _cleanup_free_ char *sp = lc_display_name(stage);
        fprintf(stderr,
                "pvisor apply: the newest run's stage (%s) holds no change, and %zu other stage%s of this "
                "workspace hold%s changes (newest first): ",
                sp ? sp : "?", n_full, n_full == 1 ? "" : "s", n_full == 1 ? "s" : "");
        r = PV_EXIT_FAILURE;
    } else if (n > 0) {
        fprintf(stderr, "pvisor %s: note: %zu other stage%s of this workspace %s neither applied nor dropped", verb, n,
                n == 1 ? "" : "s", n == 1 ? "is" : "are");
        if (n_full)
            fprintf(stderr, "; with changes (newest first): ");
    }
    for (size_t i = 0, shown = 0; i < n && shown < 3; i++) {
        const json_t *o = json_array_get(others, i);
        if (json_is_true(json_object_get(o, "empty")))
            continue;
        fprintf(stderr, "%s%s (%s)", shown++ ? ", " : "", json_string_value(json_object_get(o, "run")),
                json_string_value(json_object_get(o, "state")));
    }
    if (n_full > 3)
        fprintf(stderr, ", ...");
    if (r != PV_EXIT_OK)
        fprintf(stderr, ": name the run to apply ('pvisor apply RUN'; 'pvisor list' shows them)\n");
    else if (n > 0) {
        if (n > n_full)
            fprintf(stderr, "%s%zu with no change", n_full ? "; " : ": ", n - n_full);
        fprintf(stderr,
                "; without a RUN, 'pvisor %s' takes the newest run's stage: name a run for another ('pvisor list' "
                "shows them)\n",
                verb);
    }
    json_decref(others);
    return r;
}

/* A target found but refused (the message said why): nothing handed back. */
static int target_refused(json_t *bundle, char **ret_stage, char **ret_run) {
    json_decref(bundle);
    free(*ret_stage);
    *ret_stage = NULL;
    if (ret_run) {
        free(*ret_run);
        *ret_run = NULL;
    }
    return PV_EXIT_FAILURE;
}

/* The record a plain apply checks (lc_stage_changeset_id): one that could
 * not be written (a stage of another user's, a read-only file system)
 * leaves apply comparing with an older review, or refusing. */
void lc_cli_note_review_record(const char *verb, const struct lc_stage *st) {
    if (st->review_record_error < 0)
        fprintf(stderr,
                "pvisor %s: note: this review could not be recorded in the stage (%s/" LC_REVIEWED_NAME
                ": %s): a plain 'pvisor apply' does not compare the stage with it; apply with --expect ID to apply "
                "exactly what it shows\n",
                verb, st->path, strerror(-st->review_record_error));
}

int lc_cli_target(const char *verb, const char *run, const char *stage_dir, char **ret_stage, char **ret_run,
                  json_t **ret_bundle) {
    /* "" is a prefix of every run id: `pvisor drop "$RUN"` with RUN unset
     * would take the only run there is, of any workspace */
    if ((run && !*run) || (stage_dir && !*stage_dir))
        return cli_usage_error(verb, "an empty %s names nothing", run && !*run ? "RUN" : "stage directory");
    _cleanup_free_ char *unreadable = NULL;
    json_t *bundle = NULL;
    bool changes = strcmp(verb, "apply") == 0 || strcmp(verb, "drop") == 0 || strcmp(verb, "restore") == 0;
    int r = lc_resolve_target(run, stage_dir, !changes, ret_stage, ret_run ? ret_run : &unreadable, &bundle);
    if (r == 0) {
        /* Chosen without a name: the newest stage, but of another
         * workspace than the current directory's.  Said; and apply, drop
         * and restore, which change files, want it named. */
        const char *ws = json_string_value(json_object_get(bundle, "workspace"));
        _cleanup_free_ char *cwd = !run && !stage_dir ? getcwd(NULL, 0) : NULL;
        if (cwd && ws && !path_within(cwd, ws)) {
            const char *id = ret_run && *ret_run ? *ret_run : unreadable;
            _cleanup_free_ char *wd = lc_display_name(ws);
            if (changes) {
                cli_error(PV_EXIT_FAILURE, verb,
                          "the current directory is in no staged run's workspace; the newest stage is of %s (run "
                          "%s): name it ('pvisor %s%s %s') or run this there",
                          wd ? wd : "?", id ? id : "?", verb, strcmp(verb, "restore") == 0 ? " NAME" : "",
                          id ? id : "RUN");
                return target_refused(bundle, ret_stage, ret_run);
            }
            fprintf(stderr,
                    "pvisor %s: the newest stage, of workspace %s (run %s): the current directory is in no "
                    "staged run's workspace\n",
                    verb, wd ? wd : "?", id ? id : "?");
        }
        /* The newest run here never ran its command (a refused --safe
         * start, a Ctrl-C as it started, a mistyped command), so the stage
         * is an earlier run's, which holds its work: said; and drop, which
         * discards it, wants it named (the user meant the run that failed,
         * which left nothing to drop). */
        const char *id = ret_run && *ret_run ? *ret_run : NULL;
        json_t *skipped = !run && !stage_dir && ws && id ? lc_newer_never_ran(id, ws) : NULL;
        if (skipped) {
            const char *sid = json_string_value(json_object_get(skipped, "run"));
            const char *sst = json_string_value(json_object_get(skipped, "state"));
            if (strcmp(verb, "drop") == 0) {
                cli_error(PV_EXIT_FAILURE, verb,
                          "the newest run here, %s, never ran its command (%s) and left nothing to drop; the "
                          "newest stage is run %s's, with its work: to drop that, name it ('pvisor drop %s')",
                          sid, sst ? sst : "?", id, id);
                json_decref(skipped);
                return target_refused(bundle, ret_stage, ret_run);
            }
            fprintf(stderr,
                    "pvisor %s: note: the newest run here, %s, never ran its command (%s): this is run %s's stage\n",
                    verb, sid, sst ? sst : "?", id);
            json_decref(skipped);
        }
        if (!run && !stage_dir && ws && note_other_stages(verb, ws, *ret_stage) != PV_EXIT_OK)
            return target_refused(bundle, ret_stage, ret_run);
        if (ret_bundle)
            *ret_bundle = bundle;
        else
            json_decref(bundle);
        return PV_EXIT_OK;
    }
    if (r == -ENODATA || r == -EINPROGRESS) {
        const char *id = ret_run && *ret_run ? *ret_run : unreadable;
        if (run && r == -EINPROGRESS)
            cli_error(PV_EXIT_FAILURE, verb,
                      "run %s is still starting (it has no Bundle yet, so nothing says which stage it has); run "
                      "this again in a moment",
                      id ? id : "?");
        else if (run)
            cli_error(PV_EXIT_FAILURE, verb,
                      "run %s has no readable Bundle (its supervisor died while setting it up, or a power loss "
                      "lost it), so nothing says which stage it had; name the stage directory, or remove that "
                      "run's directory",
                      id ? id : "?");
        else if (r == -EINPROGRESS)
            cli_error(PV_EXIT_FAILURE, verb,
                      "the newest run %s is still starting (it has no Bundle yet), so which stage is newest is "
                      "unknown; run this again in a moment, or name the run or the stage (see 'pvisor list')",
                      id ? id : "?");
        else
            cli_error(PV_EXIT_FAILURE, verb,
                      "the newest run %s has no readable Bundle (its supervisor died while setting it up, or a power "
                      "loss lost it), so which stage is newest is unknown; name the run or the stage (see 'pvisor "
                      "list'), or remove that run's directory",
                      id ? id : "?");
        if (ret_run) {
            free(*ret_run);
            *ret_run = NULL;
        }
        return PV_EXIT_FAILURE;
    }
    if (r == -EPROTONOSUPPORT) {
        /* a newer pvisor's run: its stage may well be there (never "remove
         * that run's directory", which holds a --stage auto run's stage) */
        const char *id = ret_run && *ret_run ? *ret_run : unreadable;
        if (run)
            cli_error(PV_EXIT_FAILURE, verb,
                      "run %s was recorded by another pvisor: its Bundle is of a schema this one (%s) does not "
                      "read, so nothing here says which stage it has; use the pvisor that recorded it, or name "
                      "the stage directory",
                      id ? id : "?", BUNDLE_SCHEMA);
        else
            cli_error(PV_EXIT_FAILURE, verb,
                      "the newest run %s was recorded by another pvisor: its Bundle is of a schema this one (%s) "
                      "does not read, so which stage is newest is unknown; use the pvisor that recorded it, or "
                      "name the run or the stage (see 'pvisor list')",
                      id ? id : "?", BUNDLE_SCHEMA);
        if (ret_run) {
            free(*ret_run);
            *ret_run = NULL;
        }
        return PV_EXIT_FAILURE;
    }
    /* as typed, but escaped (a newline split the message in two, and a
     * terminal acted on an escape sequence in it) */
    _cleanup_free_ char *run_e = run ? term_escape(run) : NULL;
    _cleanup_free_ char *dir_e = stage_dir ? term_escape(stage_dir) : NULL;
    const char *run_shown = run_e ? run_e : "?", *dir_shown = dir_e ? dir_e : "?";
    if (stage_dir && r == -ELOOP)
        return cli_error(
            PV_EXIT_FAILURE, verb,
            "'%s' is or goes through a symlink: name the stage directory itself (a link in a workspace may be one "
            "the agent made, pointing at another project's stage)",
            dir_shown);
    if (stage_dir && (r == -EINVAL || r == -ENOENT || r == -ENOTDIR))
        return cli_error(PV_EXIT_FAILURE, verb, "'%s' is not a pvisor stage directory%s%s", dir_shown,
                         r == -EINVAL ? "" : ": ", r == -EINVAL ? "" : strerror(-r));
    if (stage_dir && (r == -EACCES || r == -EPERM))
        return cli_error(PV_EXIT_FAILURE, verb,
                         "cannot read the stage directory '%s': %s (another user's stage is read as that user, or "
                         "root)",
                         dir_shown, strerror(-r));
    if (stage_dir)
        return cli_error(PV_EXIT_FAILURE, verb, "cannot read the stage directory '%s': %s", dir_shown, strerror(-r));
    struct stat dst;
    if (r == -ENOENT && run && strcmp(run, "latest") != 0 && stat(run, &dst) == 0 && S_ISDIR(dst.st_mode))
        return cli_error(PV_EXIT_FAILURE, verb,
                         "no run matches '%s' (see 'pvisor list'); for the stage directory of that name, write "
                         "./%s",
                         run_shown, run_shown);
    if (r == -ENOENT)
        return run ? cli_error(PV_EXIT_FAILURE, verb, "no run matches '%s' (see 'pvisor list')", run_shown)
                   : cli_error(PV_EXIT_FAILURE, verb,
                               "no runs recorded yet (start one with 'pvisor run --stage auto -- CMD')");
    if (r == -ENOTUNIQ)
        return cli_error(PV_EXIT_FAILURE, verb, "'%s' matches more than one run; give more of the id", run_shown);
    if (r == -ENOMEDIUM && run) {
        /* a staged run whose command never started has no stage either
         * (none was opened, or the empty one it made is gone): not one
         * that "was not staged" */
        const char *state = json_string_value(json_object_get(bundle, "state"));
        const json_t *req = json_object_get(bundle, "requested_policy");
        const char *fs = json_string_value(json_object_get(req, "filesystem"));
        bool staged = json_is_true(json_object_get(req, "safe")) || json_is_string(json_object_get(req, "stage")) ||
                      (fs && strcmp(fs, "sandbox") == 0);
        bool never_ran = state && (strcmp(state, "interrupted") == 0 || strcmp(state, "setup_failed") == 0 ||
                                   strcmp(state, "exec_failed") == 0);
        if (staged && never_ran)
            cli_error(PV_EXIT_FAILURE, verb,
                      "run '%s' has no stage: its command never ran (%s), so nothing was staged (see 'pvisor status "
                      "%s')",
                      run, state, run);
        else
            cli_error(PV_EXIT_FAILURE, verb, "run '%s' was not staged: it has no stage", run);
        json_decref(bundle);
        return PV_EXIT_FAILURE;
    }
    if (r == -ENOMEDIUM)
        return cli_error(PV_EXIT_FAILURE, verb,
                         "no recorded run has a stage (use 'pvisor run --stage auto -- CMD', or --stage DIR)");
    /* no stage named: the runs directory could not be read (another
     * user's XDG_STATE_HOME), said naming it, as status and list do */
    if (!stage_dir && (r == -EACCES || r == -EPERM || r == -ENOTDIR))
        return runs_dir_error(verb, r);
    return cli_error(PV_EXIT_FAILURE, verb, "cannot find the stage: %s", strerror(-r));
}

bool lc_cli_own_files_override(int r) {
    const char *step;
    /* uid 0 there: what we exec (diff(1)) keeps the override */
    return r == -EACCES && geteuid() != 0 && userns_enter(0, 0, 0, &step) == 0;
}

bool lc_cli_override_unreadable(const struct lc_changeset *cs) {
    if (geteuid() == 0)
        return false;
    for (size_t i = 0; i < cs->n; i++) {
        const struct lc_entry *e = &cs->entries[i];
        if ((e->old_type == LC_REG && !(e->old_mode & S_IRUSR)) || (e->new_type == LC_REG && !(e->new_mode & S_IRUSR)))
            return lc_cli_own_files_override(-EACCES);
    }
    return false;
}

char *lc_cli_missing_reason(const char *stage) {
    _cleanup_close_ int fd = open(stage, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return strdup("the stage directory is gone");
    _cleanup_free_ char *txt = NULL;
    json_t *meta = read_file_at(fd, "meta.json", 1 << 20, &txt, NULL) == 0 ? json_loads(txt, 0, NULL) : NULL;
    const char *ws = json_string_value(json_object_get(meta, "workspace"));
    struct stat st;
    char *out = NULL;
    if (ws && stat(ws, &st) < 0 && (errno == ENOENT || errno == ENOTDIR)) {
        _cleanup_free_ char *shown = lc_display_name(ws);
        if (asprintf(&out,
                     "its workspace %s is gone (moved or removed?), with which the stage is compared; the stage "
                     "still holds the changes: put the workspace back there to see them",
                     shown ? shown : "?") < 0)
            out = NULL;
    } else if (fstatat(fd, "upper", &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT) {
        out = strdup("it has no upper/, so it holds no changes");
    }
    json_decref(meta);
    return out;
}

int lc_cli_load_changes(const char *stage, struct lc_stage **ret_st, struct lc_changeset **ret_cs, char **ret_stopped,
                        bool *ret_stopped_deleted) {
    for (int attempt = 0;; attempt++) {
        *ret_st = NULL;
        *ret_cs = NULL;
        if (ret_stopped) {
            free(*ret_stopped);
            *ret_stopped = NULL;
        }
        int r = lc_stage_open(stage, ret_st);
        if (r == 0)
            r = lc_changeset_load(*ret_st, ret_cs);
        if (r >= 0)
            return r;
        if (ret_stopped_deleted)
            *ret_stopped_deleted = *ret_st && (*ret_st)->stopped_deleted;
        if (ret_stopped) {
            *ret_stopped = *ret_st ? (*ret_st)->stopped_at : NULL;
            if (*ret_st)
                (*ret_st)->stopped_at = NULL;
        }
        lc_stage_free(*ret_st);
        *ret_st = NULL;
        if (attempt > 0 || !lc_cli_own_files_override(r))
            return r;
    }
}

/* The changeset ID review and diff show (lc_stage_changeset_id), into
 * id; "" with *ret_why saying why there is none.  A file the agent made
 * unreadable is read as the load reads it: once more with the user's
 * override of their own files. */
static int changeset_id(struct lc_stage *st, const struct lc_changeset *cs, char id[LC_CHANGESET_ID_LEN + 1],
                        const char **ret_why) {
    id[0] = '\0';
    int r = lc_stage_changeset_id(st, cs, id);
    if (r == -EACCES && lc_cli_own_files_override(r))
        r = lc_stage_changeset_id(st, cs, id);
    lc_cli_note_review_record("status", st);
    if (r < 0) {
        id[0] = '\0';
        static char why[160];
        snprintf(why, sizeof why, "%s (a plain 'pvisor apply' refuses until a review names it)", strerror(-r));
        *ret_why = r == -ESTALE
                       ? "the stage changed while it was read (a run reopened it, or a restore): review it again"
                       : why;
    }
    return r;
}

const char *lc_cli_bound_reason(int r, const char *stopped) {
    if (r == -ENAMETOOLONG)
        return "it holds a path longer than " LC_MAX_PATH_TEXT " bytes (review, diff and apply stop there)";
    if (stopped)
        return "directories nested deeper than " LC_MAX_DEPTH_TEXT " levels (review, diff and apply stop there)";
    return "directories nested deeper than " LC_MAX_DEPTH_TEXT " levels, or a symlink where a directory was (review, "
           "diff and apply stop there; 'pvisor drop' discards the stage)";
}

void lc_cli_bound_hint(const char *verb, const char *stopped, bool deleted, const char *stage) {
    if (!stopped)
        return;
    _cleanup_free_ char *d = lc_display_name(stopped);
    if (deleted) {
        /* already gone from the stage: removing it in a run changes nothing */
        fprintf(stderr,
                "pvisor %s: it stopped at %s, in a directory of the workspace the command deleted, which apply "
                "cannot delete beyond that bound. To keep the rest of the stage, delete that directory (or the "
                "one the command deleted) in the workspace yourself, and review it again; or discard the stage "
                "with 'pvisor drop'\n",
                verb, d ? d : "?");
        return;
    }
    fprintf(stderr,
            "pvisor %s: it stopped at %s. To keep the rest of the stage, remove that directory (or one above it) "
            "in a run on the stage ('pvisor run --stage %s' in the workspace, then rm -rf it there), and review "
            "it again; or discard the stage with 'pvisor drop'\n",
            verb, d ? d : "?", stage);
}

void lc_cli_unreadable_hint(int r, const char *stage, bool writes) {
    if (r != -EACCES)
        return;
    fprintf(stderr,
            "pvisor: permission denied: a directory of the workspace you may not read%s (give yourself the "
            "permission, or ask its owner), or part of the stage is unreadable (the agent can remove its own "
            "read permission; to review and apply it anyway: chmod -R u+rwX '%s/upper', the modes the agent set "
            "are then not kept; or remove it with 'pvisor drop')\n",
            writes ? " or write, and is not yours" : "", stage);
}

/* A positional target names a stage when it is a path (holds a slash, or
 * is . or ..), a run otherwise: a bare word is never a directory of the
 * current directory, which may be one the agent made (an applied
 * workspace may hold a forged stage named "latest", or a run id, naming
 * any workspace as its own). */
bool lc_cli_arg_is_stage(const char *arg) {
    return strchr(arg, '/') || strcmp(arg, ".") == 0 || strcmp(arg, "..") == 0;
}

static json_t *boundary_json(const json_t *bundle) {
    if (!bundle)
        return json_null();
    json_t *o = json_object();
    const json_t *dims = json_object_get(bundle, "dimensions");
    for (unsigned d = 0; d < _DIM_MAX; d++) {
        const json_t *dim = json_object_get(dims, dimension_name(d));
        json_t *e = json_object();
        const char *keys[] = {"requested", "effective", "mechanism"};
        for (size_t k = 0; k < ARRAY_SIZE(keys); k++) {
            const char *v = json_string_value(json_object_get(dim, keys[k]));
            json_object_set_new(e, keys[k], v ? json_string(v) : json_null());
        }
        json_object_set_new(o, dimension_name(d), e);
    }
    return o;
}

/* o's string field k for display (escaped: cli_esc), "-" when absent */
static const char *jstr(const json_t *o, const char *k) {
    return cli_esc(json_string_value(json_object_get(o, k)));
}

/* o's integer field k, or 0 (absent, null, not a number) */
static long long jint(const json_t *o, const char *k) {
    const json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (long long)json_integer_value(v) : 0;
}

/* the stage's quota refusals in Bundle b, a copy for JSON (null without) */
static json_t *quota_refusals_json(const json_t *b) {
    const json_t *qr = json_object_get(json_object_get(b, "stage"), "quota_refusals");
    return json_is_integer(qr) ? json_integer(json_integer_value(qr)) : json_null();
}

static char kind_letter(const struct lc_entry *e) {
    if (e->renamed_from)
        return 'R';
    switch (e->kind) {
    case LC_ADDED: return 'A';
    case LC_DELETED: return 'D';
    case LC_MODIFIED: return 'M';
    case LC_TYPE_CHANGED: return 'T';
    }
    return '?';
}

/* Names in the stage are agent-chosen: never print their bytes raw.  A
 * line's annotations follow two spaces ("  (from x)", "  -> target"): a
 * name with two spaces in a row, or a space at its end, has each space
 * written \x20 by lc_display_name, so that it cannot pass for one ("x  ->
 * y" is a file). */
static const char *dn(const char *s, char **keep) {
    free(*keep);
    *keep = s ? lc_display_name(s) : NULL;
    return *keep ? *keep : "?";
}

static void print_entry(const struct lc_entry *e) {
    _cleanup_free_ char *k1 = NULL, *k2 = NULL, *k3 = NULL;
    printf("  %c %s%s", kind_letter(e), dn(e->path, &k1),
           (e->kind != LC_DELETED && e->new_type == LC_DIR) || (e->kind == LC_DELETED && e->old_type == LC_DIR) ? "/"
                                                                                                                : "");
    if (e->renamed_from)
        printf("  (from %s)", dn(e->renamed_from, &k2));
    if (e->kind == LC_TYPE_CHANGED)
        printf("  (%s -> %s)", lc_type_name(e->old_type), lc_type_name(e->new_type));
    if (e->changes & LC_CH_CONTENT)
        printf("  (content)");
    if (e->binary) /* the Note below counts them: which they are */
        printf("  (binary)");
    if (e->changes & LC_CH_MODE)
        printf("  (mode %04o -> %04o)", e->old_mode, e->new_mode);
    /* what apply creates has the stage's mode: said when it is not one a
     * umask gives (a directory 0777 or setgid, a file 0666; one its owner
     * may not read, write or search), which the line said nothing of */
    if ((e->kind == LC_ADDED || e->kind == LC_TYPE_CHANGED) && !(e->changes & LC_CH_MODE) &&
        (e->new_type == LC_DIR || e->new_type == LC_REG) &&
        ((e->new_mode & 07002) || (e->new_mode & 0600) != 0600 || (e->new_type == LC_DIR && !(e->new_mode & 0100))))
        printf("  (mode %04o)", e->new_mode);
    if (e->changes & LC_CH_TARGET)
        printf("  (-> %s, was %s)", dn(e->new_target, &k2), dn(e->old_target, &k3));
    if (e->changes & LC_CH_XATTR)
        printf("  (xattrs)");
    if (e->changes & LC_CH_OWNER)
        printf("  (owner %u:%u -> %u:%u)", e->old_uid, e->old_gid, e->new_uid, e->new_gid);
    if ((e->kind == LC_ADDED || e->kind == LC_TYPE_CHANGED) && e->new_type == LC_LNK)
        printf("  -> %s", dn(e->new_target, &k3));
    putchar('\n');
}

/* The user xattrs apply writes on e's object or removes from it, by name
 * and value (review said only "(xattrs)" of a changed file, and nothing of
 * a new file's, which apply writes all the same). */
static void print_xattrs(const struct lc_stage *st, const struct lc_entry *e, const char *indent) {
    int err = 0;
    json_t *xs = st ? lc_entry_xattrs_json(st, e, &err) : NULL;
    if (!xs && err < 0)
        printf("%suser xattrs: could not be read (%s)\n", indent, strerror(-err));
    size_t i;
    const json_t *x;
    json_array_foreach(xs, i, x) {
        _cleanup_free_ char *line = lc_xattr_change_text(x);
        printf("%s%s\n", indent, line ? line : "?");
    }
    json_decref(xs);
}

/* The widest name print_index_hides shows (a longer one keeps its start
 * and its end, which tell names apart; the JSON has them whole): five
 * names of 4,000 bytes the agent chose took a screen and more. */
#define INDEX_HIDES_NAME_MAX 80

/* The entries a git index the stage writes hides from git that the
 * workspace's did not (LC_W_GIT_HIDES), the first of them by name. */
static void print_index_hides(const struct lc_entry *e) {
    if (e->index_hides_unread) {
        printf("      not read: larger than %d MiB, or past the %d MiB of git indexes one review reads; its "
               "skip-worktree and assume-unchanged entries are unknown\n",
               LC_GIT_INDEX_READ_MAX_MIB, LC_GIT_INDEX_READ_TOTAL_MIB);
        return;
    }
    if (!e->index_hides)
        return;
    printf("      %zu entr%s that git status and git diff skip (skip-worktree, assume-unchanged): ", e->index_hides,
           e->index_hides == 1 ? "y" : "ies");
    locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
    for (size_t k = 0; k < e->n_index_hides_names; k++) {
        _cleanup_free_ char *d = NULL, *cut = strdup(e->index_hides_names[k]);
        if (cut)
            cli_cut(cut, INDEX_HIDES_NAME_MAX, INDEX_HIDES_NAME_MAX / 2 - 2, utf8); /* before dn escapes */
        printf("%s%s", k ? ", " : "", dn(cut, &d));
    }
    if (utf8)
        freelocale(utf8);
    printf("%s\n", e->index_hides > e->n_index_hides_names ? ", ..." : "");
}

/* More warnings than this and the review sums them up by kind after the
 * list: the agent chooses how many there are and their paths' order, and
 * thousands of 'exec' lines (a tree of new scripts) buried the one
 * 'git_hook' the list held (tested: 6,000 lines, the hook in their middle,
 * the last screen all 'exec'). */
#define WARN_SUMMARY_AFTER 10
#define WARN_SUMMARY_PATHS 3

/* The warnings by kind, the rarest first (each with its first paths). */
static void print_warning_summary(const struct lc_changeset *cs, const size_t per_kind[LC_W__COUNT], size_t total) {
    unsigned order[LC_W__COUNT], n = 0;
    for (unsigned b = 0; b < LC_W__COUNT; b++)
        if (per_kind[b])
            order[n++] = b;
    for (unsigned i = 1; i < n; i++) /* insertion sort, stable: by count */
        for (unsigned j = i; j > 0 && per_kind[order[j]] < per_kind[order[j - 1]]; j--) {
            unsigned t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    printf("\nWarnings by kind (%zu in all, the rarest first):\n", total);
    for (unsigned i = 0; i < n; i++) {
        unsigned b = order[i];
        printf("  %-18s %7zu  ", lc_warning_name(b), per_kind[b]);
        size_t shown = 0;
        for (size_t k = 0; k < cs->n && shown < WARN_SUMMARY_PATHS; k++)
            if (cs->entries[k].warnings & (1u << b)) {
                _cleanup_free_ char *d = NULL;
                printf("%s%s", shown++ ? ", " : "", dn(cs->entries[k].path, &d));
            }
        printf("%s\n", per_kind[b] > WARN_SUMMARY_PATHS ? ", ..." : "");
    }
}

/* An interrupted restore reads 'interrupted' (its upper/ may even be
 * missing): the way out is the restore again, never the drop that an
 * interrupted run calls for (it would discard the checkpoints too). */
static void restore_note(FILE *f, const char *label, const char *stage) {
    _cleanup_free_ char *name = NULL;
    if (!lc_restore_interrupted(stage, &name))
        return;
    fprintf(f,
            "%sa 'pvisor restore' of this stage was interrupted; 'pvisor restore %s %s' completes it "
            "('pvisor checkpoint --list %s' lists the checkpoints; a drop would discard them too)\n",
            label, name ? name : "NAME", stage, stage);
}

/* How the run's command ended (the Bundle's exit): one stopped by a signal
 * or by --timeout may have been writing a file it never finished, which
 * the changes show as an ordinary one. */
static void print_ended(const json_t *bundle) {
    const json_t *ex = json_object_get(bundle, "exit");
    if (!json_is_object(ex))
        return;
    const char *sig = json_string_value(json_object_get(ex, "signal_name"));
    const json_t *st = json_object_get(ex, "status");
    bool timed_out = json_is_true(json_object_get(ex, "timed_out"));
    long long left = jint(ex, "leftovers_killed");
    if (sig || timed_out)
        printf("Ended:       %s%s%s%s: files it was writing may be cut short\n",
               timed_out ? "its --timeout expired" : "", timed_out && sig ? ", " : "", sig ? "killed by SIG" : "",
               sig ? sig : "");
    else if (json_is_integer(st) && json_is_string(json_object_get(ex, "interrupted_by")))
        printf("Ended:       exit status %lld on SIG%s sent to pvisor (interrupted): files it was writing may be cut "
               "short\n",
               (long long)json_integer_value(st), json_string_value(json_object_get(ex, "interrupted_by")));
    else if (json_is_integer(st))
        printf("Ended:       exit status %lld\n", (long long)json_integer_value(st));
    else if (json_is_string(json_object_get(ex, "interrupted_by")))
        printf("Ended:       never started: SIG%s was sent to pvisor before it (interrupted)\n",
               json_string_value(json_object_get(ex, "interrupted_by")));
    /* a background job or daemon still alive when the command exited was
     * killed then, maybe in the middle of a write */
    if (left > 0)
        printf("Note:        %lld process%s the command left running %s killed when it exited: files %s "
               "writing may be cut short\n",
               left, left == 1 ? "" : "es", left == 1 ? "was" : "were", left == 1 ? "it was" : "they were");
}

/* Writes the stage's quota (or the file system's reserve) refused: the
 * command may have gone on, even exited 0, leaving a file cut short that
 * the changes show as an ordinary one. */
static void print_quota(const json_t *bundle) {
    long long n = jint(json_object_get(bundle, "stage"), "quota_refusals");
    if (n > 0)
        printf("Note:        the stage refused %lld write%s (quota or free-space reserve: ENOSPC/EDQUOT): files it "
               "was writing may be cut short\n",
               n, n == 1 ? "" : "s");
}

/* The earlier runs of the stage (lc_stage_runs, less the one described),
 * oldest first: {"run", "exit", "quota_refusals"} each.  What they left
 * cut short is still in the stage when a later run ended well.  A RUN
 * named to review may be an older one: *ret_before counts those before
 * it, the rest ran after it. */
static json_t *earlier_runs(const char *stage, const char *described, size_t *ret_before) {
    json_t *runs = lc_stage_runs(stage), *out = json_array();
    bool seen = false;
    *ret_before = 0;
    for (size_t i = 0; out && i < json_array_size(runs); i++) {
        const json_t *e = json_array_get(runs, i);
        const char *rid = json_string_value(json_object_get(e, "run"));
        const json_t *b = json_object_get(e, "bundle");
        if (!rid || (described && strcmp(rid, described) == 0)) {
            seen = seen || rid;
            continue;
        }
        if (!seen)
            (*ret_before)++;
        const json_t *ex = json_object_get(b, "exit");
        json_array_append_new(out,
                              json_pack("{s:s, s:O, s:o}", "run", rid, "exit", json_is_object(ex) ? ex : json_null(),
                                        "quota_refusals", quota_refusals_json(b)));
    }
    json_decref(runs);
    return out;
}

/* A Note: for each other run that may have left a file cut short (the
 * first before of them ran before the one described). */
static void print_earlier(const json_t *earlier, size_t before) {
    size_t i;
    const json_t *e;
    json_array_foreach(earlier, i, e) {
        const char *rid = json_string_value(json_object_get(e, "run"));
        const json_t *ex = json_object_get(e, "exit");
        const char *sig = json_string_value(json_object_get(ex, "signal_name"));
        bool timed_out = json_is_true(json_object_get(ex, "timed_out"));
        long long refused = jint(e, "quota_refusals"), left = jint(ex, "leftovers_killed");
        if (!sig && !timed_out && refused <= 0 && left <= 0)
            continue;
        printf("Note:        %s run of this stage, %s, ", i < before ? "an earlier" : "a later", rid);
        if (timed_out || sig)
            printf("%s%s%s%s", timed_out ? "ran out its --timeout" : "", timed_out && sig ? ", " : "",
                   sig ? "was killed by SIG" : "", sig ? sig : "");
        if (refused > 0)
            printf("%shad %lld write%s refused by the stage (quota or free-space reserve)",
                   timed_out || sig ? " and " : "", refused, refused == 1 ? "" : "s");
        if (left > 0)
            printf("%shad %lld process%s it left running killed", timed_out || sig || refused > 0 ? " and " : "", left,
                   left == 1 ? "" : "es");
        printf(": files it was writing may be cut short\n");
    }
}

/* What the run's command reached through the egress broker (--allow-net)
 * and what it tried that was refused: what may have left the machine
 * belongs beside what it changed. */
static void print_egress(const json_t *bundle) {
    const json_t *eg = json_object_get(bundle, "egress");
    if (!json_is_object(eg))
        return;
    const json_t *c = json_object_get(eg, "connections");
    printf("\nNetwork:     %lld connection%s through the egress broker, %lld refused, %lld failed (allowed: ",
           jint(c, "allowed"), jint(c, "allowed") == 1 ? "" : "s", jint(c, "refused"), jint(c, "failed"));
    size_t i;
    const json_t *v;
    json_array_foreach(json_object_get(eg, "allow"), i, v) printf("%s%s", i ? ", " : "", json_string_value(v));
    printf(")\n");
    long long up = 0, down = 0; /* the listed tunnels' */
    json_array_foreach(json_object_get(eg, "destinations"), i, v) {
        /* the destination as the command asked: printable already */
        long long n = jint(v, "connections");
        const char *verdict = jstr(v, "verdict");
        printf("  %-8s %s: %lld connection%s", verdict, jstr(v, "destination"), n, n == 1 ? "" : "s");
        if (strcmp(verdict, "allowed") == 0) {
            printf(", %lld bytes sent, %lld received\n", jint(v, "bytes_up"), jint(v, "bytes_down"));
            up += jint(v, "bytes_up");
            down += jint(v, "bytes_down");
        } else
            printf(": %s\n", jstr(v, "reason"));
    }
    long long dropped = jint(eg, "destinations_dropped");
    if (dropped > 0)
        printf("  ... and %lld more connection%s to other destinations (not listed): %lld bytes sent, %lld "
               "received\n",
               dropped, dropped == 1 ? "" : "s", jint(eg, "bytes_up") - up, jint(eg, "bytes_down") - down);
}

/* Does s hold a byte a terminal may act on (a control byte, DEL, or not
 * ASCII)? */
static bool raw_bytes(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f)
            return true;
    return false;
}

/* The host names the command looked up itself (the run's name server
 * answers each "no such name"): what to --allow-net, said at the run's
 * end and kept in the Bundle, belongs beside what it reached. */
static void print_dns(const json_t *bundle) {
    const json_t *dns = json_object_get(bundle, "dns");
    if (!json_is_object(dns))
        return;
    size_t i, hosts = 0;
    const json_t *d;
    json_array_foreach(json_object_get(dns, "names"), i, d) hosts +=
        dns_name_is_host(json_string_value(json_object_get(d, "name")));
    long long more = jint(dns, "unrecorded_queries");
    if (!hosts && more <= 0)
        return;
    printf("\nLooked up:   %zu host name%s, each answered 'no such name' (%s):", hosts, hosts == 1 ? "" : "s",
           json_is_object(json_object_get(bundle, "egress"))
               ? "a client that resolves names itself reaches none; one using HTTPS_PROXY goes through the egress "
                 "broker"
               : "to let the command reach a host through pvisor's egress broker: --allow-net HOST");
    size_t shown = 0;
    json_array_foreach(json_object_get(dns, "names"), i, d) {
        const char *n = json_string_value(json_object_get(d, "name"));
        if (!dns_name_is_host(n) || shown++ >= 10)
            continue;
        /* the server wrote every byte of a label but a letter, digit, '-'
         * and '_' as \xHH: escaped again only if the record says otherwise */
        _cleanup_free_ char *e = raw_bytes(n) ? term_escape(n) : NULL;
        printf("\n  %s", e ? e : n);
    }
    if (shown > 10)
        printf("\n  ... and %zu more ('pvisor status --json' has them)", shown - 10);
    if (more > 0)
        printf("\n  ... and names past the %d recorded (%lld queries)", DNS_MAX_NAMES, more);
    printf("\n");
}

static void print_human(const char *stage, const char *state, const char *run, const json_t *bundle,
                        const json_t *earlier, size_t before, const struct lc_stage *st, const struct lc_changeset *cs,
                        bool pending, bool emptied, const char *id, const char *id_why) {
    /* paths the user chose, but a directory's name can hold what a
     * terminal acts on: escaped, as list does */
    _cleanup_free_ char *sp = term_escape(stage);
    printf("Stage:       %s (%s)\n", sp ? sp : "?", state);
    if (cs) {
        _cleanup_free_ char *wp = term_escape(cs->workspace);
        printf("Workspace:   %s\n", wp ? wp : "?");
    }
    printf("Run:         %s\n", run ? run : "-");
    print_ended(bundle);
    print_quota(bundle);
    print_earlier(earlier, before);
    if (pending)
        printf("Note:        an apply was interrupted; 'pvisor apply' completes it\n");
    restore_note(stdout, "Note:        ", stage);
    /* a run that died (its supervisor killed, the machine down): the
     * changes below read like any others, but apply refuses them */
    _cleanup_free_ char *restoring = NULL;
    if (strcmp(state, "interrupted") == 0 && !lc_restore_interrupted(stage, &restoring)) {
        json_t *cps = lc_checkpoints_json(stage);
        size_t n = json_array_size(cps);
        const char *last = n ? json_string_value(json_object_get(json_array_get(cps, n - 1), "name")) : NULL;
        printf("Note:        the stage was never sealed (its run was killed, or the seal could not be written): "
               "writes may be cut short, and it cannot be applied; ");
        if (last)
            printf("'pvisor restore %s --stage %s' puts back its newest checkpoint, which can then be applied "
                   "('pvisor checkpoint --list --stage %s' lists %zu), or 'pvisor drop' discards it\n",
                   last, sp ? sp : "?", sp ? sp : "?", n);
        else
            printf("'pvisor drop' discards it\n");
        json_decref(cps);
    }
    if (emptied)
        printf("\nChanges:     applied; the stage's copy of them was removed ('pvisor drop' after the apply)\n");
    bool applied = strcmp(state, "applied") == 0;
    if (cs && applied && cs->n)
        printf("Note:        applied; what is listed below is not still to apply: it is how the stage's copy differs "
               "from the workspace now (edits made there since the apply, and what apply does not write: "
               "sockets, device nodes, set-id bits)\n");
    if (cs) {
        size_t renamed = 0;
        for (size_t i = 0; i < cs->n; i++)
            renamed += cs->entries[i].renamed_from != NULL;
        printf("\nChanges:     %zu added, %zu deleted, %zu modified, %zu type changed, %zu renamed; "
               "%llu bytes new, %llu bytes replaced or deleted\n",
               cs->count[LC_ADDED], cs->count[LC_DELETED], cs->count[LC_MODIFIED], cs->count[LC_TYPE_CHANGED], renamed,
               (unsigned long long)cs->bytes_new, (unsigned long long)cs->bytes_old);
        for (size_t i = 0; i < cs->n; i++) {
            print_entry(&cs->entries[i]);
            print_xattrs(st, &cs->entries[i], "      ");
        }
        /* what no diff shows: bytecode caches, objects, archives the agent
         * made are used in place of their sources when applied (Python
         * takes a __pycache__ .pyc whose header matches its source's size
         * and mtime) */
        if (cs->n_binary && !applied)
            printf("\nNote:        %zu of the files added or changed %s binary (marked so above): 'pvisor diff' does "
                   "not show %s; "
                   "build outputs and caches (__pycache__, *.o) may not match their sources: rebuild them after "
                   "the apply\n",
                   cs->n_binary, cs->n_binary == 1 ? "is" : "are", cs->n_binary == 1 ? "its content" : "theirs");
        if (cs->warnings) {
            printf("\nWarnings:\n");
            size_t per_kind[LC_W__COUNT] = {0}, total = 0;
            for (size_t i = 0; i < cs->n; i++)
                for (unsigned b = 0; b < LC_W__COUNT; b++)
                    if (cs->entries[i].warnings & (1u << b)) {
                        _cleanup_free_ char *k = NULL, *cp = NULL;
                        /* a name that may pass for another: as code points too */
                        if ((1u << b) == LC_W_LOOKALIKE_NAME)
                            cp = lc_name_codepoints(cs->entries[i].path);
                        printf("  ! %s%s%s%s: %s (%s)\n", dn(cs->entries[i].path, &k), cp ? " [" : "", cp ? cp : "",
                               cp ? "]" : "", lc_warning_message(b), lc_warning_name(b));
                        if ((1u << b) == LC_W_GIT_HIDES)
                            print_index_hides(&cs->entries[i]);
                        per_kind[b]++;
                        total++;
                    }
            if (total > WARN_SUMMARY_AFTER)
                print_warning_summary(cs, per_kind, total);
        }
        if (cs->n_conflicts) {
            printf(applied ? "\nChanged in the workspace since the run (the stage is applied: no apply is left to "
                             "refuse them):\n"
                           : "\nConflicts (apply refuses until they are resolved):\n");
            for (size_t i = 0; i < cs->n; i++)
                if (cs->entries[i].conflict) {
                    _cleanup_free_ char *k = NULL;
                    printf("  x %s: %s\n", dn(cs->entries[i].path, &k), cs->entries[i].conflict);
                }
        }
        /* what binds this review to the apply: an apply --expect of
         * another changeset (the stage written again since) refuses */
        if (id && id[0])
            printf("\nChangeset:   %s (to apply exactly these changes: 'pvisor apply --expect %s')\n", id, id);
        else if (id_why)
            printf("\nChangeset:   unknown: %s\n", id_why);
        else if (pending && strcmp(state, "sealed") == 0)
            printf("\nChangeset:   none while the interrupted apply is pending (it completes what that apply "
                   "recorded; 'pvisor apply --expect' refuses it)\n");
    }
    print_egress(bundle);
    print_dns(bundle);
    printf("\nSafety boundary:\n");
    if (!bundle) {
        printf("  (no Run Bundle found for this stage)\n");
        return;
    }
    printf("  %-18s %-12s %-12s %s\n", "DIMENSION", "REQUESTED", "EFFECTIVE", "MECHANISM");
    const json_t *dims = json_object_get(bundle, "dimensions");
    for (unsigned d = 0; d < _DIM_MAX; d++) {
        const json_t *dim = json_object_get(dims, dimension_name(d));
        printf("  %-18s %-12s %-12s %s\n", dimension_name(d), jstr(dim, "requested"), jstr(dim, "effective"),
               jstr(dim, "mechanism"));
    }
}

int cmd_review(const char *arg, const char *stage_dir, bool as_json) {
    const char *run = NULL;
    if (!stage_dir && arg && lc_cli_arg_is_stage(arg))
        stage_dir = arg;
    else if (!stage_dir)
        run = arg;
    _cleanup_free_ char *stage = NULL, *id = NULL;
    json_t *bundle = NULL;
    int rc = lc_cli_target("status", run, stage_dir, &stage, &id, &bundle);
    if (rc != 0)
        return rc;
    enum stage_state state;
    int r = stage_probe_state(stage, &state);
    if (r < 0) {
        json_decref(bundle);
        return cli_error(PV_EXIT_FAILURE, "status", "cannot read the stage %s: %s", stage,
                         r == -ENOENT ? "it no longer exists" : strerror(-r));
    }
    struct lc_stage *st = NULL;
    struct lc_changeset *cs = NULL;
    /* an applied stage that 'pvisor drop' emptied: its changes are in the
     * workspace, the stage has no copy of them left to show */
    _cleanup_free_ char *upper = path_join(stage, "upper");
    struct stat ust;
    bool emptied = state == STAGE_APPLIED && upper && lstat(upper, &ust) < 0 && errno == ENOENT;
    if (state != STAGE_DROPPED && !emptied) {
        _cleanup_free_ char *stopped = NULL;
        bool stopped_deleted = false;
        r = lc_cli_load_changes(stage, &st, &cs, &stopped, &stopped_deleted);
        if (r < 0) {
            lc_stage_free(st);
            json_decref(bundle);
            _cleanup_free_ char *missing = r == -ENOENT ? lc_cli_missing_reason(stage) : NULL;
            cli_error(PV_EXIT_FAILURE, "status", "cannot read the changes of stage %s: %s", stage,
                      missing                             ? missing
                      : r == -E2BIG                       ? "too many entries"
                      : r == -EBADMSG                     ? "malformed journal"
                      : r == -ELOOP || r == -ENAMETOOLONG ? lc_cli_bound_reason(r, stopped)
                                                          : strerror(-r));
            lc_cli_bound_hint("status", stopped, stopped_deleted, stage);
            lc_cli_unreadable_hint(r, stage, false);
            restore_note(stderr, "pvisor status: ", stage);
            return PV_EXIT_FAILURE;
        }
        lc_changeset_mark_hooks_path(cs);
        lc_changeset_mark_config_includes(cs);
        lc_changeset_mark_home_config(cs, getenv("HOME"));
        lc_changeset_mark_text(cs, st);
    }
    bool pending = lc_apply_pending(stage);
    /* of a sealed stage only: what apply can apply; not while an
     * interrupted apply is pending, whose resume writes what its intent
     * recorded (apply --expect refuses it) */
    char cid[LC_CHANGESET_ID_LEN + 1] = "";
    const char *cid_why = NULL;
    if (cs && state == STAGE_SEALED && !pending)
        (void)changeset_id(st, cs, cid, &cid_why);
    size_t before = 0;
    json_t *earlier = earlier_runs(stage, id, &before);
    if (as_json) {
        json_t *doc = json_pack(
            "{s:s, s:{s:s, s:s, s:o, s:b, s:b, s:o, s:o}, s:o, s:O, s:O, s:O, s:O, s:o, s:o}", "schema",
            "pvisor.review/1", "stage", "path", stage, "state", stage_state_name(state), "workspace",
            cs ? json_string(cs->workspace) : json_null(), "apply_pending", pending, "copy_removed", emptied,
            "checkpoints", lc_checkpoints_json(stage), "quota_refusals", quota_refusals_json(bundle), "run",
            id ? json_string(id) : json_null(), "run_exit",
            json_is_object(json_object_get(bundle, "exit")) ? json_object_get(bundle, "exit") : json_null(),
            "earlier_runs", earlier ? earlier : json_null(), "egress",
            json_is_object(json_object_get(bundle, "egress")) ? json_object_get(bundle, "egress") : json_null(), "dns",
            json_is_object(json_object_get(bundle, "dns")) ? json_object_get(bundle, "dns") : json_null(), "changeset",
            cs ? lc_changeset_to_json(cs) : json_null(), "safety_boundary", boundary_json(bundle));
        json_t *jcs = json_object_get(doc, "changeset");
        if (json_is_object(jcs))
            json_object_set_new(jcs, "id", cid[0] ? json_string(cid) : json_null());
        /* the user xattrs apply writes or removes, by name and value */
        json_t *jch = json_object_get(jcs, "changes");
        for (size_t i = 0; cs && st && i < cs->n && i < json_array_size(jch); i++) {
            int err = 0;
            json_t *xs = lc_entry_xattrs_json(st, &cs->entries[i], &err);
            if (json_array_size(xs) || err < 0)
                json_object_set_new(json_array_get(jch, i), "xattrs", xs ? xs : json_null());
            else
                json_decref(xs);
        }
        json_dumpf(doc, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
        json_decref(doc);
    } else {
        print_human(stage, stage_state_name(state), id, bundle, earlier, before, st, cs, pending, emptied, cid,
                    cid_why);
    }
    json_decref(earlier);
    lc_changeset_free(cs);
    lc_stage_free(st);
    json_decref(bundle);
    return PV_EXIT_OK;
}
