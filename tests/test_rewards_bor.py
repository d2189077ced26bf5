"""Tests of rewards.bor: the hypergeometric random baseline, BoR and the per-query rewards.

Oracles: ``scipy.stats.hypergeom.sf(m - 1, N, R, K)`` on an exhaustive small grid,
mpmath at 50 digits for huge N, the reference values of SPEC section 1, and
hand-computed aggregates. Properties (Hypothesis) cover bounds, monotonicity,
closed forms and the K <-> R symmetry of ``1 - C(N-R, K) / C(N, K)``.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy.stats import hypergeom

from rewards import (
    COLLAPSE_LAMBDA,
    REWARD_KINDS,
    bor_aggregate,
    bor_ceiling,
    bor_optimistic,
    bor_reward,
    constant_reward,
    expected_random_hits,
    f1_reward,
    p_random,
    terminal_reward,
)

RTOL = 1e-9
ATOL = 1e-15
PROPS = settings(max_examples=150, deadline=None)


def _last_uncertain(k: int, n: int, r: int) -> bool:
    """K = N - R with min(K, R) > 64: the case of the NaN bug pinned down by
    ``test_p_random_last_uncertain_depth_is_not_nan``; kept out of the broad
    tests so that each bug fails exactly one test."""
    return k == n - r and min(k, r) > 64


# ----------------------------------------------------------------------------- oracle grid


def _grid(n: int, seed: int, max_pairs: int, stride: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """All (K, R) pairs for a small N, else a seeded sample plus the structured edges
    (R = 1, K = N - R, K = N - R + 1, R = 65; every ``stride``-th value)."""
    k, r = np.meshgrid(np.arange(n + 1), np.arange(n + 1), indexing="ij")
    k, r = k.ravel(), r.ravel()
    if k.size > max_pairs:
        rng = np.random.default_rng(seed)
        pick = rng.choice(k.size, max_pairs, replace=False)
        edges = np.arange(0, n + 1, stride)
        k = np.concatenate([k[pick], edges, n - edges, np.clip(n - edges + 1, 0, n), edges])
        ones = np.ones_like(edges)
        r = np.concatenate([r[pick], ones, edges, edges, 65 * ones])
        keep = (k <= n) & (r <= n)
        k, r = k[keep], r[keep]
    return k, r


GRID_N = [*range(1, 6), 7, 10, 13, 20, 37, 50, 64, 65, 66, 100, 129, 130, 131, 200, 370, 1000, 2000]


@pytest.mark.parametrize("n", GRID_N)
def test_p_random_matches_scipy_hypergeom_sf_m1(n: int) -> None:
    k, r = _grid(n, seed=n, max_pairs=20_000)
    keep = ~((k == n - r) & (np.minimum(k, r) > 64))  # see _last_uncertain
    k, r = k[keep], r[keep]
    got = np.asarray(p_random(k, n, r))
    want = hypergeom.sf(0, n, r, k)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("m", [2, 3])
@pytest.mark.parametrize("n", [1, 2, 3, 5, 10, 20, 37, 100, 370, 2000])
def test_p_random_matches_scipy_hypergeom_sf_at_least_m(n: int, m: int) -> None:
    k, r = _grid(n, seed=1000 * m + n, max_pairs=700, stride=max(1, n // 100))
    got = np.asarray(p_random(k, n, r, m))
    want = hypergeom.sf(m - 1, n, r, k)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize(
    ("n", "r", "k", "m", "want"),
    [
        (10_000, 10, 20, 1, 0.019830),
        (10_000, 10, 100, 1, 0.095659),
        (58, 4, 5, 1, 0.309815),
        (58, 4, 20, 1, 0.826019),
        (400_000, 20_000, 10, 1, 0.401267),
        (11_314, 572, 100, 1, 0.994546),
        (600, 6, 40, 1, 0.340158),
        (600, 6, 40, 2, 0.054820),
    ],
)
def test_p_random_spec_reference_values(n: int, r: int, k: int, m: int, want: float) -> None:
    assert abs(p_random(k, n, r, m) - want) < 5e-7


# ----------------------------------------------------------------------------- high precision


def _mp_p_random(k: int, n: int, r: int) -> mpmath.mpf:
    """1 - C(N-R, K) / C(N, K) at 50 digits via loggamma."""
    if k == 0 or r == 0:
        return mpmath.mpf(0)
    if k > n - r:
        return mpmath.mpf(1)
    lg = mpmath.loggamma
    log_none = lg(n - r + 1) - lg(n - r - k + 1) - lg(n + 1) + lg(n - k + 1)
    return -mpmath.expm1(log_none)


def _mp_tail(k: int, n: int, r: int, m: int) -> mpmath.mpf:
    """sum_{x>=m} C(R,x) C(N-R,K-x) / C(N,K) at 50 digits (exact binomials)."""
    total = mpmath.mpf(0)
    denom = mpmath.binomial(n, k)
    for x in range(max(m, k - (n - r)), min(r, k) + 1):
        term = mpmath.binomial(r, x) * mpmath.binomial(n - r, k - x) / denom
        total += term
        if x > m + 3 and term < total * mpmath.mpf(10) ** -30:
            break
    return total


def _log_uniform_cases(rng: np.random.Generator, n_max: float, count: int) -> list[tuple[int, int, int]]:
    cases = []
    while len(cases) < count:
        n = int(np.exp(rng.uniform(0.0, math.log(n_max))))
        k = min(n, int(np.exp(rng.uniform(0.0, math.log(n + 1)))))
        r = min(n, int(np.exp(rng.uniform(0.0, math.log(n + 1)))))
        if _last_uncertain(k, n, r):
            continue
        cases.append((k, n, r))
    return cases


@pytest.mark.parametrize(("n_max", "seed"), [(1e9, 20240601), (1e12, 7)])
def test_p_random_matches_mpmath_at_huge_n(n_max: float, seed: int) -> None:
    mpmath.mp.dps = 50
    rng = np.random.default_rng(seed)
    cases = _log_uniform_cases(rng, n_max, 300)
    # and where P_rand is tiny or the two algorithms (direct product / saddle point) meet
    n = int(n_max)
    cases += [(1, n, 1), (2, n, 1), (64, n, 64), (65, n, 65), (1000, n, 1000), (10**5, n, 77)]
    worst = 0.0
    for k, n, r in cases:
        want = _mp_p_random(k, n, r)
        got = p_random(k, n, r)
        err = abs(mpmath.mpf(got) - want) / want if want > 0 else mpmath.mpf(abs(got))
        worst = max(worst, float(err))
        assert err <= RTOL, (k, n, r, got, mpmath.nstr(want, 17))
    assert worst <= RTOL


def test_p_random_at_least_m_matches_mpmath_at_huge_n() -> None:
    """m = 2, 3 against exact binomial sums (scipy's sf is only ~1e-7 accurate here)."""
    mpmath.mp.dps = 50
    rng = np.random.default_rng(11)
    checked = 0
    for k, n, r in _log_uniform_cases(rng, 1e9, 400):
        if k * r / n > 50 or min(k, r) < 2:  # keep the exact sums short
            continue
        for m in (2, 3):
            want = _mp_tail(k, n, r, m)
            got = p_random(k, n, r, m)
            if want < mpmath.mpf(10) ** -290:
                continue
            err = abs(mpmath.mpf(got) - want) / want
            assert err <= RTOL, (k, n, r, m, got, mpmath.nstr(want, 17))
            checked += 1
    assert checked >= 50


# ----------------------------------------------------------------------------- the NaN bug


def test_p_random_last_uncertain_depth_is_not_nan() -> None:
    """K = N - R is the last depth where a miss is still possible: P_rand = 1 - 1/C(N, R).

    BUG (rewards/hypergeom.py, saddle-point branch of log_p_none, taken when
    min(K, R) > 64): N - R - K = 0 makes ``_bd0(0, 0)`` = 0 * log(0/0) = NaN and
    ``log1p(-K / (N - R))`` = log1p(-1) = -inf, so p_random returns NaN (with a
    RuntimeWarning "divide by zero encountered in log1p") instead of ~1.0.
    """
    cases = [
        (65, 130, 65),
        (100, 200, 100),
        (300, 370, 70),
        (65, 2000, 1935),
        (1935, 2000, 65),
        (5 * 10**8, 10**9, 5 * 10**8),
    ]
    got = {(k, n, r): p_random(k, n, r) for k, n, r in cases}
    nan = [c for c, p in got.items() if math.isnan(p)]
    assert nan == [], f"p_random(k, n, r) is NaN at K = N - R for (k, n, r) in {nan}"
    for (k, n, r), p in got.items():
        assert p == pytest.approx(hypergeom.sf(0, n, r, k), rel=RTOL)
    # the vectorised call hits the same branch
    assert not np.isnan(p_random(np.array([64, 65]), 130, 65)).any()


@PROPS
@given(n=st.integers(130, 10**7), data=st.data())
def test_p_random_property_last_uncertain_depth(n: int, data: st.DataObject) -> None:
    """Same bug as above, as a property: K = N - R gives 1 - C(N, R)^-1, in (0, 1]."""
    r = data.draw(st.integers(65, n - 65))
    got = p_random(n - r, n, r)
    assert 0.0 < got <= 1.0, f"p_random({n - r}, {n}, {r}) = {got}"


# ----------------------------------------------------------------------------- properties


@st.composite
def counts(draw: st.DrawFn, n_max: int = 10**6) -> tuple[int, int, int]:
    n = draw(st.one_of(st.integers(1, 300), st.integers(1, n_max)))
    k = draw(st.integers(0, n))
    r = draw(st.integers(0, n))
    return k, n, r


@PROPS
@given(counts(10**12), st.integers(1, 4))
def test_p_random_in_unit_interval(c: tuple[int, int, int], m: int) -> None:
    k, n, r = c
    assume(not _last_uncertain(k, n, r))
    p = p_random(k, n, r, m)
    assert isinstance(p, float)
    assert 0.0 <= p <= 1.0


@PROPS
@given(counts(), st.data())
def test_p_random_monotone_in_k(c: tuple[int, int, int], data: st.DataObject) -> None:
    k, n, r = c
    k2 = data.draw(st.integers(k, n))
    assume(not _last_uncertain(k, n, r) and not _last_uncertain(k2, n, r))
    assert p_random(k, n, r) <= p_random(k2, n, r)


@PROPS
@given(counts(), st.data())
def test_p_random_monotone_in_r(c: tuple[int, int, int], data: st.DataObject) -> None:
    k, n, r = c
    r2 = data.draw(st.integers(r, n))
    assume(not _last_uncertain(k, n, r) and not _last_uncertain(k, n, r2))
    assert p_random(k, n, r) <= p_random(k, n, r2)


@PROPS
@given(counts())
def test_p_random_neighbours_monotone(c: tuple[int, int, int]) -> None:
    """Adjacent depths (where the direct / saddle-point switch at 64 terms could bite)."""
    k, n, r = c
    assume(k < n)
    assume(not _last_uncertain(k, n, r) and not _last_uncertain(k + 1, n, r))
    assert p_random(k, n, r) <= p_random(k + 1, n, r)


@pytest.mark.parametrize("n", [130, 1000, 10**6, 10**9])
@pytest.mark.parametrize("r", [1, 63, 64, 65, 66, 200])
def test_p_random_monotone_across_algorithm_switch(n: int, r: int) -> None:
    r = min(r, n)
    k = np.arange(0, min(n, 200) + 1)
    k = k[k != n - r]  # see _last_uncertain
    p = np.asarray(p_random(k, n, r))
    assert np.all(np.diff(p) >= 0)


@PROPS
@given(st.integers(1, 10**9), st.data())
def test_p_random_certain_beyond_n_minus_r(n: int, data: st.DataObject) -> None:
    r = data.draw(st.integers(1, n))
    assert p_random(n - r + 1, n, r) == 1.0
    k = data.draw(st.integers(n - r + 1, n))
    assert p_random(k, n, r) == 1.0


@PROPS
@given(st.integers(1, 10**12), st.data())
def test_p_random_single_relevant_is_k_over_n(n: int, data: st.DataObject) -> None:
    k = data.draw(st.integers(0, n))
    assert p_random(k, n, 1) == pytest.approx(k / n, rel=1e-12, abs=0)
    assert p_random(k, n) == p_random(k, n, 1)


@PROPS
@given(counts(10**12))
def test_p_random_zero_draws_or_zero_relevant(c: tuple[int, int, int]) -> None:
    k, n, r = c
    assert p_random(0, n, r) == 0.0
    assert p_random(k, n, 0) == 0.0
    assert math.copysign(1.0, p_random(0, n, r)) == 1.0  # never -0.0


@PROPS
@given(counts(10**12))
def test_p_random_symmetric_in_k_and_r(c: tuple[int, int, int]) -> None:
    """C(N-R, K)/C(N, K) = C(N-K, R)/C(N, R), so P(K; N, R) == P(R; N, K)."""
    k, n, r = c
    assume(not _last_uncertain(k, n, r))
    assert p_random(k, n, r) == pytest.approx(p_random(r, n, k), rel=1e-12, abs=ATOL)


@PROPS
@given(st.lists(st.tuples(counts(10**9), st.integers(1, 3)), min_size=1, max_size=12))
def test_p_random_vectorised_equals_elementwise(
    rows: list[tuple[tuple[int, int, int], int]],
) -> None:
    rows = [(c, m) for c, m in rows if not _last_uncertain(*c)]
    assume(rows)
    k = np.array([c[0] for c, _ in rows])
    n = np.array([c[1] for c, _ in rows])
    r = np.array([c[2] for c, _ in rows])
    m = np.array([m for _, m in rows])
    vec = p_random(k, n, r, m)
    assert isinstance(vec, np.ndarray) and vec.shape == k.shape and vec.dtype == np.float64
    one = np.array([p_random(int(a), int(b), int(c), int(d)) for a, b, c, d in zip(k, n, r, m, strict=True)])
    np.testing.assert_array_equal(vec, one)


def test_p_random_broadcasts() -> None:
    got = p_random(np.array([[1], [2]]), np.array([10, 20]), 1, np.array([1, 2]))
    np.testing.assert_array_equal(got, [[0.1, 0.0], [0.2, 0.0]])
    assert isinstance(p_random(np.int64(3), np.int64(10)), float)
    assert p_random(3.0, 10.0) == pytest.approx(0.3)


# ----------------------------------------------------------------------------- input errors


@pytest.mark.parametrize(
    ("args", "name"),
    [
        ((11, 10, 1), "k"),  # k > n
        ((0, 0, 0), "n"),  # n <= 0
        ((1, -5, 1), "n"),
        ((-1, 10, 1), "k"),  # negative counts
        ((1, 10, -1), "r"),
        ((2.5, 10, 1), "k"),  # non-integer counts
        ((1, 10.5, 1), "n"),
        ((1, 10, 1.5), "r"),
        ((float("nan"), 10, 1), "k"),  # NaN / inf
        ((1, float("inf"), 1), "n"),
        ((1, 10, float("nan")), "r"),
        ((1, 10, 11), "r"),  # r > n
        ((1, 10, 1, 0), "m"),  # m < 1
        ((1, 10, 1, -1), "m"),
        ((1, 10, 1, 1.5), "m"),
        ((True, 10, 1), "k"),  # bool input
        ((1, np.True_, 1), "n"),
        ((np.array([1, 2]), 10, np.array([True, False])), "r"),
        ((1, 2**60, 1), "n"),  # beyond exact float64 integers
        (("3", 10, 1), "k"),
    ],
)
def test_p_random_rejects_bad_counts(args: tuple, name: str) -> None:
    with pytest.raises(ValueError, match=rf"^{name}\b"):
        p_random(*args)


# ----------------------------------------------------------------------------- aggregate BoR


def _fixed_k(n_found: int, n_queries: int) -> np.ndarray:
    return np.array([1] * n_found + [0] * (n_queries - n_found))


def test_bor_aggregate_spec_example_n370() -> None:
    """SPEC: with N = 370, K=1 at 60.0% found has BoR 7.79 and mean reward 5.12; K=3 at
    78.3% (94 of 120) has BoR 6.59 and mean reward 5.44: the two rank them oppositely."""
    n, q = 370, 120
    f1 = _fixed_k(72, q)
    f3 = _fixed_k(94, q)
    bor1 = bor_aggregate(f1, 1, n)
    bor3 = bor_aggregate(f3, 3, n)
    rew1 = float(np.mean(bor_reward(f1, 1, n)))
    rew3 = float(np.mean(bor_reward(f3, 3, n)))
    assert round(bor1, 2) == 7.79
    assert round(rew1, 2) == 5.12
    assert round(bor3, 2) == 6.59
    assert round(rew3, 2) == 5.44
    assert bor1 > bor3 and rew1 < rew3
    assert bor1 == pytest.approx(math.log2(0.6 * 370), rel=1e-12)
    assert bor3 == pytest.approx(math.log2(94 / 120 * 370 / 3), rel=1e-12)


def test_bor_aggregate_ratio_of_means_with_per_query_depths() -> None:
    found = [1, 0, 1, 1]
    k = [1, 2, 5, 10]
    n = [10, 10, 100, 100]
    # P_rand = 0.1, 0.2, 0.05, 0.1 -> mean 0.1125; mean found 0.75
    want = math.log2(0.75 / 0.1125)
    assert bor_aggregate(found, k, n) == pytest.approx(want, rel=1e-12)
    # NOT the mean reward (mean of per-query -log2 P_rand over found queries)
    assert bor_aggregate([1, 1], [1, 50], 100) == pytest.approx(math.log2(1 / 0.255), rel=1e-12)
    assert float(np.mean(bor_reward([1, 1], [1, 50], 100))) == pytest.approx((math.log2(100) + 1.0) / 2, rel=1e-12)
    # with R > 1: P_rand(2; 20, 2) = 1 - C(18,2)/C(20,2) = 37/190
    assert bor_aggregate([1, 1], [2, 1], [20, 10], [2, 1]) == pytest.approx(
        math.log2(1.0 / ((37 / 190 + 0.1) / 2)), rel=1e-12
    )
    # bools are 0/1
    as_bool = np.array([True, False, True, True])
    assert bor_aggregate(as_bool, k, n) == pytest.approx(want, rel=1e-12)


def test_bor_aggregate_zero_and_random_and_nothing_found() -> None:
    assert bor_aggregate([0, 0, 0], [1, 2, 3], 10) == -math.inf
    # a method exactly as good as random: found rate = mean P_rand -> 0 bits
    assert bor_aggregate([1, 0, 0, 0, 0], 1, 5) == pytest.approx(0.0, abs=1e-12)
    assert bor_aggregate([1], 1, 8) == pytest.approx(3.0)


def test_bor_aggregate_counts_a_list_where_chance_is_certain_as_chance() -> None:
    """P_rand = 1 (N = 1, or K >= N - R + 1): f_q = 1 whatever was found, so the query adds 0 bits and
    never pulls BoR below random. Hand-computed values; the old ratio of plain means in comments."""
    # three one-candidate lists, one found, two whose relevant document is missing from the list:
    # mean f = 1, mean P_rand = 1 -> 0 bits (it was log2((1/3) / 1) = -1.58)
    assert bor_aggregate([1, 0, 0], 1, 1, 1) == 0.0
    # N = 4 found at K = 1 (P = 1/4) beside two such lists: log2(1 / (2.25 / 3)) = log2(4 / 3)
    assert bor_aggregate([1, 0, 0], [1, 1, 1], [4, 1, 1], [1, 1, 1]) == pytest.approx(math.log2(4 / 3), rel=1e-12)
    # K = 3 >= N - R + 1 = 3 (N = 4, R = 2): certain; beside a found K = 2 of N = 10 (P = 0.2):
    # log2(1 / 0.6) (it was log2(0.5 / 0.6) = -0.26)
    assert bor_aggregate([0, 1], [3, 2], [4, 10], [2, 1]) == pytest.approx(math.log2(1 / 0.6), rel=1e-12)
    # K = 2 < N - R + 1 = 3: not certain (P_rand = 5/6), a miss counts as a miss
    assert bor_aggregate([0, 1], [2, 2], [4, 10], [2, 1]) == pytest.approx(
        math.log2(0.5 / ((5 / 6 + 0.2) / 2)), rel=1e-12
    )
    assert bor_aggregate([0, 0], [1, 1], [1, 5]) == pytest.approx(math.log2(0.5 / 0.6), rel=1e-12)


@given(
    st.lists(
        st.tuples(st.integers(1, 30), st.integers(0, 30), st.integers(0, 30), st.booleans()), min_size=1, max_size=8
    )
)
def test_bor_aggregate_unchanged_where_relevant_items_are_in_the_list(rows: list) -> None:
    """When every query's R relevant items are among its N candidates, a shortlist with P_rand = 1 holds one
    of them (pigeonhole), and BoR is the plain ratio of means log2(mean found / mean P_rand)."""
    n = np.array([r[0] for r in rows])
    rel = np.array([1 + r[1] % m for r, m in zip(rows, n, strict=True)])
    k = np.array([1 + r[2] % m for r, m in zip(rows, n, strict=True)])
    found = np.array([r[3] or kq > nq - rq for r, kq, nq, rq in zip(rows, k, n, rel, strict=True)], dtype=int)
    pr = np.asarray(p_random(k, n, rel))
    plain = math.log2(found.mean() / pr.mean()) if found.any() else -math.inf
    assert bor_aggregate(found, k, n, rel) == pytest.approx(plain, rel=1e-12)


@pytest.mark.parametrize(
    "args",
    [
        ([], [], []),
        ([], 1, 10),
        ([0.5, 1], 1, 10),
        ([2, 1], 1, 10),
        ([-1, 1], 1, 10),
        ([1, 0], 0, 10),  # mean P_rand = 0
        ([1, 0], 1, 10, 0),
        ([1, 0], 11, 10),  # invalid counts propagate
    ],
)
def test_bor_aggregate_errors(args: tuple) -> None:
    with pytest.raises(ValueError):
        bor_aggregate(*args)


# ----------------------------------------------------------------------------- ceilings, lambda


def test_bor_ceiling() -> None:
    assert bor_ceiling(1, 370) == pytest.approx(math.log2(370), rel=1e-12)
    assert bor_ceiling([1, 2], [10, 10]) == pytest.approx(-math.log2(0.15), rel=1e-12)
    # ceiling = BoR of a perfect method
    assert bor_ceiling([1, 5, 2], [10, 100, 20], [1, 3, 2]) == pytest.approx(
        bor_aggregate([1, 1, 1], [1, 5, 2], [10, 100, 20], [1, 3, 2]), rel=1e-12
    )
    with pytest.raises(ValueError):
        bor_ceiling(0, 10)
    with pytest.raises(ValueError):
        bor_ceiling(11, 10)


def test_bor_optimistic() -> None:
    assert round(bor_optimistic(1000, 8_841_823), 2) == 13.11
    assert bor_optimistic(1000, 8_841_823) == pytest.approx(math.log2(8_841_823 / 1000), rel=1e-12)
    assert bor_optimistic(1, 370) == pytest.approx(math.log2(370), rel=1e-12)
    assert bor_optimistic(10, 10) == 0.0
    np.testing.assert_allclose(bor_optimistic(np.array([1, 2, 4]), 8), [3.0, 2.0, 1.0])
    for bad in [(0, 10), (11, 10), (1.5, 10), (1, 0)]:
        with pytest.raises(ValueError):
            bor_optimistic(*bad)


def test_expected_random_hits() -> None:
    assert expected_random_hits(10, 100, 30) == pytest.approx(3.0)
    assert expected_random_hits(10, 100, 30) >= COLLAPSE_LAMBDA
    assert expected_random_hits(1, 370) == pytest.approx(1 / 370)
    np.testing.assert_allclose(expected_random_hits(np.array([1, 5]), 50, 2), [0.04, 0.2])
    # the collapse zone is where P_rand >= ~0.95 for a large N
    assert p_random(3000, 10**6, 1000) >= 0.95
    with pytest.raises(ValueError):
        expected_random_hits(11, 10)


# ----------------------------------------------------------------------------- per-query rewards


def test_bor_reward() -> None:
    assert bor_reward(1, 3, 10) == pytest.approx(math.log2(10 / 3), rel=1e-12)
    assert bor_reward(0, 3, 10) == 0.0
    assert math.copysign(1.0, bor_reward(1, 10, 10)) == 1.0  # P_rand = 1 pays +0.0
    assert bor_reward(1, 2, 20, 2) == pytest.approx(-math.log2(37 / 190), rel=1e-12)
    np.testing.assert_allclose(bor_reward([1, 0, 1], [1, 1, 4], 16), [4.0, 0.0, 2.0])
    with pytest.raises(ValueError):
        bor_reward(1, 0, 10)
    with pytest.raises(ValueError):
        bor_reward(0.5, 1, 10)


@pytest.mark.parametrize("k", [1, 2, 3, 9, 370])
def test_f1_reward(k: int) -> None:
    assert f1_reward(1, k) == pytest.approx(2 / (k + 1), rel=1e-15)
    assert f1_reward(0, k) == 0.0
    assert f1_reward(True, k) == pytest.approx(2 / (k + 1), rel=1e-15)


def test_f1_reward_vector_and_errors() -> None:
    np.testing.assert_allclose(f1_reward([1, 1, 0], [1, 3, 3]), [1.0, 0.5, 0.0])
    for bad in [(1, 0), (1, 1.5), (1, float("nan")), (2, 1), (0.5, 1)]:
        with pytest.raises(ValueError):
            f1_reward(*bad)


def test_constant_reward() -> None:
    assert constant_reward(1) == 1.0
    assert constant_reward(0) == 0.0
    np.testing.assert_array_equal(constant_reward([1, 0, 1]), [1.0, 0.0, 1.0])
    with pytest.raises(ValueError):
        constant_reward(2)


def test_terminal_reward_dispatch() -> None:
    assert set(REWARD_KINDS) == {"bor", "f1", "constant"}
    assert terminal_reward("bor", 1, 3, 10) == bor_reward(1, 3, 10)
    assert terminal_reward("bor", 1, 2, 20, 2) == bor_reward(1, 2, 20, 2)
    assert terminal_reward("f1", 1, 3, 10) == f1_reward(1, 3) == 0.5
    assert terminal_reward("constant", 1, 3, 10) == 1.0
    for kind in REWARD_KINDS:
        assert terminal_reward(kind, 0, 3, 10) == 0.0


@pytest.mark.parametrize("kind", ["BoR", "F1", "", "mean", "log"])
def test_terminal_reward_unknown_kind(kind: str) -> None:
    with pytest.raises(ValueError, match="unknown reward"):
        terminal_reward(kind, 1, 3, 10)
