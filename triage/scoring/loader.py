"""Open an engine the way every front end does: resolve the model, apply config, load.

Shared by ``triage score``, the TUI, bench and eval so that model choice,
context size, threads and the stable-prefix cache behave the same everywhere.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from triage.model.native import FLASH_ATTN
from triage.scoring.engine import Engine
from triage.scoring.stable_file import StableCache
from triage.settings import DEFAULTS
from triage.store.config import load_config

if TYPE_CHECKING:
    pass


def engine_settings(
    n_ctx: int | None = None, threads: int | None = None, config: dict[str, object] | None = None
) -> dict[str, Any]:
    """Context size and threads: explicit values, then the config file, then defaults.

    Both are checked here, before llama.cpp sees them (it aborts the process on a
    context below its batch of outputs), naming where a bad value came from.

    Raises:
        InputError: a context below the smallest llama.cpp makes, or threads outside 1..2×cores.
    """
    from triage.model.native import check_n_ctx, check_threads
    from triage.store.config import config_source

    config = load_config() if config is None else config
    if n_ctx is not None:
        n_ctx = check_n_ctx(n_ctx, f"--n-ctx {n_ctx}")
    elif "n_ctx" in config:
        n_ctx = check_n_ctx(config["n_ctx"], config_source("n_ctx", config["n_ctx"]))
    else:
        n_ctx = DEFAULTS.n_ctx
    if threads is not None:
        threads = check_threads(threads, f"--threads {threads}")
    elif "threads" in config:
        threads = check_threads(config["threads"], config_source("threads", config["threads"]))
    settings: dict[str, object] = {"n_ctx": n_ctx, "threads": threads}
    if "thread_cache_mib" in config:
        mib = config["thread_cache_mib"]
        if not isinstance(mib, int) or isinstance(mib, bool) or not 0 <= mib <= 1 << 20:
            from triage.errors import InputError

            raise InputError(
                f"{config_source('thread_cache_mib', mib)}: must be a whole number of MiB from 0 to 1048576",
                hint="0 keeps no thread state; leave it out to use as much as the context's KV cache",
            )
        settings["thread_cache_mib"] = mib
    return settings


def load_engine(
    requested: str | None = None,
    *,
    n_ctx: int | None = None,
    threads: int | None = None,
    prompt_style: str = "auto",
    persist_stable: bool = True,
    notice: Callable[[str], None] | None = None,
    lazy: bool = False,
) -> Engine:
    """Resolve and load the model.

    Args:
        requested: ``--model`` (a catalog name or a path), or None for the default order.
        n_ctx: context size; default from config, else :attr:`triage.settings.Settings.n_ctx`.
        threads: CPU threads; default from config, else all cores.
        prompt_style: ``auto``, ``chat`` or ``plain``.
        persist_stable: keep the stable block's KV state in the user cache dir.
        notice: called with a one-line notice (e.g. a stand-in model is running).
        lazy: return a :class:`~triage.scoring.lazy.LazyEngine`: the file's identity now, its weights
            and context only when something is decoded (``triage learn`` with every row's features at hand).

    Raises:
        TriageError: no model, an unknown name, a bad file.
    """
    from triage.model.resolve import resolve_model

    config = load_config()
    settings = engine_settings(n_ctx, threads, config)  # first: a bad size fails before any model work
    ref = resolve_model(requested, config=config)
    if ref.notice and notice:
        notice(ref.notice)
    store = StableCache.default() if persist_stable else None  # the lab keeps its priors beside it (triage.lab.prior)

    def open_engine() -> Engine:
        return Engine.from_ref(ref, prompt_style=prompt_style, stable_store=store, **settings)

    if lazy:
        from triage.scoring.lazy import LazyEngine

        engine: Any = LazyEngine(
            ref,
            open_engine,
            n_ctx=settings["n_ctx"],
            flash_attn=settings.get("flash_attn", FLASH_ATTN),
            prompt_style=prompt_style,
        )
    else:
        engine = open_engine()
    if engine.n_ctx != settings["n_ctx"] and notice:
        from triage.model.native import CTX_STEP

        notice(
            f"context size {settings['n_ctx']} asked for; llama.cpp sizes "
            f"contexts in steps of {CTX_STEP}, so {engine.n_ctx} tokens are used"
        )
    return engine
