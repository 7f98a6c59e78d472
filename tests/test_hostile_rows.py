"""Classes 3 and 6 of the hardening issue (23): one bad row must not stop the run, and
nothing is scored silently wrong.

Every case runs ``triage`` in a subprocess with the small model (one thread) and reads its
output as bytes: the output must be valid UTF-8 whatever the input held.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import MINI_PACK, TRACEBACK


def run(args: list[str], home: Path, *, stdin: bytes = b"", timeout: float = 300) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "TRIAGE_HOME": str(home), "COLUMNS": "200"}
    env.pop("TRIAGE_MODEL", None)
    return subprocess.run(
        [sys.executable, "-m", "triage.cli", *args],
        input=stdin,
        capture_output=True,
        env=env,
        timeout=timeout,
        check=False,
    )


def text(proc: subprocess.CompletedProcess[bytes]) -> tuple[str, str]:
    """stdout and stderr, decoded strictly: an invalid UTF-8 byte fails the test here."""
    out, err = proc.stdout.decode("utf-8"), proc.stderr.decode("utf-8")
    assert TRACEBACK not in out and TRACEBACK not in err, err[-3000:]
    assert proc.returncode >= 0 and proc.returncode != 134, err[-1000:]
    return out, err


@pytest.fixture()
def pack(mini_pack: Path) -> Path:
    return mini_pack


def score(home: Path, model: Path, pack: Path, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    return run(["score", *args, "--model", str(model), "--threads", "1", "--pack", str(pack)], home, stdin=stdin)


def records(out: str) -> list[dict]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


# -- class 3: one bad row ---------------------------------------------------------------------


@pytest.mark.model
def test_a_lone_surrogate_in_a_text_is_that_rows_error_and_in_an_id_is_replaced(
    smollm2_path: Path, triage_home: Path, pack: Path, tmp_path: Path
) -> None:
    """Issue 42: a text that cannot be encoded is never scored as if it were whole: that row's error, naming the
    surrogate and where it is; the rows around it are scored. An id's surrogate is shown replaced."""
    lines = [
        '{"id": "ok-1", "text": "Where is my parcel?"}',
        '{"id": "sur-text", "text": "I am angry \\ud800 about the \\udfff refund"}',
        '{"id": "sur-\\udc80-id", "text": "Thanks, all good."}',
        '{"id": "ok-2", "text": "Refund me now!"}',
    ]
    (tmp_path / "t.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    out, err = text(score(triage_home, smollm2_path, pack, str(tmp_path / "t.jsonl"), "--format", "jsonl"))
    recs = records(out)
    assert [r.get("id") or r.get("ticket_id") for r in recs] == ["ok-1", "sur-text", "sur-\ufffd-id", "ok-2"], out
    assert ["criteria" in r for r in recs] == [True, False, True, True], out
    assert recs[1]["line"] == 2 and "lone surrogate (\\ud800 at character 12)" in recs[1]["error"], out


@pytest.mark.model
def test_a_line_nested_deep_or_with_a_huge_number_is_that_lines_error(
    smollm2_path: Path, triage_home: Path, pack: Path, tmp_path: Path
) -> None:
    deep = '{"id": "deep", "text": "x", "meta": ' + "[" * 200_000 + "]" * 200_000 + "}"
    huge = '{"id": "huge", "text": "x", "n": ' + "7" * 5000 + "}"
    rows = ['{"id": "a", "text": "Where is my parcel?"}', deep, huge, '{"id": "b", "text": "Refund me now!"}']
    (tmp_path / "t.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    out, err = text(score(triage_home, smollm2_path, pack, str(tmp_path / "t.jsonl"), "--format", "jsonl"))
    recs = records(out)
    scored = [r for r in recs if "criteria" in r]
    errors = [r for r in recs if "error" in r]
    assert len(scored) == 2, out
    assert sorted(r["line"] for r in errors) == [2, 3], out
    assert "nested 200,001 levels deep" in err and "more than 4,300 digits" in err


@pytest.mark.model
def test_a_cr_only_jsonl_file_is_split_into_its_lines(
    smollm2_path: Path, triage_home: Path, pack: Path, tmp_path: Path
) -> None:
    rows = [
        '{"id": "a", "text": "Where is my parcel?"}',
        '{"id": "b", "text": "Refund me now!"}',
        '{"id": "c", "text": "Thanks!"}',
    ]
    (tmp_path / "mac.jsonl").write_bytes("\r".join(rows).encode() + b"\r")
    out, _err = text(score(triage_home, smollm2_path, pack, str(tmp_path / "mac.jsonl"), "--format", "jsonl"))
    assert [r["ticket_id"] for r in records(out)] == ["a", "b", "c"], out


def test_dev_zero_is_read_with_a_bound(triage_home: Path, pack: Path, smollm2_path: Path) -> None:
    proc = score(triage_home, smollm2_path, pack, "/dev/zero")
    _out, err = text(proc)
    assert proc.returncode == 2 and "larger than 256 MiB" in err, err


def test_unbounded_stdin_is_read_with_a_bound(triage_home: Path, pack: Path, smollm2_path: Path) -> None:
    with open("/dev/zero", "rb") as zero:
        env = {**os.environ, "TRIAGE_HOME": str(triage_home)}
        cmd = [sys.executable, "-m", "triage.cli", "score", "--model", str(smollm2_path), "--pack", str(pack)]
        proc = subprocess.run(cmd, stdin=zero, capture_output=True, env=env, timeout=300, check=False)
    _out, err = text(proc)
    assert proc.returncode == 2 and "standard input holds more than 256 MiB" in err, err


@pytest.mark.parametrize(
    ("name", "data", "says"),
    [
        ("export.txt", b"id,text,created\n1,Where is my parcel?,2024\n2,Refund me,2024\n3,Hi,2024\n", "is a CSV file"),
        ("tickets.parquet", b"PAR1" + b"\x00" * 64 + b"PAR1", "as Parquet"),  # a damaged one: named, not scored
        ("tickets.txt", "Where is my parcel?\nIt is late.\n".encode("utf-16"), "is UTF-16 text"),
        ("tickets.jsonl", '{"id": "a", "text": "Where is my parcel?"}\n'.encode("utf-16-le"), "is UTF-16 text"),
        ("tickets.xlsx", b"PK\x03\x04" + b"\x00" * 64, "zip archive"),
    ],
)
def test_files_that_are_not_tickets_get_a_message_that_names_their_format(
    triage_home: Path, pack: Path, smollm2_path: Path, tmp_path: Path, name: str, data: bytes, says: str
) -> None:
    (tmp_path / name).write_bytes(data)
    proc = score(triage_home, smollm2_path, pack, str(tmp_path / name))
    out, err = text(proc)
    assert proc.returncode == 2 and says in err, err
    assert "latin1" not in err and out == ""


@pytest.mark.model
def test_a_csv_export_with_a_text_column_is_scored_row_by_row(
    triage_home: Path, pack: Path, smollm2_path: Path, tmp_path: Path
) -> None:
    """Since exports are read (docs/teams.md), a CSV with a text column is tickets, one a row, not one ticket."""
    (tmp_path / "tickets.csv").write_bytes(b"id,text\n1,Where is my parcel?\n2,Refund me\n")
    proc = score(triage_home, smollm2_path, pack, str(tmp_path / "tickets.csv"))
    out, err = text(proc)
    assert proc.returncode == 0, err
    assert [json.loads(line)["ticket_id"] for line in out.splitlines()] == ["1", "2"]


@pytest.mark.model
def test_learn_goes_on_past_a_lone_surrogate(smollm2_path: Path, triage_home: Path, pack: Path, tmp_path: Path) -> None:
    rows = [{"id": f"r{i}", "text": f"{t} (#{i})", "labels": {"mood": m}} for i, (t, m) in enumerate(
        [("I am furious, refund me now", "angry"), ("Thanks, all good", "calm"), ("Third time I write!", "angry"),
         ("Lovely service", "calm"), ("Worst shop ever", "angry"), ("Fine, thank you", "calm")] * 2)]  # fmt: skip
    body = "".join(json.dumps(r) + "\n" for r in rows).replace("Lovely service", "Lovely \\ud800 service")
    (tmp_path / "labels.jsonl").write_text(body, encoding="utf-8")
    proc = run(["learn", str(tmp_path / "labels.jsonl"), "--model", str(smollm2_path), "--threads", "1",
                "--pack", str(pack), "--min-per-option", "2", "-o", str(tmp_path / "head.npz"), "--no-store"],
               triage_home)  # fmt: skip
    out, err = text(proc)
    assert proc.returncode == 0, err[-2000:]
    # issue 42: the surrogate's row is left out as `score` refuses it (a row's error, said), the rest learned
    assert "on the 10 training rows" in out and (tmp_path / "head.npz").is_file(), out
    assert "surrogate" in err, err[-2000:]


# -- class 6: silently wrong ----------------------------------------------------------------


@pytest.mark.parametrize("ticket", ["\u200b\u200b\u200b", " \u2800 \u3164 ", "\ufeff\u200d\n\u00a0", "\u0301\u0301"])
def test_a_ticket_with_no_visible_characters_is_refused(
    triage_home: Path, pack: Path, smollm2_path: Path, ticket: str
) -> None:
    proc = score(triage_home, smollm2_path, pack, stdin=ticket.encode("utf-8"))
    out, err = text(proc)
    assert proc.returncode == 2 and "no visible characters" in err, err
    assert out == ""


@pytest.mark.parametrize("oid", ["_", "-", "__", "- _"])
def test_an_option_id_that_normalises_to_nothing_is_refused_at_load(
    triage_home: Path, tmp_path: Path, smollm2_path: Path, oid: str
) -> None:
    (tmp_path / "p.toml").write_text(
        '[[criterion]]\nid = "c"\nquestion = "Which?"\n'
        f'options = [ {{ id = "yes", label = "Yes" }}, {{ id = "{oid}", label = "Other" }} ]\n',
        encoding="utf-8",
    )
    proc = score(triage_home, smollm2_path, tmp_path / "p.toml", stdin=b"Where is my parcel?")
    _out, err = text(proc)
    assert proc.returncode == 2 and "has no letters or digits" in err and f"option {oid!r}" in err, err


def test_an_option_id_of_punctuation_with_an_answer_is_fine(tmp_path: Path) -> None:
    from triage.domain.pack import load_pack

    (tmp_path / "p.toml").write_text(
        '[[criterion]]\nid = "c"\nquestion = "Which?"\n'
        'options = [ { id = "yes", label = "Yes" }, { id = "_", label = "Other", answer = "other" } ]\n',
        encoding="utf-8",
    )
    assert load_pack(tmp_path / "p.toml").criteria[0].options[1].answer_text == "other"


@pytest.mark.parametrize(
    ("value", "says"),
    [("1.10", "the number 1.1"), ("true", "true or false"), ("nan", "the number nan"), ("[1]", "list")],
)
def test_a_pack_version_that_toml_would_misread_is_refused(tmp_path: Path, value: str, says: str) -> None:
    from triage.domain.pack import PackError, load_pack

    criteria = MINI_PACK.replace('[pack]\nname = "mini"\n', "")
    (tmp_path / "p.toml").write_text(f"[pack]\nversion = {value}\n{criteria}", encoding="utf-8")
    with pytest.raises(PackError, match="field 'version' must be text") as info:
        load_pack(tmp_path / "p.toml")
    assert says in info.value.message and 'version = "1.10"' in (info.value.hint or "")
