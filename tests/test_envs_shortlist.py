"""Tests of the ShortlistDepth-v0 environment, its ranked-list type and its features.

Contract checks as in Gymnasium / SB3 (checkers with zero warnings, same-seed
rollouts), exact hand-computed rewards, and the score-only, affine-invariant,
bounded observations of SPEC section 2.
"""

from __future__ import annotations

import math
import warnings
from typing import Any

import gymnasium
import numpy as np
import pytest
from gymnasium.utils import seeding
from gymnasium.utils.env_checker import check_env as gym_check_env
from hypothesis import given, settings
from hypothesis import strategies as st
from stable_baselines3.common.env_checker import check_env as sb3_check_env

import envs
from envs import CONTINUE, ENV_ID, N_FEATURES, STOP, EpisodeConfig, RankedQuery, ShortlistEnv, feature_matrix
from rewards import REWARD_KINDS, p_random

STEP_COST = 0.01


def _query(n: int, relevant: list[int], qid: str = "q", seed: int = 0) -> RankedQuery:
    """N distinct descending scores (BM25-like scale) with relevant items at the given ranks."""
    rng = np.random.default_rng(seed)
    scores = np.sort(rng.gamma(2.0, 3.0, size=n))[::-1].copy()
    return RankedQuery(scores, np.array(relevant, dtype=np.int64), qid)


def _queries() -> list[RankedQuery]:
    return [
        _query(10, [3], "gold3", 1),
        _query(20, [1], "gold1", 2),
        _query(20, [2, 5], "two", 3),
        _query(5, [5], "last", 4),
        _query(1, [1], "single", 5),
        _query(30, [], "missing", 6),
        RankedQuery(np.full(4, 0.7), np.array([2]), "const"),
    ]


def _make(queries: list[RankedQuery] | None = None, **episode: Any) -> gymnasium.Env:
    """``gymnasium.make`` with the episode settings ``episode`` (an :class:`EpisodeConfig`, given whole)."""
    return gymnasium.make(ENV_ID, queries=_queries() if queries is None else queries, episode=EpisodeConfig(**episode))


def _run(env: gymnasium.Env, actions: list[int], index: int = 0) -> tuple[list[float], dict, list]:
    """Reset on query ``index``, play ``actions`` until the episode ends."""
    obs, _ = env.reset(seed=0, options={"index": index})
    rewards: list[float] = []
    observations = [obs]
    info: dict = {}
    for a in actions:
        obs, rew, terminated, truncated, info = env.step(a)
        rewards.append(rew)
        observations.append(obs)
        assert not truncated
        if terminated:
            break
    else:
        raise AssertionError("episode did not end")
    return rewards, info, observations


# ---------------------------------------------------------------------- registration, checkers


def test_registered_on_import() -> None:
    assert envs.ENV_ID == "ShortlistDepth-v0"
    assert ENV_ID in gymnasium.registry
    env = _make()
    assert isinstance(env.unwrapped, ShortlistEnv)
    assert env.action_space == gymnasium.spaces.Discrete(2)
    assert env.observation_space.shape == (N_FEATURES,)
    assert env.observation_space.dtype == np.float32
    assert (STOP, CONTINUE) == (0, 1)


@pytest.mark.parametrize("kind", REWARD_KINDS)
def test_gymnasium_and_sb3_checkers_emit_no_warnings(kind: str) -> None:
    env = _make(reward=kind)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        gym_check_env(env.unwrapped)
        sb3_check_env(env.unwrapped)
    assert [str(w.message) for w in caught] == []


def test_wrapped_env_runs_without_warnings() -> None:
    """The make() wrappers (passive checker, order enforcing) see nothing to complain about."""
    env = _make()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(len(_queries())):
            env.reset(seed=i, options={"index": i})
            terminated = False
            while not terminated:
                _, _, terminated, _, _ = env.step(CONTINUE)
    assert [str(w.message) for w in caught] == []


# ----------------------------------------------------------------------------- determinism


def _rollout(seed: int, action_seed: int, episodes: int = 25) -> list[tuple]:
    env = _make()
    rng = np.random.default_rng(action_seed)
    trace: list[tuple] = []
    obs, info = env.reset(seed=seed)
    for _ in range(episodes):
        trace.append(("reset", obs.tobytes(), info))
        terminated = False
        while not terminated:
            obs, rew, terminated, truncated, info = env.step(int(rng.integers(2)))
            trace.append(("step", obs.tobytes(), rew, terminated, truncated, info))
        obs, info = env.reset()
    return trace


def test_same_seed_same_rollout() -> None:
    a = _rollout(seed=42, action_seed=7)
    b = _rollout(seed=42, action_seed=7)
    assert a == b
    c = _rollout(seed=43, action_seed=7)
    assert a != c


def _qids(env: gymnasium.Env, seed: int, count: int = 40) -> list[str]:
    qids = [env.reset(seed=seed)[1]["qid"]]
    qids += [env.reset()[1]["qid"] for _ in range(count - 1)]
    return qids


def test_reset_draws_queries_from_env_np_random() -> None:
    queries = _queries()
    env = _make(queries)
    first = _qids(env, 123)
    assert first == _qids(_make(queries), 123)
    assert first != _qids(_make(queries), 124)
    assert len(set(first)) > 1
    # exactly gymnasium's seeded generator: integers(len(queries)) per reset
    rng, _ = seeding.np_random(123)
    assert first == [queries[int(rng.integers(len(queries)))].qid for _ in range(40)]


def test_reset_does_not_touch_global_rng() -> None:
    env = _make()
    np.random.seed(0)  # noqa: NPY002 - the legacy global RNG is what must stay untouched
    expected = np.random.random()  # noqa: NPY002
    np.random.seed(0)  # noqa: NPY002
    _qids(env, 5, 20)
    env.reset(seed=5)
    for _ in range(10):
        env.step(CONTINUE)
        env.reset()
    assert np.random.random() == expected  # noqa: NPY002


def test_reset_with_index_option() -> None:
    env = _make()
    for i, q in enumerate(_queries()):
        obs, info = env.reset(options={"index": i})
        assert info["qid"] == q.qid
        np.testing.assert_array_equal(obs, feature_matrix(q)[0])


# ----------------------------------------------------------------------------- exact rewards


def test_bor_rewards_gold_at_rank_3() -> None:
    env = _make([_query(10, [3], "g")])
    rewards, info, _ = _run(env, [CONTINUE, CONTINUE, STOP])
    assert rewards[:2] == [-STEP_COST, -STEP_COST]
    assert rewards[2] == pytest.approx(math.log2(10 / 3), rel=1e-12)
    assert info["k"] == 3
    assert info["found"] is True
    assert info["p_random"] == pytest.approx(0.3, rel=1e-12)
    assert info["terminal_reward"] == pytest.approx(math.log2(10 / 3), rel=1e-12)
    assert info["qid"] == "g"


@pytest.mark.parametrize(("kind", "terminal"), [("f1", 2 / 4), ("constant", 1.0)])
def test_other_rewards_gold_at_rank_3(kind: str, terminal: float) -> None:
    env = _make([_query(10, [3], "g")], reward=kind)
    rewards, info, _ = _run(env, [CONTINUE, CONTINUE, STOP])
    assert rewards[:2] == [-STEP_COST, -STEP_COST]
    assert rewards[2] == pytest.approx(terminal, rel=1e-15)
    assert info["k"] == 3 and info["found"] is True


@pytest.mark.parametrize("kind", REWARD_KINDS)
def test_stop_before_gold_pays_zero(kind: str) -> None:
    env = _make([_query(10, [3], "g")], reward=kind)
    rewards, info, _ = _run(env, [STOP])
    assert rewards == [0.0]
    assert info["k"] == 1 and info["found"] is False
    assert info["p_random"] == pytest.approx(0.1, rel=1e-12)
    assert info["terminal_reward"] == 0.0


def test_step_cost_is_configurable() -> None:
    env = _make([_query(10, [3], "g")], step_cost=0.005)
    rewards, _, _ = _run(env, [CONTINUE, CONTINUE, STOP])
    assert rewards[:2] == [-0.005, -0.005]
    env = _make([_query(10, [3], "g")], step_cost=0.0)
    rewards, _, _ = _run(env, [CONTINUE, STOP])
    assert rewards == [0.0, 0.0]


@pytest.mark.parametrize(("gold", "found"), [(3, False), (2, True)])
def test_depth_cap_forces_stop(gold: int, found: bool) -> None:
    """max_depth = 2: the CONTINUE that reaches depth 2 pays -step_cost and shows depth 2;
    the next step, whatever the action, ends the episode with the terminal reward at k = 2
    (so it is discounted like a voluntary STOP at k = 2)."""
    for last in (STOP, CONTINUE):
        env = _make([_query(10, [gold], "g")], max_depth=2)
        rewards, info, _ = _run(env, [CONTINUE, last, CONTINUE])
        assert len(rewards) == 2
        assert rewards[0] == -STEP_COST
        assert rewards[1] == pytest.approx(math.log2(10 / 2) if found else 0.0, rel=1e-12)
        assert info["k"] == 2 and info["found"] is found
        assert info["p_random"] == pytest.approx(0.2, rel=1e-12)


@pytest.mark.parametrize("gamma", [1.0, 0.95, 0.5])
@pytest.mark.parametrize("cap", [1, 2, 4])
def test_discounted_return_at_the_cap_equals_the_peer_objective(gamma: float, cap: int) -> None:
    """One discount convention at the cap: the env's discounted return of walking to the cap
    equals :func:`agents.peers.objective_matrix`'s "return" at the cap, which is also what
    a voluntary STOP at that depth earns (gamma^(k-1) on the terminal reward)."""
    from agents.peers import objective_matrix
    from envs import EpisodeConfig

    q = _query(10, [cap], "g")
    env = _make([q], max_depth=cap)
    rewards, info, _ = _run(env, [CONTINUE] * (cap + 2))
    assert info["k"] == cap
    ret = sum(gamma**t * r for t, r in enumerate(rewards))
    payoff, _ = objective_matrix([q], EpisodeConfig(step_cost=STEP_COST, gamma=gamma, max_depth=cap), "bor", "return")
    assert ret == pytest.approx(float(payoff[0, cap - 1]), rel=1e-12, abs=1e-12)
    voluntary, _, _ = _run(_make([q]), [CONTINUE] * (cap - 1) + [STOP])
    assert ret == pytest.approx(sum(gamma**t * r for t, r in enumerate(voluntary)), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("action", [STOP, CONTINUE])
def test_depth_cap_one(action: int) -> None:
    """max_depth = 1: every action ends the episode at k = 1. A CONTINUE that examines
    nothing costs nothing (documented behaviour: forced STOP at the cap)."""
    env = _make([_query(10, [1], "g")], max_depth=1)
    rewards, info, _ = _run(env, [action])
    assert rewards[0] == pytest.approx(math.log2(10), rel=1e-12)
    assert info["k"] == 1 and info["found"] is True


def test_full_depth_default_cap_is_n() -> None:
    env = _make([_query(5, [5], "last")])
    rewards, info, _ = _run(env, [CONTINUE] * 10)
    assert len(rewards) == 5
    assert rewards[:4] == [-STEP_COST] * 4
    # P_rand(5; 5, 1) = 1: finding the gold by showing everything is worth 0 bits
    assert rewards[4] == pytest.approx(0.0, abs=1e-15)
    assert info["k"] == 5 and info["found"] is True and info["p_random"] == 1.0


def test_multi_relevant_reward() -> None:
    """Relevant ranks [2, 5] of N = 20: STOP at 2 pays -log2 P_rand(2; 20, 2) = log2(190/37)."""
    q = _query(20, [2, 5], "two")
    assert q.n_relevant == 2
    env = _make([q])
    rewards, info, _ = _run(env, [CONTINUE, STOP])
    assert rewards[1] == pytest.approx(-math.log2(p_random(2, 20, 2)), rel=1e-12)
    assert rewards[1] == pytest.approx(math.log2(190 / 37), rel=1e-12)
    assert info["p_random"] == pytest.approx(37 / 190, rel=1e-12)


def test_truncated_run_uses_declared_n_and_r() -> None:
    """n_candidates / n_relevant larger than the list feed P_rand (truncated runs)."""
    s = np.linspace(1.0, 0.0, 10)
    q = RankedQuery(s, np.array([2]), "trunc", n_candidates=1000, n_relevant=3)
    env = _make([q])
    rewards, info, _ = _run(env, [CONTINUE, STOP])
    assert info["p_random"] == pytest.approx(p_random(2, 1000, 3), rel=1e-12)
    assert rewards[1] == pytest.approx(-math.log2(p_random(2, 1000, 3)), rel=1e-12)


def test_no_relevant_in_list_pays_zero() -> None:
    env = _make([_query(30, [], "missing")])
    rewards, info, _ = _run(env, [CONTINUE] * 40)
    assert rewards == [-STEP_COST] * 29 + [0.0]
    assert info["found"] is False and info["k"] == 30


def test_single_candidate_episode() -> None:
    for kind, want in [("bor", 0.0), ("f1", 1.0), ("constant", 1.0)]:
        env = _make([_query(1, [1], "one")], reward=kind)
        obs, _ = env.reset(seed=0)
        assert env.observation_space.contains(obs)
        rewards, info, _ = _run(env, [CONTINUE])
        assert rewards == [pytest.approx(want, abs=1e-15)]
        assert info["k"] == 1 and info["found"] is True and info["p_random"] == 1.0


# ----------------------------------------------------------------------------- observations


def test_observations_float32_and_in_space_on_every_path() -> None:
    env = _make()
    for i, q in enumerate(_queries()):
        for stop_at in range(1, q.length + 1):
            _, _, observations = _run(env, [CONTINUE] * (stop_at - 1) + [STOP], index=i)
            for obs in observations:
                assert obs.dtype == np.float32 and obs.shape == (N_FEATURES,)
                assert np.all(np.isfinite(obs))
                assert env.observation_space.contains(obs), (q.qid, stop_at, obs)


def test_observations_ignore_gold_labels() -> None:
    """Same scores, different relevant ranks / counts -> identical observations."""
    s = np.sort(np.random.default_rng(9).normal(size=15))[::-1].copy()
    a = RankedQuery(s, np.array([1]), "a")
    b = RankedQuery(s, np.array([4, 9, 12]), "b")
    c = RankedQuery(s, np.array([], dtype=np.int64), "c")
    env = _make([a, b, c])
    paths = []
    for i in range(3):
        _, _, observations = _run(env, [CONTINUE] * 20, index=i)
        paths.append(np.stack(observations))
    np.testing.assert_array_equal(paths[0], paths[1])
    np.testing.assert_array_equal(paths[0], paths[2])


def test_features_affine_invariant_bm25_vs_cosine_example() -> None:
    """A BM25-scale list and its cosine-scale image a*s + b (a > 0) look the same."""
    bm25 = np.array([14.2, 11.7, 11.7, 9.3, 4.1, 2.0, 0.0])
    cosine = 0.05 * bm25 + 0.1
    fa = feature_matrix(RankedQuery(bm25, np.array([2]), "bm25"))
    fb = feature_matrix(RankedQuery(cosine, np.array([2]), "cos"))
    np.testing.assert_array_equal(fa, fb)


def test_features_affine_invariant_random() -> None:
    """Invariance up to float rounding (bit-exact in all but ~0.05% of cases)."""
    rng = np.random.default_rng(2024)
    for _ in range(300):
        n = int(rng.integers(2, 120))
        s = np.sort(np.round(rng.gamma(2.0, 4.0, size=n), int(rng.integers(0, 4))))[::-1].copy()
        if s[0] == s[-1]:
            continue
        a = float(np.exp(rng.uniform(np.log(1e-3), np.log(1e3))))
        b = float(rng.uniform(-5.0, 5.0))
        fa = feature_matrix(RankedQuery(s, np.array([1]), "x"))
        fb = feature_matrix(RankedQuery(a * s + b, np.array([1]), "y"))
        np.testing.assert_allclose(fa, fb, rtol=0, atol=1e-6)


@st.composite
def score_lists(draw: st.DrawFn) -> np.ndarray:
    vals = draw(
        st.lists(
            st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False, allow_subnormal=False),
            min_size=1,
            max_size=80,
        )
    )
    return np.sort(np.array(vals, dtype=np.float64))[::-1].copy()


@settings(max_examples=150, deadline=None)
@given(score_lists(), st.integers(0, 10**7))
def test_features_finite_and_bounded(scores: np.ndarray, extra_n: int) -> None:
    q = RankedQuery(scores, np.array([1]), "h", n_candidates=scores.size + extra_n)
    f = feature_matrix(q)
    assert f.dtype == np.float32 and f.shape == (scores.size, N_FEATURES)
    assert np.all(np.isfinite(f))
    space = gymnasium.spaces.Box(-1.0, 1.0, shape=(N_FEATURES,), dtype=np.float32)
    assert all(space.contains(row) for row in f)
    assert np.all(f[:, 3:] >= 0.0)
    # depth features are exact
    k = np.arange(1, scores.size + 1)
    np.testing.assert_allclose(f[:, 7], k / scores.size, rtol=1e-6)
    np.testing.assert_allclose(f[:, 10], np.minimum(1, np.log2(q.n_candidates / k) / 24), rtol=1e-6)


def test_feature_matrix_max_depth_is_prefix() -> None:
    q = _query(40, [7], "p")
    full = feature_matrix(q)
    np.testing.assert_array_equal(feature_matrix(q, 5), full[:5])
    np.testing.assert_array_equal(feature_matrix(q, 100), full)
    with pytest.raises(ValueError, match="'p'"):
        feature_matrix(q, 0)


@pytest.mark.parametrize("value", [0.0, 0.1, 0.7, 1 / 3, 7.7, -2.5])
@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 100])
def test_constant_scores_features_finite_and_in_bounds(value: float, n: int) -> None:
    f = feature_matrix(RankedQuery(np.full(n, value), np.array([1]), "c"))
    assert np.all(np.isfinite(f))
    assert np.all(f >= -1.0) and np.all(f <= 1.0)
    # no gaps in a flat list, min-max position 1 everywhere
    np.testing.assert_array_equal(f[:, [3, 4, 5, 11, 12]], 0.0)
    np.testing.assert_array_equal(f[:, 6], 1.0)


def test_constant_scores_z_features_are_zero() -> None:
    """A flat list has no z-score spread: top_z = cur_z = next_z = 0, whatever the constant.

    BUG (envs/features.py, feature_matrix): the guard ``sd if sd > 0 else 1.0`` tests
    an exact zero, but ``np.std`` of a constant list is ~1e-17, not 0, when the
    mean rounds (e.g. np.full(3, 0.1).std() = 1.4e-17). Then z = rounding noise /
    rounding noise = +-1 and top_z, cur_z, next_z are +-0.125, with a sign that depends
    on the constant and the list length (0.1 x 3 -> -0.125, 0.1 x 7 -> +0.125), so
    a flat list's observation is not affine-invariant and differs from np.full(n, 0.0).
    """
    wrong = []
    for value in [0.0, 0.1, 1 / 3, 0.7, 7.7, -2.5]:
        for n in [2, 3, 7, 10, 100]:
            f = feature_matrix(RankedQuery(np.full(n, value), np.array([1]), "c"))
            flat = feature_matrix(RankedQuery(np.full(n, 0.0), np.array([1]), "c0"))
            if not np.array_equal(f, flat):
                wrong.append((value, n, f[0, :3].tolist()))
    assert wrong == [], f"(constant, N, [top_z, cur_z, next_z]) with non-zero z features: {wrong}"


def test_single_candidate_features() -> None:
    f = feature_matrix(RankedQuery(np.array([0.42]), np.array([1]), "one"))
    assert f.shape == (1, N_FEATURES)
    assert np.all(np.isfinite(f)) and np.all(np.abs(f) <= 1.0)
    assert f[0, 7] == 1.0 and f[0, 8] == 1.0  # depth 1 of 1
    assert f[0, 10] == 0.0  # log2(N / k) = 0


# ----------------------------------------------------------------------------- RankedQuery


@pytest.mark.parametrize(
    ("scores", "relevant"),
    [
        ([3.0, float("nan"), 1.0], [1]),
        ([3.0, 2.0, float("inf")], [1]),
        ([1.0, 2.0, 0.5], [1]),  # unsorted
        ([], []),  # empty
        ([3.0, 2.0, 1.0], [0]),  # rank 0 (ranks are 1-based)
        ([3.0, 2.0, 1.0], [4]),  # rank > len
        ([3.0, 2.0, 1.0], [2, 2]),  # duplicates
        ([3.0, 2.0, 1.0], [1.5]),  # non-integer rank
        ([[3.0, 2.0]], [1]),  # not 1-D
    ],
)
def test_ranked_query_rejects_bad_input(scores: list, relevant: list) -> None:
    with pytest.raises(ValueError, match="'bad-q'"):
        RankedQuery(np.array(scores, dtype=np.float64), np.array(relevant), "bad-q")


def test_ranked_query_rejects_inconsistent_n_and_r() -> None:
    s = np.array([3.0, 2.0, 1.0])
    with pytest.raises(ValueError, match="'bad-q'"):
        RankedQuery(s, np.array([1]), "bad-q", n_candidates=2)
    with pytest.raises(ValueError, match="'bad-q'"):
        RankedQuery(s, np.array([1, 2]), "bad-q", n_relevant=1)
    with pytest.raises(ValueError, match="'bad-q'"):
        RankedQuery(s, np.array([1]), "bad-q", n_relevant=4)


def test_ranked_query_normalises_and_freezes() -> None:
    q = RankedQuery(np.array([3, 2, 2, 1]), np.array([3, 1]), "ok")
    assert q.scores.dtype == np.float64
    np.testing.assert_array_equal(q.relevant_ranks, [1, 3])
    assert q.gold_rank == 1 and q.length == 4 and q.n_candidates == 4 and q.n_relevant == 2
    with pytest.raises(ValueError):
        q.scores[0] = 9.0
    np.testing.assert_array_equal(q.found_at([1, 2, 4]), [True, True, True])
    empty = RankedQuery(np.array([1.0, 0.0]), np.array([], dtype=np.int64), "none")
    assert empty.gold_rank == 0 and not empty.found_at(2)


def test_from_scores_breaks_ties_by_candidate_position() -> None:
    scores = [0.5, 0.9, 0.5, 0.9, 0.1, 0.5]
    q, order = RankedQuery.from_scores(scores, relevant=[2, 4], qid="ties")
    np.testing.assert_array_equal(order, [1, 3, 0, 2, 5, 4])
    np.testing.assert_array_equal(q.scores, [0.9, 0.9, 0.5, 0.5, 0.5, 0.1])
    # candidate 2 is the second of the three 0.5 ties -> rank 4; candidate 4 is last -> rank 6
    np.testing.assert_array_equal(q.relevant_ranks, [4, 6])
    assert q.qid == "ties" and q.n_candidates == 6
    np.testing.assert_array_equal(np.asarray(scores)[order], q.scores)


def test_from_scores_round_trip_and_errors() -> None:
    rng = np.random.default_rng(3)
    scores = rng.integers(0, 5, size=50).astype(float)  # many ties
    q, order = RankedQuery.from_scores(scores, [7], "rt")
    assert sorted(order.tolist()) == list(range(50))
    assert order[q.gold_rank - 1] == 7
    ranked = np.asarray(scores)[order]
    for score in np.unique(ranked):  # within a tie, candidates keep their order
        assert np.all(np.diff(order[ranked == score]) > 0)
    with pytest.raises(ValueError, match="'rt'"):
        RankedQuery.from_scores([1.0, float("nan")], [0], "rt")
    with pytest.raises(ValueError, match="'rt'"):
        RankedQuery.from_scores([1.0, 2.0], [2], "rt")
    with pytest.raises(ValueError, match="'rt'"):
        RankedQuery.from_scores([], [], "rt")


# ----------------------------------------------------------------------------- env errors


@pytest.mark.parametrize(
    "kwargs",
    [
        {"max_depth": 0},
        {"max_depth": -3},
        {"max_depth": 11},  # > N of the only query
        {"reward": "bits"},
        {"step_cost": -0.01},
        {"step_cost": float("nan")},
    ],
)
def test_env_rejects_bad_config(kwargs: dict) -> None:
    with pytest.raises(ValueError):
        _make([_query(10, [3], "g")], **kwargs)


def test_env_rejects_max_depth_beyond_a_query() -> None:
    with pytest.raises(ValueError, match="'short'"):
        _make([_query(10, [3], "long"), _query(4, [1], "short")], max_depth=5)


def test_env_rejects_empty_query_list() -> None:
    with pytest.raises(ValueError):
        _make([])


@pytest.mark.parametrize("index", [-1, 7, 100])
def test_reset_index_out_of_range(index: int) -> None:
    env = _make()
    with pytest.raises((IndexError, ValueError)):
        env.reset(options={"index": index})


@pytest.mark.parametrize("action", [2, -1, 5])
def test_invalid_action(action: int) -> None:
    env = _make()
    env.reset(seed=0, options={"index": 0})
    with pytest.raises(ValueError):
        env.step(action)
    env.unwrapped.reset(seed=0, options={"index": 0})
    with pytest.raises(ValueError):
        env.unwrapped.step(action)


def test_exploring_starts_draw_the_start_depth_and_default_starts_at_one() -> None:
    """``exploring_starts=1``: every reset starts at a depth drawn uniformly from 1..cap (seeded,
    shown in ``info["k"]``, observation of that depth); 0 (the default) always starts at 1;
    values outside [0, 1] are refused."""
    q = _query(6, [2], "g")
    env = ShortlistEnv([q], exploring_starts=1.0)
    env.reset(seed=11)
    ks = [env.reset()[1]["k"] for _ in range(600)]
    assert set(ks) == {1, 2, 3, 4, 5, 6}
    assert abs(np.mean(ks) - 3.5) < 0.3
    obs, info = ShortlistEnv([q], exploring_starts=1.0).reset(seed=11)
    np.testing.assert_array_equal(obs, ShortlistEnv([q])._matrix(0)[info["k"] - 1])
    plain = ShortlistEnv([q])
    plain.reset(seed=11)
    assert {plain.reset()[1]["k"] for _ in range(50)} == {1}
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match="exploring_starts"):
            ShortlistEnv([q], exploring_starts=bad)


def test_shared_tables_give_the_same_episodes_and_refuse_other_queries() -> None:
    """Environments of a vectorised learner share one set of per-query tables: the same observations and
    rewards as environments that build their own, and sharing between different query lists is refused."""
    rng = np.random.default_rng(0)
    qs = [RankedQuery(np.sort(rng.random(12))[::-1].copy(), [int(rng.integers(1, 12))], f"q{i}") for i in range(6)]
    own, first, shared = (ShortlistEnv(qs, EpisodeConfig(step_cost=0.02)) for _ in range(3))
    shared.share_tables(first)
    for env in (own, shared):
        env.reset(seed=3)
    for _ in range(40):
        a, b = own.step(1), shared.step(1)
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1:4] == b[1:4]
        if a[2]:
            own.reset()
            shared.reset()
    assert shared._cache is first._cache and len(first._cache) > 0
    with pytest.raises(ValueError, match="differ"):
        ShortlistEnv(qs[:3]).share_tables(first)
    with pytest.raises(ValueError, match="differ"):
        ShortlistEnv(qs, EpisodeConfig(step_cost=0.5)).share_tables(first)
