"""The content-free prior: what the model answers about an empty ticket ("N/A").

Dividing it out (``--prior``) removes the lean a model shows whatever the ticket says.
It is computed with the very options it is applied with (readout, orderings and mode:
fan-out and serial differ by about 0.01-0.02 in probability), once per engine, and kept
in a file when the engine's priors have a folder (:func:`priors_of`). :class:`WithPrior`
is a readout strategy that divides it out of another's combined readings.
"""

from __future__ import annotations

import json
import logging
import weakref
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from triage import gate
from triage.domain.pack import Criterion, Option, Pack
from triage.domain.ticket import make_ticket
from triage.lab import debias
from triage.lab.options import LabOptions
from triage.lab.seams import mode_name, plain_readout, schedule_for
from triage.scoring.options import ReadAs
from triage.scoring.readout import Combined, Reader, Readings, ReadoutKind
from triage.store.files import write_text_atomic
from triage.store.paths import user_dirs

if TYPE_CHECKING:
    from collections.abc import Callable

    from triage.scoring.tokenizer import Tokenizer

log = logging.getLogger(__name__)

PRIOR_TEXT = "N/A"
Prior = dict[str, np.ndarray]  # criterion id -> option log-probs


def prior_options(options: LabOptions) -> LabOptions:
    """The options a prior for ``options`` is computed with: the same readout, orderings and mode;
    every criterion; no prior of its own."""
    return replace(options, prior=False, criteria=None, orderings=options.effective_orderings)


class Priors:
    """An engine's priors, by (pack, readout, orderings, mode), in memory and in ``folder``."""

    def __init__(self, engine: Any, folder: Path | None) -> None:
        self.engine = engine
        self.folder = folder
        self._memory: dict[tuple[str, str, str, str], Prior] = {}

    def get(self, pack: Pack, options: LabOptions) -> Prior:
        """The prior for scoring ``pack`` with ``options`` (computed on first use)."""
        opts = prior_options(options)
        key = (pack.hash, opts.readout, opts.orderings, mode_name(opts))
        if key not in self._memory:
            prior = self._load(pack, opts)
            if prior is None:
                _, raw = self.engine.raw_readouts(
                    make_ticket(PRIOR_TEXT, "prior"),
                    pack,
                    opts.product,
                    readout=plain_readout(opts),
                    schedule=schedule_for(opts),
                )
                prior = {
                    cid: debias.combine([debias.to_option_space(lp, order) for order, lp, _ in reads])
                    for cid, reads in raw.items()
                }
                self._save(pack, opts, prior)
            self._memory[key] = prior
        return self._memory[key]

    def _file(self, pack: Pack, opts: LabOptions) -> Path | None:
        if self.folder is None:
            return None
        mode = mode_name(opts).replace("/", "_")
        return self.folder / f"{self.engine.stable_key(pack, opts.readout)}-{opts.orderings}-{mode}.json"

    def _identity(self, pack: Pack, opts: LabOptions) -> dict[str, str]:
        eng = self.engine
        return {
            "model_sha256": eng.sha256,
            "prompt_format": eng.format_for(opts.readout).id,
            "pack_hash": pack.hash,
            "orderings": opts.orderings,
            "mode": mode_name(opts),
        }

    def _load(self, pack: Pack, opts: LabOptions) -> Prior | None:
        """A prior saved by an earlier run, if it matches this model, format, pack and mode exactly."""
        path = self._file(pack, opts)
        if path is None:
            return None
        try:
            data = gate.load_json(path, "prior")
            if not isinstance(data, dict) or any(data.get(k) != v for k, v in self._identity(pack, opts).items()):
                return None
            prior = {c.id: np.array(data["logprobs"][c.id], dtype=np.float64) for c in pack.criteria}
            if any(len(prior[c.id]) != len(c.options) or not np.all(np.isfinite(prior[c.id])) for c in pack.criteria):
                return None
            return prior
        except (
            OSError,
            ValueError,
            KeyError,
            TypeError,
            AttributeError,
            RecursionError,
        ):  # RecursionError: nested thousands deep
            return None  # missing or damaged: recompute

    def _save(self, pack: Pack, opts: LabOptions, prior: Prior) -> None:
        path = self._file(pack, opts)
        if path is None:
            return
        data = {**self._identity(pack, opts), "text": PRIOR_TEXT, "logprobs": {k: v.tolist() for k, v in prior.items()}}
        if not gate.is_regular_or_absent(path):
            return  # a FIFO or a folder in its place is not ours to replace
        try:
            write_text_atomic(path, json.dumps(data))
        except OSError as exc:
            log.warning("cannot save the prior to %s: %s", path, exc)


_PRIORS: weakref.WeakKeyDictionary[Any, Priors] = weakref.WeakKeyDictionary()


def priors_of(engine: Any, folder: Path | None = None) -> Priors:
    """``engine``'s priors, made on first use: kept in ``folder`` when given, else in the user's cache when
    the engine keeps its stable block across runs (as ``triage eval`` and ``triage calibrate`` load it),
    else only in memory. A ``folder`` given later replaces the one before."""
    got = _PRIORS.get(engine)
    if got is None or (folder is not None and got.folder != folder):
        if folder is None and getattr(engine, "stable_store", None) is not None:
            folder = user_dirs().cache / "prior"
        got = _PRIORS[engine] = Priors(engine, folder)
    return got


@dataclass(frozen=True)
class WithPrior:
    """``inner``'s readout with the content-free ``prior`` divided out of what calibration and zero-shot read.

    A learned head still reads ``inner``'s combined readings (it was fitted on the raw readout).
    """

    inner: ReadoutKind
    prior: Prior

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def read_as(self) -> ReadAs:
        return replace(self.inner.read_as, prior=True)

    def stable_lines(self, pack: Pack) -> list[str]:
        return self.inner.stable_lines(pack)

    def example_answer(self, option: Option) -> str:
        return self.inner.example_answer(option)

    def tail_lines(self, criterion: Criterion, order: tuple[int, ...]) -> list[str]:
        return self.inner.tail_lines(criterion, order)

    def orders(self, n_options: int) -> list[tuple[int, ...]]:
        return self.inner.orders(n_options)

    def combine(self, criterion_id: str, readings: Readings) -> Combined:
        got = self.inner.combine(criterion_id, readings)
        return replace(got, base=debias.divide_prior(got.base, self.prior[criterion_id]))

    def answer_room(self, answers: list[tuple[int, ...]]) -> int:
        return self.inner.answer_room(answers)

    def reader(self, pack: Pack, tokenizer: Tokenizer, answers: Callable[[Criterion], list[tuple[int, ...]]]) -> Reader:
        return self.inner.reader(pack, tokenizer, answers)
