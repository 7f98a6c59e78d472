"""Exports through the commands, with the real smollm2-135m: the three export shapes of the helpdesk set give
the JSONL path's numbers on the same rows; pack init -> learn --holdout -> eval runs on an export; learn
resumes from the readout cache; score reads a CSV export.

The sample is the first rows of ../shared/datasets/helpdesk whose text has no literal ``<br>``: in the
Jira and Zendesk shapes such a row is plain text that holds HTML, which becomes line breaks (the
Freshdesk shape escapes it, so it stays); the ticket would then differ from the JSONL row's.
"""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import pytest

from triage.cli import main
from triage.scoring.head import read_head
from triage.scoring.pack import load_pack

N_ROWS = 30
MODEL_ARGS = ["--n-ctx", "1024", "--threads", "2"]


def _exports_module() -> Any:
    path = Path(__file__).resolve().parents[1] / "bench" / "intake" / "exports.py"
    spec = importlib.util.spec_from_file_location("intake_exports", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def sample(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The sample as JSONL and as the three export shapes, and one TRIAGE_HOME shared by the module's runs."""
    ex = _exports_module()
    src = shared_dir / "datasets" / "helpdesk"
    if not (src / "tickets.jsonl").is_file():
        pytest.skip("the helpdesk set is not in ../shared/datasets")
    work = tmp_path_factory.mktemp("intake")
    rows = [r for r in ex.read_rows(src / "tickets.jsonl") if "<br" not in r["text"]][:N_ROWS]
    jsonl = work / "sample.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    pack = load_pack(src / "criteria.toml")
    files = {shape: write(rows, pack, work / name) for shape, (write, name) in ex.WRITERS.items()}
    flags = {shape: ex.mapping_flags(shape, pack) for shape in ex.WRITERS}
    return {
        "work": work,
        "jsonl": jsonl,
        "pack": src / "criteria.toml",
        "files": files,
        "flags": flags,
        "home": tmp_path_factory.mktemp("intake-home"),
        "ids": [r["id"] for r in rows],
    }


def _learn(sample: dict[str, Any], model: Path, data: Path, flags: list[str], out: Path, *extra: str) -> dict[str, Any]:
    code = main(
        [
            "learn",
            str(data),
            "--model",
            str(model),
            *MODEL_ARGS,
            "--pack",
            str(sample["pack"]),
            *flags,
            "--holdout",
            "0.3",
            "--min-per-option",
            "2",
            "-o",
            str(out),
            "--no-store",
            *extra,
        ]
    )
    assert code == 0
    return read_head(out).report


@pytest.mark.model
@pytest.mark.slow
def test_three_export_shapes_give_the_jsonl_numbers(
    sample: dict[str, Any], smollm2_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TRIAGE_HOME", str(sample["home"]))
    work = sample["work"]
    want = _learn(sample, smollm2_path, sample["jsonl"], [], work / "jsonl.npz")["holdout"]
    assert {"queue", "priority", "type"} & set(want)
    main(
        [
            "eval",
            str(sample["jsonl"]),
            "--model",
            str(smollm2_path),
            *MODEL_ARGS,
            "--pack",
            str(sample["pack"]),
            "--split",
            "0.7",
            "--curve",
            "none",
            "--json",
            str(work / "jsonl.json"),
        ]
    )
    want_eval = json.loads((work / "jsonl.json").read_text(encoding="utf-8"))["criteria"]
    capsys.readouterr()
    for shape, path in sample["files"].items():
        got = _learn(sample, smollm2_path, path, sample["flags"][shape], work / f"{shape}.npz")["holdout"]
        for cid, entry in want.items():
            if cid == "fraction":
                continue
            for variant in ("learned", "zero-shot", "tfidf"):
                assert got[cid][variant].get("balanced_accuracy") == entry[variant].get("balanced_accuracy"), (
                    shape,
                    cid,
                    variant,
                )
            assert got[cid]["n"] == entry["n"]
        out = work / f"{shape}.json"
        assert (
            main(
                [
                    "eval",
                    str(path),
                    "--model",
                    str(smollm2_path),
                    *MODEL_ARGS,
                    "--pack",
                    str(sample["pack"]),
                    *sample["flags"][shape],
                    "--split",
                    "0.7",
                    "--curve",
                    "none",
                    "--json",
                    str(out),
                ]
            )
            == 0
        )
        got_eval = json.loads(out.read_text(encoding="utf-8"))["criteria"]
        assert _bacc(got_eval) == _bacc(want_eval), shape
    said = capsys.readouterr()
    assert "not UTF-8" in said.err and "Windows-1252" in said.err  # the Jira shape, said in one line


def _bacc(criteria: Any) -> dict[str, dict[str, float]]:
    items = criteria.items() if isinstance(criteria, dict) else ((c["id"], c) for c in criteria)
    return {cid: {v: m.get("balanced_accuracy") for v, m in c["variants"].items()} for cid, c in items}


@pytest.mark.model
@pytest.mark.slow
def test_pack_init_then_learn_holdout_then_eval_on_an_export(
    sample: dict[str, Any], smollm2_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export = sample["files"]["freshdesk"]
    team = tmp_path / "team.toml"
    labels = "queue=Group,priority=Priority,type=Type"
    assert (
        main(
            [
                "pack",
                "init",
                str(export),
                "--text",
                "Subject,Description",
                "--id",
                "Ticket ID",
                "--criteria",
                labels,
                "--min-count",
                "2",
                "-o",
                str(team),
            ]
        )
        == 0
    )
    said = capsys.readouterr().out
    next_cmd = re.search(r"^next: triage learn (.*)$", said, re.M)
    assert next_cmd is not None and "--holdout 0.3" in next_cmd.group(1)
    flags = [
        "--text",
        "Subject,Description",
        "--id",
        "Ticket ID",
        "--label",
        "queue=Group",
        "--label",
        "priority=Priority",
        "--label",
        "type=Type",
    ]
    head = tmp_path / "team.npz"
    assert (
        main(
            [
                "learn",
                str(export),
                "--model",
                str(smollm2_path),
                *MODEL_ARGS,
                "--pack",
                str(team),
                *flags,
                "--holdout",
                "0.3",
                "--min-per-option",
                "2",
                "-o",
                str(head),
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    assert "held out 0.3 of the rows by id hash (as eval --split 0.7)" in out
    learned = read_head(head)
    for cid in learned.criteria:
        assert f"{cid}: held-out n=" in out and f"{cid}: learned head, held-out rows" in out
        assert {"learned", "zero-shot", "tfidf"} <= set(learned.report["holdout"][cid])
    # eval applies the stored head (learn stored it for this model, pack and prompt format)
    assert (
        main(
            [
                "eval",
                str(export),
                "--model",
                str(smollm2_path),
                *MODEL_ARGS,
                "--pack",
                str(team),
                *flags,
                "--curve",
                "none",
            ]
        )
        == 0
    )
    assert "evaluating learned head 'team.npz'" in capsys.readouterr().err


@pytest.mark.model
def test_learn_resumes_from_the_readout_cache(
    sample: dict[str, Any], smollm2_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A stopped run keeps what it scored (each ticket is committed to the cache as it is scored)."""
    data, pack = sample["files"]["zendesk"], load_pack(sample["pack"])
    flags = sample["flags"]["zendesk"]
    common = [
        "learn",
        str(data),
        "--model",
        str(smollm2_path),
        *MODEL_ARGS,
        "--pack",
        str(sample["pack"]),
        *flags,
        "--min-per-option",
        "2",
        "--no-store",
        "-o",
        str(tmp_path / "h.npz"),
        "--criteria",
        "priority",
    ]
    main(common + ["--limit", "4"])  # may refuse to learn from 4 rows; what matters is what it cached
    capsys.readouterr()
    main(common + ["--limit", "8"])
    err = capsys.readouterr().err
    assert pack.name and re.search(r"cache: 5 hit\(s\), 4 scored", err), err


@pytest.mark.model
def test_score_reads_a_csv_export_with_text_columns(
    sample: dict[str, Any], smollm2_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    export = tmp_path / "few.csv"
    lines = sample["files"]["freshdesk"].read_text(encoding="utf-8").splitlines(keepends=True)
    import csv
    import io

    rows = list(csv.reader(io.StringIO("".join(lines))))[:3]
    with export.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(rows)
    code = main(
        [
            "score",
            str(export),
            "--model",
            str(smollm2_path),
            "--n-ctx",
            "1024",
            "--pack",
            str(sample["pack"]),
            "--text-columns",
            "Subject,Description",
            "--id-column",
            "Ticket ID",
            "--format",
            "jsonl",
            "--criteria",
            "priority",
        ]
    )
    assert code == 0
    records = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert [r["ticket_id"] for r in records] == [r[0] for r in rows[1:]]
    assert all(r["criteria"][0]["id"] == "priority" for r in records)


def test_learn_checks_holdout_and_per_option_before_loading_a_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "x.csv"
    f.write_text("id,text,mood\n1,a,good\n", encoding="utf-8")
    assert main(["learn", str(f), "--holdout", "1.5", "--model", str(tmp_path / "none.gguf")]) == 2
    assert "--holdout wants a share between 0 and 1, got 1.5" in capsys.readouterr().err
    assert main(["learn", str(f), "--per-option", "0", "--model", str(tmp_path / "none.gguf")]) == 2
    assert "--per-option must be at least 1" in capsys.readouterr().err
    assert main(["eval", str(f), "--text", "body", "--model", str(tmp_path / "none.gguf")]) == 2
    assert "has no column 'body' (given by --text); its columns are 'id', 'text', 'mood'" in capsys.readouterr().err
