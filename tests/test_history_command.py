"""``triage history``: the history's recent tickets with their decisions and labels, filtered, in a table, in
paragraphs on a narrow console, or as JSON Lines; and the label hint that points to it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fake_engine import FakeEngine

from triage.cli import main
from triage.domain.pack import default_pack
from triage.domain.thread import Message
from triage.domain.ticket import make_ticket
from triage.errors import InputError
from triage.store import labels as lab
from triage.store.history import History

TEXTS = {
    "T-1": "My card was charged twice for the March invoice.\nPlease refund one of them today.",
    "T-2": "The parcel says in transit for nine days now. Where is it?",
    "T-3": "How do I change the e-mail address on my account?",
    "T-4": "Refund request: the shoes arrived torn.",
}


def _score_into(h: History, ticket_id: str, text: str | None, messages: list[Message] | None = None) -> int:
    ticket = make_ticket(text, ticket_id, [{"role": m.role, "text": m.text} for m in messages] if messages else None)
    result = FakeEngine().score_ticket(ticket, default_pack())
    row = h.save_ticket(ticket)
    sid = h.start_score(row, model=result.model, pack=result.pack, orderings=result.orderings)
    h.finish_score(sid, result)
    return row


@pytest.fixture
def filled() -> dict[str, str]:
    """A history of four tickets (T-4 the newest), T-1 and T-3 labelled; returns the decisions shown on T-1."""
    with History.open() as h:
        for tid, text in TEXTS.items():
            _score_into(h, tid, text)
        t1 = lab.find_ticket(h, "T-1")
        shown = {c.id: c.choice for c in t1.result.criteria}
        wrong = next(o.id for o in t1.result.criteria[1].options if o.id != t1.result.criteria[1].choice)
        lab.record(
            h, t1, [lab.Answer("queue", shown["queue"]), lab.Answer(t1.result.criteria[1].id, wrong)], origin="cli"
        )
        lab.record(h, lab.find_ticket(h, "T-3"), [lab.Answer("queue", "billing")], origin="cli")
    return {**shown, "_corrected": t1.result.criteria[1].id, "_wrong": wrong}


def _json(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict]:
    assert main(["history", "--json", *args]) == 0
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_json_lists_newest_first_with_decisions_and_labels(filled: dict[str, str], capsys) -> None:
    rows = _json(capsys)
    assert [r["id"] for r in rows] == ["T-4", "T-3", "T-2", "T-1"]
    t1 = rows[-1]
    assert t1["first_line"] == "My card was charged twice for the March invoice."
    assert t1["status"] == "done" and t1["messages"] == 1 and t1["pack"].startswith("support v")
    assert set(t1["decisions"]) == {c.id for c in default_pack().criteria}
    assert {k: v["choice"] for k, v in t1["decisions"].items()} == {
        k: v for k, v in filled.items() if not k.startswith("_")
    }
    assert all(0 < v["probability"] <= 1 and v["source"] == "zero-shot" for v in t1["decisions"].values())
    corrected = filled["_corrected"]
    assert t1["labels"] == {
        "queue": {"option": filled["queue"], "kind": "confirmation", "shown": filled["queue"], "origin": "cli"},
        corrected: {"option": filled["_wrong"], "kind": "correction", "shown": filled[corrected], "origin": "cli"},
    }
    assert rows[0]["labels"] == {} and rows[0]["time"].endswith("+00:00")


@pytest.mark.parametrize(
    ("args", "ids"),
    [
        (["--labelled"], ["T-3", "T-1"]),
        (["--unlabelled"], ["T-4", "T-2"]),
        (["--grep", "refund"], ["T-4", "T-1"]),  # case-insensitive, in the text
        (["--grep", "REFUND march"], ["T-1"]),  # every word must occur
        (["--grep", "t-2"], ["T-2"]),  # the id counts too
        (["--grep", "refund", "--unlabelled"], ["T-4"]),
        (["--limit", "2"], ["T-4", "T-3"]),
        (["--limit", "0"], ["T-4", "T-3", "T-2", "T-1"]),
        (["--grep", "nothing like this"], []),
    ],
)
def test_filters(filled: dict[str, str], capsys, args: list[str], ids: list[str]) -> None:
    assert [r["id"] for r in _json(capsys, *args)] == ids


def test_limit_and_no_match_are_said_on_stderr(filled: dict[str, str], capsys) -> None:
    assert main(["history", "--limit", "2"]) == 0
    assert "the newest 2 shown; --limit 0 lists all" in capsys.readouterr().err
    assert main(["history", "--grep", "zebra"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "no ticket of the 4 in the history matches" in err


def test_a_wide_console_gets_a_table_and_an_80_column_one_paragraphs(
    filled: dict[str, str], capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["history"]) == 0
    wide = capsys.readouterr().out
    assert all(len(line) <= 200 for line in wide.splitlines())
    header = next(line for line in wide.splitlines() if "ticket" in line and "when" in line)
    for col in ("id", "when", "ticket", *(c.id for c in default_pack().criteria)):
        assert col in header, col
    t1 = next(line for line in wide.splitlines() if "T-1" in line)
    corrected = filled["_corrected"]
    # the agent's answer is the decision shown: confirmed, or corrected beside what the model said
    assert f"{filled['queue']} ✓" in t1 and f"{filled['_wrong']} ✎ (model: {filled[corrected]})" in t1
    for width in (80, 40):
        monkeypatch.setenv("COLUMNS", str(width))
        assert main(["history"]) == 0
        shown = capsys.readouterr().out
        assert all(len(line) <= width for line in shown.splitlines()), shown
        assert "when" not in shown  # no table header: one paragraph per ticket
        flat = " ".join(shown.split())
        assert (
            f"labels: queue={filled['queue']} (confirmed), "
            f"{corrected}={filled['_wrong']} (corrected from {filled[corrected]})" in flat
        )
        assert f"decided: queue={filled['queue']} ✓," in flat and "labels: -" in flat  # T-2 and T-4 have none
        assert f"{corrected}={filled['_wrong']} ✎ (model: {filled[corrected]})" in flat
        assert shown.splitlines()[2].startswith("T-4 ")


def test_at_80_columns_every_criterion_s_decision_shows_and_the_first_line_is_cut(
    capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A team pack of two criteria (README's Quick start): the table fits 80 columns by shortening the tickets'
    first lines; every decision is whole, the agent's correction shown beside the model's."""
    from triage.domain.pack import resolve_pack

    pack = resolve_pack(str(Path(__file__).resolve().parents[1] / "examples" / "team.toml"))
    long = "This is the third time I write. I was promised a call back on Monday and nobody called."
    with History.open() as h:
        for i in range(5):
            ticket = make_ticket(f"{long} ({i})", f"T-100{i}")
            result = FakeEngine().score_ticket(ticket, pack)
            sid = h.start_score(h.save_ticket(ticket), model=result.model, pack=result.pack, orderings="none")
            h.finish_score(sid, result)
        t0 = lab.find_ticket(h, "T-1000")
        queue = next(c for c in t0.result.criteria if c.id == "queue")
        other = next(o.id for o in queue.options if o.id != queue.choice)
        lab.record(h, t0, [lab.Answer("queue", other)], origin="cli")
        shown = {
            tid: {c.id: c.choice for c in lab.find_ticket(h, tid).result.criteria}
            for tid in (f"T-100{i}" for i in range(5))
        }
    monkeypatch.setenv("COLUMNS", "80")

    def blocks() -> dict[str, str]:  # each ticket's row of the table, or its paragraph
        assert main(["history"]) == 0
        out = capsys.readouterr().out
        assert all(len(line) <= 80 for line in out.splitlines()), out
        found: dict[str, str] = {}
        for chunk in out.split("\n\n") if "┃" not in out else out.splitlines():
            tid = next((t for t in shown if t in chunk), None)
            if tid is not None:
                found[tid] = " ".join(chunk.split())
        assert set(found) == set(shown), out
        return found

    table = blocks()  # the label's answer is the widest cell: whichever layout fits, every decision is whole
    assert f"{other} ✎ (model: {shown['T-1000']['queue']})" in table["T-1000"]
    for tid, decided in shown.items():
        for criterion, choice in decided.items():
            if (tid, criterion) != ("T-1000", "queue"):
                assert f"{choice} " in table[tid] or f"={choice}" in table[tid], (criterion, table[tid])
    with History.open() as h:
        h.conn.execute("DELETE FROM labels")
        h.conn.commit()
    for tid, row in blocks().items():  # narrower cells: the table, its first lines cut, never a decision
        assert "│" in row and "…" in row, row
        for choice in shown[tid].values():
            assert f" {choice} │" in row, row


def test_a_thread_and_an_unfinished_score_say_so(capsys) -> None:
    with History.open() as h:
        _score_into(h, "TH-1", None, [Message("customer", "My order is late."), Message("agent", "Looking into it.")])
        row = h.save_ticket(make_ticket("Never finished scoring", "T-9"))
        h.cancel_score(h.start_score(row, model={"name": "m"}, pack={"name": "support"}, orderings="none"))
    rows = {r["id"]: r for r in _json(capsys)}
    assert rows["TH-1"]["messages"] == 2 and rows["TH-1"]["first_line"] == "My order is late."
    assert rows["T-9"]["status"] == "cancelled" and rows["T-9"]["decisions"] == {} and rows["T-9"]["pack"] is None
    assert main(["history"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "(thread of 2)" in out and "Never finished scoring (cancelled)" in out


def test_escape_sequences_in_a_ticket_never_reach_the_terminal(capsys) -> None:
    with History.open() as h:
        _score_into(h, "X-\x1b]0;pwned\x07", "Hello \x1b[2J there")
    assert main(["history"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "Hello" in out


def test_an_empty_history_and_bad_arguments(tmp_path: Path, capsys) -> None:
    assert main(["history"]) == 0
    out, err = capsys.readouterr()
    assert out == "" and "holds no tickets yet" in err
    assert main(["history", "--limit", "-1"]) == 2
    assert "--limit -1 must be 0 (all) or more" in capsys.readouterr().err
    missing = tmp_path / "nope.sqlite3"
    assert main(["history", "--history-file", str(missing)]) == 2
    assert "no history file" in capsys.readouterr().err and not missing.exists()  # never created by a typo
    with pytest.raises(SystemExit):
        main(["history", "--labelled", "--unlabelled"])


def test_the_label_hint_names_a_command_that_lists_the_ids(filled: dict[str, str], capsys) -> None:
    with History.open() as h, pytest.raises(InputError) as exc:
        lab.find_ticket(h, "T-404")
    assert "`triage history` lists the tickets the history holds" in (exc.value.hint or "")
    assert main(["label", "T-404", "queue=billing"]) == 2
    assert "triage history" in capsys.readouterr().err
    assert "T-2" in {r["id"] for r in _json(capsys)}  # and it does list them, with their ids
    with History.open() as h:
        _score_into(h, "T-2", "Another text under the same id.")
        with pytest.raises(InputError) as exc:
            lab.find_ticket(h, "T-2")
    assert "`triage history --grep T-2` lists them" in (exc.value.hint or "")
    assert [r["id"] for r in _json(capsys, "--grep", "T-2")] == ["T-2", "T-2"]


def test_a_history_from_a_newer_triage_is_an_error_not_an_empty_list(capsys) -> None:
    import sqlite3

    from triage.store.history_schema import SCHEMA_VERSION
    from triage.store.paths import user_dirs

    path = user_dirs().history_db
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = path.read_bytes()
    assert main(["history"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "the history cannot be read" in err and "newer triage" in err
    assert "no tickets" not in err and path.read_bytes() == before
