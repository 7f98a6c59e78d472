"""`triage learn` that a team lead can trust: progress while it scores, a verdict per criterion, and a head
its own check found no better than zero-shot stored but not applied.

Without a model: the plain progress lines (a scripted clock), the verdict rule, the head file's ``applied``
flag, the fit policy and the decision reading it. With the real smollm2-135m: `triage learn` in a child
process with stderr to a file (progress lines before the end), its verdicts and head, `--apply`, and a
held-back criterion scoring exactly as zero-shot.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from conftest import MIXED, TOPIC_MOOD
from rich.console import Console

from triage.domain.pack import parse_pack
from triage.evaluation.progress import PlainProgress, duration
from triage.evaluation.verdict import mark, verdict, verdicts
from triage.lab import score as lab
from triage.lab.options import LabOptions
from triage.learning import fitstore, head_file
from triage.learning.fit import choose_fits
from triage.learning.learn import LearnOutcome
from triage.scoring import head as head_mod
from triage.scoring.options import ScoreOptions

ROOT = Path(__file__).resolve().parents[1]

PACK = TOPIC_MOOD


# -- progress ---------------------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_plain_progress_says_the_start_the_first_row_a_first_estimate_each_tenth_or_interval_and_the_end() -> None:
    buf = io.StringIO()
    clock = Clock()
    progress = PlainProgress(Console(file=buf, width=300), every_s=10, clock=clock)
    with progress:
        task = progress.add_task("learn", total=200, hits=0)
        clock.t += 8  # the first row also loads the model
        progress.update(task, advance=1, hits=0)
        for _ in range(2, 21):  # 19 rows at 2 rows/s: the 20th row is the first tenth
            clock.t += 0.5
            progress.update(task, advance=1, hits=1)
        clock.t += 12  # one slow row: past the interval
        progress.update(task, advance=1, hits=1)
        progress.update(task, advance=1, hits=1)  # neither a tenth nor the interval: no line
        progress.update(task, description="holdout")
        clock.t += 1.5
        progress.update(task, advance=178, hits=5)
    lines = buf.getvalue().splitlines()
    assert lines == [
        "triage: learn: scoring 200 row(s); a line every 10 s",
        "triage: learn: scored 1/200 rows, the first in 8 s; rows/s and time left follow",
        # three rows on: the first time left, within seconds of the start
        "triage: learn: scored 4/200 rows (1 from the cache), 2.00 rows/s, about 1 min 38 s left",
        "triage: learn: scored 20/200 rows (1 from the cache), 2.00 rows/s, about 1 min 30 s left",
        # the slow row weighs more than the older ones (SmoothRate)
        "triage: learn: scored 21/200 rows (1 from the cache), 0.92 rows/s, about 3 min 15 s left",
        "triage: holdout: scored 200/200 rows (5 from the cache) in 31 s, 6.45 rows/s",
    ]


def test_plain_progress_says_how_far_a_stopped_run_got() -> None:
    buf = io.StringIO()
    clock = Clock()
    with pytest.raises(KeyboardInterrupt), PlainProgress(Console(file=buf, width=300), clock=clock) as progress:
        task = progress.add_task("learn", total=50)
        for _ in range(3):
            clock.t += 1
            progress.update(task, advance=1)
        raise KeyboardInterrupt
    assert buf.getvalue().splitlines()[-1] == "triage: learn: scored 3/50 rows, 1.00 rows/s, about 47 s left"


def test_a_terminal_gets_the_live_bar_with_rows_per_second_and_eta_anything_else_plain_lines() -> None:
    from rich.progress import Progress

    from triage.evaluation.progress import RateColumn, scoring_progress

    buf = io.StringIO()
    bar = scoring_progress(Console(file=buf, force_terminal=True, width=160))
    assert isinstance(bar, Progress) and any(isinstance(c, RateColumn) for c in bar.columns)
    with bar:
        task = bar.add_task("learn", total=4, hits=0)
        bar.update(task, advance=4, hits=1)
    shown = buf.getvalue()
    assert "4/4" in shown and "rows/s" in shown and "ETA" in shown and "cached 1" in shown
    assert isinstance(scoring_progress(Console(file=io.StringIO())), PlainProgress)


def test_durations_read_at_a_glance() -> None:
    assert [duration(s) for s in (0.4, 59, 76, 3599, 7500)] == ["0 s", "59 s", "1 min 16 s", "59 min 59 s", "2 h 5 min"]


# -- the verdict ------------------------------------------------------------------------------


def _outcome(cid: str = "priority", *, cv: float = 0.6, zero: float = 0.5, worse: str | None = None) -> LearnOutcome:
    out = LearnOutcome(cid, 100, {"a": 50, "b": 50}, c=0.01)
    out.cv = {"folds": 5, "balanced_accuracy": cv, "zero_shot_balanced_accuracy": zero}
    out.worse = worse
    return out


def _held(learned: float, zero: float, tfidf: float | None = 0.4, n: int = 60) -> dict[str, object]:
    entry: dict[str, object] = {
        "n": n,
        "learned": {"balanced_accuracy": learned},
        "zero-shot": {"balanced_accuracy": zero},
    }
    entry["tfidf"] = {"balanced_accuracy": tfidf} if tfidf is not None else {"refused": "scikit-learn"}
    return entry


def test_the_held_out_rows_decide_and_the_line_says_what_and_why() -> None:
    v = verdict(_outcome("queue"), _held(0.5, 0.3, 0.4))
    assert v.applied is True
    assert (
        v.line
        == "queue: learned beats zero-shot and TF-IDF on the 60 held-out rows (0.500 against 0.300 and 0.400): applied"
    )
    v = verdict(_outcome("type"), _held(0.45, 0.3, 0.464))
    assert v.applied is True and "but not TF-IDF (0.464)" in v.line and v.line.endswith(": applied")
    v = verdict(_outcome(), _held(0.313, 0.333, 0.4))
    assert v.applied is False
    assert v.line == (
        "priority: learned is not better than zero-shot on the 60 held-out rows (0.313 against 0.333; "
        "TF-IDF 0.400): stored, not applied (use --apply to apply it anyway)"
    )
    assert v.why == "not better than zero-shot on 60 held-out rows, 0.313 against 0.333"
    assert verdict(_outcome(), _held(0.333, 0.333)).applied is False  # a tie is not better
    forced = verdict(_outcome(), _held(0.313, 0.333), apply=True)
    assert forced.applied is True and forced.line.endswith(": applied anyway (--apply)")
    # The held-out check wins over cross-validation, either way.
    assert verdict(_outcome(cv=0.9, zero=0.5), _held(0.4, 0.5)).applied is False
    assert verdict(_outcome(cv=0.2, zero=0.5, worse="worse"), _held(0.6, 0.5)).applied is True


def test_without_holdout_cross_validation_decides_and_a_worse_head_is_never_applied_silently() -> None:
    v = verdict(_outcome(cv=0.7, zero=0.5), None)
    assert v.applied is True
    assert v.line == (
        "priority: learned beats zero-shot in 5-fold cross-validation on the 100 training rows (0.700 against "
        "0.500) (no held-out check: --holdout 0.3 gives one): applied"
    )
    # Below zero-shot by less than the noise of 100 rows (0.1): applied, and the line says it is below.
    v = verdict(_outcome(cv=0.64, zero=0.68), None)
    assert v.applied is True and "is below zero-shot" in v.line and "--holdout 0.3 checks it" in v.line
    # Worse by more than the noise: stored, not applied, unless --apply.
    v = verdict(_outcome(cv=0.3, zero=0.6, worse="worse"), None)
    assert v.applied is False and "worse than zero-shot in 5-fold cross-validation" in v.line
    assert v.line.endswith("stored, not applied (use --apply to apply it anyway)")
    assert verdict(_outcome(cv=0.3, zero=0.6, worse="worse"), None, apply=True).applied is True
    # --holdout given, but no held-out row labelled for this criterion: cross-validation decides, and says so.
    v = verdict(_outcome(cv=0.7, zero=0.5), {"n": 0, "options": ["a", "b"]})
    assert v.applied is True and v.line.startswith("priority: no held-out row is labelled for it; learned beats")
    refused = LearnOutcome("mood", 0, {}, refused="criterion 'mood' has no labels in the training rows")
    v = verdicts([refused], None)[0]
    assert v.applied is None and v.line.startswith("mood: not learned (") and "stays calibrated or zero-shot" in v.line


def test_fit_criterion_keeps_a_worse_head_for_the_verdict_when_asked() -> None:
    from triage.learning.learn import fit_criterion

    crit = PACK.criteria[0]
    rng = np.random.default_rng(1)
    y = np.array([0, 1] * 20)
    lp = np.log(np.where(np.eye(2)[y] > 0, 0.5001, 0.4999))  # the readout alone: right on every row
    feats = rng.normal(size=(40, 500)) * 5  # loud noise the head over-fits
    head, out = fit_criterion(crit, feats, lp, y)
    assert head is None and "not learned" in (out.refused or "")
    head, out = fit_criterion(crit, feats, lp, y, refuse_worse=False)
    assert head is not None and out.refused is None and "below zero-shot's 1.000" in (out.worse or "")
    assert verdict(out, None).applied is False


def test_a_backed_off_refusal_says_two_options_need_the_labels_not_every_one() -> None:
    """The app's re-learn notice reads this message: with rare options backed off (what it runs), a criterion
    is refused only when fewer than two of its options have the labels (docs/tui.md)."""
    from triage.learning.learn import fit_criterion

    crit = parse_pack(
        {"criterion": [{"id": "c", "question": "Q?", "options": [{"id": o, "label": o} for o in "abc"]}]}
    ).criteria[0]
    y = np.array([0] * 8 + [1] * 3 + [2] * 2)
    feats, lp = np.zeros((13, 4)), np.log(np.full((13, 3), 1 / 3))
    _, out = fit_criterion(crit, feats, lp, y, rare="backoff")
    assert out.refused == (
        "criterion 'c' has too few labels to learn: b has 3, c has 2 (need at least 5 on each of two options; "
        "an option with fewer is left to zero-shot)"
    )
    _, out = fit_criterion(crit, feats, lp, y, rare="refuse")
    assert (out.refused or "").endswith("(need at least 5 per option)")


# -- stored, not applied ----------------------------------------------------------------------


class Fmt:
    id = "triage-prompt/3:plain/label"


class Model:
    sha256 = "ab" * 32

    def format_for(self, kind: str) -> Fmt:
        return Fmt()


def _head(held: tuple[str, ...]) -> head_mod.Head:
    n_vocab, n_embd = 300, 50
    f = len(head_mod.feature_ids(n_vocab, n_embd))
    rng = np.random.default_rng(1)
    crits = {}
    for crit in PACK.criteria:
        ids = [o.id for o in crit.options]
        crits[crit.id] = head_mod.CriterionHead(ids, ids, rng.normal(size=(2, f + 2)), rng.normal(size=2))
    head = head_mod.Head(Model.sha256, PACK.hash, Fmt.id, n_vocab, n_embd, crits, name="team head")
    found = [verdict(_outcome(cid), _held(0.3, 0.5) if cid in held else _held(0.7, 0.5)) for cid in ("topic", "mood")]
    mark(head, found)
    return head


def test_the_verdict_is_kept_in_the_head_file_and_read_back(tmp_path: Path) -> None:
    path = head_file.write_head(_head(("mood",)), tmp_path / "team.npz")
    back = head_file.read_head(path)
    assert back.has("mood") and not back.covers("mood") and back.covers("topic")
    assert back.held_back() == {"mood": "not better than zero-shot on 60 held-out rows, 0.300 against 0.500"}
    [topic, mood] = json.loads(str(np.load(path)["meta"]))["criteria"]
    assert (topic["applied"], mood["applied"]) == (True, False)
    assert mood["verdict"].endswith("stored, not applied (use --apply to apply it anyway)")
    assert back.report["verdicts"][0].startswith("topic: learned beats zero-shot")
    # A head written before the flag existed applies every read-out it has.
    old = _head(())
    for h in old.criteria.values():
        h.info.clear()
    assert head_file.read_head(head_file.write_head(old, tmp_path / "old.npz")).covers("mood")


def _store(head: head_mod.Head) -> None:
    name = fitstore.head_name(head.model_sha256, head.pack_hash, head.prompt_format)
    head_file.write_head(head, fitstore.heads_dir() / name)


def test_the_fit_policy_applies_only_what_the_verdict_applied_and_names_the_rest() -> None:
    _store(_head(("mood",)))
    fits = choose_fits(Model(), PACK, ScoreOptions())
    assert fits.head is not None and fits.head.covers("topic") and not fits.head.covers("mood")
    [note] = [n for n in fits.notes if n.about == "head"]
    assert note.applied and note.text == (
        "applying learned head 'team head' to topic; stored, not applied: mood (not better than zero-shot on 60 "
        "held-out rows, 0.300 against 0.500) (`triage learn --apply` applies it)"
    )
    # Nothing of it applies: no head at all, and a note saying why.
    _store(_head(("topic", "mood")))
    fits = choose_fits(Model(), PACK, ScoreOptions())
    assert fits.head is None
    [why] = fits.passed_over("head")
    assert why.startswith("learned head 'team head' not applied: topic (not better") and "mood (not better" in why


def test_a_held_back_criterion_is_decided_exactly_as_without_the_head() -> None:
    from triage.scoring.decide import Decider
    from triage.scoring.readout import Combined

    head = _head(("mood",))
    features = np.random.default_rng(2).normal(size=head.n_features)
    acc = SimpleNamespace(reads=[SimpleNamespace(features=features)])
    lp = np.log(np.array([0.3, 0.7]))
    combined = Combined(lp, lp, 1)
    with_head = Decider(PACK, tokenizer=None, head=head)  # type: ignore[arg-type]
    without = Decider(PACK, tokenizer=None)  # type: ignore[arg-type]
    got, source = with_head._decide("mood", combined, acc)  # type: ignore[arg-type]
    want, want_source = without._decide("mood", combined, acc)  # type: ignore[arg-type]
    assert source == want_source == "zero-shot" and np.array_equal(got, want)
    assert with_head._decide("topic", combined, acc)[1] == "learned"  # type: ignore[arg-type]


# -- with the real model ----------------------------------------------------------------------


def _rows() -> list[dict[str, object]]:
    """30 rows: topic follows the text; mood is labelled by alternation, so nothing in the text tells it."""
    from conftest import labelled_rows

    rows = labelled_rows()
    for i, r in enumerate(rows):
        r["labels"]["mood"] = "angry" if i % 2 else "happy"  # type: ignore[index]
    return rows


def _learn(home: Path, work: Path, model: Path, *extra: str) -> tuple[int, str, str]:
    """`triage learn` in a child process, stdout and stderr each to a file (not a terminal)."""
    argv = ["learn", str(work / "rows.jsonl"), "--pack", str(work / "mixed.toml"), "--model", str(model)]
    argv += ["--threads", "1", "--n-ctx", "512", "--holdout", "0.3", *extra]
    env = {**os.environ, "TRIAGE_HOME": str(home), "PYTHONPATH": str(ROOT)}
    code = "import sys; from triage.cli import main; sys.exit(main(sys.argv[1:]))"
    with (work / "out.txt").open("wb") as out, (work / "err.txt").open("wb") as err:
        done = subprocess.run([sys.executable, "-c", code, *argv], stdout=out, stderr=err, env=env, timeout=900)
    return done.returncode, (work / "out.txt").read_text("utf-8"), (work / "err.txt").read_text("utf-8")


@pytest.fixture(scope="module")
def learned_run(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    home, work = tmp_path_factory.mktemp("verdict-home"), tmp_path_factory.mktemp("verdict")
    (work / "mixed.toml").write_text(MIXED, encoding="utf-8")
    (work / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in _rows()), encoding="utf-8")
    code, out, err = _learn(home, work, smollm2_path, "-o", str(work / "team.npz"))
    assert code == 0, err
    return {"home": home, "work": work, "out": out, "err": err, "head": work / "team.npz"}


@pytest.mark.model
def test_learn_on_a_redirected_stderr_prints_progress_lines_before_the_end(learned_run: dict[str, object]) -> None:
    err = str(learned_run["err"]).splitlines()
    progress = [i for i, line in enumerate(err) if ": scor" in line and " row" in line]
    assert err[progress[0]] == "triage: learn: scoring 30 row(s); a line every 10 s"
    assert err[progress[1]].startswith("triage: learn: scored 1/30 rows, the first in ")
    middle = [err[i] for i in progress[2:-1]]
    assert middle and all(" rows/s, about " in line and line.endswith(" left") for line in middle)
    done = [int(line.split("scored ")[1].split("/")[0]) for line in (err[i] for i in progress[1:])]
    assert done == sorted(done) and done[-1] == 30  # counted up, in order, to every row
    assert err[progress[-1]].startswith("triage: holdout: scored 30/30 rows in ") and "rows/s" in err[progress[-1]]
    # Every progress line comes before the fit and the cache summary: the lines arrive while it scores.
    fit = next(i for i, line in enumerate(err) if line.startswith("triage: fitting "))
    summary = next(i for i, line in enumerate(err) if line.startswith("cache: 0 hit(s), 30 scored"))
    assert progress[-1] < fit < summary


@pytest.mark.model
def test_learn_says_a_verdict_per_criterion_first_and_stores_but_does_not_apply_a_worse_one(
    learned_run: dict[str, object],
) -> None:
    out = str(learned_run["out"]).splitlines()
    head = head_file.read_head(learned_run["head"])  # type: ignore[arg-type]
    report = head.report["holdout"]
    # The first two lines are the verdicts, one per criterion, before any figure of the fit or table.
    assert [line.split(":")[0] for line in out[:2]] == ["topic", "mood"]
    assert out.index(next(line for line in out if line.startswith("held out 0.3"))) > 2
    for line, cid in zip(out[:2], ("topic", "mood"), strict=True):
        r = report[cid]
        better = r["learned"]["balanced_accuracy"] > r["zero-shot"]["balanced_accuracy"]
        assert head.criteria[cid].applied is better and head.covers(cid) is better
        assert (
            line.endswith(": applied")
            if better
            else line.endswith("stored, not applied (use --apply to apply it anyway)")
        )
        assert f"({r['learned']['balanced_accuracy']:.3f} against {r['zero-shot']['balanced_accuracy']:.3f}" in line
    # The mood labels are alternation, not text: its head is no better than zero-shot here; topic's is.
    assert head.covers("topic") and not head.covers("mood") and list(head.held_back()) == ["mood"]
    err = str(learned_run["err"])
    assert (
        "`triage score` with this model and pack: applying learned head 'team.npz' to topic; stored, not applied: mood"
        in err
    )


@pytest.mark.model
def test_a_held_back_criterion_scores_exactly_as_zero_shot(
    learned_run: dict[str, object], smollm2_path: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from triage.domain.pack import load_pack
    from triage.scoring.engine import Engine

    head = head_file.read_head(learned_run["head"])  # type: ignore[arg-type]
    pack = load_pack(Path(str(learned_run["work"])) / "mixed.toml")
    ticket = "My parcel never arrived and I am furious about it."
    with Engine(smollm2_path, name="smollm2-135m", n_ctx=512, threads=1) as eng:
        for mode in ("serial", "fanout"):
            opts = LabOptions(mode=mode)
            plain = lab.score_ticket(eng, ticket, pack, opts)
            with_head = lab.score_ticket(eng, ticket, pack, opts, head=head)
            assert [c.source for c in with_head.criteria] == ["learned", "zero-shot"]
            assert [o.probability for o in with_head.criteria[1].options] == [
                o.probability for o in plain.criteria[1].options
            ]
    # `triage score` with the stored head: the same, and it says why mood is not learned.
    from triage.cli import main

    monkeypatch.setenv("TRIAGE_HOME", str(learned_run["home"]))
    (tmp_path / "t.txt").write_text(ticket, encoding="utf-8")
    argv = ["score", str(tmp_path / "t.txt"), "--model", str(smollm2_path), "--n-ctx", "512", "--threads", "1"]
    buf, err = io.StringIO(), io.StringIO()
    from contextlib import redirect_stderr, redirect_stdout

    with redirect_stdout(buf), redirect_stderr(err):
        assert main([*argv, "--pack", str(Path(str(learned_run["work"])) / "mixed.toml"), "--format", "json"]) == 0
    assert [c["source"] for c in json.loads(buf.getvalue())["criteria"]] == ["learned", "zero-shot"]
    assert "stored, not applied: mood (not better than zero-shot on" in err.getvalue()


@pytest.mark.model
def test_learn_apply_applies_every_criterion_and_says_so(learned_run: dict[str, object], smollm2_path: Path) -> None:
    work = Path(str(learned_run["work"]))
    code, out, err = _learn(Path(str(learned_run["home"])), work, smollm2_path, "-o", str(work / "all.npz"), "--apply")
    assert code == 0, err
    assert "cache: 30 hit(s), 0 scored" in err  # the same rows: nothing scored again
    head = head_file.read_head(work / "all.npz")
    assert head.covers("topic") and head.covers("mood") and head.held_back() == {}
    mood = next(line for line in out.splitlines() if line.startswith("mood: "))
    assert mood.endswith(": applied anyway (--apply)")


def test_a_head_no_surer_than_chance_says_so_on_its_verdict_line_not_only_in_the_last_warning() -> None:
    """The issue's head: held-out balanced accuracy 0.361, interval 0.07-0.50, four options (chance 0.25)."""
    held = _held(0.361, 0.25, 0.3, n=12)
    held["options"] = ["billing", "delivery", "app", "accounts"]
    held["learned"] = {"balanced_accuracy": 0.361, "balanced_accuracy_ci95": [0.07, 0.50]}
    v = verdict(_outcome("queue"), held)
    assert v.applied is True and v.weak is True
    assert "applied, but no surer than chance yet: its 95% interval 0.07-0.50 reaches chance (0.25)" in v.line
    held["learned"] = {"balanced_accuracy": 0.9, "balanced_accuracy_ci95": [0.8, 0.97]}  # clear of chance
    sure = verdict(_outcome("queue"), held)
    assert sure.applied is True and sure.weak is False and sure.line.endswith(": applied")
    # without --holdout: cross-validation within the noise of 100 rows (0.1) of chance (0.5 for two options)
    v = verdict(_outcome(cv=0.55, zero=0.5), None)
    assert v.applied is True and v.weak is True and "within 0.100 of chance (0.500) on 100 rows" in v.line
    assert verdict(_outcome(cv=0.7, zero=0.5), None).weak is False


def test_the_time_left_is_smoothed_over_a_machine_whose_speed_swings() -> None:
    """The issue's setup: 475 rows, the machine shared, speed swinging between 0.5 and 0.9 rows/s a minute at
    a time. Rich's own estimate (the last two minutes) swings with it; SmoothRate's projected end moves little."""
    from triage.evaluation.progress import SmoothRate

    total, t, done = 475, 0.0, 0
    smooth, window = SmoothRate(), []  # window: Rich's kind, rows over the last 120 s
    ends, window_ends = [], []
    history: list[tuple[float, int]] = [(0.0, 0)]
    smooth.add(t, done)
    while done < total - 10:
        speed = 0.5 if int(t // 120) % 2 else 0.9
        t += 1 / speed
        done += 1
        smooth.add(t, done)
        history.append((t, done))
        if t > 240:  # past the first minutes
            ends.append(t + smooth.left(total - done))
            then, before = next((h for h in history if h[0] >= t - 120), history[0])
            window.append((done - before) / (t - then))
            window_ends.append(t + (total - done) / window[-1])
    spread = (max(ends) - min(ends)) / min(ends)
    window_spread = (max(window_ends) - min(window_ends)) / min(window_ends)
    # worked out for these scripted times: 0.118 against the window's 0.47
    assert spread < 0.13, spread
    assert window_spread > 3 * spread, (spread, window_spread)
    stalled = SmoothRate()
    stalled.add(0.0, 0)
    stalled.add(10.0, 10)
    before = stalled.rate
    stalled.add(40.0, 10)  # half a minute without a row lowers the rate, by a step, not to nothing
    assert before is not None and stalled.rate is not None and 0 < stalled.rate < before
