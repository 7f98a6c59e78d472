"""The backlog's progress line (Rich, on stderr): tickets done, tickets/s, ETA."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from triage.evaluation.progress import RateColumn


class BacklogProgress:
    """One live line while scoring, and a summary when done (or stopped)."""

    def __init__(self, total: int, summary: Any) -> None:
        self.console = Console(stderr=True)
        self.summary = summary
        self._progress = Progress(
            TextColumn("scoring"),
            BarColumn(),
            MofNCompleteColumn(),
            RateColumn("tickets"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
            speed_estimate_period=120,
        )
        self._task = self._progress.add_task("scoring", total=total)

    def __enter__(self) -> BacklogProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def advance(self, n: int) -> None:
        """``n`` more tickets written."""
        self._progress.advance(self._task, n)

    def say(self, line: str) -> None:
        """A line above the progress line."""
        self._progress.console.print(line, markup=False, highlight=False)

    def report(self, output: Path | None) -> None:
        """The closing summary."""
        s = self.summary
        where = f" to {output}" if output else ""
        parts = [
            f"scored {s.scored} tickets{where} in {s.seconds:.1f} s ({s.rate:.2f} "
            f"tickets/s) on {s.workers} worker(s) × {s.threads} thread(s)"
        ]
        if s.skipped:
            parts.append(f"{s.skipped} already done")
        if s.errors:
            parts.append(f"{s.errors} error record(s)")
        if s.duplicates_dropped:
            parts.append(f"{s.duplicates_dropped} duplicate(s) from retries dropped")
        print("triage: " + "; ".join(parts), file=sys.stderr)
        left = s.to_score - s.returned
        if left > 0:
            print(
                f"triage: stopped with {left} tickets to go; run the same command with --resume to continue",
                file=sys.stderr,
            )
