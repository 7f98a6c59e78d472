"""Options that several commands declare alike: the model to run and the prompt format."""

from __future__ import annotations

import argparse


def add_model_options(parser: argparse.ArgumentParser, *, n_ctx: int | None = None) -> None:
    """Options shared by every command that runs a model (``n_ctx``: this command's own default context)."""
    parser.add_argument("--model", metavar="NAME|PATH", help="model to run: a catalog name or a .gguf path")
    parser.add_argument(
        "--n-ctx",
        type=int,
        metavar="N",
        help=(
            "context size in tokens, at least 256; llama.cpp rounds "
            f"it up to a multiple of 256 (default {n_ctx or 4096})"
        ),
    )
    if n_ctx is not None:
        parser.set_defaults(n_ctx=n_ctx)
    parser.add_argument(
        "--threads", type=int, metavar="N", help="CPU threads for llama.cpp, 1 to twice the cores (default: all cores)"
    )


def add_prompt_option(parser: argparse.ArgumentParser) -> None:
    """``--prompt``: the prompt format of every command that builds prompts (auto: from the model's template)."""
    parser.add_argument(
        "--prompt",
        choices=("auto", "chat", "plain"),
        default="auto",
        help="prompt format (default: from the model's chat template)",
    )
