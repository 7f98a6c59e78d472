"""Exports through the commands, with the real smollm2-135m: the three export shapes of the helpdesk set give
the JSONL path's numbers on the same rows; pack init -> learn --holdout -> eval runs on an export; learn
resumes from the readout cache; score reads a CSV export.

The samples are the first rows of ../shared/datasets/helpdesk (and of airline-sentiment and issue-kind)
whose ticket text comes back unchanged from every shape: in the Jira and Zendesk shapes a row that holds
HTML is plain text that becomes text (a literal ``<br>`` a line break); from the Freshdesk shape's HTML a
double space or an ``&amp;`` comes back otherwise; the Jira shape's Windows-1252 has no emoji. Such a
ticket is another ticket, and 20 training rows are few enough that one of them moves a head.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from conftest import load_module

from triage.cli import main
from triage.domain.pack import load_pack
from triage.learning.head_file import read_head

N_ROWS = 30
MODEL_ARGS = ["--n-ctx", "1024", "--threads", "1"]


def _exports_module() -> Any:
    return load_module(Path(__file__).resolve().parents[1] / "bench" / "intake" / "exports.py", "intake_exports")


def make_sample(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory, name: str) -> dict[str, Any]:
    """The first rows of a development set as JSONL and as the three export shapes, and one TRIAGE_HOME for
    the runs on it. Rows whose text holds HTML are left out: the Jira and Zendesk shapes turn it into text."""
    from triage.intake.html import looks_like_html

    ex = _exports_module()
    src = shared_dir / "datasets" / name
    if not (src / "tickets.jsonl").is_file():
        pytest.skip(f"the {name} set is not in ../shared/datasets")
    work = tmp_path_factory.mktemp(f"intake-{name}")
    pack = load_pack(src / "criteria.toml")
    flags = {shape: ex.mapping_flags(shape, pack) for shape in ex.WRITERS}
    candidates = [r for r in ex.read_rows(src / "tickets.jsonl") if not looks_like_html(r["text"])]
    same = _same_text_in_every_shape(ex, candidates, pack, flags, work / "candidates")
    rows = [r for r in candidates if r["id"] in same][:N_ROWS]
    jsonl = work / "sample.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    files = {shape: write(rows, pack, work / fname) for shape, (write, fname) in ex.WRITERS.items()}
    return {
        "name": name,
        "work": work,
        "rows": rows,
        "jsonl": jsonl,
        "pack": src / "criteria.toml",
        "files": files,
        "flags": flags,
        "home": tmp_path_factory.mktemp(f"intake-home-{name}"),
        "ids": [r["id"] for r in rows],
    }


def _same_text_in_every_shape(ex: Any, rows: list[dict[str, Any]], pack: Any, flags: dict, folder: Path) -> set[str]:
    """The ids of ``rows`` whose ticket text, read back from each shape by triage's reader, is the JSONL row's:
    a tweet with a double space or an ``&amp;`` comes back from the HTML of the Freshdesk shape otherwise, and a
    character Windows-1252 lacks comes back from the Jira shape as ``?``."""
    from triage.domain.ticket import make_ticket
    from triage.intake.columns import ColumnMap
    from triage.learning.labelled import read_labelled

    folder.mkdir()
    want = {r["id"]: make_ticket(r["text"], r["id"]).text for r in rows}
    same = set(want)
    for shape, (write, fname) in ex.WRITERS.items():
        f = flags[shape]
        back = read_labelled(
            write(rows, pack, folder / fname), pack, partial=True, columns=ColumnMap.parse(f[1], f[3], f[5::2])
        )
        got = {r.id: r.ticket.text for r in back.rows}
        same &= {i for i, t in want.items() if got.get(i) == t}
    return same


@pytest.fixture(scope="module")
def sample(shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The helpdesk sample (three criteria)."""
    return make_sample(shared_dir, tmp_path_factory, "helpdesk")


@pytest.fixture(scope="module", params=["airline-sentiment", "issue-kind"])
def other_sample(request: pytest.FixtureRequest, shared_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The other development sets' samples (one criterion each; issue-kind's tickets are long)."""
    return make_sample(shared_dir, tmp_path_factory, request.param)


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
    want = _shapes_match_jsonl(sample, smollm2_path, monkeypatch, capsys)
    assert {"queue", "priority", "type"} <= set(want)
    said = capsys.readouterr()
    assert "not UTF-8" in said.err and "Windows-1252" in said.err  # the Jira shape, said in one line


@pytest.mark.model
@pytest.mark.slow
def test_three_export_shapes_of_the_other_sets_give_the_jsonl_numbers(
    other_sample: dict[str, Any],
    smollm2_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    crit = load_pack(other_sample["pack"]).criteria[0].id
    want = _shapes_match_jsonl(other_sample, smollm2_path, monkeypatch, capsys)
    assert crit in want and want[crit]["n"] > 0


def _shapes_match_jsonl(
    sample: dict[str, Any], model: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> dict[str, Any]:
    """learn --holdout 0.3 and eval --split 0.7 on each export shape give the JSONL rows' figures exactly;
    returns the JSONL run's held-out figures."""
    monkeypatch.setenv("TRIAGE_HOME", str(sample["home"]))
    work = sample["work"]
    # --force: keep a head that cross-validates below zero-shot (a one-criterion set would have none)
    want = _learn(sample, model, sample["jsonl"], [], work / "jsonl.npz", "--force")["holdout"]
    main(
        [
            "eval",
            str(sample["jsonl"]),
            "--model",
            str(model),
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
        got = _learn(sample, model, path, sample["flags"][shape], work / f"{shape}.npz", "--force")["holdout"]
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
                    str(model),
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
    return {cid: e for cid, e in want.items() if cid != "fraction"}


@pytest.mark.model
@pytest.mark.slow
@pytest.mark.parametrize("other_sample", ["airline-sentiment"], indirect=True)  # issue-kind's took 98 s here
def test_pack_init_on_each_shape_learns_what_the_jsonl_path_learns_with_that_pack(
    other_sample: dict[str, Any],
    smollm2_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """pack init -> learn --holdout 0.3 -> eval on each shape; the same rows as triage's JSONL (labels written
    as the written pack's option ids) learn the same held-out figures with that pack."""
    from triage.intake.values import OptionMatcher

    monkeypatch.setenv("TRIAGE_HOME", str(other_sample["home"]))
    hand = load_pack(other_sample["pack"])
    work = other_sample["work"]
    for shape, path in other_sample["files"].items():
        flags = other_sample["flags"][shape]
        cols = ",".join(flags[5::2])  # the --label values: CRITERION=COL
        team = work / f"{shape}-team.toml"
        argv = ["pack", "init", str(path), *flags[:4], "--criteria", cols, "--min-count", "2", "-o", str(team)]
        assert main([*argv, "--force"]) == 0
        pack = load_pack(team)
        match = {c.id: OptionMatcher(c) for c in pack.criteria}
        mapped = []
        for r in other_sample["rows"]:
            labels = {}
            for cid, gold in r["labels"].items():
                value = {"freshdesk": hand.criterion(cid).option(gold).label, "jira": gold.upper()}.get(shape, gold)
                labels[cid] = match[cid].match(value)
            assert None not in labels.values(), (shape, r["labels"])  # every value the export holds maps
            mapped.append({"id": r["id"], "text": r["text"], "labels": labels})
        jsonl = work / f"{shape}-team.jsonl"
        jsonl.write_text("".join(json.dumps(m) + "\n" for m in mapped), encoding="utf-8")
        team_sample = {**other_sample, "pack": team}
        got = _learn(team_sample, smollm2_path, path, flags, work / f"{shape}-team.npz", "--force")["holdout"]
        want = _learn(team_sample, smollm2_path, jsonl, [], work / f"{shape}-team-jsonl.npz", "--force")["holdout"]
        # balanced accuracy and n: a text the shape changed (a character Windows-1252 lacks) moves ECE's digits
        assert _holdout_bacc(got) == _holdout_bacc(want) and _holdout_bacc(want), shape
        out = work / f"{shape}-team-eval.json"
        argv = ["eval", str(path), "--model", str(smollm2_path), *MODEL_ARGS, "--pack", str(team), *flags]
        assert main([*argv, "--split", "0.7", "--curve", "none", "--json", str(out)]) == 0
        [crit] = json.loads(out.read_text(encoding="utf-8"))["criteria"]
        # eval's dev rows are learn's held-out rows: the same n and the same zero-shot figure
        # (its own learned variant may be refused: eval leaves a criterion with a rare option unlearned)
        zero = want[crit["id"]]["zero-shot"]["balanced_accuracy"]
        assert (crit["n"], crit["variants"]["raw"]["balanced_accuracy"]) == (want[crit["id"]]["n"], zero), shape
    capsys.readouterr()


def _holdout_bacc(holdout: dict[str, Any]) -> dict[str, Any]:
    """Per criterion of a head's ``holdout`` report: n and each variant's balanced accuracy."""
    return {
        c: {"n": e["n"]} | {v: m.get("balanced_accuracy") for v, m in e.items() if isinstance(m, dict)}
        for c, e in holdout.items()
        if c != "fraction"
    }


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
        "--force",  # the first run may have written -o
    ]
    main(common + ["--limit", "4"])  # may refuse to learn from 4 rows; what matters is what it cached
    capsys.readouterr()
    main(common + ["--limit", "8"])
    err = capsys.readouterr().err
    assert pack.name and re.search(r"cache: 4 hit\(s\), 4 scored", err), err  # learn asks no content-free prior


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
