"""Tests of rewards.completeness: "any" and "all" success notions and their exact chance terms.

Oracles: exhaustive enumeration of k-subsets with itertools.combinations on small N
(every K, R), mpmath at 50 digits for huge N, scipy's hypergeometric pmf/sf on a
moderate grid, and hand-computed rewards and aggregates. Hypothesis covers bounds,
monotonicity in K and R, P_all <= P_any, and the closed forms.
"""

from __future__ import annotations

import itertools
import math
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import hypergeom

from rewards import (
    SUCCESS_KINDS,
    bor_aggregate,
    bor_aggregate_all,
    bor_aggregate_success,
    bor_ceiling_all,
    bor_reward,
    bor_reward_all,
    bor_reward_success,
    completeness_at_k,
    hits_at_k,
    p_random,
    p_random_all,
    p_random_success,
)

PROPS = settings(max_examples=150, deadline=None)


def _enumerate(n: int, r: int, k: int) -> tuple[Fraction, Fraction]:
    """(P_any, P_all) by listing every k-subset of range(n); items 0..r-1 are relevant."""
    subsets = list(itertools.combinations(range(n), k))
    anyc = sum(1 for s in subsets if any(i < r for i in s))
    allc = sum(1 for s in subsets if sum(1 for i in s if i < r) == r)
    return Fraction(anyc, len(subsets)), Fraction(allc, len(subsets))


@pytest.mark.parametrize("n", range(1, 10))
def test_exhaustive_enumeration_every_k_and_r(n: int) -> None:
    for r in range(n + 1):
        for k in range(n + 1):
            p_any, p_all = _enumerate(n, r, k)
            assert p_random(k, n, r, 1) == pytest.approx(float(p_any), rel=1e-12, abs=1e-15), (n, r, k)
            assert p_random_success(k, n, r, "any") == pytest.approx(float(p_any), rel=1e-12, abs=1e-15)
            assert p_random_all(k, n, r) == pytest.approx(float(p_all), rel=1e-12, abs=1e-15), (n, r, k)
            assert p_random_success(k, n, r, "all") == pytest.approx(float(p_all), rel=1e-12, abs=1e-15)
            if k < r:
                assert p_random_all(k, n, r) == 0.0


def test_vectorised_matches_scalar_and_scipy_grid() -> None:
    n = 60
    ks, rs = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    got = np.asarray(p_random_all(ks, n, rs))
    want = hypergeom.pmf(rs, n, rs, ks)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-300)
    assert got.shape == (n + 1, n + 1)
    assert p_random_all(ks[7, 3], n, rs[7, 3]) == got[7, 3]


def _mp_all(k: int, n: int, r: int) -> mpmath.mpf:
    with mpmath.workdps(50):
        if k < r:
            return mpmath.mpf(0)
        return mpmath.binomial(n - r, k - r) / mpmath.binomial(n, k)


@pytest.mark.parametrize(
    ("k", "n", "r"),
    [
        (20, 10_000, 2),
        (100, 10_000, 10),
        (5, 58, 4),
        (1_000, 10**9, 2),
        (10**6, 10**9, 3),
        (10**9 - 5, 10**9, 1_000),  # short "left out" product
        (10**8, 10**9, 200),  # saddle-point path (both products long)
        (5 * 10**8, 10**9, 10_000),
        (999_000, 10**6, 500),
        (400, 1_000, 100),
        (10**11, 10**12, 70),
        (8_800_000, 8_841_823, 1_000),
    ],
)
def test_huge_n_against_mpmath(k: int, n: int, r: int) -> None:
    want = _mp_all(k, n, r)
    got = p_random_all(k, n, r)
    if want == 0 or want < mpmath.mpf(10) ** -300:
        assert got < 1e-290
    else:
        assert float(abs(mpmath.mpf(got) - want) / want) < 1e-9, (k, n, r, got, float(want))


def test_closed_forms() -> None:
    assert p_random_all(7, 100, 1) == pytest.approx(0.07, rel=1e-14)
    assert p_random_all(0, 10, 0) == 1.0  # empty relevant set: always complete
    assert p_random_all(10, 10, 10) == 1.0
    assert p_random_all(2, 10, 2) == pytest.approx(1 / 45, rel=1e-14)
    # C(N-R, K-R)/C(N,K) = C(K,R)/C(N,R): (100, 3, 10) -> C(10,3)/C(100,3) = 120 / 161700
    assert p_random_all(10, 100, 3) == pytest.approx(120 / 161_700, rel=1e-13)


@PROPS
@given(st.integers(1, 400), st.data())
def test_properties(n: int, data: st.DataObject) -> None:
    r = data.draw(st.integers(0, n))
    k = data.draw(st.integers(0, n))
    p = p_random_all(k, n, r)
    assert 0.0 <= p <= 1.0
    assert p <= p_random(k, n, r) + 1e-12 or r == 0  # complete implies found (r >= 1)
    if k < n:
        assert p_random_all(k + 1, n, r) >= p * (1 - 1e-12)  # monotone in K
    if r < n:
        assert p_random_all(k, n, r + 1) <= p * (1 + 1e-12)  # decreasing in R
    if r == 1:
        assert p == pytest.approx(k / n, rel=1e-12, abs=1e-15)
    assert (p == 0.0) == (k < r)
    assert p_random_all(n, n, r) == 1.0


@PROPS
@given(st.lists(st.integers(1, 50), min_size=0, max_size=8, unique=True), st.integers(0, 60))
def test_completeness_and_hits_match_definition(ranks: list[int], k: int) -> None:
    hits = hits_at_k(ranks, k)
    assert hits == sum(1 for x in ranks if x <= k)
    assert completeness_at_k(ranks, k) == all(x <= k for x in ranks)
    assert completeness_at_k(ranks, k, len(ranks) + 1) is False  # a relevant item missing from the list
    ks = np.arange(0, 61)
    arr = completeness_at_k(ranks, ks)
    assert arr.dtype == bool and arr.shape == ks.shape
    assert np.all(np.diff(arr.astype(int)) >= 0)  # once complete, complete at every deeper K


def test_completeness_examples() -> None:
    assert completeness_at_k([2, 5], 4) is False
    assert completeness_at_k([2, 5], 5) is True
    assert completeness_at_k([5, 2], 5) is True
    assert completeness_at_k([], 1) is True
    np.testing.assert_array_equal(hits_at_k([3, 1, 9], [0, 1, 3, 8, 9]), [0, 1, 2, 2, 3])
    with pytest.raises(ValueError, match="ranks must be >= 1"):
        hits_at_k([0, 2], 3)


def test_rewards_all() -> None:
    # (K, N, R) = (10, 100, 2): P_all = 10*9/(100*99) = 1/110
    assert bor_reward_all(1, 10, 100, 2) == pytest.approx(math.log2(110), rel=1e-13)
    assert bor_reward_all(0, 10, 100, 2) == 0.0
    assert bor_reward_all(0, 1, 100, 2) == 0.0  # K < R: impossible, reward 0
    with pytest.raises(ValueError, match="impossible"):
        bor_reward_all(1, 1, 100, 2)
    with pytest.raises(ValueError, match="0/1"):
        bor_reward_all(0.5, 10, 100, 2)
    np.testing.assert_allclose(
        bor_reward_all([1, 0, 1], [10, 10, 100], 100, [2, 2, 3]), [math.log2(110), 0.0, 0.0], atol=1e-12
    )
    # R = 1: "all" and "any" coincide
    assert bor_reward_all(1, 7, 100, 1) == pytest.approx(bor_reward(1, 7, 100, 1), rel=1e-13)
    assert bor_reward_success(1, 10, 100, 2, "all") == bor_reward_all(1, 10, 100, 2)
    assert bor_reward_success(1, 10, 100, 2, "any") == bor_reward(1, 10, 100, 2)
    with pytest.raises(ValueError, match="success notion"):
        bor_reward_success(1, 10, 100, 2, "most")
    assert SUCCESS_KINDS == ("any", "all")


def test_aggregate_all() -> None:
    complete = [1, 0, 1, 0]
    k = [10, 10, 20, 1]
    r = [2, 2, 2, 2]
    pa = [10 * 9 / 9900, 10 * 9 / 9900, 20 * 19 / 9900, 0.0]
    want = math.log2(0.5 / (sum(pa) / 4))
    assert bor_aggregate_all(complete, k, 100, r) == pytest.approx(want, rel=1e-12)
    assert bor_aggregate_success(complete, k, 100, r, "all") == bor_aggregate_all(complete, k, 100, r)
    assert bor_aggregate_success([1, 0], [3, 5], 100, 2, "any") == bor_aggregate([1, 0], [3, 5], 100, 2)
    assert bor_aggregate_all([0, 0], [10, 10], 100, 2) == -math.inf
    assert math.isnan(bor_aggregate_all([0, 0], [1, 1], 100, 2))  # K < R everywhere: 0/0
    with pytest.raises(ValueError, match="impossible"):
        bor_aggregate_all([1, 0], [1, 1], 100, 2)
    with pytest.raises(ValueError, match="empty"):
        bor_aggregate_all([], [], 100, 2)
    assert bor_ceiling_all(k, 100, r) == pytest.approx(-math.log2(sum(pa) / 4), rel=1e-12)
    assert math.isnan(bor_ceiling_all([1], 100, 2))
    # R = 1 everywhere: identical to the "any" aggregate
    assert bor_aggregate_all([1, 0, 1], [1, 3, 5], 50, 1) == pytest.approx(
        bor_aggregate([1, 0, 1], [1, 3, 5], 50, 1), rel=1e-13
    )


def test_aggregate_all_counts_a_whole_list_as_chance() -> None:
    """P_all = 1 (K = N, or R = 0): c_q = 1 whatever was complete, 0 bits, never worse than random.
    Hand-computed: P_all(20; 100, 2) = 20 * 19 / (100 * 99) = 380 / 9900."""
    p = 380 / 9900
    # the whole list of 10 misses one of its R = 3 relevant items (absent from the list): counts as 1
    assert bor_aggregate_all([0, 1], [10, 20], [10, 100], [3, 2]) == pytest.approx(
        math.log2(1 / ((1 + p) / 2)), rel=1e-12
    )  # it was log2(0.5 / ((1 + p) / 2)) = -0.97
    assert bor_aggregate_all([0, 0], [5, 5], 5, 2) == 0.0  # only whole lists: exactly chance
    assert bor_aggregate_all([0, 1], [9, 20], [10, 100], [3, 2]) == pytest.approx(  # K = 9 < N: a miss
        math.log2(0.5 / ((9 * 8 * 7 / (10 * 9 * 8) + p) / 2)), rel=1e-12
    )


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ((3, 10, 11), "r must be <= n"),
        ((11, 10, 2), "k must be <= n"),
        ((2.5, 10, 2), "whole number"),
        ((-1, 10, 2), ">= 0"),
    ],
)
def test_bad_counts_name_the_argument(args: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        p_random_all(*args)
