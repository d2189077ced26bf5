"""Tabular Q-learning on a discretised observation.

Discretisation (documented bins; all from score features, see :mod:`envs.features`):

- depth k: bins {1}, {2}, {3}, {4}, {5}, {6-7}, {8-10}, {11-15}, {16-20}, {21-30},
  {31-50}, {51-100}, {101+} (13 bins; recovered exactly from ``log_depth`` and the list length);
- current z-score (``cur_z * 8``): edges 0, 1, 2, 3, 4, 6 (7 bins);
- drop to the next item relative to the largest drop in the top 50 (``gap_rel``):
  edges 0.2, 0.5, 0.8 (4 bins);
- z-distance between the top and the current item (``gap_top_cur * 16``): edges 0.5, 1.5, 3 (4 bins).

On the ``strict`` observation (examined items only) the three score bins read its own columns
instead: the top item's z-score among the examined ones (``ex_top_z * 8``, the same edges), the
last drop relative to the largest drop seen so far (``ex_last_drop_rel``) and the z-distance between
the top and the current item among the examined ones (``ex_gap_top_cur * 16``).

On the ``listwise`` observation the bins read its leading ``score`` (``hybrid``) columns: the per-item block is not
discretised, so there tabular Q is tabular Q on the summary features.

13 x 7 x 4 x 4 = 1,456 states, 2 actions. On the ``hybrid`` observation (queries with a
second scorer) one more bin doubles them to 2,912: whether the second scorer's top item is
already in the shortlist (``aux_top_seen``). A second, coarse table over the depth
bin alone is updated with the same targets; a fine state where either action has
not been tried during training backs off to the coarse table (at training and at
inference), so an unseen score pattern inherits the depth-only policy instead of
an arbitrary default. Remaining ties pick STOP. Exploration is epsilon-greedy with a seeded
``numpy.random.Generator`` (never the global RNG); epsilon decays linearly from
``eps_start`` to ``eps_end`` over ``explore_fraction`` of the episodes; the
learning rate is 1 / (visits of the pair) ** ``lr_power`` (a Robbins-Monro schedule).
Saved as JSON (no pickle).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agents.base import (
    check_observation,
    first_stop,
    learned_episode,
    return_objective,
    row_depths,
    stacked_features,
    training_bar,
)
from agents.registry import register
from envs import EpisodeConfig, RankedQuery, feature_matrix, terminal_payoffs
from envs.features import N_FEATURES, OBSERVATIONS, Z_CLIP, observation_width

DEPTH_EDGES = np.array([2, 3, 4, 5, 6, 8, 11, 16, 21, 31, 51, 101])  # bin = searchsorted(right)
Z_EDGES = np.array([0.0, 1.0, 2.0, 3.0, 4.0, 6.0])
GAP_EDGES = np.array([0.2, 0.5, 0.8])
TOPGAP_EDGES = np.array([0.5, 1.5, 3.0])
N_DEPTH_BINS = len(DEPTH_EDGES) + 1
N_STATES = N_DEPTH_BINS * (len(Z_EDGES) + 1) * (len(GAP_EDGES) + 1) * (len(TOPGAP_EDGES) + 1)
_PER_DEPTH = N_STATES // N_DEPTH_BINS
_I = {n: i for i, n in enumerate(OBSERVATIONS["hybrid"])}
_S = {n: i for i, n in enumerate(OBSERVATIONS["strict"])}
_SCORE_BINS = (_I["cur_z"], _I["gap_rel"], _I["gap_top_cur"])
#: The (z, gap, top-gap) columns the bins read, by observation width, and whether the second scorer's bin is read
#: (``aux_top_seen``). The ``listwise`` sets begin with the ``score`` / ``hybrid`` columns, so the table reads those
#: and nothing of the per-item block: on ``listwise`` tabular Q is tabular Q on the summary features.
_BIN_COLUMNS: dict[int, tuple[tuple[int, int, int], bool]] = {
    len(OBSERVATIONS["score"]): (_SCORE_BINS, False),
    len(OBSERVATIONS["hybrid"]): (_SCORE_BINS, True),
    len(OBSERVATIONS["strict"]): ((_S["ex_top_z"], _S["ex_last_drop_rel"], _S["ex_gap_top_cur"]), False),
    len(OBSERVATIONS["listwise"]): (_SCORE_BINS, False),
    len(OBSERVATIONS["listwise-hybrid"]): (_SCORE_BINS, True),
}


def n_states_of(width: int) -> int:
    """Fine states of the table for observations of ``width`` features (with the second scorer's bin: twice as
    many)."""
    return N_STATES * (2 if _BIN_COLUMNS[width][1] else 1)


def depth_bin(states: NDArray[np.int64]) -> NDArray[np.int64]:
    """The depth bin (coarse state) of fine state indices."""
    return (np.asarray(states) % N_STATES) // _PER_DEPTH


def discretise(feats: NDArray[np.float32], depths: NDArray[np.int64]) -> NDArray[np.int64]:
    """State index for each observation row (see module docstring)."""
    (cz, cg, ct), two_scorers = _BIN_COLUMNS[feats.shape[1]]
    d = np.searchsorted(DEPTH_EDGES, depths, side="right")
    z = np.searchsorted(Z_EDGES, feats[:, cz] * Z_CLIP, side="right")
    g = np.searchsorted(GAP_EDGES, feats[:, cg], side="right")
    t = np.searchsorted(TOPGAP_EDGES, feats[:, ct] * 2 * Z_CLIP, side="right")
    out = ((d * (len(Z_EDGES) + 1) + z) * (len(GAP_EDGES) + 1) + g) * (len(TOPGAP_EDGES) + 1) + t
    if two_scorers:  # is the second scorer's top item in the shortlist?
        out = out + N_STATES * (feats[:, _I["aux_top_seen"]] > 0.5)
    return out


@dataclass(frozen=True)
class TabularConfig:
    """Tabular Q-learning settings."""

    episodes: int = 20_000
    """Training episodes (one query each)."""
    eps_start: float = 1.0
    """Initial exploration rate."""
    eps_end: float = 0.05
    """Final exploration rate."""
    explore_fraction: float = 0.5
    """Fraction of episodes over which epsilon decays linearly."""
    lr_power: float = 0.6
    """Learning rate = visits ** -lr_power."""
    exploring_starts: float = 0.0
    """Probability that a training episode starts at a uniformly drawn depth 1..cap instead of 1
    (exploring starts, as :class:`envs.ShortlistEnv`); evaluation always starts at depth 1."""

    n_steps: int = 1
    """n-step Q-learning targets: n observed rewards, then the bootstrap (1 = one-step Q-learning).
    One step stays the default: ``shortlist tune --agent tabular --grid n_steps=1,2,4,8``
    (``results/tuning/n_steps/``) showed no whole-list episode on validation at any n, validation
    reward changes within the seed ranges on BFCL and MetaTool (largest: +0.10 on MetaTool+BM25 at n = 4)
    and a loss on the hardest synthetic condition (0.75 -> 0.53 at n = 4)."""
    break_even: bool = True
    """Stop at the latest at each query's break-even depth (:func:`agents.base.learned_episode`)."""

    def __post_init__(self) -> None:
        if self.episodes < 1:
            raise ValueError(f"TabularConfig.episodes must be >= 1, got {self.episodes}")
        if not (0.0 <= self.eps_end <= self.eps_start <= 1.0):
            raise ValueError(
                f"TabularConfig needs 0 <= eps_end <= eps_start <= 1, got {self.eps_end} and {self.eps_start}"
            )
        if not 0.0 < self.explore_fraction <= 1.0:
            raise ValueError(f"TabularConfig.explore_fraction must lie in (0, 1], got {self.explore_fraction}")
        if not self.lr_power > 0:
            raise ValueError(f"TabularConfig.lr_power must be > 0, got {self.lr_power}")
        if not 0.0 <= self.exploring_starts <= 1.0:
            raise ValueError(f"TabularConfig.exploring_starts must lie in [0, 1], got {self.exploring_starts}")
        if self.n_steps < 1:
            raise ValueError(f"TabularConfig.n_steps must be >= 1, got {self.n_steps}")


class TabularQ:
    """Tabular Q-learning depth policy (see module docstring)."""

    artifact = "agent.json"
    stochastic = True

    def __init__(self, reward: str = "bor", settings: TabularConfig | None = None) -> None:
        self.reward = reward
        self.settings = settings or TabularConfig()
        self.name = f"{reward}-tabular"
        self.q = np.zeros((N_STATES, 2))
        self.q_coarse = np.zeros((N_DEPTH_BINS, 2))
        self.tried = np.zeros(N_STATES, dtype=bool)
        self.width = N_FEATURES  # features per depth of the observation it was trained on

    def values(self, states: NDArray[np.int64]) -> NDArray[np.float64]:
        """Q(s, STOP), Q(s, CONTINUE) with the documented back-off, shape (B, 2)."""
        return np.where(self.tried[states, None], self.q[states], self.q_coarse[depth_bin(states)])

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> TabularQ:
        s = self.settings
        config = learned_episode(config, s.break_even)
        self.width = observation_width(queries, config.observation)
        n_states = n_states_of(self.width)
        rng = np.random.default_rng(seed)
        states, terms = [], []
        for q in queries:
            cap = config.cap(q)
            ks = np.arange(1, cap + 1)
            states.append(discretise(feature_matrix(q, cap, config.observation), ks).tolist())
            terms.append(terminal_payoffs(q, ks, config.reward).tolist())
        Q = np.zeros((n_states, 2))
        visits = np.zeros((n_states, 2))
        Qc = np.zeros((N_DEPTH_BINS, 2))
        visits_c = np.zeros((N_DEPTH_BINS, 2))

        def value(x: int) -> tuple[float, float]:
            if visits[x, 0] > 0 and visits[x, 1] > 0:
                return Q[x, 0], Q[x, 1]
            c = (x % N_STATES) // _PER_DEPTH
            return Qc[c, 0], Qc[c, 1]

        def update(x: int, a: int, target: float) -> None:
            visits[x, a] += 1
            Q[x, a] += visits[x, a] ** -s.lr_power * (target - Q[x, a])
            c = (x % N_STATES) // _PER_DEPTH
            visits_c[c, a] += 1
            Qc[c, a] += visits_c[c, a] ** -s.lr_power * (target - Qc[c, a])

        gamma, cost, n = config.gamma, config.step_cost, s.n_steps
        n_q = len(queries)
        picks = rng.integers(n_q, size=s.episodes)
        starts = start_depth = np.zeros(0)
        if s.exploring_starts:  # drawn only when used, so the default keeps the RNG stream unchanged
            starts, start_depth = rng.random(s.episodes), rng.random(s.episodes)
        decay = max(1, int(s.explore_fraction * s.episodes))
        bar = training_bar(s.episodes, f"{self.name} s{seed}")
        for ep in range(s.episodes):
            if ep % 1000 == 0:
                bar.update(min(1000, s.episodes - ep))
            eps = s.eps_end + (s.eps_start - s.eps_end) * max(0.0, 1.0 - ep / decay)
            st, tr = states[picks[ep]], terms[picks[ep]]
            cap = len(st)
            k = 1
            if s.exploring_starts and cap > 1 and starts[ep] < s.exploring_starts:
                k = int(start_depth[ep] * cap) + 1
            done = False
            path: list[tuple[int, int, float]] = []  # (state, action, reward) of every transition so far
            while not done:
                x = st[k - 1]
                explore = rng.random() < eps
                if explore:
                    a = int(rng.integers(2))
                else:
                    q0, q1 = value(x)
                    a = 1 if q1 > q0 else 0
                if a == 0 or k >= cap:  # STOP (forced at the cap)
                    a, r, done = 0, tr[k - 1], True
                else:  # CONTINUE; reaching the cap stops there
                    k += 1
                    r, done = (-cost + gamma * tr[k - 1], True) if k >= cap else (-cost, False)
                path.append((x, a, r))
                # n-step targets: transition t is updated once n rewards after it are known (or the
                # episode ends first): sum of those rewards, then bootstrap from the state reached
                first = len(path) - n if not done else max(0, len(path) - n)
                boot = 0.0 if done else gamma**n * max(value(st[k - 1]))
                for t in range(max(first, 0), len(path) if done else first + 1):
                    target = sum(gamma**i * path[t + i][2] for i in range(len(path) - t))
                    if not done:
                        target += boot
                    xt, at, _ = path[t]
                    update(xt, at, target)
        bar.close()
        self.q, self.q_coarse = Q, Qc
        self.tried = np.asarray((visits > 0).all(axis=1), dtype=bool)
        return self

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        if len(queries) == 0:
            return np.zeros(0, dtype=np.int64)
        feats, offsets = stacked_features(queries, learned_episode(config, self.settings.break_even))
        check_observation(self.name, self.width, int(feats.shape[1]))
        v = self.values(discretise(feats, row_depths(offsets)))
        return first_stop(v[:, 1] <= v[:, 0], offsets)

    def save(self, path: Path) -> None:
        """Write the Q-table and settings as JSON."""
        payload = {
            "reward": self.reward,
            "settings": asdict(self.settings),
            "q": self.q.tolist(),
            "q_coarse": self.q_coarse.tolist(),
            "tried": self.tried.astype(int).tolist(),
            "width": self.width,
        }
        path.write_text(json.dumps(payload))

    @classmethod
    def load(cls, path: Path, reward: str = "bor", settings: Any = None) -> TabularQ:
        """Read a Q-table written by :meth:`save` (JSON; never executes code)."""
        try:
            payload = json.loads(Path(path).read_text(encoding="utf-8"))
            if not isinstance(payload, dict) or not isinstance(payload.get("settings"), dict):
                raise TypeError("expected an object with 'reward', 'settings', 'q', 'q_coarse', 'tried'")
            if payload.get("reward") not in ("bor", "f1", "constant"):
                raise ValueError(f"unknown reward {payload.get('reward')!r}")
            agent = cls(payload["reward"], TabularConfig(**payload["settings"]))
            q = np.asarray(payload["q"], dtype=np.float64)
            qc = np.asarray(payload["q_coarse"], dtype=np.float64)
            tried = np.asarray(payload["tried"], dtype=bool)
            width = int(payload.get("width", len(OBSERVATIONS["hybrid"]) if len(q) == 2 * N_STATES else N_FEATURES))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{path}: malformed Q-table file ({e!r})") from e
        fine = q.shape[0] if q.ndim == 2 and q.shape[0] in (N_STATES, 2 * N_STATES) else N_STATES
        if q.shape != (fine, 2) or qc.shape != (N_DEPTH_BINS, 2) or tried.shape != (fine,):
            raise ValueError(
                f"{path}: Q-table must be {N_STATES}x2 or {2 * N_STATES}x2 (+ {N_DEPTH_BINS}x2 coarse, one flag per "
                "fine state)"
            )
        if not (np.all(np.isfinite(q)) and np.all(np.isfinite(qc))):
            raise ValueError(f"{path}: Q-table holds NaN or inf")
        if width not in _BIN_COLUMNS or n_states_of(width) != fine:
            raise ValueError(f"{path}: a {fine}-state table cannot read {width} features per depth")
        agent.q, agent.q_coarse, agent.tried, agent.width = q, qc, tried, width
        return agent


__all__ = ["TabularConfig", "TabularQ", "depth_bin", "discretise", "n_states_of"]


register(
    "tabular",
    lambda reward, settings: TabularQ(reward, settings),
    group="agent",
    stochastic=True,
    uses_reward=True,
    description="tabular Q-learning on the discretised score features (+ one second-scorer bin on -hybrid "
    "conditions; depth-only back-off)",
    config=TabularConfig,
    observes=True,
    objective=return_objective,
    budget="episodes",
    view="stepwise",
)
