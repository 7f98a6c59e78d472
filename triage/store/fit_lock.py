"""One fit at a time across processes: an advisory lock beside the file a fit will write.

The lock is a small file of triage's own (``<head>.fitting``) holding the fitting process's id; the lock itself
is ``flock`` on it, which the kernel drops when that process ends, however it ends, so a crashed fit never
leaves a stale lock. Where ``flock`` is missing (not POSIX) every fit runs, as before.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from types import TracebackType

from triage import gate

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]


def lock_path(target: Path) -> Path:
    """The lock file for a fit that writes ``target``."""
    return target.with_name(target.name + ".fitting")


class FitLock:
    """The lock on one fit's target; ``with FitLock(path) as held:`` is True when this process holds it."""

    def __init__(self, target: Path) -> None:
        self.path = lock_path(target)
        self._fd: int | None = None

    def acquire(self) -> bool:
        """Take the lock without waiting; True when taken (also when locks are not supported, or the folder
        cannot hold the file: a lock is never a reason not to fit)."""
        if fcntl is None:
            return True
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK, 0o644)
        except OSError:
            return True
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # not triage's file (a FIFO, a device): left alone, no lock
            os.close(fd)
            return True
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        try:
            os.ftruncate(fd, 0)
            os.write(fd, str(os.getpid()).encode("ascii"))
        except OSError:
            pass  # the pid is for people reading the file; the lock holds without it
        self._fd = fd
        return True

    def release(self) -> None:
        """Let the lock go (closing the descriptor drops it)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def holder(self) -> int | None:
        """The process id written by the process holding the lock, when one does and said so."""
        try:
            text = gate.read_text(self.path, "fit-lock").strip()
        except (OSError, ValueError):
            return None
        return int(text) if text.isdigit() else None

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.release()
