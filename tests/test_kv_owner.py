"""One module owns KV-state reuse: no other module in triage/ calls the model's state_get, state_set or seq_cp."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "triage"
OWNER = "triage/scoring/prefix_store.py"
CALLS = {"state_get", "state_set", "seq_cp"}


def calls(path: Path) -> list[tuple[str, int]]:
    """(enclosing function, line) of every call of one of :data:`CALLS` as a method in ``path``."""
    found: list[tuple[str, int]] = []

    def walk(node: ast.AST, where: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef) else where
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) and child.func.attr in CALLS:
                found.append((where, child.lineno))
            walk(child, name)

    walk(ast.parse(path.read_text(encoding="utf-8")), "<module>")
    return found


def test_only_the_prefix_store_calls_the_models_kv_state_methods() -> None:
    offenders = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).as_posix()
        if rel in (OWNER, "triage/model/native.py"):  # the store, and where the methods are defined
            continue
        offenders += [f"{rel}:{line} ({fn})" for fn, line in calls(path)]
    assert not offenders, "KV state is the prefix store's (triage/scoring/prefix_store.py): " + ", ".join(offenders)


def test_the_check_finds_a_call(tmp_path: Path) -> None:
    src = tmp_path / "probe.py"
    src.write_text("def f(n):\n    n.native.seq_cp(0, 1)\n", encoding="utf-8")
    assert calls(src) == [("f", 2)]


def test_the_store_does_call_them() -> None:
    got = {fn for fn, _ in calls(ROOT / "scoring" / "prefix_store.py")}
    assert {"hold", "resume", "remember", "share"} <= got
