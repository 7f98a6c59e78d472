"""The stable-prefix cache file: hit, miss, corruption, wrong key, LRU and TTL (no model needed)."""

from __future__ import annotations

import os
import time
from pathlib import Path

from triage.scoring.stable_file import StableCache

TOKENS = tuple(range(100, 160))
STATE = bytes(range(256)) * 64  # 16 KiB stand-in payload


def fresh(folder: Path, **kw: object) -> StableCache:
    return StableCache(folder, **kw)  # type: ignore[arg-type]


def test_round_trip_across_instances(tmp_path: Path) -> None:
    fresh(tmp_path).put("k1", TOKENS, STATE)
    other = fresh(tmp_path)  # a new process: nothing in memory
    assert other.get("k1", TOKENS) == STATE
    assert other.stats.disk_hits == 1
    assert other.get("k1", TOKENS) == STATE
    assert other.stats.memory_hits == 1


def test_miss_on_other_key_or_tokens(tmp_path: Path) -> None:
    fresh(tmp_path).put("k1", TOKENS, STATE)
    c = fresh(tmp_path)
    assert c.get("k2", TOKENS) is None
    assert c.get("k1", TOKENS[:-1]) is None  # token count differs: rejected, deleted
    assert c.stats.rejected == 1
    assert not c.path("k1").exists()


def corrupt_and_check(tmp_path: Path, mutate) -> StableCache:  # type: ignore[no-untyped-def]
    fresh(tmp_path).put("k", TOKENS, STATE)
    path = fresh(tmp_path).path("k")
    data = bytearray(path.read_bytes())
    path.write_bytes(bytes(mutate(data)))
    c = fresh(tmp_path)
    assert c.get("k", TOKENS) is None
    assert c.stats.rejected == 1
    assert not path.exists(), "a corrupt file is deleted so it is recomputed"
    return c


def test_truncated_file(tmp_path: Path) -> None:
    corrupt_and_check(tmp_path, lambda d: d[: len(d) // 2])


def test_flipped_payload_byte(tmp_path: Path) -> None:
    def flip(d: bytearray) -> bytearray:
        d[-100] ^= 0xFF
        return d

    corrupt_and_check(tmp_path, flip)


def test_garbage_and_empty_files(tmp_path: Path) -> None:
    corrupt_and_check(tmp_path, lambda d: b"not a cache file at all")
    corrupt_and_check(tmp_path / "e", lambda d: b"")


def test_wrong_model_key_in_header(tmp_path: Path) -> None:
    # A file renamed to another model's key must not be trusted.
    c = fresh(tmp_path)
    c.put("modelA-pack", TOKENS, STATE)
    os.replace(c.path("modelA-pack"), c.path("modelB-pack"))
    other = fresh(tmp_path)
    assert other.get("modelB-pack", TOKENS) is None
    assert other.stats.rejected == 1


def test_lru_eviction_by_size(tmp_path: Path) -> None:
    c = fresh(tmp_path, max_bytes=3 * len(STATE) + 3 * 200)
    for i in range(3):
        c.put(f"k{i}", TOKENS, STATE)
        old = time.time() - 100 + i
        os.utime(c.path(f"k{i}"), (old, old))
    fresh(tmp_path).get("k0", TOKENS)  # k0 used most recently now
    c.put("k3", TOKENS, STATE)  # over the cap: the least recently used (k1) goes
    names = sorted(p.stem for p in tmp_path.glob("*.kvstate"))
    assert names == ["k0", "k2", "k3"]
    assert c.stats.evicted == 1


def test_ttl(tmp_path: Path) -> None:
    c = fresh(tmp_path, ttl_s=60)
    c.put("old", TOKENS, STATE)
    past = time.time() - 3600
    os.utime(c.path("old"), (past, past))
    c.put("new", TOKENS, STATE)
    assert not c.path("old").exists() and c.path("new").exists()


def test_unwritable_folder_is_not_fatal(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    c = fresh(blocker / "sub")  # cannot mkdir under a file
    c.put("k", TOKENS, STATE)  # logs, does not raise
    assert c.get("k", TOKENS) == STATE  # still served from memory
    assert not list(tmp_path.glob("**/*.tmp"))
