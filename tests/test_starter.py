"""The starter read-out (triage.learning.starter): the shipped sets, the labelling guide, the weighted fit that
combines a team's labels with the starter rows, and the starter head fitted on first use with a real model."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from conftest import starter_slice

from triage.assets_path import asset
from triage.domain.pack import default_pack
from triage.learning import starter
from triage.learning.head_file import read_head
from triage.learning.labelled import read_labelled
from triage.learning.logistic import fit_logistic

ROOT = Path(__file__).resolve().parents[1]
GUIDE = ROOT / "docs" / "labelling.md"


def _rows(name: str) -> list[dict]:
    return [json.loads(line) for line in asset(f"starter/{name}").read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize(
    ("name", "least"),
    [("support.jsonl", 40), ("check.jsonl", 30), ("check-helpdesk.jsonl", 30), ("check-languages.jsonl", 80)],
)
def test_the_sets_are_valid_for_the_pack_with_enough_per_option(name: str, least: int) -> None:
    pack = default_pack()
    got = read_labelled(asset(f"starter/{name}"), pack)
    assert got.bad == []
    assert len(got.rows) == len(_rows(name))
    assert len(got.rows) >= {"support.jsonl": 1200, "check-helpdesk.jsonl": 300, "check-languages.jsonl": 800}.get(
        name, 150
    )
    for crit in pack.criteria:
        counts = Counter(r.labels[crit.id] for r in got.rows)
        assert {o.id for o in crit.options} == set(counts), crit.id
        assert min(counts.values()) >= least, (crit.id, counts)


def test_the_sets_share_no_ticket_and_hold_other_languages() -> None:
    support = {r["text"].strip().lower() for r in _rows("support.jsonl")}
    seen: set[str] = set()
    for name in ("check.jsonl", "check-helpdesk.jsonl", "check-languages.jsonl"):
        check = [r["text"].strip().lower() for r in _rows(name)]
        assert not [t for t in check if t in support or t in seen], name
        seen.update(check)
    langs = Counter(r["lang"] for r in _rows("support.jsonl"))
    assert {"de", "es", "fr", "pl", "pt", "it", "nl"} <= set(langs)
    # issue 41: at least a quarter of the starter set in languages other than English, each of the seven with
    # enough tickets to cover the scenarios
    assert sum(langs.values()) - langs["en"] >= 0.25 * sum(langs.values()), langs
    assert min(n for lang, n in langs.items() if lang != "en") >= 50, langs


def test_the_language_check_set_is_one_hundred_tickets_in_eight_languages_with_the_same_labels() -> None:
    groups: dict[str, dict[str, dict]] = {}
    for r in _rows("check-languages.jsonl"):
        groups.setdefault(r["group"], {})[r["lang"]] = r["labels"]
    assert len(groups) == 100
    for group, by_lang in groups.items():
        assert set(by_lang) == {"en", "de", "es", "fr", "pl", "pt", "it", "nl"}, group
        assert all(labels == by_lang["en"] for labels in by_lang.values()), group
    formal = Counter(r["form"] for r in _rows("check-helpdesk.jsonl"))
    assert formal["email"] + formal["webform"] >= 280, formal


def test_the_round_two_rows_cover_every_scenario_of_the_guide_in_every_language() -> None:
    guide = GUIDE.read_text(encoding="utf-8").split("## Scenarios the starter set covers (round 2)", 1)[1]
    assert guide.count("\n| ") >= 12, "the guide's scenario table"
    rows = [r for r in _rows("support.jsonl") if "scenario" in r]
    scenarios = Counter(r["scenario"] for r in rows)
    assert len(scenarios) == 11 and min(scenarios.values()) >= 30, scenarios
    for lang in ("en", "de", "es", "fr", "pl", "pt", "it", "nl"):
        here = Counter(r["scenario"] for r in rows if r["lang"] == lang)
        assert len(here) >= 10, (lang, here)
    # formal returns of faulty devices go to shipping (the held-out mail's 30 shipping e-mails are such returns)
    rma = [r for r in rows if r["scenario"] == "rma"]
    assert len(rma) >= 100 and Counter(r["labels"]["queue"] for r in rma)["shipping"] >= 0.9 * len(rma)


def test_the_guide_quotes_every_option_description_of_the_pack() -> None:
    guide = GUIDE.read_text(encoding="utf-8")
    for crit in default_pack().criteria:
        section = guide.split(f"## {crit.id}:", 1)
        assert len(section) == 2, f"the guide has no section for {crit.id}"
        body = section[1].split("\n## ", 1)[0]
        assert crit.question in guide.split(f"## {crit.id}:", 1)[1].splitlines()[0]
        for opt in crit.options:
            assert f"- **{opt.id}**: {opt.description}." in body, (crit.id, opt.id)


def test_the_starter_readme_counts_the_set_as_it_is() -> None:
    readme = asset("starter/README.md").read_text(encoding="utf-8")
    rows = _rows("support.jsonl")
    assert f"holds {len(rows)} support tickets" in readme
    for crit in default_pack().criteria:
        counts = Counter(r["labels"][crit.id] for r in rows)
        line = next(ln for ln in readme.splitlines() if ln.startswith(f"| {crit.id} |"))
        for option, n in counts.items():
            assert re.search(rf"\b{re.escape(option)} {n}\b", line), (crit.id, option, n, line)


def test_only_the_built_in_pack_has_a_starter(tmp_path: Path) -> None:
    from triage.domain.pack import load_pack

    edited = tmp_path / "support.toml"
    edited.write_text(asset("support.toml").read_text().replace('version = "3"', 'version = "3-ours"'))
    assert starter.is_builtin(default_pack())
    assert not starter.is_builtin(load_pack(edited))
    assert starter.starter_rows(load_pack(edited)) == []


def test_combine_weighs_the_team_and_drops_the_starter_where_the_team_has_enough() -> None:
    pack = default_pack()
    rows = starter.starter_rows(pack)[:6]
    team = [{"queue": "billing"}] * 3 + [{"queue": "shipping", "urgency": "high"}] * 2
    both = starter.combine(team, ["t"] * 5, rows, ["s"] * 6, team_weight=4.0, enough=3)
    assert both.team == {"queue": 5, "urgency": 2}
    assert both.weights[:5] == [4.0] * 5 and set(both.weights[5:]) == {1.0}
    assert all("queue" not in lab for lab in both.labels[5:]), "queue has 5 team labels >= 3: the team's alone"
    assert all("urgency" in lab for lab in both.labels[5:]), "urgency has 2 < 3: the starter rows still serve it"
    assert both.starter_used == {"urgency": 6, "sentiment": 6, "needs_approval": 6, "type": 6}
    assert both.outcomes == ["t"] * 5 + ["s"] * 6


def test_a_row_weight_of_two_is_the_row_twice() -> None:
    rng = np.random.default_rng(3)
    x = rng.normal(size=(40, 5))
    y = (x[:, 0] + 0.5 * rng.normal(size=40) > 0).astype(int) + (x[:, 1] > 1).astype(int)
    w = np.where(np.arange(40) % 3 == 0, 2.0, 1.0)
    twice = np.repeat(np.arange(40), w.astype(int))
    _, coef_w, icpt_w = fit_logistic(x, y, 0.5, weight=w)
    _, coef_d, icpt_d = fit_logistic(x[twice], y[twice], 0.5)
    assert np.allclose(coef_w, coef_d, atol=1e-6) and np.allclose(icpt_w, icpt_d, atol=1e-6)
    _, coef_1, _ = fit_logistic(x, y, 0.5)
    assert not np.allclose(coef_w, coef_1, atol=1e-3), "the weights must change the fit"


def test_the_command_lines_fit_says_how_far_it_got(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """commands/_starter.fit_starter: learn's plain progress lines off a terminal, counted from ensure's calls
    (the real fit, with smollm2, is below)."""
    from fake_engine import FakeEngine

    from triage.commands._starter import fit_starter
    from triage.learning import starter
    from triage.session import Session

    def ensure(engine, pack, request, *, say, progress):  # type: ignore[no-untyped-def]
        say("fitting the starter head for fake on triage's 4 example tickets")
        for done in range(1, 5):
            progress(done, 4)
        say("starter head fitted in 1 s")
        return True

    monkeypatch.setattr(starter, "needs_fit", lambda *a: True)
    monkeypatch.setattr(starter, "ensure", ensure)
    session = Session(FakeEngine())
    assert fit_starter(session, default_pack())
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "triage: fitting the starter head for fake on triage's 4 example tickets"
    assert err[1].startswith("triage: starter head: scoring 4 row(s); a line every ")
    assert err[2].startswith("triage: starter head: scored 1/4 rows, the first in")
    assert any(line.startswith("triage: starter head: scored 4/4 rows in ") for line in err)
    assert err[-1] == "triage: starter head fitted in 1 s"
    monkeypatch.setattr(starter, "needs_fit", lambda *a: False)
    assert not fit_starter(session, default_pack())
    assert capsys.readouterr().err == ""


# -- with a real model: the head fitted on first use, applied, said, and off when turned off ------------------

TICKETS = {
    "late": "Hi, my parcel 55120 was due last Tuesday and tracking has not moved since. Where is it?",
    "billing": "You charged my card twice for the same order this month. Please refund one of the two charges.",
}


def _score(home: Path, model: Path, text: str, *, on: bool, extra: tuple[str, ...] = ()) -> tuple[int, dict, str]:
    env = {**os.environ, "TRIAGE_HOME": str(home), "TRIAGE_STARTER": "1" if on else "0"}
    env.pop("TRIAGE_MODEL", None)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "triage.cli",
            "score",
            "--model",
            str(model),
            "--threads",
            "1",
            "--format",
            "json",
            *extra,
        ],
        input=text,
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    return p.returncode, json.loads(p.stdout) if p.returncode == 0 else {}, p.stderr


@pytest.mark.model
def test_a_stand_in_scores_with_its_shipped_starter_head_and_fits_nothing(tmp_path: Path, smollm2_path: Path) -> None:
    code, result, err = _score(tmp_path / "home", smollm2_path, TICKETS["late"], on=True)
    assert code == 0, err
    assert "fitting the starter head" not in err and "applying starter head" in err, err
    assert not (tmp_path / "home" / "data" / "heads").exists(), "nothing fitted, nothing stored"
    assert "starter" in {c["source"] for c in result["criteria"]}


@pytest.mark.model
def test_turning_the_starter_off_gives_exactly_the_zero_shot_numbers(tmp_path: Path, smollm2_path: Path) -> None:
    """smollm2 ships a starter head; with the setting off its numbers are exactly those of --no-head."""
    home = tmp_path / "home"
    code, on, err = _score(home, smollm2_path, TICKETS["billing"], on=True)
    assert code == 0, err
    assert "starter" in {c["source"] for c in on["criteria"]}
    code, off, err = _score(home, smollm2_path, TICKETS["billing"], on=False)
    assert code == 0, err
    code, never, err2 = _score(home, smollm2_path, TICKETS["billing"], on=True, extra=("--no-head",))
    assert code == 0, err2
    assert {c["source"] for c in off["criteria"]} == {c["source"] for c in never["criteria"]} == {"zero-shot"}
    for a, b in zip(off["criteria"], never["criteria"], strict=True):
        assert a["choice"] == b["choice"]
        assert [o["probability"] for o in a["options"]] == [o["probability"] for o in b["options"]]


@pytest.mark.model
def test_a_pack_of_the_teams_own_gets_no_starter(tmp_path: Path, smollm2_path: Path) -> None:
    pack = tmp_path / "team.toml"
    pack.write_text(asset("support.toml").read_text().replace('name = "support"', 'name = "our support"'))
    code, result, err = _score(tmp_path / "home", smollm2_path, TICKETS["late"], on=True, extra=("--pack", str(pack)))
    assert code == 0, err
    assert "starter" not in err
    assert {c["source"] for c in result["criteria"]} == {"zero-shot"}


@pytest.mark.model
def test_first_use_without_waiting_decides_zero_shot_and_fits_in_the_background(
    cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, other_model: Path
) -> None:
    """`triage score`'s first use of a model triage ships no head for: this run decides zero-shot at once and
    starts `triage model starter MODEL --background` detached; that command (run here in-process, on a slice of
    the starter set, so the product's fit runs in seconds) fits it, saying so with progress off a terminal, and
    stores it; the next `score` applies it and fits nothing. (`score --wait-starter` runs the same foreground fit:
    test_hostile_values' full-disk test.)"""
    from triage.commands import _starter

    rows = starter_slice(monkeypatch)
    home = tmp_path / "home"
    env = {"TRIAGE_STARTER": "1"}
    started: list[tuple[list[str], dict]] = []

    class Child:
        pid = 4242

    def popen(cmd: list[str], **kw: object) -> Child:
        started.append((cmd, kw))
        return Child()

    monkeypatch.setattr(_starter.subprocess, "Popen", popen)
    args = ["score", "--model", str(other_model), "--threads", "1", "--format", "json"]
    first = cli(args, home, stdin=TICKETS["late"], env=env)
    assert first.returncode == 0, first.stderr
    assert "fitting it in the background (pid 4242" in first.stderr and "starter-fit.log" in first.stderr
    assert {c["source"] for c in json.loads(first.stdout)["criteria"]} == {"zero-shot"}
    [(cmd, kw)] = started
    assert cmd[-4:] == ["model", "starter", str(other_model), "--background"] and kw["start_new_session"] is True
    assert not (home / "data" / "heads" / "starter").exists() or not list(
        (home / "data" / "heads" / "starter").glob("*.npz")
    )

    lowered: list[bool] = []
    monkeypatch.setattr(_starter, "background_child", lambda: lowered.append(True))  # not this test's priority
    fitted = cli(cmd[3:], home, env=env)
    assert fitted.returncode == 0, fitted.stderr
    err = fitted.stderr
    assert lowered == [True] and err.count("fitting the starter head for") == 1 and "starter head fitted in" in err
    n = len(rows)
    assert f"triage: starter head: scoring {n} row(s)" in err and f"starter head: scored {n}/{n} rows in" in err, err
    stored = list((home / "data" / "heads" / "starter").glob("*.npz"))
    assert len(stored) == 1
    covered = set(read_head(stored[0]).criteria)  # a criterion whose fit lost to zero-shot is left out of it
    assert covered, "the starter head learned no criterion"
    again = cli(args, home, stdin=TICKETS["billing"], env=env)
    assert again.returncode == 0, again.stderr
    assert "background" not in again.stderr and "applying starter head" in again.stderr
    assert {c["id"]: c["source"] for c in json.loads(again.stdout)["criteria"]} == {
        c["id"]: "starter" if c["id"] in covered else "zero-shot" for c in json.loads(again.stdout)["criteria"]
    }
    assert len(started) == 1, "nothing more to fit"


def test_one_fit_at_a_time_across_processes(tmp_path: Path) -> None:
    """FitLock: held by another process, it is refused (and names that process); free once that process ends,
    however it ends."""
    from triage.store.fit_lock import FitLock

    target = tmp_path / "heads" / "starter" / "head.npz"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pathlib import Path; from triage.store.fit_lock import FitLock; "
            "assert FitLock(Path(sys.argv[1])).acquire(); print('held', flush=True); time.sleep(60)",
            str(target),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        lock = FitLock(target)
        assert not lock.acquire() and lock.holder() == holder.pid
    finally:
        holder.kill()
        holder.wait(timeout=30)
    with FitLock(target) as held:
        assert held
        assert not FitLock(target).acquire(), "one fit at a time within a process too"
    assert FitLock(target).acquire()


def test_a_fifo_where_the_lock_goes_is_left_alone(tmp_path: Path) -> None:
    """A FIFO (not triage's file) at the lock's path is never opened to block, written or removed."""
    import stat as st

    from triage.store.fit_lock import FitLock, lock_path

    target = tmp_path / "head.npz"
    os.mkfifo(lock_path(target))
    assert FitLock(target).acquire() and FitLock(target).holder() is None
    assert st.S_ISFIFO(os.lstat(lock_path(target)).st_mode)


def test_a_fit_of_a_head_another_fit_holds_fits_nothing_and_says_who(monkeypatch: pytest.MonkeyPatch) -> None:
    """Session.ensure_starter (the app's, serve's and the command line's one way to fit it) takes the head's lock:
    while another fit holds it, it fits nothing, says which process fits it, and the session decides zero-shot."""
    from fake_engine import FakeEngine

    from triage.session import Session

    session = Session(FakeEngine())
    other = session.starter_lock(default_pack())
    assert other.acquire()
    try:
        monkeypatch.setattr(starter, "ensure", lambda *a, **k: pytest.fail("fitted while another fit holds it"))
        said: list[str] = []
        assert not session.ensure_starter(default_pack(), say=said.append)
        assert said == [
            f"the starter head for {session.scorer.name} is being fitted by another process (pid {os.getpid()}); "
            "zero-shot until it is stored"
        ]
    finally:
        other.release()
