"""`score --ray`'s input (triage.backlog.rows) and `score`'s reads helpdesk exports through the same column mapping."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from triage.backlog.rows import read_rows
from triage.commands.score import read_input
from triage.errors import InputError
from triage.intake.columns import ColumnMap


def _csv(path: Path) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh, delimiter=";")
        w.writerow(["Key", "Summary", "Description"])
        w.writerow(["K-1", "Charged twice", "<p>Refund <b>one</b>, please.</p>"])
        w.writerow(["K-2", "", ""])
        w.writerow(["", "No key", "This row has no id."])
    return path


def test_backlog_reads_a_csv_export_with_mapped_columns(tmp_path: Path) -> None:
    f = _csv(tmp_path / "jira.csv")
    rows = read_rows(str(f), ColumnMap.parse("Summary,Description", "Key"))
    assert [(r.ticket_id, r.text, r.error is None) for r in rows] == [
        ("K-1", "Charged twice\n\nRefund one, please.", True),
        ("K-2", None, False),
        ("row-3", "No key\n\nThis row has no id.", True),
    ]
    assert "no text in column(s) 'Summary', 'Description'" in (rows[1].error or "")
    with pytest.raises(
        InputError, match="no column 'text' \\(given by --text-columns\\); its columns are 'Key', 'Summary'"
    ):
        read_rows(str(f))  # a CSV is an export: the default text column must exist


def test_backlog_folder_takes_csv_beside_jsonl(tmp_path: Path) -> None:
    (tmp_path / "a.jsonl").write_text('{"id": "j1", "text": "from jsonl"}\n', encoding="utf-8")
    (tmp_path / "b.csv").write_text("id,text\nc1,from csv\n", encoding="utf-8")
    rows = read_rows(str(tmp_path))
    assert [(r.ticket_id, r.text) for r in rows] == [("j1", "from jsonl"), ("c1", "from csv")]


def test_score_reads_exports_by_name_or_flag_and_plain_text_stays_plain(tmp_path: Path) -> None:
    f = _csv(tmp_path / "jira.csv")
    rows = read_input(
        str(f),
        force_jsonl=False,
        force_text=False,
        ticket_id=None,
        columns=ColumnMap.parse("Summary,Description", "Key"),
    )
    assert [r.ticket_id for r in rows] == ["K-1", "K-2", "row-3"] and rows[1].error
    plain = tmp_path / "ticket.txt"
    plain.write_text("Hello; my order, the blue one; is late\nThanks", encoding="utf-8")
    [one] = read_input(str(plain), force_jsonl=False, force_text=False, ticket_id="t", columns=ColumnMap())
    assert one.text == plain.read_text(encoding="utf-8") and one.line is None
    arr = tmp_path / "tickets.json"
    arr.write_text('[{"id": "a", "text": "one"}, {"id": "b", "text": "two"}]', encoding="utf-8")
    assert [
        r.text for r in read_input(str(arr), force_jsonl=False, force_text=False, ticket_id=None, columns=ColumnMap())
    ] == ["one", "two"]
