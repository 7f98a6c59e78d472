"""Fitting the built-in pack's starter head from the command line (``model pull``, first use of ``score``):
the same progress as learn's (:func:`triage.evaluation.progress.scoring_progress`: a bar on a terminal, plain
lines otherwise), around :func:`triage.learning.starter.ensure`."""

from __future__ import annotations

from rich.console import Console

from triage.domain.pack import Pack
from triage.learning.fit import FitRequest
from triage.scoring.protocol import ScoringEngine


def fit_starter(engine: ScoringEngine, pack: Pack, request: FitRequest) -> bool:
    """:func:`triage.learning.starter.ensure` with the user told how it goes on stderr; True when it fitted."""
    from triage.evaluation.progress import scoring_progress
    from triage.learning import starter

    err = Console(stderr=True)

    def say(line: str) -> None:
        err.print(f"triage: {line}", markup=False, highlight=False, soft_wrap=True)

    if not starter.needs_fit(engine, pack, request):
        return False
    with scoring_progress(err) as bar:
        task = None  # made at the first call, which gives the total
        last = 0

        def progress(done: int, total: int) -> None:
            nonlocal task, last
            if task is None:
                task = bar.add_task("starter head", total=total, hits=0)
            bar.update(task, advance=done - last)
            last = done

        return starter.ensure(engine, pack, request, say=say, progress=progress)
