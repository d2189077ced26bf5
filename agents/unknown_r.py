"""Unknown R at inference: estimate the number of relevant items from scores, and price the guess.

Training uses each query's true R_q (SPEC section 2), but a deployed system sees only
scores. Two questions follow: how well can R be guessed from scores, and how much do
the reported chance-corrected numbers move when the chance term uses a guessed R.

Estimator (:class:`REstimator`, :func:`estimate_r`), fitted on training queries only,
from score-only features (never labels of the test queries):

- ``"mean"``: every query gets ``max(1, round(mean_train R))``;
- ``"regression"`` (default): ridge regression of ``log R`` on the features of
  :func:`r_features`, ``R_hat = clip(round(exp(prediction)), 1, N_q)``. Ridge penalty
  ``alpha * n_train`` on the non-intercept weights (features standardised on train;
  ``alpha = 1.0`` by default), so with a constant train R (e.g. every MetaTool
  multi-tool query has R = 2) it returns that constant.

What :func:`unknown_r_table` compares, for the same depths K_q and the same TRUE
success flags (``found``: >= 1 relevant in the top K; ``complete``: all R_q in the top
K), only the chance term changes, computed with an assumed R:

- ``"R=1"``: the single-gold assumption (``P_any = K/N``, ``P_all = K/N``);
- ``"estimated"``: R_hat from the estimator;
- ``"true"``: the labelled R_q (the reference).

Rows report ``bor_bits`` = ``log2(mean found / mean P_any(K; N, R_assumed))``,
``bor_bits_all`` = ``log2(mean complete / mean P_all(K; N, R_assumed))`` (NaN when every
K_q < R_assumed), the mean per-query BoR reward ``found * -log2 P_any(K; N, R_assumed)``,
and the differences to the "true" row (``*_minus_true``): the cost (in bits) of not
knowing R. Assuming R = 1 when R > 1 understates chance, so it overstates BoR for "any".
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from envs import RankedQuery
from rewards import bor_aggregate, bor_reward, completeness_at_k, p_random, p_random_all

__all__ = ["R_FEATURES", "ESTIMATORS", "r_features", "REstimator", "estimate_r", "unknown_r_table"]

#: Names of the columns of :func:`r_features`.
R_FEATURES = ("log_near_90", "log_near_75", "top_z", "gap_12_z", "gap_23_z", "log_n")
#: Methods of :class:`REstimator`.
ESTIMATORS = ("mean", "regression")


def r_features(queries: Sequence[RankedQuery]) -> NDArray[np.float64]:
    """Score-only features per query, shape (Q, 6), in :data:`R_FEATURES` order.

    With ``u`` the min-max normalised scores of the ranked list (all 1 for a constant list)
    and ``z`` the z-scores (all 0 for a constant list):
    ``log1p(#{u >= 0.90})``, ``log1p(#{u >= 0.75})``, ``z_1``, ``z_1 - z_2``, ``z_2 - z_3``
    (0 where the list is shorter) and ``log(N)``.
    """
    out = np.zeros((len(queries), len(R_FEATURES)), dtype=np.float64)
    for i, q in enumerate(queries):
        s = q.scores
        span = s[0] - s[-1]
        u = (s - s[-1]) / span if span > 0 else np.ones_like(s)
        sd = s.std()
        z = (s - s.mean()) / sd if sd > 1e-12 * max(1.0, abs(s).max()) else np.zeros_like(s)
        zz = np.concatenate([z, np.full(3, z[-1])])
        out[i] = (
            math.log1p(int(np.sum(u >= 0.90))),
            math.log1p(int(np.sum(u >= 0.75))),
            zz[0],
            zz[0] - zz[1] if s.size > 1 else 0.0,
            zz[1] - zz[2] if s.size > 2 else 0.0,
            math.log(q.n_candidates),
        )
    return out


@dataclass
class REstimator:
    """Estimator of R_q from scores (see the module docstring).

    Attributes:
        method: "mean" or "regression".
        alpha: ridge penalty per training query (regression only).
    """

    method: str = "regression"
    alpha: float = 1.0
    coef_: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    mean_: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    scale_: NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))
    mean_r_: float = math.nan

    def __post_init__(self) -> None:
        if self.method not in ESTIMATORS:
            raise ValueError(f"unknown R estimator {self.method!r}; expected one of {', '.join(ESTIMATORS)}")
        if not (math.isfinite(self.alpha) and self.alpha >= 0):
            raise ValueError(f"alpha must be finite and >= 0, got {self.alpha}")

    def fit(self, queries: Sequence[RankedQuery]) -> REstimator:
        """Fit on training queries (their true ``n_relevant``).

        Raises:
            ValueError: no queries, or a training query with R = 0 (log R undefined).
        """
        if len(queries) == 0:
            raise ValueError("estimate R: no training queries")
        r = np.array([q.n_relevant for q in queries], dtype=np.float64)
        if np.any(r < 1):
            bad = queries[int(np.flatnonzero(r < 1)[0])].qid
            raise ValueError(f"estimate R: training query {bad!r} has R = 0")
        self.mean_r_ = float(r.mean())
        if self.method == "regression":
            x = r_features(queries)
            self.mean_ = x.mean(axis=0)
            sd = x.std(axis=0)
            self.scale_ = np.where(sd > 1e-12, sd, 1.0)
            xs = np.hstack([np.ones((len(queries), 1)), (x - self.mean_) / self.scale_])
            pen = np.eye(xs.shape[1]) * self.alpha * len(queries)
            pen[0, 0] = 0.0
            self.coef_ = np.linalg.solve(xs.T @ xs + pen, xs.T @ np.log(r))
        return self

    def predict(self, queries: Sequence[RankedQuery]) -> NDArray[np.int64]:
        """R_hat per query, whole numbers in [1, N_q].

        Raises:
            ValueError: called before :meth:`fit`.
        """
        if math.isnan(self.mean_r_):
            raise ValueError("REstimator.predict called before fit")
        n = np.array([q.n_candidates for q in queries], dtype=np.int64)
        if self.method == "mean":
            est = np.full(len(queries), max(1.0, round(self.mean_r_)))
        else:
            x = (r_features(queries) - self.mean_) / self.scale_
            est = np.rint(np.exp(self.coef_[0] + x @ self.coef_[1:]))
        return np.clip(est, 1, n).astype(np.int64)


def estimate_r(
    train_queries: Sequence[RankedQuery], test_queries: Sequence[RankedQuery], method: str = "regression"
) -> NDArray[np.int64]:
    """Fit :class:`REstimator` on ``train_queries`` and return R_hat for ``test_queries``."""
    return REstimator(method).fit(train_queries).predict(test_queries)


def unknown_r_table(queries: Sequence[RankedQuery], depths: Mapping[str, ArrayLike], r_hat: ArrayLike) -> pd.DataFrame:
    """BoR bits and mean reward with the chance term assuming R = 1, R_hat and the true R.

    Args:
        queries: the evaluated queries (true R = ``n_relevant``).
        depths: method -> per-query depths K_q.
        r_hat: estimated R per query (e.g. :func:`estimate_r`).

    Returns:
        One row per (method, assumption) with ``found_pct``, ``complete_pct`` (true labels),
        ``mean_r_assumed``, ``mean_p_random``, ``bor_bits``, ``mean_reward``, ``bor_bits_all``,
        and ``bor_bits_minus_true``, ``mean_reward_minus_true``, ``bor_bits_all_minus_true``;
        the "estimated" rows also carry ``r_exact_pct`` (R_hat == R) and ``r_mae``.

    Raises:
        ValueError: shape mismatch or R_hat outside [1, N_q].
    """
    n = np.array([q.n_candidates for q in queries], dtype=np.int64)
    r_true = np.array([q.n_relevant for q in queries], dtype=np.int64)
    rh = np.asarray(r_hat, dtype=np.int64)
    if rh.shape != r_true.shape:
        raise ValueError(f"expected {len(queries)} estimates of R, got shape {rh.shape}")
    if np.any(rh < 1) or np.any(rh > n):
        bad = int(np.flatnonzero((rh < 1) | (rh > n))[0])
        raise ValueError(f"R estimate {rh[bad]} for query {queries[bad].qid!r} is outside 1..{n[bad]}")
    assumptions = {"R=1": np.ones_like(r_true), "estimated": rh, "true": r_true}
    rows = []
    for method, d in depths.items():
        k = np.asarray(d, dtype=np.int64)
        if k.shape != r_true.shape:
            raise ValueError(f"method {method!r}: expected {len(queries)} depths, got shape {k.shape}")
        found = np.array([bool(q.found_at(int(kq))) for q, kq in zip(queries, k, strict=True)], dtype=np.int64)
        complete = np.array(
            [
                bool(completeness_at_k(q.relevant_ranks, int(kq), q.n_relevant))
                for q, kq in zip(queries, k, strict=True)
            ],
            dtype=np.int64,
        )
        block: list[dict[str, Any]] = []
        for name, r in assumptions.items():
            r_eff = np.maximum(r, 1)
            block.append(
                {
                    "method": method,
                    "assumption": name,
                    "n_queries": len(queries),
                    "mean_k": float(k.mean()),
                    "found_pct": 100.0 * float(found.mean()),
                    "complete_pct": 100.0 * float(complete.mean()),
                    "mean_r_assumed": float(r.mean()),
                    "mean_p_random": float(np.mean(p_random(k, n, r_eff))),
                    "bor_bits": bor_aggregate(found, k, n, r_eff),
                    "mean_reward": float(np.mean(bor_reward(found, k, n, r_eff))),
                    "bor_bits_all": _bits_all(complete, k, n, r_eff),
                    "r_exact_pct": 100.0 * float(np.mean(r == r_true)),
                    "r_mae": float(np.mean(np.abs(r - r_true))),
                }
            )
        true = block[-1]
        for row in block:
            for key in ("bor_bits", "mean_reward", "bor_bits_all"):
                row[f"{key}_minus_true"] = float(row[key]) - float(true[key])
        rows.extend(block)
    return pd.DataFrame(rows)


def _bits_all(complete: NDArray[np.int64], k: NDArray[np.int64], n: NDArray[np.int64], r: NDArray[np.int64]) -> float:
    """``log2(mean complete / mean P_all(K; N, r))`` with an assumed r.

    A wrong r can make chance 0 where the query is truly complete (r > K): the ratio is
    then computed as is (``inf`` when every chance term is 0 but some query is complete,
    NaN when nothing is complete either).
    """
    pa = np.asarray(p_random_all(k, n, r), dtype=np.float64)
    mean_rand, mean_obs = float(pa.mean()), float(complete.mean())
    if mean_rand == 0.0:
        return math.nan if mean_obs == 0.0 else math.inf
    if mean_obs == 0.0:
        return -math.inf
    return math.log2(mean_obs / mean_rand)
