"""``triage pack init``: a pack from an export's label columns that the loader accepts and the export maps onto."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from triage.cli import main
from triage.domain.pack import load_pack
from triage.errors import InputError
from triage.intake.columns import ColumnMap
from triage.intake.packinit import parse_criteria, plan_pack, slug
from triage.learning.labelled import read_labelled

GROUPS = ["Billing and Payments"] * 9 + ["Technical Support"] * 7 + ["IT support"] * 6 + ["Sales"] * 2 + ["Legal"]
PRIOS = ["High", "low", "Medium", "medium ", "LOW"]


def _export(path: Path) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["Ticket ID", "Subject", "Description", "Group", "Priority"])
        for i, g in enumerate(GROUPS):
            w.writerow([f"T{i}", f"Subject {i}", f"<p>Body of ticket {i}</p>", g, PRIOS[i % len(PRIOS)]])
    return path


def test_pack_init_writes_a_pack_the_loader_accepts_and_the_export_maps_onto(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export = _export(tmp_path / "fd.csv")
    out = tmp_path / "team.toml"
    rc = main(
        [
            "pack",
            "init",
            str(export),
            "--text",
            "Subject,Description",
            "--criteria",
            "queue=Group,priority=Priority",
            "-o",
            str(out),
        ]
    )
    said = capsys.readouterr().out
    assert rc == 0
    pack = load_pack(out)
    queue = pack.criterion("queue")
    assert [o.id for o in queue.options] == ["billing_and_payments", "technical_support", "it_support", "other"]
    assert queue.option("other").aliases == ("Sales", "Legal")  # fewer than 5 rows each: merged
    assert queue.option("billing_and_payments").aliases == ("Billing and Payments",)
    assert [o.label for o in pack.criterion("priority").options] == [
        "low",
        "Medium",
        "High",
    ]  # by count; ties: the first spelling
    text = out.read_text(encoding="utf-8")
    assert "# 9 row(s) (36.0%)" in text and "2 rare value(s) merged: Sales (2), Legal (1)" in text
    assert text.count('# description = ""  # review') == len(queue.options) + len(pack.criterion("priority").options)
    assert queue.question == "Which queue should handle this ticket?"
    assert (
        "wrote" in said
        and "merged into 'other'" in said
        and "review before you rely on it" in said
        and "next: triage learn" in said
    )
    rows = read_labelled(
        export, pack, columns=ColumnMap.parse("Subject,Description", "Ticket ID", ["queue=Group", "priority=Priority"])
    )
    assert len(rows.rows) == len(GROUPS) and not rows.notes  # every value maps, the merged ones to `other`
    assert rows.rows[-1].labels["queue"] == "other"


def test_pack_init_never_overwrites_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    export = _export(tmp_path / "fd.csv")
    out = tmp_path / "team.toml"
    out.write_text("mine\n", encoding="utf-8")
    argv = ["pack", "init", str(export), "--text", "Subject", "--criteria", "queue=Group", "-o", str(out)]
    assert main(argv) == 2
    assert "exists; the pack would replace it" in capsys.readouterr().err
    assert out.read_text(encoding="utf-8") == "mine\n"
    assert main(argv + ["--force"]) == 0
    assert load_pack(out).criteria[0].id == "queue"


def test_pack_init_bad_inputs_write_nothing(tmp_path: Path) -> None:
    export = _export(tmp_path / "fd.csv")
    out = tmp_path / "team.toml"
    with pytest.raises(InputError, match="no column 'Team' \\(given by --criteria\\); its columns are 'Ticket ID'"):
        plan_pack(export, ["Subject"], {"queue": "Team"})
    one = tmp_path / "one.csv"
    one.write_text("Subject,Group\na,Sales\nb,Sales\n", encoding="utf-8")
    with pytest.raises(InputError, match="needs two options or more"):
        plan_pack(one, ["Subject"], {"queue": "Group"})
    empty = tmp_path / "empty.csv"
    empty.write_text("Subject,Group\na,\nb,\n", encoding="utf-8")
    with pytest.raises(InputError, match="column 'Group' \\(criterion 'queue'\\) is empty in all 2 row"):
        plan_pack(empty, ["Subject"], {"queue": "Group"})
    with pytest.raises(InputError, match="ID=COLUMN"):
        parse_criteria(["queue"])
    assert not out.exists()


def test_slugs_are_readable_ascii_ids() -> None:
    assert slug("Billing and Payments") == "billing_and_payments"
    assert slug("Café / Bar") == "cafe_bar"
    assert slug("1 - Critical") == "1_critical"
