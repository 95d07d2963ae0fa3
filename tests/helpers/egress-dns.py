#!/usr/bin/python3
"""A DNS server on 127.0.0.1:53 for tests/integration/test-egress.sh, run
in a network namespace of the test's own (with a resolv.conf that names
it bind-mounted over the host's, in a mount namespace of its own).

egress-dns.py READY LOG silent              never answers
egress-dns.py READY LOG answer SUFFIX ADDR [DELAY]
                                            A ADDR (ADDR,ADDR...: several)
                                            for the names under
                                            SUFFIX, no other record;
                                            NXDOMAIN for the other names;
                                            each answer DELAY seconds
                                            after its query (default 0)
Writes READY once it listens, and one line per query to LOG ("NAME
TYPE").  Runs until killed.
"""
import select
import socket
import struct
import sys
import time

ready, log, mode = sys.argv[1:4]
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("127.0.0.1", 53))
with open(ready, "w") as f:
    f.write("listening\n")
delay = float(sys.argv[6]) if mode == "answer" and len(sys.argv) > 6 else 0.0
pending = []  # (when, reply, peer), in order


def reply(data, peer):
    pending.append((time.monotonic() + delay, data, peer))


while True:
    while pending and pending[0][0] <= time.monotonic():
        u.sendto(pending[0][1], pending[0][2])
        pending.pop(0)
    wait = max(0.0, pending[0][0] - time.monotonic()) if pending else None
    if not select.select([u], [], [], wait)[0]:
        continue
    d, peer = u.recvfrom(2048)
    tid = struct.unpack(">H", d[:2])[0]
    i, labels = 12, []
    while d[i]:
        labels.append(d[i + 1:i + 1 + d[i]].decode("latin-1"))
        i += 1 + d[i]
    qtype = struct.unpack(">H", d[i + 1:i + 3])[0]
    question = d[12:i + 5]
    name = ".".join(labels)
    with open(log, "a") as f:
        f.write("%s %d\n" % (name, qtype))
    if mode != "answer":
        continue
    suffix, addr = sys.argv[4:6]
    if not name.endswith("." + suffix):
        reply(struct.pack(">HHHHHH", tid, 0x8183, 1, 0, 0, 0) + question, peer)
    elif qtype == 1:
        addrs = addr.split(",")
        answer = b"".join(b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 60, 4) + socket.inet_aton(a) for a in addrs)
        reply(struct.pack(">HHHHHH", tid, 0x8180, 1, len(addrs), 0, 0) + question + answer, peer)
    else:
        reply(struct.pack(">HHHHHH", tid, 0x8180, 1, 0, 0, 0) + question, peer)
