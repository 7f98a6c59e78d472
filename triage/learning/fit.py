"""Which learned head and calibration a run applies, and what was passed over and why.

The one policy for ``triage score`` (and ``--ray``, with what the nodes reported as the
model), ``triage eval``, ``triage learn`` and the app. It never prints: the notes come back
with the choice, and each front end prints or shows them its own way.

Order: an explicit file (``--head``, ``--calibration``, the config's ``calibration``) is
applied or refused with an error; without one, the file stored for this model, pack and
prompt format is applied when it fits the options, and otherwise named in a note.

A head's criterion that ``triage learn`` stored but did not apply (its own check found it no
better than zero-shot: :attr:`triage.scoring.head.CriterionHead.applied`) is never applied,
from a stored or an explicit file: it stays calibrated or zero-shot, and a note names it and
why. A head none of whose chosen criteria applies is not applied at all.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from triage.errors import InputError
from triage.scoring.options import PRODUCT_READ, ReadAs, ScoreOptions

if TYPE_CHECKING:
    from triage.domain.pack import Pack
    from triage.scoring.calibrate import Calibration
    from triage.scoring.head import Head
    from triage.scoring.protocol import ModelIdentity


@dataclass(frozen=True)
class FitRequest:
    """What the user asked for explicitly.

    Attributes:
        head: ``--head FILE``.
        no_head: ``--no-head``: apply no learned head, not even the stored one.
        calibration: ``--calibration FILE``, else the config's ``calibration``.
        no_calibration: ``--no-calibration``.
        starter: with no head of the team's, apply the built-in pack's stored starter head (the ``starter``
            setting; :mod:`triage.learning.starter`).
    """

    head: str | None = None
    no_head: bool = False
    calibration: str | None = None
    no_calibration: bool = False
    starter: bool = True

    @classmethod
    def of(
        cls,
        *,
        head: str | None = None,
        no_head: bool = False,
        calibration: str | None = None,
        no_calibration: bool = False,
        config: dict[str, object] | None = None,
    ) -> FitRequest:
        """A request from a command's flags; ``calibration`` falls back to the config's ``calibration`` key,
        ``starter`` is the config's ``starter`` key (default on; TRIAGE_STARTER overrides it)."""
        from triage.settings import Settings

        config = config or {}
        return cls(head, no_head, calibration or Settings.of(config).calibration, no_calibration, starter_on(config))


@dataclass(frozen=True)
class FitNote:
    """One line for the user about the choice.

    Attributes:
        about: ``head`` or ``calibration``.
        text: the line, without any prefix (``applying calibration cal.json``).
        applied: True for what is applied; False for what was passed over, and why.
    """

    about: Literal["head", "calibration"]
    text: str
    applied: bool = False


@dataclass(frozen=True)
class Fits:
    """The head and calibration to score with (either may be None) and the notes on the choice."""

    head: Head | None = None
    calibration: Calibration | None = None
    notes: tuple[FitNote, ...] = ()
    head_path: str | None = None  # the file the head was read from
    calibration_path: str | None = None  # the explicit file, or the stored calibration's name

    def passed_over(self, about: Literal["head", "calibration"]) -> list[str]:
        """The notes on what was not applied, for ``about``."""
        return [n.text for n in self.notes if n.about == about and not n.applied]

    def engine_kwargs(self) -> dict[str, Any]:
        """``calibration=`` and ``head=`` for :meth:`~triage.scoring.engine.Engine.score`."""
        return {"calibration": self.calibration, "head": self.head}


def choose_fits(
    model: ModelIdentity,
    pack: Pack,
    options: ScoreOptions,
    request: FitRequest | None = None,
    *,
    any_base: bool = False,
    read_as: ReadAs = PRODUCT_READ,
) -> Fits:
    """The learned head and calibration to apply for this model, pack and options.

    Args:
        model: the model's identity (``sha256``, ``format_for``); a learned head's width is
            also checked against ``model.native`` when it has one.
        request: the explicit files and refusals; default none.
        any_base: the caller reads every base a calibration may sit on (eval), so a stored
            calibration fitted on other orderings or prior is not passed over here.
        read_as: what the readings are (the product's; the lab's options say theirs).

    Raises:
        InputError: an explicit file that cannot be read or does not fit the model, pack,
            readout or options (the message names the file and what differs).
    """
    from triage.learning.fitstore import auto_calibration, auto_head, load_calibration, load_head
    from triage.scoring.calibrate import check_options

    request = request or FitRequest()
    readout = read_as.readout
    notes: list[FitNote] = []
    calibration, calibration_path = None, None
    if not request.no_calibration:
        explicit = request.calibration
        if explicit:
            calibration = load_calibration(explicit, engine=model, pack=pack, readout=readout)
        else:
            try:
                calibration = auto_calibration(  # a damaged stored file is moved aside, and said
                    model, pack, readout, notice=lambda line: notes.append(FitNote("calibration", line))
                )
            except InputError as exc:  # a stored file that matched by name but cannot be used
                notes.append(FitNote("calibration", f"stored calibration not applied: {exc.message}"))
        if calibration is not None:
            why = None if any_base else check_options(calibration, orderings=read_as.orderings, prior=read_as.prior)
            if why and explicit:
                raise InputError(
                    f"calibration {explicit} does not fit these options: {why}",
                    hint="score with the options it was fitted on, or pass --no-calibration",
                )
            if why:
                notes.append(FitNote("calibration", f"stored calibration {calibration.name} not applied: {why}"))
                calibration = None
            else:
                calibration_path = str(explicit) if explicit else calibration.name
                notes.append(FitNote("calibration", f"applying calibration {calibration_path}", applied=True))

    head, head_path = None, None
    if not request.no_head:
        if request.head and readout != "label":
            raise InputError("a learned head reads options by name; use --readout label, or leave out --head")
        if request.head:
            head = load_head(request.head, engine=model, pack=pack, readout=readout)
            head_path = str(request.head)
        else:
            found = auto_head(model, pack, readout, starter=request.starter)
            if found.skipped:
                notes.append(FitNote("head", found.skipped))
            head, head_path = found.head, (str(found.path) if found.path else None)
    if head is not None:
        chosen = [c.id for c in pack.criteria if options.criteria is None or c.id in options.criteria]
        learned = [cid for cid in chosen if head.covers(cid)]
        held = {cid: why for cid, why in head.held_back().items() if cid in chosen}
        rest = [cid for cid in chosen if not head.covers(cid) and cid not in held]
        whys = "; ".join(f"{cid} ({why})" for cid, why in held.items())
        kept = f"; stored, not applied: {whys} (`triage learn --apply` applies it)" if held else ""
        if held and not learned:  # nothing of it applies: score as without it, and say why
            notes.append(
                FitNote("head", f"learned head '{head.name}' not applied: {whys} (`triage learn --apply` applies it)")
            )
            head, head_path = None, None
    if head is not None:
        if learned and read_as.prior:
            notes.append(FitNote("head", "learned criteria read the raw readout; --prior applies to the others only"))
        what = "starter head" if head.kind == "starter" else f"learned head '{head.name}'"
        notes.append(
            FitNote(
                "head",
                f"applying {what} to {', '.join(learned) or 'no chosen criterion'}"
                + (f" (not learned: {', '.join(rest)})" if rest else "")
                + kept,
                applied=True,
            )
        )
    return Fits(head, calibration, tuple(notes), head_path, calibration_path)


def starter_on(config: dict[str, object] | None = None) -> bool:
    """The ``starter`` setting: whether the built-in pack's starter head is fitted and applied (default on).

    ``TRIAGE_STARTER`` in the environment (a switch: :data:`triage.environment.WORDS`) beats the config key;
    any other word is refused.

    Raises:
        InputError: ``TRIAGE_STARTER`` holds a word that is no switch's.
    """
    from triage.environment import switch
    from triage.settings import Settings

    return switch("TRIAGE_STARTER", Settings.of(config or {}).starter)
