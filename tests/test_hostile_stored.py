"""Class 4 of the hardening issue (23): every stored file triage loads is checked before it is trusted.

A stored head or calibration is found by name on every run, so one damaged file used to
break every score until the user found and deleted it. Now it is moved aside, named in
one line, and scoring goes on. Sizes and widths are checked before anything is
decompressed or allocated. CLI cases run ``triage`` in a subprocess (the small model,
one thread).
"""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from conftest import MINI_PACK, assert_clean, run_triage

from triage.domain.pack import PackError, load_pack
from triage.errors import InputError
from triage.lab import score as lab
from triage.lab.options import LabOptions
from triage.learning.fitstore import calibrations_dir, head_name, heads_dir
from triage.learning.head_file import read_head, write_head
from triage.scoring.calibrate import read_calibration
from triage.scoring.head import CriterionHead, Head
from triage.scoring.stable_file import StableCache

TICKET = "I am furious: you charged me twice and nobody answers."


@pytest.fixture()
def pack_file(mini_pack: Path) -> Path:
    return mini_pack


def score(home: Path, model: Path, pack: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_triage(
        ["score", "--model", str(model), "--threads", "1", "--pack", str(pack), "--format", "json", *extra],
        home,
        stdin=TICKET,
    )


def mini_head(sha256: str, fmt: str, n_vocab: int, n_embd: int, pack_file: Path) -> Head:
    pack = load_pack(pack_file)
    from triage.scoring.head import feature_ids

    n_feat = len(feature_ids(n_vocab, n_embd))
    coef = np.zeros((2, n_feat + 2), np.float32)
    return Head(
        sha256,
        pack.hash,
        fmt,
        n_vocab,
        n_embd,
        {"mood": CriterionHead(["angry", "calm"], ["angry", "calm"], coef, np.zeros(2))},
    )


def stored_head_for(engine: Any, pack_file: Path) -> Path:
    """A valid head for the small model and the mini pack, stored where `score` looks."""
    fmt = engine.format_for("label").id
    head = mini_head(engine.sha256, fmt, engine.native.n_vocab, engine.native.n_embd, pack_file)
    return write_head(head, heads_dir() / head_name(head.model_sha256, head.pack_hash, fmt))


def flip_deflate(path: Path, member: str) -> None:
    """Flip bytes in the middle of one member's deflate stream (the zip's directory stays whole)."""
    with zipfile.ZipFile(path) as zf:
        info = zf.getinfo(member)
    data = bytearray(path.read_bytes())
    at = info.header_offset  # the local header: 30 bytes, then the name and the extra field
    name_len, extra_len = (int.from_bytes(data[at + k : at + k + 2], "little") for k in (26, 28))
    start = at + 30 + name_len + extra_len
    for k in range(start + 2, start + min(info.compress_size - 2, 40)):
        data[k] ^= 0xFF
    path.write_bytes(bytes(data))


def zip_with(members: dict[str, bytes], path: Path) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for name, blob in members.items():
            zf.writestr(name, blob)
    return path


def npy(array: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, array, allow_pickle=False)
    return buf.getvalue()


def meta_member(n_vocab: Any, n_embd: Any, count: int = 128) -> bytes:
    from triage.learning.head_file import SCHEMA
    from triage.scoring.head import FEATURES

    meta = {
        "schema": SCHEMA, "model_sha256": "0" * 64, "pack_hash": "p", "prompt_format": "f",
        "features": {"kind": FEATURES, "n_vocab": n_vocab, "n_embd": n_embd, "count": count},
        "criteria": [{"id": "mood", "options": ["angry", "calm"], "classes": ["angry", "calm"]}],
    }  # fmt: skip
    return npy(np.array(json.dumps(meta)))


# -- heads ------------------------------------------------------------------------------------


@pytest.mark.model
def test_a_bit_flipped_stored_head_is_moved_aside_and_scoring_goes_on(
    smollm2_engine: Any, smollm2_path: Path, triage_home: Path, pack_file: Path
) -> None:
    stored = stored_head_for(smollm2_engine, pack_file)
    flip_deflate(stored, "c0_coef.npy")
    proc = score(triage_home, smollm2_path, pack_file)
    assert_clean(proc)
    assert proc.returncode == 0, proc.stderr[-2000:]
    notes = [line for line in proc.stderr.splitlines() if "moved it aside" in line]
    assert len(notes) == 1 and stored.name in notes[0], proc.stderr
    assert not stored.exists() and list(stored.parent.glob(stored.name + ".bad-*"))
    assert json.loads(proc.stdout)["criteria"][0]["source"] == "zero-shot"
    again = score(triage_home, smollm2_path, pack_file)  # the next run does not see it at all
    assert again.returncode == 0 and "damaged" not in again.stderr


@pytest.mark.model
def test_a_damaged_head_for_another_model_is_moved_aside_too(
    smollm2_engine: Any, smollm2_path: Path, triage_home: Path, pack_file: Path
) -> None:
    other = mini_head("f" * 64, smollm2_engine.format_for("label").id, 1000, 64, pack_file)
    path = write_head(other, heads_dir() / head_name(other.model_sha256, other.pack_hash, other.prompt_format))
    flip_deflate(path, "c0_coef.npy")
    proc = score(triage_home, smollm2_path, pack_file)
    assert_clean(proc)
    assert proc.returncode == 0 and "moved it aside" in proc.stderr, proc.stderr[-2000:]


def test_a_zip_bomb_member_is_refused_before_it_is_decompressed(tmp_path: Path) -> None:
    # 64 MB of zeros in a member where the meta's shapes allow about 5 KB.
    bomb = zip_with(
        {
            "meta.npy": meta_member(1000, 64),
            "c0_coef.npy": npy(np.zeros(16 << 20, np.float32)),
            "c0_intercept.npy": npy(np.zeros(2)),
        },
        tmp_path / "bomb.npz",
    )
    assert bomb.stat().st_size < 200_000
    tracemalloc.start()
    try:
        with pytest.raises(InputError, match="declares") as info:
            read_head(bomb)
        _now, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20, f"{peak:,} bytes allocated: the member was decompressed"
    assert "c0_coef.npy" in info.value.message


@pytest.mark.slow  # writes a 280 MiB archive
def test_an_archive_declaring_more_than_any_head_is_refused(tmp_path: Path) -> None:
    members = {"meta.npy": meta_member(1000, 64), **{f"c{i}_coef.npy": b"\0" * (70 << 20) for i in range(4)}}
    with pytest.raises(InputError, match="once unpacked"):
        read_head(zip_with(members, tmp_path / "big.npz"))


@pytest.mark.parametrize(("n_vocab", "n_embd"), [(10**12, 10**11), (151936, 10**11), (0, 64), (True, 64), ("64", 64)])
def test_widths_that_no_model_has_are_refused_before_allocating(tmp_path: Path, n_vocab: Any, n_embd: Any) -> None:
    path = zip_with({"meta.npy": meta_member(n_vocab, n_embd)}, tmp_path / "wide.npz")
    with pytest.raises(InputError, match="a model's is a whole number"):
        read_head(path)


def test_a_head_for_another_width_is_refused_before_its_weights_are_read(tmp_path: Path, pack_file: Path) -> None:
    head = mini_head("0" * 64, "f", 151936, 1024, pack_file)
    path = write_head(head, tmp_path / "h.npz")
    flip_deflate(path, "c0_coef.npy")  # proves the weights are never read: they would not decompress
    with pytest.raises(InputError, match="width 1024 ≠ the model's 49152 × 576"):
        read_head(path, shape=(49152, 576))


# -- calibrations ---------------------------------------------------------------------------


DEEP = "[" * 5000 + "]" * 5000


@pytest.mark.parametrize(
    "text",
    [
        DEEP,
        '{"schema": "triage.calibration/1", "criteria": ' + DEEP + "}",
        '{"criteria": {"a": {"temperature": 1' + "0" * 5000 + "}}}",
    ],
)
def test_a_calibration_nested_deep_or_with_huge_numbers_is_a_clear_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "cal.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match="nested|digits") as info:
        read_calibration(path)
    assert "RecursionError" not in info.value.message


@pytest.mark.parametrize("temperature", ["0", "-1", "1e999", '"1"', "true"])
def test_a_calibration_with_a_nonsense_temperature_is_refused(tmp_path: Path, temperature: str) -> None:
    path = tmp_path / "cal.json"
    path.write_text(
        '{"schema": "triage.calibration/1", "model_sha256": "x", "pack_hash": "p", "prompt_format": "f",'
        ' "criteria": {"mood": {"temperature": ' + temperature + ', "bias": {"angry": 0}}}}',
        encoding="utf-8",
    )
    with pytest.raises(InputError, match="malformed"):
        read_calibration(path)


@pytest.mark.model
def test_a_damaged_stored_calibration_is_moved_aside_and_scoring_goes_on(
    smollm2_path: Path, triage_home: Path, pack_file: Path
) -> None:
    folder = calibrations_dir()
    folder.mkdir(parents=True)
    (folder / "deep.json").write_text(DEEP, encoding="utf-8")
    proc = score(triage_home, smollm2_path, pack_file)
    assert_clean(proc)
    assert proc.returncode == 0, proc.stderr[-2000:]
    notes = [line for line in proc.stderr.splitlines() if "moved it aside" in line]
    assert len(notes) == 1 and "deep.json" in notes[0] and "nested" in notes[0], proc.stderr
    assert not (folder / "deep.json").exists()


@pytest.mark.model
def test_an_explicit_deep_calibration_is_refused_with_exit_2(
    smollm2_path: Path, triage_home: Path, pack_file: Path, tmp_path: Path
) -> None:
    (tmp_path / "deep.json").write_text(DEEP, encoding="utf-8")
    proc = score(triage_home, smollm2_path, pack_file, "--calibration", str(tmp_path / "deep.json"))
    assert_clean(proc)
    assert proc.returncode == 2 and "nested 5,000 levels deep" in proc.stderr, proc.stderr[-2000:]
    assert (tmp_path / "deep.json").exists()  # the user's own file is never moved


# -- packs -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "nest", ["x = " + "[" * 5000 + "]" * 5000 + "\n", "x = " + "{ a = " * 3000 + "1" + " }" * 3000 + "\n"]
)
def test_a_pack_nested_thousands_deep_is_a_pack_error(tmp_path: Path, nest: str) -> None:
    path = tmp_path / "deep.toml"
    path.write_text(MINI_PACK + "\n[pack2]\n" + nest, encoding="utf-8")
    with pytest.raises(PackError, match="nested too deep"):
        load_pack(path)


async def test_switch_pack_shows_a_deep_pack_as_an_error(tmp_path: Path) -> None:
    from fake_engine import fake_app, wait_until
    from textual.command import CommandPalette
    from textual.widgets import Input

    from triage.tui.screens.prompt import PromptScreen

    deep = tmp_path / "deep.toml"
    deep.write_text("x = " + "[" * 5000 + "]" * 5000 + "\n", encoding="utf-8")
    app = fake_app()
    async with app.run_test(size=(100, 32)) as pilot:
        await wait_until(pilot, lambda: app.main.model_state == "ready", what="the model to load")
        main = app.main
        before = main.pack.name
        {c.title: c for c in app.get_system_commands(main)}["Switch pack"].callback()
        await wait_until(pilot, lambda: isinstance(app.screen, CommandPalette), what="the pack list")
        await pilot.press(*"load a pack")
        await pilot.pause(0.3)
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, PromptScreen), what="the path prompt")
        app.screen.query_one(Input).value = str(deep)
        await pilot.press("enter")
        await wait_until(
            pilot, lambda: any("nested too deep" in n.message for n in app._notifications), what="the error"
        )
        assert app.is_running and main.pack.name == before


# -- the stable cache ------------------------------------------------------------------------


def _chattr(flag: str, path: Path) -> bool:
    if not shutil.which("chattr"):
        return False
    return subprocess.run(["chattr", flag, str(path)], capture_output=True, check=False).returncode == 0


@pytest.mark.model
def test_a_stable_cache_file_that_cannot_be_touched_does_not_stop_scoring(
    smollm2_path: Path, triage_home: Path, pack_file: Path
) -> None:
    first = score(triage_home, smollm2_path, pack_file)
    assert first.returncode == 0, first.stderr[-2000:]
    files = list((triage_home / "cache" / "stable").glob("*.kvstate"))
    assert len(files) == 1
    # An immutable file: os.utime fails with EPERM even for root, as it does on a
    # read-only disk (EROFS) or for another user's file.
    if not _chattr("+i", files[0]):
        pytest.skip("chattr +i is not available on this file system")
    try:
        again = score(triage_home, smollm2_path, pack_file)
    finally:
        _chattr("-i", files[0])
    assert_clean(again)
    assert again.returncode == 0, again.stderr[-2000:]
    assert json.loads(again.stdout)["tokens"]["stable_cached"] > 0  # the state was still used


def test_a_cache_folder_that_refuses_changes_is_read_and_left_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from triage.scoring import stable_file

    cache = StableCache(tmp_path / "stable")
    cache.put("k", (1, 2, 3), b"state")
    bad = StableCache(tmp_path / "stable")
    bad.path("bad").write_bytes(b"junk")

    def refuse(*_a: object, **_k: object) -> None:
        raise OSError(30, "Read-only file system")

    monkeypatch.setattr(stable_file.os, "utime", refuse)
    monkeypatch.setattr(Path, "unlink", lambda *_a, **_k: refuse())
    fresh = StableCache(tmp_path / "stable")
    assert fresh.get("k", (1, 2, 3)) == bytearray(b"state")
    assert fresh.get("bad", (1,)) is None  # invalid, and cannot be deleted: a miss, no crash
    fresh.prune()
    assert os.path.exists(bad.path("bad"))


# -- no "moved aside" when nothing moved -------------------------------------------------------


def test_a_history_that_cannot_be_created_says_so_and_not_that_it_was_moved(tmp_path: Path) -> None:
    from triage.store.history import History

    blocker = tmp_path / "data"
    blocker.write_text("a file where the folder should be", encoding="utf-8")
    history = History.open(blocker / "history.sqlite3")
    assert history.path is None and history.notice is not None
    assert "moved aside" not in history.notice and "cannot be created" in history.notice
    assert blocker.read_text(encoding="utf-8").startswith("a file")


def test_move_aside_reports_nothing_when_nothing_is_there(tmp_path: Path) -> None:
    from triage.store.files import move_aside

    assert move_aside(tmp_path / "absent.sqlite3") is None
    (tmp_path / "present.sqlite3").write_bytes(b"x")
    aside = move_aside(tmp_path / "present.sqlite3")
    assert aside is not None and aside.read_bytes() == b"x"


@pytest.mark.model
def test_a_stored_prior_nested_thousands_deep_is_recomputed(
    smollm2_path: Path, tmp_path: Path, pack_file: Path
) -> None:
    from triage.lab.prior import prior_options, priors_of
    from triage.scoring.engine import Engine

    pack = load_pack(pack_file)
    with Engine(smollm2_path, name="smollm2-135m", n_ctx=1024, threads=1) as eng:
        options = LabOptions(prior=True)
        priors = priors_of(eng, tmp_path / "priors")
        path = priors._file(pack, prior_options(options))  # where the prior of these options is kept
        assert path is not None
        path.parent.mkdir(parents=True)
        path.write_text(DEEP, encoding="utf-8")
        result = lab.score_ticket(eng, TICKET, pack, options)
    assert result.complete and result.criteria[0].choice in ("angry", "calm")
    assert json.loads(path.read_text(encoding="utf-8"))["pack_hash"] == pack.hash  # recomputed and saved again
