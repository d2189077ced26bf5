"""The break-even depth: the bound that keeps every learned policy off the whole list."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from agents.cutoff import CutoffConfig, ExpectedRewardCutoff
from agents.dqn import DQNAgent, DQNConfig
from agents.evaluation import depth_spread, evaluate, score_depths, summary_row
from agents.tabular import TabularConfig, TabularQ
from envs import EpisodeConfig, RankedQuery, ShortlistEnv
from rewards import REWARD_KINDS, break_even_depth, terminal_reward


def brute_force(kind: str, n: int, c: float) -> int:
    ks = np.arange(1, n + 1)
    net = np.asarray(terminal_reward(kind, np.ones(n, bool), ks, n, 1), dtype=np.float64) - c * (ks - 1)
    paying = np.flatnonzero(net > 0)
    return int(paying[-1] + 1) if paying.size else 1


@pytest.mark.parametrize("kind", REWARD_KINDS)
@pytest.mark.parametrize("n", [1, 2, 3, 20, 50, 100, 370, 1000])
@pytest.mark.parametrize("c", [0.0, 0.005, 0.01, 0.05, 2.0])
def test_matches_brute_force(kind: str, n: int, c: float) -> None:
    assert break_even_depth(kind, n, c) == brute_force(kind, n, c)


@pytest.mark.parametrize("n", [2, 20, 100, 370])
@pytest.mark.parametrize("c", [0.001, 0.01])
def test_bor_excludes_whole_list_and_deeper_depths_are_dominated(n: int, c: float) -> None:
    """Under BoR with a step cost the whole list lies beyond the break-even depth, and every deeper
    STOP earns <= 0 for every gold position (and R), less than K = 1 earns (>= 0)."""
    kstar = break_even_depth("bor", n, c)
    assert kstar < n
    for r in (1, 2):
        for gold in range(1, n + 1):
            ks = np.arange(kstar + 1, n + 1)
            net = np.asarray(terminal_reward("bor", ks >= gold, ks, n, r), dtype=np.float64) - c * (ks - 1)
            assert np.all(net <= 0)
            assert float(terminal_reward("bor", gold <= 1, 1, n, r)) >= 0
    assert break_even_depth("bor", n, 0.0) == n - 1  # no cost: K = N only ties K = N - 1


@pytest.mark.parametrize(
    "args",
    [("nope", 10, 0.01), ("bor", 0, 0.01), ("bor", 2.5, 0.01), ("bor", 10, -0.1), ("bor", 10, float("nan"))],
)
def test_bad_input_is_refused(args: tuple) -> None:
    with pytest.raises(ValueError):
        break_even_depth(*args)


def constant_queries(n: int = 50, count: int = 30) -> list[RankedQuery]:
    """Lists that tie from top to bottom (BM25 with no term overlap): the runaway's worst case."""
    return [RankedQuery(np.zeros(n), [1 + (7 * i) % n], f"q{i}") for i in range(count)]


def test_episode_cap_and_environment_honour_break_even() -> None:
    q = constant_queries(n=50, count=1)[0]
    kstar = break_even_depth("bor", 50, 0.01)
    assert EpisodeConfig().cap(q) == 50
    assert EpisodeConfig(break_even=True).cap(q) == kstar
    assert EpisodeConfig(break_even=True, max_depth=5).cap(q) == 5
    env = ShortlistEnv([q], EpisodeConfig(break_even=True))
    env.reset(seed=0)
    done, steps, info = False, 0, {}
    while not done:
        _, _, done, _, info = env.step(1)  # always CONTINUE
        steps += 1
    assert info["k"] == kstar


def test_tabular_that_always_continues_stops_at_break_even() -> None:
    qs = constant_queries()
    cfg = EpisodeConfig()
    agent = TabularQ("bor", TabularConfig(episodes=50))
    agent.q[:, 1] = 1.0  # CONTINUE valued above STOP everywhere: the runaway
    agent.q_coarse[:, 1] = 1.0
    agent.tried[:] = True
    np.testing.assert_array_equal(agent.depths(qs, cfg), break_even_depth("bor", 50, 0.01))
    unbounded = TabularQ("bor", TabularConfig(episodes=50, break_even=False))
    unbounded.q, unbounded.q_coarse, unbounded.tried = agent.q, agent.q_coarse, agent.tried
    np.testing.assert_array_equal(unbounded.depths(qs, cfg), 50)


def test_dqn_that_always_continues_stops_at_break_even() -> None:
    qs = constant_queries()
    agent = DQNAgent("bor", DQNConfig())
    import torch

    always_continue = lambda feats: torch.tensor([[0.0, 1.0]]).repeat(len(feats), 1)  # noqa: E731
    agent.model = SimpleNamespace(observation_space=SimpleNamespace(shape=(13,)), q_net=always_continue)
    agent.observation = "score"  # the set a fitted agent records (13 score features)
    rows = evaluate(agent, qs, EpisodeConfig(), "default")
    kstar = break_even_depth("bor", 50, 0.01)
    np.testing.assert_array_equal(rows["k"], kstar)
    assert summary_row(rows)["whole_list_pct"] == 0.0
    assert summary_row(rows)["break_even_pct"] == 100.0


@pytest.mark.parametrize("kind", ["tabular", "dqn", "cutoff"])
def test_trained_agents_on_tied_lists_never_show_the_whole_list(kind: str) -> None:
    qs = constant_queries(n=40, count=40)
    cfg = EpisodeConfig()
    agent = {
        "tabular": lambda: TabularQ("bor", TabularConfig(episodes=2_000)),
        "dqn": lambda: DQNAgent("bor", DQNConfig(total_timesteps=3_000, learning_starts=200, n_envs=1)),
        "cutoff": lambda: ExpectedRewardCutoff("bor", CutoffConfig(epochs=50)),
    }[kind]()
    agent.fit(qs, cfg, 0)
    k = agent.depths(qs, cfg)
    assert k.max() <= break_even_depth("bor", 40, 0.01) < 40


def test_score_rows_carry_break_even_and_spread_counts_it() -> None:
    qs = constant_queries(n=100, count=4)
    kstar = break_even_depth("bor", 100, 0.01)
    rows = score_depths(qs, np.array([1, kstar - 1, kstar, 100]), step_cost=0.01)
    np.testing.assert_array_equal(rows["break_even"], kstar)
    assert "break_even" not in score_depths(qs, np.array([1, 1, 1, 1])).columns
    spread = depth_spread(rows["k"], rows["n"], rows["break_even"])
    assert spread["break_even_pct"] == 50.0 and spread["whole_list_pct"] == 25.0
    assert "break_even_pct" not in depth_spread(rows["k"], rows["n"])
    assert np.all(rows.loc[rows["k"] > kstar, "reward_net"] <= 0) and rows["reward_net"].iloc[2] > 0
