/* Unit tests: Run Bundle encoding. */
#include "evidence/bundle.h"
#include "tap.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *get(json_t *b, const char *dim, const char *key) {
    return json_string_value(json_object_get(json_object_get(json_object_get(b, "dimensions"), dim), key));
}

int main(void) {
    char *argv[] = {"run", "--stage", "auto", "--", "make", "test", NULL};
    struct run_options o;
    char *err = NULL;
    ok(policy_parse_run(6, argv, &o, &err) == 0, "parse");
    struct policy p;
    policy_build(&o, &p);
    struct timespec t0 = {.tv_sec = 1764408600, .tv_nsec = 123456789};
    json_t *b = bundle_new("20251129T093000.123Z-0000abcd", &o, &p, "/w", "/w", &t0);
    ok(b != NULL, "bundle_new");
    is_str(json_string_value(json_object_get(b, "schema")), BUNDLE_SCHEMA, "schema id");
    is_str(json_string_value(json_object_get(b, "started_at")), "2025-11-29T09:30:00.123Z", "RFC 3339 start time");
    ok(json_array_size(json_object_get(b, "command")) == 2, "command recorded");
    is_str(get(b, "workspace_writes", "requested"), "enforced", "requested level from policy");
    is_str(get(b, "workspace_writes", "effective"), "unenforced", "effective starts unenforced");
    is_str(get(b, "network", "requested"), "none", "unrequested dimension is 'none'");
    ok(json_object_size(json_object_get(b, "dimensions")) == _DIM_MAX, "every dimension present");

    ok(bundle_set_dimension(b, DIM_WORKSPACE_WRITES, LEVEL_ENFORCED, "fuse overlay", json_pack("{s:i}", "copy_ups", 3),
                            "note") == 0,
       "set dimension");
    is_str(get(b, "workspace_writes", "effective"), "enforced", "effective recorded");
    is_str(get(b, "workspace_writes", "requested"), "enforced", "requested untouched");
    ok(json_integer_value(json_object_get(
           json_object_get(json_object_get(json_object_get(b, "dimensions"), "workspace_writes"), "evidence"),
           "copy_ups")) == 3,
       "evidence recorded");
    ok(bundle_set_dimension(b, (enum dimension)77, LEVEL_ENFORCED, "x", NULL, NULL) == -EINVAL,
       "unknown dimension rejected");

    struct timespec t1 = {.tv_sec = 1764408601, .tv_nsec = 0};
    ok(bundle_set_exit(b, SIGKILL, 137, &t1) == 0, "exit by signal");
    json_t *e = json_object_get(b, "exit");
    ok(json_is_null(json_object_get(e, "status")) && json_integer_value(json_object_get(e, "signal")) == SIGKILL &&
           json_integer_value(json_object_get(e, "pvisor_exit_status")) == 137,
       "signal exit encoded");
    is_str(json_string_value(json_object_get(e, "signal_name")), "KILL", "signal name");
    ok(bundle_set_exit(b, 3 << 8, 3, &t1) == 0 &&
           json_integer_value(json_object_get(json_object_get(b, "exit"), "status")) == 3,
       "normal exit encoded");

    char dir[] = "/tmp/pvisor-bt.XXXXXX";
    ok(mkdtemp(dir) != NULL, "temp dir");
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    ok(bundle_write(dfd, b, true) == 0, "write");
    json_t *back = NULL;
    ok(bundle_read(dfd, &back) == 0 && json_equal(back, b), "round trip is lossless");
    json_decref(back);
    ok(write(openat(dfd, "bundle.json", O_WRONLY | O_TRUNC | O_CLOEXEC), "{\"schema\":\"other/9\"}", 20) == 20 &&
           bundle_read(dfd, &back) == -EPROTO,
       "unknown schema rejected");
    unlinkat(dfd, "bundle.json", 0);
    close(dfd);
    rmdir(dir);
    json_decref(b);
    return tap_done();
}
