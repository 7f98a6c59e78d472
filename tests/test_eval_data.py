"""Labelled rows, bad rows, the id-hash split, the readout cache, and the report from fake readouts."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from triage.domain.pack import parse_pack
from triage.domain.result import TicketResult, Timing, Tokens
from triage.domain.ticket import make_ticket
from triage.errors import InputError
from triage.evaluation.runner import CalibrationPlan, build_report, content_free_prior
from triage.lab import debias
from triage.lab.scorer import LabScorer
from triage.learning.cache import CacheKey, Outcome, ReadoutCache
from triage.learning.labelled import read_labelled, split_by_id, write_jsonl
from triage.learning.scorer import Scorer, score_rows

PACK = parse_pack(
    {
        "criterion": [
            {
                "id": "mood",
                "question": "Mood?",
                "options": [{"id": "bad", "label": "Bad"}, {"id": "good", "label": "Good"}],
            },
        ],
    }
)


def write(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def test_bad_rows_are_named_and_counted(tmp_path: Path) -> None:
    f = write(
        tmp_path / "t.jsonl",
        [
            json.dumps({"id": "a", "text": "fine", "labels": {"mood": "good"}}),
            "[1, 2]",
            "{broken",
            json.dumps({"id": "b", "text": "meh", "labels": {}}),
            json.dumps({"id": "c", "text": "meh", "labels": {"mood": "awful"}}),
            json.dumps({"id": "d", "labels": {"mood": "bad"}}),
            json.dumps({"id": "e", "text": "  ", "labels": {"mood": "bad"}}),
            "",
            json.dumps({"id": "f", "text": "line\u2028separator inside", "labels": {"mood": "bad", "extra": "x"}}),
        ],
    )
    s = read_labelled(f, PACK)
    assert [r.id for r in s.rows] == ["a", "f"]
    msgs = {b.line: b.message for b in s.bad}
    assert set(msgs) == {2, 3, 4, 5, 6, 7}
    assert "line 2" in msgs[2] and "expected a JSON object" in msgs[2] and "got list" in msgs[2]
    assert "not valid JSON" in msgs[3]
    assert "no label for criterion 'mood'" in msgs[4] and "(id b)" in msgs[4]
    assert "'awful' is not an option of 'mood'" in msgs[5] and "bad, good" in msgs[5]
    assert "field 'text'" in msgs[6]
    assert "empty" in msgs[7]
    assert s.ignored_criteria == {"extra": 1}
    assert "\u2028" in s.rows[1].ticket.text  # U+2028 inside a JSON string is not a line break


def test_no_usable_rows(tmp_path: Path) -> None:
    f = write(tmp_path / "t.jsonl", ["42"])
    with pytest.raises(InputError, match="no usable labelled rows.*line 1"):
        read_labelled(f, PACK)
    with pytest.raises(InputError, match="does not exist"):
        read_labelled(tmp_path / "missing.jsonl", PACK)


def test_split_is_by_id_and_stable(tmp_path: Path) -> None:
    rows = [
        json.dumps({"id": f"r{i}", "text": f"text {i}", "labels": {"mood": "bad" if i % 2 else "good"}})
        for i in range(200)
    ]
    a = read_labelled(write(tmp_path / "a.jsonl", rows), PACK)
    b = read_labelled(write(tmp_path / "b.jsonl", rows[::-1]), PACK)
    dev_a, train_a = split_by_id(a, 0.5)
    dev_b, train_b = split_by_id(b, 0.5)
    assert {r.id for r in train_a.rows} == {r.id for r in train_b.rows}
    assert 70 < len(train_a.rows) < 130 and len(dev_a.rows) + len(train_a.rows) == 200
    assert [r.id for r in dev_a.limit(3).rows] == [r.id for r in dev_a.rows[:3]]
    write_jsonl(train_a.rows, tmp_path / "out" / "train.jsonl")
    back = read_labelled(tmp_path / "out" / "train.jsonl", PACK)
    assert [r.id for r in back.rows] == [r.id for r in train_a.rows]
    with pytest.raises(InputError, match="between 0 and 1"):
        split_by_id(a, 1.5)


def test_cache_round_trip_and_keys(tmp_path: Path) -> None:
    key = CacheKey("m" * 64, "packhash", "triage-prompt/1:chat", 1024, "cyclic")
    lp = np.log(np.array([0.3, 0.7]))
    out = Outcome({"mood": [((0, 1), lp, 0.9), ((1, 0), lp[::-1].copy(), 0.8)]}, ["ticket shortened to fit"], 12.5)
    with ReadoutCache(tmp_path / "c.sqlite3") as cache:
        assert cache.get(key, "t1") is None
        cache.put(key, "t1", out)
    with ReadoutCache(tmp_path / "c.sqlite3") as cache:  # survives a reopen
        back = cache.get(key, "t1")
        assert back is not None and back.cut
        assert back.readouts["mood"][1][0] == (1, 0)
        np.testing.assert_array_equal(back.readouts["mood"][0][1], lp)  # exact floats
        assert cache.get(CacheKey("m" * 64, "packhash", "triage-prompt/1:chat", 512, "cyclic"), "t1") is None
        assert cache.get(CacheKey("m" * 64, "otherpack", "triage-prompt/1:chat", 1024, "cyclic"), "t1") is None
        assert (cache.hits, cache.misses) == (1, 2)


def test_cache_writes_wait_in_memory_are_read_back_and_committed_together_and_on_close(tmp_path: Path) -> None:
    import sqlite3

    key = CacheKey("m" * 64, "packhash", "triage-prompt/1:chat", 1024, "none@fanout")
    out = Outcome({"mood": [((0, 1), np.log(np.array([0.3, 0.7])), 0.9)]})
    feats = {"mood": np.arange(4, dtype=np.float32)}
    path = tmp_path / "c.sqlite3"

    def on_disk() -> tuple[int, int]:
        with sqlite3.connect(path) as other:  # another process's view: only what is committed
            return (
                other.execute("SELECT COUNT(*) FROM outcome").fetchone()[0],
                other.execute("SELECT COUNT(*) FROM features").fetchone()[0],
            )

    with ReadoutCache(path, commit_every_s=3600) as cache:
        for i in range(5):
            cache.put(key, f"t{i}", out)
            cache.put_features(key, f"t{i}", "logits-image/1", feats)
        assert on_disk() == (0, 0) and cache.commits == 0
        got = cache.get(key, "t3", ("logits-image/1", ["mood"]))  # read back from memory, features too
        assert got is not None and np.array_equal(got.features["mood"], feats["mood"])  # type: ignore[index]
        cache.commit()
        assert on_disk() == (5, 5) and cache.commits == 1
        cache.put(key, "t5", out)
    assert on_disk() == (6, 5)  # closing commits what is left
    with ReadoutCache(path, commit_every_s=0) as cache:  # 0: every write committed at once
        cache.put(key, "t6", out)
        assert on_disk() == (7, 5) and cache.commits == 1
        cache.put_features(key, "t6", "logits-image/1", feats)
        assert on_disk() == (7, 6) and cache.commits == 2
        # Features half on disk, half in memory are read together.
        cache.commit_every_s = 3600
        cache.put_features(key, "t6", "logits-image/1", {"other": np.ones(2, dtype=np.float32)})
        both = cache.get_features(key, "t6", "logits-image/1", ["mood", "other"])
        assert both is not None and set(both) == {"mood", "other"}


def test_batched_commits_leave_the_same_rows_and_values_as_one_commit_per_row(tmp_path: Path) -> None:
    """Learn's scoring stores each row's outcome and features; committed together or one at a time, the file
    ends with the same rows holding the same values (a row stored twice keeps its last value either way)."""
    import sqlite3

    key = CacheKey("m" * 64, "packhash", "triage-prompt/1:chat", 1024, "none@fanout")
    rng = np.random.default_rng(7)

    def row(i: int) -> tuple[Outcome, dict[str, np.ndarray]]:
        lp = np.log(rng.dirichlet([1.0, 1.0]))
        out = Outcome({"mood": [((0, 1), lp, 0.9)]}, [f"w{i}"] if i % 3 == 0 else [], 10.0 + i)
        return out, {"mood": rng.standard_normal(8).astype(np.float32)}

    rows = [row(i) for i in range(12)]
    rows.append(row(99))  # ticket t4 stored again with other values: the last write wins

    def store(path: Path, every: float) -> int:
        with ReadoutCache(path, commit_every_s=every) as cache:
            for i, (out, feats) in enumerate(rows):
                name = f"t{4 if i == 12 else i}"
                cache.put(key, name, out)
                cache.put_features(key, name, "logits-image/1", feats)
        return cache.commits  # closing commits what is left

    def dump(path: Path) -> tuple[list[Any], list[Any]]:
        with sqlite3.connect(path) as db:  # every column but the time written
            outcomes = db.execute(
                "SELECT model, pack, prompt, n_ctx, orderings, ticket, value FROM outcome ORDER BY ticket"
            )
            features = db.execute(
                "SELECT model, pack, prompt, n_ctx, orderings, ticket, criterion, kind, value FROM features"
                " ORDER BY ticket, criterion, kind"
            )
            return outcomes.fetchall(), features.fetchall()

    one_each, batched = tmp_path / "one.sqlite3", tmp_path / "batched.sqlite3"
    assert store(one_each, 0) == 2 * len(rows)  # two commits a row, as learn stored before
    assert store(batched, 3600) == 1  # all of them in one, on close
    assert dump(batched) == dump(one_each)
    outcomes, features = dump(batched)
    assert len(outcomes) == len(features) == 12
    with ReadoutCache(batched) as cache:  # and read back as they were stored
        got = cache.get(key, "t4", ("logits-image/1", ["mood"]))
        assert got is not None and got.features is not None
        np.testing.assert_array_equal(got.readouts["mood"][0][1], rows[12][0].readouts["mood"][0][1])
        np.testing.assert_array_equal(got.features["mood"], rows[12][1]["mood"])


@pytest.mark.parametrize("damage", ["not a database", "torn pages"])
def test_damaged_cache_is_moved_aside_and_recomputed(tmp_path: Path, damage: str) -> None:
    key = CacheKey("m" * 64, "packhash", "triage-prompt/1:chat", 1024, "cyclic")
    out = Outcome({"mood": [((0, 1), np.log(np.array([0.3, 0.7])), 0.9)]})
    path = tmp_path / "c.sqlite3"
    if damage == "not a database":
        path.write_bytes(b"this is no SQLite file" * 100)
    else:
        with ReadoutCache(path) as cache:
            for i in range(300):
                cache.put(key, f"t{i}", out)
        data = bytearray(path.read_bytes())
        data[4096:12288] = b"\xff" * 8192  # scribble over pages past the header
        path.write_bytes(bytes(data))
    with ReadoutCache(path) as cache:
        assert cache.notice and "moved aside" in cache.notice
        assert cache.get(key, "t1") is None  # a miss: computed again
        cache.put(key, "t1", out)
        assert cache.get(key, "t1") is not None
    assert list(tmp_path.glob("c.sqlite3.bad-*"))


def test_locked_cache_is_waited_for_then_named(tmp_path: Path) -> None:
    import sqlite3

    from triage.learning.cache import CacheLockedError

    path = tmp_path / "c.sqlite3"
    ReadoutCache(path).close()
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(CacheLockedError) as info:
            ReadoutCache(path, busy_wait_s=0.2)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "locked by another process" in info.value.message and str(path) in info.value.message
    assert not list(tmp_path.glob("c.sqlite3.bad-*"))  # a locked file is never moved aside
    with ReadoutCache(path) as cache:
        assert cache.notice is None


class FakeEngine:
    """Stands in for Engine.raw_readouts: 'bad' tickets contain 'awful'; letter A is favoured."""

    sha256 = "f" * 64
    n_ctx = 1024
    fmt = type("F", (), {"id": "triage-prompt/1:chat"})()
    model_info = {"name": "fake"}

    def __init__(self) -> None:
        self.calls = 0

    def format_for(self, kind: str = "label"):  # type: ignore[no-untyped-def]
        return type("F", (), {"id": f"triage-prompt/1:chat/{kind}"})()

    def builder(self, pack, readout="label"):  # type: ignore[no-untyped-def]
        from fake_engine import CharTokenizer

        from triage.scoring.prompt import PromptBuilder, PromptFormat
        from triage.scoring.readout import product_readout

        kind = product_readout(readout)
        return PromptBuilder(pack, PromptFormat("plain", readout=kind.name), CharTokenizer(), kind)

    def raw_readouts(self, ticket, pack, options=None, *, readout, schedule):  # type: ignore[no-untyped-def]
        self.calls += 1
        content = np.array([2.0, 0.0]) if "awful" in ticket.text else np.array([0.0, 1.0])
        reads = {}
        for crit in pack.criteria:
            reads[crit.id] = []
            for order in readout.orders(len(crit.options)):
                logits = np.array([1.5, 0.0]) + content[list(order)]  # position A bias
                reads[crit.id].append((order, debias.log_normalize(logits), 0.9))
        result = TicketResult(
            ticket.id, ticket.sha256, {}, {}, "", "serial", "cyclic", False, [], Timing(), Tokens(), []
        )
        return result, reads


def test_scorer_caches_and_report_has_every_variant(tmp_path: Path) -> None:
    texts = [("awful service", "bad"), ("great, thanks", "good"), ("awful delay", "bad"), ("lovely crew", "good")] * 4
    rows = [json.dumps({"id": f"r{i}", "text": f"{t} {i}", "labels": {"mood": m}}) for i, (t, m) in enumerate(texts)]
    s = read_labelled(write(tmp_path / "t.jsonl", rows), PACK)
    engine = FakeEngine()
    with ReadoutCache(tmp_path / "c.sqlite3") as cache:
        scorer = LabScorer(engine, PACK, cache, "letter")
        first = score_rows(scorer, s.rows)
        assert engine.calls == 16 and cache.misses == 16 and cache.hits == 0
        again = score_rows(scorer, s.rows)
        assert engine.calls == 16 and cache.hits == 16  # nothing scored twice
        prior = content_free_prior(scorer)
    assert len(again.rows) == 16
    report, fitted = build_report(
        PACK,
        first,
        prior=prior,
        plan=CalibrationPlan(train=again, fit_kw={"min_per_option": 5, "holdout": 0}),
        baseline=False,
        engine_info={"model_sha256": engine.sha256, "prompt_format": engine.format_for("letter").id},
        readout="letter",
    )
    crit = report["criteria"][0]
    assert set(crit["variants"]) == {"raw", "cyclic", "cyclic+prior", "calibrated", "raw+calibrated"}
    # The position bias fools the pack order on 'good' rows only; rotations fix it.
    assert crit["variants"]["cyclic"]["accuracy"] == 1.0
    assert crit["variants"]["raw"]["confusion"] == [[8, 0], [8, 0]]
    assert crit["variants"]["cyclic"]["flip_rate"] == pytest.approx(0.5)
    assert crit["variants"]["cyclic"]["coverage"] == pytest.approx(0.9)
    # A bias fitted on the pack-order readout alone also removes the position lean.
    assert crit["variants"]["raw+calibrated"]["accuracy"] == 1.0
    assert crit["calibration_raw"]["base"] == "raw"
    assert fitted is not None and crit["calibration"]["temperature"] > 0
    assert crit["label_counts"] == {"bad": 8, "good": 8}


def test_eval_scores_the_label_readout_as_score_does_and_keys_the_mode(tmp_path: Path) -> None:
    """Heads and calibrations are fitted on the mode they are applied in; a serial readout is not reused for fanout."""
    engine = FakeEngine()
    seen: list[str] = []
    real = engine.raw_readouts

    def spy(ticket, pack, options, **seams):  # type: ignore[no-untyped-def]
        seen.append(seams["schedule"].name)
        return real(ticket, pack, options, **seams)

    engine.raw_readouts = spy  # type: ignore[method-assign]
    rows = read_labelled(
        write(tmp_path / "t.jsonl", [json.dumps({"id": "r1", "text": "awful", "labels": {"mood": "bad"}})]), PACK
    ).rows
    with ReadoutCache(tmp_path / "c.sqlite3") as cache:
        label, letter = LabScorer(engine, PACK, cache, "label"), LabScorer(engine, PACK, cache, "letter")
        assert (label.mode, label.key.orderings) == ("fanout", "none@fanout")
        assert Scorer(engine, PACK, cache, "label").key == label.key  # the product's scorer: the same entries
        assert (letter.mode, letter.key.orderings) == ("serial", "cyclic")  # as cached before the mode was keyed
        serial_key = replace(label.key, orderings="none")
        cache.put(serial_key, rows[0].ticket.sha256, Outcome({"mood": [((0, 1), np.log([0.5, 0.5]), 0.9)]}))
        score_rows(label, rows)
        assert seen == ["fanout"] and cache.misses == 1  # the serial outcome was not taken for a fanout one


def test_baseline_on_the_training_labels(tmp_path: Path) -> None:
    pytest.importorskip("sklearn")
    from triage.evaluation.baseline import fit_predict

    train = ["awful awful", "bad awful", "great", "great lovely"] * 3
    y = [0, 0, 1, 1] * 3
    lp = fit_predict(train, y, ["awful day", "lovely day"], 2)
    assert lp.shape == (2, 2)
    assert np.argmax(lp[0]) == 0 and np.argmax(lp[1]) == 1
    np.testing.assert_allclose(np.exp(lp).sum(axis=1), 1.0, atol=1e-9)


def test_make_ticket_hash_is_the_cache_key() -> None:
    assert make_ticket("same text", "a").sha256 == make_ticket("same text", "b").sha256


def test_baseline_without_scikit_learn_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from triage.errors import TriageError
    from triage.evaluation.baseline import fit_predict

    monkeypatch.setitem(sys.modules, "sklearn", None)  # import sklearn now raises ImportError
    monkeypatch.setitem(sys.modules, "sklearn.feature_extraction.text", None)
    with pytest.raises(TriageError, match="needs scikit-learn") as err:
        fit_predict(["a", "b"], [0, 1], ["a"], 2)
    assert "eval extra" in (err.value.hint or "")


def test_progress_counts_rows_not_the_prior(tmp_path: Path) -> None:
    """3 rows show 3/3 (the content-free prior is a step of its own, not a fourth row)."""
    import io

    from rich.console import Console

    from triage.evaluation.labelled_runs import score_sets

    rows = [json.dumps({"id": f"r{i}", "text": f"awful service {i}", "labels": {"mood": "bad"}}) for i in range(3)]
    s = read_labelled(write(tmp_path / "t.jsonl", rows), PACK)
    buf = io.StringIO()
    run = score_sets(FakeEngine(), PACK, [("dev", s.rows)], Console(file=buf, width=160, force_terminal=False))
    text = buf.getvalue()
    assert len(run.sets[0].rows) == 3
    assert "3/3" in text and "4/4" not in text, text
