"""``triage history``: the history's recent tickets, with their decisions and labels, filtered."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING

from triage.errors import InputError, TriageError

if TYPE_CHECKING:
    from triage.store.recent import RecentTicket

NAME = "history"
ORDER = 43
HELP = "list recent tickets of the history: decisions and labels (--grep, --labelled, --json)"
DESCRIPTION = """\
List the tickets kept in the history (scored in the app, by `triage score
... --history` or by `triage serve --history`), newest first: the ticket's id,
when it was last scored, its first line, the decision of each criterion in its
newest score, and its labels (the agents' answers, `triage label` or the app's
F6): each with the option and whether it confirmed or corrected the decision
shown.

Filters: --grep TEXT (every word must occur in the ticket's id or text,
case-insensitively), --labelled or --unlabelled, --limit N (default 20; 0 for
all). --json prints one JSON object per ticket per line (JSON Lines), with each
decision's probability and what decided it (learned, calibrated, zero-shot).

The history is only read, as `triage stats` reads it: a read-only file, or
one another triage is writing, is listed as it stands; one that cannot be read
(damaged, from a newer triage, not a history) is an error, never moved aside.

A corrected decision shows the agent's answer and what the model said
(`shipping ✎ (model: billing)`), a confirmed one `billing ✓`. The table
shortens the tickets' first lines to fit the console, never a decision; on a
console too narrow for that, each ticket is a short paragraph.

examples:
  triage history
  triage history --unlabelled --limit 5       # what is left to label
  triage history --grep "refund" --labelled
  triage history --json | jq -r 'select(.labels.queue) | .id'"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--grep", metavar="TEXT", default="", help="only tickets whose id or text holds every word of TEXT")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--labelled", action="store_true", help="only tickets with at least one label")
    which.add_argument("--unlabelled", action="store_true", help="only tickets with no label")
    p.add_argument("--limit", type=int, default=20, metavar="N", help="at most N tickets (default 20; 0: all)")
    p.add_argument("--json", action="store_true", help="print JSON Lines, one object per ticket, instead of a table")
    p.add_argument("--history-file", metavar="PATH", help="the history file (default: the user data dir's)")


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from triage.store.history import History
    from triage.store.history_faults import HistoryFault
    from triage.store.recent import recent

    if args.limit < 0:
        raise InputError(f"--limit {args.limit} must be 0 (all) or more")
    labelled = True if args.labelled else False if args.unlabelled else None
    path = Path(args.history_file).expanduser() if args.history_file else None
    if path is not None and not path.is_file():
        raise InputError(f"no history file {path}", hint="leave out --history-file to read the user data dir's")
    # Read-only (SQLite mode=ro), as `stats` reads: nothing is created, migrated or moved (a damaged history is
    # refused, never moved aside by a listing); a read-only or write-locked history is read as it is.
    try:
        with History.open_readonly(path) as history, history.guard():
            tickets = recent(history, grep=args.grep, labelled=labelled, limit=args.limit or None)
            total = int(history.conn.execute("SELECT count(*) FROM tickets").fetchone()[0])
    except HistoryFault as exc:  # newer, damaged, locked, not a history: an error, never an empty list
        raise TriageError(
            f"the history cannot be read: {exc.message}", hint=exc.hint, exit_code=exc.exit_code
        ) from None
    if args.json:
        for t in tickets:
            print(json.dumps(t.to_dict(), ensure_ascii=False))
    elif tickets:
        _print(tickets)
    if not tickets:
        if total == 0:
            print(
                "triage: the history holds no tickets yet: score some in the app, or with triage score --history",
                file=sys.stderr,
            )
        else:
            print(f"triage: no ticket of the {total} in the history matches", file=sys.stderr)
    elif args.limit and len(tickets) == args.limit and total > args.limit:
        print(f"triage: the newest {len(tickets)} shown; --limit 0 lists all", file=sys.stderr)
    return 0


def _when(t: RecentTicket) -> str:
    from triage.store.times import shown

    return shown(t.when)  # "unknown" for a stored time that is no time (never a traceback)


def _status(t: RecentTicket) -> str:
    """What to say beside the first line: a thread's length, a score that did not finish."""
    parts = [f"thread of {t.messages}"] if t.messages > 1 else []
    if t.status == "":
        parts.append("never scored")
    elif t.status != "done":
        parts.append(t.status)
    return f" ({', '.join(parts)})" if parts else ""


def criteria_of(tickets: list[RecentTicket]) -> list[str]:
    """Every criterion decided or labelled on these tickets, in the order first seen."""
    seen: dict[str, None] = {}
    for t in tickets:
        seen.update((d.criterion, None) for d in t.decisions)
        seen.update((c, None) for c in t.labels)
    return list(seen)


def cell(t: RecentTicket, criterion: str) -> str:
    """One criterion of a ticket: the agent's answer where there is one, else the model's choice.

    ``X ✓``: an agent confirmed the model's X; ``X ✎ (model: Y)``: an agent answered X where the model said Y
    (a correction stays one after the thread grew and the model came round to X: Y is then what it showed).
    """
    choice = next((d.choice for d in t.decisions if d.criterion == criterion), "-")
    label = t.labels.get(criterion)
    if label is None:
        return choice
    model = choice if choice != label.option else label.shown_option if label.kind == "correction" else None
    if model is None or model == label.option:
        return f"{label.option} ✓"
    return f"{label.option} ✎ (model: {model})"


def paragraph_lines(t: RecentTicket, width: int) -> list[str]:
    """A ticket as a few lines of at most ``width`` characters (for a console too narrow for the table)."""
    import textwrap

    from triage.domain.ticket import printable

    head = printable(f"{t.ticket_id}  {_when(t)}  {t.first_line}{_status(t)}")
    lines = [head if len(head) <= width else head[: max(1, width - 1)] + "…"]
    decided = ", ".join(f"{c}={cell(t, c)}" for c in criteria_of([t])) or "-"
    labels = (
        ", ".join(
            f"{c}={la.option} ({'confirmed' if la.kind == 'confirmation' else f'corrected from {la.shown_option}'})"
            for c, la in t.labels.items()
        )
        or "-"
    )
    for text in (f"decided: {decided}", f"labels: {labels}"):
        lines += textwrap.wrap(
            printable(text), width=width, initial_indent="  ", subsequent_indent="      ", break_on_hyphens=False
        )
    return lines


TICKET_MIN = 16  # the table's first-line column at its narrowest; narrower, a ticket is a paragraph


def _print(tickets: list[RecentTicket]) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    from triage.domain.ticket import printable

    console = Console()
    criteria = criteria_of(tickets)
    rows = [
        [printable(t.ticket_id), _when(t), printable(t.first_line + _status(t))]
        + [printable(cell(t, c)) for c in criteria]
        for t in tickets
    ]
    title = f"{len(tickets)} ticket(s), newest first; an agent's answer: ✓ confirmed, ✎ corrected"

    def widest(i: int, header: str) -> int:  # a column that never wraps is as wide as its widest cell
        return max([len(header)] + [len(row[i]) for row in rows])

    fixed = [widest(0, "id"), widest(1, "when")] + [widest(i, c) for i, c in enumerate(criteria, 3)]
    # every column has a space either side and a border after it, and the table one at its start
    room = console.width - sum(fixed) - 3 * (len(fixed) + 1) - 1
    ticket_width = min(48, widest(2, "ticket"), room)
    if ticket_width >= min(TICKET_MIN, widest(2, "ticket")):  # the decisions whole, the first line cut to fit
        table = Table(title=title, title_justify="left")
        table.add_column("id", no_wrap=True, width=fixed[0])
        table.add_column("when", no_wrap=True, style="dim", width=fixed[1])
        table.add_column("ticket", width=ticket_width, overflow="ellipsis", no_wrap=True)
        for i, c in enumerate(criteria, 3):
            table.add_column(printable(c), no_wrap=True, width=fixed[i - 1])
        for row in rows:
            table.add_row(*(Text(c) for c in row))
        console.print(table)
        return
    # too narrow for the table (rich would squeeze the columns): a ticket to a short paragraph
    console.print(f"{len(tickets)} ticket(s), newest first", markup=False, highlight=False)
    for t in tickets:
        console.print("", markup=False)
        for line in paragraph_lines(t, console.width):
            console.print(Text(line), no_wrap=True, overflow="ellipsis")
