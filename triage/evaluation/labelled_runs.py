"""What ``triage eval``, ``calibrate`` and ``learn`` share: bad-row reporting and scoring with a progress bar."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from rich.console import Console

from triage.domain.pack import Pack
from triage.domain.ticket import printable
from triage.evaluation.progress import scoring_progress
from triage.evaluation.runner import content_free_prior
from triage.lab.scorer import LabScorer
from triage.learning.cache import ReadoutCache
from triage.learning.labelled import LabelledRow, LabelledSet
from triage.learning.scorer import Scored, score_rows
from triage.scoring.options import DEFAULT_READOUT

if TYPE_CHECKING:
    from triage.learning.cache import Outcome

    pass

SHOW_BAD = 10


def report_consoles() -> tuple[Console, Console]:
    """(stdout, stderr) consoles for eval, calibrate and learn.

    A report piped to a file or a log is read later: it is not squeezed into 80
    columns. soft_wrap: messages stay one line each (grep-able); tables still fit.
    """
    import sys

    out = Console(width=None if sys.stdout.isatty() else 150, soft_wrap=True)
    err = Console(stderr=True, width=None if sys.stderr.isatty() else 150, soft_wrap=True)
    return out, err


def save_fit(
    fit: Any, out: Console, *, output: str | None, no_store: bool, write: Any, store: Any, applied: str | None = None
) -> None:
    """Write a fit (calibration or learned head) to ``output`` and store it for auto-apply, saying where.

    ``applied``: what the stored line says is applied (default: all of it, for this model, pack and prompt format).
    """
    if output:  # through the output guard's writer: a device or FIFO is written through, a symlink's file replaced
        from triage.store.outputs import write_via

        write_via(output, lambda real: write(fit, real))
        out.print(f"wrote {output}", markup=False)
    if not no_store:
        path = store(fit)
        said = applied or "applied automatically for this model, pack and prompt format"
        out.print(f"stored {path} ({said})", markup=False, highlight=False)


def load_for(
    err: Console, *, model: str | None, n_ctx: int | None, threads: int | None, prompt_style: str, lazy: bool = False
) -> Any:
    """The engine for ``--model``, ``--n-ctx``, ``--threads`` and ``--prompt``; its notices go to ``err``.

    ``lazy``: the model's weights are loaded only when a ticket must be scored (:mod:`triage.scoring.lazy`).
    """
    from triage.scoring.loader import load_engine

    def notice(message: str) -> None:
        err.print(f"triage: {printable(message)}", markup=False)

    return load_engine(model, n_ctx=n_ctx, threads=threads, prompt_style=prompt_style, notice=notice, lazy=lazy)


def report_bad(label_set: LabelledSet, console: Console) -> None:
    """Print what reading decided (encoding, unmapped values, duplicates), the rows that were skipped
    (the first few by message) and their count."""
    for note in label_set.notes:
        console.print(f"triage: {printable(note)}", style="yellow", markup=False, highlight=False)
    if label_set.bad:
        for b in label_set.bad[:SHOW_BAD]:
            console.print(f"triage: skipped {printable(b.message)}", style="yellow", markup=False, highlight=False)
        more = len(label_set.bad) - SHOW_BAD
        tail = f" ({more} more not shown)" if more > 0 else ""
        console.print(
            f"triage: {len(label_set.bad)} row(s) of {printable(label_set.source)} skipped{tail}",
            style="yellow",
            markup=False,
            highlight=False,
        )
    for cid, n in label_set.ignored_criteria.items():
        console.print(
            f"triage: labels for {printable(repr(cid))} ({n} rows) are not a criterion of the pack; ignored",
            style="dim",
            markup=False,
        )


@dataclass
class ScoringRun:
    """The scored sets in the order given, the content-free prior, and cache counts."""

    sets: list[Scored]
    prior: dict[str, np.ndarray]
    hits: int
    misses: int
    scored_s: float
    cache_path: str


def score_sets(
    engine: Any,
    pack: Pack,
    parts: Sequence[tuple[str, Sequence[LabelledRow]]],
    console: Console,
    readout: str = DEFAULT_READOUT,
    *,
    features: bool = False,
    known: dict[str, Outcome] | None = None,
    prior: bool = True,
    read: str = "tail",
) -> ScoringRun:
    """Score each named list of rows (cache first), showing one progress bar over all of them (plain lines
    when ``console`` is not a terminal: :mod:`triage.evaluation.progress`).

    ``features``: also get each criterion's answer-position features (label readout), for learned heads.
    ``known``: outcomes already at hand, by ticket sha256 (kept in the history): those rows are not scored.
    ``prior``: compute the content-free prior (one more score; ``triage learn`` does not need it).
    ``read``: where the criteria are read (``tail``, or ``shared:CUE``: :mod:`triage.scoring.cue`).
    """
    total = sum(len(rows) for _, rows in parts)  # rows only: the prior is a step of its own
    with ReadoutCache() as cache:
        said = cache.notice
        if said:
            console.print(f"triage: {said}", style="yellow", markup=False, highlight=False)
        scorer = LabScorer(engine, pack, cache, readout, read)
        scorer.features = features and readout == "label"
        with scoring_progress(console) as progress:
            if prior:
                step = progress.add_task("content-free prior", total=1, hits=0)
                content_free = content_free_prior(scorer)
                progress.update(step, advance=1, hits=cache.hits)
            else:
                content_free = {}
            prior_hits = cache.hits
            task = progress.add_task(parts[0][0] if parts else "rows", total=total, hits=0)
            out = []
            for name, rows in parts:
                progress.update(task, description=name)

                def tick(hit: bool) -> None:
                    progress.update(task, advance=1, hits=cache.hits - prior_hits)

                out.append(score_rows(scorer, rows, tick, known))
        if cache.notice != said:  # damage found while reading or writing
            console.print(f"triage: {cache.notice}", style="yellow", markup=False, highlight=False)
        for scored in out:
            for f in scored.failed:
                console.print(f"triage: skipped {printable(f.message)}", style="yellow", markup=False)
        return ScoringRun(out, content_free, cache.hits, cache.misses, scorer.scoring_s, str(cache.path))
