/* Unit tests: the agent socket protocol and server. */
#include "agent/agent_socket.h"
#include "tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static unsigned hook_calls;
static void hook(void *userdata, const char *name, char *reply, size_t size) {
    hook_calls++;
    /* a hook that misbehaves: the server must still send exactly one line */
    snprintf(reply, size, "ok checkpoint %s\nsecond line", name ? name : (const char *)userdata);
}

/* A hook that blocks until the test lets it go. */
static int entered[2], release[2];
static unsigned slow_calls;
static void slow_hook(void *userdata, const char *name, char *reply, size_t size) {
    (void)userdata;
    if (slow_calls++ == 0) { /* only the first waits (a wrong server then fails, not hangs) */
        char c = 'e';
        (void)!write(entered[1], &c, 1);
        (void)!read(release[0], &c, 1);
    }
    snprintf(reply, size, "ok checkpoint %s", name ? name : "-");
}

static int ask_n(const char *path, const char *req, size_t len, char *out, size_t size) {
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strncpy(sa.sun_path, path, sizeof sa.sun_path - 1);
    if (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0)
        return -1;
    if (write(s, req, len) < 0)
        return -1;
    size_t got = 0;
    while (got < size - 1 && (got == 0 || out[got - 1] != '\n')) {
        ssize_t n = read(s, out + got, size - 1 - got);
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    out[got] = '\0';
    close(s);
    return (int)got;
}

static int ask(const char *path, const char *req, char *out, size_t size) {
    return ask_n(path, req, strlen(req), out, size);
}

int main(void) {
    is_str(agent_socket_reply("ping", "{}"), "pong", "ping -> pong");
    is_str(agent_socket_reply("status", "{\"x\":1}"), "{\"x\":1}", "status -> the status JSON");
    ok(strncmp(agent_socket_reply("checkpoint a", "{}"), "error unsupported", 17) == 0,
       "checkpoint without a hook is refused");
    const char *arg = "x";
    ok(agent_request_parse("checkpoint", &arg) == AGENT_REQ_CHECKPOINT && arg == NULL, "checkpoint: no name");
    ok(agent_request_parse("checkpoint c1", &arg) == AGENT_REQ_CHECKPOINT && arg && strcmp(arg, "c1") == 0,
       "checkpoint NAME");
    ok(agent_request_parse("checkpoint ../x", &arg) == AGENT_REQ_CHECKPOINT && strcmp(arg, "../x") == 0,
       "a name is passed on unvalidated (the hook validates it)");
    ok(agent_request_parse("checkpoint a b", &arg) == AGENT_REQ_BAD_ARGS, "checkpoint with two words");
    ok(agent_request_parse("checkpoint ", &arg) == AGENT_REQ_BAD_ARGS, "checkpoint with an empty name");
    ok(agent_request_parse("ping x", &arg) == AGENT_REQ_BAD_ARGS, "ping takes no argument");
    ok(agent_request_parse("checkpointx", &arg) == AGENT_REQ_UNKNOWN, "no prefix matching for checkpoint");
    ok(strncmp(agent_socket_reply("rm -rf /", "{}"), "error unknown", 13) == 0, "unknown request");
    ok(strncmp(agent_socket_reply("pingx", "{}"), "error unknown", 13) == 0, "no prefix matching");

    char dir[] = "/tmp/pvisor-agent.XXXXXX";
    ok(mkdtemp(dir) != NULL, "temp dir");
    char path[128];
    snprintf(path, sizeof path, "%s/a.sock", dir);
    struct agent_socket *a = NULL;
    struct agent_hooks hooks = {.checkpoint = hook, .userdata = "dflt"};
    ok(agent_socket_open(path, "{\"run_id\":\"r\"}", &hooks, &a) == 0 && agent_socket_start(a) == 0, "open + start");
    ok(agent_socket_open(path, "{}", NULL, &(struct agent_socket *){NULL}) < 0,
       "a second socket on the same path fails");
    char buf[256];
    ok(ask(path, "ping\n", buf, sizeof buf) > 0 && strcmp(buf, "pong\n") == 0, "ping over the socket");
    ok(ask(path, "status\r\n", buf, sizeof buf) > 0 && strcmp(buf, "{\"run_id\":\"r\"}\n") == 0,
       "status, CRLF tolerated");
    ok(ask(path, "ping\nping\n", buf, sizeof buf) > 0 && strncmp(buf, "pong\n", 5) == 0, "pipelined requests");
    ok(ask(path, "checkpoint c1\n", buf, sizeof buf) > 0 && strcmp(buf, "ok checkpoint c1\n") == 0,
       "checkpoint NAME goes to the hook; one reply line");
    ok(ask(path, "checkpoint\n", buf, sizeof buf) > 0 && strcmp(buf, "ok checkpoint dflt\n") == 0,
       "checkpoint without a name: the hook picks it");
    ok(ask(path, "checkpoint a b\n", buf, sizeof buf) > 0 && strncmp(buf, "error bad arguments", 19) == 0 &&
           hook_calls == 2,
       "checkpoint with bad arguments never reaches the hook");
    unsigned calls = hook_calls;
    ok(ask_n(path, "checkpoint good\0/../x\n", 22, buf, sizeof buf) > 0 && strncmp(buf, "error unknown", 13) == 0 &&
           hook_calls == calls,
       "a line with a NUL in it is refused, never cut short and acted on");
    ok(agent_socket_requests(a) >= 6, "requests counted (%u)", agent_socket_requests(a));
    agent_socket_stop(a);
    agent_socket_stop(a);
    ok(access(path, F_OK) == 0, "stop leaves the socket bound until close");
    agent_socket_close(a);
    ok(access(path, F_OK) != 0, "closing removes the socket");

    /* A status longer than a request line arrives whole. */
    char *longjson = malloc(6000);
    ok(longjson != NULL, "alloc");
    memset(longjson, 'w', 5999);
    memcpy(longjson, "{\"workspace\":\"", 14);
    memcpy(longjson + 5996, "\"}", 3);
    char *longbuf = malloc(7000);
    ok(agent_socket_open(path, longjson, NULL, &a) == 0 && agent_socket_start(a) == 0 &&
           ask(path, "status\n", longbuf, 7000) == 5999 && memcmp(longbuf, longjson, 5998) == 0 &&
           longbuf[5998] == '\n',
       "a status of 5998 bytes is sent whole, then a newline");
    agent_socket_close(a);
    free(longjson);
    free(longbuf);

    /* A stop asked for while a request is served: the requests the client
     * sent after it are not served (the run's end must not wait for them). */
    ok(pipe(entered) == 0 && pipe(release) == 0, "pipes");
    struct agent_hooks slow = {.checkpoint = slow_hook};
    ok(agent_socket_open(path, "{}", &slow, &a) == 0 && agent_socket_start(a) == 0, "open + start (slow hook)");
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) < sizeof sa.sun_path)
        memcpy(sa.sun_path, path, strlen(path) + 1);
    const char *three = "checkpoint a\ncheckpoint b\ncheckpoint c\n";
    ok(connect(s, (struct sockaddr *)&sa, sizeof sa) == 0 && write(s, three, strlen(three)) == (ssize_t)strlen(three),
       "three requests in one write");
    char c;
    ok(read(entered[0], &c, 1) == 1, "the first is being served");
    agent_socket_request_stop(a);
    ok(write(release[1], "r", 1) == 1, "let it finish");
    agent_socket_stop(a);
    ok(slow_calls == 1, "after the stop request, no further request reached the hook (%u calls)", slow_calls);
    ssize_t n = read(s, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = '\0';
    ok(strcmp(buf, "ok checkpoint a\n") == 0, "only the request under way was answered");
    close(s);
    agent_socket_close(a);
    rmdir(dir);
    return tap_done();
}
