"""The one guard for files triage writes for the user, and for the history it reads: never an input, never
silently over a file, never a file it did not write, one writer.

Every command that writes a file the user named (``-o``, ``--save-split``, ``--export``,
``pack init -o``, the app's export) asks :func:`check_output` first, and writes through
:func:`write_output` (or :func:`write_via`):

* a path that is one of the command's inputs (the same file, however named: a symlink,
  ``./x``, a hard link; the history included) is refused even with ``--force``: triage never
  overwrites what it reads;
* a SQLite database, or the ``-wal``/``-shm``/``-journal`` file beside one, is refused even
  with ``--force``: an export is never written over a history;
* a folder, a socket or a block device is refused;
* ``-`` is standard output where the command allows it (``label --export -``), else refused
  (it would make a file named ``-``);
* a character device or a FIFO (or a symlink to one) is written through, never replaced;
* a symlink to a file: the file it points at is replaced, the link stays;
* an existing file is replaced only with ``--force`` (the app asks), atomically.

The history's path goes through the same classification (:func:`path_kind`;
:func:`triage.store.history_open.check_history_path`): only a real triage history is used.

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
import stat
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

from triage.errors import InputError

BACKUP_SUFFIX = ".prev"
STDOUT = "-"
SIDE_SUFFIXES = ("-wal", "-shm", "-journal")
_KINDS = {
    "missing": "nothing yet",
    "dangling": "a symlink to nothing",
    "file": "a file",
    "dir": "a folder",
    "chr": "a character device",
    "blk": "a block device",
    "fifo": "a FIFO (named pipe)",
    "sock": "a socket",
    "other": "a special file",
}


def path_kind(path: str | Path) -> str:
    """What is at ``path``, symlinks followed: ``missing``, ``dangling``, ``file``, ``dir``, ``chr``,
    ``blk``, ``fifo``, ``sock`` or ``other``."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "dangling" if os.path.islink(path) else "missing"
    except NotADirectoryError:
        return "missing"
    mode = st.st_mode
    for test, kind in (
        (stat.S_ISREG, "file"),
        (stat.S_ISDIR, "dir"),
        (stat.S_ISCHR, "chr"),
        (stat.S_ISBLK, "blk"),
        (stat.S_ISFIFO, "fifo"),
        (stat.S_ISSOCK, "sock"),
    ):
        if test(mode):
            return kind
    return "other"


def describe_kind(kind: str) -> str:
    """``fifo`` -> ``a FIFO (named pipe)``, for messages."""
    return _KINDS.get(kind, kind)


def is_sqlite(path: str | Path) -> bool:
    """Whether ``path`` is a regular file with SQLite's header, looked at through SQLite only: a plain
    ``open`` of a history this process has open would drop its locks (:mod:`triage.store.sqlite_file`)."""
    from triage.store.sqlite_file import is_sqlite as through_sqlite

    return through_sqlite(path)


def sqlite_side_of(path: Path) -> Path | None:
    """The SQLite database ``path`` is the ``-wal``/``-shm``/``-journal`` file of, or None."""
    for suffix in SIDE_SUFFIXES:
        if path.name.endswith(suffix) and len(path.name) > len(suffix):
            base = path.with_name(path.name[: -len(suffix)])
            if is_sqlite(base) or base.exists():
                return base
    return None


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
    stdout: bool = False,
) -> Path:
    """``path``, once it is safe to write the user's ``what`` there (see the module docstring).

    Args:
        inputs: the files (or folders) the command reads, the history included; the output may be none of them.
        force: the user allows replacing an existing regular file.
        option: the flag that named the path, for the message.
        stdout: ``-`` means standard output (returned as ``Path("-")``; write with :func:`write_output`).

    Raises:
        InputError: the path is an input, a database or its side file, a folder, socket or block
            device, ``-`` where standard output is not allowed, or an existing file without ``force``.
    """
    if str(path) == STDOUT:
        if stdout:
            return Path(STDOUT)
        raise InputError(
            f"{option} - would write a file named '-'; the {what} is written to a file",
            hint=f"name the file, e.g. {option} ./out",
        )
    out = Path(path).expanduser()
    kind = path_kind(out)
    for raw in inputs:
        if raw is None or str(raw) in ("", STDOUT):
            continue
        src = Path(raw).expanduser()
        if _same(out, src) or (kind in ("missing", "dangling") and os.path.realpath(out) == os.path.realpath(src)):
            raise InputError(
                f"{option} {out} is the input {src}: triage never writes over a file it reads",
                hint="write the output to another file",
            )
    if kind in ("dir", "blk", "sock", "other"):
        example = f"e.g. {option} {out / 'out'}" if kind == "dir" else "name a file"
        raise InputError(f"{option} {out} is {describe_kind(kind)}; the {what} is a file", hint=example)
    if kind in ("chr", "fifo"):
        return out  # written through, never replaced
    real = Path(os.path.realpath(out))
    base = sqlite_side_of(real)
    if base is not None:
        raise InputError(
            f"{option} {out} is the {real.name[len(base.name) :]} file of the database {base}: "
            "triage never writes over a database",
            hint="write the output to another file",
        )
    if kind == "file" and is_sqlite(real):
        raise InputError(
            f"{option} {out} is a SQLite database: triage never writes over a database, even with --force",
            hint="write the output to another file",
        )
    if kind == "file" and not force:
        raise InputError(
            f"{out} exists; the {what} would replace it", hint="pass --force to replace it, or pick another name"
        )
    return out


def write_output(path: str | Path, data: str | bytes) -> Path:
    """Write ``data`` (text as UTF-8) where :func:`check_output` allowed it.

    ``-`` is standard output; a character device or FIFO is written through (never replaced);
    a file (or the file a symlink points at) is replaced atomically, the link kept.
    """
    blob = data.encode("utf-8") if isinstance(data, str) else data
    if str(path) == STDOUT:
        sys.stdout.flush()
        sys.stdout.buffer.write(blob)
        sys.stdout.buffer.flush()
        return Path(STDOUT)
    out = Path(path).expanduser()
    if path_kind(out) in ("chr", "fifo"):
        with open(out, "wb") as fh:  # O_TRUNC means nothing to a device or a FIFO
            fh.write(blob)
        return out
    from triage.store.files import write_bytes_atomic

    write_bytes_atomic(Path(os.path.realpath(out)), blob)
    return out


def write_via(path: str | Path, write: Callable[[Path], object]) -> Path:
    """Write with ``write(file)`` (an atomic writer of its own, e.g. a head's) where :func:`check_output` allowed.

    A file (or a symlink's target) is handed to ``write`` as its real path; for a device, a FIFO
    or ``-``, ``write`` writes a temporary file whose bytes are then written through.
    """
    out = Path(path).expanduser() if str(path) != STDOUT else Path(STDOUT)
    if str(path) != STDOUT and path_kind(out) not in ("chr", "fifo"):
        write(Path(os.path.realpath(out)))
        return out
    import tempfile

    with tempfile.TemporaryDirectory(prefix="triage-out-") as tmp:
        part = Path(tmp) / (out.name if str(out) != STDOUT else "out")
        write(part)
        write_output(path, part.read_bytes())
    return out


def check_writable(path: str | Path) -> Path:
    """``path``, once a file can be created in its folder (said before any long work, not after it).

    Raises:
        InputError: the folder cannot be created or written.
    """
    import tempfile

    out = Path(path)
    if str(out) == STDOUT or path_kind(out) in ("chr", "fifo"):
        return out  # written through: nothing is created beside it
    out = Path(os.path.realpath(out))
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
