"""Plain-terminal rendering of results with Rich (the CLI's ``--format table``)."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from triage.domain.result import CriterionResult, TicketResult, readout_words
from triage.domain.ticket import printable

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


def _tail(crit: CriterionResult) -> str:
    """A criterion's own tail time and tokens; ``shared`` for one read in the decode it shares with others (its
    time is counted once, in the ticket's, never as ``0 ms · 0 tok``)."""
    if crit.readout == "shared" or (crit.tail_tokens == 0 and crit.tail_ms == 0):
        return "shared"
    return f"{crit.tail_ms:.0f} ms · {crit.tail_tokens} tok"


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
                _tail(crit) if first else "",
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


def duration(seconds: float) -> str:
    """``seconds`` in words a person reads at a glance: ``45 s``, ``1 min 16 s``, ``2 h 5 min``."""
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min {s % 60} s"
    return f"{s // 3600} h {s % 3600 // 60} min"
