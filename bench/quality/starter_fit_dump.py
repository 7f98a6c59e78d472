#!/usr/bin/env python3
"""Dump the starter, check and mapped sets' readouts (the shared cue's, or each tail's) from eval's cache to one .npz.

The check sets are ``assets/starter/check.jsonl`` (``check``), ``check-helpdesk.jsonl`` (``helpdesk``) and
``check-languages.jsonl`` (``languages``, with each row's ``lang`` and ``group``).

    python bench/quality/starter_fit_dump.py MAPPED.jsonl OUT.npz [--model NAME]

No model is run (a lazy engine tokenizes to find each ticket's cache key, :meth:`Scorer.text_key`); a ticket
missing from the cache is left out and counted. ``bench/quality/starter.py`` fills the cache.
``bench/quality/starter_fit.py`` reads the .npz.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mapped", type=Path)
    ap.add_argument("output", type=Path)
    ap.add_argument("--model", default="qwen2.5-coder-0.5b")
    ap.add_argument("--read", default=None, help="read position (default: the starter head's; tail: each criterion's)")
    args = ap.parse_args()

    from triage.domain.pack import default_pack
    from triage.domain.ticket import make_ticket
    from triage.evaluation.variants import readings
    from triage.lab.prior import PRIOR_TEXT
    from triage.learning.cache import ReadoutCache
    from triage.learning.labelled import read_labelled
    from triage.learning.scorer import Scorer
    from triage.learning.starter import STARTER_READ, starter_rows
    from triage.scoring.loader import load_engine

    root = Path(__file__).resolve().parents[2]
    pack = default_pack()
    starter = starter_rows(pack)
    check = read_labelled(root / "assets/starter/check.jsonl", pack).rows
    helpdesk = read_labelled(root / "assets/starter/check-helpdesk.jsonl", pack).rows
    languages = read_labelled(root / "assets/starter/check-languages.jsonl", pack).rows
    raw_languages = [
        json.loads(line) for line in (root / "assets/starter/check-languages.jsonl").open(encoding="utf-8")
    ]
    out_meta = {
        "languages_lang": np.array([r["lang"] for r in raw_languages]),
        "languages_group": np.array([r["group"] for r in raw_languages]),
    }
    mapped = [json.loads(line) for line in args.mapped.read_text().splitlines()]
    engine = load_engine(args.model, lazy=True)
    out: dict[str, np.ndarray] = dict(out_meta)
    with engine, ReadoutCache() as cache:
        sc = Scorer(engine, pack, cache, "label", args.read or STARTER_READ)
        sc.features = True
        sets = [
            ("starter", [r.ticket for r in starter], [r.labels for r in starter]),
            ("check", [r.ticket for r in check], [r.labels for r in check]),
            ("helpdesk", [r.ticket for r in helpdesk], [r.labels for r in helpdesk]),
            ("languages", [r.ticket for r in languages], [r.labels for r in languages]),
            ("mapped", [make_ticket(o["text"], o["id"]) for o in mapped], [o["labels"] for o in mapped]),
        ]
        for name, tickets, labels in sets:
            outs, cut = [], 0
            for t in tickets:
                key = sc.text_key(t)
                cut += key != t.sha256
                outs.append(sc.cached(key))
            have = [i for i, o in enumerate(outs) if o is not None]
            print(f"{name}: {len(tickets)} rows, {cut} cut to the ticket budget, {len(tickets) - len(have)} not cached")
            out[name + "_have"] = np.array(have)
            out[name + "_labels"] = np.array(json.dumps(labels))
            if not have:
                continue
            for c in pack.criteria:
                out[f"{name}_F_{c.id}"] = np.stack([outs[i].features[c.id] for i in have])
                out[f"{name}_lp_{c.id}"] = readings(c, [outs[i] for i in have], None).raw
        prior = sc.cached(sc.text_key(make_ticket(PRIOR_TEXT, "prior")))
        if prior is not None:
            for c in pack.criteria:
                out[f"prior_F_{c.id}"] = prior.features[c.id]
                out[f"prior_lp_{c.id}"] = readings(c, [prior], None).raw[0]
    np.savez(args.output, **out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
