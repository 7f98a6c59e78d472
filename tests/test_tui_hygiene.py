"""History and export are core: importing them must not import Textual (nor llama.cpp)."""

from __future__ import annotations

import subprocess
import sys

import pytest

CORE = [
    "triage.store.history",
    "triage.store.export",
    "triage.tui.engine_host",
    "triage.tui.counting",
    "triage.tui.options",
    "triage.tui.submission",
]


def modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", code + "\nimport sys; print('\\n'.join(sys.modules))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return set(out.stdout.split())


@pytest.mark.parametrize("module", CORE)
def test_module_does_not_import_textual(module: str) -> None:
    mods = modules_after(f"import {module}")
    assert "textual" not in mods
    assert "llama_cpp" not in mods


def test_cli_help_does_not_import_the_app() -> None:
    mods = modules_after(
        "import contextlib, io\nfrom triage.cli import build_parser\nwith "
        "contextlib.redirect_stdout(io.StringIO()):\n    build_parser().format_help()"
    )
    assert not any(m.startswith("triage.tui") for m in mods)


def test_launching_the_app_module_is_light() -> None:
    """``triage.tui.launch`` is imported by the CLI; Textual loads only when the app is made."""
    mods = modules_after("import triage.tui.launch")
    assert "textual" not in mods and "llama_cpp" not in mods


def test_palette_commands_import_on_their_own() -> None:
    """The palette's commands load without the app first (the app, commands and main screen were a circle)."""
    out = subprocess.run([sys.executable, "-c", "import triage.tui.commands"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize(
    "module",
    [
        "triage/tui/commands.py",
        "triage/tui/screens/main.py",
        "triage/tui/screens/main_model.py",
        "triage/tui/screens/main_scoring.py",
        "triage/tui/screens/main_labels.py",
    ],
)
def test_no_module_below_the_app_imports_it(module: str) -> None:
    """Not even for annotations: what they need of the app is a protocol."""
    import ast
    from pathlib import Path

    tree = ast.parse((Path(__file__).resolve().parents[1] / module).read_text(encoding="utf-8"))
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)} | {
        a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names
    }
    assert "triage.tui.app" not in imported
