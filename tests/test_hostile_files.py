"""The user's files are never overwritten or lost (hardening round 2, class 1), through the real commands.

Every refusal here happens before a model loads, so these run without one, except where a head is fitted.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from triage.cli import main

PACK = """
[pack]
name = "one"
[[criterion]]
id = "queue"
question = "Which queue?"
options = [ { id = "billing", label = "Billing" }, { id = "shipping", label = "Shipping" } ]
"""


def _pack(folder: Path) -> str:
    path = folder / "one.toml"
    path.write_text(PACK, encoding="utf-8")
    return str(path)


def _labelled(path: Path, n: int = 8) -> Path:
    rows = [
        {"id": f"r{i}", "text": f"Ticket {i} about a refund", "labels": {"queue": "billing"}, "extra": i}
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "not json\n", encoding="utf-8")
    return path


def test_eval_save_split_never_replaces_its_input(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    src = _labelled(tmp_path / "dev.jsonl")
    before = src.read_bytes()
    pack = ["--pack", _pack(tmp_path)]
    assert main(["eval", "dev.jsonl", "--split", "0.5", "--save-split", ".", *pack]) == 2
    assert "never writes over a file it reads" in capsys.readouterr().err
    assert src.read_bytes() == before
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "train.jsonl").write_text("mine\n", encoding="utf-8")
    assert main(["eval", "dev.jsonl", "--split", "0.5", "--save-split", "out", *pack]) == 2
    assert "exists" in capsys.readouterr().err and (tmp_path / "out" / "train.jsonl").read_text() == "mine\n"
    assert main(["eval", "dev.jsonl", "--split", "0.5", "--save-split", "out", "--force", *pack]) == 0
    assert (tmp_path / "out" / "train.jsonl").read_text() != "mine\n" and src.read_bytes() == before


def test_calibrate_and_learn_refuse_their_input_as_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    train = _labelled(tmp_path / "train.jsonl")
    before = train.read_bytes()
    assert main(["calibrate", str(train), "-o", str(train)]) == 2
    assert "never writes over a file it reads" in capsys.readouterr().err
    head = tmp_path / "train.npz"
    head.write_bytes(b"a head the user keeps")
    assert main(["learn", str(train), "-o", str(head)]) == 2
    assert "exists" in capsys.readouterr().err and head.read_bytes() == b"a head the user keeps"
    assert train.read_bytes() == before


def test_learn_to_an_unwritable_place_fails_before_any_scoring(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    train = _labelled(tmp_path / "train.jsonl")
    blocked = tmp_path / "file-not-folder"
    blocked.write_text("x", encoding="utf-8")
    assert main(["learn", str(train), "-o", str(blocked / "head.npz"), "--model", "/nonexistent.gguf"]) == 2
    err = capsys.readouterr().err
    assert "cannot write" in err and "nonexistent" not in err  # said before the model is even looked for


def test_a_head_worse_than_zero_shot_is_refused_unless_forced() -> None:
    from triage.domain.pack import Criterion, Option
    from triage.learning.learn import fit_criterion

    rng = np.random.default_rng(1)
    crit = Criterion("c", "q?", (Option("a", "A"), Option("b", "B")))
    y = np.array([0, 1] * 20)
    logprobs = np.log(np.where(np.eye(2)[y] > 0, 0.5001, 0.4999))  # the readout alone: right on every row
    features = rng.normal(size=(40, 500)) * 5  # loud noise the head over-fits
    head, out = fit_criterion(crit, features, logprobs, y)
    assert head is None and out.cv["zero_shot_balanced_accuracy"] == 1.0
    assert out.cv["balanced_accuracy"] < 1.0 and "below zero-shot's 1.000" in (out.refused or "")
    forced, out2 = fit_criterion(crit, features, logprobs, y, force=True)
    assert forced is not None and any("kept (--force)" in w for w in out2.warnings)


def test_storing_a_head_keeps_the_one_it_replaces(tmp_path: Path) -> None:
    from triage.learning.fitstore import heads_dir, store_head
    from triage.learning.head_file import read_head
    from triage.scoring.head import CriterionHead, Head

    def head(bias: float) -> Head:
        crit = CriterionHead(["a", "b"], ["a", "b"], np.zeros((2, 6)), np.array([bias, -bias]), {"n": 2})
        return Head("s" * 64, "p" * 16, "fmt", 100, 2, {"c": crit}, name=f"bias {bias}")

    path = store_head(head(1.0))
    store_head(head(2.0))
    assert read_head(path).name == "bias 2.0"
    assert read_head(path.with_name(path.name + ".prev")).name == "bias 1.0"
    assert sorted(p.name for p in heads_dir().iterdir()) == sorted([path.name, path.name + ".prev"])


def test_ray_refuses_an_output_inside_its_input_and_a_second_writer(tmp_path: Path) -> None:
    backlog = tmp_path / "backlog"
    backlog.mkdir()
    (backlog / "a.jsonl").write_text(json.dumps({"id": "1", "text": "hello"}) + "\n", encoding="utf-8")
    cmd = [sys.executable, "-m", "triage.cli", "score", str(backlog), "--ray", "-o"]
    inside = subprocess.run([*cmd, str(backlog / "s.jsonl"), "--resume"], capture_output=True, text=True, timeout=120)
    assert inside.returncode == 2 and "inside the input" in inside.stderr
    out = tmp_path / "same.jsonl"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import time\nfrom triage.store.outputs import OutputLock\n"
            f"with OutputLock({str(out)!r}):\n    print('held', flush=True)\n    time.sleep(60)\n",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        second = subprocess.run([*cmd, str(out)], capture_output=True, text=True, timeout=120)
    finally:
        holder.kill()
        holder.wait(timeout=30)
    assert second.returncode == 2 and "another triage is writing" in second.stderr
