"""The study pages of ``shortlist reproduce``: ours beside the paper's main table, the answers to the study's
questions, computed explanations, two scorers, several relevant tools, per-condition tables, bucket tables and
figures. Every number comes from the runs; nothing is written by hand.

:func:`study_tables` computes the tables (DataFrames in, DataFrames out); the ``*_section`` and ``*_page``
functions build :class:`experiments.report.page.Page` parts from them; :func:`write_study_report` writes the
tables, then each page once (:func:`experiments.report.page.write_page`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents.method import method_group
from benchmarks.names import ConditionId
from experiments.figures import (
    bucket_figure,
    candidate_set_size,
    pareto_figure,
    registry_sweep_figure,
    scorer_figure,
    with_splits,
)
from experiments.io import atomic_write_csv
from experiments.paper import PAPER
from experiments.plan import MAIN_CONDITIONS, PLANS, STUDY_BUCKET_METHODS, SWEEPS
from experiments.report.markdown import bucket_table, ci, fmt, observation_blocks, rates, reads_second_scorer, signed_ci
from experiments.report.multi import multi_page, multi_tables
from experiments.report.page import Block, Bullets, Figure, Page, Paragraph, Section, Table, write_page
from experiments.report.synthetic_page import write_synthetic_report
from experiments.report.tables import (
    HYBRID_PAIRS,
    JUDGED,
    MIN_BUCKET_QUERIES,
    SPEC_BFCL_TEXT,
    aggregate_with_groups,
    best_methods,
    best_of,
    condition_meta,
    depth_trend,
    first_split_meta,
    measured_factors,
    paired_conditions,
    scorer_strength,
    split_variance,
    table2,
    text_comparison,
)

#: How a study page names the benchmarks of a study that ran on some of them only (:func:`study_scope`).
BENCHMARK_NAMES = {"bfcl": "BFCL", "metatool": "MetaTool", "toolbench": "ToolBench", "beir": "BEIR", "run": "own run"}


#: The longest scope a study page's title names (a longer one is called ``Partial``).
MAX_SCOPE = 20


def study_scope(conditions: Sequence[str]) -> str:
    """What a study folder covers, for its page titles: empty for the whole study (every main condition ran),
    else the benchmarks of its conditions (``BFCL`` for ``--only bfcl-bm25 bfcl-minilm``, ``BFCL+MetaTool``;
    ``Partial`` when that is longer than :data:`MAX_SCOPE`), so that a study folder inside another
    (``results/bfcl``) has titles of its own."""
    present = set(conditions)
    if set(MAIN_CONDITIONS) <= present:
        return ""
    names = [ConditionId.parse(c).benchmark for c in conditions if not is_synthetic(c)]
    names += ["synthetic"] if any(is_synthetic(c) for c in conditions) else []
    scope = "+".join(BENCHMARK_NAMES.get(b, b) for b in dict.fromkeys(names))
    return scope if len(scope) <= MAX_SCOPE else "Partial"


def scoped(title: str, scope: str) -> str:
    """A study page's title within its scope (:func:`study_scope`): ``Beside the paper`` for the whole study,
    ``BFCL: beside the paper`` for a study of BFCL."""
    return f"{scope}: {title[0].lower()}{title[1:]}" if scope else title


def factor_text(f: pd.Series) -> str:
    """The measured factors of one condition as a clause list (only those that were measured)."""
    parts = []
    if not math.isnan(f["found_at_1_test"]):
        n = int(f["n_splits"])
        parts.append(
            f"scorer found@1 {f['found_at_1_test']:.1f}% on test"
            + (f" vs {f['found_at_1_train']:.1f}% on train" if not math.isnan(f["found_at_1_train"]) else "")
            + (f" (means over {n} splits)" if n > 1 else "")
            + (f" (paper: {f['paper_found_at_1']:g}%)" if not math.isnan(f["paper_found_at_1"]) else "")
        )
        if not math.isnan(f["test_minus_train_min"]):
            lo, hi = f["test_minus_train_min"], f["test_minus_train_max"]
            parts.append(
                f"test minus train found@1 {lo:+.1f} points"
                if n == 1
                else f"test minus train found@1 from {lo:+.1f} to {hi:+.1f} points over the {n} splits"
            )
    if not (isinstance(f["n_queries"], float) and math.isnan(f["n_queries"])):
        parts.append(
            f"{int(f['n_queries'])} queries"
            + (f" (paper: {int(f['paper_n_queries'])})" if not math.isnan(f["paper_n_queries"]) else "")
            + (f" over {int(f['n_tools'])} tools" if not math.isnan(f["n_tools"]) else "")
        )
    if f["tool_text"]:
        spec = "as SPEC" if f["tool_text_as_spec"] else "SPEC: " + " + ".join(SPEC_BFCL_TEXT)
        parts.append(f"tool text {f['tool_text']} ({spec})")
    return "; ".join(parts)


def explain(t2: pd.DataFrame, agg: pd.DataFrame, factors: pd.DataFrame | None = None) -> list[str]:
    """A sentence for every difference from the paper larger than our interval, naming only
    measured factors (:func:`experiments.report.tables.measured_factors`), never a cause."""
    out = []
    fac = factors.set_index("condition") if factors is not None and len(factors) else None
    for _, r in t2.iterrows():
        if math.isnan(r["paper_found_pct"]):
            continue
        if r["found_pct_lo"] <= r["paper_found_pct"] <= r["found_pct_hi"]:
            continue
        fixed = agg[(agg["condition"] == r["condition"]) & agg["method"].str.startswith("fixed-")]
        fixed = fixed.set_index("method", drop=False)
        best = fixed.loc[best_of(fixed[JUDGED])] if len(fixed) else None
        s = (
            f"{r['condition']} {r['method']}: {r['found_pct']:.1f}% found at K {r['mean_k']:.2f} vs the paper's "
            f"{r['paper_found_pct']}% at K {r['paper_mean_k']} ({r['found_diff']:+.1f} points, outside our interval "
            f"[{r['found_pct_lo']:.1f}, {r['found_pct_hi']:.1f}])."
        )
        if fac is not None and r["condition"] in fac.index:
            s += " Measured factors (not tested causes): " + factor_text(fac.loc[r["condition"]]) + "."
        if len(fixed) and not math.isnan(r["paper_mean_k"]):
            ks = fixed["method"].str.removeprefix("fixed-").astype(int).to_numpy()
            near = fixed.iloc[int(np.argmin(np.abs(np.log(ks) - math.log(max(r["paper_mean_k"], 1.0)))))]
            s += (
                f" For reference, at about the paper's depth (K {r['paper_mean_k']}) {near['method']} finds "
                f"{near['found_pct']:.1f}% on our lists."
            )
        if best is not None:
            s += (
                f" On our lists the fixed K with the highest mean net reward is {best['method']} "
                f"({best[JUDGED]:.2f} bits at {best['found_pct']:.1f}% found), the depth the reward favours;"
                f" our {r['method']} earns {r[JUDGED]:.2f}."
            )
        out.append(s)
    return out


def answers(per_query: pd.DataFrame, t2: pd.DataFrame, conditions: list[str]) -> Section:
    """The study's questions, answered from the data (one paragraph each)."""
    trends = {(c, m): depth_trend(per_query, c, m) for c in conditions for m in ("bor-dqn", "f1-dqn")}
    texts = [*paper_match_lines(t2), *depth_trend_lines(trends, conditions), *f1_depth_lines(trends, conditions)]
    return Section("What the results show", [Paragraph(t) for t in texts])


def paper_match(t2: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """The BoR agent's rows of :func:`table2` that match the paper (our interval reaches its found % at a mean K
    no larger), those that still match without the whole-list episodes, and those that miss."""
    bor = t2[t2["method"] == "bor-dqn"]
    matched = bor[(bor["found_pct_hi"] >= bor["paper_found_pct"]) & (bor["mean_k"] <= bor["paper_mean_k"] + 1e-9)]
    missed = bor[~bor.index.isin(matched.index) & bor["paper_found_pct"].notna()]
    # a match must survive removing the whole-list episodes (which count as found at K = N)
    robust = matched[
        (matched["found_pct_partial"] + (matched["found_pct_hi"] - matched["found_pct"]) >= matched["paper_found_pct"])
        & (matched["mean_k_partial"] <= matched["paper_mean_k"] + 1e-9)
    ]
    return matched, robust, missed


def paper_match_lines(t2: pd.DataFrame) -> list[str]:
    matched, robust, missed = paper_match(t2)

    def why_not(r: pd.Series) -> str:
        reasons = []
        if r["found_pct_hi"] < r["paper_found_pct"]:
            reasons.append(
                f"found {r['found_pct']:.1f}% [{r['found_pct_lo']:.1f}, {r['found_pct_hi']:.1f}] < "
                f"{r['paper_found_pct']}%"
            )
        if r["mean_k"] > r["paper_mean_k"]:
            reasons.append(f"mean K {r['mean_k']:.2f} > {r['paper_mean_k']}")
        return f"{r['condition']} ({'; '.join(reasons)})"

    lines = [
        "**Does our BoR agent match or beat the paper's found % at equal or lower mean K?** "
        + (f"Yes on {', '.join(matched['condition'])}" if len(matched) else "On no condition")
        + (f"; not on {', '.join(why_not(r) for _, r in missed.iterrows())}." if len(missed) else ".")
        + " (Matching means our query-bootstrap interval reaches the paper's found % at a mean K no larger "
        "than the paper's.)"
    ]
    if len(matched):
        fragile = matched[~matched["condition"].isin(set(robust["condition"]))]
        lines.append(
            "Without the whole-list episodes (K = N, counted as found), the match "
            + (f"holds on {', '.join(robust['condition'])}" if len(robust) else "holds on no condition")
            + (
                "; it does not on "
                + ", ".join(
                    f"{r['condition']} ({r['whole_list_pct']:.1f}% whole-list episodes; without them "
                    f"{r['found_pct_partial']:.1f}% found at mean K {r['mean_k_partial']:.2f})"
                    for _, r in fragile.iterrows()
                )
                if len(fragile)
                else ""
            )
            + ". (Without whole-list episodes we shift the found % by the same interval half-width; no new "
            "bootstrap.)"
        )
    return lines


def depth_trend_lines(trends: dict, conditions: list[str]) -> list[str]:
    grow: list[str] = []
    flat: list[str] = []
    for cond in conditions:
        t = trends[(cond, "bor-dqn")]
        if t is None:
            continue
        seq = " -> ".join(f"{b} {k:.2f} (n={n})" for b, k, n in zip(t.buckets, t.mean_k, t.n, strict=True))
        txt = f"{cond}: {seq}; hardest - easiest {t.diff:+.2f} [{t.diff_lo:+.2f}, {t.diff_hi:+.2f}]"
        (grow if t.grows else flat).append(txt + ("" if t.monotone else ", not monotone"))
    return [
        "**Does the BoR agent's mean K increase from easy to hard queries?** Judged over every bucket with at "
        f"least {MIN_BUCKET_QUERIES} test queries (per query, K averaged over seeds): it grows when the bucket "
        "means never decrease and the 95% bootstrap interval of hardest minus easiest lies above 0. "
        + (f"Yes on {len(grow)} of {len(grow) + len(flat)} conditions: {'; '.join(grow)}." if grow else "")
        + (f" Not on: {'; '.join(flat)}." if flat else "")
    ]


def f1_depth_lines(trends: dict, conditions: list[str]) -> list[str]:
    shallow = []
    for cond in conditions:
        tf, tb = trends[(cond, "f1-dqn")], trends[(cond, "bor-dqn")]
        if tf is None or tb is None:
            continue
        hardest = [b for b in tf.buckets if b in tb.buckets][-1]  # hardest bucket with enough queries for both
        shallow.append((cond, hardest, tf.mean_k[tf.buckets.index(hardest)], tb.mean_k[tb.buckets.index(hardest)]))
    if not shallow:
        return []
    n_shallower = sum(1 for _, _, f, b in shallow if f < b)
    return [
        "**Does the F1 agent stay shallow across buckets, as the paper claims?** "
        f"On {n_shallower} of {len(shallow)} conditions the F1 agent's mean K in the hardest bucket with at least "
        f"{MIN_BUCKET_QUERIES} test queries is below the BoR agent's: "
        + "; ".join(f"{c} ({bk}): F1 {f:.2f} vs BoR {b:.2f}" for c, bk, f, b in shallow)
        + "."
    ]


def table2_markdown(t2: pd.DataFrame) -> Table:
    """Ours beside the paper's main table (one row per condition x DQN reward)."""
    rows = [
        [
            r["condition"],
            r["method"],
            f"{fmt(r['found_pct'], nd=1)} [{fmt(r['found_pct_lo'], nd=1)}, {fmt(r['found_pct_hi'], nd=1)}]",
            f"{fmt(r['mean_k'])} [{fmt(r['mean_k_lo'])}, {fmt(r['mean_k_hi'])}]",
            f"{fmt(r['median_k'], nd=0)} / {fmt(r['p90_k'], nd=1)}",
            fmt(r["whole_list_pct"], nd=1),
            f"{fmt(r['found_pct_partial'], nd=1)} / {fmt(r['mean_k_partial'])}",
            fmt(r["paper_found_pct"], nd=1),
            fmt(r["paper_mean_k"], nd=1),
            fmt(r["found_diff"], nd=1),
            f"{fmt(r['found_at_1'], nd=1)} / {fmt(r['paper_found_at_1'], nd=1)}",
            fmt(r["bor_bits"]),
            fmt(r[JUDGED]),
            fmt(r["mean_reward"]),
        ]
        for _, r in t2.iterrows()
    ]
    header = [
        "condition", "method", "found % (ours)", "mean K (ours)", "median / p90 K", "whole list %",
        "without whole list: found % / mean K", "found % (paper)", "mean K (paper)", "diff",
        "found@1 ours / paper", "BoR bits", "net reward", "mean reward (cost-free)",
    ]  # fmt: skip
    return Table(header, rows)


def study_figures(out: Path, per_query: pd.DataFrame, summary: pd.DataFrame) -> Section:
    """Pareto plots per condition, the registry-size sweep and the scorer comparison (paper Figure 2).

    Each figure has a sibling CSV of exactly the plotted numbers.
    """
    figs = out / "figures"
    present = set(summary["condition"])
    blocks: list[Block] = []
    sweeps = {fam: [(n, c) for n, c in pts if c in present] for fam, pts in SWEEPS.items()}
    sweeps = {fam: pts for fam, pts in sweeps.items() if len(pts) >= 2}
    if sweeps:
        registry_sweep_figure(summary, sweeps, figs / "registry_sweep.png", per_query)
        blocks += [
            Paragraph(
                "Registry-size sweep: mean net reward (dashed: its ceiling at the learned depths, the mean over "
                "queries of log2(N/K), the reward had every shortlist held the gold tool), learned mean K and found % "
                "against the candidate-set size N (random sub-registries holding the gold tool; MetaTool: gold + "
                "N-1 most similar tools)."
            ),
            Figure("figures/registry_sweep.png", "registry sweep"),
        ]
    for label, pair in (
        ("MetaTool (N=100)", {"BM25": "metatool-bm25", "MiniLM": "metatool-minilm"}),
        ("BFCL (N=370)", {"BM25": "bfcl-bm25", "MiniLM": "bfcl-minilm"}),
    ):
        pair = {k: v for k, v in pair.items() if v in present}
        if len(pair) == 2:
            name = "scorers_" + label.split()[0].lower()
            scorer_figure(summary, pair, figs / f"{name}.png", per_query=per_query)
            blocks += [
                Paragraph(
                    f"Scorer comparison on {label} (paper Figure 2): the BoR agent's learned mean K and found % per "
                    "scorer, with each scorer's found@1."
                ),
                Figure(f"figures/{name}.png", name),
            ]
    for cond in sorted(c for c in present if not is_synthetic(c)):
        try:
            n = candidate_set_size(per_query, cond)
        except ValueError:
            continue  # varying N or several relevant items: iso-BoR lines are not single lines
        pareto_figure(summary, cond, figs / f"pareto_{cond}.png", n=n)
        caption = (
            f"Pareto view of {cond}: found % against mean K for every method, fixed K joined as a curve, dotted "
            "iso-BoR lines"
        )
        blocks.append(Figure(f"figures/pareto_{cond}.png", f"pareto {cond}", caption))
    return Section("Figures", blocks)


def _mean(summary: pd.DataFrame, cond: str, method: str, col: str) -> float:
    s = summary[(summary["condition"] == cond) & (summary["method"] == method)][col]
    return float(s.mean()) if len(s) else float("nan")


def notes_for(summary: pd.DataFrame) -> dict[str, str]:
    """One paragraph per condition: the best fixed K by mean reward and BoR-DQN beside it.

    The scorer's found@1 and the per-bucket depths are in the section's own tables.
    """
    notes: dict[str, str] = {}
    for cond in sorted(summary["condition"].unique()):
        fixed = summary[(summary["condition"] == cond) & summary["method"].str.startswith("fixed-")]
        if not len(fixed):
            continue
        by = fixed.groupby("method")[[JUDGED, "found_pct"]].mean()
        best = best_of(by[JUDGED])
        parts = [
            f"The fixed K with the highest mean net reward is {best} ({by.loc[best, JUDGED]:.2f} bits at "
            f"{by.loc[best, 'found_pct']:.1f}% found)."
        ]
        bor = _mean(summary, cond, "bor-dqn", JUDGED)
        if not np.isnan(bor):
            parts.append(
                f"BoR-DQN earns {bor:.2f} bits of net reward ({_mean(summary, cond, 'bor-dqn', 'found_pct'):.1f}% found "
                f"at mean K {_mean(summary, cond, 'bor-dqn', 'mean_k'):.2f}) against {by[JUDGED].max():.2f} for "
                "the best fixed K."
            )
        notes[cond] = " ".join(parts)
    return notes


def _condition_section(
    cond: str,
    agg: pd.DataFrame,
    strength: pd.DataFrame,
    summary: pd.DataFrame,
    buckets: pd.DataFrame,
    out: Path,
    note: str,
) -> Section:
    a = agg[agg["condition"] == cond].copy()
    a["_order"] = a["method"].map(
        lambda m: (m.startswith("fixed-"), int(m.split("-")[1]) if m.startswith("fixed-") else 0, m)
    )
    a = a.sort_values("_order")
    s = strength[strength["condition"] == cond].iloc[0]
    n_splits = int(s["n_splits"])
    blocks: list[Block] = [
        Paragraph(
            f"Scorer alone on the {int(s['n_test'])} test queries"
            + (f" (means over {n_splits} train/test splits)" if n_splits > 1 else "")
            + f": found@1 {s['found@1']:.1f}%, found@3 {s['found@3']:.1f}%, found@5 {s['found@5']:.1f}%, "
            f"found@20 {s['found@20']:.1f}%, found@50 {s['found@50']:.1f}%."
        ),
        condition_table(a),
        *paper_rows_lines(cond, a, s),
        *collapse_lines(summary[(summary["condition"] == cond) & (summary["collapse_pct"] > 0)]),
    ]
    methods = [m for m in STUDY_BUCKET_METHODS if m in set(a["method"])]
    plotted = bucket_figure(buckets, cond, methods, out / "figures" / f"buckets_{cond}.png")
    blocks.append(Figure(f"figures/buckets_{cond}.png", f"{cond} buckets"))
    n_splits = int(with_splits(buckets[buckets["condition"] == cond])["split_seed"].nunique())
    blocks += bucket_table(plotted, cond, methods, n_splits)
    return Section(cond, [*blocks, *([Paragraph(note)] if note else [])])


def condition_table(a: pd.DataFrame) -> Table:
    header = ["method", "seeds x splits", "found %", "mean K", "median / p90 K", "whole list %", "BoR bits",
              "net reward", "mean reward (cost-free)", "ceiling"]  # fmt: skip
    rows = [
        [r["method"], f"{int(r['n_seeds'])} x {int(r['n_splits'])}", ci(r, "found_pct", 1), ci(r, "mean_k"),
         f"{fmt(r['median_k'], nd=0)} / {fmt(r['p90_k'], nd=1)}", fmt(r["whole_list_pct"], nd=1), ci(r, "bor_bits"),
         ci(r, JUDGED), fmt(r["mean_reward"]), f"{r['bor_ceiling']:.2f}"]
        for _, r in a.iterrows()
    ]  # fmt: skip
    return Table(header, rows)


def paper_rows_lines(cond: str, a: pd.DataFrame, s: pd.Series) -> list[Block]:
    """Ours beside the paper's numbers of one condition (SPEC section 6), when the paper has them."""
    paper = PAPER.get(cond)
    if not paper:
        return []
    rows: list[list[object]] = []
    for key, method in (("bor", "bor-dqn"), ("f1", "f1-dqn")):
        if key in paper and method in set(a["method"]):
            p, o = paper[key], a[a["method"] == method].iloc[0]
            psd = f" +- {p['found_sd']}" if "found_sd" in p else ""
            ksd = f" +- {p['k_sd']}" if "k_sd" in p else ""
            rows.append([method, f"{p['found_pct']}{psd}", f"{p['mean_k']}{ksd}", ci(o, "found_pct", 1),
                         ci(o, "mean_k"), f"{o['found_pct'] - p['found_pct']:+.1f}"])  # fmt: skip
    bf = paper.get("best_fixed")
    mine = a[a["method"] == f"fixed-{bf['k']}"] if bf else a.iloc[:0]
    if bf and len(mine):
        got = mine.iloc[0]["found_pct"]
        rows.append([f"fixed-{bf['k']} (paper's best fixed K)", bf["found_pct"], bf["k"], f"{got:.1f}", bf["k"],
                     f"{got - bf['found_pct']:+.1f}"])  # fmt: skip
    for k in (1, 5):
        if f"found_at_{k}" in paper:
            theirs, ours = paper[f"found_at_{k}"], s[f"found@{k}"]
            rows.append([f"scorer found@{k}", theirs, k, f"{ours:.1f}", k, f"{ours - theirs:+.1f}"])
    header = ["", "paper found %", "paper mean K", "ours found %", "ours mean K", "diff found (pts)"]
    return [Paragraph("Beside the paper (SPEC section 6):"), Table(header, rows)]


def collapse_lines(collapse: pd.DataFrame) -> list[Block]:
    if not len(collapse):
        return []
    worst = collapse.groupby("method")["collapse_pct"].mean().sort_values(ascending=False)
    return [
        Paragraph(
            "Collapse-zone warning (expected random hits lambda = K R / N >= 3, no method can be "
            "selective there): " + ", ".join(f"{m} {v:.0f}% of queries" for m, v in worst.items()) + "."
        )
    ]


def is_synthetic(condition: str) -> bool:
    """Whether a condition belongs to the synthetic study (reported in ``synthetic/``)."""
    return condition.startswith("synthetic-")


def study_tables(per_query: pd.DataFrame, summary: pd.DataFrame, meta: dict) -> dict[str, pd.DataFrame]:
    """The study's tables (DataFrames in, DataFrames out): aggregate, scorer strength, table 2 beside the
    paper, split variance, measured factors, the method to use per condition (``best``), and, when their
    conditions ran, two scorers against one (``hybrid``) and BFCL's two tool texts (``text``)."""
    agg = aggregate_with_groups(summary, per_query)
    strength = scorer_strength(per_query)
    main = [c for c in MAIN_CONDITIONS if c in set(summary["condition"])]
    return {
        "aggregate": agg,
        "scorer_strength": strength,
        "table2": table2(agg, strength, main),
        "splits": split_variance(agg, main),
        "factors": measured_factors(per_query, meta, main),
        "best": best_methods(per_query, agg[~agg["condition"].map(is_synthetic)]),
        "hybrid": paired_conditions(per_query, HYBRID_PAIRS, HYBRID_METHODS),
        "text": text_comparison(agg, strength, TEXT_METHODS),
    }


#: The tables of :func:`study_tables` written only when their part ran (the others always are).
OPTIONAL_TABLES = ("hybrid", "text")


def write_study_report(
    out: Path,
    per_query: pd.DataFrame,
    summary: pd.DataFrame,
    buckets: pd.DataFrame,
    data_dir: str | None = None,
    cache_dir: str | None = None,
    split_seed: int = 0,
    observation: str = "auto",
    source: Path | None = None,
) -> None:
    """The study's tables (:func:`study_tables`, one CSV each), figures and pages into ``out``: ``paper.md``,
    ``two-scorers.md`` and ``multi-tool.md`` when their parts ran, ``conditions.md``, and ``synthetic/``
    (:func:`experiments.report.synthetic_page.write_synthetic_report`) when the synthetic study ran. The
    folder's README.md, the overview that answers first and links the pages, is written afterwards by
    :func:`experiments.report.overview.write_overview`.

    The multi-tool page runs on split ``split_seed`` (the one the multi-tool suite runs on); ``observation``
    names the learners' observation set (no two-scorer page on a set without the second scorer); ``source`` is
    the folder whose ``runs/`` and ``tuning/`` the report reads (default ``out``; ``shortlist reproduce``
    writes into a staging folder and reads the results folder)."""
    source = out if source is None else source
    meta = condition_meta(source / "runs")
    t = study_tables(per_query, summary, meta)
    t_written = {n: df for n, df in t.items() if n not in OPTIONAL_TABLES or len(df)}
    if not reads_second_scorer(observation):  # no two-scorer page on a set without the second scorer
        t_written.pop("hybrid", None)
    for name, df in t_written.items():
        atomic_write_csv(df, out / f"{name}.csv")
    multi = multi_tables(per_query, summary, data_dir, cache_dir, split_seed)
    for name, df in multi.items():
        if len(df):
            atomic_write_csv(df, out / f"{name}.csv")
    scope = study_scope(list(dict.fromkeys(summary["condition"])))
    pages = {
        "paper.md": paper_page(out, per_query, summary, t, meta, source, observation, scope),
        "two-scorers.md": two_scorer_page(t, meta, scope) if reads_second_scorer(observation) else None,
        "multi-tool.md": multi_page(multi, scoped("Several relevant tools", scope)),
        "conditions.md": conditions_page(out, t["aggregate"], t["scorer_strength"], summary, buckets, scope),
    }
    for name, page in pages.items():
        if page is not None:
            write_page(out, page, name)
    write_synthetic_report(out, per_query, scoped("Known optimum", scope))


def paper_page(
    out: Path,
    per_query: pd.DataFrame,
    summary: pd.DataFrame,
    t: dict[str, pd.DataFrame],
    meta: dict,
    source: Path,
    observation: str,
    scope: str = "",
) -> Page:
    """Ours beside the paper's main table, the study's questions answered (the answer block), splits, measured
    factors, the whole-list episodes, the tool-text comparison and the study figures. A study without any condition
    of the paper's main table (a registry sweep, a second scorer, fused scores on their own) gets the page of its
    figures, saying so."""
    if t["table2"].empty:
        return Page(
            title=scoped("Beside the paper", scope),
            group="study",
            lede="The BoR agent, the F1 ablation and fixed K beside the paper's main table.",
            answer=Section("", [Paragraph(
                "No condition of the paper's main table (SPEC section 6) ran in this study, so nothing here is "
                "compared with the paper's numbers. Every condition's table is in conditions.md; the study's "
                "figures follow."
            )]),
            sections=(study_provenance(observation), study_figures(out, per_query, summary)),
        )  # fmt: skip
    main = list(t["table2"]["condition"].unique())
    why = explain(t["table2"], t["aggregate"], t["factors"])
    factors = [f"{c}: {factor_text(f)}." for c, f in t["factors"].set_index("condition").iterrows()]
    return Page(
        title=scoped("Beside the paper", scope),
        group="study",
        lede="The BoR agent, the F1 ablation and fixed K beside the paper's main table.",
        answer=answers(per_query, t["table2"], main),
        sections=(
            Section(
                "Beside the paper's main table (SPEC section 6)",
                [
                    Paragraph(
                        "Ours: mean over runs [95% bootstrap interval over test queries]; `table2.csv` holds these "
                        "numbers. 'Without whole-list' recomputes found % and mean K on the episodes that stopped "
                        "before K = N."
                    ),
                    table2_markdown(t["table2"]),
                ],
            ),
            study_provenance(observation),
            split_section(t["aggregate"], main),
            Section(
                "Measured factors behind differences from the paper",
                [
                    Paragraph(
                        "Computed from the run manifests and the test rows (`factors.csv`); they are measured beside "
                        "the results, not tested as causes."
                    ),
                    Bullets(factors),
                ],
            ),
            Section("Differences from the paper larger than our interval", [Bullets(why)] if why else []),
            whole_list_section(t["aggregate"], meta, source),
            text_section(t["text"]),
            study_figures(out, per_query, summary),
        ),
    )


def study_provenance(observation: str) -> Section:
    return Section(
        "How these numbers were made",
        [
            Paragraph(
                "Generated by `shortlist reproduce` from the run directories under `runs/` (not committed: the "
                "command remakes them; `runs.csv` lists each with its config hash and the sha256 of its tables); do "
                "not edit by hand. Found % and mean K are on the test split; each cell is the mean over runs "
                "(training seeds x seeded 70/30 train/test splits; the main conditions run on several splits, the "
                "other suites on the first) with, in brackets, a 95% percentile bootstrap interval over test "
                "queries (2,000 resamples stratified by split, the same for every method of a condition; each "
                "resample averages the runs). The spread over training seeds and the spread over splits are "
                "separate (`*_seed_min`/`*_seed_max` and `*_split_min`/`*_split_max` in aggregate.csv, and the "
                "split-variance table below); depths show median, 90th percentile and the whole-list rate (K = N) "
                'beside the mean. "Net reward" (the judged quantity every learner is trained on) is the mean '
                "per-query BoR reward found x -log2 P_rand(K) minus the condition's cost per extra shown tool; "
                '"mean reward" leaves the cost out; "BoR bits" is the aggregate log2(mean found / mean P_rand). '
                "They can rank methods differently. The paper's agents were trained with gamma 0.95 on most "
                "conditions and judged on found % and K; ours with gamma 1 on the net reward."
            ),
            *observation_blocks(observation),
        ],
    )


def conditions_page(
    out: Path,
    agg: pd.DataFrame,
    strength: pd.DataFrame,
    summary: pd.DataFrame,
    buckets: pd.DataFrame,
    scope: str = "",
) -> Page | None:
    """One section per condition (not the synthetic study's): every method's table, beside the paper, buckets
    and their figure; None when only the synthetic study ran."""
    present = set(summary["condition"])
    notes = notes_for(summary)
    order = [c for c in PLANS if c in present and not is_synthetic(c)]
    order += sorted(c for c in present - set(PLANS) if not is_synthetic(c))
    if not order:
        return None
    sections = [_condition_section(c, agg, strength, summary, buckets, out, notes.get(c, "")) for c in order]
    return Page(
        title=scoped("All conditions", scope),
        group="study",
        lede="Every condition: methods, buckets, figures.",
        answer=Section(""),
        sections=tuple(sections),
    )


def split_section(agg: pd.DataFrame, conditions: list[str]) -> Section:
    """The split-variance table: net reward and found % with three separate spreads (no blocks when no
    condition ran on several splits)."""
    sv = split_variance(agg, conditions)
    if sv.empty:
        return Section("Split variance")
    n_splits = int(sv["n_splits"].max())

    def rng(r: pd.Series, m: str, kind: str, nd: int) -> str:
        return f"{fmt(r[f'{m}_{kind}_min'], nd=nd)} - {fmt(r[f'{m}_{kind}_max'], nd=nd)}"

    rows = [
        [
            r["condition"],
            r["method"],
            f"{int(r['n_seeds'])} x {int(r['n_splits'])}",
            ci(r, JUDGED),
            rng(r, JUDGED, "seed", 2),
            rng(r, JUDGED, "split", 2),
            ci(r, "found_pct", 1),
            rng(r, "found_pct", "seed", 1),
            rng(r, "found_pct", "split", 1),
        ]
        for _, r in sv.iterrows()
    ]
    header = [
        "condition", "method", "seeds x splits", "net reward [query bootstrap]", "seed range", "split range",
        "found % [query bootstrap]", "seed range", "split range",
    ]  # fmt: skip
    return Section(
        "Split variance",
        [
            Paragraph(
                f"Every main condition runs on {n_splits} seeded 70/30 train/test splits (split seeds in the run "
                "ids, `__split<n>`; split 0 has no suffix). Per method: the mean over runs with the 95% "
                "query-bootstrap interval (stratified by split), the range of the per-seed means (over splits) and "
                "the range of the per-split means (over seeds). The best fixed K is chosen on test (a hindsight "
                "reference). `splits.csv` holds these numbers."
            ),
            Table(header, rows),
        ],
    )


#: The learned policies compared with and without a second scorer.
HYBRID_METHODS = ("bor-dqn", "bor-tabular", "bor-cutoff", "bor-posterior")
#: The methods shown with both of BFCL's tool texts.
TEXT_METHODS = ("bor-dqn", "bor-tabular", "fixed-1", "fixed-3", "fixed-5")
#: The heading of the two-scorer comparison (a section of the comparison page).
HYBRID_HEADING = "Two scorers on the same candidates"


def hybrid_blocks(
    hp: pd.DataFrame, strength: pd.DataFrame, meta: dict[tuple[str, int], dict[str, Any]]
) -> tuple[list[Block], Paragraph]:
    """Two scorers on identical candidate sets, from :func:`experiments.report.tables.paired_conditions` rows
    (``hybrid.csv``): each learned policy's mean reward with the second scorer observed (``-hybrid``) or with
    the fused ranking (``-fused``) minus on the score-only condition, paired over the same test units. Returns
    (how they are compared and the table, the verdict sentence)."""
    st = strength.set_index("condition")

    def found1(c: str) -> str:
        return fmt(st.loc[c, "found@1"], nd=1) if c in st.index else "-"

    def ranking_found1(base: str, other: str) -> str:
        # the same scorer ranks both (a -hybrid pair): one ranking, one found@1
        if ConditionId.parse(base).scorer == ConditionId.parse(other).scorer:
            return found1(base)
        return f"{found1(base)} -> {found1(other)}"

    def weight(c: str) -> str:
        ws = [m["fusion_weight"] for (cond, _), m in meta.items() if cond == c and "fusion_weight" in m]
        return f"{min(ws):.2f}-{max(ws):.2f}" if ws else "-"

    rows = [
        [
            r["base"],
            r["other"],
            ranking_found1(r["base"], r["other"]),
            weight(r["other"]),
            r["method"],
            f"{r[f'base_{JUDGED}']:.3f}",
            f"{r[f'other_{JUDGED}']:.3f}",
            signed_ci(r),
        ]
        for _, r in hp.iterrows()
    ]
    up = hp[hp["diff_lo"] > 0]
    down = hp[hp["diff_hi"] < 0]
    header = [
        "score-only", "with two scorers", "found@1 of the ranking", "fusion weight of MiniLM (splits)",
        "method", "net reward (score-only)", "net reward (two scorers)", "difference [95% paired]",
    ]  # fmt: skip
    how = Paragraph(
        "`-hybrid` conditions rank by one scorer and let the learned policies observe the other scorer's "
        "scores of the same candidates (7 agreement and fusion features, `envs/features.py`); `-fused` "
        "conditions rank by the weighted z-fusion of BM25 and MiniLM, the weight chosen on each training "
        "split by the mean reciprocal rank of the gold tool (`benchmarks/conditions.py::fit_fusion_weight`). "
        "Same candidate sets, splits and seeds as the score-only condition, so each difference is paired over "
        "the same test units (bootstrap stratified by split). The found@1 of the ranking is one number for a "
        "`-hybrid` pair (both conditions rank by the same scorer) and score-only -> fused for a `-fused` pair. "
        "`hybrid.csv` holds these numbers."
    )
    verdict = Paragraph(
        f"Of {len(hp)} (pair, method) comparisons, {len(up)} are significantly better with two scorers and "
        f"{len(down)} significantly worse."
    )
    return [how, Table(header, rows)], verdict


def two_scorer_page(t: dict[str, pd.DataFrame], meta: dict[tuple[str, int], dict[str, Any]], scope: str) -> Page | None:
    """The two-scorer page (:func:`hybrid_blocks`; its verdict first), None when no pair of conditions ran."""
    if t["hybrid"].empty:
        return None
    body, verdict = hybrid_blocks(t["hybrid"], t["scorer_strength"], meta)
    return Page(
        title=scoped("Two scorers", scope),
        group="study",
        lede=f"{HYBRID_HEADING}: each learned policy with a second scorer against the score-only condition.",
        answer=Section("", [verdict]),
        sections=(Section("Every pair and method", body),),
    )


def text_section(tc: pd.DataFrame) -> Section:
    """BFCL with SPEC's tool text beside the richer text (``text.csv``; no blocks when not both ran)."""
    if tc.empty:
        return Section("BFCL tool text: SPEC's beside the richer text")
    rows = [
        [
            r["condition"],
            r["tool_text"],
            fmt(r["found@1"], nd=1),
            fmt(r["found@5"], nd=1),
            r["method"],
            fmt(r["found_pct"], nd=1),
            fmt(r["mean_k"]),
            fmt(r["whole_list_pct"], nd=1),
            ci(r, JUDGED),
        ]
        for _, r in tc.iterrows()
    ]
    header = [
        "condition", "tool text", "scorer found@1", "scorer found@5", "method", "found %", "mean K",
        "whole list %", "net reward",
    ]  # fmt: skip
    return Section(
        "BFCL tool text: SPEC's beside the richer text",
        [
            Paragraph(
                "The main BFCL conditions use SPEC's tool text (description + parameter names, "
                "`benchmarks/bfcl.py::tool_text`); the `-richtext` conditions put the function name first (the "
                "package's earlier text). Same queries, splits and seeds; found % and mean K are means over runs, "
                "net reward with its 95% query-bootstrap interval. `text.csv` holds these numbers."
            ),
            Table(header, rows),
        ],
    )


#: Validation runs behind the whole-list fixes (``shortlist tune`` folders relative to the study
#: folder): folder, the grid of the command, the setting without the fix, the hypothesis tested.
WHOLE_LIST_TESTS: tuple[tuple[str, str, str, str], ...] = (
    (
        "exploring_starts",
        "--grid exploring_starts=0,0.25,0.5",
        "exploring_starts=0.0",
        "every training episode started at depth 1, so states deep in the list were rarely visited and "
        "Q(CONTINUE) there was extrapolated by the network, not learned. Test: exploring starts (a share of "
        "training episodes starts at a uniformly drawn depth) put those states into the replay buffer; if the "
        "hypothesis holds, the whole-list rate falls.",
    ),
    (
        "n_steps",
        "--grid n_steps=1,4 double_q=false,true",
        "n_steps=1, double_q=False",
        "inside a tied tail the observation barely changes from one depth to the next, so the one-step target "
        "-c + gamma max Q(s', .) with s' ~ s feeds an over-estimate of CONTINUE back into itself (the trained "
        "networks valued CONTINUE above STOP at every depth of such a tail, up to the cap). Test: n-step "
        "targets (n observed rewards before the bootstrap: n times fewer bootstraps through the tail) and "
        "Double-DQN targets (the online network picks the next action, the target network values it); if the "
        "hypothesis holds, the whole-list rate falls to zero.",
    ),
)


def _chosen_setting(grid: str) -> str:
    """The package default of a tuning grid, spelled as ``shortlist tune`` labels its settings."""
    from agents.dqn import DQNConfig

    keys = [item.split("=")[0] for item in grid.removeprefix("--grid ").split()]
    return ", ".join(f"{k}={getattr(DQNConfig(), k)}" for k in keys)


def whole_list_section(agg: pd.DataFrame, meta: dict[tuple[str, int], dict[str, Any]], out: Path) -> Section:
    """Whole-list episodes (K = N) of the learned policies on every condition, and the validation
    runs behind the fixes (:data:`WHOLE_LIST_TESTS`), when ``out/tuning/<folder>`` holds them."""
    learned = agg[[method_group(m) == "agent" for m in agg["method"]]]  # the registry's learned kinds
    if learned.empty:
        return Section(WHOLE_LIST_HEADING)
    shown = learned[learned["whole_list_pct"] > 0]
    blocks: list[Block] = [
        Paragraph(
            f"Learned policies (DQN, tabular Q and the expected-reward cut-off, {len(learned)} condition x method "
            "pairs): "
            + (
                "none shows the whole candidate list on any test query."
                if shown.empty
                else f"{len(shown)} pairs show it on some test queries: " + rates(shown, "whole_list_pct")
            )
        ),
    ]
    if "break_even_pct" in learned:
        deep = learned[learned["break_even_pct"] > 0]
        blocks.append(
            Paragraph(
                "Why none can: every learned agent stops at the latest at its query's break-even depth, the deepest k "
                "with log2(N / k) > step_cost (k - 1) (`rewards.break_even_depth`). In the agents' objective (terminal "
                "reward minus step costs) any deeper shortlist earns at most log2(N / k) - step_cost (k - 1) <= 0 "
                "whatever the labels, no more than one item (>= 0), and with BoR the whole list earns exactly "
                "-step_cost (N - 1). That cap bounds the runaway; it does not learn anything. "
                "How often a policy reaches it (`break_even_pct`, the share of test queries shown at least that deep) "
                "is what remains of the runaway: "
                + (
                    "no learned pair reaches it."
                    if deep.empty
                    else f"{len(deep)} of {len(learned)} pairs reach it on some queries: "
                    + rates(deep, "break_even_pct")
                )
            )
        )
    ties = []
    for cond in sorted(set(learned["condition"])):
        m = first_split_meta(meta, cond)
        if "tied_tail_pct" in m:
            ties.append((cond, m["tied_tail_pct"], m["gold_in_tied_tail_pct"], cond in set(shown["condition"])))
    if ties:
        blocks.append(
            Paragraph(
                "Tied tails (measured on every query of the condition): the share of a ranked list that ties with "
                "its lowest score (there the order is candidate order, not the scorer's, and the state barely "
                "changes from one depth to the next) and the share of queries whose gold tool sits in that tail: "
                + "; ".join(
                    f"{c} {t:.1f}% / {g:.1f}%" + (" (has whole-list episodes)" if w else "") for c, t, g, w in ties
                )
                + "."
            )
        )
    for folder_name, grid, baseline, hypothesis in WHOLE_LIST_TESTS:
        blocks += _validation_test(out / "tuning" / folder_name, folder_name, grid, baseline, hypothesis)
    return Section(WHOLE_LIST_HEADING, blocks)


WHOLE_LIST_HEADING = "Whole-list episodes (K = N)"


def _validation_test(folder: Path, name: str, grid: str, baseline: str, hypothesis: str) -> list[Block]:
    means = sorted(folder.glob("*_mean.csv")) if folder.is_dir() else []
    if not means:
        return []
    rows = []
    for path in means:
        for _, r in pd.read_csv(path).iterrows():
            rows.append(
                [
                    path.name.removesuffix("_mean.csv"),
                    r["setting"],
                    f"{r['mean_reward_mean']:.3f} ({r['mean_reward_min']:.3f} - {r['mean_reward_max']:.3f})",
                    f"{r['whole_list_pct_mean']:.1f} ({r['whole_list_pct_min']:.1f} - {r['whole_list_pct_max']:.1f})",
                    f"{r['mean_k_mean']:.2f}",
                ]
            )
    chosen = _chosen_setting(grid)
    frames = {p.name.removesuffix("_mean.csv"): pd.read_csv(p).set_index("setting") for p in means}
    pairs = {c: f for c, f in frames.items() if baseline in f.index and chosen in f.index}
    result = ""
    if pairs and chosen != baseline:
        before = {c: f.loc[baseline] for c, f in pairs.items()}
        after = {c: f.loc[chosen] for c, f in pairs.items()}
        n_down = sum(after[c]["whole_list_pct_max"] < before[c]["whole_list_pct_max"] for c in pairs)
        n_zero = sum(after[c]["whole_list_pct_max"] == 0 for c in pairs)
        n_had = sum(before[c]["whole_list_pct_max"] > 0 for c in pairs)
        result = (
            f" Result: with the default {chosen}, the largest whole-list rate over seeds is lower than with "
            f"{baseline} on {n_down} of the {n_had} conditions that had whole-list episodes, and zero on {n_zero} of "
            f"{len(pairs)}; mean validation reward changes by "
            + ", ".join(f"{c} {after[c]['mean_reward_mean'] - before[c]['mean_reward_mean']:+.3f}" for c in pairs)
            + "."
        )
    return [
        Paragraph(
            f"Why BoR-DQN showed the whole list, tested on the inner validation split of the training queries "
            f"(`shortlist tune {grid}`, 3 seeds, files in `tuning/{name}/`). Hypothesis: " + hypothesis + result
        ),
        Paragraph("Validation mean reward (seed range), whole-list rate (range over seeds) and mean K:"),
        Table(["condition", "setting", "mean reward", "whole list % (range)", "mean K"], rows),
    ]
