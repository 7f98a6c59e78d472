"""What the app is started with: the CLI's options, the config file, and switches for tests.

The app scores as ``triage score`` does (``ScoreOptions()``): no readout, mode or orderings to choose.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

from triage.settings import Settings


@dataclass
class UIOptions:
    """Settings of one app run.

    Attributes:
        model: ``--model`` (a catalog name or a path), or None for the default order.
        pack: ``--pack`` path, or None for the config's pack / the built-in one.
        n_ctx: ``--n-ctx``, or None for the config / default.
        threads: ``--threads``, or None.
        config: the user's config (``load_config()``), read once at start.
        config_notes: the config file's removed keys, each named with its line
            (:func:`triage.store.config.retired_notes`), for the notice band.
        theme: a fixed theme (tests, snapshots); None uses the config's theme.
        remember_theme: save a theme the user picks to the config file.
        cursor_blink: off in tests so snapshots are stable.
        animate: spinners; off in tests so snapshots are stable.
        preload_tokenizer: load Qwen3's tokenizer at start to count tokens before the model is up.
        read_ahead: prefill the ticket while it is pasted or typed (:mod:`triage.tui.screens.main_prefill`); the
            tests of cold scores turn it off.
    """

    model: str | None = None
    pack: str | None = None
    n_ctx: int | None = None
    threads: int | None = None
    config: dict[str, object] = field(default_factory=dict)
    config_notes: tuple[str, ...] = ()
    theme: str | None = None
    remember_theme: bool = True
    cursor_blink: bool = True
    animate: bool = True
    preload_tokenizer: bool = True
    read_ahead: bool = True

    @classmethod
    def from_args(
        cls, args: argparse.Namespace, config: dict[str, object], config_notes: tuple[str, ...] = ()
    ) -> UIOptions:
        """From the ``triage`` command line (no subcommand) and the config file."""
        return cls(
            model=getattr(args, "model", None),
            pack=getattr(args, "pack", None),
            n_ctx=getattr(args, "n_ctx", None),
            threads=getattr(args, "threads", None),
            config=dict(config),
            config_notes=tuple(config_notes),
        )

    @property
    def settings(self) -> Settings:
        """The config's settings over the defaults (:class:`triage.settings.Settings`)."""
        return Settings.of(self.config)

    @property
    def auto_score(self) -> bool:
        """Score as soon as a ticket is pasted (config key ``auto_score``)."""
        return self.settings.auto_score
