#!/usr/bin/env python3
"""How far the starter fit's scoring is from this CPU's floor: llama.cpp's own prompt rate on the same tokens.

    python bench/fit_floor.py [--model PATH] [--rows 30] [--threads 2] [--json OUT]

The starter head's fit (triage/learning/starter.py) scores every starter ticket once at the shared cue: the
stable block stays resident, and each ticket evaluates its ticket block and the cue. This script takes every
``len(rows)/N``-th starter ticket and, interleaved ticket by ticket in one process, times

- **triage**: ``Engine.readouts_and_features`` at the starter's read position, as the fit calls it;
- **raw**: llama-cpp-python's ``Llama.eval`` of exactly the tokens that score evaluated (the same prompt after
  the same resident stable block), on a second context of the same GGUF with the same threads.

It then counts (tokenizer only, nothing decoded) the tokens the whole set's fit evaluates and prints the floor:
those tokens at the raw rate measured here (the median over the sampled rows of tokens per second), against the
issue's 3-minute bar; the machine's load before and after. Results: docs/quality.md, "The starter head's fit time".
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=str(Path("~/.local/share/triage/models/qwen2.5-coder-0.5b.gguf").expanduser()))
    ap.add_argument("--rows", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()

    import tempfile

    os.environ["TRIAGE_HOME"] = tempfile.mkdtemp(prefix="fit-floor-")  # no cache, no stored state
    from llama_cpp import Llama

    from triage.domain.pack import default_pack
    from triage.learning.starter import STARTER_READ, starter_rows
    from triage.scoring.cue import CUES, cue_name
    from triage.scoring.engine import ScoreOptions
    from triage.scoring.loader import load_engine

    load0 = os.getloadavg()
    pack = default_pack()
    rows = starter_rows(pack)
    step = max(1, len(rows) // args.rows)
    sample = rows[::step][: args.rows]
    engine = load_engine(args.model, threads=args.threads)
    raw = Llama(args.model, n_ctx=engine.n_ctx, n_threads=args.threads, n_batch=512, verbose=False)
    builder = engine.builder(pack, "label")
    cue = cue_name(STARTER_READ)
    assert cue is not None
    stable = list(builder.stable_tokens)

    def prompt_of(text: str) -> list[int]:
        cut = builder.cut(text, engine.n_ctx, ())
        cue_text, suffix = CUES[cue]
        return list(builder.cue_tokens(cut.text, cue_text, suffix=suffix))

    raw.eval(stable)  # resident, as the engine's stable block
    engine.readouts_and_features(sample[0].ticket, pack, ScoreOptions(), read=STARTER_READ)  # warm both
    per: list[dict[str, float]] = []
    for i, row in enumerate(sample):
        prompt = prompt_of(row.ticket.text)
        assert prompt[: len(stable)] == stable
        rest = prompt[len(stable) :]
        order = ("triage", "raw") if i % 2 == 0 else ("raw", "triage")  # alternate who goes first
        took: dict[str, float] = {}
        for who in order:
            t0 = time.perf_counter()
            if who == "triage":
                engine.forget()
                engine.readouts_and_features(row.ticket, pack, ScoreOptions(), read=STARTER_READ)
            else:
                raw.n_tokens = len(stable)  # the cells past the stable block are removed by eval
                raw.eval(rest)
            took[who] = time.perf_counter() - t0
        per.append({"tokens": len(rest), **took})
    load1 = os.getloadavg()

    total_tokens = sum(len(prompt_of(r.ticket.text)) - len(stable) for r in rows)
    sample_tokens = sum(p["tokens"] for p in per)
    # medians over rows: a row that shared the CPU with something else moves a sum, not a median
    raw_rate = statistics.median(p["tokens"] / p["raw"] for p in per)
    triage_rate = statistics.median(p["tokens"] / p["triage"] for p in per)
    ratios = [p["triage"] / p["raw"] for p in per]
    out = {
        "model": Path(args.model).name,
        "threads": args.threads,
        "rows_sampled": len(per),
        "starter_rows": len(rows),
        "load_before": load0,
        "load_after": load1,
        "sample_tokens": sample_tokens,
        "raw_tokens_per_s": round(raw_rate, 1),
        "triage_tokens_per_s": round(triage_rate, 1),
        "triage_over_raw_median": round(statistics.median(ratios), 3),
        "set_tokens_evaluated": total_tokens,
        "floor_s": round(total_tokens / raw_rate, 1),
        "projected_fit_s": round(total_tokens / triage_rate, 1),
        "rate_needed_for_180_s": round(total_tokens / 180, 1),
        "per_row": per,
    }
    print(json.dumps({k: v for k, v in out.items() if k != "per_row"}, indent=1))
    if args.json:
        args.json.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    engine.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
