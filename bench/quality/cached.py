"""The readouts (and features) that bench/quality/learn.sh left in eval's cache, for the analysis scripts.

swap_split.py, head_tfidf.py and unlabelled_prior.py score nothing: they read the label readout of a
development set's split (TRIAGE_DATASETS, default ../shared/datasets) from the cache, keyed as eval keys
it (TRIAGE_EVAL_HOW, default none@fanout: what eval scores the label readout with), at eval's
1024-token context. Splits come from TRIAGE_SPLITS.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from triage.domain.pack import load_pack
from triage.learning.cache import CacheKey, ReadoutCache
from triage.learning.labelled import read_labelled
from triage.scoring.head import FEATURES

DATA = Path(os.environ.get("TRIAGE_DATASETS", Path(__file__).resolve().parents[3] / "shared" / "datasets"))
SPLITS = os.environ.get("TRIAGE_SPLITS", "/tmp/triage-quality/splits")
HOW = os.environ.get("TRIAGE_EVAL_HOW", "none@fanout")
SETS = ("airline-sentiment", "issue-kind", "cfpb-product")
N_CTX = 1024
LIMIT = 150  # learn.sh's first 150 rows of each file

_cache: ReadoutCache | None = None


def cached_split(ds: str, part: str, *, features: bool = True) -> tuple[Any, Any, list[Any], list[Any]]:
    """(pack, its first criterion, rows, outcomes) of SPLITS/ds/part.jsonl's first rows found in the cache.

    With ``features`` only rows cached with their answer-position features are kept.
    """
    global _cache
    _cache = _cache or ReadoutCache()
    pack = load_pack(DATA / ds / "criteria.toml")
    crit = pack.criteria[0]
    found = _cache._db.execute(
        "SELECT model, prompt FROM outcome WHERE pack=? AND prompt LIKE '%chat/label' AND n_ctx=? LIMIT 1",
        (pack.hash, N_CTX),
    ).fetchone()
    if found is None:
        raise SystemExit(f"no cached label readouts of {ds} at n_ctx {N_CTX}: run bench/quality/learn.sh first")
    key = CacheKey(found[0], pack.hash, found[1], N_CTX, HOW)
    wanted = (FEATURES, [crit.id]) if features else None
    rows, outcomes = [], []
    for row in read_labelled(f"{SPLITS}/{ds}/{part}.jsonl", pack).rows[:LIMIT]:
        out = _cache.get(key, row.ticket.sha256, wanted)
        if out is not None:
            rows.append(row)
            outcomes.append(out)
    return pack, crit, rows, outcomes
