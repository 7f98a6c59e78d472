"""``triage label``: record agents' answers on tickets in the history, or export them for ``triage learn``."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from triage.errors import InputError

if TYPE_CHECKING:
    from triage.store.history import History
    from triage.store.labels import Answer, ScoredTicket

NAME = "label"
ORDER = 44
HELP = "record the right option for tickets in the history (labels), or export the labels"
DESCRIPTION = """\
Record an agent's answer on criteria of a ticket that is in the history (scored in
the app, or by `triage score ... --history`). The answer is checked against the
criteria and options of the ticket's newest finished result (an option by id or
by label, case-insensitively). Equal to the decision that was shown, it is a
confirmation; else a correction. The decision shown, what made it (learned,
calibrated, zero-shot) and the pack are kept with it. A new answer on the same
criterion replaces the label, and the first answer's shown decision stays what
`triage stats` measures agreement on. `triage history` lists the tickets of the
history with their ids, decisions and labels (--unlabelled: those left to label).

  triage label ID CRITERION=OPTION [CRITERION=OPTION ...]
  triage label --file LABELS.jsonl     rows {"id": ..., "labels": {criterion: option}}
  triage label --export FILE.jsonl     every labelled ticket, as `triage learn` reads it

Every label of one call is checked first and stored in one transaction: with one
unknown ticket id, criterion or option (or a bad line in --file) nothing is
stored, and the error names it.

Exit status: 0 stored (or exported); 2 bad input, nothing stored.

examples:
  triage label 3f2a9c01b7de queue=shipping urgency=high
  triage label --file corrections.jsonl
  triage label --export team-labels.jsonl && triage learn team-labels.jsonl"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("ticket", nargs="?", metavar="ID", help="the ticket's id in the history")
    p.add_argument("pairs", nargs="*", metavar="CRITERION=OPTION", help="the right option for a criterion")
    p.add_argument("--file", metavar="LABELS.jsonl", help='JSON Lines of {"id": ..., "labels": {criterion: option}}')
    p.add_argument(
        "--export", metavar="FILE.jsonl", help="write every labelled ticket in `triage learn`'s input format"
    )
    p.add_argument("--force", action="store_true", help="with --export: replace an existing file")
    p.add_argument("--history-file", metavar="PATH", help="the history file (default: the user data dir's)")


def run(args: argparse.Namespace) -> int:
    from triage.store import labels as lab

    modes = sum(bool(x) for x in (args.ticket, args.file, args.export))
    if modes != 1:
        raise InputError(
            "give one of: ID CRITERION=OPTION..., --file LABELS.jsonl, --export FILE.jsonl",
            hint="triage label --help shows all three",
        )
    if args.ticket and not args.pairs:
        raise InputError(f"no labels given for ticket {args.ticket!r}", hint="e.g. triage label ID queue=shipping")
    history = _open_history(args.history_file)
    with history:
        if args.export:
            return _export(history, Path(args.export), force=args.force)
        if args.file:
            batch = _read_file(history, Path(args.file))
            origin = "file"
        else:
            batch = [(lab.find_ticket(history, args.ticket), lab.parse_pairs(args.pairs))]
            origin = "cli"
        stored = lab.record_many(history, batch, origin=origin)
    corrections = sum(s.kind == "correction" for s in stored)
    tickets = len({s.ticket_row for s in stored})
    print(
        f"triage: stored {len(stored)} label(s) on {tickets} ticket(s): {corrections} correction(s), "
        f"{len(stored) - corrections} confirmation(s)",
        file=sys.stderr,
    )
    return 0


def _open_history(path: str | None) -> History:
    from triage.store.history import History

    history = History.open_writable(Path(path) if path else None)
    if history.notice:
        print(f"triage: note: {history.notice}", file=sys.stderr)
    return history


def _read_file(history: History, path: Path) -> list[tuple[ScoredTicket, list[Answer]]]:
    """Every row of a label file, checked: a bad line stops the call before anything is stored."""
    from triage.domain.ticket import jsonl_lines, read_text_file
    from triage.store import labels as lab

    text = read_text_file(str(path), "label file")
    batch = []
    problems = []
    for item in jsonl_lines(text):
        where = f"{path}:{item.line}"
        if item.obj is None:
            problems.append(f"{where}: {item.error}")
            continue
        obj = item.obj
        if not isinstance(obj, dict) or not isinstance(obj.get("id"), str | int) or "labels" not in obj:
            problems.append(f'{where}: a row must be {{"id": ..., "labels": {{criterion: option}}}}')
            continue
        try:
            scored = lab.find_ticket(history, str(obj["id"]))
            answers = lab.answers_from_mapping(obj["labels"], where)
            lab.check_answers(scored, answers)
        except InputError as exc:
            problems.append(exc.message if exc.message.startswith(where) else f"{where}: {exc.message}")
            continue
        batch.append((scored, answers))
    if problems:
        shown = "\n  ".join(problems[:20]) + (f"\n  ... and {len(problems) - 20} more" if len(problems) > 20 else "")
        raise InputError(
            f"{len(problems)} bad row(s) in {path}; nothing was stored:\n  {shown}",
            hint="fix or remove those rows and run again",
        )
    if not batch:
        raise InputError(f"{path} holds no labels")
    return batch


def _export(history: History, path: Path, *, force: bool) -> int:
    from triage.store import labels as lab
    from triage.store.files import write_text_atomic

    if path.exists() and not force:
        raise InputError(f"{path} exists; not replaced", hint="pass --force to replace it, or choose another name")
    rows = lab.export_rows(history)
    if not rows:
        raise InputError("the history holds no labels to export", hint="label tickets in the app or with triage label")
    write_text_atomic(path, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    print(f"triage: wrote {len(rows)} labelled ticket(s) to {path}", file=sys.stderr)
    return 0
