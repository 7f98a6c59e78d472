"""Fitting the built-in pack's starter head from the command line (``model pull``, first use of ``score``):
a progress bar on a terminal, a line every few seconds otherwise (:mod:`triage.evaluation.starter`)."""

from __future__ import annotations

import sys
import time
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

LINE_EVERY_S = 10.0


def fit_starter(engine: Any, pack: Any, request: Any) -> bool:
    """:func:`triage.evaluation.starter.ensure` with the user told how it goes on stderr; True when it fitted."""
    from triage.evaluation import starter

    err = Console(stderr=True)

    def say(line: str) -> None:
        err.print(f"triage: {line}", markup=False, highlight=False)

    if not starter.needs_fit(engine, pack, request):
        return False
    if sys.stderr.isatty():
        columns = (
            TextColumn("starter head"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            TimeRemainingColumn(),
        )
        with Progress(*columns, console=err, transient=True) as bar:
            task = bar.add_task("starter", total=None)
            return starter.ensure(
                engine,
                pack,
                request,
                say=say,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
            )
    t0 = time.monotonic()
    last = [t0]

    def lines(done: int, total: int) -> None:
        now = time.monotonic()
        if done == total or now - last[0] >= LINE_EVERY_S:
            last[0] = now
            rate = done / max(now - t0, 1e-9)
            left = (total - done) / rate if rate > 0 else 0.0
            say(f"starter head: scored {done}/{total} example tickets, {rate:.1f}/s, about {left:.0f} s left")

    return starter.ensure(engine, pack, request, say=say, progress=lines)
