"""``triage stats``: how often the decisions shown agreed with the agents' answers, per criterion."""

from __future__ import annotations

import argparse
import json
import sys

NAME = "stats"
ORDER = 45
HELP = "agreement of the decisions shown with the agents' labels, per criterion"
DESCRIPTION = """\
For every criterion that has labels in the history (`triage label`, or the
app), compare the decision that was shown before the agent first answered with
the answer (prequential: a head is never judged on the labels it was fitted on).

Per criterion: labels, corrections, agreement overall, agreement balanced over
the options answered (a readout that always shows the commonest option is at
chance there, however often it agrees), over the newest 50, by what decided
(learned, calibrated, zero-shot), and the trend in consecutive blocks of 20
labels, oldest first. --json prints the same as one JSON object.

The history is only read (a read-only file works). One that cannot be read
(locked by another process, damaged, from a newer triage, not a history) is an
error with exit status 1 or 2, never a report of zero labels.

examples:
  triage stats
  triage stats --json | jq '.criteria[] | {criterion, rate: .overall.rate}'"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--history-file", metavar="PATH", help="the history file (default: the user data dir's)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.console import Console

    from triage.evaluation.agreement import agreement
    from triage.evaluation.agreement_table import agreement_lines, agreement_table
    from triage.store import labels as lab
    from triage.store.history import History

    # Read-only (SQLite mode=ro): a read-only history works, nothing is created, migrated or moved, and a
    # history that cannot be read is an error, never "0 labels".
    path = Path(args.history_file) if args.history_file else None
    with History.open_readonly(path, must_exist=path is not None) as history, history.guard():
        if history.notice:
            print(f"triage: note: {history.notice}", file=sys.stderr)
        rows = agreement(lab.judged(history))
        answers = lab.count(history)
    if args.json:
        print(json.dumps({"labels": answers, "criteria": [r.to_dict() for r in rows]}, ensure_ascii=False))
        return 0
    if not rows:
        print("triage: no labels yet: confirm or correct decisions in the app, or use triage label", file=sys.stderr)
        return 0

    console = Console()
    table = agreement_table(rows, trend_blocks=6, title=f"agreement with {answers} answer(s)")
    if console.measure(table, options=console.options.update_width(10_000)).minimum <= console.width:
        console.print(table)
        return 0
    # too narrow for the table (rich would drop columns): the same figures, a criterion to a paragraph
    console.print(f"agreement with {answers} answer(s)", markup=False, highlight=False)
    for line in agreement_lines(rows, trend_blocks=6):
        console.print(line, markup=False, highlight=False)
    return 0
