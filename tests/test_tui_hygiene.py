"""History and export are core: importing them must not import Textual (nor llama.cpp)."""

from __future__ import annotations

import subprocess
import sys

import pytest

CORE = ["triage.history", "triage.export", "triage.tui.engine_host", "triage.tui.counting", "triage.tui.options", "triage.tui.submission"]


def modules_after(code: str) -> set[str]:
    out = subprocess.run([sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"], capture_output=True, text=True, check=True)
    return set(out.stdout.split())


@pytest.mark.parametrize("module", CORE)
def test_module_does_not_import_textual(module: str) -> None:
    mods = modules_after(f"import {module}")
    assert "textual" not in mods
    assert "llama_cpp" not in mods


def test_cli_help_does_not_import_the_app() -> None:
    mods = modules_after("import contextlib, io\nfrom triage.cli import build_parser\nwith contextlib.redirect_stdout(io.StringIO()):\n    build_parser().format_help()")
    assert not any(m.startswith("triage.tui") for m in mods)


def test_launching_the_app_module_is_light() -> None:
    """``triage.tui.launch`` is imported by the CLI; Textual loads only when the app is made."""
    mods = modules_after("import triage.tui.launch")
    assert "textual" not in mods and "llama_cpp" not in mods
