"""The package's shape, checked: no module imports another in a circle (imports under
``TYPE_CHECKING`` and inside functions count: a reader follows them too). The layers
themselves are import-linter's ``layers`` contract in pyproject.toml, run by scripts/test."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]


def _circles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Every strongly connected group of two or more modules (Tarjan), each sorted."""
    modules = sorted(graph.modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 10 * len(modules) + 100))
    try:
        for m in modules:
            if m not in index:
                visit(m)
    finally:
        sys.setrecursionlimit(limit)
    return found


def test_no_module_imports_another_in_a_circle() -> None:
    graph = grimp.build_graph("triage")
    assert "triage.scoring.prompt_spec" in graph.find_modules_directly_imported_by("triage.scoring.readout"), (
        "the graph must hold TYPE_CHECKING imports"
    )
    assert _circles(graph) == []


def test_the_circle_finder_finds_a_circle(tmp_path: Path, monkeypatch: object) -> None:
    pkg = tmp_path / "circ"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from circ import b\n")
    (pkg / "b.py").write_text("def f():\n    from circ import a\n")
    (pkg / "c.py").write_text("from circ import a\n")
    sys.path.insert(0, str(tmp_path))
    try:
        graph = grimp.build_graph("circ", cache_dir=None)
    finally:
        sys.path.remove(str(tmp_path))
    assert _circles(graph) == [["circ.a", "circ.b"]]


def test_the_layers_contract_covers_every_package_and_ignores_nothing() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = [c for c in config["contracts"] if c["type"] == "layers"]
    assert len(layers) == 1 and not layers[0].get("ignore_imports")
    named = {m.strip() for layer in layers[0]["layers"] for m in layer.split("|")}
    top = {
        f"triage.{p.stem if p.is_file() else p.name}"
        for p in (ROOT / "triage").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())
    }
    assert top - named == set(), "a package or module of triage/ is in no layer"


def test_the_product_never_reaches_the_measuring_layer_and_scoring_never_reaches_learning() -> None:
    """``session`` and ``learning`` sit below ``evaluation``; scoring applies a head and never imports its fitting
    (not even indirectly, nor under TYPE_CHECKING)."""
    graph = grimp.build_graph("triage")
    for low, high in (
        ("triage.session", "triage.evaluation"),
        ("triage.learning", "triage.evaluation"),
        ("triage.learning", "triage.session"),
        ("triage.scoring", "triage.learning"),
    ):
        assert not graph.chain_exists(importer=low, imported=high, as_packages=True), f"{low} reaches {high}"
