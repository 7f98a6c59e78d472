"""``triage score``: score tickets from stdin, a file, or JSONL, and print the result schema."""

from __future__ import annotations

import argparse
import sys
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from triage.commands._records import RecordWriter
from triage.errors import InputError, TriageError

if TYPE_CHECKING:
    from triage.backlog.ray_score import RayJob
    from triage.domain.pack import Pack
    from triage.domain.ticket import Ticket
    from triage.intake.columns import ColumnMap
    from triage.scoring.options import ScoreOptions
    from triage.session import FitRequest, Fits
    from triage.store.history import History

NAME = "score"
ORDER = 10
HELP = "score tickets and print each decision (JSON, JSONL or a table)"
DESCRIPTION = """\
Score one ticket (from FILE or stdin), or many from JSON Lines, against a
criteria pack. Each ticket prints as one object of the triage.result/3 schema
(docs/schema.md).

Options are read by name: the probability of each option is the model's
probability of its answer word, one short tail per criterion, all tails in one
batch, each ticket in its own decode; a learned head is read where it was
fitted. That is the only way triage scores (the app and `triage serve` too);
`triage bench` and `triage eval` measure the alternatives (options as
letters, serial and full decodes).

Input: plain text is one ticket. JSON Lines (one {"id": ..., "text": ...}
object per line) is detected from a .jsonl name or a first line that is such an
object; force either with --jsonl / --text. A thread is {"id": ..., "messages":
[{"role": "customer"|"agent"|"note", "text": ...}, ...]}: when the same id comes
back with more messages (later in the stream), only the new messages and the
tails are evaluated (the result's "thread" says how much was reused). A bad JSONL line (even when it is
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
record: the engine failed on it, or --history refused its result), or the
history cannot be written (locked, read-only, full); 2 bad usage, a single
plain-text ticket that cannot be scored, a head or calibration (--head,
--calibration, the config's) that cannot be read or does not fit, or a history
of a newer schema or not a history; 130 interrupted.

On a running `triage serve`: --server URL (or TRIAGE_SERVER, or the config's
server) sends each ticket to it (POST /v1/score) instead of loading a model
here, and writes the record it answers: the same schema, formats and exit
codes. TRIAGE_SERVE_TOKEN or --token-file PATH is the server's token (--token
works too, but `ps` shows it); --pack must name a file holding a pack the server loaded
(checked by its hash); the server's config and stored head decide the rest. A
ticket the server refuses gets an error record, as here. A server that cannot
be used stops the run with one line saying why: exit 2 when it cannot be
reached, refuses the token or an option, or is no triage server; 1 when it
fails (5xx) or its queue stays full (503, waited out 3 times).

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
  triage score tickets.jsonl --format jsonl > out.jsonl
  triage score backlog/ --ray --output scored.jsonl --resume
  triage score tickets.jsonl --server http://127.0.0.1:8787 > out.jsonl"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    from triage.commands._flags import add_model_options, add_prompt_option, add_removed_flags, add_setting

    p.add_argument("file", nargs="?", metavar="FILE", help="ticket text or JSONL file (default: stdin; - for stdin)")
    add_model_options(p)
    add_setting(p, "pack", metavar="PATH")
    p.add_argument(
        "--criteria",
        metavar="ID,ID",
        help="score only these criteria of the pack, by id (default: all): fewer tails in the one batch, whose "
        "numbers drift from a whole-pack run's (docs/engine.md: up to 0.094 on smollm2, 0.036 on the stand-in)",
    )
    add_setting(p, "calibration", metavar="CAL.json")
    p.add_argument("--no-calibration", action="store_true", help="do not apply any calibration")
    p.add_argument(
        "--head",
        metavar="HEAD.npz",
        help=(
            "apply this learned head (`triage learn`; default: the stored "
            "one learned for this model, pack and prompt format, if any)"
        ),
    )
    p.add_argument("--no-head", action="store_true", help="do not apply any learned head")
    p.add_argument(
        "--wait-starter",
        action="store_true",
        help="on a model's first use, fit the built-in pack's starter head before scoring (default: it is fitted "
        "in the background while this run decides zero-shot; the stand-ins' heads ship, nothing is fitted)",
    )
    add_prompt_option(p)
    p.add_argument(
        "--format",
        choices=("json", "jsonl", "table"),
        default=None,
        help="output (default: table on a terminal; else jsonl for JSON Lines input, json for one ticket)",
    )
    p.add_argument("--id", dest="ticket_id", metavar="ID", help="ticket id for a single plain-text ticket")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--jsonl", action="store_true", help="treat input as JSON Lines")
    kind.add_argument("--text", action="store_true", help="treat input as one plain-text ticket")
    from triage.commands._input import add_input_arguments

    add_input_arguments(p, labels=False, score=True)
    p.add_argument(
        "--history",
        action="store_true",
        help=(
            "keep each ticket and its result in the history, as the app does, with what a learned head reads "
            "(so `triage label` can label it and `triage learn --history` learn from it without scoring again)"
        ),
    )
    p.add_argument(
        "--history-file", metavar="PATH", help="with --history: this history file (default: the user data dir's)"
    )
    add_removed_flags(p)
    remote = p.add_argument_group("on a running `triage serve` (docs/serve.md)")
    remote.add_argument(
        "--server",
        metavar="URL",
        help="send the tickets to this `triage serve` (e.g. http://127.0.0.1:8787) instead of loading a model "
        "here (default: $TRIAGE_SERVER, else the config's server); the same records; --pack must be a pack "
        "the server loaded",
    )
    from triage.commands._token import add_token_options

    add_token_options(remote, "with --server: the server's bearer token")
    ray = p.add_argument_group("backlog on Ray (docs/scale.md)")
    ray.add_argument(
        "--ray",
        nargs="?",
        const="local",
        metavar="ADDRESS",
        help="score on Ray: a local cluster, or join ADDRESS (auto, ray://host:10001)",
    )
    ray.add_argument(
        "--output",
        "-o",
        metavar="PATH",
        help="with --ray: write here (.parquet: a folder of Parquet parts; else JSON Lines; default stdout)",
    )
    ray.add_argument(
        "--workers",
        type=int,
        metavar="N",
        help=(
            "with --ray: scoring actors of --threads threads each (with --ray, "
            "--threads defaults to 1 and --workers to the cluster's CPUs / threads)"
        ),
    )
    ray.add_argument(
        "--batch-size",
        type=int,
        metavar="N",
        help="with --ray: tickets per batch, the most a dead worker loses (default 16)",
    )
    ray.add_argument(
        "--resume",
        action="store_true",
        help="with --ray: skip tickets --output already holds for this model, pack, prompt format and options",
    )


@dataclass
class Row:
    """One input ticket, or the error that stopped it from being one."""

    line: int | None
    ticket_id: str | None
    text: str | None
    error: str | None = None
    messages: object = None  # a thread's messages, as the row gave them (checked by make_ticket)


def read_input(
    file: str | None,
    *,
    force_jsonl: bool,
    force_text: bool,
    ticket_id: str | None,
    columns: ColumnMap | None = None,
) -> list[Row]:
    """Read tickets from a file or stdin (``columns``: a :class:`~triage.intake.columns.ColumnMap` for an export).

    Raises:
        InputError: unreadable file, invalid UTF-8, no input.
    """
    from triage.domain.ticket import read_stream, read_text_file
    from triage.intake.columns import export_tickets, is_export

    export = file not in (None, "-") and not force_text and not force_jsonl and columns is not None
    if export and columns is not None and is_export(str(file), columns):
        return [Row(t.n, t.id or f"row-{t.n}", t.text, t.error) for t in export_tickets(str(file), columns)]

    if file in (None, "-"):
        if sys.stdin is None or sys.stdin.isatty():
            raise InputError("no ticket given", hint="pipe a ticket in (echo '...' | triage score) or pass a FILE")
        text = read_stream(sys.stdin.buffer, "standard input")
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
    from triage.bounded import Bounded, loads_json

    try:
        obj = loads_json(first)
    except Bounded:  # JSON past a bound (nesting, digits): jsonl_lines makes it that line's error
        return True
    except ValueError:
        return False
    return isinstance(obj, dict) and ("text" in obj or "messages" in obj)


def _jsonl_rows(text: str) -> Iterator[Row]:
    from triage.domain.thread import row_body
    from triage.domain.ticket import jsonl_lines

    for item in jsonl_lines(text):
        n = item.line
        if item.obj is None:
            yield Row(n, None, None, f"line {n}: {item.error}")
            continue
        tid = item.row_id()
        try:
            body, messages = row_body(item.obj)
        except InputError as exc:
            yield Row(n, tid, None, f"line {n} (id {tid}): {exc.message}")
            continue
        yield Row(n, tid, body, messages=messages)


def _say(line: str) -> None:
    """One line on stderr, with any escape sequences or control characters of the input removed."""
    from triage.domain.ticket import printable

    print(printable(line), file=sys.stderr)


def options_of(args: argparse.Namespace, pack: Pack) -> ScoreOptions:
    """The :class:`~triage.scoring.options.ScoreOptions` of these arguments: the product's, with ``--criteria``
    checked against ``pack``. One place for ``triage score`` and ``--ray``, so both score alike."""
    from triage.scoring.options import ScoreOptions, parse_criteria

    return ScoreOptions(criteria=parse_criteria(args.criteria, pack))


def fit_request(args: argparse.Namespace, config: dict[str, object]) -> FitRequest:
    """The explicit head and calibration asks of ``--head``, ``--no-head``, ``--calibration``, ``--no-calibration``."""
    from triage.session import FitRequest

    return FitRequest.of(
        head=args.head,
        no_head=args.no_head,
        calibration=args.calibration,
        no_calibration=args.no_calibration,
        config=config,
    )


def say_fit_notes(fits: Fits) -> None:
    """The fit policy's notes on stderr: what is applied, and what was passed over and why."""
    for note in fits.notes:
        _say(f"triage: {'' if note.applied else 'note: '}{note.text}")


def ray_job(args: argparse.Namespace, config: dict[str, object] | None = None) -> RayJob:
    """The :class:`~triage.backlog.ray_score.RayJob` of ``triage score ... --ray [ADDRESS]``.

    Raises:
        InputError: no input file, a bad address, ``--format`` other than jsonl, a bad pack or option.
    """
    from pathlib import Path

    from triage.backlog.ray_score import RayJob, parse_address
    from triage.backlog.worker import default_threads
    from triage.domain.pack import resolve_pack
    from triage.intake.columns import ColumnMap
    from triage.settings import Settings
    from triage.store.config import load_config

    address, source = parse_address(args.ray, args.file)
    if args.format not in (None, "jsonl"):
        raise InputError(
            "--ray writes JSON Lines or Parquet",
            hint="leave out --format; name the output with --output (.parquet for Parquet)",
        )
    config = load_config() if config is None else config
    pack = resolve_pack(args.pack or Settings.of(config).pack)
    return RayJob(
        source=source,
        pack=pack,
        options=options_of(args, pack),
        fits=fit_request(args, config),
        address=address,
        output=Path(args.output).expanduser() if args.output else None,
        model=args.model,
        prompt_style=args.prompt,
        n_ctx=args.n_ctx,
        threads=default_threads() if args.threads is None else args.threads,
        workers=args.workers,
        batch_size=args.batch_size,
        resume=args.resume,
        config=dict(config),
        columns=ColumnMap.parse(
            getattr(args, "text_columns", None),
            getattr(args, "id_column", None),
            keep_html=getattr(args, "keep_html", False),
        ),
    )


def run(args: argparse.Namespace) -> int:
    from triage.commands._remote import remote_token, server_of
    from triage.domain.pack import resolve_pack
    from triage.domain.ticket import make_ticket
    from triage.settings import Settings
    from triage.store.config import load_config

    server = server_of(args)  # --server (or TRIAGE_SERVER, or the config's server): no model is loaded here
    token = remote_token(args, _say) if server is not None else None
    if args.ray is not None:
        from triage.backlog.ray_score import run_ray

        return run_ray(ray_job(args))
    for flag, given in (
        ("--output", args.output),
        ("--workers", args.workers),
        ("--batch-size", args.batch_size),
        ("--resume", args.resume),
    ):
        if given:
            raise InputError(
                f"{flag} works only with --ray", hint="add --ray to score a backlog on a (local) Ray cluster"
            )
    if sys.stdout is None:  # started with its output closed (`>&-`): say so before any work
        raise InputError(
            "standard output is closed, so no record can be written",
            hint="run it with its output redirected to a file or a pipe",
        )
    config = load_config()
    from triage.commands._input import column_map

    rows = read_input(
        args.file, force_jsonl=args.jsonl, force_text=args.text, ticket_id=args.ticket_id, columns=column_map(args)
    )
    if not rows:
        raise InputError("the input holds no tickets")
    if server is None:  # on a server, the server's pack and config decide (--pack is checked against it)
        pack = resolve_pack(args.pack or Settings.of(config).pack)
        options = options_of(args, pack)
    streamed = rows[0].line is not None  # JSON Lines input: records are written as tickets finish
    fmt = args.format or ("table" if sys.stdout.isatty() else "jsonl" if streamed else "json")
    # Check every ticket before loading the model, so a bad single ticket fails fast.
    tickets: list[tuple[Row, Ticket | None]] = []
    for row in rows:
        if row.error is None:
            try:
                text = row.text or "" if row.messages is None else None
                tickets.append((row, make_ticket(text, row.ticket_id, row.messages)))
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
        if server is not None:
            from triage.commands._remote import score_remote

            return score_remote(server, args, tickets, writer, _say, token)
        return _score_all(args, config, pack, options, tickets, writer)
    except KeyboardInterrupt:
        writer.close()
        if streamed:
            from triage import signals

            _say(
                f"triage: {signals.word()} after {writer.written} of "
                f"{len(tickets)} record(s); those written are complete"
            )
        raise
    except BaseException:
        if writer.written:
            writer.close()  # an array already begun is closed, so what was written stays valid
        raise


def _score_all(
    args: argparse.Namespace,
    config: dict[str, object],
    pack: Pack,
    options: ScoreOptions,
    tickets: list[tuple[Row, Ticket | None]],
    writer: RecordWriter,
) -> int:
    from triage.render import print_table
    from triage.scoring.loader import load_engine

    history = _open_history(args, config)  # before the model: a history that cannot be written stops nothing later
    engine = load_engine(
        args.model,
        n_ctx=args.n_ctx,
        threads=args.threads,
        prompt_style=args.prompt,
        notice=lambda m: _say(f"triage: {m}"),
    )
    from triage.commands._starter import fit_starter
    from triage.session import Session
    from triage.settings import Settings

    request = fit_request(args, config)
    session = Session(engine, request=request, history=history, keep_features=Settings.of(config).keep_features)
    keep = history is not None
    # The built-in pack's first use with this model: its starter head, fitted in the background (or here).
    fit_starter(session, pack, wait=args.wait_starter)
    fits = session.fits(pack, options)
    say_fit_notes(fits)
    failed = 0
    kept = 0
    waiting: deque[tuple[Row, Ticket | None]] = deque()  # rows in input order, each with its ticket

    def feed() -> Iterator[Ticket]:
        """The tickets to score (the session keeps each in the history, --history, as the engine takes it)."""
        for row, ticket in tickets:
            waiting.append((row, ticket))
            if ticket is not None:
                yield ticket

    def bad_rows_before(ticket: object) -> Iterator[dict[str, object]]:
        """The error records of the bad rows read before ``ticket`` (None: all that are left)."""
        while waiting and waiting[0][1] is None:
            row = waiting.popleft()[0]
            _say(f"triage: error: {row.error}")
            yield {"ticket_id": row.ticket_id, "line": row.line, "error": row.error}

    with engine:
        for ticket, scoring, done in session.score_many(feed(), pack, options, keep=keep, fits=fits):
            for record in bad_rows_before(ticket):
                failed += 1
                writer.write(record)
            row, _ = waiting.popleft()
            if isinstance(done, TriageError):
                failed += 1
                _say(f"triage: error: ticket {ticket.id}: {done.message}")
                record = {"ticket_id": ticket.id, "line": row.line, "error": done.message}
            else:
                result = done.result
                kept += scoring.kept
                for w in result.warnings:
                    _say(f"triage: warning: ticket {ticket.id}: {w}")
                record = result.to_dict()
                if writer.fmt == "table":
                    print_table(result)
            writer.write(record)
        for record in bad_rows_before(None):
            failed += 1
            writer.write(record)
    writer.close()
    if history is not None:
        _say(f"triage: kept {kept} scored ticket(s) in the history {history.path}")
        history.close()
    return 1 if failed else 0


def _open_history(args: argparse.Namespace, config: dict[str, object]) -> History | None:
    """The history to keep scores in (``--history``), opened for writing, or None."""
    if not args.history:
        if args.history_file:
            raise InputError("--history-file works only with --history")
        return None
    from pathlib import Path

    from triage.store.history import History

    history = History.open_writable(Path(args.history_file) if args.history_file else None)
    if history.notice:  # a damaged history moved aside: both files named
        _say(f"triage: note: {history.notice}")
    return history
