"""The starter heads triage ships (``assets/heads/``): one per catalog stand-in, still matching the pack, the
prompt format and the starter set, and deciding today as they did when they were shipped.

``scripts/ship_starter_heads.py`` fits them with the product's own starter fit and writes, beside each, a
witness: what ``triage score`` decided with the head on a few starter tickets, and what a head fitted on a slice
of the starter set alone chose on that slice. The fast tests check the keys; the model tests score and fit again.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import _installed as installed
from conftest import load_module

from triage.assets_path import asset
from triage.domain.pack import default_pack
from triage.learning.fitstore import shipped_dir, stored_starter
from triage.learning.head_file import read_head
from triage.model.catalog import load_catalog
from triage.scoring.prompt import PROMPT_VERSION

ROOT = Path(__file__).resolve().parents[1]
PROB_TOL = 0.02  # a re-score on another thread count moves probabilities by far less (float sums, one batch)


def _witnesses() -> list[dict]:
    return [json.loads(p.read_text(encoding="utf-8")) for p in sorted(shipped_dir().glob("*.witness.json"))]


def _ship() -> object:
    return load_module(ROOT / "scripts" / "ship_starter_heads.py", "ship_starter_heads")


def test_every_catalog_stand_in_ships_one_starter_head() -> None:
    shas = {e.sha256: e.name for e in load_catalog().stand_ins()}
    heads = sorted(shipped_dir().glob("*.npz"))
    assert {read_head(p).model_sha256 for p in heads} == set(shas), "run scripts/ship_starter_heads.py"
    assert len(heads) == len(shas)
    assert {w["sha256"] for w in _witnesses()} == set(shas)


@pytest.mark.parametrize("path", sorted(shipped_dir().glob("*.npz")), ids=lambda p: p.name[:16])
def test_a_shipped_head_matches_the_pack_the_prompt_format_and_the_starter_set(path: Path) -> None:
    """Fails when the pack, the prompt format's version or the starter set changed since the head was shipped:
    re-run scripts/ship_starter_heads.py."""
    pack = default_pack()
    head = read_head(path)
    assert head.kind == "starter"
    assert head.pack_hash == pack.hash, "the pack changed since this head was shipped"
    assert head.prompt_format.startswith(f"triage-prompt/{PROMPT_VERSION}:"), "the prompt format changed"
    by_id = {c.id: [o.id for o in c.options] for c in pack.criteria}
    for cid, crit in head.criteria.items():
        assert crit.options == by_id[cid], cid
    witness = json.loads(path.with_name(path.name.removesuffix(".npz") + ".witness.json").read_text("utf-8"))
    assert (witness["sha256"], witness["pack_hash"], witness["prompt_format"]) == (
        head.model_sha256,
        head.pack_hash,
        head.prompt_format,
    )
    starter_set = hashlib.sha256(asset("starter/support.jsonl").read_bytes()).hexdigest()
    assert witness["starter_sha256"] == starter_set, "the starter set changed since this head was shipped"
    assert head.report["starter"]["rows"] == sum(1 for _ in asset("starter/support.jsonl").open("rb"))


def _installed(witness: dict) -> Path:
    path = installed(f"{witness['model']}.gguf")  # the user's models, found before each test's own TRIAGE_HOME
    if path is None:
        pytest.skip(f"{witness['model']} is not installed (./scripts/setup pulls it)")
    return path


@pytest.mark.model
@pytest.mark.parametrize("witness", _witnesses(), ids=lambda w: w["model"])
def test_the_shipped_head_is_found_and_decides_as_when_it_was_shipped(witness: dict) -> None:
    """`triage score` in a new home, the starter on: no fit, every covered criterion says `starter`, and the
    witness tickets get the choices (and, within PROB_TOL, the probabilities) recorded when the head shipped."""
    model = _installed(witness)
    ship = _ship()
    assert [r.ticket.id for r in ship.witness_rows(default_pack())] == list(witness["scored"])
    now = ship.score_witness(model, default_pack(), 1)  # raises when `triage score` fitted a head instead of finding it
    for tid, then in witness["scored"].items():
        for cid, was in then.items():
            got = now[tid][cid]
            assert got["source"] == was["source"], (tid, cid)
            assert got["source"] == ("starter" if cid in witness["criteria"] else "zero-shot")
            np.testing.assert_allclose(got["probabilities"], was["probabilities"], atol=PROB_TOL, err_msg=tid)
            if sorted(was["probabilities"])[-1] - sorted(was["probabilities"])[-2] > 2 * PROB_TOL:
                assert got["choice"] == was["choice"], (tid, cid)


@pytest.mark.model
def test_a_slice_of_the_starter_set_refits_to_the_same_choices(tmp_path: Path) -> None:
    """The starter fit on every 15th starter row, scored afresh (nothing cached) with smollm2: the same choices
    as the slice head fitted when the heads were shipped."""
    witness = next((w for w in _witnesses() if w["model"] == "smollm2-135m"), None)
    assert witness is not None, "smollm2-135m ships a starter head"
    model = _installed(witness)
    ship = _ship()
    from triage.scoring.loader import load_engine

    pack = default_pack()
    rows = ship.starter_slice(pack)
    assert [r.ticket.id for r in rows] == witness["slice"]["ids"]
    with load_engine(str(model), threads=1) as engine:
        assert stored_starter(engine, pack) is not None and stored_starter(engine, pack).parent == shipped_dir()
        now = ship.fit_slice(engine, pack, rows, tmp_path / "fresh.sqlite3")
    then = witness["slice"]["choices"]
    cells = [(tid, cid) for tid in then for cid in then[tid]]
    differ = [
        (tid, cid, then[tid][cid], now[tid].get(cid)) for tid, cid in cells if now[tid].get(cid) != then[tid][cid]
    ]
    assert cells and not differ, differ
