"""``triage label``: record agents' answers on tickets in the history, or export them for ``triage learn``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from triage.errors import InputError

if TYPE_CHECKING:
    from triage.store.history import History
    from triage.store.labels import LabelRow

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
  triage label --export FILE.jsonl     every labelled ticket, as `triage learn` reads it (- : standard output):
                                       one row per ticket and pack, {"id", "text", "pack", "labels"}

Every label of one call is checked and stored in one transaction: with one
unknown ticket id, criterion or option (or a bad line in --file, or one ticket
given two different answers for one criterion) nothing is stored, and the error
names it. --file is read line by line and stored as it is read (memory stays
bounded however long the file is). --export only reads the history: a
read-only history file works, and the export is never written over the history
or any database.

Exit status: 0 stored (or exported); 2 bad input, nothing stored; 1 the history
cannot be used (locked by another process, read-only, a full disk, damaged), nothing stored.

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
    if args.export:
        return _export(args.history_file, args.export, force=args.force)
    if args.file:
        from triage.store.outputs import path_kind

        if path_kind(Path(args.file).expanduser()) == "missing":  # before the history is opened or created
            raise InputError(f"label file {args.file} does not exist")
    history = _open_history(args.history_file)
    with history, history.guard():
        if args.file:
            done = lab.record_rows(history, _file_rows(Path(args.file)), origin="file", source=args.file)
            stored, corrections, tickets = done.stored, done.corrections, done.tickets
            if done.repeated:
                print(f"triage: {done.repeated} answer(s) given again in the file were stored once", file=sys.stderr)
        else:
            labels = lab.record_many(
                history, [(lab.find_ticket(history, args.ticket), lab.parse_pairs(args.pairs))], origin="cli"
            )
            stored, corrections = len(labels), sum(s.kind == "correction" for s in labels)
            tickets = len({s.ticket_row for s in labels})
    print(
        f"triage: stored {stored} label(s) on {tickets} ticket(s): {corrections} correction(s), "
        f"{stored - corrections} confirmation(s)",
        file=sys.stderr,
    )
    return 0


def _open_history(path: str | None) -> History:
    from triage.store.history import History

    history = History.open_writable(Path(path) if path else None)
    if history.notice:
        print(f"triage: note: {history.notice}", file=sys.stderr)
    return history


def _file_rows(path: Path) -> Iterator[LabelRow]:
    """The rows of a label file, streamed: each as (where, id, answers) or (where, error)."""
    from triage.gate import iter_json_lines
    from triage.store import labels as lab

    for line, obj, error in iter_json_lines(path, "label file"):
        where = f"{path}:{line}"
        if error is not None:
            yield lab.LabelRow(where, error=error)
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("id"), str | int) or "labels" not in obj:
            yield lab.LabelRow(where, error='a row must be {"id": ..., "labels": {criterion: option}}')
            continue
        problem = _surrogates(obj)
        if problem is not None:
            yield lab.LabelRow(where, error=problem)
            continue
        try:
            answers = lab.answers_from_mapping(obj["labels"], where)
        except InputError as exc:
            yield lab.LabelRow(where, error=exc.message.removeprefix(f"{where}: "))
            continue
        yield lab.LabelRow(where, str(obj["id"]), answers)


def _surrogates(obj: dict[str, object]) -> str | None:
    """Why a label row's id, a criterion or an option is no text (a lone surrogate), or None: the row's error,
    as a ticket's text with one is (:func:`triage.domain.ticket.surrogate_problem`)."""
    from triage.domain.ticket import surrogate_problem

    labels = obj["labels"] if isinstance(obj["labels"], dict) else {}
    named = [("its id", obj["id"])] + [(f"criterion {k!r}", k) for k in labels]
    named += [(f"the option of {k!r}", v) for k, v in labels.items()]
    for what, value in named:
        if isinstance(value, str) and (problem := surrogate_problem(value, what)) is not None:
            return problem
    return None


def _export(history_file: str | None, target: str, *, force: bool) -> int:
    from triage.store import labels as lab
    from triage.store.history import History
    from triage.store.history_open import history_path
    from triage.store.outputs import check_output, write_output

    source = history_path(Path(history_file) if history_file else None)
    out = check_output(target, inputs=[source], force=force, what="label export", option="--export", stdout=True)
    with History.open_readonly(source, must_exist=bool(history_file)) as history, history.guard():
        if history.notice:
            print(f"triage: note: {history.notice}", file=sys.stderr)
        rows = lab.export_rows(history)
    if not rows:
        raise InputError("the history holds no labels to export", hint="label tickets in the app or with triage label")
    write_output(out, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    where = "standard output" if str(out) == "-" else str(out)
    print(f"triage: wrote {len(rows)} labelled ticket(s) to {where}", file=sys.stderr)
    return 0
