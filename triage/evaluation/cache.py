"""Per-ticket readouts cached on disk, so eval and calibrate never score a ticket twice.

A ticket's *outcome* is, per criterion, the letter readout of every option
ordering: ``(order, position log-probs, coverage)``. Every eval variant (raw,
cyclic, cyclic+prior, calibrated) and every metric is computed from it, so a
re-run with other variants, metrics or a new calibration reads the cache only.

Key: model sha256, pack hash, prompt-format version, context size (it decides
whether and where a long ticket is cut), orderings kind, ticket sha256. Anything
that can change the readout is in the key; a changed pack or prompt simply
misses. The store is one SQLite file under ``user_dirs().cache / "eval"``.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from triage.paths import user_dirs

FORMAT = 1

Reads = list[tuple[tuple[int, ...], np.ndarray, float]]  # (order, position log-probs, coverage)


@dataclass
class Outcome:
    """What scoring one ticket produced that eval needs."""

    readouts: dict[str, Reads]
    warnings: list[str] = field(default_factory=list)
    ms: float = 0.0  # scoring time when it was computed

    @property
    def cut(self) -> bool:
        """True when the ticket's middle was cut to fit the context."""
        return any(w.startswith("ticket shortened") for w in self.warnings)

    def to_json(self) -> str:
        """Serialise (floats as repr'd JSON numbers: exact round trip)."""
        crits = {
            cid: [[list(order), [float(x) for x in lp], float(cov)] for order, lp, cov in reads]
            for cid, reads in self.readouts.items()
        }
        return json.dumps({"f": FORMAT, "criteria": crits, "warnings": self.warnings, "ms": self.ms}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> Outcome:
        """Read back; raises ValueError/KeyError on a foreign format."""
        d = json.loads(text)
        if d.get("f") != FORMAT:
            raise ValueError("other cache format")
        crits = {
            cid: [(tuple(int(i) for i in order), np.asarray(lp, dtype=np.float64), float(cov)) for order, lp, cov in reads]
            for cid, reads in d["criteria"].items()
        }
        return cls(crits, list(d.get("warnings", [])), float(d.get("ms", 0.0)))


@dataclass(frozen=True)
class CacheKey:
    """Everything that decides a ticket's readouts, except the ticket."""

    model_sha256: str
    pack_hash: str
    prompt_format: str
    n_ctx: int
    orderings: str


class ReadoutCache:
    """SQLite store of :class:`Outcome` by (:class:`CacheKey`, ticket sha256).

    Args:
        path: the database file (default: ``user_dirs().cache / "eval" / "readouts.sqlite3"``).
    """

    def __init__(self, path: Path | None = None) -> None:
        self.path = path or user_dirs().cache / "eval" / "readouts.sqlite3"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(self.path)
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS outcome (model TEXT, pack TEXT, prompt TEXT, n_ctx INTEGER, orderings TEXT,"
            " ticket TEXT, value TEXT, created REAL, PRIMARY KEY (model, pack, prompt, n_ctx, orderings, ticket))"
        )
        self._db.commit()
        self.hits = 0
        self.misses = 0

    def _k(self, key: CacheKey, ticket_sha256: str) -> tuple[str, str, str, int, str, str]:
        return (key.model_sha256, key.pack_hash, key.prompt_format, key.n_ctx, key.orderings, ticket_sha256)

    def get(self, key: CacheKey, ticket_sha256: str) -> Outcome | None:
        """The cached outcome, or None (counted as a hit or a miss)."""
        row = self._db.execute(
            "SELECT value FROM outcome WHERE model=? AND pack=? AND prompt=? AND n_ctx=? AND orderings=? AND ticket=?",
            self._k(key, ticket_sha256),
        ).fetchone()
        if row is not None:
            try:
                out = Outcome.from_json(row[0])
            except (ValueError, KeyError, TypeError):
                out = None  # written by another version: score again
            if out is not None:
                self.hits += 1
                return out
        self.misses += 1
        return None

    def put(self, key: CacheKey, ticket_sha256: str, outcome: Outcome) -> None:
        """Store (or replace) one outcome; committed at once so an interrupted run keeps its work."""
        self._db.execute(
            "INSERT OR REPLACE INTO outcome VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (*self._k(key, ticket_sha256), outcome.to_json(), time.time()),
        )
        self._db.commit()

    def close(self) -> None:
        """Close the database."""
        self._db.close()

    def __enter__(self) -> ReadoutCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
