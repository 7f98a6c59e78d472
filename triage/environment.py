"""triage's environment variables, read one way: a switch's words, a blank value, a path that must be absolute.

:func:`switch` is the one parser of every on/off variable (``TRIAGE_STARTER``, ``HF_HUB_OFFLINE``):
:data:`ON` and :data:`OFF` are the words it accepts (case and surrounding spaces ignored); unset, empty
or blank is the default; any other word is refused, naming the variable and the words, never read
as one or the other. :func:`text` is a variable whose empty and blank values both mean unset
(``TRIAGE_MODEL``, ``TRIAGE_SERVER``). docs/config.md ("Environment variables") lists them all.
"""

from __future__ import annotations

import os

from triage.errors import InputError

ON = ("1", "true", "yes", "on")
OFF = ("0", "false", "no", "off")
WORDS = f"{', '.join(ON)} (on) or {', '.join(OFF)} (off)"
"""The accepted words, as a message says them."""


def parse_switch(name: str, value: str | None, default: bool) -> bool:
    """``value`` of the switch ``name`` as a bool; None, empty or blank: ``default``.

    Raises:
        InputError: any other word, naming the variable and the accepted words.
    """
    if value is None or not value.strip():
        return default
    word = value.strip().lower()
    if word in ON:
        return True
    if word in OFF:
        return False
    raise InputError(
        f"{name}={value!r} is not a switch's word", hint=f"set {name} to one of {WORDS}, or unset it for the default"
    )


def switch(name: str, default: bool) -> bool:
    """The switch ``name`` of the environment (:func:`parse_switch`)."""
    return parse_switch(name, os.environ.get(name), default)


def text(name: str) -> str | None:
    """The variable ``name``, surrounding spaces kept; None when it is unset, empty or blank (alike)."""
    value = os.environ.get(name)
    if value is None or not value.strip():
        return None
    return value


SWITCHES = {"TRIAGE_STARTER": True, "HF_HUB_OFFLINE": False}
"""Every switch triage reads, with its default (docs/config.md)."""


def check() -> None:
    """Refuse a bad switch now, at start, before any work (each is read again where it is used).

    Raises:
        InputError: a switch holds a word that is no switch's.
    """
    for name, default in SWITCHES.items():
        switch(name, default)
