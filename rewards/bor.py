"""Bits-over-Random (BoR): chance-corrected selectivity of a shortlist, and RL rewards.

All functions are pure and vectorised: every count argument broadcasts as a
numpy array (scalars give 0-d results converted to Python floats where noted).

Notation (SPEC section 1): a query has a candidate set of ``n`` items, ``r`` of
them relevant; the system shows the top ``k``. ``found`` is 1 when the shown
set holds at least one relevant item.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rewards.hypergeom import log_hypergeom_pmf, log_p_none, validate_counts

__all__ = [
    "break_even_depth",
    "p_random",
    "bor_aggregate",
    "bor_ceiling",
    "bor_optimistic",
    "expected_random_hits",
    "bor_reward",
    "f1_reward",
    "constant_reward",
    "terminal_reward",
    "REWARD_KINDS",
    "COLLAPSE_LAMBDA",
]

#: Names accepted by :func:`terminal_reward`.
REWARD_KINDS = ("bor", "f1", "constant")
#: Expected random hits at or above which no method can be selective (P_rand >= ~0.95).
COLLAPSE_LAMBDA = 3.0


def _out(a: NDArray[np.float64]) -> NDArray[np.float64] | float:
    return float(a) if a.ndim == 0 else a


def p_random(k: ArrayLike, n: ArrayLike, r: ArrayLike = 1, m: ArrayLike = 1) -> NDArray[np.float64] | float:
    """Probability that a uniformly random k-subset of n items holds >= m of r relevant.

    ``P_rand(k; n, r, m) = sum_{x=m}^{min(r,k)} C(r,x) C(n-r,k-x) / C(n,k)``, the
    hypergeometric upper tail (``scipy.stats.hypergeom.sf(m-1, n, r, k)``).
    For m = 1: ``1 - C(n-r,k)/C(n,k)``; r = 1 gives k/n; k = 0 or r = 0 gives 0;
    k > n - r gives 1. Computed in log space (see :mod:`rewards.hypergeom`),
    exact to ~1e-12 relative for n up to 1e12.

    Args:
        k: shortlist sizes, 0 <= k <= n.
        n: candidate-set sizes, n >= 1.
        r: numbers of relevant items, 0 <= r <= n.
        m: relevant items required, m >= 1.

    Returns:
        Probabilities with the broadcast shape of the inputs (a float for scalars).

    Raises:
        ValueError: naming the argument, for non-finite, negative or non-integer
            counts, n <= 0, r > n, k > n or m < 1.
    """
    kk, nn, rr, mm = validate_counts(k, n, r, m)
    out = np.array(-np.expm1(log_p_none(kk, nn, rr)), dtype=np.float64)
    multi = mm > 1
    if np.any(multi):
        for idx in map(tuple, np.argwhere(multi)):
            out[idx] = _tail_at_least(kk[idx], nn[idx], rr[idx], mm[idx])
    return _out(np.clip(out, 0.0, 1.0) + 0.0)  # + 0.0 turns -0.0 into 0.0


def _tail_at_least(k: float, n: float, r: float, m: float) -> float:
    """sum_{x=m}^{min(r,k)} pmf(x), log-sum-exp over the upper tail (scalar)."""
    top = min(r, k)
    if m > top:
        return 0.0
    if k - (n - r) >= m:  # at least m relevant items are unavoidable
        return 1.0
    mode = math.floor((k + 1) * (r + 1) / (n + 2))
    if m <= mode:
        # Upper tail holds the mode: 1 - (lower tail of m terms) has no cancellation issue.
        logs = [log_hypergeom_pmf(x, n, r, k) for x in range(int(m))]
        return float(max(0.0, 1.0 - math.fsum(math.exp(v) for v in logs)))
    logs = []
    x = int(m)
    while x <= top:
        v = log_hypergeom_pmf(x, n, r, k)
        logs.append(v)
        if v < logs[0] - 50.0:  # terms decrease past the mode; e^-50 is below double precision
            break
        x += 1
    hi = max(logs)
    return float(math.exp(hi) * math.fsum(math.exp(v - hi) for v in logs))


def bor_aggregate(found: ArrayLike, k: ArrayLike, n: ArrayLike, r: ArrayLike = 1) -> float:
    """BoR bits of a method over a query set (the ONLY quantity called "BoR").

    ``BoR = log2( mean_q f_q / mean_q P_rand(k_q; n_q, r_q) )``: a ratio of means, with each
    query's own depth k_q, where ``f_q = found_q``, except ``f_q = 1`` on a query whose shortlist
    chance fills with certainty: ``P_rand(k_q; n_q, r_q) = 1``, i.e. ``k_q >= n_q - r_q + 1``
    (a one-candidate list, n_q = 1; a whole list, k_q = n_q; every candidate relevant). 0 = random,
    1 = twice as selective as random, negative = worse than random; ``-inf`` when nothing is found.

    Why ``f_q = 1`` there: such a query carries no information, as every policy is random on it, so
    it counts as chance's own outcome, ``f_q / P_rand = 1`` (0 bits), never as worse than random.
    When its r_q relevant items are among the n_q candidates the shortlist holds one of them anyway
    (it leaves out fewer than r_q candidates): then ``f_q = found_q`` and nothing changes. The rule
    matters only when the counted relevant items are missing from the ranked list, e.g. a TREC run
    whose unretrieved relevant documents count in r_q while n_q is the list's length: a
    one-candidate list whose one document is not relevant has found 0 at P_rand 1, and three such
    lists with one found would otherwise give log2((1/3) / 1) = -1.58 bits.

    Args:
        found: per-query 0/1 (or bool) success, shape (Q,).
        k, n, r: per-query depth, candidate-set size, relevant count (broadcast to (Q,)).

    Raises:
        ValueError: empty input, found outside {0, 1}, or invalid counts.
    """
    f = np.asarray(found, dtype=np.float64)
    if f.size == 0:
        raise ValueError("found is empty: BoR needs at least one query")
    if not np.all((f == 0) | (f == 1)):
        raise ValueError("found must hold 0/1 values")
    pr = np.broadcast_to(np.asarray(p_random(k, n, r), dtype=np.float64), f.shape)
    kk, nn, rr, _ = validate_counts(k, n, r)
    certain = np.broadcast_to(kk + rr > nn, f.shape)  # k >= n - r + 1: P_rand = 1 exactly
    mean_rand = float(pr.mean())
    mean_obs = float(np.where(certain, 1.0, f).mean())
    if mean_rand == 0.0:
        raise ValueError("mean P_rand is 0 (all k = 0 or r = 0): BoR is undefined")
    if mean_obs == 0.0:
        return -math.inf
    return math.log2(mean_obs / mean_rand)


def bor_ceiling(k: ArrayLike, n: ArrayLike, r: ArrayLike = 1) -> float:
    """``BoR_max = -log2(mean_q P_rand(k_q; n_q, r_q))``: the BoR a perfect (P_obs = 1) method gets."""
    pr = np.asarray(p_random(k, n, r), dtype=np.float64)
    mean_rand = float(pr.mean())
    if mean_rand == 0.0:
        raise ValueError("mean P_rand is 0 (all k = 0 or r = 0): the ceiling is undefined")
    return -math.log2(mean_rand)


def bor_optimistic(k: ArrayLike, n: ArrayLike) -> NDArray[np.float64] | float:
    """Optimistic ceiling when R is unknown: ``log2(n / k)`` (assumes r = 1). Requires k >= 1."""
    kk, nn, _, _ = validate_counts(k, n, 0)
    if np.any(kk < 1):
        raise ValueError("k must be >= 1 for the optimistic ceiling log2(n/k)")
    return _out(np.log2(nn / kk))


def expected_random_hits(k: ArrayLike, n: ArrayLike, r: ArrayLike = 1) -> NDArray[np.float64] | float:
    """``lambda = k r / n``; lambda >= 3 (:data:`COLLAPSE_LAMBDA`) is the collapse zone."""
    kk, nn, rr, _ = validate_counts(k, n, r)
    return _out(kk * rr / nn)


def _found(found: ArrayLike) -> NDArray[np.float64]:
    f = np.asarray(found, dtype=np.float64)
    if not np.all((f == 0) | (f == 1)):
        raise ValueError("found must hold 0/1 values")
    return f


def bor_reward(found: ArrayLike, k: ArrayLike, n: ArrayLike, r: ArrayLike = 1) -> NDArray[np.float64] | float:
    """Per-query BoR reward: ``found * -log2 P_rand(k; n, r)`` (0 when not found).

    This is what one episode pays at STOP; its mean over queries is the
    "mean reward", which is NOT BoR (see :func:`bor_aggregate`).
    Requires k >= 1 and r >= 1 where found = 1.
    """
    f = _found(found)
    pr = np.asarray(p_random(k, n, r), dtype=np.float64)
    f, pr = np.broadcast_arrays(f, pr)
    if np.any((f == 1) & (pr == 0)):
        raise ValueError("found = 1 with P_rand = 0 (k = 0 or r = 0) is impossible")
    with np.errstate(divide="ignore"):
        bits = np.where(f == 1, -np.log2(np.where(f == 1, pr, 1.0)), 0.0)
    return _out(bits + 0.0)


def f1_reward(found: ArrayLike, k: ArrayLike) -> NDArray[np.float64] | float:
    """F1 ablation reward ``found * 2 / (k + 1)`` (recall 1, precision 1/k, single relevant)."""
    f = _found(found)
    kk = np.asarray(k, dtype=np.float64)
    if not np.all(np.isfinite(kk)) or np.any(kk < 1) or np.any(kk != np.floor(kk)):
        raise ValueError("k must be a whole number >= 1")
    return _out(f * 2.0 / (kk + 1.0))


def constant_reward(found: ArrayLike) -> NDArray[np.float64] | float:
    """Constant terminal reward ``found * 1.0`` (the paper's BFCL+BM25 F1 row); depth pressure
    comes from discounting and step costs alone."""
    return _out(_found(found) * 1.0)


def terminal_reward(
    kind: str, found: ArrayLike, k: ArrayLike, n: ArrayLike, r: ArrayLike = 1
) -> NDArray[np.float64] | float:
    """Dispatch on ``kind`` in :data:`REWARD_KINDS` ("bor", "f1" or "constant")."""
    if kind == "bor":
        return bor_reward(found, k, n, r)
    if kind == "f1":
        return f1_reward(found, k)
    if kind == "constant":
        return constant_reward(found)
    raise ValueError(f"unknown reward {kind!r}; expected one of {', '.join(REWARD_KINDS)}")


def break_even_depth(kind: str, n: int, step_cost: float) -> int:
    """The deepest depth k in 1..n at which a found item still pays for its steps:
    ``ceiling(k) > step_cost * (k - 1)``, with ``ceiling(k)`` the largest terminal reward
    of ``kind`` at depth k (BoR: R = 1, ``log2(n / k)``; F1: ``2 / (k + 1)``; constant: 1); 1 when
    no depth pays.

    Every deeper shortlist earns at most ``ceiling(k) - step_cost * (k - 1) <= 0`` on every query,
    whatever its labels, while a shortlist of one item earns >= 0: deeper depths are dominated.
    Under BoR ``ceiling(n) = 0``, so with any step cost the whole list (K = n) lies beyond it, and with
    ``step_cost = 0`` the break-even depth is n - 1 (K = n ties K = n - 1 at best). The ceiling falls and the
    cost rises with k, so the paying depths form a prefix 1..k*; a bisection finds k* in O(log n).
    """
    if kind not in REWARD_KINDS:
        raise ValueError(f"unknown reward {kind!r}; expected one of {', '.join(REWARD_KINDS)}")
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a whole number >= 1, got {n}")
    if not (math.isfinite(step_cost) and step_cost >= 0):
        raise ValueError(f"step_cost must be finite and >= 0, got {step_cost}")
    return _break_even(kind, int(n), float(step_cost))


@functools.lru_cache(maxsize=4096)
def _break_even(kind: str, n: int, step_cost: float) -> int:
    """:func:`break_even_depth` on checked arguments, cached: environments ask for it at every episode
    reset and a bisection costs about a millisecond (a handful of distinct (kind, N, cost) per study)."""

    def pays(k: int) -> bool:
        return float(terminal_reward(kind, 1, k, n, 1)) - step_cost * (k - 1) > 0

    if not pays(1):
        return 1
    lo, hi = 1, n  # pays(lo) holds; find the last k that pays
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if pays(mid):
            lo = mid
        else:
            hi = mid - 1
    return lo
