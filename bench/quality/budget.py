"""Balanced accuracy against the ticket budget on the long development sets (docs/quality.md, "The ticket budget").

For each set and each budget B, one `triage eval --train` (the same dev/train split, the same first rows, the label
readout in fanout as `triage score` scores it, eval's 1024-token context, a learned head fitted at the same budget),
run in a process of its own with `triage.scoring.prompt.TICKET_TOKENS` set to B (`none`: no budget, so a ticket is
cut only where the 1024-token context leaves no room, about 900 tokens, as eval always did). Eval's cache names a
ticket by its text as the prompts read it, so a ticket that no budget cuts is scored once for every budget.

    python bench/quality/budget.py splits                       # the dev/train splits (no model needed)
    python bench/quality/budget.py run cfpb-product helpdesk issue-kind --budgets none,512,384,256,128
    python bench/quality/budget.py table cfpb-product helpdesk issue-kind --budgets none,512,384,256,128

Each run writes bench/quality/results/budget/SET-B.json (the eval report) and SET-B.stats.json (per dev ticket:
its tokens after the cut and the ms eval's scoring took, read back from the cache; the median of each). Set
TRIAGE_HOME to keep the cache apart from yours, TRIAGE_SPLITS for the splits' folder, TRIAGE_DATASETS for the sets.
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
    from triage.evaluation.cache import ReadoutCache
    from triage.evaluation.data import read_labelled
    from triage.evaluation.runner import Scorer
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


def _ba(m: dict | None) -> str:
    if not m:
        return "–"
    lo, hi = m["balanced_accuracy_ci95"]
    return f"{m['balanced_accuracy']:.3f} ({lo:.2f}–{hi:.2f})"


def _delta(m: dict | None, ref: dict | None, first: bool) -> str:
    """Balanced accuracy's change against the first budget's (none)."""
    if first or not m or not ref:
        return ""
    return f"{m['balanced_accuracy'] - ref['balanced_accuracy']:+.3f}"


def table(sets: list[str], budgets: list[str]) -> None:
    """The markdown table of docs/quality.md: per set and criterion, per budget."""
    print(
        "| set | criterion | budget | dev / train | cut (dev) | tokens / ticket (median, mean) | ms / ticket | "
        "zero-shot | Δ | learned | Δ |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for d in sets:
        reports = {b: json.loads((OUT / f"{d}-{b}.json").read_text()) for b in budgets}
        stats = {b: json.loads((OUT / f"{d}-{b}.stats.json").read_text()) for b in budgets}
        ref = reports[budgets[0]]
        for ci, crit in enumerate(ref["criteria"]):
            base = crit["variants"]
            for b in budgets:
                c = reports[b]["criteria"][ci]
                v, s = c["variants"], stats[b]
                raw, learned = v.get("raw"), v.get("learned")

                train = reports[b].get("train") or {}
                first = b == budgets[0]
                print(
                    f"| {d} | {crit['id']} | {b} | {c['n']} / {train.get('rows_used', '–')} | {s['cut']} | "
                    f"{s['tokens_median']:.0f}, {s['tokens_mean']:.0f} | "
                    f"{s['ms_median']:.0f} | {_ba(raw)} | {_delta(raw, base.get('raw'), first)} | "
                    f"{_ba(learned)} | {_delta(learned, base.get('learned'), first)} |"
                )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("what", choices=("splits", "run", "one", "table"))
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
    elif a.what == "one":
        one(a.sets[0], a.sets[1], a.model, a.threads, a.limit)
    else:
        table(a.sets, budgets)


if __name__ == "__main__":
    main()
