"""A 25 KB pasted error log against a tweet, side by side in one run (bench/README.md, "Long pastes").

The issue (34): a 25 KB log was 10,799 tokens; its middle was cut only to fit the 4,096-token
context, and its prefill took 21 times a tweet's time. With the ticket budget
(``triage.scoring.prompt.TICKET_TOKENS``) the log is cut to the budget, so its decode is bounded.
The target: the log decided in at most 10 times the tweet's time.

One engine (score's 4,096-token context, the built-in pack, fanout, as the app scores), the stable
block warm (resident) before every score, the log and the tweet interleaved (the order alternates
every run); medians of ``--runs`` wall times of ``Engine.score_ticket``. ``--unbudgeted N`` also
scores the log N times with the budget raised past the context (what every path did before the
budget), for the before figure, in the same run.

    .venv/bin/python bench/long_paste.py --model qwen2.5-coder-0.5b --runs 5 --json bench/results/long_paste.json
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from triage.bench.machine import cores, cpu_snapshot, load_average, other_cpu_share  # noqa: E402
from triage.domain.pack import default_pack  # noqa: E402
from triage.model.resolve import resolve_model  # noqa: E402
from triage.scoring import prompt  # noqa: E402
from triage.scoring.engine import Engine  # noqa: E402

TWEET = "@AcmeSupport charged twice for order #48213 this morning, can someone refund one of them please?"
LOG_BYTES = 25_000


def error_log(size: int = LOG_BYTES, seed: int = 34) -> str:
    """A synthetic pasted error log of ``size`` bytes: a customer's note, then timestamped lines and tracebacks."""
    rng = random.Random(seed)
    services = ["checkout", "billing-worker", "sync-agent", "export-api", "auth-proxy"]
    errors = [
        "ConnectionResetError: [Errno 104] Connection reset by peer",
        "TimeoutError: upstream did not answer within 30.0 s",
        "psycopg2.OperationalError: could not connect to server: Connection refused",
        "KeyError: 'invoice_id'",
        "ValueError: invalid literal for int() with base 10: 'N/A'",
    ]
    lines = ["Hi, our nightly export keeps failing since the update. Full log below, please help!", ""]
    t = 0
    while sum(len(x) + 1 for x in lines) < size:
        t += rng.randint(1, 40)
        svc = rng.choice(services)
        stamp = f"2026-11-30T02:{t // 60 % 60:02d}:{t % 60:02d}.{rng.randint(0, 999):03d}Z"
        if rng.random() < 0.25:
            err = rng.choice(errors)
            lines += [
                f"{stamp} ERROR [{svc}] job {rng.randint(1000, 9999)} failed",
                "Traceback (most recent call last):",
                f'  File "/srv/{svc}/app/jobs.py", line {rng.randint(10, 900)}, in run',
                "    result = self.step(batch)",
                f'  File "/srv/{svc}/app/steps.py", line {rng.randint(10, 900)}, in step',
                "    rows = client.fetch(batch.cursor, timeout=30)",
                f"  {err}",
            ]
        else:
            level = rng.choice(["INFO", "INFO", "WARN", "DEBUG"])
            lines.append(f"{stamp} {level} [{svc}] batch {rng.randint(1, 400)} rows={rng.randint(0, 5000)} retry=0")
    lines += ["", "Can you tell me what is wrong? We need the export for month-end. Thanks, Priya"]
    text = "\n".join(lines)
    return text[: size - 80] + text[-80:]  # exactly ``size`` bytes (ASCII), the closing lines kept


def timed(engine: Engine, text: str, pack: object) -> tuple[float, dict]:
    """One score with the stable block warm and nothing of an earlier score kept: (wall ms, what the result says)."""
    engine.forget()  # the log's start is the same budgeted or not: no kept state may shorten the next score
    engine.hold_stable(pack)
    t0 = time.perf_counter()
    r = engine.score_ticket(text, pack)
    ms = (time.perf_counter() - t0) * 1000
    assert r.complete
    return ms, {"ticket_tokens": r.tokens.ticket, "evaluated": r.tokens.evaluated, "warnings": r.warnings}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--threads", type=int, default=None, help="CPU threads (default: all cores)")
    ap.add_argument("--n-ctx", type=int, default=4096)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--unbudgeted", type=int, default=0, metavar="N", help="also score the log N times unbudgeted")
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    ref = resolve_model(args.model)
    pack = default_pack()
    log = error_log()
    load_start, snap = load_average(), cpu_snapshot()
    engine = Engine.from_ref(ref, n_ctx=args.n_ctx, threads=args.threads)
    log_tokens = len(engine.tokenizer.encode(log))
    try:
        for text in (TWEET, log):  # warm-up, untimed: the stable block, first-call costs
            timed(engine, text, pack)
        ms: dict[str, list[float]] = {"tweet": [], "log": []}
        seen: dict[str, dict] = {}
        ratios = []
        for run in range(args.runs):
            order = ("tweet", "log") if run % 2 == 0 else ("log", "tweet")
            got = {}
            for name in order:
                got[name], seen[name] = timed(engine, TWEET if name == "tweet" else log, pack)
                ms[name].append(got[name])
            ratios.append(got["log"] / got["tweet"])
            print(f"run {run + 1}/{args.runs}: tweet {got['tweet']:.0f} ms, log {got['log']:.0f} ms", file=sys.stderr)
        unbudgeted: list[float] = []
        budget = prompt.TICKET_TOKENS
        if args.unbudgeted:
            prompt.TICKET_TOKENS = 1_000_000  # before the budget: only the context cut the log
            try:
                for _ in range(args.unbudgeted):
                    took, seen["log_unbudgeted"] = timed(engine, log, pack)
                    unbudgeted.append(took)
                    print(f"unbudgeted log {took:.0f} ms", file=sys.stderr)
            finally:
                prompt.TICKET_TOKENS = budget
    finally:
        engine.close()
    tweet, paste = statistics.median(ms["tweet"]), statistics.median(ms["log"])
    out = {
        "model": ref.name,
        "threads": args.threads or cores(),
        "n_ctx": args.n_ctx,
        "ticket_budget": budget,
        "runs": args.runs,
        "log_bytes": len(log.encode()),
        "log_tokens": log_tokens,
        "tweet_ms_median": tweet,
        "log_ms_median": paste,
        "log_over_tweet_median_ratio": statistics.median(ratios),
        "log_over_tweet_of_medians": paste / tweet,
        "target": "log at most 10x the tweet",
        "met": statistics.median(ratios) <= 10,
        "ms": ms,
        "unbudgeted_log_ms": unbudgeted,
        "unbudgeted_over_tweet": statistics.median(unbudgeted) / tweet if unbudgeted else None,
        "results": seen,
        "load_start": load_start,
        "load_end": load_average(),
        "other_cpu_share": other_cpu_share(snap, cpu_snapshot()),
    }
    text = json.dumps(out, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
