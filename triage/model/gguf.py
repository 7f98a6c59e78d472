"""A small, stdlib-only reader for GGUF file headers.

It reads what triage needs to know about a model file *before* handing it to
llama.cpp: that it is a GGUF at all, its metadata (architecture, name, chat
template, context length, ...) and its tensor table. From the tensor table it
computes how long the file must be, so a truncated download is reported as
such instead of as a crash or an obscure load failure inside llama.cpp.

Format reference: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
(all integers little-endian; versions 2 and 3 use 64-bit counts).
"""

from __future__ import annotations

import mmap
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from triage import gate
from triage.errors import InputError

MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4
# Arrays longer than this are summarised (type and length), not kept: a
# tokenizer's vocabulary is ~150k strings and nobody needs them here.
SMALL_ARRAY = 64
# Sanity bounds; a header claiming more than this is corrupt, not large.
_MAX_COUNT = 1 << 24

# GGUF metadata value types.
_UINT8, _INT8, _UINT16, _INT16, _UINT32, _INT32, _FLOAT32, _BOOL, _STRING, _ARRAY, _UINT64, _INT64, _FLOAT64 = range(13)
_SCALAR = {
    _UINT8: struct.Struct("<B"),
    _INT8: struct.Struct("<b"),
    _UINT16: struct.Struct("<H"),
    _INT16: struct.Struct("<h"),
    _UINT32: struct.Struct("<I"),
    _INT32: struct.Struct("<i"),
    _FLOAT32: struct.Struct("<f"),
    _BOOL: struct.Struct("<?"),
    _UINT64: struct.Struct("<Q"),
    _INT64: struct.Struct("<q"),
    _FLOAT64: struct.Struct("<d"),
}
_U32 = struct.Struct("<I")
_U64 = struct.Struct("<Q")

# ggml tensor type -> (name, elements per block, bytes per block), after
# gguf-py's GGML_QUANT_SIZES. Unknown types fall back to the offsets alone.
QK_K = 256
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 2 + 16),
    3: ("Q4_1", 32, 2 + 2 + 16),
    6: ("Q5_0", 32, 2 + 4 + 16),
    7: ("Q5_1", 32, 2 + 2 + 4 + 16),
    8: ("Q8_0", 32, 2 + 32),
    9: ("Q8_1", 32, 2 + 2 + 32),
    10: ("Q2_K", 256, 2 + 2 + QK_K // 16 + QK_K // 4),
    11: ("Q3_K", 256, 2 + QK_K // 4 + QK_K // 8 + 12),
    12: ("Q4_K", 256, 2 + 2 + QK_K // 2 + 12),
    13: ("Q5_K", 256, 2 + 2 + QK_K // 2 + QK_K // 8 + 12),
    14: ("Q6_K", 256, 2 + QK_K // 2 + QK_K // 4 + QK_K // 16),
    15: ("Q8_K", 256, 4 + QK_K + QK_K // 8),
    16: ("IQ2_XXS", 256, 2 + QK_K // 4),
    17: ("IQ2_XS", 256, 2 + QK_K // 4 + QK_K // 32),
    18: ("IQ3_XXS", 256, 2 + QK_K // 4 + QK_K // 8),
    19: ("IQ1_S", 256, 2 + QK_K // 8 + QK_K // 16),
    20: ("IQ4_NL", 32, 2 + 16),
    21: ("IQ3_S", 256, 2 + QK_K // 4 + QK_K // 8 + QK_K // 32 + 4),
    22: ("IQ2_S", 256, 2 + QK_K // 4 + QK_K // 16),
    23: ("IQ4_XS", 256, 2 + 2 + QK_K // 2 + QK_K // 64),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, QK_K // 8 + QK_K // 16 + QK_K // 32),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 2 + 4 * 13),
    35: ("TQ2_0", 256, 2 + 64),
    39: ("MXFP4", 32, 1 + 16),
}


class GGUFError(InputError):
    """The file is not a GGUF model triage can use."""


class NotGGUFError(GGUFError):
    """The file does not start with the GGUF magic (a text file, a zip, ...)."""


class UnsupportedGGUFVersionError(GGUFError):
    """A GGUF of a version this reader (and llama.cpp) does not read."""


class CorruptGGUFError(GGUFError):
    """The header itself is cut short or inconsistent."""


class TruncatedGGUFError(GGUFError):
    """The header is fine but the file is shorter than its tensors need."""


@dataclass(frozen=True)
class ArraySummary:
    """A metadata array too long to keep: its element type and length."""

    element_type: int
    length: int


@dataclass(frozen=True)
class TensorInfo:
    """One entry of the tensor table."""

    name: str
    shape: tuple[int, ...]
    ggml_type: int
    offset: int  # relative to the start of the tensor data section
    nbytes: int | None  # None for a ggml type this reader does not know

    @property
    def type_name(self) -> str:
        """The ggml type's name, e.g. ``Q8_0``."""
        known = GGML_TYPES.get(self.ggml_type)
        return known[0] if known else f"type{self.ggml_type}"


@dataclass(frozen=True)
class GGUFInfo:
    """What the header of a GGUF file says."""

    path: Path
    version: int
    metadata: dict[str, object]
    tensors: tuple[TensorInfo, ...]
    alignment: int
    data_offset: int  # absolute file offset of the tensor data section
    expected_size: int  # the least the file size can be for every tensor to fit
    file_size: int
    unknown_types: frozenset[int] = field(default_factory=frozenset)

    @property
    def architecture(self) -> str | None:
        """``general.architecture``, e.g. ``qwen3``."""
        value = self.metadata.get("general.architecture")
        return value if isinstance(value, str) else None

    @property
    def name(self) -> str | None:
        """``general.name``, e.g. ``Qwen3 0.6B``."""
        value = self.metadata.get("general.name")
        return value if isinstance(value, str) else None

    @property
    def size_label(self) -> str | None:
        """``general.size_label``, e.g. ``0.6B``."""
        value = self.metadata.get("general.size_label")
        return value if isinstance(value, str) else None

    @property
    def context_length(self) -> int | None:
        """``<arch>.context_length``: the context the model was trained for."""
        value = self.metadata.get(f"{self.architecture}.context_length")
        return value if isinstance(value, int) else None

    @property
    def chat_template(self) -> str | None:
        """``tokenizer.chat_template`` (a Jinja template), if the file has one."""
        value = self.metadata.get("tokenizer.chat_template")
        return value if isinstance(value, str) else None

    @property
    def add_bos_token(self) -> bool | None:
        """``tokenizer.ggml.add_bos_token``, if present."""
        value = self.metadata.get("tokenizer.ggml.add_bos_token")
        return value if isinstance(value, bool) else None

    @property
    def vocab_size(self) -> int | None:
        """Length of ``tokenizer.ggml.tokens``, if present."""
        value = self.metadata.get("tokenizer.ggml.tokens")
        if isinstance(value, ArraySummary):
            return value.length
        return len(value) if isinstance(value, list) else None


class _Cursor:
    """Bounds-checked little-endian reads over a buffer."""

    def __init__(self, buf: mmap.mmap | bytes, path: Path) -> None:
        self.buf = buf
        self.pos = 0
        self.end = len(buf)
        self.path = path

    def _short(self, what: str) -> CorruptGGUFError:
        return CorruptGGUFError(
            f"{self.path} is a truncated or corrupt GGUF: its header ends "
            f"early (while reading {what} at byte {self.pos} of {self.end})",
            hint="download the model again",
        )

    def unpack(self, st: struct.Struct, what: str) -> int | float:
        """One scalar (an int, a bool or a float, as ``st`` reads it)."""
        if self.pos + st.size > self.end:
            raise self._short(what)
        (value,) = st.unpack_from(self.buf, self.pos)
        self.pos += st.size
        if not isinstance(value, int | float):  # every format read here is one int, bool or float
            raise TypeError(f"{st.format!r} does not read a number")
        return value

    def u32(self, what: str) -> int:
        return int(self.unpack(_U32, what))

    def u64(self, what: str) -> int:
        return int(self.unpack(_U64, what))

    def skip(self, n: int, what: str) -> None:
        if n < 0 or self.pos + n > self.end:
            raise self._short(what)
        self.pos += n

    def string(self, what: str) -> str:
        n = self.u64(f"the length of {what}")
        if self.pos + n > self.end:
            raise self._short(what)
        raw = bytes(self.buf[self.pos : self.pos + n])
        self.pos += n
        # GGUF strings are UTF-8; a bad byte in, say, a vocabulary entry should
        # not make the whole model unreadable.
        return raw.decode("utf-8", errors="replace")


def _read_value(cur: _Cursor, vtype: int, key: str) -> object:
    if vtype in _SCALAR:
        return cur.unpack(_SCALAR[vtype], f"the value of {key!r}")
    if vtype == _STRING:
        return cur.string(f"the value of {key!r}")
    if vtype == _ARRAY:
        etype = cur.u32(f"the element type of {key!r}")
        count = cur.u64(f"the length of {key!r}")
        if count > cur.end:
            raise CorruptGGUFError(
                f"{cur.path} is a corrupt GGUF: array {key!r} claims {count} elements", hint="download the model again"
            )
        if etype in _SCALAR and count > SMALL_ARRAY:
            cur.skip(_SCALAR[etype].size * count, f"the elements of {key!r}")
            return ArraySummary(etype, count)
        if etype == _STRING and count > SMALL_ARRAY:
            # Hot loop (a vocabulary has ~150k entries): skip without method calls.
            buf, pos, end, unpack = cur.buf, cur.pos, cur.end, _U64.unpack_from
            for _ in range(count):
                if pos + 8 > end:
                    break
                pos += 8 + unpack(buf, pos)[0]
            else:
                if pos <= end:
                    cur.pos = pos
                    return ArraySummary(etype, count)
            cur.pos = min(pos, end)
            raise cur._short(f"the elements of {key!r}")
        if etype == _ARRAY and count > SMALL_ARRAY:
            for _ in range(count):
                _read_value(cur, _ARRAY, key)
            return ArraySummary(etype, count)
        return [_read_value(cur, etype, key) for _ in range(count)]
    raise CorruptGGUFError(
        f"{cur.path} is a corrupt GGUF: metadata key {key!r} has unknown value type {vtype}",
        hint="download the model again",
    )


def _tensor_nbytes(shape: tuple[int, ...], ggml_type: int) -> int | None:
    known = GGML_TYPES.get(ggml_type)
    if known is None:
        return None
    _, block, type_size = known
    n = 1
    for d in shape:
        n *= d
    return (n // block) * type_size


def _describe_start(head: bytes) -> str:
    if head.startswith(b"PK\x03\x04"):
        return "it is a zip archive (a wheel?), not a GGUF model"
    if head[:4] == b"FUGG":
        return "it is a big-endian GGUF, which triage does not read"
    printable = head[:16].decode("ascii", errors="replace")
    if printable and all(c.isprintable() or c.isspace() for c in printable):
        return f"it looks like a text file (it starts with {printable[:16]!r}), not a GGUF model"
    return f"it starts with bytes {head[:8].hex(' ')}, not with the GGUF magic 'GGUF'"


def read_gguf_info(path: str | os.PathLike[str]) -> GGUFInfo:
    """Read and check the header of a GGUF file, without loading its tensors.

    Args:
        path: the ``.gguf`` file.

    Returns:
        The header: version, metadata (long arrays summarised), tensor table,
        and the minimum size the file must have.

    Raises:
        InputError: the path is missing or is not a regular file.
        NotGGUFError: empty file, or wrong magic (text file, zip, ...).
        UnsupportedGGUFVersionError: a GGUF version other than 2 or 3.
        CorruptGGUFError: the header is cut short or inconsistent.
        TruncatedGGUFError: the file is shorter than its tensors need.
    """
    path = Path(path)
    try:
        fd, _ = gate.open_fd(path, "model")  # a FIFO or a device is refused, never waited on
    except FileNotFoundError:
        raise InputError(f"model file {path} does not exist") from None
    except IsADirectoryError:
        raise InputError(f"{path} is a directory, not a .gguf model file") from None
    except OSError as exc:
        raise InputError(f"cannot read model file {path}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as fh:
        size = os.fstat(fh.fileno()).st_size
        if size == 0:
            raise NotGGUFError(f"{path} is empty (0 bytes), not a GGUF model", hint="download the model again")
        head = fh.read(8)
        if head[:4] != MAGIC:
            raise NotGGUFError(f"{path} is not a GGUF model file: {_describe_start(head)}")
        if size < 24:
            raise CorruptGGUFError(
                f"{path} is a truncated GGUF: only {size} bytes, less than a GGUF header",
                hint="download the model again",
            )
        with mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ) as buf:
            return _parse(buf, path, size)


def _parse(buf: mmap.mmap, path: Path, size: int) -> GGUFInfo:
    cur = _Cursor(buf, path)
    cur.skip(4, "the magic")
    version = cur.u32("the version")
    if version not in SUPPORTED_VERSIONS:
        hint = (
            "convert it again with a current llama.cpp"
            if version < 2
            else "this file may be newer than triage; update triage"
        )
        if version > 0xFFFF:
            raise CorruptGGUFError(
                f"{path} is a corrupt GGUF: version field is {version}", hint="download the model again"
            )
        raise UnsupportedGGUFVersionError(
            f"{path} is GGUF version {version}; triage reads versions {', '.join(map(str, SUPPORTED_VERSIONS))}",
            hint=hint,
        )
    n_tensors = cur.u64("the tensor count")
    n_kv = cur.u64("the metadata count")
    if n_tensors > _MAX_COUNT or n_kv > _MAX_COUNT:
        raise CorruptGGUFError(
            f"{path} is a corrupt GGUF: it claims {n_tensors} tensors and {n_kv} metadata keys",
            hint="download the model again",
        )

    metadata: dict[str, object] = {}
    for i in range(n_kv):
        key = cur.string(f"metadata key #{i}")
        vtype = cur.u32(f"the type of {key!r}")
        metadata[key] = _read_value(cur, vtype, key)

    tensors: list[TensorInfo] = []
    unknown: set[int] = set()
    for i in range(n_tensors):
        name = cur.string(f"the name of tensor #{i}")
        n_dims = cur.u32(f"the rank of tensor {name!r}")
        if n_dims == 0 or n_dims > MAX_DIMS:
            raise CorruptGGUFError(
                f"{path} is a corrupt GGUF: tensor {name!r} has {n_dims} dimensions", hint="download the model again"
            )
        shape = tuple(cur.u64(f"the shape of tensor {name!r}") for _ in range(n_dims))
        ggml_type = cur.u32(f"the type of tensor {name!r}")
        offset = cur.u64(f"the offset of tensor {name!r}")
        nbytes = _tensor_nbytes(shape, ggml_type)
        if nbytes is None:
            unknown.add(ggml_type)
        tensors.append(TensorInfo(name, shape, ggml_type, offset, nbytes))

    alignment = metadata.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(alignment, int) or alignment <= 0 or alignment & (alignment - 1):
        raise CorruptGGUFError(
            f"{path} is a corrupt GGUF: general.alignment is {alignment!r}, not a power of two",
            hint="download the model again",
        )
    # The tensor data starts at the first multiple of the alignment after the header.
    data_offset = (cur.pos + alignment - 1) // alignment * alignment
    # A tensor of unknown type still has to start inside the file.
    end = max((t.offset + (t.nbytes or 0) for t in tensors), default=0)
    expected = data_offset + end if tensors else cur.pos
    if size < expected:
        missing = expected - size
        raise TruncatedGGUFError(
            f"{path} is a truncated GGUF: its tensors need at least "
            f"{expected:,} bytes but the file has {size:,} ({missing:,} missing)",
            hint="the download was probably cut short; download the model again",
        )
    return GGUFInfo(
        path=path,
        version=version,
        metadata=metadata,
        tensors=tuple(tensors),
        alignment=alignment,
        data_offset=data_offset,
        expected_size=expected,
        file_size=size,
        unknown_types=frozenset(unknown),
    )
