#!/usr/bin/env python3
"""Start the packaged app's TUI in a pseudo-terminal, then quit it with Ctrl+Q.

    python3 packaging/tui_probe.py [--expect TEXT] -- ENV... APP [ARGS...]

Everything after ``--`` is run as is (smoke.sh passes ``env -i ... triage``).
Proves the frozen app can draw: Textual, its CSS and the app's .tcss are in the
bundle and a terminal session starts and ends cleanly. Exits 0 when the app
drew, quit on Ctrl+Q with status 0 and printed no traceback; prints what it saw
otherwise. Stdlib only: it runs with the system Python, outside any venv.
"""

from __future__ import annotations

import argparse
import os
import pty
import re
import select
import signal
import struct
import sys
import time

try:
    import fcntl
    import termios
except ImportError:  # not POSIX
    raise SystemExit("tui_probe: needs a POSIX system") from None

DRAW_SECONDS = 60.0  # first start of a frozen app unpacks nothing, but imports ~20 MB of code
QUIT_SECONDS = 15.0


def _read(fd: int, until: float, buf: bytearray, pattern: bytes | None = None) -> bool:
    """Read from ``fd`` into ``buf`` until ``pattern`` appears, EOF, or the deadline."""
    while time.monotonic() < until:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: the child closed the terminal
                return False
            if not chunk:
                return False
            buf.extend(chunk)
            if pattern is not None and pattern in buf:
                return True
    return False


def _plain(data: bytes) -> str:
    """The screen's text without escape sequences (good enough to search)."""
    text = data.decode("utf-8", "replace")
    text = re.sub(r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]", "", text)
    return re.sub(r"\x1b[\]P_^][^\x07\x1b]*(\x07|\x1b\\)|\x1b[()#][0-9A-Za-z]|\x1b.", "", text)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--expect", action="append", default=[], help="text that must show on screen (repeatable)")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not cmd:
        parser.error("give the command after --")

    pid, fd = pty.fork()
    if pid == 0:  # the child: the app, on the pty's slave side
        try:
            os.execvp(cmd[0], cmd)
        finally:
            os._exit(127)
    # A real size: Textual lays out for it (80x24 is the smallest we promise to fit).
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 100, 0, 0))
    seen = bytearray()
    # Textual switches to the alternate screen, then draws; wait for a few frames of output.
    drew = _read(fd, time.monotonic() + DRAW_SECONDS, seen, b"\x1b[?1049h")
    _read(fd, time.monotonic() + 4.0, seen)  # let the first screens (and workers) settle
    os.write(fd, b"\x11")  # Ctrl+Q
    _read(fd, time.monotonic() + QUIT_SECONDS, seen)
    status: int | None = None
    for _ in range(50):
        done, code = os.waitpid(pid, os.WNOHANG)
        if done:
            status = os.waitstatus_to_exitcode(code)
            break
        time.sleep(0.1)
    if status is None:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    text = _plain(bytes(seen))
    problems = []
    if not drew:
        problems.append("the app never switched to the full-screen display")
    if status is None:
        problems.append(f"the app did not quit within {QUIT_SECONDS:.0f} s of Ctrl+Q (killed)")
    elif status != 0:
        problems.append(f"the app exited with status {status}")
    if "Traceback" in text:
        problems.append("the app printed a traceback")
    for want in args.expect:
        if want not in text:
            problems.append(f"the screen never showed {want!r}")
    if problems:
        print("tui_probe: FAILED: " + "; ".join(problems), file=sys.stderr)
        print("---- what the terminal showed (escape sequences removed, last 3000 chars) ----", file=sys.stderr)
        print(text[-3000:], file=sys.stderr)
        return 1
    print(f"tui_probe: ok: the app drew ({len(seen):,} bytes of output) and quit on Ctrl+Q with status 0")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
