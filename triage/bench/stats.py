"""Small, dependency-free statistics for bench: medians, spread, least squares, ratios.

Bench needs only a handful of numbers and must not pull in SciPy, so these are
written out here and tested against hand-computed values.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass


def median(xs: Sequence[float]) -> float:
    """The median; NaN for no data (so a missing figure never looks like 0)."""
    return quantile(xs, 0.5)


def quantile(xs: Sequence[float], q: float) -> float:
    """The q-quantile with linear interpolation between order statistics (numpy's default)."""
    if not xs:
        return math.nan
    s = sorted(xs)
    pos = (len(s) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


@dataclass(frozen=True)
class Spread:
    """Where the middle of a sample lies, and how wide it is."""

    n: int
    median: float
    p25: float
    p75: float
    min: float
    max: float

    @property
    def iqr_pct(self) -> float:
        """Interquartile range as a percentage of the median (0 for one value)."""
        return 100.0 * (self.p75 - self.p25) / self.median if self.median else math.nan

    def to_dict(self, digits: int = 3) -> dict[str, object]:
        """Rounded plain data, with the IQR percentage."""
        d = {k: (round(v, digits) if isinstance(v, float) else v) for k, v in asdict(self).items()}
        d["iqr_pct"] = round(self.iqr_pct, 1) if not math.isnan(self.iqr_pct) else None
        return d


def spread(xs: Sequence[float]) -> Spread:
    """Median, quartiles and extremes of ``xs``."""
    if not xs:
        nan = math.nan
        return Spread(0, nan, nan, nan, nan, nan)
    return Spread(len(xs), median(xs), quantile(xs, 0.25), quantile(xs, 0.75), min(xs), max(xs))


def relative_range(xs: Sequence[float]) -> float:
    """(max - min) / median: how far repeats of one measurement disagree."""
    m = median(xs)
    return (max(xs) - min(xs)) / m if xs and m else math.nan


@dataclass(frozen=True)
class LinearFit:
    """y = intercept + slope * x, by ordinary least squares."""

    intercept: float
    slope: float
    r2: float
    n: int
    x_min: float
    x_max: float

    def predict(self, x: float) -> float:
        """The fitted y at ``x``."""
        return self.intercept + self.slope * x


def linear_fit(xs: Sequence[float], ys: Sequence[float]) -> LinearFit:
    """Least-squares line through (xs, ys), with R² = 1 - SS_res / SS_tot.

    Raises:
        ValueError: fewer than two points, or all x equal (no slope can be fitted).
    """
    if len(xs) != len(ys):
        raise ValueError("xs and ys differ in length")
    n = len(xs)
    if n < 2:
        raise ValueError("a line needs at least two points")
    mx = sum(xs) / n
    my = sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx == 0:
        raise ValueError("all x values are equal; no slope can be fitted")
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    slope = sxy / sxx
    intercept = my - slope * mx
    ss_tot = sum((y - my) ** 2 for y in ys)
    ss_res = sum((y - (intercept + slope * x)) ** 2 for x, y in zip(xs, ys, strict=True))
    r2 = 1.0 - ss_res / ss_tot if ss_tot else 1.0
    return LinearFit(intercept, slope, r2, n, min(xs), max(xs))


def token_bound(full_tokens: int, reuse_tokens: int) -> float:
    """The most prefix reuse can gain, counting tokens: full prompts / (prefix + tails).

    ``full_tokens`` is :attr:`TicketPrompts.full_tokens` and ``reuse_tokens``
    :attr:`TicketPrompts.reuse_tokens`. Reuse cannot beat this unless per-token
    cost falls with batch shape, which it does only a little.
    """
    if reuse_tokens <= 0:
        raise ValueError("reuse_tokens must be positive")
    return full_tokens / reuse_tokens


def ratio(a: float, b: float) -> float:
    """a / b, NaN when b is 0 or either is NaN."""
    if not b or math.isnan(a) or math.isnan(b):
        return math.nan
    return a / b


def clean(x: float, digits: int = 3) -> float | None:
    """Round for JSON; NaN and infinities become null (JSON has no NaN)."""
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return None
    return round(float(x), digits)
