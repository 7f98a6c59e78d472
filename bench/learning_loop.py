"""Replay a labelled set as an agent would: see the decision, answer it, and let the read-out re-learn every N labels.

For each ticket in file order, the decision *shown* is what ``triage score`` would show
with the head learned so far (zero-shot before the first fit): the head is applied to the
ticket's answer-position features exactly as the engine applies it. The gold label is then
recorded, and every ``--refit-every`` labels the head is fitted again (the same fit as
``triage learn``: CV, balanced, backoff for rare options, temperature) on every label so
far. The shown decision is judged against the label before the label is used
(prequential), so no head is judged on the labels it was fitted on.

Each ticket is scored once (the label readout in fanout, as ``triage score`` runs it,
through eval's readout cache, so a second run scores nothing); the replay itself only
applies and fits heads. Prints the agreement curve, zero-shot against learned, and the
time each re-fit took; writes the numbers as JSON and the curve as an SVG. Beside them, a
TF-IDF + logistic regression loop (eval's baseline, balanced) is replayed on the same labels and
schedule: where it does not rise either, the labels hold little that text can tell.

  python bench/learning_loop.py ../shared/datasets/airline-sentiment --model qwen2.5-coder-0.5b --limit 300 \
      --refit-every 20 -o bench/results/learning-loop-airline
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape

import numpy as np

WINDOW = 50  # the moving window of the curve, in labels


def replay(
    pack: Any,
    rows: list[Any],
    features: dict[str, np.ndarray],
    raw: dict[str, np.ndarray],
    *,
    refit_every: int,
    fit: Any,
    baseline: Any = None,
) -> dict[str, Any]:
    """The prequential replay over rows in order (see the module docstring).

    Args:
        features, raw: per criterion, (n, F) features and (n, K) raw log-probs of every row.
        fit: ``fit(rows_so_far_indices) -> Head | None`` (the head to show from then on).
        baseline: optional ``baseline(rows_so_far_indices) -> {criterion: (n,) option index of every row}``,
            fitted on the same schedule and labels as the head; its decision for a row counts only while
            it was fitted on earlier rows (zero-shot before its first fit, as the loop).
    """
    n = len(rows)
    crit_ids = [c.id for c in pack.criteria]
    shown = {c: np.full(n, -1) for c in crit_ids}
    zero = {c: np.full(n, -1) for c in crit_ids}
    gold = {c: np.full(n, -1) for c in crit_ids}
    source = {c: [""] * n for c in crit_ids}
    other = {c: np.full(n, -1) for c in crit_ids}
    head = None
    predicted: dict[str, np.ndarray] = {}
    refits: list[dict[str, Any]] = []
    for i, row in enumerate(rows):
        for _ci, crit in enumerate(pack.criteria):
            cid = crit.id
            if cid not in row.labels:
                continue
            lp = raw[cid][i]
            zero[cid][i] = int(np.argmax(lp))
            if head is not None and head.covers(cid):
                shown[cid][i] = int(np.argmax(head.apply(cid, features[cid][i], lp)))
                source[cid][i] = "learned"
            else:
                shown[cid][i] = zero[cid][i]
                source[cid][i] = "zero-shot"
            other[cid][i] = int(predicted[cid][i]) if cid in predicted else zero[cid][i]
            gold[cid][i] = [o.id for o in crit.options].index(row.labels[cid])
        if (i + 1) % refit_every == 0 and i + 1 < n:
            t0 = time.perf_counter()
            head = fit(list(range(i + 1)))
            seconds = time.perf_counter() - t0
            if baseline is not None:
                predicted = baseline(list(range(i + 1)))
            refits.append(
                {
                    "labels": i + 1,
                    "seconds": seconds,
                    "criteria": sorted(head.criteria) if head is not None else [],
                }
            )
    from triage.evaluation.metrics import balanced_accuracy

    curves = {}
    for cid, k in ((c.id, len(c.options)) for c in pack.criteria):
        have = gold[cid] >= 0
        g, s, z = gold[cid][have], shown[cid][have], zero[cid][have]
        curves[cid] = {
            "labels": int(have.sum()),
            "learned_agree": (s == g).astype(int).tolist(),
            "zero_shot_agree": (z == g).astype(int).tolist(),
            "gold": g.tolist(),
            "source": [x for x, h in zip(source[cid], have, strict=True) if h],
            **({"baseline_agree": (other[cid][have] == g).astype(int).tolist()} if baseline is not None else {}),
            # agreement averaged over the labels' options: a readout that always says the commonest option
            # agrees as often as that option is labelled, but is at chance (1/K) here
            "balanced": {
                "zero_shot": balanced_accuracy(g.tolist(), z.tolist(), k),
                "learned": balanced_accuracy(g.tolist(), s.tolist(), k),
                **(
                    {"baseline": balanced_accuracy(g.tolist(), other[cid][have].tolist(), k)}
                    if baseline is not None
                    else {}
                ),
            },
        }
    return {"curves": curves, "refits": refits}


def windowed(flags: list[int], window: int = WINDOW) -> list[float]:
    """Agreement over the last ``window`` labels at each label (fewer at the start)."""
    a = np.asarray(flags, dtype=float)
    c = np.concatenate([[0.0], np.cumsum(a)])
    return [float((c[i + 1] - c[max(0, i + 1 - window)]) / (i + 1 - max(0, i + 1 - window))) for i in range(len(a))]


def windowed_balanced(flags: list[int], gold: list[int], window: int = WINDOW) -> list[float]:
    """Balanced agreement over the last ``window`` labels at each label: the mean, over the options labelled in
    the window, of the agreement on that option's labels (a readout that always says one option scores 1/K)."""
    a, g = np.asarray(flags, dtype=float), np.asarray(gold)
    out = []
    for i in range(len(a)):
        lo = max(0, i + 1 - window)
        ww, gg = a[lo : i + 1], g[lo : i + 1]
        out.append(float(np.mean([ww[gg == c].mean() for c in np.unique(gg)])))
    return out


def svg(curves: dict[str, Any], title: str, window: int = WINDOW) -> str:
    """Agreement over the last ``window`` labels against labels seen, plain (top) and balanced over the options
    (bottom): the learned loop, zero-shot and (when replayed) the TF-IDF loop, per criterion."""
    left, top, pw, ph, gap, legend_w = 60, 56, 600, 200, 60, 230
    w, h = left + pw + legend_w, top + 2 * ph + gap + 44
    colors = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#b279a2"]
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        'font-family="system-ui, sans-serif" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
        f'<text x="{left}" y="22" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    n_max = max((c["labels"] for c in curves.values()), default=1) or 1
    panels = (
        ("plain", top, f"agreement over the last {window} labels"),
        ("balanced", top + ph + gap, f"balanced over the options, last {window} labels"),
    )
    for _kind, y0, label in panels:
        parts.append(f'<text x="{left}" y="{y0 - 8}" font-weight="bold">{escape(label)}</text>')
        for k in range(0, 11, 2):
            y = y0 + ph - ph * k / 10
            parts.append(f'<line x1="{left}" x2="{left + pw}" y1="{y:.1f}" y2="{y:.1f}" stroke="#e5e5e5"/>')
            parts.append(f'<text x="{left - 8}" y="{y + 4:.1f}" text-anchor="end">{k * 10}%</text>')
        for k in range(0, 6):
            x = left + pw * k / 5
            parts.append(f'<text x="{x:.1f}" y="{y0 + ph + 16}" text-anchor="middle">{round(n_max * k / 5)}</text>')
    parts.append(f'<text x="{left + pw / 2}" y="{h - 6}" text-anchor="middle">labels seen</text>')
    legend_y = top + 4
    for ci, (cid, c) in enumerate(curves.items()):
        color = colors[ci % len(colors)]
        series = [("learned_agree", "", "learned loop"), ("zero_shot_agree", "5,4", "zero-shot")]
        if "baseline_agree" in c:
            series.append(("baseline_agree", "1,3", "TF-IDF loop"))
        for key, dash, name in series:
            dashed = f' stroke-dasharray="{dash}"' if dash else ""  # an empty dash array is not valid SVG
            for kind, y0, _label in panels:
                if kind == "balanced" and "gold" not in c:
                    continue
                ys = windowed(c[key], window) if kind == "plain" else windowed_balanced(c[key], c["gold"], window)
                pts = " ".join(f"{left + pw * (i + 1) / n_max:.1f},{y0 + ph - ph * v:.1f}" for i, v in enumerate(ys))
                parts.append(
                    f'<g class="series" data-series="{escape(cid)}:{name}:{kind}"><polyline points="{pts}" '
                    f'fill="none" stroke="{color}" stroke-width="2"{dashed}/></g>'
                )
            lx = left + pw + 20
            parts.append(
                f'<line x1="{lx}" x2="{lx + 25}" y1="{legend_y}" y2="{legend_y}" stroke="{color}" '
                f'stroke-width="2"{dashed}/>'
            )
            parts.append(f'<text x="{lx + 30}" y="{legend_y + 4}">{escape(cid)}: {name}</text>')
            legend_y += 16
    parts.append("</svg>")
    return "\n".join(parts)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "dataset", type=Path, help="a folder with criteria.toml and tickets.jsonl, or a labelled JSONL file"
    )
    ap.add_argument("--pack", type=Path, default=None, help="the criteria pack (default: DATASET/criteria.toml)")
    ap.add_argument("--model", default=None, help="model name or .gguf path (default: triage's default order)")
    ap.add_argument("--limit", type=int, default=300, help="replay the first N rows (default 300)")
    ap.add_argument("--refit-every", type=int, default=20, help="fit the head again after every N labels (default 20)")
    ap.add_argument("--n-ctx", type=int, default=1024, help="context size (default 1024, as learn and eval)")
    ap.add_argument(
        "--baseline",
        choices=["tfidf", "none"],
        default="tfidf",
        help="replay a TF-IDF + logistic regression loop beside the head, on the same labels and schedule "
        "(default tfidf; needs scikit-learn): how much any text classifier finds in these labels",
    )
    ap.add_argument("-o", "--output", type=Path, default=None, help="write OUTPUT.json and OUTPUT.svg")
    args = ap.parse_args(argv)
    if args.baseline == "tfidf":
        from triage.evaluation.baseline import need_sklearn

        need_sklearn("--baseline tfidf (use --baseline none)")

    from triage.bench.labelled import score_labelled
    from triage.evaluation.labelled_runs import report_consoles

    out, err = report_consoles()
    data = score_labelled(
        args.dataset,
        pack=args.pack,
        model=args.model,
        n_ctx=args.n_ctx,
        limit=args.limit,
        part="replay",
        console=err,
        notice=lambda s: err.print(f"triage: {s}", markup=False),
    )
    pack, rows, feats, raw = data.pack, data.rows, data.features, data.raw

    def fit(idx: list[int]) -> Any:
        head = data.fit(idx, "replay")
        return head if head is not None and head.criteria else None

    def tfidf(idx: list[int]) -> dict[str, np.ndarray]:
        from triage.evaluation.baseline import fit_predict

        texts = [r.ticket.text for r in rows]
        out_: dict[str, np.ndarray] = {}
        for crit in pack.criteria:
            have = [i for i in idx if crit.id in rows[i].labels]
            ids = [o.id for o in crit.options]
            y = [ids.index(rows[i].labels[crit.id]) for i in have]
            if len(set(y)) < 2:  # one option labelled so far: nothing to learn, zero-shot stays
                continue
            out_[crit.id] = np.argmax(fit_predict([texts[i] for i in have], y, texts, len(ids)), axis=1)
        return out_

    result = replay(
        pack,
        rows,
        feats,
        raw,
        refit_every=args.refit_every,
        fit=fit,
        baseline=tfidf if args.baseline == "tfidf" else None,
    )
    result.update(
        {
            "dataset": args.dataset.name,
            "model": data.model,
            "rows": len(rows),
            "n_ctx": args.n_ctx,
            "refit_every": args.refit_every,
            "window": WINDOW,
            "scoring_s": data.seconds,
            "cache": {"hits": data.hits, "scored": data.scored},
        }
    )
    secs = [r["seconds"] for r in result["refits"]]
    for cid, c in result["curves"].items():
        n = c["labels"]
        first = slice(0, min(WINDOW, n))
        last = slice(max(0, n - WINDOW), n)
        z, learned = np.asarray(c["zero_shot_agree"]), np.asarray(c["learned_agree"])
        out.print(
            f"{pack.name}/{cid}: {n} labels · zero-shot agreement {z.mean():.3f} overall · learned loop "
            f"{learned.mean():.3f} overall · first {WINDOW}: zero-shot {z[first].mean():.3f} / loop "
            f"{learned[first].mean():.3f} · last {WINDOW}: zero-shot "
            f"{z[last].mean():.3f} / loop {learned[last].mean():.3f} · balanced over the options: zero-shot "
            f"{c['balanced']['zero_shot']:.3f} / loop {c['balanced']['learned']:.3f}",
            markup=False,
            highlight=False,
        )
        if "baseline_agree" in c:
            b = np.asarray(c["baseline_agree"])
            out.print(
                f"{pack.name}/{cid}: TF-IDF loop (same labels and schedule) {b.mean():.3f} overall · first "
                f"{WINDOW} {b[first].mean():.3f} · last {WINDOW} {b[last].mean():.3f} · balanced "
                f"{c['balanced']['baseline']:.3f}",
                markup=False,
                highlight=False,
            )
    if secs:
        out.print(
            f"re-fits: {len(secs)} · median {np.median(secs):.2f} s · max {max(secs):.2f} s "
            f"(scoring the {len(rows)} tickets took {data.seconds:.1f} s, {data.scored} scored, {data.hits} cached)",
            markup=False,
            highlight=False,
        )
    if args.output:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.with_suffix(".json").write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        title = f"{pack.name}: the learned loop against zero-shot ({data.model}, re-fit every {args.refit_every})"
        args.output.with_suffix(".svg").write_text(svg(result["curves"], title), encoding="utf-8")
        out.print(f"wrote {args.output.with_suffix('.json')} and {args.output.with_suffix('.svg')}", markup=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
