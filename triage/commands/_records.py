"""``triage score``'s output records: written as they come, and never left half-written.

:class:`RecordWriter` writes JSON Lines, or a JSON array closed whatever happens, one record at a
time; a write that fails (a full disk, a closed pipe) cuts a regular file back to its last whole
record (:func:`_cut_back`) and says so.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from triage.errors import TriageError
from triage.signals import held


class RecordWriter:
    """Writes records as they come: JSON Lines, or a JSON array that is closed whatever happens.

    Args:
        fmt: ``jsonl``, ``json`` or ``table`` (records are not written for a table).
        array: for ``json``, write an array element by element (JSON Lines input);
            otherwise the one record is written as an object at :meth:`close`.
        out: where to write (default: standard output).
    """

    def __init__(self, fmt: str, *, array: bool, out: TextIO | None = None) -> None:
        self.fmt = fmt
        self.array = array
        self.out = out or sys.stdout
        self.written = 0
        self.broken: str | None = None  # why the output can no longer be written
        self._single: dict[str, object] | None = None

    def write(self, record: dict[str, object]) -> None:
        """Write one record whole, and flush it.

        Raises:
            TriageError: the output cannot be written (closed, full disk, too large); only whole
                records were left in a regular file, and the message says how many.
        """
        if self.fmt == "table":
            return
        if self.fmt == "json" and not self.array:
            self._single = record  # one plain-text ticket: one object, at the end
            return
        if self.fmt == "jsonl":
            text = json.dumps(record, ensure_ascii=False) + "\n"
        else:
            item = "\n".join("  " + line for line in json.dumps(record, indent=2, ensure_ascii=False).split("\n"))
            text = ("[\n" if self.written == 0 else ",\n") + item
        with held():
            self._emit(text)
            self.written += 1  # inside: a held-back interrupt lands after this line, never before it

    def close(self) -> None:
        """End the output: close the array (``[]`` when empty), or write the single object."""
        if self.broken is not None:
            return
        with held():
            if self.fmt == "json" and self.array:
                self._emit("\n]\n" if self.written else "[]\n")
            elif self._single is not None:
                self._emit(json.dumps(self._single, indent=2, ensure_ascii=False) + "\n")

    def _emit(self, text: str) -> None:
        out = self.out
        if out is None or getattr(out, "closed", False):
            self.broken = "standard output is closed"
            raise TriageError(
                "standard output is closed, so no record can be written",
                exit_code=2,
                hint="run it with its output redirected to a file or a pipe",
            )
        start = _position(out)
        try:
            if start is None:  # a pipe or a terminal
                out.write(text)
                out.flush()
            else:  # a regular file: write the bytes ourselves, so that a short write is seen, not buffered
                import os

                out.flush()
                view = memoryview(text.encode("utf-8"))
                while view:
                    view = view[os.write(out.fileno(), view) :]
        except BrokenPipeError:
            self.broken = "closed pipe"
            raise
        except OSError as exc:
            self.broken = exc.strerror or str(exc)
            kept = _cut_back(out, start)
            whole = f"{self.written} whole record(s)"
            raise TriageError(
                f"the output could not be written ({self.broken}) after {whole}; "
                + ("the output holds exactly those" if kept else "the last record may be cut where it stopped"),
                hint="free some space (or raise the file size limit) and run again",
            ) from None


def _position(out: TextIO) -> int | None:
    """Where the next record starts in a regular file (everything before it is flushed), else None."""
    import os
    import stat

    try:
        fd = out.fileno()
        return os.lseek(fd, 0, os.SEEK_CUR) if stat.S_ISREG(os.fstat(fd).st_mode) else None
    except (OSError, ValueError, AttributeError):
        return None


def _cut_back(out: TextIO, start: int | None) -> bool:
    """After a failed write, leave only whole records: cut a regular file back to ``start``.

    Whatever the stream still buffers goes to /dev/null (so exiting does not try to write it
    again). Returns True when the file was cut back to whole records.
    """
    import os

    try:
        fd = out.fileno()
    except (OSError, ValueError, AttributeError):
        return False
    cut = False
    if start is not None:
        try:
            os.ftruncate(fd, start)
            os.lseek(fd, start, os.SEEK_SET)
            cut = True
        except OSError:
            cut = False
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, fd)
    finally:
        os.close(null)
    return cut
