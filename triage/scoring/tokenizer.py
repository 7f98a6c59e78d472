"""The tokenizer boundary the prompt builder talks to.

Two implementations: the loaded model's own tokenizer (used for scoring), and
Qwen3's ``tokenizer.json`` through the ``tokenizers`` library (used to count a
ticket's tokens before a model has loaded, and to check that prompts tokenize
the same in every process). Ticket text is always encoded as plain text: a
ticket that contains ``<|im_end|>`` gets the characters, never the control token.
"""

from __future__ import annotations

import gzip
from functools import lru_cache
from typing import Any, Protocol


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


class LlamaTokenizer:
    """The tokenizer of a loaded ``llama_cpp.Llama`` model."""

    def __init__(self, llama: Any) -> None:
        import llama_cpp

        self._llama = llama
        vocab = llama_cpp.llama_model_get_vocab(llama.model)
        add_bos = bool(llama_cpp.llama_vocab_get_add_bos(vocab))
        self._bos = int(llama.token_bos()) if add_bos else None

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        return list(self._llama.tokenize(text.encode("utf-8"), add_bos=False, special=False))

    def control(self, token: str) -> int | None:
        ids = self._llama.tokenize(token.encode("utf-8"), add_bos=False, special=True)
        return int(ids[0]) if len(ids) == 1 else None

    def decode(self, ids: list[int]) -> str:
        return self._llama.detokenize(ids).decode("utf-8", errors="ignore")

    @property
    def bos(self) -> int | None:
        return self._bos


class NativeTokenizer:
    """A :class:`Tokenizer` over a :class:`triage.model.native.NativeModel`: the one the engine scores with."""

    def __init__(self, native: Any) -> None:
        self._n = native
        self._bos = native.bos if native.add_bos else None

    def encode(self, text: str) -> list[int]:
        return self._n.tokenize(text, special=False) if text else []

    def control(self, token: str) -> int | None:
        ids = self._n.tokenize(token, special=True)
        return ids[0] if len(ids) == 1 and ids != self._n.tokenize(token, special=False) else None

    def decode(self, ids: list[int]) -> str:
        return self._n.detokenize(ids).decode("utf-8", errors="ignore")

    @property
    def bos(self) -> int | None:
        return self._bos


class HFTokenizer:
    """A ``tokenizers`` tokenizer (Qwen3's by default, shipped gzipped in assets)."""

    def __init__(self, tok: Any, bos: int | None = None) -> None:
        tok.encode_special_tokens = True  # control-token text in a ticket stays text
        self._tok = tok
        self._bos = bos

    def encode(self, text: str) -> list[int]:
        if not text:
            return []
        return list(self._tok.encode(text, add_special_tokens=False).ids)

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

    from triage.store.paths import asset

    with gzip.open(asset("qwen3-tokenizer.json.gz"), "rt", encoding="utf-8") as fh:
        return HFTokenizer(_Tok.from_str(fh.read()))
