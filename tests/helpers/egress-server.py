#!/usr/bin/python3
"""Host-side servers for tests/integration/test-egress.sh (loopback only).

egress-server.py PORTFILE LOG MODE [DIR]
  Listens on 127.0.0.1 ($EGRESS_SERVER_ADDR instead when set: an address
  of a network namespace of the test's own) on an ephemeral port, written
  to PORTFILE, and
  appends one line per connection to LOG.  MODE:
    files DIR  "GET /NAME" answers the bytes of DIR/NAME (HTTP/1.0)
    echo       reads until the client half-closes, then answers
               "echo:" and the bytes read
Runs until killed.
"""
import os
import socket
import sys
import threading

portfile, log, mode = sys.argv[1:4]
root = sys.argv[4] if len(sys.argv) > 4 else None
lock = threading.Lock()


def note(line):
    with lock, open(log, "a") as f:
        f.write(line + "\n")


def read_head(c):
    data = b""
    while b"\r\n\r\n" not in data:
        x = c.recv(4096)
        if not x:
            break
        data += x
    return data


def serve(c, peer):
    try:
        if mode == "files":
            head = read_head(c)
            line = head.split(b"\r\n", 1)[0].decode("latin-1")
            note("conn " + line)
            parts = line.split(" ")
            name = os.path.basename(parts[1]) if len(parts) > 1 else ""
            path = os.path.join(root, name)
            if name and os.path.isfile(path):
                with open(path, "rb") as f:
                    body = f.read()
                c.sendall(b"HTTP/1.0 200 OK\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
            else:
                c.sendall(b"HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n")
        else:
            note("conn echo")
            data = b""
            while True:
                x = c.recv(65536)
                if not x:
                    break
                data += x
            c.sendall(b"echo:" + data)
    except OSError:
        pass
    finally:
        c.close()


s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((os.environ.get("EGRESS_SERVER_ADDR", "127.0.0.1"), 0))
s.listen(64)
with open(portfile + ".tmp", "w") as f:
    f.write(str(s.getsockname()[1]))
os.rename(portfile + ".tmp", portfile)
while True:
    c, peer = s.accept()
    threading.Thread(target=serve, args=(c, peer), daemon=True).start()
