"""The content-free prior: what the model answers about an empty ticket ("N/A").

Dividing it out (``--prior``) removes the lean a model shows whatever the ticket says.
It is computed with the very options it is applied with (readout, orderings and mode:
fan-out and serial differ by about 0.01-0.02 in probability), once per engine, and kept
in a file when the engine has a ``prior_dir``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from triage import gate
from triage.domain.pack import Pack
from triage.domain.ticket import make_ticket
from triage.scoring import debias
from triage.scoring.options import ScoreOptions
from triage.scoring.schedule import Serial
from triage.store.files import write_text_atomic

if TYPE_CHECKING:
    from triage.scoring.protocol import ScoringEngine

log = logging.getLogger(__name__)

PRIOR_TEXT = "N/A"
Prior = dict[str, np.ndarray]  # criterion id -> option log-probs


def prior_options(options: ScoreOptions) -> ScoreOptions:
    """The options a prior for ``options`` is computed with: the same readout, orderings and mode;
    every criterion; no prior of its own."""
    return replace(options, prior=False, criteria=None, orderings=options.effective_orderings)


class Priors:
    """An engine's priors, by (pack, readout, orderings, mode), in memory and in ``folder``."""

    def __init__(self, engine: ScoringEngine, folder: Path | None) -> None:
        self.engine = engine
        self.folder = folder
        self._memory: dict[tuple[str, str, str, str], Prior] = {}

    def get(self, pack: Pack, options: ScoreOptions) -> Prior:
        """The prior for scoring ``pack`` with ``options`` (computed on first use)."""
        opts = prior_options(options)
        key = (pack.hash, opts.readout, opts.orderings, _mode(opts))
        if key not in self._memory:
            prior = self._load(pack, opts)
            if prior is None:
                _, raw = self.engine.raw_readouts(make_ticket(PRIOR_TEXT, "prior"), pack, opts)
                prior = {
                    cid: debias.combine([debias.to_option_space(lp, order) for order, lp, _ in reads])
                    for cid, reads in raw.items()
                }
                self._save(pack, opts, prior)
            self._memory[key] = prior
        return self._memory[key]

    def _file(self, pack: Pack, opts: ScoreOptions) -> Path | None:
        if self.folder is None:
            return None
        mode = _mode(opts).replace("/", "_")
        return self.folder / f"{self.engine.stable_key(pack, opts.readout)}-{opts.orderings}-{mode}.json"

    def _identity(self, pack: Pack, opts: ScoreOptions) -> dict[str, str]:
        eng = self.engine
        return {
            "model_sha256": eng.sha256,
            "prompt_format": eng.format_for(opts.readout).id,
            "pack_hash": pack.hash,
            "orderings": opts.orderings,
            "mode": _mode(opts),
        }

    def _load(self, pack: Pack, opts: ScoreOptions) -> Prior | None:
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

    def _save(self, pack: Pack, opts: ScoreOptions, prior: Prior) -> None:
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


def _mode(opts: ScoreOptions) -> str:
    """The mode as the prior's key and file name say it: serial's is its schedule's name, ``serial/truncate``."""
    return Serial.name if opts.mode == "serial" else opts.mode
