"""Beyond one gold tool: completeness, the cost of not knowing R, and equivalent-tool labels.

For every condition whose queries have several relevant tools (MetaTool's multi-tool
queries, BEIR folders) the study's multi-tool page gets: each method's found % ("any" relevant in the
top K) beside Completeness@K ("all" R in the top K) and BoR bits under both success notions
(exact chance terms: :mod:`rewards.completeness`); the same depths scored with the chance
term assuming R = 1 (as the paper does), an R estimated from the scores
(:mod:`agents.unknown_r`, fitted on the training split) and the true R; and, for
benchmarks with a tool registry, exact-label against equivalent-tool-expanded scores
(:mod:`benchmarks.equivalence`) with a sample of expanded pairs for a human to check.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from agents.unknown_r import estimate_r, unknown_r_table
from benchmarks.equivalence import DEFAULT_TAUS, equivalence_sweep, expanded_pairs, load_condition_corpus, tool_cosine
from experiments.report.markdown import fmt
from experiments.report.page import Block, Page, Paragraph, Section, Table
from experiments.runner import get_condition

#: Methods whose depths are re-scored under other assumptions about R.
UNKNOWN_R_METHODS = ("bor-dqn", "f1-dqn", "bor-tabular", "fixed-1", "fixed-5")
#: Conditions whose labels are expanded with equivalent tools (single-gold and multi-tool MetaTool).
EQUIVALENCE_CONDITIONS = ("metatool-minilm", "metatool-minilm-multi")
EQUIVALENCE_TAUS = (0.60, 0.65, *DEFAULT_TAUS)


def multi_conditions(summary: pd.DataFrame) -> list[str]:
    """Conditions whose summary rows carry completeness metrics."""
    if "complete_pct" not in summary.columns:
        return []
    return sorted(summary.loc[summary["complete_pct"].notna(), "condition"].unique())


def completeness_table(summary: pd.DataFrame, conditions: list[str]) -> pd.DataFrame:
    """Mean over seeds per condition x method of found %, Completeness@K, mean K and BoR bits (any / all)."""
    cols = ["found_pct", "complete_pct", "mean_recall", "mean_k", "bor_bits", "bor_bits_all", "mean_reward",
            "mean_reward_all", "mean_r"]  # fmt: skip
    s = summary[summary["condition"].isin(conditions)]
    out = s.groupby(["condition", "method"], sort=True)[cols].mean().reset_index()
    out.insert(2, "n_seeds", s.groupby(["condition", "method"], sort=True)["seed"].nunique().to_numpy())
    return out


def _depths(per_query: pd.DataFrame, cond: str, method: str, qids: list[str]) -> np.ndarray | None:
    g = per_query[(per_query["condition"] == cond) & (per_query["method"] == method)]
    if g.empty:
        return None
    first = g[g["seed"] == g["seed"].min()].set_index("qid")["k"].reindex(qids)
    if first.isna().any():
        raise ValueError(f"{cond} {method}: the per-query rows are not on this split's test queries")
    return first.to_numpy(dtype=np.int64)


def multi_tables(
    per_query: pd.DataFrame, summary: pd.DataFrame, data_dir: str | None, cache_dir: str | None, split_seed: int = 0
) -> dict[str, pd.DataFrame]:
    """The multi-tool tables (empty frames for parts that did not run): completeness per method
    (``multi``), the same depths under assumed, estimated and true R (``unknown_r``), and exact against
    equivalent-tool labels (``equivalence``, with a sample of expanded pairs ``equivalence_pairs``)."""
    conds = multi_conditions(summary)
    out = {name: pd.DataFrame() for name in ("multi", "unknown_r", "equivalence", "equivalence_pairs")}
    if conds:
        out["multi"] = completeness_table(summary, conds)
        frames = []
        for cond in conds:
            c = get_condition(*_cid(cond), split_seed, data_dir, cache_dir)
            qids = [q.qid for q in c.test]
            depths = {m: d for m in UNKNOWN_R_METHODS if (d := _depths(per_query, cond, m, qids)) is not None}
            if depths:
                t = unknown_r_table(c.test, depths, estimate_r(c.train, c.test))
                t.insert(0, "condition", cond)
                frames.append(t)
        if frames:
            out["unknown_r"] = pd.concat(frames, ignore_index=True)
    sweeps, pairs = [], []
    for cond in (c for c in EQUIVALENCE_CONDITIONS if c in set(summary["condition"])):
        c = get_condition(*_cid(cond), split_seed, data_dir, cache_dir)
        corpus = load_condition_corpus(c, Path(data_dir) if data_dir else None, Path(cache_dir) if cache_dir else None)
        cos = tool_cosine(corpus, Path(cache_dir) if cache_dir else None)
        sweeps.append(equivalence_sweep(c, cos, EQUIVALENCE_TAUS))
        pr = expanded_pairs(c, corpus, cos, min(EQUIVALENCE_TAUS), n_sample=20)
        pr.insert(0, "condition", cond)
        pairs.append(pr)
    if sweeps:
        out["equivalence"] = pd.concat(sweeps, ignore_index=True)
        out["equivalence_pairs"] = pd.concat(pairs, ignore_index=True)
    return out


def multi_page(t: dict[str, pd.DataFrame], title: str) -> Page | None:
    """The multi-tool page of the tables of :func:`multi_tables` (written by the study as ``multi.csv``,
    ``unknown_r.csv``, ``equivalence.csv``, ``equivalence_pairs.csv``): its first part that ran is the answer
    block, the others follow; None when nothing ran."""
    parts = [p for p in (completeness_lines(t["multi"]), unknown_r_lines(t["unknown_r"]),
                         equivalence_lines(t["equivalence"])) if p]  # fmt: skip
    if not parts:
        return None
    return Page(
        title=title,
        group="study",
        lede="Several relevant tools: completeness, the cost of not knowing R, equivalent tools.",
        answer=Section("", parts[0]),
        sections=tuple(Section("", p) for p in parts[1:]),
    )


def completeness_lines(comp: pd.DataFrame) -> list[Block]:
    if comp.empty:
        return []
    header = ["condition", "method", "seeds", "mean R", "found %", "complete %", "mean K", "BoR bits (any)",
              "BoR bits (all)", "mean reward (any)", "mean reward (all)"]  # fmt: skip
    rows = [
        [r["condition"], r["method"], int(r["n_seeds"]), fmt(r["mean_r"]), fmt(r["found_pct"], nd=1),
         fmt(r["complete_pct"], nd=1), fmt(r["mean_k"]), fmt(r["bor_bits"]), fmt(r["bor_bits_all"]),
         fmt(r["mean_reward"], nd=3), fmt(r["mean_reward_all"], nd=3)]
        for _, r in comp.iterrows()
    ]  # fmt: skip
    return [
        Paragraph(
            "Found % counts a query when at least one of its R relevant tools is in the top K (chance: the "
            "hypergeometric tail with the true R); complete % when all R are (Completeness@K; chance "
            "C(N-R, K-R) / C(N, K)). Means over seeds; `multi.csv` holds the numbers."
        ),
        Table(header, rows),
    ]


def unknown_r_lines(ur: pd.DataFrame) -> list[Block]:
    if ur.empty:
        return []
    header = ["condition", "method", "assumed R", "BoR bits (any)", "minus true", "BoR bits (all)", "minus true"]
    rows = [
        [r["condition"], r["method"], r["assumption"], fmt(r["bor_bits"]), fmt(r["bor_bits_minus_true"]),
         *_all_bits(r)]
        for _, r in ur.iterrows()
    ]  # fmt: skip
    estimated = ur[ur["assumption"] == "estimated"]
    exact = (
        " The estimate was exact on every query here (`r_exact_pct` 100), so its rows equal the true R's."
        if len(estimated) and bool((estimated["r_exact_pct"] == 100).all())
        else ""
    )
    return [
        Paragraph(
            "**The cost of not knowing R.** The same depths (first seed) scored with the chance term "
            "assuming R = 1 (as the paper does), an R estimated from the scores (ridge regression of log R "
            "on score statistics, fitted on the training split) and the true R. Positive differences mean "
            "the assumption overstates the bits. BoR bits (all) is log2(mean complete / mean chance of "
            "complete): where no query showed all its relevant tools it has no finite value (*none "
            f"complete*).{exact} `unknown_r.csv` holds every column."
        ),
        Table(header, rows),
    ]


def _all_bits(r: pd.Series) -> list[str]:
    """The BoR bits (all) cell and its difference from the true R's: *none complete* (and ``-``) where no query
    showed all of its relevant tools (log2 0, or 0/0 where no depth could), never an infinity."""
    if r["complete_pct"] == 0:
        return ["none complete", "-"]
    return [fmt(r["bor_bits_all"]), fmt(r["bor_bits_all_minus_true"])]


def equivalence_lines(sw: pd.DataFrame) -> list[Block]:
    if sw.empty:
        return []
    header = ["condition", "tau", "method", "queries expanded %", "found % exact", "found % expanded",
              "BoR bits exact", "BoR bits expanded"]  # fmt: skip
    rows = [
        [r["condition"], f"{r['tau']:.2f}", r["method"], fmt(r["pct_queries_expanded"], nd=1),
         fmt(r["found_pct_exact"], nd=1), fmt(r["found_pct_expanded"], nd=1), fmt(r["bor_bits_exact"]),
         fmt(r["bor_bits_expanded"])]
        for _, r in sw[sw["method"].isin(["fixed-1", "fixed-5"])].iterrows()
    ]  # fmt: skip
    return [
        Paragraph(
            "**Equivalent tools.** A candidate whose MiniLM tool-text embedding has cosine >= tau with a gold "
            "tool counts as relevant too (no LLM); the same fixed-K depths scored with exact and with expanded "
            "labels (the chance term uses the expanded R). `equivalence.csv` holds every tau and method; "
            f"`equivalence_pairs.csv` a seeded sample of expanded pairs at tau = {min(EQUIVALENCE_TAUS)} for a "
            "human to check."
        ),
        Table(header, rows),
    ]


def _cid(cond: str) -> tuple[str, str, str]:
    from benchmarks.names import ConditionId

    c = ConditionId.parse(cond)
    return c.benchmark, c.scorer, c.variant
