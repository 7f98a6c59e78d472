"""Large exports: peak memory of `triage pack init` on generated CSVs of 20,000 and 200,000 rows.

Writes the CSVs (Freshdesk-like: Ticket ID, Subject, HTML Description, Group, Priority; ~0.5 KB a
row) into OUTDIR unless they exist, runs `triage pack init` on each in a child process, and reports
the child's wall time and peak RSS (ru_maxrss of RUSAGE_CHILDREN, one child per measurement), beside
the peak RSS of a child that only imports triage's CLI. Bounded memory shows as the same peak for 10x
the rows. With --learn MODEL it also runs `learn --per-option 20 --limit N` on the 200,000-row file.

It also reads the 200,000 rows the way `learn --per-option 20` does (the stratified sample,
no model) and reports that child's peak.

usage: python bench/intake/large.py OUTDIR [--learn smollm2-135m --limit 120]
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

GROUPS = [
    ("Billing and Payments", 30),
    ("Technical Support", 25),
    ("Customer Service", 15),
    ("Returns and Exchanges", 10),
    ("Sales and Pre-Sales", 8),
    ("IT Support", 6),
    ("Service Outages", 4),
    ("Product Support", 1.9),
    ("Legal", 0.08),
    ("Press", 0.02),
]
PRIORITIES = [("High", 25), ("Medium", 45), ("Low", 30)]
WORDS = (
    "order invoice refund card charge login password error crash server outage delivery parcel return exchange price "
    "quote licence account access laptop printer network update install contract payment subscription upgrade"
).split()


def write_csv(path: Path, n: int, seed: int = 0) -> None:
    rnd = random.Random(seed)
    gv, gw = zip(*GROUPS, strict=True)
    pv, pw = zip(*PRIORITIES, strict=True)
    with path.open("w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(["Ticket ID", "Subject", "Description", "Group", "Priority"])
        for i in range(n):
            group = rnd.choices(gv, gw)[0]
            words = rnd.choices(WORDS, k=60)
            body = "".join(f"<p>{' '.join(words[j : j + 12]).capitalize()}.</p>" for j in range(0, 60, 12))
            w.writerow([f"T{i:07d}", f"{group}: {' '.join(words[:5])}", body, group, rnd.choices(pv, pw)[0]])


# ru_maxrss of RUSAGE_CHILDREN is the largest child a process ever waited for, so each command runs
# under a fresh wrapper process whose only child it is; the wrapper prints that child's peak.
WRAPPER = (
    "import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, file=sys.stderr); sys.exit(p.returncode)"
)


def run_child(argv: list[str]) -> dict[str, object]:
    """Run one command; its wall time, peak RSS (MiB) and output."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", WRAPPER, *argv], capture_output=True, text=True, env={**os.environ})
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout + proc.stderr)
        raise SystemExit(f"failed: {' '.join(argv)}")
    peak_kb = int(proc.stderr.strip().splitlines()[-1])
    return {
        "wall_s": round(wall, 2),
        "peak_rss_mb": round(peak_kb / 1024, 1),
        "stdout": proc.stdout,
        "stderr": proc.stderr,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("outdir", type=Path)
    ap.add_argument("--learn", metavar="MODEL")
    ap.add_argument("--limit", type=int, default=120)
    a = ap.parse_args(argv)
    a.outdir.mkdir(parents=True, exist_ok=True)
    py = sys.executable
    results: dict[str, object] = {}
    results["import_only"] = run_child([py, "-c", "import triage.cli, triage.intake.packinit, triage.intake.readers"])
    for n in (20_000, 200_000):
        path = a.outdir / f"export-{n}.csv"
        if not path.exists():
            write_csv(path, n)
        out = a.outdir / f"team-{n}.toml"
        r = run_child(
            [
                py,
                "-m",
                "triage.cli",
                "pack",
                "init",
                str(path),
                "--text",
                "Subject,Description",
                "--criteria",
                "queue=Group,priority=Priority",
                "-o",
                str(out),
                "--force",
            ]
        )
        r["file_mb"] = round(path.stat().st_size / 2**20, 1)
        results[f"pack_init_{n}"] = r
    # learn's reading alone (no model): the stratified sample streamed from the 200,000 rows.
    sample_code = (
        "import sys; from triage.learning.labelled import read_labelled; from triage.intake.columns import ColumnMap; "
        "from triage.domain.pack import load_pack; "
        "rows = read_labelled(sys.argv[1], load_pack(sys.argv[2]), partial=True, per_option=20, "
        "columns=ColumnMap.parse('Subject,Description', 'Ticket ID', ['queue=Group', 'priority=Priority'])); "
        "print(len(rows.rows), rows.notes)"
    )
    results["learn_read_per_option_20_200000"] = run_child(
        [py, "-c", sample_code, str(a.outdir / "export-200000.csv"), str(a.outdir / "team-200000.toml")]
    )
    if a.learn:
        path = a.outdir / "export-200000.csv"
        r = run_child(
            [
                py,
                "-m",
                "triage.cli",
                "learn",
                str(path),
                "--model",
                a.learn,
                "--pack",
                str(a.outdir / "team-200000.toml"),
                "--text",
                "Subject,Description",
                "--id",
                "Ticket ID",
                "--label",
                "queue=Group",
                "--label",
                "priority=Priority",
                "--per-option",
                "20",
                "--limit",
                str(a.limit),
                "--holdout",
                "0.3",
                "--no-store",
                "-o",
                str(a.outdir / "large.npz"),
            ]
        )
        results["learn_per_option_20"] = r
    for k, v in results.items():
        if isinstance(v, dict):
            print(k, {x: y for x, y in v.items() if x not in ("stdout", "stderr")})
            if k.startswith("pack_init_200000") or k.startswith("learn"):  # what they said
                print(v["stdout"])
                print("\n".join(line for line in str(v["stderr"]).splitlines()[:-1] if "%" not in line)[-3000:])
    (a.outdir / "large.json").write_text(
        json.dumps(
            {
                k: {x: y for x, y in v.items() if x not in ("stdout", "stderr")}
                for k, v in results.items()
                if isinstance(v, dict)
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
