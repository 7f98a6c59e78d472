"""How fast ``triage learn`` scores its rows, before and after, side by side in one run (bench/README.md,
"Learning throughput").

Learn's time is its scoring: every row through :class:`triage.learning.scorer.Scorer` and
:func:`~triage.learning.scorer.score_rows` (the label readout, fanout, the answer position's features, the
readout cache), then a fit of seconds. This scores the same rows in three ways, one engine, interleaved chunk by
chunk (the order alternating, so machine noise hits each alike), each way with a readout cache of its own (so
every row is scored) and ticket ids of its own (so no way reuses another's kept thread state):

* ``before``: as learn scored before the readout cache's batched commits (commit 7a25202): each row's outcome
  and features committed to the cache at once (two commits a row), one ticket per decode;
* ``commits``: what learn does now: the cache's writes committed together, at most a second apart, one ticket
  per decode;
* ``packed``: and the rows not cached scored several in one decode, up to 512 tokens
  (:func:`triage.lab.packed.score_packed` with ``budget``): a bench-only
  way, as in bench/packed.py. Learn has no packing: its numbers differ from one ticket's decode, which score
  and the app apply a head to, by the rounding of another batch shape. Its outcomes go to a cache of their own.

For each read position (``tail``, ``shared:answer``) and each set of rows (short, long) it reports rows per
second per way, the median over chunks of each way's time against ``before`` (wall time, and this process's
CPU time, which other work on a shared machine moves less; a commit's wait for the disk is wall time only),
and how far the packed numbers are from the lone decode's (largest difference of an option's log-probability
and of a feature, and how many rows' zero-shot choices differ).

    PYTHONPATH=$PWD python bench/learn_throughput.py --model smollm2-135m --threads 1 \\
        --short ../shared/datasets/airline-sentiment/tickets.jsonl --n-short 30 \\
        --long ../shared/datasets/cfpb-product/tickets.jsonl --n-long 15 --chunk 5 --json /tmp/learn-throughput.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

WAYS = {"before": (0.0, 0), "commits": (1.0, 0), "packed": (1.0, 512)}  # (commit_every_s, pack_tokens)
PACK_ROWS = 32  # rows handed to triage.lab.packed.score_packed at once (it packs them by its token budget)


def score_packed(scorer: Any, rows: list[Any], budget: int) -> Any:
    """:func:`triage.learning.scorer.score_rows` with the rows not cached scored several in one decode
    (:func:`triage.lab.packed.score_packed` with ``budget``), cached through ``scorer`` as learn caches
    its outcomes."""
    from triage.errors import TriageError
    from triage.lab.packed import score_packed as packed_stream
    from triage.learning.cache import Outcome
    from triage.learning.labelled import BadRow
    from triage.learning.scorer import Scored

    out = Scored()
    opts = scorer.options  # the lab's options the scorer scores with
    for start in range(0, len(rows), PACK_ROWS):
        part = rows[start : start + PACK_ROWS]
        keys = [scorer.text_key(r.ticket) for r in part]
        hits = [scorer.cached(k) for k in keys]
        misses = [r.ticket for r, h in zip(part, hits, strict=True) if h is None]
        stream = packed_stream(
            scorer.engine,
            misses,
            scorer.pack,
            opts,
            features=True,
            budget=budget,
            read=None if scorer.read == "tail" else scorer.read,
        )
        for row, key, hit in zip(part, keys, hits, strict=True):
            if hit is None:
                _, done = next(stream)
                if isinstance(done, TriageError) or not done.result.complete:
                    why = done.message if isinstance(done, TriageError) else "; ".join(done.result.warnings)
                    out.failed.append(BadRow(row.line, f"line {row.line} (id {row.id}): not scored: {why}"))
                    continue
                warnings = [w for w in done.result.warnings if not w.startswith("stable prefix changed")]
                hit = Outcome(done.readouts, warnings, done.result.timing.total_ms, done.features or None)
                scorer.store(key, hit)
            out.rows.append(row)
            out.outcomes.append(hit)
    return out


def read_rows(path: str, n: int) -> list[str]:
    """The first ``n`` texts of a JSON Lines file."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            out.append(json.loads(line)["text"])
        if len(out) == n:
            break
    return out


def run_set(
    eng: Any, pack: Any, texts: list[str], read: str, chunk: int, folder: Path, tag: str, kept: list[Any]
) -> dict[str, Any]:
    import numpy as np

    from triage.domain.ticket import make_ticket
    from triage.learning.cache import ReadoutCache
    from triage.learning.labelled import LabelledRow
    from triage.learning.scorer import Scorer, score_rows

    ways = list(WAYS)
    name = f"{tag}-{read.replace(':', '_')}"
    caches = {w: ReadoutCache(folder / f"{name}-{w}.sqlite3", commit_every_s=WAYS[w][0]) for w in ways}
    scorers = {}
    for w in ways:
        scorers[w] = Scorer(eng, pack, caches[w], "label", read)
        scorers[w].features = True
    seconds: dict[str, list[float]] = {w: [] for w in ways}
    cpu: dict[str, list[float]] = {w: [] for w in ways}  # this process's CPU time: what contention moves least
    outcomes: dict[str, list[Any]] = {w: [] for w in ways}
    commits = {w: 0 for w in ways}
    try:
        for c, start in enumerate(range(0, len(texts), chunk)):
            part = texts[start : start + chunk]
            order = ways[c % len(ways) :] + ways[: c % len(ways)]  # each way first in turn
            for w in order:
                rows = [
                    LabelledRow(start + i + 1, make_ticket(t, f"{w}:{read}:{start + i}"), {})
                    for i, t in enumerate(part)
                ]
                eng.hold_stable(pack)  # as between two rows of a run: the stable block resident
                t0, c0 = time.perf_counter(), time.process_time()
                budget = WAYS[w][1]
                got = score_packed(scorers[w], rows, budget) if budget else score_rows(scorers[w], rows)
                caches[w].commit()  # what a way keeps in memory is written within its own time
                seconds[w].append(time.perf_counter() - t0)
                cpu[w].append(time.process_time() - c0)
                if got.failed:
                    raise SystemExit(f"{w}: {got.failed[0].message}")
                outcomes[w] += got.outcomes
    finally:
        for w in ways:
            caches[w].close()
            commits[w] = caches[w].commits
    n = len(texts)
    if not kept:
        kept += outcomes["before"]
    lp_diff = feat_diff = 0.0
    flips = 0
    for a, b in zip(outcomes["before"], outcomes["packed"], strict=True):
        for cid, reads in a.readouts.items():
            la, lb = reads[0][1], b.readouts[cid][0][1]
            lp_diff = max(lp_diff, float(np.max(np.abs(la - lb))))
            flips += int(np.argmax(la) != np.argmax(lb))
            feat_diff = max(feat_diff, float(np.max(np.abs(a.features[cid] - b.features[cid]))))
    return {
        "rows": n,
        "read": read,
        "rows_per_s": {w: round(n / sum(seconds[w]), 3) for w in ways},
        "median_chunk_ratio_to_before": {
            w: round(statistics.median(s / b for s, b in zip(seconds[w], seconds["before"], strict=True)), 3)
            for w in ways
        },
        "cpu_ms_per_row": {w: round(1000 * sum(cpu[w]) / n, 1) for w in ways},
        "median_chunk_cpu_ratio_to_before": {
            w: round(statistics.median(s / b for s, b in zip(cpu[w], cpu["before"], strict=True)), 3) for w in ways
        },
        "chunks": len(seconds["before"]),
        "commits": commits,
        "packed_vs_before": {
            "max_abs_logprob_diff": round(lp_diff, 4),
            "max_abs_feature_diff": round(feat_diff, 4),
            "choices_differ": flips,
            "choices": sum(len(o.readouts) for o in outcomes["before"]),
        },
    }


def cache_overhead(outcomes: list[Any], folder: Path) -> dict[str, Any]:
    """What storing one row's outcome and features costs, before (two commits a row) and now (committed
    together, at most a second apart): the per-row work learn does besides the decode, on real outcomes."""
    from triage.learning.cache import CacheKey, ReadoutCache
    from triage.scoring.head import FEATURES

    key = CacheKey("b" * 64, "pack", "format", 1024, "none@fanout")
    out: dict[str, Any] = {}
    for way, every in (("before", 0.0), ("commits", 1.0)):
        with ReadoutCache(folder / f"overhead-{way}.sqlite3", commit_every_s=every) as cache:
            times = []
            for i, o in enumerate(outcomes):
                t0 = time.perf_counter()
                cache.put(key, f"{i:064d}", o)
                cache.put_features(key, f"{i:064d}", FEATURES, o.features)
                times.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            cache.commit()
            last = time.perf_counter() - t0
            out[way] = {
                "median_ms_per_row": round(1000 * statistics.median(times), 2),
                "mean_ms_per_row": round(1000 * (sum(times) + last) / len(times), 2),
                "commits": cache.commits,
            }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n-ctx", type=int, default=1024, help="learn's default")
    ap.add_argument("--pack", help="criteria pack (default: the built-in support pack)")
    ap.add_argument("--short", required=True)
    ap.add_argument("--n-short", type=int, default=60)
    ap.add_argument("--long", required=True)
    ap.add_argument("--n-long", type=int, default=30)
    ap.add_argument("--reads", default="tail,shared:answer")
    ap.add_argument("--chunk", type=int, default=10)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()

    from triage.domain.pack import resolve_pack
    from triage.model.resolve import resolve_model
    from triage.scoring.engine import Engine

    pack = resolve_pack(args.pack)
    eng = Engine.from_ref(resolve_model(args.model), n_ctx=args.n_ctx, threads=args.threads)
    load = os.getloadavg()
    results = []
    kept: list[Any] = []  # the "before" outcomes of the first set: real sizes for cache_overhead
    with tempfile.TemporaryDirectory(prefix="learn-throughput-") as tmp:
        for tag, path, n in (("short", args.short, args.n_short), ("long", args.long, args.n_long)):
            texts = read_rows(path, n)
            for read in args.reads.split(","):
                got = run_set(eng, pack, texts, read, args.chunk, Path(tmp), tag, kept)
                got["set"] = tag
                results.append(got)
                print(json.dumps(got), flush=True)
        overhead = cache_overhead(kept, Path(tmp))
        print(json.dumps({"cache_overhead": overhead}), flush=True)
    report = {
        "model": args.model,
        "threads": args.threads,
        "n_ctx": args.n_ctx,
        "pack": pack.name,
        "load_start": [round(x, 2) for x in load],
        "load_end": [round(x, 2) for x in os.getloadavg()],
        "cpus": os.cpu_count(),
        "results": results,
        "cache_overhead": overhead,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
