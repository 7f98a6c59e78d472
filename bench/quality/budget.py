"""Balanced accuracy against the ticket budget on the long development sets (docs/quality.md, "The ticket budget").

For each set and each budget B, one `triage eval --train` (the same dev/train split, the same first rows, the label
readout in fanout as `triage score` scores it, eval's 1024-token context, a learned head fitted at the same budget),
run in a process of its own with `triage.scoring.prompt.TICKET_TOKENS` set to B (`none`: no budget, so a ticket is
cut only where the 1024-token context leaves no room, about 900 tokens, as eval always did). Eval's cache names a
ticket by its text as the prompts read it, so a ticket that no budget cuts is scored once for every budget.

    python bench/quality/budget.py splits                       # the dev/train splits (no model needed)
    python bench/quality/budget.py run cfpb-product helpdesk issue-kind --budgets none,512,384,256,128
    python bench/quality/budget.py time cfpb-product helpdesk issue-kind --budgets none,512,384,256,128 --tickets 8
    python bench/quality/budget.py table cfpb-product helpdesk issue-kind --budgets none,512,384,256,128

Each run writes bench/quality/results/budget/SET-B.json (the eval report) and SET-B.stats.json (per dev ticket:
its tokens after the cut and the ms eval's scoring took, read back from the cache; the median of each: those ms
come from runs on a machine whose load changed by the hour, so the table's ms per ticket come from `time`, which
scores the first dev tickets of each set at every budget side by side in one process). The table
also counts the dev tickets whose zero-shot choice moved against no budget (from the cache: it scores nothing).
Set TRIAGE_HOME to keep the cache apart from yours, TRIAGE_SPLITS for the splits' folder, TRIAGE_DATASETS for the
sets.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("TRIAGE_DATASETS", ROOT.parent / "shared" / "datasets"))
SPLITS = Path(os.environ.get("TRIAGE_SPLITS", "/tmp/triage-quality/splits"))
OUT = Path(os.environ.get("TRIAGE_BUDGET_OUT", ROOT / "bench" / "quality" / "results" / "budget"))
LIMITS = {"cfpb-product": 100, "helpdesk": 100, "issue-kind": 60}  # first rows of each part (dev and train)
NONE = 1_000_000  # "no budget": only the context cuts


def budget_value(name: str) -> int:
    return NONE if name == "none" else int(name)


def splits(sets: list[str]) -> None:
    for d in sets:
        if (SPLITS / d / "dev.jsonl").exists():
            continue
        subprocess.run(
            [sys.executable, "-m", "triage.cli", "eval", str(DATA / d / "tickets.jsonl")]
            + ["--pack", str(DATA / d / "criteria.toml"), "--split", "0.5", "--save-split", str(SPLITS / d)],
            check=True,
            cwd=ROOT,
        )


def run(sets: list[str], budgets: list[str], model: str, threads: int, limit: int | None) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for d in sets:
        for b in budgets:
            if (OUT / f"{d}-{b}.stats.json").exists():
                print(f"== {d} budget {b}: done already", flush=True)
                continue
            print(f"== {d} budget {b}", flush=True)
            cmd = [sys.executable, __file__, "one", d, b, "--model", model, "--threads", str(threads)]
            cmd += ["--limit", str(limit)] if limit else []
            with open(OUT / f"{d}-{b}.log", "w") as log:
                subprocess.run(cmd, check=True, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT)


def one(d: str, b: str, model: str, threads: int, limit: int | None) -> None:
    """One eval at budget ``b`` (in this process: the budget is set before anything reads it), then its stats."""
    sys.path.insert(0, str(ROOT))
    import triage.scoring.prompt as prompt

    prompt.TICKET_TOKENS = budget_value(b)
    from triage.cli import main

    n = limit or LIMITS[d]
    args = ["eval", str(SPLITS / d / "dev.jsonl"), "--train", str(SPLITS / d / "train.jsonl")]
    args += ["--pack", str(DATA / d / "criteria.toml"), "--model", model, "--threads", str(threads)]
    args += ["--limit", str(n), "--train-limit", str(n), "--readout", "label", "--rare-options", "freeze"]
    args += ["--curve", "none", "--json", str(OUT / f"{d}-{b}.json")]
    rc = main(args)
    if rc:
        raise SystemExit(rc)
    from triage.domain.pack import load_pack
    from triage.learning.cache import ReadoutCache
    from triage.learning.labelled import read_labelled
    from triage.learning.scorer import Scorer
    from triage.scoring.loader import load_engine

    pack = load_pack(DATA / d / "criteria.toml")
    rows = read_labelled(str(SPLITS / d / "dev.jsonl"), pack).rows[:n]
    with load_engine(model, n_ctx=1024, threads=threads, lazy=True) as engine, ReadoutCache() as cache:
        scorer = Scorer(engine, pack, cache, "label")
        scorer.features = True
        builder = engine.builder(pack, "label")
        tokens, ms, cut = [], [], 0
        for row in rows:
            got = builder.cut(row.ticket.text, engine.n_ctx, row.ticket.messages)
            tokens.append(got.tokens)
            cut += got.text != row.ticket.text
            out = scorer.cached(scorer.text_key(row.ticket))
            if out is not None:
                ms.append(out.ms)
        room = builder.ticket_room(engine.n_ctx)
    stats = {
        "set": d,
        "budget": b,
        "ticket_room": room,
        "dev_rows": len(rows),
        "tokens_median": statistics.median(tokens),
        "tokens_mean": statistics.fmean(tokens),
        "cut": cut,
        "ms_median": statistics.median(ms) if ms else None,
        "ms_rows": len(ms),
    }
    (OUT / f"{d}-{b}.stats.json").write_text(json.dumps(stats, indent=1) + "\n")


def timing(sets: list[str], budgets: list[str], model: str, threads: int, n: int) -> None:
    """ms per ticket at each budget, side by side in one process: the first ``n`` dev tickets of each set, every
    budget in turn on each (the order rotated per ticket), one engine with eval's context, the stable block warm."""
    sys.path.insert(0, str(ROOT))
    import time

    import triage.scoring.prompt as prompt
    from triage.domain.pack import load_pack
    from triage.learning.labelled import read_labelled
    from triage.scoring.loader import load_engine

    out: dict[str, dict[str, list[float]]] = {}
    keep = prompt.TICKET_TOKENS
    with load_engine(model, n_ctx=1024, threads=threads) as engine:
        try:
            for d in sets:
                pack = load_pack(DATA / d / "criteria.toml")
                rows = read_labelled(str(SPLITS / d / "dev.jsonl"), pack).rows[:n]
                engine.hold_stable(pack)
                got: dict[str, list[float]] = {b: [] for b in budgets}
                for i, row in enumerate(rows):
                    for b in budgets[i % len(budgets) :] + budgets[: i % len(budgets)]:
                        prompt.TICKET_TOKENS = budget_value(b)
                        engine.forget()
                        engine.hold_stable(pack)
                        t0 = time.perf_counter()
                        engine.score_ticket(row.ticket, pack)
                        got[b].append((time.perf_counter() - t0) * 1000)
                    print(f"{d}: ticket {i + 1}/{len(rows)}", file=sys.stderr, flush=True)
                out[d] = got
        finally:
            prompt.TICKET_TOKENS = keep
    summary = {
        d: {b: {"median_ms": statistics.median(v), "mean_ms": statistics.fmean(v), "ms": v} for b, v in got.items()}
        for d, got in out.items()
    }
    (OUT / "timing.json").write_text(json.dumps({"tickets": n, "threads": threads, "sets": summary}, indent=1) + "\n")


def _ba(m: dict | None) -> str:
    if not m:
        return "–"
    lo, hi = m["balanced_accuracy_ci95"]
    return f"{m['balanced_accuracy']:.3f} ({lo:.2f}–{hi:.2f})"


def _ms(t: dict | None) -> str:
    """ms per ticket from the side-by-side timing: median (mean)."""
    return f"{t['median_ms']:,.0f} ({t['mean_ms']:,.0f})" if t else "–"


def _delta(m: dict | None, ref: dict | None, first: bool) -> str:
    """Balanced accuracy's change against the first budget's (none)."""
    if first or not m or not ref:
        return ""
    return f"{m['balanced_accuracy'] - ref['balanced_accuracy']:+.3f}"


def zero_shot_choices(d: str, budgets: list[str], rows_n: int, model: str) -> dict[str, list[tuple[int, ...]]]:
    """Per budget, each dev row's zero-shot choices (the readout's argmax per criterion), from the cache."""
    sys.path.insert(0, str(ROOT))
    import numpy as np

    import triage.scoring.prompt as prompt
    from triage.domain.pack import load_pack
    from triage.learning.cache import ReadoutCache
    from triage.learning.labelled import read_labelled
    from triage.learning.scorer import Scorer
    from triage.scoring.loader import load_engine

    pack = load_pack(DATA / d / "criteria.toml")
    rows = read_labelled(str(SPLITS / d / "dev.jsonl"), pack).rows[:rows_n]
    out: dict[str, list[tuple[int, ...]]] = {}
    keep = prompt.TICKET_TOKENS
    with load_engine(model, n_ctx=1024, threads=1, lazy=True) as engine, ReadoutCache() as cache:
        scorer = Scorer(engine, pack, cache, "label")
        try:
            for b in budgets:
                prompt.TICKET_TOKENS = budget_value(b)
                got = []
                for row in rows:
                    o = scorer.cached(scorer.text_key(row.ticket))
                    assert o is not None, f"{d} budget {b}: {row.id} is not in the cache"
                    got.append(tuple(int(np.argmax(o.readouts[c.id][0][1])) for c in pack.criteria))
                out[b] = got
        finally:
            prompt.TICKET_TOKENS = keep
    return out


def table(sets: list[str], budgets: list[str], model: str) -> None:
    """The markdown table of docs/quality.md: per set and criterion, per budget."""
    print(
        "| set | criterion | budget | dev / train | cut (dev) | tokens / ticket (median, mean) | "
        "ms / ticket (median, mean) | zero-shot | Δ | changed | learned | Δ |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for d in sets:
        reports = {b: json.loads((OUT / f"{d}-{b}.json").read_text()) for b in budgets}
        stats = {b: json.loads((OUT / f"{d}-{b}.stats.json").read_text()) for b in budgets}
        choices = zero_shot_choices(d, budgets, stats[budgets[0]]["dev_rows"], model)
        timed = (
            json.loads((OUT / "timing.json").read_text())["sets"].get(d, {}) if (OUT / "timing.json").exists() else {}
        )
        ref = reports[budgets[0]]
        for ci, crit in enumerate(ref["criteria"]):
            base = crit["variants"]
            for b in budgets:
                c = reports[b]["criteria"][ci]
                v, s = c["variants"], stats[b]
                raw, learned = v.get("raw"), v.get("learned")
                train = reports[b].get("train") or {}
                first = b == budgets[0]
                changed = sum(x[ci] != y[ci] for x, y in zip(choices[b], choices[budgets[0]], strict=True))
                print(
                    f"| {d} | {crit['id']} | {b} | {c['n']} / {train.get('rows_used', '–')} | {s['cut']} | "
                    f"{s['tokens_median']:.0f}, {s['tokens_mean']:.0f} | "
                    f"{_ms(timed.get(b))} | {_ba(raw)} | {_delta(raw, base.get('raw'), first)} | "
                    f"{'' if first else changed} | {_ba(learned)} | {_delta(learned, base.get('learned'), first)} |"
                )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("splits", "run", "one", "time", "table"))
    p.add_argument("--tickets", type=int, default=8, help="time: dev tickets of each set to time")
    p.add_argument("sets", nargs="*", default=list(LIMITS))
    p.add_argument("--budgets", default="none,512,384,256,128")
    p.add_argument("--model", default=os.environ.get("TRIAGE_EVAL_MODEL", "qwen2.5-coder-0.5b"))
    p.add_argument("--threads", type=int, default=int(os.environ.get("TRIAGE_EVAL_THREADS", "1")))
    p.add_argument("--limit", type=int, help="rows of each part (default: 100 for cfpb, helpdesk; 60 for issue-kind)")
    a = p.parse_args()
    budgets = a.budgets.split(",")
    if a.what == "splits":
        splits(a.sets)
    elif a.what == "run":
        splits(a.sets)
        run(a.sets, budgets, a.model, a.threads, a.limit)
    elif a.what == "time":
        timing(a.sets, budgets, a.model, a.threads, a.tickets)
    elif a.what == "one":
        one(a.sets[0], a.sets[1], a.model, a.threads, a.limit)
    else:
        table(a.sets, budgets, a.model)


if __name__ == "__main__":
    main()
