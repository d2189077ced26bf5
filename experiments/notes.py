"""Explanations for the generated README, computed from the results (every number comes from data).

For each condition: how the scorer's strength compares with the paper's, which fixed
K maximises the mean BoR reward (the optimum the BoR agent is trained towards), and
whether the BoR agent adapts its depth to difficulty.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from experiments.paper import PAPER


def _mean(summary: pd.DataFrame, cond: str, method: str, col: str) -> float:
    s = summary[(summary["condition"] == cond) & (summary["method"] == method)][col]
    return float(s.mean()) if len(s) else float("nan")


def notes_for(per_query: pd.DataFrame, summary: pd.DataFrame) -> dict[str, str]:
    """One paragraph per condition (and "_all")."""
    notes: dict[str, str] = {}
    for cond in sorted(summary["condition"].unique()):
        pq = per_query[per_query["condition"] == cond]
        first = pq.drop_duplicates("qid")
        gr = first["gold_rank"].to_numpy()
        f1 = 100 * np.mean(gr == 1)
        f5 = 100 * np.mean((gr >= 1) & (gr <= 5))
        parts = []
        paper = PAPER.get(cond, {})
        if "found_at_1" in paper:
            parts.append(
                f"Our scorer ranks the gold tool first for {f1:.1f}% of test queries (paper: {paper['found_at_1']}%)"
                + (f" and in the top 5 for {f5:.1f}% (paper: {paper['found_at_5']}%)" if "found_at_5" in paper else "")
                + "."
            )
        fixed = summary[(summary["condition"] == cond) & summary["method"].str.startswith("fixed-")]
        if len(fixed):
            by = fixed.groupby("method")[["mean_reward", "found_pct"]].mean()
            best = by["mean_reward"].idxmax()
            parts.append(
                f"The fixed K with the highest mean BoR reward is {best} ({by.loc[best, 'mean_reward']:.2f} bits at "
                f"{by.loc[best, 'found_pct']:.1f}% found): that is the depth the BoR reward favours on this scorer, "
                "so a stronger scorer than the paper's moves the learned depth down and the found % with it."
            )
        bor = _mean(summary, cond, "bor-dqn", "mean_reward")
        if not np.isnan(bor) and len(fixed):
            parts.append(
                f"BoR-DQN earns {bor:.2f} bits of mean reward ({_mean(summary, cond, 'bor-dqn', 'found_pct'):.1f}% found "
                f"at mean K {_mean(summary, cond, 'bor-dqn', 'mean_k'):.2f}) against {by['mean_reward'].max():.2f} for the best fixed K."
            )
        for method in ("bor-dqn", "f1-dqn"):
            sub = pq[pq["method"] == method]
            if len(sub):
                ks = sub.groupby("bucket")["k"].mean()
                order = [b for b in ("easy", "medium", "hard", "very hard") if b in ks.index]
                if len(order) >= 2:
                    trend = " -> ".join(f"{b} {ks[b]:.2f}" for b in order)
                    parts.append(f"{method} mean K by bucket: {trend}.")
        notes[cond] = " ".join(parts)
    return notes
