"""The residual DQN (agents/residual.py): untrained it is the posterior, its prior is the posterior's own Q under its
model (Bellman-consistent with the environment), training beliefs are cross-fitted (a query's own label never
reaches its belief), it saves and loads to the same depths, keeps the step it chose, refuses bad settings, the
listwise set and a file that is not its own, keeps the posterior when no trained weights are significantly better
on its hold-out; and the environment's observer hook checks what it is given."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import numpy as np
import pytest

from agents import registry
from agents.dqn import DQNConfig, gradient_steps
from agents.posterior import ListwisePosterior
from agents.residual import BELIEF_NAMES, BeliefObserver, ResidualConfig, ResidualDQN, beliefs, cross_fitted_beliefs
from envs import EpisodeConfig, RankedQuery, ShortlistEnv, feature_matrix

CFG = EpisodeConfig(reward="bor", step_cost=0.05, gamma=1.0)


def lists(n_queries: int = 60, n: int = 30, seed: int = 0) -> list[RankedQuery]:
    """Sorted random lists whose gold sits just above the largest gap among the top 8 (sometimes deeper)."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n_queries):
        s = np.sort(rng.random(n))[::-1].copy()
        gold = int(rng.integers(1, 9))
        s[gold:] -= 0.5  # a gap right after the gold
        s = np.sort(s)[::-1].copy()
        if rng.random() < 0.2:
            gold = int(rng.integers(1, n + 1))
        out.append(RankedQuery(s, [gold], f"q{i:03d}"))
    return out


def untrained() -> ResidualConfig:
    """SB3 takes at least one gradient step; at a learning rate below float32's resolution it changes no weight."""
    s = ResidualConfig(total_timesteps=8, learning_starts=7, held_out=0.0, learning_rate=1e-300)
    assert gradient_steps(s) == 1
    return s


def test_untrained_residual_is_the_posterior() -> None:
    qs = lists()
    train, test = qs[:40], qs[40:]
    post = ListwisePosterior("bor").fit(train, CFG, 0)
    agent = ResidualDQN("bor", untrained()).fit(train, CFG, 42)
    last = [p for n, p in agent.model.q_net.named_parameters() if n.startswith("q_net.")][-2:]
    assert all(float(p.detach().abs().max()) == 0.0 for p in last)  # the MLP's last layer: still zero
    assert np.array_equal(agent.depths(test, CFG), post.depths(test, CFG))
    assert np.array_equal(agent.depths(train, CFG), post.depths(train, CFG))
    assert agent.chosen_step == -1


def test_prior_is_the_posteriors_q_and_bellman_consistent() -> None:
    qs = lists()
    post = ListwisePosterior("bor").fit(qs, CFG, 0)
    found, value = post.found_and_value(qs, CFG)
    scale = 10.0
    for q, b, f, v in zip(qs, beliefs(post, qs, CFG, scale), found, value, strict=True):
        assert b.shape == (CFG.cap(q), 3)
        m = int(np.isfinite(v).sum())
        k = np.arange(1, m + 1)
        stop, cont = scale * b[:m, 1].astype(np.float64), scale * b[:m, 2].astype(np.float64)
        np.testing.assert_allclose(b[:m, 0], f[:m], rtol=1e-6)
        np.testing.assert_allclose(stop, v[:m] + CFG.step_cost * (k - 1), rtol=1e-5, atol=1e-5)
        # Q(k, CONTINUE) = -c + max(Q(k+1, STOP), Q(k+1, CONTINUE)) wherever it is not clipped at -s
        nxt = -CFG.step_cost + np.maximum(stop[1:], cont[1:])
        live = cont[:-1] > -scale + 1e-6
        np.testing.assert_allclose(cont[:-1][live], nxt[live], rtol=1e-5, atol=1e-4)
        assert cont[m - 1] == -scale  # nothing deeper under the posterior
        assert np.all(b[m:] == np.array([f[m - 1], 0.0, -1.0], dtype=np.float32))


def test_training_beliefs_are_cross_fitted() -> None:
    qs = lists()
    rows = cross_fitted_beliefs(qs, CFG, "bor", 5, 7, 10.0)
    moved = list(qs)
    old = qs[3]
    moved[3] = RankedQuery(old.scores, [len(old.scores)], old.qid)  # its own label changed
    again = cross_fitted_beliefs(moved, CFG, "bor", 5, 7, 10.0)
    assert np.array_equal(rows[3], again[3])  # its belief never saw its label
    assert any(not np.array_equal(a, b) for i, (a, b) in enumerate(zip(rows, again, strict=True)) if i != 3)
    # and the order the queries come in changes nothing
    order = np.random.default_rng(1).permutation(len(qs))
    shuffled = cross_fitted_beliefs([qs[i] for i in order], CFG, "bor", 5, 7, 10.0)
    for j, i in enumerate(order):
        assert np.array_equal(shuffled[j], rows[i])
    with pytest.raises(ValueError, match="at least 2 training queries"):
        cross_fitted_beliefs(qs[:1], CFG, "bor", 5, 7, 10.0)


def test_fit_save_load_same_depths_and_the_step_kept(tmp_path: Path) -> None:
    qs = lists()
    train, test = qs[:40], qs[40:]
    s = ResidualConfig(total_timesteps=1200, learning_starts=200, eval_every=400, n_envs=2)
    agent = ResidualDQN("bor", s).fit(train, CFG, 3)
    assert agent.checkpoints is not None and agent.chosen_step == agent.checkpoints.at
    assert agent.chosen_step in {t for t, _ in agent.checkpoints.history}
    path = tmp_path / "agent.zip"
    agent.save(path)
    back = registry.KINDS["residual"].load(path, "bor", s)
    assert isinstance(back, ResidualDQN) and back.chosen_step == agent.chosen_step
    assert np.array_equal(back.depths(test, CFG), agent.depths(test, CFG))
    again = ResidualDQN("bor", s).fit(train, CFG, 3)
    assert np.array_equal(again.depths(test, CFG), agent.depths(test, CFG))  # one seed, one policy
    # the file's prior scale wins over the settings given
    assert ResidualDQN.load(path, "bor", ResidualConfig(prior_scale=3.0)).settings.prior_scale == 10.0


def test_a_zip_without_the_prior_is_refused(tmp_path: Path) -> None:
    qs = lists()
    agent = registry.make("dqn", "bor", DQNConfig(total_timesteps=8, learning_starts=7))
    agent.fit(qs, CFG, 0)
    plain = tmp_path / "dqn.zip"
    agent.save(plain)
    with pytest.raises(ValueError, match=r"dqn\.zip: not a saved residual DQN"):
        ResidualDQN.load(plain)
    with zipfile.ZipFile(plain, "a") as z:
        z.writestr("residual.json", '{"prior_scale": 10, "posterior": {}, "belief_names": ["x"], "chosen_step": 1000}')
    with pytest.raises(ValueError, match="belief columns"):
        ResidualDQN.load(plain)
    real, done = tmp_path / "real.zip", tmp_path / "done.zip"
    ResidualDQN("bor", untrained()).fit(qs, CFG, 0).save(real)
    with zipfile.ZipFile(real) as src, zipfile.ZipFile(done, "w") as z:  # its record without the posterior's params
        for name in src.namelist():
            record = json.loads(src.read(name)) if name == "residual.json" else None
            z.writestr(name, json.dumps({**record, "posterior": {}}) if record else src.read(name))
    with pytest.raises(ValueError, match=r"done\.zip: residual\.json: malformed listwise posterior"):
        ResidualDQN.load(done)


@pytest.mark.parametrize(
    ("key", "value", "match"),
    [("folds", "1", "folds must be >= 2"), ("prior_scale", "0", "prior_scale"), ("prior_scale", "nan", "prior_scale"),
     ("held_out", "1", "held_out"), ("start_margin", "-1", "start_margin"), ("start_margin", "nan", "start_margin")],
)  # fmt: skip
def test_bad_settings_are_refused(key: str, value: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        registry.parse_settings([f"residual.{key}={value}"])


def test_listwise_observation_is_refused() -> None:
    qs = lists(n_queries=10)
    cfg = EpisodeConfig(reward="bor", step_cost=0.05, gamma=1.0, observation="listwise")
    with pytest.raises(ValueError, match="not the listwise set"):
        ResidualDQN("bor", untrained()).fit(qs, cfg, 0)


def test_environment_observes_through_the_observer() -> None:
    qs = lists(n_queries=5)
    post = ListwisePosterior("bor").fit(qs, CFG, 0)
    obs = BeliefObserver("score", qs, beliefs(post, qs, CFG, 10.0))
    env = ShortlistEnv(qs, CFG, observer=obs)
    assert env.feature_names[-3:] == BELIEF_NAMES and env.observation_space.shape == (13 + 3,)
    x, info = env.reset(seed=0, options={"index": 2})
    np.testing.assert_array_equal(x[:13], feature_matrix(qs[2], CFG.cap(qs[2]))[0])
    np.testing.assert_array_equal(x[13:], beliefs(post, [qs[2]], CFG, 10.0)[0][0])
    other = lists(n_queries=1, seed=5)
    with pytest.raises(ValueError, match="no belief was computed"):
        ShortlistEnv(other, CFG, observer=obs).reset(seed=0)

    class Wrong:
        names = ("a", "b")

        def __call__(self, query: RankedQuery, depth: int) -> np.ndarray:
            out = np.zeros((depth, 2), dtype=np.float32)
            out[0, 0] = np.nan
            return out

    with pytest.raises(ValueError, match="'q000': the observer gave a NaN"):
        ShortlistEnv(qs, CFG, observer=Wrong()).reset(seed=0, options={"index": 0})


def test_a_fit_that_finds_nothing_significant_keeps_the_posterior() -> None:
    qs = lists()
    train, test = qs[:40], qs[40:]
    s = ResidualConfig(total_timesteps=1200, learning_starts=200, eval_every=400, n_envs=2, start_margin=1e9)
    agent = ResidualDQN("bor", s).fit(train, CFG, 3)
    assert agent.checkpoints is not None and len(agent.checkpoints.history) >= 3
    assert agent.chosen_step == agent.checkpoints.history[0][0] == 0  # scored before any gradient step
    post = ListwisePosterior("bor").fit(train, CFG, 0)
    assert np.array_equal(agent.depths(test, CFG), post.depths(test, CFG))
