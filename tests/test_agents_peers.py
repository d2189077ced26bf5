"""Peers: exact hand-computed depths of the vectorised cores, exact parameter search
against brute force, the shared protocol, and bad input (ties, constant scores, one
candidate, gold beyond max_depth, NaN) in every peer."""

from __future__ import annotations

import numpy as np
import pytest

from agents import DepthPolicy, evaluate, registry
from agents.peers import (
    GapPolicy,
    GreedyK,
    RandomDepth,
    ThresholdPolicy,
    TopPPolicy,
    gap_depths,
    log_rest_mass,
    minmax_scores,
    objective_matrix,
    score_matrix,
    sweep_keys,
    threshold_depths,
    topp_depths,
)
from envs import EpisodeConfig, RankedQuery
from rewards import bor_aggregate, p_random

NAN = np.nan


def rq(scores: list[float], gold: int, qid: str = "q", n: int = 0) -> RankedQuery:
    return RankedQuery(np.array(scores, dtype=float), [gold] if gold else [], qid, n)


def random_queries(count: int, n: int, seed: int, max_gold: int = 8) -> list[RankedQuery]:
    """Score lists with a signal: the gold item gets a boost, so depth rules have something to find."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        s = rng.normal(size=n)
        gold = int(rng.integers(1, max_gold + 1))
        order = np.sort(s)[::-1]
        order[: gold - 1] += rng.random() * 2
        out.append(RankedQuery(np.sort(order)[::-1].copy(), [gold], f"q{i}"))
    return out


# ----------------------------------------------------------------------------- gap: exact depths

# drops of [10, 9, 5, 4, 1] are [1, 4, 1, 3]: the largest follows rank 2
# the 11-item list has nine drops of 0.5 then a drop of 5.5 after rank 10; the tail-10% rule
# drops int(10 * 0.1) = 1 gap from the end, leaving nine equal drops: the first one (rank 1) wins
LONG = [10, 9.5, 9, 8.5, 8, 7.5, 7, 6.5, 6, 5.5, 0]


@pytest.mark.parametrize(
    "scores, tail, buffer, expected",
    [
        ([10, 9, 5, 4, 1], 0.0, 0, 2),
        ([10, 9, 5, 4, 1], 0.1, 0, 2),  # int(4 * 0.1) = 0 gaps ignored
        ([10, 9, 5, 4, 1], 0.0, 5, 5),  # 2 + 5 clipped to the 5 candidates
        (LONG, 0.0, 0, 10),
        (LONG, 0.1, 0, 1),
        (LONG, 0.0, 5, 11),
        (LONG, 0.1, 5, 6),
        ([5, 4, 3, 2], 0.0, 0, 1),  # equal drops: the first (shallowest) one
        ([3, 3, 3], 0.0, 0, 1),  # constant scores: all drops 0 -> the first
        ([3, 3, 3], 0.0, 5, 3),
        ([7], 0.0, 0, 1),  # one candidate
        ([7], 0.1, 5, 1),
        ([1, 1, 0, 0], 0.0, 0, 2),  # ties on both sides of the only real drop
    ],
)
def test_gap_depths_hand_computed(scores: list[float], tail: float, buffer: int, expected: int) -> None:
    got = gap_depths(np.array([scores], dtype=float), tail=tail, buffer=buffer)
    np.testing.assert_array_equal(got, [expected])
    # the protocol wrapper gives the same depth
    pol = GapPolicy(tail, buffer)
    np.testing.assert_array_equal(pol.depths([rq(scores, 1)], EpisodeConfig()), [expected])


def test_gap_names_and_registry() -> None:
    assert GapPolicy().name == "gap"
    assert GapPolicy(0.1).name == "gap-tail10"
    assert GapPolicy(0.0, 5).name == "gap-buffer5"
    assert GapPolicy(0.1, 5).name == "gap-tail10-buffer5"
    for name in ("gap", "gap-tail10", "gap-buffer5", "gap-tail10-buffer5"):
        assert registry.make(name, "bor").name == name
    with pytest.raises(ValueError, match="tail"):
        GapPolicy(1.0)
    with pytest.raises(ValueError, match="buffer"):
        GapPolicy(0.0, -1)


def test_gap_matrix_padding_and_caps() -> None:
    s = np.array([[10, 9, 5, 4, 1], [3, 0, NAN, NAN, NAN], [10, 9, 8, 1, 0]])
    np.testing.assert_array_equal(gap_depths(s, [5, 2, 5]), [2, 1, 3])
    np.testing.assert_array_equal(gap_depths(s, [5, 2, 5], [5, 2, 2]), [2, 1, 2])
    np.testing.assert_array_equal(gap_depths(s, [5, 2, 5], buffer=1), [3, 2, 4])
    # affine maps of a row do not move the cut
    np.testing.assert_array_equal(gap_depths(s[[0]] * 3 + 7), [2])
    assert gap_depths(np.zeros((0, 4))).shape == (0,)


@pytest.mark.parametrize(
    "fn", [lambda s: gap_depths(s), lambda s: threshold_depths(s, t=0.5), lambda s: topp_depths(s, p=0.5)]
)
def test_cores_reject_nan_inf_and_unsorted(fn) -> None:
    with pytest.raises(ValueError, match="row 1, rank 2 is nan"):
        fn(np.array([[3.0, 2.0, 1.0], [3.0, NAN, 1.0]]))
    with pytest.raises(ValueError, match="NaN/inf"):
        fn(np.array([[3.0, 2.0, np.inf]]))
    with pytest.raises(ValueError, match="not sorted descending"):
        fn(np.array([[1.0, 2.0, 0.0]]))
    with pytest.raises(ValueError, match="2-D"):
        fn(np.array([3.0, 2.0]))


def test_matrix_argument_checks() -> None:
    s = np.array([[3.0, 2.0, 1.0]])
    with pytest.raises(ValueError, match="lengths"):
        gap_depths(s, [4])
    with pytest.raises(ValueError, match="caps"):
        gap_depths(s, [2], [3])
    with pytest.raises(ValueError, match="caps"):
        gap_depths(s, None, [0])
    with pytest.raises(ValueError, match="exactly one"):
        topp_depths(s)
    with pytest.raises(ValueError, match="NaN"):
        threshold_depths(s, t=NAN)


def test_ranked_query_rejects_nan_before_any_peer() -> None:
    with pytest.raises(ValueError, match="NaN/inf"):
        rq([1.0, NAN, 0.0], 1)


# ----------------------------------------------------------------------------- threshold / top-p


def test_threshold_depths_hand_computed() -> None:
    s = np.array([[10.0, 8.0, 5.0, 0.0]])  # u = [1, 0.8, 0.5, 0]
    np.testing.assert_allclose(minmax_scores(s), [[1.0, 0.8, 0.5, 0.0]])
    for t, k in ((0.5, 3), (0.9, 1), (0.8, 2), (0.0, 4), (1.5, 1), (-1.0, 4)):
        np.testing.assert_array_equal(threshold_depths(s, t=t), [k])
    np.testing.assert_array_equal(threshold_depths(s, None, [2], t=0.0), [2])
    # constant scores: every item is "at the top" (u = 1), so a threshold shows up to the cap
    np.testing.assert_array_equal(threshold_depths(np.full((1, 4), 2.0), None, [3], t=0.99), [3])
    np.testing.assert_array_equal(threshold_depths(np.array([[5.0]]), t=0.5), [1])


def test_topp_depths_hand_computed() -> None:
    # constant list of 4: uniform mass, c = [.25, .5, .75, 1]
    flat = np.full((1, 4), 2.0)
    for p, k in ((0.2, 1), (0.6, 3), (0.9, 4), (1.0, 4)):
        np.testing.assert_array_equal(topp_depths(flat, p=p), [k])
    # [2, 0, 0, -2]: z = [sqrt2, 0, 0, -sqrt2]; softmax(z) cumulative = [.647, .804, .962, 1]
    s = np.array([[2.0, 0.0, 0.0, -2.0]])
    z = np.array([2.0, 0.0, 0.0, -2.0]) / np.sqrt(2.0)
    c = np.cumsum(np.exp(z) / np.exp(z).sum())
    np.testing.assert_allclose(np.exp(log_rest_mass(s))[0, :3], 1 - c[:3], rtol=1e-12)
    for p, k in ((0.5, 1), (0.7, 2), (0.9, 3), (0.99, 4)):
        np.testing.assert_array_equal(topp_depths(s, p=p), [k])
        assert k == 1 + int(np.sum(c[:3] < p))
    np.testing.assert_array_equal(topp_depths(s, None, [2], p=0.99), [2])
    np.testing.assert_array_equal(topp_depths(np.array([[1.0]]), p=0.5), [1])
    # a sharp temperature turns top-p into a threshold on the z-distance from the top
    np.testing.assert_array_equal(topp_depths(s, p=0.9, temperature=0.05), [1])


def test_sweep_keys_matches_brute_force() -> None:
    rng = np.random.default_rng(0)
    keys = np.sort(rng.integers(0, 6, size=(7, 5)).astype(float), axis=1)
    gains = rng.normal(size=(7, 5))
    valid = rng.random((7, 5)) < 0.8
    thetas, totals, extra = sweep_keys(keys, gains, valid)
    for th, tot, ex in zip(thetas, totals, extra, strict=True):
        take = valid & (keys <= th)
        assert tot == pytest.approx(float(gains[take].sum()))
        assert ex == int(take.sum())
    # every distinct count pattern is represented: brute force over a fine grid finds nothing better
    grid = np.linspace(keys.min() - 1, keys.max() + 1, 400)
    brute = max(float(gains[valid & (keys <= g)].sum()) for g in grid)
    assert totals.max() == pytest.approx(brute)


def _mean_reward(pol, qs, cfg) -> float:
    pay, _ = objective_matrix(qs, cfg, "bor")
    k = pol.depths(qs, cfg)
    return float(pay[np.arange(len(qs)), k - 1].mean())


def test_threshold_fit_is_the_exact_training_optimum() -> None:
    qs = random_queries(60, 30, seed=1)
    cfg = EpisodeConfig()
    pol = ThresholdPolicy("bor").fit(qs, cfg, 0)
    assert pol.name == "bor-threshold"
    got = _mean_reward(pol, qs, cfg)
    s, _ = score_matrix(qs)
    u = minmax_scores(s)
    pay, _ = objective_matrix(qs, cfg, "bor")
    best = max(float(pay[np.arange(60), threshold_depths(s, t=t) - 1].mean()) for t in np.append(np.unique(u), 2.0))
    assert got == pytest.approx(best, rel=1e-12)


def test_threshold_coverage_target() -> None:
    qs = random_queries(50, 30, seed=2)
    cfg = EpisodeConfig()
    pol = ThresholdPolicy("bor", 0.9).fit(qs, cfg, 0)
    assert pol.name == "threshold-cov90"
    found = np.mean([q.gold_rank <= k for q, k in zip(qs, pol.depths(qs, cfg), strict=True)])
    assert found >= 0.9
    # the largest such t: raising t just past the next distinct u value drops coverage below 90%
    s, _ = score_matrix(qs)
    higher = np.unique(minmax_scores(s))
    higher = higher[higher > pol.t]
    k = threshold_depths(s, t=float(np.nextafter(higher[0], np.inf)))
    assert np.mean([q.gold_rank <= kk for q, kk in zip(qs, k, strict=True)]) < 0.9


def test_topp_fit_is_the_exact_optimum_for_its_temperature() -> None:
    qs = random_queries(60, 30, seed=3)
    cfg = EpisodeConfig()
    pol = TopPPolicy("bor", temperatures=(1.0,)).fit(qs, cfg, 0)
    got = _mean_reward(pol, qs, cfg)
    s, _ = score_matrix(qs)
    pay, _ = objective_matrix(qs, cfg, "bor")
    rest = log_rest_mass(s)[:, :-1]
    cands = np.unique(rest[np.isfinite(rest)])
    brute = max(
        float(pay[np.arange(60), topp_depths(s, log_rest=v, temperature=1.0) - 1].mean())
        for v in np.concatenate([cands, cands - 1e-9, [-np.inf, 1.0]])
    )
    assert got == pytest.approx(brute, rel=1e-12)
    full = TopPPolicy("bor").fit(qs, cfg, 0)
    assert _mean_reward(full, qs, cfg) >= got - 1e-12


def test_greedyk_by_reward_and_by_bits() -> None:
    qs = random_queries(40, 25, seed=4)
    cfg = EpisodeConfig()
    g = GreedyK("bor").fit(qs, cfg, 0)
    means = [
        float(np.mean([(-np.log2(p_random(k, 25, 1)) if q.gold_rank <= k else 0.0) for q in qs])) for k in range(1, 26)
    ]
    assert g.k == int(np.argmax(means)) + 1
    gb = GreedyK("bor", "bits").fit(qs, cfg, 0)
    assert gb.name == "greedyk-bits"
    bits = [bor_aggregate([q.gold_rank <= k for q in qs], k, 25) for k in range(1, 26)]
    assert gb.k == int(np.argmax(bits)) + 1
    np.testing.assert_array_equal(g.depths(qs, EpisodeConfig(max_depth=1)), 1)


def test_random_depth_is_seeded_and_in_range() -> None:
    qs = random_queries(200, 30, seed=5)
    cfg = EpisodeConfig(max_depth=12)
    a = RandomDepth().fit(qs, cfg, 7).depths(qs, cfg)
    b = RandomDepth().fit(qs, cfg, 7).depths(qs, cfg)
    c = RandomDepth().fit(qs, cfg, 8).depths(qs, cfg)
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)
    assert a.min() >= 1 and a.max() <= 12
    assert set(np.unique(a)) == set(range(1, 13))


def test_fitted_peers_round_trip_json(tmp_path) -> None:
    qs = random_queries(40, 20, seed=6)
    cfg = EpisodeConfig()
    for pol in (
        ThresholdPolicy("bor"),
        ThresholdPolicy("bor", 0.9),
        TopPPolicy("bor"),
        GreedyK("bor"),
        GreedyK("bor", "bits"),
    ):
        pol.fit(qs, cfg, 0)
        path = tmp_path / f"{pol.name}.json"
        pol.save(path)
        back = type(pol).load(path)
        np.testing.assert_array_equal(back.depths(qs, cfg), pol.depths(qs, cfg))
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="malformed"):
        ThresholdPolicy.load(tmp_path / "bad.json")


# ----------------------------------------------------------------------------- bad input, every peer

PEER_FAMILIES = (
    "gap",
    "gap-tail10",
    "gap-buffer5",
    "gap-tail10-buffer5",
    "threshold",
    "threshold-cov90",
    "topp",
    "greedyk",
    "greedyk-bits",
    "choppy",
    "random",
    "oracle",
    "dp",
)


def odd_queries() -> list[RankedQuery]:
    return [
        rq([5.0], 1, "single"),
        rq([2.0, 2.0, 2.0, 2.0], 3, "constant"),
        rq([3.0, 3.0, 1.0, 1.0, 1.0, 0.0], 2, "ties"),
        rq([9.0, 1.0, 0.5, 0.2, 0.1, 0.0], 0, "no-gold"),
        rq([4.0, 3.0, 2.5, 2.0, 1.0, 0.0, -1.0], 7, "gold-last", n=100),
    ]


@pytest.mark.parametrize("family", PEER_FAMILIES)
def test_every_peer_handles_odd_lists(family: str) -> None:
    qs = odd_queries()
    cfg = EpisodeConfig()
    pol = registry.make(family, "bor")
    assert isinstance(pol, DepthPolicy)
    if family == "choppy":
        from agents.choppy import ChoppyConfig, CutoffModel

        pol = CutoffModel("bor", ChoppyConfig(epochs=20))
    pol.fit(qs, cfg, 0)
    k = pol.depths(qs, cfg)
    caps = np.array([q.length for q in qs])
    assert k.dtype == np.int64 and k.shape == (len(qs),)
    assert np.all((k >= 1) & (k <= caps)), k
    assert k[0] == 1  # a single candidate
    rows = evaluate(pol, qs, cfg)
    assert np.isfinite(rows["reward"]).all()
    assert pol.depths([], cfg).shape == (0,)


@pytest.mark.parametrize("family", PEER_FAMILIES)
def test_every_peer_handles_gold_beyond_max_depth(family: str) -> None:
    qs = [
        rq([6.0, 5.0, 4.0, 3.0, 2.0, 1.0, 0.0], 6, "deep"),
        rq([6.0, 2.0, 1.9, 1.8, 1.0, 0.5, 0.0], 1, "easy"),
        rq([3.0, 3.0, 3.0, 3.0, 3.0, 3.0, 3.0], 7, "flat-deep"),
    ]
    cfg = EpisodeConfig(max_depth=3)
    pol = registry.make(family, "bor")
    if family == "choppy":
        from agents.choppy import ChoppyConfig, CutoffModel

        pol = CutoffModel("bor", ChoppyConfig(epochs=20))
    pol.fit(qs, cfg, 0)
    k = pol.depths(qs, cfg)
    assert np.all((k >= 1) & (k <= 3)), k
    rows = evaluate(pol, qs, cfg)
    assert rows.loc[rows["qid"] == "deep", "found"].item() == 0
    if family == "oracle":
        np.testing.assert_array_equal(k, [1, 1, 1])
