"""Long-ticket read-outs on one set: the shared cue's last position against the hidden state pooled over the ticket.

docs/quality.md, "The shared read position". Each ticket is decoded once, as the shared read position is (stable
block resident, then the ticket block and the `answer` cue in one decode), with every ticket token marked as an
output, so that one decode gives:

* ``cue``: the cue's last position (what a shared head reads);
* ``mean``: the logit image (the same token set as the head's features: a linear image of the hidden state)
  averaged over every ticket-block token;
* ``strided16``: the same averaged over 16 evenly spaced ticket-block positions (what a cheap product version would
  mark as outputs);
* ``cue+mean``: both, side by side, in one regression.

Each is fitted as ``triage learn`` fits (triage.learning.learn.fit_criterion, rare options backed off) on the first N
training rows and measured on the first N dev rows, then with the roles swapped; TF-IDF beside it. It also times, on a
few tickets, the cue decode alone against it with 16 and with every ticket token as an output.

    .venv/bin/python bench/quality/pooled.py --set cfpb-product --limit 100 \
        --json bench/quality/results/pooled-cfpb.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from triage.domain.pack import load_pack  # noqa: E402
from triage.domain.ticket import make_ticket  # noqa: E402
from triage.evaluation import metrics  # noqa: E402
from triage.evaluation.baseline import fit_predict  # noqa: E402
from triage.learning.learn import fit_criterion  # noqa: E402
from triage.model.seq import Seq  # noqa: E402
from triage.scoring.cue import cue_tokens  # noqa: E402
from triage.scoring.engine import Engine  # noqa: E402
from triage.scoring.readout import read  # noqa: E402

VARIANTS = ("cue", "mean", "strided16", "cue+mean")


def rows_of(path: Path, cid: str, limit: int) -> list[dict]:
    rows = [json.loads(line) for line in path.open()]
    return [r for r in rows if cid in r.get("labels", {})][:limit]


def features(eng: Engine, pack, text: str, timing: bool) -> tuple[dict[str, np.ndarray], np.ndarray, dict]:
    builder = eng.builder(pack)
    crit = pack.criteria[0]
    orders = [[tuple(range(len(c.options)))] for c in pack.criteria]
    cut = builder.build(text, orders, n_ctx=eng.n_ctx).ticket_text
    full = cue_tokens(builder, cut, "answer")
    n = eng.native
    eng.hold_stable(pack)
    s = len(builder.stable_tokens)
    rest = full[s:]
    k = 7  # the cue and the turn's end: not pooled
    pool, cue = rest[:-k], rest[-k:]
    times = {}
    if timing:
        for name, pieces in (
            ("cue only", [Seq("c", 0, s, rest)]),
            ("16 outputs", _strided(s, pool, 16) + [Seq("cue", 0, s + len(pool), cue)]),
            ("every token", [Seq("pool", 0, s, pool, every=True), Seq("cue", 0, s + len(pool), cue)]),
        ):
            t0 = time.perf_counter()
            n.decode(pieces)
            times[name] = (time.perf_counter() - t0) * 1000
            n.seq_rm(0, s, -1)
    out = n.decode([Seq("pool", 0, s, pool, every=True), Seq("cue", 0, s + len(pool), cue)])
    n.seq_rm(0, s, -1)
    ids = eng.feature_ids
    rows = out["pool"][:, ids].astype(np.float64)
    idx = np.unique(np.linspace(0, len(pool) - 1, 16).round().astype(int))
    c = out["cue"][ids].astype(np.float64)
    got = {"cue": c, "mean": rows.mean(0), "strided16": rows[idx].mean(0)}
    got["cue+mean"] = np.concatenate([c, got["mean"]])
    plan = eng.answer_plans(pack)[0]
    lp = read(out["cue"], plan.first).position_logprobs
    assert len(lp) == len(crit.options)
    return got, lp, times


def _strided(s: int, pool: tuple[int, ...], m: int) -> list[Seq]:
    """``pool`` as pieces of one sequence whose last tokens are m evenly spaced positions (outputs)."""
    cuts = sorted(set(np.linspace(0, len(pool) - 1, m).round().astype(int).tolist()))
    pieces, start = [], 0
    for j, end in enumerate(cuts):
        pieces.append(Seq(("p", j), 0, s + start, pool[start : end + 1]))
        start = end + 1
    if start < len(pool):
        pieces.append(Seq(("p", "rest"), 0, s + start, pool[start:]))
    return pieces


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", default="cfpb-product")
    ap.add_argument("--splits", default="/tmp/triage-quality/splits")
    ap.add_argument("--datasets", default=str(Path(__file__).resolve().parents[3] / "shared" / "datasets"))
    ap.add_argument("--model", default=str(Path.home() / ".local/share/triage/models/qwen2.5-coder-0.5b.gguf"))
    ap.add_argument("--limit", type=int, default=100)
    ap.add_argument("--n-ctx", type=int, default=1024)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--time-tickets", type=int, default=8)
    ap.add_argument("--json", metavar="PATH")
    args = ap.parse_args()
    pack = load_pack(Path(args.datasets) / args.set / "criteria.toml")
    crit = pack.criteria[0]
    ids = [o.id for o in crit.options]
    parts = {p: rows_of(Path(args.splits) / args.set / f"{p}.jsonl", crit.id, args.limit) for p in ("dev", "train")}
    eng = Engine(args.model, n_ctx=args.n_ctx, threads=args.threads)
    data: dict[str, dict] = {}
    timings: list[dict] = []
    for p, rows in parts.items():
        feats = {v: [] for v in VARIANTS}
        lps, ys, texts = [], [], []
        for i, r in enumerate(rows):
            t = make_ticket(r["text"], r.get("id"))
            got, lp, times = features(eng, pack, t.text, timing=p == "dev" and i < args.time_tickets)
            if times:
                timings.append(times)
            for v in VARIANTS:
                feats[v].append(got[v])
            lps.append(lp)
            ys.append(ids.index(r["labels"][crit.id]))
            texts.append(t.text)
            if i % 20 == 0:
                print(f"{p} {i}/{len(rows)}", file=sys.stderr)
        data[p] = {"x": {v: np.stack(f) for v, f in feats.items()}, "lp": np.stack(lps), "y": ys, "text": texts}
    eng.close()
    report: dict = {"set": args.set, "limit": args.limit, "n_ctx": args.n_ctx, "roles": {}}
    for fit_on, test_on in (("train", "dev"), ("dev", "train")):
        a, b = data[fit_on], data[test_on]
        res = {}
        for v in VARIANTS:
            head, outcome = fit_criterion(crit, a["x"][v], a["lp"], a["y"], rare="backoff")
            if head is None:
                res[v] = {"refused": outcome.refused}
                continue
            out = np.stack([head.apply(x, lp) for x, lp in zip(b["x"][v], b["lp"], strict=True)])
            res[v] = _brief(metrics.summarize(out, b["y"], len(ids)))
        res["tfidf"] = _brief(metrics.summarize(fit_predict(a["text"], a["y"], b["text"], len(ids)), b["y"], len(ids)))
        report["roles"][f"fit {fit_on}, test {test_on}"] = res
    if timings:
        report["decode_ms_median"] = {k: statistics.median(t[k] for t in timings) for k in timings[0]}
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


def _brief(m: dict) -> dict:
    keep = ("n", "balanced_accuracy", "balanced_accuracy_ci95", "accuracy", "ece", "ece_floor")
    return {k: m[k] for k in keep}


if __name__ == "__main__":
    raise SystemExit(main())
