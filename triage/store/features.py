"""What a learned head reads, kept with the score that computed it, so learning from labels needs no re-scoring.

One row per (score, criterion) in the history's ``features`` table (migration 3 of
:mod:`triage.store.history`): the answer position's features (see
:mod:`triage.scoring.head`) as float16, with the model sha256, prompt format and
pack hash they were computed with. Features are only ever used for the same
three; anything else is re-scored. Only the newest ``keep`` scores keep their
features (default :data:`DEFAULT_KEEP`, config ``keep_features``); older rows
are pruned in the transaction that adds new ones.

This module is core: it must not import Textual.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from triage.store.history import History

DEFAULT_KEEP = 5000


@dataclass(frozen=True)
class Identity:
    """What features were computed with: they are comparable only when all three are equal."""

    model_sha256: str
    prompt_format: str
    pack_hash: str


def save(history: History, score_id: int, identity: Identity, features: Mapping[str, np.ndarray], *,
         keep: int = DEFAULT_KEEP) -> int:
    """Keep ``features`` (criterion id -> vector) with score ``score_id``; prune beyond the newest ``keep`` scores.

    Returns how many criteria were stored.
    """
    if not features:
        return 0
    with history.transaction() as conn:
        for crit, vec in features.items():
            v = np.asarray(vec, dtype=np.float32).ravel()
            if not np.all(np.isfinite(v)):
                continue  # never keep what a fit would choke on
            conn.execute(
                """INSERT OR REPLACE INTO features (score, criterion, model_sha256, prompt_format, pack_hash, width,
                                                   data)
                   VALUES (?, ?, ?, ?, ?, ?, ?)""",
                (score_id, crit, identity.model_sha256, identity.prompt_format, identity.pack_hash, len(v),
                 v.astype("<f2").tobytes()),
            )
        conn.execute(
            """DELETE FROM features WHERE score NOT IN
               (SELECT DISTINCT score FROM features ORDER BY score DESC LIMIT ?)""",
            (max(0, int(keep)),),
        )
    return len(features)


def load(history: History, score_id: int, identity: Identity) -> dict[str, np.ndarray]:
    """The features kept with ``score_id`` for exactly ``identity`` (criterion id -> float32 vector)."""
    rows = history.conn.execute(
        """SELECT criterion, width, data FROM features
           WHERE score = ? AND model_sha256 = ? AND prompt_format = ? AND pack_hash = ?""",
        (score_id, identity.model_sha256, identity.prompt_format, identity.pack_hash),
    ).fetchall()
    out = {}
    for crit, width, data in rows:
        v = np.frombuffer(data, dtype="<f2")
        if len(v) == width:
            out[crit] = v.astype(np.float32)
    return out


def kept_scores(history: History) -> int:
    """How many scores keep features now."""
    return int(history.conn.execute("SELECT count(DISTINCT score) FROM features").fetchone()[0])
