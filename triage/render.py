"""Plain-terminal rendering of results with Rich (the CLI's ``--format table``)."""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from triage.scoring.result import TicketResult, readout_words
from triage.scoring.ticket import printable

BAR_WIDTH = 20


def bar(p: float, width: int = BAR_WIDTH) -> str:
    """A horizontal bar of ``width`` cells for probability ``p`` (eighth-block resolution)."""
    eighths = round(max(0.0, min(1.0, p)) * width * 8)
    full, rest = divmod(eighths, 8)
    partial = " ▏▎▍▌▋▊▉"[rest] if rest else ""
    return ("█" * full + partial).ljust(width)


def safe(text: object) -> str:
    """A user string (an id, a name) for Rich markup: no terminal escapes, no markup of its own."""
    return escape(printable(text))


def print_table(result: TicketResult, console: Console | None = None) -> None:
    """Print one ticket's decisions as a table with bars."""
    console = console or Console()
    t = result.timing
    tok = result.tokens
    title = safe(
        f"ticket {result.ticket_id} · {result.model['name']} · pack {result.pack['name']} v{result.pack['version']} · "
        f"{result.mode}, {readout_words(result.readout, result.orderings)}"
    )
    table = Table(title=title, title_justify="left", show_lines=False, expand=False)
    table.add_column("criterion", style="bold")
    table.add_column("option")
    table.add_column("p", justify="right")
    table.add_column("", no_wrap=True)
    table.add_column("decided by", style="dim")
    table.add_column("tail", justify="right", style="dim")
    for crit in result.criteria:
        first = True
        for opt in sorted(crit.options, key=lambda o: -o.probability):
            chosen = opt.id == crit.choice
            style = "bold green" if chosen else ""
            table.add_row(
                safe(crit.id) if first else "",
                f"[{style}]{safe(opt.id)}[/]" if style else safe(opt.id),
                f"{opt.probability:6.1%}",
                f"[{style or 'dim'}]{bar(opt.probability)}[/]",
                crit.source if first else "",
                f"{crit.tail_ms:.0f} ms · {crit.tail_tokens} tok" if first else "",
            )
            first = False
        if crit.warnings:
            table.add_row("", f"[yellow]{safe('; '.join(crit.warnings))}[/]", "", "", "", "")
    console.print(table)
    console.print(
        f"prefill {t.prefill_ms:.0f} ms · total {t.total_ms:.0f} ms · prefix {tok.prefix} tokens, "
        f"{tok.prefix_cached} cached · hit rate {tok.hit_rate:.0%}",
        style="dim",
    )
    for w in result.warnings:
        console.print(f"warning: {printable(w)}", style="yellow", markup=False)


def percent(rate: float | None) -> str:
    """A rate as a whole percentage, or a dash when there is none."""
    return "—" if rate is None else f"{rate:.0%}"


def _agreement_cells(rows: list[Any], trend_blocks: int) -> tuple[bool, list[str], list[list[str]]]:
    """(one pack?, the column names, per row its cells) of the agreement figures; the first cell is the
    criterion's name as given (the table escapes it, the lines only make it printable)."""
    from triage.evaluation.agreement import RECENT

    one_pack = len({r.pack for r in rows}) == 1
    columns = ["criterion", "labels", "fixed", "agree", "balanced", f"last {RECENT}", "by source"]
    columns += ["trend"] if trend_blocks else []
    cells = []
    for r in rows:
        row = [
            r.criterion if one_pack else f"{r.pack}/{r.criterion}",
            str(r.labels),
            str(r.corrections),
            percent(r.overall.rate),
            percent(r.balanced),
            percent(r.recent.rate),
            ", ".join(f"{s} {percent(v.rate)} of {v.n}" for s, v in r.by_source.items()),
        ]
        if trend_blocks:
            row.append(" ".join(percent(t.rate) for t in r.trend[-trend_blocks:]))
        cells.append(row)
    return one_pack, columns, cells


def _trend_said(trend_blocks: int) -> str:
    from triage.evaluation.agreement import BLOCK

    return f"; trend: agreement per block of {BLOCK} labels, oldest first" if trend_blocks else ""


def agreement_lines(rows: list[Any], *, trend_blocks: int = 0) -> list[str]:
    """The figures of :func:`agreement_table` as plain lines, a criterion to a line, for a console too narrow
    for the table."""
    one_pack, columns, cells = _agreement_cells(rows, trend_blocks)
    out = []
    for name, labels, fixed, *rest in cells:
        parts = [f"{labels} label(s), {fixed} fixed"] + [f"{c} {v}" for c, v in zip(columns[3:], rest, strict=True)]
        out.append(f"{printable(name)}: " + "; ".join(parts))  # printed without markup: no escape needed
    if one_pack and rows:
        out.append(
            f"pack {printable(rows[0].pack)}; balanced: agreement averaged over the options answered"
            + _trend_said(trend_blocks)
        )
    return out


def agreement_table(rows: list[Any], *, trend_blocks: int = 0, title: str | None = None) -> Table:
    """The agreement table of ``triage stats`` and the app's agreement screen (F7), from
    :func:`triage.evaluation.agreement.agreement`'s rows.

    Per criterion: labels, corrections, agreement overall, balanced over the options, over the newest
    answers and by what decided; with ``trend_blocks``, the newest that many blocks of the trend too.
    """
    one_pack, columns, cells = _agreement_cells(rows, trend_blocks)
    table = Table(title=title, title_justify="left", expand=not trend_blocks)
    wraps = {"by source": 9, "trend": 6}  # the columns that wrap, and their narrowest width
    for col in columns:
        table.add_column(
            col,
            justify="right" if col in ("labels", "fixed") else "left",
            no_wrap=col not in wraps,
            min_width=wraps.get(col),
        )
    for name, *rest in cells:
        table.add_row(safe(name), *rest)
    if one_pack and rows:
        table.caption = (
            f"pack {safe(rows[0].pack)}; fixed: corrections; balanced: agreement averaged over the options "
            "answered (always showing the commonest option is at chance there)" + _trend_said(trend_blocks)
        )
    return table
