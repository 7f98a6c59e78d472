"""What a learned head reads, kept with the score that computed it, so learning from labels needs no re-scoring.

One row per (score, criterion) in the history's ``features`` table (migration 3 of
:mod:`triage.store.history`): the answer position's features (see
:mod:`triage.scoring.head`) as float16 and the raw label readout (the options'
log-probs before any head or calibration; float32, K values): exactly the two
inputs ``triage learn`` fits a head on. Each row records the model sha256,
prompt format and pack hash they were computed with, and is only ever used for
the same three; anything else is re-scored. Only the newest ``keep`` scores keep
their features (default :data:`DEFAULT_KEEP`, config ``keep_features``); older
rows are pruned in the transaction that adds new ones.

Features are kept as float16 (3.5 KB a criterion for the stand-in's 1,792
features); what that costs a head's bars is measured in docs/quality.md
("Learning from the history").

This module is core: it must not import Textual.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from triage.settings import DEFAULTS
from triage.store.history import History

DEFAULT_KEEP = DEFAULTS.keep_features


@dataclass(frozen=True)
class Identity:
    """What features were computed with: they are comparable only when all three are equal."""

    model_sha256: str
    prompt_format: str
    pack_hash: str


@dataclass(frozen=True)
class Kept:
    """One criterion's kept inputs of a head: features (F,), the raw readout (K,) and its coverage."""

    features: np.ndarray
    raw: np.ndarray
    coverage: float = 1.0


def from_scored(
    readouts: Mapping[str, Sequence[tuple[Sequence[int], np.ndarray, float]]], features: Mapping[str, np.ndarray]
) -> dict[str, Kept]:
    """A head's two inputs per criterion from what the engine returned with a score (``TicketScored``).

    ``readouts``: criterion id -> [(order, position log-probs, coverage), ...]. The raw readout is the
    pack-order one in option space (the label readout has no other), as ``triage learn`` fits on it
    (:func:`triage.learning.scorer.identity_read`). Criteria without features (letters) are left out.
    """
    out = {}
    for cid, vec in features.items():
        ident = [(o, lp, cov) for o, lp, cov in readouts.get(cid, ()) if tuple(o) == tuple(sorted(o))]
        if ident:
            _order, logprobs, cov = ident[0]  # the identity order: positions are options
            raw = np.asarray(logprobs, dtype=np.float64)
            out[cid] = Kept(np.asarray(vec, dtype=np.float32), raw, float(cov))
    return out


def save(
    history: History, score_id: int, identity: Identity, kept: Mapping[str, Kept], *, keep: int = DEFAULT_KEEP
) -> int:
    """Keep each criterion's features and raw readout with score ``score_id``; prune beyond the newest ``keep`` scores.

    Returns how many criteria were stored (a vector with NaN or infinities is not kept).
    """
    stored = 0
    with history.transaction() as conn:
        for crit, k in kept.items():
            f = np.asarray(k.features, dtype=np.float32).ravel()
            r = np.asarray(k.raw, dtype=np.float64).ravel()
            if not (np.all(np.isfinite(f)) and np.all(np.isfinite(r))):
                continue  # never keep what a fit would choke on
            conn.execute(
                """INSERT OR REPLACE INTO features (score, criterion, model_sha256, prompt_format, pack_hash, width,
                                                   data, raw, coverage)
                   VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                (
                    score_id,
                    crit,
                    identity.model_sha256,
                    identity.prompt_format,
                    identity.pack_hash,
                    len(f),
                    f.astype("<f2").tobytes(),
                    r.astype("<f4").tobytes(),
                    float(k.coverage),
                ),
            )
            stored += 1
        conn.execute(
            "DELETE FROM features WHERE score NOT IN (SELECT DISTINCT score FROM features ORDER BY score DESC LIMIT ?)",
            (max(0, int(keep)),),
        )
    return stored


def load(history: History, score_id: int, identity: Identity) -> dict[str, Kept]:
    """What was kept with ``score_id`` for exactly ``identity`` (criterion id -> features as float32, raw)."""
    rows = history.conn.execute(
        """SELECT criterion, width, data, raw, coverage FROM features
           WHERE score = ? AND model_sha256 = ? AND prompt_format = ? AND pack_hash = ?""",
        (score_id, identity.model_sha256, identity.prompt_format, identity.pack_hash),
    ).fetchall()
    out = {}
    for crit, width, data, raw, coverage in rows:
        f = np.frombuffer(data, dtype="<f2")
        if len(f) == width:
            out[crit] = Kept(f.astype(np.float32), np.frombuffer(raw, dtype="<f4").astype(np.float64), float(coverage))
    return out


def newest_with(history: History, ticket_row: int, identity: Identity) -> int | None:
    """The newest score of a ticket that kept features for ``identity``, or None."""
    row = history.conn.execute(
        """SELECT f.score FROM features f JOIN scores s ON s.id = f.score
           WHERE s.ticket = ? AND f.model_sha256 = ? AND f.prompt_format = ? AND f.pack_hash = ?
           ORDER BY f.score DESC LIMIT 1""",
        (ticket_row, identity.model_sha256, identity.prompt_format, identity.pack_hash),
    ).fetchone()
    return None if row is None else int(row[0])


def kept_scores(history: History) -> int:
    """How many scores keep features now."""
    return int(history.conn.execute("SELECT count(DISTINCT score) FROM features").fetchone()[0])
