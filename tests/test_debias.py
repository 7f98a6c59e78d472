"""Orderings and their combination: each position's probability maps back to its option."""

from __future__ import annotations

import numpy as np
import pytest

from triage.lab import debias


def test_orders() -> None:
    assert debias.orders_for(3, "none") == [(0, 1, 2)]
    assert debias.orders_for(3, "cyclic") == [(0, 1, 2), (1, 2, 0), (2, 0, 1)]
    with pytest.raises(ValueError, match="unknown orderings"):
        debias.orders_for(3, "random")


def test_position_bias_cancels_and_content_survives() -> None:
    # A reader that prefers letter A by a factor e^2 regardless of content, and
    # prefers option 1 ("the right answer") by e^1 wherever it is shown.
    position_bias = np.array([2.0, 0.0, 0.0])
    content = np.array([0.0, 1.0, 0.0])
    per_option = []
    for order in debias.orders_for(3, "cyclic"):
        logits = position_bias + content[list(order)]
        per_option.append(debias.to_option_space(debias.log_normalize(logits), order))
    combined = np.exp(debias.combine(per_option))
    assert combined.sum() == pytest.approx(1.0)
    assert int(np.argmax(combined)) == 1
    # The first ordering alone shows option 0 at A and is fooled by the position bias.
    assert int(np.argmax(per_option[0])) == 0
    # Geometric mean over rotations removes the position term exactly.
    expected = np.exp(debias.log_normalize(content))
    np.testing.assert_allclose(combined, expected, atol=1e-12)


def test_divide_prior() -> None:
    prior = debias.log_normalize(np.array([1.0, 0.0]))
    lp = debias.log_normalize(np.array([1.0, 0.5]))
    out = np.exp(debias.divide_prior(lp, prior))
    assert out.sum() == pytest.approx(1.0)
    assert out[1] > out[0]  # the prior's lean to option 0 is removed
