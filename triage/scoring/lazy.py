"""An engine that loads the model's weights only when it must decode.

``triage learn --history`` often has nothing to score: the app and ``triage score --history``
kept, with each score, what a head reads, and eval's cache holds the rest. What learning
needs of the model then is only what identifies the numbers: the file's sha256, its prompt
format (from the chat template and the vocabulary), the vocabulary size and hidden width,
the attention kernels and the context size. :class:`LazyEngine` answers those from the
file's metadata and vocabulary (:class:`~triage.model.native.NativeVocab`, no weights, no
context) and opens the real :class:`~triage.scoring.engine.Engine` the first time anything
else is asked of it (a ticket to score). Its prompt builders tokenize with that vocabulary
(llama.cpp's own tokenizer, the same ids as the loaded model's), so eval can name a long
ticket's cut in its cache (:meth:`triage.learning.scorer.Scorer.text_key`) without the
weights. Once open, it checks that the engine computes under the identity it answered with,
and from then on it is that engine.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from triage.errors import TriageError
from triage.model.digest import sha256_file
from triage.model.native import NativeVocab, check_n_ctx, check_trained, context_size
from triage.scoring.prompt import PromptBuilder, PromptFormat, detect_format
from triage.scoring.readout import LABEL, ReadoutKind, product_readout
from triage.scoring.tokenizer import NativeTokenizer

if TYPE_CHECKING:
    from triage.domain.pack import Pack
    from triage.domain.result import ModelInfo
    from triage.domain.ticket import Ticket
    from triage.model.resolve import ModelRef
    from triage.scoring.engine import Engine
    from triage.scoring.prefill_result import PrefillResult

__all__ = ["LazyEngine", "ModelSizes"]


@dataclass(frozen=True)
class ModelSizes:
    """What :class:`LazyEngine` says of ``engine.native`` before the model is loaded."""

    n_vocab: int
    n_embd: int
    n_ctx: int
    attention: str


class LazyEngine:
    """An :class:`~triage.scoring.engine.Engine` whose model is loaded on first use.

    Args:
        ref: the resolved model (``triage.model.resolve.ModelRef``).
        open_engine: makes the real engine (the same settings as the identity below).
        n_ctx: the context size asked for.
        flash_attn: whether the engine will run flash attention.
        prompt_style: ``auto``, ``chat`` or ``plain``.

    Raises:
        TriageError: the file cannot be read, or the context is more than it was trained for.
    """

    def __init__(
        self,
        ref: ModelRef,
        open_engine: Callable[[], Engine],
        *,
        n_ctx: int,
        flash_attn: bool,
        prompt_style: str = "auto",
    ) -> None:
        check_n_ctx(n_ctx)
        self._open = open_engine
        self._engine: Engine | None = None
        self.model_path = Path(ref.path)
        self.name = ref.name or self.model_path.stem
        self.stand_in = ref.stand_in
        vocab = NativeVocab(self.model_path)
        try:
            check_trained(self.model_path, n_ctx, vocab.n_ctx_train)
            self.fmt: PromptFormat = detect_format(
                vocab.meta("tokenizer.chat_template"), NativeTokenizer(vocab), prompt_style
            )
            self._sizes = ModelSizes(
                vocab.n_vocab, vocab.n_embd, context_size(n_ctx), "flash" if flash_attn else "plain"
            )
        except BaseException:
            vocab.close()
            raise
        self._vocab: NativeVocab | None = vocab  # kept for the builders' tokenizer until the engine is open
        self._builders: dict[tuple[str, str], PromptBuilder] = {}
        self.sha256 = ref.sha256 or sha256_file(self.model_path)

    @property
    def loaded(self) -> bool:
        """Whether the model's weights were loaded (something had to be decoded)."""
        return self._engine is not None

    @property
    def native(self) -> Any:
        return self._engine.native if self._engine is not None else self._sizes

    @property
    def n_ctx(self) -> int:
        return self._sizes.n_ctx

    @property
    def model_info(self) -> ModelInfo:
        """The ``model`` object of the result schema (as the engine gives it)."""
        return {"name": self.name, "path": str(self.model_path), "sha256": self.sha256, "stand_in": self.stand_in}

    def format_for(self, kind: str) -> PromptFormat:
        return self.fmt.with_readout(kind)

    def builder(self, pack: Pack, readout: ReadoutKind | str = LABEL) -> PromptBuilder:
        """The prompt builder for ``pack`` and ``readout``: the engine's once it is open, else one that
        tokenizes with the model's vocabulary alone (the same token ids)."""
        if self._engine is not None or self._vocab is None:
            return self.engine().builder(pack, readout)
        kind = product_readout(readout)
        got = self._builders.get((pack.hash, kind.name))
        if got is None:
            got = self._builders[(pack.hash, kind.name)] = PromptBuilder(
                pack, self.format_for(kind.name), NativeTokenizer(self._vocab), kind
            )
        return got

    def engine(self) -> Engine:
        """The real engine, loaded now if it was not; it must compute under the identity answered so far."""
        if self._engine is None:
            eng = self._open()
            got = (eng.sha256, eng.fmt.id, eng.native.n_vocab, eng.native.n_embd, eng.n_ctx, eng.native.attention)
            s = self._sizes
            want = (self.sha256, self.fmt.id, s.n_vocab, s.n_embd, s.n_ctx, s.attention)
            if got != want:
                eng.close()
                raise TriageError(
                    f"the model {self.model_path} loaded as {got}, not as its metadata said ({want}); "
                    "nothing was learned from it"
                )
            self._engine = eng
            self._drop_vocab()
        return self._engine

    def prefill(self, ticket: Ticket | str, pack: Pack, *, cancel: Callable[[], bool] | None = None) -> PrefillResult:
        """The real engine's :meth:`~triage.scoring.engine.Engine.prefill` (it loads the model)."""
        return self.engine().prefill(ticket, pack, cancel=cancel)

    def _drop_vocab(self) -> None:
        self._builders.clear()
        if self._vocab is not None:
            self._vocab.close()
            self._vocab = None

    def __getattr__(self, name: str) -> Any:  # anything else: the real engine's
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.engine(), name)

    def close(self) -> None:
        self._drop_vocab()
        if self._engine is not None:
            self._engine.close()

    def __enter__(self) -> LazyEngine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
