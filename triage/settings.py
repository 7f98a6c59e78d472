"""Every setting of the config file, in one place: its type, default, description and flag.

:class:`Settings` is frozen; ``Settings()`` (:data:`DEFAULTS`) is every default, and
:meth:`Settings.of` is one config file's values over them. Nothing else writes a default:
a module that needs one reads it here (``DEFAULTS.keep_features``), the config file is
checked against these fields (:mod:`triage.store.config`: the type, an unknown key named
with its file and line), and a command's flag takes its help text from :data:`SETTINGS`
(:func:`triage.commands._flags.add_setting`).

:data:`RETIRED` names the keys and flags that are gone and what replaced them: the
research knobs (readouts, orderings, modes, the prior, packed decodes) that left the
product for ``triage bench`` and ``triage eval``.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, TypeVar

_T = TypeVar("_T")


def setting(default: _T, description: str, *, flag: str | None = None, unset: str | None = None) -> _T:
    """A field of :class:`Settings`.

    Args:
        default: the value when neither the flag nor the config file gives one.
        description: what it does, one clause (for ``--help``, messages and docs).
        flag: the command-line flag that overrides it, if any.
        unset: for a default of None, what happens then (``all cores``).
    """
    return field(default=default, metadata={"description": description, "flag": flag, "unset": unset})


@dataclass(frozen=True)
class Settings:
    """The config file's keys, typed, with their defaults."""

    model: str | None = setting(
        None,
        "model to run: a catalog name or a .gguf path",
        flag="--model",
        unset="Qwen3-0.6B when it is installed, else a stand-in",
    )
    pack: str | None = setting(None, "criteria pack TOML", flag="--pack", unset="the built-in support pack")
    n_ctx: int = setting(
        4096, "context size in tokens, at least 256; llama.cpp rounds it up to a multiple of 256", flag="--n-ctx"
    )
    threads: int | None = setting(
        None, "CPU threads for llama.cpp, 1 to twice the cores", flag="--threads", unset="all cores"
    )
    calibration: str | None = setting(
        None,
        "calibration file to apply",
        flag="--calibration",
        unset="the stored one fitted for this model, pack and prompt format, if any",
    )
    starter: bool = setting(True, "fit and apply the built-in pack's starter head")
    server: str | None = setting(
        None, "a running `triage serve` to score on, by its URL", flag="--server", unset="load the model here"
    )
    theme: str = setting("textual-dark", "the app's colour theme (saved when one is picked in the palette)")
    auto_score: bool = setting(False, "the app scores a ticket as soon as it is pasted (toggled from the palette)")
    auto_learn: bool = setting(True, "the app re-fits the learned head in the background as labels come in")
    auto_learn_every: int = setting(20, "new labels between two background re-fits in the app")
    keep_features: int = setting(
        5000, "scored tickets whose features (what a learned head reads) the history keeps, the newest"
    )
    thread_cache_mib: int | None = setting(
        None,
        "MiB of saved KV state in the prefix store (recently scored tickets' and prefills' cells after the stable "
        "block), so that a thread's next message, or a prefilled ticket's score, costs only what is new (0: none)",
        unset="as much as the context's own KV cache",
    )
    stable_cache_mb: int = setting(512, "MB the stable-prefix cache folder may hold (the least recently used go first)")
    stable_cache_ttl_days: float = setting(14.0, "days an unused stable-prefix cache file is kept")
    serve_queue_limit: int = setting(
        64,
        "requests `triage serve` lets wait for the engine (a burst of 50 at once fits); more get 503",
        flag="--queue-limit",
    )

    @classmethod
    def of(cls, config: Mapping[str, Any]) -> Settings:
        """``config``'s values (a :func:`triage.store.config.load_config` dict) over the defaults.

        Keys that are not settings are left out: the config file was checked when it was read.
        """
        return cls(**{k: v for k, v in config.items() if k in SETTINGS})


DEFAULTS = Settings()
"""Every default."""


@dataclass(frozen=True)
class Described:
    """One setting, described (:data:`SETTINGS`)."""

    key: str
    kinds: tuple[type, ...]  # the types a config value may have (a float's include int; an int's never bool)
    default: object
    description: str
    flag: str | None
    unset: str | None

    @property
    def kind(self) -> str:
        """The type in words, as a message says it: ``a whole number``, ``true or false``, ..."""
        if bool in self.kinds:
            return "true or false"
        if float in self.kinds:
            return "a number"
        if int in self.kinds:
            return "a whole number"
        return "a string"

    def accepts(self, value: object) -> bool:
        """True when ``value`` has this setting's type (None never: a TOML file cannot write it)."""
        if isinstance(value, bool):
            return bool in self.kinds
        return isinstance(value, self.kinds)

    @property
    def shown_default(self) -> str:
        """The default as the config file writes it (``4096``, ``true``, ``14``), or what None means."""
        if self.default is None:
            return self.unset or "none"
        if isinstance(self.default, bool):
            return "true" if self.default else "false"
        if isinstance(self.default, float):
            return f"{self.default:g}"
        return str(self.default)

    def help(self, default: object = None) -> str:
        """Its flag's help: the description, then the default.

        Args:
            default: a command's own default instead of the config's (``1024``), or the words for
                it (``TRIAGE_MODEL, else ...``); None: the config's value, else this setting's default.
        """
        if default is None:
            return f"{self.description} (default: the config's {self.key}, else {self.shown_default})"
        if isinstance(default, str):
            return f"{self.description} (default: {default})"
        return f"{self.description} (default {default})"


def _described() -> dict[str, Described]:
    hints = typing.get_type_hints(Settings)
    out: dict[str, Described] = {}
    for f in fields(Settings):
        hint = hints[f.name]
        args = typing.get_args(hint) if isinstance(hint, types.UnionType) else (hint,)
        kinds = tuple(a for a in args if a is not type(None))
        if float in kinds:
            kinds = (*kinds, int)
        assert f.default is not MISSING
        meta = f.metadata
        out[f.name] = Described(f.name, kinds, f.default, meta["description"], meta["flag"], meta["unset"])
    return out


SETTINGS: dict[str, Described] = _described()
"""Every setting by key, in :class:`Settings`' order."""


# -- what is gone, and what replaced it ------------------------------------------------------

_LETTERS = "`triage bench` and `triage eval --readout letter` compare the letter readout"

RETIRED: dict[str, str] = {
    "readout": f"triage reads options by name; {_LETTERS}",
    "orderings": f"triage reads options by name, so there is no option order to rotate; {_LETTERS}",
    "mode": "triage scores every criterion's tail in one batch (fanout); `triage bench` measures serial and full",
    "strategy": "serial mode left triage's scoring; `triage bench` measures serial/truncate and serial/restore",
    "prior": "triage applies no content-free prior; `triage eval --prior` and `triage calibrate --prior` measure it",
    "pack_tokens": "triage scores one ticket per decode, as heads are fitted; bench/packed.py measures packed decodes",
}
"""Config keys that were removed, and what replaced them; as flags (``--pack-tokens``) of ``score`` and ``serve``."""


def retired_flag(key: str) -> str:
    """The flag a retired key was: ``--pack-tokens`` for ``pack_tokens``."""
    return "--" + key.replace("_", "-")


def retired_message(key: str, *, as_flag: bool = False) -> str:
    """``--readout was removed: triage reads options by name; ...`` (``readout was removed: ...`` for a key)."""
    name = retired_flag(key) if as_flag else key
    return f"{name} was removed: {RETIRED[key]}"
