"""Per-ticket readouts cached on disk, so learn, the starter fit, eval and calibrate never score a ticket twice.

A ticket's *outcome* is, per criterion, the letter readout of every option
ordering: ``(order, position log-probs, coverage)``. Every eval variant (raw,
cyclic, cyclic+prior, calibrated) and every metric is computed from it, so a
re-run with other variants, metrics or a new calibration reads the cache only.

Key: model sha256, pack hash, prompt-format version, context size, orderings kind
and scoring mode (batch shapes round differently), and the sha256 of the ticket's
text as the prompts read it (:meth:`triage.learning.scorer.Scorer.text_key`): the
ticket's own sha256, or, for a ticket longer than the ticket budget, the sha256 of
its text after the budget's cut, so a ticket cut to another budget is another
entry. Anything that can change the readout is in the key; a changed pack or prompt
simply misses. The store is one SQLite file under ``user_dirs().cache / "eval"``.

Beside each outcome, for the label readout, the ``features`` table can hold each
criterion's answer-position features (float32, the kind named, e.g.
``logits-image/1``), which learned heads are fitted on (``triage learn``, eval's
``learned`` variant); a ticket cached without them is scored again when they are
asked for.

Writes are kept in memory and committed together, at most :data:`COMMIT_EVERY_S` apart (a commit waits
for the disk: docs/teams.md, "How many rows per option", has what one costs), and when the cache is closed, also
by an interrupted run (Ctrl-C). A run killed outright loses at most that last second of scoring; every read
sees what is kept in memory too.

The file is a cache, so it is treated like the stable cache and the history: a
file that is not a database or is damaged (at open, or found so while reading or
writing) is moved aside as ``readouts.sqlite3.bad-<time>`` and a new one started,
with :attr:`ReadoutCache.notice` saying so; its readouts are simply computed
again. One that another process holds locked is waited for (:data:`BUSY_WAIT_S`),
then :class:`CacheLockedError` says which file and what to do.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from triage import gate
from triage.bounded import loads_json
from triage.errors import TriageError
from triage.store.files import move_aside
from triage.store.history_faults import describe_error, is_busy
from triage.store.paths import user_dirs

log = logging.getLogger(__name__)

FORMAT = 1
BUSY_WAIT_S = 15.0  # how long to wait for another process's lock before saying so
COMMIT_EVERY_S = 1.0  # writes kept in memory at most this long before they are committed (0: each at once)
_DAMAGED = (11, 26)  # SQLITE_CORRUPT, SQLITE_NOTADB (primary result codes)

Reads = list[tuple[tuple[int, ...], np.ndarray, float]]  # (order, position log-probs, coverage)


@dataclass
class Outcome:
    """What scoring one ticket produced that eval needs."""

    readouts: dict[str, Reads]
    warnings: list[str] = field(default_factory=list)
    ms: float = 0.0  # scoring time when it was computed
    features: dict[str, np.ndarray] | None = (
        None  # answer-position features per criterion (label readout; stored apart)
    )

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
        return json.dumps(
            {"f": FORMAT, "criteria": crits, "warnings": self.warnings, "ms": self.ms}, separators=(",", ":")
        )

    @classmethod
    def from_json(cls, text: str) -> Outcome:
        """Read back; raises ValueError/KeyError on a foreign format."""
        d = loads_json(text)  # Bounded (a ValueError) when nested too deep
        if not isinstance(d, dict) or d.get("f") != FORMAT:
            raise ValueError("other cache format")
        crits = {
            cid: [
                (tuple(int(i) for i in order), np.asarray(lp, dtype=np.float64), float(cov)) for order, lp, cov in reads
            ]
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
    orderings: str  # the orderings asked, with "@MODE" when not scored serially (e.g. "none@fanout")


class CacheLockedError(TriageError):
    """Another process held the readout cache locked for longer than :data:`BUSY_WAIT_S`."""


class ReadoutCache:
    """SQLite store of :class:`Outcome` by (:class:`CacheKey`, ticket sha256).

    Args:
        path: the database file (default: ``user_dirs().cache / "eval" / "readouts.sqlite3"``).
        busy_wait_s: how long to wait for another process's lock.
        commit_every_s: writes wait in memory at most this long, then are committed in one transaction
            (0: each write committed at once). :meth:`close` commits what is left.
        keep_going: a file that cannot be created or written (a full disk) costs no work: the readouts
            are kept in memory for this run, and :attr:`write_failure` says once what failed (the
            starter's fit: :func:`triage.learning.starter.fit_and_store`). A lock still raises.

    Attributes:
        notice: a one-line message for the user when a damaged file was moved aside, else None.
        write_failure: with ``keep_going``, the one line saying what could not be written, else None.

    Raises:
        CacheLockedError: the file stayed locked by another process.
        TriageError: the file cannot be moved aside or created.
    """

    def __init__(
        self,
        path: Path | None = None,
        *,
        busy_wait_s: float = BUSY_WAIT_S,
        commit_every_s: float = COMMIT_EVERY_S,
        keep_going: bool = False,
    ) -> None:
        self.path = path or user_dirs().cache / "eval" / "readouts.sqlite3"
        self.keep_going = keep_going
        self.write_failure: str | None = None
        self.busy_wait_s = busy_wait_s
        self.commit_every_s = commit_every_s
        self.notice: str | None = None
        self.hits = 0
        self.misses = 0
        self.commits = 0
        # Written, not yet committed: outcome rows by key, feature rows by (key, criterion, kind).
        self._outcomes: dict[tuple[str, str, str, int, str, str], tuple[object, ...]] = {}
        self._features: dict[tuple[tuple[str, str, str, int, str, str], str, str], tuple[object, ...]] = {}
        self._committed_at = time.monotonic()
        self._stopped = False  # keep_going: no more writes are tried after one failed
        self._db = self._open()

    def _open(self) -> sqlite3.Connection:
        try:
            gate.check_regular(self.path, "eval-cache", missing_ok=True)  # SQLite would block on a FIFO
        except (FileNotFoundError, NotADirectoryError):
            pass  # a missing folder is created below, and the error said there
        except OSError as exc:  # a FIFO, device or folder is not triage's: never moved aside
            raise TriageError(
                f"the eval readout cache {self.path} cannot be used: {exc.strerror or exc}; triage leaves it as it is",
                hint=f"move {self.path} away and run again",
            ) from None
        try:
            return self._connect()
        except (sqlite3.DatabaseError, OSError) as exc:
            try:
                self._unusable(exc)
            except TriageError as err:
                if not self.keep_going or isinstance(err, CacheLockedError):
                    raise
                return self._in_memory(err.message)
        try:
            return self._connect()
        except (sqlite3.DatabaseError, OSError) as exc:
            if self.keep_going:
                return self._in_memory(f"the eval readout cache {self.path} cannot be created: {describe_error(exc)}")
            raise TriageError(
                f"the eval readout cache {self.path} cannot be created: {describe_error(exc)}",
                hint="check the permissions and free space of the cache folder",
            ) from exc

    def _in_memory(self, why: str) -> sqlite3.Connection:
        """``keep_going``: the readouts are kept in memory for this run instead; ``why`` is said once."""
        self.write_failure = f"{why}; its readouts are kept in memory for this run only"
        self._stopped = True
        log.warning("%s", self.write_failure)
        db = sqlite3.connect(":memory:")
        _create_tables(db)
        return db

    def _connect(self) -> sqlite3.Connection:
        if self.path.is_dir():
            raise sqlite3.DatabaseError(f"{self.path} is a directory")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(self.path, timeout=self.busy_wait_s)
        try:
            check = db.execute("PRAGMA quick_check").fetchone()[0]  # fails here for a non-database
            if check != "ok":
                raise sqlite3.DatabaseError(f"integrity check failed: {check}")
            _create_tables(db)
        except BaseException:
            db.close()
            raise
        return db

    def _unusable(self, exc: BaseException) -> None:
        """Say why the file cannot be used: locked (raise), else move it aside (and say so)."""
        if is_busy(exc):
            raise CacheLockedError(
                f"the eval readout cache {self.path} is locked by another process (waited {self.busy_wait_s:.0f} s)",
                hint="wait for the other `triage eval` or `triage calibrate` to finish and run again",
            ) from exc
        reason = describe_error(exc)
        try:
            aside = move_aside(self.path)
        except OSError as err:
            raise TriageError(
                f"the eval readout cache {self.path} is unusable ({reason}) "
                f"and cannot be moved aside ({err.strerror or err})",
                hint=f"delete {self.path} and run again",
            ) from exc
        if aside is None:  # nothing was there to move: creating it failed, and will again
            raise TriageError(
                f"the eval readout cache {self.path} cannot be created: {reason}",
                hint="check the permissions and free space of the cache folder",
            ) from exc
        log.error("eval readout cache %s was unusable (%s); moved aside to %s", self.path, reason, aside)
        self.notice = (
            f"the eval readout cache was unusable ({reason}); it was "
            f"moved aside to {aside} and its readouts are computed again"
        )

    def _recover(self, exc: sqlite3.DatabaseError) -> None:
        """A failure while reading or writing: locked (raise), damaged (move aside, start anew), else raise."""
        code = getattr(exc, "sqlite_errorcode", None)
        if not is_busy(exc) and (code is None or (code & 0xFF) not in _DAMAGED):
            raise TriageError(
                f"the eval readout cache {self.path} failed: {describe_error(exc)}",
                hint="check the free space of the cache folder",
            ) from exc
        self._db.close()
        self._unusable(exc)
        self._db = self._open()

    def _k(self, key: CacheKey, ticket_sha256: str) -> tuple[str, str, str, int, str, str]:
        return (key.model_sha256, key.pack_hash, key.prompt_format, key.n_ctx, key.orderings, ticket_sha256)

    def get(self, key: CacheKey, ticket_sha256: str, features: tuple[str, list[str]] | None = None) -> Outcome | None:
        """The cached outcome, or None (counted as a hit or a miss).

        ``features=(kind, criteria)``: the outcome must also have features of ``kind``
        for every one of ``criteria`` (then in :attr:`Outcome.features`); without
        them it is a miss.
        """
        sql = "SELECT value FROM outcome WHERE model=? AND pack=? AND prompt=? AND n_ctx=? AND orderings=? AND ticket=?"
        kept = self._outcomes.get(self._k(key, ticket_sha256))
        if kept is not None:
            row: tuple[object, ...] | None = (kept[6],)
        else:
            try:
                row = self._db.execute(sql, self._k(key, ticket_sha256)).fetchone()
            except sqlite3.DatabaseError as exc:
                self._recover(exc)  # damaged: a new, empty file, so a miss
                row = None
        if row is not None:
            try:
                out = Outcome.from_json(str(row[0]))
            except (ValueError, KeyError, TypeError):
                out = None  # written by another version: score again
            if out is not None and features is not None:
                out.features = self.get_features(key, ticket_sha256, *features)
                if out.features is None:
                    out = None  # readouts without the features asked for: score again
            if out is not None:
                self.hits += 1
                return out
        self.misses += 1
        return None

    def put(self, key: CacheKey, ticket_sha256: str, outcome: Outcome) -> None:
        """Store (or replace) one outcome (committed with the writes around it: see :data:`COMMIT_EVERY_S`)."""
        k = self._k(key, ticket_sha256)
        self._outcomes[k] = (*k, outcome.to_json(), time.time())
        self._maybe_commit()

    def _maybe_commit(self) -> None:
        if time.monotonic() - self._committed_at >= self.commit_every_s:
            self.commit()

    def commit(self) -> None:
        """Write what is kept in memory to the file, in one transaction; a damaged file is moved aside and
        written again. With ``keep_going``, a write that fails (a full disk) is said once
        (:attr:`write_failure`) and what was to be written stays in memory, for this run's reads."""
        if not self._outcomes and not self._features or self._stopped:
            return
        try:
            self._commit()
        except TriageError as exc:
            if not self.keep_going or isinstance(exc, CacheLockedError):
                raise
            self.write_failure = f"{exc.message}; its readouts are kept in memory for this run only"
            self._stopped = True
            log.warning("%s", self.write_failure)
            try:
                self._db.rollback()
            except sqlite3.Error:
                pass

    def _commit(self) -> None:
        outcomes, features = list(self._outcomes.values()), list(self._features.values())
        for attempt in (1, 2):
            try:
                self._db.executemany("INSERT OR REPLACE INTO outcome VALUES (?, ?, ?, ?, ?, ?, ?, ?)", outcomes)
                self._db.executemany("INSERT OR REPLACE INTO features VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", features)
                self._db.commit()
                break
            except sqlite3.DatabaseError as exc:
                if attempt == 2:
                    raise TriageError(
                        f"cannot write to the eval readout cache {self.path}: {describe_error(exc)}"
                    ) from exc
                self._recover(exc)  # damaged: a new file, then write again
        self._outcomes.clear()
        self._features.clear()
        self._committed_at = time.monotonic()
        self.commits += 1

    def get_features(
        self, key: CacheKey, ticket_sha256: str, kind: str, criteria: list[str]
    ) -> dict[str, np.ndarray] | None:
        """Cached features of ``kind`` for every one of ``criteria``, or None when any is missing."""
        sql = (
            "SELECT criterion, value FROM features WHERE model=? AND pack=? "
            "AND prompt=? AND n_ctx=? AND orderings=? AND ticket=? AND kind=?"
        )
        k = self._k(key, ticket_sha256)
        kept = {c: self._features[(k, c, kind)] for c in criteria if (k, c, kind) in self._features}
        rows: list[tuple[object, object]] = []
        if len(kept) < len(criteria):
            try:
                rows = self._db.execute(sql, (*k, kind)).fetchall()
            except sqlite3.DatabaseError as exc:
                self._recover(exc)
                return None
        rows += [(c, row[8]) for c, row in kept.items()]  # what is kept in memory is newer
        got = {str(c): np.frombuffer(v, dtype="<f4").copy() for c, v in rows}  # type: ignore[call-overload]
        return got if all(c in got for c in criteria) else None

    def put_features(self, key: CacheKey, ticket_sha256: str, kind: str, features: dict[str, np.ndarray]) -> None:
        """Store one ticket's features (committed as :meth:`put`'s outcome is)."""
        k = self._k(key, ticket_sha256)
        for cid, v in features.items():
            self._features[(k, cid, kind)] = (*k, cid, kind, np.asarray(v, dtype="<f4").tobytes(), time.time())
        self._maybe_commit()

    def close(self) -> None:
        """Commit what is kept in memory, and close the database."""
        try:
            self.commit()
        finally:
            self._db.close()

    def __enter__(self) -> ReadoutCache:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _create_tables(db: sqlite3.Connection) -> None:
    """The cache's two tables (a file's, or the in-memory stand-in's when the file cannot be written)."""
    db.execute(
        "CREATE TABLE IF NOT EXISTS outcome (model TEXT, pack TEXT, prompt TEXT, n_ctx INTEGER, orderings TEXT,"
        " ticket TEXT, value TEXT, created REAL, PRIMARY KEY (model, pack, prompt, n_ctx, orderings, ticket))"
    )
    # A learned head's features: float32 little-endian, one row per criterion.
    db.execute(
        "CREATE TABLE IF NOT EXISTS features (model TEXT, pack "
        "TEXT, prompt TEXT, n_ctx INTEGER, orderings TEXT,"
        " ticket TEXT, criterion TEXT, kind TEXT, value BLOB, created REAL,"
        " PRIMARY KEY (model, pack, prompt, n_ctx, orderings, ticket, criterion, kind))"
    )
    db.commit()
