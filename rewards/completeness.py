"""Two success notions for queries with several relevant items, each with its exact chance term.

A query has a candidate set of ``n`` items, ``r`` of them relevant; the system shows
the top ``k``.

- ``"any"`` (found / Success@K): at least one relevant item is shown. Chance term
  ``P_any(k; n, r) = 1 - C(n-r, k) / C(n, k)`` = :func:`rewards.bor.p_random` with
  ``m = 1`` (the hypergeometric upper tail, ``scipy.stats.hypergeom.sf(0, n, r, k)``).
- ``"all"`` (complete / Completeness@K): all ``r`` relevant items are shown. Chance
  term, the probability that a uniformly random k-subset contains all r relevant::

      P_all(k; n, r) = C(n-r, k-r) / C(n, k) = C(k, r) / C(n, r)
                     = prod_{i=0}^{r-1} (k - i) / (n - i)          (k >= r)
                     = 0                                            (k <  r)

  (the hypergeometric pmf at x = r, ``scipy.stats.hypergeom.pmf(r, n, r, k)``).
  ``r = 0`` gives 1 (the empty set is always complete), ``k = n`` gives 1, ``r = 1``
  gives ``k / n`` (= ``P_any``). It is computed in log space: the exact product
  with ``log1p`` terms over the shorter of the two equivalent products
  (``min(r, n - k)`` factors, since also ``P_all = prod_{j<n-k} (n-r-j)/(n-j)``) when
  that is <= 64 factors, else Loader's saddle-point log pmf
  (:func:`rewards.hypergeom.log_hypergeom_pmf`); no factorials or big integers, exact
  to ~1e-12 relative for n up to 1e12.

Rewards and aggregates for "all" mirror the "any" ones of :mod:`rewards.bor`:

- per-query reward ``complete * -log2 P_all(k; n, r)``; 0 when not complete. When
  ``k < r`` completeness is impossible, ``P_all = 0`` and the reward is 0 (``complete
  = 1`` there is rejected as impossible);
- BoR bits ``log2( mean_q c_q / mean_q P_all(k_q; n_q, r_q) )`` (ratio of means, as
  for "any"), ``c_q = complete_q`` except ``c_q = 1`` where chance is complete with
  certainty (``P_all = 1``: ``k_q = n_q`` or ``r_q = 0``), the rule of
  :func:`rewards.bor.bor_aggregate`; ``-inf`` when nothing is complete, and NaN when every
  query has ``k_q < r_q`` (neither the method nor chance can be complete: 0 / 0).
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rewards.bor import bor_aggregate, bor_reward, p_random
from rewards.hypergeom import log_hypergeom_pmf, validate_counts

__all__ = [
    "SUCCESS_KINDS",
    "p_random_all",
    "p_random_success",
    "completeness_at_k",
    "hits_at_k",
    "bor_reward_all",
    "bor_reward_success",
    "bor_aggregate_all",
    "bor_aggregate_success",
    "bor_ceiling_all",
]

#: Success notions: "any" (>= 1 relevant shown) and "all" (every relevant shown).
SUCCESS_KINDS = ("any", "all")
# Up to this many factors the exact product form is summed term by term.
_DIRECT_TERMS = 64


def _out(a: NDArray[np.float64]) -> NDArray[np.float64] | float:
    return float(a) if a.ndim == 0 else a


def _check_success(success: str) -> None:
    if success not in SUCCESS_KINDS:
        raise ValueError(f"unknown success notion {success!r}; expected one of {', '.join(SUCCESS_KINDS)}")


def log_p_all(k: NDArray[np.float64], n: NDArray[np.float64], r: NDArray[np.float64]) -> NDArray[np.float64]:
    """``log P_all(k; n, r)`` for validated, broadcast float arrays (-inf where k < r)."""
    k, n, r = np.broadcast_arrays(np.asarray(k, np.float64), np.asarray(n, np.float64), np.asarray(r, np.float64))
    out = np.zeros(k.shape, dtype=np.float64)
    impossible = k < r
    out[impossible] = -np.inf
    active = ~impossible & (r > 0) & (k < n)
    miss = n - k  # items left out; P_all = prod_{j < n-k} (n-r-j)/(n-j) as well
    use_r = active & (r <= miss) & (r <= _DIRECT_TERMS)
    use_miss = active & ~use_r & (miss <= _DIRECT_TERMS)
    if np.any(use_r):  # prod_{i<r} (k-i)/(n-i) = prod (1 - (n-k)/(n-i))
        kd, nd, rd = k[use_r], n[use_r], r[use_r]
        acc = np.zeros_like(kd)
        for i in range(int(rd.max())):
            live = rd > i
            acc[live] += np.log1p(-(nd[live] - kd[live]) / (nd[live] - i))
        out[use_r] = acc
    if np.any(use_miss):  # prod_{j<n-k} (n-r-j)/(n-j) = prod (1 - r/(n-j))
        md, nd, rd = miss[use_miss], n[use_miss], r[use_miss]
        acc = np.zeros_like(md)
        for j in range(int(md.max())):
            live = md > j
            acc[live] += np.log1p(-rd[live] / (nd[live] - j))
        out[use_miss] = acc
    saddle = active & ~use_r & ~use_miss
    for idx in map(tuple, np.argwhere(saddle)):
        out[idx] = log_hypergeom_pmf(r[idx], n[idx], r[idx], k[idx])
    return out


def p_random_all(k: ArrayLike, n: ArrayLike, r: ArrayLike = 1) -> NDArray[np.float64] | float:
    """Probability that a uniformly random k-subset of n items holds ALL r relevant items.

    ``P_all(k; n, r) = C(n-r, k-r) / C(n, k) = prod_{i=0}^{r-1} (k-i)/(n-i)`` for k >= r,
    0 for k < r; r = 0 gives 1, r = 1 gives k/n. Equals
    ``scipy.stats.hypergeom.pmf(r, n, r, k)``. Computed in log space (module docstring).

    Args:
        k: shortlist sizes, 0 <= k <= n.
        n: candidate-set sizes, n >= 1.
        r: numbers of relevant items, 0 <= r <= n.

    Returns:
        Probabilities with the broadcast shape of the inputs (a float for scalars).

    Raises:
        ValueError: naming the argument, for non-finite, negative or non-integer
            counts, n <= 0, r > n or k > n.
    """
    kk, nn, rr, _ = validate_counts(k, n, r)
    return _out(np.clip(np.exp(log_p_all(kk, nn, rr)), 0.0, 1.0) + 0.0)


def p_random_success(k: ArrayLike, n: ArrayLike, r: ArrayLike = 1, success: str = "any") -> NDArray[np.float64] | float:
    """Chance term of a success notion: ``P_any`` (= ``p_random(k, n, r, 1)``) or ``P_all``.

    Args:
        k, n, r: counts as for :func:`p_random_all`.
        success: "any" or "all" (:data:`SUCCESS_KINDS`).
    """
    _check_success(success)
    return p_random(k, n, r) if success == "any" else p_random_all(k, n, r)


def hits_at_k(relevant_ranks: ArrayLike, k: ArrayLike) -> NDArray[np.int64] | int:
    """Number of relevant items in the top k: ``#{rank in relevant_ranks : rank <= k}``.

    Args:
        relevant_ranks: 1-based ranks of one query's relevant items present in its list.
        k: one depth or an array of depths.
    """
    ranks = np.sort(np.asarray(relevant_ranks, dtype=np.int64).ravel())
    if ranks.size and ranks.min() < 1:
        raise ValueError(f"relevant ranks must be >= 1, got {ranks[:5].tolist()}")
    kk = np.asarray(k)
    h = np.searchsorted(ranks, kk, side="right").astype(np.int64)
    return int(h) if h.ndim == 0 else h


def completeness_at_k(relevant_ranks: ArrayLike, k: ArrayLike, r: int | None = None) -> NDArray[np.bool_] | bool:
    """Whether the top k holds all r relevant items: ``hits_at_k(ranks, k) == r``.

    Args:
        relevant_ranks: 1-based ranks of the relevant items present in the ranked list.
        k: one depth or an array of depths.
        r: number of relevant items R (default: ``len(relevant_ranks)``). When R exceeds
            the relevant items present (a truncated run), completeness is impossible.

    Returns:
        A bool (scalar k) or a bool array shaped like ``k``. With R = 0 it is always True.
    """
    ranks = np.asarray(relevant_ranks, dtype=np.int64).ravel()
    rr = ranks.size if r is None else int(r)
    if rr < 0:
        raise ValueError(f"r must be >= 0, got {rr}")
    c = np.asarray(hits_at_k(ranks, k)) >= rr
    c = c & (ranks.size >= rr)
    return bool(c) if c.ndim == 0 else c


def bor_reward_all(complete: ArrayLike, k: ArrayLike, n: ArrayLike, r: ArrayLike = 1) -> NDArray[np.float64] | float:
    """Per-query completeness reward ``complete * -log2 P_all(k; n, r)`` (0 when not complete).

    When k < r completeness is impossible: ``P_all = 0`` and the reward is 0.

    Raises:
        ValueError: complete outside {0, 1}, or complete = 1 where P_all = 0 (k < r).
    """
    c = np.asarray(complete, dtype=np.float64)
    if not np.all((c == 0) | (c == 1)):
        raise ValueError("complete must hold 0/1 values")
    pa = np.asarray(p_random_all(k, n, r), dtype=np.float64)
    c, pa = np.broadcast_arrays(c, pa)
    if np.any((c == 1) & (pa == 0)):
        raise ValueError("complete = 1 with P_all = 0 (k < r) is impossible")
    bits = np.where(c == 1, -np.log2(np.where(c == 1, pa, 1.0)), 0.0)
    return _out(bits + 0.0)


def bor_reward_success(
    success_flag: ArrayLike, k: ArrayLike, n: ArrayLike, r: ArrayLike = 1, success: str = "any"
) -> NDArray[np.float64] | float:
    """``bor_reward`` (success "any": flag = found) or :func:`bor_reward_all` ("all": flag = complete)."""
    _check_success(success)
    return bor_reward(success_flag, k, n, r) if success == "any" else bor_reward_all(success_flag, k, n, r)


def bor_aggregate_all(complete: ArrayLike, k: ArrayLike, n: ArrayLike, r: ArrayLike = 1) -> float:
    """BoR bits for completeness: ``log2( mean_q c_q / mean_q P_all(k_q; n_q, r_q) )``.

    ``c_q = complete_q``, except ``c_q = 1`` where ``P_all(k_q; n_q, r_q) = 1`` (``k_q = n_q``:
    the whole list; or ``r_q = 0``): chance is complete there with certainty, the query carries no
    information and counts as chance's outcome (0 bits), never as worse than random (see
    :func:`rewards.bor.bor_aggregate`; it changes the value only when relevant items counted in
    r_q are missing from the list). Returns ``-inf`` when no query is complete (and chance is
    not 0), and NaN when ``mean_q P_all = 0`` (every query has k_q < r_q: 0 / 0, undefined).

    Raises:
        ValueError: empty input, complete outside {0, 1}, invalid counts.
    """
    c = np.asarray(complete, dtype=np.float64)
    if c.size == 0:
        raise ValueError("complete is empty: BoR needs at least one query")
    if not np.all((c == 0) | (c == 1)):
        raise ValueError("complete must hold 0/1 values")
    pa = np.broadcast_to(np.asarray(p_random_all(k, n, r), dtype=np.float64), c.shape)
    kk, nn, rr, _ = validate_counts(k, n, r)
    certain = np.broadcast_to((kk >= nn) | (rr == 0), c.shape)  # P_all = 1 exactly
    mean_rand, mean_obs = float(pa.mean()), float(np.where(certain, 1.0, c).mean())
    if mean_rand == 0.0:
        if mean_obs > 0.0:
            raise ValueError("complete = 1 with P_all = 0 (k < r) is impossible")
        return math.nan
    if mean_obs == 0.0:
        return -math.inf
    return math.log2(mean_obs / mean_rand)


def bor_aggregate_success(
    success_flag: ArrayLike, k: ArrayLike, n: ArrayLike, r: ArrayLike = 1, success: str = "any"
) -> float:
    """:func:`rewards.bor.bor_aggregate` ("any") or :func:`bor_aggregate_all` ("all")."""
    _check_success(success)
    return bor_aggregate(success_flag, k, n, r) if success == "any" else bor_aggregate_all(success_flag, k, n, r)


def bor_ceiling_all(k: ArrayLike, n: ArrayLike, r: ArrayLike = 1) -> float:
    """``-log2(mean_q P_all(k_q; n_q, r_q))``: BoR bits of a method complete on every query.

    NaN when every query has k_q < r_q (no method can be complete).
    """
    pa = np.asarray(p_random_all(k, n, r), dtype=np.float64)
    mean_rand = float(pa.mean())
    return math.nan if mean_rand == 0.0 else -math.log2(mean_rand)
