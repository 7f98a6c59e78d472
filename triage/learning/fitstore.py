"""The fit files' store: where learned heads and calibrations are kept, whether one fits a setup,
and which one a setup gets.

Both kinds of fit are keyed by the model's sha256, the pack's hash and the prompt format; a file is
applied only where all three match (:func:`~triage.scoring.setup_check.check_keys`, and for a head its
widths, read position, attention and options: :func:`~triage.scoring.setup_check.check_head`). They are
stored in ``user_dirs().data`` under ``heads/`` and ``calibrations/``, under a name made of the keys
(:func:`stored_name`); the starter head (:mod:`triage.learning.starter`) under ``heads/starter/``. :func:`auto_head` and
:func:`auto_calibration` find the stored fit for an engine and pack; a damaged stored file is
moved aside (``NAME.bad-TIME``) and passed over. Every file is read through :data:`FILES`: once, and
again when it changes (a head or calibration stored by another process is seen on the next ask).

The files' formats are :mod:`triage.learning.head_file` and :mod:`triage.scoring.calibrate`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from triage.errors import InputError
from triage.learning.head_file import SUFFIX, DamagedHead, read_head, write_head
from triage.learning.memo import FileMemo
from triage.scoring.calibrate import Calibration, DamagedCalibration, read_calibration, write_calibration
from triage.scoring.head import Head
from triage.scoring.options import DEFAULT_READOUT
from triage.scoring.setup_check import check_head, check_keys
from triage.store.files import set_aside
from triage.store.paths import user_dirs

if TYPE_CHECKING:
    from triage.domain.pack import Pack
    from triage.scoring.protocol import ModelIdentity

log = logging.getLogger(__name__)

FILES = FileMemo()
"""The head and calibration files this process has read, kept while each file stays as it was
(:mod:`triage.learning.memo`): the policy asks for every ticket, the files are read when they change."""


def _calibration(path: str | Path) -> Calibration:
    """The calibration file at ``path`` (:func:`~triage.scoring.calibrate.read_calibration`), through :data:`FILES`."""
    return FILES.get(path, read_calibration, "calibration")


def _head(path: str | Path, shape: tuple[int, int] | None = None) -> Head:
    """The head file at ``path`` (:func:`~triage.learning.head_file.read_head`), through :data:`FILES`."""
    return FILES.get(path, lambda p: read_head(p, shape=shape), ("head", shape))


def calibrations_dir() -> Path:
    """Where fitted calibrations are kept: ``user_dirs().data / "calibrations"``."""
    return user_dirs().data / "calibrations"


def stored_name(model_sha256: str, pack_hash: str, prompt_format: str, *, suffix: str = ".json") -> str:
    """The file name a calibration (or, with its suffix, a learned head) for these three keys is stored under."""
    fmt = prompt_format.replace("/", "_").replace(":", "_").replace("+", "_")
    return f"{model_sha256[:16]}-{pack_hash}-{fmt}{suffix}"


def head_name(model_sha256: str, pack_hash: str, prompt_format: str) -> str:
    """The file name a head for these keys is stored under (a calibration's, with the head file's suffix)."""
    return stored_name(model_sha256, pack_hash, prompt_format, suffix=SUFFIX)


def store_calibration(cal: Calibration) -> Path:
    """Save ``cal`` in :func:`calibrations_dir` under :func:`stored_name`; the one it replaces is kept as ``.prev``."""
    import shutil

    path = calibrations_dir() / stored_name(cal.model_sha256, cal.pack_hash, cal.prompt_format)
    if path.exists():
        shutil.copy2(path, path.with_name(path.name + ".prev"))
    return write_calibration(cal, path)


def find_calibration(
    model_sha256: str, pack_hash: str, prompt_format: str, notice: Callable[[str], None] | None = None
) -> Path | None:
    """The stored calibration fitted for exactly this model, pack and prompt format, or None.

    Looks first for the file :func:`store_calibration` writes, then at any other
    ``*.json`` in :func:`calibrations_dir` (newest first) whose three keys match.
    A damaged file there is moved aside (``NAME.bad-TIME``), said in one line to
    ``notice`` (and the log), and passed over: it must not cost every score.
    """
    folder = calibrations_dir()
    if not folder.is_dir():
        return None
    preferred = folder / stored_name(model_sha256, pack_hash, prompt_format)
    others = sorted((p for p in folder.glob("*.json") if p != preferred), key=_mtime, reverse=True)
    for path in ([preferred] if preferred.is_file() else []) + others:
        try:
            cal = _calibration(path)
        except DamagedCalibration as exc:
            line = set_aside(path, "stored calibration", exc.message)
            log.warning("%s", line)
            if notice is not None:
                notice(line)
            continue
        except InputError:
            continue
        if check_keys(cal, model_sha256=model_sha256, pack_hash=pack_hash, prompt_format=prompt_format) is None:
            return path
    return None


def auto_calibration(
    engine: ModelIdentity, pack: Pack, readout: str = DEFAULT_READOUT, notice: Callable[[str], None] | None = None
) -> Calibration | None:
    """The stored calibration for this engine, pack and readout, loaded and checked, or None.

    What ``triage score`` and the TUI call when no ``--calibration`` is given.
    The caller should score with ``cal.orderings`` and ``cal.prior`` (see
    :func:`check_options`), since the fit was made on those log-probs. ``notice``
    hears of a damaged stored file that was moved aside.
    """
    path = find_calibration(engine.sha256, pack.hash, engine.format_for(readout).id, notice)
    return load_calibration(path, engine=engine, pack=pack, readout=readout) if path else None


def load_calibration(
    path: str | Path, *, engine: ModelIdentity, pack: Pack, readout: str = DEFAULT_READOUT
) -> Calibration:
    """Read a calibration file and check that it was fitted for this engine, pack and readout.

    Raises:
        InputError: the file does not match (naming what differs), or cannot be read.
    """
    cal = _calibration(path)
    why = check_keys(cal, model_sha256=engine.sha256, pack_hash=pack.hash, prompt_format=engine.format_for(readout).id)
    if why:
        raise InputError(
            f"calibration {path} was fitted for another setup: {why}",
            hint="re-run `triage calibrate` for this model and pack, or leave out --calibration",
        )
    cal._option_ids = {c.id: [o.id for o in c.options] for c in pack.criteria}
    return cal


def load_head(path: str | Path, *, engine: ModelIdentity, pack: Pack, readout: str = "label") -> Head:
    """Read a head file and check that it was fitted for this engine, pack and readout.

    Raises:
        InputError: it does not match (naming what differs), or cannot be read.
    """
    native = getattr(engine, "native", None)
    head = _head(path, (native.n_vocab, native.n_embd) if native is not None else None)
    why = check_head(head, engine=engine, pack=pack, readout=readout)
    if why:
        raise InputError(
            f"head {path} was learned for another setup: {why}",
            hint="run `triage learn` for this model and pack, or leave out --head",
        )
    return head


RELEARN = "run `triage learn LABELLED --pack PACK` (with --history for the agents' labels) with this model to fit it"
"""What fits a team's head for the model that runs: the words every note on one that does not fit ends with."""


def heads_dir() -> Path:
    """Where learned heads are kept: ``user_dirs().data / "heads"``."""
    return user_dirs().data / "heads"


def store_head(head: Head) -> Path:
    """Save ``head`` in :func:`heads_dir` under :func:`stored_name`; the one it replaces is kept as ``.prev``."""
    return write_head(head, heads_dir() / head_name(head.model_sha256, head.pack_hash, head.prompt_format), backup=True)


def starter_path(model_sha256: str, pack_hash: str, prompt_format: str) -> Path:
    """Where the starter head for these keys is stored: ``heads/starter/``, apart from the team's heads."""
    return heads_dir() / "starter" / head_name(model_sha256, pack_hash, prompt_format)


_KEPT: dict[Path, Head] = {}
"""Starter heads fitted in this process whose file could not be written (a full disk), by the path they
belong at: :func:`auto_head` applies them from memory, so a failed write never costs another fit here."""


def store_starter_head(head: Head) -> Path:
    """Save a starter head (:mod:`triage.learning.starter`) under :func:`starter_path`.

    Raises:
        OSError: the file cannot be written (a full disk); the head is kept in memory for this process
            (:func:`kept_starter`) all the same.
    """
    path = starter_path(head.model_sha256, head.pack_hash, head.prompt_format)
    try:
        written = write_head(head, path)
    except OSError:
        _KEPT[path] = head
        raise
    _KEPT.pop(path, None)
    return written


def kept_starter(engine: ModelIdentity, pack: Pack) -> Head | None:
    """The starter head fitted in this process for this engine and pack whose file could not be written."""
    return _KEPT.get(starter_path(engine.sha256, pack.hash, engine.format_for("label").id))


def shipped_dir() -> Path:
    """Where the starter heads that triage ships are: ``assets/heads/`` (one file per catalog stand-in, fitted
    by ``scripts/ship-starter-heads`` on the starter set, under :func:`head_name`'s keys)."""
    from importlib import resources

    return Path(str(resources.files("triage.assets").joinpath("heads")))


def shipped_starter_path(model_sha256: str, pack_hash: str, prompt_format: str) -> Path:
    """Where a shipped starter head for these keys would be."""
    return shipped_dir() / head_name(model_sha256, pack_hash, prompt_format)


def stored_starter(engine: ModelIdentity, pack: Pack) -> Path | None:
    """The starter head's file for this engine and pack: the one triage ships for this model, pack and prompt
    format (:func:`shipped_dir`) when it fits, else one fitted here (:func:`starter_path`), else None."""
    keys = (engine.sha256, pack.hash, engine.format_for("label").id)
    shipped, local = shipped_starter_path(*keys), starter_path(*keys)
    if not local.is_file():
        return shipped if shipped.is_file() else None
    # both: the shipped one unless it does not fit this engine (another attention kernel, say), which is
    # why the one here was fitted (:func:`triage.learning.starter.needs_fit`)
    return shipped if shipped.is_file() and starter_unfit(engine, pack, shipped) is None else local


def starter_unfit(engine: ModelIdentity, pack: Pack, path: Path) -> str | None:
    """Why the stored starter head at ``path`` cannot be applied to this engine and pack (fitted for another
    model, read position, attention or options; damaged), or None when it fits: then it is fitted again."""
    try:
        load_head(path, engine=engine, pack=pack)
    except InputError as exc:  # DamagedHead included
        return exc.message
    return None


@dataclass
class Found:
    """What :func:`auto_head` found: the head to apply, or why a stored one was not applied."""

    head: Head | None = None
    skipped: str | None = None  # a one-line reason, for the user
    path: Path | None = None  # the file the head was read from


def auto_head(engine: ModelIdentity, pack: Pack, readout: str = "label", *, starter: bool = False) -> Found:
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
    path = folder / head_name(engine.sha256, pack.hash, engine.format_for(readout).id)
    if path.is_file():
        try:
            return Found(load_head(path, engine=engine, pack=pack, readout=readout), path=path)
        except DamagedHead as exc:  # never again: one bad file must not cost every score a warning
            return Found(None, set_aside(path, "stored learned head", exc.message))
        except InputError as exc:  # the team's own: only the team's labels can fit it again
            return Found(None, f"learned head not applied: {exc.message}; {RELEARN}")
    kept = kept_starter(engine, pack) if starter else None
    if kept is not None:  # fitted in this process, its file not written (a full disk)
        return Found(kept)
    spath = stored_starter(engine, pack) if starter else None
    if spath is not None:  # no head of the team's: the built-in pack's starter head (triage.learning.starter)
        try:
            return Found(load_head(spath, engine=engine, pack=pack, readout=readout), path=spath)
        except DamagedHead as exc:
            return Found(None, set_aside(spath, "stored starter head", exc.message))
        except InputError as exc:  # the next command that fits the starter (score, serve, the app) fits it again
            return Found(None, f"starter head not applied: {exc.message}; it is fitted again on the next start")
    if not folder.is_dir():
        return Found()
    notes = []
    for other in sorted(folder.glob(f"*-{pack.hash}-*{SUFFIX}"), key=_mtime, reverse=True):
        try:
            head = _head(other)
        except DamagedHead as exc:
            notes.append(set_aside(other, "stored learned head", exc.message))
            continue
        except InputError:
            continue
        why = check_head(head, engine=engine, pack=pack, readout=readout)
        if why:
            notes.append(f"learned head {other.name} not applied: it was learned for another setup ({why}); {RELEARN}")
            break
    return Found(None, "; ".join(notes) or None)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
