"""Export a ticket's decisions: JSON (the ``triage.result/3`` schema) or Markdown.

The JSON is exactly :meth:`TicketResult.to_dict`, as ``triage score`` prints
it, so an exported file and a CLI run can be compared or merged. Markdown is
for people: a table of decisions, then every option's probability.

This module is core: it must not import Textual.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from triage.domain.result import TicketResult, readout_words
from triage.render import bar

FORMATS = ("json", "markdown")
SUFFIXES = {"json": ".json", "markdown": ".md"}
_BY_SUFFIX = {".json": "json", ".md": "markdown", ".markdown": "markdown"}


def to_json(result: TicketResult) -> str:
    """The result as pretty JSON, exactly ``result.to_dict()``."""
    return json.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n"


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return " ".join(text.split()).replace("\\", "\\\\").replace("|", "\\|")


def to_markdown(result: TicketResult, ticket_text: str | None = None) -> str:
    """The result as a Markdown report (optionally with the ticket's text)."""
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
    if not result.complete:
        lines.append("- **Incomplete**: scoring was cancelled before every criterion was answered.")
    lines += ["", "| Criterion | Decision | p | Margin | Tail |", "|---|---|---:|---:|---:|"]
    for c in result.criteria:
        lines.append(
            f"| {_cell(c.id)} | **{_cell(c.choice)}** | {c.probability(c.choice):.1%} | {c.margin * 100:.1f} pts "
            f"| {c.tail_ms:.0f} ms, {c.tail_tokens} tok |"
        )
    for c in result.criteria:
        lines += ["", f"## {c.id}: {_cell(c.question)}", "", "| Option | p | |", "|---|---:|---|"]
        for o in sorted(c.options, key=lambda o: -o.probability):
            name = f"**{_cell(o.id)}** (chosen)" if o.id == c.choice else _cell(o.id)
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
    result: TicketResult, path: str | Path, *, fmt: str | None = None, ticket_text: str | None = None
) -> Path:
    """Write the result to ``path`` atomically (an existing file is replaced whole).

    Args:
        result: what to export.
        path: the file to write; ``~`` is expanded and folders are created.
        fmt: ``json`` or ``markdown``; default from the suffix.
        ticket_text: included in Markdown only (the JSON schema has no ticket text).

    Returns:
        The path written.

    Raises:
        OSError: the file cannot be written.
        InputError: the path is a folder, a database or its side file, a socket (the output guard).
    """
    from triage.store.outputs import check_output, write_output

    path = Path(path).expanduser()
    kind = format_for(path, fmt)
    body = to_json(result) if kind == "json" else to_markdown(result, ticket_text)
    # the caller asked before replacing a file; the guard still refuses a folder, a database, a socket
    return write_output(check_output(path, force=True, what="export"), body)
