"""Limits: the hindsight oracle is a ceiling, and the exact DP equals brute force where
brute force is possible (every stationary policy of a small model; every fixed K when the
state carries no information)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from agents import FixedK, TabularConfig, TabularQ, evaluate, registry
from agents.base import row_depths, stacked_features
from agents.oracle import (
    HindsightOracle,
    OptimalStopping,
    StoppingModel,
    evaluate_stopping_policy,
    solve_stopping,
    stopping_rows,
)
from agents.peers import objective_matrix
from agents.tabular import discretise
from envs import EpisodeConfig, RankedQuery


def rq(scores, gold: int, qid: str) -> RankedQuery:
    return RankedQuery(np.asarray(scores, dtype=float), [gold] if gold else [], qid)


def test_oracle_stops_at_gold_within_cap_else_one() -> None:
    qs = [rq([3, 2, 1, 0], 3, "a"), rq([3, 2, 1, 0], 4, "b"), rq([3, 2, 1, 0], 0, "c"), rq([1.0], 1, "d")]
    # "b": the gold is the whole list (K = N = 4) and pays log2(4/4) = 0 minus its steps: depth 1 earns more
    np.testing.assert_array_equal(HindsightOracle().depths(qs, EpisodeConfig()), [3, 1, 1, 1])
    np.testing.assert_array_equal(HindsightOracle().depths(qs[:3], EpisodeConfig(max_depth=3)), [3, 1, 1])
    assert registry.make("oracle", "bor").name == "oracle"


@pytest.fixture(scope="module")
def bfcl(tmp_path_factory: pytest.TempPathFactory):
    from experiments.runner import get_condition

    return get_condition("bfcl", "bm25", "", 0, None, str(tmp_path_factory.mktemp("scores")))


def test_oracle_reward_is_a_ceiling_on_a_condition(bfcl) -> None:
    """Per query, no policy (learned, heuristic, DP, fixed) earns more than the oracle."""
    from agents.choppy import ChoppyConfig, CutoffModel

    cfg = EpisodeConfig(step_cost=0.005, max_depth=50)
    oracle = evaluate(HindsightOracle(), bfcl.test, cfg)["reward"].to_numpy()
    cheap = [
        k
        for k, kind in registry.KINDS.items()
        if kind.group in ("peer", "limit") and kind.applies_to("bfcl") and k not in ("choppy", "oracle")
    ]
    assert {"gap", "threshold", "dp"} <= set(cheap)
    policies = [registry.make(k, "bor") for k in cheap]
    policies += [
        CutoffModel("bor", ChoppyConfig(epochs=30)),
        TabularQ("bor", TabularConfig(episodes=500)),
        *(FixedK(k) for k in (1, 3, 10, 50)),
    ]
    for pol in policies:
        pol.fit(bfcl.train, cfg, 0)
        reward = evaluate(pol, bfcl.test, cfg)["reward"].to_numpy()
        assert np.all(oracle >= reward - 1e-12), pol.name
        assert oracle.mean() >= reward.mean()


# ----------------------------------------------------------------------------- DP vs brute force


def random_model(
    seed: int, n_queries: int = 6, length: int = 8, n_stages: int = 3, per_stage: int = 3
) -> StoppingModel:
    """Trajectories whose stage never decreases and whose states recur inside a stage."""
    rng = np.random.default_rng(seed)
    cols: dict[str, list] = {k: [] for k in ("state", "stop", "next_state", "next_stop")}
    start, start_stop = [], []
    for _ in range(n_queries):
        cap = int(rng.integers(1, length + 1))
        stage = np.sort(rng.integers(0, n_stages, cap))
        states = stage * per_stage + rng.integers(0, per_stage, cap)
        pay = np.where(rng.random(cap) < 0.3, 0.0, rng.random(cap) * 5)
        start.append(int(states[0]) if cap > 1 else -1)
        start_stop.append(float(pay[0]))
        for k in range(cap - 1):
            cols["state"].append(states[k])
            cols["stop"].append(pay[k])
            cols["next_state"].append(states[k + 1] if k + 2 < cap else -1)
            cols["next_stop"].append(pay[k + 1])
    return StoppingModel(
        np.array(cols["state"], dtype=np.int64),
        np.array(cols["stop"]),
        np.array(cols["next_state"], dtype=np.int64),
        np.array(cols["next_stop"]),
        np.arange(n_stages * per_stage) // per_stage,
        np.array(start),
        np.array(start_stop),
    )


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("gamma, cost", [(1.0, 0.0), (0.9, 0.05)])
def test_dp_equals_brute_force_over_every_stationary_policy(seed: int, gamma: float, cost: float) -> None:
    model = random_model(seed)
    seen = np.flatnonzero(model.seen)
    assert 0 < seen.size <= 9
    stop, value, q = solve_stopping(model, gamma, cost)
    dp_value = evaluate_stopping_policy(model, stop, gamma, cost)[1]
    # the DP's own values are the values of its policy
    v_pol, _ = evaluate_stopping_policy(model, stop, gamma, cost)
    np.testing.assert_allclose(v_pol[seen], value[seen], rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(value[seen], np.maximum(q[seen, 0], q[seen, 1]), rtol=1e-10, atol=1e-10)
    best = -np.inf
    for bits in itertools.product([False, True], repeat=seen.size):
        trial = np.ones(model.n_states, dtype=bool)
        trial[seen] = bits
        v, start_value = evaluate_stopping_policy(model, trial, gamma, cost)
        best = max(best, start_value)
        # optimality holds state by state, not only from the start
        assert np.all(v[seen] <= value[seen] + 1e-9)
    assert dp_value == pytest.approx(best, rel=1e-10, abs=1e-10)


def test_stage_must_not_decrease() -> None:
    with pytest.raises(ValueError, match="stage"):
        StoppingModel(
            np.array([1]),
            np.array([0.0]),
            np.array([0]),
            np.array([0.0]),
            np.array([0, 1]),
            np.array([1]),
            np.array([0.0]),
        )


def _same_list_queries(golds: list[int], n: int = 12) -> list[RankedQuery]:
    s = np.linspace(1.0, 0.0, n) ** 2
    return [RankedQuery(s.copy(), [g] if g else [], f"q{i}") for i, g in enumerate(golds)]


@pytest.mark.parametrize(
    "objective, cfg", [("reward", EpisodeConfig()), ("return", EpisodeConfig(step_cost=0.2, gamma=0.9))]
)
def test_dp_is_best_fixed_k_when_the_state_carries_no_information(objective: str, cfg: EpisodeConfig) -> None:
    """Every query has the same score list, so a stationary policy is a fixed depth: brute force over K."""
    qs = _same_list_queries([1, 2, 2, 3, 5, 8, 11, 0, 2, 4])
    dp = OptimalStopping("bor", objective).fit(qs, cfg, 0)
    pay, _ = objective_matrix(qs, cfg, "bor", objective)
    per_k = pay.mean(axis=0)
    k = dp.depths(qs, cfg)
    assert len(set(k.tolist())) == 1
    assert per_k[k[0] - 1] == pytest.approx(per_k.max(), rel=1e-12)
    # the model is exact here: its value is the realised training value
    assert dp.model_value == pytest.approx(dp.train_value, rel=1e-12)
    assert dp.train_value == pytest.approx(per_k.max(), rel=1e-12)


def test_dp_is_exact_when_no_two_rows_share_a_state() -> None:
    """One query: the model is its own trajectory, so DP stops at the depth of the best payoff (the gold)."""
    for gold in (1, 3, 6, 10):
        qs = _same_list_queries([gold])
        dp = OptimalStopping("bor").fit(qs, EpisodeConfig(), 0)
        assert dp.depths(qs, EpisodeConfig()).item() == gold


def test_dp_beats_the_tabular_agent_in_the_model(bfcl) -> None:
    cfg = EpisodeConfig(step_cost=0.005, max_depth=60)
    train = bfcl.train
    dp = OptimalStopping("bor", "return").fit(train, cfg, 0)
    tab = TabularQ("bor", TabularConfig(episodes=3000)).fit(train, cfg, seed=1)
    model = stopping_rows(train, cfg, "bor", "return")
    states = np.arange(dp.stop.size)
    v = tab.values(states)
    _, tab_value = evaluate_stopping_policy(model, v[:, 1] <= v[:, 0], cfg.gamma, cfg.step_cost)
    assert tab_value <= dp.model_value + 1e-9
    # and the solve is fast
    assert dp.solve_seconds < 1.0


def test_dp_names_backoff_and_round_trip(tmp_path, bfcl) -> None:
    assert registry.make("dp", "bor").name == "bor-dp"
    assert registry.make("dp", "bor", registry.parse_settings(["dp.objective=return"])["dp"]).name == "bor-dp-mdp"
    cfg = EpisodeConfig(max_depth=30)
    dp = OptimalStopping("bor").fit(bfcl.train, cfg, 0)
    dp.save(tmp_path / "agent.json")
    back = OptimalStopping.load(tmp_path / "agent.json")
    np.testing.assert_array_equal(back.depths(bfcl.test, cfg), dp.depths(bfcl.test, cfg))
    # unseen fine states follow the depth-bin policy
    feats, offsets = stacked_features(bfcl.test, cfg)
    st = discretise(feats, row_depths(offsets))
    unseen = ~dp.seen[st]
    if unseen.any():
        from agents.tabular import depth_bin

        np.testing.assert_array_equal(dp.stop_rule(st[unseen]), dp.coarse_stop[depth_bin(st[unseen])])
    (tmp_path / "bad.json").write_text('{"params": {}}')
    with pytest.raises(ValueError, match="malformed"):
        OptimalStopping.load(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="objective"):
        OptimalStopping("bor", "nope")
