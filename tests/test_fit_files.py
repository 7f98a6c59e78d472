"""The fit policy remembers its files (triage.learning.memo through triage.learning.fitstore.FILES): walking
tickets from Session.score to the engine, each head and calibration file is read once, and a file stored or
replaced meanwhile (another process's `triage learn`) is read on the next ticket."""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import TOPIC_MOOD
from fake_engine import FakeEngine

from triage import gate
from triage.domain.ticket import make_ticket
from triage.learning import fitstore, head_file, memo
from triage.learning.fit import FitRequest, choose_fits
from triage.scoring.calibrate import Calibration, CriterionCalibration, write_calibration
from triage.scoring.head import CriterionHead, Head, feature_ids
from triage.scoring.options import ScoreOptions
from triage.session import Session

PACK = TOPIC_MOOD
TICKETS = 12


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[tuple[str, str]]:
    """Every head and calibration file opened through the gate (its every read opens there), by (kind, path)."""
    seen: Counter[tuple[str, str]] = Counter()
    real_open = gate.open_fd

    def open_fd(path: str | Path, kind: str) -> Any:
        if kind in ("head", "calibration"):
            seen[(kind, str(path))] += 1
        return real_open(path, kind)

    monkeypatch.setattr(gate, "open_fd", open_fd)
    monkeypatch.setattr(fitstore, "FILES", memo.FileMemo())
    return seen


class Recording(FakeEngine):
    """The fake engine, noting the head and calibration each score was handed."""

    def __init__(self) -> None:
        super().__init__()
        self.handed: list[tuple[str | None, str | None]] = []
        self.temperatures: list[float | None] = []

    def score(self, *args: Any, **kw: Any) -> Iterator[Any]:  # type: ignore[override]
        head, cal = kw.get("head"), kw.get("calibration")
        self.handed.append((head.name if head else None, cal.name if cal else None))
        self.temperatures.append(cal.criteria["mood"].temperature if cal else None)
        return super().score(*args, **kw)


def make_head(engine: Any, name: str, *, seed: int = 1) -> Head:
    n_vocab, n_embd = 300, 50
    f = len(feature_ids(n_vocab, n_embd))
    rng = np.random.default_rng(seed)
    options = ["billing", "other"]
    topic = CriterionHead(options, options, rng.normal(size=(2, f + 2)), rng.normal(size=2))
    fmt = engine.format_for("label").id
    return Head(engine.sha256, PACK.hash, fmt, n_vocab, n_embd, {"topic": topic}, name=name)


def make_cal(engine: Any, temperature: float = 0.5) -> Calibration:
    crit = CriterionCalibration(temperature, {"angry": 1.0, "calm": 0.0})
    return Calibration(engine.sha256, PACK.hash, engine.format_for("label").id, "none", False, {"mood": crit})


def settle(path: Path, age_s: float = 60.0) -> Path:
    """Date ``path`` back, as any file not written this very second is (the memo rereads one just written)."""
    then = time.time() - age_s
    os.utime(path, (then, then))
    return path


def store_head(head: Head, folder: Path | None = None) -> Path:
    folder = folder or fitstore.heads_dir()
    return settle(
        head_file.write_head(head, folder / fitstore.head_name(head.model_sha256, PACK.hash, head.prompt_format))
    )


def store_cal(cal: Calibration) -> Path:
    path = fitstore.calibrations_dir() / fitstore.stored_name(cal.model_sha256, cal.pack_hash, cal.prompt_format)
    return settle(write_calibration(cal, path))


def test_each_fit_file_is_read_once_over_many_tickets(reads: Counter[tuple[str, str]]) -> None:
    engine = Recording()
    head_path, cal_path = store_head(make_head(engine, "team head")), store_cal(make_cal(engine))
    session = Session(engine)
    for i in range(TICKETS):
        list(session.score(make_ticket(f"ticket {i}"), PACK, ScoreOptions()))
    assert engine.handed == [("team head", cal_path.name)] * TICKETS
    assert reads == {("head", str(head_path)): 1, ("calibration", str(cal_path)): 1}


def test_a_file_replaced_while_the_session_runs_is_read_on_the_next_ticket(reads: Counter[tuple[str, str]]) -> None:
    engine = Recording()
    head_path = store_head(make_head(engine, "first"))
    session = Session(engine)
    list(session.score(make_ticket("one"), PACK, ScoreOptions()))
    store_head(make_head(engine, "second", seed=2))  # another process's learn: a new file renamed over the old
    list(session.score(make_ticket("two"), PACK, ScoreOptions()))
    list(session.score(make_ticket("three"), PACK, ScoreOptions()))
    assert [h for h, _ in engine.handed] == ["first", "second", "second"]
    assert reads[("head", str(head_path))] == 2
    cal_path = store_cal(make_cal(engine))  # stored meanwhile where there was none
    list(session.score(make_ticket("four"), PACK, ScoreOptions()))
    assert engine.handed[-1] == ("second", cal_path.name) and reads[("calibration", str(cal_path))] == 1


def test_a_file_rewritten_in_place_within_its_clock_tick_is_read_again(reads: Counter[tuple[str, str]]) -> None:
    """Same size, same inode, and (a coarse clock) the same modification time: a file changed this recently is
    never trusted from memory."""
    engine = Recording()
    path = fitstore.calibrations_dir() / fitstore.stored_name(engine.sha256, PACK.hash, engine.format_for("label").id)
    write_calibration(make_cal(engine, 0.25), path)
    then = path.stat().st_mtime_ns
    session = Session(engine)
    list(session.score(make_ticket("one"), PACK, ScoreOptions()))
    with path.open("r+b") as fh:  # in place, same length
        text = fh.read()
        assert b"0.25" in text
        fh.seek(0)
        fh.write(text.replace(b"0.25", b"0.75"))
    os.utime(path, ns=(then, then))
    list(session.score(make_ticket("two"), PACK, ScoreOptions()))
    assert engine.temperatures == [0.25, 0.75]


def test_the_shipped_starter_head_is_checked_once_beside_a_local_one(
    reads: Counter[tuple[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With a starter head fitted here and one shipped (stored_starter prefers the shipped one when it fits),
    the policy asks for every ticket, and the shipped file is read once."""
    engine = FakeEngine()
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    monkeypatch.setattr(fitstore, "shipped_dir", lambda: shipped)
    ship = make_head(engine, "shipped")
    ship.kind = "starter"
    local = make_head(engine, "local", seed=3)
    local.kind = "starter"
    shipped_path = store_head(ship, shipped)
    local_path = settle(fitstore.store_starter_head(local))
    for _ in range(TICKETS):
        fits = choose_fits(engine, PACK, ScoreOptions(), FitRequest(starter=True))
        assert fits.head is not None and fits.head.name == "shipped"
    assert reads[("head", str(shipped_path))] == 1 and reads[("head", str(local_path))] == 0


def test_what_cannot_be_read_is_never_remembered(tmp_path: Path) -> None:
    files = memo.FileMemo()
    path = tmp_path / "f"
    calls: list[str] = []

    def read(p: Path) -> str:
        calls.append(p.name)
        if not p.exists():
            raise FileNotFoundError(p)
        return p.read_text()

    for _ in range(2):
        with pytest.raises(FileNotFoundError):
            files.get(path, read)
    path.write_text("x")
    settle(path)
    assert [files.get(path, read) for _ in range(3)] == ["x"] * 3
    assert calls == ["f"] * 3 and files.reads == 3
