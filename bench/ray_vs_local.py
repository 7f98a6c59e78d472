"""One machine, two ways: `triage score --ray --workers 2 --threads 1` against `triage score --threads 2`.

Scores the same short tickets both ways, with the same model, pack and options, and prints:

* throughput (tickets/s) of each, and their ratio;
* Ray's overhead per ticket: worker time per ticket not spent inside the engine, in the
  steady state (from the results' own timestamps), minus the same figure for the plain run;
  and the fixed cost of each run (process and cluster start, model loads);
* each Ray worker's peak memory (RSS; private memory, which is what one more worker costs,
  since the model file is mapped and shared), and the plain process's peak RSS;
* whether both runs chose the same options (they should: the probabilities agree to 1e-6).

Run it on a quiet machine (llama.cpp threads spin: another model process skews both runs):

    .venv/bin/python bench/ray_vs_local.py                 # 200 short tickets, qwen2.5-coder-0.5b
    .venv/bin/python bench/ray_vs_local.py --n 10 --json /tmp/rvl.json -- --mode fanout

Tickets: the first N of ``--tickets`` (default: ../shared/datasets/airline-sentiment, customer
tweets). Anything after ``--`` is passed to both runs (e.g. ``--mode fanout``, ``--pack P``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TICKETS = ROOT.parent / "shared" / "datasets" / "airline-sentiment" / "tickets.jsonl"
WORKER_TITLE = b"ray::MapWorker(MapBatches(TicketScorer))"


def _mem(pid: int) -> tuple[float, float] | None:
    """(RSS MiB, private MiB) of a process, or None when it is gone."""
    try:
        rollup = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    kb = {line.split(":")[0]: int(line.split()[1]) for line in rollup.splitlines()[1:] if line.split()[-1] == "kB"}
    return kb.get("Rss", 0) / 1024, (kb.get("Private_Clean", 0) + kb.get("Private_Dirty", 0)) / 1024


class MemorySampler:
    """Peak memory of the watched processes, sampled twice a second."""

    def __init__(self, pick: Any) -> None:
        self.pick = pick  # () -> list of pids
        self.peak: dict[int, tuple[float, float]] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(0.5):
            for pid in self.pick():
                m = _mem(pid)
                if m:
                    old = self.peak.get(pid, (0.0, 0.0))
                    self.peak[pid] = (max(old[0], m[0]), max(old[1], m[1]))


def ray_workers() -> list[int]:
    pids = []
    for p in Path("/proc").iterdir():
        if p.name.isdigit():
            try:
                if (p / "cmdline").read_bytes().startswith(WORKER_TITLE):
                    pids.append(int(p.name))
            except OSError:
                pass
    return pids


def run(argv: list[str], *, stdout: Path, pick: Any) -> dict[str, Any]:
    """Run ``triage`` with ``argv``; wall time and peak memory of the processes ``pick`` names."""
    cmd = [sys.executable, "-m", "triage.cli", *argv]
    print("$ triage " + " ".join(argv), file=sys.stderr, flush=True)
    t0 = time.time()
    with stdout.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, text=True)
        with MemorySampler(lambda: pick(proc.pid)) as mem:
            _, err = proc.communicate()
    wall = time.time() - t0
    if proc.returncode not in (0, 1):
        sys.exit(f"triage failed ({proc.returncode}):\n{err}")
    return {"wall_s": wall, "started": t0, "peak": mem.peak, "stderr_tail": err.strip().splitlines()[-2:]}


def analyse(records: list[dict[str, Any]], wall: float, started: float, workers: int) -> dict[str, Any]:
    """Throughput, steady-state rate, engine time and overhead per ticket of one run."""
    res = [r for r in records if "schema" in r]
    stamps = sorted(r["created_at"] for r in res)
    engine_ms = [r["timing"]["total_ms"] for r in res]
    # Steady state: from the first result of the last worker to start, to the last result.
    window = stamps[workers - 1 :]
    steady = (
        (len(window) - 1) / (window[-1] - window[0]) if len(window) > 1 and window[-1] > window[0] else float("nan")
    )
    mean_engine_s = statistics.fmean(engine_ms) / 1000
    return {
        "tickets": len(res),
        "wall_s": round(wall, 2),
        "tickets_per_s": round(len(res) / wall, 4),
        "steady_tickets_per_s": round(steady, 4),
        "engine_s_per_ticket": round(mean_engine_s, 4),
        # Worker time per ticket that is not the engine's (scheduling, serialisation, writing).
        "overhead_s_per_ticket": round(workers / steady - mean_engine_s, 4),
        "fixed_s": round((stamps[0] - started) + (started + wall - stamps[-1]), 2),  # start-up and shut-down
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=200, help="tickets (default 200)")
    ap.add_argument(
        "--tickets",
        type=Path,
        default=DEFAULT_TICKETS,
        help="JSON Lines {id, text} (default: airline-sentiment tweets)",
    )
    ap.add_argument("--model", default="qwen2.5-coder-0.5b", help="catalog name or path (default qwen2.5-coder-0.5b)")
    ap.add_argument("--json", type=Path, help="also write the figures here")
    ap.add_argument("extra", nargs="*", help="options for both runs, after --")
    args = ap.parse_args()
    if not args.tickets.is_file():
        sys.exit(f"{args.tickets} not found; pass --tickets FILE.jsonl with short {{id, text}} rows")
    rows = [json.loads(line) for line in args.tickets.read_text(encoding="utf-8").splitlines() if line.strip()][
        : args.n
    ]
    if len(rows) < args.n:
        sys.exit(f"{args.tickets} has only {len(rows)} tickets")
    load_start = os.getloadavg()
    if load_start[0] > 0.5:
        print(
            f"warning: load average {load_start[0]:.2f}: the machine is busy; both figures will be skewed",
            file=sys.stderr,
        )
    with tempfile.TemporaryDirectory(prefix="ray-vs-local-") as tmp:
        src = Path(tmp) / "tickets.jsonl"
        src.write_text("".join(json.dumps({"id": r["id"], "text": r["text"]}) + "\n" for r in rows), encoding="utf-8")
        common = [str(src), "--model", args.model, *args.extra]
        local = run(
            ["score", *common, "--format", "jsonl", "--threads", "2"],
            stdout=Path(tmp) / "local.jsonl",
            pick=lambda pid: [pid],
        )
        out = Path(tmp) / "ray.jsonl"
        ray = run(
            ["score", *common, "--ray", "--workers", "2", "--threads", "1", "--output", str(out)],
            stdout=Path(tmp) / "ray.stdout",
            pick=lambda pid: ray_workers(),
        )
        a = [json.loads(x) for x in (Path(tmp) / "local.jsonl").read_text().splitlines() if x.strip()]
        b = [json.loads(x) for x in out.read_text().splitlines() if x.strip()]
    m = re.search(r"on (\d+) worker", " ".join(ray["stderr_tail"]))
    workers = int(m.group(1)) if m else 2
    fig_local, fig_ray = (
        analyse(a, local["wall_s"], local["started"], 1),
        analyse(b, ray["wall_s"], ray["started"], workers),
    )
    la = {r["ticket_id"]: r for r in a if "schema" in r}
    diff, same = 0.0, 0
    for r in b:
        if "schema" in r and r["ticket_id"] in la:
            pairs = list(zip(r["criteria"], la[r["ticket_id"]]["criteria"], strict=True))
            same += all(c["choice"] == d["choice"] for c, d in pairs)
            diff = max(
                [diff]
                + [
                    abs(o["probability"] - p["probability"])
                    for c, d in pairs
                    for o, p in zip(c["options"], d["options"], strict=True)
                ]
            )
    workers_mem = sorted(ray["peak"].values())
    report = {
        "n": args.n,
        "model": args.model,
        "options": args.extra,
        "tickets": str(args.tickets),
        "load_avg_start": load_start,
        "load_avg_end": os.getloadavg(),
        "local_threads_2": fig_local,
        "ray_workers_2_threads_1": fig_ray,
        "ray_workers_started": workers,
        "ratio_ray_vs_local": round(fig_ray["tickets_per_s"] / fig_local["tickets_per_s"], 3),
        "ratio_steady": round(fig_ray["steady_tickets_per_s"] / fig_local["steady_tickets_per_s"], 3),
        "ray_overhead_s_per_ticket": round(fig_ray["overhead_s_per_ticket"] - fig_local["overhead_s_per_ticket"], 4),
        "worker_peak_rss_mib": [round(m[0]) for m in workers_mem],
        "worker_peak_private_mib": [round(m[1]) for m in workers_mem],
        "local_peak_rss_mib": round(max((m[0] for m in local["peak"].values()), default=0)),
        "same_choices": f"{same}/{len(la)}",
        "max_probability_diff": diff,
    }
    print(json.dumps(report, indent=2))
    print(
        f"\nlocal --threads 2:               {fig_local['tickets_per_s']:.3f} tickets/s "
        f"({fig_local['steady_tickets_per_s']:.3f} steady), {fig_local['wall_s']:.0f} s\n"
        f"ray --workers 2 --threads 1:     {fig_ray['tickets_per_s']:.3f} tickets/s "
        f"({fig_ray['steady_tickets_per_s']:.3f} steady), {fig_ray['wall_s']:.0f} s\n"
        f"ratio ray/local:                 {report['ratio_ray_vs_local']} ({report['ratio_steady']} steady)\n"
        f"Ray overhead per ticket:         {report['ray_overhead_s_per_ticket'] * 1000:.0f} ms "
        f"(steady state); fixed cost {fig_ray['fixed_s']:.0f} s against {fig_local['fixed_s']:.0f} s\n"
        f"worker memory (peak RSS/private): {report['worker_peak_rss_mib']} / "
        f"{report['worker_peak_private_mib']} MiB; local process {report['local_peak_rss_mib']} MiB\n"
        f"same choices: {report['same_choices']}, max probability difference {diff:.2e}"
    )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
