"""Options that several commands declare alike: the settings' flags, the model to run, the prompt format,
and the flags that were removed.

A flag that overrides a setting takes its help text (description and default) from
:data:`triage.settings.SETTINGS` (:func:`add_setting`), so the default is written once.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypedDict, Unpack

from triage.settings import RETIRED, SETTINGS, retired_flag, retired_message

MODEL_DEFAULT = f"TRIAGE_MODEL, else the config's model, else {SETTINGS['model'].unset}"


class FlagOptions(TypedDict, total=False):
    """The ``add_argument`` keywords a setting's flag may be given."""

    metavar: str
    type: Callable[[str], object]
    action: str
    help: str


def add_setting(
    parser: argparse._ActionsContainer, key: str, *, default: object = None, **kw: Unpack[FlagOptions]
) -> argparse.Action:
    """The flag of setting ``key`` (``--n-ctx`` for ``n_ctx``), its help from the setting.

    Args:
        parser: a parser or an argument group.
        default: this command's own default (eval's ``1024``) or words for it, shown in the help
            (the value itself is set by the caller); None: the config's, else the setting's default.
        kw: ``add_argument``'s other arguments (``type``, ``metavar``, ``action``, ``help``).
    """
    setting = SETTINGS[key]
    assert setting.flag is not None, f"setting {key} has no flag"
    kw.setdefault("help", setting.help(default))
    return parser.add_argument(setting.flag, **kw)


def add_model_options(parser: argparse.ArgumentParser, *, n_ctx: int | None = None) -> None:
    """Options shared by every command that runs a model (``n_ctx``: this command's own default context)."""
    add_setting(parser, "model", metavar="NAME|PATH", default=MODEL_DEFAULT)
    add_setting(parser, "n_ctx", type=int, metavar="N", default=n_ctx)
    if n_ctx is not None:
        parser.set_defaults(n_ctx=n_ctx)
    add_setting(parser, "threads", type=int, metavar="N")


def add_prompt_option(parser: argparse.ArgumentParser) -> None:
    """``--prompt``: the prompt format of every command that builds prompts (auto: from the model's template)."""
    parser.add_argument(
        "--prompt",
        choices=("auto", "chat", "plain"),
        default="auto",
        help="prompt format (default: from the model's chat template)",
    )


class _Removed(argparse.Action):
    """A flag that was removed: exits 2 at once, saying what replaced it."""

    def __call__(
        self, parser: argparse.ArgumentParser, namespace: object, values: object, option_string: object = None
    ) -> None:
        key = self.option_strings[0][2:].replace("-", "_")
        parser.exit(2, f"triage: error: {retired_message(key, as_flag=True)}\n")


def add_removed_flags(parser: argparse.ArgumentParser) -> None:
    """``--readout``, ``--orderings``, ``--mode``, ``--strategy``, ``--prior``, ``--pack-tokens``
    (:data:`triage.settings.RETIRED`): hidden from ``--help``; given, each exits 2 naming what replaced it."""
    for key in RETIRED:
        parser.add_argument(
            retired_flag(key),
            nargs="?",
            action=_Removed,
            dest=f"removed_{key}",
            default=argparse.SUPPRESS,
            help=argparse.SUPPRESS,
        )
