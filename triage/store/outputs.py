"""The one guard for files triage writes for the user: never an input, never silently over a file, one writer.

Every command that writes a file the user named (``-o``, ``--save-split``,
``--export``, the app's export) asks :func:`check_output` first:

* a path that is one of the command's inputs (the same file, however named:
  a symlink, ``./x``, a hard link) is refused: triage never overwrites what it reads;
* an existing file is refused unless the user said ``--force`` (the app asks);
* a folder where a file is wanted is refused.

:func:`replace_keeping_backup` replaces a stored artifact (a learned head, a
calibration) atomically and keeps the one it replaced as ``NAME.prev``, so a
worse fit never destroys a better one. :class:`OutputLock` makes one writer per
output: a second ``score --ray -o same.jsonl`` is refused while the first runs.

This module is core: it must not import Textual.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from triage.errors import InputError

BACKUP_SUFFIX = ".prev"


def _same(a: Path, b: Path) -> bool:
    try:
        return a.exists() and b.exists() and os.path.samefile(a, b)
    except OSError:
        return False


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.resolve().relative_to(folder.resolve())
        return True
    except (ValueError, OSError):
        return False


def check_output(
    path: str | Path,
    *,
    inputs: Iterable[str | Path | None] = (),
    force: bool = False,
    what: str = "output",
    option: str = "-o",
) -> Path:
    """``path``, once it is safe to write the user's ``what`` there.

    Args:
        inputs: the files (or folders) the command reads; the output may be none of them.
        force: the user allows replacing an existing file.
        option: the flag that named the path, for the message.

    Raises:
        InputError: the path is an input, a folder, or an existing file without ``force``.
    """
    out = Path(path).expanduser()
    for raw in inputs:
        if raw is None or str(raw) in ("", "-"):
            continue
        src = Path(raw).expanduser()
        if _same(out, src) or (not out.exists() and out.resolve() == src.resolve()):
            raise InputError(
                f"{option} {out} is the input {src}: triage never writes over a file it reads",
                hint="write the output to another file",
            )
    if out.is_dir():
        raise InputError(f"{option} {out} is a folder; the {what} is a file", hint=f"e.g. {option} {out / 'out'}")
    if out.exists() and not force:
        raise InputError(
            f"{out} exists; the {what} would replace it", hint="pass --force to replace it, or pick another name"
        )
    return out


def check_writable(path: str | Path) -> Path:
    """``path``, once a file can be created in its folder (said before any long work, not after it).

    Raises:
        InputError: the folder cannot be created or written.
    """
    import tempfile

    out = Path(path)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out.parent, prefix=f".{out.name}.", suffix=".probe"):
            pass
    except OSError as exc:
        raise InputError(
            f"cannot write {out}: {exc.strerror or exc}", hint="pick a folder you may write to, or free some space"
        ) from None
    return out


def check_not_inside(path: str | Path, folder: str | Path, *, option: str = "-o") -> None:
    """Refuse an output inside a folder the command reads as input (it would read its own output next time).

    Raises:
        InputError: ``path`` lies inside ``folder``.
    """
    import fnmatch

    src = str(folder)
    matches = any(ch in src for ch in "*?[") and fnmatch.fnmatch(str(Path(path).resolve()), str(Path(src).absolute()))
    if matches or (Path(folder).is_dir() and _inside(Path(path), Path(folder))):
        raise InputError(
            f"{option} {path} is inside the input {folder}: a later run would read its own output as tickets",
            hint="write the output outside the input folder",
        )


def replace_keeping_backup(tmp: Path, path: Path) -> Path | None:
    """Move the finished ``tmp`` over ``path`` atomically; keep the file it replaced as ``path.prev``.

    Returns the backup's path, or None when nothing was replaced.
    """
    backup = None
    if path.exists():
        backup = path.with_name(path.name + BACKUP_SUFFIX)
        shutil.copy2(path, backup)  # a copy, so ``path`` exists at every moment
    os.replace(tmp, path)
    return backup


class OutputLock:
    """An exclusive, non-blocking lock on an output (a ``.NAME.lock`` file beside it), held while writing.

    The lock file stays after the run: removing it would let a process that opened it
    just before, and a new one, both believe they hold the lock.

    Raises (on enter):
        InputError: another process holds it.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.lock_path = self.path.with_name(f".{self.path.name}.lock")
        self._fd: int | None = None

    def __enter__(self) -> OutputLock:
        import fcntl

        self.lock_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                raise InputError(
                    f"another triage is writing {self.path} now",
                    hint="wait for it to finish (or stop it), or write to another file",
                ) from None
            raise
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd
        return self

    def __exit__(self, *exc: object) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing releases the lock
            self._fd = None
