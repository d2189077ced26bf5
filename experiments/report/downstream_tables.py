"""The tables of the downstream study, from its per-query rows and the chooser's answers (DataFrames in,
DataFrames out; no I/O): what :mod:`experiments.downstream` computes and :mod:`experiments.report.downstream_page`
renders."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from experiments.plan import MAX_K, STEP_COST

#: Kinds trained on the chooser's outcome (cross-fitted), each against its BoR-trained counterpart.
OUTCOME_KINDS = ("dqn", "threshold", "greedyk")


def outcome_rows(per_query: pd.DataFrame, choices: pd.DataFrame) -> pd.DataFrame:
    """Per (condition, method, seed, test query): the depth, ``presented`` (the gold in the top K), ``correct``
    (the chooser picked the gold, given presented) and ``e2e`` (both), from the runs' rows and the choices of
    the same (condition, query, K). A presented shortlist without an answer is an error naming it."""
    rows = per_query[["condition", "method", "seed", "qid", "gold_rank", "bucket", "k", "found"]].copy()
    ch = choices[["condition", "qid", "k", "correct"]]
    out = rows.merge(ch, on=["condition", "qid", "k"], how="left", validate="many_to_one")
    missing = out[(out["found"] == 1) & out["correct"].isna()]
    if len(missing):
        r = missing.iloc[0]
        raise ValueError(f"no choice for {r['condition']} query {r['qid']!r} at K = {r['k']} ({len(missing)} missing)")
    out["presented"] = out.pop("found").astype(int)
    out["correct"] = out["correct"].fillna(0).astype(int) * out["presented"]
    out["e2e"] = out["correct"]
    return out


def query_means(rows: pd.DataFrame, keys: Sequence[str] = ("condition", "method")) -> pd.DataFrame:
    """Per (keys, query): the mean over seeds of k, presented, e2e (and the bucket)."""
    g = rows.groupby([*keys, "qid"], sort=True)
    out = g[["k", "presented", "e2e"]].mean()
    if "bucket" not in keys:
        out["bucket"] = g["bucket"].first()
    return out.reset_index()


def table1(rows: pd.DataFrame, by: Sequence[str] = ("condition", "method"), n_boot: int = 2000) -> pd.DataFrame:
    """Per group: queries, mean K, presented %, choice % given presented (the e2e share of presented: a ratio
    of means) and end-to-end %, each with a 95% query bootstrap (every seed's rows of a query averaged first;
    the same resamples for every method of a condition)."""
    from experiments.report.tables import query_resamples, ratio_interval, resampled_means

    qm = query_means(rows, tuple(by))
    out = []
    for key, g in qm.groupby(list(by), sort=False):
        idx = query_resamples(len(g), n_boot, 0)
        k, pres, e2e = (g[c].to_numpy(dtype=np.float64) for c in ("k", "presented", "e2e"))
        row: dict[str, Any] = dict(zip(by, key if isinstance(key, tuple) else (key,), strict=True))
        row["n_queries"] = len(g)
        for name, v in (("mean_k", k), ("presented_pct", 100 * pres), ("e2e_pct", 100 * e2e)):
            boot = resampled_means(v, idx)
            lo, hi = np.quantile(boot, [0.025, 0.975])
            row[name], row[f"{name}_lo"], row[f"{name}_hi"] = float(v.mean()), float(lo), float(hi)
        c, lo, hi = ratio_interval(e2e, pres, idx) if pres.sum() else (np.nan,) * 3
        row["choice_pct"], row["choice_pct_lo"], row["choice_pct_hi"] = 100 * c, 100 * lo, 100 * hi
        out.append(row)
    return pd.DataFrame(out)


def choice_curve(choices: pd.DataFrame) -> pd.DataFrame:
    """The measured cost of distraction: per (condition, K, gold position group), the chooser's accuracy on the
    shortlists of K tools that hold the gold (every asked (query, K))."""
    groups = pd.cut(choices["gold_rank"], [0, 1, 3, 5, 10, MAX_K], labels=["1", "2-3", "4-5", "6-10", f"11-{MAX_K}"])
    c = choices.assign(gold_position=groups.astype(str))
    g = c.groupby(["condition", "k", "gold_position"], sort=True)["correct"]
    return g.agg(n="size", accuracy="mean").reset_index()


def paired_outcome(qm: pd.DataFrame, n_boot: int = 10_000) -> pd.DataFrame:
    """Per (condition, kind): outcome-trained minus BoR-trained end-to-end % and mean K, paired over test queries
    (each query's values averaged over seeds), with 95% bootstrap intervals."""
    from experiments.report.tables import diff_interval, query_resamples

    rows = []
    for cond, g in qm.groupby("condition", sort=False):
        wide = g.pivot(index="qid", columns="method", values=["e2e", "k"])
        idx = query_resamples(len(wide), n_boot, 0)
        for kind in OUTCOME_KINDS:
            a, b = f"outcome-{kind}", f"bor-{kind}"
            if a not in wide["e2e"] or b not in wide["e2e"]:
                continue
            e = diff_interval(100 * (wide["e2e"][a] - wide["e2e"][b]).to_numpy(), idx)
            k = diff_interval((wide["k"][a] - wide["k"][b]).to_numpy(), idx)
            rows.append({"condition": cond, "kind": kind, "outcome_method": a, "bor_method": b,
                         "e2e_diff": e["diff"], "e2e_diff_lo": e["diff_lo"], "e2e_diff_hi": e["diff_hi"],
                         "k_diff": k["diff"], "k_diff_lo": k["diff_lo"], "k_diff_hi": k["diff_hi"]})  # fmt: skip
    return pd.DataFrame(rows)


def best_fixed_k(choices: pd.DataFrame, n_queries: int) -> tuple[int, float]:
    """The fixed K (1..MAX_K) with the highest mean end-to-end minus the cost of its extra tools on these
    queries (in-sample: the best depth this chooser rewards), and its end-to-end %."""
    e2e = choices.groupby("k")["correct"].sum().reindex(range(1, MAX_K + 1), fill_value=0) / max(n_queries, 1)
    net = e2e - STEP_COST * (e2e.index.to_numpy() - 1)
    k = int(net.idxmax())
    return k, 100.0 * float(e2e.loc[k])
