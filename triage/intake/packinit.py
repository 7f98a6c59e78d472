"""Write a criteria pack from a helpdesk export (``triage pack init``): one criterion per label column.

Each distinct value of a column (case and spacing ignored) becomes an option: a readable,
unique id made from the value, the value itself as label and as alias (so the team may
rename the label and rows still map), and its count in a comment. Values seen in fewer
than ``min_count`` rows, and any past the 25 most frequent, are merged into one ``other``
option whose aliases list them. Questions come from a template by the criterion's id;
every option carries a comment asking for a short description. The result is checked
with the pack loader (the same answer-word check every pack gets) before anything is
written, and an existing file is never overwritten unless asked.

Reading streams the export and keeps only value counts: memory is bounded by the number
of distinct values (at most :data:`MAX_DISTINCT` per column), not the number of rows.
"""

from __future__ import annotations

import json
import re
import tomllib
import unicodedata
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from triage import gate
from triage.domain.pack import LETTERS, Pack, parse_pack, readable_id, value_key
from triage.errors import InputError
from triage.intake.columns import as_text, cell_problem, check_columns, get_value, label_text
from triage.intake.readers import open_export

MIN_COUNT = 5  # learn's default --min-per-option: a rarer value cannot be learned on its own
MAX_DISTINCT = 1000
OTHER = "other"
QUESTIONS = {
    "queue": "Which queue should handle this ticket?",
    "group": "Which group should handle this ticket?",
    "team": "Which team should handle this ticket?",
    "department": "Which department should handle this ticket?",
    "priority": "What priority should this ticket get?",
    "urgency": "How urgent is this ticket?",
    "severity": "How severe is the problem in this ticket?",
    "type": "What type of ticket is this?",
    "category": "Which category does this ticket belong to?",
    "product": "Which product is this ticket about?",
    "sentiment": "What is the customer's sentiment?",
}
INSTRUCTION = "You are a help-desk triage assistant. Read the customer's ticket, then answer each question about it."


@dataclass
class OptionPlan:
    """One option to write: id, label, aliases and the rows it stands for."""

    id: str
    label: str
    aliases: list[str]
    count: int
    merged: list[tuple[str, int]] = field(default_factory=list)  # for ``other``: the values merged in


@dataclass
class CriterionPlan:
    """One criterion to write, from one column."""

    id: str
    column: str
    question: str
    options: list[OptionPlan]
    labelled: int
    empty: int
    distinct: int


@dataclass
class PackPlan:
    """What ``pack init`` read and will write."""

    source: str
    name: str
    rows: int
    bad: int
    no_text: int
    criteria: list[CriterionPlan]
    notice: str | None = None
    text: str = ""  # the TOML
    pack: Pack | None = None


def parse_criteria(spec: Sequence[str]) -> dict[str, str]:
    """``--criteria queue=Group,priority=Priority`` (repeatable) as criterion id -> column.

    Raises:
        InputError: an item that is not ``ID=COLUMN``, or a repeated id.
    """
    out: dict[str, str] = {}
    for part in (p.strip() for item in spec for p in item.split(",")):
        if not part:
            continue
        cid, eq, col = part.partition("=")
        cid, col = slug(cid.strip()), col.strip()
        if not eq or not cid or not col:
            raise InputError(
                f"--criteria wants ID=COLUMN items, got {part!r}", hint="e.g. --criteria queue=Group,priority=Priority"
            )
        if cid in out:
            raise InputError(f"--criteria names criterion {cid!r} twice")
        out[cid] = col
    if not out:
        raise InputError("--criteria names no criterion", hint="e.g. --criteria queue=Group,priority=Priority")
    return out


def slug(value: str) -> str:
    """A readable id from a value: ``Billing and Payments`` -> ``billing_and_payments`` (ASCII, lower case)."""
    text = unicodedata.normalize("NFKD", value).encode("ascii", "ignore").decode("ascii").lower()
    return re.sub(r"[^a-z0-9]+", "_", text).strip("_")


def plan_pack(
    path: str | Path,
    text_columns: Sequence[str],
    criteria: dict[str, str],
    *,
    name: str | None = None,
    min_count: int = MIN_COUNT,
    id_column: str | None = None,
) -> PackPlan:
    """Read the export once and decide the pack (nothing is written).

    Raises:
        InputError: a column the export does not have, an empty export, a column that is empty
            in every row, has one value only, or more than :data:`MAX_DISTINCT` values, or a
            pack the loader refuses.
    """
    path = Path(path)
    export = open_export(path)
    names = export.columns
    wanted = {"--text": list(text_columns), "--criteria": list(criteria.values())}
    if id_column:
        wanted["--id"] = [id_column]
    check_columns(wanted, names, str(path))
    counts = {cid: Counter[str]() for cid in criteria}
    spelled: dict[str, dict[str, Counter[str]]] = {cid: {} for cid in criteria}
    empty = dict.fromkeys(criteria, 0)
    rows = bad = no_text = 0
    for rec in export.records():
        if rec.data is None:
            bad += 1
            continue
        rows += 1
        if not any(as_text(get_value(rec.data, c)).strip() for c in text_columns):  # raw: no HTML parsed for a count
            no_text += 1
        for cid, col in criteria.items():
            raw = get_value(rec.data, col)
            problem = cell_problem(raw, col, "a label")
            if problem is not None:  # a list column (tags) is no decision with one option per row
                raise InputError(f"{export.path} {rec.where}: {problem}", hint="name a column with one value per row")
            value = label_text(raw)  # a missing value (None, NaN, an empty cell) is empty
            if not value:
                empty[cid] += 1
                continue
            key = value_key(value)
            if key not in counts[cid] and len(counts[cid]) >= MAX_DISTINCT:
                raise InputError(
                    f"column {col!r} has more than {MAX_DISTINCT} different values; "
                    "it is not a decision with a few options",
                    hint="name a column such as a group, queue, priority or type",
                )
            counts[cid][key] += 1
            spelled[cid].setdefault(key, Counter())[value] += 1
    if rows == 0:
        raise InputError(
            f"the export {path} holds no rows" + (f" ({bad} unreadable record(s))" if bad else ""),
            hint="export the tickets again, with their rows",
        )
    plans = []
    for cid, col in criteria.items():
        if not counts[cid]:
            raise InputError(
                f"column {col!r} (criterion {cid!r}) is empty in all {rows} row(s) of {path}",
                hint="name the column that holds this decision: --criteria ID=COLUMN",
            )
        plans.append(_criterion(cid, col, counts[cid], spelled[cid], empty[cid], min_count))
    plan = PackPlan(str(path), slug(name or path.stem) or "team", rows, bad, no_text, plans, export.notice)
    plan.text = render(plan)
    try:
        plan.pack = parse_pack(gate.loads_toml(plan.text), str(path.with_suffix(".toml")))
    except (tomllib.TOMLDecodeError, InputError) as exc:  # a bug here, or values the loader cannot take
        raise InputError(f"the pack written from {path} does not load: {getattr(exc, 'message', exc)}") from None
    return plan


def _criterion(
    cid: str, col: str, counts: Counter[str], spelled: dict[str, Counter[str]], empty: int, min_count: int
) -> CriterionPlan:
    ranked = counts.most_common()
    keep = [(k, n) for k, n in ranked if n >= min_count and k != OTHER][: len(LETTERS) - 1]
    kept = {k for k, _ in keep}
    merged = [(spelled[k].most_common(1)[0][0], n) for k, n in ranked if k not in kept]
    if len(keep) + (1 if merged else 0) < 2:
        raise InputError(
            f"column {col!r} (criterion {cid!r}) has {len(counts)} value(s), "
            f"and only {len(keep)} seen at least {min_count} times; "
            "a criterion needs two options or more",
            hint="lower --min-count, or choose a column with more than one value",
        )
    options: list[OptionPlan] = []
    used: set[str] = {OTHER}
    for k, n in keep:
        label = spelled[k].most_common(1)[0][0]
        base = slug(label) or f"option_{len(options) + 1}"
        oid, i = base, 2
        while oid in used or any(readable_id(oid).casefold() == readable_id(u).casefold() for u in used):
            oid, i = f"{base}_{i}", i + 1
        used.add(oid)
        options.append(OptionPlan(oid, label[:80], [label], n))
    if merged:
        options.append(OptionPlan(OTHER, "Other", [v for v, _ in merged], sum(n for _, n in merged), merged))
    question = QUESTIONS.get(cid, f"What {readable_id(cid)} should this ticket have?")
    return CriterionPlan(cid, col, question, options, sum(counts.values()), empty, len(counts))


def _q(value: str) -> str:
    return json.dumps(value, ensure_ascii=False)  # a JSON string is a TOML basic string


def render(plan: PackPlan) -> str:
    """The pack as TOML, with the counts and the review comments."""
    lines = [
        f"# Written by `triage pack init` from {Path(plan.source).name}: {plan.rows} row(s).",
        "# Review it before you rely on it: reword each question, give each option a short",
        "# description (what it covers, in a few words), and check the merged `other` options.",
        "# Aliases are your export's own values: a row maps to the option whose id, label or",
        "# alias it names (case and spacing ignored); they are not shown to the model.",
        "[pack]",
        f"name = {_q(plan.name)}",
        'version = "1"',
        f"instruction = {_q(INSTRUCTION)}",
    ]
    for c in plan.criteria:
        lines += [
            "",
            "[[criterion]]",
            f"# from column {_q(c.column)}: {c.distinct} value(s) in {c.labelled} labelled row(s), "
            f"{c.empty} row(s) without one",
            f"id = {_q(c.id)}",
            f"question = {_q(c.question)}  # review: the question the model answers",
        ]
        for o in c.options:
            share = 100.0 * o.count / c.labelled
            lines += ["", "[[criterion.options]]"]
            if o.merged:
                shown = ", ".join(f"{v} ({n})" for v, n in o.merged[:12]) + (
                    f" and {len(o.merged) - 12} more" if len(o.merged) > 12 else ""
                )
                lines.append(f"# {o.count} row(s) ({share:.1f}%), {len(o.merged)} rare value(s) merged: {shown}")
                lines.append("# review: keep them together, or give a frequent one an option of its own")
            else:
                lines.append(f"# {o.count} row(s) ({share:.1f}%)")
            lines += [
                f"id = {_q(o.id)}",
                f"label = {_q(o.label)}",
                f"aliases = [{', '.join(_q(a) for a in o.aliases)}]",
                '# description = ""  # review: what does this option cover, in a few words?',
            ]
    return "\n".join(lines) + "\n"


def write_pack(plan: PackPlan, output: str | Path, *, force: bool = False) -> Path:
    """Write the planned pack (atomically; an existing file only with ``force``; never over its export).

    Raises:
        InputError: ``output`` is the export, a database, a folder, or exists and ``force`` is not set
            (:func:`triage.store.outputs.check_output`).
    """
    from triage.store.outputs import check_output, write_output

    out = check_output(output, inputs=[plan.source], force=force, what="pack")
    return write_output(out, plan.text)
