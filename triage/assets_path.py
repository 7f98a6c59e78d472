"""Where the files shipped in ``assets/`` are (installed as the package ``triage.assets``)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from triage.errors import TriageError


class MissingAsset(TriageError, FileNotFoundError):
    """A file triage ships is not where the install put it: a broken install, said as one line."""

    def __init__(self, message: str) -> None:
        TriageError.__init__(self, message, hint="reinstall triage")


def asset(name: str) -> Path:
    """Path of a file shipped in ``assets/`` (installed as ``triage.assets``)."""
    path = Path(str(resources.files("triage.assets").joinpath(name)))
    if not path.exists():
        raise MissingAsset(f"triage is missing its asset {name!r} (looked in {path.parent})")
    return path
