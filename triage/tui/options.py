"""What the app is started with: the CLI's options, the config file, and switches for tests."""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import Any

from triage.scoring.options import ResolvedOptions, resolve_options


@dataclass
class UIOptions:
    """Settings of one app run.

    Attributes:
        model: ``--model`` (a catalog name or a path), or None for the default order.
        pack: ``--pack`` path, or None for the config's pack / the built-in one.
        n_ctx: ``--n-ctx``, or None for the config / default.
        threads: ``--threads``, or None.
        config: the user's config (``load_config()``), read once at start.
        theme: a fixed theme (tests, snapshots); None uses the config's theme.
        remember_theme: save a theme the user picks to the config file.
        cursor_blink: off in tests so snapshots are stable.
        animate: spinners; off in tests so snapshots are stable.
        preload_tokenizer: load Qwen3's tokenizer at start to count tokens before the model is up.
    """

    model: str | None = None
    pack: str | None = None
    n_ctx: int | None = None
    threads: int | None = None
    config: dict[str, Any] = field(default_factory=dict)
    theme: str | None = None
    remember_theme: bool = True
    cursor_blink: bool = True
    animate: bool = True
    preload_tokenizer: bool = True
    _scoring: ResolvedOptions | None = field(default=None, init=False, repr=False, compare=False)

    @classmethod
    def from_args(cls, args: argparse.Namespace, config: dict[str, Any]) -> UIOptions:
        """From the ``triage`` command line (no subcommand) and the config file."""
        return cls(
            model=getattr(args, "model", None),
            pack=getattr(args, "pack", None),
            n_ctx=getattr(args, "n_ctx", None),
            threads=getattr(args, "threads", None),
            config=dict(config),
        )

    @property
    def auto_score(self) -> bool:
        """Score as soon as a ticket is pasted (config key ``auto_score``)."""
        return bool(self.config.get("auto_score", False))

    @property
    def scoring(self) -> ResolvedOptions:
        """The score options of the config file, by the one resolver the CLI uses.

        A bad config value does not stop the app: the default is used instead and
        :attr:`ResolvedOptions.problems` names the file, the line and what was used, for a notice.
        """
        if self._scoring is None:
            self._scoring = resolve_options(None, self.config, fallback=True)
        return self._scoring

    @property
    def readout(self) -> str:
        """How options are read: ``label`` (by name, the default) or ``letter`` (config key ``readout``)."""
        return self.scoring.options.readout

    @property
    def orderings(self) -> str:
        """Letter readout: ``cyclic`` (every rotation, the default) or ``none`` (config key ``orderings``)."""
        return self.scoring.options.orderings

    @property
    def mode(self) -> str:
        """Engine mode: ``fanout`` (the fastest measured) unless the config says otherwise."""
        return self.scoring.options.mode
