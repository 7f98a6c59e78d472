"""Bench statistics: medians, spread, the least-squares line, the token bound, drift arithmetic."""

from __future__ import annotations

import math

import pytest

from triage.bench.stats import clean, linear_fit, median, quantile, ratio, relative_range, spread, token_bound


def test_median_odd_even_and_empty() -> None:
    assert median([3, 1, 2]) == 2
    assert median([4, 1, 3, 2]) == 2.5
    assert math.isnan(median([]))


def test_quantile_interpolates_like_numpy() -> None:
    xs = [10, 20, 30, 40, 50]
    assert quantile(xs, 0.25) == 20
    assert quantile(xs, 0.75) == 40
    assert quantile([1, 2], 0.25) == pytest.approx(1.25)
    assert quantile([7], 0.9) == 7


def test_spread_and_iqr_percentage() -> None:
    s = spread([100, 110, 90, 105, 95])
    assert (s.n, s.median, s.p25, s.p75, s.min, s.max) == (5, 100, 95, 105, 90, 110)
    assert s.iqr_pct == pytest.approx(10.0)
    d = s.to_dict()
    assert d["iqr_pct"] == 10.0 and d["median"] == 100
    empty = spread([])
    assert empty.n == 0 and math.isnan(empty.median)


def test_relative_range() -> None:
    assert relative_range([90, 100, 110]) == pytest.approx(0.2)


def test_linear_fit_recovers_a_known_line() -> None:
    xs = [8, 16, 32, 64, 128, 256]
    ys = [2.5 + 0.75 * x for x in xs]
    fit = linear_fit(xs, ys)
    assert fit.intercept == pytest.approx(2.5)
    assert fit.slope == pytest.approx(0.75)
    assert fit.r2 == pytest.approx(1.0)
    assert (fit.n, fit.x_min, fit.x_max) == (6, 8, 256)
    assert fit.predict(100) == pytest.approx(77.5)


def test_linear_fit_r2_with_noise_by_hand() -> None:
    # y = 1 + 2x with residuals +1, -1, +1, -1: slope and intercept by hand.
    xs, ys = [0, 1, 2, 3], [2, 2, 6, 6]
    fit = linear_fit(xs, ys)
    assert fit.slope == pytest.approx(1.6)
    assert fit.intercept == pytest.approx(1.6)
    ss_tot = sum((y - 4) ** 2 for y in ys)  # 16
    ss_res = sum((y - (1.6 + 1.6 * x)) ** 2 for x, y in zip(xs, ys, strict=True))  # 3.2
    assert fit.r2 == pytest.approx(1 - ss_res / ss_tot) == pytest.approx(0.8)


def test_linear_fit_refuses_degenerate_input() -> None:
    with pytest.raises(ValueError):
        linear_fit([1], [1])
    with pytest.raises(ValueError):
        linear_fit([3, 3, 3], [1, 2, 3])
    with pytest.raises(ValueError):
        linear_fit([1, 2], [1])


def test_token_bound_arithmetic() -> None:
    # 3 prompts of prefix 100 + tails 10, 20, 30: full = 360; reuse = 100 + 60 = 160.
    prefix, tails = 100, [10, 20, 30]
    full = sum(prefix + t for t in tails)
    reuse = prefix + sum(tails)
    assert token_bound(full, reuse) == pytest.approx(360 / 160)
    # with one prompt there is nothing to reuse
    assert token_bound(110, 110) == 1.0
    with pytest.raises(ValueError):
        token_bound(10, 0)


def test_token_bound_matches_ticket_prompts() -> None:
    from triage.scoring.prompt import TicketPrompts
    from triage.scoring.prompt_spec import PromptSpec

    prefix = tuple(range(50))
    specs = [PromptSpec(0, (0, 1), prefix + (100 + i,) * n) for i, n in enumerate((5, 7, 9))]
    tp = TicketPrompts(stable=prefix[:10], prefix=prefix, prompts=specs, ticket_text="x", ticket_tokens=40)
    assert tp.full_tokens == 3 * 50 + 21
    assert tp.reuse_tokens == 50 + 21
    assert token_bound(tp.full_tokens, tp.reuse_tokens) == pytest.approx(171 / 71)


def test_ratio_and_clean() -> None:
    assert ratio(3, 2) == 1.5
    assert math.isnan(ratio(1, 0))
    assert math.isnan(ratio(math.nan, 2))
    assert clean(math.nan) is None
    assert clean(1.23456, 2) == 1.23
    assert clean(math.inf) is None
