"""Tables of the generated reports, computed from the long per-query / summary / bucket frames.

Every function returns a DataFrame and writes nothing; :mod:`experiments.report.study` and
:mod:`experiments.report.peers_page` render and write them.
"""

from __future__ import annotations

import functools
import json
import math
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.evaluation import BUCKET_ORDER, spread_of
from agents.method import MethodSpec, method_group
from agents.registry import reads_examined_only
from experiments.figures import bucket_spread, with_splits
from experiments.paper import PAPER
from experiments.plan import BOR_AGENTS, GOAL_FRACTION_OF_DP, RL_AGENTS, SUPERVISED_AGENTS, condition_order

METRICS = ("found_pct", "mean_k", "bor_bits", "mean_reward_net", "mean_reward")
"""The metrics :func:`aggregate` gives an interval: found %, mean K, BoR bits, the judged net reward and the
cost-free mean reward."""
JUDGED = "mean_reward_net"
"""The study's judged quantity (:func:`agents.base.judged_objective`): the mean per-query net reward,
found x -log2 P_rand(K) - c (K - 1), c the condition's step cost. Every goal, paired difference, limit
fraction and "best method" uses it; the cost-free ``mean_reward`` is the second column."""
JUDGED_ROW = "reward_net"
"""The per-query column behind :data:`JUDGED`."""
FOUND_TOL = 1e-9
"""Two found % closer than this are equal (they are fractions of the same test units: a float tie
such as 89.33333333333334 vs 89.33333333333333 is no difference)."""


N_BOOT = 2000
"""Bootstrap resamples of the test queries behind every reported interval."""
BOOT_CHUNK = 256
"""Resamples :func:`resampled_means` gathers at a time. A block of 256 resamples of 3,000 test units is 6 MB
and stays in the CPU's cache; gathering all 10,000 at once builds a 240 MB array and took twice as long. The
means are the same either way (each reduces the same contiguous row)."""
MAX_REPORT_THREADS = 4
"""At most this many threads compute a report's bootstrap intervals (:func:`parallel_map`)."""


def resampled_means(values: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """``values[..., idx].mean(axis=-1)``: the mean of ``values`` (units, or rows x units) on each resample (a row
    of ``idx``, unit indices drawn with replacement), shape ``values.shape[:-1] + (resamples,)``. Computed in
    blocks of :data:`BOOT_CHUNK` resamples, bit for bit the one-shot expression."""
    values = np.asarray(values)
    out = np.empty((*values.shape[:-1], idx.shape[0]), dtype=np.result_type(values.dtype, np.float64))
    for start in range(0, idx.shape[0], BOOT_CHUNK):
        out[..., start : start + BOOT_CHUNK] = values[..., idx[start : start + BOOT_CHUNK]].mean(axis=-1)
    return out


def report_threads() -> int:
    """Threads for a report's bootstrap work: the CPUs this process may use, at most :data:`MAX_REPORT_THREADS`."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(MAX_REPORT_THREADS, cpus))


def parallel_map(fn: Callable[[Any], Any], items: Iterable[Any]) -> list[Any]:
    """``[fn(x) for x in items]``, in order, on :func:`report_threads` threads. For independent NumPy work (the
    gathers and means of a bootstrap release the GIL): each result is what the loop computes, in the loop's
    order."""
    items = list(items)
    threads = min(report_threads(), len(items))
    if threads <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=threads) as pool:
        return list(pool.map(fn, items))


def query_resamples(n_queries: int, n_boot: int = N_BOOT, seed: int = 0) -> np.ndarray:
    """``n_boot`` x ``n_queries`` query indices drawn with replacement (``default_rng(seed)``): one
    set per condition, shared by every method so that intervals and differences are paired."""
    return unit_resamples(np.zeros(n_queries, dtype=np.int64), n_boot, seed)


def unit_resamples(splits: np.ndarray, n_boot: int = N_BOOT, seed: int = 0) -> np.ndarray:
    """Stratified bootstrap over test units (a test query of one train/test split): ``splits``
    names each unit's split, units of one split are contiguous. Each resample (a row,
    ``n_boot`` x units) redraws every split's test queries with replacement from that split
    only, so a split keeps its size and a resampled mean over units is the mean over splits.
    With one split it is the plain query bootstrap (``default_rng(seed)``)."""
    rng = np.random.default_rng(seed)
    out = np.empty((n_boot, len(splits)), dtype=np.int64)
    for a, b in _blocks(splits):
        out[:, a:b] = rng.integers(b - a, size=(n_boot, b - a)) + a
    return out


def _blocks(splits: np.ndarray) -> list[tuple[int, int]]:
    """``[start, stop)`` of each run of equal split ids (ValueError if a split recurs later)."""
    splits = np.asarray(splits)
    if splits.size == 0:
        return []
    edges = [0, *(np.flatnonzero(splits[1:] != splits[:-1]) + 1).tolist(), splits.size]
    blocks = list(zip(edges[:-1], edges[1:], strict=True))
    if len({splits[a] for a, _ in blocks}) != len(blocks):
        raise ValueError("test units of one split must be contiguous")
    return blocks


def _unit_wide(g: pd.DataFrame, value: str, index: str | list[str]) -> pd.DataFrame:
    """``value`` per ``index`` (rows) x test unit ``(split_seed, qid)`` (columns, split-major)."""
    return with_splits(g).pivot_table(
        index=index, columns=["split_seed", "qid"], values=value, aggfunc="mean", sort=True
    )


def _query_matrices(g: pd.DataFrame) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Seeds x test units arrays of found, k, reward and P_rand of one (condition, method), and the
    split of each unit (a unit is a test query of one split)."""
    g = with_splits(g)
    if g.duplicated(["seed", "split_seed", "qid"]).any():
        raise ValueError("a (seed, split, query) triple occurs twice in the per-query rows")
    cols = ["found", "k", JUDGED_ROW, "reward", "p_random"]
    wide = g.pivot(index="seed", columns=["split_seed", "qid"], values=cols).sort_index(axis=1)
    if wide.isna().to_numpy().any():
        raise ValueError("every seed of a method must be scored on the same splits and test queries")
    return {c: wide[c].to_numpy(dtype=np.float64) for c in cols}, wide[cols[0]].columns.get_level_values(0).to_numpy()


def _bootstrap_metrics(mats: dict[str, np.ndarray], idx: np.ndarray, splits: np.ndarray) -> dict[str, np.ndarray]:
    """Each metric of :data:`METRICS` per resample ``idx`` (resamples x units, from
    :func:`unit_resamples`): per seed and split on the resampled queries, then the mean over
    splits and seeds (as the point estimate, a mean over runs)."""

    def per_run(name: str, a: int, b: int) -> np.ndarray:  # resamples x seeds
        return resampled_means(mats[name], idx[:, a:b]).T

    parts: dict[str, list[np.ndarray]] = {m: [] for m in METRICS}
    for a, b in _blocks(splits):
        found, prand = per_run("found", a, b), per_run("p_random", a, b)
        with np.errstate(divide="ignore"):
            parts["bor_bits"].append(np.log2(found / prand).mean(axis=1))
        parts["found_pct"].append(100.0 * found.mean(axis=1))
        parts["mean_k"].append(per_run("k", a, b).mean(axis=1))
        parts["mean_reward"].append(per_run("reward", a, b).mean(axis=1))
        parts["mean_reward_net"].append(per_run(JUDGED_ROW, a, b).mean(axis=1))
    return {m: np.mean(v, axis=0) for m, v in parts.items()}


def aggregate(summary: pd.DataFrame, per_query: pd.DataFrame, seed: int = 0, n_boot: int = N_BOOT) -> pd.DataFrame:
    """Per (condition, method): each metric's mean over runs (training seeds x train/test splits)
    with three separate spreads.

    - ``{m}_lo`` / ``{m}_hi``: a 95% percentile bootstrap over the test queries, stratified by
      split (:func:`unit_resamples`; the same ``n_boot`` resamples for every method of a
      condition; each resample recomputes the metric per run and averages over runs). This
      is the interval every report shows: it covers test-set sampling noise.
    - ``{m}_seed_min`` / ``{m}_seed_max``: the range over training seeds (each seed's mean over
      splits), labelled as such.
    - ``{m}_split_min`` / ``{m}_split_max``: the range over train/test splits (each split's mean
      over seeds); ``n_splits`` says how many.

    Depth spread (:func:`agents.evaluation.depth_spread`) pools every seed's test rows:
    ``median_k``, ``p90_k``, ``whole_list_pct``, ``break_even_pct`` (when the rows carry each query's
    break-even depth); and without whole-list episodes (K = N):
    ``found_pct_partial`` and ``mean_k_partial`` (NaN when every episode shows the whole list).
    """
    rows = []
    pq = per_query.set_index(["condition", "method"]).sort_index()
    for cond, cs in summary.groupby("condition", sort=True):
        idx: np.ndarray | None = None  # drawn once the condition's test units are known
        jobs: list[tuple[dict, dict[str, np.ndarray], np.ndarray, np.ndarray]] = []  # the bootstraps of its rows
        for method, g in cs.groupby("method", sort=True):
            g = with_splits(g)
            row: dict[str, object] = {
                "condition": cond,
                "method": method,
                "n_seeds": int(g["seed"].nunique()),
                "n_splits": int(g["split_seed"].nunique()),
            }
            for m in (*METRICS, "std_k", "bor_ceiling"):
                row[m] = float(g[m].mean())
                if m in METRICS:
                    by_seed, by_split = g.groupby("seed")[m].mean(), g.groupby("split_seed")[m].mean()
                    row[f"{m}_seed_min"], row[f"{m}_seed_max"] = float(by_seed.min()), float(by_seed.max())
                    row[f"{m}_split_min"], row[f"{m}_split_max"] = float(by_split.min()), float(by_split.max())
            rows_q = pq.loc[(cond, method)].reset_index()
            mats, splits = _query_matrices(rows_q)
            if idx is None:
                idx = unit_resamples(splits, n_boot, seed)
            elif idx.shape[1] != splits.size:
                raise ValueError(f"{cond}: {method} is scored on other test queries than the condition's first method")
            jobs.append((row, mats, idx, splits))
            for m in METRICS:  # filled below, in this column order
                row[f"{m}_lo"], row[f"{m}_hi"] = math.nan, math.nan
            k, n = rows_q["k"].to_numpy(), rows_q["n"].to_numpy()
            row.update(spread_of(rows_q))
            partial = k < n
            row["found_pct_partial"] = 100.0 * float(rows_q["found"][partial].mean()) if partial.any() else math.nan
            row["mean_k_partial"] = float(k[partial].mean()) if partial.any() else math.nan
            rows.append(row)
        for (row, *_), boots in zip(jobs, parallel_map(lambda job: _bootstrap_metrics(*job[1:]), jobs), strict=True):
            for m, boot in boots.items():
                finite = boot[np.isfinite(boot)]
                lo, hi = np.quantile(finite, [0.025, 0.975]) if finite.size else (math.nan, math.nan)
                row[f"{m}_lo"], row[f"{m}_hi"] = float(lo), float(hi)
    return pd.DataFrame(rows)


def scorer_strength(per_query: pd.DataFrame) -> pd.DataFrame:
    """found@K of the scorer alone on the test split, per condition (from gold ranks); with several
    train/test splits, the mean over splits (``n_test`` is the test queries of one split)."""
    first = with_splits(per_query).drop_duplicates(["condition", "split_seed", "qid"])
    rows = []
    for cond, g in first.groupby("condition", sort=True):
        gr = g["gold_rank"].to_numpy()
        n_splits = int(g["split_seed"].nunique())
        row: dict[str, object] = {"condition": cond, "n_test": len(g) // n_splits, "n_splits": n_splits}
        for k in (1, 3, 5, 10, 20, 50):
            row[f"found@{k}"] = 100.0 * float(np.mean((gr >= 1) & (gr <= k)))
        rows.append(row)
    return pd.DataFrame(rows)


def aggregate_with_groups(summary: pd.DataFrame, per_query: pd.DataFrame) -> pd.DataFrame:
    """:func:`aggregate` with each method's registry group after the method column."""
    agg = aggregate(summary, per_query)
    agg.insert(2, "group", agg["method"].map(method_group))
    return agg


def bucket_aggregate(buckets: pd.DataFrame) -> pd.DataFrame:
    """Per condition x method x bucket: n, and found % and mean K (mean, min, max over seeds)."""
    b = bucket_spread(buckets, ("condition", "method", "bucket"))
    b["_b"] = b["bucket"].map({x: i for i, x in enumerate(BUCKET_ORDER)})
    return b.sort_values(["condition", "method", "_b"]).drop(columns="_b").reset_index(drop=True)


def ratio_interval(
    num: np.ndarray, den: np.ndarray, idx: np.ndarray, level: float = 0.95
) -> tuple[float, float, float]:
    """``mean(num) / mean(den)`` over queries with a paired percentile bootstrap: each resample
    (a row of ``idx``, query indices drawn with replacement) recomputes both means on the SAME
    queries. NaN when the reference mean is 0."""
    den_mean = float(den.mean())
    if den_mean == 0 or math.isnan(den_mean):
        return (math.nan, math.nan, math.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        boot = resampled_means(num, idx) / resampled_means(den, idx)
    a = (1.0 - level) / 2.0
    lo, hi = np.nanquantile(boot, [a, 1.0 - a])
    return float(num.mean()) / den_mean, float(lo), float(hi)


LIMIT_REFS = (("bor-dp", "dp"), ("oracle", "oracle"))
"""The reference methods of :func:`limits_table` and the suffix of their columns."""


def limits_table(per_query: pd.DataFrame, seed: int = 0, n_boot: int = N_BOOT) -> pd.DataFrame:
    """Mean test net reward (:data:`JUDGED`) of every method as a fraction of ``bor-dp``'s and the oracle's.

    Per test unit (a query of one split), each method's reward is its mean over seeds; the
    fraction is a ratio of means over units with a paired bootstrap interval
    (:func:`ratio_interval`, the same split-stratified resamples for every method of a condition).
    """
    rows = []
    for cond, g in per_query.groupby("condition", sort=True):
        jobs = []  # the ratios of this condition, computed together
        by = _unit_wide(g, JUDGED_ROW, "method")
        seeds = g.groupby("method")["seed"].nunique()
        idx = unit_resamples(by.columns.get_level_values(0).to_numpy(), n_boot, seed)
        refs = {name: by.loc[key].to_numpy(dtype=np.float64) for key, name in LIMIT_REFS if key in by.index}
        for method in by.index:
            r = by.loc[method].to_numpy(dtype=np.float64)
            row: dict[str, object] = {
                "condition": cond,
                "method": method,
                "group": method_group(method),
                "n_seeds": int(seeds[method]),
                JUDGED: float(r.mean()),
            }
            for _, name in LIMIT_REFS:
                row[f"frac_{name}"], row[f"frac_{name}_lo"], row[f"frac_{name}_hi"] = (math.nan,) * 3
                if name in refs:
                    jobs.append((row, name, (r, refs[name], idx)))
            rows.append(row)
        fracs = parallel_map(lambda j: ratio_interval(*j[2]), jobs)
        for (row, name, _), (frac, lo, hi) in zip(jobs, fracs, strict=True):
            row[f"frac_{name}"], row[f"frac_{name}_lo"], row[f"frac_{name}_hi"] = frac, lo, hi
    return pd.DataFrame(rows)


def dp_table(runs: Sequence[Path], summary: pd.DataFrame) -> pd.DataFrame:
    """The DP policies' value in their own model, realised on train, and on test (solve times are in
    the run manifests and ``shortlist bench``, never in a table: tables are byte-reproducible)."""
    rows = []
    for run in runs:
        cfg = json.loads((run / "config.json").read_text())
        if cfg.get("agent") != "dp" or not (run / "agent.json").is_file():
            continue
        p = json.loads((run / "agent.json").read_text())["params"]
        s = summary[(summary["condition"] == cfg["condition"]) & (summary["method"] == cfg["method"])]
        rows.append(
            {
                "condition": cfg["condition"],
                "method": cfg["method"],
                "objective": p["objective"],
                "model_value_train": p["model_value"],
                "realised_value_train": p["train_value"],
                "mean_reward_net_test": float(s[JUDGED].mean()),
                "states_seen": int(np.sum(p["seen"])),
            }
        )
    return pd.DataFrame(rows)


DIFF_KEYS = ("diff", "diff_lo", "diff_hi")
"""The keys of :func:`diff_interval`."""


def diff_interval(d: np.ndarray, idx: np.ndarray) -> dict[str, float]:
    """Mean of per-unit differences ``d`` and its 95% percentile interval over the resamples ``idx``
    (:func:`unit_resamples`)."""
    boot = resampled_means(d, idx)
    values = (float(d.mean()), float(np.quantile(boot, 0.025)), float(np.quantile(boot, 0.975)))
    return dict(zip(DIFF_KEYS, values, strict=True))


def paired_differences(per_query: pd.DataFrame, seed: int = 0, n_boot: int = 10_000) -> pd.DataFrame:
    """Mean net reward (:data:`JUDGED`) of each BoR agent minus each peer's, with a paired bootstrap over
    test queries; each RL agent is also paired with the supervised models (``peer`` = :data:`SUPERVISED_AGENTS`).

    Per test unit (a query of one split), a method's reward is its mean over seeds; the
    difference of means is resampled over units, stratified by split (the same resample for both
    methods), with a seeded generator. This interval covers test-set sampling noise (the seed
    and split ranges in aggregate.csv do not).
    """
    rows = []
    for cond in condition_order(per_query["condition"].unique()):
        pq = per_query[per_query["condition"] == cond]
        by = _unit_wide(pq, JUDGED_ROW, "method")
        idx = unit_resamples(by.columns.get_level_values(0).to_numpy(), n_boot, seed)
        named, diffs = [], []  # one condition at a time: its resamples are 240 MB with 3,000 test units
        for agent in BOR_AGENTS:
            if agent not in by.index:
                continue
            others = sorted(m for m in by.index if method_group(m) == "peer")
            if agent in RL_AGENTS:
                others += [m for m in SUPERVISED_AGENTS if m in by.index]
            for peer in others:
                d = (by.loc[agent] - by.loc[peer]).to_numpy()
                named.append({"condition": cond, "agent": agent, "peer": peer, "n_queries": d.size})
                diffs.append(d)
        intervals = parallel_map(functools.partial(diff_interval, idx=idx), diffs)
        rows += [{**row, **interval} for row, interval in zip(named, intervals, strict=True)]
    return pd.DataFrame(rows)


def goal_checks(agg: pd.DataFrame, limits: pd.DataFrame) -> pd.DataFrame:
    """Per condition and BoR agent, on the point estimates of the judged net reward (:data:`JUDGED`):

    1. mean test net reward >= every non-oracle peer's ("peer" group);
    2. mean test net reward >= 90% of ``bor-dp``'s (the DP optimum of the estimated tabular model);
    3. no peer has both a higher found % and a lower mean K (found % and K compared with a tolerance,
       :data:`FOUND_TOL`: equal fractions of the same test units are a tie, not a domination).
    """
    rows = []
    for cond in condition_order(agg["condition"].unique()):
        a = agg[agg["condition"] == cond].set_index("method")
        peers = a[a["group"] == "peer"]
        for agent in BOR_AGENTS:
            if agent not in a.index:
                continue
            me = a.loc[agent]
            better = peers[peers[JUDGED] > me[JUDGED]].sort_values(JUDGED, ascending=False)
            best = f"best peer {best_of(peers[JUDGED])} {peers[JUDGED].max():.3f}" if len(peers) else ""
            rows.append(
                {
                    "condition": cond,
                    "agent": agent,
                    "check": "net reward >= every peer",
                    "passed": better.empty,
                    "detail": "; ".join(f"{m} {r[JUDGED]:.3f}" for m, r in better.iterrows()) or best,
                }
            )
            lim = limits[(limits["condition"] == cond) & (limits["method"] == agent)]
            frac = float(lim["frac_dp"].iloc[0]) if len(lim) else math.nan
            rows.append(
                {
                    "condition": cond,
                    "agent": agent,
                    "check": f"net reward >= {GOAL_FRACTION_OF_DP:.0%} of bor-dp",
                    "passed": bool(frac >= GOAL_FRACTION_OF_DP),
                    "detail": f"{frac:.3f}",
                }
            )
            dom = peers[
                (peers["found_pct"] > me["found_pct"] + FOUND_TOL) & (peers["mean_k"] < me["mean_k"] - FOUND_TOL)
            ]
            rows.append(
                {
                    "condition": cond,
                    "agent": agent,
                    "check": "no peer dominates (found up, K down)",
                    "passed": dom.empty,
                    "detail": "; ".join(f"{m} {r['found_pct']:.1f}% at K {r['mean_k']:.2f}" for m, r in dom.iterrows()),
                }
            )
    return pd.DataFrame(rows)


def _row(agg: pd.DataFrame, cond: str, method: str) -> pd.Series | None:
    r = agg[(agg["condition"] == cond) & (agg["method"] == method)]
    return r.iloc[0] if len(r) else None


def table2(agg: pd.DataFrame, strength: pd.DataFrame, conditions: list[str]) -> pd.DataFrame:
    """One row per (condition, agent in {BoR, F1}): ours from :func:`aggregate` (mean over runs,
    95% bootstrap interval over test queries, depth spread, and found % / mean K without
    whole-list episodes) beside the paper's found % and mean K, plus each scorer's found@1
    beside the paper's."""
    strength = strength.set_index("condition")
    rows = []
    for cond in conditions:
        paper = PAPER.get(cond, {})
        for key, method in (("bor", "bor-dqn"), ("f1", "f1-dqn"), ("constant", "constant-dqn")):
            o = _row(agg, cond, method)
            if o is None:
                continue
            p = paper.get(key, {})
            row = {
                "condition": cond,
                "method": method,
                "n_seeds": int(o["n_seeds"]),
                "found_pct": o["found_pct"],
                "found_pct_lo": o["found_pct_lo"],
                "found_pct_hi": o["found_pct_hi"],
                "mean_k": o["mean_k"],
                "mean_k_lo": o["mean_k_lo"],
                "mean_k_hi": o["mean_k_hi"],
                "median_k": o["median_k"],
                "p90_k": o["p90_k"],
                "whole_list_pct": o["whole_list_pct"],
                "found_pct_partial": o["found_pct_partial"],
                "mean_k_partial": o["mean_k_partial"],
                "bor_bits": o["bor_bits"],
                JUDGED: o[JUDGED],
                "mean_reward": o["mean_reward"],
                "paper_found_pct": p.get("found_pct", math.nan),
                "paper_mean_k": p.get("mean_k", math.nan),
                "found_at_1": strength.loc[cond, "found@1"] if cond in strength.index else math.nan,
                "paper_found_at_1": paper.get("found_at_1", math.nan),
            }
            row["found_diff"] = row["found_pct"] - row["paper_found_pct"]
            row["k_diff"] = row["mean_k"] - row["paper_mean_k"]
            rows.append(row)
    return pd.DataFrame(rows)


MIN_BUCKET_QUERIES = 10
"""A difficulty bucket takes part in a depth-trend claim only with at least this many test queries."""


@dataclass(frozen=True)
class DepthTrend:
    """Mean K per difficulty bucket (easy to hard) and whether it grows (see :func:`depth_trend`)."""

    buckets: list[str]
    mean_k: list[float]
    n: list[int]
    monotone: bool
    diff: float
    diff_lo: float
    diff_hi: float
    grows: bool


def depth_trend(
    per_query: pd.DataFrame,
    condition: str,
    method: str,
    *,
    min_queries: int = MIN_BUCKET_QUERIES,
    n_boot: int = N_BOOT,
    seed: int = 0,
) -> DepthTrend | None:
    """Does ``method``'s depth grow with difficulty on ``condition``? Judged over ALL buckets
    with at least ``min_queries`` test queries, not two picked ones.

    Per test unit (a query of one split), K is the mean over seeds. Returns the buckets used (easy to hard), their mean
    K and query counts, whether the means are non-decreasing across every used bucket
    (``monotone``), and the hardest-minus-easiest mean K difference with a 95% percentile
    bootstrap interval (queries resampled within each bucket). ``grows`` is True only when
    the sequence is monotone and the interval lies above 0. None with fewer than 2 buckets.
    """
    pq = per_query[(per_query["condition"] == condition) & (per_query["method"] == method)]
    if pq.empty:
        return None
    per_q = with_splits(pq).groupby(["bucket", "split_seed", "qid"], sort=True)["k"].mean()
    used = [b for b in BUCKET_ORDER if b in per_q.index.get_level_values(0) and len(per_q.loc[b]) >= min_queries]
    if len(used) < 2:
        return None
    ks = {b: per_q.loc[b].to_numpy(dtype=np.float64) for b in used}
    means = [float(ks[b].mean()) for b in used]
    rng = np.random.default_rng(seed)
    easy, hard = ks[used[0]], ks[used[-1]]
    boot = hard[rng.integers(hard.size, size=(n_boot, hard.size))].mean(axis=1) - easy[
        rng.integers(easy.size, size=(n_boot, easy.size))
    ].mean(axis=1)
    lo, hi = np.quantile(boot, [0.025, 0.975])
    monotone = bool(np.all(np.diff(means) >= 0))
    return DepthTrend(
        buckets=used,
        mean_k=means,
        n=[int(ks[b].size) for b in used],
        monotone=monotone,
        diff=means[-1] - means[0],
        diff_lo=float(lo),
        diff_hi=float(hi),
        grows=monotone and float(lo) > 0,
    )


def condition_meta(runs_dir: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """The condition metadata (split sizes, scorer found@1 on all queries, data sizes) the first
    run manifest of each (condition, split seed) recorded."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for manifest in sorted(runs_dir.glob("*/manifest.json")):
        cfg = json.loads((manifest.parent / "config.json").read_text())
        key = (cfg.get("condition"), int(cfg.get("split_seed", 0)))
        if not key[0] or key in out:
            continue
        meta = json.loads(manifest.read_text()).get("condition") or {}
        if isinstance(meta, dict):
            out[key] = meta
    return out


def first_split_meta(meta: dict[tuple[str, int], dict[str, Any]], condition: str) -> dict[str, Any]:
    """The metadata of ``condition``'s lowest split seed in a :func:`condition_meta` dict ({} if none)."""
    splits = sorted(s for c, s in meta if c == condition)
    return meta[(condition, splits[0])] if splits else {}


def bfcl_text_fields(kind: str = "spec") -> list[str]:
    """Which fields of a BFCL function definition its tool text of ``kind`` holds, read off
    :func:`benchmarks.bfcl.tool_text` on a probe definition (computed, not asserted)."""
    from benchmarks.bfcl import tool_text

    text = tool_text(
        {"name": "probename", "description": "probedesc", "parameters": {"properties": {"probeparam": {}}}}, kind
    )
    fields = {"probename": "function name", "probedesc": "description", "probeparam": "parameter names"}
    return [label for probe, label in fields.items() if probe in text]


SPEC_BFCL_TEXT = ["description", "parameter names"]
"""SPEC section 4: BM25 over description + parameter names."""


def measured_factors(
    per_query: pd.DataFrame, meta: dict[tuple[str, int], dict[str, Any]], conditions: Sequence[str]
) -> pd.DataFrame:
    """Per condition, the measured factors a difference from the paper can come from.

    Scorer found@1 on the test and on the training split of every train/test split (test from the
    test rows' gold ranks, train from the condition's recorded found@1 over all queries and the
    split sizes), as means over splits with the range of test minus train over splits (the split
    difficulty); query and tool counts here and in the paper; and (BFCL) the tool-text fields
    against SPEC's.
    """
    first = with_splits(per_query).drop_duplicates(["condition", "split_seed", "qid"])
    rows = []
    for cond in conditions:
        tests, trains = [], []
        for split, g in first[first["condition"] == cond].groupby("split_seed", sort=True):
            m = meta.get((cond, int(split)), {})
            n_train, n_test = m.get("n_train"), m.get("n_test")
            test1 = 100.0 * float(np.mean(g["gold_rank"].to_numpy() == 1))
            all1 = m.get("found_at_1_pct_all")
            tests.append(test1)
            trains.append(
                (all1 * (n_train + n_test) - test1 * n_test) / n_train
                if all1 is not None and n_train and n_test
                else math.nan
            )
        gaps = np.asarray(tests) - np.asarray(trains)
        m = first_split_meta(meta, cond)
        paper = PAPER.get(cond, {})
        fields = bfcl_text_fields(m.get("tool_text") or "rich") if m.get("benchmark") == "bfcl" else []
        rows.append(
            {
                "condition": cond,
                "n_splits": len(tests),
                "found_at_1_train": float(np.mean(trains)) if trains else math.nan,
                "found_at_1_test": float(np.mean(tests)) if tests else math.nan,
                "test_minus_train_min": float(np.min(gaps)) if gaps.size else math.nan,
                "test_minus_train_max": float(np.max(gaps)) if gaps.size else math.nan,
                "paper_found_at_1": paper.get("found_at_1", math.nan),
                "n_queries": m.get("n_queries", math.nan),
                "paper_n_queries": paper.get("n_queries", math.nan),
                "n_tools": m.get("n_tools", math.nan),
                "tool_text": " + ".join(fields),
                "tool_text_as_spec": (fields == SPEC_BFCL_TEXT) if fields else None,
            }
        )
    return pd.DataFrame(rows)


def best_fixed(agg: pd.DataFrame, condition: str) -> str | None:
    """The fixed K with the highest mean net reward on ``condition`` (chosen on test: a hindsight reference)."""
    fixed = agg[(agg["condition"] == condition) & (agg["method"].map(method_group) == "baseline")]
    return None if fixed.empty else best_of(fixed.set_index("method")[JUDGED])


SPLIT_METHODS = ("bor-dqn", "f1-dqn", "bor-tabular")
"""Methods of :func:`split_variance` (with each condition's best fixed K)."""


def split_variance(agg: pd.DataFrame, conditions: Sequence[str]) -> pd.DataFrame:
    """Per condition and method of :data:`SPLIT_METHODS` plus the best fixed K: mean reward and
    found % with the query-bootstrap interval, the range over training seeds and the range over
    train/test splits, side by side (all from :func:`aggregate`)."""
    rows = []
    for cond in conditions:
        extra = best_fixed(agg, cond)
        for method in (*SPLIT_METHODS, *([extra] if extra else [])):
            r = _row(agg, cond, method)
            if r is None:
                continue
            row: dict[str, object] = {"condition": cond, "method": method}
            row.update({c: r[c] for c in ("n_seeds", "n_splits")})
            for m in (JUDGED, "mean_reward", "found_pct", "mean_k"):
                for suffix in ("", "_lo", "_hi", "_seed_min", "_seed_max", "_split_min", "_split_max"):
                    row[m + suffix] = r[m + suffix]
            rows.append(row)
    return pd.DataFrame(rows)


#: The BFCL conditions shown beside each other in the tool-text comparison: (SPEC text, rich text).
TEXT_PAIRS = (("bfcl-bm25", "bfcl-bm25-richtext"), ("bfcl-minilm", "bfcl-minilm-richtext"))


def text_comparison(agg: pd.DataFrame, strength: pd.DataFrame, methods: Sequence[str]) -> pd.DataFrame:
    """BFCL with SPEC's tool text (description + parameter names) beside the richer text (function
    name first): scorer found@1/found@5 and each of ``methods``' found %, mean K and mean reward
    (with the query-bootstrap interval), for every pair of :data:`TEXT_PAIRS` that ran."""
    st = strength.set_index("condition")
    rows = []
    for spec, rich in TEXT_PAIRS:
        if spec not in st.index or rich not in st.index:
            continue
        for cond, text in ((spec, "spec"), (rich, "rich")):
            fields = " + ".join(bfcl_text_fields(text))
            base = {"pair": spec, "condition": cond, "tool_text": fields}
            base.update({"found@1": st.loc[cond, "found@1"], "found@5": st.loc[cond, "found@5"]})
            for method in methods:
                r = _row(agg, cond, method)
                if r is None:
                    continue
                rows.append(
                    {
                        **base,
                        "method": method,
                        **{c: r[c] for c in ("n_splits", "found_pct", "mean_k", "whole_list_pct")},
                        **{c: r[c] for c in (JUDGED, f"{JUDGED}_lo", f"{JUDGED}_hi")},
                        **{c: r[c] for c in ("mean_reward", "mean_reward_lo", "mean_reward_hi")},
                    }
                )
    return pd.DataFrame(rows)


#: Two-scorer comparisons of the study: (score-only condition, condition with a second scorer or the
#: fused ranking). Same candidate sets, splits and seeds, so test units pair up.
HYBRID_PAIRS: tuple[tuple[str, str], ...] = tuple(
    (f"{b}-{s}", f"{b}-{s}-hybrid") for b in ("bfcl", "metatool", "toolbench") for s in ("bm25", "minilm")
) + tuple((f"{b}-{s}", f"{b}-fused") for b in ("bfcl", "metatool", "toolbench") for s in ("bm25", "minilm"))


def paired_conditions(
    per_query: pd.DataFrame,
    pairs: Sequence[tuple[str, str]],
    methods: Sequence[str],
    seed: int = 0,
    n_boot: int = N_BOOT,
) -> pd.DataFrame:
    """Mean net reward (:data:`JUDGED`) of ``method`` on the second condition of a pair minus on the first, on the same
    test units (split, query) with a stratified paired bootstrap (each unit's reward is its mean over
    seeds). Pairs whose two conditions do not hold the same test units are skipped (they are not
    paired); so are methods missing from either condition."""
    rows = []
    for base, other in pairs:
        a = per_query[per_query["condition"] == base]
        b = per_query[per_query["condition"] == other]
        if a.empty or b.empty:
            continue
        wa, wb = _unit_wide(a, JUDGED_ROW, "method"), _unit_wide(b, JUDGED_ROW, "method")
        if not wa.columns.equals(wb.columns):
            continue
        idx = unit_resamples(wa.columns.get_level_values(0).to_numpy(), n_boot, seed)
        for method in methods:
            if method not in wa.index or method not in wb.index:
                continue
            d = (wb.loc[method] - wa.loc[method]).to_numpy()
            rows.append(
                {
                    "base": base,
                    "other": other,
                    "method": method,
                    "n_units": d.size,
                    f"base_{JUDGED}": float(wa.loc[method].mean()),
                    f"other_{JUDGED}": float(wb.loc[method].mean()),
                    **diff_interval(d, idx),
                }
            )
    return pd.DataFrame(rows)


#: The single-scorer base benchmark/scorer pairs of the goal over repeated splits (one condition each).
GOAL_BASE_CONDITIONS: tuple[str, ...] = (
    "bfcl-bm25",
    "bfcl-minilm",
    "metatool-bm25",
    "metatool-minilm",
    "toolbench-minilm",
)
#: The two-scorer conditions of the goal: each base pair's ranking with the other scorer observed.
GOAL_TWO_SCORER_CONDITIONS: tuple[str, ...] = tuple(f"{c}-hybrid" for c in GOAL_BASE_CONDITIONS)
#: On two scorers, the best learned policy is significantly ahead of every peer on at least this many.
GOAL_MIN_SIGNIFICANT = 4
#: Where a second scorer exists, the fraction of the oracle reported beside the goal.
GOAL_FRACTION_OF_ORACLE = 0.9


def split_goal(agg: pd.DataFrame, paired: pd.DataFrame, limits: pd.DataFrame) -> pd.DataFrame:
    """The goal over repeated splits, per condition (reported either way), on the judged net reward.

    The best learned policy of a condition is the BoR agent (:data:`BOR_AGENTS`) with the largest mean
    test net reward (ties: the first by name; choosing it on the test split favours it slightly); the best peer the
    non-oracle peer with the largest. ``diff`` is the first minus the second with a paired query-bootstrap interval
    over the test units of all splits: ``ahead`` when it lies above 0, ``behind`` when below.
    Goals: on the two-scorer conditions (:data:`GOAL_TWO_SCORER_CONDITIONS`) ahead on at least
    :data:`GOAL_MIN_SIGNIFICANT`; on the single-scorer ones (:data:`GOAL_BASE_CONDITIONS`) never
    behind (at least every peer minus its interval)."""
    rows = []
    for cond in condition_order(agg["condition"].unique()):
        a = agg[agg["condition"] == cond].set_index("method")
        agents = [m for m in BOR_AGENTS if m in a.index]
        peers = a[a["group"] == "peer"]
        if not agents or peers.empty:
            continue
        best = best_of(a[JUDGED], agents)
        best_peer = best_of(peers[JUDGED])
        pr = paired[(paired["condition"] == cond) & (paired["agent"] == best) & (paired["peer"] == best_peer)]
        lim = limits[(limits["condition"] == cond) & (limits["method"] == best)]
        two = cond.endswith(("-hybrid", "-fused"))
        frac = float(lim["frac_oracle"].iloc[0]) if len(lim) else math.nan
        lo = float(pr["diff_lo"].iloc[0]) if len(pr) else math.nan
        hi = float(pr["diff_hi"].iloc[0]) if len(pr) else math.nan
        rows.append(
            {
                "condition": cond,
                "base": cond in GOAL_BASE_CONDITIONS,
                "two_scorer_goal": cond in GOAL_TWO_SCORER_CONDITIONS,
                "second_scorer": two,
                "best_agent": best,
                JUDGED: float(a.loc[best, JUDGED]),
                "n_splits": int(a.loc[best, "n_splits"]) if "n_splits" in a.columns else 1,
                "best_peer": best_peer,
                f"best_peer_{JUDGED}": float(peers.loc[best_peer, JUDGED]),
                "diff": float(pr["diff"].iloc[0]) if len(pr) else math.nan,
                "diff_lo": lo,
                "diff_hi": hi,
                "at_least_every_peer": bool((peers[JUDGED] <= a.loc[best, JUDGED]).all()),
                "ahead": bool(lo > 0),
                "behind": bool(hi < 0),
                "frac_oracle": frac,
                "oracle_fraction_met": bool(frac >= GOAL_FRACTION_OF_ORACLE) if two else None,
            }
        )
    return pd.DataFrame(rows)


def _depth_columns(r: pd.Series) -> dict[str, Any]:
    """The judged mean with its interval, found %, mean K and the spread of depths of one aggregate row."""
    keys = (JUDGED, f"{JUDGED}_lo", f"{JUDGED}_hi", "found_pct", "mean_k", "median_k", "p90_k", "whole_list_pct")
    return {k: r[k] for k in keys}


def _paired(per_query: pd.DataFrame, cond: str, seed: int, n_boot: int) -> Callable[[str, str], dict[str, float]]:
    """``diff(first, second)``: the mean net reward of method ``first`` minus ``second`` on ``cond`` with its paired
    query-bootstrap interval (stratified by split); the condition's test units and resamples are drawn once."""
    by = _unit_wide(per_query[per_query["condition"] == cond], JUDGED_ROW, "method")
    idx = unit_resamples(by.columns.get_level_values(0).to_numpy(), n_boot, seed)
    return lambda first, second: diff_interval((by.loc[first] - by.loc[second]).to_numpy(), idx)


def by_judged(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame``'s rows by mean test net reward (:data:`JUDGED`), highest first, ties by method name: the order every
    "best" of the tables reads, so equal means never depend on the order the rows came in (method names are unique
    within a condition)."""
    return frame.sort_values([JUDGED, "method"], ascending=[False, True])


def best_of(means: pd.Series, names: Iterable[str] | None = None) -> str:
    """The name (index of ``means``; only those of ``names`` when given) with the highest mean, equal means going to
    the first by name as in :func:`by_judged`: every "best" of the reports picks this way, never by row order."""
    pool = list(means.index if names is None else names)
    if not pool:
        raise ValueError("best_of: no names to choose from")
    return str(min(pool, key=lambda m: (-float(means[m]), str(m))))


def same_policy(per_query: pd.DataFrame, cond: str, first: str, others: Iterable[str]) -> list[str]:
    """Those of ``others`` (in their order) with the same net reward as ``first`` on every test query of every run
    (seed, split) of ``cond``: one policy there, such as the residual DQN where it kept the posterior model it starts
    from. A method missing a run ``first`` has (or having one it lacks) differs."""
    g = with_splits(per_query[per_query["condition"] == cond])
    by = g.pivot_table(index="method", columns=["seed", "split_seed", "qid"], values=JUDGED_ROW, aggfunc="first",
                       dropna=False, sort=True)  # fmt: skip
    if first not in by.index:
        return []
    top = by.loc[first].to_numpy()
    return [
        m for m in others if m != first and m in by.index and np.array_equal(by.loc[m].to_numpy(), top, equal_nan=True)
    ]


def best_methods(per_query: pd.DataFrame, agg: pd.DataFrame, seed: int = 0, n_boot: int = 10_000) -> pd.DataFrame:
    """Per condition, the method to use: the highest mean test net reward (:data:`JUDGED`) among every
    method that reads no labels (agents, peers, fixed K; not the limits), beside the runner-up, with the
    paired query-bootstrap interval of best minus runner-up (stratified by split) and the best method's
    typical depth (median and 90th percentile K, whole-list rate). Chosen on the test split, so it favours
    the best a little; the intervals say how far apart the two are.

    Methods with the same net reward as the best on every test query of every run (:func:`same_policy`; e.g. the
    residual DQN where it kept the posterior model it starts from) are one policy here: the first of them by name is
    the best, the others are named in ``same_as_best`` (``; ``-separated, empty when none), and the runner-up is the
    best method that differs from it on some query of some run (none when every method is the same)."""
    rows = []
    for cond in condition_order(agg["condition"].unique()):
        a = by_judged(agg[(agg["condition"] == cond) & (agg["group"] != "limit")])
        if len(a) < 2:
            continue
        best = a.iloc[0]
        same = same_policy(per_query, cond, best["method"], a["method"].iloc[1:])
        rest = a[~a["method"].isin(same)].iloc[1:]
        second = rest.iloc[0] if len(rest) else None
        rows.append(
            {
                "condition": cond,
                "best": best["method"],
                "group": best["group"],
                **_depth_columns(best),
                "runner_up": None if second is None else second["method"],
                f"runner_up_{JUDGED}": np.nan if second is None else second[JUDGED],
                **(
                    _paired(per_query, cond, seed, n_boot)(best["method"], second["method"])
                    if second is not None
                    else dict.fromkeys(DIFF_KEYS, np.nan)
                ),
                "same_as_best": "; ".join(same),
            }
        )
    return pd.DataFrame(rows)


def examined_view(method: str, observation: str) -> str | None:
    """How ``method`` (a name of the tables, untagged on the comparison's ``observation`` set; a ``@set`` tag names
    its own set) chose its depths from the examined items only: its kind's view (``stepwise`` or ``none``,
    :attr:`agents.registry.PolicyKind.view`) when it did (:func:`agents.registry.reads_examined_only`), else None."""
    name, _, tag = method.partition("@")
    kind = MethodSpec.parse(name).kind
    return kind.view if reads_examined_only(kind, tag or observation) else None


def best_examined_only(
    per_query: pd.DataFrame, agg: pd.DataFrame, observation: str, seed: int = 0, n_boot: int = 10_000
) -> pd.DataFrame:
    """Per condition, the highest mean test net reward among the methods that read no labels and chose their
    depths from the examined items only on ``observation`` (:func:`examined_view`), its typical depth, its mean
    net reward minus that of the best label-free method of all (``best``, as :func:`best_methods`; ``diff``, 0
    when the best is examined-only itself) and minus that of the examined-only runner-up (``runner_up``,
    ``runner_up_diff``: the best examined-only method that differs from it, :func:`same_policy`; those that do not
    are named in ``same_as_best``; none when no other differs), each with the paired query-bootstrap interval
    (stratified by split). Empty when no method qualifies.

    Within the examined-only methods it also sets RL beside supervised learning, as issue 39's first goal does over
    every method: the best examined-only RL agent (:data:`~experiments.plan.RL_AGENTS`, ``rl``) minus the best
    examined-only supervised model (:data:`~experiments.plan.SUPERVISED_AGENTS`, ``supervised``), paired
    (``rl_vs_supervised_diff``, ``_lo``, ``_hi``), and the examined-only RL agents significantly behind that model
    (``rl_behind``, ``;``-separated; all empty or NaN when either side has no examined-only method)."""
    rows = []
    for cond in condition_order(agg["condition"].unique()):
        a = by_judged(agg[(agg["condition"] == cond) & (agg["group"] != "limit")])
        ok = a[[examined_view(m, observation) is not None for m in a["method"]]]
        if ok.empty:
            continue
        top, best = ok.iloc[0], a.iloc[0]
        diff = _paired(per_query, cond, seed, n_boot)
        twins = same_policy(per_query, cond, top["method"], ok["method"].iloc[1:])
        rest = ok[~ok["method"].isin(twins)].iloc[1:]  # the runner-up differs from it (as in :func:`best_methods`)
        runner = rest.iloc[0] if len(rest) else None
        to_runner = diff(top["method"], runner["method"]) if runner is not None else dict.fromkeys(DIFF_KEYS, np.nan)
        rl = list(ok["method"][ok["method"].isin(RL_AGENTS)])  # each list in order of mean net reward
        sup = list(ok["method"][ok["method"].isin(SUPERVISED_AGENTS)])
        to_sup = {m: diff(m, sup[0]) for m in rl} if sup else {}
        rows.append(
            {
                "condition": cond,
                "method": top["method"],
                "group": top["group"],
                **_depth_columns(top),
                "best": best["method"],
                f"best_{JUDGED}": best[JUDGED],
                **diff(top["method"], best["method"]),
                "runner_up": None if runner is None else runner["method"],
                f"runner_up_{JUDGED}": np.nan if runner is None else runner[JUDGED],
                **{f"runner_up_{k}": v for k, v in to_runner.items()},
                "same_as_best": "; ".join(twins),
                "rl": rl[0] if to_sup else None,
                "supervised": sup[0] if to_sup else None,
                **{f"rl_vs_supervised_{k}": to_sup[rl[0]][k] if to_sup else np.nan for k in DIFF_KEYS},
                "rl_behind": ";".join(m for m, d in to_sup.items() if d["diff_hi"] < 0) if to_sup else None,
            }
        )
    return pd.DataFrame(rows)
