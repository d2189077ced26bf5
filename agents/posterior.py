"""Listwise posterior of the gold's rank, then the depth of largest expected net reward.

Where the cut-off (:mod:`agents.cutoff`) predicts ``P(found by k)`` for every depth separately, this
policy models the one quantity every depth shares: WHERE in the ranked list the gold item sits.

Model
-----
Each query's first M = min(m, L) ranked items (L = list length, ``m`` a setting) and one "tail"
pseudo-item, "the gold lies beyond rank M or is absent from the list", compete in one softmax:

    P(gold at rank i | list) = exp(w . x_i) / (sum_{j <= M} exp(w . x_j) + exp(w . x_tail))

with ``x_i`` the per-item features of :func:`envs.features.rank_features` (9 from the ranking
scorer's scores, 15 when the queries carry a second scorer's), standardised with the mean and
standard deviation of the training items (stored with the model), followed by two tail columns that
are 0 on every item; ``x_tail`` is 0 on the item columns (the training mean), 1 on the tail flag and
``log2(L - M + 1)`` on the tail size. The softmax is shift-invariant over the items, so a feature
that is the same on every row of a list only moves mass between the list and the tail. For a query
with several relevant items the target is the FIRST relevant rank (found by k <=> first relevant
rank <= k); a first relevant rank beyond M, or none in the list, is the tail.

Fit: maximum likelihood of the gold's position with an L2 penalty,

    J(w) = -(1/Q) sum_q log P_q(target_q) + l2 ||w||^2,
    dJ/dw = (1/Q) sum_q (sum_i P_qi x_qi - x_q,target_q) + 2 l2 w,

by L-BFGS-B (:func:`scipy.optimize.minimize`, analytic gradient :func:`nll_and_grad`, vectorised
over a padded (Q, M+1, F+2) tensor and its mask) from w = 0. J is strictly convex (a softmax
log-likelihood plus a ridge), so the optimum is unique and the fit deterministic: the seed is not
used (``stochastic=False``).

Decision
--------
With ``F(k) = sum_{i <= k} P_i`` the model's P(found by k), ``T(k)`` the terminal reward of the
policy's reward kind when found (BoR: ``-log2 P_rand(k; N, R)``, R the median R of the training queries:
inference never reads a query's own R, :func:`agents.base.assumed_relevant`) and c the step cost,

    K = argmax_{1 <= k <= min(M, cap)}  F(k) T(k) - c (k - 1)      (first maximum)

the expected per-query reward net of the CONTINUE steps, undiscounted: the evaluator's
``reward_net``. ``cap`` is the episode's depth cap, also capped at the break-even depth
(:func:`agents.base.learned_episode`) when the ``break_even`` setting is on, as for the other
learned agents. Here that cap never changes a depth: beyond it ``F(k) T(k) - c (k - 1) <=
T(k) - c (k - 1) <= 0 <= F(1) T(1)`` and ties go to the smaller depth, so the argmax lies within it
anyway (the setting is kept for uniformity with the other learned agents). The tail's mass is never
"found", so depths beyond M are never chosen.

The policy reads the raw scores (and the second scorer's, when the queries carry them), not a named
observation set of :mod:`envs.features`: a model fitted with one scorer refuses queries with two and
the reverse (:func:`agents.base.check_observation`). numpy and scipy only; saved as JSON (no pickle).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agents.base import (
    assumed_relevant,
    check_observation,
    learned_episode,
    net_objective,
    read_assumed_relevant,
    read_json,
    save_json,
)
from agents.registry import register
from envs import EpisodeConfig, RankedQuery
from envs.features import observation_width, rank_feature_names, rank_features
from rewards import terminal_reward

__all__ = ["ListwisePosterior", "PosteriorConfig", "design_tensor", "nll_and_grad", "rank_targets"]

TAIL_NAMES: tuple[str, ...] = ("tail", "tail_log_size")
"""The two columns after the item features: 1 on the tail pseudo-item, and its log2(L - M + 1)."""
PAYS_KEPT = 64
"""Rows of terminal rewards a policy keeps (one per list width, list size and relevant count seen)."""


@dataclass(frozen=True)
class PosteriorConfig:
    """Listwise posterior settings."""

    m: int = 60
    """Ranks modelled one by one (M = min(m, L)); the gold beyond them is the tail pseudo-item, and no
    depth beyond M is ever chosen."""
    l2: float = 0.01
    """L2 penalty ``l2 ||w||^2`` added to the mean negative log-likelihood."""
    max_iter: int = 500
    """Largest number of L-BFGS-B iterations."""
    tol: float = 1e-9
    """L-BFGS-B tolerance (``scipy.optimize.minimize(tol=...)``: relative change of the objective and
    largest gradient entry)."""
    break_even: bool = True
    """Stop at the latest at each query's break-even depth (:func:`agents.base.learned_episode`); the
    argmax never lies beyond it anyway (module docstring), so no depth changes."""

    def __post_init__(self) -> None:
        def whole(value: object) -> bool:
            return isinstance(value, int) and not isinstance(value, bool)

        if not whole(self.m) or self.m < 1:
            raise ValueError(f"PosteriorConfig.m must be an integer >= 1, got {self.m!r}")
        if not (isinstance(self.l2, int | float) and math.isfinite(self.l2) and self.l2 >= 0):
            raise ValueError(f"PosteriorConfig.l2 must be finite and >= 0, got {self.l2!r}")
        if not whole(self.max_iter) or self.max_iter < 1:
            raise ValueError(f"PosteriorConfig.max_iter must be an integer >= 1, got {self.max_iter!r}")
        if not (isinstance(self.tol, int | float) and math.isfinite(self.tol) and self.tol > 0):
            raise ValueError(f"PosteriorConfig.tol must be finite and > 0, got {self.tol!r}")
        if not isinstance(self.break_even, bool):
            raise ValueError(f"PosteriorConfig.break_even must be true or false, got {self.break_even!r}")


def item_tensor(
    queries: Sequence[RankedQuery], m: int
) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.int64], NDArray[np.int64]]:
    """Raw per-item features of every query, padded: items (Q, M, F) with M = the largest min(m, L_q),
    the mask of real items (Q, M), each query's M_q and its list length L_q."""
    observation_width(queries)  # one scorer on every query or two on every query (names a query otherwise)
    mats = [rank_features(q, m) for q in queries]
    mq = np.array([x.shape[0] for x in mats], dtype=np.int64)
    width = int(mq.max())
    items = np.zeros((len(queries), width, mats[0].shape[1]))
    for i, x in enumerate(mats):
        items[i, : x.shape[0]] = x
    mask = np.arange(width)[None, :] < mq[:, None]
    return items, mask, mq, np.array([q.length for q in queries], dtype=np.int64)


def design_tensor(
    items: NDArray[np.float64],
    mask: NDArray[np.bool_],
    mq: NDArray[np.int64],
    lengths: NDArray[np.int64],
    mean: NDArray[np.float64],
    sd: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """The model's input (Q, M+1, F+2) and its mask: standardised items in rows 0..M-1 (padding rows
    are 0 and masked), the tail pseudo-item in row M (module docstring)."""
    q, width, f = items.shape
    x = np.zeros((q, width + 1, f + len(TAIL_NAMES)))
    x[:, :width, :f] = np.where(mask[:, :, None], (items - mean) / sd, 0.0)
    x[:, width, f] = 1.0
    x[:, width, f + 1] = np.log2(lengths - mq + 1)
    return x, np.concatenate([mask, np.ones((q, 1), dtype=bool)], axis=1)


def rank_targets(queries: Sequence[RankedQuery], mq: NDArray[np.int64], width: int) -> NDArray[np.int64]:
    """Row of each query's gold in the design tensor: first relevant rank - 1 when it is within the
    query's M ranks, else ``width`` (the tail row). Reads labels: training queries only."""
    gold = np.array([q.gold_rank for q in queries], dtype=np.int64)
    return np.where((gold >= 1) & (gold <= mq), gold - 1, width)


def _log_softmax(x: NDArray[np.float64], valid: NDArray[np.bool_], w: NDArray[np.float64]) -> NDArray[np.float64]:
    logits = np.where(valid, x @ w, -np.inf)
    top = logits.max(axis=1, keepdims=True)
    return logits - top - np.log(np.exp(logits - top).sum(axis=1, keepdims=True))


def nll_and_grad(
    w: NDArray[np.float64],
    x: NDArray[np.float64],
    valid: NDArray[np.bool_],
    target: NDArray[np.int64],
    l2: float,
) -> tuple[float, NDArray[np.float64]]:
    """J(w) and dJ/dw of the module docstring for a design tensor ``x`` (Q, M+1, F'), its mask (Q, M+1)
    and the target rows (Q,)."""
    logp = _log_softmax(x, valid, w)
    rows = np.arange(x.shape[0])
    p = np.exp(logp)  # exactly 0 on masked rows
    nll = -float(logp[rows, target].mean()) + l2 * float(w @ w)
    grad = (np.einsum("qi,qif->f", p, x) - x[rows, target].sum(axis=0)) / x.shape[0] + 2.0 * l2 * w
    return nll, grad


class ListwisePosterior:
    """Listwise softmax over the gold's rank + expected-net-reward argmax (see the module docstring).
    Name ``<reward>-posterior``."""

    artifact = "agent.json"
    stochastic = False

    def __init__(self, reward: str = "bor", settings: PosteriorConfig | None = None) -> None:
        self.reward = reward
        self.settings = settings or PosteriorConfig()
        self.name = f"{reward}-posterior"
        self.hybrid = False
        self.weights: NDArray[np.float64] | None = None
        self.mean = np.zeros(0)
        self.sd = np.ones(0)
        self.final_loss = math.nan
        self.n_iter = 0
        self.r_assumed = 1  # R at inference, fitted on the training queries (agents.base.assumed_relevant)
        self.converged = False
        self._pays: dict[tuple[int, int, int], NDArray[np.float64]] = {}

    @property
    def feature_names(self) -> tuple[str, ...]:
        """Item feature names (:func:`envs.features.rank_feature_names`) then the two tail columns."""
        return rank_feature_names(self.hybrid) + TAIL_NAMES

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> ListwisePosterior:
        """Maximum-likelihood weights (L-BFGS-B from w = 0; ``seed`` unused: the fit is deterministic)."""
        config.check_queries(queries)
        s = self.settings
        items, mask, mq, lengths = item_tensor(queries, s.m)
        self.hybrid = bool(queries[0].hybrid)
        real = items[mask]
        self.mean = real.mean(axis=0)
        sd = real.std(axis=0)
        self.sd = np.where(sd > 1e-12, sd, 1.0)
        x, valid = design_tensor(items, mask, mq, lengths, self.mean, self.sd)
        target = rank_targets(queries, mq, items.shape[1])
        from scipy.optimize import minimize

        res = minimize(
            nll_and_grad,
            np.zeros(x.shape[-1]),
            args=(x, valid, target, s.l2),
            jac=True,
            method="L-BFGS-B",
            tol=s.tol,
            options={"maxiter": s.max_iter},
        )
        self.weights = np.asarray(res.x, dtype=np.float64)
        self.r_assumed = assumed_relevant(queries)
        self.final_loss = float(res.fun)
        self.n_iter = int(res.nit)
        self.converged = bool(res.success)
        return self

    def _design(
        self, queries: Sequence[RankedQuery]
    ) -> tuple[NDArray[np.float64], NDArray[np.bool_], NDArray[np.int64]]:
        if self.weights is None:
            raise RuntimeError(f"{self.name}: call fit() or load() first")
        items, mask, mq, lengths = item_tensor(queries, self.settings.m)
        check_observation(self.name, self.mean.size, items.shape[-1], "features per ranked item")
        x, valid = design_tensor(items, mask, mq, lengths, self.mean, self.sd)
        return x, valid, mq

    def rank_posterior(self, queries: Sequence[RankedQuery]) -> NDArray[np.float64]:
        """P(gold at rank i | list) for i = 1..M (columns 0..M-1, 0 beyond each query's M_q) and the
        tail's mass (last column), shape (Q, M+1); rows sum to 1. Reads no labels."""
        x, valid, _ = self._design(queries)
        assert self.weights is not None
        return np.exp(_log_softmax(x, valid, self.weights))

    def expected_net_reward(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.float64]:
        """``F(k) T(k) - c (k - 1)`` for k = 1..M, shape (Q, M); -inf beyond min(M_q, cap_q)."""
        return self.found_and_value(queries, config)[1]

    def explain(
        self, queries: Sequence[RankedQuery], config: EpisodeConfig
    ) -> tuple[NDArray[np.int64], list[dict[str, float]]]:
        """The depths (those of :meth:`depths`) and why: the model's P(found by K) = F(K) and the expected net
        reward F(K) T(K) - c (K - 1) at each."""
        if len(queries) == 0:
            return np.zeros(0, dtype=np.int64), []
        found, value = self.found_and_value(queries, config)
        col = np.argmax(value, axis=1)
        rows = np.arange(len(queries))
        why = [
            {"p_found": float(f), "expected_net_reward": float(v)}
            for f, v in zip(found[rows, col], value[rows, col], strict=True)
        ]
        return (col + 1).astype(np.int64), why

    def found_and_value(
        self, queries: Sequence[RankedQuery], config: EpisodeConfig
    ) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
        """``F(k)`` and ``F(k) T(k) - c (k - 1)`` for k = 1..M, each (Q, M) (the value -inf beyond the cap)."""
        x, valid, mq = self._design(queries)
        assert self.weights is not None
        p = np.exp(_log_softmax(x, valid, self.weights))[:, :-1]
        width = p.shape[1]
        episode = learned_episode(config, self.settings.break_even)
        caps = np.minimum(np.array([episode.cap(q) for q in queries], dtype=np.int64), mq)
        k = np.arange(1, width + 1)[None, :]
        pay = np.stack([self._pay(width, q.n_candidates, self.r_assumed) for q in queries])
        found = np.cumsum(p, axis=1)
        value = found * pay - config.step_cost * (k - 1)
        return found, np.where(k <= caps[:, None], value, -np.inf)

    def _pay(self, width: int, n: int, r: int) -> NDArray[np.float64]:
        """``T(k)`` for k = 1..width on a list of ``n`` candidates with ``r`` relevant (a depth beyond a short
        list: any valid one, ``min(k, n)``; masked by the caller), kept for the last few (width, n, r): a tool
        search asks for the same registry size on every request, and the terminal reward's exact log-space
        hypergeometric costs more than the rest of a decision. The row is the one the whole batch would get:
        the reward is elementwise."""
        key = (width, int(n), int(r))
        row = self._pays.get(key)
        if row is None:
            kk = np.minimum(np.arange(1, width + 1), n)
            found = np.ones(width, dtype=bool)
            row = np.asarray(terminal_reward(self.reward, found, kk, n, r), dtype=np.float64)
            row.flags.writeable = False
            if len(self._pays) >= PAYS_KEPT:
                self._pays.pop(next(iter(self._pays)))
            self._pays[key] = row
        return row

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        if len(queries) == 0:
            return np.zeros(0, dtype=np.int64)
        return (np.argmax(self.expected_net_reward(queries, config), axis=1) + 1).astype(np.int64)

    def params(self) -> dict[str, Any]:
        """Weights, standardisation, settings and feature names: what :meth:`save` writes (plain JSON types)."""
        if self.weights is None:
            raise RuntimeError(f"{self.name}: nothing to save")
        return {
            "reward": self.reward,
            "settings": asdict(self.settings),
            "hybrid": self.hybrid,
            "feature_names": list(self.feature_names),
            "weights": self.weights.tolist(),
            "mean": self.mean.tolist(),
            "sd": self.sd.tolist(),
            "final_train_loss": self.final_loss,
            "n_iter": self.n_iter,
            "converged": self.converged,
            "r_assumed": self.r_assumed,
        }

    def save(self, path: Path) -> None:
        """:meth:`params` as JSON (no pickle)."""
        save_json(path, self.name, self.params())

    @classmethod
    def load(cls, path: Path, reward: str = "bor", settings: Any = None) -> ListwisePosterior:
        """Rebuild a model written by :meth:`save` (JSON; never executes code). The file's reward kind and
        settings win over the arguments."""
        return cls.from_params(read_json(path, "listwise posterior"), str(path))

    @classmethod
    def from_params(cls, p: dict[str, Any], where: str) -> ListwisePosterior:
        """The model :meth:`params` describes; ValueError naming ``where`` (the file it was read from) when they
        are malformed or computed with other features."""
        try:
            out = cls(str(p["reward"]), PosteriorConfig(**p["settings"]))
            out.hybrid = bool(p["hybrid"])
            out.weights = np.array(p["weights"], dtype=np.float64)
            out.mean = np.array(p["mean"], dtype=np.float64)
            out.sd = np.array(p["sd"], dtype=np.float64)
            out.final_loss = float(p.get("final_train_loss", math.nan))
            out.n_iter = int(p.get("n_iter", 0))
            out.converged = bool(p.get("converged", False))
            out.r_assumed = read_assumed_relevant(p, where)
            names = tuple(p["feature_names"])
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{where}: malformed listwise posterior file ({e})") from e
        if names != out.feature_names:
            raise ValueError(
                f"{where}: saved with the features {list(names)} but this code computes {list(out.feature_names)}"
            )
        n = len(rank_feature_names(out.hybrid))
        shapes_ok = out.weights.shape == (n + len(TAIL_NAMES),) and out.mean.shape == (n,) and out.sd.shape == (n,)
        if not shapes_ok or not (np.all(np.isfinite(out.weights)) and np.all(out.sd > 0)):
            raise ValueError(f"{where}: malformed listwise posterior file (weights, mean or sd of the wrong shape)")
        return out


register(
    "posterior",
    lambda reward, settings: ListwisePosterior(reward, settings),
    group="agent",
    stochastic=False,
    uses_reward=True,
    description="listwise softmax over the gold's rank (linear in per-item score features, plus the second "
    "scorer's on -hybrid conditions; L-BFGS), stop at the argmax of expected reward minus step cost "
    "(see agents/posterior.py)",
    config=PosteriorConfig,
    objective=net_objective,
)
