"""The loop from scripts: `score --history`, then `label --file`, then `learn --history` fits what `learn FILE` fits.

The real smollm2-135m: the history keeps each score's head inputs, so learning from the
labels scores nothing again; a head learned that way equals (within float16 features) one
learned from the same rows in a file, and predicts the same on other rows.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from conftest import MIXED, labelled_rows

from triage.cli import main
from triage.learning.head_file import read_head

pytestmark = pytest.mark.model


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("loop")
    rows = labelled_rows()
    train = [r for i, r in enumerate(rows) if i % 3 != 0]
    pack = d / "mixed.toml"
    pack.write_text(MIXED, encoding="utf-8")
    (d / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in train), encoding="utf-8")
    (d / "tickets.jsonl").write_text(
        "".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in train), encoding="utf-8"
    )
    (d / "labels.jsonl").write_text(
        "".join(json.dumps({"id": r["id"], "labels": r["labels"]}) + "\n" for r in train), encoding="utf-8"
    )
    return {"dir": d, "pack": pack}


def test_score_history_label_file_learn_history_equals_learn_file(
    files: dict[str, Path], smollm2_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    d, pack = files["dir"], files["pack"]
    model = ["--model", str(smollm2_path), "--n-ctx", "512", "--pack", str(pack)]
    assert main(["score", str(d / "tickets.jsonl"), "--history", *model, "--format", "jsonl"]) == 0
    err = capsys.readouterr().err
    assert "kept 20 scored ticket(s) in the history" in err
    assert main(["label", "--file", str(d / "labels.jsonl")]) == 0
    assert "stored 20 label(s) on 20 ticket(s)" in capsys.readouterr().err
    assert main(["learn", "--history", *model, "-o", str(d / "from-history.npz"), "--no-store"]) == 0
    err = capsys.readouterr().err
    assert "20 with what a head reads kept, 0 to score" in err
    assert "0 scored, 20 kept in the history" in err  # nothing was scored again
    assert "nothing to score, so the model was not loaded" in err  # only its identity was read
    assert main(["learn", str(d / "train.jsonl"), *model, "-o", str(d / "from-file.npz"), "--no-store"]) == 0
    err = capsys.readouterr().err
    assert "20 scored" in err and "the model was not loaded" not in err  # these rows needed the model
    a, b = read_head(d / "from-history.npz"), read_head(d / "from-file.npz")
    assert set(a.criteria) == set(b.criteria) == {"topic"}
    assert a.report["history"] is True and b.report["history"] is False
    # the same rows, features kept as float16: the same decisions on every other row
    from triage.domain.pack import load_pack
    from triage.scoring.engine import Engine
    from triage.scoring.options import ScoreOptions

    p = load_pack(pack)
    other = [r for i, r in enumerate(labelled_rows()) if i % 3 == 0]
    with Engine(smollm2_path, name="smollm2-135m", n_ctx=512) as eng:
        for r in other:
            _, readouts, feats = eng.readouts_and_features(str(r["text"]), p, ScoreOptions())
            lp = readouts["topic"][0][1]
            pa, pb = np.exp(a.apply("topic", feats["topic"], lp)), np.exp(b.apply("topic", feats["topic"], lp))
            assert int(np.argmax(pa)) == int(np.argmax(pb))
            assert np.max(np.abs(pa - pb)) < 0.05
    # labels on tickets whose kept features are gone (pruned) are scored, and counted
    import sqlite3

    from triage.store.paths import user_dirs

    conn = sqlite3.connect(user_dirs().history_db)
    conn.execute("DELETE FROM features WHERE score IN (SELECT id FROM scores ORDER BY id LIMIT 5)")
    conn.commit()
    conn.close()
    assert main(["learn", "--history", *model, "-o", str(d / "again.npz"), "--no-store"]) == 0
    err = capsys.readouterr().err
    assert "15 with what a head reads kept, 5 to score" in err and "15 kept in the history" in err
    # those 5 were scored by `learn train.jsonl` above, so eval's cache has them: still nothing to load
    assert "5 hit(s), 0 scored, 15 kept in the history" in err and "the model was not loaded" in err


def test_learn_needs_a_source_and_history_file_needs_history(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["learn"]) == 2
    assert "nothing to learn from" in capsys.readouterr().err
    assert main(["learn", "--history-file", "x.sqlite3"]) == 2
    assert "--history-file works only with --history" in capsys.readouterr().err
