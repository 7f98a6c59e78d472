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

Per criterion: labels, corrections, agreement overall and over the newest 50, by
what decided (learned, calibrated, zero-shot), and the trend in consecutive
blocks of 20 labels, oldest first. --json prints the same as one JSON object.

examples:
  triage stats
  triage stats --json | jq '.criteria[] | {criterion, rate: .overall.rate}'"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object instead of a table")
    p.add_argument("--history-file", metavar="PATH", help="the history file (default: the user data dir's)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from rich.console import Console
    from rich.table import Table

    from triage.evaluation.agreement import BLOCK, RECENT, agreement
    from triage.render import safe
    from triage.store import labels as lab
    from triage.store.history import History

    with History.open(Path(args.history_file) if args.history_file else None) as history:
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

    def pct(rate: float | None) -> str:
        return "—" if rate is None else f"{rate:.0%}"

    table = Table(title=f"agreement with {answers} answer(s)", title_justify="left")
    columns = {
        "criterion": "left",
        "n": "right",
        "fixed": "right",
        "agree": "right",
        f"last {RECENT}": "right",
        "by source": "left",
        f"trend ({BLOCK} a block)": "left",
    }
    for col, justify in columns.items():
        table.add_column(col, justify=justify, no_wrap=col not in ("by source",))  # type: ignore[arg-type]
    for r in rows:
        sources = ", ".join(f"{s} {pct(v.rate)}/{v.n}" for s, v in r.by_source.items())
        trend = " ".join(pct(t.rate) for t in r.trend[-6:])
        name = r.criterion if len({x.pack for x in rows}) == 1 else f"{r.pack}/{r.criterion}"
        table.add_row(
            safe(name), str(r.labels), str(r.corrections), pct(r.overall.rate), pct(r.recent.rate), sources, trend
        )
    if len({x.pack for x in rows}) == 1:
        table.caption = f"pack {rows[0].pack}; fixed: corrections; by source: agreement/labels"
    Console().print(table)
    return 0
