"""choosers.simulated: the stated error model, its fit to the paper, determinism."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from choosers import Tool, make_chooser
from choosers.simulated import (
    PAPER_POINTS,
    SimulatedChooser,
    SimulatedParams,
    fit_defaults,
    marginal_p_gold,
    p_gold,
    point_accuracy,
)

RANKED = [Tool(f"t{i}", f"tool {i}", score=10.0 - i) for i in range(20)]


def test_name_says_not_an_llm() -> None:
    assert make_chooser("simulated", gold={"q": "t0"}).name.startswith("simulated chooser, not an LLM")


def test_p_gold_oracle() -> None:
    p = SimulatedParams(a=2.0, b=0.5, d=1.0, ease_sd=0.0)
    assert p_gold(1, 1, p) == 1.0  # forced choice, nothing else shown
    assert p_gold(5, None, p) == 0.0
    want = 1 / (1 + math.exp(-(2.0 - 0.5 * math.log(5) - 1.0 * math.log(3) + 0.3)))
    assert p_gold(5, 3, p, ease=0.3) == pytest.approx(want, abs=1e-15)
    assert marginal_p_gold(5, 3, p) == pytest.approx(p_gold(5, 3, p), abs=1e-12)  # no ease spread
    # the marginal over the ease is E[sigmoid(eta + sd Z)]: check against a fine grid
    q = SimulatedParams(a=2.0, b=0.5, d=1.0, ease_sd=1.5)
    z = np.linspace(-10, 10, 200001)
    dens = np.exp(-z * z / 2) / math.sqrt(2 * math.pi)
    eta = 2.0 - 0.5 * math.log(5) - math.log(3)
    grid = np.trapezoid(dens / (1 + np.exp(-(eta + 1.5 * z))), z)
    assert marginal_p_gold(5, 3, q) == pytest.approx(grid, abs=1e-9)


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 50), st.integers(1, 50))
def test_p_gold_falls_with_k_and_position(k: int, g: int) -> None:
    p = SimulatedParams()
    g = min(g, k)
    assert p_gold(k + 1, g, p) < p_gold(k, g, p)
    if g < k:
        assert p_gold(k, g + 1, p) < p_gold(k, g, p)


def test_defaults_reproduce_the_paper() -> None:
    params = SimulatedParams()
    for point in PAPER_POINTS:
        assert point_accuracy(point, params) == pytest.approx(point.accuracy, abs=0.03), point.label
    fitted = fit_defaults()
    assert (fitted.a, fitted.b, fitted.d) == pytest.approx((params.a, params.b, params.d), abs=2e-3)


def test_probabilities_and_distractor_pull() -> None:
    chooser = SimulatedChooser({"q": "t2"}, SimulatedParams(ease_sd=0.0, beta=2.0))
    probs = chooser.probabilities("q", RANKED[:5])
    assert probs.sum() == pytest.approx(1.0)
    assert probs[2] == pytest.approx(p_gold(5, 3, chooser.params))
    s = np.array([t.score for t in RANKED[:5]], dtype=float)
    z = (s - s.mean()) / s.std()
    w = np.exp(2.0 * z[[0, 1, 3, 4]])
    np.testing.assert_allclose(probs[[0, 1, 3, 4]], (1 - probs[2]) * w / w.sum())
    absent = chooser.probabilities("q", RANKED[3:8])  # gold not shown: all mass on distractors
    assert absent.sum() == pytest.approx(1.0) and absent[0] > absent[-1]
    unscored = [Tool(t.name, t.description) for t in RANKED[:5]]  # pull by rank
    probs = SimulatedChooser({"q": "t2"}, SimulatedParams(ease_sd=0.0, beta=1.0)).probabilities("q", unscored)
    w = np.array([1, 1 / 2, 1 / 4, 1 / 5])
    np.testing.assert_allclose(probs[[0, 1, 3, 4]], (1 - probs[2]) * w / w.sum())


def test_same_query_and_k_same_choice_whatever_the_order() -> None:
    gold = {f"query {i}": f"t{i % 7}" for i in range(40)}
    a = SimulatedChooser(gold)
    b = SimulatedChooser(gold)
    forward = {q: a.choose_prefixes(q, RANKED, [1, 3, 5, 10, 20]) for q in gold}
    backward = {q: {k: b.choose(q, RANKED[:k]) for k in (20, 10, 5, 3, 1)} for q in reversed(list(gold))}
    assert {q: {k: c.index for k, c in v.items()} for q, v in forward.items()} == {
        q: {k: c.index for k, c in backward[q].items()} for q in forward
    }
    other = SimulatedChooser(gold, SimulatedParams(seed=1))
    assert any(other.choose(q, RANKED[:10]).index != forward[q][10].index for q in gold)


def test_choice_rates_follow_the_model() -> None:
    # gold at position 2 of 5, many queries: the gold's share matches the marginal probability
    params = SimulatedParams()
    gold = {f"q{i}": "t1" for i in range(4000)}
    chooser = SimulatedChooser(gold, params)
    picks = np.array([chooser.choose(q, RANKED[:5]).index for q in gold])
    assert np.mean(picks == 1) == pytest.approx(marginal_p_gold(5, 2, params), abs=0.025)
    assert all(chooser.choose(q, RANKED[:1]).index == 0 for q in list(gold)[:50])


def test_unknown_query_and_bad_params() -> None:
    with pytest.raises(ValueError, match="no gold tool given"):
        SimulatedChooser({"q": "t0"}).choose("other", RANKED[:3])
    with pytest.raises(ValueError, match="ease_sd"):
        SimulatedParams(ease_sd=-1.0)
    with pytest.raises(ValueError, match="unknown option 'alpha'"):
        make_chooser("simulated", gold={}, alpha=1.0)
    with pytest.raises(ValueError, match="needs gold="):
        make_chooser("simulated")
