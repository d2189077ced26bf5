"""One evaluator for every depth policy, per-query rows in long format, and aggregates.

Per-query rows (one per query x method x seed): ``qid, gold_rank, bucket, k, found,
p_random, reward, n, r`` where ``reward`` is the per-query BoR reward
``found * -log2 P_rand(k; N, R)`` whatever reward the policy was trained with,
so methods are compared on one scale ("mean reward" = its mean; it is NOT BoR).
For queries with several relevant items, :func:`score_depths_multi` adds completeness
columns (all R relevant in the top K) and :func:`summary_row_multi` their aggregates.

Aggregates are finite numbers or NaN, never infinite: BoR bits (``bor_bits``, ``bor_bits_all``)
are NaN where they are undefined, i.e. when no query is found (complete): ``log2(0 / mean P_rand)``
has no finite value (:func:`rewards.bor_aggregate` returns ``-inf`` there), and ``found_pct`` = 0
already says what happened. So every CSV reads back as numbers in any tool.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from agents.base import DepthPolicy
from envs import EpisodeConfig, RankedQuery
from rewards import (
    COLLAPSE_LAMBDA,
    bor_aggregate,
    bor_aggregate_all,
    bor_ceiling,
    bor_ceiling_all,
    bor_reward,
    bor_reward_all,
    break_even_depth,
    hits_at_k,
    p_random,
    p_random_all,
)

#: Difficulty buckets by the scorer's rank of the gold tool (SPEC section 5): (low, high, label).
BUCKET_SCHEMES: dict[str, tuple[tuple[int, float, str], ...]] = {
    "default": ((1, 1, "easy"), (2, 5, "medium"), (6, 20, "hard"), (21, math.inf, "very hard")),
    "narrow": ((1, 1, "easy"), (2, 3, "medium"), (4, 10, "hard"), (11, math.inf, "very hard")),
}
BUCKET_ORDER = ("easy", "medium", "hard", "very hard", "absent")


def bucket_labels(gold_ranks: NDArray[np.int64], scheme: str = "default") -> NDArray[np.str_]:
    """Bucket label per query ("absent" when the gold item is not in the ranked list)."""
    if scheme not in BUCKET_SCHEMES:
        raise ValueError(f"unknown bucket scheme {scheme!r}; expected one of {', '.join(BUCKET_SCHEMES)}")
    g = np.asarray(gold_ranks)
    out = np.full(g.shape, "absent", dtype=object)
    for lo, hi, label in BUCKET_SCHEMES[scheme]:
        out[(g >= lo) & (g <= hi)] = label
    return out.astype(str)


def score_depths(
    queries: Sequence[RankedQuery],
    depths: NDArray[np.int64],
    buckets: str = "default",
    step_cost: float | None = None,
) -> pd.DataFrame:
    """Per-query rows for given depths (vectorised).

    ``reward`` is the per-query BoR reward without step costs, ``found * -log2 P_rand(K)``;
    with ``step_cost`` c, ``reward_net`` = reward - c (K - 1) charges the K - 1 CONTINUE steps
    (undiscounted), the per-query reward an agent trained with that step cost pays for, and
    ``break_even`` is the query's BoR break-even depth (:func:`rewards.break_even_depth`): at any
    deeper K, ``reward_net`` <= 0 whatever the labels.
    """
    k = np.asarray(depths, dtype=np.int64)
    if k.shape != (len(queries),):
        raise ValueError(f"expected {len(queries)} depths, got shape {k.shape}")
    gold = np.array([q.gold_rank for q in queries], dtype=np.int64)
    n = np.array([q.n_candidates for q in queries], dtype=np.int64)
    r = np.array([q.n_relevant for q in queries], dtype=np.int64)
    lengths = np.array([q.length for q in queries], dtype=np.int64)
    if np.any(k < 1) or np.any(k > lengths):
        bad = int(np.flatnonzero((k < 1) | (k > lengths))[0])
        raise ValueError(f"depth {k[bad]} for query {queries[bad].qid!r} is outside 1..{lengths[bad]}")
    found = ((gold > 0) & (k >= gold)).astype(np.int64)
    pr = np.asarray(p_random(k, n, r), dtype=np.float64)
    reward = np.asarray(bor_reward(found, k, n, np.maximum(r, 1)), dtype=np.float64)
    rows = pd.DataFrame(
        {
            "qid": [q.qid for q in queries],
            "gold_rank": gold,
            "bucket": bucket_labels(gold, buckets),
            "k": k,
            "found": found,
            "p_random": pr,
            "reward": reward,
            "n": n,
            "r": r,
        }
    )
    if step_cost is not None:
        rows["reward_net"] = reward - float(step_cost) * (k - 1)
        distinct, where = np.unique(n, return_inverse=True)
        depth = np.array([break_even_depth("bor", int(v), float(step_cost)) for v in distinct], dtype=np.int64)
        rows["break_even"] = depth[where.reshape(-1)]
    return rows


def evaluate(
    policy: DepthPolicy, queries: Sequence[RankedQuery], config: EpisodeConfig, buckets: str = "default"
) -> pd.DataFrame:
    """Per-query rows of ``policy`` on ``queries`` (the one evaluator for all policies).

    When some query has several relevant items (R >= 2) the rows carry the completeness
    columns of :func:`score_depths_multi`; otherwise exactly those of :func:`score_depths`.
    """
    config.check_queries(queries)
    depths = np.asarray(policy.depths(queries, config), dtype=np.int64)
    caps = np.array([config.cap(q) for q in queries])
    if np.any(depths > caps):
        raise ValueError(f"{policy.name} returned a depth beyond the depth cap")
    if any(q.n_relevant > 1 for q in queries):
        return score_depths_multi(queries, depths, buckets, config.step_cost)
    return score_depths(queries, depths, buckets, config.step_cost)


def depth_spread(k: ArrayLike, n: ArrayLike, break_even: ArrayLike | None = None) -> dict[str, float]:
    """The spread of chosen depths, not only their mean.

    ``median_k``, ``p90_k`` (90th percentile, linear interpolation) and ``whole_list_pct``:
    the % of queries whose shortlist is the whole candidate list (K = N), the runaway a mean
    K hides. Given each query's ``break_even`` depth (the ``break_even`` column of
    :func:`score_depths`), also ``break_even_pct``: the % of queries shown at least that deep (the
    learned agents' cap; one item deeper, a shortlist cannot earn more than its steps cost).
    """
    kk = np.asarray(k, dtype=np.float64)
    nn = np.broadcast_to(np.asarray(n, dtype=np.float64), kk.shape)
    out = {"median_k": math.nan, "p90_k": math.nan, "whole_list_pct": math.nan}
    if kk.size:
        out = {
            "median_k": float(np.median(kk)),
            "p90_k": float(np.quantile(kk, 0.9)),
            "whole_list_pct": 100.0 * float(np.mean(kk >= nn)),
        }
    if break_even is not None:
        be = np.broadcast_to(np.asarray(break_even, dtype=np.float64), kk.shape)
        out["break_even_pct"] = 100.0 * float(np.mean(kk >= be)) if kk.size else math.nan
    return out


def spread_of(rows: pd.DataFrame) -> dict[str, float]:
    """:func:`depth_spread` of per-query rows (with ``break_even_pct`` when they carry ``break_even``)."""
    return depth_spread(
        rows["k"].to_numpy(), rows["n"].to_numpy(), rows["break_even"].to_numpy() if "break_even" in rows else None
    )


def finite_or_nan(x: float) -> float:
    """``x``, or NaN when it is infinite (an undefined aggregate, e.g. BoR bits with nothing found)."""
    return x if math.isfinite(x) else math.nan


def summary_row(rows: pd.DataFrame) -> dict[str, float]:
    """Aggregate metrics of one (condition, method, seed) group of per-query rows."""
    found = rows["found"].to_numpy()
    k, n, r = rows["k"].to_numpy(), rows["n"].to_numpy(), rows["r"].to_numpy()
    lam = k * r / n
    return {
        "n_queries": len(rows),
        "found_pct": 100.0 * float(found.mean()),
        "mean_k": float(k.mean()),
        "std_k": float(k.std()),
        **spread_of(rows),
        "bor_bits": finite_or_nan(bor_aggregate(found, k, n, r)),
        "bor_ceiling": bor_ceiling(k, n, r),
        "mean_reward": float(rows["reward"].mean()),
        **({"mean_reward_net": float(rows["reward_net"].mean())} if "reward_net" in rows else {}),
        "mean_p_random": float(rows["p_random"].mean()),
        "collapse_pct": 100.0 * float(np.mean(lam >= COLLAPSE_LAMBDA)),
    }


KEYS = ["condition", "method", "seed"]


def summarise(per_query: pd.DataFrame, keys: Sequence[str] = KEYS) -> pd.DataFrame:
    """One summary row per group of ``keys``: :func:`summary_row`, or :func:`summary_row_multi`
    for groups whose rows carry the completeness columns (several relevant items)."""

    def row(g: pd.DataFrame) -> dict[str, float]:
        multi = "complete" in g.columns and bool(g["complete"].notna().all())
        return summary_row_multi(g) if multi else summary_row(g)

    out = [
        {**dict(zip(keys, key if isinstance(key, tuple) else (key,), strict=True)), **row(g)}
        for key, g in per_query.groupby(list(keys), sort=True)
    ]
    return pd.DataFrame(out)


def bucket_table(per_query: pd.DataFrame, keys: Sequence[str] = KEYS) -> pd.DataFrame:
    """Per bucket: n, found %, mean K, std K and :func:`depth_spread`, for each group of ``keys``."""
    rows = []
    for key, g in per_query.groupby([*keys, "bucket"], sort=True):
        rows.append(
            {
                **dict(zip([*keys, "bucket"], key, strict=True)),
                "n": len(g),
                "found_pct": 100.0 * float(g["found"].mean()),
                "mean_k": float(g["k"].mean()),
                "std_k": float(g["k"].std(ddof=0)),
                **spread_of(g),
            }
        )
    df = pd.DataFrame(rows)
    if len(df):
        df["bucket"] = pd.Categorical(df["bucket"], BUCKET_ORDER, ordered=True)
        df = df.sort_values([*keys, "bucket"]).reset_index(drop=True)
        df["bucket"] = df["bucket"].astype(str)
    return df


#: Columns :func:`score_depths_multi` adds to those of :func:`score_depths`.
MULTI_COLUMNS = ("hits", "recall", "last_rank", "complete", "p_random_all", "reward_all")


def score_depths_multi(
    queries: Sequence[RankedQuery], depths: NDArray[np.int64], buckets: str = "default", step_cost: float | None = None
) -> pd.DataFrame:
    """Per-query rows of :func:`score_depths` plus completeness columns (several relevant items).

    The first nine columns are exactly those of :func:`score_depths` (same values; "found"
    is "at least one relevant in the top K" and ``p_random``/``reward`` its chance term and
    reward with the true R). Added columns (:data:`MULTI_COLUMNS`), per query with R
    relevant items of which the ranked list holds ``relevant_ranks``:

    - ``hits``: relevant items in the top K; ``recall`` = hits / R (0 when R = 0);
    - ``last_rank``: rank of the last relevant item, 0 when some relevant item is absent
      from the list (R > len(relevant_ranks), e.g. a truncated run) or R = 0;
    - ``complete``: 1 when all R relevant items are in the top K (``K >= last_rank > 0``);
      a query with R = 0 is vacuously complete (and ``p_random_all`` = 1, reward 0);
    - ``p_random_all``: ``C(N-R, K-R) / C(N, K)`` (0 when K < R), chance of completeness;
    - ``reward_all``: ``complete * -log2 p_random_all`` (0 when not complete).

    For R = 1, ``complete == found`` and ``p_random_all == p_random``. :func:`score_depths`
    itself is unchanged, so single-gold outputs stay byte-identical.
    """
    base = score_depths(queries, depths, buckets, step_cost)
    k = base["k"].to_numpy()
    n = base["n"].to_numpy()
    r = base["r"].to_numpy()
    hits = np.array([hits_at_k(q.relevant_ranks, int(kq)) for q, kq in zip(queries, k, strict=True)], dtype=np.int64)
    last = np.array(
        [
            int(q.relevant_ranks[-1]) if q.n_relevant > 0 and q.relevant_ranks.size == q.n_relevant else 0
            for q in queries
        ],
        dtype=np.int64,
    )
    complete = ((r == 0) | ((last > 0) & (k >= last))).astype(np.int64)
    pa = np.asarray(p_random_all(k, n, r), dtype=np.float64)
    return base.assign(
        hits=hits,
        recall=np.where(r > 0, hits / np.maximum(r, 1), 0.0),
        last_rank=last,
        complete=complete,
        p_random_all=pa,
        reward_all=np.asarray(bor_reward_all(complete, k, n, r), dtype=np.float64),
    )


def summary_row_multi(rows: pd.DataFrame) -> dict[str, float]:
    """:func:`summary_row` plus completeness aggregates of rows from :func:`score_depths_multi`.

    Added keys: ``complete_pct`` (Completeness@K, % of queries with all R relevant in the
    top K), ``mean_recall``, ``bor_bits_all`` = ``log2(mean complete / mean P_all)``
    (NaN when every query has K < R or none is complete), ``bor_ceiling_all``
    (NaN when every K < R), ``mean_reward_all``, ``mean_p_random_all`` and ``mean_r``.
    """
    k, n, r = rows["k"].to_numpy(), rows["n"].to_numpy(), rows["r"].to_numpy()
    complete = rows["complete"].to_numpy()
    return {
        **summary_row(rows),
        "mean_r": float(r.mean()),
        "complete_pct": 100.0 * float(complete.mean()),
        "mean_recall": float(rows["recall"].mean()),
        "bor_bits_all": finite_or_nan(bor_aggregate_all(complete, k, n, r)),
        "bor_ceiling_all": bor_ceiling_all(k, n, r),
        "mean_reward_all": float(rows["reward_all"].mean()),
        "mean_p_random_all": float(rows["p_random_all"].mean()),
    }
