/* cmd_status.c: `pvisor status [RUN] [--json]`: one run's Bundle, for a
 * person (the Safety boundary table) or as the Bundle JSON itself.
 * `--review [RUN|STAGE]`: the stage's changes (cmd_review.c). */
#include "cli/cli.h"
#include "util/util.h"
#include "cli/runs.h"
#include "evidence/bundle.h"
#include "policy/policy.h"
#include "util/cleanup.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* o's string field k for display (a Bundle is a file: what a terminal
 * acts on is escaped), "-" when absent */
static const char *str(const json_t *o, const char *k) {
    return cli_esc(json_string_value(json_object_get(o, k)));
}

static void print_exit(const json_t *b) {
    const json_t *e = json_object_get(b, "exit");
    if (!json_is_object(e)) {
        printf("Exit:        -\n");
        return;
    }
    const json_t *sig = json_object_get(e, "signal");
    const char *to = json_is_true(json_object_get(e, "timed_out")) ? " after its --timeout expired" : "";
    if (!json_is_integer(sig) && !json_is_integer(json_object_get(e, "status")))
        printf("Exit:        none: the command never ran (SIG%s sent before it started); pvisor exited %lld\n",
               str(e, "interrupted_by"), (long long)json_integer_value(json_object_get(e, "pvisor_exit_status")));
    else if (json_is_integer(sig))
        printf("Exit:        killed by signal %lld (SIG%s)%s; pvisor exited %lld\n", (long long)json_integer_value(sig),
               str(e, "signal_name"), to, (long long)json_integer_value(json_object_get(e, "pvisor_exit_status")));
    else if (!to[0] && json_is_string(json_object_get(e, "interrupted_by")))
        printf("Exit:        status %lld (on SIG%s sent to pvisor: the run was interrupted)\n",
               (long long)json_integer_value(json_object_get(e, "status")), str(e, "interrupted_by"));
    else
        printf("Exit:        status %lld%s\n", (long long)json_integer_value(json_object_get(e, "status")),
               to[0] ? " (its --timeout expired; pvisor exited 124)" : "");
}

/* s and a newline, with what a terminal would act on (term_char) as \xNN:
 * a Bundle's notes and warnings can quote what the workspace holds (a .git
 * file's gitdir).  '\' is left alone: pvisor already wrote some bytes of
 * names so. */
static void put_line_safe(const char *s) {
    const unsigned char *p = (const unsigned char *)(s ? s : "?");
    size_t n = strlen((const char *)p);
    for (size_t i = 0; i < n;) {
        bool unsafe;
        size_t l = term_char(p + i, n - i, &unsafe);
        for (size_t k = 0; k < l; k++, i++)
            if (unsafe)
                printf("\\x%02x", p[i]);
            else
                putchar(p[i]);
    }
    putchar('\n');
}

/* id: the run's directory's name, which names the run (the Bundle's
 * run_id is a copy of it, in a file) */
static void print_human(const json_t *b, const char *id) {
    const char *bid = json_string_value(json_object_get(b, "run_id"));
    printf("Run:         %s", cli_esc(id));
    if (bid && strcmp(bid, id) != 0)
        printf(" (its Bundle says %s)", cli_esc(bid));
    printf("\n");
    printf("State:       %s\n", runs_display_state(b));
    printf("Command:    ");
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(b, "command"), i, v) {
        (void)v;
        char *a = runs_command_arg_display(json_object_get(b, "command"), json_object_get(b, "command_hex"), i);
        printf(" %s", a ? a : "?");
        free(a);
    }
    printf("\n");
    printf("Workspace:   ");
    put_line_safe(str(b, "workspace")); /* a directory's name: escaped, as list does */
    printf("Started:     %s\n", str(b, "started_at"));
    printf("Ended:       %s\n", str(b, "ended_at"));
    print_exit(b);
    const json_t *ex = json_object_get(b, "executor");
    printf("Executor:    %s (%s)\n", str(ex, "effective"), str(ex, "mechanism"));
    const json_t *st = json_object_get(b, "stage");
    if (json_is_object(st)) {
        printf("Stage:       %s (%s)\n", str(st, "path"), runs_stage_state(b) ? runs_stage_state(b) : "-");
    }
    const json_t *eg = json_object_get(b, "egress"), *conns = json_object_get(eg, "connections");
    if (json_is_object(eg))
        printf("Egress:      %lld allowed, %lld refused, %lld failed through the broker (--allow-net); "
               "'pvisor status --review' lists them\n",
               (long long)json_integer_value(json_object_get(conns, "allowed")),
               (long long)json_integer_value(json_object_get(conns, "refused")),
               (long long)json_integer_value(json_object_get(conns, "failed")));

    printf("\nSafety boundary:\n");
    printf("  %-18s %-12s %-12s %s\n", "DIMENSION", "REQUESTED", "EFFECTIVE", "MECHANISM");
    const json_t *dims = json_object_get(b, "dimensions");
    for (unsigned d = 0; d < _DIM_MAX; d++) {
        const json_t *dim = json_object_get(dims, dimension_name(d));
        printf("  %-18s %-12s %-12s %s\n", dimension_name(d), str(dim, "requested"), str(dim, "effective"),
               str(dim, "mechanism"));
        json_array_foreach(json_object_get(dim, "notes"), i, v) {
            printf("  %-18s   note: ", "");
            put_line_safe(json_string_value(v));
        }
    }
    /* notes and warnings can quote what the workspace holds (a .git file's
     * gitdir), so they are escaped as names are */
    const json_t *w = json_object_get(b, "warnings");
    if (json_array_size(w) > 0) {
        printf("\nWarnings:\n");
        json_array_foreach(w, i, v) {
            printf("  - ");
            put_line_safe(json_string_value(v));
        }
    }
}

int cmd_status(int argc, char **argv) {
    bool as_json = false, review = false;
    const char *query = NULL, *stage_dir = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return cli_print_help(cli_find_command("status"));
        if (strcmp(argv[i], "--json") == 0)
            as_json = true;
        else if (strcmp(argv[i], "--review") == 0)
            review = true;
        else if (strcmp(argv[i], "--stage") == 0) {
            int rc = cli_take_value("status", argc, argv, &i, &stage_dir);
            if (rc)
                return rc;
        } else if (argv[i][0] == '-')
            return cli_usage_error("status", "unknown option '%s'", argv[i]);
        else if (query)
            return cli_usage_error("status", "takes at most one RUN");
        else
            query = argv[i];
    }
    if (stage_dir && !review)
        return cli_usage_error("status", "--stage goes with --review (a stage's changes)");
    if (stage_dir && query)
        return cli_usage_error("status", "give a RUN or --stage DIR, not both");
    if (review) {
#ifdef PVISOR_HAVE_LIFECYCLE
        return cmd_review(query, stage_dir, as_json);
#else
        return cli_error(PV_EXIT_FAILURE, "status", "--review needs a build with the stage overlay");
#endif
    }

    if (query && !*query)
        return cli_usage_error("status", "an empty RUN names nothing");
    _cleanup_free_ char *id = NULL;
    int r = runs_resolve(query, &id);
    /* as typed, but escaped: a newline in it split the message in two,
     * and a terminal acted on an escape sequence */
    _cleanup_free_ char *shown = query ? term_escape(query) : NULL;
    if (query && !shown)
        return cli_error(PV_EXIT_FAILURE, "status", "out of memory");
    if (r == -ENOENT)
        return query
                   ? cli_error(PV_EXIT_FAILURE, "status", "no run matches '%s' (see 'pvisor list')", shown)
                   : cli_error(PV_EXIT_FAILURE, "status", "no runs recorded yet (start one with 'pvisor run -- CMD')");
    if (r == -ENOTUNIQ)
        return cli_error(PV_EXIT_FAILURE, "status", "'%s' matches more than one run; give more of the id", shown);
    if (r < 0)
        return runs_dir_error("status", r);

    json_t *b = NULL;
    r = runs_load_bundle(id, &b);
    _cleanup_free_ char *raw_schema = r == -EPROTO ? runs_bundle_other_schema(id) : NULL;
    _cleanup_free_ char *schema = raw_schema ? term_escape(raw_schema) : NULL; /* the Bundle's, as it is */
    if (raw_schema)
        return cli_error(PV_EXIT_FAILURE, "status",
                         "run %s was recorded by another pvisor: its Bundle is of schema %s, which this one (%s) "
                         "does not read; use the pvisor that recorded it",
                         id, schema ? schema : "?", BUNDLE_SCHEMA);
    if (r < 0)
        return cli_error(PV_EXIT_FAILURE, "status", "run %s has no readable Bundle: %s", id,
                         r == -EPROTO ? "it is damaged (not the JSON of a pvisor Bundle)" : strerror(-r));
    if (as_json) {
        /* The Bundle as recorded, with the derived display state beside it. */
        json_object_set_new(b, "display_state", json_string(runs_display_state(b)));
        json_t *st = json_object_get(b, "stage");
        if (json_is_object(st) && runs_stage_state(b))
            json_object_set_new(st, "current_state", json_string(runs_stage_state(b)));
        json_dumpf(b, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
    } else {
        print_human(b, id);
    }
    json_decref(b);
    return PV_EXIT_OK;
}
