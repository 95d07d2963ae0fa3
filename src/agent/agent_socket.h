/* agent_socket.h: the Run-scoped agent socket (PVISOR_AGENT_SOCKET).
 *
 * A unix stream socket owned by the supervisor, projected into the sandbox
 * as the only host socket the command can reach.  Protocol: one request
 * per line (at most AGENT_LINE_MAX bytes, UTF-8, '\n'-terminated), one
 * reply line per request:
 *   ping               -> pong
 *   status             -> {"run_id":...,"workspace":...,"stage":...,"state":"running"}
 *   checkpoint [NAME]  -> whatever the checkpoint hook replies ("ok checkpoint
 *                         NAME" or "error ..."); without a hook: error unsupported
 *   anything else      -> error unknown request
 * A client that sends an over-long line is disconnected.  Replies wait in
 * a bounded buffer per client: while it is full the client is not read
 * from (never dropped for reading its replies late).  At most
 * AGENT_MAX_CLIENTS connections are served at once; requests are handled
 * in a single thread, which never blocks on one client (non-blocking I/O);
 * a checkpoint request occupies that thread until the hook returns, so
 * other clients wait meanwhile.
 * Untrusted input: the agent controls every byte it sends; the hook gets a
 * NAME that is one non-empty word (no spaces) and must validate it.
 */
#ifndef PVISOR_AGENT_AGENT_SOCKET_H
#define PVISOR_AGENT_AGENT_SOCKET_H

#define AGENT_LINE_MAX 4096
#define AGENT_MAX_CLIENTS 16

#include <stddef.h>

struct agent_socket;

/* What the supervisor does for requests beyond the pure ones.  Called on
 * the socket's thread. */
struct agent_hooks {
    /* checkpoint [NAME]: name is NULL or one word of at most
     * AGENT_LINE_MAX bytes, unvalidated.  Write one reply line (no newline)
     * into reply. */
    void (*checkpoint)(void *userdata, const char *name, char *reply, size_t size);
    void *userdata;
};

/* Create and bind the socket at path (which must not exist), mode 0600.
 * hooks (may be NULL) is copied. */
int agent_socket_open(const char *path, const char *status_json, const struct agent_hooks *hooks,
                      struct agent_socket **ret);
/* Serve it in a background thread. */
int agent_socket_start(struct agent_socket *a);
/* Ask the thread to stop, without waiting: no request it has not started
 * serving will be (requests already read included).  NULL is fine. */
void agent_socket_request_stop(struct agent_socket *a);
/* Stop and join the thread: once it returns, no request is being served or
 * will be (a hook call in progress completes first).  Idempotent; NULL is
 * fine.  The socket stays bound until agent_socket_close. */
void agent_socket_stop(struct agent_socket *a);
/* Stop the thread, close everything, unlink the socket.  NULL is fine. */
void agent_socket_close(struct agent_socket *a);
/* Requests served so far (for the Bundle). */
unsigned agent_socket_requests(struct agent_socket *a);

enum agent_request {
    AGENT_REQ_PING,
    AGENT_REQ_STATUS,
    AGENT_REQ_CHECKPOINT, /* *ret_arg: NAME or NULL */
    AGENT_REQ_BAD_ARGS,   /* a known request with arguments it does not take */
    AGENT_REQ_UNKNOWN,
};
/* Classify one request line (pure; exposed for unit tests).  *ret_arg
 * points into line. */
enum agent_request agent_request_parse(const char *line, const char **ret_arg);

/* The reply to one request line when no hook handles it (pure; exposed for
 * unit tests).  Returns a static string or status_json. */
const char *agent_socket_reply(const char *line, const char *status_json);

#endif
