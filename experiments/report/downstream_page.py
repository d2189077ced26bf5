"""The page of ``shortlist downstream``: the paper's Table 1 beside ours, the choice-vs-K curve, outcome-trained
against BoR-trained depth policies, and the simulated chooser's sensitivity.

Builds the page from the tables of :mod:`experiments.downstream` (computed there) and draws the figures; every
table and figure names the chooser (a simulated one as "simulated chooser, not an LLM").
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.figures import method_color
from experiments.io import atomic_write_csv, save_png
from experiments.report.markdown import fmt
from experiments.report.page import Bullets, Figure, Page, Paragraph, Section, Table, write_page

#: The paper's Table 1 (BFCL, N = 370, 120 test queries, Claude Sonnet 4.6, 3 seeds, temperature 0): per
#: condition and method, mean K, presented %, choice % given presented and end-to-end % (None: not given).
PAPER_TABLE1: dict[str, dict[str, dict[str, float | None]]] = {
    "bfcl-bm25": {
        "bor-dqn": {"mean_k": 2.2, "presented_pct": 76.9, "choice_pct": 93.1, "e2e_pct": 71.7, "medium_choice": 76.8},
        "fixed-5": {"mean_k": 5.0, "presented_pct": 84.2, "choice_pct": 87.1, "e2e_pct": 73.3, "medium_choice": 60.9},
        "fixed-1": {"mean_k": 1.0, "presented_pct": 65.0, "choice_pct": 100.0, "e2e_pct": 65.0, "medium_choice": None},
    },
    "bfcl-minilm": {
        "bor-dqn": {"mean_k": None, "presented_pct": None, "choice_pct": 96.1, "e2e_pct": None, "medium_choice": None},
        "fixed-5": {"mean_k": 5.0, "presented_pct": None, "choice_pct": 84.6, "e2e_pct": None, "medium_choice": None},
    },
}


def _ci(r: pd.Series, col: str, nd: int = 1) -> str:
    return fmt(r[col], r[f"{col}_lo"], r[f"{col}_hi"], nd)


def table1_lines(t1: pd.DataFrame, medium: pd.DataFrame) -> Table:
    """Ours per condition and method beside the paper's Table 1 (the medium bucket's choice % too)."""
    rows = []
    for _, r in t1.iterrows():
        p = PAPER_TABLE1.get(r["condition"], {}).get(r["method"], {})
        m = medium[(medium["condition"] == r["condition"]) & (medium["method"] == r["method"])]
        rows.append(
            [r["condition"], r["method"], _ci(r, "mean_k", 2), _ci(r, "presented_pct"), _ci(r, "choice_pct"),
             _ci(r, "e2e_pct"), _ci(m.iloc[0], "choice_pct") if len(m) else "-",
             " / ".join(fmt(p.get(c), nd=1) if p.get(c) is not None else "-"
                        for c in ("mean_k", "presented_pct", "choice_pct", "e2e_pct", "medium_choice")) if p else ""]
        )  # fmt: skip
    header = ["condition", "method", "mean K", "presented %", "choice % (given presented)", "end-to-end %",
              "choice %, medium (gold 2-5)", "paper: K / presented / choice / e2e / medium choice"]  # fmt: skip
    return Table(header, rows)


def curve_figure(curve: pd.DataFrame, chooser: str, out_png: Path) -> pd.DataFrame:
    """Accuracy given presence against K, one line per gold position group and condition (PNG + its CSV)."""
    import matplotlib.pyplot as plt

    conds = list(dict.fromkeys(curve["condition"]))
    fig, axes = plt.subplots(1, len(conds), figsize=(6 * len(conds), 4.2), squeeze=False)
    for ax, cond in zip(axes[0], conds, strict=True):
        for pos, g in curve[curve["condition"] == cond].groupby("gold_position", sort=False):
            g = g[g["n"] >= 5]
            if g.empty:
                continue
            ax.plot(g["k"], 100 * g["accuracy"], marker="o", ms=3, label=f"gold at {pos} (n >= 5 per point)")
        ax.set_xticks([1, 2, 3, 5, 10, 15, 20])
        ax.set_xlabel("K (tools shown)")
        ax.set_ylabel("choice accuracy given the gold is shown (%)")
        ax.set_ylim(0, 105)
        ax.set_title(f"{cond}: {chooser}", fontsize=9)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("How often the chooser picks the gold tool, against the number of tools shown")
    fig.tight_layout()
    save_png(fig, out_png)
    atomic_write_csv(curve.assign(chooser=chooser), out_png.with_suffix(".csv"))
    return curve


def methods_figure(t1: pd.DataFrame, chooser: str, out_png: Path) -> pd.DataFrame:
    """End-to-end % against mean K per method and condition, with the query-bootstrap whiskers (PNG + CSV)."""
    import matplotlib.pyplot as plt

    conds = list(dict.fromkeys(t1["condition"]))
    fig, axes = plt.subplots(1, len(conds), figsize=(6 * len(conds), 4.4), squeeze=False)
    for ax, cond in zip(axes[0], conds, strict=True):
        for _, r in t1[t1["condition"] == cond].iterrows():
            err = np.array([[r["e2e_pct"] - r["e2e_pct_lo"]], [r["e2e_pct_hi"] - r["e2e_pct"]]]).clip(0)
            ax.errorbar([r["mean_k"]], [r["e2e_pct"]], yerr=err, marker="o", capsize=3, ls="none",
                        color=method_color(str(r["method"])), label=r["method"])  # fmt: skip
        ax.set_xscale("log")
        ax.set_xlabel("mean K (log scale)")
        ax.set_ylabel("end-to-end % (gold shown and chosen)")
        ax.set_title(f"{cond}: {chooser}", fontsize=9)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle("End-to-end accuracy against mean shortlist depth per method (whiskers: 95% query bootstrap)")
    fig.tight_layout()
    save_png(fig, out_png)
    atomic_write_csv(t1.assign(chooser=chooser), out_png.with_suffix(".csv"))
    return t1


def outcome_sentence(paired: pd.DataFrame, chooser: str) -> str:
    """The one computed sentence: is BoR a good proxy for what this chooser needs?"""
    if paired.empty:
        return f"No outcome-trained policy ran for {chooser}."
    better = paired[paired["e2e_diff_lo"] > 0]
    worse = paired[paired["e2e_diff_hi"] < 0]
    return (
        f"With {chooser}, policies trained on its own outcome (end-to-end minus 0.01 per extra tool) against the same "
        f"kinds trained on BoR: significantly higher end-to-end accuracy in {len(better)} of {len(paired)} "
        f"(condition, kind) pairs, significantly lower in {len(worse)}, no clear difference in "
        f"{len(paired) - len(better) - len(worse)}; mean K moves by "
        + ", ".join(f"{r['condition']} {r['kind']} {r['k_diff']:+.2f}" for _, r in paired.iterrows())
        + "."
    )


def outcome_lines(paired: pd.DataFrame) -> Table:
    rows = [[r["condition"], r["kind"], f"{r['e2e_diff']:+.1f} [{r['e2e_diff_lo']:+.1f}, {r['e2e_diff_hi']:+.1f}]",
             f"{r['k_diff']:+.2f} [{r['k_diff_lo']:+.2f}, {r['k_diff_hi']:+.2f}]"] for _, r in paired.iterrows()]  # fmt: skip
    return Table(["condition", "kind", "end-to-end %: outcome - BoR [95% paired]", "mean K: outcome - BoR"], rows)


def sensitivity_lines(sens: pd.DataFrame) -> Section:
    if sens.empty:
        return Section(SENSITIVITY_HEADING)
    rows = [[r["condition"], f"{r['strength']:g} (b = {r['b']:.3f})", str(int(r["best_fixed_k"])),
             f"{r['best_fixed_e2e_pct']:.1f}", f"{r['best_bor_method']} {r['best_bor_e2e_pct']:.1f} (K {r['best_bor_mean_k']:.2f})",
             f"{r['best_outcome_method']} {r['best_outcome_e2e_pct']:.1f} (K {r['best_outcome_mean_k']:.2f})"]
            for _, r in sens.iterrows()]  # fmt: skip
    moved = sens.groupby("condition")["best_fixed_k"].agg(["min", "max"])
    header = ["condition", "distraction strength", "best fixed K", "its end-to-end %", "best BoR-trained method",
              "best outcome-trained rule"]  # fmt: skip
    what = (
        "The simulated chooser's K penalty b (its distraction strength) multiplied by the strength; everything else "
        "as fitted to the paper's Table 1 (`choosers/simulated.py`). The best fixed K is the K with the "
        "highest end-to-end minus 0.01 per extra tool on these queries (in-sample); the outcome-trained column fits "
        "the threshold and greedy-K rules to this chooser's outcome (cross-fitted). Not evidence about any real model."
    )
    ranges = (
        "The best fixed K ranges over "
        + ", ".join(f"{c} {int(r['min'])}-{int(r['max'])}" for c, r in moved.iterrows())
        + " across the strengths."
    )
    return Section(SENSITIVITY_HEADING, [Paragraph(what), Table(header, rows), Paragraph(ranges)])


SENSITIVITY_HEADING = "Sensitivity: the simulated chooser (not an LLM)"


def calls_lines(choices: pd.DataFrame, rows: pd.DataFrame, chooser: str) -> Paragraph:
    """How many requests the study made against how many a per-method study would make, and what the cache saved
    this run (every count computed from the tables)."""
    asked = len(choices)
    fresh = int((choices["cached"] == 0).sum()) if "cached" in choices else asked
    per_method = int(rows["presented"].sum())  # one request per (method, seed, query) whose shortlist holds the gold
    naive = per_method + asked  # plus the choice-vs-K curve: every (query, K) holding the gold, the shared set itself
    return Paragraph(
        f"Requests: {asked:,} distinct (query, K) shortlists hold the gold tool at K <= 20 and were asked of {chooser} "
        f"({fresh:,} this run, {asked - fresh:,} read from the cache). Every method's shortlist is a prefix of one "
        f"ranking, so the methods and the choice-vs-K curve share them: asked once per (method, seed, query) whose "
        f"shortlist holds the gold ({per_method:,}) plus the curve ({asked:,}), the same tables would take "
        f"{naive:,} requests ({naive / max(asked, 1):.1f} times as many)."
    )


def answer_rows(t1: pd.DataFrame, paired: pd.DataFrame, choices: pd.DataFrame, chooser: str) -> list[str]:
    """The sentences the results overview shows (answer.csv): per condition the best end-to-end method beside
    fixed K = 1 and 5 (the simple rules), and how the chooser's accuracy given presence falls with K."""
    out = []
    acc = choices.groupby(["condition", "k"])["correct"].mean()
    for cond, g in t1.groupby("condition", sort=False):
        best = g.loc[g["e2e_pct"].idxmax()]
        fixed = g.set_index("method")
        rules = "".join(f"; fixed K = {k} {_ci(fixed.loc[f'fixed-{k}'], 'e2e_pct')}" for k in (1, 5)
                        if f"fixed-{k}" in fixed.index)  # fmt: skip
        shown = acc.loc[cond] if cond in acc.index else pd.Series(dtype=float)
        falls = ", ".join(f"{100 * shown[k]:.0f}% at K = {k}" for k in (1, 2, 5, 20) if k in shown.index)
        out.append(
            f"Downstream ({chooser}, {cond}), end-to-end % (gold shown and chosen): highest {best['method']} "
            f"{_ci(best, 'e2e_pct')} at mean K {best['mean_k']:.2f}{rules}"
            + (f". Given the gold is shown, the chooser picks it {falls}." if falls else ".")
        )
    out.append(outcome_sentence(paired, chooser))
    return out


def fmt_pct(x: float) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{x:.1f}"


def downstream_title(chooser_kind: str) -> str:
    """The page's title: the question it answers, for an LLM chooser or for the simulated one."""
    return f"Does a shorter list help the {'simulated chooser' if chooser_kind == 'simulated' else 'LLM'}"


def write_downstream_report(
    out: Path,
    rows: pd.DataFrame,
    choices: pd.DataFrame,
    sens: pd.DataFrame,
    chooser: str,
    command: str,
    chooser_kind: str,
) -> None:
    """Every table of the downstream folder (``choices.csv`` committed so that a rerun asks nothing), the figures,
    ``answer.csv`` (the overview's sentences) and the page (README.md). ``chooser`` names the chooser in the
    tables; ``chooser_kind`` (``simulated``, ``local``, ``openai``) titles the page."""
    from experiments.report.downstream_tables import choice_curve, paired_outcome, query_means, table1

    t1 = table1(rows).assign(chooser=chooser)
    by_bucket = table1(rows, ("condition", "method", "bucket")).assign(chooser=chooser)
    medium = by_bucket[by_bucket["bucket"] == "medium"]
    curve = choice_curve(choices)
    paired = paired_outcome(query_means(rows)).assign(chooser=chooser)
    answer = answer_rows(t1, paired, choices, chooser)
    tables = {"table1": t1, "buckets_table1": by_bucket, "choices": choices, "curve": curve, "outcome": paired,
              "sensitivity": sens, "answer": pd.DataFrame({"sentence": answer})}  # fmt: skip
    for name, df in tables.items():
        atomic_write_csv(df, out / f"{name}.csv")
    methods_figure(t1, chooser, out / "figures" / "end_to_end.png")
    curve_figure(curve, chooser, out / "figures" / "choice_vs_k.png")
    page = Page(
        title=downstream_title(chooser_kind),
        group="downstream",
        lede="Does a shorter list help the LLM pick the right tool?",
        answer=Section("", [Paragraph(f"**Answer** (chooser: {chooser}):"), Bullets(answer)]),
        sections=(
            Section("Table 1: presented, chosen, end to end", [
                Paragraph(
                    "Per method: mean K, the share of test queries whose shortlist holds the gold tool (presented), "
                    "the share of those where the chooser called the gold tool (choice, given presented) and the "
                    "share of all queries where both held (end to end), with 95% query-bootstrap intervals (each "
                    "query's seeds averaged first); beside the paper's Table 1 (Claude Sonnet 4.6, BFCL, N = 370, "
                    "120 test queries, 3 seeds). `table1.csv`, per bucket `buckets_table1.csv`."
                ),
                table1_lines(t1, medium),
                Figure("figures/end_to_end.png", "end to end"),
            ]),
            Section("The cost of distraction: choice accuracy against K", [
                Paragraph(
                    "For every test query and K <= 20 whose top K holds the gold: does the chooser pick it? Grouped "
                    "by the gold's position in the ranking (`curve.csv`; points with at least 5 shortlists drawn)."
                ),
                Figure("figures/choice_vs_k.png", "choice vs K"),
            ]),
            Section("Outcome-trained against BoR-trained depth", [
                Paragraph(outcome_sentence(paired, chooser)),
                Paragraph(
                    "The outcome reward is 1 when the chooser picks the gold from the top K, minus 0.01 per extra "
                    "tool (`envs.terminal_payoffs`). The chooser answers for the test queries only, so the "
                    "outcome-trained policies are cross-fitted over five folds of them (each query's depth comes "
                    "from a policy fitted on the other four; one seed); the BoR-trained ones are the cells above, "
                    "trained on the training split. Paired over test queries (`outcome.csv`)."
                ),
                outcome_lines(paired),
            ]),
            sensitivity_lines(sens),
            Section("How these numbers were made", [
                Paragraph(
                    "Generated by `shortlist downstream`; do not edit by hand. The methods are retrained in the "
                    "paper's Table 1 setting (step cost 0.01, gamma 0.95) with the shortlist capped at 20 tools, on "
                    "split 0 of BFCL (280 training, 120 test queries), seeds as in the manifest. Every shortlist is "
                    "the top K of the condition's ranking with BFCL's own descriptions and parameter schemas, the "
                    "same for every method."
                ),
                calls_lines(choices, rows, chooser),
                Paragraph(f"Command: `{command}`"),
            ]),
        ),
    )  # fmt: skip
    write_page(out, page)
