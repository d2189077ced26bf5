"""Deep Q-network depth policy on stable-baselines3.

SB3's DQN defaults are tuned for Atari (e.g. a target update every 10,000 steps)
and fail on this task, so every setting is explicit. :class:`DQNConfig`'s
defaults are the paper's network and optimiser (MLP 64-64, Adam lr 1e-3, replay
50,000, batch 128, target update every 500 steps, epsilon 1.0 -> 0.05 linear)
with the learning budget and update schedule chosen on an inner validation split
of the BFCL training queries (``shortlist tune``; the test split is never used):
30,000 environment steps, epsilon decaying over the first 30% of them, 1,000
random steps first, and four environments stepped together (``n_envs=4``) with
one gradient step per vectorised step, i.e. one per four environment steps.

How the schedule was chosen (validation mean reward, mean over seeds 42/123/456):
``train_freq=1`` with one environment beat SB3's ``train_freq=4`` on both scorers
(an earlier grid, ``--grid train_freq=1,4 exploration_fraction=0.3,0.5``, in the git
history of ``results/tuning/``). The current grid, ``shortlist tune --scorer {bm25,minilm}
--grid n_envs=1,4,8 gradient_steps=1,2`` (``results/tuning/``, with manifests), gave
for one environment vs four: BM25 6.999 vs 6.945, MiniLM 6.742 vs 6.840 (differences
inside the seed ranges) at 48 s vs 15 s per policy on this machine; eight
environments lost 0.07 to 0.29 against one. Four environments train 3.3x faster for the same
validation reward, which is what lets the study run every main condition on five
train/test splits.

Exploring starts (``exploring_starts=0.5``: half of the training episodes start at a
uniformly drawn depth). ``shortlist tune --benchmark {bfcl,metatool} --scorer {bm25,minilm}
--grid exploring_starts=0,0.25,0.5`` (``results/tuning/exploring_starts/``) gave validation mean
reward 0 / 0.25 / 0.5: BFCL+BM25 6.625 / 6.686 / 6.607, BFCL+MiniLM 6.539 / 6.595 / 6.667,
MetaTool+BM25 2.643 / 2.948 / 2.986, MetaTool+MiniLM 4.183 / 4.158 / 4.175; 0.5 has the largest
total gain. It lowered MetaTool+BM25's whole-list rate on validation but did not remove it.

n-step returns (``n_steps=4``) against the runaway to K = N. Some policies never stopped and showed
the whole list (7% of MetaTool+BM25 test queries over five splits with one-step targets). The
cause: a tied tail (MetaTool+BM25: 89% of each list ties at BM25 = 0) is a long chain of nearly
identical observations, and a one-step target ``-c + gamma max_a Q(s', a)`` with s' ~ s feeds an
over-estimate of CONTINUE back into itself: the runaway policies of the earlier study valued
CONTINUE above STOP at every depth of such a tail, up to the cap (:meth:`DQNAgent.q_values` on the
features of one of their whole-list queries shows it). An n-step target sums n observed
rewards before it bootstraps, so the chain of bootstraps through the tail is n times shorter.
Chosen on validation with ``shortlist tune --benchmark B --scorer S --grid n_steps=1,4
double_q=false,true`` (``results/tuning/n_steps/``, BFCL and MetaTool with both scorers and the
hardest synthetic condition): the two settings with n_steps=4 are the only ones with no whole-list
episode in any validation run (one-step targets: up to 40% on a MetaTool+BM25 seed; one-step
Double-DQN targets, van Hasselt et al. 2016: up to 1.4%), and of the two, plain targets
(``double_q=False``) have the higher mean reward. Against one-step targets, n_steps=4 changes
validation mean reward by -0.08 (BFCL+BM25), -0.03 (BFCL+MiniLM), +0.38 (MetaTool+BM25), -0.03
(MetaTool+MiniLM) and -0.12 (synthetic d' = 0.5, where it stops earlier); one-step Double-DQN
targets would have gained slightly more on the four benchmark conditions (+0.25 against +0.23 in
total) but kept the runaway.

Undiscounted training on the judged objective, and the budget. Every learner now trains with gamma = 1 on the
net reward it is judged on (issue 27). ``shortlist tune --agent dqn --benchmark {bfcl,metatool} --scorer bm25
--gamma 1 --grid total_timesteps=15000,30000 train_freq=1,2`` (``results/tuning/dqn-gamma1/``, validation net
reward, mean over seeds 42/123/456; BFCL+BM25: 30,000/1 6.578, 30,000/2 6.644, 15,000/1 6.610, 15,000/2 6.696;
MetaTool+BM25 in ``metatool-bm25_mean.csv`` there): 15,000 steps with a gradient step every second vectorised
step (``train_freq`` 2) is at least as good as 30,000 with every step, at half the environment steps and a
quarter of the gradient steps: the defaults.

The value loss: squared error, not SB3's Huber loss (issue 39). A STOP's terminal reward is two-point (0, or
log2(N/k) when the shortlist holds the gold), and the Huber loss with delta 1 does not estimate its mean but a
point within 1 of the likelier value (:mod:`agents.sb3`): on bfcl-minilm the Huber DQN valued STOP at depth 1 above
every deeper stop and stopped at K = 1 on every test query. ``shortlist tune --agent dqn --benchmark B --scorer S
--grid loss=huber,mse n_steps=1,4 total_timesteps=7500,15000`` on the five base conditions
(``results/tuning/dqn-loss/``; validation net reward, mean over seeds 42/123/456; bfcl-bm25 / bfcl-minilm /
metatool-bm25 / metatool-minilm / toolbench-minilm): the former defaults (Huber, n = 4, 15,000 steps) 6.696 /
6.648 / 3.303 / 4.044 / 3.463 (sum 24.15), squared error with the rest unchanged 6.846 / 7.014 / 3.341 / 4.092 /
3.538 (sum 24.83, the best of the eight settings). With squared error, one-step targets lose again (sum 24.11:
deep stops, mean K up to 14.9 on bfcl-bm25) and 7,500 steps lose 0.27 in sum (24.56), most on bfcl-minilm
(6.809) and toolbench-minilm (3.414): the defaults keep n_steps = 4 and 15,000 steps.

Inference is batched: the Q-network is applied to every (query, depth)
observation at once and each query stops at its first depth where
Q(STOP) >= Q(CONTINUE) (ties pick STOP). Agents are saved in SB3's zip format;
:meth:`DQNAgent.load` never unpickles it: it reads only the network weights with
``torch.load(weights_only=True)`` into a freshly built Q-network.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agents.base import (
    check_observation_set,
    greedy_depths,
    learned_episode,
    return_objective,
    torch_on_one_thread,
    training_bar,
)
from agents.registry import register
from agents.sb3 import (
    Checkpoints,
    batched_stop,
    check_loss,
    forward_rows,
    held_out_checkpoints,
    load_weights,
    policy_kwargs,
    quiet,
    read_sb3,
    save_sb3,
    spaces_env,
    value_dqn_class,
    vector_env,
)
from envs import EpisodeConfig, Observer, RankedQuery
from envs.features import OBSERVATIONS, observation_of, observation_width


@dataclass(frozen=True)
class DQNConfig:
    """DQN settings (SB3 argument names)."""

    total_timesteps: int = 15_000
    """Environment steps of training (15,000 with ``train_freq`` 2: as good on validation as 30,000 with 1 at a
    quarter of the gradient steps; see the module docstring)."""
    learning_rate: float = 1e-3
    """Adam learning rate."""
    buffer_size: int = 50_000
    """Replay buffer capacity."""
    batch_size: int = 128
    """Minibatch size."""
    target_update_interval: int = 500
    """Environment steps between target-network syncs."""
    exploration_initial_eps: float = 1.0
    """Initial epsilon."""
    exploration_final_eps: float = 0.05
    """Final epsilon."""
    exploration_fraction: float = 0.3
    """Fraction of training over which epsilon decays linearly."""
    learning_starts: int = 1_000
    """Steps of random play before the first gradient step."""
    train_freq: int = 2
    """Vectorised steps (of all ``n_envs`` environments) between gradient updates (see the module docstring)."""
    gradient_steps: int = 1
    """Gradient steps per update."""
    net_arch: tuple[int, ...] = (64, 64)
    """Hidden layer sizes of the Q-network MLP."""
    exploring_starts: float = 0.5
    """Probability that a training episode starts at a uniformly drawn depth (see
    :class:`envs.ShortlistEnv`; chosen on validation, see the module docstring); evaluation always
    starts at depth 1."""
    n_envs: int = 4
    """Environments stepped together (SB3 ``DummyVecEnv``); ``train_freq`` then counts steps of all of
    them at once and the target-update interval is divided by ``n_envs`` (SB3's rule)."""
    double_q: bool = False
    """Double DQN targets (van Hasselt et al. 2016): the online network picks the next action, the
    target network values it, instead of the target network's own max."""
    n_steps: int = 4
    """n-step returns (SB3's ``NStepReplayBuffer``): the target sums n observed rewards before it
    bootstraps (4: chosen on validation against the runaway to K = N; see the module docstring)."""
    break_even: bool = True
    """Stop at the latest at each query's break-even depth (:func:`agents.base.learned_episode`)."""
    loss: str = "mse"
    """Value loss: ``mse`` (squared error, which estimates the mean of a two-point terminal reward; chosen on
    validation, see the module docstring) or ``huber`` (SB3's ``smooth_l1_loss``; :mod:`agents.sb3`)."""
    held_out: float = 0.0
    """Share of the training queries held out to choose the weights (early stopping): the greedy policy is scored
    on them every ``eval_every`` environment steps and at the end, and the best weights are kept (ties: the
    earlier). 0: no hold-out, the last weights (trained on every training query): on validation a 30% hold-out
    gains nothing here (``shortlist tune --agent dqn --grid held_out=0,0.3``, ``results/tuning/dqn-held-out/``;
    numbers in docs/policies.md), unlike fitted Q's (:mod:`agents.fittedq`)."""
    held_out_seed: int = 99
    """Seed of the hold-out split (a seeded permutation of the sorted query ids, :func:`agents.auto.inner_split`)."""
    eval_every: int = 1_000
    """Environment steps between two scores on the held-out queries (with ``held_out`` > 0)."""
    listwise_net: bool = True
    """On the ``listwise`` observation, read the per-item block with weights shared across the ranks
    (:func:`agents.sb3.listwise_extractor_class`, the listwise posterior's form); false: a plain MLP on all columns.
    No effect on the other observation sets."""

    def __post_init__(self) -> None:
        if self.total_timesteps < 1:
            raise ValueError(f"DQNConfig.total_timesteps must be >= 1, got {self.total_timesteps}")
        if not 0 <= self.learning_starts < self.total_timesteps:
            raise ValueError(
                f"DQNConfig.learning_starts ({self.learning_starts}) must lie in [0, total_timesteps = "
                f"{self.total_timesteps}): the network would never train"
            )
        if not (math.isfinite(self.exploration_fraction) and 0 < self.exploration_fraction <= 1):
            raise ValueError(f"DQNConfig.exploration_fraction must lie in (0, 1], got {self.exploration_fraction}")
        for name in ("train_freq", "target_update_interval", "gradient_steps", "batch_size", "buffer_size"):
            if getattr(self, name) < 1:
                raise ValueError(f"DQNConfig.{name} must be >= 1, got {getattr(self, name)}")
        if not (math.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise ValueError(f"DQNConfig.learning_rate must be finite and > 0, got {self.learning_rate}")
        if not self.net_arch or any(h < 1 for h in self.net_arch):
            raise ValueError(f"DQNConfig.net_arch must be hidden sizes >= 1, got {self.net_arch}")
        if not 1 <= self.n_envs <= 64:
            raise ValueError(f"DQNConfig.n_envs must lie in 1..64, got {self.n_envs}")
        if not 0.0 <= self.exploring_starts <= 1.0:
            raise ValueError(f"DQNConfig.exploring_starts must lie in [0, 1], got {self.exploring_starts}")
        if self.n_steps < 1:
            raise ValueError(f"DQNConfig.n_steps must be >= 1, got {self.n_steps}")
        check_loss("DQNConfig", self.loss)
        if not 0.0 <= self.held_out < 1.0:
            raise ValueError(f"DQNConfig.held_out must lie in [0, 1), got {self.held_out}")
        if self.eval_every < 1:
            raise ValueError(f"DQNConfig.eval_every must be >= 1, got {self.eval_every}")


class _BarCallback:
    """SB3 callback that advances a progress bar by one per environment step of every env and, every
    ``every`` environment steps, scores the greedy policy on held-out training queries (no effect on training)."""

    def __new__(cls, bar: Any, checkpoints: Checkpoints | None = None, every: int = 0) -> Any:
        from stable_baselines3.common.callbacks import BaseCallback

        class _Cb(BaseCallback):
            def _on_step(self) -> bool:
                n = self.training_env.num_envs
                bar.update(n)
                t = self.num_timesteps
                if checkpoints is not None and every and t // every != (t - n) // every:
                    checkpoints.see(t, self.model.q_net)  # type: ignore[attr-defined]
                return True

        return _Cb()


def _stop_rule(q_net: Any, feats: NDArray[np.float32]) -> NDArray[np.bool_]:
    """Q(STOP) >= Q(CONTINUE) under ``q_net`` for every row of ``feats`` (:func:`agents.sb3.batched_stop`)."""
    return batched_stop(q_net, feats)


def gradient_steps(s: DQNConfig) -> int:
    """Gradient steps SB3's DQN takes in one fit with settings ``s``: one update of ``gradient_steps`` after
    every ``train_freq`` vectorised steps (``n_envs`` environment steps each) once more than
    ``learning_starts`` environment steps are done, until ``total_timesteps``: the budget :mod:`agents.fittedq`
    matches (tests check it against the count SB3 keeps)."""
    per_update = s.train_freq * s.n_envs
    updates = -(-s.total_timesteps // per_update)  # the last rollout may overshoot the total
    before = s.learning_starts // per_update  # rollouts ending at or below learning_starts train nothing
    return (updates - before) * s.gradient_steps


class DQNAgent:
    """SB3 DQN trained on :class:`envs.ShortlistEnv` (see module docstring)."""

    artifact = "agent.zip"
    stochastic = True
    extra_names: tuple[str, ...] = ()
    """Columns observed after the named set's (none here; a subclass's observer adds them)."""

    def __init__(self, reward: str = "bor", settings: DQNConfig | None = None) -> None:
        self.reward = reward
        self.settings = settings or DQNConfig()
        self.name = f"{reward}-dqn"
        self.model: Any = None
        self.observation = ""  # the resolved observation set it was trained on
        self.checkpoints: Checkpoints | None = None

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> DQNAgent:
        s = self.settings
        config = learned_episode(config, s.break_even)
        torch_on_one_thread()
        observation_width(queries, config.observation)  # one observation set on every query (names one otherwise)
        self.observation = observation_of(queries[0], config.observation)
        observer = self._training_observer(queries, config)
        train, self.checkpoints = held_out_checkpoints(
            queries, s.held_out, s.held_out_seed, config, _stop_rule, observer, self._checkpoint_margin()
        )
        self.model = quiet(
            value_dqn_class(s.double_q, s.loss)(
                self._policy(),
                vector_env(train, config, s.exploring_starts, s.n_envs, seed, observer),
                n_steps=s.n_steps,
                learning_rate=s.learning_rate,
                buffer_size=s.buffer_size,
                batch_size=s.batch_size,
                target_update_interval=s.target_update_interval,
                exploration_initial_eps=s.exploration_initial_eps,
                exploration_final_eps=s.exploration_final_eps,
                exploration_fraction=s.exploration_fraction,
                learning_starts=s.learning_starts,
                train_freq=s.train_freq,
                gradient_steps=s.gradient_steps,
                gamma=config.gamma,
                policy_kwargs=self._policy_kwargs(self.observation),
                seed=seed,
                device="cpu",
                verbose=0,
            )
        )
        if self.checkpoints is not None and self.checkpoints.margin is not None:
            self.checkpoints.see(0, self.model.q_net)  # the start, the reference of the margin, before any step
        with training_bar(s.total_timesteps, f"{self.name} s{seed}") as bar:
            self.model.learn(
                total_timesteps=s.total_timesteps, callback=_BarCallback(bar, self.checkpoints, s.eval_every)
            )
        if self.checkpoints is not None:
            self.checkpoints.finish(self.model.num_timesteps, self.model.q_net)
        return self

    # The hooks a DQN that observes more than the named set overrides (:mod:`agents.residual`), with extra_names.

    def _training_observer(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> Observer | None:
        """What the training environment and the held-out scores observe (None: the named set)."""
        return None

    def _observer(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> Observer | None:
        """What the policy observes when it chooses depths for ``queries`` (None: the named set)."""
        return None

    def _checkpoint_margin(self) -> float | None:
        """The hold-out's margin over the first weights (:class:`agents.sb3.Checkpoints`; None: the best wins)."""
        return None

    def _policy(self) -> Any:
        """SB3's policy (class or name) of the Q-network."""
        return "MlpPolicy"

    def _policy_kwargs(self, observation: str) -> dict[str, Any]:
        """SB3's ``policy_kwargs`` for the Q-network on ``observation``."""
        return policy_kwargs(self.settings.net_arch, observation, self.settings.listwise_net)

    def q_values(self, feats: NDArray[np.float32]) -> NDArray[np.float32]:
        """Q(s, STOP), Q(s, CONTINUE) for a batch of observations, shape (B, 2)."""
        if self.model is None:
            raise RuntimeError(f"{self.name}: call fit() or load() first")
        return forward_rows(self.model.q_net, feats).numpy()

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        if self.model is None:
            raise RuntimeError(f"{self.name}: call fit() or load() first")
        if not queries:
            return np.zeros(0, dtype=np.int64)
        check_observation_set(self.name, self.observation, queries, config)
        episode = learned_episode(config, self.settings.break_even)
        rule = self.model.q_net
        return greedy_depths(queries, episode, lambda f: _stop_rule(rule, f), self._observer(queries, episode))

    def save(self, path: Path) -> None:
        """SB3 zip with the observation set added (see the module docstring on why it is never unpickled)."""
        if self.model is None:
            raise RuntimeError(f"{self.name}: nothing to save")
        save_sb3(self.model, path, self.observation)

    @classmethod
    def load(cls, path: Path, reward: str = "bor", settings: Any = None) -> DQNAgent:
        """Rebuild the Q-network and load only its weights (``policy.pth`` inside SB3's zip) with
        ``torch.load(weights_only=True)``, which cannot execute code: a crafted zip is refused,
        never unpickled. The observation set is the one the zip records (:func:`agents.sb3.save_sb3`)."""
        from stable_baselines3 import DQN

        agent = cls(reward, settings)
        state, agent.observation = read_sb3(path, "DQN agent", "q_net.q_net.0.weight")
        width = len(OBSERVATIONS[agent.observation]) + len(agent.extra_names)
        agent.model = DQN(
            agent._policy(),
            spaces_env(width),
            policy_kwargs=agent._policy_kwargs(agent.observation),
            device="cpu",
            learning_starts=0,
            buffer_size=1,
        )
        load_weights(agent.model, state, path, f"{list(agent.settings.net_arch)} Q-network")
        return agent


register(
    "dqn",
    lambda reward, settings: DQNAgent(reward, settings),
    group="agent",
    stochastic=True,
    uses_reward=True,
    description="SB3 DQN on the score features, plus the second scorer's on -hybrid conditions (paper network, "
    "optimiser and replay, squared-error value loss; see agents/dqn.py)",
    config=DQNConfig,
    observes=True,
    objective=return_objective,
    budget="total_timesteps",
    torch_at_inference=True,
    view="stepwise",
)
