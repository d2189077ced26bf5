"""Proximal policy optimisation (SB3's PPO) on the same episodes and observation as the DQN.

A policy-gradient learner beside the value learners (:mod:`agents.dqn`, :mod:`agents.fittedq`): it learns a
STOP/CONTINUE distribution directly, from whole episodes (generalised advantage estimation with SB3's critic),
so neither a value loss on two-point terminal rewards nor a chain of bootstrapped values decides its policy.
The environment and its settings are the DQN's: :class:`envs.ShortlistEnv` with the episode's step cost and
discount (gamma 1 in the study: the judged net reward), ``n_envs`` vectorised copies, exploring starts during
training, the break-even cap. SB3's defaults (2,048 steps per rollout, batch 64) are for longer tasks; every
setting is explicit here.

The budget (``shortlist tune --agent ppo --benchmark B --scorer S --grid total_timesteps=15000,30000
n_epochs=5,10``, ``results/tuning/ppo/``; validation net reward on the inner split of the training queries, mean
over seeds 42/123/456; bfcl-bm25 / bfcl-minilm / metatool-bm25 / metatool-minilm / toolbench-minilm): 30,000 steps
with 5 epochs per rollout 6.982 / 7.025 / 3.294 / 4.121 / 3.603 (sum 25.02, the best of the four; 10 epochs 24.88;
15,000 steps 24.71 and 24.22), 0.08 below the listwise posterior's 25.10 on the same splits
(``results/tuning/posterior-m/``, m = 60).

Inference is batched and deterministic: each query stops at its first depth where the policy's STOP
probability is at least its CONTINUE probability. Early stopping as the DQN's (``held_out``): the greedy policy
is scored on held-out training queries after every rollout and the best weights kept. Saved in SB3's zip with
the observation set recorded, loaded with ``torch.load(weights_only=True)`` (:mod:`agents.sb3`).
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
    held_out_checkpoints,
    load_weights,
    policy_kwargs,
    quiet,
    read_sb3,
    save_sb3,
    spaces_env,
    unchecked_distributions,
    vector_env,
)
from envs import EpisodeConfig, RankedQuery
from envs.features import OBSERVATIONS, observation_of, observation_width

__all__ = ["PPOAgent", "PPOConfig"]


@dataclass(frozen=True)
class PPOConfig:
    """PPO settings (SB3 argument names)."""

    total_timesteps: int = 30_000
    """Environment steps of training (all environments together; chosen on validation, module docstring)."""
    n_steps: int = 256
    """Steps per environment in one rollout (a rollout holds ``n_steps * n_envs`` steps)."""
    n_envs: int = 4
    """Environments stepped together (SB3's ``DummyVecEnv``)."""
    batch_size: int = 256
    """Minibatch size of the policy and value updates."""
    n_epochs: int = 5
    """Passes over each rollout (5: as good on validation as 10 at half the update cost; module docstring)."""
    learning_rate: float = 3e-4
    """Adam learning rate."""
    gae_lambda: float = 0.95
    """GAE lambda (1: Monte Carlo advantages)."""
    clip_range: float = 0.2
    """PPO's clip of the probability ratio."""
    ent_coef: float = 0.0
    """Entropy bonus."""
    net_arch: tuple[int, ...] = (64, 64)
    """Hidden layer sizes of the policy and value MLPs (SB3: separate networks of these sizes)."""
    exploring_starts: float = 0.5
    """Probability that a training episode starts at a uniformly drawn depth (as the DQN's)."""
    held_out: float = 0.0
    """Share of the training queries held out to choose the weights after each rollout (0: none; a 30% hold-out
    gains nothing on validation: ``results/tuning/ppo-held-out/``, numbers in docs/policies.md)."""
    held_out_seed: int = 99
    """Seed of the hold-out split (:func:`agents.auto.inner_split` of the sorted query ids)."""
    break_even: bool = True
    """Stop at the latest at each query's break-even depth (:func:`agents.base.learned_episode`)."""
    listwise_net: bool = True
    """On the ``listwise`` observation, read the per-item block with weights shared across the ranks
    (:func:`agents.sb3.listwise_extractor_class`, the listwise posterior's form); false: a plain MLP on all columns.
    No effect on the other observation sets."""

    def __post_init__(self) -> None:
        for name in ("total_timesteps", "n_steps", "batch_size", "n_epochs"):
            if getattr(self, name) < 1:
                raise ValueError(f"PPOConfig.{name} must be >= 1, got {getattr(self, name)}")
        if not 1 <= self.n_envs <= 64:
            raise ValueError(f"PPOConfig.n_envs must lie in 1..64, got {self.n_envs}")
        if self.n_steps * self.n_envs < 2:
            raise ValueError("PPOConfig: a rollout (n_steps * n_envs) needs at least 2 steps")
        for name, lo, hi in (("gae_lambda", 0.0, 1.0), ("exploring_starts", 0.0, 1.0), ("clip_range", 0.0, 1.0)):
            v = getattr(self, name)
            if not (math.isfinite(v) and lo <= v <= hi):
                raise ValueError(f"PPOConfig.{name} must lie in [{lo}, {hi}], got {v}")
        if not (math.isfinite(self.learning_rate) and self.learning_rate > 0):
            raise ValueError(f"PPOConfig.learning_rate must be finite and > 0, got {self.learning_rate}")
        if not (math.isfinite(self.ent_coef) and self.ent_coef >= 0):
            raise ValueError(f"PPOConfig.ent_coef must be finite and >= 0, got {self.ent_coef}")
        if not self.net_arch or any(h < 1 for h in self.net_arch):
            raise ValueError(f"PPOConfig.net_arch must be hidden sizes >= 1, got {self.net_arch}")
        if not 0.0 <= self.held_out < 1.0:
            raise ValueError(f"PPOConfig.held_out must lie in [0, 1), got {self.held_out}")


def _stop_rule(policy: Any, feats: NDArray[np.float32]) -> NDArray[np.bool_]:
    """P(STOP) >= P(CONTINUE) under ``policy`` for every row of ``feats`` (:func:`agents.sb3.batched_stop` on its
    action logits)."""
    return batched_stop(lambda x: policy.get_distribution(x).distribution.logits, feats)


class _Rollouts:
    """SB3 callback: a progress bar, and the held-out score after every rollout (no effect on training)."""

    def __new__(cls, bar: Any, checkpoints: Checkpoints | None) -> Any:
        from stable_baselines3.common.callbacks import BaseCallback

        class _Cb(BaseCallback):
            def _on_step(self) -> bool:
                bar.update(self.training_env.num_envs)
                return True

            def _on_rollout_start(self) -> None:  # the previous rollout's update is done
                if checkpoints is not None and self.num_timesteps > 0:
                    checkpoints.see(self.num_timesteps, self.model.policy)

        return _Cb()


class PPOAgent:
    """SB3 PPO trained on :class:`envs.ShortlistEnv` (module docstring). Name ``<reward>-ppo``."""

    artifact = "agent.zip"
    stochastic = True

    def __init__(self, reward: str = "bor", settings: PPOConfig | None = None) -> None:
        self.reward = reward
        self.settings = settings or PPOConfig()
        self.name = f"{reward}-ppo"
        self.model: Any = None
        self.observation = ""
        self.checkpoints: Checkpoints | None = None

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> PPOAgent:
        from stable_baselines3 import PPO

        s = self.settings
        config = learned_episode(config, s.break_even)
        torch_on_one_thread()
        observation_width(queries, config.observation)
        self.observation = observation_of(queries[0], config.observation)
        train, self.checkpoints = held_out_checkpoints(queries, s.held_out, s.held_out_seed, config, _stop_rule)
        self.model = quiet(
            PPO(
                "MlpPolicy",
                vector_env(train, config, s.exploring_starts, s.n_envs, seed),
                learning_rate=s.learning_rate,
                n_steps=s.n_steps,
                batch_size=s.batch_size,
                n_epochs=s.n_epochs,
                gamma=config.gamma,
                gae_lambda=s.gae_lambda,
                clip_range=s.clip_range,
                ent_coef=s.ent_coef,
                policy_kwargs=policy_kwargs(s.net_arch, self.observation, s.listwise_net),
                seed=seed,
                device="cpu",
                verbose=0,
            )
        )
        with training_bar(s.total_timesteps, f"{self.name} s{seed}") as bar, unchecked_distributions():
            self.model.learn(total_timesteps=s.total_timesteps, callback=_Rollouts(bar, self.checkpoints))
        if self.checkpoints is not None:
            self.checkpoints.finish(self.model.num_timesteps, self.model.policy)
        return self

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        if self.model is None:
            raise RuntimeError(f"{self.name}: call fit() or load() first")
        if not queries:
            return np.zeros(0, dtype=np.int64)
        check_observation_set(self.name, self.observation, queries, config)
        policy = self.model.policy
        return greedy_depths(
            queries, learned_episode(config, self.settings.break_even), lambda f: _stop_rule(policy, f)
        )

    def save(self, path: Path) -> None:
        """SB3's zip with the observation set added (:func:`agents.sb3.save_sb3`)."""
        if self.model is None:
            raise RuntimeError(f"{self.name}: nothing to save")
        save_sb3(self.model, path, self.observation)

    @classmethod
    def load(cls, path: Path, reward: str = "bor", settings: Any = None) -> PPOAgent:
        """Rebuild the policy and load only its weights (``torch.load(weights_only=True)``: never unpickled)."""
        from stable_baselines3 import PPO

        agent = cls(reward, settings)
        state, agent.observation = read_sb3(path, "PPO agent", "mlp_extractor.policy_net.0.weight")
        env = spaces_env(len(OBSERVATIONS[agent.observation]))
        kwargs = policy_kwargs(agent.settings.net_arch, agent.observation, agent.settings.listwise_net)
        agent.model = PPO("MlpPolicy", env, policy_kwargs=kwargs, device="cpu", n_steps=2, batch_size=2)
        load_weights(agent.model, state, path, f"{list(agent.settings.net_arch)} PPO policy")
        return agent


register(
    "ppo",
    lambda reward, settings: PPOAgent(reward, settings),
    group="agent",
    stochastic=True,
    uses_reward=True,
    description="SB3 PPO (policy gradient) on the same episodes and observation as the DQN (see agents/ppo.py)",
    config=PPOConfig,
    observes=True,
    objective=return_objective,
    budget="total_timesteps",
    torch_at_inference=True,
    view="stepwise",
)
