"""triage.model.gguf: the header reader, on small GGUF files written here and on the real test model."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path
from typing import Any

import pytest

from triage.errors import InputError
from triage.model.gguf import (
    ArraySummary,
    CorruptGGUFError,
    NotGGUFError,
    TruncatedGGUFError,
    UnsupportedGGUFVersionError,
    read_gguf_info,
)

# --- a tiny GGUF writer (also used by test_resolve) --------------------------------------

_TYPE_SIZES = {0: (1, 4), 1: (1, 2), 8: (32, 34)}  # F32, F16, Q8_0: enough for tests


def _str(s: str) -> bytes:
    raw = s.encode("utf-8")
    return struct.pack("<Q", len(raw)) + raw


def _value(v: Any) -> tuple[int, bytes]:
    if isinstance(v, bool):
        return 7, struct.pack("<?", v)
    if isinstance(v, int):
        return 4, struct.pack("<I", v)
    if isinstance(v, float):
        return 6, struct.pack("<f", v)
    if isinstance(v, str):
        return 8, _str(v)
    if isinstance(v, list):
        etype = _value(v[0])[0] if v else 8
        return 9, struct.pack("<IQ", etype, len(v)) + b"".join(_value(x)[1] for x in v)
    raise TypeError(v)


def write_gguf(
    path: Path,
    metadata: dict[str, Any] | None = None,
    tensors: list[tuple[str, tuple[int, ...], int]] | None = None,
    *,
    version: int = 3,
    alignment: int = 32,
) -> Path:
    """Write a small valid GGUF: the metadata, then tensors of zeros, aligned as the format says."""
    metadata = {"general.architecture": "llama", "general.name": "tiny test model", **(metadata or {})}
    tensors = tensors if tensors is not None else [("token_embd.weight", (64, 8), 0), ("output.weight", (64, 8), 8)]
    out = bytearray(b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(metadata)))
    for key, v in metadata.items():
        vtype, raw = _value(v)
        out += _str(key) + struct.pack("<I", vtype) + raw
    offset = 0
    sizes = []
    for name, shape, ggml_type in tensors:
        block, type_size = _TYPE_SIZES[ggml_type]
        n = 1
        for d in shape:
            n *= d
        nbytes = n // block * type_size
        out += _str(name) + struct.pack("<I", len(shape)) + b"".join(struct.pack("<Q", d) for d in shape)
        out += struct.pack("<IQ", ggml_type, offset)
        sizes.append(nbytes)
        offset += (nbytes + alignment - 1) // alignment * alignment
    out += b"\0" * ((-len(out)) % alignment)
    for i, nbytes in enumerate(sizes):
        out += b"\x01" * nbytes
        if i < len(sizes) - 1:
            out += b"\0" * ((-nbytes) % alignment)
    path.write_bytes(bytes(out))
    return path


# --- tests --------------------------------------------------------------------------------


def test_reads_metadata_and_tensors(tmp_path: Path) -> None:
    meta = {
        "general.architecture": "qwen3",
        "general.name": "Qwen3 0.6B",
        "general.size_label": "0.6B",
        "qwen3.context_length": 40960,
        "tokenizer.chat_template": "{% for m in messages %}{{ m.content }}{% endfor %}",
        "tokenizer.ggml.add_bos_token": False,
        "tokenizer.ggml.tokens": [f"t{i}" for i in range(100)],
        "general.languages": ["en", "fr"],
    }
    path = write_gguf(tmp_path / "m.gguf", meta)
    info = read_gguf_info(path)
    assert info.version == 3
    assert info.architecture == "qwen3"
    assert info.name == "Qwen3 0.6B"
    assert info.size_label == "0.6B"
    assert info.context_length == 40960
    assert info.chat_template and "messages" in info.chat_template
    assert info.add_bos_token is False
    assert info.vocab_size == 100
    assert isinstance(info.metadata["tokenizer.ggml.tokens"], ArraySummary)  # long arrays are summarised
    assert info.metadata["general.languages"] == ["en", "fr"]  # short ones are kept
    assert [t.name for t in info.tensors] == ["token_embd.weight", "output.weight"]
    assert info.tensors[1].type_name == "Q8_0"
    assert info.tensors[1].nbytes == 64 * 8 // 32 * 34
    assert info.expected_size == info.file_size == path.stat().st_size
    assert info.data_offset % 32 == 0


def test_truncated_file_is_detected(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf")
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    with pytest.raises(TruncatedGGUFError, match=r"truncated GGUF.*10 missing"):
        read_gguf_info(path)


def test_header_cut_short_is_corrupt(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "m.gguf")
    path.write_bytes(path.read_bytes()[:60])
    with pytest.raises(CorruptGGUFError, match="header ends early"):
        read_gguf_info(path)


def test_text_file_is_not_gguf(tmp_path: Path) -> None:
    path = tmp_path / "notes.gguf"
    path.write_text("hello, this is not a model\n")
    with pytest.raises(NotGGUFError, match="text file"):
        read_gguf_info(path)


def test_zip_is_not_gguf(tmp_path: Path) -> None:
    path = tmp_path / "model.whl"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("a.txt", "x")
    with pytest.raises(NotGGUFError, match="zip archive"):
        read_gguf_info(path)


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.gguf"
    path.touch()
    with pytest.raises(NotGGUFError, match="empty"):
        read_gguf_info(path)


def test_unsupported_version(tmp_path: Path) -> None:
    path = write_gguf(tmp_path / "old.gguf", version=1)
    with pytest.raises(UnsupportedGGUFVersionError, match="version 1"):
        read_gguf_info(path)


def test_missing_file_and_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="does not exist"):
        read_gguf_info(tmp_path / "nope.gguf")
    with pytest.raises(InputError, match="directory"):
        read_gguf_info(tmp_path)


def test_errors_are_input_errors_with_exit_code_2(tmp_path: Path) -> None:
    path = tmp_path / "x.gguf"
    path.write_text("x")
    with pytest.raises(InputError) as info:
        read_gguf_info(path)
    assert info.value.exit_code == 2


def test_real_model_header(smollm2_path: Path) -> None:
    info = read_gguf_info(smollm2_path)
    assert info.architecture == "llama"
    assert info.context_length == 8192
    assert info.vocab_size == 49152
    assert not info.unknown_types
    assert info.expected_size == info.file_size == 98_362_432
