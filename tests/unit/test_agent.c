/* Unit tests: the agent socket protocol and server. */
#include "agent/agent_socket.h"
#include "tap.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static int ask(const char *path, const char *req, char *out, size_t size) {
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    strncpy(sa.sun_path, path, sizeof sa.sun_path - 1);
    if (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0)
        return -1;
    if (write(s, req, strlen(req)) < 0)
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

int main(void) {
    is_str(agent_socket_reply("ping", "{}"), "pong", "ping -> pong");
    is_str(agent_socket_reply("status", "{\"x\":1}"), "{\"x\":1}", "status -> the status JSON");
    ok(strncmp(agent_socket_reply("checkpoint a", "{}"), "error unsupported", 17) == 0, "checkpoint is refused");
    ok(strncmp(agent_socket_reply("rm -rf /", "{}"), "error unknown", 13) == 0, "unknown request");
    ok(strncmp(agent_socket_reply("pingx", "{}"), "error unknown", 13) == 0, "no prefix matching");

    char dir[] = "/tmp/pvisor-agent.XXXXXX";
    ok(mkdtemp(dir) != NULL, "temp dir");
    char path[128];
    snprintf(path, sizeof path, "%s/a.sock", dir);
    struct agent_socket *a = NULL;
    ok(agent_socket_open(path, "{\"run_id\":\"r\"}", &a) == 0 && agent_socket_start(a) == 0, "open + start");
    ok(agent_socket_open(path, "{}", &(struct agent_socket *){NULL}) < 0, "a second socket on the same path fails");
    char buf[256];
    ok(ask(path, "ping\n", buf, sizeof buf) > 0 && strcmp(buf, "pong\n") == 0, "ping over the socket");
    ok(ask(path, "status\r\n", buf, sizeof buf) > 0 && strcmp(buf, "{\"run_id\":\"r\"}\n") == 0,
       "status, CRLF tolerated");
    ok(ask(path, "ping\nping\n", buf, sizeof buf) > 0 && strncmp(buf, "pong\n", 5) == 0, "pipelined requests");
    ok(agent_socket_requests(a) >= 3, "requests counted (%u)", agent_socket_requests(a));
    agent_socket_close(a);
    ok(access(path, F_OK) != 0, "closing removes the socket");
    rmdir(dir);
    return tap_done();
}
