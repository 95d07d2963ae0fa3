/* agent_socket.h: the Run-scoped agent socket (PVISOR_AGENT_SOCKET).
 *
 * A unix stream socket owned by the supervisor, projected into the sandbox
 * as the only host socket the command can reach.  Protocol: one request
 * per line (at most AGENT_LINE_MAX bytes, UTF-8, '\n'-terminated), one
 * reply line per request:
 *   ping               -> pong
 *   status             -> {"run_id":...,"workspace":...,"stage":...,"state":"running"}
 *   checkpoint [NAME]  -> error unsupported: ...   (live checkpoints are not
 *                         available in this version; see docs/agent-socket.md)
 *   anything else      -> error unknown request
 * A client that sends an over-long line is disconnected.  At most
 * AGENT_MAX_CLIENTS connections are served at once; requests are handled
 * in a single thread, which never blocks on one client (non-blocking I/O).
 * Untrusted input: the agent controls every byte it sends.
 */
#ifndef PVISOR_AGENT_AGENT_SOCKET_H
#define PVISOR_AGENT_AGENT_SOCKET_H

#define AGENT_LINE_MAX 4096
#define AGENT_MAX_CLIENTS 16

struct agent_socket;

/* Create and bind the socket at path (which must not exist), mode 0600. */
int agent_socket_open(const char *path, const char *status_json, struct agent_socket **ret);
/* Serve it in a background thread. */
int agent_socket_start(struct agent_socket *a);
/* Stop the thread, close everything, unlink the socket.  NULL is fine. */
void agent_socket_close(struct agent_socket *a);
/* Requests served so far (for the Bundle). */
unsigned agent_socket_requests(struct agent_socket *a);

/* The reply to one request line (pure; exposed for unit tests).  Returns a
 * static string or status_json. */
const char *agent_socket_reply(const char *line, const char *status_json);

#endif
