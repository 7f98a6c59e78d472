"""The head file: a learned head as ``.npz``, written atomically and read back checked.

A head file is ``.npz`` (never pickle): a JSON ``meta`` and per criterion its weights and
intercepts. It records the model sha256, pack hash, prompt format, feature set and read
position it was fitted for (whether they match a setup is :mod:`triage.learning.fitstore`'s
check). Reading checks sizes before anything is decompressed, and a file whose arrays do not
fit its meta (or the model's widths) is refused as :class:`DamagedHead`.
"""

from __future__ import annotations

import json
import os
import re
import time
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from triage import gate
from triage.bounded import Bounded, loads_json
from triage.errors import InputError
from triage.scoring.cue import READS, TAIL
from triage.scoring.head import ATTENTION, ATTENTIONS, FEATURES, CriterionHead, Head, feature_ids

SCHEMA = "triage.head/1"
SUFFIX = ".npz"
F16_MAX = 6.0e4  # below float16's largest finite value (65,504)


def head_meta(head: Head) -> dict[str, object]:
    """The JSON part of ``head``'s file."""
    return {
        "schema": SCHEMA,
        "model_sha256": head.model_sha256,
        "pack_hash": head.pack_hash,
        "prompt_format": head.prompt_format,
        "features": {
            "kind": FEATURES,
            "n_vocab": head.n_vocab,
            "n_embd": head.n_embd,
            "count": head.n_features,
            "attention": head.attention,
        },
        "read": head.read,
        "criteria": [
            {"id": cid, "options": h.options, "classes": h.classes, **h.info} for cid, h in head.criteria.items()
        ],
        "name": head.name,
        "kind": head.kind,
        "created": time.time(),
        "report": head.report,
    }


def write_head(head: Head, path: str | Path, *, backup: bool = False) -> Path:
    """Write ``head`` as ``.npz`` atomically (a temporary file renamed over ``path``).

    ``backup``: keep the file it replaces as ``NAME.prev`` (:func:`triage.store.outputs.replace_keeping_backup`).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {"meta": np.array(json.dumps(head_meta(head), allow_nan=False, default=_plain))}
    for i, h in enumerate(head.criteria.values()):
        arrays[f"c{i}_coef"] = stored_weights(h.coef)
        arrays[f"c{i}_intercept"] = h.intercept.astype(np.float64)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("wb") as fh:
            np.savez_compressed(fh, allow_pickle=True, **arrays)  # numpy's default, named for the type checker
        if backup:
            from triage.store.outputs import replace_keeping_backup

            replace_keeping_backup(tmp, path)
        else:
            tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def stored_weights(coef: np.ndarray) -> np.ndarray:
    """Weights as stored: float16 (measured: bars move by at most 0.0003 on the development
    sets), or float32 when a weight is too large for float16."""
    return coef.astype(np.float16) if np.all(np.abs(coef) < F16_MAX) else coef.astype(np.float32)


def _plain(value: object) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON")


# Limits checked before anything is decompressed or allocated. A real head is a few
# hundred KB (Qwen3-0.6B's width 1024: about 3.6 KB per option); these leave a wide margin.
MAX_HEAD_BYTES = gate.KINDS["head"].limit  # the archive, and the sum of its members once decompressed
MAX_META_BYTES = 16 << 20
MAX_N_VOCAB = 1 << 22  # 4M tokens (today's largest vocabularies are ~260k)
MAX_N_EMBD = 1 << 16  # 65,536 (today's largest models are 16-32k wide)
NPY_HEADER = 4096  # room for a .npy member's own header
_MEMBER = re.compile(r"(meta|c(\d+)_(coef|intercept))\.npy")


class DamagedHead(InputError):
    """A head file that is damaged or not a head: unlike a head for another setup, it can never be used."""


def read_head(path: str | Path, *, shape: tuple[int, int] | None = None) -> Head:
    """Read a head file and check that its arrays are whole and consistent.

    Nothing is decompressed before it is checked: the archive's size, each member's
    declared size against the shape the meta says it has, and the meta's widths
    (against ``shape`` too, when given) come first. A member that decompresses to more
    than it declared, or fails its CRC, is refused while it is read.

    Args:
        path: the ``.npz`` file.
        shape: the loaded model's ``(n_vocab, n_embd)``; a head for other widths is
            refused before its weights are read.

    Raises:
        DamagedHead: damaged, or not a triage head (naming what is wrong).
        InputError: missing, unreadable, or (``shape``) fitted for another width.
    """
    path = Path(path)
    try:
        fd, _ = gate.open_fd(path, "head")  # a FIFO, device or folder is refused, never waited on
    except FileNotFoundError:
        raise InputError(
            f"head file {path} does not exist", hint="make one with `triage learn LABELLED.jsonl --pack PACK`"
        ) from None
    except gate.TooLarge as exc:
        raise DamagedHead(f"head file {path} is not read: {exc}; a head is a few hundred KB") from None
    except OSError as exc:
        raise InputError(f"head file {path} cannot be read: {exc.strerror or exc}") from None
    damaged = "it is damaged or not a head file; run `triage learn` again"
    with os.fdopen(fd, "rb") as fh:
        try:
            magic = fh.read(4)
        except OSError as exc:
            raise InputError(f"head file {path} cannot be read: {exc.strerror or exc}") from None
        if magic != b"PK\x03\x04":  # .npz is a zip archive; anything else is not a head (and is never unpickled)
            raise DamagedHead(
                f"{path} is not a head file (a head is an .npz archive written by `triage learn`)",
                hint="pass the .npz that `triage learn` wrote, or run it again",
            )
        try:
            fh.seek(0)
            with zipfile.ZipFile(fh) as zf:  # the descriptor the gate checked, not the path again
                return _read_archive(zf, path, shape)
        except (DamagedHead, InputError):
            raise
        except (
            OSError,
            ValueError,
            EOFError,
            zipfile.BadZipFile,
            zlib.error,
            KeyError,
            NotImplementedError,
            RuntimeError,
        ) as exc:
            raise DamagedHead(f"head file {path} cannot be read: {exc}", hint=damaged) from None


def _read_archive(zf: zipfile.ZipFile, path: Path, shape: tuple[int, int] | None) -> Head:
    """The head in an open archive, checking sizes before reading (see :func:`read_head`)."""
    members = {i.filename: i for i in zf.infolist()}
    strange = [n for n in members if not _MEMBER.fullmatch(n)]
    if strange or "meta.npy" not in members:
        raise DamagedHead(f"{path} is not a triage head file (members {sorted(members)[:5]})")
    total = sum(i.file_size for i in members.values())
    if total > MAX_HEAD_BYTES:
        raise DamagedHead(
            f"head file {path} declares {total:,} bytes once unpacked;"
            f" a head is never more than {MAX_HEAD_BYTES >> 20} MiB"
        )
    if members["meta.npy"].file_size > MAX_META_BYTES:
        size = members["meta.npy"].file_size
        raise DamagedHead(f"head file {path}: its meta declares {size:,} bytes, more than {MAX_META_BYTES >> 20} MiB")
    meta_array = _read_member(zf, "meta.npy")
    try:
        meta = loads_json(str(meta_array))
    except (Bounded, ValueError) as exc:
        raise DamagedHead(f"{path} is not a triage head file (no readable meta: {exc})") from None
    if not isinstance(meta, dict) or meta.get("schema") != SCHEMA:
        raise DamagedHead(f"{path} is not a triage head file (expected schema {SCHEMA})")
    try:
        feats = meta["features"]
        if feats["kind"] != FEATURES:
            raise InputError(
                f"head file {path} uses features {feats['kind']!r}; this triage reads {FEATURES!r}",
                hint="run `triage learn` again",
            )
        n_vocab = _count(feats["n_vocab"], "n_vocab", MAX_N_VOCAB)
        n_embd = _count(feats["n_embd"], "n_embd", MAX_N_EMBD)
        if shape is not None and (n_vocab, n_embd) != tuple(shape):
            raise InputError(
                f"head {path} was learned for another setup: features for vocabulary {n_vocab} × width {n_embd}"
                f" ≠ the model's {shape[0]} × {shape[1]}",
                hint="run `triage learn` for this model and pack, or leave out --head",
            )
        n_feat = len(feature_ids(n_vocab, n_embd))
        attention = str(feats.get("attention", ATTENTION))
        read = str(meta.get("read", TAIL))
        if attention not in ATTENTIONS or read not in READS:
            raise InputError(
                f"head file {path} was computed with attention {attention!r} read at {read!r}; this triage knows "
                f"attention {', '.join(ATTENTIONS)} and read positions {', '.join(READS)}",
                hint="run `triage learn` again",
            )
        if int(feats["count"]) != n_feat:
            raise ValueError(f"features.count is {feats['count']}, expected {n_feat}")
        crits: dict[str, CriterionHead] = {}
        if not isinstance(meta["criteria"], list) or len(meta["criteria"]) > len(members):
            raise ValueError("the criteria list does not fit the archive's members")
        for i, c in enumerate(meta["criteria"]):
            options, classes = [str(o) for o in c["options"]], [str(o) for o in c["classes"]]
            if len(set(options)) != len(options) or len(classes) < 2 or not set(classes) <= set(options):
                raise ValueError(f"criterion {c['id']!r}: classes {classes} do not fit its options {options}")
            want = (len(classes), n_feat + len(options))
            for name, cells, item in ((f"c{i}_coef.npy", want[0] * want[1], 4), (f"c{i}_intercept.npy", want[0], 8)):
                info = members.get(name)
                if info is None:
                    raise ValueError(f"criterion {c['id']!r}: member {name} is missing")
                if info.file_size > NPY_HEADER + cells * item:  # checked before it is decompressed
                    raise ValueError(
                        f"criterion {c['id']!r}: {name} declares {info.file_size:,} bytes; weights of shape {want}"
                        f" need at most {NPY_HEADER + cells * item:,}"
                    )
            coef, icpt = _read_member(zf, f"c{i}_coef.npy"), _read_member(zf, f"c{i}_intercept.npy")
            if coef.dtype not in (np.float16, np.float32) or coef.shape != want or icpt.shape != (len(classes),):
                raise ValueError(
                    f"criterion {c['id']!r}: weights are {coef.shape} and "
                    f"{icpt.shape}, expected {want} and ({len(classes)},)"
                )
            if not (np.all(np.isfinite(coef)) and np.all(np.isfinite(icpt))):
                raise ValueError(f"criterion {c['id']!r}: weights are not all finite")
            info_fields = {k: v for k, v in c.items() if k not in ("id", "options", "classes")}
            weights = coef.astype(np.float64), icpt.astype(np.float64)
            crits[str(c["id"])] = CriterionHead(options, classes, *weights, info_fields)
        return Head(
            str(meta["model_sha256"]),
            str(meta["pack_hash"]),
            str(meta["prompt_format"]),
            n_vocab,
            n_embd,
            crits,
            name=str(meta.get("name") or path.name),
            report=meta.get("report", {}),
            read=read,
            attention=attention,
            kind="starter" if meta.get("kind") == "starter" else "team",
        )
    except InputError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise DamagedHead(f"head file {path} is damaged: {exc}", hint="run `triage learn` again") from None


def _count(value: object, what: str, most: int) -> int:
    """A width or count from the meta: a whole number between 1 and ``most`` (before anything is sized by it)."""
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= most:
        raise ValueError(f"features.{what} is {value!r}; a model's is a whole number from 1 to {most:,}")
    return value


def _read_member(zf: zipfile.ZipFile, name: str) -> np.ndarray:
    """One ``.npy`` member, never unpickled; reading stops at its declared size (CRC checked)."""
    with zf.open(name) as fh:
        return np.lib.format.read_array(fh, allow_pickle=False)
