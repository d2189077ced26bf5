"""Tables of the generated reports, computed from the long per-query / summary / bucket frames.

Every function returns a DataFrame and writes nothing; :mod:`experiments.report.study` and
:mod:`experiments.report.peers` render and write them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.evaluation import BUCKET_ORDER, depth_spread
from experiments.config import method_group
from experiments.figures import bucket_spread
from experiments.paper import PAPER
from experiments.plan import BOR_AGENTS, GOAL_FRACTION_OF_DP, condition_order

METRICS = ("found_pct", "mean_k", "bor_bits", "mean_reward")


N_BOOT = 2000
"""Bootstrap resamples of the test queries behind every reported interval."""


def query_resamples(n_queries: int, n_boot: int = N_BOOT, seed: int = 0) -> np.ndarray:
    """``n_boot`` x ``n_queries`` query indices drawn with replacement (``default_rng(seed)``): one
    set per condition, shared by every method so that intervals and differences are paired."""
    return np.random.default_rng(seed).integers(n_queries, size=(n_boot, n_queries))


def _query_matrices(g: pd.DataFrame) -> dict[str, np.ndarray]:
    """Seeds x test queries arrays of found, k, reward and P_rand of one (condition, method)."""
    if g.duplicated(["seed", "qid"]).any():
        raise ValueError("a (seed, query) pair occurs twice in the per-query rows")
    out = {}
    for c in ("found", "k", "reward", "p_random"):
        wide = g.pivot(index="seed", columns="qid", values=c)
        if wide.isna().to_numpy().any():
            raise ValueError("every seed of a method must be scored on the same test queries")
        out[c] = wide.to_numpy(dtype=np.float64)
    return out


def _bootstrap_metrics(mats: dict[str, np.ndarray], idx: np.ndarray) -> dict[str, np.ndarray]:
    """Each metric of :data:`METRICS` per resample ``idx`` (resamples x queries): per seed on
    the resampled queries, then the mean over seeds (as the point estimate)."""

    def per_seed(name: str) -> np.ndarray:  # resamples x seeds
        return mats[name][:, idx].mean(axis=2).T

    found, prand = per_seed("found"), per_seed("p_random")
    with np.errstate(divide="ignore"):
        bor = np.log2(found / prand)
    return {
        "found_pct": 100.0 * found.mean(axis=1),
        "mean_k": per_seed("k").mean(axis=1),
        "bor_bits": bor.mean(axis=1),
        "mean_reward": per_seed("reward").mean(axis=1),
    }


def aggregate(summary: pd.DataFrame, per_query: pd.DataFrame, seed: int = 0, n_boot: int = N_BOOT) -> pd.DataFrame:
    """Per (condition, method): each metric's mean over seeds with two separate spreads.

    - ``{m}_lo`` / ``{m}_hi``: a 95% percentile bootstrap over the test queries (the same
      ``n_boot`` resamples, seeded per condition, for every method of a condition; each
      resample recomputes the metric per seed and averages over seeds). This is the
      interval every report shows: it covers test-set sampling noise.
    - ``{m}_seed_min`` / ``{m}_seed_max``: the range over training seeds, labelled as such.

    Depth spread (:func:`agents.evaluation.depth_spread`) pools every seed's test rows:
    ``median_k``, ``p90_k``, ``whole_list_pct``; and without whole-list episodes (K = N):
    ``found_pct_partial`` and ``mean_k_partial`` (NaN when every episode shows the whole list).
    """
    rows = []
    pq = per_query.set_index(["condition", "method"]).sort_index()
    for cond, cs in summary.groupby("condition", sort=True):
        idx: np.ndarray | None = None  # drawn once the condition's query count is known
        for method, g in cs.groupby("method", sort=True):
            row: dict[str, object] = {"condition": cond, "method": method, "n_seeds": len(g)}
            for m in (*METRICS, "std_k", "bor_ceiling"):
                row[m] = float(g[m].mean())
                if m in METRICS:
                    row[f"{m}_seed_min"], row[f"{m}_seed_max"] = float(g[m].min()), float(g[m].max())
            rows_q = pq.loc[(cond, method)].reset_index()
            mats = _query_matrices(rows_q)
            if idx is None:
                idx = query_resamples(mats["found"].shape[1], n_boot, seed)
            for m, boot in _bootstrap_metrics(mats, idx).items():
                finite = boot[np.isfinite(boot)]
                lo, hi = np.quantile(finite, [0.025, 0.975]) if finite.size else (math.nan, math.nan)
                row[f"{m}_lo"], row[f"{m}_hi"] = float(lo), float(hi)
            k, n = rows_q["k"].to_numpy(), rows_q["n"].to_numpy()
            row.update(depth_spread(k, n))
            partial = k < n
            row["found_pct_partial"] = 100.0 * float(rows_q["found"][partial].mean()) if partial.any() else math.nan
            row["mean_k_partial"] = float(k[partial].mean()) if partial.any() else math.nan
            rows.append(row)
    return pd.DataFrame(rows)


def scorer_strength(per_query: pd.DataFrame) -> pd.DataFrame:
    """found@K of the scorer alone on the test split, per condition (from gold ranks)."""
    first = per_query.drop_duplicates(["condition", "qid"])
    rows = []
    for cond, g in first.groupby("condition", sort=True):
        gr = g["gold_rank"].to_numpy()
        row: dict[str, object] = {"condition": cond, "n_test": len(g)}
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
        boot = num[idx].mean(axis=1) / den[idx].mean(axis=1)
    a = (1.0 - level) / 2.0
    lo, hi = np.nanquantile(boot, [a, 1.0 - a])
    return float(num.mean()) / den_mean, float(lo), float(hi)


LIMIT_REFS = (("bor-dp", "dp"), ("oracle", "oracle"))
"""The reference methods of :func:`limits_table` and the suffix of their columns."""


def limits_table(per_query: pd.DataFrame, seed: int = 0, n_boot: int = N_BOOT) -> pd.DataFrame:
    """Mean test reward of every method as a fraction of ``bor-dp``'s and the oracle's.

    Per query, each method's reward is its mean over seeds; the fraction is a ratio of means
    over test queries with a paired bootstrap interval (:func:`ratio_interval`, the same
    resamples for every method of a condition).
    """
    rows = []
    for cond, g in per_query.groupby("condition", sort=True):
        by = g.groupby(["method", "qid"], sort=True)["reward"].mean().unstack("qid")
        seeds = g.groupby("method")["seed"].nunique()
        idx = query_resamples(by.shape[1], n_boot, seed)
        refs = {name: by.loc[key].to_numpy(dtype=np.float64) for key, name in LIMIT_REFS if key in by.index}
        for method in by.index:
            r = by.loc[method].to_numpy(dtype=np.float64)
            row: dict[str, object] = {
                "condition": cond,
                "method": method,
                "group": method_group(method),
                "n_seeds": int(seeds[method]),
                "mean_reward": float(r.mean()),
            }
            for _, name in LIMIT_REFS:
                frac, lo, hi = ratio_interval(r, refs[name], idx) if name in refs else (math.nan,) * 3
                row[f"frac_{name}"], row[f"frac_{name}_lo"], row[f"frac_{name}_hi"] = frac, lo, hi
            rows.append(row)
    return pd.DataFrame(rows)


def dp_table(runs: Sequence[Path], summary: pd.DataFrame) -> pd.DataFrame:
    """The DP policies' value in their own model, realised on train, and on test (solve times are in
    the run manifests and ``shortlist bench``, never in a table: tables are byte-reproducible)."""
    rows = []
    for run in runs:
        cfg = json.loads((run / "config.json").read_text())
        if cfg.get("agent") not in ("dp", "dp-mdp") or not (run / "agent.json").is_file():
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
                "mean_reward_test": float(s["mean_reward"].mean()),
                "states_seen": int(np.sum(p["seen"])),
            }
        )
    return pd.DataFrame(rows)


def paired_differences(per_query: pd.DataFrame, seed: int = 0, n_boot: int = 10_000) -> pd.DataFrame:
    """Mean reward of each BoR agent minus each peer's, with a paired bootstrap over test queries.

    Per query, a method's reward is its mean over seeds; the difference of means is resampled
    over queries (the same resample for both methods) with a seeded generator. This interval
    covers test-set sampling noise (the seed range in aggregate.csv does not).
    """
    rows = []
    for cond in condition_order(per_query["condition"].unique()):
        pq = per_query[per_query["condition"] == cond]
        by = pq.groupby(["method", "qid"])["reward"].mean().unstack("qid")
        idx = query_resamples(by.shape[1], n_boot, seed)
        for agent in BOR_AGENTS:
            if agent not in by.index:
                continue
            for peer in sorted(m for m in by.index if method_group(m) == "peer"):
                d = (by.loc[agent] - by.loc[peer]).to_numpy()
                boot = d[idx].mean(axis=1)
                rows.append(
                    {
                        "condition": cond,
                        "agent": agent,
                        "peer": peer,
                        "n_queries": d.size,
                        "diff": float(d.mean()),
                        "diff_lo": float(np.quantile(boot, 0.025)),
                        "diff_hi": float(np.quantile(boot, 0.975)),
                    }
                )
    return pd.DataFrame(rows)


def goal_checks(agg: pd.DataFrame, limits: pd.DataFrame) -> pd.DataFrame:
    """The stated goal per condition and BoR agent, checked on the point estimates.

    1. mean test reward >= every non-oracle peer's ("peer" group);
    2. mean test reward >= 90% of ``bor-dp``'s (the DP optimum of the estimated tabular model);
    3. no peer has both a higher found % and a lower mean K.
    """
    rows = []
    for cond in condition_order(agg["condition"].unique()):
        a = agg[agg["condition"] == cond].set_index("method")
        peers = a[a["group"] == "peer"]
        for agent in BOR_AGENTS:
            if agent not in a.index:
                continue
            me = a.loc[agent]
            better = peers[peers["mean_reward"] > me["mean_reward"]].sort_values("mean_reward", ascending=False)
            rows.append(
                {
                    "condition": cond,
                    "agent": agent,
                    "check": "reward >= every peer",
                    "passed": better.empty,
                    "detail": "; ".join(f"{m} {r['mean_reward']:.3f}" for m, r in better.iterrows())
                    or f"best peer {peers['mean_reward'].idxmax()} {peers['mean_reward'].max():.3f}"
                    if len(peers)
                    else "",
                }
            )
            lim = limits[(limits["condition"] == cond) & (limits["method"] == agent)]
            frac = float(lim["frac_dp"].iloc[0]) if len(lim) else math.nan
            rows.append(
                {
                    "condition": cond,
                    "agent": agent,
                    "check": f"reward >= {GOAL_FRACTION_OF_DP:.0%} of bor-dp",
                    "passed": bool(frac >= GOAL_FRACTION_OF_DP),
                    "detail": f"{frac:.3f}",
                }
            )
            dom = peers[(peers["found_pct"] > me["found_pct"]) & (peers["mean_k"] < me["mean_k"])]
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
    """One row per (condition, agent in {BoR, F1}): ours from :func:`aggregate` (mean over seeds,
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

    Per query, K is the mean over seeds. Returns the buckets used (easy to hard), their mean
    K and query counts, whether the means are non-decreasing across every used bucket
    (``monotone``), and the hardest-minus-easiest mean K difference with a 95% percentile
    bootstrap interval (queries resampled within each bucket). ``grows`` is True only when
    the sequence is monotone and the interval lies above 0. None with fewer than 2 buckets.
    """
    pq = per_query[(per_query["condition"] == condition) & (per_query["method"] == method)]
    if pq.empty:
        return None
    per_q = pq.groupby(["bucket", "qid"], sort=True)["k"].mean()
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


def _condition_meta(runs_dir: Path, split_seed: int = 0) -> dict[str, dict[str, Any]]:
    """The condition metadata each condition's first run manifest of split ``split_seed``
    recorded (split sizes, scorer found@1 on all queries, data sizes)."""
    out: dict[str, dict[str, Any]] = {}
    for manifest in sorted(runs_dir.glob("*/manifest.json")):
        cfg = json.loads((manifest.parent / "config.json").read_text())
        cond = cfg.get("condition")
        if not cond or cond in out or cfg.get("split_seed", 0) != split_seed:
            continue
        meta = json.loads(manifest.read_text()).get("condition") or {}
        if isinstance(meta, dict):
            out[cond] = meta
    return out


def bfcl_text_fields() -> list[str]:
    """Which fields of a BFCL function definition its tool text holds, read off
    :func:`benchmarks.bfcl.tool_text` on a probe definition (computed, not asserted)."""
    from benchmarks.bfcl import tool_text

    text = tool_text(
        {"name": "probename", "description": "probedesc", "parameters": {"properties": {"probeparam": {}}}}
    )
    fields = {"probename": "function name", "probedesc": "description", "probeparam": "parameter names"}
    return [label for probe, label in fields.items() if probe in text]


SPEC_BFCL_TEXT = ["description", "parameter names"]
"""SPEC section 4: BM25 over description + parameter names."""


def measured_factors(
    strength: pd.DataFrame, runs_dir: Path, conditions: Sequence[str], split_seed: int = 0
) -> pd.DataFrame:
    """Per condition, the measured factors a difference from the paper can come from.

    Scorer found@1 on the test split (a :func:`scorer_strength` table) and on the training split
    (from the condition's recorded found@1 over all queries and the split sizes), query and
    tool counts here and in the paper, and (BFCL) the tool-text fields against SPEC's.
    """
    meta = _condition_meta(runs_dir, split_seed)
    strength = strength.set_index("condition")
    rows = []
    for cond in conditions:
        m = meta.get(cond, {})
        n_train, n_test = m.get("n_train"), m.get("n_test")
        test1 = float(strength.loc[cond, "found@1"]) if cond in strength.index else math.nan
        all1 = m.get("found_at_1_pct_all")
        train1 = (
            (all1 * (n_train + n_test) - test1 * n_test) / n_train
            if all1 is not None and n_train and n_test and not math.isnan(test1)
            else math.nan
        )
        paper = PAPER.get(cond, {})
        fields = bfcl_text_fields() if m.get("benchmark") == "bfcl" else []
        rows.append(
            {
                "condition": cond,
                "found_at_1_train": train1,
                "found_at_1_test": test1,
                "paper_found_at_1": paper.get("found_at_1", math.nan),
                "n_queries": m.get("n_queries", math.nan),
                "paper_n_queries": paper.get("n_queries", math.nan),
                "n_tools": m.get("n_tools", math.nan),
                "tool_text": " + ".join(fields),
                "tool_text_as_spec": (fields == SPEC_BFCL_TEXT) if fields else None,
            }
        )
    return pd.DataFrame(rows)
