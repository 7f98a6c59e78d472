"""A thin owner of one llama.cpp model and context, through llama-cpp-python's C bindings.

We use the C API rather than ``llama_cpp.Llama`` because scoring needs what the
high-level class does not expose: several sequences in one unified KV cache
(``n_seq_max``, ``kv_unified``) for fan-out, batches whose tokens belong to
different sequences, per-sequence state save/restore, and cell truncation.

Nothing here knows about tickets or criteria; see :mod:`triage.scoring.engine`.
llama.cpp's log output is routed to Python's ``logging`` (logger
``triage.llama``) and never written to the terminal, so it cannot garble the TUI.

The model file is memory-mapped. A file replaced by a rename (how ``triage model pull``
installs one) is harmless: the mapping keeps the old file. A file truncated or rewritten
*in place* (``cp new.gguf model.gguf``, an editor, a copy tool) would make the next read of
a missing page a SIGBUS (exit status 135). So before every decode the mapped file itself
(an open descriptor of it, whatever its name now points at) is checked: a size or
modification time other than at load is :class:`ModelFileChanged`, a clear error, instead
of a crash. A truncation *during* a decode cannot be caught (docs/hardening.md).
"""

from __future__ import annotations

import ctypes
import logging
import os
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

import llama_cpp
import numpy as np

from triage import gate, signals
from triage.errors import InputError, TriageError
from triage.model.progress import DecodeMeter, Report
from triage.model.seq import Seq
from triage.settings import DEFAULTS

__all__ = ["Cancelled", "ModelFileChanged", "NativeModel", "NativeVocab", "Seq", "check_n_ctx", "check_trained"]
__all__ += ["context_size", "check_threads", "default_threads", "max_threads"]

log = logging.getLogger("triage.llama")
log.addHandler(logging.NullHandler())  # never Python's last-resort stderr handler
# ggml.h: NONE=0, DEBUG=1, INFO=2, WARN=3, ERROR=4, CONT=5 (continues the previous line).
_LOG_LEVELS = {0: logging.DEBUG, 1: logging.DEBUG, 2: logging.INFO, 3: logging.WARNING, 4: logging.ERROR}
_last_level = logging.DEBUG


@llama_cpp.llama_log_callback
def _route_log(level: int, text: bytes, _user: ctypes.c_void_p) -> None:
    global _last_level
    try:
        lvl = _last_level if level == 5 else _LOG_LEVELS.get(level, logging.DEBUG)
        _last_level = lvl
        if log.isEnabledFor(lvl):
            log.log(lvl, text.decode("utf-8", "replace").rstrip())
    except Exception:  # a logging failure must never reach C
        pass


_backend_ready = False


def _init_backend() -> None:
    global _backend_ready
    if not _backend_ready:
        llama_cpp.llama_log_set(_route_log, ctypes.c_void_p(0))
        llama_cpp.llama_backend_init()
        _backend_ready = True


def default_threads() -> int:
    """All cores this process may run on (llama.cpp's default is half)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:
        return max(1, os.cpu_count() or 1)


# llama.cpp sizes a context in steps of 256 cells (a request of 300 gets 512). Below 256 it
# still allocates 256 cells but caps a batch at the number asked for, and below the number of
# sequences (N_SEQ_MAX) it aborts the process (GGML_ASSERT, exit 134): sizes are checked here,
# before llama.cpp sees them.
CTX_STEP = 256
MIN_N_CTX = CTX_STEP
N_SEQ_MAX = 64
ABORTED = 2  # llama_decode's return code when the abort callback said stop
# Flash attention on the CPU backend. llama.cpp's default (AUTO) turns it on wherever the backend
# supports it, which the CPU always does: every result and learned head so far was computed with it on.
# triage asks for it explicitly, so the numbers a head was fitted on never depend on llama.cpp's choice;
# it is part of what identifies features (:attr:`NativeModel.attention`). Measured: bench/flash_attn.py.
FLASH_ATTN = True


def max_threads() -> int:
    """The most CPU threads accepted: twice the cores this process may run on."""
    return 2 * default_threads()


def check_n_ctx(n_ctx: object, origin: str = "n_ctx") -> int:
    """``n_ctx`` if llama.cpp can make a context of that size, else a clear error.

    Args:
        n_ctx: the requested context size in tokens.
        origin: where it came from, for the message (``--n-ctx 16``, a config line).

    Raises:
        InputError: not an integer, or below :data:`MIN_N_CTX`.
    """
    if not isinstance(n_ctx, int) or isinstance(n_ctx, bool):
        raise InputError(f"{origin}: the context size must be a whole number of tokens, got {n_ctx!r}")
    if n_ctx < MIN_N_CTX:
        raise InputError(
            f"{origin}: a context of {n_ctx} tokens is too small; the smallest "
            f"is {MIN_N_CTX} (llama.cpp sizes contexts in steps of {CTX_STEP})",
            hint=f"use {MIN_N_CTX} or more, e.g. 1024 (eval's default) or {DEFAULTS.n_ctx} (score's)",
        )
    return n_ctx


def check_threads(threads: object, origin: str = "threads") -> int:
    """``threads`` if it is between 1 and :func:`max_threads`, else a clear error.

    Raises:
        InputError: not an integer, or outside 1..2×cores.
    """
    most = max_threads()
    if not isinstance(threads, int) or isinstance(threads, bool) or not 1 <= threads <= most:
        raise InputError(
            f"{origin}: the number of CPU threads must be between 1 and {most} (twice "
            f"the {default_threads()} cores this process may use), got {threads!r}",
            hint=f"leave it out to use all {default_threads()} cores",
        )
    return threads


def context_size(n_ctx: int) -> int:
    """The context llama.cpp makes when asked for ``n_ctx`` tokens: rounded up to a step of :data:`CTX_STEP`."""
    return -(-n_ctx // CTX_STEP) * CTX_STEP


def check_trained(path: Path, n_ctx: int, n_ctx_train: int) -> None:
    """A clear error when ``n_ctx`` is more than the model at ``path`` was trained for (0: not said)."""
    if 0 < n_ctx_train < n_ctx:
        raise InputError(
            f"a context of {n_ctx} tokens is more than {path.name} was trained for ({n_ctx_train})",
            hint=f"use --n-ctx {n_ctx_train} or less",
        )


def check_model_file(path: Path) -> None:
    """Refuse a model path llama.cpp must not open: missing, or a FIFO, device, socket or folder (it would block or fail
    without a word).

    Raises:
        TriageError: naming the file and what it is.
    """
    try:
        gate.check_regular(path, "model")
    except FileNotFoundError:
        raise TriageError(
            f"model file {path} does not exist", hint="run `triage model list`, or pass another --model"
        ) from None
    except OSError as exc:
        raise TriageError(
            f"model file {path} cannot be loaded: {exc.strerror or exc}", hint="pass the .gguf file itself"
        ) from None


class ModelFileChanged(TriageError):
    """The loaded (memory-mapped) model file was truncated or rewritten in place."""


class _MappedFile:
    """The model file as llama.cpp mapped it: an open descriptor, and its size and time at load."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.fd: int | None = None
        try:
            self.fd, self.at_load = gate.open_fd(path, "model")
        except OSError:  # llama.cpp reports a file it cannot open; nothing to watch then
            self.close()

    def check(self) -> None:
        """Raise :class:`ModelFileChanged` when the mapped file is not as it was at load."""
        if self.fd is None:
            return
        now = os.fstat(self.fd)
        was = self.at_load
        if (now.st_size, now.st_mtime_ns) == (was.st_size, was.st_mtime_ns):
            return
        resized = f"it was {was.st_size:,} bytes and is now {now.st_size:,}"
        how = resized if now.st_size != was.st_size else "it was rewritten (its modification time moved)"
        raise ModelFileChanged(
            f"the model file {self.path} was changed in place while it was loaded ({how}); "
            "triage stops using it rather than read a file that is not the one it loaded",
            hint="load the model again (restart triage, or Switch model in the app); to update a model "
            "file, write a new file and rename it over the old one (triage model pull does)",
        )

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


class _Vocabulary:
    """What a loaded model file answers without a context: metadata and the tokenizer (``model``, ``vocab``)."""

    model: object
    vocab: object

    def meta(self, key: str) -> str | None:
        """A GGUF metadata value as text, or None."""
        buf = ctypes.create_string_buffer(1 << 16)
        n = llama_cpp.llama_model_meta_val_str(self.model, key.encode(), buf, len(buf))
        if n < 0:
            return None
        if n >= len(buf):  # chat templates can be long
            buf = ctypes.create_string_buffer(n + 1)
            llama_cpp.llama_model_meta_val_str(self.model, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", "replace")

    def tokenize(self, text: str, *, special: bool = False) -> list[int]:
        """Token ids of ``text``; ``special`` parses control-token text (ours only, never a ticket's)."""
        data = text.encode("utf-8")
        cap = len(data) + 8
        out = (llama_cpp.llama_token * cap)()
        n = llama_cpp.llama_tokenize(self.vocab, data, len(data), out, cap, False, special)
        if n < 0:
            cap = -n
            out = (llama_cpp.llama_token * cap)()
            n = llama_cpp.llama_tokenize(self.vocab, data, len(data), out, cap, False, special)
        return list(out[:n])

    def detokenize(self, ids: list[int]) -> bytes:
        """Bytes of ``ids`` (control tokens rendered as their text)."""
        if not ids:
            return b""
        arr = (llama_cpp.llama_token * len(ids))(*ids)
        cap = 8 * len(ids) + 16
        buf = ctypes.create_string_buffer(cap)
        n = llama_cpp.llama_detokenize(self.vocab, arr, len(ids), buf, cap, False, True)
        if n < 0:
            cap = -n + 1
            buf = ctypes.create_string_buffer(cap)
            n = llama_cpp.llama_detokenize(self.vocab, arr, len(ids), buf, cap, False, True)
        return buf.raw[:n]

    @property
    def add_bos(self) -> bool:
        """Whether this model expects a BOS token first."""
        return bool(llama_cpp.llama_vocab_get_add_bos(self.vocab))

    @property
    def bos(self) -> int:
        """The BOS token id."""
        return int(llama_cpp.llama_vocab_bos(self.vocab))


class NativeVocab(_Vocabulary):
    """A model file's metadata, vocabulary and sizes, loaded without its weights (llama.cpp's ``vocab_only``).

    What identifies the numbers a model computes (its prompt format, vocabulary and hidden width) without
    the cost of a context: ``triage learn`` uses it when every row it learns from already has its features.

    Raises:
        TriageError: the file cannot be read as a model.
    """

    def __init__(self, path: str | Path) -> None:
        _init_backend()
        self.path = Path(path)
        mparams = llama_cpp.llama_model_default_params()
        mparams.n_gpu_layers = 0
        mparams.vocab_only = True
        check_model_file(self.path)
        model = llama_cpp.llama_model_load_from_file(str(self.path).encode("utf-8"), mparams)
        if not model:
            raise TriageError(
                f"llama.cpp could not read {self.path}: the file is damaged or of an unsupported model type",
                hint="run `triage model list` and re-pull the model, or pass another --model",
            )
        self.model = model
        self.vocab = llama_cpp.llama_model_get_vocab(model)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
        # Without the weights llama.cpp leaves the sizes at 0: they are read from the GGUF's metadata,
        # the keys llama.cpp itself reads them from ("<architecture>.embedding_length", ...).
        arch = self.meta("general.architecture") or ""
        self.n_embd = self._size(f"{arch}.embedding_length")
        self.n_ctx_train = self._size(f"{arch}.context_length")

    def _size(self, key: str) -> int:
        value = self.meta(key)
        try:
            return int(value) if value is not None else 0
        except ValueError:
            return 0

    def close(self) -> None:
        """Free the model (idempotent)."""
        if self.model:
            llama_cpp.llama_model_free(self.model)
            self.model = None


class NativeModel(_Vocabulary):
    """One model file loaded with one context.

    Args:
        path: the GGUF file.
        n_ctx: KV cache size in tokens (shared by all sequences: the cache is unified).
        n_batch: most tokens per ``llama_decode`` call.
        n_threads: CPU threads (default: all cores).
        n_seq_max: most sequences alive at once (fan-out copies the prefix into many).
        flash_attn: llama.cpp's flash attention kernels (on by default, :data:`FLASH_ATTN`).

    Raises:
        TriageError: the file cannot be loaded, or the context cannot be made.
    """

    def __init__(
        self,
        path: str | Path,
        *,
        n_ctx: int = DEFAULTS.n_ctx,
        n_batch: int = 1024,
        n_threads: int | None = None,
        n_seq_max: int = N_SEQ_MAX,
        flash_attn: bool = FLASH_ATTN,
    ) -> None:
        check_n_ctx(n_ctx)
        if n_threads is not None:
            check_threads(n_threads)
        if not 1 <= n_seq_max <= MIN_N_CTX:
            raise TriageError(f"n_seq_max must be between 1 and {MIN_N_CTX}, got {n_seq_max}")
        _init_backend()
        self.path = Path(path)
        self._stack = ExitStack()
        mparams = llama_cpp.llama_model_default_params()
        mparams.n_gpu_layers = 0
        mparams.use_mmap = True
        check_model_file(self.path)
        self._file = _MappedFile(self.path)  # opened first: the descriptor is of the file llama.cpp maps
        self._stack.callback(self._file.close)
        model = llama_cpp.llama_model_load_from_file(str(self.path).encode("utf-8"), mparams)
        if not model:
            raise TriageError(
                f"llama.cpp could not load {self.path}: the file is damaged or of an unsupported model type",
                hint="run `triage model list` and re-pull the model, or pass another --model",
            )
        self._stack.callback(llama_cpp.llama_model_free, model)
        self.model = model
        self.vocab = llama_cpp.llama_model_get_vocab(model)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
        self.n_embd = int(llama_cpp.llama_model_n_embd(model))  # width of the hidden state
        self.n_ctx_train = int(llama_cpp.llama_model_n_ctx_train(model))
        try:
            check_trained(self.path, n_ctx, self.n_ctx_train)
        except InputError:
            self.close()
            raise
        threads = n_threads or default_threads()
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = n_ctx
        n_batch = min(n_batch, n_ctx)  # llama.cpp caps it so anyway; say so here
        cparams.n_batch = n_batch
        cparams.n_ubatch = min(512, n_batch)
        cparams.n_seq_max = n_seq_max
        cparams.kv_unified = True  # one pool of cells: a copied prefix costs no extra cells
        cparams.n_threads = threads
        cparams.n_threads_batch = threads
        cparams.no_perf = True
        cparams.flash_attn_type = (
            llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attn else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED
        )
        self.flash_attn = flash_attn
        # llama.cpp asks this between graph computations (per node on the CPU), so a long decode
        # stops within milliseconds of the caller's cancel. It is armed only for a decode that has
        # a stop to ask (see _arm): a call from C into Python per node is not free on a busy machine.
        self._stop: Callable[[], bool] | None = None
        self._abort_cb = llama_cpp.ggml_abort_callback(self._should_abort)  # kept: C holds only a pointer
        self._armed = False
        cparams.abort_callback = llama_cpp.ggml_abort_callback()  # NULL until a decode arms it
        cparams.abort_callback_data = None
        ctx = llama_cpp.llama_init_from_model(model, cparams)
        if not ctx:
            self.close()
            raise TriageError(
                f"llama.cpp could not create a {n_ctx}-token context for {self.path}", hint="try a smaller --n-ctx"
            )
        self._stack.callback(llama_cpp.llama_free, ctx)
        self.ctx = ctx
        self.mem = llama_cpp.llama_get_memory(ctx)
        self.n_ctx = int(llama_cpp.llama_n_ctx(ctx))  # may be above n_ctx: llama.cpp rounds up to a step
        self.n_batch = int(llama_cpp.llama_n_batch(ctx))  # decode() must never pass llama.cpp more than this
        self.n_seq_max = n_seq_max
        self.n_threads = threads
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, n_seq_max)
        self._stack.callback(llama_cpp.llama_batch_free, self._batch)
        self.meter = DecodeMeter(int(llama_cpp.llama_n_ubatch(ctx)))  # progress inside a decode
        self._learn_graph()

    def _learn_graph(self) -> None:
        """Count the graph nodes of one micro-batch (what :attr:`meter` reads progress from), with a
        one-token decode into the empty cache, then empty it again: the cache is as a fresh context's."""
        try:
            self.decode([Seq("probe", 0, 0, (self.bos if self.add_bos else 0,))], progress=lambda *_: None)
        except TriageError as exc:  # progress inside a decode is not worth a failed load
            log.warning("could not count the model's graph nodes (no progress inside a decode): %s", exc)
        finally:
            self.clear()

    @property
    def attention(self) -> str:
        """Which attention kernels compute the numbers (``flash`` or ``plain``): part of what identifies features."""
        return "flash" if self.flash_attn else "plain"

    def close(self) -> None:
        """Free the context and the model (idempotent)."""
        self._stack.close()

    def _arm(self, stop: Callable[[], bool] | None, counting: bool = False) -> None:
        """Point llama.cpp's abort callback at ``stop`` and, ``counting``, the progress meter (neither: no
        callback at all)."""
        self._stop = stop
        want = stop is not None or counting
        if want != self._armed:
            cb = self._abort_cb if want else llama_cpp.ggml_abort_callback()
            llama_cpp.llama_set_abort_callback(self.ctx, cb, None)
            self._armed = want

    def _should_abort(self, _data: object) -> bool:
        if signals.pending():  # Ctrl-C or SIGTERM during the decode: stop it, then raise (signals.deferred)
            return True
        if self.meter.counting:
            try:
                self.meter.tick()
            except Exception:  # an exception must never reach C; progress is not worth a decode
                log.exception("reporting a decode's progress failed; no more progress for it")
                self.meter.stop()
        stop = self._stop
        if stop is None:
            return False
        try:
            return bool(stop())
        except Exception:  # an exception must never reach C; a broken check stops the decode
            log.exception("the cancel check failed; stopping the decode")
            return True

    # -- decoding -----------------------------------------------------------------
    def decode(
        self, seqs: list[Seq], *, should_stop: Callable[[], bool] | None = None, progress: Report | None = None
    ) -> dict[object, np.ndarray]:
        """Decode pieces of one or more sequences; return each piece's last-token logits.

        Pieces are packed into batches of at most ``n_batch`` tokens. A piece longer
        than that is split across calls, in order. Logits are copied out right after
        the call that computed them.

        Args:
            seqs: what to decode.
            should_stop: optional callable, True to stop: checked before each call and, through
                llama.cpp's abort callback, between the graph computations inside one.
            progress: optional ``(tokens done, tokens in all)``, told as the decode goes (inside a
                call too, from graph nodes computed: :mod:`triage.model.progress`; the batches and
                the numbers are the same as without it) and with ``done == all`` once it is done.

        Raises:
            TriageError: llama.cpp refused a batch (e.g. the KV cache is full).
            Cancelled: ``should_stop`` said so. An aborted call leaves the cells of the
                micro-batches it finished in the cache: the caller must remove what it
                decoded (every sequence's cells past what it keeps).
        """
        out: dict[object, np.ndarray] = {}
        rows: dict[object, list[np.ndarray]] = {}
        # (piece, pos, tokens, is_last_chunk_of_piece)
        chunks: list[tuple[Seq, int, tuple[int, ...], bool]] = []
        for s in seqs:
            if (k := len(s.also) + 1) > self.n_seq_max:
                raise ValueError(f"a piece belongs to {k} sequences; this context allows {self.n_seq_max}")
            for i in range(0, len(s.tokens), self.n_batch):
                part = s.tokens[i : i + self.n_batch]
                chunks.append((s, s.pos + i, part, i + self.n_batch >= len(s.tokens)))
        batch = self._batch
        pending: list[tuple[Seq, int, tuple[int, ...], bool]] = []
        used = 0
        finished = 0  # tokens of the calls done
        total = sum(len(c[2]) for c in chunks)

        def flush() -> None:
            nonlocal used, finished
            if not pending:
                return
            if should_stop is not None and should_stop():
                raise Cancelled()
            n = 0
            wants: list[tuple[Seq, int]] = []
            for piece, pos, part, last in pending:
                ids = (piece.seq_id, *piece.also)
                for j, tok in enumerate(part):
                    batch.token[n] = tok
                    batch.pos[n] = pos + j
                    batch.n_seq_id[n] = len(ids)
                    for m, sid in enumerate(ids):
                        batch.seq_id[n][m] = sid
                    is_out = piece.every or (last and j == len(part) - 1)
                    batch.logits[n] = is_out
                    if is_out:
                        wants.append((piece, n))
                    n += 1
            batch.n_tokens = n
            self._file.check()  # a file truncated in place would be a SIGBUS inside this decode
            if progress is not None:
                self.meter.start(n, finished, total, progress)
            self._arm(should_stop, progress is not None)
            rc = -1
            try:
                with signals.deferred():  # a signal inside the abort callback would be lost: noted, raised after
                    rc = llama_cpp.llama_decode(self.ctx, batch)
            finally:
                self._stop = None  # armed or not, nothing is asked between decodes
                if progress is not None:
                    self.meter.finish(rc == 0)
            if rc == ABORTED:
                raise Cancelled()
            if rc != 0:
                raise TriageError(
                    f"llama_decode failed with code {rc} ({n} tokens; the {self.n_ctx}-token KV cache may be full)",
                    hint="raise --n-ctx",
                )
            for piece, idx in wants:
                ptr = llama_cpp.llama_get_logits_ith(self.ctx, idx)
                row = np.ctypeslib.as_array(ptr, shape=(self.n_vocab,)).copy()
                if piece.every:
                    rows.setdefault(piece.key, []).append(row)
                else:
                    out[piece.key] = row
            pending.clear()
            used = 0
            finished += n
            if progress is not None:
                self.meter.done(finished)

        try:
            for chunk in chunks:
                if used + len(chunk[2]) > self.n_batch:
                    flush()
                pending.append(chunk)
                used += len(chunk[2])
            flush()
        finally:
            if progress is not None:
                self.meter.stop()
        for key, got in rows.items():
            out[key] = np.stack(got)
        return out

    # -- KV memory ------------------------------------------------------------------
    def seq_rm(self, seq_id: int, p0: int = -1, p1: int = -1) -> None:
        """Drop cells of ``seq_id`` with positions in [p0, p1) (-1: open end)."""
        if not llama_cpp.llama_memory_seq_rm(self.mem, seq_id, p0, p1):
            raise TriageError(f"llama.cpp could not remove cells [{p0}, {p1}) of sequence {seq_id}")

    def seq_cp(self, src: int, dst: int, p0: int = -1, p1: int = -1) -> None:
        """Make ``dst`` share ``src``'s cells in [p0, p1): no data is copied in a unified cache."""
        llama_cpp.llama_memory_seq_cp(self.mem, src, dst, p0, p1)

    def clear(self) -> None:
        """Empty the whole KV cache."""
        llama_cpp.llama_memory_clear(self.mem, True)

    def state_get(self, seq_id: int) -> bytearray:
        """Serialise one sequence's KV state (``llama_state_seq_get_data``)."""
        size = int(llama_cpp.llama_state_seq_get_size(self.ctx, seq_id))
        data = bytearray(size)
        buf = (ctypes.c_uint8 * size).from_buffer(data)  # no copy: llama.cpp writes into `data`
        n = int(llama_cpp.llama_state_seq_get_data(self.ctx, buf, size, seq_id))
        del buf
        if n != size:
            raise TriageError(f"llama.cpp saved {n} of {size} bytes of sequence {seq_id}'s state")
        return data

    def state_set(self, seq_id: int, data: bytes | bytearray) -> None:
        """Load a state saved by :meth:`state_get` into ``seq_id`` (``llama_state_seq_set_data``)."""
        if isinstance(data, bytearray):
            buf = (ctypes.c_uint8 * len(data)).from_buffer(data)  # zero-copy for the hot path
        else:
            buf = (ctypes.c_uint8 * len(data)).from_buffer_copy(data)
        n = int(llama_cpp.llama_state_seq_set_data(self.ctx, buf, len(data), seq_id))
        if n == 0:
            raise TriageError(f"llama.cpp rejected a saved state of {len(data)} bytes for sequence {seq_id}")


class Cancelled(Exception):
    """Raised inside decoding when the caller asked to stop."""
