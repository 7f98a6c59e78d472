"""How a ticket is scored: the one place that names modes, readouts, orderings and strategies.

Every choice list (argparse ``choices``, config validation, messages) is derived from
the ``Literal`` types here, never retyped. ``ScoreOptions()`` is what the product runs
(``triage score``, the app, eval, Ray): the label readout in ``fanout``. Tests and bench
that need another mode ask for it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from triage.errors import InputError, TriageError

Mode = Literal["fanout", "serial", "full"]
"""``fanout``: every tail in one batch; ``serial``: tails in turn; ``full``: every prompt whole (the baseline)."""
BenchMode = Literal["fanout", "serial", "full", "split"]
"""``split``: serial's batch boundaries from an empty cache for each prompt; bench and tests only."""
Readout = Literal["label", "letter"]
"""``label``: options by name, one tail per criterion; ``letter``: A/B/C in the tail."""
Orderings = Literal["none", "cyclic"]
"""Letter readout: pack order only, or every rotation."""
Strategy = Literal["truncate", "restore"]
"""Serial mode's way back to the prefix: drop the tail's cells, or reload a saved state."""

MODES: tuple[str, ...] = get_args(Mode)
BENCH_MODES: tuple[str, ...] = get_args(BenchMode)
READOUTS: tuple[str, ...] = get_args(Readout)
ORDERINGS: tuple[str, ...] = get_args(Orderings)
STRATEGIES: tuple[str, ...] = get_args(Strategy)

DEFAULT_MODE: Mode = "fanout"  # measured faster than serial with the label readout (bench/README.md)
DEFAULT_READOUT: Readout = "label"
DEFAULT_ORDERINGS: Orderings = "cyclic"  # letter readout only; the label readout has no option order
DEFAULT_STRATEGY: Strategy = "truncate"
# A backlog's tokens per packed fanout decode (triage.scoring.packed; bench/packed.py). Off by default: a packed
# ticket's numbers drift from its own decode (docs/engine.md), and a head is fitted on one-per-decode numbers.
DEFAULT_PACK_TOKENS = 0
PACK_TOKENS_SUGGESTED = 512  # one micro-batch: what bench/packed.py measures against 0


def check_choice(value: object, choices: tuple[str, ...], what: str, source: str | None = None) -> str:
    """``value`` when it is one of ``choices``.

    Args:
        what: the setting's name (``mode``, ``readout``, ...).
        source: where the value came from (``--mode``, ``config /path/config.toml: mode``); default ``what``.

    Raises:
        TriageError: any other value, naming its source and the choices (exit code 2).
    """
    if isinstance(value, str) and value in choices:
        return value
    raise TriageError(f"{source or what}: unknown {what} {value!r}; use one of {', '.join(choices)}", exit_code=2)


@dataclass(frozen=True)
class ScoreOptions:
    """How to score: the readout, the mode, serial's way back to the prefix, orderings, prior.

    The defaults are what the product runs. The label readout has no option order, so
    ``orderings`` does not apply to it (:attr:`effective_orderings` is ``none``).

    ``criteria`` scores only those criteria (ids, any order; results come in pack
    order). The prompts, and so the shared prefix, are those of the whole pack: a
    subset costs fewer tails. In serial the numbers are the whole pack's; in fanout
    the smaller batch makes them drift (docs/engine.md, bench/criteria_drift.py).
    """

    mode: BenchMode = DEFAULT_MODE
    strategy: Strategy = DEFAULT_STRATEGY
    orderings: Orderings = DEFAULT_ORDERINGS
    prior: bool = False
    criteria: tuple[str, ...] | None = None
    readout: Readout = DEFAULT_READOUT

    @property
    def effective_orderings(self) -> Orderings:
        """The orderings actually asked: ``none`` for the label readout."""
        return effective_orderings(self.readout, self.orderings)

    def __post_init__(self) -> None:
        check_choice(self.readout, READOUTS, "readout")
        check_choice(self.mode, BENCH_MODES, "mode")
        check_choice(self.strategy, STRATEGIES, "serial strategy")
        check_choice(self.orderings, ORDERINGS, "orderings")


def effective_orderings(readout: str, orderings: str) -> Orderings:
    """The one rule: the label readout asks no option order (``none``); letters ask ``orderings``."""
    return "none" if readout == "label" else orderings  # type: ignore[return-value]


# -- resolving: flags, then the config file, then the defaults ---------------------------------

CONFIG_KEYS: tuple[str, ...] = ("mode", "strategy", "readout", "orderings", "prior")
"""The score options a config file may set (the same names as ``ScoreOptions``' fields)."""

_CHOICES: dict[str, tuple[tuple[str, ...], str]] = {
    "mode": (MODES, "mode"),
    "strategy": (STRATEGIES, "serial strategy"),
    "readout": (READOUTS, "readout"),
    "orderings": (ORDERINGS, "orderings"),
}


@dataclass(frozen=True)
class ResolvedOptions:
    """What :func:`resolve_options` settled on, and where each value came from.

    Attributes:
        options: the options to score with.
        sources: per setting, ``--mode``, ``config /path line 3`` or ``default``.
        problems: bad config values passed over for the default (only with ``fallback``), each
            naming the file and line; a front end shows them.
    """

    options: ScoreOptions
    sources: dict[str, str]
    problems: tuple[str, ...] = ()


def config_source(key: str, value: object, config_file: Path | str | None) -> str:
    """Where a config value came from, as a message names it: ``config /path line 3: mode = "foo"``.

    The line is found in the file itself (a flat TOML table: the first ``key =`` line); without
    the file, or when the key is not on a line of its own, the value is shown as read.
    """
    if config_file is None:
        return f"config: {key} = {value!r}"
    try:
        lines = Path(config_file).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        lines = []
    pattern = re.compile(rf"^\s*{re.escape(key)}\s*=")
    for n, line in enumerate(lines, 1):
        if pattern.match(line):
            return f"config {config_file} line {n}: {line.strip()}"
    return f"config {config_file}: {key} = {value!r}"


def parse_criteria(arg: str | None, pack: Any, source: str = "--criteria") -> tuple[str, ...] | None:
    """``--criteria a,b`` as ids of ``pack``, checked before any model loads.

    Raises:
        InputError: no id given, or an id the pack does not have (naming the ones it has).
    """
    if arg is None:
        return None
    ids = tuple(dict.fromkeys(part.strip() for part in arg.split(",") if part.strip()))
    if not ids:
        ids_of = ", ".join(c.id for c in pack.criteria)
        raise InputError(f"{source} names no criteria", hint=f"use ids of pack {pack.name!r}: {ids_of}")
    pack.criterion_indices(ids)  # now, before the model loads
    return ids


def resolve_options(
    flags: Mapping[str, Any] | None = None,
    config: Mapping[str, Any] | None = None,
    *,
    config_file: Path | str | None = None,
    pack: Any = None,
    fallback: bool = False,
) -> ResolvedOptions:
    """The score options of one run: each setting from its flag, else the config file, else the default.

    The one resolver for ``triage score`` (and ``--ray``), the app, eval, calibrate, learn and
    bench, as :func:`triage.scoring.loader.engine_settings` is for the context size and threads.

    Args:
        flags: the command line's values by setting name (``mode``, ``strategy``, ``readout``,
            ``orderings``, ``prior``, ``criteria``); None or a missing key means not given.
        config: the user's config (``load_config()``); keys :data:`CONFIG_KEYS`.
        config_file: the file ``config`` was read from, to name a bad value's line
            (default: the config path, when ``config`` is not empty).
        pack: the pack ``criteria`` must name ids of (needed with ``flags["criteria"]``).
        fallback: a bad *config* value is passed over for the default and named in
            :attr:`ResolvedOptions.problems` (the app), instead of raised (the CLI). A bad
            flag always raises.

    Raises:
        TriageError: a bad value (exit code 2), naming its source: ``--mode foo``, or
            ``config /path/config.toml line 3: mode = "foo"``.
        InputError: ``--criteria`` names no criterion, or one the pack lacks.
    """
    flags = flags or {}
    config = config or {}
    if config and config_file is None:
        from triage.store.config import config_path

        config_file = config_path()
    defaults = ScoreOptions()
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    problems: list[str] = []
    for key in CONFIG_KEYS:
        flag = "--" + key
        given = flags.get(key)
        if given is not None:
            values[key] = _checked(key, given, f"{flag} {given}" if key != "prior" else flag)
            sources[key] = flag
        elif key in config:
            where = config_source(key, config[key], config_file)
            try:
                values[key] = _checked(key, config[key], where)
            except TriageError as exc:
                if not fallback:
                    raise
                problems.append(f"{exc.message}; using the default {getattr(defaults, key)!r}")
                sources[key] = "default"
                continue
            sources[key] = where.split(":", 1)[0]
        else:
            sources[key] = "default"
    criteria = flags.get("criteria")
    if criteria is not None:
        values["criteria"] = criteria if isinstance(criteria, tuple) else parse_criteria(criteria, pack)
    return ResolvedOptions(ScoreOptions(**values), sources, tuple(problems))


def score_options(
    flags: Mapping[str, Any] | None = None, config: Mapping[str, Any] | None = None, **kw: Any
) -> ScoreOptions:
    """:func:`resolve_options`' options alone (what a command that exits on a bad value wants)."""
    return resolve_options(flags, config, **kw).options


def _checked(key: str, value: object, source: str) -> Any:
    if key == "prior":
        if not isinstance(value, bool):
            raise TriageError(f"{source}: prior is true or false, got {value!r}", exit_code=2)
        return value
    choices, what = _CHOICES[key]
    return check_choice(value, choices, what, source)
