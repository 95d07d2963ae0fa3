/* cmd_list.c: `pvisor list [--json]`: recorded runs, newest first. */
#include "cli/cli.h"
#include "util/util.h"
#include "cli/runs.h"
#include "util/cleanup.h"

#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

/* The WORKSPACE column's widest (longer ones keep their end). */
#define LIST_WS_MAX 40

static json_t *summary(const char *id, const json_t *b) {
    json_t *cmd = json_object_get(b, "command");
    const json_t *e = json_object_get(b, "exit");
    const json_t *st = json_object_get(b, "stage");
    const char *stage_state = runs_stage_state(b);
    json_t *s =
        json_pack("{s:s, s:s, s:O, s:O, s:O, s:O, s:O, s:o}", "run_id", id, "state", runs_display_state(b),
                  "exit_status", json_is_object(e) ? json_object_get(e, "pvisor_exit_status") : json_null(),
                  "started_at", json_object_get(b, "started_at") ? json_object_get(b, "started_at") : json_null(),
                  "command", cmd ? cmd : json_null(), "workspace",
                  json_object_get(b, "workspace") ? json_object_get(b, "workspace") : json_null(), "stage",
                  json_is_object(st) ? json_object_get(st, "path") : json_null(), "stage_state",
                  stage_state ? json_string(stage_state) : json_null());
    /* an apply of the stage cut short: its workspace is half-written */
    const char *sp = json_is_object(st) ? json_string_value(json_object_get(st, "path")) : NULL;
    if (s && sp && json_object_set_new(s, "apply_pending", json_boolean(pending_apply_intent(sp))) < 0) {
        json_decref(s);
        return NULL;
    }
    /* arguments that are not UTF-8, as the Bundle gives them */
    json_t *hex = json_object_get(b, "command_hex");
    if (s && hex && json_object_set(s, "command_hex", hex) < 0) {
        json_decref(s);
        return NULL;
    }
    return s;
}

/* The command on one line: what a terminal would act on escaped
 * (term_escape), long commands cut at 72 bytes, never inside a character
 * or an escape (the full argv is in `list --json`). */
static void print_command(const json_t *cmd, const json_t *cmd_hex) {
    size_t k, col = 0;
    bool cut = false;
    json_t *v;
    json_array_foreach(cmd, k, v) {
        (void)v;
        char *e = runs_command_arg_display(cmd, cmd_hex, k);
        const unsigned char *a = (const unsigned char *)(e ? e : "");
        if (col < 72)
            putchar(' '), col++;
        else
            cut = true;
        for (size_t i = 0, n = strlen((const char *)a); i < n && !cut;) {
            bool unsafe;
            size_t l = a[i] == '\\' ? 4 : term_char(a + i, n - i, &unsafe); /* an escape: \xNN */
            if (col + l > 72) {
                col = 72;
                cut = true;
                break;
            }
            fwrite(a + i, 1, l, stdout);
            i += l;
            col += l;
        }
        free(e);
    }
    if (cut)
        fputs("...", stdout);
    putchar('\n');
}

int cmd_list(int argc, char **argv) {
    bool as_json = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0)
            return cli_print_help(cli_find_command("list"));
        if (strcmp(argv[i], "--json") == 0)
            as_json = true;
        else
            return cli_usage_error("list", "unknown argument '%s'", argv[i]);
    }
    char **ids = NULL;
    size_t n = 0;
    int r = runs_list_ids(&ids, &n);
    if (r < 0)
        return runs_dir_error("list", r);

    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        json_t *b = NULL;
        json_t *s;
        if (runs_load_bundle(ids[i], &b) < 0)
            s = json_pack("{s:s, s:s}", "run_id", ids[i], "state", runs_starting(ids[i]) ? "starting" : "unreadable");
        else
            s = summary(ids[i], b);
        json_decref(b);
        if (s)
            json_array_append_new(arr, s);
    }
    if (!as_json) {
        /* the workspace, "~/..." under HOME, escaped for the terminal; a
         * long one keeps its end ("...project/sub") */
        size_t n_rows = json_array_size(arr), wsw = strlen("WORKSPACE");
        /* one for the table, not one per row */
        locale_t utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
        char **ws = calloc(n_rows + 1, sizeof *ws);
        const char *home = getenv("HOME");
        size_t hl = home && home[0] == '/' && home[1] ? strlen(home) : 0;
        for (size_t i = 0; ws && i < n_rows; i++) {
            const char *w = json_string_value(json_object_get(json_array_get(arr, i), "workspace"));
            _cleanup_free_ char *t = NULL;
            if (w && hl && path_within(w, home) && strcmp(w, home) != 0) {
                if (asprintf(&t, "~%s", w + hl) < 0)
                    t = NULL;
            } else {
                t = strdup(w ? w : "-");
            }
            /* cut before escaping, so no escape is cut in two; by
             * terminal cells (a CJK name's characters take two each) */
            if (t)
                cli_cut(t, LIST_WS_MAX, 0, utf8);
            ws[i] = t ? term_escape(t) : NULL;
            size_t l = ws[i] ? cli_columns(ws[i], utf8) : 1;
            wsw = l > wsw ? l : wsw;
        }
        printf("%-29s %-12s %-5s %-12s %-24s %-*s %s\n", "RUN", "STATE", "EXIT", "STAGE", "STARTED", (int)wsw,
               "WORKSPACE", "COMMAND");
        for (size_t i = 0; i < n_rows; i++) {
            const json_t *s = json_array_get(arr, i);
            char exitbuf[16] = "-";
            json_t *es = json_object_get(s, "exit_status");
            if (json_is_integer(es))
                snprintf(exitbuf, sizeof exitbuf, "%lld", (long long)json_integer_value(es));
            const char *started = json_string_value(json_object_get(s, "started_at"));
            const char *sst = json_is_true(json_object_get(s, "apply_pending"))
                                  ? "half-applied"
                                  : json_string_value(json_object_get(s, "stage_state"));
            const char *w = ws && ws[i] ? ws[i] : "-";
            printf("%-29s %-12s %-5s %-12s %-24s %s%*s", json_string_value(json_object_get(s, "run_id")),
                   json_string_value(json_object_get(s, "state")), exitbuf, sst ? sst : "-", started ? started : "-", w,
                   (int)(wsw - cli_columns(w, utf8)), ""); /* padded by cells, not bytes */
            print_command(json_object_get(s, "command"), json_object_get(s, "command_hex"));
        }
        for (size_t i = 0; ws && i < n_rows; i++)
            free(ws[i]);
        free(ws);
        if (utf8)
            freelocale(utf8);
    }
    if (as_json) {
        json_dumpf(arr, stdout, JSON_INDENT(2));
        fputc('\n', stdout);
    }
    json_decref(arr);
    runs_free_ids(ids);
    return PV_EXIT_OK;
}
