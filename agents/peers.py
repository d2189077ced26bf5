"""Peers a practitioner would use instead of RL: score gap, score threshold, top-p mass,
the best fixed K on the training split, and a random depth.

Every policy follows :class:`agents.base.DepthPolicy` (``name``, ``fit``, ``depths``), so
the one evaluator (:func:`agents.evaluation.evaluate`) and the one runner serve them
alongside the RL agents. None of them reads labels at inference; the fitted ones read
labels of the training split only, in ``fit``.

Vectorised cores
----------------
Each heuristic has a core on a padded score matrix with no per-query Python loop:

- ``scores``: float array (Q, D); row q is sorted descending over its first
  ``lengths[q]`` entries; entries after that are padding and are ignored (NaN is a
  good pad). NaN/inf inside a row's valid part raise ``ValueError`` naming the row.
- ``lengths``: (Q,) valid entries per row, 1..D (default: D for every row).
- ``caps``: (Q,) depth caps, 1..lengths (default: lengths).

Returned depths always lie in 1..caps[q]. Per-query normalisations use the row's
full valid list (as :mod:`envs.features` does):

- min-max ``u_i = (s_i - s_min) / (s_max - s_min)`` (all ones for a constant row);
- z-scores ``z_i = (s_i - mu) / sd`` (all zeros when ``sd <= 1e-12 * max(1, max|s|)``).

Parameter search
----------------
Fitted parameters (threshold t, mass p) are chosen exactly, not on a grid: a rule
whose depth is ``1 + #{j : key_qj <= theta}`` (keys non-decreasing in j) has a mean
training reward that is piecewise constant in ``theta``, changing only at key values.
:func:`sweep_keys` sorts all keys once and evaluates every piece with a cumulative sum;
the chosen parameter is the midpoint of the best piece (ties: the piece with the
smallest total depth). The training objective of "reward" methods is the mean **net
reward** of the family's reward kind: the terminal reward minus the step cost per shown item
after the first, undiscounted (:func:`agents.base.judged_objective`: the quantity the evaluator
reports as "mean net reward" when the kind is "bor", the study's judged quantity).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from agents.base import Objective, net_objective, read_json, save_json
from agents.registry import register
from envs import OUTCOME, EpisodeConfig, RankedQuery, terminal_payoffs
from rewards import p_random, terminal_reward

__all__ = [
    "GapConfig",
    "GapPolicy",
    "GreedyKConfig",
    "ThresholdConfig",
    "TopPConfig",
    "GreedyK",
    "RandomDepth",
    "ThresholdPolicy",
    "TopPPolicy",
    "check_matrix",
    "log_rest_mass",
    "gap_depths",
    "minmax_scores",
    "objective_matrix",
    "query_caps",
    "score_matrix",
    "sweep_depths",
    "sweep_keys",
    "threshold_depths",
    "topp_depths",
]

FLAT_TOL = 1e-12


# ----------------------------------------------------------------------------- matrix helpers


def check_matrix(
    scores: ArrayLike, lengths: ArrayLike | None = None, caps: ArrayLike | None = None
) -> tuple[NDArray[np.float64], NDArray[np.int64], NDArray[np.int64], NDArray[np.bool_]]:
    """Validate a padded score matrix; return (scores, lengths, caps, valid mask).

    Raises:
        ValueError: not 2-D, lengths outside 1..D, caps outside 1..lengths, NaN/inf
            inside a row's valid part, or a row not sorted descending.
    """
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 2:
        raise ValueError(f"scores must be a 2-D (queries x depth) matrix, got shape {s.shape}")
    q, d = s.shape
    if d == 0 and q > 0:
        raise ValueError("scores has zero columns: every query needs at least one candidate")
    n = np.full(q, d, dtype=np.int64) if lengths is None else np.asarray(lengths).astype(np.int64)
    if n.shape != (q,):
        raise ValueError(f"lengths must have shape ({q},), got {n.shape}")
    if q and (n.min() < 1 or n.max() > d):
        raise ValueError(f"lengths must lie in 1..{d}")
    c = n.copy() if caps is None else np.asarray(caps).astype(np.int64)
    if c.shape != (q,):
        raise ValueError(f"caps must have shape ({q},), got {c.shape}")
    if q and (c.min() < 1 or np.any(c > n)):
        raise ValueError("caps must lie in 1..lengths (a depth cap cannot exceed the list)")
    valid = np.arange(d) < n[:, None]
    bad = valid & ~np.isfinite(s)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        raise ValueError(f"score matrix row {row}, rank {col + 1} is {s[row, col]} (NaN/inf scores are not allowed)")
    if d > 1:
        with np.errstate(invalid="ignore"):
            up = (s[:, 1:] > s[:, :-1]) & valid[:, 1:]
        if up.any():
            row, col = np.argwhere(up)[0]
            raise ValueError(f"score matrix row {row} is not sorted descending (rank {col + 2} > rank {col + 1})")
    return s, n, c, valid


def score_matrix(queries: Sequence[RankedQuery]) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Pad the queries' full score lists into a (Q, max length) matrix (NaN padding)."""
    lengths = np.array([q.length for q in queries], dtype=np.int64)
    d = int(lengths.max()) if len(queries) else 0
    out = np.full((len(queries), d), np.nan)
    if len(queries) and np.all(lengths == d):
        return np.vstack([q.scores for q in queries]), lengths
    for i, q in enumerate(queries):
        out[i, : q.length] = q.scores
    return out, lengths


def query_caps(queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
    """Depth cap of every query (``config.cap``)."""
    return np.array([config.cap(q) for q in queries], dtype=np.int64)


def _row_stats(s: NDArray[np.float64], n: NDArray[np.int64], valid: NDArray[np.bool_]) -> tuple:
    cnt = n.astype(np.float64)
    x = np.where(valid, s, 0.0)
    mu = x.sum(axis=1) / cnt
    sd = np.sqrt(np.maximum((np.where(valid, s - mu[:, None], 0.0) ** 2).sum(axis=1) / cnt, 0.0))
    scale = np.maximum(1.0, np.abs(x).max(axis=1))
    return mu, sd, sd <= FLAT_TOL * scale


def minmax_scores(scores: ArrayLike, lengths: ArrayLike | None = None) -> NDArray[np.float64]:
    """``u_i = (s_i - s_min) / (s_max - s_min)`` per row (ones for a constant row; padding 0)."""
    s, n, _, valid = check_matrix(scores, lengths)
    return _minmax(s, n, valid)


def _minmax(s: NDArray[np.float64], n: NDArray[np.int64], valid: NDArray[np.bool_]) -> NDArray[np.float64]:
    top = s[:, 0]
    low = s[np.arange(s.shape[0]), n - 1]
    rng = top - low
    safe = np.where(rng > 0, rng, 1.0)
    with np.errstate(invalid="ignore"):
        u = np.where((rng > 0)[:, None], (s - low[:, None]) / safe[:, None], 1.0)
    return np.where(valid, u, 0.0)


def log_rest_mass(scores: ArrayLike, lengths: ArrayLike | None = None, temperature: float = 1.0) -> NDArray[np.float64]:
    """Log of the softmax mass NOT yet shown after the top j items, for j = 1..D.

    With ``w_i = softmax(z / T)_i`` over a row's valid part (``z`` its z-scores, zeros for a
    constant row, ``T`` a temperature in z units), ``rest_j = sum_{i>j} w_i = 1 - c_j`` where
    ``c_j`` is the cumulative mass. Computed as a reverse cumulative sum of the shifted
    exponentials, so it stays accurate where ``c_j`` rounds to 1. ``-inf`` at the end of a
    row and on padding.
    """
    s, n, _, valid = check_matrix(scores, lengths)
    return _log_rest(s, n, valid, temperature)


def _log_rest(
    s: NDArray[np.float64], n: NDArray[np.int64], valid: NDArray[np.bool_], temperature: float
) -> NDArray[np.float64]:
    if not (math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be finite and > 0, got {temperature}")
    mu, sd, flat = _row_stats(s, n, valid)
    safe = np.where(flat, 1.0, sd)
    with np.errstate(invalid="ignore"):
        z = np.where(flat[:, None], 0.0, (s - mu[:, None]) / safe[:, None])
    x = np.where(valid, z / temperature, -np.inf)
    w = np.exp(x - x[:, :1])  # the top item has the largest z: every w <= 1
    rest = np.cumsum(w[:, ::-1], axis=1)[:, ::-1]  # rest[:, j] = sum_{i >= j} (0-based)
    total = rest[:, 0]
    out = np.full(s.shape, -np.inf)
    with np.errstate(divide="ignore"):
        out[:, :-1] = np.log(rest[:, 1:]) - np.log(total)[:, None]
    return np.where(valid, out, -np.inf)


# ----------------------------------------------------------------------------- vectorised cores


def gap_depths(
    scores: ArrayLike,
    lengths: ArrayLike | None = None,
    caps: ArrayLike | None = None,
    *,
    tail: float = 0.0,
    buffer: int = 0,
) -> NDArray[np.int64]:
    """Largest score gap (Adaptive-k, Taguchi et al., EMNLP 2025), vectorised.

    With drops ``d_j = s_j - s_{j+1}`` (j = 1..L-1) and the tail-ignored window
    ``W = (L - 1) - floor((L - 1) * tail)`` (the reference implementation's
    ``int((len - 1) * tail)`` gaps dropped from the end):

        ``k = min(cap, argmax_{j <= W} d_j + buffer)``

    where argmax takes the FIRST largest drop (ties, including a constant list whose
    drops are all 0, cut at the shallowest one) and a one-item list (W = 0) gives 1.
    Scale-free: any positive affine map of a row's scores gives the same cut.

    Args:
        scores, lengths, caps: padded matrix, valid lengths, depth caps (module docstring).
        tail: fraction of the list whose gaps are ignored at the bottom, in [0, 1).
        buffer: extra items shown after the cut (>= 0).
    """
    if not (0.0 <= tail < 1.0):
        raise ValueError(f"tail must lie in [0, 1), got {tail}")
    if int(buffer) != buffer or buffer < 0:
        raise ValueError(f"buffer must be a whole number >= 0, got {buffer}")
    s, n, c, _ = check_matrix(scores, lengths, caps)
    q, d = s.shape
    if q == 0:
        return np.zeros(0, dtype=np.int64)
    if d == 1:
        return np.minimum(1 + int(buffer), c)
    window = (n - 1) - np.floor((n - 1) * tail + 1e-9).astype(np.int64)
    with np.errstate(invalid="ignore"):
        drops = s[:, :-1] - s[:, 1:]
    drops = np.where(np.arange(d - 1) < window[:, None], drops, -np.inf)
    cut = np.argmax(drops, axis=1) + 1  # all -inf (L = 1) -> 0 -> cut 1
    return np.minimum(cut + int(buffer), c).astype(np.int64)


def threshold_depths(
    scores: ArrayLike, lengths: ArrayLike | None = None, caps: ArrayLike | None = None, *, t: float
) -> NDArray[np.int64]:
    """Show every item whose min-max normalised score reaches t:
    ``k = min(cap, max(1, #{i : u_i >= t}))`` (u non-increasing, so these are the top k)."""
    if math.isnan(t):
        raise ValueError("threshold t is NaN")
    s, n, c, valid = check_matrix(scores, lengths, caps)
    if s.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    u = _minmax(s, n, valid)
    count = ((u >= t) & (np.arange(s.shape[1]) < c[:, None])).sum(axis=1)
    return np.maximum(count, 1).astype(np.int64)


def topp_depths(
    scores: ArrayLike,
    lengths: ArrayLike | None = None,
    caps: ArrayLike | None = None,
    *,
    p: float | None = None,
    log_rest: float | None = None,
    temperature: float = 1.0,
) -> NDArray[np.int64]:
    """Top-p mass: the smallest k whose cumulative softmax mass reaches p, capped.

    ``k = min(cap, 1 + #{j < cap : rest_j > 1 - p})`` with ``rest_j = 1 - c_j`` the mass
    left after j items (:func:`log_rest_mass`), compared in log space. Give either ``p``
    or ``log_rest = log(1 - p)`` (the latter keeps p's that round to 1 exact).
    """
    if (p is None) == (log_rest is None):
        raise ValueError("give exactly one of p and log_rest")
    if p is not None:
        if math.isnan(p):
            raise ValueError("mass p is NaN")
        log_rest = math.log1p(-p) if p < 1 else -math.inf
    assert log_rest is not None
    if math.isnan(log_rest):
        raise ValueError("log_rest is NaN")
    s, n, c, valid = check_matrix(scores, lengths, caps)
    if s.shape[0] == 0:
        return np.zeros(0, dtype=np.int64)
    rest = _log_rest(s, n, valid, temperature)
    count = ((rest > log_rest) & (np.arange(s.shape[1]) < (c - 1)[:, None])).sum(axis=1)
    return (count + 1).astype(np.int64)


# ----------------------------------------------------------------------------- training objectives


def objective_matrix(
    queries: Sequence[RankedQuery], config: EpisodeConfig, kind: str, objective: str = "net"
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Per-query payoff of stopping at each depth k = 1..D (D = largest cap), and the caps.

    Columns beyond a query's cap repeat the value at its cap (depths are clipped). With
    ``T(k) = terminal_reward(kind, found(k), k, N, R)`` (R = max(R_q, 1), as in training) and c the
    episode's step cost:

    - ``objective="net"`` (the default: what every fitted peer maximises): ``T(k) - c (k - 1)``, the
      net reward, undiscounted (:func:`agents.base.judged_objective` for BoR);
    - ``objective="reward"``: ``T(k)``, the cost-free terminal reward;
    - ``objective="return"``: the episode return the RL agents maximise,
      ``gamma^(k-1) * T(k) - c * sum_{i<k-1} gamma^i`` (equal to ``"net"`` when gamma = 1).

    Labels are read here: call it on training queries only.
    """
    if objective not in ("net", "reward", "return"):
        raise ValueError(f"objective must be 'net', 'reward' or 'return', got {objective!r}")
    caps = query_caps(queries, config)
    d = int(caps.max())
    k = np.minimum(np.arange(1, d + 1)[None, :], caps[:, None])
    if kind == OUTCOME:  # observed per query and depth (envs.terminal_payoffs)
        out = np.vstack([terminal_payoffs(q, row, kind) for q, row in zip(queries, k, strict=True)])
    else:
        gold = np.array([q.gold_rank for q in queries], dtype=np.int64)[:, None]
        n = np.array([q.n_candidates for q in queries], dtype=np.int64)[:, None]
        r = np.maximum(np.array([q.n_relevant for q in queries], dtype=np.int64), 1)[:, None]
        out = np.asarray(terminal_reward(kind, (gold > 0) & (k >= gold), k, n, r), dtype=np.float64)
    steps = (k - 1).astype(np.float64)
    if objective == "net":
        out = out - config.step_cost * steps
    elif objective == "return":
        g, cost = config.gamma, config.step_cost
        paid = cost * steps if g == 1.0 else cost * (1.0 - g**steps) / (1.0 - g)
        out = g**steps * out - paid
    return out, caps


def _found_matrix(queries: Sequence[RankedQuery], caps: NDArray[np.int64]) -> NDArray[np.float64]:
    d = int(caps.max())
    gold = np.array([q.gold_rank for q in queries], dtype=np.int64)[:, None]
    k = np.minimum(np.arange(1, d + 1)[None, :], caps[:, None])
    return ((gold > 0) & (k >= gold)).astype(np.float64)


def sweep_keys(
    keys: NDArray[np.float64], gains: NDArray[np.float64], valid: NDArray[np.bool_]
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64]]:
    """Exact evaluation of a one-parameter counting rule at every distinct parameter piece.

    The rule: depth_q(theta) = 1 + #{j : valid_qj and key_qj <= theta}; moving from depth
    j to j+1 changes the query's payoff by ``gains[q, j-1]``. The total payoff (minus the
    depth-1 base) is constant on the pieces ``(-inf, u_1), [u_1, u_2), ..., [u_m, inf)`` of
    the sorted distinct keys u.

    Returns:
        thetas: (m+1,) a point inside each piece (midpoints; u_1 - 1 and u_m + 1 at the ends).
        totals: (m+1,) summed gains on each piece.
        extra: (m+1,) summed depth increments on each piece (total depth minus Q).
    """
    k = keys[valid]
    g = gains[valid]
    if k.size == 0:
        return np.zeros(1), np.zeros(1), np.zeros(1, dtype=np.int64)
    order = np.argsort(k, kind="stable")
    k, g = k[order], g[order]
    uniq, first = np.unique(k, return_index=True)
    csum = np.concatenate([[0.0], np.cumsum(g)])
    upto = np.append(first[1:], k.size)  # number of keys <= uniq[i]
    totals = np.concatenate([[0.0], csum[upto]])
    extra = np.concatenate([[0], upto]).astype(np.int64)
    thetas = np.empty(uniq.size + 1)
    thetas[0] = uniq[0] - 1.0
    thetas[-1] = uniq[-1] + 1.0
    thetas[1:-1] = (uniq[:-1] + uniq[1:]) / 2.0
    return thetas, totals, extra


def sweep_depths(
    keys: NDArray[np.float64], pay: NDArray[np.float64], caps: NDArray[np.int64]
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64]]:
    """:func:`sweep_keys` of a counting rule on a payoff matrix (Q, D) of :func:`objective_matrix`: going on from
    depth j to j + 1 (``keys[:, j - 1]``, j = 1..D-1) happens below each query's cap only and pays
    ``pay[:, j] - pay[:, j - 1]``. What the threshold, top-p and P(found) fits share."""
    d = pay.shape[1]
    return sweep_keys(keys, np.diff(pay, axis=1), np.arange(1, d)[None, :] < caps[:, None])


def best_piece(totals: NDArray[np.float64], extra: NDArray[np.int64]) -> int:
    """Highest total; among equal totals (1e-12 relative) the smallest depth."""
    best = totals.max()
    tie = totals >= best - 1e-12 * max(1.0, abs(best))
    cand = np.flatnonzero(tie)
    return int(cand[np.argmin(extra[cand])])


# ----------------------------------------------------------------------------- policies


class _Saved:
    """JSON save/load of a policy's fitted parameters (no pickle)."""

    artifact = "agent.json"
    stochastic = False
    name: str

    def params(self) -> dict:
        raise NotImplementedError

    def save(self, path: Path) -> None:
        """Write ``{"name": ..., "params": {...}}`` as JSON."""
        save_json(path, self.name, self.params())

    @staticmethod
    def read(path: Path) -> dict:
        return read_json(path, "policy")


class GapPolicy(_Saved):
    """Largest score gap (Adaptive-k), optionally ignoring the tail and adding a buffer.

    See :func:`gap_depths`. Nothing is fitted. Names: ``gap``, ``gap-tail10``,
    ``gap-buffer5``, ``gap-tail10-buffer5`` (the published configuration).
    """

    def __init__(self, tail: float = 0.0, buffer: int = 0) -> None:
        gap_depths(np.zeros((1, 1)), tail=tail, buffer=buffer)  # validates the arguments
        self.tail = float(tail)
        self.buffer = int(buffer)
        name = "gap"
        if self.tail:
            name += f"-tail{round(self.tail * 100)}"
        if self.buffer:
            name += f"-buffer{self.buffer}"
        self.name = name

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> GapPolicy:
        return self

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        if len(queries) == 0:
            return np.zeros(0, dtype=np.int64)
        s, n = score_matrix(queries)
        return gap_depths(s, n, query_caps(queries, config), tail=self.tail, buffer=self.buffer)

    def explain(
        self, queries: Sequence[RankedQuery], config: EpisodeConfig
    ) -> tuple[NDArray[np.int64], list[dict[str, float]]]:
        """The depths and why: the score drop at the cut (the depth minus the buffer; 0 on a one-item list)."""
        depths = self.depths(queries, config)
        out = []
        for q, k in zip(queries, depths, strict=True):
            cut = max(1, int(k) - self.buffer)
            out.append(
                {"cut": float(cut), "score_drop": float(q.scores[cut - 1] - q.scores[cut]) if cut < q.length else 0.0}
            )
        return depths, out

    def params(self) -> dict:
        return {"tail": self.tail, "buffer": self.buffer}

    @classmethod
    def load(cls, path: Path, reward: str = "bor", settings: Any = None) -> GapPolicy:
        p = cls.read(path)
        return cls(float(p["tail"]), int(p["buffer"]))


class ThresholdPolicy(_Saved):
    """Score threshold on the min-max normalised score: show every item with ``u_i >= t``.

    ``t`` is fitted on the training split (exactly, :func:`sweep_keys` with keys ``-u``):

    - ``target=None``: maximise the mean net reward of ``reward`` (:func:`objective_matrix`; name
      ``<reward>-threshold``);
    - ``target=c``: the largest t whose training coverage (found %) is at least c, i.e. the
      shortest lists that still find c of the training queries (name ``threshold-cov<100c>``);
      when c is unreachable within the caps, the t of the highest coverage.
    """

    def __init__(self, reward: str = "bor", target: float | None = None) -> None:
        if target is not None and not (0.0 < target <= 1.0):
            raise ValueError(f"coverage target must lie in (0, 1], got {target}")
        self.reward = reward
        self.target = target
        self.t = 1.0
        self.name = f"{reward}-threshold" if target is None else f"threshold-cov{round(target * 100)}"

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> ThresholdPolicy:
        config.check_queries(queries)
        if self.target is None:
            pay, caps = objective_matrix(queries, config, self.reward)
        else:
            caps = query_caps(queries, config)
            pay = _found_matrix(queries, caps)
        s, n = score_matrix(queries)
        s, n, c, valid = check_matrix(s, n, caps)
        u = _minmax(s, n, valid)
        d = pay.shape[1]
        # depth j -> j+1 (j = 1..D-1) happens when t <= u_{j+1}: key = -u_{j+1}, theta = -t
        thetas, totals, extra = sweep_depths(-u[:, 1:d], pay, c)
        base = float(pay[:, 0].sum())
        if self.target is None:
            i = best_piece(totals, extra)
        else:
            cover = (base + totals) / len(queries)
            reach = np.flatnonzero(cover >= self.target - 1e-12)
            i = int(reach[0]) if reach.size else best_piece(totals, extra)
        self.t = float(-thetas[i])
        return self

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        if len(queries) == 0:
            return np.zeros(0, dtype=np.int64)
        s, n = score_matrix(queries)
        return threshold_depths(s, n, query_caps(queries, config), t=self.t)

    def explain(
        self, queries: Sequence[RankedQuery], config: EpisodeConfig
    ) -> tuple[NDArray[np.int64], list[dict[str, float]]]:
        """The depths and why: the fitted threshold t on the min-max normalised score."""
        return self.depths(queries, config), [{"threshold": self.t} for _ in queries]

    def params(self) -> dict:
        return {"reward": self.reward, "target": self.target, "t": self.t}

    @classmethod
    def load(cls, path: Path, reward: str = "bor", settings: Any = None) -> ThresholdPolicy:
        p = cls.read(path)
        out = cls(p["reward"], p["target"])
        out.t = float(p["t"])
        return out


class TopPPolicy(_Saved):
    """Top-p softmax mass: show items until their cumulative softmax mass reaches p.

    The softmax is over the query's z-scored scores divided by a temperature T (so BM25
    and cosine scores are comparable); see :func:`topp_depths`. A small T makes it a
    relative threshold on the z-distance from the top item. Fitted on the training split
    to maximise the mean net reward of ``reward`` (:func:`objective_matrix`): for each T in ``temperatures``,
    ``log(1 - p)`` exactly (:func:`sweep_keys` on keys ``-log rest_j``), then the best
    (T, p) (ties: smaller total depth, then the earlier T). Name ``<reward>-topp``.
    """

    def __init__(self, reward: str = "bor", temperatures: Sequence[float] = (0.1, 0.25, 0.5, 1.0, 2.0)) -> None:
        if len(temperatures) == 0:
            raise ValueError("temperatures must not be empty")
        self.reward = reward
        self.temperatures = tuple(float(t) for t in temperatures)
        self.log_rest = -math.inf
        self.temperature = self.temperatures[0]
        self.name = f"{reward}-topp"

    @property
    def p(self) -> float:
        """The mass p = 1 - exp(log_rest) (may round to 1.0; the policy uses log_rest)."""
        return -math.expm1(self.log_rest)

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> TopPPolicy:
        config.check_queries(queries)
        pay, caps = objective_matrix(queries, config, self.reward)
        s, n = score_matrix(queries)
        s, n, c, valid = check_matrix(s, n, caps)
        d = pay.shape[1]
        best: tuple[float, int, float, float] | None = None
        for temp in self.temperatures:
            # depth j -> j+1 happens when rest_j > 1 - p, i.e. key = -log rest_j < theta = -log(1-p)
            keys = -_log_rest(s, n, valid, temp)[:, : d - 1]
            keys = np.where(np.isfinite(keys), keys, np.finfo(np.float64).max)
            thetas, totals, extra = sweep_depths(keys, pay, c)
            i = best_piece(totals, extra)
            cand = (float(totals[i]), -int(extra[i]), temp, float(thetas[i]))
            if best is None or cand[:2] > best[:2]:
                best = cand
        assert best is not None
        self.temperature, self.log_rest = best[2], -best[3]
        return self

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        if len(queries) == 0:
            return np.zeros(0, dtype=np.int64)
        s, n = score_matrix(queries)
        caps = query_caps(queries, config)
        return topp_depths(s, n, caps, log_rest=self.log_rest, temperature=self.temperature)

    def explain(
        self, queries: Sequence[RankedQuery], config: EpisodeConfig
    ) -> tuple[NDArray[np.int64], list[dict[str, float]]]:
        """The depths and why: the fitted mass p and temperature, and ``mass_shown``, the softmax mass of the K
        items shown (it reaches p, or K is the cap)."""
        depths = self.depths(queries, config)
        if len(queries) == 0:
            return depths, []
        s, n = score_matrix(queries)
        s, n, _, valid = check_matrix(s, n)
        rest = _log_rest(s, n, valid, self.temperature)[np.arange(len(queries)), depths - 1]
        shown = -np.expm1(rest)  # 1 - the mass left after the K items shown
        return depths, [{"p": self.p, "temperature": self.temperature, "mass_shown": float(m)} for m in shown]

    def params(self) -> dict:
        return {
            "reward": self.reward,
            "temperatures": list(self.temperatures),
            "p": self.p,
            "log_rest": self.log_rest,
            "temperature": self.temperature,
        }

    @classmethod
    def load(cls, path: Path, reward: str = "bor", settings: Any = None) -> TopPPolicy:
        p = cls.read(path)
        out = cls(p["reward"], p["temperatures"])
        out.log_rest, out.temperature = float(p["log_rest"]), float(p["temperature"])
        return out


class GreedyK(_Saved):
    """The best fixed K on the training split ("greedy K"), K in 1..largest cap.

    ``by="reward"``: ``K* = argmax_K mean_q [T(K_q) - c (K_q - 1)]``, K_q = min(K, cap_q), the net reward of ``reward``
    (name ``<reward>-greedyk``); ``by="bits"``: ``K* = argmax_K BoR bits =
    log2(mean_q found_q(K) / mean_q P_rand(min(K, cap_q); N_q, R_q))`` (name
    ``greedyk-bits``). Ties pick the smallest K.
    """

    def __init__(self, reward: str = "bor", by: str = "reward") -> None:
        if by not in ("reward", "bits"):
            raise ValueError(f"by must be 'reward' or 'bits', got {by!r}")
        self.reward = reward
        self.by = by
        self.k = 1
        self.table: list[float] = []
        self.name = f"{reward}-greedyk" if by == "reward" else "greedyk-bits"

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> GreedyK:
        config.check_queries(queries)
        if self.by == "reward":
            pay, _ = objective_matrix(queries, config, self.reward)
            score = pay.mean(axis=0)
        else:
            caps = query_caps(queries, config)
            found = _found_matrix(queries, caps)
            d = found.shape[1]
            k = np.minimum(np.arange(1, d + 1)[None, :], caps[:, None])
            n = np.array([q.n_candidates for q in queries])[:, None]
            r = np.array([q.n_relevant for q in queries])[:, None]
            pr = np.asarray(p_random(k, n, r), dtype=np.float64).mean(axis=0)
            fm = found.mean(axis=0)
            with np.errstate(divide="ignore", invalid="ignore"):
                score = np.where((fm > 0) & (pr > 0), np.log2(fm / np.where(pr > 0, pr, 1.0)), -np.inf)
        best = score.max()
        self.k = int(np.flatnonzero(score >= best - 1e-12 * max(1.0, abs(best)))[0]) + 1
        self.table = [float(x) for x in score]
        return self

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        return np.minimum(self.k, query_caps(queries, config)).astype(np.int64)

    def params(self) -> dict:
        return {"reward": self.reward, "by": self.by, "k": self.k, f"train_{self.by}_by_k": self.table}

    @classmethod
    def load(cls, path: Path, reward: str = "bor", settings: Any = None) -> GreedyK:
        p = cls.read(path)
        out = cls(p["reward"], p["by"])
        out.k = int(p["k"])
        return out


class RandomDepth(_Saved):
    """Sanity floor: depth uniform in 1..cap_q, from ``numpy.random.default_rng(seed)``
    (the seed given to ``fit``), so one seed always gives the same depths."""

    stochastic = True

    def __init__(self) -> None:
        self.name = "random"
        self.seed = 0

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> RandomDepth:
        self.seed = int(seed)
        return self

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        caps = query_caps(queries, config)
        return np.random.default_rng(self.seed).integers(1, caps + 1).astype(np.int64)

    def params(self) -> dict:
        return {"seed": self.seed}

    @classmethod
    def load(cls, path: Path, reward: str = "bor", settings: Any = None) -> RandomDepth:
        out = cls()
        out.seed = int(cls.read(path)["seed"])
        return out


@dataclass(frozen=True)
class GapConfig:
    """Settings of the largest-gap rule (:func:`gap_depths`)."""

    tail: float = 0.0
    """Fraction of the list whose gaps are ignored at the bottom, in [0, 1)."""
    buffer: int = 0
    """Extra items shown after the cut (>= 0)."""

    def __post_init__(self) -> None:
        if not (0.0 <= self.tail < 1.0):
            raise ValueError(f"GapConfig.tail must lie in [0, 1), got {self.tail}")
        if isinstance(self.buffer, bool) or int(self.buffer) != self.buffer or self.buffer < 0:
            raise ValueError(f"GapConfig.buffer must be a whole number >= 0, got {self.buffer}")


@dataclass(frozen=True)
class ThresholdConfig:
    """Settings of the min-max score threshold (:class:`ThresholdPolicy`)."""

    target: float | None = None
    """None: fit t for the training reward; a coverage c in (0, 1]: the largest t with training
    coverage >= c."""

    def __post_init__(self) -> None:
        if self.target is not None and not (0.0 < self.target <= 1.0):
            raise ValueError(f"ThresholdConfig.target must lie in (0, 1], got {self.target}")


@dataclass(frozen=True)
class TopPConfig:
    """Settings of the top-p softmax-mass rule (:class:`TopPPolicy`)."""

    temperatures: tuple[float, ...] = (0.1, 0.25, 0.5, 1.0, 2.0)
    """Softmax temperatures (z units) searched when fitting p."""

    def __post_init__(self) -> None:
        if not self.temperatures or not all(math.isfinite(t) and t > 0 for t in self.temperatures):
            raise ValueError(f"TopPConfig.temperatures must be finite and > 0, got {self.temperatures}")


@dataclass(frozen=True)
class GreedyKConfig:
    """Settings of the best fixed K on the training split (:class:`GreedyK`)."""

    by: str = "reward"
    """What K maximises on train: ``reward`` (mean reward) or ``bits`` (BoR bits)."""

    def __post_init__(self) -> None:
        if self.by not in ("reward", "bits"):
            raise ValueError(f"GreedyKConfig.by must be 'reward' or 'bits', got {self.by!r}")


GAP_VARIANTS = {
    "gap": GapConfig(0.0, 0),
    "gap-tail10": GapConfig(0.1, 0),
    "gap-buffer5": GapConfig(0.0, 5),
    "gap-tail10-buffer5": GapConfig(0.1, 5),
}

for _name, _gap in GAP_VARIANTS.items():
    register(
        _name,
        lambda reward, settings: GapPolicy(settings.tail, settings.buffer),
        group="peer",
        stochastic=False,
        uses_reward=False,
        description=f"largest score gap (Adaptive-k), tail {int(_gap.tail * 100)}% ignored, buffer +{_gap.buffer}",
        config=GapConfig,
        defaults=_gap,
    )


def _threshold_objective(reward: str, settings: ThresholdConfig, config: EpisodeConfig) -> Objective:
    return (
        net_objective(reward, settings, config) if settings.target is None else Objective(f"coverage {settings.target}")
    )


def _greedyk_objective(reward: str, settings: GreedyKConfig, config: EpisodeConfig) -> Objective:
    return net_objective(reward, settings, config) if settings.by == "reward" else Objective("BoR bits")


register(
    "threshold",
    lambda reward, settings: ThresholdPolicy(reward, settings.target),
    group="peer",
    stochastic=False,
    uses_reward=True,
    description="min-max score threshold t fitted on train to maximise mean net reward",
    config=ThresholdConfig,
    objective=_threshold_objective,
)
register(
    "threshold-cov90",
    lambda reward, settings: ThresholdPolicy(reward, settings.target),
    group="peer",
    stochastic=False,
    uses_reward=False,
    description="min-max score threshold: the largest t with 90% training coverage",
    config=ThresholdConfig,
    defaults=ThresholdConfig(0.9),
    objective=_threshold_objective,
)
register(
    "topp",
    lambda reward, settings: TopPPolicy(reward, settings.temperatures),
    group="peer",
    stochastic=False,
    uses_reward=True,
    description="top-p softmax mass of z-scores (p, T fitted on train to maximise mean net reward)",
    config=TopPConfig,
    objective=net_objective,
)
register(
    "greedyk",
    lambda reward, settings: GreedyK(reward, settings.by),
    group="peer",
    stochastic=False,
    uses_reward=True,
    description="best fixed K on train by mean net reward",
    config=GreedyKConfig,
    objective=_greedyk_objective,
    view="none",
)
register(
    "greedyk-bits",
    lambda reward, settings: GreedyK(reward, settings.by),
    group="peer",
    stochastic=False,
    uses_reward=False,
    description="best fixed K on train by BoR bits",
    config=GreedyKConfig,
    defaults=GreedyKConfig("bits"),
    objective=_greedyk_objective,
    view="none",
)
register(
    "random",
    lambda reward, settings: RandomDepth(),
    group="peer",
    stochastic=True,
    uses_reward=False,
    description="depth uniform in 1..cap (sanity floor)",
    view="none",
)


class InSampleCeiling(_Saved):
    """A fitted family's in-sample ceiling: the family fitted on the very queries it is applied to.

    ``depths(queries)`` fits the wrapped kind (e.g. the score threshold) on ``queries`` with their labels
    and returns its depths on them, so its mean net reward is the best that family's rule reaches on
    those queries: a ceiling for every train-fitted member of the family (not for other policies). It
    reads labels: a limit, never a policy to apply to unlabelled lists. Names ``<kind>-insample``.
    """

    def __init__(self, kind: str, reward: str = "bor") -> None:
        self.kind = kind
        self.reward = reward
        self.name = f"{kind}-insample"

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> InSampleCeiling:
        return self

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        from agents import registry

        if len(queries) == 0:
            return np.zeros(0, dtype=np.int64)
        return registry.make(self.kind, self.reward).fit(queries, config, 0).depths(queries, config)

    def params(self) -> dict:
        return {"kind": self.kind, "reward": self.reward}

    @classmethod
    def load(cls, path: Path, reward: str = "bor", settings: Any = None) -> InSampleCeiling:
        p = cls.read(path)
        return cls(str(p["kind"]), str(p["reward"]))


def _insample_factory(inner: str) -> Any:
    return lambda reward, settings: InSampleCeiling(inner, reward)


for _inner in ("threshold", "greedyk"):
    register(
        f"{_inner}-insample",
        _insample_factory(_inner),
        group="limit",
        stochastic=False,
        uses_reward=False,
        description=f"the {_inner} rule fitted in-sample on the test queries themselves (reads their labels): "
        "the ceiling of that family",
        reads_labels=True,
        objective=net_objective,
    )
