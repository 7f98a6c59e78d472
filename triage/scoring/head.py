"""Learned read-out heads: a team's labels, applied at no extra cost per ticket.

A *head* is, per criterion, a multinomial logistic regression on what the model
computed at that criterion's answer position anyway:

* the **hidden state**, seen through the output layer: the logits of a fixed set
  of vocabulary tokens (:func:`feature_ids`, twice the hidden width, evenly
  spaced ids). For this family of models the logits are a linear map of the
  final hidden state (``logits = W · h``, no bias), so with at least as many
  tokens as the hidden state is wide a linear read-out of these logits is a
  linear read-out of the hidden state. Measured on the Qwen2.5 stand-in: the
  hidden state is recovered from them with held-out R² 0.997, and they come from
  the logits llama.cpp computes for the answer position anyway, so they cost
  nothing. Turning llama.cpp's embeddings on instead costs 27% more per ticket
  in one batch (every token becomes an output) or one more decode (~73 ms) for
  the answer positions alone (docs/quality.md, "Learned read-out");
* the **option log-probs** of the label readout (what zero-shot decides from).

Weights are stored as float16 (:func:`stored_weights`): about 3.6 KB per option.

Scoring applies the head with numpy only: ``softmax(W x + b)``, the standardising
scaler folded into ``W`` and ``b``. Fitting (scikit-learn) is in
:mod:`triage.scoring.learn`.

A head file is ``.npz`` (never pickle): a JSON ``meta`` and per criterion its
weights and intercepts. It records the model sha256, pack hash, prompt format
and feature set it was fitted for; it is applied only where all match, and a
file whose arrays do not fit the pack and the model is refused with a message.
Heads are stored in ``user_dirs().data / "heads"`` under a name made of the keys.
"""

from __future__ import annotations

import json
import re
import time
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from triage.bounded import Bounded, loads_json
from triage.errors import InputError
from triage.scoring import calibrate
from triage.scoring.cue import READS, TAIL
from triage.scoring.debias import log_normalize
from triage.store.files import set_aside
from triage.store.paths import user_dirs

SCHEMA = "triage.head/1"
FEATURES = "logits-image/1"  # which features; bump when feature_ids changes
SUFFIX = ".npz"
# Every head written before the attention kernels were recorded was computed with flash attention:
# llama.cpp's default (AUTO) turns it on for the CPU backend, the only one triage uses.
ATTENTION = "flash"
ATTENTIONS = ("flash", "plain")
F16_MAX = 6.0e4  # below float16's largest finite value (65,504)


def feature_count(n_vocab: int, n_embd: int) -> int:
    """How many vocabulary logits make the hidden-state features: twice the hidden width."""
    return min(n_vocab, 2 * n_embd)


def feature_ids(n_vocab: int, n_embd: int) -> np.ndarray:
    """The token ids whose logits are the hidden-state features: evenly spaced over the vocabulary."""
    return np.unique(np.linspace(0, n_vocab - 1, feature_count(n_vocab, n_embd)).round().astype(np.int64))


@dataclass
class CriterionHead:
    """One criterion's read-out: ``log_softmax(coef @ x + intercept)`` over ``classes``.

    ``x`` is ``[features..., option log-probs...]``. ``classes`` are the options the
    head was fitted on; an option with too few labels to learn (``backoff``)
    keeps its zero-shot probability and the learned ones share the rest.
    """

    options: list[str]  # every option of the criterion, pack order
    classes: list[str]  # the options the head predicts
    coef: np.ndarray  # (len(classes), n_features + len(options)), scaler folded in
    intercept: np.ndarray  # (len(classes),)
    info: dict[str, Any] = field(default_factory=dict)  # n, counts, C, cross-validation scores

    @property
    def source(self) -> str:
        """What a decision it makes says decided it: ``starter`` when it was fitted on the starter set alone
        (no label of the team's: :mod:`triage.evaluation.starter`), else ``learned``."""
        rows = self.info.get("rows")
        return "starter" if isinstance(rows, dict) and rows.get("team") == 0 else "learned"

    @property
    def backoff(self) -> list[str]:
        """Options left to the zero-shot readout (too few labels to learn)."""
        return [o for o in self.options if o not in self.classes]

    @property
    def applied(self) -> bool:
        """Whether scoring applies this read-out. ``triage learn`` stores one whose own check found it no better
        than zero-shot with ``"applied": false`` (and why, ``"not_applied"``): kept, never applied unless
        ``learn --apply``. A file written before this flag existed applies every read-out it has."""
        return self.info.get("applied", True) is not False

    @property
    def not_applied(self) -> str:
        """Why this read-out is not applied (empty when it is)."""
        return "" if self.applied else str(self.info.get("not_applied") or "its own check found it no better")

    def apply(self, features: np.ndarray, logprobs: np.ndarray) -> np.ndarray:
        """Learned log-probs over every option (pack order)."""
        x = np.concatenate([np.asarray(features, dtype=np.float64), np.asarray(logprobs, dtype=np.float64)])
        learned = log_normalize(self.coef.astype(np.float64) @ x + self.intercept)
        if not self.backoff:
            return learned
        zero = np.exp(log_normalize(np.asarray(logprobs, dtype=np.float64)))
        idx = [self.options.index(c) for c in self.classes]
        rest = [i for i in range(len(self.options)) if i not in idx]
        share = max(1e-12, 1.0 - float(zero[rest].sum()))
        out = np.empty(len(self.options))
        out[idx] = np.exp(learned) * share
        out[rest] = zero[rest]
        return np.log(np.maximum(out, 1e-300))


@dataclass
class Head:
    """Learned read-outs for some criteria of one (model, pack, prompt format)."""

    model_sha256: str
    pack_hash: str
    prompt_format: str
    n_vocab: int
    n_embd: int
    criteria: dict[str, CriterionHead]
    name: str = "head"  # what results and messages call it (kept in the file; its stored copy keeps it too)
    report: dict[str, Any] = field(default_factory=dict)
    read: str = TAIL  # where the features are read: each criterion's tail, or ``shared:CUE`` (triage.scoring.cue)
    attention: str = ATTENTION  # the attention kernels that computed them (NativeModel.attention)
    kind: str = "team"  # ``team`` (triage learn, the app's re-fit) or ``starter`` (triage.evaluation.starter)

    @property
    def shared(self) -> bool:
        """Whether this head reads the shared position (one cue for every criterion it covers)."""
        return self.read != TAIL

    @property
    def n_features(self) -> int:
        """Hidden-state features per criterion (before the option log-probs)."""
        return len(feature_ids(self.n_vocab, self.n_embd))

    def covers(self, criterion_id: str) -> bool:
        """Whether this head decides the criterion: it has a read-out for it, and that read-out is applied
        (:attr:`CriterionHead.applied`). A criterion it holds back stays calibrated or zero-shot."""
        h = self.criteria.get(criterion_id)
        return h is not None and h.applied

    def has(self, criterion_id: str) -> bool:
        """Whether this head has a read-out for the criterion, applied or held back (what measuring it needs)."""
        return criterion_id in self.criteria

    def held_back(self) -> dict[str, str]:
        """The criteria this head has a read-out for but does not apply, and why."""
        return {cid: h.not_applied for cid, h in self.criteria.items() if not h.applied}

    def apply(self, criterion_id: str, features: np.ndarray, logprobs: np.ndarray) -> np.ndarray:
        """Learned log-probs for one criterion (raises KeyError when it has no read-out)."""
        return self.criteria[criterion_id].apply(features, logprobs)

    def meta(self) -> dict[str, Any]:
        """The JSON part of the file."""
        return {
            "schema": SCHEMA,
            "model_sha256": self.model_sha256,
            "pack_hash": self.pack_hash,
            "prompt_format": self.prompt_format,
            "features": {
                "kind": FEATURES,
                "n_vocab": self.n_vocab,
                "n_embd": self.n_embd,
                "count": self.n_features,
                "attention": self.attention,
            },
            "read": self.read,
            "criteria": [
                {"id": cid, "options": h.options, "classes": h.classes, **h.info} for cid, h in self.criteria.items()
            ],
            "name": self.name,
            "kind": self.kind,
            "created": time.time(),
            "report": self.report,
        }


def write_head(head: Head, path: str | Path, *, backup: bool = False) -> Path:
    """Write ``head`` as ``.npz`` atomically (a temporary file renamed over ``path``).

    ``backup``: keep the file it replaces as ``NAME.prev`` (:func:`triage.store.outputs.replace_keeping_backup`).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays: dict[str, np.ndarray] = {"meta": np.array(json.dumps(head.meta(), allow_nan=False, default=_plain))}
    for i, h in enumerate(head.criteria.values()):
        arrays[f"c{i}_coef"] = stored_weights(h.coef)
        arrays[f"c{i}_intercept"] = h.intercept.astype(np.float64)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with tmp.open("wb") as fh:
            np.savez_compressed(fh, **arrays)
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


def _plain(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON")


# Limits checked before anything is decompressed or allocated. A real head is a few
# hundred KB (Qwen3-0.6B's width 1024: about 3.6 KB per option); these leave a wide margin.
MAX_HEAD_BYTES = 256 << 20  # the archive, and the sum of its members once decompressed
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
    if not path.is_file():
        raise InputError(
            f"head file {path} does not exist", hint="make one with `triage learn LABELLED.jsonl --pack PACK`"
        )
    try:
        size = path.stat().st_size
        with path.open("rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise InputError(f"head file {path} cannot be read: {exc.strerror or exc}") from None
    if magic != b"PK\x03\x04":  # .npz is a zip archive; anything else is not a head (and is never unpickled)
        raise DamagedHead(
            f"{path} is not a head file (a head is an .npz archive written by `triage learn`)",
            hint="pass the .npz that `triage learn` wrote, or run it again",
        )
    if size > MAX_HEAD_BYTES:
        raise DamagedHead(f"head file {path} is {size:,} bytes; a head is never more than {MAX_HEAD_BYTES >> 20} MiB")
    damaged = "it is damaged or not a head file; run `triage learn` again"
    try:
        with zipfile.ZipFile(path) as zf:
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


def _count(value: Any, what: str, most: int) -> int:
    """A width or count from the meta: a whole number between 1 and ``most`` (before anything is sized by it)."""
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= most:
        raise ValueError(f"features.{what} is {value!r}; a model's is a whole number from 1 to {most:,}")
    return value


def _read_member(zf: zipfile.ZipFile, name: str) -> np.ndarray:
    """One ``.npy`` member, never unpickled; reading stops at its declared size (CRC checked)."""
    with zf.open(name) as fh:
        return np.lib.format.read_array(fh, allow_pickle=False)


def describe_read(read: str) -> str:
    """A read position in words, for messages."""
    return "each criterion's own question (tail)" if read == TAIL else f"the shared read position ({read})"


def check_match(head: Head, *, engine: Any, pack: Any, readout: str = "label", read: str | None = None) -> str | None:
    """Why ``head`` does not fit this engine, pack and readout, or None when it does.

    ``read``: the read position the features will come from (None: wherever the head reads).
    """
    keys = calibrate.check_match(
        head, model_sha256=engine.sha256, pack_hash=pack.hash, prompt_format=engine.format_for(readout).id
    )
    problems = [keys] if keys else []
    native = getattr(engine, "native", None)
    if native is not None and (head.n_vocab, head.n_embd) != (native.n_vocab, native.n_embd):
        problems.append(
            f"features for vocabulary {head.n_vocab} × width {head.n_embd} "
            f"≠ the model's {native.n_vocab} × {native.n_embd}"
        )
    if read is not None and read != head.read:
        problems.append(
            f"it was fitted on {describe_read(head.read)}, and these features are read at {describe_read(read)}"
        )
    attention = getattr(native, "attention", None)
    if isinstance(attention, str) and attention != head.attention:
        problems.append(f"its features were computed with {head.attention} attention, this engine runs {attention}")
    if not problems:  # same pack hash: the options must match too
        by_id = {c.id: [o.id for o in c.options] for c in pack.criteria}
        for cid, h in head.criteria.items():
            if by_id.get(cid) != h.options:
                problems.append(f"criterion {cid!r} has options {h.options}, the pack {by_id.get(cid)}")
    return "; ".join(problems) or None


def load_head(path: str | Path, *, engine: Any, pack: Any, readout: str = "label") -> Head:
    """Read a head file and check that it was fitted for this engine, pack and readout.

    Raises:
        InputError: it does not match (naming what differs), or cannot be read.
    """
    native = getattr(engine, "native", None)
    head = read_head(path, shape=(native.n_vocab, native.n_embd) if native is not None else None)
    why = check_match(head, engine=engine, pack=pack, readout=readout)
    if why:
        raise InputError(
            f"head {path} was learned for another setup: {why}",
            hint="run `triage learn` for this model and pack, or leave out --head",
        )
    return head


def heads_dir() -> Path:
    """Where learned heads are kept: ``user_dirs().data / "heads"``."""
    return user_dirs().data / "heads"


def stored_name(model_sha256: str, pack_hash: str, prompt_format: str) -> str:
    """The file name a head for these keys is stored under (as a calibration's, with its own suffix)."""
    return calibrate.stored_name(model_sha256, pack_hash, prompt_format, suffix=SUFFIX)


def store_head(head: Head) -> Path:
    """Save ``head`` in :func:`heads_dir` under :func:`stored_name`; the one it replaces is kept as ``.prev``."""
    return write_head(
        head, heads_dir() / stored_name(head.model_sha256, head.pack_hash, head.prompt_format), backup=True
    )


def starter_path(model_sha256: str, pack_hash: str, prompt_format: str) -> Path:
    """Where the starter head for these keys is stored: ``heads/starter/``, apart from the team's heads."""
    return heads_dir() / "starter" / stored_name(model_sha256, pack_hash, prompt_format)


def store_starter_head(head: Head) -> Path:
    """Save a starter head (:mod:`triage.evaluation.starter`) under :func:`starter_path`."""
    return write_head(head, starter_path(head.model_sha256, head.pack_hash, head.prompt_format))


def stored_starter(engine: Any, pack: Any) -> Path | None:
    """The stored starter head's file for this engine and pack, when there is one."""
    path = starter_path(engine.sha256, pack.hash, engine.format_for("label").id)
    return path if path.is_file() else None


@dataclass
class Found:
    """What :func:`auto_head` found: the head to apply, or why a stored one was not applied."""

    head: Head | None = None
    skipped: str | None = None  # a one-line reason, for the user
    path: Path | None = None  # the file the head was read from


def auto_head(engine: Any, pack: Any, readout: str = "label", *, starter: bool = False) -> Found:
    """The stored head for this engine, pack and readout, loaded and checked.

    What ``triage score`` and the app call when no ``--head`` is given. The file
    stored under this setup's name is applied when it loads and matches; without one, and with
    ``starter``, the stored starter head for this setup (:func:`stored_starter`). When
    there is none, a stored head learned for the same pack with another model or
    prompt format is not applied, and :attr:`Found.skipped` says why. A damaged
    stored head is moved aside (``NAME.bad-TIME``, named in :attr:`Found.skipped`)
    and scoring goes on without it.
    """
    if readout != "label":
        return Found()
    folder = heads_dir()
    path = folder / stored_name(engine.sha256, pack.hash, engine.format_for(readout).id)
    if path.is_file():
        try:
            return Found(load_head(path, engine=engine, pack=pack, readout=readout), path=path)
        except DamagedHead as exc:  # never again: one bad file must not cost every score a warning
            return Found(None, set_aside(path, "stored learned head", exc.message))
        except InputError as exc:
            return Found(None, f"learned head not applied: {exc.message}")
    spath = stored_starter(engine, pack) if starter else None
    if spath is not None:  # no head of the team's: the built-in pack's starter head (triage.evaluation.starter)
        try:
            return Found(load_head(spath, engine=engine, pack=pack, readout=readout), path=spath)
        except DamagedHead as exc:
            return Found(None, set_aside(spath, "stored starter head", exc.message))
        except InputError as exc:
            return Found(None, f"starter head not applied: {exc.message}")
    if not folder.is_dir():
        return Found()
    notes = []
    for other in sorted(folder.glob(f"*-{pack.hash}-*{SUFFIX}"), key=_mtime, reverse=True):
        try:
            head = read_head(other)
        except DamagedHead as exc:
            notes.append(set_aside(other, "stored learned head", exc.message))
            continue
        except InputError:
            continue
        why = check_match(head, engine=engine, pack=pack, readout=readout)
        if why:
            notes.append(f"learned head {other.name} not applied: it was learned for another setup ({why})")
            break
    return Found(None, "; ".join(notes) or None)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
