"""The Bayes-optimal depth for synthetic score lists: the exact upper bound of score-only policies.

On a synthetic condition (:mod:`benchmarks.synthetic`) the generator is known, so the
posterior over the gold's rank given the WHOLE observed score list is computable exactly,
and so is the depth that maximises the expected payoff. No policy that sees only scores
(learned, heuristic, fitted on any amount of training data) can beat it in expectation.

Posterior
---------
The N candidates' scores are independent given which one is gold: the gold's score has
density f_g (the distractor law shifted by the separation), every other score has density
f_d, and the gold's candidate position is uniform. For the ranked list s_1 >= ... >= s_N:

    ``P(gold at rank i | s) = f_g(s_i) / f_d(s_i) / sum_j f_g(s_j) / f_d(s_j)``

(the product of the f_d(s_j) over all j cancels), computed in log space with a
log-sum-exp. The log likelihood ratio ``l(x) = log f_g(x) - log f_d(x)`` is, with noise
sd sigma (1, or ``sqrt((1 + rho) / 2)`` for the fused score of two scorers) and
separation d:

- normal: ``l(x) = (d x - d^2 / 2) / sigma^2``;
- student-t (df nu, scaled to unit variance by ``a = sqrt((nu - 2) / nu)``):
  ``l(x) = -(nu + 1) / 2 * [log1p(((x - d) / a)^2 / nu) - log1p((x / a)^2 / nu)]``;
- rounded scores (grid h): x stands for the cell ``[x - h/2, x + h/2)`` and the densities
  become cell probabilities, ``l(x) = log P(cell | gold) - log P(cell | distractor)``,
  each ``log(F(hi) - F(lo))`` evaluated on the tail side that avoids cancellation.
  Tied ranks get equal posterior mass, which is exact: the generator puts the gold at a
  uniform candidate position and the ranking breaks ties by candidate position, so the
  gold is equally likely at every rank of a tie block.
- two correlated scorers: the joint likelihood ratio of (x1, x2) depends on the pair only
  through x1 + x2 (equal separations), so the fused list carries the joint posterior.

Depth
-----
With ``C_i(K) = sum_{j <= K} P(gold at rank j | s)`` the probability that the top K hold
the gold (R = 1), the policy shows

    ``K_i = argmax_{1 <= K <= cap_i} E[payoff_i(K)]``   (ties: the smallest K)

where, with T(K) the terminal reward of kind ``reward`` when found (BoR
``-log2 P_rand(K; N, 1) = log2(N / K)``, F1 ``2 / (K + 1)``, constant 1):

- ``objective="net"`` (method ``bayes``): ``E = C(K) T(K) - c (K - 1)``, the expected net
  reward (no discount; c the episode's step cost): with BoR, the study's judged quantity
  (:func:`agents.base.judged_objective`, the evaluator's "mean net reward"). This is the
  limit the synthetic study divides by.
- ``objective="reward"``: ``E = C(K) T(K)``, the expected cost-free terminal reward.
- ``objective="return"`` (method ``<reward>-bayes-mdp``): the RL episode return the
  learners maximise under the episode config (gamma, step cost c):
  ``E = C(K) gamma^(K-1) T(K) - c sum_{i=0}^{K-2} gamma^i``. Stopping at K costs K - 1
  CONTINUEs. The forced STOP at the depth cap is not special: T(cap) is discounted by
  ``gamma^(cap-1)`` like a voluntary stop, the convention of the environment (where the
  step after reaching the cap ends the episode), :class:`agents.tabular.TabularQ`'s target
  ``-c + gamma T(cap)`` and :func:`agents.peers.objective_matrix`.

Both are exact per-query maximisers of the posterior expected payoff, so the mean payoff
over queries is, in expectation, at least that of every score-only policy (including
every fixed K and every threshold). Everything is vectorised over queries and depths.

The spec comes from the constructor or, when None, from the query ids
(``<variant>#<index>``, :func:`benchmarks.synthetic.spec_from_qid`), so a registry factory
needs no spec. An explicit spec is used as given (a deliberately wrong spec is allowed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from agents.base import net_objective, read_json, save_json
from agents.registry import register
from benchmarks.synthetic import SyntheticSpec, spec_from_qid
from envs import EpisodeConfig, RankedQuery
from rewards import REWARD_KINDS, terminal_reward

__all__ = [
    "BayesOptimal",
    "bayes_depths",
    "expected_payoff",
    "gold_posterior",
    "log_likelihood_ratio",
    "payoff_if_found",
    "spec_of_queries",
]

OBJECTIVES = ("net", "reward", "return")


def _log_cell(lo: NDArray[np.float64], hi: NDArray[np.float64], logcdf: Any) -> NDArray[np.float64]:
    """``log(F(hi) - F(lo))`` for a symmetric law with log-cdf ``logcdf``, cancellation-free.

    Cells right of 0 are reflected (``F(hi) - F(lo) = F(-lo) - F(-hi)``) so the difference is
    always taken in the lower tail, where ``log F`` keeps full relative precision.
    """
    flip = (lo + hi) > 0
    a = np.where(flip, -hi, lo)
    b = np.where(flip, -lo, hi)
    la, lb = logcdf(a), logcdf(b)
    with np.errstate(divide="ignore"):
        return lb + np.log(-np.expm1(la - lb))


def log_likelihood_ratio(spec: SyntheticSpec, scores: ArrayLike) -> NDArray[np.float64]:
    """``l(x) = log f_gold(x) - log f_distractor(x)`` elementwise (module docstring formulas)."""
    x = np.asarray(scores, dtype=np.float64)
    d, sd = float(spec.separation), spec.noise_sd
    if spec.distribution == "student-t":
        nu = float(spec.df or 0)
        scale = math.sqrt((nu - 2.0) / nu)

        def logcdf(z: NDArray[np.float64]) -> NDArray[np.float64]:
            from scipy import stats

            return stats.t.logcdf(z / scale, nu)

        if not spec.ties:
            return -(nu + 1.0) / 2.0 * (np.log1p(((x - d) / scale) ** 2 / nu) - np.log1p((x / scale) ** 2 / nu))
    else:

        def logcdf(z: NDArray[np.float64]) -> NDArray[np.float64]:
            from scipy import special

            return special.log_ndtr(z / sd)

        if not spec.ties:
            return (d * x - d * d / 2.0) / (sd * sd)
    h = float(spec.ties)
    m = np.round(x / h)
    lo, hi = (m - 0.5) * h, (m + 0.5) * h
    return _log_cell(lo - d, hi - d, logcdf) - _log_cell(lo, hi, logcdf)


def gold_posterior(spec: SyntheticSpec, scores: ArrayLike) -> NDArray[np.float64]:
    """``P(gold at rank i | s)`` for each row of ranked scores, shape (Q, N) (rows sum to 1).

    ``p_i = exp(l(s_i) - max_j l(s_j)) / sum_j exp(l(s_j) - max_j l(s_j))`` (log-sum-exp).
    """
    s = np.atleast_2d(np.asarray(scores, dtype=np.float64))
    if s.shape[1] != spec.n:
        raise ValueError(f"score lists have {s.shape[1]} candidates but the spec has n={spec.n}")
    llr = log_likelihood_ratio(spec, s)
    llr = llr - llr.max(axis=1, keepdims=True)
    w = np.exp(llr)
    return w / w.sum(axis=1, keepdims=True)


def payoff_if_found(
    kind: str, objective: str, config: EpisodeConfig, n: int, depth: int
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per depth K = 1..depth: (payoff multiplier when found, sure cost), so that
    ``E[payoff(K)] = C(K) * found[K-1] - cost[K-1]``.

    "net": ``found = T(K)``, ``cost = c (K - 1)``; "reward": ``found = T(K)``, ``cost = 0``;
    "return": ``found = gamma^(K-1) T(K)``, ``cost = c sum_{i=0}^{K-2} gamma^i`` (module docstring).
    """
    if objective not in OBJECTIVES:
        raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
    k = np.arange(1, depth + 1)
    term = np.asarray(terminal_reward(kind, np.ones(depth), k, n, 1), dtype=np.float64)
    if objective == "reward":
        return term, np.zeros(depth)
    g, c = (1.0 if objective == "net" else float(config.gamma)), float(config.step_cost)
    steps = (k - 1).astype(np.float64)
    cost = c * steps if g == 1.0 else c * (1.0 - g**steps) / (1.0 - g)
    return g**steps * term, cost


def expected_payoff(
    posterior: NDArray[np.float64], found_pay: NDArray[np.float64], cost: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``E[payoff_i(K)] = C_i(K) found_pay(K) - cost(K)`` with ``C_i(K) = cumsum_K posterior_i``, (Q, D)."""
    d = found_pay.size
    cum = np.minimum(np.cumsum(posterior, axis=1)[:, :d], 1.0)
    return cum * found_pay[None, :] - cost[None, :]


def spec_of_queries(queries: Sequence[RankedQuery]) -> SyntheticSpec:
    """The generator spec named by the query ids; all queries must agree on it."""
    specs = {spec_from_qid(q.qid) for q in queries}
    if len(specs) != 1:
        raise ValueError(f"queries come from {len(specs)} different synthetic specs; give the spec explicitly")
    return specs.pop()


def bayes_depths(
    spec: SyntheticSpec,
    queries: Sequence[RankedQuery],
    config: EpisodeConfig,
    kind: str = "bor",
    objective: str = "net",
) -> tuple[NDArray[np.int64], NDArray[np.float64]]:
    """Bayes-optimal depths and their posterior expected payoffs (module docstring), vectorised.

    Returns:
        depths: (Q,) ``argmax_{K <= cap} E[payoff(K)]`` (first maximum).
        value: (Q,) the expected payoff at that depth.
    """
    if len(queries) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0)
    bad = [q for q in queries if q.length != spec.n or q.n_candidates != spec.n]
    if bad:
        raise ValueError(f"query {bad[0].qid!r} has {bad[0].length} candidates; the spec has n={spec.n}")
    s = np.vstack([q.scores for q in queries])
    caps = np.array([config.cap(q) for q in queries], dtype=np.int64)
    d = int(caps.max())
    found_pay, cost = payoff_if_found(kind, objective, config, spec.n, d)
    value = expected_payoff(gold_posterior(spec, s), found_pay, cost)
    value = np.where(np.arange(1, d + 1)[None, :] <= caps[:, None], value, -np.inf)
    k = np.argmax(value, axis=1)
    return (k + 1).astype(np.int64), value[np.arange(len(queries)), k]


class BayesOptimal:
    """Bayes-optimal depth under the known synthetic generator (see the module docstring).

    Args:
        spec: the generator; None = read it from the query ids at ``fit``/``depths``.
        reward: terminal reward kind ("bor", "f1" or "constant").
        objective: "net" (expected net reward; name ``bayes`` for BoR), "reward" (cost-free; name
            ``<reward>-bayes-costfree``) or "return" (expected discounted episode return with step
            costs; name ``<reward>-bayes-mdp``).
    """

    artifact = "agent.json"
    stochastic = False

    def __init__(self, spec: SyntheticSpec | None = None, reward: str = "bor", objective: str = "net") -> None:
        if reward not in REWARD_KINDS:
            raise ValueError(f"unknown reward {reward!r}; expected one of {', '.join(REWARD_KINDS)}")
        if objective not in OBJECTIVES:
            raise ValueError(f"objective must be one of {', '.join(OBJECTIVES)}, got {objective!r}")
        self.spec = spec
        self.reward = reward
        self.objective = objective
        if objective == "net":
            self.name = "bayes" if reward == "bor" else f"{reward}-bayes"
        else:
            self.name = f"{reward}-bayes-{'mdp' if objective == 'return' else 'costfree'}"

    def _spec(self, queries: Sequence[RankedQuery]) -> SyntheticSpec:
        return self.spec if self.spec is not None else spec_of_queries(queries)

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> BayesOptimal:
        """Nothing to learn: the generator is known. Resolves the spec from the qids when it is None."""
        if self.spec is None and len(queries):
            self.spec = spec_of_queries(queries)
        return self

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        if len(queries) == 0:
            return np.zeros(0, dtype=np.int64)
        return bayes_depths(self._spec(queries), queries, config, self.reward, self.objective)[0]

    def save(self, path: Path) -> None:
        """JSON: the spec (or null), reward kind and objective."""
        spec = None if self.spec is None else self.spec.as_dict()
        save_json(path, self.name, {"spec": spec, "reward": self.reward, "objective": self.objective})

    @classmethod
    def load(cls, path: Path, reward: str = "bor", settings: Any = None) -> BayesOptimal:
        """Read a policy written by :meth:`save` (the file's reward kind wins over ``reward``)."""
        p = read_json(path, "Bayes-optimal policy")
        try:
            spec = None if p["spec"] is None else SyntheticSpec(**p["spec"])
            return cls(spec, str(p["reward"]), str(p["objective"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{path}: malformed Bayes-optimal policy file ({e})") from e


register(
    "bayes",
    lambda reward, settings: BayesOptimal(None, "bor", "net"),
    group="limit",
    stochastic=False,
    uses_reward=False,
    description="Bayes-optimal depth under the known synthetic generator (the ceiling of every score-only policy "
    "on the judged net reward)",
    only_benchmarks=("synthetic",),
    objective=net_objective,
)
