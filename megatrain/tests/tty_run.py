#!/usr/bin/env python3
"""tty_run.py ERRFILE CMD...: runs CMD with its stdout on a pseudo-terminal (as a
person's shell gives it) and its stderr into ERRFILE; prints what CMD wrote to the
terminal (CR LF as LF) and exits with CMD's status. The tests of what a terminal shows."""
import os
import pty
import subprocess
import sys

if len(sys.argv) < 3:
    sys.exit("usage: tty_run.py ERRFILE CMD...")
master, slave = pty.openpty()
with open(sys.argv[1], "wb") as err:
    p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=slave, stderr=err)
os.close(slave)
out = bytearray()
while True:
    try:
        chunk = os.read(master, 65536)
    except OSError:  # EIO: the terminal's last writer closed it
        break
    if not chunk:
        break
    out += chunk
rc = p.wait()
sys.stdout.buffer.write(bytes(out).replace(b"\r\n", b"\n"))
sys.exit(rc)
