"""The core never imports Textual; `triage --help` imports neither llama_cpp nor textual; Ray only on `score --ray`;
every module imports, triage/ has no import circle, and the layers import only downwards."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import triage

CORE = [
    "triage.domain.pack",
    "triage.scoring.prompt",
    "triage.scoring.engine",
    "triage.model.native",
    "triage.scoring.readout",
    "triage.lab.debias",
    "triage.domain.result",
    "triage.domain.ticket",
    "triage.scoring.stable_file",
    "triage.scoring.prefix_store",
    "triage.scoring.calibrate",
    "triage.scoring.loader",
    "triage.cli",
    "triage.scoring.tokenizer",
    "triage.render",
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
def test_core_module_does_not_import_textual(module: str) -> None:
    try:
        mods = modules_after(f"import {module}")
    except subprocess.CalledProcessError as exc:
        if "No module named 'llama_cpp'" in exc.stderr:
            pytest.skip("llama_cpp not installed")
        raise
    assert "textual" not in mods


def test_help_is_light() -> None:
    mods = modules_after(
        "import contextlib, io\nfrom triage.cli import build_parser\nwith "
        "contextlib.redirect_stdout(io.StringIO()):\n    build_parser().format_help()"
    )
    assert "llama_cpp" not in mods
    assert "textual" not in mods
    assert "numpy" not in mods
    assert "ray" not in mods and "pyarrow" not in mods


# Ray (an optional extra) is imported only by triage.backlog.ray_score and learn_rows, on `score --ray` / `learn --ray`.
NO_RAY = [
    "triage.cli",
    "triage.commands.score",
    "triage.commands.learn",
    "triage.backlog.learn_rows",
    "triage.backlog.rows",
    "triage.backlog.output",
    "triage.backlog.worker",
    "triage.backlog.progress",
    "triage.tui.app",
]


@pytest.mark.parametrize("module", NO_RAY)
def test_only_the_ray_path_imports_ray(module: str) -> None:
    try:
        mods = modules_after(f"import {module}")
    except subprocess.CalledProcessError as exc:
        if "No module named 'llama_cpp'" in exc.stderr:
            pytest.skip("llama_cpp not installed")
        raise
    assert "ray" not in mods


# -- every module imports, and the import graph of triage/ has no circle -----------------------

ROOT = Path(triage.__file__).parent
OPTIONAL = {"ray", "pyarrow", "sklearn"}  # extras a module may need (the venv has them; a bare install may not)


def all_modules() -> dict[str, Path]:
    """Every module of the package, by dotted name (a package by its ``__init__``)."""
    mods = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def import_graph() -> dict[str, set[str]]:
    """Module → the triage modules it imports, from the source: every import statement anywhere in
    the module (a lazy import inside a function is still a dependency), at module granularity.

    Imports under ``if TYPE_CHECKING:`` are left out: they are never executed, and naming a type
    for a checker is no dependency of the running code."""
    mods = all_modules()

    def type_only(tree: ast.AST) -> set[int]:
        """ids of the import nodes inside ``if TYPE_CHECKING:`` blocks."""
        out: set[int] = set()
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.If)
                and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING"
            ):
                out.update(id(n) for stmt in node.body for n in ast.walk(stmt))
        return out

    def module_of(name: str) -> str | None:
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        deps: set[str | None] = set()
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        skip = type_only(tree)
        for node in ast.walk(tree):
            if id(node) in skip:
                continue
            if isinstance(node, ast.Import):
                deps.update(module_of(a.name) for a in node.names if a.name.split(".")[0] == "triage")
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                if base.split(".")[0] != "triage":
                    continue
                # `from triage.x import y`: y is a module when there is one, else a name in triage.x
                deps.update(f"{base}.{a.name}" if f"{base}.{a.name}" in mods else module_of(base) for a in node.names)
        graph[name] = {d for d in deps if d is not None and d != name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle (``[a, b, ..., a]``), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                return path[path.index(dep) :] + [dep]
            if dep not in state and (found := visit(dep)):
                return found
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (found := visit(start)):
            return found
    return None


def test_every_triage_module_imports() -> None:
    failed = []
    for name in sorted(all_modules()):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            if (exc.name or "").split(".")[0] in OPTIONAL:
                continue  # an optional extra that is not installed here
            failed.append(f"{name}: {exc}")
    assert not failed, "\n".join(failed)
    assert len(all_modules()) > 50  # the walk found the package, not an empty folder


def test_the_cycle_finder_finds_a_circle() -> None:
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set(), "c": {"a", "b"}}) is None


def test_there_is_no_import_circle_in_triage() -> None:
    graph = import_graph()
    assert "triage.backlog.ray_score" in graph["triage.commands.score"]  # the graph is real: a lazy import counts
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " → ".join(cycle or [])


LOWER = ("triage.scoring", "triage.model", "triage.store", "triage.evaluation", "triage.backlog", "triage.bench")


def test_layers_import_only_downwards() -> None:
    graph = import_graph()
    up = [
        f"{m} imports {d}"
        for m, deps in graph.items()
        if m.startswith(LOWER)
        for d in deps
        if d.startswith(("triage.commands", "triage.cli", "triage.tui"))
    ]
    assert not up, "\n".join(sorted(up))


def test_only_the_app_imports_textual() -> None:
    found = []
    for name, path in all_modules().items():
        if name.startswith("triage.tui"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            found += [f"{name} imports {n}" for n in names if n.split(".")[0] == "textual"]
    assert not found, "\n".join(found)
