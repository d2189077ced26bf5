"""Fitted Q on the full data (``fqi``), PPO (``ppo``) and the DQN's value loss: the known optimum of the toy
problems, the targets by hand, the loss's estimate of a two-point reward, the budget matched to the DQN's gradient
steps, determinism and the saved form."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_agents import toy_queries

from agents import registry
from agents.dqn import DQNAgent, DQNConfig, gradient_steps
from agents.fittedq import FittedQ, FittedQConfig, Transitions
from agents.ppo import PPOAgent, PPOConfig
from envs import EpisodeConfig, RankedQuery

#: Tiny budgets that still find the toy optimum (gamma 0.95, as tests/test_agents.py's toy problems).
FAST = {
    "fqi": FittedQConfig(gradient_steps=2000, held_out=0.0, learning_rate=3e-3, net_arch=(128, 128)),
    "ppo": PPOConfig(total_timesteps=10_000, n_steps=128, learning_rate=2e-3),
}


@pytest.mark.parametrize("kind", sorted(FAST))
@pytest.mark.parametrize("gold_rank", [1, 4])
def test_learns_the_known_optimum(kind: str, gold_rank: int) -> None:
    cfg = EpisodeConfig(reward="bor", step_cost=0.01, gamma=0.95)
    agent = registry.make(kind, "bor", FAST[kind]).fit(toy_queries(gold_rank, seed=1), cfg, seed=0)
    depths = agent.depths(toy_queries(gold_rank, seed=2), cfg)
    assert np.mean(depths == gold_rank) >= 0.95, depths


@pytest.mark.parametrize("kind", sorted(FAST))
def test_same_seed_same_policy_and_round_trip(kind: str, tmp_path: Path) -> None:
    """Same seed, same weights bit for bit; saved to SB3's zip with the observation set, loaded back (weights only)
    to the same depths; a score-only policy refuses queries with a second scorer."""
    import torch

    qs, cfg = toy_queries(2, seed=5), EpisodeConfig()
    small = {"fqi": FittedQConfig(gradient_steps=150, target_update_interval=50),
             "ppo": PPOConfig(total_timesteps=512, n_steps=64, n_epochs=2, held_out=0.25)}[kind]  # fmt: skip
    a = registry.make(kind, "bor", small).fit(qs, cfg, seed=11)
    b = registry.make(kind, "bor", small).fit(qs, cfg, seed=11)
    sa, sb = a.model.policy.state_dict(), b.model.policy.state_dict()  # type: ignore[attr-defined]
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    a.save(tmp_path / "agent.zip")
    back = type(a).load(tmp_path / "agent.zip", "bor", small)
    assert back.observation == "score"  # type: ignore[attr-defined]
    np.testing.assert_array_equal(back.depths(qs, cfg), a.depths(qs, cfg))
    two = [RankedQuery(q.scores, q.relevant_ranks, q.qid, aux_scores=q.scores[::-1].copy()) for q in qs]
    with pytest.raises(ValueError, match="same observation set"):
        back.depths(two, cfg)
    (tmp_path / "bad.zip").write_bytes(b"not a zip")
    with pytest.raises(ValueError, match="bad.zip: not a saved"):
        type(a).load(tmp_path / "bad.zip")
    from test_reliability_inputs import _malicious_sb3_zip  # a zip whose pickled entry would touch a file

    marker = tmp_path / "code-was-executed"
    _malicious_sb3_zip(tmp_path / "agent.zip", tmp_path / "foreign.zip", marker)
    np.testing.assert_array_equal(
        type(a).load(tmp_path / "foreign.zip", "bor", small).depths(qs, cfg), a.depths(qs, cfg)
    )
    assert not marker.exists(), "loading a saved agent executed pickled code"


def test_targets_by_hand() -> None:
    """One query of 5 items, gold at rank 3, N = 5, c = 0.1, gamma 1: STOP's target is the exact terminal reward
    T(k) = found x log2(5/k); CONTINUE's follows the target network's greedy policy (here: stop at depth 4) to
    its stop (Monte Carlo) or bootstraps after n depths; at the cap every action stops."""
    q = RankedQuery(np.linspace(1.0, 0.0, 5), [3], "q")
    data = Transitions([q], EpisodeConfig(step_cost=0.1, max_depth=5))
    t = np.where(np.arange(1, 6) >= 3, np.log2(5 / np.arange(1, 6)), 0.0)
    np.testing.assert_allclose(data.terminal, t)
    qv = np.array([[0.0, 1.0], [0.0, 1.0], [0.0, 1.0], [1.0, 0.0], [1.0, 0.0]])  # greedy: continue to 4, stop
    mc = data.targets(qv, 0)
    np.testing.assert_allclose(mc[:, 0], t)
    np.testing.assert_allclose(mc[:, 1], [-0.3 + t[3], -0.2 + t[3], -0.1 + t[3], -0.1 + t[4], t[4]])
    one = data.targets(qv, 1)  # one step: -c + max_a Q'(k + 1, a)
    np.testing.assert_allclose(one[:, 1], [-0.1 + 1.0, -0.1 + 1.0, -0.1 + t[3], -0.1 + t[4], t[4]])
    two = data.targets(qv, 2)  # from depth 1 the greedy policy goes on past depth 3: bootstrap at depth 3
    np.testing.assert_allclose(two[:, 1], [-0.2 + 1.0, -0.2 + t[3], -0.1 + t[3], -0.1 + t[4], t[4]])
    gamma = Transitions([q], EpisodeConfig(step_cost=0.1, max_depth=5, gamma=0.5)).targets(qv, 0)
    np.testing.assert_allclose(gamma[0, 1], -0.1 * (1 + 0.5 + 0.25) + 0.5**3 * t[3])


@pytest.mark.parametrize(("loss", "expected"), [("mse", 0.7 * np.log2(20)), ("huber", np.log2(20) - 0.3 / 0.7)])
def test_value_loss_estimates_the_mean_or_the_huber_point(loss: str, expected: float) -> None:
    """One-item lists truncated from N = 20 candidates, all alike (one observation): the item is the gold on 70% of
    the queries, so STOP's target is two-point, log2(20) = 4.32 or 0. Squared error estimates its mean,
    0.7 x 4.32 = 3.03; the Huber loss (delta 1, SB3's) the point x below 4.32 where 0.7 x = 0.3 x 1: 3.89 (the
    bias behind DQN's stop at K = 1, :mod:`agents.sb3`)."""
    from envs import feature_matrix

    qs = [RankedQuery(np.ones(1), [1] if i % 10 < 7 else [], f"q{i}", n_candidates=20, n_relevant=1)
          for i in range(50)]  # fmt: skip
    st = FittedQConfig(gradient_steps=1500, held_out=0.0, loss=loss, batch_size=256)
    agent = FittedQ("bor", st).fit(qs, EpisodeConfig(), seed=0)
    assert agent.q_values(np.array(feature_matrix(qs[0])))[0, 0] == pytest.approx(expected, abs=0.1)


def test_fqi_budget_is_the_online_dqns_gradient_steps() -> None:
    """The default budget of ``fqi`` is the gradient steps of the online DQN at its defaults, and
    :func:`agents.dqn.gradient_steps` is the count SB3 itself keeps (``_n_updates``), here on a small budget."""
    assert FittedQConfig().gradient_steps == gradient_steps(DQNConfig())
    qs = toy_queries(2, seed=5)
    for st in (DQNConfig(total_timesteps=1500, learning_starts=200), DQNConfig(total_timesteps=999, learning_starts=7,
               n_envs=3, train_freq=5, gradient_steps=2)):  # fmt: skip
        agent = DQNAgent("bor", st).fit(qs, EpisodeConfig(), seed=0)
        assert agent.model._n_updates == gradient_steps(st)


def test_dqn_and_ppo_keep_the_best_weights_on_held_out_queries() -> None:
    """With ``held_out`` the greedy policy is scored on held-out training queries during training; the weights
    kept are the best scored (the last score, at the end of training, is among them)."""
    qs, cfg = toy_queries(3, seed=4), EpisodeConfig()
    dqn = DQNAgent("bor", DQNConfig(total_timesteps=1200, learning_starts=200, held_out=0.25, eval_every=300))
    dqn.fit(qs, cfg, seed=0)
    ppo = PPOAgent("bor", PPOConfig(total_timesteps=768, n_steps=64, n_epochs=2, held_out=0.25)).fit(qs, cfg, seed=0)
    for agent in (dqn, ppo):
        ck = agent.checkpoints
        assert ck is not None and len(ck.history) >= 2
        assert ck.best == max(v for _, v in ck.history) and ck.at == next(s for s, v in ck.history if v == ck.best)


@pytest.mark.parametrize(
    ("build", "match"),
    [
        (lambda: FittedQConfig(n_steps=-1), "n_steps"),
        (lambda: FittedQConfig(loss="l1"), "loss"),
        (lambda: FittedQConfig(held_out=1.0), "held_out"),
        (lambda: DQNConfig(loss="l2"), "loss"),
        (lambda: PPOConfig(gae_lambda=1.5), "gae_lambda"),
        (lambda: PPOConfig(n_envs=0), "n_envs"),
    ],
)
def test_settings_are_checked(build: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        build()  # type: ignore[operator]


@pytest.mark.parametrize("hybrid", [False, True])
def test_listwise_extractor_shares_its_weights_across_ranks(hybrid: bool, tmp_path: Path) -> None:
    """On the ``listwise`` set the SB3 agents read the per-item block with one set of weights for every rank: the
    extractor's output width is the summary columns plus 3 masses per head plus the pooled encoding; its masses are
    probabilities; swapping two ranks not yet shown leaves the output unchanged; with ``listwise_net`` false (or on
    another set) SB3's plain flattening extractor is used; a trained fqi agent on it round-trips through its zip."""
    import torch
    from stable_baselines3.common.torch_layers import FlattenExtractor

    from agents.sb3 import LISTWISE_HEADS, LISTWISE_HIDDEN, listwise_extractor_class, listwise_layout, policy_kwargs
    from envs.features import LISTWISE_RANKS, OBSERVATIONS

    name = "listwise-hybrid" if hybrid else "listwise"
    width = len(OBSERVATIONS[name])
    base, per = listwise_layout(width)
    assert base == len(OBSERVATIONS["hybrid" if hybrid else "score"]) and base + LISTWISE_RANKS * per == width
    with pytest.raises(ValueError, match="not a listwise observation set"):
        listwise_layout(width + 1)
    assert policy_kwargs((8,), name, True)["features_extractor_class"] is listwise_extractor_class()
    assert "features_extractor_class" not in policy_kwargs((8,), name, False)
    assert "features_extractor_class" not in policy_kwargs((8,), "score", True)
    from gymnasium import spaces

    torch.manual_seed(0)
    ext = listwise_extractor_class()(spaces.Box(-1, 1, (width,)))
    assert ext.features_dim == base + 3 * LISTWISE_HEADS + LISTWISE_HIDDEN
    obs = torch.rand(3, width) * 2 - 1
    items = obs[:, base:].reshape(3, LISTWISE_RANKS, per)
    from envs.features import LISTWISE_ITEM_NAMES

    shown = LISTWISE_ITEM_NAMES.index("shown")
    items[..., shown] = 0.0
    items[:, :2, shown] = 1.0  # two ranks shown
    out = ext(obs)
    masses = out[:, base : base + 3 * LISTWISE_HEADS].reshape(3, 3, LISTWISE_HEADS)
    assert torch.all(masses >= 0) and torch.all(masses[:, 0] + masses[:, 1] <= 1 + 1e-6)
    swapped = obs.clone()
    block = swapped[:, base:].reshape(3, LISTWISE_RANKS, per)
    block[:, [5, 9]] = block[:, [9, 5]].clone()  # two ranks not yet shown, neither the next one
    torch.testing.assert_close(ext(swapped), out)
    assert isinstance(listwise_extractor_class(), type) and FlattenExtractor is not listwise_extractor_class()

    qs, cfg = toy_queries(2, seed=5), EpisodeConfig(observation="listwise")  # listwise-hybrid on two scorers
    small = FittedQConfig(gradient_steps=60, target_update_interval=20, held_out=0.0)
    if hybrid:
        qs = [RankedQuery(q.scores, q.relevant_ranks, q.qid, aux_scores=q.scores[::-1].copy()) for q in qs]
    a = registry.make("fqi", "bor", small).fit(qs, cfg, seed=3)
    assert a.observation == name  # type: ignore[attr-defined]
    assert type(a.model.policy.q_net.features_extractor).__name__ == "ListwiseExtractor"  # type: ignore[attr-defined]
    a.save(tmp_path / "agent.zip")
    back = FittedQ.load(tmp_path / "agent.zip", "bor", small)
    np.testing.assert_array_equal(back.depths(qs, cfg), a.depths(qs, cfg))


@pytest.mark.parametrize("kind", ["dqn", "ppo"])
def test_lean_sb3_loop_trains_the_weights_sb3s_own_loop_trains(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The cuts of SB3's per-step overhead (:func:`agents.sb3.steady_mode` skips a training-mode switch to the mode
    already set; :func:`agents.sb3.vector_env` copies the info dicts shallowly; PPO trains with
    :func:`agents.sb3.unchecked_distributions`) change no number: the same fit with SB3's own ``DummyVecEnv`` and
    mode switch, and torch's distribution checks on, gives the same weights bit for bit, and the DQN's loop does
    skip."""
    import contextlib

    import stable_baselines3.common.vec_env as sb3_vec
    import torch
    from torch.distributions import Distribution

    import agents.ppo
    import agents.sb3

    qs, cfg = toy_queries(3, seed=6), EpisodeConfig()
    small = {"dqn": DQNConfig(total_timesteps=1200, learning_starts=200, n_envs=4, exploring_starts=0.5),
             "ppo": PPOConfig(total_timesteps=512, n_steps=64, n_epochs=2)}[kind]  # fmt: skip
    switches: list[bool] = []
    real_train = torch.nn.Module.train

    def counted(module: torch.nn.Module, mode: bool = True) -> torch.nn.Module:
        switches.append(mode)
        return real_train(module, mode)

    monkeypatch.setattr(torch.nn.Module, "train", counted)
    lean = registry.make(kind, "bor", small).fit(qs, cfg, seed=3)
    lean_switches = len(switches)
    assert agents.sb3._vec_env_class() is not sb3_vec.DummyVecEnv

    monkeypatch.setattr(agents.sb3, "steady_mode", lambda policy: None)  # SB3's own switch, every time
    monkeypatch.setattr(agents.sb3, "_vec_env_class", lambda: sb3_vec.DummyVecEnv)
    monkeypatch.setattr(agents.ppo, "unchecked_distributions", contextlib.nullcontext)  # torch's checks on
    switches.clear()
    plain = registry.make(kind, "bor", small).fit(qs, cfg, seed=3)
    sa, sb = lean.model.policy.state_dict(), plain.model.policy.state_dict()  # type: ignore[attr-defined]
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    np.testing.assert_array_equal(lean.depths(qs, cfg), plain.depths(qs, cfg))
    assert Distribution._validate_args, "torch's default (checks on) is restored after a fit"
    if kind == "dqn":  # SB3's DQN switches before every action it predicts; PPO once per rollout either way
        assert lean_switches < 0.75 * len(switches), (lean_switches, len(switches))


def test_fqi_skips_the_target_network_on_ended_transitions(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every transition of fitted Q's buffer ends its episode, so SB3's target ``r + (1 - done) gamma max Q'`` is the
    reward: the training step skips the target network's forward pass (``ValueDQN.skip_ended``) and the weights are
    those of the full formula, bit for bit; one forward pass per step instead of two."""
    import torch
    from stable_baselines3.dqn.policies import QNetwork

    import agents.fittedq

    qs, cfg = toy_queries(3, seed=6), EpisodeConfig()
    small = FittedQConfig(gradient_steps=300, batch_size=32, target_update_interval=50, held_out=0.25)
    minibatch_passes: list[int] = []
    real_forward = QNetwork.forward

    def counted(self: QNetwork, obs: torch.Tensor) -> torch.Tensor:
        minibatch_passes.append(int(obs.shape[0] == small.batch_size))
        return real_forward(self, obs)

    monkeypatch.setattr(QNetwork, "forward", counted)
    lean = FittedQ("bor", small).fit(qs, cfg, seed=3)
    lean_passes = sum(minibatch_passes)

    real_class = agents.fittedq.value_dqn_class

    def full_formula(double_q: bool, loss: str) -> type:
        cls = real_class(double_q, loss)
        return type("FullFormula", (cls,), {"skip_ended": False})

    monkeypatch.setattr(agents.fittedq, "value_dqn_class", full_formula)
    minibatch_passes.clear()
    plain = FittedQ("bor", small).fit(qs, cfg, seed=3)
    sa, sb = lean.model.policy.state_dict(), plain.model.policy.state_dict()
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    np.testing.assert_array_equal(lean.depths(qs, cfg), plain.depths(qs, cfg))
    assert lean_passes == small.gradient_steps and sum(minibatch_passes) == 2 * small.gradient_steps
