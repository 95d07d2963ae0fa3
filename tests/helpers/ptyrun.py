#!/usr/bin/env python3
"""Run a command on a new terminal (pty) of its own, type into it, report.

usage: ptyrun.py [STEP...] -- COMMAND [ARG...]

The command is the session leader and foreground process group of a new
pty, 30 rows by 100 columns, in the default (cooked, echoing) mode: as if
typed at an interactive shell.  STEPs run in order:
  wait=TEXT      wait until the output so far contains TEXT (30 s at most;
                 exit 3 if it never does)
  send=TEXT      type TEXT; Python escapes apply (\\x03 is Ctrl-C, \\r Enter)
  size=RxC       resize the terminal to R rows, C columns (SIGWINCH)
  pause=SECONDS  sleep (reading what the command writes meanwhile)
  hold=SECONDS   sleep without reading: the terminal fills up
  kill=SIGNAL    send signal number SIGNAL to the command (-SIGNAL: to its
                 process group)
With PTYRUN_NONBLOCK=1 the terminal is made non-blocking (O_NONBLOCK on
the descriptor the command and its children share), as some programs
leave it.
Then waits for the command (60 s at most; exit 3) and prints everything it
wrote to the terminal, followed by the lines
  ## status N          its exit status (128+N for signal N)
  ## termios same|changed   the terminal's modes against those it started with
  ## size R C          the terminal's size at the end
"""
import fcntl
import os
import pty
import select
import struct
import subprocess
import sys
import termios
import time


def set_size(fd, rows, cols):
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def get_size(fd):
    rows, cols, _, _ = struct.unpack("HHHH", fcntl.ioctl(fd, termios.TIOCGWINSZ, b"\0" * 8))
    return rows, cols


def main(argv):
    if "--" not in argv:
        sys.stderr.write(__doc__)
        return 2
    k = argv.index("--")
    steps, cmd = argv[:k], argv[k + 1:]
    master, slave = pty.openpty()
    set_size(slave, 30, 100)
    before = termios.tcgetattr(slave)

    def child_setup():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)
        if os.environ.get("PTYRUN_NONBLOCK") == "1":
            fcntl.fcntl(0, fcntl.F_SETFL, fcntl.fcntl(0, fcntl.F_GETFL) | os.O_NONBLOCK)

    proc = subprocess.Popen(cmd, stdin=slave, stdout=slave, stderr=slave, preexec_fn=child_setup,
                            close_fds=True)
    out = bytearray()

    def pump(timeout):
        r, _, _ = select.select([master], [], [], timeout)
        if r:
            try:
                data = os.read(master, 65536)
            except OSError:
                return False
            out.extend(data)
            return bool(data)
        return False

    for step in steps:
        name, _, arg = step.partition("=")
        if name == "wait":
            want = arg.encode()
            deadline = time.monotonic() + 30
            while want not in out:
                if time.monotonic() > deadline:
                    sys.stdout.buffer.write(bytes(out))
                    print("\n## timed out waiting for %r" % arg)
                    proc.kill()
                    return 3
                pump(0.1)
        elif name == "send":
            os.write(master, arg.encode().decode("unicode_escape").encode("latin-1"))
        elif name == "size":
            rows, cols = arg.split("x")
            set_size(slave, int(rows), int(cols))
        elif name == "hold":
            time.sleep(float(arg))
        elif name == "kill":
            if arg.startswith("-"):
                os.killpg(proc.pid, int(arg[1:]))
            else:
                os.kill(proc.pid, int(arg))
        elif name == "pause":
            end = time.monotonic() + float(arg)
            while time.monotonic() < end:
                pump(max(0.0, end - time.monotonic()))
        else:
            sys.stderr.write("ptyrun: unknown step %r\n" % step)
            proc.kill()
            return 2
    deadline = time.monotonic() + 60
    while proc.poll() is None:
        if time.monotonic() > deadline:
            proc.kill()
            sys.stdout.buffer.write(bytes(out))
            print("\n## timed out waiting for the command to end")
            return 3
        pump(0.05)
    while pump(0.2):  # what it wrote last
        pass
    st = proc.returncode
    sys.stdout.buffer.write(bytes(out))
    print("\n## status %d" % (st if st >= 0 else 128 - st))
    print("## termios %s" % ("same" if termios.tcgetattr(slave) == before else "changed"))
    print("## size %d %d" % get_size(slave))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
