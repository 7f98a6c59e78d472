"""``triage score``: score tickets from stdin, a file, or JSONL, and print the result schema."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from triage.errors import InputError, TriageError

NAME = "score"
ORDER = 10
HELP = "score tickets and print each decision (JSON, JSONL or a table)"
DESCRIPTION = """\
Score one ticket (from FILE or stdin), or many from JSON Lines, against a
criteria pack. Each ticket prints as one object of the triage.result/1 schema
(docs/schema.md).

Input: plain text is one ticket. JSON Lines (one {"id": ..., "text": ...}
object per line) is detected from a .jsonl name or a first line that is such an
object; force either with --jsonl / --text. A bad JSONL line is reported, gets
an error record in the output, and the other tickets are still scored; the exit
status is then 1.

A backlog runs on Ray with --ray (a local cluster) or --ray ADDRESS (an existing
one): the same scoring and options, JSON Lines or Parquet in (a file, folder or
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
    p.add_argument("--mode", choices=("full", "serial", "fanout"), default=None, help="how to evaluate (default serial)")
    p.add_argument("--strategy", choices=("truncate", "restore"), default="truncate", help="serial mode's way back to the prefix (default truncate)")
    p.add_argument("--orderings", choices=("none", "cyclic"), default=None, help="ask options in pack order only, or in every rotation (default cyclic)")
    p.add_argument("--criteria", metavar="ID,ID", help="score only these criteria of the pack, by id (default: all); the scores are those of a whole-pack run")
    p.add_argument("--prior", action="store_true", default=None, help="divide out the content-free prior (an 'N/A' ticket)")
    p.add_argument("--calibration", metavar="CAL.json", help="apply this calibration file (default: the stored one fitted for this model, pack and prompt format, if any)")
    p.add_argument("--no-calibration", action="store_true", help="do not apply any calibration")
    p.add_argument("--prompt", choices=("auto", "chat", "plain"), default="auto", help="prompt format (default: from the model's chat template)")
    p.add_argument("--format", choices=("json", "jsonl", "table"), default=None, help="output (default: table on a terminal, else json)")
    p.add_argument("--id", dest="ticket_id", metavar="ID", help="ticket id for a single plain-text ticket")
    kind = p.add_mutually_exclusive_group()
    kind.add_argument("--jsonl", action="store_true", help="treat input as JSON Lines")
    kind.add_argument("--text", action="store_true", help="treat input as one plain-text ticket")
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


def read_input(file: str | None, *, force_jsonl: bool, force_text: bool, ticket_id: str | None) -> list[Row]:
    """Read tickets from a file or stdin.

    Raises:
        InputError: unreadable file, invalid UTF-8, no input.
    """
    from triage.ticket import decode_ticket_bytes, read_text_file

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
    from triage.ticket import jsonl_lines

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
    """The :class:`~triage.engine.ScoreOptions` of these arguments and config: one place for
    ``triage score`` and ``--ray``, so both always score with the same options."""
    from triage.engine import ScoreOptions

    return ScoreOptions(
        mode=args.mode or config.get("mode", "serial"),
        strategy=args.strategy,
        orderings=args.orderings or config.get("orderings", "cyclic"),
        prior=bool(args.prior if args.prior is not None else config.get("prior", False)),
        criteria=chosen_criteria(args.criteria, pack),
    )


def choose_calibration(args: argparse.Namespace, config: dict[str, Any], engine: Any, pack: Any, options: Any) -> Any:
    """The calibration to apply (``--calibration``, else the stored one), or None; says which.

    ``engine`` needs only ``sha256`` and ``fmt.id`` (``--ray`` passes what the nodes reported).

    Raises:
        InputError: an explicit calibration that does not fit the model, pack or options.
    """
    from triage.calibrate import auto_calibration, check_options, load_calibration

    explicit = args.calibration or config.get("calibration")
    if args.no_calibration:
        return None
    calibration = load_calibration(explicit, engine=engine, pack=pack) if explicit else auto_calibration(engine, pack)
    if calibration is None:
        return None
    why = check_options(calibration, orderings=options.orderings, prior=options.prior)
    if why and explicit:
        raise InputError(f"calibration {explicit} does not fit these options: {why}", hint="score with the options it was fitted on, or pass --no-calibration")
    if why:
        print(f"triage: note: stored calibration {calibration.name} not applied: {why}", file=sys.stderr)
        return None
    print(f"triage: applying calibration {calibration.name}", file=sys.stderr)
    return calibration


def run(args: argparse.Namespace) -> int:
    from triage.config import load_config
    from triage.loader import load_engine
    from triage.pack import resolve_pack
    from triage.render import print_table
    from triage.ticket import make_ticket

    if args.ray is not None:
        from triage.backlog.ray_score import run_ray

        return run_ray(args)
    for flag, given in (("--output", args.output), ("--workers", args.workers), ("--batch-size", args.batch_size), ("--resume", args.resume)):
        if given:
            raise InputError(f"{flag} works only with --ray", hint="add --ray to score a backlog on a (local) Ray cluster")
    config = load_config()
    rows = read_input(args.file, force_jsonl=args.jsonl, force_text=args.text, ticket_id=args.ticket_id)
    if not rows:
        raise InputError("the input holds no tickets")
    pack = resolve_pack(args.pack or config.get("pack"))
    options = score_options(args, config, pack)
    fmt = args.format or ("table" if sys.stdout.isatty() else "json")
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
    if len(rows) == 1 and rows[0].error:
        raise InputError(rows[0].error)

    engine = load_engine(args.model, n_ctx=args.n_ctx, threads=args.threads, prompt_style=args.prompt, notice=lambda m: print(f"triage: {m}", file=sys.stderr))
    calibration = choose_calibration(args, config, engine, pack, options)
    failed = 0
    outputs: list[dict[str, Any]] = []
    with engine:
        for row, ticket in tickets:
            if ticket is None:
                failed += 1
                print(f"triage: error: {row.error}", file=sys.stderr)
                record = {"ticket_id": row.ticket_id, "line": row.line, "error": row.error}
            else:
                try:
                    result = engine.score_ticket(
                        ticket, pack, options,
                        calibrator=calibration.apply if calibration else None,
                        calibration_name=calibration.name if calibration else None,
                    )
                except TriageError as exc:
                    failed += 1
                    print(f"triage: error: ticket {ticket.id}: {exc.message}", file=sys.stderr)
                    record = {"ticket_id": ticket.id, "line": row.line, "error": exc.message}
                else:
                    for w in result.warnings:
                        print(f"triage: warning: ticket {ticket.id}: {w}", file=sys.stderr)
                    record = result.to_dict()
                    if fmt == "table":
                        print_table(result)
            if fmt == "jsonl":
                print(json.dumps(record, ensure_ascii=False), flush=True)
            elif fmt == "json":
                outputs.append(record)
    if fmt == "json":
        payload: Any = outputs[0] if len(outputs) == 1 else outputs
        print(json.dumps(payload, indent=2, ensure_ascii=False))
    return 1 if failed else 0
