"""Labels in the history: recorded per answer in one transaction, checked, exported, and measured as agreement."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from fake_engine import FakeEngine

from triage.cli import main
from triage.domain.pack import default_pack
from triage.domain.ticket import make_ticket
from triage.evaluation.agreement import agreement
from triage.store import features as feat
from triage.store import labels as lab
from triage.store.history import History
from triage.store.history_schema import SCHEMA_VERSION
from triage.store.paths import user_dirs

TEXTS = {
    "T-1": "My card was charged twice for the March invoice. Please refund one of them today.",
    "T-2": "The parcel says in transit for nine days now. Where is it?",
    "T-3": "How do I change the e-mail address on my account?",
}


def _score_into(h: History, ticket_id: str, text: str) -> tuple[int, int]:
    result = FakeEngine().score_ticket(make_ticket(text, ticket_id), default_pack())
    row = h.save_ticket(make_ticket(text, ticket_id))
    sid = h.start_score(row, model=result.model, pack=result.pack, orderings=result.orderings)
    h.finish_score(sid, result)
    return row, sid


@pytest.fixture
def history() -> History:
    h = History.open()
    for tid, text in TEXTS.items():
        _score_into(h, tid, text)
    yield h
    h.close()


def _shown(h: History, tid: str, crit: str) -> str:
    return next(c.choice for c in lab.find_ticket(h, tid).result.criteria if c.id == crit)


def _other(h: History, tid: str, crit: str) -> str:
    c = next(c for c in lab.find_ticket(h, tid).result.criteria if c.id == crit)
    return next(o.id for o in c.options if o.id != c.choice)


def test_confirmation_and_correction_keep_what_was_shown(history: History) -> None:
    shown = _shown(history, "T-1", "queue")
    wrong = _other(history, "T-1", "urgency")
    stored = lab.record(
        history,
        lab.find_ticket(history, "T-1"),
        [lab.Answer("queue", shown), lab.Answer("urgency", wrong)],
        origin="cli",
    )
    kinds = {s.criterion: s.kind for s in stored}
    assert kinds == {"queue": "confirmation", "urgency": "correction"}
    now = lab.current(history, stored[0].ticket_row)
    assert now["urgency"].option == wrong and now["urgency"].shown_option == _shown(history, "T-1", "urgency")
    assert now["queue"].shown_source == "zero-shot" and now["queue"].pack_hash == default_pack().hash
    assert 0 < now["queue"].shown_probability <= 1


def test_option_by_label_case_and_space_insensitive(history: History) -> None:
    crit = next(c for c in default_pack().criteria if c.id == "queue")
    opt = crit.options[-1]
    stored = lab.record(
        history, lab.find_ticket(history, "T-2"), [lab.Answer("queue", "  " + opt.label.upper() + " ")], origin="cli"
    )
    assert stored[0].option == opt.id


@pytest.mark.parametrize(
    "answers, message",
    [
        ([lab.Answer("nope", "x")], "no criterion 'nope'"),
        ([lab.Answer("queue", "the moon")], "no option 'the moon'"),
    ],
)
def test_unknown_criterion_or_option_named_and_nothing_stored(history: History, answers, message) -> None:
    from triage.errors import InputError

    scored = lab.find_ticket(history, "T-1")
    good = lab.Answer("urgency", _shown(history, "T-1", "urgency"))
    with pytest.raises(InputError, match=message) as info:
        lab.record(history, scored, [good, *answers], origin="cli")
    assert "its " in (info.value.hint or "")  # names what exists
    assert lab.count(history) == 0


def test_unknown_ticket_and_ambiguous_id(history: History) -> None:
    from triage.errors import InputError

    with pytest.raises(InputError, match="no ticket 'T-404'"):
        lab.find_ticket(history, "T-404")
    _score_into(history, "T-1", "A different text under the same id.")
    with pytest.raises(InputError, match="2 tickets in the history have the id 'T-1'"):
        lab.find_ticket(history, "T-1")


def test_cli_label_pairs_file_export_and_stats(
    history: History, tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch
) -> None:
    history.close()
    q2 = _other(History.open(), "T-2", "queue")
    assert main(["label", "T-1", f"queue={_shown(History.open(), 'T-1', 'queue')}"]) == 0
    good = tmp_path / "labels.jsonl"
    good.write_text(
        json.dumps({"id": "T-2", "labels": {"queue": q2}})
        + "\n"
        + json.dumps({"id": "T-3", "labels": {"urgency": "low"}})
        + "\n",
        encoding="utf-8",
    )
    assert main(["label", "--file", str(good)]) == 0
    err = capsys.readouterr().err
    assert "stored 2 label(s) on 2 ticket(s)" in err
    out = tmp_path / "export.jsonl"
    assert main(["label", "--export", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["id"] for r in rows] == ["T-1", "T-2", "T-3"]
    assert rows[1] == {"id": "T-2", "text": TEXTS["T-2"], "pack": "support", "labels": {"queue": q2}}
    # the export is never written over without --force
    assert main(["label", "--export", str(out)]) == 2
    assert "exists; the label export would replace it" in capsys.readouterr().err
    assert main(["stats", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["labels"] == 3
    by = {c["criterion"]: c for c in stats["criteria"]}
    assert by["queue"]["labels"] == 2 and by["queue"]["corrections"] == 1 and by["queue"]["overall"]["rate"] == 0.5
    assert by["queue"]["by_source"]["zero-shot"]["n"] == 2
    assert by["queue"]["balanced"] == 0.5  # one answer agreed, one did not: whichever options, half
    assert by["urgency"]["balanced"] in (0.0, 1.0) and by["urgency"]["labels"] == 1
    # an 80-column console (what a pipe gets) shows every column of the table; a narrower one, lines with the same
    # figures (rich would drop the columns that do not fit)
    for width, layout in ((80, "table"), (50, "lines")):
        monkeypatch.setenv("COLUMNS", str(width))
        assert main(["stats"]) == 0
        shown = capsys.readouterr().out
        assert "balanced" in shown and "50%" in shown and "zero-shot" in shown and "trend" in shown
        assert all(len(line) <= width for line in shown.splitlines())
        if layout == "table":
            header = next(line for line in shown.splitlines() if "criterion" in line)
            for col in ("labels", "fixed", "agree", "balanced", "last 50", "by source", "trend"):
                assert col in header, col
        else:
            assert "queue: 2 label(s), 1 fixed; agree 50%; balanced 50%" in " ".join(shown.split())


def test_label_file_with_bad_lines_stores_nothing(history: History, tmp_path: Path, capsys) -> None:
    history.close()
    f = tmp_path / "labels.jsonl"
    f.write_text(
        json.dumps({"id": "T-1", "labels": {"queue": "billing"}})
        + "\n"
        + "{not json\n"
        + json.dumps({"id": "T-404", "labels": {"queue": "billing"}})
        + "\n"
        + json.dumps({"id": "T-2", "labels": {"queue": "the moon"}})
        + "\n"
        + json.dumps({"id": "T-3", "labels": "billing"})
        + "\n",
        encoding="utf-8",
    )
    assert main(["label", "--file", str(f)]) == 2
    err = capsys.readouterr().err
    assert "4 bad row(s)" in err and "nothing was stored" in err
    assert f"{f}:2" in err and "no ticket 'T-404'" in err and "no option 'the moon'" in err
    with History.open() as h:
        assert lab.count(h) == 0


def test_changed_answer_keeps_first_shown_decision_for_agreement(history: History) -> None:
    scored = lab.find_ticket(history, "T-3")
    shown = _shown(history, "T-3", "queue")
    lab.record(history, scored, [lab.Answer("queue", _other(history, "T-3", "queue"))], origin="app")
    lab.record(history, scored, [lab.Answer("queue", shown)], origin="app")  # the agent fixes a slip
    [j] = lab.judged(history)
    assert j.option == shown and j.shown_option == shown and j.changed == 2
    [a] = agreement(lab.judged(history))
    assert a.overall.rate == 1.0 and a.labels == 1


def test_agreement_trend_recent_and_sources() -> None:
    def j(i: int, agree: bool, source: str) -> lab.Judged:
        return lab.Judged(i, f"t{i}", "x", "queue", "support", "h", "a", source, None, "a" if agree else "b", i, 1)

    items = [j(i, i >= 40, "zero-shot" if i < 40 else "learned") for i in range(60)]
    [a] = agreement(items, recent=20, block=20)
    assert [t.rate for t in a.trend] == [0.0, 0.0, 1.0]
    assert a.recent.rate == 1.0 and a.overall.n == 60 and a.corrections == 40
    assert a.by_source["learned"].rate == 1.0 and a.by_source["zero-shot"].rate == 0.0


def test_features_kept_float16_pruned_and_matched_by_identity(history: History) -> None:
    ident = feat.Identity("sha", "fmt", default_pack().hash)
    rng = np.random.default_rng(0)
    rows = history.conn.execute("SELECT id FROM scores ORDER BY id").fetchall()
    vecs = {}
    for (sid,) in rows:
        vecs[sid] = rng.normal(size=64).astype(np.float32)
        raw = np.log(np.array([0.5, 0.3, 0.2]))
        assert feat.save(history, sid, ident, {"queue": feat.Kept(vecs[sid], raw)}, keep=2) == 1
    assert feat.kept_scores(history) == 2
    newest = rows[-1][0]
    got = feat.load(history, newest, ident)["queue"]
    assert np.max(np.abs(got.features - vecs[newest])) < 2e-3  # float16
    assert np.allclose(got.raw, np.log([0.5, 0.3, 0.2]), atol=1e-6)
    assert feat.load(history, rows[0][0], ident) == {}  # pruned
    assert feat.load(history, newest, feat.Identity("other", "fmt", ident.pack_hash)) == {}
    ticket = history.conn.execute("SELECT ticket FROM scores WHERE id = ?", (newest,)).fetchone()[0]
    assert feat.newest_with(history, ticket, ident) == newest
    assert feat.save(history, newest, ident, {"queue": feat.Kept(np.full(4, np.nan), raw)}) == 0  # never kept


def test_history_from_newer_version_is_left_alone_by_label(tmp_path: Path, capsys) -> None:
    path = user_dirs().history_db
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    before = path.read_bytes()
    assert main(["label", "T-1", "queue=billing"]) == 2
    assert "newer triage" in capsys.readouterr().err
    assert path.read_bytes() == before


def test_kill_9_right_after_a_label_keeps_it(tmp_path: Path) -> None:
    """A process that stores a label and is killed at once (no clean exit) loses nothing."""
    with History.open() as h:
        _score_into(h, "T-9", TEXTS["T-2"])
    script = tmp_path / "label_then_hang.py"
    script.write_text(
        "import sys, time\n"
        "from triage.store.history import History\n"
        "from triage.store import labels as lab\n"
        "h = History.open()\n"
        "lab.record(h, lab.find_ticket(h, 'T-9'), [lab.Answer('queue', 'shipping')], origin='app')\n"
        "print('stored', flush=True)\n"
        "time.sleep(60)\n",
        encoding="utf-8",
    )
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "stored"
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=30)
    with History.open() as h:
        [j] = lab.judged(h)
        assert (j.ticket_id, j.criterion, j.option) == ("T-9", "queue", "shipping")


def test_training_rows_use_kept_inputs_and_name_what_is_left_out(history: History) -> None:
    from triage.store.training import training_rows

    pack = default_pack()
    ident = feat.Identity("sha", "fmt", pack.hash)
    t1 = lab.find_ticket(history, "T-1")
    t2 = lab.find_ticket(history, "T-2")
    lab.record(history, t1, [lab.Answer("queue", "billing"), lab.Answer("urgency", "high")], origin="cli")
    lab.record(history, t2, [lab.Answer("queue", "shipping")], origin="cli")
    kept = feat.Kept(np.ones(8, dtype=np.float32), np.log(np.full(5, 0.2)))
    feat.save(history, t1.score_id, ident, {"queue": kept, "urgency": kept})
    feat.save(history, t2.score_id, feat.Identity("another-model", "fmt", pack.hash), {"queue": kept})
    # a label given under an older version of the pack (a criterion this one no longer has)
    history.conn.execute(
        "INSERT INTO labels (ticket, score, criterion, option, kind, origin, created_at, pack_name, pack_hash) "
        "VALUES (?, ?, 'tone', 'warm', 'correction', 'cli', 1e10, 'support', 'an-older-hash')",
        (t2.ticket_row, t2.score_id),
    )
    got = training_rows(history, pack, ident)
    by_id = {r.ticket_id: r for r in got.rows}
    assert by_id["T-1"].labels == {"queue": "billing", "urgency": "high"} and not by_id["T-1"].needs_scoring
    assert by_id["T-2"].needs_scoring  # its features are another model's
    assert (got.kept, got.to_score) == (1, 1)
    assert got.notes() == [
        f"1 label(s) left out: given under another version of pack 'support' (pack hash an-older-has, "
        f"this one is {pack.hash[:12]})"
    ]


def test_balanced_agreement_puts_a_readout_that_always_says_one_option_at_chance() -> None:
    from triage.evaluation.agreement import agreement
    from triage.store.labels import Judged

    answers = ["medium"] * 6 + ["high"] * 3 + ["low"]  # agents' answers; the readout always showed medium
    judged = [
        Judged(i, f"T-{i}", "t", "priority", "p", "h", "medium", "zero-shot", None, a, float(i), 1)
        for i, a in enumerate(answers)
    ]
    (row,) = agreement(judged)
    assert row.overall.rate == 0.6  # it agrees as often as agents say medium
    assert row.balanced == pytest.approx(1 / 3)  # and is at chance over the three options answered
