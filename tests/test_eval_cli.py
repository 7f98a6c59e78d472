"""`triage eval` and `triage calibrate` end to end on a tiny JSONL with the real SmolLM2-135M.

Kept small (two options, five tickets scored once) so that it runs in well under 30 s.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from triage.cli import main

pytestmark = pytest.mark.model

PACK_TOML = """\
[[criterion]]
id = "mood"
question = "Is the customer happy?"
options = [{ id = "unhappy", label = "Unhappy" }, { id = "happy", label = "Happy" }]
"""

DEV = [
    {"id": "d1", "text": "Lost my bag again. Worst airline ever.", "labels": {"mood": "unhappy"}},
    {"id": "d2", "text": "Thank you, the crew was wonderful!", "labels": {"mood": "happy"}},
]
TRAIN = [
    {"id": "t1", "text": "Great flight, thanks!", "labels": {"mood": "happy"}},
    {"id": "t2", "text": "You cancelled my flight and kept my money.", "labels": {"mood": "unhappy"}},
]


VARIANTS = {
    "letter": {"raw", "cyclic", "cyclic+prior", "calibrated", "raw+calibrated"},
    "label": {
        "raw",
        "raw+prior",
        "calibrated",
        "learned",
    },  # one readout per criterion: no rotations to combine; a learned head
}


@pytest.mark.parametrize("readout", ["label", "letter"])
def test_eval_and_calibrate_end_to_end(
    smollm2_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], readout: str
) -> None:
    pack = tmp_path / "criteria.toml"
    pack.write_text(PACK_TOML, encoding="utf-8")
    dev = tmp_path / "dev.jsonl"
    dev.write_text("\n".join([json.dumps(r) for r in DEV] + ['"not an object"']) + "\n", encoding="utf-8")
    train = tmp_path / "train.jsonl"
    train.write_text("\n".join(json.dumps(r) for r in TRAIN) + "\n", encoding="utf-8")
    out_json, cal_json = tmp_path / "out.json", tmp_path / "cal.json"
    model = ["--model", str(smollm2_path), "--n-ctx", "512", "--pack", str(pack), "--readout", readout]
    args = ["eval", str(dev), "--train", str(train), *model, "--min-per-option", "1", "--json", str(out_json)]

    assert main(args) == 0
    err = capsys.readouterr().err
    assert "line 3: expected a JSON object" in err and "1 row(s)" in err  # the bad row is named and counted
    assert "0 hit(s), 5 scored" in err  # 2 dev + 2 train + the content-free prior
    report = json.loads(out_json.read_text())
    assert report["schema"] == "triage.eval/1" and report["tickets"]["skipped"] == 1
    crit = report["criteria"][0]
    assert crit["n"] == 2
    assert report["readout"] == readout and report["prompt_format"].endswith("/" + readout)
    assert set(crit["variants"]) == VARIANTS[readout]
    for v in crit["variants"].values():
        for key in ("accuracy", "balanced_accuracy", "macro_f1", "ece", "brier", "flip_rate", "coverage", "confusion"):
            assert key in v
        assert sum(map(sum, v["confusion"])) == 2
    if crit["baseline"] is not None:  # scikit-learn is the optional `eval` extra
        assert {"accuracy", "balanced_accuracy", "macro_f1"} <= set(crit["baseline"])
    if readout == "label":  # one label per option: the head is fitted without cross-validation, and says so
        assert crit["learned"]["c"] > 0 and "not cross-validated" in crit["learned"]["warnings"][0]
        assert [p["n"] for p in crit["learning_curve"]] == [2]  # every default size is past the 2 training rows

    # A second run scores nothing: every readout comes from the cache.
    assert main(args) == 0
    assert "5 hit(s), 0 scored" in capsys.readouterr().err

    # calibrate refuses a criterion with too few labels per option, by name...
    assert main(["calibrate", str(train), *model, "-o", str(cal_json)]) == 2
    err = capsys.readouterr().err
    assert "criterion 'mood' has too few labels to fit: unhappy has 1, happy has 1 (need at least 5 per option)" in err
    assert not cal_json.exists()

    # ...fits when allowed, from the cached readouts, and stores the file for auto-apply.
    assert main(["calibrate", str(train), *model, "--min-per-option", "1", "-o", str(cal_json)]) == 0
    out = capsys.readouterr()
    assert "3 hit(s), 0 scored" in out.err and "stored" in out.out
    cal = json.loads(cal_json.read_text())
    assert cal["schema"] == "triage.calibration/1" and "mood" in cal["criteria"]
    from triage.learning.fitstore import find_calibration

    assert find_calibration(cal["model_sha256"], cal["pack_hash"], cal["prompt_format"]) is not None

    # eval without --train applies the stored calibration automatically...
    assert main(["eval", str(dev), *model, "--no-baseline", "--json", str(out_json)]) == 0
    assert "applying calibration" in capsys.readouterr().err
    assert "calibrated" in json.loads(out_json.read_text())["criteria"][0]["variants"]

    # ...and refuses a file fitted for another prompt format, saying what differs.
    assert main(["eval", str(dev), *model, "--prompt", "plain", "--calibration", str(cal_json)]) == 2
    assert "fitted for another setup: prompt format" in capsys.readouterr().err
