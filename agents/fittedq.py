"""Fitted Q-iteration on the full data: SB3's DQN trained on every transition of every training query.

The environment replays logged ranked lists, so every transition of every training query is known before
training: at each depth k up to the query's cap (the break-even depth, :func:`agents.base.learned_episode`)
both actions, with their exact rewards. This kind fills SB3's replay buffer with all of them
(:class:`ExhaustiveBuffer`: one row per (query, depth), both actions, sampled uniformly; no environment is
stepped and nothing explores) and trains SB3's DQN (:func:`agents.sb3.value_dqn_class`, squared error by
default) on it. Everything the online DQN (:mod:`agents.dqn`) has to find by exploring is given here, so
the two at equal gradient steps measure what the optimisation costs the online learner.

Targets (recomputed with the target network at every target update, ``target_update_interval``):

- STOP at depth k: the exact terminal reward ``T_q(k)`` (0, or log2(N/k) when the shortlist holds the gold):
  a regression onto the observed outcome, so Q(s, STOP) estimates E[T(k) | s];
- CONTINUE at depth k < cap: follow the target network's greedy policy from k + 1. When it stops at depth
  s within ``n_steps`` further depths (any depth when ``n_steps = 0``: Monte Carlo), the target is the
  observed return ``-c (1 + ... + gamma^(j-1)) + gamma^j T(s)`` with j = s - k; otherwise the n-step
  return ``-c (1 + ... + gamma^(n-1)) + gamma^n max_a Q'(k + n, a)``. ``n_steps = 1`` is the one-step
  Q-learning target of SB3's DQN;
- CONTINUE at the cap: every action stops there (:class:`envs.ShortlistEnv`), so ``T_q(cap)``.

Monte Carlo targets evaluate the current greedy policy exactly on the training data (approximate policy
iteration): no value is bootstrapped along a chain of near-identical deep observations, the runaway that one-step
targets showed (:mod:`agents.dqn`). Early stopping: with ``held_out`` > 0 that share of the training queries
(a seeded split of their sorted ids, never the test queries) is left out of the buffer, the greedy policy is
scored on it (mean net reward) at every target update, and the best weights are kept.

Sampling: a uniform draw over rows spends most updates on deep rows (up to 191 per BFCL query, where every
decision is plain), while an online learner visits the decisive shallow depths most; rows are drawn with
probability proportional to ``k ** -depth_weight``.

How the defaults were chosen (``shortlist tune --agent fqi --benchmark B --scorer S``, validation net reward on the
inner split of the training queries, mean over seeds 42/123/456; bfcl-bm25 / bfcl-minilm / metatool-bm25 /
metatool-minilm / toolbench-minilm):

- ``--grid n_steps=0,1 depth_weight=0,1`` (``results/tuning/fqi/``, 30% held out): Monte Carlo targets with
  depth-weighted rows 6.942 / 6.991 / 3.298 / 4.110 / 3.537 (sum 24.88, the best); uniform rows 24.40; one-step
  targets 24.60 (weighted) and 24.26 (uniform), with deeper stops (mean K up to 9.0 on bfcl-bm25);
- ``--grid held_out=0,0.3`` (``results/tuning/fqi-held-out/``): keeping the best weights on 30% held-out training
  queries beats the last weights trained on all of them on every condition (24.88 against 24.34): the greedy policy
  of approximate policy iteration swings from one target update to the next, and the hold-out picks a good one.

At the DQN's gradient steps it is then level with the online DQN on validation (the DQN's sum 24.83,
``results/tuning/dqn-loss/``) and 0.22 below the listwise posterior's 25.10 (``results/tuning/posterior-m/``,
m = 60): what the online learner loses to exploring is small once its loss estimates a mean.

Inference, saving and loading are the DQN's (:class:`agents.dqn.DQNAgent`): batched greedy depths (ties pick
STOP), SB3's zip with the observation set recorded, read back with ``torch.load(weights_only=True)``.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agents.base import (
    learned_episode,
    return_objective,
    row_depths,
    stacked_features,
    torch_on_one_thread,
    training_bar,
)
from agents.dqn import DQNAgent, DQNConfig, _stop_rule, gradient_steps
from agents.registry import register
from agents.sb3 import (
    check_loss,
    forward_rows,
    held_out_checkpoints,
    policy_kwargs,
    quiet,
    spaces_env,
    value_dqn_class,
)
from envs import EpisodeConfig, RankedQuery, terminal_payoffs
from envs.features import observation_of, observation_width

__all__ = ["FittedQ", "FittedQConfig", "Transitions"]


@dataclass(frozen=True)
class FittedQConfig:
    """Fitted-Q settings (SB3 argument names where SB3 has one)."""

    gradient_steps: int = field(default_factory=lambda: gradient_steps(DQNConfig()))
    """Gradient steps of training: by default exactly as many as the online DQN takes at its defaults
    (:func:`agents.dqn.gradient_steps`), so the two compare at equal gradient steps."""
    batch_size: int = 128
    """Minibatch size (transitions drawn uniformly from the full buffer)."""
    learning_rate: float = 1e-3
    """Adam learning rate."""
    net_arch: tuple[int, ...] = (64, 64)
    """Hidden layer sizes of the Q-network MLP (the DQN's)."""
    target_update_interval: int = 100
    """Gradient steps between target-network syncs (and target recomputations, and held-out scores)."""
    n_steps: int = 0
    """Depths the CONTINUE target follows the greedy policy before it bootstraps; 0: until it stops (Monte
    Carlo, no bootstrap); 1: the one-step Q-learning target."""
    loss: str = "mse"
    """Value loss: ``mse`` (squared error: the mean) or ``huber`` (SB3's; :mod:`agents.sb3`)."""
    held_out: float = 0.3
    """Share of the training queries held out to choose the weights (0: none, the last weights)."""
    held_out_seed: int = 99
    """Seed of the hold-out split (:func:`agents.auto.inner_split` of the sorted query ids)."""
    break_even: bool = True
    """Stop at the latest at each query's break-even depth (:func:`agents.base.learned_episode`)."""
    listwise_net: bool = True
    """On the ``listwise`` observation, read the per-item block with weights shared across the ranks
    (:func:`agents.sb3.listwise_extractor_class`, the listwise posterior's form); false: a plain MLP on all columns.
    No effect on the other observation sets."""
    depth_weight: float = 1.0
    """Rows are drawn with probability proportional to ``k ** -depth_weight`` (k: the row's depth; 0: uniformly),
    both actions of a row equally often (1: the decisive shallow depths, which an online learner visits most, get
    the most updates; chosen on validation, see the module docstring)."""

    def __post_init__(self) -> None:
        for name in ("gradient_steps", "batch_size", "target_update_interval"):
            if getattr(self, name) < 1:
                raise ValueError(f"FittedQConfig.{name} must be >= 1, got {getattr(self, name)}")
        if not (np.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise ValueError(f"FittedQConfig.learning_rate must be finite and > 0, got {self.learning_rate}")
        if not self.net_arch or any(h < 1 for h in self.net_arch):
            raise ValueError(f"FittedQConfig.net_arch must be hidden sizes >= 1, got {self.net_arch}")
        if self.n_steps < 0:
            raise ValueError(f"FittedQConfig.n_steps must be >= 0 (0: Monte Carlo), got {self.n_steps}")
        check_loss("FittedQConfig", self.loss)
        if not 0.0 <= self.held_out < 1.0:
            raise ValueError(f"FittedQConfig.held_out must lie in [0, 1), got {self.held_out}")


class Transitions:
    """Every (query, depth) of a query set up to its cap: the observations (R, F), the per-query offsets, the exact
    terminal reward of stopping at each row (reads labels: training queries only) and the episode's c and gamma."""

    def __init__(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> None:
        self.feats, self.offsets = stacked_features(queries, config)
        caps = np.diff(self.offsets)
        self.terminal = np.concatenate([terminal_payoffs(q, np.arange(1, c + 1), config.reward)
                                        for q, c in zip(queries, caps, strict=True)])  # fmt: skip
        self.last = np.zeros(len(self.terminal), dtype=bool)
        self.last[self.offsets[1:] - 1] = True
        self.cost, self.gamma = float(config.step_cost), float(config.gamma)

    def __len__(self) -> int:
        return len(self.terminal)

    def _paid(self, j: NDArray[np.int64]) -> NDArray[np.float64]:
        """Step costs of j CONTINUEs, discounted: c (1 + gamma + ... + gamma^(j-1))."""
        steps = np.asarray(j, dtype=np.float64)
        if self.gamma == 1.0:
            return self.cost * steps
        return np.asarray(self.cost * (1.0 - self.gamma**steps) / (1.0 - self.gamma), dtype=np.float64)

    def targets(self, q: NDArray[np.float64], n_steps: int) -> NDArray[np.float64]:
        """Regression targets (R, 2) of STOP and CONTINUE at every row, given the target network's values ``q``
        (R, 2) at every row (module docstring)."""
        rows = np.arange(len(self))
        stop = (q[:, 0] >= q[:, 1]) | self.last  # the greedy policy; every action stops at the cap
        marks = np.where(stop, rows, len(self))
        next_stop = np.minimum.accumulate(marks[::-1])[::-1]  # first stop at or after each row, same query
        s = next_stop[np.minimum(rows + 1, len(self) - 1)]
        j = s - rows
        cont = -self._paid(j) + self.gamma**j * self.terminal[s]
        if n_steps > 0:
            far = ~self.last & (j > n_steps)  # the greedy policy goes on past k + n: bootstrap there
            ahead = np.minimum(rows + n_steps, len(self) - 1)
            boot = -self._paid(np.full(len(self), n_steps)) + self.gamma**n_steps * q[ahead].max(axis=1)
            cont = np.where(far, boot, cont)
        return np.column_stack([self.terminal, np.where(self.last, self.terminal, cont)])


@functools.cache
def _buffer_class() -> type:
    from stable_baselines3.common.buffers import ReplayBuffer
    from stable_baselines3.common.type_aliases import ReplayBufferSamples

    class ExhaustiveBuffer(ReplayBuffer):
        """SB3's replay buffer holding every (row, action) of :class:`Transitions` with its current target as the
        reward and ``done`` = 1, so ``DQN.train`` regresses Q(s, a) on the target; drawn uniformly with a seeded
        generator (the parent's arrays are one entry long and unused)."""

        def __init__(self, buffer_size: int, observation_space: Any, action_space: Any, device: Any = "cpu",
                     n_envs: int = 1, optimize_memory_usage: bool = False, *, transitions: Transitions,
                     seed: int, depth_weight: float = 0.0) -> None:  # fmt: skip
            import torch

            super().__init__(1, observation_space, action_space, device, 1, False, handle_timeout_termination=False)
            self.data = transitions
            self.obs = torch.from_numpy(np.ascontiguousarray(transitions.feats))
            self.goal = torch.zeros((len(transitions), 2), dtype=torch.float32)
            self.rng = np.random.default_rng(seed)
            self.pos, self.full = 0, True
            weight = row_depths(transitions.offsets).astype(np.float64) ** -depth_weight
            self.cum = np.cumsum(weight / weight.sum()) if depth_weight else None

        def set_targets(self, targets: NDArray[np.float64]) -> None:
            import torch

            self.goal = torch.from_numpy(targets.astype(np.float32))

        def size(self) -> int:
            return 2 * len(self.data)

        def sample(self, batch_size: int, env: Any = None) -> Any:
            import torch

            if self.cum is None:
                pick = self.rng.integers(2 * len(self.data), size=batch_size)
                rows, actions = torch.from_numpy(pick // 2), torch.from_numpy(pick % 2)
            else:
                u = self.rng.random(batch_size)
                r = np.minimum(np.searchsorted(self.cum, u, side="right"), len(self.data) - 1)
                rows, actions = torch.from_numpy(r), torch.from_numpy(self.rng.integers(2, size=batch_size))
            obs = self.obs[rows]
            rewards = self.goal[rows, actions].reshape(-1, 1)
            return ReplayBufferSamples(obs, actions.reshape(-1, 1), obs, torch.ones_like(rewards), rewards, None)

    return ExhaustiveBuffer


class FittedQ(DQNAgent):
    """SB3 DQN on the full training data, no exploration (module docstring). Name ``<reward>-fqi``."""

    def __init__(self, reward: str = "bor", settings: FittedQConfig | None = None) -> None:
        super().__init__(reward)
        self.settings = settings or FittedQConfig()  # type: ignore[assignment]
        self.name = f"{reward}-fqi"

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> FittedQ:
        import torch

        s: FittedQConfig = self.settings  # type: ignore[assignment]
        config = learned_episode(config, s.break_even)
        torch_on_one_thread()
        width = observation_width(queries, config.observation)
        self.observation = observation_of(queries[0], config.observation)
        train, checkpoints = held_out_checkpoints(queries, s.held_out, s.held_out_seed, config, _stop_rule)
        data = Transitions(train, config)
        self.model = quiet(
            value_dqn_class(False, s.loss)(
                "MlpPolicy",
                spaces_env(width),
                learning_rate=s.learning_rate,
                batch_size=s.batch_size,
                learning_starts=0,
                gamma=config.gamma,
                policy_kwargs=policy_kwargs(s.net_arch, self.observation, s.listwise_net),
                replay_buffer_class=_buffer_class(),
                replay_buffer_kwargs={"transitions": data, "seed": seed, "depth_weight": s.depth_weight},
                seed=seed,
                device="cpu",
                verbose=0,
            )
        )
        q_net, target, buffer = self.model.q_net, self.model.q_net_target, self.model.replay_buffer
        obs = torch.from_numpy(np.ascontiguousarray(data.feats))
        self.checkpoints = checkpoints
        done = 0
        with training_bar(s.gradient_steps, f"{self.name} s{seed}") as bar:
            while done < s.gradient_steps:
                target.load_state_dict(q_net.state_dict())
                buffer.set_targets(data.targets(forward_rows(target, obs).double().numpy(), s.n_steps))
                chunk = min(s.target_update_interval, s.gradient_steps - done)
                self.model.train(gradient_steps=chunk, batch_size=s.batch_size)
                done += chunk
                bar.update(chunk)
                if self.checkpoints is not None:
                    self.checkpoints.see(done, q_net)
        if self.checkpoints is not None:
            self.checkpoints.restore(q_net)
        self.model.replay_buffer = None  # the data stays with the caller, not with the fitted policy
        return self


register(
    "fqi",
    lambda reward, settings: FittedQ(reward, settings),
    group="agent",
    stochastic=True,
    uses_reward=True,
    description="fitted Q-iteration: SB3 DQN on every transition of every training query (no exploration; "
    "Monte Carlo targets of the greedy policy, squared error, early stopping on held-out training queries; see "
    "agents/fittedq.py)",
    config=FittedQConfig,
    observes=True,
    objective=return_objective,
    budget="gradient_steps",
    torch_at_inference=True,
    view="stepwise",
)
