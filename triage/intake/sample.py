"""A stratified sample of labelled rows, taken while the rows stream past (``learn --per-option N``).

For each criterion and option, the ``N`` rows with the smallest hash of their id (salted apart
from the dev/train split's, so the sample does not lean to one side of ``--holdout``) are kept;
a row stays while it is among the ``N`` of any of its labels. Memory holds at most
``N x options`` rows, whatever the export's length, and the sample depends on the ids only,
not on the file order.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable
from typing import Generic, Protocol, TypeVar

SAMPLE_SALT = "triage-sample/1"

# ``learn --per-option``'s default, chosen from the learning curve in docs/teams.md ("How many rows per option"):
# on the development sets the held-out balanced accuracy stopped rising past 20-50 rows per option (within the
# noise of ~90 held-out rows), so 200 keeps every row of every set measured there and caps the scoring of a large
# export at 200 rows per option. None would mean every row.
DEFAULT_PER_OPTION: int | None = 200
PER_OPTION_WHY = (
    "on the development sets held-out balanced accuracy stopped rising past 20-50 rows per option "
    "(docs/teams.md); 200 keeps every row of a small export and caps the scoring of a large one"
)


def per_option_arg(value: str) -> int | None:
    """``--per-option``'s value: a number of rows, or ``all`` (every row: no sample)."""
    if value.strip().lower() == "all":
        return None
    return int(value)


class _Row(Protocol):
    @property
    def line(self) -> int: ...

    @property
    def id(self) -> str: ...

    @property
    def labels(self) -> dict[str, str]: ...


_R = TypeVar("_R", bound=_Row)


def sample_bucket(row_id: str) -> float:
    """A number in [0, 1) fixed by the id alone (independent of the split's)."""
    digest = hashlib.sha256(f"{SAMPLE_SALT}:{row_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


class StratifiedSample(Generic[_R]):
    """Keeps up to ``per_option`` rows per (criterion, option) as rows are offered."""

    def __init__(self, per_option: int) -> None:
        self.per_option = per_option
        self._heaps: dict[tuple[str, str], list[tuple[float, str]]] = {}  # (-bucket, id): the largest bucket on top
        self._rows: dict[str, tuple[_R, int]] = {}  # id -> (row, how many heaps hold it)
        self.offered = 0

    def offer(self, row: _R) -> None:
        """Consider one row (ids are unique among the rows offered and not removed)."""
        self.offered += 1
        b = sample_bucket(row.id)
        for key in row.labels.items():
            heap = self._heaps.setdefault(key, [])
            if len(heap) < self.per_option:
                heapq.heappush(heap, (-b, row.id))
            elif -heap[0][0] > b:
                _, out = heapq.heapreplace(heap, (-b, row.id))
                self._release(out)
            else:
                continue
            refs = self._rows.get(row.id, (row, 0))[1]
            self._rows[row.id] = (row, refs + 1)

    def wants(self, row_id: str, labels: dict[str, str]) -> bool:
        """Whether :meth:`offer` would keep a row with this id and these labels (so its text is worth reading)."""
        b = sample_bucket(row_id)
        for key in labels.items():
            heap = self._heaps.get(key)
            if heap is None or len(heap) < self.per_option or -heap[0][0] > b:
                return True
        return False

    def remove(self, row_id: str) -> None:
        """Take a row back out (a later row with the same id replaces it)."""
        if row_id not in self._rows:
            return
        del self._rows[row_id]
        for key, heap in self._heaps.items():
            if any(rid == row_id for _, rid in heap):
                self._heaps[key] = [e for e in heap if e[1] != row_id]
                heapq.heapify(self._heaps[key])

    def _release(self, row_id: str) -> None:
        row, refs = self._rows[row_id]
        if refs <= 1:
            del self._rows[row_id]
        else:
            self._rows[row_id] = (row, refs - 1)

    def rows(self) -> list[_R]:
        """The sample, in file order."""
        return sorted((r for r, _ in self._rows.values()), key=lambda r: r.line)


def sample_rows(rows: Iterable[_R], per_option: int) -> list[_R]:
    """The stratified sample of a list of rows (see :class:`StratifiedSample`)."""
    s: StratifiedSample[_R] = StratifiedSample(per_option)
    for r in rows:
        s.offer(r)
    return s.rows()
