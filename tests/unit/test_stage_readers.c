/* Unit tests: a stage's readers fed crafted stages (tests/fuzz/ finds
 * them; each case here is one that once failed). */
#include "stage/stage.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void put(const char *dir, const char *name, const char *text) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    if (!f || fputs(text, f) < 0 || fclose(f) != 0)
        abort();
}

static void on_alarm(int sig) {
    (void)sig;
    static const char msg[] = "not ok - timed out (a reader waited on a FIFO)\n";
    (void)!write(1, msg, sizeof msg - 1);
    _exit(1);
}

int main(void) {
    char dir[] = "/tmp/pvisor-test-stage-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    signal(SIGALRM, on_alarm);

    /* A stage whose lock is a FIFO (not made by pvisor): status, review,
     * diff and drop probe its state and hung opening it for reading. */
    put(dir, "version", "pvisor-stage 1\n");
    put(dir, "meta.json", "{\"format\":1,\"workspace\":\"/nonexistent\",\"runs\":[]}\n");
    put(dir, "sealed", "2025-01-01T00:00:00Z\n");
    char p[512];
    snprintf(p, sizeof p, "%s/lock", dir);
    ok(mkfifo(p, 0600) == 0, "a FIFO named lock");
    enum stage_state st = STAGE_CREATED;
    alarm(10);
    int r = stage_probe_state(dir, &st);
    alarm(0);
    ok(r == 0 && st == STAGE_SEALED, "stage_probe_state does not wait on a FIFO lock (r=%d, state %s)", r,
       stage_state_name(st));
    ok(strcmp(stage_done_phrase(dir), "applied or dropped") == 0, "stage_done_phrase neither");

    unlink(p);

    /* A sealed stage reopened for a run, holding hard links named
     * meta.json.tmp and sealed.tmp to files outside it: the run wrote
     * meta.json and the seal's time through them (and a FIFO named
     * meta.json.tmp made it wait for ever). */
    char out[600], link1[600], link2[600];
    snprintf(out, sizeof out, "%s/outside", dir);
    snprintf(link1, sizeof link1, "%s/meta.json.tmp", dir);
    snprintf(link2, sizeof link2, "%s/sealed.tmp", dir);
    put(dir, "outside", "victim\n");
    put(dir, "meta.json", "{\"format\":1,\"workspace\":\"/ws\",\"runs\":[\"r\"]}\n");
    snprintf(p, sizeof p, "%s/upper", dir);
    ok(link(out, link1) == 0 && link(out, link2) == 0 && mkdir(p, 0755) == 0,
       "hard links meta.json.tmp, sealed.tmp to a file outside");
    struct stage *s = NULL;
    alarm(10);
    r = stage_open_for_run(dir, "/ws", "run-2", STAGE_DURABILITY_NONE, &s);
    int rs = r == 0 ? stage_seal(s, false) : r;
    stage_free(s);
    alarm(0);
    ok(r == 0 && rs == 0, "the stage reopens and seals (r=%d, seal %d)", r, rs);
    FILE *f = fopen(out, "r");
    char got[64] = "";
    ok(f && fgets(got, sizeof got, f) && strcmp(got, "victim\n") == 0, "the file outside is unchanged: '%s'", got);
    if (f)
        fclose(f);
    snprintf(p, sizeof p, "%s/sealed", dir);
    struct stat a, b;
    ok(stat(p, &a) == 0 && stat(out, &b) == 0 && a.st_ino != b.st_ino, "'sealed' is a file of its own");
    ok(mkfifo(link1, 0600) == 0, "a FIFO named meta.json.tmp");
    s = NULL;
    alarm(10);
    r = stage_open_for_run(dir, "/ws", "run-3", STAGE_DURABILITY_NONE, &s);
    if (r == 0)
        (void)stage_seal(s, false);
    alarm(0);
    stage_free(s);
    ok(r == 0, "reopening does not wait on it (r=%d)", r);

    /* journal and origin hard-linked to files outside: the run appended
     * its records to the one and truncated and rewrote the other */
    char out2[600];
    snprintf(out2, sizeof out2, "%s/outside2", dir);
    put(dir, "outside2", "precious\n");
    snprintf(p, sizeof p, "%s/origin", dir);
    unlink(p);
    ok(link(out2, p) == 0, "origin: a hard link to a file outside");
    s = NULL;
    r = stage_open_for_run(dir, "/ws", "run-4", STAGE_DURABILITY_NONE, &s);
    stage_free(s);
    f = fopen(out2, "r");
    got[0] = '\0';
    ok(r == -EMLINK && f && fgets(got, sizeof got, f) && strcmp(got, "precious\n") == 0,
       "refused (r=%d), the file outside unchanged: '%s'", r, got);
    if (f)
        fclose(f);
    unlink(p);
    snprintf(p, sizeof p, "%s/journal", dir);
    unlink(p);
    ok(link(out2, p) == 0, "journal: a hard link to a file outside");
    s = NULL;
    r = stage_open_for_run(dir, "/ws", "run-5", STAGE_DURABILITY_NONE, &s);
    stage_free(s);
    enum stage_state st2 = STAGE_CREATED;
    ok(r == -EMLINK && stage_probe_state(dir, &st2) == 0 && st2 == STAGE_SEALED, "refused (r=%d), still sealed", r);

    char rm[600];
    snprintf(rm, sizeof rm, "rm -rf '%s'", dir);
    (void)!system(rm);
    return tap_done();
}
