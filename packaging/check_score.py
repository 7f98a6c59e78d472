#!/usr/bin/env python3
"""Check the JSON that ``triage score --format json`` printed: packaging/smoke.sh's last word on scoring.

    python3 packaging/check_score.py SCORE.json MODEL.gguf

What it expects comes from the checkout the app was built from, never from a copy
kept here: the result schema is read from ``triage/domain/result.py`` (its
``SCHEMA`` constant, found by parsing the file, since this runs with the system
Python, which has none of triage's dependencies). tests/test_packaging.py runs this
checker against a result the code makes, so a change of schema cannot leave the
smoke test behind again.

Stdlib only. Exits 1 with the reason when a check fails.
"""

from __future__ import annotations

import ast
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULT_PY = ROOT / "triage" / "domain" / "result.py"


def result_schema(source: Path = RESULT_PY) -> str:
    """The value of ``SCHEMA = "..."`` in ``triage/domain/result.py``."""
    for node in ast.parse(source.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "SCHEMA" for t in node.targets):
            if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                return node.value.value
    raise LookupError(f"no SCHEMA string constant in {source}")


def check(result: dict, model: str | None) -> list[str]:
    """What is wrong with ``result`` (empty when nothing is)."""
    problems = []
    want = result_schema()
    if result.get("schema") != want:
        problems.append(f"schema is {result.get('schema')!r}, the code's is {want!r}")
    if result.get("complete") is not True:
        problems.append("the result is not complete")
    if model is not None and os.path.realpath(result.get("model", {}).get("path", "")) != os.path.realpath(model):
        problems.append(f"scored with {result.get('model')}, not {model}")
    if not result.get("criteria"):
        problems.append("no criteria")
    for c in result.get("criteria", []):
        ids = [o["id"] for o in c["options"]]
        total = sum(o["probability"] for o in c["options"])
        if c["choice"] not in ids:
            problems.append(f"{c['id']}: choice {c['choice']!r} is not one of {ids}")
        if abs(total - 1.0) >= 1e-3:
            problems.append(f"{c['id']}: probabilities sum to {total}")
        if not all(0.0 <= o["probability"] <= 1.0 for o in c["options"]):
            problems.append(f"{c['id']}: a probability outside 0..1")
    return problems


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2):
        print("usage: check_score.py SCORE.json [MODEL.gguf]", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as fh:
        result = json.load(fh)
    problems = check(result, argv[1] if len(argv) == 2 else None)
    for p in problems:
        print(f"smoke: score JSON: {p}", file=sys.stderr)
    if problems:
        return 1
    choices = ", ".join(f"{c['id']}={c['choice']}" for c in result["criteria"])
    print(f"smoke: ok: score JSON ({result['schema']}): {choices}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
