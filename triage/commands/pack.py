"""``triage pack init``: write a criteria pack from a helpdesk export, one criterion per label column."""

from __future__ import annotations

import argparse

NAME = "pack"
ORDER = 44
HELP = "write a criteria pack from a helpdesk export (pack init)"
DESCRIPTION = """\
pack init reads an export (CSV, JSON Lines, a JSON array or Parquet; see
`triage learn --help`) and writes a pack with one criterion per --criteria column
and one option per distinct value of it: a readable unique id made from the value,
the value as label and as alias (rename the label freely; rows still map by the
alias), the value's row count in a comment. Values seen in fewer than --min-count
rows (default 5, learn's --min-per-option), and any past the 25 most frequent, are
merged into one `other` option that lists them. Questions come from a template by
the criterion id (queue, priority, type, ...); each option gets a comment asking
for a short description. The pack is checked with the pack loader before it is
written; an existing -o file is kept unless --force.

examples:
  triage pack init tickets.csv --text Subject,Description --criteria queue=Group,priority=Priority -o team.toml
  triage pack init zendesk.jsonl --text ticket.subject,ticket.description --criteria type=ticket.type -o team.toml"""


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="pack_command", metavar="SUBCOMMAND", required=True)
    init = sub.add_parser(
        "init",
        help="write a pack from an export's label columns",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    init.add_argument("export", metavar="EXPORT", help="the export: CSV, JSON Lines, a JSON array or Parquet")
    init.add_argument(
        "--text",
        dest="text_columns",
        required=True,
        metavar="COL[,COL...]",
        help="the column(s) holding the ticket text (checked to exist)",
    )
    init.add_argument(
        "--criteria",
        action="append",
        required=True,
        metavar="ID=COL[,ID=COL...]",
        help="a criterion per label column, e.g. queue=Group,priority=Priority (repeatable)",
    )
    init.add_argument(
        "--id",
        dest="id_column",
        metavar="COL",
        help="the column holding the ticket id (checked to exist; printed in the next command)",
    )
    init.add_argument(
        "-o",
        "--output",
        required=True,
        metavar="PACK.toml",
        help="write the pack here (an existing file only with --force)",
    )
    init.add_argument("--name", metavar="NAME", help="the pack's name (default: the export's file name)")
    init.add_argument(
        "--min-count",
        type=int,
        default=None,
        metavar="N",
        help="values in fewer rows are merged into `other` (default 5)",
    )
    init.add_argument("--force", action="store_true", help="replace an existing -o file")


def run(args: argparse.Namespace) -> int:
    import shlex

    from triage.domain.ticket import printable
    from triage.errors import InputError
    from triage.intake.packinit import MIN_COUNT, parse_criteria, plan_pack, write_pack

    min_count = MIN_COUNT if args.min_count is None else args.min_count
    if min_count < 1:
        raise InputError(f"--min-count must be at least 1, got {min_count}")
    text_columns = [c.strip() for c in args.text_columns.split(",") if c.strip()]
    if not text_columns:
        raise InputError(f"--text names no column: {args.text_columns!r}")
    criteria = parse_criteria(args.criteria)
    from triage.store.outputs import check_output

    check_output(args.output, inputs=[args.export], force=args.force, what="pack")  # before the export is read
    plan = plan_pack(args.export, text_columns, criteria, name=args.name, min_count=min_count, id_column=args.id_column)
    path = write_pack(plan, args.output, force=args.force)

    def say(line: str) -> None:
        print(printable(line))

    if plan.notice:
        say(f"triage: {plan.notice}")
    say(
        f"wrote {path}: pack {plan.name!r}, {len(plan.criteria)} criteria from {plan.rows} row(s) of {plan.source}"
        + (f" ({plan.bad} unreadable record(s) skipped)" if plan.bad else "")
    )
    if plan.no_text:
        say(f"  {plan.no_text} row(s) have no text in {', '.join(text_columns)}; learn and eval will skip them")
    for c in plan.criteria:
        other = next((o for o in c.options if o.merged), None)
        merged = f", {len(other.merged)} rare value(s) ({other.count} rows) merged into 'other'" if other else ""
        say(
            f"  {c.id} (column {c.column!r}): {len(c.options)} options from {c.distinct} value(s){merged}; "
            f"{c.empty} row(s) without a value"
        )
    say("review before you rely on it:")
    say("  - each question (written from a template) and each option's label")
    say("  - a short description for every option (the comment under it): the model reads them")
    if any(o.merged for c in plan.criteria for o in c.options):
        say("  - the merged 'other' options: keep them together, or give a frequent value an option of its own")
    labels = " ".join(f"--label {shlex.quote(f'{cid}={col}')}" for cid, col in criteria.items())
    idf = f" --id {shlex.quote(args.id_column)}" if args.id_column else ""
    say(
        f"next: triage learn {shlex.quote(args.export)} --pack {shlex.quote(str(path))} "
        f"--text {shlex.quote(args.text_columns)}{idf} {labels} --holdout 0.3"
    )
    return 0
