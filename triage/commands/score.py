"""``triage score``: score tickets from stdin, a file, or JSONL, and print the result schema."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TextIO

from triage.errors import InputError, TriageError

NAME = "score"
ORDER = 10
HELP = "score tickets and print each decision (JSON, JSONL or a table)"
DESCRIPTION = """\
Score one ticket (from FILE or stdin), or many from JSON Lines, against a
criteria pack. Each ticket prints as one object of the triage.result/2 schema
(docs/schema.md).

Options are read by name (--readout label, the default): the probability of
each option is the model's probability of its answer word, one short tail per
criterion, all tails in one batch (--mode fanout, the default). --readout
letter shows the options as A/B/C instead (with --orderings cyclic, every
rotation).

Input: plain text is one ticket. JSON Lines (one {"id": ..., "text": ...}
object per line) is detected from a .jsonl name or a first line that is such an
object; force either with --jsonl / --text. A bad JSONL line (even when it is
the only one) is reported on stderr and gets an error record
{"ticket_id", "line", "error"} in the output, and the other tickets are still
scored.

Output: JSON Lines input streams. Each record is written and flushed as soon
as its ticket is scored: the default off a terminal is then jsonl (one record
per line), and --format json writes one array element by element and closes
it. Interrupted (Ctrl-C), every record already written stays whole, and a json
array is closed, so the output is valid. One plain-text ticket prints one JSON
object (the default off a terminal). On a terminal the default is a table.

Exit status: 0 every ticket scored; 1 a line or ticket failed (it has an error
record); 2 bad usage, or a single plain-text ticket that cannot be scored;
130 interrupted.

Helpdesk exports: a .csv/.tsv, .parquet or JSON-array .json file (or any file
with --text-columns/--id-column) is read as an export: --text-columns COL[,COL]
names the text (joined by a blank line; HTML becomes text; dotted paths reach
into nested JSON) and --id-column COL the id. Here --text and --id keep their
meaning (one plain-text ticket, its id); the other commands spell the same
mapping --text and --id.

A backlog runs on Ray with --ray (a local cluster) or --ray ADDRESS (an existing
one): the same scoring and options, JSON Lines, CSV or Parquet in (a file, folder or
glob) and out (--output), --resume to continue a stopped run (docs/scale.md).
Needs the ray extra: pip install 'triage[ray]'.

examples:
  echo "I was charged twice, refund me now" | triage score
  echo "Where is my parcel?" | triage score --criteria urgency,queue
  triage score tickets.jsonl --format jsonl --mode fanout > out.jsonl
  triage score backlog/ --ray --output scored.jsonl --resume"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from triage.cli import add_model_options

    p.add_argument("file", nargs="?", metavar="FILE", help="ticket text or JSONL file (default: stdin; - for stdin)")
    add_model_options(p)
    p.add_argument("--pack", metavar="PATH", help="criteria pack TOML (default: the built-in support pack)")
    p.add_argument("--mode", choices=("full", "serial", "fanout"), default=None, help="how to evaluate (default fanout: all tails in one batch)")
    p.add_argument("--strategy", choices=("truncate", "restore"), default="truncate", help="serial mode's way back to the prefix (default truncate)")
    p.add_argument("--readout", choices=("label", "letter"), default=None, help="read options by name (default: one tail per criterion) or by letter A/B/C")
    p.add_argument("--orderings", choices=("none", "cyclic"), default=None, help="letter readout: ask options in pack order only, or in every rotation (default cyclic)")
    p.add_argument("--criteria", metavar="ID,ID", help="score only these criteria of the pack, by id (default: all); the scores are those of a whole-pack run")
    p.add_argument("--prior", action="store_true", default=None, help="divide out the content-free prior (an 'N/A' ticket)")
    p.add_argument("--calibration", metavar="CAL.json", help="apply this calibration file (default: the stored one fitted for this model, pack and prompt format, if any)")
    p.add_argument("--no-calibration", action="store_true", help="do not apply any calibration")
    p.add_argument("--head", metavar="HEAD.npz", help="apply this learned head (`triage learn`; default: the stored one learned for this model, pack and prompt format, if any)")
    p.add_argument("--no-head", action="store_true", help="do not apply any learned head")
    p.add_argument("--prompt", choices=("auto", "chat", "plain"), default="auto", help="prompt format (default: from the model's chat template)")
    p.add_argument("--format", choices=("json", "jsonl", "table"), default=None, help="output (default: table on a terminal; else jsonl for JSON Lines input, json for one ticket)")
    p.add_argument("--id", dest="ticket_id", metavar="ID", help="ticket id for a single plain-text ticket")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--jsonl", action="store_true", help="treat input as JSON Lines")
    kind.add_argument("--text", action="store_true", help="treat input as one plain-text ticket")
    from triage.commands._input import add_input_arguments

    add_input_arguments(p, labels=False, score=True)
    ray = p.add_argument_group("backlog on Ray (docs/scale.md)")
    ray.add_argument("--ray", nargs="?", const="local", metavar="ADDRESS", help="score on Ray: a local cluster, or join ADDRESS (auto, ray://host:10001)")
    ray.add_argument("--output", "-o", metavar="PATH", help="with --ray: write here (.parquet: a folder of Parquet parts; else JSON Lines; default stdout)")
    ray.add_argument("--workers", type=int, metavar="N", help="with --ray: scoring actors of --threads threads each (with --ray, --threads defaults to 1 and --workers to the cluster's CPUs / threads)")
    ray.add_argument("--batch-size", type=int, metavar="N", help="with --ray: tickets per batch, the most a dead worker loses (default 16)")
    ray.add_argument("--resume", action="store_true", help="with --ray: skip tickets --output already holds for this model, pack, prompt format and options")


@dataclass
class Row:
    """One input ticket, or the error that stopped it from being one."""

    line: int | None
    ticket_id: str | None
    text: str | None
    error: str | None = None


def read_input(
    file: str | None, *, force_jsonl: bool, force_text: bool, ticket_id: str | None, columns: Any = None,
) -> list[Row]:
    """Read tickets from a file or stdin (``columns``: a :class:`~triage.intake.columns.ColumnMap` for an export).

    Raises:
        InputError: unreadable file, invalid UTF-8, no input.
    """
    from triage.intake.columns import export_tickets, is_export
    from triage.scoring.ticket import decode_ticket_bytes, read_text_file

    export = file not in (None, "-") and not force_text and not force_jsonl and columns is not None
    if export and is_export(str(file), columns):
        return [Row(t.n, t.id or f"row-{t.n}", t.text, t.error) for t in export_tickets(file, columns)]

    if file in (None, "-"):
        if sys.stdin is None or sys.stdin.isatty():
            raise InputError("no ticket given", hint="pipe a ticket in (echo '...' | triage score) or pass a FILE")
        text = decode_ticket_bytes(sys.stdin.buffer.read(), "standard input")
    else:
        text = read_text_file(file, "ticket file")
    if force_jsonl or (not force_text and _looks_jsonl(file, text)):
        return list(_jsonl_rows(text))
    return [Row(None, ticket_id, text)]


def _looks_jsonl(file: str | None, text: str) -> bool:
    if file and file.endswith(".jsonl"):
        return True
    first = text.lstrip().split("\n", 1)[0]
    if not first.startswith("{"):
        return False
    try:
        obj = json.loads(first)
    except json.JSONDecodeError:
        return False
    return isinstance(obj, dict) and "text" in obj


def _jsonl_rows(text: str) -> Iterator[Row]:
    from triage.scoring.ticket import jsonl_lines

    for item in jsonl_lines(text):
        n = item.line
        if item.obj is None:
            yield Row(n, None, None, f"line {n}: {item.error}")
            continue
        tid = item.row_id()
        body = item.obj.get("text")
        if not isinstance(body, str):
            yield Row(n, tid, None, f"line {n} (id {tid}): field 'text' is missing or not a string")
            continue
        yield Row(n, tid, body)


@contextmanager
def _uninterrupted() -> Iterator[None]:
    """Hold Ctrl-C (SIGINT) back while one record is written: an interrupt lands after it, never inside.

    A Python-level handler, not a signal mask: llama.cpp's threads may be the ones the
    signal is delivered to, and Python then interrupts the main thread anyway.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, _frame: held.append(signum))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if held and previous is signal.default_int_handler:
            raise KeyboardInterrupt
        if held and callable(previous):
            previous(signal.SIGINT, None)


class RecordWriter:
    """Writes records as they come: JSON Lines, or a JSON array that is closed whatever happens.

    Args:
        fmt: ``jsonl``, ``json`` or ``table`` (records are not written for a table).
        array: for ``json``, write an array element by element (JSON Lines input);
            otherwise the one record is written as an object at :meth:`close`.
        out: where to write (default: standard output).
    """

    def __init__(self, fmt: str, *, array: bool, out: TextIO | None = None) -> None:
        self.fmt = fmt
        self.array = array
        self.out = out or sys.stdout
        self.written = 0
        self._single: dict[str, Any] | None = None

    def write(self, record: dict[str, Any]) -> None:
        """Write one record whole, and flush it."""
        if self.fmt == "table":
            return
        if self.fmt == "json" and not self.array:
            self._single = record  # one plain-text ticket: one object, at the end
            return
        if self.fmt == "jsonl":
            text = json.dumps(record, ensure_ascii=False) + "\n"
        else:
            item = "\n".join("  " + line for line in json.dumps(record, indent=2, ensure_ascii=False).split("\n"))
            text = ("[\n" if self.written == 0 else ",\n") + item
        with _uninterrupted():
            self.out.write(text)
            self.out.flush()
            self.written += 1  # inside: a held-back interrupt lands after this line, never before it

    def close(self) -> None:
        """End the output: close the array (``[]`` when empty), or write the single object."""
        if self.fmt == "json" and self.array:
            with _uninterrupted():
                self.out.write("\n]\n" if self.written else "[]\n")
                self.out.flush()
        elif self._single is not None:
            self.out.write(json.dumps(self._single, indent=2, ensure_ascii=False) + "\n")
            self.out.flush()


def _say(line: str) -> None:
    """One line on stderr, with any escape sequences or control characters of the input removed."""
    from triage.scoring.ticket import printable

    print(printable(line), file=sys.stderr)


def chosen_criteria(arg: str | None, pack: Any) -> tuple[str, ...] | None:
    """``--criteria a,b`` as ids of ``pack``, checked before the model loads.

    Raises:
        InputError: no id given, or an id the pack does not have (naming the ones it has).
    """
    if arg is None:
        return None
    ids = tuple(dict.fromkeys(part.strip() for part in arg.split(",") if part.strip()))
    if not ids:
        raise InputError("--criteria names no criteria", hint=f"use ids of pack {pack.name!r}: {', '.join(c.id for c in pack.criteria)}")
    pack.criterion_indices(ids)  # now, before the model loads
    return ids


def score_options(args: argparse.Namespace, config: dict[str, Any], pack: Any) -> Any:
    """The :class:`~triage.scoring.engine.ScoreOptions` of these arguments and config: one place for
    ``triage score`` and ``--ray``, so both always score with the same options."""
    from triage.scoring.engine import DEFAULT_MODE, ScoreOptions

    return ScoreOptions(
        mode=args.mode or config.get("mode", DEFAULT_MODE),
        strategy=args.strategy,
        readout=args.readout or config.get("readout", "label"),
        orderings=args.orderings or config.get("orderings", "cyclic"),
        prior=bool(args.prior if args.prior is not None else config.get("prior", False)),
        criteria=chosen_criteria(args.criteria, pack),
    )


def choose_calibration(args: argparse.Namespace, config: dict[str, Any], engine: Any, pack: Any, options: Any) -> Any:
    """The calibration to apply (``--calibration``, else the stored one), or None; says which.

    ``engine`` needs only ``sha256`` and ``fmt.id`` (``--ray`` passes what the nodes reported).

    Raises:
        InputError: an explicit calibration that does not fit the model, pack, readout or options.
    """
    from triage.scoring.calibrate import auto_calibration, check_options, load_calibration

    explicit = args.calibration or config.get("calibration")
    if args.no_calibration:
        return None
    calibration = load_calibration(explicit, engine=engine, pack=pack, readout=options.readout) if explicit else auto_calibration(engine, pack, options.readout)
    if calibration is None:
        return None
    why = check_options(calibration, orderings=options.effective_orderings, prior=options.prior)
    if why and explicit:
        raise InputError(f"calibration {explicit} does not fit these options: {why}", hint="score with the options it was fitted on, or pass --no-calibration")
    if why:
        _say(f"triage: note: stored calibration {calibration.name} not applied: {why}")
        return None
    _say(f"triage: applying calibration {calibration.name}")
    return calibration


def choose_head(args: argparse.Namespace, engine: Any, pack: Any, options: Any) -> Any:
    """The learned head to apply (``--head``, else the stored one), or None; says which, or why not.

    Raises:
        InputError: an explicit head that cannot be read or does not fit the model, pack or readout.
    """
    from triage.scoring.head import auto_head, load_head

    explicit = getattr(args, "head", None)
    if getattr(args, "no_head", False):
        return None
    if explicit and options.readout != "label":
        raise InputError("a learned head reads options by name; use --readout label, or leave out --head")
    if explicit:
        head = load_head(explicit, engine=engine, pack=pack, readout=options.readout)
    else:
        found = auto_head(engine, pack, options.readout)
        if found.skipped:
            _say(f"triage: note: {found.skipped}")
        head = found.head
    if head is None:
        return None
    learned = [c.id for c in pack.criteria if head.covers(c.id) and (options.criteria is None or c.id in options.criteria)]
    rest = [c.id for c in pack.criteria if not head.covers(c.id) and (options.criteria is None or c.id in options.criteria)]
    if learned and options.prior:
        _say("triage: note: learned criteria read the raw readout; --prior applies to the others only")
    _say(f"triage: applying learned head '{head.name}' to {', '.join(learned) or 'no chosen criterion'}" + (f" (not learned: {', '.join(rest)})" if rest else ""))
    return head


def run(args: argparse.Namespace) -> int:
    from triage.store.config import load_config
    from triage.scoring.pack import resolve_pack
    from triage.scoring.ticket import make_ticket

    if args.ray is not None:
        from triage.backlog.ray_score import run_ray

        return run_ray(args)
    for flag, given in (("--output", args.output), ("--workers", args.workers), ("--batch-size", args.batch_size), ("--resume", args.resume)):
        if given:
            raise InputError(f"{flag} works only with --ray", hint="add --ray to score a backlog on a (local) Ray cluster")
    config = load_config()
    from triage.commands._input import column_map

    rows = read_input(args.file, force_jsonl=args.jsonl, force_text=args.text, ticket_id=args.ticket_id,
                      columns=column_map(args))
    if not rows:
        raise InputError("the input holds no tickets")
    pack = resolve_pack(args.pack or config.get("pack"))
    options = score_options(args, config, pack)
    streamed = rows[0].line is not None  # JSON Lines input: records are written as tickets finish
    fmt = args.format or ("table" if sys.stdout.isatty() else "jsonl" if streamed else "json")
    # Check every ticket before loading the model, so a bad single ticket fails fast.
    tickets: list[tuple[Row, Any]] = []
    for row in rows:
        if row.error is None:
            try:
                tickets.append((row, make_ticket(row.text or "", row.ticket_id)))
                continue
            except InputError as exc:
                row.error = f"line {row.line}: {exc.message}" if row.line else exc.message
        tickets.append((row, None))
    if not streamed and rows[0].error:
        raise InputError(rows[0].error)  # one plain-text ticket: exit 2, nothing on stdout

    writer = RecordWriter(fmt, array=streamed)
    if all(ticket is None for _, ticket in tickets):  # no line can be scored: no model is needed to say so
        for row, _ in tickets:
            _say(f"triage: error: {row.error}")
            writer.write({"ticket_id": row.ticket_id, "line": row.line, "error": row.error})
        writer.close()
        return 1
    try:
        return _score_all(args, config, pack, options, tickets, writer)
    except KeyboardInterrupt:
        writer.close()
        if streamed:
            _say(f"triage: interrupted after {writer.written} of {len(tickets)} record(s); those written are complete")
        raise
    except BaseException:
        if writer.written:
            writer.close()  # an array already begun is closed, so what was written stays valid
        raise


def _score_all(args: argparse.Namespace, config: dict[str, Any], pack: Any, options: Any, tickets: list[tuple[Row, Any]], writer: RecordWriter) -> int:
    from triage.model.loader import load_engine
    from triage.render import print_table

    engine = load_engine(args.model, n_ctx=args.n_ctx, threads=args.threads, prompt_style=args.prompt, notice=lambda m: _say(f"triage: {m}"))
    calibration = choose_calibration(args, config, engine, pack, options)
    head = choose_head(args, engine, pack, options)
    failed = 0
    with engine:
        for row, ticket in tickets:
            if ticket is None:
                failed += 1
                _say(f"triage: error: {row.error}")
                record = {"ticket_id": row.ticket_id, "line": row.line, "error": row.error}
            else:
                try:
                    result = engine.score_ticket(
                        ticket, pack, options,
                        calibration=calibration, head=head,
                    )
                except TriageError as exc:
                    failed += 1
                    _say(f"triage: error: ticket {ticket.id}: {exc.message}")
                    record = {"ticket_id": ticket.id, "line": row.line, "error": exc.message}
                else:
                    for w in result.warnings:
                        _say(f"triage: warning: ticket {ticket.id}: {w}")
                    record = result.to_dict()
                    if writer.fmt == "table":
                        print_table(result)
            writer.write(record)
    writer.close()
    return 1 if failed else 0
