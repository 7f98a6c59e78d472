"""The fit store's memory of the files it has read: a head or calibration file is parsed once, and again only
when the file at that path changes.

A file is known by its path and its stat: size, modification time (``st_mtime_ns``), inode and device. The
stat is taken before the file is read, so a file replaced while it is read is read again on the next ask, and
a file stored or replaced by another process (``triage learn``, the app's re-fit) is seen on the next ticket:
a rename over the path always changes the inode. A file modified less than :data:`SETTLE_NS` before it was
read is read again on the next ask (as git treats a "racily clean" file): a file system's clock ticks coarsely,
so a same-size write in place within one tick would keep the stamp. What could not be read is never
remembered: its error comes back from the reader on every ask. What is remembered is shared: callers treat a
fit read here as read-only.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any, TypeVar, cast

T = TypeVar("T")

SETTLE_NS = 2_000_000_000
"""How long before it is read a file must have last changed to be remembered (2 s: coarser than any file
system's modification clock that triage writes on, FAT's 2 s included)."""

Stamp = tuple[int, int, int, int]
"""What says a file is the one that was read: (size, st_mtime_ns, inode, device)."""


def stamp(path: str | Path) -> Stamp | None:
    """The stamp of the regular file at ``path``, or None (absent, not a regular file, or not statable: the
    reader then says why, and nothing is remembered)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return (st.st_size, st.st_mtime_ns, st.st_ino, st.st_dev)


class FileMemo:
    """What ``read(path)`` returned, by path and how it was read (``how``), while the file's stamp stays.

    Holds at most ``limit`` files, the least recently asked one dropped first. Thread-safe; two threads that
    miss at once may both read.
    """

    def __init__(self, limit: int = 64) -> None:
        self.limit = limit
        self._seen: OrderedDict[tuple[str, Hashable], tuple[Stamp, Any]] = OrderedDict()
        self.clock = time.time_ns  # the wall clock file times are compared with
        self._lock = threading.Lock()
        self.reads = 0  # files read (misses), for tests and the curious

    def get(self, path: str | Path, read: Callable[[Path], T], how: Hashable = None) -> T:
        """``read(path)``, or what it returned before for the same file unchanged."""
        path = Path(path)
        key = (os.path.abspath(path), how)
        now = stamp(path)
        if now is not None:
            with self._lock:
                hit = self._seen.get(key)
                if hit is not None and hit[0] == now:
                    self._seen.move_to_end(key)
                    return cast(T, hit[1])
        with self._lock:
            self.reads += 1
        settled = now is not None and now[1] < self.clock() - SETTLE_NS
        value = read(path)  # raises: nothing is remembered
        with self._lock:
            if now is None or not settled:
                self._seen.pop(key, None)
            else:
                self._seen[key] = (now, value)
                self._seen.move_to_end(key)
                while len(self._seen) > self.limit:
                    self._seen.popitem(last=False)
        return value

    def forget(self) -> None:
        """Forget every file (the next ask of each reads it)."""
        with self._lock:
            self._seen.clear()
