"""What the stable-baselines3 learners share (``dqn``, ``fqi``, ``ppo``): the value loss, the saved form and
the early stopping on held-out training queries.

- :func:`value_dqn_class`: SB3's ``DQN`` with only the target (Double-DQN or not) and the loss of ``DQN.train``
  chosen. SB3's own is the Huber loss (``smooth_l1_loss``, delta 1), which does not estimate a mean: the terminal
  rewards here are two-point (0, or log2(N/k) when the gold is shown: 8.53 at k = 1 of N = 370), and the Huber
  M-estimate of a two-point target sits within 1 of the likelier point. With P(found at k = 1) = 0.718 on the
  bfcl-minilm training queries, STOP at 1 is worth 6.12 but its Huber estimate is 8.53 - 0.39 = 8.14
  (``0.718 x = 0.282`` for the distance x below 8.53), above the 7.35 it gives CONTINUE: the policy stops at 1
  on every query. Squared error (``loss="mse"``) estimates the mean.
- :func:`save_sb3` / :func:`read_sb3`: SB3's zip plus ``shortlist.json`` inside it (the observation set and its
  feature names), read back with ``torch.load(weights_only=True)`` only: never unpickled.
- :class:`HeldOut`: the mean net reward of a greedy STOP rule on held-out training queries (an inner split,
  :func:`agents.auto.inner_split`; never the test queries), and :class:`Checkpoints`, the best weights seen.
"""

from __future__ import annotations

import contextlib
import copy
import functools
import json
import math
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agents.base import stacked_features
from envs import EpisodeConfig, Observer, RankedQuery
from envs.features import LISTWISE_ITEM_NAMES, LISTWISE_RANKS, OBSERVATIONS

LOSSES: tuple[str, ...] = ("huber", "mse")
"""Value losses: SB3's Huber (``smooth_l1_loss``, delta 1) or squared error (module docstring)."""
META = "shortlist.json"
"""The entry this package adds to SB3's zip: the observation set the network reads and its feature names."""


def check_loss(owner: str, loss: str) -> None:
    """ValueError naming ``owner`` unless ``loss`` is one of :data:`LOSSES`."""
    if loss not in LOSSES:
        raise ValueError(f"{owner}.loss must be one of {', '.join(LOSSES)}, got {loss!r}")


def value_dqn_class(double_q: bool, loss: str) -> Any:
    """SB3's ``DQN`` itself (Huber loss, max target) or a subclass where only ``train``'s target and loss differ.

    ``double_q``: the online network picks the next action and the target network values it (van Hasselt et
    al. 2016) instead of the target network's own max; ``loss``: ``huber`` (SB3's) or ``mse``."""
    import torch.nn.functional as F
    from stable_baselines3 import DQN

    check_loss("value_dqn_class", loss)
    if not double_q and loss == "huber":
        return DQN
    loss_fn = F.mse_loss if loss == "mse" else F.smooth_l1_loss

    class ValueDQN(DQN):
        double = double_q
        value_loss = loss
        skip_ended = True
        """Skip the target network on a minibatch whose every transition ends its episode (``done`` = 1: no next
        value enters the target, which is the reward itself; fitted Q's buffer, :mod:`agents.fittedq`): the same
        numbers, one forward pass fewer per gradient step."""

        def train(self, gradient_steps: int, batch_size: int = 100) -> None:
            import torch

            self.policy.set_training_mode(True)
            self._update_learning_rate(self.policy.optimizer)
            losses = []
            assert self.replay_buffer is not None, "train() runs after the buffer is built"
            for _ in range(gradient_steps):
                data = self.replay_buffer.sample(batch_size, env=self._vec_normalize_env)
                discounts = data.discounts if data.discounts is not None else self.gamma
                with torch.no_grad():
                    if self.skip_ended and bool(data.dones.all()):
                        target = data.rewards  # = rewards + 0 * next value (ValueDQN.skip_ended)
                    else:
                        following = self.q_net_target(data.next_observations)
                        if double_q:
                            best = self.q_net(data.next_observations).argmax(dim=1, keepdim=True)
                            next_q = torch.gather(following, 1, best)
                        else:
                            next_q = following.max(dim=1).values.reshape(-1, 1)
                        target = data.rewards + (1 - data.dones) * discounts * next_q
                current = torch.gather(self.q_net(data.observations), 1, data.actions.long())
                value_loss = loss_fn(current, target)
                losses.append(value_loss.item())
                self.policy.optimizer.zero_grad()
                value_loss.backward()
                torch.nn.utils.clip_grad_norm_(self.policy.parameters(), self.max_grad_norm)
                self.policy.optimizer.step()
            self._n_updates += gradient_steps
            self.logger.record("train/n_updates", self._n_updates, exclude="tensorboard")
            self.logger.record("train/loss", np.mean(losses))

    return ValueDQN


LISTWISE_HEADS = 4
"""Softmax heads of :func:`listwise_extractor_class` (each a linear score of the per-item columns)."""
LISTWISE_HIDDEN = 16
"""Width of the per-item encoding :func:`listwise_extractor_class` pools over the ranks not yet shown."""


def listwise_layout(width: int) -> tuple[int, int]:
    """(summary columns, columns per rank) of a ``listwise`` observation of ``width`` columns."""
    for name, base in (("listwise", "score"), ("listwise-hybrid", "hybrid")):
        if width == len(OBSERVATIONS[name]):
            n = len(OBSERVATIONS[base])
            return n, (width - n) // LISTWISE_RANKS
    raise ValueError(f"{width} columns are not a listwise observation set")


@functools.cache
def listwise_extractor_class() -> type:
    """SB3 features extractor for the ``listwise`` observation: the per-item block read with weights shared
    across the ranks, in the form of the listwise posterior (:mod:`agents.posterior`).

    With x_i the per-item columns of rank i (i = 1..20) and s the summary columns, each of
    :data:`LISTWISE_HEADS` heads h scores the ranks and a "beyond them" pseudo-item in one softmax,
    ``p_ih = softmax_i(w_h . x_i + b_h ; v_h . s + c_h)``; the extractor returns s, then per head the mass on the
    ranks already shown, the mass on the ranks not yet shown and the mass on the next rank, then the mean over
    the ranks not yet shown of ``relu(U x_i + d)`` (:data:`LISTWISE_HIDDEN` wide). The network behind reads these
    41 (score) or 48 (hybrid) features instead of the 133 or 220 raw columns: the per-item view costs the extractor
    196 (score) or 304 (hybrid) weights, where a first MLP layer of 64 units on the raw columns has 8,576 or
    14,144."""
    import torch
    from stable_baselines3.common.torch_layers import BaseFeaturesExtractor
    from torch import nn

    shown_col = LISTWISE_ITEM_NAMES.index("shown")

    class ListwiseExtractor(BaseFeaturesExtractor):
        def __init__(self, observation_space: Any) -> None:
            base, per = listwise_layout(int(observation_space.shape[0]))
            super().__init__(observation_space, base + 3 * LISTWISE_HEADS + LISTWISE_HIDDEN)
            self.base, self.per = base, per
            self.score = nn.Linear(per, LISTWISE_HEADS)
            self.tail = nn.Linear(base, LISTWISE_HEADS)
            self.encode = nn.Sequential(nn.Linear(per, LISTWISE_HIDDEN), nn.ReLU())

        def forward(self, obs: Any) -> Any:
            summary = obs[:, : self.base]
            items = obs[:, self.base :].reshape(-1, LISTWISE_RANKS, self.per)
            shown = items[..., shown_col]  # (N, ranks): 1 on the ranks already shown (a prefix)
            logits = torch.cat([self.score(items), self.tail(summary).unsqueeze(1)], dim=1)
            p = torch.softmax(logits, dim=1)[:, :-1]  # (N, ranks, heads); the tail's mass left out
            ranks = torch.arange(LISTWISE_RANKS, device=obs.device).unsqueeze(0)
            following = (ranks == shown.sum(dim=1, keepdim=True)).to(obs.dtype)  # the first rank not shown
            unshown = 1.0 - shown
            pooled = (self.encode(items) * unshown.unsqueeze(-1)).sum(1) / unshown.sum(1, keepdim=True).clamp(min=1)
            masses = [(p * w.unsqueeze(-1)).sum(1) for w in (shown, unshown, following)]
            return torch.cat([summary, *masses, pooled], dim=1)

    return ListwiseExtractor


def policy_kwargs(net_arch: Sequence[int], observation: str, listwise_net: bool) -> dict[str, Any]:
    """SB3 ``policy_kwargs``: the hidden layers, and :func:`listwise_extractor_class` on a ``listwise`` set when
    ``listwise_net`` (else SB3's flattening extractor: a plain MLP on every column)."""
    out: dict[str, Any] = {"net_arch": list(net_arch)}
    if listwise_net and observation.startswith("listwise"):
        out["features_extractor_class"] = listwise_extractor_class()
    return out


FORWARD_ROWS = 4096
"""Rows per forward pass when a network reads a whole stacked data set (every training row, every held-out row).
Each row's output does not depend on the rows beside it, so the chunk size leaves every number as it is (checked
bit for bit, ``tests/test_agents_sb3_forward.py``); it only decides the time: on a 2-core Xeon, one pass over 120,000
listwise rows took 0.64 s whole, 0.59 s in chunks of 65,536 and 0.30 s in chunks of 4,096 (the intermediate
tensors stay in cache), a pass over the 13 score columns 0.078, 0.036 and 0.030 s."""


def forward_rows(net: Callable[[Any], Any], feats: Any) -> Any:
    """``net`` on every row of ``feats`` (an array or a float32 tensor), :data:`FORWARD_ROWS` rows at a time and
    without gradients: the outputs concatenated, a tensor of as many rows."""
    import torch

    x = torch.as_tensor(feats, dtype=torch.float32)
    with torch.no_grad():
        if len(x) <= FORWARD_ROWS:
            return net(x)
        return torch.cat([net(x[i : i + FORWARD_ROWS]) for i in range(0, len(x), FORWARD_ROWS)])


def batched_stop(scores: Callable[[Any], Any], feats: NDArray[np.float32]) -> NDArray[np.bool_]:
    """STOP where ``scores(x)[:, 0] >= scores(x)[:, 1]`` (ties pick STOP) for every row of ``feats``
    (:func:`forward_rows`): ``scores`` is a Q-network (DQN, fitted Q) or a policy's action logits (PPO)."""
    if len(feats) == 0:
        return np.zeros(0, dtype=bool)
    q = forward_rows(scores, feats)
    return (q[:, 0] >= q[:, 1]).numpy()


def load_weights(model: Any, state: dict, path: Path, what: str) -> Any:
    """``model`` with its policy's weights set to ``state`` (read by :func:`read_sb3`); ValueError naming ``path``
    when they do not fit ``what`` (the network the settings build)."""
    try:
        model.policy.load_state_dict(state)
    except (RuntimeError, TypeError) as e:
        raise ValueError(f"{path}: weights do not fit a {what} ({e})") from e
    return model


def spaces_env(width: int) -> Any:
    """A Gymnasium env that only carries the spaces (``Box(-1, 1, (width,))``, two actions): what SB3 needs to
    build a model whose weights are then loaded or trained without stepping an environment."""
    import gymnasium as gym
    from gymnasium import spaces

    class SpacesOnly(gym.Env[NDArray[np.float32], int]):
        def __init__(self) -> None:
            self.observation_space = spaces.Box(-1.0, 1.0, shape=(width,), dtype=np.float32)
            self.action_space = spaces.Discrete(2)  # type: ignore[assignment]

        def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
            raise RuntimeError("a spaces-only environment is never stepped")

        def step(self, action: int) -> Any:
            raise RuntimeError("a spaces-only environment is never stepped")

    return SpacesOnly()


def vector_env(
    queries: Sequence[RankedQuery],
    config: EpisodeConfig,
    exploring_starts: float,
    n_envs: int,
    seed: int,
    observer: Observer | None = None,
) -> Any:
    """The training environment of an SB3 learner: one :class:`envs.ShortlistEnv` (``n_envs`` = 1) or SB3's
    ``DummyVecEnv`` (:func:`_vec_env_class`) of ``n_envs`` copies sharing one set of per-query tables, seeded with
    ``seed``; ``observer`` replaces the named observation set (:class:`envs.Observer`)."""
    from envs import ShortlistEnv

    def make() -> Callable[[], ShortlistEnv]:
        return lambda: ShortlistEnv(queries, config, exploring_starts=exploring_starts, observer=observer)

    env: Any
    if n_envs == 1:
        env = make()()
        env.reset(seed=seed)
    else:
        env = _vec_env_class()([make() for _ in range(n_envs)])
        for other in env.envs[1:]:  # one set of per-query tables for all of them (same numbers, built once)
            other.share_tables(env.envs[0])
        env.seed(seed)
    env.action_space.seed(seed)
    return env


@functools.cache
def _vec_env_class() -> type:
    """SB3's ``DummyVecEnv`` whose step hands out shallow copies of the info dicts instead of deep ones.

    SB3's step ends with ``deepcopy(self.buf_infos)``; here every info is a fresh dict of scalars (plus SB3's own
    ``terminal_observation``, a copy the environment made), so a shallow copy of each is as safe. cProfile put the
    deep copy at 6% of a profiled DQN fit; timed without the profiler, this and :func:`steady_mode`'s skip save
    about 5% of a fit's wall time (docs/study.md). Everything else is SB3's loop, unchanged: the same transitions,
    the same numbers (a test trains one DQN with each and compares the weights bit for bit)."""
    from stable_baselines3.common.vec_env import DummyVecEnv

    class ShallowInfoVecEnv(DummyVecEnv):
        def step_wait(self) -> Any:
            for i, env in enumerate(self.envs):
                obs, self.buf_rews[i], terminated, truncated, info = env.step(self.actions[i])
                self.buf_dones[i] = terminated or truncated
                info["TimeLimit.truncated"] = truncated and not terminated
                if self.buf_dones[i]:
                    info["terminal_observation"] = obs
                    obs, self.reset_infos[i] = env.reset()
                self.buf_infos[i] = info
                self._save_obs(i, obs)
            infos = [dict(info) for info in self.buf_infos]
            return self._obs_from_buf(), np.copy(self.buf_rews), np.copy(self.buf_dones), infos

    return ShallowInfoVecEnv


def quiet(model: Any) -> Any:
    """``model`` logging nowhere (SB3's default logger makes a folder per model, even with verbose=0), with
    :func:`steady_mode` on its policy."""
    from stable_baselines3.common.logger import Logger

    model.set_logger(Logger(folder=None, output_formats=[]))
    steady_mode(model.policy)
    return model


def steady_mode(policy: Any) -> None:
    """Make ``policy.set_training_mode`` a no-op when the mode is already set.

    SB3's DQN switches the mode before every action it predicts and every gradient step (PPO once per rollout),
    and each switch walks every submodule (``nn.Module.train``): 9% of a DQN fit under cProfile, which inflates
    many small calls (timed without it, this and :func:`vector_env`'s shallow copies save about 5%). The networks
    have no dropout or batch norm, so the mode changes no number; the switch is skipped only when
    ``policy.training`` already equals the mode asked for (DQN's policy and PPO's set that flag on every switch,
    and nothing else here changes a mode). A test trains with SB3's own switch and with this one to the same
    weights bit for bit."""
    switch = policy.set_training_mode

    def set_training_mode(mode: bool) -> None:
        if mode != policy.training:
            switch(mode)

    policy.set_training_mode = set_training_mode


@contextlib.contextmanager
def unchecked_distributions() -> Iterator[None]:
    """torch's distributions without their argument checks inside the block (``validate_args`` off by default;
    the setting before it is restored after).

    SB3's PPO makes a ``Categorical`` for every forward pass (each rollout step, each minibatch) and torch checks
    its logits for NaN and their support every time: about 12% of a PPO fit's CPU (paired whole-process timings of
    one bfcl-minilm fit, median 0.91 of the time with the checks). The checks only raise or pass: the same numbers
    (a test trains one PPO each way and compares the weights bit for bit)."""
    from torch.distributions import Distribution

    before = Distribution._validate_args
    Distribution.set_default_validate_args(False)
    try:
        yield
    finally:
        Distribution.set_default_validate_args(before)


def save_sb3(model: Any, path: Path, observation: str) -> None:
    """SB3's zip of ``model`` with :data:`META` added: the observation set (resolved: ``score``, ``hybrid``,
    ``strict``, ``listwise``, ``listwise-hybrid``) and its feature names, so a load never guesses the set."""
    model.save(str(path))
    meta = {"observation": observation, "feature_names": list(OBSERVATIONS[observation])}
    with zipfile.ZipFile(path, "a") as z:
        z.writestr(META, json.dumps(meta, sort_keys=True))


def read_sb3(path: Path, what: str, first_layer: str) -> tuple[dict, str]:
    """The weights (``policy.pth``, ``torch.load(weights_only=True)``) and the observation set of a zip written by
    :func:`save_sb3`; a zip without :data:`META` (saved before it existed) gets the set whose width the weight
    ``first_layer`` reads. ValueError naming ``path`` when it is not such a zip or the set is unknown."""
    import torch

    try:
        with zipfile.ZipFile(path) as z:
            with z.open("policy.pth") as f:
                state = torch.load(f, map_location="cpu", weights_only=True)
            meta = json.loads(z.read(META)) if META in z.namelist() else None
    except (zipfile.BadZipFile, KeyError, RuntimeError, EOFError, OSError, ValueError) as e:
        raise ValueError(f"{path}: not a saved {what} ({e})") from e
    if not isinstance(state, dict):
        raise ValueError(f"{path}: not a saved {what} (policy.pth holds no weights)")
    if meta is not None:
        observation = meta.get("observation") if isinstance(meta, dict) else None
        if observation not in OBSERVATIONS or list(OBSERVATIONS[observation]) != meta.get("feature_names"):
            raise ValueError(f"{path}: saved for observation {observation!r} with features this code does not compute")
        return state, str(observation)
    first = state.get(first_layer)
    width = int(first.shape[1]) if first is not None and first.ndim == 2 else -1
    names = [name for name, cols in OBSERVATIONS.items() if len(cols) == width]
    if len(names) != 1:
        raise ValueError(f"{path}: the network reads {width} features, not one observation set of this package")
    return state, names[0]


class HeldOut:
    """Mean return (the net reward at gamma 1) of a greedy STOP rule on held-out training queries.

    The stop rule gets the stacked observations of every query at every depth up to its cap and returns the
    STOP flags (:func:`agents.base.greedy_depths`'s protocol). Labels are read: training queries only."""

    def __init__(self, queries: Sequence[RankedQuery], config: EpisodeConfig, observer: Observer | None = None) -> None:
        from agents.peers import objective_matrix

        self.feats, self.offsets = stacked_features(queries, config, observer)
        self.table, self.caps = objective_matrix(queries, config, config.reward, "return")

    def score(self, stop: Callable[[NDArray[np.float32]], NDArray[np.bool_]]) -> float:
        """The mean return of the rule ``stop`` on the held-out queries."""
        return float(self.returns(stop).mean())

    def returns(self, stop: Callable[[NDArray[np.float32]], NDArray[np.bool_]]) -> NDArray[np.float64]:
        """The return of the rule ``stop`` on each held-out query (in the order given)."""
        from agents.base import first_stop

        k = first_stop(np.asarray(stop(self.feats), dtype=bool), self.offsets)
        return np.asarray(self.table[np.arange(len(k)), np.minimum(k, self.caps) - 1], dtype=np.float64)


def held_out_split(
    queries: Sequence[RankedQuery], frac: float, seed: int
) -> tuple[list[RankedQuery], list[RankedQuery]]:
    """(fit, held out) queries: :func:`agents.auto.inner_split` with ``1 - frac`` to fit (each in query-id order)."""
    from agents.auto import inner_split

    fit, val = inner_split(queries, 1.0 - frac, seed)
    return [queries[i] for i in fit], [queries[i] for i in val]


class Checkpoints:
    """The weights of a torch module kept by their held-out scores, and when they were seen; ``rule`` is the agent's
    stop rule of a module (``rule(module, feats)``: STOP per row, e.g. :func:`batched_stop`).

    Without ``margin`` (None) the best mean return wins (ties: the earlier). With ``margin`` (a number of standard
    errors) the first weights scored are the reference, the start; later weights are candidates only when their
    returns minus the start's, paired over the held-out queries, have a mean above ``margin`` standard errors
    (sample standard deviation / sqrt(n), the normal approximation: 1.96 puts the lower end of a paired 95% interval
    above 0). Each checkpoint is tested on its own, uncorrected for how many are scored; with one held-out query
    none passes, and differences that are all equal and positive pass at any margin. Among the candidates the best
    mean wins. Picking the best of many noisy scores favours weights that only look better; the margin asks for
    evidence before leaving a start that is already good (:mod:`agents.residual`)."""

    def __init__(
        self,
        held_out: HeldOut | None,
        rule: Callable[[Any, NDArray[np.float32]], NDArray[np.bool_]],
        margin: float | None = None,
    ) -> None:
        if margin is not None and not (math.isfinite(margin) and margin >= 0):
            raise ValueError(f"Checkpoints margin must be finite and >= 0 standard errors, got {margin}")
        self.held_out = held_out
        self.rule = rule
        self.margin = margin
        self.best = -np.inf
        self.state: dict | None = None
        self.at = 0
        self.history: list[tuple[int, float]] = []
        self._start: NDArray[np.float64] | None = None

    def see(self, step: int, module: Any) -> None:
        """Score ``module``'s current weights by its stop rule and keep them when they beat the best (with a
        margin: only when they also pass the paired test against the first weights scored)."""
        if self.held_out is None:
            return
        returns = self.held_out.returns(lambda feats: self.rule(module, feats))
        value = float(returns.mean())
        self.history.append((int(step), value))
        if self.margin is not None:
            if self._start is None:
                self._start = returns
            elif not self._significantly_better(returns - self._start):
                return
        if value > self.best:
            self.best, self.at, self.state = value, int(step), copy.deepcopy(module.state_dict())

    def _significantly_better(self, diff: NDArray[np.float64]) -> bool:
        """Whether the paired differences' mean exceeds ``margin`` standard errors (a single query: never)."""
        assert self.margin is not None
        if len(diff) < 2:
            return False
        return bool(diff.mean() > self.margin * diff.std(ddof=1) / math.sqrt(len(diff)))

    def restore(self, module: Any) -> None:
        """Load the best weights seen into ``module`` (nothing when none was scored)."""
        if self.state is not None:
            module.load_state_dict(self.state)

    def finish(self, step: int, module: Any) -> None:
        """Score the final weights too, then load the best seen into ``module``."""
        self.see(step, module)
        self.restore(module)


def held_out_checkpoints(
    queries: Sequence[RankedQuery],
    frac: float,
    seed: int,
    config: EpisodeConfig,
    rule: Callable[[Any, Any], Any],
    observer: Observer | None = None,
    margin: float | None = None,
) -> tuple[list[RankedQuery], Checkpoints | None]:
    """The queries to train on and the checkpoints that judge the weights on the held-out rest
    (:func:`held_out_split`; observed through ``observer`` when given; ``margin``: :class:`Checkpoints`); every
    query and no checkpoints when ``frac`` is 0."""
    if frac <= 0:
        return list(queries), None
    train, val = held_out_split(queries, frac, seed)
    return train, Checkpoints(HeldOut(val, config, observer), rule, margin)
