"""Per-criterion-tail heads against shared-position heads, from eval's cache (docs/quality.md, "Shared read").

Scores nothing: reads the label readouts and features that `triage eval --train ... --read tail` and
`--read shared:CUE` left in eval's cache (TRIAGE_HOME's), for each development set's split (TRIAGE_SPLITS), the
first --limit rows of each part. For every criterion it fits a head as `triage learn` does (rare options backed
off) in both split roles (fit on train, test on dev; fit on dev, test on train) and prints balanced accuracy with
its 95% bootstrap interval, plain accuracy, ECE, TF-IDF's, and the tokens each read evaluates per warm ticket
(stable block resident; computed from the prompts, as fanout evaluates them).

    TRIAGE_HOME=/tmp/fewer/home .venv/bin/python bench/quality/shared_table.py --json bench/quality/results/shared.json
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from triage.domain.pack import load_pack  # noqa: E402
from triage.evaluation import metrics  # noqa: E402
from triage.evaluation.baseline import fit_predict  # noqa: E402
from triage.evaluation.runner import gold  # noqa: E402
from triage.evaluation.variants import readings  # noqa: E402
from triage.learning.cache import CacheKey, ReadoutCache  # noqa: E402
from triage.learning.labelled import read_labelled  # noqa: E402
from triage.learning.learn import fit_criterion  # noqa: E402
from triage.learning.scorer import stack_features  # noqa: E402
from triage.scoring.cue import cue_name, share  # noqa: E402
from triage.scoring.head import FEATURES  # noqa: E402

DATA = Path(os.environ.get("TRIAGE_DATASETS", Path(__file__).resolve().parents[3] / "shared" / "datasets"))
SPLITS = os.environ.get("TRIAGE_SPLITS", "/tmp/triage-quality/splits")


def cached(cache: ReadoutCache, pack, part: str, how: str, limit: int) -> tuple[list, list]:
    found = cache._db.execute(
        "SELECT model, prompt FROM outcome WHERE pack=? AND orderings=? LIMIT 1", (pack.hash, how)
    ).fetchone()
    if found is None:
        return [], []
    key = CacheKey(found[0], pack.hash, found[1], 1024, how)
    rows, outs = [], []
    for row in read_labelled(f"{SPLITS}/{pack.source.split('/')[-2]}/{part}.jsonl", pack).rows[:limit]:
        out = cache.get(key, row.ticket.sha256, (FEATURES, [c.id for c in pack.criteria]))
        if out is not None:
            rows.append(row)
            outs.append(out)
    return rows, outs


def measure(crit, fit: tuple[list, list], test: tuple[list, list]) -> dict:
    (rf, of), (rt, ot) = fit, test
    k = len(crit.options)
    x_fit, lp_fit = stack_features(of, crit.id), readings(crit, of, None).raw
    head, note = fit_criterion(crit, x_fit, lp_fit, gold(rf, crit), rare="backoff")  # as `triage learn`
    if head is None:
        return {"refused": note.refused}
    x, lp, y = stack_features(ot, crit.id), readings(crit, ot, None).raw, gold(rt, crit)
    out = np.stack([head.apply(f, row) for f, row in zip(x, lp, strict=True)])
    m = metrics.summarize(out, y, k)
    return {key: m[key] for key in ("n", "balanced_accuracy", "balanced_accuracy_ci95", "accuracy", "ece", "ece_floor")}


def tfidf(crit, fit: list, test: list) -> dict:
    k = len(crit.options)
    lp = fit_predict([r.ticket.text for r in fit], gold(fit, crit), [r.ticket.text for r in test], k)
    m = metrics.summarize(lp, gold(test, crit), k)
    return {key: m[key] for key in ("balanced_accuracy", "balanced_accuracy_ci95", "accuracy")}


def tokens(engine, pack, rows: list, read: str) -> float:
    """Median tokens evaluated per warm ticket (stable block resident), fanout, every criterion learned."""
    b = engine.builder(pack)
    got = []
    for r in rows:
        p = b.build(r.ticket.text, [[tuple(range(len(c.options)))] for c in pack.criteria], n_ctx=1024)
        if read != "tail":
            p, _ = share(p, b, list(range(len(pack.criteria))), cue_name(read))
        got.append(len(p.prefix) - len(p.stable) + sum(len(p.tail(s)) for s in p.prompts))
    return statistics.median(got)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sets", default="airline-sentiment:150,issue-kind:60,cfpb-product:100,helpdesk:150")
    ap.add_argument("--reads", default="tail,shared:answer,shared:end")
    ap.add_argument("--model", default=str(Path.home() / ".local/share/triage/models/qwen2.5-coder-0.5b.gguf"))
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    from triage.scoring.engine import Engine

    engine = Engine(args.model, n_ctx=1024, threads=1)
    report = []
    with ReadoutCache() as cache:
        for spec in args.sets.split(","):
            ds, limit = spec.split(":")
            pack = load_pack(DATA / ds / "criteria.toml")
            for read in args.reads.split(","):
                how = "none@fanout" + ("" if read == "tail" else f"+{read}")
                dev, train = cached(cache, pack, "dev", how, int(limit)), cached(cache, pack, "train", how, int(limit))
                if not dev[0] or not train[0]:
                    continue
                toks = tokens(engine, pack, dev[0] + train[0], read)
                for crit in pack.criteria:
                    entry = {
                        "set": ds,
                        "criterion": crit.id,
                        "read": read,
                        "n": [len(train[0]), len(dev[0])],
                        "tokens_per_ticket": toks,
                        "fit train, test dev": measure(crit, train, dev),
                        "fit dev, test train": measure(crit, dev, train),
                        "tfidf": {"fit train, test dev": tfidf(crit, train[0], dev[0])},
                    }
                    entry["tfidf"]["fit dev, test train"] = tfidf(crit, dev[0], train[0])
                    report.append(entry)
                    print(_line(entry), flush=True)
    engine.close()
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n")
    return 0


def _fmt(m: dict) -> str:
    if "refused" in m:
        return "refused"
    lo, hi = m["balanced_accuracy_ci95"]
    return (
        f"{m['balanced_accuracy']:.3f} ({lo:.2f}–{hi:.2f}) acc {m['accuracy']:.3f} ECE {m.get('ece', float('nan')):.3f}"
    )


def _line(e: dict) -> str:
    a, b = e["fit train, test dev"], e["fit dev, test train"]
    ta, tb = e["tfidf"]["fit train, test dev"], e["tfidf"]["fit dev, test train"]
    return (
        f"| {e['set']} | {e['criterion']} | {e['read']} | {e['n'][0]} / {e['n'][1]} | {_fmt(a)} | {_fmt(b)} | "
        f"{ta['balanced_accuracy']:.3f} / {tb['balanced_accuracy']:.3f} | {e['tokens_per_ticket']:.0f} |"
    )


if __name__ == "__main__":
    raise SystemExit(main())
