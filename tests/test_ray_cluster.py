"""`score --ray` on a cluster of several nodes (``ray.cluster_utils.Cluster``: a head and worker
nodes as separate raylets on this machine, all on 127.0.0.1), with a node removed mid-run.

A node lost mid-run takes its actor and the block it was scoring; Ray Data restarts the
actor on a node that is left and scores that block again. The output must hold every
ticket exactly once. While the run writes, a second ``triage score --ray`` on the same
output, in another process, is refused by the output's lock.

The head has no CPU (it only runs the cluster's services); three worker nodes of one CPU
each run at most two scoring actors (``--workers 2``, one llama.cpp thread each), so one
node is spare and two model processes share the machine's two cores.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import MINI_PACK

pytestmark = [pytest.mark.model, pytest.mark.slow]

DATA = Path(__file__).parent / "data" / "backlog-30.jsonl"
LOOPBACK = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


@pytest.fixture(scope="module")
def worker_home(tmp_path_factory: pytest.TempPathFactory, smollm2_path: Path) -> Path:
    """The nodes' TRIAGE_HOME, with smollm2-135m installed as a catalog model."""
    home = tmp_path_factory.mktemp("ray-nodes")
    models = home / "data" / "models"
    models.mkdir(parents=True)
    (models / "smollm2-135m.gguf").symlink_to(smollm2_path)
    sidecar = smollm2_path.with_name("smollm2-135m.json")
    if sidecar.exists():
        shutil.copy(sidecar, models / "smollm2-135m.json")
    return home


@pytest.fixture(scope="module")
def cluster(worker_home: Path) -> Iterator[Any]:
    ray = pytest.importorskip("ray", reason="Ray is not installed: pip install -e '.[ray]' (scripts/setup does)")
    from ray.cluster_utils import Cluster

    before = os.environ.get(LOOPBACK)
    os.environ[LOOPBACK] = "0"  # the head, the nodes and the driver on 127.0.0.1: test traffic stays on loopback
    started = time.monotonic()
    c = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "include_dashboard": False})
    try:
        for _ in range(3):
            c.add_node(num_cpus=1)
        c.wait_for_nodes()
        env = {"env_vars": {"TRIAGE_HOME": str(worker_home)}}
        ray.init(address=c.address, log_to_driver=False, runtime_env=env)
        c.started_s = time.monotonic() - started  # type: ignore[attr-defined]
        yield c
    finally:
        ray.shutdown()
        c.shutdown()
        if before is None:
            os.environ.pop(LOOPBACK, None)
        else:
            os.environ[LOOPBACK] = before


def _scoring_nodes(c: Any) -> list[Any]:
    """The cluster's worker nodes whose raylet is the parent of a scoring actor's process."""
    actors = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if (p / "cmdline").read_bytes().startswith(b"ray::MapWorker(MapBatches(TicketScorer))"):
                    actors.append(int((p / "stat").read_text().rsplit(")", 1)[1].split()[1]))  # its parent
            except (OSError, IndexError, ValueError):
                continue
    found = []
    for node in c.worker_nodes:
        raylet = node.all_processes.get("raylet")
        if raylet and raylet[0].process.pid in actors:
            found.append(node)
    return found


def test_a_node_lost_mid_run_loses_no_ticket_and_writes_none_twice(
    cluster: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from triage.backlog.ray_score import run_ray
    from triage.cli import build_parser
    from triage.commands.score import ray_job

    pack = tmp_path / "mini.toml"
    pack.write_text(MINI_PACK, encoding="utf-8")
    out = tmp_path / "out.jsonl"
    argv = [
        "score",
        str(DATA),
        "--ray",
        cluster.address,
        "--model",
        "smollm2-135m",
        "--pack",
        str(pack),
        "--threads",
        "1",
        "--n-ctx",
        "512",
        "--workers",
        "2",
        "--batch-size",
        "3",
        "-o",
        str(out),
    ]
    removed: list[Any] = []
    second: list[subprocess.CompletedProcess[str]] = []

    def disturb(summary: Any) -> None:
        if removed or summary.returned >= 30:
            return
        # Another process asks for the same output while this run holds it.
        second.append(
            subprocess.run(
                [sys.executable, "-m", "triage.cli", *argv, "--resume"],
                capture_output=True,
                text=True,
                timeout=120,
                env={**os.environ, "TRIAGE_HOME": str(tmp_path / "second-home")},
            )
        )
        nodes = _scoring_nodes(cluster)
        assert nodes, "no node runs a scoring actor"
        cluster.remove_node(nodes[0])  # the raylet and its workers die: its actor and its block are lost
        removed.append(nodes[0])

    started = time.monotonic()
    assert run_ray(ray_job(build_parser().parse_args(argv)), on_batch=disturb) == 0
    seconds = time.monotonic() - started
    err = capsys.readouterr().err
    assert removed, "the run ended before a node could be removed"
    assert {n["NodeManagerAddress"] for n in __import__("ray").nodes()} == {"127.0.0.1"}  # loopback only
    [refused] = second
    assert refused.returncode == 2 and "another triage is writing" in refused.stderr, refused.stderr
    records = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    ids = [r["ticket_id"] for r in records]
    want = sorted(json.loads(line)["id"] for line in DATA.read_text(encoding="utf-8").splitlines())
    assert sorted(ids) == want, "every ticket exactly once"
    assert all("schema" in r for r in records)
    assert "scored 30 tickets" in err
    print(
        f"\ncluster: head + 3 nodes up in {cluster.started_s:.1f} s; 30 tickets with a node removed "
        f"mid-run in {seconds:.1f} s",
        file=sys.stderr,
    )
