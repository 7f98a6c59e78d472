"""``triage serve`` over HTTP against ``Engine.score`` in one process, on the same tickets, in one run.

Prints, and with ``--json`` writes:

* warm phase: ``--n`` tickets (default 50), each scored once by ``Engine.score`` directly and once
  by ``POST /v1/score`` on a server in this process (uvicorn in a thread, the same app as
  ``triage serve``), interleaved ticket by ticket so that drift in the machine's load hits both
  alike; median and p95 latency of each, requests per second (one client, back to back), and
  the HTTP overhead per ticket: the client's wall time minus the engine's own ``timing.total_ms``
  of that request (the part HTTP, JSON, the queue and the fit policy add), and the paired
  difference HTTP minus direct; both as a share of the direct score's median time;
* load run: ``--load`` requests (default 200) from ``--clients`` threads (default 8), each its own
  connection: errors, lost and duplicated answers (every id must come back once, with the
  probabilities the direct score gave that text), the queue's peak, and the process's RSS
  before warm-up, after it, half-way through and after the load (memory flat: no growth per request).

    .venv/bin/python bench/serve_http.py --model qwen2.5-coder-0.5b --json bench/results/serve_http.json
    .venv/bin/python bench/serve_http.py --model smollm2-135m --n 10 --load 40     # a quick check

Tickets: the first N of ``--tickets`` (default ../shared/datasets/airline-sentiment, customer
tweets; else the built-in bench tickets, repeated with distinct ids).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEFAULT_TICKETS = ROOT.parent / "shared" / "datasets" / "airline-sentiment" / "tickets.jsonl"


def rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def p95(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(0.95 * (len(s) - 1)))]


def load_tickets(path: Path | None, n: int) -> list[tuple[str, str]]:
    src = path or (DEFAULT_TICKETS if DEFAULT_TICKETS.is_file() else ROOT / "triage" / "assets" / "bench-tickets.jsonl")
    rows = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines() if line.strip()]
    out = []
    for i in range(n):
        row = rows[i % len(rows)]
        out.append((f"{row.get('id', 'row')}-{i}", row["text"]))
    return out


class Client:
    """One keep-alive connection to the server."""

    def __init__(self, base: str) -> None:
        host, port = base.removeprefix("http://").split(":")
        self.conn = http.client.HTTPConnection(host, int(port), timeout=600)

    def score(self, tid: str, text: str) -> tuple[int, dict[str, Any], float]:
        body = json.dumps({"id": tid, "text": text})
        t0 = time.perf_counter()
        self.conn.request("POST", "/v1/score", body, {"Content-Type": "application/json"})
        r = self.conn.getresponse()
        data = r.read()
        ms = (time.perf_counter() - t0) * 1000
        return r.status, json.loads(data), ms


def probs(result: dict[str, Any]) -> dict[tuple[str, str], float]:
    return {(c["id"], o["id"]): o["probability"] for c in result["criteria"] for o in c["options"]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--n", type=int, default=50, help="warm tickets, each scored both ways")
    ap.add_argument("--load", type=int, default=200, help="requests in the load run")
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--tickets", type=Path)
    ap.add_argument("--threads", type=int)
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)

    from triage.domain.pack import default_pack
    from triage.learning.fit import choose_fits
    from triage.scoring.loader import load_engine
    from triage.scoring.options import ScoreOptions
    from triage.serve.app import ServeSettings
    from triage.serve.local import serving

    load0 = os.getloadavg()[0]
    tickets = load_tickets(args.tickets, max(args.n, 1))
    engine = load_engine(args.model, threads=args.threads)
    pack = default_pack()
    options = ScoreOptions()
    fits = choose_fits(engine, pack, options)
    rss_loaded = rss_mib()
    engine.hold_stable(pack)
    for _, text in tickets[:3]:  # warm-up, both ways below
        engine.score_ticket(text, pack, options, **fits.engine_kwargs())
    settings = ServeSettings(packs={pack.name: pack})
    direct_ms: list[float] = []
    http_ms: list[float] = []
    engine_ms: list[float] = []
    want: dict[str, dict[tuple[str, str], float]] = {}
    mismatches = 0
    with serving(engine, settings, queue_limit=max(16, args.clients * 2)) as (base, worker):
        client = Client(base)
        for tid, text in tickets[:3]:
            client.score("warm-" + tid, text)
        rss_warm = rss_mib()
        t_http = 0.0
        for tid, text in tickets[: args.n]:
            t0 = time.perf_counter()
            direct = engine.score_ticket(text, pack, options, **fits.engine_kwargs())
            direct_ms.append((time.perf_counter() - t0) * 1000)
            want[text] = probs(direct.to_dict())
            t0 = time.perf_counter()
            status, got, ms = client.score(tid, text)
            t_http += time.perf_counter() - t0
            assert status == 200, got
            http_ms.append(ms)
            engine_ms.append(got["timing"]["total_ms"])
            mismatches += max(abs(a - b) for a, b in zip(probs(got).values(), want[text].values(), strict=True)) > 1e-6
        rps = args.n / t_http

        # load run
        jobs = [(f"load-{i}", tickets[i % len(tickets)][1]) for i in range(args.load)]
        answers: dict[str, int] = {}
        errors: list[str] = []
        wrong = 0
        lock = threading.Lock()
        rss_mid: list[float] = []
        peak = [0]

        def run_client(k: int) -> None:
            nonlocal wrong
            c = Client(base)
            for i in range(k, len(jobs), args.clients):
                tid, text = jobs[i]
                try:
                    status, got, _ = c.score(tid, text)
                except Exception as exc:  # a lost answer: counted, the run goes on
                    with lock:
                        errors.append(f"{tid}: {exc!r}")
                    c = Client(base)
                    continue
                with lock:
                    if status != 200:
                        errors.append(f"{tid}: {status} {got.get('error')}")
                        continue
                    answers[got["ticket_id"]] = answers.get(got["ticket_id"], 0) + 1
                    if max(abs(a - b) for a, b in zip(probs(got).values(), want[text].values(), strict=True)) > 1e-6:
                        wrong += 1
                    if len(answers) == len(jobs) // 2:
                        rss_mid.append(rss_mib())

        t0 = time.perf_counter()
        threads = [threading.Thread(target=run_client, args=(k,)) for k in range(args.clients)]
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            peak[0] = max(peak[0], worker.waiting)
            time.sleep(0.01)
        load_s = time.perf_counter() - t0
        rss_end = rss_mib()
        stats = worker.stats.as_dict()
    engine.close()

    d_med = statistics.median(direct_ms)
    over = [h - e for h, e in zip(http_ms, engine_ms, strict=True)]
    paired = [h - d for h, d in zip(http_ms, direct_ms, strict=True)]
    lost = [tid for tid, _ in jobs if tid not in answers]
    dup = [tid for tid, n in answers.items() if n > 1]
    out = {
        "model": engine.name,
        "tickets": args.n,
        "loadavg_start": round(load0, 2),
        "loadavg_end": round(os.getloadavg()[0], 2),
        "direct_ms": {"median": round(d_med, 1), "p95": round(p95(direct_ms), 1)},
        "http_ms": {"median": round(statistics.median(http_ms), 1), "p95": round(p95(http_ms), 1)},
        "http_requests_per_s": round(rps, 3),
        "direct_per_s": round(1000 * len(direct_ms) / sum(direct_ms), 3),
        "overhead_ms": {
            "median": round(statistics.median(over), 2),
            "p95": round(p95(over), 2),
            "share_of_direct_median": round(statistics.median(over) / d_med, 4),
        },
        "paired_difference_ms": {
            "median": round(statistics.median(paired), 1),
            "share_of_direct_median": round(statistics.median(paired) / d_med, 4),
        },
        "probability_mismatches": mismatches,
        "load": {
            "requests": args.load,
            "clients": args.clients,
            "seconds": round(load_s, 1),
            "requests_per_s": round(args.load / load_s, 3),
            "errors": len(errors),
            "lost": len(lost),
            "duplicated": len(dup),
            "wrong": wrong,
            "queue_peak": peak[0],
            "first_errors": errors[:5],
            "server": stats,
        },
        "rss_mib": {
            "after_load": round(rss_loaded, 1),
            "after_warmup": round(rss_warm, 1),
            "half_way": round(rss_mid[0], 1) if rss_mid else None,
            "after_load_run": round(rss_end, 1),
        },
    }
    print(json.dumps(out, indent=2))
    if args.json:
        args.json.write_text(json.dumps(out, indent=2) + "\n", encoding="utf-8")
    ok = not errors and not lost and not dup and not wrong and not mismatches
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
