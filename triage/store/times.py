"""The history's stored times, shown: seconds since the epoch (a REAL column), or unknown.

A stored time that is no time this machine can show (in milliseconds by another writer: year 318857; not a
number; NaN) is shown as ``unknown`` with its raw value where there is room (:func:`shown`, :func:`iso`),
never a traceback: one bad row must not cost a listing.

This module is core: it must not import Textual.
"""

from __future__ import annotations

import math
import time
from datetime import datetime, timezone

UNKNOWN = "unknown"


def seconds(value: object) -> float | None:
    """``value`` as seconds since the epoch, or None when it is no time that can be shown."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if not math.isfinite(value):
        return None
    try:
        datetime.fromtimestamp(value, tz=timezone.utc)
        time.localtime(value)
    except (OverflowError, OSError, ValueError):
        return None
    return float(value)


def shown(value: object, fmt: str = "%Y-%m-%d %H:%M") -> str:
    """The local time ``value`` stands for, in ``fmt``; ``unknown`` when it is no time."""
    t = seconds(value)
    return UNKNOWN if t is None else time.strftime(fmt, time.localtime(t))


def iso(value: object) -> str | None:
    """The UTC time ``value`` stands for, ISO 8601 to the second; None when it is no time."""
    t = seconds(value)
    return None if t is None else datetime.fromtimestamp(t, tz=timezone.utc).isoformat(timespec="seconds")


def raw(value: object) -> object:
    """``value`` as JSON can hold it (a number, a string or None), for a listing that shows an unknown time's raw
    value."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value
