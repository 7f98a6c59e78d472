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


def _labelled(result):  # the first criterion corrected, the second confirmed (as label_marks gives them)
    from triage.store.label_marks import Standing

    first, second = result.criteria[0], result.criteria[1]
    other = next(o.id for o in first.options if o.id != first.choice)
    return (
        first,
        second,
        other,
        {
            first.id: Standing(first.id, other, 1, False, "correction", first.choice),
            second.id: Standing(second.id, second.choice, 1, False, "confirmation", second.choice),
        },
    )


def test_markdown_gives_the_agents_answer_marked_beside_what_the_model_said(tmp_path: Path) -> None:
    result = FakeEngine().score_ticket(TEXT, default_pack())
    first, second, other, labels = _labelled(result)
    md = export_result(result, tmp_path / "r.md", labels=labels).read_text(encoding="utf-8")
    assert "| Criterion | Decision | Agent | Model said | p |" in md
    p = f"{first.probability(first.choice):.1%}"
    assert f"| {first.id} | **{other}** | corrected | {first.choice} | {p} |" in md
    assert f"| {second.id} | **{second.choice}** | confirmed | {second.choice} |" in md
    third = result.criteria[2]
    assert f"| {third.id} | **{third.choice}** | — | {third.choice} |" in md  # no label: the model's
    assert f"**{first.choice}** (model's choice)" in md and f"**{other}** (agent, corrected)" in md


def test_json_adds_the_labels_beside_the_result_and_reads_back(tmp_path: Path) -> None:
    result = FakeEngine().score_ticket(TEXT, default_pack())
    first, second, other, labels = _labelled(result)
    data = json.loads(export_result(result, tmp_path / "r.json", labels=labels).read_text(encoding="utf-8"))
    assert data["labels"] == {
        first.id: {"option": other, "kind": "correction", "shown": first.choice, "model": first.choice, "given_at": 1},
        second.id: {
            "option": second.choice,
            "kind": "confirmation",
            "shown": second.choice,
            "model": second.choice,
            "given_at": 1,
        },
    }
    assert {k: v for k, v in data.items() if k != "labels"} == json.loads(json.dumps(result.to_dict()))
    assert ticket_result_from_dict(data).to_dict() == result.to_dict()  # a labelled export still reads back


def test_the_clipboard_line_and_the_history_cell_show_the_corrected_option() -> None:
    from triage.store.export import marked_summary, summary_line

    result = FakeEngine().score_ticket(TEXT, default_pack())
    first, second, other, labels = _labelled(result)
    line = summary_line(result, labels)
    p1, p2 = f"{first.probability(first.choice):.0%}", f"{second.probability(second.choice):.0%}"
    assert line.startswith(f"[{result.ticket_id}] {first.id}={other} (corrected; model {first.choice} {p1}), ")
    assert f"{second.id}={second.choice} ({p2}, confirmed)" in line
    assert f"{first.id}={first.choice}" not in line
    assert summary_line(result) == result.summary() == summary_line(result, {})
    cell = marked_summary(result.summary().split("] ", 1)[1], labels)
    assert cell.startswith(f"{first.id}={other} ✔ (corrected; model {first.choice} {p1}), ")
    assert f"{second.id}={second.choice} ✔ ({p2}, confirmed)" in cell


def test_criteria_read_in_one_shared_decode_say_shared_never_0_ms() -> None:
    from dataclasses import replace

    from triage.store.export import tail_cost

    result = FakeEngine().score_ticket(TEXT, default_pack())
    carrier = replace(result.criteria[0], readout="shared", tail_ms=8.0, tail_tokens=3)
    rest = [replace(c, readout="shared", tail_ms=0.0, tail_tokens=0) for c in result.criteria[1:]]
    result.criteria = [carrier, *rest]
    assert tail_cost(carrier, result) == f"8 ms, 3 tok, shared by {len(result.criteria)}"
    assert tail_cost(rest[0], result) == "shared"
    md = to_markdown(result)
    assert "0 ms, 0 tok" not in md and f"| {rest[0].id} | **{rest[0].choice}** |" in md
    own = FakeEngine().score_ticket(TEXT, default_pack()).criteria[0]  # read at its own tail: its own figures
    assert tail_cost(own) == f"{own.tail_ms:.0f} ms, {own.tail_tokens} tok"
