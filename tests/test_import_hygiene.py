"""The core never imports Textual; `triage --help` imports neither llama_cpp nor textual; Ray only on `score --ray`."""

from __future__ import annotations

import subprocess
import sys

import pytest

CORE = [
    "triage.scoring.pack", "triage.scoring.prompt", "triage.scoring.engine", "triage.model.native", "triage.scoring.readout", "triage.scoring.debias",
    "triage.scoring.result", "triage.scoring.ticket", "triage.scoring.prefix", "triage.scoring.calibrate", "triage.model.loader", "triage.cli",
    "triage.scoring.tokenizer", "triage.render",
]


def modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize("module", CORE)
def test_core_module_does_not_import_textual(module: str) -> None:
    try:
        mods = modules_after(f"import {module}")
    except subprocess.CalledProcessError as exc:
        if "No module named 'llama_cpp'" in exc.stderr:
            pytest.skip("llama_cpp not installed")
        raise
    assert "textual" not in mods


def test_help_is_light() -> None:
    mods = modules_after("import contextlib, io\nfrom triage.cli import build_parser\nwith contextlib.redirect_stdout(io.StringIO()):\n    build_parser().format_help()")
    assert "llama_cpp" not in mods
    assert "textual" not in mods
    assert "numpy" not in mods
    assert "ray" not in mods and "pyarrow" not in mods


# Ray (an optional extra) is imported only by triage.backlog.ray_score, on `triage score --ray`.
NO_RAY = ["triage.cli", "triage.commands.score", "triage.backlog.rows", "triage.backlog.output", "triage.backlog.worker", "triage.backlog.progress", "triage.tui.app"]


@pytest.mark.parametrize("module", NO_RAY)
def test_only_the_ray_path_imports_ray(module: str) -> None:
    try:
        mods = modules_after(f"import {module}")
    except subprocess.CalledProcessError as exc:
        if "No module named 'llama_cpp'" in exc.stderr:
            pytest.skip("llama_cpp not installed")
        raise
    assert "ray" not in mods
