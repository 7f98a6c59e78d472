"""Export: JSON is exactly the result schema; Markdown is readable and safe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_engine import FakeEngine

from triage.domain.pack import default_pack
from triage.domain.result import ticket_result_from_dict
from triage.store.export import default_name, export_result, format_for, to_markdown

TEXT = "Login fails with error 500 | since the update.\nAngry customer, wants a refund."


def test_json_is_exactly_to_dict(tmp_path: Path) -> None:
    result = FakeEngine().score_ticket(TEXT, default_pack())
    path = export_result(result, tmp_path / "out" / "r.json")
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data == json.loads(json.dumps(result.to_dict()))
    assert data["schema"] == "triage.result/3"
    assert ticket_result_from_dict(data).to_dict() == result.to_dict()
    assert not list(path.parent.glob(".*.tmp"))


def test_markdown_has_every_decision_and_escapes_cells(tmp_path: Path) -> None:
    result = FakeEngine(low_coverage=("sentiment",)).score_ticket(TEXT, default_pack())
    path = export_result(result, tmp_path / "r.md", ticket_text=TEXT)
    md = path.read_text(encoding="utf-8")
    assert md.startswith(f"# Ticket {result.ticket_id}\n")
    for c in result.criteria:
        assert f"| {c.id} | **{c.choice}** | {c.probability(c.choice):.1%} |" in md
        assert f"## {c.id}: " in md
    assert "low coverage" in md
    assert "```text\n" + TEXT + "\n```" in md  # the ticket, fenced as it was
    assert "(stand-in)" in md


def test_markdown_marks_an_incomplete_result() -> None:
    events = list(FakeEngine(delay=0.01).score(TEXT, default_pack(), cancel=lambda: True))
    md = to_markdown(events[-1].result)  # type: ignore[attr-defined]
    assert "Incomplete" in md


@pytest.mark.parametrize(
    ("name", "fmt"), [("a.json", "json"), ("a.md", "markdown"), ("a.MARKDOWN", "markdown"), ("a.txt", "json")]
)
def test_format_from_suffix(name: str, fmt: str) -> None:
    assert format_for(Path(name)) == fmt


def test_default_name_is_safe() -> None:
    result = FakeEngine().score_ticket(TEXT, default_pack())
    result.ticket_id = "../weird id"
    assert default_name(result, "markdown") == "triage-.._weird_id.md"
    assert "/" not in default_name(result, "json")
