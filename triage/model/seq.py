"""What to decode: a piece of one or more sequences (kept apart from :mod:`triage.model.native`,
so that code which only describes decodes, such as the readouts, never loads llama.cpp)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Seq:
    """Tokens to decode into one sequence, starting at position ``pos``.

    ``also`` names more sequences the same tokens belong to (one KV cell shared
    by several sequences, as llama.cpp's batches allow): a tail that several
    teacher-forced answers continue is decoded once. ``every`` asks for the logits
    of every token of the piece (rows in order), not just the last.
    """

    key: object  # the caller's name for this piece; logits come back under it
    seq_id: int
    pos: int
    tokens: tuple[int, ...]
    also: tuple[int, ...] = ()
    every: bool = False
