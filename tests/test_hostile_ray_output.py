"""``score --ray -o`` on a full disk: the summary says what the output holds, never what was only scored.

The cluster is replaced by a fake that hands back scored blocks (``_scored_blocks``), so the
driver's own counting and writing run for real, in a subprocess under a file size limit
(RLIMIT_FSIZE: writes past it fail with EFBIG, as a full disk's fail with ENOSPC). No Ray
process runs under the limit.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DRIVER = r"""
import json, resource, sys
from pathlib import Path
from types import SimpleNamespace

import pyarrow as pa

from triage.backlog import ray_score
from triage.backlog.rows import read_rows

src, out, limit = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])

def fake_blocks(_ray, todo, _scorer, _workers, batch_size):
    for i in range(0, len(todo), batch_size):
        rows = todo[i : i + batch_size]
        records = [
            {"schema": "triage.result/2", "ticket_id": r.ticket_id, "ticket_sha256": r.key.split(":")[-1],
             "timing": {"total_ms": 5.0}, "pad": "x" * 300}
            for r in rows
        ]
        yield pa.table({"key": [r.key for r in rows], "record": [json.dumps(x) for x in records]})

ray_score._scored_blocks = fake_blocks
rows = read_rows(src)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
fake_ray = SimpleNamespace(cluster_resources=lambda: {"CPU": 2})
try:
    ray_score.score_backlog(fake_ray, rows, SimpleNamespace(threads=1), output=out, signature=None,
                            resume=False, workers=1, batch_size=2)
except ray_score.TriageError as exc:
    print(f"triage: error: {exc.message}", file=sys.stderr)
    sys.exit(1)
"""


def run(tmp_path: Path, out: Path, limit: int) -> subprocess.CompletedProcess[str]:
    src = tmp_path / "in.jsonl"
    src.write_text(
        "".join(json.dumps({"id": f"t{i}", "text": f"ticket number {i}"}) + "\n" for i in range(12))
        + "not json\n",  # one bad row: an error record written first
        encoding="utf-8",
    )
    return subprocess.run(
        [sys.executable, "-c", DRIVER, str(src), str(out), str(limit)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )


def said_scored(stderr: str) -> int:
    m = re.search(r"scored (\d+) tickets", stderr)
    assert m, stderr
    return int(m.group(1))


def test_ray_jsonl_output_on_a_full_disk_says_what_the_file_holds(tmp_path: Path) -> None:
    out = tmp_path / "out.jsonl"
    proc = run(tmp_path, out, 2000)  # room for the error record and a few results, not for 12
    assert proc.returncode == 1, proc.stderr
    data = out.read_bytes()
    assert data.endswith(b"\n")  # whole records only
    records = [json.loads(line) for line in data.splitlines()]
    results = [r for r in records if "schema" in r]
    assert 0 < len(results) < 12 and sum("error" in r for r in records) == 1
    assert said_scored(proc.stderr) == len(results), proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"the output could not be written (File too large); {out} holds {len(records)} whole record(s)" in (
        proc.stderr.replace("\n", " ")
    )
    assert "--resume" in proc.stderr


def test_ray_parquet_output_on_a_full_disk_says_it_holds_nothing(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    out = tmp_path / "out.parquet"
    proc = run(tmp_path, out, 1500)  # the one part (written at the end) does not fit
    assert proc.returncode == 1, proc.stderr
    assert list(out.glob("part-*.parquet")) == [] and not list(out.glob(".*.tmp"))
    assert said_scored(proc.stderr) == 0, proc.stderr
    assert "holds 0 whole record(s)" in proc.stderr.replace("\n", " ") and "Traceback" not in proc.stderr
