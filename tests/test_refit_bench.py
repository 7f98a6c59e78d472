"""bench/refit.py on a real small model: it times both fit policies and finds their heads the same."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import MIXED, labelled_rows, load_module

BENCH = Path(__file__).resolve().parents[1] / "bench" / "refit.py"


def test_refit_bench_times_both_policies_and_their_heads_agree(smollm2_path: Path, tmp_path: Path) -> None:
    mod = load_module(BENCH, "refit_bench")
    pack = tmp_path / "mixed.toml"
    pack.write_text(MIXED, encoding="utf-8")
    data = tmp_path / "labelled.jsonl"
    rows = labelled_rows()
    data.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    out = tmp_path / "refit.json"
    argv = [str(data), "--pack", str(pack), "--model", str(smollm2_path), "--n-ctx", "512"]
    assert mod.main([*argv, "--sizes", f"20,{len(rows)},999", "--repeat", "2", "-o", str(out)]) == 0
    got = json.loads(out.read_text(encoding="utf-8"))
    assert [r["rows"] for r in got["results"]] == [20, len(rows)]  # a size past the rows is left out
    for r in got["results"]:
        assert set(r["seconds"]) == {"whole grid", "now"} and all(len(v) == 2 for v in r["seconds"].values())
        assert all(s > 0 for v in r["seconds"].values() for s in v)
        # only the labelled criterion is learned; its C is the same either way, and so are its probabilities
        assert set(r["C"]) == {"topic"} and r["C"]["topic"][0] == r["C"]["topic"][1]
        assert r["max_abs_dp"] < 1e-6
