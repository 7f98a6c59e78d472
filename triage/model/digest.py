"""The sha256 of a file: the one helper that pull, verify, resolve and the engine share."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Protocol

from triage import gate

CHUNK = 1 << 20  # 1 MiB: big enough to hash at disk speed, small enough to stay responsive


class Advance(Protocol):
    """Told how many bytes were read (a pull's progress bar)."""

    def advance(self, n: int) -> None: ...


def sha256_file(path: str | Path, progress: Advance | None = None) -> str:
    """sha256 of a file, read in 1 MiB chunks.

    Args:
        path: the file.
        progress: told about every chunk (optional).

    Returns:
        The lower-case hex digest.
    """
    h = hashlib.sha256()
    with gate.open_binary(path, "model") as fh:  # a FIFO or a device is refused, never waited on
        while chunk := fh.read(CHUNK):
            h.update(chunk)
            if progress is not None:
                progress.advance(len(chunk))
    return h.hexdigest()
