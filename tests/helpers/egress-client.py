#!/usr/bin/python3
"""The command's side of tests/integration/test-egress.sh (runs inside
`pvisor run --safe`; the proxy is $HTTPS_PROXY, as clients read it).

egress-client.py get AUTHORITY NAME   CONNECT AUTHORITY, then GET /NAME:
                                      prints the CONNECT status code and
                                      the body's SHA-256 (or "-")
egress-client.py echo AUTHORITY TEXT  CONNECT, send TEXT, half-close, print
                                      what comes back
egress-client.py raw TEXT             send TEXT (\\r\\n escapes) to the
                                      proxy, print its status line
egress-client.py direct HOST PORT     a direct TCP connect: "connected" or
                                      the errno's name
egress-client.py others N             CONNECT to N names no rule admits
                                      (decoyI.example:443), one at a
                                      time: prints how many got a 403
"""
import errno
import hashlib
import os
import socket
import sys


def proxy():
    url = os.environ.get("HTTPS_PROXY", "")
    hostport = url.split("://", 1)[-1].rstrip("/")
    host, port = hostport.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=20)


def read_all(s):
    data = b""
    while True:
        x = s.recv(65536)
        if not x:
            return data
        data += x


def connect(authority):
    s = proxy()
    s.sendall(b"CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n" % (authority.encode(), authority.encode()))
    head = b""
    while b"\r\n\r\n" not in head:
        x = s.recv(1)
        if not x:
            break
        head += x
    return s, head.split(b" ")[1].decode() if b" " in head else "none"


cmd = sys.argv[1]
if cmd == "get":
    s, code = connect(sys.argv[2])
    if code != "200":
        print(code, "-")
        sys.exit(0)
    s.sendall(b"GET /%s HTTP/1.0\r\n\r\n" % sys.argv[3].encode())
    resp = read_all(s)
    body = resp.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in resp else b""
    print(code, hashlib.sha256(body).hexdigest())
elif cmd == "echo":
    s, code = connect(sys.argv[2])
    if code == "200":
        s.sendall(sys.argv[3].encode())
        s.shutdown(socket.SHUT_WR)
        print(code, read_all(s).decode())
    else:
        print(code)
elif cmd == "raw":
    s = proxy()
    s.sendall(sys.argv[2].encode().decode("unicode_escape").encode("latin-1"))
    if len(sys.argv) > 3:  # a file made once the request is sent
        open(sys.argv[3], "w").close()
    print(read_all(s).split(b"\r\n", 1)[0].decode())
elif cmd == "others":
    n = 0
    for i in range(int(sys.argv[2])):
        s, code = connect("decoy%d.example:443" % i)
        s.close()
        n += code == "403"
    print(n)
elif cmd == "direct":
    try:
        socket.create_connection((sys.argv[2], int(sys.argv[3])), timeout=5).close()
        print("connected")
    except OSError as e:
        print(errno.errorcode.get(e.errno, str(e.errno)) if e.errno else type(e).__name__)
