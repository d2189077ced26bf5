"""Limits: the hindsight oracle, and exact optimal stopping on the tabular agent's state.

Hindsight oracle
----------------
:class:`HindsightOracle` stops exactly at the gold rank g_q when ``1 <= g_q <= cap_q``,
else at depth 1. It is the ONLY policy that reads labels at inference. For every
terminal reward of this package (BoR ``-log2 P_rand(k; N, R)``, F1 ``2/(k+1)``,
constant 1) the payoff is 0 for k < g and non-increasing in k >= g, so the oracle's
per-query reward is the maximum over all depths: its mean reward is a ceiling for
every policy, learned or not.

Exact optimal stopping on the discretised state
-----------------------------------------------
:class:`OptimalStopping` solves, exactly, the *certainty-equivalent* MDP that the
tabular agent's state (:func:`agents.tabular.discretise`) induces on the training
data. Precisely: every training (query q, depth k) with ``k < cap_q`` is a decision
row in state ``s(q, k)``; a row pays ``T_q(k)`` on STOP and moves to row (q, k+1)
on CONTINUE, paying ``-c`` now and, if ``k + 1 = cap_q``, the forced-stop payoff
``T_q(cap_q)`` discounted by gamma. The model pools the rows of each state with
equal weight (as if every query were followed to its cap):

    Q(s, STOP)     = mean_{rows r in s} T_r
    Q(s, CONTINUE) = -c + gamma * mean_{rows r in s} [ V(s'_r)  or  T_q(cap_q) at the cap ]
    V(s)           = max(Q(s, STOP), Q(s, CONTINUE))          (ties pick STOP)

and the reported policy is the exact solution of these Bellman equations: the best
stationary STOP/CONTINUE rule on the discretised state for this estimated model.
The depth bin in the state never decreases along a trajectory, so the system is
solved by backward induction over depth bins; inside a bin (states can recur there,
e.g. depths 8, 9, 10 share a bin) by policy iteration with exact linear solves. No
state set inside a bin is closed (the deepest row of a bin always leaves it), so
every policy's linear system is non-singular even with gamma = 1 and c = 0.

What "optimal" does and does not mean: the solution is optimal in the estimated
model. On the training data itself a pooled state is not Markov (which queries reach
state s depends on earlier decisions), so the policy's realised training value can
fall below its model value (:attr:`OptimalStopping.model_value`); finding the best
memoryless rule on the raw data is a combinatorial problem this class does not solve.
When the state determines the query's future (e.g. every training query has the same
score list, or no two rows share a state), the model is exact and the solution is the
best policy on the training data (tests check both cases against brute force).

Objectives (``objective``):

- ``"net"`` (family ``dp``, method ``<reward>-dp``): gamma = 1, c = the episode's step cost, T = the
  terminal reward: the policy maximises the mean training net reward, the study's judged quantity
  (:func:`agents.base.judged_objective`). This is the reference the report compares every method against.
- ``"return"`` (``--set dp.objective=return``, method name ``<reward>-dp`` still): the episode
  config's gamma and step cost: exactly the problem the tabular Q-learner is trained on (the same
  as ``"net"`` when gamma = 1, as in every condition of the study, so it is not a separate kind).
- ``"reward"``: gamma = 1, c = 0 (the cost-free terminal reward; not registered).

Unseen states at inference back off to the solution of the same model over the depth
bin alone (as :class:`agents.tabular.TabularQ` does); an unseen depth bin stops.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agents.base import (
    Objective,
    check_observation,
    first_stop,
    net_objective,
    read_json,
    row_depths,
    save_json,
    stacked_features,
)
from agents.registry import register
from agents.tabular import N_DEPTH_BINS, N_STATES, depth_bin, discretise, n_states_of
from envs import EpisodeConfig, RankedQuery
from rewards import terminal_reward

__all__ = [
    "HindsightOracle",
    "OptimalStopping",
    "StoppingModel",
    "evaluate_stopping_policy",
    "solve_stopping",
    "stopping_rows",
]


class HindsightOracle:
    """Stop at the gold rank g when it is within the cap and pays there, else at depth 1 (reads labels).

    "Pays" under the judged objective, the net reward: ``T(g) - c (g - 1) > 0`` with T the BoR terminal
    reward and c the episode's step cost; otherwise no depth earns more than the 0 of depth 1 (every
    depth before g finds nothing, every depth after g earns less than g), so depth 1 is the best.
    """

    artifact = "agent.json"
    stochastic = False

    def __init__(self) -> None:
        self.name = "oracle"

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> HindsightOracle:
        return self

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        gold = np.array([q.gold_rank for q in queries], dtype=np.int64)
        caps = np.array([config.cap(q) for q in queries], dtype=np.int64)
        n = np.array([q.n_candidates for q in queries], dtype=np.int64)
        r = np.maximum(np.array([q.n_relevant for q in queries], dtype=np.int64), 1)
        reach = (gold >= 1) & (gold <= caps)
        g = np.where(reach, gold, 1)
        pays = np.asarray(terminal_reward("bor", reach, g, n, r), dtype=np.float64) - config.step_cost * (g - 1) > 0
        return np.where(reach & (pays | (g == 1)), g, 1).astype(np.int64)

    def save(self, path: Path) -> None:
        save_json(path, self.name, {})

    @classmethod
    def load(cls, path: Path, reward: str = "bor", settings: Any = None) -> HindsightOracle:
        read_json(path, "oracle")
        return cls()


class StoppingModel:
    """Decision rows of a certainty-equivalent stopping model (see the module docstring).

    Attributes (one entry per decision row r = (q, k), k < cap_q):
        state: state index of the row, in 0..n_states-1.
        stop: payoff of STOP at the row.
        next_state: state of row (q, k+1), or -1 when k+1 is the cap (forced stop).
        next_stop: payoff of the forced stop at the cap (used when next_state == -1).
        stage: (n_states,) non-decreasing along every transition (the depth bin).
        start: (Q,) state of each query's first row, or -1 for cap 1.
        start_stop: (Q,) payoff of depth 1 (the value of a cap-1 query).
    """

    def __init__(
        self,
        state: NDArray[np.int64],
        stop: NDArray[np.float64],
        next_state: NDArray[np.int64],
        next_stop: NDArray[np.float64],
        stage: NDArray[np.int64],
        start: NDArray[np.int64],
        start_stop: NDArray[np.float64],
    ) -> None:
        self.state, self.stop = np.asarray(state, np.int64), np.asarray(stop, np.float64)
        self.next_state, self.next_stop = np.asarray(next_state, np.int64), np.asarray(next_stop, np.float64)
        self.stage = np.asarray(stage, np.int64)
        self.start, self.start_stop = np.asarray(start, np.int64), np.asarray(start_stop, np.float64)
        self.n_states = self.stage.size
        nxt = self.next_state >= 0
        if np.any(self.stage[self.next_state[nxt]] < self.stage[self.state[nxt]]):
            raise ValueError("stage must never decrease along a transition")
        self.count = np.bincount(self.state, minlength=self.n_states).astype(np.float64)
        self.seen = self.count > 0


def stopping_rows(
    queries: Sequence[RankedQuery],
    config: EpisodeConfig,
    kind: str,
    objective: str = "net",
    coarse: bool = False,
) -> StoppingModel:
    """Build the model's rows from training queries on the tabular discretisation.

    ``coarse=True`` uses the depth bin alone as the state. Payoffs: the terminal reward
    of ``kind`` (R = max(R_q, 1)); discounting and step costs enter in :func:`solve_stopping`.
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    config.check_queries(queries)
    feats, offsets = stacked_features(queries, config)
    depth = row_depths(offsets)
    fine = discretise(feats, depth)
    state = depth_bin(fine) if coarse else fine
    caps = np.diff(offsets)
    cap_row = np.repeat(caps, caps)
    gold = np.repeat([q.gold_rank for q in queries], caps)
    n = np.repeat([q.n_candidates for q in queries], caps)
    r = np.repeat([max(q.n_relevant, 1) for q in queries], caps)
    found = (gold > 0) & (depth >= gold)
    pay = np.asarray(terminal_reward(kind, found, depth, n, r), dtype=np.float64)
    dec = np.flatnonzero(depth < cap_row)  # decision rows; row dec+1 is (q, k+1)
    at_cap = depth[dec] + 1 == cap_row[dec]
    next_state = np.where(at_cap, -1, state[np.minimum(dec + 1, state.size - 1)])
    n_states = N_DEPTH_BINS if coarse else n_states_of(feats.shape[1])
    stage = np.arange(n_states) if coarse else depth_bin(np.arange(n_states))
    first = offsets[:-1]
    start = np.where(caps > 1, state[first], -1)
    return StoppingModel(state[dec], pay[dec], next_state, pay[dec + 1], stage, start, pay[first])


#: What the DP solution maximises: ``net`` (the judged net reward: gamma 1, the episode's step cost),
#: ``reward`` (cost-free terminal reward) or ``return`` (the RL episode return: its gamma and step cost).
OBJECTIVES = ("net", "reward", "return")


def _gamma_cost(objective: str, config: EpisodeConfig) -> tuple[float, float]:
    if objective == "reward":
        return 1.0, 0.0
    return (1.0 if objective == "net" else float(config.gamma)), float(config.step_cost)


def solve_stopping(
    model: StoppingModel, gamma: float, cost: float, max_iter: int = 1000
) -> tuple[NDArray[np.bool_], NDArray[np.float64], NDArray[np.float64]]:
    """Exact solution of the certainty-equivalent model (backward over stages, policy
    iteration with linear solves inside a stage).

    Returns:
        stop: (n_states,) True where STOP is optimal (ties and unseen states: STOP).
        value: (n_states,) optimal V(s) (NaN for unseen states).
        q: (n_states, 2) Q(s, STOP), Q(s, CONTINUE) (NaN for unseen states).
    """
    ns = model.n_states
    cnt = np.where(model.seen, model.count, 1.0)
    qs = np.bincount(model.state, model.stop, minlength=ns) / cnt
    value = np.full(ns, np.nan)
    stop = np.ones(ns, dtype=bool)
    qc = np.full(ns, np.nan)
    nxt = model.next_state
    row_stage = model.stage[model.state]
    for g in np.unique(model.stage[model.seen])[::-1]:
        idx = np.flatnonzero(model.seen & (model.stage == g))
        local = np.full(ns, -1)
        local[idx] = np.arange(idx.size)
        rows = np.flatnonzero(row_stage == g)
        inside = (nxt[rows] >= 0) & (model.stage[np.maximum(nxt[rows], 0)] == g)
        ext_val = np.where(nxt[rows] >= 0, value[np.maximum(nxt[rows], 0)], model.next_stop[rows])
        src = local[model.state[rows]]
        a = np.bincount(src[~inside], ext_val[~inside], minlength=idx.size) / cnt[idx]
        p = np.zeros((idx.size, idx.size))
        np.add.at(p, (src[inside], local[nxt[rows][inside]]), 1.0)
        p /= cnt[idx][:, None]
        s_val = qs[idx]
        tol = 1e-12 * max(1.0, float(np.abs(s_val).max()), float(np.abs(a).max()) if a.size else 1.0)
        cont = np.zeros(idx.size, dtype=bool)
        v = s_val.copy()
        for _ in range(max_iter):
            v = _policy_value(cont, s_val, a, p, gamma, cost)
            q_cont = -cost + gamma * (a + p @ v)
            new = np.where(cont, q_cont >= s_val - tol, q_cont > s_val + tol)
            if np.array_equal(new, cont):
                break
            cont = new
        else:  # pragma: no cover - policy iteration terminates on finite models
            raise RuntimeError("policy iteration did not converge")
        q_cont = -cost + gamma * (a + p @ v)
        best_stop = ~(q_cont > s_val + tol)
        stop[idx] = best_stop
        value[idx] = np.where(best_stop, s_val, q_cont)
        qc[idx] = q_cont
    q = np.stack([np.where(model.seen, qs, np.nan), qc], axis=1)
    return stop, value, q


def _policy_value(
    cont: NDArray[np.bool_],
    s_val: NDArray[np.float64],
    a: NDArray[np.float64],
    p: NDArray[np.float64],
    gamma: float,
    cost: float,
) -> NDArray[np.float64]:
    """V of a fixed policy: V = S on STOP states; (I - gamma P_CC) V_C = -c + gamma (a + P_CS S)."""
    v = s_val.copy()
    c = np.flatnonzero(cont)
    if c.size:
        s = np.flatnonzero(~cont)
        lhs = np.eye(c.size) - gamma * p[np.ix_(c, c)]
        rhs = -cost + gamma * (a[c] + p[np.ix_(c, s)] @ s_val[s])
        v[c] = np.linalg.solve(lhs, rhs)
    return v


def evaluate_stopping_policy(
    model: StoppingModel, stop: NDArray[np.bool_], gamma: float, cost: float
) -> tuple[NDArray[np.float64], float]:
    """Exact value of ANY stationary policy in the model (one global linear solve).

    ``V = stop * Q_S + (1 - stop) * (-c + gamma * (t + P V))``, with t the forced-stop
    payoffs and P the pooled transitions. Returns V per state (NaN unseen) and the mean
    start value over queries (a cap-1 query contributes its depth-1 payoff).
    """
    ns = model.n_states
    idx = np.flatnonzero(model.seen)
    local = np.full(ns, -1)
    local[idx] = np.arange(idx.size)
    cnt = model.count[idx]
    qs = np.bincount(local[model.state], model.stop, minlength=idx.size) / cnt
    term = model.next_state < 0
    t = np.bincount(local[model.state[term]], model.next_stop[term], minlength=idx.size) / cnt
    p = np.zeros((idx.size, idx.size))
    np.add.at(p, (local[model.state[~term]], local[model.next_state[~term]]), 1.0)
    p /= cnt[:, None]
    st = np.asarray(stop, dtype=bool)[idx]
    lhs = np.eye(idx.size) - gamma * (~st)[:, None] * p
    rhs = np.where(st, qs, -cost + gamma * t)
    v_local = np.linalg.solve(lhs, rhs)
    v = np.full(ns, np.nan)
    v[idx] = v_local
    return v, _start_value(model, v)


def _start_value(model: StoppingModel, v: NDArray[np.float64]) -> float:
    start = np.where(model.start >= 0, v[np.maximum(model.start, 0)], model.start_stop)
    return float(start.mean())


class OptimalStopping:
    """Exact optimal stopping on the tabular state (see the module docstring).

    Attributes after ``fit``: ``stop`` (per fine state), ``coarse_stop`` (per depth bin),
    ``seen``, ``value``, ``model_value`` (mean start value in the estimated model) and
    ``train_value`` (the policy's realised mean objective on the training queries).
    """

    artifact = "agent.json"
    stochastic = False

    def __init__(self, reward: str = "bor", objective: str = "net") -> None:
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
        self.reward = reward
        self.objective = objective
        self.name = {"net": f"{reward}-dp", "return": f"{reward}-dp-mdp", "reward": f"{reward}-dp-costfree"}[objective]
        self.stop = np.ones(N_STATES, dtype=bool)
        self.coarse_stop = np.ones(N_DEPTH_BINS, dtype=bool)
        self.seen = np.zeros(N_STATES, dtype=bool)
        self.coarse_seen = np.zeros(N_DEPTH_BINS, dtype=bool)
        self.value = np.full(N_STATES, np.nan)
        self.model_value = float("nan")
        self.train_value = float("nan")
        self.solve_seconds = float("nan")

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> OptimalStopping:
        import time

        gamma, cost = _gamma_cost(self.objective, config)
        fine = stopping_rows(queries, config, self.reward, self.objective)
        coarse = stopping_rows(queries, config, self.reward, self.objective, coarse=True)
        t0 = time.perf_counter()
        self.stop, self.value, _ = solve_stopping(fine, gamma, cost)
        self.coarse_stop, _, _ = solve_stopping(coarse, gamma, cost)
        self.solve_seconds = time.perf_counter() - t0
        self.seen, self.coarse_seen = fine.seen, coarse.seen
        self.model_value = _start_value(fine, self.value)
        from agents.peers import objective_matrix

        pay, _ = objective_matrix(queries, config, self.reward, self.objective)
        k = self.depths(queries, config)
        self.train_value = float(pay[np.arange(len(queries)), k - 1].mean())
        return self

    def stop_rule(self, states: NDArray[np.int64]) -> NDArray[np.bool_]:
        """STOP decision per fine state index, with the depth-bin back-off for unseen states."""
        coarse = depth_bin(states)
        back = np.where(self.coarse_seen[coarse], self.coarse_stop[coarse], True)
        return np.where(self.seen[states], self.stop[states], back)

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        if len(queries) == 0:
            return np.zeros(0, dtype=np.int64)
        feats, offsets = stacked_features(queries, config)
        check_observation(self.name, self.stop.size, n_states_of(feats.shape[1]), "table states")
        return first_stop(self.stop_rule(discretise(feats, row_depths(offsets))), offsets)

    def save(self, path: Path) -> None:
        """JSON: the policy tables, values and the model/realised training values."""
        payload = {
            "name": self.name,
            "params": {
                "reward": self.reward,
                "objective": self.objective,
                "stop": self.stop.astype(int).tolist(),
                "seen": self.seen.astype(int).tolist(),
                "coarse_stop": self.coarse_stop.astype(int).tolist(),
                "coarse_seen": self.coarse_seen.astype(int).tolist(),
                "value": [None if np.isnan(v) else float(v) for v in self.value],
                "model_value": self.model_value,
                "train_value": self.train_value,
                "solve_seconds": self.solve_seconds,
            },
        }
        Path(path).write_text(json.dumps(payload) + "\n")

    @classmethod
    def load(cls, path: Path, reward: str = "bor", settings: Any = None) -> OptimalStopping:
        """Read a policy written by :meth:`save` (JSON; never executes code)."""
        try:
            p = json.loads(Path(path).read_text())["params"]
            out = cls(p["reward"], p["objective"])
            out.stop = np.asarray(p["stop"], dtype=bool)
            out.seen = np.asarray(p["seen"], dtype=bool)
            out.coarse_stop = np.asarray(p["coarse_stop"], dtype=bool)
            out.coarse_seen = np.asarray(p["coarse_seen"], dtype=bool)
            out.value = np.array([np.nan if v is None else v for v in p["value"]], dtype=np.float64)
            out.model_value, out.train_value = float(p["model_value"]), float(p["train_value"])
        except (OSError, json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{path}: malformed optimal-stopping file ({e})") from e
        if out.stop.shape not in ((N_STATES,), (2 * N_STATES,)) or out.coarse_stop.shape != (N_DEPTH_BINS,):
            raise ValueError(
                f"{path}: policy tables must have {N_STATES} (or {2 * N_STATES}) and {N_DEPTH_BINS} entries"
            )
        if out.seen.shape != out.stop.shape:
            raise ValueError(f"{path}: 'seen' must have one entry per state of 'stop'")
        return out


register(
    "oracle",
    lambda reward, settings: HindsightOracle(),
    group="limit",
    stochastic=False,
    uses_reward=False,
    description="hindsight oracle: stop at the gold rank (reads labels; the ceiling of mean reward, not of BoR bits)",
    reads_labels=True,
    objective=net_objective,
)


@dataclass(frozen=True)
class StoppingConfig:
    """Settings of exact optimal stopping on the tabular state (:class:`OptimalStopping`)."""

    objective: str = "net"
    """What the solution maximises (:data:`OBJECTIVES`): ``net`` (the judged net reward), ``reward``
    (cost-free) or ``return`` (the RL episode return with the episode's gamma and step cost)."""

    def __post_init__(self) -> None:
        if self.objective not in OBJECTIVES:
            raise ValueError(f"StoppingConfig.objective must be one of {', '.join(OBJECTIVES)}, got {self.objective!r}")


def _stopping_objective(reward: str, settings: StoppingConfig, config: EpisodeConfig) -> Objective:
    gamma, cost = _gamma_cost(settings.objective, config)
    return Objective("net", reward, cost, gamma)


register(
    "dp",
    lambda reward, settings: OptimalStopping(reward, settings.objective),
    group="limit",
    stochastic=False,
    uses_reward=True,
    description="DP optimum of the tabular model estimated on train (mean net reward; a reference, not a bound)",
    config=StoppingConfig,
    observes=True,
    objective=_stopping_objective,
    view="stepwise",
)
