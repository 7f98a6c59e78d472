"""`triage score --ray`: a backlog on a local Ray cluster scores as `triage score` does, once per ticket.

The Ray tests share one local cluster (``ray.init(num_cpus=2)``: 2 workers × 1 thread,
so llama.cpp's spinning threads never outnumber the cores) and the real small model.
The row, output and resume logic is also tested without Ray or a model.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from triage.backlog.output import RunSignature, open_writer, read_existing, run_file
from triage.backlog.rows import read_rows, record_key
from triage.cli import build_parser, main
from triage.scoring.engine import ScoreOptions

DATA = Path(__file__).parent / "data" / "backlog-30.jsonl"
PACK = """
[pack]
name = "mini"
[[criterion]]
id = "mood"
question = "Is the customer angry?"
options = [ { id = "angry", label = "Angry" }, { id = "calm", label = "Calm" } ]
[[criterion]]
id = "topic"
question = "What is the complaint about?"
options = [ { id = "billing", label = "Billing" }, { id = "credit", label = "Credit report" },
            { id = "other", label = "Other" } ]
"""
# The options of every Ray run here and of the plain run it is compared with.
OPTIONS = ["--threads", "1"]


@pytest.fixture()
def pack(tmp_path: Path) -> Path:
    p = tmp_path / "mini.toml"
    p.write_text(PACK, encoding="utf-8")
    return p


def tickets() -> list[dict[str, Any]]:
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]


def results(records: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Results by ticket id, failing if any ticket is there twice."""
    ids = [r["ticket_id"] for r in records if "schema" in r]
    assert len(ids) == len(set(ids)), f"tickets written twice: {sorted({i for i in ids if ids.count(i) > 1})}"
    return {r["ticket_id"]: r for r in records if "schema" in r}


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def signature(**options: Any) -> RunSignature:
    return RunSignature.of("a" * 64, "p" * 16, "triage-prompt/2:chat", ScoreOptions(**options), None)


# -- without Ray --------------------------------------------------------------------------


def test_rows_from_a_folder_of_jsonl_and_parquet(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.jsonl").write_text(
        '{"id": "t1", "text": "Refund me"}\n{"text": "no id here"}\nnot json\n{"id": "t1", "text": "Refund me"}\n',
        encoding="utf-8",
    )
    pq.write_table(pa.table({"id": ["p1", None], "text": ["Where is my card?", None]}), folder / "b.parquet")
    rows = read_rows(str(folder))
    assert [(r.ticket_id, r.line, r.source) for r in rows] == [
        ("t1", 1, "a.jsonl"),
        ("a.jsonl:line-2", 2, "a.jsonl"),
        (None, 3, "a.jsonl"),
        ("p1", 1, "b.parquet"),
        ("b.parquet:row-2", 2, "b.parquet"),
    ]
    assert rows[2].error == "a.jsonl line 3: not valid JSON (Expecting value at column 1)"
    assert "field 'text' is missing" in (rows[4].error or "")
    assert len({r.key for r in rows}) == len(rows)  # the repeated t1 row is one ticket
    # One file: the same ids and messages as `triage score`.
    single = read_rows(str(folder / "a.jsonl"))
    assert [r.ticket_id for r in single] == ["t1", "line-2", None] and single[
        2
    ].error == "line 3: not valid JSON (Expecting value at column 1)"


def test_resume_refuses_an_output_scored_differently(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    writer = open_writer(out, signature(criteria=("topic",)), resume=False)
    writer.write([("k", {"ticket_id": None, "line": 3, "error": "line 3: not valid JSON"})])
    writer.close()
    assert read_existing(out, signature(criteria=("topic",))).keys == {record_key({"line": 3, "error": "x"})}
    with pytest.raises(Exception, match=r"option criteria: \['topic'\] → \['mood'\]"):
        read_existing(out, signature(criteria=("mood",)))
    with pytest.raises(Exception, match="already exists"):
        open_writer(out, signature(), resume=False)


def test_resume_accepts_a_run_from_before_the_strategy_option_left(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    writer = open_writer(out, signature(), resume=False)
    writer.write([("k", {"ticket_id": None, "line": 3, "error": "line 3: not valid JSON"})])
    writer.close()
    run = run_file(out)
    old = json.loads(run.read_text(encoding="utf-8"))
    for strategy, same in (("truncate", True), ("restore", False)):  # every earlier run truncated, unless told
        run.write_text(json.dumps({**old, "options": {**old["options"], "strategy": strategy}}), encoding="utf-8")
        if same:
            assert read_existing(out, signature()).keys == {record_key({"line": 3, "error": "x"})}
        else:
            with pytest.raises(Exception, match="option strategy: 'restore' → None"):
                read_existing(out, signature())
    # A run from before the lab's options left ScoreOptions held the product's values: the same run.
    lab = {"mode": "fanout", "orderings": "cyclic", "prior": False, "readout": "label"}
    run.write_text(json.dumps({**old, "options": {**old["options"], **lab}}), encoding="utf-8")
    assert read_existing(out, signature()).keys == {record_key({"line": 3, "error": "x"})}
    run.write_text(json.dumps({**old, "options": {**old["options"], **lab, "readout": "letter"}}), encoding="utf-8")
    with pytest.raises(Exception, match="option readout: 'letter' → None"):
        read_existing(out, signature())


def test_the_command_line_becomes_a_plain_job_checked_before_any_cluster(pack: Path, tmp_path: Path) -> None:
    from triage.backlog.ray_score import RayJob
    from triage.commands.score import ray_job
    from triage.errors import InputError
    from triage.learning.fit import FitRequest, starter_on

    src = tmp_path / "in.jsonl"
    src.write_text(DATA.read_text(encoding="utf-8"), encoding="utf-8")
    args = build_parser().parse_args(
        [
            "score",
            "--ray",
            str(src),
            "--pack",
            str(pack),
            "--criteria",
            "topic",
            "--no-head",
            "--workers",
            "3",
            "-o",
            str(tmp_path / "o.jsonl"),
        ]
    )
    job = ray_job(args, config={})
    assert isinstance(job, RayJob) and (job.address, job.source) == ("local", str(src))
    assert job.options == ScoreOptions(criteria=("topic",))  # triage score's options: the product's, --criteria
    # the starter setting as the config and TRIAGE_STARTER give it (tests/conftest.py turns it off)
    assert job.fits == FitRequest(no_head=True, starter=starter_on({})) and (
        job.workers,
        job.threads,
        job.batch_size,
    ) == (3, 1, None)
    with pytest.raises(InputError, match="--workers must be at least 1"):
        RayJob(str(src), job.pack, job.options, workers=0)
    with pytest.raises(InputError, match="--resume needs --output"):
        RayJob(str(src), job.pack, job.options, resume=True)
    with pytest.raises(InputError, match="not a Ray address"):
        ray_job(build_parser().parse_args(["score", str(src), "--ray", "nowhere"]), config={})
    with pytest.raises(SystemExit) as removed:  # the research flags left `triage score`, --ray included
        build_parser().parse_args(["score", "--ray", str(src), "--readout", "letter"])
    assert removed.value.code == 2


def test_resume_cuts_a_half_written_last_line(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    out.write_text(
        '{"ticket_id": "a", "ticket_sha256": "s", "error": "e", "line": 1}\n{"schema": "triage.resu', encoding="utf-8"
    )
    found = read_existing(out, signature())
    assert len(found.keys) == 1 and out.read_text(encoding="utf-8").endswith("}\n")


def test_parquet_parts_have_one_schema_and_read_back(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from triage.backlog import output

    result = {
        "schema": "triage.result/3",
        "ticket_id": "t",
        "ticket_sha256": "s",
        "model": {"sha256": "a" * 64},
        "pack": {"hash": "p" * 16},
        "prompt_format": "triage-prompt/2:chat",
        "calibration": None,
        "warnings": [],
        **signature().record_options,
    }
    out = tmp_path / "out.parquet"
    writer = open_writer(out, signature(), resume=False)
    writer.write([("1", result)])
    output.ParquetWriter._flush(writer)  # type: ignore[arg-type]  # a part with a result only
    writer.write([("2", {"ticket_id": None, "line": 4, "error": "line 4: bad"})])
    writer.close()
    parts = sorted(out.glob("part-*.parquet"))
    schemas = [pq.read_schema(p) for p in parts]
    assert len(parts) == 2 and all(
        schemas[0].field(n).type == schemas[1].field(n).type for n in set(schemas[0].names) & set(schemas[1].names)
    )
    assert str(schemas[0].field("calibration").type) == "string" and str(schemas[1].field("line").type) == "int64"
    import pyarrow.dataset as ds

    table = ds.dataset(
        out, format="parquet", schema=pa.unify_schemas(schemas)
    ).to_table()  # the folder reads as one table
    assert table.num_rows == 2
    assert read_existing(out, signature()).keys == {record_key(result), record_key({"line": 4, "error": "x"})}


def test_a_node_pulls_a_missing_catalog_model_once_and_checks_it(
    monkeypatch: pytest.MonkeyPatch, smollm2_path: Path
) -> None:
    from triage.backlog.worker import NodeModelError, ensure_model
    from triage.model import installed, modelstore

    pulls: list[str] = []

    def fake_pull(entry: Any) -> None:  # stands in for the download: installs the file with its sidecar
        pulls.append(entry.name)
        installed.models_dir().mkdir(parents=True, exist_ok=True)
        installed.model_file(entry.name).symlink_to(smollm2_path)
        installed.write_sidecar(entry, smollm2_path.stat().st_size, entry.sha256, "catalog")

    monkeypatch.setattr(modelstore, "pull", fake_pull)
    ref = ensure_model("smollm2-135m", None)
    assert pulls == ["smollm2-135m"] and ref.path == installed.model_file("smollm2-135m")
    assert ensure_model("smollm2-135m", ref.sha256).sha256 == ref.sha256 and pulls == [
        "smollm2-135m"
    ]  # installed: no second pull
    with pytest.raises(
        # the node's address follows its name once Ray is imported (an earlier test in this process may have)
        NodeModelError,
        match=rf"node {re.escape(socket.gethostname())}( \([^)]*\))?: model smollm2-135m .* driver expects ffff",
    ):
        ensure_model("smollm2-135m", "f" * 64)


# -- on a local Ray cluster with the real model --------------------------------------------------


@pytest.fixture(scope="module")
def worker_home(tmp_path_factory: pytest.TempPathFactory, smollm2_path: Path) -> Path:
    """The workers' TRIAGE_HOME, with smollm2-135m installed as a catalog model."""
    home = tmp_path_factory.mktemp("ray-workers")
    models = home / "data" / "models"
    models.mkdir(parents=True)
    (models / "smollm2-135m.gguf").symlink_to(smollm2_path)
    sidecar = smollm2_path.with_name("smollm2-135m.json")
    if sidecar.exists():
        shutil.copy(sidecar, models / "smollm2-135m.json")
    return home


LOOPBACK = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@pytest.fixture(scope="module")
def cluster(worker_home: Path) -> Iterator[Any]:
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]' (scripts/setup does)")
    before = os.environ.get(LOOPBACK)
    os.environ[LOOPBACK] = "0"  # the head, the nodes and the driver on 127.0.0.1: test traffic stays on loopback
    try:
        env = {"env_vars": {"TRIAGE_HOME": str(worker_home)}}
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env=env)
        assert {n["NodeManagerAddress"] for n in ray.nodes()} == {"127.0.0.1"}  # conftest.py sets LOOPBACK early
        yield ray
        ray.shutdown()
    finally:
        if before is None:
            os.environ.pop(LOOPBACK, None)
        else:
            os.environ[LOOPBACK] = before


def run_ray(argv: list[str], on_batch: Any = None) -> int:
    from triage.backlog.ray_score import run_ray as run
    from triage.commands.score import ray_job

    return run(ray_job(build_parser().parse_args(argv)), on_batch=on_batch)


@pytest.mark.model
@pytest.mark.slow
def test_ray_scores_like_triage_score(
    cluster: Any, smollm2_path: Path, pack: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text(DATA.read_text(encoding="utf-8") + 'not json\n{"id": "blank", "text": "  "}\n', encoding="utf-8")
    common = ["--model", str(smollm2_path), "--pack", str(pack), *OPTIONS]
    assert main(["score", str(src), *common, "--format", "jsonl"]) == 1  # the two bad rows
    plain = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), "--ray", *common, "--workers", "2", "--batch-size", "4", "--output", str(out)]) == 1
    err = capsys.readouterr().err
    assert "tickets/s" in err and "scored 30 tickets" in err
    ours = jsonl(out)
    a, b = results(ours), results(plain)
    assert sorted(a) == sorted(b) == sorted(t["id"] for t in tickets())
    for tid, mine in a.items():
        theirs = b[tid]
        assert (mine["model"], mine["pack"], mine["prompt_format"], mine["mode"], mine["orderings"]) == (
            theirs["model"],
            theirs["pack"],
            theirs["prompt_format"],
            theirs["mode"],
            theirs["orderings"],
        )
        for c, d in zip(mine["criteria"], theirs["criteria"], strict=True):
            assert c["choice"] == d["choice"], tid
            for o, p in zip(c["options"], d["options"], strict=True):
                assert o["probability"] == pytest.approx(p["probability"], abs=1e-6)
    errors = lambda rs: sorted((r["ticket_id"] or "", r["line"], r["error"]) for r in rs if "error" in r)  # noqa: E731
    assert errors(ours) == errors(plain) and len(errors(ours)) == 2


def worker_pids() -> list[int]:
    """Processes of Ray Data's scoring actors (Ray titles them after the map operator)."""
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if (p / "cmdline").read_bytes().startswith(b"ray::MapWorker(MapBatches(TicketScorer))"):
                    pids.append(int(p.name))
            except OSError:
                continue
    return pids


@pytest.mark.model
@pytest.mark.slow
def test_a_killed_worker_loses_only_its_batch(cluster: Any, smollm2_path: Path, pack: Path, tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    src = tmp_path / "in.parquet"
    rows = tickets()
    pq.write_table(pa.table({"id": [r["id"] for r in rows], "text": [r["text"] for r in rows]}), src)
    out = tmp_path / "out.parquet"
    killed: list[int] = []

    def kill_one(summary: Any) -> None:
        if not killed and summary.returned < len(rows):
            pids = worker_pids()
            assert pids, "no scoring actor process found"
            os.kill(pids[0], signal.SIGKILL)
            killed.append(pids[0])

    argv = [
        "score",
        str(src),
        "--ray",
        "--model",
        str(smollm2_path),
        "--pack",
        str(pack),
        *OPTIONS,
        "--workers",
        "2",
        "--batch-size",
        "3",
        "-o",
        str(out),
    ]
    assert run_ray(argv, on_batch=kill_one) == 0
    assert killed and killed[0] not in worker_pids()
    records = [r for part in sorted(out.glob("part-*.parquet")) for r in pq.read_table(part).to_pylist()]
    assert len(records) == len(rows) and sorted(results(records)) == sorted(r["id"] for r in rows)


class Stop(Exception):
    pass


@pytest.mark.model
@pytest.mark.slow
def test_resume_scores_only_what_is_missing(
    cluster: Any, pack: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out.jsonl"
    argv = [
        "score",
        str(DATA),
        "--ray",
        "--model",
        "smollm2-135m",
        "--pack",
        str(pack),
        *OPTIONS,
        "--workers",
        "2",
        "--batch-size",
        "3",
        "-o",
        str(out),
    ]

    def stop_after_nine(summary: Any) -> None:
        if summary.returned >= 9:
            raise Stop()

    with pytest.raises(Stop):
        run_ray(argv, on_batch=stop_after_nine)
    first = jsonl(out)
    assert 9 <= len(first) < 30
    assert "--resume" in capsys.readouterr().err
    seen: list[Any] = []
    assert run_ray([*argv, "--resume"], on_batch=seen.append) == 0
    summary = seen[-1]
    # Only the missing tickets went to the workers, and each came back once.
    assert (summary.skipped, summary.to_score, summary.returned, summary.scored) == (
        len(first),
        30 - len(first),
        30 - len(first),
        30 - len(first),
    )
    final = jsonl(out)
    assert final[: len(first)] == first  # the first run's records, untouched (same created_at: not rescored)
    assert sorted(results(final)) == sorted(t["id"] for t in tickets())
    assert all(r["created_at"] > max(f["created_at"] for f in first) for r in final[len(first) :])
    assert run_ray([*argv, "--resume"]) == 0 and jsonl(out) == final  # nothing left: nothing written


@pytest.mark.model
def test_a_sha256_mismatch_stops_the_job_naming_the_node(cluster: Any, smollm2_path: Path) -> None:
    from triage.backlog.ray_score import check_nodes
    from triage.backlog.worker import NodeModelError

    with pytest.raises(NodeModelError, match=f"node {socket.gethostname()}.*has sha256 .* but the driver expects 0000"):
        check_nodes(cluster, str(smollm2_path), "0" * 64, "auto")


@pytest.mark.model
@pytest.mark.slow
def test_ray_applies_the_stored_learned_head_like_triage_score(
    cluster: Any, smollm2_path: Path, pack: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import numpy as np

    from triage.domain.pack import load_pack
    from triage.learning import fitstore, head_file
    from triage.scoring import head as head_mod
    from triage.scoring.engine import Engine

    mini = load_pack(pack)
    with Engine(smollm2_path, name="smollm2-135m", n_ctx=512) as eng:  # the keys and widths of the model the nodes run
        n_feat, sha, fmt = len(eng.feature_ids), eng.sha256, eng.format_for("label").id
        vocab, width = eng.native.n_vocab, eng.native.n_embd
    rng = np.random.default_rng(3)
    topic = head_mod.CriterionHead(
        ["billing", "credit", "other"],
        ["billing", "credit", "other"],
        rng.normal(0, 0.01, (3, n_feat + 3)),
        np.zeros(3),
    )
    head = head_mod.Head(sha, mini.hash, fmt, vocab, width, {"topic": topic}, name="mini head")
    head_file.write_head(head, fitstore.heads_dir() / fitstore.head_name(sha, mini.hash, fmt))
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(DATA.read_text(encoding="utf-8").splitlines()[:6]) + "\n", encoding="utf-8")
    common = ["--model", str(smollm2_path), "--pack", str(pack), "--threads", "1", "--n-ctx", "512"]
    assert main(["score", str(src), *common, "--format", "jsonl"]) == 0
    plain = results([json.loads(line) for line in capsys.readouterr().out.splitlines()])
    out = tmp_path / "out.jsonl"
    assert main(["score", str(src), "--ray", *common, "--workers", "1", "--output", str(out)]) == 0
    assert "applying learned head" in capsys.readouterr().err
    ours = results(jsonl(out))
    assert sorted(ours) == sorted(plain) and len(ours) == 6
    for tid, mine in ours.items():
        assert mine["head"] == plain[tid]["head"] == "mini head"  # the name kept in the file
        assert [c["source"] for c in mine["criteria"]] == ["zero-shot", "learned"]
        for c, d in zip(mine["criteria"], plain[tid]["criteria"], strict=True):
            for o, p in zip(c["options"], d["options"], strict=True):
                assert o["probability"] == pytest.approx(p["probability"], abs=1e-6)


# -- threads ------------------------------------------------------------------------------
THREAD = [
    {"role": "customer", "text": "My card was charged twice for one order."},
    {"role": "agent", "text": "Sorry about that. I have asked billing to look at it."},
    {"role": "customer", "text": "Nothing has happened in a week. Refund me now."},
]


def thread_rows(tmp_path: Path) -> Path:
    """Two threads whose turns interleave (T1, T2, T1, T2, T1, T2), and two bad thread rows."""
    lines = [json.dumps({"id": f"T{i}", "messages": THREAD[:k]}) for k in (1, 2, 3) for i in (1, 2)]
    lines += [json.dumps({"id": "bad1", "messages": []}), json.dumps({"id": "bad2", "text": "x", "messages": THREAD})]
    src = tmp_path / "threads.jsonl"
    src.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return src


def test_a_threads_rows_share_one_block_in_input_order(tmp_path: Path) -> None:
    from triage.backlog.rows import thread_blocks

    rows = read_rows(str(thread_rows(tmp_path)))
    assert [r.ticket_id for r in rows[:6]] == ["T1", "T2"] * 3 and len({r.key for r in rows[:6]}) == 6
    assert json.loads(rows[4].messages or "[]") == THREAD and rows[4].text is None
    assert "'messages' is empty" in (rows[6].error or "") and "both 'text' and 'messages'" in (rows[7].error or "")
    blocks = thread_blocks([r for r in rows if r.error is None], 2)
    assert [[(r.ticket_id, r.line) for r in b] for b in blocks] == [
        [("T1", 1), ("T1", 3), ("T1", 5)],
        [("T2", 2), ("T2", 4), ("T2", 6)],
    ]


@pytest.mark.model
@pytest.mark.slow
def test_ray_rescores_a_thread_on_one_worker_from_its_kept_state(
    cluster: Any, smollm2_path: Path, pack: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out.jsonl"
    argv = ["score", str(thread_rows(tmp_path)), "--ray", "--model", str(smollm2_path), "--pack", str(pack)]
    assert run_ray([*argv, *OPTIONS, "--workers", "2", "--batch-size", "1", "--output", str(out)]) == 1
    records = jsonl(out)
    scored = [r for r in records if "schema" in r]
    assert len(scored) == 6 and sum("error" in r for r in records) == 2
    for r in scored:
        k = r["thread"]["messages"]
        assert r["thread"]["previous"] == k - 1  # the turn before was scored by the same worker, just before
        assert (r["thread"]["reused"] > 0) == (k > 1)
