"""Issue 42: labels given under two packs that share a criterion id are two labels, counted and exported apart.

A ticket labelled ``queue`` under the built-in pack and ``queue`` under a team's pack was one (ticket, criterion)
to ``stats`` (the built-in pack's label was missing) and one row of ``label --export`` (both packs' answers
merged, no pack named). Now ``stats`` counts each pack's label, the export writes one row per (ticket, pack) with
a ``pack`` field, and ``learn FILE`` / ``learn --history`` read the rows of the pack they learn.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fake_engine import FakeEngine

from triage.domain.pack import default_pack, load_pack
from triage.domain.ticket import make_ticket
from triage.learning.labelled import read_labelled
from triage.store import features as feat
from triage.store.history import History
from triage.store.training import training_rows

TEAM = """
[pack]
name = "team"
[[criterion]]
id = "queue"
question = "Which team takes it?"
options = [ { id = "refunds", label = "Refunds" }, { id = "deliveries", label = "Deliveries" } ]
"""
TEXT = "I was charged twice for the blender and it never arrived."


def score(path: Path, pack: Any) -> None:
    with History.open_writable(path) as h:
        ticket = make_ticket(TEXT, "T-1")
        result = FakeEngine().score_ticket(ticket, pack)
        row = h.save_ticket(ticket)
        h.finish_score(h.start_score(row, model=result.model, pack=result.pack, orderings=result.orderings), result)


def test_labels_under_two_packs_sharing_a_criterion_are_counted_and_exported_apart(tmp_path: Path, cli: Any) -> None:
    path = tmp_path / "history.sqlite3"
    team_file = tmp_path / "team.toml"
    team_file.write_text(TEAM, encoding="utf-8")
    team, support = load_pack(team_file), default_pack()
    score(path, support)
    assert cli(["label", "T-1", "queue=billing", "--history-file", str(path)]).returncode == 0  # the built-in pack's
    score(path, team)
    assert cli(["label", "T-1", "queue=refunds", "--history-file", str(path)]).returncode == 0  # the team's

    proc = cli(["stats", "--json", "--history-file", str(path)])
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    assert stats["labels"] == 2
    assert sorted((c["pack"], c["criterion"], c["labels"]) for c in stats["criteria"]) == [
        ("support", "queue", 1),
        ("team", "queue", 1),
    ]

    export = tmp_path / "labels.jsonl"
    proc = cli(["label", "--export", str(export), "--history-file", str(path)])
    assert proc.returncode == 0 and "wrote 2 labelled ticket(s)" in proc.stderr, proc.stderr
    rows = [json.loads(line) for line in export.read_text(encoding="utf-8").splitlines()]
    assert rows == [
        {"id": "T-1", "text": TEXT, "pack": "support", "labels": {"queue": "billing"}},
        {"id": "T-1", "text": TEXT, "pack": "team", "labels": {"queue": "refunds"}},
    ]

    # learn FILE reads the export: each pack its own row, the other's left out and said
    for pack, option in ((team, "refunds"), (support, "billing")):
        read = read_labelled(export, pack, partial=True)
        assert [(r.id, r.labels) for r in read.rows] == [("T-1", {"queue": option})], pack.name
        assert any("1 row(s) labelled under another pack" in n for n in read.notes), read.notes
    # learn --history: the labels of the pack it learns, the other pack's passed over
    with History.open_readonly(path) as h:
        got = training_rows(h, team, feat.Identity("sha", "fmt", team.hash))
    assert [r.labels for r in got.rows] == [{"queue": "refunds"}]
    assert sum(got.skipped.values()) == 1


def test_a_file_of_hand_made_rows_without_a_pack_field_is_read_as_before(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"id": "A", "text": TEXT, "labels": {"queue": "billing"}}) + "\n", encoding="utf-8")
    read = read_labelled(rows, default_pack(), partial=True)
    assert [(r.id, r.labels) for r in read.rows] == [("A", {"queue": "billing"})] and read.notes == []
