"""Depth policies: the shared protocol, learning sanity on toy problems with a known optimum,
determinism and save/load."""

from __future__ import annotations

import numpy as np
import pytest

from agents import DepthPolicy, DQNAgent, DQNConfig, FixedK, TabularConfig, TabularQ, evaluate, first_stop
from agents.base import row_depths
from envs import EpisodeConfig, RankedQuery


def toy_queries(gold_rank: int, n: int = 20, count: int = 40, seed: int = 0) -> list[RankedQuery]:
    """Queries whose gold item always sits at ``gold_rank`` (scores with noise, no label leak)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        s = np.sort(rng.random(n))[::-1].copy()
        out.append(RankedQuery(s, [gold_rank], f"q{i}"))
    return out


def test_fixed_k_clips_to_cap_and_follows_protocol() -> None:
    qs = toy_queries(1, n=5, count=3)
    pol = FixedK(10)
    assert isinstance(pol, DepthPolicy)
    np.testing.assert_array_equal(pol.depths(qs, EpisodeConfig()), [5, 5, 5])
    np.testing.assert_array_equal(pol.depths(qs, EpisodeConfig(max_depth=2)), [2, 2, 2])
    with pytest.raises(ValueError, match="fixed K"):
        FixedK(0)


def test_first_stop_and_row_depths() -> None:
    offsets = np.array([0, 3, 5, 9])
    np.testing.assert_array_equal(row_depths(offsets), [1, 2, 3, 1, 2, 1, 2, 3, 4])
    stop = np.array([False, True, False, False, False, False, False, True, True])
    # query 0 stops at 2; query 1 never stops -> cap 2; query 2 stops at 3
    np.testing.assert_array_equal(first_stop(stop, offsets), [2, 2, 3])


@pytest.mark.parametrize("gold_rank", [1, 4])
def test_tabular_learns_known_optimum(gold_rank: int) -> None:
    train = toy_queries(gold_rank, seed=1)
    test = toy_queries(gold_rank, seed=2)
    cfg = EpisodeConfig(reward="bor", step_cost=0.01, gamma=0.95)
    agent = TabularQ("bor", TabularConfig(episodes=4000)).fit(train, cfg, seed=0)
    np.testing.assert_array_equal(agent.depths(test, cfg), np.full(len(test), gold_rank))


@pytest.mark.parametrize("gold_rank", [1, 4])
def test_dqn_learns_known_optimum(gold_rank: int) -> None:
    train = toy_queries(gold_rank, seed=1)
    test = toy_queries(gold_rank, seed=2)
    cfg = EpisodeConfig(reward="bor", step_cost=0.01, gamma=0.95)
    settings = DQNConfig(total_timesteps=20_000, learning_starts=500, exploration_fraction=0.5)
    agent = DQNAgent("bor", settings).fit(train, cfg, seed=0)
    depths = agent.depths(test, cfg)
    assert np.mean(depths == gold_rank) >= 0.95, depths


def test_f1_reward_stays_shallow_where_bor_goes_deep() -> None:
    """Gold always at rank 6 of N=400, step cost 0.1, gamma 0.95. Going to depth 6 pays
    BoR 0.95^5 log2(400/6) - costs = 4.69 - 0.45 > 0, but F1 0.95^5 * 2/7 - 0.45 < 0:
    the optimum is depth 6 for BoR and depth 1 for F1."""
    train = toy_queries(6, n=400, seed=3)
    cfg_bor = EpisodeConfig(reward="bor", step_cost=0.1, gamma=0.95)
    cfg_f1 = EpisodeConfig(reward="f1", step_cost=0.1, gamma=0.95)
    bor = TabularQ("bor", TabularConfig(episodes=10_000)).fit(train, cfg_bor, seed=0)
    f1 = TabularQ("f1", TabularConfig(episodes=10_000)).fit(train, cfg_f1, seed=0)
    np.testing.assert_array_equal(bor.depths(train, cfg_bor), 6)
    np.testing.assert_array_equal(f1.depths(train, cfg_f1), 1)


def test_tabular_is_deterministic_and_round_trips(tmp_path) -> None:
    qs = toy_queries(3, seed=4)
    cfg = EpisodeConfig()
    a = TabularQ("bor", TabularConfig(episodes=1500)).fit(qs, cfg, seed=7)
    b = TabularQ("bor", TabularConfig(episodes=1500)).fit(qs, cfg, seed=7)
    np.testing.assert_array_equal(a.q, b.q)
    a.save(tmp_path / "agent.json")
    c = TabularQ.load(tmp_path / "agent.json")
    np.testing.assert_array_equal(a.depths(qs, cfg), c.depths(qs, cfg))
    (tmp_path / "bad.json").write_text('{"reward": "bor", "settings": {}, "q": [[1, 2]], "q_coarse": [], "tried": []}')
    with pytest.raises(ValueError, match="Q-table"):
        TabularQ.load(tmp_path / "bad.json")


def test_dqn_same_seed_same_depths_and_round_trip(tmp_path) -> None:
    qs = toy_queries(2, seed=5)
    cfg = EpisodeConfig()
    settings = DQNConfig(total_timesteps=1500, learning_starts=200)
    a = DQNAgent("bor", settings).fit(qs, cfg, seed=11)
    b = DQNAgent("bor", settings).fit(qs, cfg, seed=11)
    feats = np.random.default_rng(0).random((50, 13)).astype(np.float32)
    np.testing.assert_allclose(a.q_values(feats), b.q_values(feats), rtol=0, atol=0)
    a.save(tmp_path / "agent.zip")
    c = DQNAgent.load(tmp_path / "agent.zip", "bor", settings)
    np.testing.assert_array_equal(a.depths(qs, cfg), c.depths(qs, cfg))


def test_evaluator_rows_and_bad_depths() -> None:
    qs = [RankedQuery(np.linspace(1, 0, 10), [3], "a"), RankedQuery(np.linspace(1, 0, 10), [1], "b")]
    rows = evaluate(FixedK(2), qs, EpisodeConfig())
    assert rows["found"].tolist() == [0, 1]
    assert rows["bucket"].tolist() == ["medium", "easy"]
    np.testing.assert_allclose(rows["p_random"], [0.2, 0.2])
    np.testing.assert_allclose(rows["reward"], [0.0, np.log2(5)])

    class Broken(FixedK):
        def depths(self, queries, config):  # type: ignore[override]
            return np.array([0, 1])

    with pytest.raises(ValueError, match="outside"):
        evaluate(Broken(1), qs, EpisodeConfig())


def test_exploring_starts_settings_are_checked_and_default_training_is_unchanged() -> None:
    """Exploring starts are off by default for tabular Q (its validation runs showed no gain), and
    an explicit 0 trains exactly the default table (the extra random draws happen only when used);
    DQN and tabular settings outside [0, 1] are refused."""
    qs = toy_queries(3, seed=4)
    cfg = EpisodeConfig()
    a = TabularQ("bor", TabularConfig(episodes=1500)).fit(qs, cfg, seed=7)
    b = TabularQ("bor", TabularConfig(episodes=1500, exploring_starts=0.0)).fit(qs, cfg, seed=7)
    np.testing.assert_array_equal(a.q, b.q)
    c = TabularQ("bor", TabularConfig(episodes=1500, exploring_starts=0.5)).fit(qs, cfg, seed=7)
    d = TabularQ("bor", TabularConfig(episodes=1500, exploring_starts=0.5)).fit(qs, cfg, seed=7)
    np.testing.assert_array_equal(c.q, d.q)
    assert not np.array_equal(a.q, c.q)
    with pytest.raises(ValueError, match="exploring_starts"):
        TabularConfig(exploring_starts=1.5)
    with pytest.raises(ValueError, match="exploring_starts"):
        DQNConfig(exploring_starts=-0.1)
    with pytest.raises(ValueError, match="n_envs"):
        DQNConfig(n_envs=0)


def test_dqn_with_several_environments_and_exploring_starts_learns_the_optimum() -> None:
    """Four vectorised environments with exploring starts (the defaults' kind of training) still
    find the known optimum depth of the toy task."""
    train, test = toy_queries(4, seed=1), toy_queries(4, seed=2)
    cfg = EpisodeConfig(reward="bor", step_cost=0.01, gamma=0.95)
    settings = DQNConfig(
        total_timesteps=20_000, learning_starts=500, exploration_fraction=0.5, n_envs=4, exploring_starts=0.5
    )
    depths = DQNAgent("bor", settings).fit(train, cfg, seed=0).depths(test, cfg)
    assert np.mean(depths == 4) >= 0.95, depths


@pytest.mark.parametrize("double_q", [False, True])
def test_dqn_n_step_and_double_q_targets_learn_the_optimum(double_q: bool) -> None:
    """n-step returns (SB3's NStepReplayBuffer, the default n = 4) with and without Double-DQN
    targets still find the known optimum depth of the toy task."""
    train, test = toy_queries(4, seed=1), toy_queries(4, seed=2)
    cfg = EpisodeConfig(reward="bor", step_cost=0.01, gamma=0.95)
    settings = DQNConfig(
        total_timesteps=20_000, learning_starts=500, exploration_fraction=0.5, n_steps=4, double_q=double_q
    )
    agent = DQNAgent("bor", settings).fit(train, cfg, seed=0)
    assert getattr(type(agent.model), "double", False) is double_q
    assert type(agent.model.replay_buffer).__name__ == "NStepReplayBuffer"
    depths = agent.depths(test, cfg)
    assert np.mean(depths == 4) >= 0.95, depths


@pytest.mark.parametrize("n_steps", [2, 4, 50])
def test_tabular_n_step_targets_learn_the_optimum(n_steps: int) -> None:
    """n-step Q-learning (n = 50 exceeds every episode: Monte-Carlo targets) finds the known optimum."""
    train, test = toy_queries(4, seed=1), toy_queries(4, seed=2)
    cfg = EpisodeConfig(reward="bor", step_cost=0.01, gamma=0.95)
    agent = TabularQ("bor", TabularConfig(episodes=4000, n_steps=n_steps)).fit(train, cfg, seed=0)
    np.testing.assert_array_equal(agent.depths(test, cfg), 4)


def test_n_step_settings_are_checked_and_one_step_is_the_old_rule() -> None:
    qs = toy_queries(3, seed=4)
    cfg = EpisodeConfig()
    a = TabularQ("bor", TabularConfig(episodes=1500)).fit(qs, cfg, seed=7)
    b = TabularQ("bor", TabularConfig(episodes=1500, n_steps=1)).fit(qs, cfg, seed=7)
    np.testing.assert_array_equal(a.q, b.q)
    c = TabularQ("bor", TabularConfig(episodes=1500, n_steps=3)).fit(qs, cfg, seed=7)
    assert not np.array_equal(a.q, c.q)
    with pytest.raises(ValueError, match="n_steps"):
        TabularConfig(n_steps=0)
    with pytest.raises(ValueError, match="n_steps"):
        DQNConfig(n_steps=0)


def test_summary_bor_bits_are_nan_not_inf_when_nothing_is_found() -> None:
    """BoR bits have no finite value when no query is found (log2 0): the summary holds NaN, never -inf,
    so its CSV reads back as numbers anywhere; found_pct says what happened."""
    import math

    from agents.evaluation import score_depths_multi, summary_row, summary_row_multi

    qs = [RankedQuery(np.linspace(1.0, 0.0, 10), [5, 7], f"q{i}") for i in range(3)]
    rows = score_depths_multi(qs, np.array([1, 2, 3]))
    assert rows["found"].sum() == 0 and rows["complete"].sum() == 0
    for s in (summary_row(rows), summary_row_multi(rows)):
        assert s["found_pct"] == 0.0 and math.isnan(s["bor_bits"])
        assert all(not (isinstance(v, float) and math.isinf(v)) for v in s.values())
    assert math.isnan(summary_row_multi(rows)["bor_bits_all"])
    found = score_depths_multi(qs, np.array([5, 7, 10]))
    assert summary_row_multi(found)["bor_bits"] == pytest.approx(math.log2(1 / np.mean(found["p_random"])))
