"""The paper's strict, examined-items-only observation set: what it reads, its ranges, and every
learner that can use it."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import stepped_lists

from agents import registry
from agents.choppy import ChoppyConfig, CutoffModel
from agents.cutoff import CutoffConfig, ExpectedRewardCutoff
from agents.dqn import DQNAgent, DQNConfig
from agents.method import MethodSpec, method_group
from agents.pfound import PFoundStop
from agents.tabular import TabularConfig, TabularQ
from envs import EpisodeConfig, RankedQuery, ShortlistEnv
from envs.features import OBSERVATIONS, feature_matrix, observation_of, observation_width
from experiments.options import LearnArgs
from experiments.plan import cells_for, resolve_plans

STRICT = len(OBSERVATIONS["strict"])
RANGES = {
    "ex_top_z": (0, 1),
    "ex_cur_z": (-1, 0),
    "ex_gap_top_cur": (0, 1),
    "ex_cur_over_top": (-1, 1),
    "ex_last_drop_rel": (0, 1),
    "ex_last_drop_top": (0, 1),
    "ex_spread": (0, 1),
    "ex_tie_run": (0, 1),
    "depth_frac": (0, 1),
    "log_depth": (0, 1),
    "log_n": (0, 1),
    "ceiling": (0, 1),
}


def lists(seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    out = [np.sort(rng.random(40))[::-1], np.sort(rng.normal(size=60))[::-1] * 30, np.zeros(25)]
    out.append(np.r_[np.linspace(9, 5, 6), np.full(30, 2.0)])  # a tied tail
    out.append(np.r_[1e300, 5e299, np.linspace(1e299, -1e299, 20)])  # near overflow
    out.append(np.r_[-0.1, -0.2, -0.2, -0.9])  # all negative
    return out


@pytest.mark.parametrize("i", range(6))
def test_rows_read_only_the_examined_items(i: int) -> None:
    """Changing the unexamined items k+1..L (keeping the list sorted) leaves rows 1..k as they were."""
    s = lists()[i]
    rng = np.random.default_rng(i)
    full = feature_matrix(RankedQuery(s, [1], "q"), observation="strict")
    for k in sorted({k for k in (1, 2, 5, len(s) // 2, len(s) - 1) if 1 <= k < len(s)}):
        t = s.copy()
        lo = float(t[k - 1])
        span = max(1.0, abs(lo)) if np.isfinite(lo) else 1.0
        t[k:] = np.sort(lo - rng.random(len(s) - k) * span * 0.5)[::-1]  # any values below s_k
        t[k:][0] = lo if rng.random() < 0.5 else t[k:][0]  # sometimes a tie with s_k
        changed = feature_matrix(RankedQuery(t, [1], "q"), observation="strict")
        np.testing.assert_allclose(changed[:k], full[:k], atol=1e-6, err_msg=f"list {i}, depth {k}")


def test_the_score_set_does_read_unexamined_items() -> None:
    """Control for the test above: the default set sees the next item and whole-list statistics."""
    s = lists()[0]
    t = s.copy()
    t[5:] = t[5:] * 0.5
    a = feature_matrix(RankedQuery(s, [1], "q"))
    b = feature_matrix(RankedQuery(t, [1], "q"))
    assert not np.allclose(a[:5], b[:5])


@pytest.mark.parametrize("i", range(6))
def test_bounded_and_finite(i: int) -> None:
    f = feature_matrix(RankedQuery(lists()[i], [1], "q"), observation="strict")
    assert f.shape == (len(lists()[i]), STRICT) and f.dtype == np.float32
    assert np.all(np.isfinite(f))
    for j, name in enumerate(OBSERVATIONS["strict"]):
        lo, hi = RANGES[name]
        assert f[:, j].min() >= lo - 1e-6 and f[:, j].max() <= hi + 1e-6, name


def test_known_values_on_a_small_list() -> None:
    f = feature_matrix(RankedQuery(np.array([5.0, 4.0, 4.0, 4.0, 1.0]), [1], "q"), observation="strict")
    names = OBSERVATIONS["strict"]
    col = {n: f[:, names.index(n)] for n in names}
    np.testing.assert_allclose(col["ex_cur_over_top"], [1, 0.8, 0.8, 0.8, 0.2], atol=1e-6)
    np.testing.assert_allclose(col["ex_tie_run"], [0, 0, 1 / 3, 2 / 4, 0], atol=1e-6)
    np.testing.assert_allclose(col["ex_last_drop_rel"], [0, 1, 0, 0, 1], atol=1e-6)
    np.testing.assert_allclose(col["ex_last_drop_top"], [0, 1, 0, 0, 0.75], atol=1e-6)
    assert col["ex_top_z"][0] == 0 and col["ex_cur_z"][0] == 0  # one item: no spread yet
    # depth 2: scores 5, 4 -> mean 4.5, sd 0.5: z_top = 1, z_cur = -1
    np.testing.assert_allclose([col["ex_top_z"][1], col["ex_cur_z"][1]], [1 / 8, -1 / 8], atol=1e-6)


def test_named_sets_and_their_errors() -> None:
    q = RankedQuery(np.linspace(1, 0, 10), [2], "plain")
    h = RankedQuery(np.linspace(1, 0, 10), [2], "two", aux_scores=np.linspace(0, 1, 10))
    assert observation_of(q) == "score" and observation_of(h) == "hybrid"
    assert observation_of(h, "score") == "score" and observation_of(h, "strict") == "strict"
    assert feature_matrix(h, observation="score").shape == (10, 13)
    assert observation_width([q, h], "strict") == STRICT
    with pytest.raises(ValueError, match="plain"):
        observation_of(q, "hybrid")
    with pytest.raises(ValueError, match="unknown observation"):
        observation_of(q, "nope")
    with pytest.raises(ValueError, match="unknown observation"):
        EpisodeConfig(observation="nope")
    env = ShortlistEnv([q], EpisodeConfig(observation="strict"))
    obs, _ = env.reset(seed=0)
    assert obs.shape == (STRICT,) and env.observation_space.shape == (STRICT,)
    assert env.feature_names == OBSERVATIONS["strict"]


def toy(seed: int, n: int = 20, count: int = 40) -> list[RankedQuery]:
    rng = np.random.default_rng(seed)
    return [RankedQuery(np.sort(rng.random(n))[::-1].copy(), [2], f"q{i}") for i in range(count)]


@pytest.mark.parametrize("kind", ["dqn", "tabular", "cutoff", "choppy", "pfound"])
def test_every_learner_trains_and_acts_on_the_strict_set(kind: str, tmp_path) -> None:
    cfg = EpisodeConfig(observation="strict")
    agent = {
        "dqn": lambda: DQNAgent("bor", DQNConfig(total_timesteps=600, learning_starts=100, n_envs=1)),
        "tabular": lambda: TabularQ("bor", TabularConfig(episodes=300)),
        "cutoff": lambda: ExpectedRewardCutoff("bor", CutoffConfig(epochs=20)),
        "choppy": lambda: CutoffModel("bor", ChoppyConfig(epochs=5)),
        "pfound": lambda: PFoundStop("bor", CutoffConfig(epochs=20)),
    }[kind]()
    agent.fit(toy(1), cfg, 0)
    k = agent.depths(toy(2), cfg)
    assert k.shape == (40,) and k.min() >= 1 and k.max() <= 20
    with pytest.raises(ValueError, match="features per depth"):
        agent.depths(toy(2), EpisodeConfig())  # trained on 12 features, given the 13 of "score"
    path = tmp_path / type(agent).artifact
    agent.save(path)
    again = type(agent).load(path, "bor", agent.settings)
    np.testing.assert_array_equal(again.depths(toy(2), cfg), k)


def test_cli_option_tags_the_learners_and_keeps_their_runs_apart() -> None:
    plans = resolve_plans(["bfcl-bm25"])
    auto = cells_for(plans, [42], learning=LearnArgs().learning())
    strict = cells_for(plans, [42], learning=LearnArgs(observation="strict").learning())
    assert {c.label for c in auto} == {c.method.name for c in auto}
    observing = {c.method.name for c in strict if c.method.kind.observes}
    assert {"bor-dqn", "bor-tabular", "bor-cutoff"} <= observing
    assert {c.label for c in strict} == {
        f"{m}@strict" if m in observing else m for m in (c.method.name for c in strict)
    }
    # a learner's strict run never shares a directory with its default run ...
    learners = {c.run_id for c in strict if c.method.kind.observes}
    assert learners and not learners & {c.run_id for c in auto}
    # ... while a rule on the raw scores (fixed K, gap, threshold) is the same cell under every set
    rules = [c for c in strict if not c.method.kind.observes]
    assert rules and all(c.episode.observation == "auto" for c in rules)
    same = {c.run_id: c.config_hash() for c in auto}
    assert all(same[c.run_id] == c.config_hash() for c in rules)
    assert MethodSpec.parse("bor-dqn@strict") == MethodSpec.parse("bor-dqn")
    assert method_group("bor-tabular@strict") == "agent"
    with pytest.raises(ValueError, match="--observation"):
        LearnArgs(observation="nope")


#: Small budgets for the kinds :func:`agents.registry.reads_examined_only` names on the strict set.
TINY_SETTINGS = {
    "dqn": "total_timesteps=600 learning_starts=100 n_envs=1",
    "fqi": "gradient_steps=200",
    "ppo": "total_timesteps=512 n_steps=64 n_envs=2 batch_size=64 n_epochs=1",
    "tabular": "episodes=300",
}


def below_depths(queries: list[RankedQuery], k: np.ndarray, seed: int) -> list[RankedQuery]:
    """Each query with the items below its depth ``k`` replaced by other values below s_k (kept sorted)."""
    rng = np.random.default_rng(seed)
    out = []
    for q, depth in zip(queries, k, strict=True):
        s = q.scores.copy()
        s[depth:] = np.sort(s[depth - 1] - rng.random(len(s) - depth) * 2.0)[::-1]
        out.append(RankedQuery(s, q.relevant_ranks, q.qid))
    return out


EXAMINED_ON_STRICT = [name for name, kind in registry.KINDS.items() if registry.reads_examined_only(kind, "strict")]


@pytest.mark.parametrize("name", EXAMINED_ON_STRICT)
def test_what_the_registry_calls_examined_only_reads_no_item_below_its_depth(name: str) -> None:
    """The claim behind the strict comparison's answer (its ``examined.csv``): a kind that the registry says
    decides from the examined items only on the strict set chooses the same depths when every item below them
    changes; the posterior model, which reads the whole list, does not."""
    kind = registry.KINDS[name]
    items = TINY_SETTINGS.get(name, "").split()
    policy = kind.make("bor", registry.parse_settings(items, name).get(name))
    cfg = EpisodeConfig(observation="strict")
    policy.fit(stepped_lists(1), cfg, 0)
    test = stepped_lists(2)
    k = policy.depths(test, cfg)
    assert (k < 20).any(), "a depth short of the whole list, so that items lie below it"
    np.testing.assert_array_equal(policy.depths(below_depths(test, k, 3), cfg), k)


def test_the_posterior_model_reads_below_its_depth_so_it_is_not_examined_only() -> None:
    kind = registry.KINDS["posterior"]
    assert not registry.reads_examined_only(kind, "strict") and kind.view == "list"
    rng = np.random.default_rng(5)
    train = [RankedQuery(np.sort(rng.random(20))[::-1].copy(), [int(rng.integers(1, 4))], f"q{i}") for i in range(80)]
    policy = kind.make("bor")
    cfg = EpisodeConfig(observation="strict")
    policy.fit(train, cfg, 0)
    test = toy(2)
    k = policy.depths(test, cfg)
    assert not np.array_equal(policy.depths(below_depths(test, k, 3), cfg), k)


def test_the_view_joins_the_observation_set() -> None:
    on = {name for name, kind in registry.KINDS.items() if registry.reads_examined_only(kind, "strict")}
    assert {"dqn", "fqi", "ppo", "tabular", "pfound", "fixed", "greedyk", "random"} <= on
    assert not on & {"posterior", "residual", "cutoff", "choppy", "threshold", "gap", "topp"}
    for observation in ("auto", "score", "hybrid", "listwise"):  # these sets read the next score or the whole list
        assert {n for n, k in registry.KINDS.items() if registry.reads_examined_only(k, observation)} == {
            n for n, k in registry.KINDS.items() if k.view == "none"
        }
    with pytest.raises(ValueError, match="view must be one of"):
        registry.register("x-view", lambda r, s: None, group="peer", stochastic=False, uses_reward=False,
                          description="x", view="partial")  # type: ignore[arg-type]  # fmt: skip
    with pytest.raises(ValueError, match="stepwise kind reads an observation set"):
        registry.register("x-view", lambda r, s: None, group="peer", stochastic=False, uses_reward=False,
                          description="x", view="stepwise")  # fmt: skip
    assert "x-view" not in registry.KINDS


def test_shortlist_kinds_says_what_each_kind_reads(capsys: pytest.CaptureFixture[str]) -> None:
    from experiments.cli import main

    assert main(["kinds", "dqn"]) == 0 and main(["kinds", "posterior"]) == 0 and main(["kinds", "fixed"]) == 0
    out = capsys.readouterr().out
    assert "reads: the observation of depths 1..k at depth k (examined items only on the strict set)" in out
    assert "reads: scores beyond the depth it shows, whatever the set" in out
    assert "reads: no score (examined items only, on every set)" in out
