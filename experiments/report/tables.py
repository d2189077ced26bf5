"""Tables of the generated reports, computed from the long per-query / summary / bucket frames.

Every function returns a DataFrame and writes nothing; :mod:`experiments.report.study` and
:mod:`experiments.report.peers` render and write them.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from agents.evaluation import BUCKET_ORDER, bootstrap_ci
from experiments.config import method_group
from experiments.paper import PAPER
from experiments.plan import BOR_AGENTS, GOAL_FRACTION_OF_DP, condition_order

METRICS = ("found_pct", "mean_k", "bor_bits", "mean_reward")


def aggregate(summary: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Per (condition, method): mean and seeded bootstrap 95% interval over seeds of each metric."""
    rows = []
    for (cond, method), g in summary.groupby(["condition", "method"], sort=True):
        row: dict[str, object] = {"condition": cond, "method": method, "n_seeds": len(g)}
        for m in (*METRICS, "std_k", "bor_ceiling"):
            mean, lo, hi = bootstrap_ci(g[m].to_numpy(), seed=seed)
            row[m] = mean
            if m in METRICS:
                row[f"{m}_lo"], row[f"{m}_hi"] = lo, hi
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


def aggregate_with_groups(summary: pd.DataFrame) -> pd.DataFrame:
    """:func:`aggregate` with each method's registry group after the method column."""
    agg = aggregate(summary)
    agg.insert(2, "group", agg["method"].map(method_group))
    return agg


def bucket_aggregate(buckets: pd.DataFrame) -> pd.DataFrame:
    """Per condition x method x bucket: n, and found % and mean K (mean, min, max over seeds)."""
    b = (
        buckets.groupby(["condition", "method", "bucket"], sort=False)
        .agg(
            n=("n", "first"),
            n_seeds=("seed", "nunique"),
            found_pct=("found_pct", "mean"),
            found_pct_min=("found_pct", "min"),
            found_pct_max=("found_pct", "max"),
            mean_k=("mean_k", "mean"),
            mean_k_min=("mean_k", "min"),
            mean_k_max=("mean_k", "max"),
        )
        .reset_index()
    )
    b["_b"] = b["bucket"].map({x: i for i, x in enumerate(BUCKET_ORDER)})
    return b.sort_values(["condition", "method", "_b"]).drop(columns="_b").reset_index(drop=True)


def limits_table(summary: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Mean test reward of every method as a fraction of ``bor-dp``'s and the oracle's.

    Fractions are per seed (the limits are deterministic) with a seeded bootstrap interval.
    """
    rows = []
    for cond, g in summary.groupby("condition", sort=True):
        ref = {m: float(g.loc[g["method"] == m, "mean_reward"].mean()) for m in ("bor-dp", "oracle")}
        for method, gm in g.groupby("method", sort=True):
            row: dict[str, object] = {
                "condition": cond,
                "method": method,
                "group": method_group(method),
                "n_seeds": len(gm),
                "mean_reward": float(gm["mean_reward"].mean()),
            }
            for key, name in (("bor-dp", "dp"), ("oracle", "oracle")):
                denom = ref[key]
                if math.isnan(denom) or denom == 0:
                    row[f"frac_{name}"] = row[f"frac_{name}_lo"] = row[f"frac_{name}_hi"] = math.nan
                    continue
                mean, lo, hi = bootstrap_ci((gm["mean_reward"] / denom).to_numpy(), seed=seed)
                row[f"frac_{name}"], row[f"frac_{name}_lo"], row[f"frac_{name}_hi"] = mean, lo, hi
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
    covers test-set sampling noise, which the seed intervals do not.
    """
    rows = []
    for cond in condition_order(per_query["condition"].unique()):
        pq = per_query[per_query["condition"] == cond]
        by = pq.groupby(["method", "qid"])["reward"].mean().unstack("qid")
        rng = np.random.default_rng(seed)
        idx = rng.integers(by.shape[1], size=(n_boot, by.shape[1]))
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
    2. mean test reward >= 90% of the exact optimal-stopping policy's (``bor-dp``);
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


def table2(summary: pd.DataFrame, per_query: pd.DataFrame, conditions: list[str]) -> pd.DataFrame:
    """One row per (condition, agent in {BoR, F1}): ours (mean and 95% bootstrap interval over seeds)
    beside the paper's found % and mean K, plus each scorer's found@1 beside the paper's."""
    agg = aggregate(summary)
    strength = scorer_strength(per_query).set_index("condition")
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


def adaptation(per_query: pd.DataFrame, conditions: list[str]) -> pd.DataFrame:
    """Mean K (mean over seeds of per-seed bucket means) per condition x method x bucket, for BoR and F1."""
    pq = per_query[per_query["condition"].isin(conditions) & per_query["method"].isin(["bor-dqn", "f1-dqn"])]
    per_seed = pq.groupby(["condition", "method", "seed", "bucket"])["k"].mean().reset_index()
    return per_seed.groupby(["condition", "method", "bucket"])["k"].mean().unstack("bucket")
