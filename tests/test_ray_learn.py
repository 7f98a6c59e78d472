"""`triage learn --ray`: the training rows scored on a local Ray cluster, the fit local, the same head.

The model tests use the real smollm2-135m and the Ray tests' cluster (tests/test_ray_score.py: 2 CPUs on
127.0.0.1, the workers' own TRIAGE_HOME with the model installed). The flags and the errors that come
before any cluster or model are tested without either.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import test_ray_score
from conftest import MIXED, labelled_rows

from triage.cli import build_parser, main
from triage.errors import InputError, TriageError
from triage.learning.head_file import read_head

cluster, worker_home = test_ray_score.cluster, test_ray_score.worker_home  # the Ray tests' fixtures
ROOT = Path(__file__).resolve().parents[1]
MODEL_ARGS = ["--n-ctx", "1024", "--threads", "1"]


@pytest.fixture()
def files(tmp_path: Path) -> dict[str, Path]:
    pack = tmp_path / "mixed.toml"
    pack.write_text(MIXED, encoding="utf-8")
    rows = labelled_rows()  # 15 payment, 15 delivery
    first = rows[:11] + rows[15:26]  # 22 rows, 11 of each
    data = tmp_path / "labelled.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in first), encoding="utf-8")
    more = tmp_path / "more.jsonl"  # the 22 and 8 more
    more.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return {"pack": pack, "data": data, "more": more}


def learn_args(*argv: str) -> Any:
    return build_parser().parse_args(["learn", *argv])


# -- without a model or a cluster ---------------------------------------------------------------


def test_the_ray_flags_are_checked_before_any_model_or_cluster(files: dict[str, Path]) -> None:
    from triage.backlog.learn_rows import RaySets, sets_scorer
    from triage.evaluation.labelled_runs import score_sets

    data = str(files["data"])
    assert sets_scorer(learn_args(data)) is score_sets  # no --ray: scored here, as before
    with pytest.raises(InputError, match="--workers works only with --ray"):
        sets_scorer(learn_args(data, "--workers", "2"))
    with pytest.raises(InputError, match="--batch-size works only with --ray"):
        sets_scorer(learn_args(data, "--batch-size", "4"))
    with pytest.raises(InputError, match="--ray nowhere: not a Ray address"):
        sets_scorer(learn_args(data, "--ray", "nowhere"))
    with pytest.raises(InputError, match="--workers must be at least 1"):
        sets_scorer(learn_args(data, "--ray", "--workers", "0"))
    pytest.importorskip("ray")
    args = learn_args("--ray", data, "--workers", "2", "--batch-size", "3")  # --ray FILE: the file is the input
    got = sets_scorer(args, calls=2)
    assert isinstance(got, RaySets) and args.labelled == [data]
    assert (got.address, got.workers, got.batch_size, got.threads, got.calls) == ("local", 2, 3, 1, 2)
    far = sets_scorer(learn_args(data, "--ray", "ray://10.1.2.3:10001", "--threads", "2"))
    assert (far.address, far.threads) == ("ray://10.1.2.3:10001", 2)


def test_learn_ray_without_ray_installed_says_so_before_loading_a_model(
    files: dict[str, Path], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    argv = ["learn", str(files["data"]), "--pack", str(files["pack"]), "--ray", "--model", "/no/such/model.gguf"]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "--ray needs Ray, which is not installed" in err and "pip install 'triage[ray]'" in err
    assert "model.gguf" not in err  # stopped before the model was looked for


@pytest.mark.parametrize("command", ["learn", "score"])
def test_a_cluster_address_that_does_not_answer_is_said_in_one_line(
    command: str, files: dict[str, Path], smollm2_path: Path, tmp_path: Path
) -> None:
    """learn --ray and score --ray (the same connect) say it in one line, with no traceback."""
    pytest.importorskip("ray")
    env = {
        **os.environ,
        "TRIAGE_HOME": str(tmp_path / "home"),
        "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
        # Ray's own waits for a cluster's control service (GCS), short: one attempt of about 6 s, not minutes
        "RAY_gcs_server_port_wait_time_s": "0",
        "RAY_gcs_rpc_server_connect_timeout_s": "1",
        "RAY_py_gcs_connect_timeout_s": "3",
        "PYTHONPATH": str(ROOT),
    }
    argv = [command, str(files["data"]), "--pack", str(files["pack"]), "--model", str(smollm2_path)]
    out = tmp_path / ("h.npz" if command == "learn" else "o.jsonl")
    argv += ["--no-store"] if command == "learn" else []
    argv += ["-o", str(out), *MODEL_ARGS[2:], "--ray", "127.0.0.1:1"]  # nothing listens on port 1
    done = subprocess.run(
        [sys.executable, "-m", "triage.cli", *argv], env=env, capture_output=True, text=True, timeout=240, check=False
    )
    assert done.returncode == 1, done.stderr
    lines = [line for line in done.stderr.splitlines() if "error" in line.lower()]
    assert lines and lines[0].startswith("triage: error: --ray 127.0.0.1:1: no Ray cluster answers there"), lines
    assert "Traceback" not in done.stderr and not out.exists()


# -- on a local Ray cluster with the real model -----------------------------------------------------


def _learn(argv: list[str], home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> str:
    monkeypatch.setenv("TRIAGE_HOME", str(home))  # the driver's readout cache lives here
    assert main(argv) == 0
    return capsys.readouterr().err


@pytest.mark.model
@pytest.mark.slow
def test_learn_on_ray_fits_the_head_learn_fits_and_sends_only_what_is_not_cached(
    cluster: Any,
    smollm2_path: Path,
    files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    common = ["--model", str(smollm2_path), "--pack", str(files["pack"]), *MODEL_ARGS, "--no-store"]
    here, there = tmp_path / "local.npz", tmp_path / "ray.npz"
    said = _learn(["learn", str(files["data"]), *common, "-o", str(here)], tmp_path / "home-local", monkeypatch, capsys)
    assert "cache: 0 hit(s), 22 scored" in said
    ray_home = tmp_path / "home-ray"  # an empty cache: every row goes to Ray
    argv = ["learn", str(files["data"]), *common, "--ray", "--workers", "2", "--batch-size", "4", "-o", str(there)]
    said = _learn(argv, ray_home, monkeypatch, capsys)
    assert "on Ray (2 worker(s))" in said and "cache: 0 hit(s), 22 scored" in said
    a, b = read_head(here), read_head(there)
    assert (a.model_sha256, a.pack_hash, a.prompt_format, a.read, a.attention) == (
        b.model_sha256,
        b.pack_hash,
        b.prompt_format,
        b.read,
        b.attention,
    )
    assert list(a.criteria) == list(b.criteria) == ["topic"]
    ha, hb = a.criteria["topic"], b.criteria["topic"]
    assert ha.info["C"] == hb.info["C"] and ha.classes == hb.classes
    assert np.allclose(ha.coef.astype(np.float64), hb.coef.astype(np.float64), atol=1e-6)
    assert np.allclose(ha.intercept, hb.intercept, atol=1e-6)
    assert a.report["cut"] == b.report["cut"] and a.report["n_ctx"] == b.report["n_ctx"] == 1024
    # Again with 8 more rows: the 22 cached ones are not sent to Ray, the 8 new ones are.
    argv[1] = str(files["more"])
    argv[-1] = str(tmp_path / "ray-30.npz")
    said = _learn(argv, ray_home, monkeypatch, capsys)
    assert "cache: 22 hit(s), 8 scored" in said and "8/8" in said
    # Everything cached: no cluster is needed, and nothing is sent.
    argv[-1] = str(tmp_path / "ray-30-again.npz")
    said = _learn(argv, ray_home, monkeypatch, capsys)
    assert "cache: 30 hit(s), 0 scored" in said and "on Ray" not in said
    # The 30-row head from the cache equals the one learned locally on the same 30 rows.
    local_30 = tmp_path / "local-30.npz"
    _learn(["learn", str(files["more"]), *common, "-o", str(local_30)], tmp_path / "home-local", monkeypatch, capsys)
    c, d = read_head(local_30).criteria["topic"], read_head(tmp_path / "ray-30-again.npz").criteria["topic"]
    assert c.info["C"] == d.info["C"] and np.allclose(c.coef.astype(np.float64), d.coef.astype(np.float64), atol=1e-6)


@pytest.mark.model
@pytest.mark.slow
def test_a_worker_that_would_compute_other_numbers_is_refused_before_any_ticket(
    cluster: Any,
    smollm2_path: Path,
    files: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The driver compares each worker's cache key with its own; here the worker's context is another size."""
    from triage.backlog import learn_rows
    from triage.commands.learn import run

    class OtherContext(learn_rows.RowScorer):  # defined here, so Ray ships the class itself to the worker
        def __init__(self, model: str, sha: str, n_ctx: int, *rest: Any) -> None:
            super().__init__(model, sha, 2048, *rest)

    monkeypatch.setattr(learn_rows, "RowScorer", OtherContext)
    out = tmp_path / "h.npz"
    args = learn_args(
        str(files["data"]),
        *("--pack", str(files["pack"]), "--model", str(smollm2_path), *MODEL_ARGS),
        *("--no-store", "-o", str(out), "--ray", "--workers", "1"),
    )
    with pytest.raises(TriageError, match=r"would score with other numbers than this machine: context size 2048 "):
        run(args)
    assert not out.exists()
