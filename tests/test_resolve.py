"""triage.model.resolve: which model runs, in what order, and the errors on the way.

Catalog models are "installed" here as sparse files of the catalog's exact size
plus the sidecar a pull writes; path models are small GGUF files written by
the test writer in test_gguf.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest
from test_gguf import write_gguf

from triage.errors import InputError, TriageError
from triage.model.catalog import get_entry
from triage.model.gguf import NotGGUFError, TruncatedGGUFError
from triage.model.resolve import ModelRef, cached_sha256, resolve_model
from triage.store.paths import user_dirs


def install(name: str, *, sidecar: bool = True, size_delta: int = 0) -> Path:
    """Put a catalog model in place the way a pull leaves it: file plus verified sidecar."""
    entry = get_entry(name)
    assert entry.size is not None and entry.sha256 is not None
    folder = user_dirs().models
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.gguf"
    with path.open("wb") as fh:
        fh.truncate(entry.size + size_delta)  # sparse: the exact size, no disk cost
    if sidecar:
        record = {
            "name": name,
            "size": entry.size,
            "mtime_ns": path.stat().st_mtime_ns,
            "sha256": entry.sha256,
            "sha256_verified": True,
            "source": entry.source_description,
            "pulled_at": "2025-01-01T00:00:00Z",
        }
        (folder / f"{name}.json").write_text(json.dumps(record))
    return path


def test_no_model_at_all_names_the_install_command() -> None:
    with pytest.raises(TriageError) as exc:
        resolve_model(config={})
    assert exc.value.message == "no model is installed"
    assert "triage model pull qwen3-0.6b" in str(exc.value) and "triage model pull qwen2.5-coder-0.5b" in str(exc.value)


def test_step5_only_stand_in_gives_a_notice() -> None:
    install("smollm2-135m")
    ref = resolve_model(config={})
    assert (ref.name, ref.source, ref.stand_in) == ("smollm2-135m", "catalog", True)
    assert ref.sha256 == get_entry("smollm2-135m").sha256
    assert ref.notice is not None and "\n" not in ref.notice
    assert "stand-in model smollm2-135m" in ref.notice and "triage model pull qwen3-0.6b" in ref.notice


def test_step5_prefers_the_better_stand_in() -> None:
    install("smollm2-135m")
    install("qwen2.5-coder-0.5b")
    ref = resolve_model(config={})
    assert ref.name == "qwen2.5-coder-0.5b" and ref.stand_in and ref.notice


def test_step4_qwen3_when_installed() -> None:
    install("smollm2-135m")
    install("qwen2.5-coder-0.5b")
    install("qwen3-0.6b")
    ref = resolve_model(config={})
    assert ref == ModelRef(
        "qwen3-0.6b",
        user_dirs().models / "qwen3-0.6b.gguf",
        get_entry("qwen3-0.6b").sha256 or "",
        "catalog",
        False,
        None,
    )


def test_step3_config_beats_installed_default() -> None:
    install("qwen3-0.6b")
    install("smollm2-135m")
    ref = resolve_model(config={"model": "smollm2-135m"})
    assert ref.name == "smollm2-135m" and ref.notice is None


def test_config_none_reads_the_config_file() -> None:
    install("qwen3-0.6b")
    install("smollm2-135m")
    cfg = user_dirs().config_file
    cfg.parent.mkdir(parents=True)
    cfg.write_text('model = "smollm2-135m"\n')
    assert resolve_model().name == "smollm2-135m"


def test_step2_env_beats_config(monkeypatch: pytest.MonkeyPatch) -> None:
    install("qwen2.5-coder-0.5b")
    install("smollm2-135m")
    monkeypatch.setenv("TRIAGE_MODEL", "qwen2.5-coder-0.5b")
    assert resolve_model(config={"model": "smollm2-135m"}).name == "qwen2.5-coder-0.5b"


def test_step1_requested_beats_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    install("qwen2.5-coder-0.5b")
    monkeypatch.setenv("TRIAGE_MODEL", "qwen2.5-coder-0.5b")
    path = write_gguf(tmp_path / "mine.gguf")
    ref = resolve_model(str(path), config={"model": "qwen2.5-coder-0.5b"})
    assert ref.source == "path" and ref.path == path.resolve() and ref.name == "mine.gguf"
    assert ref.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    assert ref.stand_in and ref.notice is None


def test_env_path_model(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "env.gguf")
    monkeypatch.setenv("TRIAGE_MODEL", str(path))
    assert resolve_model(config={}).source == "path"


def test_path_model_with_qwen3_06b_header_is_not_a_stand_in(tmp_path: Path) -> None:
    q3 = write_gguf(
        tmp_path / "q3.gguf",
        {"general.architecture": "qwen3", "general.name": "Qwen3 0.6B", "general.size_label": "0.6B"},
    )
    q3_big = write_gguf(
        tmp_path / "q3big.gguf",
        {"general.architecture": "qwen3", "general.name": "Qwen3 4B", "general.size_label": "4B"},
    )
    assert resolve_model(str(q3), config={}).stand_in is False
    assert resolve_model(str(q3_big), config={}).stand_in is True


@pytest.mark.parametrize("origin", ["requested", "env", "config"])
def test_unknown_name_lists_known_ones(origin: str, monkeypatch: pytest.MonkeyPatch) -> None:
    requested, config = None, {}
    if origin == "requested":
        requested = "mistral-7b"
    elif origin == "env":
        monkeypatch.setenv("TRIAGE_MODEL", "mistral-7b")
    else:
        config = {"model": "mistral-7b"}
    with pytest.raises(
        InputError, match="unknown model 'mistral-7b'; known models: qwen3-0.6b, qwen2.5-coder-0.5b, smollm2-135m"
    ) as exc:
        resolve_model(requested, config=config)
    assert exc.value.exit_code == 2


def test_requested_catalog_model_not_installed() -> None:
    with pytest.raises(TriageError, match="model qwen2.5-coder-0.5b is not installed") as exc:
        resolve_model("qwen2.5-coder-0.5b", config={})
    assert "triage model pull qwen2.5-coder-0.5b" in str(exc.value)


def test_path_errors_are_specific(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        resolve_model(str(tmp_path / "missing.gguf"), config={})
    text = tmp_path / "readme.gguf"
    text.write_text("not a model")
    with pytest.raises(NotGGUFError, match="not a GGUF model file"):
        resolve_model(str(text), config={})
    cut = write_gguf(tmp_path / "cut.gguf")
    cut.write_bytes(cut.read_bytes()[:-100])
    with pytest.raises(TruncatedGGUFError, match="truncated GGUF"):
        resolve_model(str(cut), config={})
    with pytest.raises(InputError, match="is a directory"):
        resolve_model(str(tmp_path) + os.sep, config={})


def test_catalog_file_without_sidecar_needs_repull() -> None:
    install("qwen3-0.6b", sidecar=False)
    with pytest.raises(TriageError, match=r"qwen3-0.6b cannot be used: .*no verification record") as exc:
        resolve_model(config={})
    assert "triage model pull qwen3-0.6b" in str(exc.value)


def test_catalog_file_with_wrong_size_needs_repull() -> None:
    install("smollm2-135m", size_delta=-1)
    with pytest.raises(TriageError, match=r"is 98,362,431 bytes but should be 98,362,432") as exc:
        resolve_model("smollm2-135m", config={})
    assert "re-pull" in str(exc.value) or "triage model pull smollm2-135m" in str(exc.value)


def test_sha256_of_path_models_is_cached(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf")
    real = hashlib.sha256(path.read_bytes()).hexdigest()
    assert cached_sha256(path) == real
    cache_file = user_dirs().cache / "sha256.json"
    cache = json.loads(cache_file.read_text())
    (key,) = cache
    st = path.stat()
    assert key == f"{os.path.realpath(path)}|{st.st_size}|{st.st_mtime_ns}"
    # A cached value is trusted while size and mtime are unchanged (proof: plant a fake one)...
    cache_file.write_text(json.dumps({key: "f" * 64}))
    assert cached_sha256(path) == "f" * 64
    # ...and recomputed once the file changes.
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
    assert cached_sha256(path) == real
    assert len(json.loads(cache_file.read_text())) == 1  # the stale entry was dropped
