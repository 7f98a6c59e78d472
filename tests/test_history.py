"""SQLite history: schema and migrations, commit per ticket, re-scores kept, bad files moved aside."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from fake_engine import FakeEngine

from triage.domain.pack import default_pack
from triage.domain.result import TicketResult
from triage.domain.thread import Message
from triage.domain.ticket import make_ticket
from triage.lab import score as lab
from triage.lab.options import LabOptions
from triage.scoring.engine import ScoreOptions
from triage.store.history import History
from triage.store.history_schema import MIGRATIONS, SCHEMA_VERSION
from triage.store.paths import user_dirs

TEXT = "My card was charged twice for the March invoice.\nPlease refund one of them today."


def scored(text: str = TEXT, **kw: object) -> TicketResult:
    return FakeEngine(**kw).score_ticket(text, default_pack())  # type: ignore[arg-type]


def save_scored(h: History, text: str = TEXT) -> tuple[int, int, TicketResult]:
    result = scored(text)
    row = h.save_ticket(make_ticket(text))
    sid = h.start_score(row, model=result.model, pack=result.pack, orderings=result.orderings)
    h.finish_score(sid, result)
    return row, sid, result


def test_default_location_wal_and_schema_version() -> None:
    with History.open() as h:
        assert h.path == user_dirs().history_db
        assert h.notice is None
        assert h.schema_version == SCHEMA_VERSION == MIGRATIONS[-1][0]
    conn = sqlite3.connect(user_dirs().history_db)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_round_trip_keeps_the_result_schema() -> None:
    with History.open() as h:
        row, sid, result = save_scored(h)
        saved = h.load(sid)
        assert saved.text == make_ticket(TEXT).text
        assert saved.status == "done"
        assert saved.result is not None and saved.result.to_dict() == result.to_dict()
        [entry] = h.search()
        assert (entry.ticket_row, entry.score_id, entry.status) == (row, sid, "done")
        assert entry.summary == result.summary()
        assert entry.pack == f"support v{default_pack().version}" and entry.model_name == "fake-0.1b"
        assert "\n" not in entry.preview


def test_rescoring_keeps_both_results() -> None:
    with History.open() as h:
        row1, sid1, first = save_scored(h)
        again = lab.score_ticket(FakeEngine(), TEXT, default_pack(), LabOptions(readout="letter", orderings="cyclic"))
        row2 = h.save_ticket(make_ticket(TEXT))
        sid2 = h.start_score(row2, model=again.model, pack=again.pack, orderings=again.orderings)
        h.finish_score(sid2, again)
        assert row1 == row2 and sid1 != sid2
        assert [(r.readout, r.orderings) for r in h.results(row1)] == [("label", "none"), ("letter", "cyclic")]
        assert [e.score_id for e in h.search()] == [sid2, sid1]
        assert h.load_ticket(row1).score_id == sid2


def test_search_words_and_literal_percent() -> None:
    with History.open() as h:
        save_scored(h)
        save_scored(h, "The app crashes at 100% progress on login")
        assert len(h.search("")) == 2
        assert [e.preview[:7] for e in h.search("crashes login")] == ["The app"]
        assert len(h.search("100%")) == 1
        assert h.search("charged crashes") == []
        assert len(h.search("fake-0.1b")) == 2  # model name


def test_cancelled_and_failed_scores_are_kept() -> None:
    with History.open() as h:
        row = h.save_ticket(make_ticket(TEXT))
        sid = h.start_score(row, model={"name": "m"}, pack={"name": "p", "version": "1"}, orderings="cyclic")
        h.fail_score(sid, "boom")
        assert h.load(sid).status == "failed" and h.load(sid).error == "boom"
        events = list(FakeEngine(delay=0.01).score(TEXT, default_pack(), cancel=lambda: True))
        result = events[-1].result  # type: ignore[attr-defined]
        assert not result.complete
        sid2 = h.start_score(row, model=result.model, pack=result.pack, orderings="cyclic")
        h.finish_score(sid2, result)
        assert h.load(sid2).status == "cancelled"


CRASH = """
import os, sys
from triage.store.history import History
from triage.domain.ticket import make_ticket
h = History.open()
row = h.save_ticket(make_ticket(sys.argv[1]))
h.start_score(row, model={"name": "m"}, pack={"name": "support", "version": "1"}, orderings="cyclic")
os._exit(9)  # die mid-score: no close, no finish
"""


def test_a_crash_mid_score_loses_only_that_score() -> None:
    with History.open() as h:
        _, sid, result = save_scored(h)
    proc = subprocess.run([sys.executable, "-c", CRASH, "The printer is on fire"], capture_output=True, text=True)
    assert proc.returncode == 9, proc.stderr
    with History.open() as h:
        assert h.notice is None
        entries = h.search()
        assert [e.status for e in entries] == ["running", "done"]
        assert entries[0].preview == "The printer is on fire"  # saved at submit
        assert h.load(sid).result.to_dict() == result.to_dict()  # type: ignore[union-attr]


def test_a_file_that_is_not_sqlite_is_left_alone_never_moved_or_overwritten() -> None:
    db = user_dirs().history_db
    db.parent.mkdir(parents=True)
    junk = b"this is not sqlite\x00\xff" * 100
    db.write_bytes(junk)
    with History.open() as h:
        assert h.notice is not None and "not a triage history" in h.notice and "moved aside" not in h.notice
        assert h.path is None  # this session's history is in memory
        save_scored(h)
        assert len(h.search()) == 1
    assert db.read_bytes() == junk
    assert not list(db.parent.glob("history.sqlite3.bad-*"))


def test_damaged_pages_are_moved_aside() -> None:
    db = user_dirs().history_db
    with History.open() as h:
        for i in range(60):
            save_scored(h, f"ticket number {i} " + "x" * 3000)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(db.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    data[page * 2 : page * 6] = b"\xa5" * (page * 4)  # trash b-tree pages, keep the header
    db.write_bytes(bytes(data))
    with History.open() as h:
        assert h.notice is not None and "moved aside" in h.notice
        assert h.search() == []
    assert len(list(db.parent.glob("history.sqlite3.bad-*"))) == 1


def test_newer_schema_is_left_alone() -> None:
    db = user_dirs().history_db
    db.parent.mkdir(parents=True)
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    before = db.read_bytes()
    with History.open() as h:
        assert h.path is None and h.notice is not None and "newer triage" in h.notice
        save_scored(h)  # works, in memory
    assert db.read_bytes() == before
    assert not list(db.parent.glob("*.bad-*"))


def test_a_directory_in_the_way_is_left_alone() -> None:
    db = user_dirs().history_db
    db.mkdir(parents=True)
    (db / "mine.txt").write_text("a user's file", encoding="utf-8")
    with History.open() as h:
        assert h.notice is not None and "is a folder" in h.notice and h.path is None
    assert db.is_dir() and (db / "mine.txt").read_text(encoding="utf-8") == "a user's file"


def test_migrates_an_older_schema_in_place(tmp_path: Path) -> None:
    db = tmp_path / "old.sqlite3"
    conn = sqlite3.connect(db)
    for sql in MIGRATIONS[0][1]:
        conn.execute(sql)
    conn.execute(
        "INSERT INTO tickets (ticket_id, sha256, text, created_at, updated_at) VALUES ('t1', 'abc', 'old text', 1, 1)"
    )
    conn.execute("PRAGMA user_version = 1")
    conn.commit()
    conn.close()
    with History.open(db) as h:
        assert h.schema_version == SCHEMA_VERSION
        assert [e.preview for e in h.search()] == ["old text"]
        assert h.search()[0].status == ""  # never scored
    names = {r[0] for r in sqlite3.connect(db).execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert {"scores_by_ticket", "tickets_by_update"} <= names


@pytest.mark.parametrize("text", ["a\x1b[31mred\x1b[0m ticket", "ünïcödé ✓ ticket"])
def test_text_is_stored_cleaned(text: str) -> None:
    with History.open() as h:
        row = h.save_ticket(make_ticket(text))
        assert h.load_ticket(row).text == make_ticket(text).text
        assert h.load_ticket(row).score_id is None


# -- threads ------------------------------------------------------------------------
THREAD = [
    {"role": "customer", "text": "My parcel is late. Order 4411."},
    {"role": "agent", "text": "Sorry, I have asked the carrier."},
    {"role": "customer", "text": "Nobody wrote back. Second time I ask."},
]


def _score(h: History, ticket: object, row: int | None = None) -> tuple[int, int]:
    t = ticket  # a Ticket
    result = FakeEngine().score_ticket(t, default_pack())  # type: ignore[arg-type]
    row = h.save_ticket(t, row=row)  # type: ignore[arg-type]
    sid = h.start_score(row, model=result.model, pack=result.pack, orderings="none", messages=len(t.thread))  # type: ignore[attr-defined]
    h.finish_score(sid, result)
    return row, sid


def test_a_growing_thread_is_one_ticket_row_with_a_score_per_message() -> None:
    with History.open() as h:
        plain = make_ticket(THREAD[0]["text"])
        row, sid1 = _score(h, plain)
        grown = make_ticket(None, plain.id, THREAD[:2])
        row2, sid2 = _score(h, grown, row=row)
        assert row2 == row
        row3, sid3 = _score(h, make_ticket(None, plain.id, THREAD), row=row)
        assert row3 == row
        assert h.thread(row) == make_ticket(None, "x", THREAD).thread
        saved = h.load(sid1)
        assert saved.is_thread and len(saved.messages) == 3 and saved.scored == 1
        assert h.load(sid3).scored == 3 and h.load_ticket(row).score_id == sid3
        assert saved.text == make_ticket(None, "x", THREAD).text  # the row's text is the whole thread now
        entries = h.search()
        assert {e.ticket_row for e in entries} == {row} and [e.scored for e in entries] == [3, 2, 1]
        assert {e.messages for e in entries} == {3}
        assert [r.thread.messages for r in h.results(row)] == [1, 2, 3]
        # the first message pasted again is a new plain ticket, not the thread
        again = h.save_ticket(make_ticket(THREAD[0]["text"]))
        assert again != row and not h.load_ticket(again).is_thread


def test_a_thread_without_a_row_is_found_by_its_id_and_first_message() -> None:
    with History.open() as h:
        row, _ = _score(h, make_ticket(None, "T-7", THREAD[:2]))
        assert h.save_ticket(make_ticket(None, "T-7", THREAD)) == row
        assert len(h.thread(row)) == 3
        other = h.save_ticket(make_ticket(None, "T-7", [{"role": "customer", "text": "Another thread."}, THREAD[1]]))
        assert other != row
        edited = [THREAD[0], {"role": "agent", "text": "We do not ship there."}, THREAD[2]]
        assert h.save_ticket(make_ticket(None, "T-7", edited)) == row  # an edited message is updated in place
        assert h.thread(row)[1].text == "We do not ship there."


def test_each_reply_is_saved_before_scoring_and_survives_a_crash() -> None:
    script = """
import os, sys, json
from triage.store.history import History
from triage.domain.ticket import make_ticket
h = History.open()
t = make_ticket(None, "T-1", json.loads(sys.argv[1]))
row = h.save_ticket(t)
h.start_score(row, model={"name": "m"}, pack={"name": "support", "version": "1"}, orderings="none", messages=2)
os._exit(9)
"""
    import json

    with History.open() as h:
        row, _ = _score(h, make_ticket(None, "T-1", THREAD[:1]))
    proc = subprocess.run([sys.executable, "-c", script, json.dumps(THREAD[:2])], capture_output=True, text=True)
    assert proc.returncode == 9, proc.stderr
    with History.open() as h:
        assert [m.text for m in h.thread(row)] == [THREAD[0]["text"], THREAD[1]["text"]]
        assert [(e.status, e.scored) for e in h.search()] == [("running", 2), ("done", 1)]


def test_a_schema_3_history_gains_messages_and_keeps_its_tickets(tmp_path: Path) -> None:
    db = tmp_path / "v3.sqlite3"
    conn = sqlite3.connect(db)
    for _, statements in MIGRATIONS[:3]:
        for sql in statements:
            conn.execute(sql)
    conn.execute(
        "INSERT INTO tickets (ticket_id, sha256, text, created_at, updated_at) VALUES ('t1', 'abc', 'old text', 1, 1)"
    )
    conn.execute("INSERT INTO scores (ticket, status, started_at) VALUES (1, 'running', 2)")
    conn.execute("PRAGMA user_version = 3")
    conn.commit()
    conn.close()
    with History.open(db) as h:
        assert h.schema_version == SCHEMA_VERSION == 4
        [e] = h.search()
        assert (e.preview, e.messages, e.scored) == ("old text", 1, 1)
        assert h.thread(1) == (Message("customer", "old text"),) and not h.load_ticket(1).is_thread
        assert h.scored_messages(e.score_id) == 1  # type: ignore[arg-type]


def test_score_history_keeps_a_returning_thread_in_one_row() -> None:
    from triage.session import Session

    engine, pack = FakeEngine(), default_pack()
    session = Session(engine)
    try:
        rows = []
        for k in (2, 3):
            ticket = make_ticket(None, "T-7", THREAD[:k])
            begun = []
            list(session.score(ticket, pack, ScoreOptions(), keep=True, begun=begun.append))
            [scoring] = begun
            rows.append(scoring.ticket_row)
            assert scoring.score_id is not None
            assert session.history.scored_messages(scoring.score_id) == k
        assert rows[0] == rows[1] and len(session.history.thread(rows[0])) == 3
    finally:
        session.close()
