"""Where the files shipped in ``assets/`` are (installed as the package ``triage.assets``)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path


def asset(name: str) -> Path:
    """Path of a file shipped in ``assets/`` (installed as ``triage.assets``)."""
    path = Path(str(resources.files("triage.assets").joinpath(name)))
    if not path.exists():
        raise FileNotFoundError(f"triage is missing its asset {name!r} (looked in {path.parent}); reinstall triage")
    return path
