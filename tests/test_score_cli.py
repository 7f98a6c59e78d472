"""`triage score` end to end: the schema on stdout, and a specific error for each bad input."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from triage.cli import main

PACK = """
[pack]
name = "mini"
[[criterion]]
id = "mood"
question = "Is the customer angry?"
options = [ { id = "angry", label = "Angry" }, { id = "calm", label = "Calm" } ]
[[criterion]]
id = "topic"
question = "What is the ticket about?"
options = [ { id = "billing", label = "Billing" }, { id = "delivery", label = "Delivery" },
            { id = "other", label = "Other" } ]
"""


@pytest.fixture()
def pack(tmp_path: Path) -> Path:
    p = tmp_path / "mini.toml"
    p.write_text(PACK, encoding="utf-8")
    return p


def run(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], args: list[str], stdin: bytes | None = None
) -> tuple[int, str, str]:
    if stdin is not None:
        fake = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
        monkeypatch.setattr(sys, "stdin", fake)
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_one_ticket_from_stdin(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], smollm2_path: Path, pack: Path
) -> None:
    code, out, err = run(
        monkeypatch,
        capsys,
        ["score", "--model", str(smollm2_path), "--pack", str(pack), "--format", "json"],
        b"I was charged twice, refund me now",
    )
    assert code == 0, err
    d = json.loads(out)
    assert d["schema"] == "triage.result/3"
    assert d["model"]["path"] == str(smollm2_path) and len(d["model"]["sha256"]) == 64
    assert d["pack"]["name"] == "mini" and len(d["pack"]["hash"]) == 16
    assert [c["id"] for c in d["criteria"]] == ["mood", "topic"]
    for c in d["criteria"]:
        assert abs(sum(o["probability"] for o in c["options"]) - 1) < 1e-6
        assert {"id", "choice", "options", "tail_tokens", "tail_ms", "coverage"} <= set(c)
    assert {"prefill_ms", "total_ms"} <= set(d["timing"])
    assert {"prefix", "prefix_cached"} <= set(d["tokens"])
    assert isinstance(d["warnings"], list)


def test_jsonl_bad_line_is_reported_and_others_scored(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], smollm2_path: Path, pack: Path, tmp_path: Path
) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text(
        '{"id": "a", "text": "Where is my parcel?"}\n[1, 2]\n{"id": '
        '"c", "text": "   "}\n{"id": "d", "text": "Refund!"}\nnot json\n',
        encoding="utf-8",
    )
    code, out, err = run(
        monkeypatch,
        capsys,
        [
            "score",
            str(f),
            "--model",
            str(smollm2_path),
            "--pack",
            str(pack),
            "--format",
            "jsonl",
        ],
    )
    assert code == 1
    records = [json.loads(line) for line in out.splitlines()]
    assert [r.get("ticket_id") for r in records] == ["a", None, "c", "d", None]
    assert "schema" in records[0] and "schema" in records[3]
    assert "expected a JSON object" in records[1]["error"] and records[1]["line"] == 2
    assert "empty" in records[2]["error"]
    assert "not valid JSON" in records[4]["error"]
    assert "line 2" in err and "line 5" in err


@pytest.mark.parametrize(
    ("stdin", "expected"),
    [
        (b"", "empty"),
        (b"   \n\t  ", "empty"),
        (b"caf\xe9 au lait", "not valid UTF-8"),
    ],
)
def test_bad_single_ticket(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], pack: Path, stdin: bytes, expected: str
) -> None:
    code, out, err = run(monkeypatch, capsys, ["score", "--pack", str(pack)], stdin)
    assert code == 2 and out == ""
    assert expected in err and "Traceback" not in err


def test_missing_pack(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = run(monkeypatch, capsys, ["score", "--pack", str(tmp_path / "nope.toml")], b"hello")
    assert code == 2 and "pack file" in err and "does not exist" in err


def test_missing_ticket_file(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    code, _, err = run(monkeypatch, capsys, ["score", str(tmp_path / "none.txt")])
    assert code == 2 and "does not exist" in err


def test_no_model_installed(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], pack: Path) -> None:
    code, _, err = run(monkeypatch, capsys, ["score", "--pack", str(pack)], b"hello")
    assert code != 0 and "triage model pull" in err and "Traceback" not in err


def write_cal(
    path: Path, *, sha: str, pack_hash: str, fmt: str = "triage-prompt/2:chat", orderings: str = "cyclic"
) -> Path:
    from triage.scoring.calibrate import Calibration, CriterionCalibration, write_calibration

    cal = Calibration(
        sha, pack_hash, fmt, orderings, False, {"mood": CriterionCalibration(0.5, {"angry": 2.0, "calm": 0.0})}
    )
    return write_calibration(cal, path)


def test_stored_calibration_is_applied_and_a_mismatch_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], smollm2_path: Path, pack: Path, tmp_path: Path
) -> None:
    from triage.domain.pack import load_pack
    from triage.learning.fitstore import calibrations_dir, stored_name
    from triage.model.resolve import cached_sha256

    sha, pack_hash = cached_sha256(smollm2_path), load_pack(pack).hash
    base = ["score", "--model", str(smollm2_path), "--pack", str(pack), "--format", "json"]
    code, out, _ = run(monkeypatch, capsys, [*base, "--no-calibration"], b"Refund me now")
    plain = json.loads(out)
    calibrations_dir().mkdir(parents=True, exist_ok=True)
    # Fitted on orderings=none for this model, pack and prompt format: applied automatically.
    write_cal(
        calibrations_dir() / stored_name(sha, pack_hash, plain["prompt_format"]),
        sha=sha,
        pack_hash=pack_hash,
        fmt=plain["prompt_format"],
        orderings="none",
    )
    code, out, err = run(monkeypatch, capsys, base, b"Refund me now")
    cal = json.loads(out)
    assert code == 0 and "applying calibration" in err and cal["calibration"]
    p0 = next(c for c in plain["criteria"] if c["id"] == "mood")["options"][0]["probability"]
    p1 = next(c for c in cal["criteria"] if c["id"] == "mood")["options"][0]["probability"]
    assert p1 > p0  # the fitted bias toward "angry" took effect
    # A file for another model is refused, naming what differs.
    other = write_cal(
        tmp_path / "other.json", sha="0" * 64, pack_hash=pack_hash, fmt=plain["prompt_format"], orderings="none"
    )
    code, out, err = run(monkeypatch, capsys, [*base, "--calibration", str(other)], b"Refund me now")
    assert code == 2 and out == "" and "model sha256" in err and "fitted for another setup" in err


def test_criteria_subset(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], smollm2_path: Path, pack: Path
) -> None:
    base = ["score", "--model", str(smollm2_path), "--pack", str(pack), "--format", "json", "--no-calibration"]
    ticket = b"My parcel never came and nobody answers"
    code, out, err = run(monkeypatch, capsys, base, ticket)
    assert code == 0, err
    whole = json.loads(out)
    code, out, err = run(monkeypatch, capsys, [*base, "--criteria", " topic, topic,"], ticket)
    assert code == 0, err
    only = json.loads(out)
    assert [c["id"] for c in only["criteria"]] == ["topic"]
    assert only["criteria"][0]["options"] == whole["criteria"][1]["options"]  # the same numbers as a whole-pack run


@pytest.mark.parametrize(("arg", "expected"), [("colour", "has no criterion 'colour'"), (" , ", "names no criteria")])
def test_criteria_unknown_or_empty(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], pack: Path, arg: str, expected: str
) -> None:
    code, _, err = run(
        monkeypatch, capsys, ["score", "--model", "/nonexistent.gguf", "--pack", str(pack), "--criteria", arg], b"hello"
    )
    assert code != 0 and expected in err and "mood, topic" in err  # before any model is loaded


def test_jsonl_input_streams_records_and_json_is_a_closed_array(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], smollm2_path: Path, pack: Path, tmp_path: Path
) -> None:
    f = tmp_path / "t.jsonl"
    f.write_text('{"id": "a", "text": "Where is my parcel?"}\n{"id": "b", "text": "Refund!"}\n', encoding="utf-8")
    base = ["score", str(f), "--model", str(smollm2_path), "--pack", str(pack), "--threads", "1"]
    code, out, err = run(monkeypatch, capsys, base, None)  # stdout is not a terminal: jsonl for JSONL input
    assert code == 0, err
    assert [json.loads(line)["ticket_id"] for line in out.splitlines()] == ["a", "b"]
    code, out, err = run(monkeypatch, capsys, [*base, "--format", "json"], None)
    assert code == 0, err
    assert [r["ticket_id"] for r in json.loads(out)] == ["a", "b"]
    code, out, err = run(
        monkeypatch,
        capsys,
        ["score", "--model", str(smollm2_path), "--pack", str(pack), "--threads", "1"],
        b"Refund!",
    )
    assert code == 0 and json.loads(out)["schema"] == "triage.result/3"  # one plain-text ticket: one object


def test_the_table_says_shared_for_a_criterion_read_in_a_shared_decode() -> None:
    """A criterion read at the shared position has no tail of its own: ``shared``, never ``0 ms · 0 tok``."""
    import io

    from fake_engine import FakeEngine
    from rich.console import Console

    from triage.domain.pack import default_pack
    from triage.render import print_table

    result = FakeEngine().score_ticket("The app crashes on start.", default_pack())
    for c in result.criteria[1:]:
        c.readout, c.tail_ms, c.tail_tokens = "shared", 0.0, 0
    out = io.StringIO()
    print_table(result, Console(file=out, width=200))
    text = out.getvalue()
    assert "0 ms · 0 tok" not in text
    assert text.count("shared") == len(result.criteria) - 1
    first = result.criteria[0]
    assert f"{first.tail_ms:.0f} ms · {first.tail_tokens} tok" in text
