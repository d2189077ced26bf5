"""Hypergeometric tail probabilities in log space, vectorised and exact at huge N.

The random baseline of Bits-over-Random is the probability that a uniformly
random K-subset of N items holds at least m of the R relevant ones::

    P_rand(K; N, R, m) = sum_{x=m}^{min(R,K)} C(R, x) C(N-R, K-x) / C(N, K)

For m = 1 this is ``1 - P0`` with ``P0 = C(N-R, K) / C(N, K)``. ``P0`` is computed
in log space with Loader's saddle-point decomposition (the algorithm behind R's
``dbinom``/``dhyper``): Stirling-series remainders (``stirlerr``) and the
deviance term ``bd0(x, np) = x log(x/np) + np - x`` are each evaluated to full
relative precision, and for ``x = 0`` the large terms of the three binomial
densities cancel analytically, leaving::

    log P0 = log q^R                                  (p = K/N, q = 1 - p)
             + stirlerr(N-R) - stirlerr(N-R-K) - stirlerr(N) + stirlerr(N-K)
             - bd0(K, (N-R) p) - bd0(N-R-K, (N-R) q)
             - 1/2 log1p(-K/(N-R)) + 1/2 log1p(-K/N)

When ``min(K, R)`` is small the exact product form
``log P0 = sum_{i<min(K,R)} log1p(-max(K,R)/(N-i))`` is used instead. Both keep
``P_rand = -expm1(log P0)`` within ~1e-12 relative of a high-precision
reference for N up to 1e12 (see ``tests/test_rewards_bor.py``). No factorials
and no big integers are formed.
"""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = ["log_p_none", "log_hypergeom_pmf", "validate_counts"]

_LN_2PI = math.log(2.0 * math.pi)
_LN_SQRT_2PI = 0.5 * _LN_2PI
# Below this min(K, R) the exact product form is summed term by term.
_DIRECT_TERMS = 64

# stirlerr(n) = lgamma(n+1) - (n+1/2) log n + n - log sqrt(2 pi), tabulated for n = 0.5, 1, ..., 15
_SFERR_HALVES = np.array(
    [0.0] + [math.lgamma(h / 2 + 1) - (h / 2 + 0.5) * math.log(h / 2) + h / 2 - _LN_SQRT_2PI for h in range(1, 31)]
)


def validate_counts(k: ArrayLike, n: ArrayLike, r: ArrayLike, m: ArrayLike = 1) -> tuple[NDArray[np.float64], ...]:
    """Broadcast and check (k, n, r, m) as non-negative whole counts.

    Raises:
        ValueError: naming the offending argument, for NaN/inf, non-integer or
            negative values, n <= 0, r > n, k > n, or m < 1.
    """
    out = []
    for name, value in (("k", k), ("n", n), ("r", r), ("m", m)):
        a = np.asarray(value)
        if a.dtype == bool or not (np.issubdtype(a.dtype, np.integer) or np.issubdtype(a.dtype, np.floating)):
            raise ValueError(f"{name} must be numeric counts, got dtype {a.dtype}")
        a = a.astype(np.float64)
        if not np.all(np.isfinite(a)):
            raise ValueError(f"{name} must be finite, got {a[~np.isfinite(a)].ravel()[:3]}")
        if np.any(a != np.floor(a)):
            raise ValueError(f"{name} must be a whole number, got {a[a != np.floor(a)].ravel()[:3]}")
        if np.any(a < 0):
            raise ValueError(f"{name} must be >= 0, got {a[a < 0].ravel()[:3]}")
        if np.any(a > 2.0**53):
            raise ValueError(f"{name} must be <= 2**53 to be exact in float64")
        out.append(a)
    kk, nn, rr, mm = np.broadcast_arrays(*out)
    if np.any(nn <= 0):
        raise ValueError("n (candidate-set size) must be >= 1")
    if np.any(rr > nn):
        bad = np.argwhere(rr > nn)[0]
        raise ValueError(f"r must be <= n, got r={rr[tuple(bad)]:.0f} > n={nn[tuple(bad)]:.0f}")
    if np.any(kk > nn):
        bad = np.argwhere(kk > nn)[0]
        raise ValueError(f"k must be <= n, got k={kk[tuple(bad)]:.0f} > n={nn[tuple(bad)]:.0f}")
    if np.any(mm < 1):
        raise ValueError("m (relevant items required) must be >= 1")
    return kk, nn, rr, mm


def _stirlerr(n: NDArray[np.float64]) -> NDArray[np.float64]:
    """Stirling remainder lgamma(n+1) - (n+1/2)log n + n - log sqrt(2 pi), n >= 0.5."""
    n = np.asarray(n, dtype=np.float64)
    out = np.empty_like(n)
    small = n <= 15.0
    if np.any(small):
        ns = n[small]
        halves = 2.0 * ns
        whole = halves == np.floor(halves)
        vals = np.empty_like(ns)
        vals[whole] = _SFERR_HALVES[halves[whole].astype(np.int64)]
        other = ns[~whole]
        vals[~whole] = (
            (np.array([math.lgamma(v + 1.0) for v in other]) - (other + 0.5) * np.log(other) + other - _LN_SQRT_2PI)
            if other.size
            else other
        )
        out[small] = vals
    big = ~small
    if np.any(big):
        nb = n[big]
        nn = nb * nb
        s0, s1, s2, s3, s4 = 1 / 12, 1 / 360, 1 / 1260, 1 / 1680, 1 / 1188
        out[big] = np.where(
            nb > 500,
            (s0 - s1 / nn) / nb,
            np.where(
                nb > 80,
                (s0 - (s1 - s2 / nn) / nn) / nb,
                np.where(
                    nb > 35,
                    (s0 - (s1 - (s2 - s3 / nn) / nn) / nn) / nb,
                    (s0 - (s1 - (s2 - (s3 - s4 / nn) / nn) / nn) / nn) / nb,
                ),
            ),
        )
    return out


def _bd0(x: NDArray[np.float64], np_: NDArray[np.float64]) -> NDArray[np.float64]:
    """Deviance x log(x/np) + np - x, accurate when x ~ np (Loader 2000). x, np > 0."""
    x = np.asarray(x, dtype=np.float64)
    np_ = np.asarray(np_, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        direct = x * np.log(x / np_) + np_ - x
        near = np.abs(x - np_) < 0.1 * (x + np_)
        v = (x - np_) / (x + np_)
        s = (x - np_) * v
        ej = 2.0 * x * v
        v2 = v * v
        for j in range(1, 40):  # |v| < 0.1, so 1e-2 per term: converges in < 10 terms
            ej = ej * v2
            s = s + ej / (2 * j + 1)
    return np.where(near, s, direct)


def log_p_none(k: NDArray[np.float64], n: NDArray[np.float64], r: NDArray[np.float64]) -> NDArray[np.float64]:
    """log C(n-r, k) / C(n, k): log-probability that a random k-subset misses all r relevant.

    Inputs must already be validated (see :func:`validate_counts`). Returns -inf
    where k > n - r (a relevant item is certain) and 0 where k = 0 or r = 0.
    """
    k, n, r = np.broadcast_arrays(np.asarray(k, np.float64), np.asarray(n, np.float64), np.asarray(r, np.float64))
    out = np.zeros(k.shape, dtype=np.float64)
    certain = k > n - r
    out[certain] = -np.inf
    active = (~certain) & (k > 0) & (r > 0)
    lo = np.minimum(k, r)
    hi = np.maximum(k, r)
    direct = active & (lo <= _DIRECT_TERMS)
    if np.any(direct):
        kd, nd, hd = lo[direct], n[direct], hi[direct]
        acc = np.zeros_like(kd)
        for i in range(int(kd.max())):
            live = kd > i
            acc[live] += np.log1p(-hd[live] / (nd[live] - i))
        out[direct] = acc
    # K = N - R exactly: the only miss is "all K from the N - R irrelevant", P0 = 1 / C(N, R)
    # (tiny for R > 64, so lgamma's absolute error is irrelevant to P_rand = 1 - P0).
    edge = active & ~direct & (k == n - r)
    if np.any(edge):
        ne, re_ = n[edge], r[edge]
        out[edge] = -(_lgamma(ne + 1) - _lgamma(re_ + 1) - _lgamma(ne - re_ + 1))
    saddle = active & ~direct & ~edge
    if np.any(saddle):
        K, N, R = k[saddle], n[saddle], r[saddle]
        p = K / N
        q = (N - K) / N
        first = np.where(p < 0.1, -_bd0(R, R * q) - R * p, R * np.log(q))
        out[saddle] = (
            first
            + _stirlerr(N - R)
            - _stirlerr(N - R - K)
            - _stirlerr(N)
            + _stirlerr(N - K)
            - _bd0(K, (N - R) * p)
            - _bd0(N - R - K, (N - R) * q)
            - 0.5 * np.log1p(-K / (N - R))
            + 0.5 * np.log1p(-K / N)
        )
    return out


def _lgamma(x: NDArray[np.float64]) -> NDArray[np.float64]:
    from scipy.special import gammaln

    return np.asarray(gammaln(x), dtype=np.float64)


def _log_dbinom_raw(x: float, n: float, p: float, q: float) -> float:
    """Loader's log binomial density for scalar x in [0, n]."""
    if p == 0.0:
        return 0.0 if x == 0 else -math.inf
    if q == 0.0:
        return 0.0 if x == n else -math.inf
    if x == 0:
        if n == 0:
            return 0.0
        return float(-_bd0(np.array(n), np.array(n * q)) - n * p) if p < 0.1 else n * math.log(q)
    if x == n:
        return float(-_bd0(np.array(n), np.array(n * p)) - n * q) if q < 0.1 else n * math.log(p)
    if x < 0 or x > n:
        return -math.inf
    arr = np.array([n, x, n - x])
    st = _stirlerr(arr)
    lc = (
        st[0]
        - st[1]
        - st[2]
        - float(_bd0(np.array(x), np.array(n * p)))
        - float(_bd0(np.array(n - x), np.array(n * q)))
    )
    lf = _LN_2PI + math.log(x) + math.log1p(-x / n)
    return float(lc - 0.5 * lf)


def log_hypergeom_pmf(x: float, n: float, r: float, k: float) -> float:
    """log P(X = x) for X ~ Hypergeom(population n, successes r, draws k) (scalar)."""
    b = n - r
    if k < x or r < x or k - x > b:
        return -math.inf
    if k == 0:
        return 0.0 if x == 0 else -math.inf
    p = k / n
    q = (n - k) / n
    return _log_dbinom_raw(x, r, p, q) + _log_dbinom_raw(k - x, b, p, q) - _log_dbinom_raw(k, n, p, q)
