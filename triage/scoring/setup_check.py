"""Whether a fit was made for this setup: a calibration's or a head's keys (model sha256, pack hash, prompt
format), and for a head its widths, read position, attention and options.

Scoring checks the head it is handed (:mod:`triage.scoring.start`); the fit store
(:mod:`triage.learning.fitstore`) checks what it finds before it offers it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from triage.scoring.cue import describe_read

if TYPE_CHECKING:
    from triage.domain.pack import Pack
    from triage.scoring.head import Head
    from triage.scoring.protocol import ModelIdentity


class Keyed(Protocol):
    """What a fit is stored under: a :class:`~triage.scoring.calibrate.Calibration` or a learned head."""

    @property
    def model_sha256(self) -> str: ...

    @property
    def pack_hash(self) -> str: ...

    @property
    def prompt_format(self) -> str: ...


def check_keys(fit: Keyed, *, model_sha256: str, pack_hash: str, prompt_format: str) -> str | None:
    """Why ``fit`` (a calibration or a learned head) does not fit this
    model, pack and prompt format, or None when it does."""
    problems = []
    if fit.model_sha256 != model_sha256:
        problems.append(f"model sha256 {fit.model_sha256[:12]}… ≠ running model {model_sha256[:12]}…")
    if fit.pack_hash != pack_hash:
        problems.append(f"pack hash {fit.pack_hash} ≠ {pack_hash}")
    if fit.prompt_format != prompt_format:
        problems.append(f"prompt format {fit.prompt_format} ≠ {prompt_format}")
    return "; ".join(problems) or None


def check_head(
    head: Head, *, engine: ModelIdentity, pack: Pack, readout: str = "label", read: str | None = None
) -> str | None:
    """Why ``head`` does not fit this engine, pack and readout, or None when it does.

    ``read``: the read position the features will come from (None: wherever the head reads).
    """
    keys = check_keys(
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
