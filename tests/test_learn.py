"""Learned heads (`triage learn`): the fit, the artifact, applying it, refusing bad or foreign files.

The model tests use the real smollm2-135m: `triage learn` scores labelled tickets
and fits a head; `triage score` and the engine apply it to a pack that mixes a
learned criterion with an unlabelled (zero-shot) one. The math (the row-space fit,
the folded scaler, the rare-option backoff) is checked against scikit-learn and
numpy directly, without a model.
"""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest
from conftest import MIXED, labelled_rows

from triage.domain.pack import parse_pack
from triage.errors import InputError
from triage.lab import score as lab
from triage.lab.options import LabOptions
from triage.learning import fitstore, head_file
from triage.learning.head_file import read_head, write_head
from triage.scoring.head import CriterionHead, Head, feature_ids
from triage.scoring.setup_check import check_head

# -- without a model: the math and the file ------------------------------------------------


def test_feature_ids_are_twice_the_width_evenly_spread() -> None:
    ids = feature_ids(49152, 576)
    assert len(ids) == 1152 and ids[0] == 0 and ids[-1] == 49151 and np.all(np.diff(ids) > 0)
    assert len(feature_ids(100, 576)) == 100  # a tiny vocabulary: every token


def test_row_space_fit_is_sklearns_fit() -> None:
    from sklearn.linear_model import LogisticRegression

    from triage.learning.learn import _RowSpaceLR

    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 400))
    y = rng.integers(0, 3, 60)
    x[:, 0] += y
    ours = _RowSpaceLR(0.5).fit(x, y)
    ref = LogisticRegression(C=0.5, class_weight="balanced", max_iter=20000, tol=1e-10).fit(x, y)
    test = rng.normal(size=(20, 400))
    assert np.abs(ours.predict_proba(test) - ref.predict_proba(test)).max() < 1e-3


def _synthetic(n_per: list[int], seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    y = np.concatenate([np.full(n, i) for i, n in enumerate(n_per)])
    feats = rng.normal(size=(len(y), 30)) + np.eye(len(n_per), 30)[y] * 6
    lp = np.log(np.full((len(y), len(n_per)), 1 / len(n_per)))
    return feats, lp, y


def _three_option_pack():  # type: ignore[no-untyped-def]
    return parse_pack(
        {
            "criterion": [
                {
                    "id": "c",
                    "question": "Q?",
                    "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}, {"id": "z", "label": "Z"}],
                }
            ]
        }
    )


def _three_options():  # type: ignore[no-untyped-def]
    return _three_option_pack().criteria[0]


def test_fit_folds_the_scaler_into_the_weights() -> None:
    from triage.learning.learn import _fit_lr, _folded, _proba

    crit = _three_options()
    feats, lp, y = _synthetic([12, 12, 12])
    x = np.hstack([feats, lp])
    scaler, lr = _fit_lr(x, y, 0.1)
    coef, icpt = _folded(scaler, lr, [0, 1, 2])
    head = CriterionHead([o.id for o in crit.options], ["a", "b", "z"], coef, icpt)
    got = np.exp(np.stack([head.apply(f, lp_row) for f, lp_row in zip(feats, lp, strict=True)]))
    assert np.allclose(got, _proba(scaler, lr, x, [0, 1, 2]), atol=1e-9)


def test_fit_criterion_learns_refuses_and_backs_off() -> None:
    from triage.learning.learn import fit_criterion

    crit = _three_options()
    feats, lp, y = _synthetic([15, 15, 15])
    head, out = fit_criterion(crit, feats, lp, y)
    assert head is not None and out.refused is None and out.cv["balanced_accuracy"] > 0.9
    assert head.coef.shape == (3, 33) and out.c is not None and 0 < out.cv["temperature"]
    feats, lp, y = _synthetic([15, 15, 3])
    head, out = fit_criterion(crit, feats, lp, y)
    assert head is None and "z has 3" in (out.refused or "") and "at least 5" in (out.refused or "")
    head, out = fit_criterion(crit, feats, lp, y, rare="backoff")
    assert head is not None and head.classes == ["a", "b"] and head.backoff == ["z"] and out.backoff == ["z"]
    # The backed-off option keeps its zero-shot probability; the learned ones share the rest.
    zero = np.log([0.2, 0.3, 0.5])
    p = np.exp(head.apply(feats[0], zero))
    assert abs(p[2] - 0.5) < 1e-12 and abs(p.sum() - 1) < 1e-9


def test_a_head_near_chance_is_kept_and_said() -> None:
    from triage.learning.learn import fit_criterion

    feats, lp, y = _synthetic([15, 15, 15])
    _, out = fit_criterion(_three_options(), feats, lp, y)
    assert not any("of chance" in w for w in out.warnings)  # separable: nothing to say
    rng = np.random.default_rng(5)
    noise = rng.normal(size=feats.shape)  # features that say nothing of the labels
    head, out = fit_criterion(_three_options(), noise, lp, y, force=True)
    said = [w for w in out.warnings if "of chance" in w]
    assert head is not None and len(said) == 1
    assert "(0.333) on 45 rows" in said[0] and "correct it often" in said[0]


def test_the_grid_walk_stops_after_patience_worse_values_and_chooses_as_the_whole_grid() -> None:
    from triage.learning.learn import C_GRID, fit_criterion

    feats, lp, y = _synthetic([15, 15, 15])
    whole, w = fit_criterion(_three_options(), feats, lp, y, patience=None)
    assert w.cv["c_tried"] == list(C_GRID)
    for patience in (1, 2):
        head, out = fit_criterion(_three_options(), feats, lp, y, patience=patience)
        best = list(C_GRID).index(out.c)
        # it tried every C up to the best, then `patience` worse ones (or the grid ran out), and no more
        assert out.cv["c_tried"] == list(C_GRID)[: min(len(C_GRID), best + 1 + patience)]
        assert out.c == w.c and np.allclose(head.coef, whole.coef) and np.allclose(head.intercept, whole.intercept)


def test_the_row_basis_keeps_the_largest_directions_up_to_the_rank() -> None:
    from triage.learning.learn import _row_basis

    rng = np.random.default_rng(3)
    x = rng.normal(size=(40, 10)) @ rng.normal(size=(10, 200))  # rows spanning 10 directions
    full = _row_basis(x)
    assert full.shape == (10, 200)  # what is not spanned is cut, whatever the rank
    capped = _row_basis(x, 4)
    assert capped.shape == (4, 200) and np.allclose(capped @ capped.T, np.eye(4))
    assert np.allclose(capped, full[:4])  # the four largest
    # what the capped basis leaves out of x is its smallest singular directions: the rest of the spectrum
    s = np.linalg.svd(x, compute_uv=False)
    assert np.isclose(np.linalg.norm(x - x @ capped.T @ capped), np.sqrt(np.sum(s[4:] ** 2)))


def test_fit_head_caps_the_span_at_the_hidden_width_plus_the_options(monkeypatch: pytest.MonkeyPatch) -> None:
    from triage.learning import learn

    ranks: list[int | None] = []
    real = learn._row_basis

    def spy(x: np.ndarray, rank: int | None = None) -> np.ndarray:
        ranks.append(rank)
        return real(x, rank)

    monkeypatch.setattr(learn, "_row_basis", spy)
    pack = _three_option_pack()
    feats, lp, y = _synthetic([15, 15, 15])
    common = {"model_sha256": "ab" * 32, "prompt_format": "f", "n_vocab": 100}
    head, _ = learn.fit_head(pack, {"c": feats}, {"c": lp}, {"c": list(y)}, n_embd=7, **common)
    assert set(ranks) == {7 + 3 + 1}  # every fold's basis and the final fit's: n_embd + K + 1
    assert (
        head.criteria["c"].info["cv"]["balanced_accuracy"] > 0.6
    )  # 11 of the 33 directions still tell most apart (1/3 is chance)
    ranks.clear()
    learn.fit_criterion(pack.criteria[0], feats, lp, list(y))
    assert set(ranks) == {None}  # fit_criterion alone: the whole span


def _head(n_vocab: int = 300, n_embd: int = 50) -> Head:
    f = len(feature_ids(n_vocab, n_embd))
    rng = np.random.default_rng(1)
    crit = CriterionHead(["x", "y"], ["x", "y"], rng.normal(size=(2, f + 2)), rng.normal(size=2), {"n": 10})
    return Head("ab" * 32, "packhash", "triage-prompt/3:chat/label", n_vocab, n_embd, {"topic": crit}, name="h.npz")


def test_head_file_round_trip(tmp_path: Path) -> None:
    head = _head()
    path = write_head(head, tmp_path / "h.npz")
    back = read_head(path)
    assert (
        back.model_sha256 == head.model_sha256
        and back.prompt_format == head.prompt_format
        and list(back.criteria) == ["topic"]
    )
    feats = np.random.default_rng(2).normal(size=head.n_features)
    lp = np.log([0.3, 0.7])
    # Weights are stored as float16: the read-back head is the original with its weights rounded so.
    rounded = CriterionHead(
        ["x", "y"],
        ["x", "y"],
        head_file.stored_weights(head.criteria["topic"].coef).astype(np.float64),
        head.criteria["topic"].intercept,
    )
    assert np.allclose(back.apply("topic", feats, lp), rounded.apply(feats, lp), atol=1e-12)
    assert np.abs(np.exp(back.apply("topic", feats, lp)) - np.exp(head.apply("topic", feats, lp))).max() < 0.05
    big = head_file.stored_weights(np.array([[1e5, 0.5]]))
    assert big.dtype == np.float32 and big[0, 0] == 1e5  # too large for float16: kept as float32
    with zipfile.ZipFile(path) as z:
        assert all(not n.endswith(".pkl") for n in z.namelist())
    assert path.stat().st_size < 2 * 2 * (head.n_features + 2) + 4096


def _rewrite(path: Path, **arrays: np.ndarray) -> None:
    with np.load(path, allow_pickle=False) as data:
        items = {k: data[k] for k in data.files}
    items.update(arrays)
    np.savez(path, **items)


@pytest.mark.parametrize("damage", ["truncated", "garbage", "shape", "nan", "pickle", "schema", "features"])
def test_a_damaged_head_file_is_refused_with_a_message(tmp_path: Path, damage: str) -> None:
    path = write_head(_head(), tmp_path / "h.npz")
    if damage == "truncated":
        path.write_bytes(path.read_bytes()[:200])
    elif damage == "garbage":
        path.write_bytes(b"not a zip file at all")
    elif damage == "shape":
        _rewrite(path, c0_coef=np.zeros((2, 7), dtype=np.float32))
    elif damage == "nan":
        _rewrite(path, c0_intercept=np.array([np.nan, 0.0]))
    elif damage == "pickle":
        with np.load(path) as data:
            items = {k: data[k] for k in data.files}
        items["c0_coef"] = np.array([object()], dtype=object)
        np.savez(path, **items)
    else:
        meta = json.loads(str(np.load(path)["meta"]))
        if damage == "schema":
            meta["schema"] = "something/9"
        else:
            meta["features"]["count"] = 7
        _rewrite(path, meta=np.array(json.dumps(meta)))
    with pytest.raises(InputError) as err:
        read_head(path)
    assert str(path) in err.value.message
    assert err.value.message.count("\n") == 0


def test_head_key_mismatch_names_what_differs() -> None:
    head = _head()

    class Fmt:
        id = "triage-prompt/3:plain/label"

    class Eng:
        sha256 = "cd" * 32

        def format_for(self, readout: str) -> Fmt:
            return Fmt()

    pack = parse_pack(
        {
            "criterion": [
                {"id": "topic", "question": "Q?", "options": [{"id": "x", "label": "X"}, {"id": "y", "label": "Y"}]}
            ]
        }
    )
    why = check_head(head, engine=Eng(), pack=pack)
    assert why and "model sha256" in why and "pack hash" in why and "prompt format" in why


def test_read_labelled_partial_rows(tmp_path: Path) -> None:
    from triage.learning.labelled import read_labelled

    pack = parse_pack(
        {
            "criterion": [
                {"id": "topic", "question": "Q?", "options": [{"id": "x", "label": "X"}, {"id": "y", "label": "Y"}]},
                {"id": "mood", "question": "Q?", "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}]},
            ]
        }
    )
    f = tmp_path / "l.jsonl"
    f.write_text(
        '{"id": "1", "text": "t", "labels": {"topic": "x"}}\n{"id": "2", "text": "t", "labels": {"other": "x"}}\n',
        encoding="utf-8",
    )
    got = read_labelled(f, pack, partial=True)
    assert [r.labels for r in got.rows] == [{"topic": "x"}] and "no label for any criterion" in got.bad[0].message
    with pytest.raises(InputError):
        read_labelled(f, pack)  # eval and calibrate still want every criterion


def test_holdout_says_when_sklearn_is_missing(monkeypatch: pytest.MonkeyPatch) -> None:
    # Fitting a head needs numpy alone (tests/test_logistic.py); --holdout's TF-IDF baseline needs
    # scikit-learn, and says so before anything is scored.
    import importlib.util

    from triage.errors import TriageError
    from triage.evaluation.baseline import need_sklearn

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "sklearn" else real(name, *a))
    with pytest.raises(TriageError, match="TF-IDF baseline needs scikit-learn") as err:
        need_sklearn("--holdout")
    assert "leave out --holdout" in (err.value.hint or "")


# -- with the real model ------------------------------------------------------------------


@pytest.fixture(scope="module")
def learned(smollm2_path: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """`triage learn` once on the mixed pack (topic labelled, mood not), in its own TRIAGE_HOME."""
    import contextlib
    import io
    import os

    from triage.cli import main

    home = tmp_path_factory.mktemp("learn-home")
    work = tmp_path_factory.mktemp("learn")
    old = os.environ.get("TRIAGE_HOME")
    os.environ["TRIAGE_HOME"] = str(home)
    try:
        pack = work / "mixed.toml"
        pack.write_text(MIXED, encoding="utf-8")
        data = work / "labelled.jsonl"
        data.write_text("\n".join(json.dumps(r) for r in labelled_rows()) + "\n", encoding="utf-8")
        out = work / "team.npz"
        said = io.StringIO()
        with contextlib.redirect_stderr(said):
            argv = [
                "learn",
                str(data),
                "--model",
                str(smollm2_path),
                "--n-ctx",
                "512",
                "--pack",
                str(pack),
                "-o",
                str(out),
            ]
            code = main(argv)
        assert code == 0
        # What `triage score` will now apply, by the one fit policy.
        applied = "applying learned head 'team.npz' to topic (not learned: mood)"
        assert f"`triage score` with this model and pack: {applied}" in said.getvalue()
    finally:
        if old is None:
            os.environ.pop("TRIAGE_HOME", None)
        else:
            os.environ["TRIAGE_HOME"] = old
    return {"home": home, "pack": pack, "head": out, "data": data}


@pytest.mark.model
def test_learn_fits_the_labelled_criterion_and_names_the_other(learned: dict[str, Path], smollm2_path: Path) -> None:
    from triage.scoring.engine import Engine

    head = read_head(learned["head"])
    assert list(head.criteria) == ["topic"]
    [refused] = [c for c in head.report["criteria"] if c.get("refused")]
    assert refused["criterion"] == "mood" and "no labels" in refused["refused"]
    with Engine(smollm2_path, name="smollm2-135m", n_ctx=512) as eng:
        assert (head.n_vocab, head.n_embd) == (eng.native.n_vocab, eng.native.n_embd)
        assert head.model_sha256 == eng.sha256 and head.prompt_format == eng.format_for("label").id
        assert head.criteria["topic"].coef.shape == (2, len(eng.feature_ids) + 2)
    assert (learned["home"] / "data" / "heads").is_dir() or any(learned["home"].rglob("*.npz"))


@pytest.mark.model
def test_engine_applies_the_head_from_the_answer_positions_features(
    learned: dict[str, Path], smollm2_path: Path
) -> None:
    from triage.domain.pack import load_pack
    from triage.scoring.engine import Engine

    pack = load_pack(learned["pack"])
    head = read_head(learned["head"])
    ticket = "I was charged twice for the blender, refund one payment."
    with Engine(smollm2_path, name="smollm2-135m", n_ctx=512) as eng:
        opts = LabOptions(mode="serial")
        plain, raw, feats = lab.readouts_and_features(eng, ticket, pack, opts)
        with_head = lab.score_ticket(eng, ticket, pack, opts, head=head)
        fan = lab.score_ticket(eng, ticket, pack, LabOptions(mode="fanout"), head=head)
    assert [c.source for c in plain.criteria] == ["zero-shot", "zero-shot"]
    assert [c.source for c in with_head.criteria] == ["learned", "zero-shot"] and with_head.head == head.name
    assert feats["topic"].shape == (len(feature_ids(head.n_vocab, head.n_embd)),)
    # Independently: the head on the captured features and raw log-probs gives the learned bars.
    [(order, lp, _)] = raw["topic"]
    want = np.exp(head.apply("topic", feats["topic"], lp))
    assert np.allclose([o.probability for o in with_head.criteria[0].options], want, atol=1e-9)
    # The unlearned criterion is untouched; fanout (the default mode) agrees to batch-shape rounding.
    assert [o.probability for o in with_head.criteria[1].options] == [o.probability for o in plain.criteria[1].options]
    assert np.allclose([o.probability for o in fan.criteria[0].options], want, atol=0.05)
    assert fan.criteria[0].source == "learned"


@pytest.mark.model
def test_score_applies_the_stored_head_and_refuses_a_foreign_one(
    learned: dict[str, Path],
    smollm2_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import shutil

    from triage.cli import main

    home = shutil.copytree(learned["home"], tmp_path / "home")  # this test replaces the stored head
    monkeypatch.setenv("TRIAGE_HOME", str(home))
    ticket = tmp_path / "t.txt"
    ticket.write_text("My parcel never arrived and the tracking has not moved.", encoding="utf-8")
    model = ["--model", str(smollm2_path), "--n-ctx", "512", "--pack", str(learned["pack"])]
    assert main(["score", str(ticket), *model, "--format", "json"]) == 0
    out = capsys.readouterr()
    done = json.loads(out.out)
    assert [c["source"] for c in done["criteria"]] == ["learned", "zero-shot"] and done["head"]
    assert "applying learned head" in out.err and "not learned: mood" in out.err
    assert main(["score", str(ticket), *model, "--format", "table"]) == 0
    table = capsys.readouterr().out
    assert "learned" in table and "zero-shot" in table
    assert main(["score", str(ticket), *model, "--format", "json", "--no-head"]) == 0
    assert [c["source"] for c in json.loads(capsys.readouterr().out)["criteria"]] == ["zero-shot", "zero-shot"]
    # A head learned for another model is refused when named, and passed over (with why) when stored.
    foreign = read_head(learned["head"])
    foreign.model_sha256 = "0" * 64
    bad = write_head(foreign, tmp_path / "foreign.npz")
    assert main(["score", str(ticket), *model, "--head", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "learned for another setup" in err and "model sha256" in err
    stored = fitstore.heads_dir()
    for p in stored.glob("*.npz"):
        p.unlink()
    write_head(foreign, stored / fitstore.head_name(foreign.model_sha256, foreign.pack_hash, foreign.prompt_format))
    assert main(["score", str(ticket), *model, "--format", "json"]) == 0
    out = capsys.readouterr()
    assert "not applied" in out.err and "another setup" in out.err
    assert [c["source"] for c in json.loads(out.out)["criteria"]] == ["zero-shot", "zero-shot"]
    # A damaged file named on the command line: one clear line, exit 2.
    broken = tmp_path / "broken.npz"
    broken.write_bytes(b"PK\x03\x04 no more")
    assert main(["score", str(ticket), *model, "--head", str(broken)]) == 2
    assert "cannot be read" in capsys.readouterr().err


@pytest.mark.model
def test_eval_measures_a_stored_head_on_held_out_rows(
    learned: dict[str, Path],
    smollm2_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import shutil

    from triage.cli import main

    home = shutil.copytree(learned["home"], tmp_path / "home")
    monkeypatch.setenv("TRIAGE_HOME", str(home))
    held = [
        {"id": f"h{i}", "text": t, "labels": {"topic": y, "mood": "angry"}}
        for i, (t, y) in enumerate(
            [
                ("I paid twice for the lamp, give one payment back.", "payment"),
                ("The refund for my jacket never reached my card.", "payment"),
                ("My sofa was never delivered and the courier stopped answering.", "delivery"),
                ("The parcel with my headphones is stuck in transit.", "delivery"),
            ]
        )
    ]
    data = tmp_path / "held.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in held) + "\n", encoding="utf-8")
    out = tmp_path / "eval.json"
    model = ["--model", str(smollm2_path), "--n-ctx", "512", "--pack", str(learned["pack"])]
    assert main(["eval", str(data), *model, "--no-baseline", "--json", str(out)]) == 0
    assert "evaluating learned head" in capsys.readouterr().err
    report = json.loads(out.read_text(encoding="utf-8"))
    topic, mood = report["criteria"]
    assert "learned" in topic["variants"] and topic["variants"]["learned"]["n"] == 4 and topic["learned"]["c"] > 0
    assert "learned" not in mood["variants"] and report["head"]
    assert main(["eval", str(data), *model, "--head", str(learned["head"]), "--train", str(data)]) == 2
    assert "leave out --train" in capsys.readouterr().err


@pytest.mark.model
@pytest.mark.slow
async def test_the_app_shows_learned_and_zero_shot_cards(
    learned: dict[str, Path], smollm2_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    from fake_engine import fake_app, wait_until
    from textual import events

    from triage.domain.pack import load_pack
    from triage.scoring.engine import Engine

    home = shutil.copytree(learned["home"], tmp_path / "home")
    monkeypatch.setenv("TRIAGE_HOME", str(home))
    pack = load_pack(learned["pack"])

    def factory(requested: str | None, notice: object) -> Engine:
        return Engine(smollm2_path, name="smollm2-135m", stand_in=True, n_ctx=512)

    app = fake_app(factory, pack=pack)
    async with app.run_test(size=(110, 34)) as pilot:
        main = app.main
        await wait_until(pilot, lambda: main.model_state == "ready", timeout=120, what="smollm2-135m to load")
        app.post_message(events.Paste("I was billed twice for my shoes, please refund one charge."))
        await pilot.pause()
        await pilot.press("f5")
        await wait_until(pilot, lambda: main.result is not None, timeout=120, what="the score")
        result = main.result
        assert [c.source for c in result.criteria] == ["learned", "zero-shot"] and result.head
        topic, mood = main.decisions.card("topic"), main.decisions.card("mood")
        assert str(topic.border_subtitle).startswith("learned ·") and str(mood.border_subtitle).startswith(
            "zero-shot ·"
        )
        assert f"learned head {result.head}" in str(main.summary.render())  # which criteria: each card says it
        assert not main.notices.has("head")
        # A stored head learned with another model is not applied, and the app says why.
        [stored] = fitstore.heads_dir().glob("*.npz")
        foreign = read_head(stored)
        foreign.model_sha256 = "0" * 64
        stored.unlink()
        write_head(
            foreign,
            fitstore.heads_dir() / fitstore.head_name(foreign.model_sha256, foreign.pack_hash, foreign.prompt_format),
        )
        await pilot.press("f5")
        await wait_until(
            pilot,
            lambda: main.result is not None and main.result is not result and not main.scoring,
            timeout=120,
            what="the second score",
        )
        assert [c.source for c in main.result.criteria] == ["zero-shot", "zero-shot"] and main.result.head is None
        assert main.notices.has("head")


def test_learn_backs_off_rare_options_by_default_and_eval_follows() -> None:
    from triage.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["learn", "x.jsonl"]).rare_options == "backoff"
    assert parser.parse_args(["learn", "x.jsonl", "--rare-options", "refuse"]).rare_options == "refuse"
    assert parser.parse_args(["learn", "x.jsonl"]).n_ctx == 1024 == parser.parse_args(["eval", "x.jsonl"]).n_ctx
