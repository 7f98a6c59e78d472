"""Export a ticket's decisions: JSON (the ``triage.result/3`` schema) or Markdown.

The JSON is exactly :meth:`TicketResult.to_dict`, as ``triage score`` prints
it, so an exported file and a CLI run can be compared or merged; when agents
answered the ticket, a top-level ``labels`` object adds their answers beside it
(per criterion: the option, ``correction`` or ``confirmation``, the decision shown
when it was given, the message count it was given on). Markdown is for people: a
table of decisions (the agent's answer, marked corrected or confirmed, beside what
the model said), then every option's probability. :func:`summary_line` is the
clipboard's line, :func:`marked_summary` the history list's Decisions cell, both
with the agent's answers.

Criteria read at the shared position in one decode (``readout`` ``shared``) carry
no cost of their own: their time and tokens are said as ``shared``, never
``0 ms, 0 tok`` (:func:`tail_cost`).

This module is core: it must not import Textual.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from triage.domain.result import CriterionResult, TicketResult, readout_words
from triage.render import bar

if TYPE_CHECKING:
    from triage.store.label_marks import Standing

Labels = Mapping[str, "Standing"]  # the agent's labels that stand for a result, by criterion (label_marks)
SHARED = "shared"  # a criterion's readout when it was read at the shared position (triage.scoring.cue)

FORMATS = ("json", "markdown")
SUFFIXES = {"json": ".json", "markdown": ".md"}
_BY_SUFFIX = {".json": "json", ".md": "markdown", ".markdown": "markdown"}


def to_json(result: TicketResult, labels: Labels | None = None) -> str:
    """The result as pretty JSON, exactly ``result.to_dict()``; with ``labels``, their ``labels`` object beside it."""
    data = result.to_dict()
    if labels:
        data["labels"] = labels_json(result, labels)
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def labels_json(result: TicketResult, labels: Labels) -> dict[str, dict[str, object]]:
    """The agent's answers, per criterion of ``result``: ``option`` (the decision that stands), ``kind``
    (``correction`` or ``confirmation``), ``shown`` (the decision shown when it was given), ``model`` (the
    model's choice in this result) and ``given_at`` (the thread's messages then)."""
    out: dict[str, dict[str, object]] = {}
    for c in result.criteria:
        s = labels.get(c.id)
        if s is not None:
            out[c.id] = {
                "option": s.option,
                "kind": s.kind,
                "shown": s.shown,
                "model": c.choice,
                "given_at": s.given_at,
            }
    return out


def tail_cost(c: CriterionResult, result: TicketResult | None = None, *, sep: str = ", ") -> str:
    """A criterion's own time and tokens (``40 ms, 31 tok``); ``shared`` for one read at the shared position
    with the others (the decode's cost is carried by one of them: ``8 ms, 1 tok, shared by 5``)."""
    if c.readout == SHARED:
        n = sum(1 for o in result.criteria if o.readout == SHARED) if result is not None else 0
        if not c.tail_tokens and not c.tail_ms:
            return SHARED
        return f"{c.tail_ms:.0f} ms{sep}{c.tail_tokens} tok{sep}shared" + (f" by {n}" if n > 1 else "")
    return f"{c.tail_ms:.0f} ms{sep}{c.tail_tokens} tok"


def _verdict(s: Standing) -> str:
    """``corrected`` or ``confirmed``, with the message count it was given on when carried."""
    word = "corrected" if s.corrected else "confirmed"
    return word + (f" at msg {s.given_at}" if s.carried else "")


def summary_line(result: TicketResult, labels: Labels | None = None) -> str:
    """The clipboard's one line: ``[id] queue=shipping (corrected; model billing 41%), urgency=high (72%)``.

    A labelled criterion shows the agent's answer, marked corrected or confirmed; a correction also says
    what the model said. Without labels it is :meth:`TicketResult.summary`.
    """
    parts = []
    for c in result.criteria:
        p = f"{c.probability(c.choice):.0%}"
        s = (labels or {}).get(c.id)
        if s is None:
            parts.append(f"{c.id}={c.choice} ({p})")
        elif s.option == c.choice:
            parts.append(f"{c.id}={c.choice} ({p}, {_verdict(s)})")
        else:
            parts.append(f"{c.id}={s.option} ({_verdict(s)}; model {c.choice} {p})")
    return f"[{result.ticket_id}] " + ", ".join(parts)


def marked_summary(summary: str, labels: Labels | None) -> str:
    """A stored summary (:meth:`TicketResult.summary`, without its ``[id]``) with the agent's answers put in:
    ``queue=shipping ✔ (model billing 41%), urgency=high ✔ (72%)`` (``✔``: a label; a correction shows what the
    model said). Parts it cannot read are left as they are."""
    if not labels:
        return summary
    out = []
    for part in summary.split(", "):
        criterion, eq, rest = part.partition("=")
        s = labels.get(criterion)
        choice, _, p = rest.partition(" (")
        if not eq or s is None or not p.endswith(")"):
            out.append(part)
        elif s.option == choice:
            out.append(f"{criterion}={choice} ✔ ({p[:-1]}, confirmed)")
        else:
            out.append(f"{criterion}={s.option} ✔ (corrected; model {choice} {p[:-1]})")
    return ", ".join(out)


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(text.split()).replace("\\", "\\\\").replace("|", "\\|")


def to_markdown(result: TicketResult, ticket_text: str | None = None, labels: Labels | None = None) -> str:
    """The result as a Markdown report (optionally with the ticket's text). With ``labels`` (the agent's answers
    that stand for it) the decisions table gives the agent's answer, marked corrected or confirmed, beside what
    the model said."""
    t, tok, model, pack = result.timing, result.tokens, result.model, result.pack
    stand_in = " (stand-in)" if model.get("stand_in") else ""
    when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(result.created_at)) if result.created_at else "unknown"
    lines = [
        f"# Ticket {result.ticket_id}",
        "",
        f"- Model: {model.get('name')}{stand_in}, sha256 `{str(model.get('sha256', ''))[:16]}`",
        f"- Pack: {pack.get('name')} v{pack.get('version')} (`{pack.get('hash')}`)",
        f"- Scored: {when}; mode {result.mode}, options read {readout_words(result.readout, result.orderings)}"
        + (f", calibration {result.calibration}" if result.calibration else ""),
        f"- Time: prefill {t.prefill_ms:.0f} ms, total {t.total_ms:.0f} ms; prefix {tok.prefix} tokens, "
        f"{tok.prefix_cached} cached (hit rate {tok.hit_rate:.0%})",
    ]
    if not result.complete:  # the read stopped: its planned figures are not what it did
        lines[-1] = f"- Time: cancelled after {t.total_ms:.0f} ms, {len(result.criteria)} decision(s) made"
        lines.append("- **Incomplete**: scoring was cancelled before every criterion was answered.")
    if labels:
        lines += [
            "",
            "| Criterion | Decision | Agent | Model said | p | Margin | Tail |",
            "|---|---|---|---|---:|---:|---:|",
        ]
    else:
        lines += ["", "| Criterion | Decision | p | Margin | Tail |", "|---|---|---:|---:|---:|"]
    for c in result.criteria:
        s = (labels or {}).get(c.id)
        decided = s.option if s is not None else c.choice
        agent = f"{_verdict(s)} |" if s is not None else "— |"
        lines.append(
            f"| {_cell(c.id)} | **{_cell(decided)}** |"
            + (f" {agent} {_cell(c.choice)} |" if labels else "")
            + f" {c.probability(c.choice):.1%} | {c.margin * 100:.1f} pts | {tail_cost(c, result)} |"
        )
    for c in result.criteria:
        s = (labels or {}).get(c.id)
        lines += ["", f"## {c.id}: {_cell(c.question)}", "", "| Option | p | |", "|---|---:|---|"]
        for o in sorted(c.options, key=lambda o: -o.probability):
            marks = ["model's choice" if s is not None else "chosen"] if o.id == c.choice else []
            if s is not None and o.id == s.option:
                marks.append(f"agent, {_verdict(s)}")
            name = f"**{_cell(o.id)}** ({'; '.join(marks)})" if marks else _cell(o.id)
            lines.append(f"| {name} | {o.probability:.1%} | `{bar(o.probability, 20).rstrip() or ' '}` |")
        for w in c.warnings:
            lines += ["", f"> Warning: {w}"]
    if result.warnings:
        lines += ["", "## Warnings", ""] + [f"- {w}" for w in result.warnings]
    if ticket_text is not None:
        fence = "~~~~" if "```" in ticket_text else "```"
        lines += ["", "## Ticket", "", f"{fence}text", ticket_text, fence]
    return "\n".join(lines) + "\n"


def format_for(path: Path, fmt: str | None = None) -> str:
    """The export format: ``fmt`` when given, else from the file suffix (default JSON)."""
    if fmt is not None:
        if fmt not in FORMATS:
            raise ValueError(f"unknown export format {fmt!r}; use json or markdown")
        return fmt
    return _BY_SUFFIX.get(path.suffix.lower(), "json")


def default_name(result: TicketResult, fmt: str) -> str:
    """A file name for an export, e.g. ``triage-1a2b3c4d5e6f.json``."""
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in result.ticket_id) or "ticket"
    return f"triage-{safe}{SUFFIXES[fmt]}"


def export_result(
    result: TicketResult,
    path: str | Path,
    *,
    fmt: str | None = None,
    ticket_text: str | None = None,
    labels: Labels | None = None,
) -> Path:
    """Write the result to ``path`` atomically (an existing file is replaced whole).

    Args:
        result: what to export.
        path: the file to write; ``~`` is expanded and folders are created.
        fmt: ``json`` or ``markdown``; default from the suffix.
        ticket_text: included in Markdown only (the JSON schema has no ticket text).
        labels: the agent's answers that stand for ``result`` (:func:`triage.store.label_marks.standing_for`).

    Returns:
        The path written.

    Raises:
        OSError: the file cannot be written.
        InputError: the path is a folder, a database or its side file, a socket (the output guard).
    """
    from triage.store.outputs import check_output, write_output

    path = Path(path).expanduser()
    kind = format_for(path, fmt)
    body = to_json(result, labels) if kind == "json" else to_markdown(result, ticket_text, labels)
    # the caller asked before replacing a file; the guard still refuses a folder, a database, a socket
    return write_output(check_output(path, force=True, what="export"), body)
