"""``--criteria`` against a whole-pack run: how far a subset's probabilities are from the whole pack's, per mode.

For each ticket, the whole support pack is scored once, then each subset (every criterion alone, and
two larger subsets) with a fresh ticket id each time (so no kept thread state is reused); every option
of every criterion scored is compared with the same option in the whole-pack run. Prints one JSON line
per mode: the largest |Δp|, where it was, the largest by subset size, and the runs whose choice changed.

    .venv/bin/python bench/criteria_drift.py --model smollm2-135m --modes fanout,serial
    .venv/bin/python bench/criteria_drift.py --model qwen2.5-coder-0.5b --modes fanout

In serial each tail runs after the same resident prefix, so a subset is the whole run's numbers for
those criteria; in fanout the ticket and the tails are one batch, and fewer tails make another batch
(docs/engine.md, "Exactness").
"""

from __future__ import annotations

import argparse
import json

TICKETS = [
    "I was charged twice, refund me now",
    "Where is my parcel? The tracking page has said 'in transit' for nine days.",
    "The app crashes every time I open the settings page on Android 14.",
    "Please close my account and delete all of my personal data.",
]


def main() -> None:
    from triage.domain.pack import default_pack
    from triage.domain.ticket import make_ticket
    from triage.lab import score as lab
    from triage.lab.options import LabOptions
    from triage.scoring.loader import load_engine

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--modes", default="fanout,serial")
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    pack = default_pack()
    ids = [c.id for c in pack.criteria]
    subsets = [(c,) for c in ids] + [("urgency", "queue"), ("queue", "sentiment", "type")]
    n = 0
    with load_engine(args.model, n_ctx=2048, threads=args.threads) as engine:
        for mode in args.modes.split(","):
            worst, where, by_size, changed = 0.0, None, {}, []
            for ti, text in enumerate(TICKETS):
                whole = lab.score_ticket(engine, make_ticket(text, f"w-{mode}-{ti}"), pack, LabOptions(mode=mode))
                want = {(c.id, o.id): o.probability for c in whole.criteria for o in c.options}
                choice = {c.id: c.choice for c in whole.criteria}
                for subset in subsets:
                    n += 1
                    options = LabOptions(mode=mode, criteria=subset)
                    got = lab.score_ticket(engine, make_ticket(text, f"s-{mode}-{n}"), pack, options)
                    for c in got.criteria:
                        if c.choice != choice[c.id]:
                            changed.append([ti, list(subset), c.id, choice[c.id], c.choice])
                        for o in c.options:
                            d = abs(o.probability - want[(c.id, o.id)])
                            by_size[len(subset)] = max(by_size.get(len(subset), 0.0), d)
                            if d > worst:
                                worst, where = d, [ti, list(subset), c.id, o.id]
            print(
                json.dumps(
                    {
                        "model": args.model,
                        "mode": mode,
                        "tickets": len(TICKETS),
                        "subsets": len(subsets),
                        "max_abs_diff": round(worst, 6),
                        "at": where,
                        "by_subset_size": {k: round(v, 6) for k, v in by_size.items()},
                        "choice_changed": changed,
                    }
                ),
                flush=True,
            )


if __name__ == "__main__":
    main()
