"""One scoring lifecycle (issue 39): only triage/session.py combines scoring, the fit policy and the history.

Read by AST, not by eye: no module under triage/serve, triage/tui, triage/commands or triage/backlog imports the
fit policy (``triage.scoring.fit``, ``triage.scoring.fitstore``, or their new home ``triage.learning.fit`` and
``triage.learning.fitstore``), and no module but the session and the history itself calls the history's score
functions (the start, finish, fail and cancel of a score). Front ends reach both through
:class:`triage.session.Session` (``FitRequest`` and ``starter_on`` are re-exported there: the user's asks, read
from flags and config).

A command whose own job is the fit store may read or write it, by name, and only those names (:data:`ALLOWED`):
``triage learn`` stores the head it learned and says what the policy then applies, ``triage calibrate`` stores
the calibration it fitted, ``triage model`` says which head is stored or shipped for a model, and ``triage eval``
asks the policy with every base a calibration may sit on (it measures; it keeps nothing in the history). None of
them scores a ticket into the history.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FRONTS = ("serve", "tui", "commands", "backlog")
POLICY = {"triage.scoring.fit", "triage.scoring.fitstore", "triage.learning.fit", "triage.learning.fitstore"}
SCORE_WRITES = {"start_score", "finish_score", "fail_score", "cancel_score"}
KEEPERS = {"triage/session.py", "triage/store/history.py"}

# module -> the fit-policy names it may import, for its own job with the fit store (see the module docstring)
ALLOWED: dict[str, set[str]] = {
    "triage/commands/learn.py": {"fitstore", "FitRequest", "starter_on", "choose_fits"},
    "triage/commands/calibrate.py": {"fitstore"},
    "triage/commands/model.py": {"auto_head", "shipped_dir"},
    "triage/commands/eval.py": {"FitRequest", "choose_fits"},
}


def policy_imports(tree: ast.AST) -> list[tuple[str, str]]:
    """``(module, name)`` for every import of the fit policy in ``tree`` (``import triage.scoring.fit`` too)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                full = f"{node.module}.{alias.name}"
                if node.module in POLICY:
                    found.append((node.module, alias.name))
                elif full in POLICY:  # from triage.scoring import fit
                    found.append((full, alias.name))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in POLICY or any(alias.name.startswith(m + ".") for m in POLICY):
                    found.append((alias.name, alias.name))
    return found


def score_writes(tree: ast.AST) -> list[str]:
    """The history's score functions called in ``tree`` (``x.start_score(...)``, or named and called later)."""
    return sorted(node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr in SCORE_WRITES)


def modules(under: str = "") -> list[tuple[str, ast.AST]]:
    return [
        (str(p.relative_to(ROOT)), ast.parse(p.read_text(encoding="utf-8")))
        for p in sorted((ROOT / "triage" / under).rglob("*.py"))
    ]


def test_no_front_end_imports_the_fit_policy_beyond_its_own_fit_store_job() -> None:
    wrong = {}
    for front in FRONTS:
        for rel, tree in modules(front):
            names = {name for _, name in policy_imports(tree)} - ALLOWED.get(rel, set())
            if names:
                wrong[rel] = sorted(names)
    assert wrong == {}, "import these through triage.session (or add a fit-store job to ALLOWED, with its reason)"


def test_the_allowed_list_is_no_wider_than_what_is_used() -> None:
    for rel, names in ALLOWED.items():
        used = {name for _, name in policy_imports(ast.parse((ROOT / rel).read_text(encoding="utf-8")))}
        assert names <= used | {"FitRequest", "starter_on"}, (rel, sorted(names - used))


def test_only_the_session_calls_the_historys_score_functions() -> None:
    callers = {rel: score_writes(tree) for rel, tree in modules() if rel not in KEEPERS and score_writes(tree)}
    assert callers == {}


def test_the_finder_sees_each_spelling() -> None:
    code = (
        "from triage.scoring.fit import choose_fits\n"
        "from triage.learning import fitstore\n"
        "import triage.scoring.fitstore\n"
        "from triage.session import FitRequest\n"
        "h.finish_score(1, r)\n"
        "f = h.cancel_score\n"
    )
    tree = ast.parse(code)
    assert sorted(name for _, name in policy_imports(tree)) == ["choose_fits", "fitstore", "triage.scoring.fitstore"]
    assert score_writes(tree) == ["cancel_score", "finish_score"]


def test_every_front_end_scores_through_the_session() -> None:
    for front in ("commands/score.py", "serve/worker.py", "tui/desk.py", "backlog/worker.py", "backlog/ray_score.py"):
        tree = ast.parse((ROOT / "triage" / front).read_text(encoding="utf-8"))
        imported = {
            alias.name
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module == "triage.session"
            for alias in node.names
        }
        assert "Session" in imported, front
