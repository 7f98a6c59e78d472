"""The tokenizer boundary the prompt builder talks to.

Two implementations: the loaded model's own tokenizer (used for scoring), and
Qwen3's ``tokenizer.json`` through the ``tokenizers`` library (used to count a
ticket's tokens before a model has loaded, and to check that prompts tokenize
the same in every process).

Ticket text is always encoded as plain text: a ticket that contains ``<|im_end|>``,
``<think>`` or any other special or added token's text gets the characters, never
that token. Asking for plain text is not enough for that: llama.cpp (like the
``tokenizers`` library) matches *user-defined* tokens even then, and Qwen3's
``<think>`` and ``</think>`` are user-defined, not control, tokens. So
:func:`plain_pieces` cuts the text after the first character of every such token's
text, and each piece is encoded on its own: no piece can hold a whole token text,
and text without one is encoded in one piece, exactly as before.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from triage.model.native import NativeModel, NativeVocab


class Tokenizer(Protocol):
    """What the prompt builder needs from a tokenizer."""

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` as plain text (no control tokens, no BOS)."""

    def control(self, token: str) -> int | None:
        """Id of a control token such as ``<|im_start|>``, or None when the vocab lacks it."""

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids`` (invalid UTF-8 at the edges dropped)."""

    @property
    def bos(self) -> int | None:
        """The BOS id when the model wants one prepended, else None."""


def special_pattern(texts: Iterable[str]) -> re.Pattern[str] | None:
    """A pattern that matches where any of ``texts`` starts (overlaps included), or None.

    Texts of one character cannot be cut and are left out (no tokenizer in use has
    a one-character added token that is not also its plain-text token).
    """
    alts = sorted({t for t in texts if len(t) > 1}, key=len, reverse=True)
    if not alts:
        return None
    return re.compile("(?=" + "|".join(map(re.escape, alts)) + ")")


def plain_pieces(text: str, pattern: re.Pattern[str] | None) -> list[str]:
    """``text`` cut after the first character of every occurrence of a special token's text.

    Joined, the pieces are ``text``; none of them contains a whole special token text.
    """
    if pattern is None:
        return [text]
    cuts = [m.start() + 1 for m in pattern.finditer(text)]
    if not cuts:
        return [text]
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in zip(bounds, bounds[1:], strict=False) if b > a]


class NativeTokenizer:
    """A :class:`Tokenizer` over a :class:`triage.model.native.NativeModel`: the one the engine scores with."""

    def __init__(self, native: NativeModel | NativeVocab) -> None:
        import llama_cpp

        self._n = native
        self._bos = native.bos if native.add_bos else None
        self._get_attr = lambda tid: int(llama_cpp.llama_vocab_get_attr(native.vocab, tid))
        # The tokens llama.cpp's tokenizer matches by their text before BPE (its
        # "special tokens cache"): control, user-defined and unknown ones, looked up once per model
        # (its cost: docs/engine.md, "Measured costs").
        attr = llama_cpp
        special = attr.LLAMA_TOKEN_ATTR_CONTROL | attr.LLAMA_TOKEN_ATTR_USER_DEFINED | attr.LLAMA_TOKEN_ATTR_UNKNOWN
        texts = [
            llama_cpp.llama_vocab_get_text(native.vocab, i).decode("utf-8", "replace")
            for i in range(native.n_vocab)
            if self._get_attr(i) & special
        ]
        self._special = special_pattern(texts)

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        return [t for piece in plain_pieces(text, self._special) for t in self._n.tokenize(piece, special=False)]

    def control(self, token: str) -> int | None:
        """Id of ``token`` when the vocab has it as one control or user-defined token (``<think>`` is
        user-defined in Qwen3), else None (a text that only happens to be one ordinary token)."""
        import llama_cpp

        ids = self._n.tokenize(token, special=True)
        wanted = llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
        return ids[0] if len(ids) == 1 and self._get_attr(ids[0]) & wanted else None

    def decode(self, ids: list[int]) -> str:
        return self._n.detokenize(ids).decode("utf-8", errors="ignore")

    @property
    def bos(self) -> int | None:
        return self._bos


class HFTokenizer:
    """A ``tokenizers`` tokenizer (Qwen3's by default, shipped gzipped in assets)."""

    def __init__(self, tok: Any, bos: int | None = None) -> None:
        tok.encode_special_tokens = True  # special tokens' text in a ticket stays text...
        self._tok = tok
        self._bos = bos
        # ...but added tokens that are not special (<think>) would still match: cut them too.
        self._special = special_pattern(str(t.content) for t in tok.get_added_tokens_decoder().values())

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        pieces = plain_pieces(text, self._special)
        return [t for piece in pieces for t in self._tok.encode(piece, add_special_tokens=False).ids]

    def control(self, token: str) -> int | None:
        return self._tok.token_to_id(token)

    def decode(self, ids: list[int]) -> str:
        return str(self._tok.decode(ids, skip_special_tokens=False))

    @property
    def bos(self) -> int | None:
        return self._bos


@lru_cache(maxsize=1)
def qwen3_tokenizer() -> HFTokenizer:
    """Qwen3's reference tokenizer (``assets/qwen3-tokenizer.json.gz``, Apache-2.0)."""
    from tokenizers import Tokenizer as _Tok

    from triage.assets_path import asset

    with gzip.open(asset("qwen3-tokenizer.json.gz"), "rt", encoding="utf-8") as fh:
        return HFTokenizer(_Tok.from_str(fh.read()))
