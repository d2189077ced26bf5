"""Gymnasium environment: choose how deep into a ranked tool list to go before showing it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from numpy.typing import NDArray

from envs.features import (
    OBSERVATION_CHOICES,
    OBSERVATIONS,
    Observer,
    observation_of,
    observation_width,
    observed_matrix,
)
from envs.ranked import RankedQuery
from rewards import REWARD_KINDS, break_even_depth, p_random, terminal_reward

OUTCOME = "outcome"
"""The reward read from each query's observed ``payoffs`` (:attr:`envs.RankedQuery.payoffs`), e.g. whether a
downstream LLM chose the gold tool from the top k; every other reward kind is computed from the labels."""
EPISODE_REWARDS: tuple[str, ...] = (*REWARD_KINDS, OUTCOME)
"""Every terminal reward an episode can pay."""


def terminal_payoffs(query: RankedQuery, ks: NDArray[np.int64], reward: str) -> NDArray[np.float64]:
    """The terminal reward of stopping at each depth of ``ks``: the query's observed payoff for ``outcome``,
    else :func:`rewards.terminal_reward` of ``reward`` from the labels (R = max(R_q, 1)). The one place every
    learner, peer objective and environment reads it."""
    k = np.asarray(ks, dtype=np.int64)
    if reward == OUTCOME:
        if query.payoffs is None:
            raise ValueError(f"query {query.qid!r}: the outcome reward needs the query's observed payoffs")
        return np.asarray(query.payoffs[k - 1], dtype=np.float64)
    found = query.found_at(k)
    return np.asarray(terminal_reward(reward, found, k, query.n_candidates, max(query.n_relevant, 1)), dtype=float)


STOP = 0
CONTINUE = 1


@dataclass(frozen=True)
class EpisodeConfig:
    """How episodes pay and end. Shared by the environment and every learner."""

    reward: str = "bor"
    """Terminal reward: "bor" (-log2 P_rand(k; N, R) if found), "f1" (2/(k+1) if found) or "constant" (1 if found)."""
    step_cost: float = 0.01
    """Cost of every CONTINUE (examining one more item)."""
    gamma: float = 1.0
    """Discount factor used by the learners (the environment itself does not discount). 1: every learner
    trains on the undiscounted net reward it is judged on (the paper used 0.95 on most conditions)."""
    max_depth: int | None = None
    """Depth cap that forces a STOP; None = each query's full list length N."""
    observation: str = "auto"
    """Observation set of every learner (:data:`envs.features.OBSERVATIONS`): ``auto`` = each query's
    own (``hybrid`` with a second scorer, else ``score``), or ``score``, ``hybrid``, ``strict``
    (examined items only)."""
    break_even: bool = False
    """Also cap each query at its break-even depth (:func:`rewards.break_even_depth` of ``reward``, N
    and ``step_cost``): the deepest k at which a found item still pays for its steps. Every deeper
    STOP earns <= 0 on every query, labels or not, while STOP at k = 1 earns >= 0, so those depths are
    dominated; the learned agents set it (their ``break_even`` setting), the environment's default
    is the plain cap of the specification."""

    def __post_init__(self) -> None:
        if self.reward not in EPISODE_REWARDS:
            raise ValueError(f"unknown reward {self.reward!r}; expected one of {', '.join(EPISODE_REWARDS)}")
        if not (np.isfinite(self.step_cost) and self.step_cost >= 0):
            raise ValueError(f"step_cost must be finite and >= 0, got {self.step_cost}")
        if not (0.0 < self.gamma <= 1.0):
            raise ValueError(f"gamma must lie in (0, 1], got {self.gamma}")
        if self.max_depth is not None and int(self.max_depth) < 1:
            raise ValueError(f"max_depth must be >= 1, got {self.max_depth}")
        if self.observation not in OBSERVATION_CHOICES:
            raise ValueError(
                f"unknown observation {self.observation!r}; expected one of {', '.join(OBSERVATION_CHOICES)}"
            )

    def cap(self, query: RankedQuery) -> int:
        """Depth cap for one query (``max_depth`` or N, and the break-even depth when ``break_even``)."""
        cap = query.length if self.max_depth is None else min(int(self.max_depth), query.length)
        if self.break_even:  # an outcome pays at most 1, as the constant reward does
            kind = "constant" if self.reward == OUTCOME else self.reward
            cap = min(cap, break_even_depth(kind, query.n_candidates, self.step_cost))
        return cap

    def check_queries(self, queries: Sequence[RankedQuery]) -> None:
        """Reject an empty query set and a max_depth larger than a query's list."""
        if len(queries) == 0:
            raise ValueError("no queries given")
        if self.max_depth is not None:
            short = [q for q in queries if q.length < int(self.max_depth)]
            if short:
                raise ValueError(
                    f"max_depth={self.max_depth} exceeds the candidate list of query {short[0].qid!r} "
                    f"(N={short[0].length})"
                )


@dataclass(frozen=True)
class EpisodeOverrides:
    """What a caller changes in a condition's episode settings (a command line's ``--step-cost``, ``--gamma``,
    ``--max-depth``, ``--observation``): None keeps the condition's own value. :meth:`apply` gives the
    :class:`EpisodeConfig`; nothing else carries these settings on their way to the environment."""

    step_cost: float | None = None
    """Cost of every CONTINUE; None: the condition's."""
    gamma: float | None = None
    """The learners' discount; None: the condition's."""
    max_depth: int | None = None
    """Depth cap that forces a STOP; None: the condition's (each query's full list)."""
    observation: str | None = None
    """Observation set of the learners; None: the condition's (``auto``)."""

    def apply(self, base: EpisodeConfig) -> EpisodeConfig:
        """``base`` with every setting given here in place of its own (validated by :class:`EpisodeConfig`)."""
        changes = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name) is not None}
        return replace(base, **changes) if changes else base


class ShortlistEnv(gym.Env[NDArray[np.float32], int]):
    """Shortlist depth as an optimal-stopping episode.

    ## Description
    A scorer has ranked a query's N candidate tools. The agent has examined the
    top k (starting at k = 1) and chooses to STOP (show those k items) or to
    CONTINUE (examine item k + 1). One query is one episode.

    ## Action Space
    ``Discrete(2)``: 0 = STOP, 1 = CONTINUE.

    ## Observation Space
    ``Box(-1, 1, (13,), float32)``: features of the scores at the current depth,
    never of gold labels (see :mod:`envs.features` for the exact definitions);
    ``(20,)`` when the queries carry a second scorer's scores (the ``hybrid`` set).

    ## Starting State
    A query chosen with ``self.np_random`` (or ``options={"index": i}``), k = 1 (or, with
    ``exploring_starts``, sometimes a uniformly drawn depth; ``info["k"]`` says which).

    ## Rewards
    Each CONTINUE pays ``-step_cost``. STOP at depth k pays the terminal reward
    when the top k hold a relevant item, else 0: "bor" = ``-log2 P_rand(k; N, R)``,
    "f1" = ``2 / (k + 1)``, "constant" = 1.

    ## Episode End
    On STOP. At the depth cap (``max_depth``, default N; with ``break_even``, at most the
    break-even depth, see :class:`EpisodeConfig`) every action is a STOP: the
    CONTINUE that reaches the cap pays ``-step_cost`` and shows the cap's observation,
    and the next step ends the episode with the terminal reward of the cap. So a
    terminal reward at depth k always arrives at step k (discounted ``gamma^(k-1)``),
    forced or not: the one convention of every learner, limit and peer objective here
    (:class:`agents.tabular.TabularQ`, :mod:`agents.oracle`, :func:`agents.peers.objective_matrix`,
    :mod:`agents.bayes`). ``info`` then holds ``k``, ``found``, ``p_random`` and
    ``terminal_reward``.

    ## Arguments
    ``queries`` (sequence of :class:`RankedQuery`); ``episode`` (:class:`EpisodeConfig`, whole: reward,
    step cost, depth cap, break-even cap, observation set; default ``EpisodeConfig()``);
    ``exploring_starts`` (default 0): the probability that an episode starts at a depth
    drawn uniformly from 1..cap instead of 1 (exploring starts, a training device, not an
    episode setting: deep states are then visited, so Q-values there are learned rather than
    extrapolated; ``options={"index": i}`` resets are affected the same way); ``observer`` (default
    None: the named set of ``episode.observation``): an :class:`Observer` whose matrices replace the named set's,
    for a learner that observes more than the scores (:mod:`agents.residual`: a fitted model's belief per depth).
    Created as ``gymnasium.make("ShortlistDepth-v0", queries=[...], episode=EpisodeConfig(...))``.
    """

    metadata: dict[str, Any] = {"render_modes": []}

    def __init__(
        self,
        queries: Sequence[RankedQuery],
        episode: EpisodeConfig | None = None,
        exploring_starts: float = 0.0,
        observer: Observer | None = None,
    ) -> None:
        if episode is not None and not isinstance(episode, EpisodeConfig):
            raise TypeError(f"episode must be an EpisodeConfig, got {type(episode).__name__}")
        if not 0.0 <= exploring_starts <= 1.0:
            raise ValueError(f"exploring_starts must lie in [0, 1], got {exploring_starts}")
        self.config = EpisodeConfig() if episode is None else episode
        self.exploring_starts = float(exploring_starts)
        self.config.check_queries(queries)
        self.queries = list(queries)
        observation = self.config.observation
        width = observation_width(self.queries, observation)
        self.observer = observer
        self.feature_names = OBSERVATIONS[observation_of(self.queries[0], observation)]
        if observer is not None:
            self.feature_names, width = tuple(observer.names), len(observer.names)
        self.observation_space = spaces.Box(-1.0, 1.0, shape=(width,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)  # type: ignore[assignment]
        # per query: (features (D, F), P_rand (D,), terminal reward (D,)), built on first use
        self._cache: dict[int, tuple[NDArray[np.float32], NDArray[np.float64], NDArray[np.float64]]] = {}
        self._index = 0
        self._k = 1
        self._cap = 1
        self._done = True

    def _tables(self, i: int) -> tuple[NDArray[np.float32], NDArray[np.float64], NDArray[np.float64]]:
        t = self._cache.get(i)
        if t is None:
            q = self.queries[i]
            cap = self.config.cap(q)
            ks = np.arange(1, cap + 1)
            pr = np.asarray(p_random(ks, q.n_candidates, q.n_relevant), dtype=np.float64)
            term = terminal_payoffs(q, ks, self.config.reward)
            t = (observed_matrix(q, cap, self.config.observation, self.observer), pr, term)
            self._cache[i] = t
        return t

    def share_tables(self, other: ShortlistEnv) -> None:
        """Use ``other``'s per-query tables (features, P_rand, terminal rewards), built once for both:
        the environments of a vectorised learner see the same queries under the same episode, so each
        query's tables are computed once instead of once per environment. The tables are a pure function
        of (query, episode), so nothing the environments return changes."""
        if other.queries != self.queries or other.config != self.config or other.observer is not self.observer:
            raise ValueError("share_tables: the environments differ in their queries, episode settings or observer")
        self._cache = other._cache

    def _matrix(self, i: int) -> NDArray[np.float32]:
        return self._tables(i)[0]

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[NDArray[np.float32], dict[str, Any]]:
        super().reset(seed=seed)
        if options and "index" in options:
            i = int(options["index"])
            if not 0 <= i < len(self.queries):
                raise IndexError(f"query index {i} out of range 0..{len(self.queries) - 1}")
        else:
            i = int(self.np_random.integers(len(self.queries)))
        self._index = i
        self._done = False
        self._cap = self.config.cap(self.queries[i])
        self._k = 1
        if self.exploring_starts and self._cap > 1 and self.np_random.random() < self.exploring_starts:
            self._k = int(self.np_random.integers(1, self._cap + 1))
        return self._matrix(i)[self._k - 1].copy(), {"qid": self.queries[i].qid, "index": i, "k": self._k}

    def _finish(self, reward: float) -> tuple[NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        q = self.queries[self._index]
        k = self._k
        self._done = True
        feats, pr, terms = self._tables(self._index)
        term = float(terms[k - 1])
        info = {
            "qid": q.qid,
            "k": k,
            "found": bool(q.found_at(k)),
            "p_random": float(pr[k - 1]),
            "terminal_reward": term,
        }
        return feats[k - 1].copy(), reward + term, True, False, info

    def step(self, action: int) -> tuple[NDArray[np.float32], float, bool, bool, dict[str, Any]]:
        if self._done:
            raise RuntimeError("the episode has ended: call reset() before step()")
        a = int(action)
        if a not in (STOP, CONTINUE):
            raise ValueError(f"action must be 0 (STOP) or 1 (CONTINUE), got {action!r}")
        if a == STOP or self._k >= self._cap:  # at the cap every action stops
            return self._finish(0.0)
        self._k += 1
        return self._matrix(self._index)[self._k - 1].copy(), -self.config.step_cost, False, False, {}
