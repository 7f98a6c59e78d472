"""Installed models: where they live, what their sidecars say, and whether they still verify.

Layout, in ``user_dirs().models``:

* ``<name>.gguf``: the model file, written atomically by a pull (:mod:`triage.model.modelstore`),
  read-only, never rewritten in place;
* ``<name>.json``: the sidecar (:func:`write_sidecar`), written after the file: the sha256 that
  was verified, the file's size and modification time (``mtime_ns``) when it was hashed, where
  the file came from and when.

The sha256 in a sidecar is trusted only while the file's size and modification time are the ones
recorded: a file changed in place is ``changed`` (not verified, no sha256) until
:func:`verify_installed` hashes it again (``triage model verify``; loading the model does it too).
:func:`inspect_installed` never hashes.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol, TypedDict, Unpack

from triage import __version__, gate
from triage.errors import TriageError
from triage.model.catalog import CatalogEntry
from triage.model.digest import sha256_file
from triage.store.paths import user_dirs


class ChecksumError(TriageError):
    """A fetched file's size or sha256 is not the one it must have."""


class PullProgress(Protocol):
    """How a pull reports what it is doing; the CLI draws it with Rich."""

    def note(self, message: str) -> None:
        """A one-line status message."""

    def start(self, description: str, total: int | None) -> None:
        """A byte-counting task begins."""

    def advance(self, nbytes: int) -> None:
        """``nbytes`` more bytes were processed."""

    def stop(self) -> None:
        """The current task ended (successfully or not)."""


class NullProgress:
    """Reports nothing."""

    def note(self, message: str) -> None:  # noqa: D102
        pass

    def start(self, description: str, total: int | None) -> None:  # noqa: D102
        pass

    def advance(self, nbytes: int) -> None:  # noqa: D102
        pass

    def stop(self) -> None:  # noqa: D102
        pass


class _Known(TypedDict, total=False):
    """What a sidecar told of a model file (:class:`InstalledModel`'s fields of the same names)."""

    size: int | None
    sha256: str | None
    source: str | None
    pulled_at: str | None


@dataclass(frozen=True)
class InstalledModel:
    """The state of one catalog model on disk.

    ``state`` is ``"ok"``, ``"missing"`` (no file), ``"changed"`` (the file's
    modification time is not the one hashed: :func:`verify_installed` decides), or
    a problem that needs a re-pull: ``"no-sidecar"``, ``"bad-sidecar"``,
    ``"size-mismatch"``, ``"hash-mismatch"``, ``"not-a-file"`` (a FIFO, device or folder); ``problem``
    then says what is wrong, in words. ``sha256`` is set only when it is known to be the file's.
    """

    name: str
    path: Path
    sidecar: Path
    state: str
    size: int | None = None
    sha256: str | None = None
    verified: bool = False
    source: str | None = None
    pulled_at: str | None = None
    problem: str | None = None

    @property
    def present(self) -> bool:
        """The model file exists (usable or not)."""
        return self.state != "missing"

    @property
    def ok(self) -> bool:
        """The file exists, matches its sidecar and the catalog, and was verified."""
        return self.state == "ok"


def models_dir() -> Path:
    """Where installed models live (not created here)."""
    return user_dirs().models


def model_file(name: str) -> Path:
    """Path of the installed model file for catalog entry ``name``."""
    return models_dir() / f"{name}.gguf"


def sidecar_file(name: str) -> Path:
    """Path of the sidecar JSON recording how ``name`` was verified."""
    return models_dir() / f"{name}.json"


def pull_command(name: str) -> str:
    """The command that installs (or repairs) catalog model ``name``."""
    return f"triage model pull {name}"


def inspect_installed(entry: CatalogEntry) -> InstalledModel:
    """Check a catalog model's file against its sidecar and the catalog (no hashing).

    The sha256 was verified when the file was pulled; here we only check that
    the sidecar says so and that the size and modification time still match,
    which is instant.
    """
    path, side = model_file(entry.name), sidecar_file(entry.name)
    try:
        st = path.stat()
    except FileNotFoundError:
        return InstalledModel(entry.name, path, side, "missing")
    except NotADirectoryError:
        why = gate.not_a_folder(path) or f"a part of {path.parent} is not a folder"
        raise TriageError(
            f"the models folder {path.parent} cannot exist: {why}",
            hint="set TRIAGE_HOME to a folder (or unset it), or move the file out of the way",
        ) from None
    size = st.st_size

    def repull(state: str, problem: str, **known: Unpack[_Known]) -> InstalledModel:
        """The file in a state only a re-pull repairs: ``problem`` says why; the advice is added."""
        return InstalledModel(entry.name, path, side, state, **known, problem=f"{problem}; re-pull it")

    if not stat.S_ISREG(st.st_mode):  # a FIFO or a device is never opened (it would block or never end)
        what = f"{path} is {gate.file_type(st.st_mode)}, not a model file; move it away, then re-pull it"
        return InstalledModel(entry.name, path, side, "not-a-file", problem=what)

    try:
        record = gate.load_json(side, "model-record")
    except FileNotFoundError:
        return repull("no-sidecar", f"{path} has no verification record ({side.name} is missing)", size=size)
    except OSError as exc:
        return repull("bad-sidecar", f"the verification record {side} is unreadable ({exc.strerror or exc})", size=size)
    except ValueError as exc:  # not UTF-8, not JSON, too large or nested too deep
        return repull("bad-sidecar", f"the verification record {side} is unreadable ({exc})", size=size)
    if not isinstance(record, dict):
        record = {}
    sha = record.get("sha256")
    rec_size = record.get("size")
    if not isinstance(sha, str) or not isinstance(rec_size, int):
        return repull("bad-sidecar", f"the verification record {side} lacks sha256 or size", size=size)
    source, pulled_at = record.get("source"), record.get("pulled_at")
    common = _Known(
        size=size,
        sha256=sha,
        source=source if isinstance(source, str) else None,
        pulled_at=pulled_at if isinstance(pulled_at, str) else None,
    )
    want = entry.size if entry.size is not None else rec_size
    if size != rec_size or size != want:
        why = f"{path} is {size:,} bytes but should be {want:,}; the file changed since it was verified"
        return repull("size-mismatch", why, **common)
    if entry.sha256 is not None and sha != entry.sha256:
        why = f"{path} was verified as sha256 {sha[:12]}…, but the catalog now pins {entry.sha256[:12]}…"
        return repull("hash-mismatch", why, **common)
    verified = bool(record.get("sha256_verified"))
    if not verified:
        return repull("bad-sidecar", f"{side} does not record a verified sha256", **common)
    if record.get("mtime_ns") != st.st_mtime_ns:
        common["sha256"] = None  # what was hashed may not be what is there now
        why = (
            "was modified since it was hashed"
            if "mtime_ns" in record
            else "was verified by an older triage that did not record when"
        )
        return InstalledModel(
            entry.name,
            path,
            side,
            "changed",
            **common,
            problem=f"{path} {why}; `triage model verify {entry.name}` hashes it again",
        )
    return InstalledModel(entry.name, path, side, "ok", **common, verified=True)


class VerifyMismatch(ChecksumError):
    """``triage model verify``: the file's sha256 is not the one it must have."""


def verify_installed(entry: CatalogEntry, progress: PullProgress | None = None) -> InstalledModel:
    """Hash an installed catalog model again and compare it with what it must be.

    The expected sha256 is the catalog's pin, else the one the sidecar recorded at
    pull. A match records the file's size and modification time in the sidecar, so
    the next :func:`inspect_installed` finds it ``ok`` without hashing.

    Returns:
        The model's state after the check (``ok``, or ``missing``).

    Raises:
        VerifyMismatch: the file's sha256 differs (naming both); the sidecar is left as it was.
        TriageError: nothing to compare with (no pin and no readable record).
    """
    current = inspect_installed(entry)
    if current.state == "missing":
        return current
    try:
        record = gate.load_json(current.sidecar, "model-record")
    except (OSError, ValueError):
        record = None
    recorded = record.get("sha256") if isinstance(record, dict) else None
    want = entry.sha256 or (recorded if isinstance(recorded, str) else None)
    if want is None:
        raise TriageError(
            f"cannot verify {entry.name}: the catalog pins no sha256 and {current.sidecar.name} records none",
            hint=f"re-pull it: {pull_command(entry.name)}",
        )
    size = current.path.stat().st_size
    if progress is not None:
        progress.start(f"hashing {entry.name}", size)
    try:
        sha = sha256_file(current.path, progress)
    finally:
        if progress is not None:
            progress.stop()
    if sha != want:
        raise VerifyMismatch(
            f"{entry.name}: the file's sha256 is {sha}, but it must "
            f"be {want} ({current.path} changed since it was pulled)",
            hint=f"re-pull it: {pull_command(entry.name)}",
        )
    against = (record or {}).get("verified_against") if isinstance(record, dict) else None
    write_sidecar(
        entry,
        size,
        sha,
        against or ("catalog" if entry.sha256 else "hub"),
        pulled=record if isinstance(record, dict) else None,
    )
    return inspect_installed(entry)


def write_sidecar(
    entry: CatalogEntry, size: int, sha: str, verified_against: str, *, pulled: dict[str, object] | None = None
) -> None:
    """Record a verified file; ``pulled`` is the earlier record when the file was only hashed again."""
    side = sidecar_file(entry.name)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    record = {
        "name": entry.name,
        "file": model_file(entry.name).name,
        "size": size,
        "mtime_ns": model_file(entry.name).stat().st_mtime_ns,  # the sha256 holds while this and size do
        "sha256": sha,
        "sha256_verified": True,
        "verified_against": verified_against,
        "source": (pulled or {}).get("source", entry.source_description),
        "licence": entry.licence,
        "pulled_at": (pulled or {}).get("pulled_at", now),
        "verified_at": now,
        "triage_version": __version__,
    }
    tmp = side.with_name(f".{side.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
        os.replace(tmp, side)
    finally:
        tmp.unlink(missing_ok=True)
