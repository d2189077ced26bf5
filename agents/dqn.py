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

Inference is batched: the Q-network is applied to every (query, depth)
observation at once and each query stops at its first depth where
Q(STOP) >= Q(CONTINUE) (ties pick STOP). Agents are saved in SB3's zip format;
:meth:`DQNAgent.load` never unpickles it: it reads only the network weights with
``torch.load(weights_only=True)`` into a freshly built Q-network.
"""

from __future__ import annotations

import math
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agents.base import (
    check_observation,
    greedy_depths,
    learned_episode,
    return_objective,
    torch_on_one_thread,
    training_bar,
)
from agents.registry import register
from envs import EpisodeConfig, RankedQuery, ShortlistEnv
from envs.features import N_FEATURES, OBSERVATIONS, observation_width


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


class _BarCallback:
    """SB3 callback that advances a progress bar by one per environment step of every env (no effect on training)."""

    def __new__(cls, bar: Any) -> Any:
        from stable_baselines3.common.callbacks import BaseCallback

        class _Cb(BaseCallback):
            def _on_step(self) -> bool:
                bar.update(self.training_env.num_envs)
                return True

        return _Cb()


def _double_dqn_class() -> Any:
    """SB3's DQN with Double-DQN targets: only the target computation of ``DQN.train`` differs
    (``argmax`` by the online network, value by the target network); everything else is SB3's."""
    import torch.nn.functional as F
    from stable_baselines3 import DQN

    class DoubleDQN(DQN):
        def train(self, gradient_steps: int, batch_size: int = 100) -> None:
            import torch

            self.policy.set_training_mode(True)
            self._update_learning_rate(self.policy.optimizer)
            losses = []
            assert self.replay_buffer is not None, "train() runs inside learn(), after the buffer is built"
            for _ in range(gradient_steps):
                data = self.replay_buffer.sample(batch_size, env=self._vec_normalize_env)
                discounts = data.discounts if data.discounts is not None else self.gamma
                with torch.no_grad():
                    best = self.q_net(data.next_observations).argmax(dim=1, keepdim=True)
                    next_q = torch.gather(self.q_net_target(data.next_observations), 1, best)
                    target = data.rewards + (1 - data.dones) * discounts * next_q
                current = torch.gather(self.q_net(data.observations), 1, data.actions.long())
                loss = F.smooth_l1_loss(current, target)
                losses.append(loss.item())
                self.policy.optimizer.zero_grad()
                loss.backward()
                torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.policy.optimizer.step()
            self._n_updates += gradient_steps
            self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
            self.logger.record("train/loss", np.mean(losses))

    return DoubleDQN


class DQNAgent:
    """SB3 DQN trained on :class:`envs.ShortlistEnv` (see module docstring)."""

    artifact = "agent.zip"
    stochastic = True

    def __init__(self, reward: str = "bor", settings: DQNConfig | None = None) -> None:
        self.reward = reward
        self.settings = settings or DQNConfig()
        self.name = f"{reward}-dqn"
        self.model: Any = None

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> DQNAgent:
        from stable_baselines3 import DQN
        from stable_baselines3.common.logger import Logger

        s = self.settings
        config = learned_episode(config, s.break_even)
        torch_on_one_thread()
        from stable_baselines3.common.vec_env import DummyVecEnv

        def make() -> Any:
            def build() -> ShortlistEnv:
                return ShortlistEnv(queries, config, exploring_starts=s.exploring_starts)

            return build

        env: Any
        if s.n_envs == 1:
            env = make()()
            env.reset(seed=seed)
            env.action_space.seed(seed)
        else:
            env = DummyVecEnv([make() for _ in range(s.n_envs)])
            for other in env.envs[1:]:  # one set of per-query tables for all of them (same numbers, built once)
                other.share_tables(env.envs[0])
            env.seed(seed)
            env.action_space.seed(seed)
        self.model = (_double_dqn_class() if s.double_q else DQN)(
            "MlpPolicy",
            env,
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
            policy_kwargs={"net_arch": list(s.net_arch)},
            seed=seed,
            device="cpu",
            verbose=0,
        )
        # SB3's default logger makes a /tmp/SB3-<time> folder per model, even with verbose=0: log nowhere instead
        self.model.set_logger(Logger(folder=None, output_formats=[]))
        with training_bar(s.total_timesteps, f"{self.name} s{seed}") as bar:
            self.model.learn(total_timesteps=s.total_timesteps, callback=_BarCallback(bar))
        return self

    def q_values(self, feats: NDArray[np.float32]) -> NDArray[np.float32]:
        """Q(s, STOP), Q(s, CONTINUE) for a batch of observations, shape (B, 2)."""
        import torch

        if self.model is None:
            raise RuntimeError(f"{self.name}: call fit() or load() first")
        with torch.no_grad():
            out = self.model.q_net(torch.as_tensor(feats, dtype=torch.float32))
        return out.numpy()

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        if self.model is None:
            raise RuntimeError(f"{self.name}: call fit() or load() first")
        width = int(self.model.observation_space.shape[0])
        if queries:
            check_observation(self.name, width, observation_width(queries, config.observation))

        def stop(feats: NDArray[np.float32]) -> NDArray[np.bool_]:
            q = np.concatenate([self.q_values(feats[i : i + 65536]) for i in range(0, len(feats), 65536)])
            return q[:, 0] >= q[:, 1]

        return greedy_depths(queries, learned_episode(config, self.settings.break_even), stop)

    def save(self, path: Path) -> None:
        """SB3 zip (see the module docstring on why it is only loaded from our own run dirs)."""
        if self.model is None:
            raise RuntimeError(f"{self.name}: nothing to save")
        self.model.save(str(path))

    @classmethod
    def load(cls, path: Path, reward: str = "bor", settings: Any = None) -> DQNAgent:
        """Rebuild the Q-network and load only its weights (``policy.pth`` inside SB3's zip) with
        ``torch.load(weights_only=True)``, which cannot execute code: a crafted zip is refused,
        never unpickled."""
        import torch
        from stable_baselines3 import DQN

        agent = cls(reward, settings)
        try:
            with zipfile.ZipFile(path) as z, z.open("policy.pth") as f:
                state = torch.load(f, map_location="cpu", weights_only=True)
        except (zipfile.BadZipFile, KeyError, RuntimeError, EOFError, OSError) as e:
            raise ValueError(f"{path}: not a saved DQN agent ({e})") from e
        first = state.get("q_net.q_net.0.weight") if isinstance(state, dict) else None
        width = int(first.shape[1]) if first is not None and first.ndim == 2 else N_FEATURES
        if width not in (len(v) for v in OBSERVATIONS.values()):
            raise ValueError(f"{path}: the Q-network reads {width} features, not an observation set of this package")
        observation = next(name for name, names in OBSERVATIONS.items() if len(names) == width)
        aux = np.array([0.0, 1.0]) if observation == "hybrid" else None
        dummy = ShortlistEnv(
            [RankedQuery(np.array([1.0, 0.0]), np.array([1]), "dummy", aux_scores=aux)],
            EpisodeConfig(observation=observation),
        )
        agent.model = DQN(
            "MlpPolicy",
            dummy,
            policy_kwargs={"net_arch": list(agent.settings.net_arch)},
            device="cpu",
            learning_starts=0,
            buffer_size=1,
        )
        try:
            agent.model.policy.load_state_dict(state)
        except (RuntimeError, TypeError) as e:
            raise ValueError(f"{path}: weights do not fit a {list(agent.settings.net_arch)} Q-network ({e})") from e
        return agent


register(
    "dqn",
    lambda reward, settings: DQNAgent(reward, settings),
    group="agent",
    stochastic=True,
    uses_reward=True,
    description="SB3 DQN on the score features, plus the second scorer's on -hybrid conditions (paper network, "
    "optimiser and replay; see agents/dqn.py)",
    config=DQNConfig,
    observes=True,
    objective=return_objective,
    budget="total_timesteps",
    torch_at_inference=True,
)
