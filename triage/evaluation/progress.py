"""Progress of scoring labelled rows (learn, eval, calibrate): a live bar on a terminal, plain lines elsewhere.

On a terminal, Rich's bar: rows done of all, cache hits, rows per second, elapsed and time left.
Anywhere else (stderr redirected to a file or a pipe) a live bar shows nothing until it ends, so
:class:`PlainProgress` prints one line at the start, one when the first row is done, one with the first time
left :data:`FIRST_ESTIMATE` rows later, then one every :data:`EVERY_S` seconds or each tenth of the rows
(whichever comes first), and one at the end:

    triage: learn: scored 40/200 rows (3 from the cache), 2.1 rows/s, about 1 min 16 s left

Rows per second and the time left come from :class:`SmoothRate` in both: the rows done over the time taken,
each second weighing less as it ages (a time constant of :data:`RATE_TAU_S`), so a busy minute on a shared
machine moves the estimate a little, not from 17 minutes to 28 and back (Rich's own estimate averages the
last two minutes only).

Both take the calls Rich's ``Progress`` takes here (``add_task``, ``update``, used as a context manager),
so a caller picks one with :func:`scoring_progress` and does not care which it got.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    Task,
    TextColumn,
    TimeElapsedColumn,
)
from rich.text import Text

from triage.render import duration

EVERY_S = 10.0  # seconds between two plain lines at most (after the first row)
STEPS = 10  # and a line at each tenth of the rows
FIRST_ESTIMATE = 3  # rows after the first (which also pays for loading the model) that give the first time left
RATE_TAU_S = 600.0  # seconds over which the rate is averaged, the older weighing less (SmoothRate)


class SmoothRate:
    """Rows per second, smoothed over time: rows done over time taken, both decayed by ``exp(-age / tau_s)``.

    At first this is the average since the first call (nothing has aged yet); on a long run it follows a change
    of speed within a few ``tau_s``, never by a jump. Time without a row counts (a stall lowers the rate).
    """

    def __init__(self, tau_s: float = RATE_TAU_S) -> None:
        self.tau_s = tau_s
        self.last: tuple[float, int] | None = None
        self.rows = 0.0
        self.seconds = 0.0

    def add(self, now: float, done: int) -> None:
        """``done`` rows in all at time ``now`` (the first call only starts the clock)."""
        if self.last is None:
            self.last = (now, done)
            return
        then, before = self.last
        dt = now - then
        if dt < 0:
            return
        keep = math.exp(-dt / self.tau_s)
        self.rows = self.rows * keep + (done - before)
        self.seconds = self.seconds * keep + dt
        self.last = (now, done)

    @property
    def rate(self) -> float | None:
        """Rows per second, or None before any row came after the first call."""
        return self.rows / self.seconds if self.rows > 0 and self.seconds > 0 else None

    def left(self, remaining: int) -> float | None:
        """Seconds until ``remaining`` more rows are done at this rate (None without a rate)."""
        rate = self.rate
        return remaining / rate if rate else None


class SmoothRemainingColumn(ProgressColumn):
    """Rich's time-left column, from :class:`SmoothRate` instead of the last two minutes' speed."""

    def __init__(self) -> None:
        super().__init__()
        self.rates: dict[int, SmoothRate] = {}

    def render(self, task: Task) -> Text:
        if task.finished:
            return Text("0:00:00", style="progress.remaining")
        rate = self.rates.setdefault(int(task.id), SmoothRate())
        if task.completed > 0:  # from the first row: it also pays for loading the model
            rate.add(task.get_time(), int(task.completed))
        left = rate.left(int((task.total or 0) - task.completed))
        if left is None:
            return Text("-:--:--", style="progress.remaining")
        m, sec = divmod(int(left), 60)
        h, m = divmod(m, 60)
        return Text(f"{h}:{m:02d}:{sec:02d}", style="progress.remaining")


class RateColumn(ProgressColumn):
    """Rows (or ``unit``) per second (over the whole run once it is done)."""

    def __init__(self, unit: str = "rows") -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        speed = task.completed / task.elapsed if task.finished and task.elapsed else task.speed
        return Text(f"{speed:.2f} {self.unit}/s" if speed else f"– {self.unit}/s")


def progress_columns() -> tuple[Any, ...]:
    """The columns of a scoring progress bar: what, the bar, done of all, cache hits, rows/s, elapsed, time left."""
    return (
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("cached {task.fields[hits]}"),
        RateColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        SmoothRemainingColumn(),
    )


def scoring_progress(console: Console) -> Any:
    """Rich's live bar when ``console`` is a terminal, else :class:`PlainProgress` lines on it."""
    if console.is_terminal and not console.is_dumb_terminal:
        return Progress(*progress_columns(), console=console, transient=False, speed_estimate_period=120)
    return PlainProgress(console)


class _Task:
    def __init__(self, description: str, total: int, hits: int, now: float) -> None:
        self.description = description
        self.total = total
        self.hits = hits
        self.done = 0
        self.started = now
        self.first: tuple[float, int] | None = None  # (when, rows done) after the first row: the rate starts there
        self.rate = SmoothRate()
        self.said_at = now
        self.said_step = 0


class PlainProgress:
    """Progress as plain lines on ``console`` (see the module docstring); ``clock`` and ``every_s`` for tests."""

    def __init__(
        self, console: Console, *, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.console = console
        self.every_s = every_s
        self.clock = clock
        self.tasks: list[_Task] = []

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(self, *exc: object) -> None:
        for task in self.tasks:
            if task.done < task.total and task.done > 0:  # stopped part-way: say how far it got
                self._say(task, self.clock())

    def add_task(self, description: str, total: int | None = None, hits: int = 0, **_: object) -> int:
        """Start counting ``total`` rows; says so at once."""
        task = _Task(description, int(total or 0), hits, self.clock())
        self.tasks.append(task)
        if task.total:
            self._print(f"{task.description}: scoring {task.total} row(s); a line every {self.every_s:g} s")
        return len(self.tasks) - 1

    def update(
        self, task_id: int, *, advance: float = 0, description: str | None = None, hits: int | None = None, **_: object
    ) -> None:
        """Count ``advance`` more rows done (``hits``: how many came from the cache so far)."""
        task = self.tasks[task_id]
        if description is not None:
            task.description = description
        if hits is not None:
            task.hits = hits
        if not advance:
            return
        now = self.clock()
        task.done += int(advance)
        step = task.done * STEPS // task.total if task.total else 0
        first = task.first is None
        if first:
            task.first = (now, task.done)
        task.rate.add(now, task.done)
        # the first estimate as soon as a few rows give a rate: how long it will take, said within seconds
        estimate = task.first is not None and task.done == task.first[1] + FIRST_ESTIMATE
        if first or estimate or task.done >= task.total or now - task.said_at >= self.every_s or step > task.said_step:
            self._say(task, now)

    def _say(self, task: _Task, now: float) -> None:
        task.said_at = now
        task.said_step = task.done * STEPS // task.total if task.total else 0
        cached = f" ({task.hits} from the cache)" if task.hits else ""
        head = f"{task.description}: scored {task.done}/{task.total} rows{cached}"
        if task.done >= task.total:
            took = now - task.started
            per_s = f", {task.done / took:.2f} rows/s" if took > 0 else ""
            self._print(f"{head} in {duration(took)}{per_s}")
            return
        task.rate.add(now, task.done)
        rate = task.rate.rate
        if rate:
            left = (task.total - task.done) / rate
            self._print(f"{head}, {rate:.2f} rows/s, about {duration(left)} left")
        else:  # one row only: no rate yet (the first row also pays for loading the model)
            self._print(f"{head}, the first in {duration(now - task.started)}; rows/s and time left follow")

    def _print(self, line: str) -> None:
        self.console.print(f"triage: {line}", markup=False, highlight=False, soft_wrap=True)
