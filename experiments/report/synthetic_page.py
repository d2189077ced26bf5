"""The controlled-difficulty synthetic study: how close each learner gets to the Bayes optimum.

Pure functions (no argument parsing, no runner): the grid of synthetic conditions, the
table of every method's mean reward as a fraction of the Bayes-optimal reward
(:class:`agents.bayes.BayesOptimal`, method ``bayes``), its page sections, and its figures.
The grid itself is part of the study plan (:mod:`experiments.plan`).

Fraction of the Bayes optimum, per condition c and method m:

    ``F(c, m) = mean_q r_m(q) / mean_q r_bayes(q)``

over the test queries q of c, with ``r(q)`` the per-query net reward of
:func:`agents.evaluation.score_depths` (the judged quantity, ``reward_net``: found x -log2 P_rand(K)
minus the step cost per extra item) averaged over the method's seeds; ``bayes`` is the Bayes-optimal
policy of that same objective, so it is the limit every method is a fraction of. The learners train on
that objective too (gamma 1, the same step cost), so their training-objective optimum is the same policy. The interval is a
paired percentile bootstrap over test queries: each resample draws queries with
replacement and recomputes both means on the SAME queries (seeded ``numpy`` Generator).
In expectation F <= 1 for every score-only method; the oracle (reads labels) can exceed it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from agents.evaluation import depth_spread
from benchmarks.synthetic import parse_variant
from experiments.figures import method_color
from experiments.io import atomic_write_csv, save_png
from experiments.plan import DQN_SUBSET, SYNTHETIC_AXES, SYNTHETIC_BASE, SYNTHETIC_GRID
from experiments.report.markdown import fmt
from experiments.report.page import Block, Bullets, Figure, Page, Paragraph, Section, Table, write_page
from experiments.report.tables import query_resamples, ratio_interval

__all__ = [
    "BAYES_METHOD",
    "DQN_SUBSET",
    "SYNTHETIC_AXES",
    "SYNTHETIC_BASE",
    "SYNTHETIC_GRID",
    "bayes_fraction_table",
    "condition_variant",
    "synthetic_figures",
    "synthetic_markdown",
]

BAYES_METHOD = "bayes"
CONDITION_PREFIX = "synthetic-gen-"

_REQUIRED = ("condition", "method", "seed", "qid", "reward_net", "reward", "k", "n")
#: The learned policies whose fraction the goal reads.
LEARNED = ("bor-dqn", "bor-tabular", "bor-cutoff", "bor-posterior")
#: Goal, stated before running: the best learned policy reaches this fraction of the Bayes optimum ...
GOAL_FRACTION = 0.97
#: ... at every difficulty, at every training size >= this, and at every label-noise rate <= this.
GOAL_MIN_TRAIN, GOAL_MAX_NOISE = 200, 0.1


def condition_variant(condition: str) -> str | None:
    """The spec variant of a ``synthetic-gen-<variant>`` condition name, else None."""
    return condition[len(CONDITION_PREFIX) :] if condition.startswith(CONDITION_PREFIX) else None


def _spec_columns(condition: str) -> dict[str, object]:
    variant = condition_variant(condition)
    try:
        spec = parse_variant(variant) if variant else None
    except ValueError:
        spec = None
    if spec is None:
        return {"variant": None}
    return {
        "variant": variant,
        "n_candidates": spec.n,
        "separation": spec.separation,
        "distribution": spec.distribution if spec.distribution == "normal" else f"t{spec.df:g}",
        "ties": spec.ties,
        "train": spec.train if spec.train is not None else math.nan,
        "noise": spec.noise,
    }


def bayes_fraction_table(
    per_query: pd.DataFrame,
    *,
    bayes: str = BAYES_METHOD,
    n_boot: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> pd.DataFrame:
    """Each method's mean reward as a fraction of the Bayes-optimal reward, per condition.

    Args:
        per_query: long rows (one per condition x method x seed x test query) with at least
            ``condition, method, seed, qid, reward, k, n`` (:func:`agents.evaluation.score_depths`).
        bayes: the method name of the Bayes-optimal policy (must be present in every condition).
        n_boot: bootstrap resamples of the test queries.
        level: interval level.
        seed: seed of the bootstrap Generator (``default_rng(seed)`` per condition, so a
            condition's interval does not depend on which other conditions are present).

    Returns:
        One row per (condition, method), the Bayes row included (fraction 1): ``n_seeds,
        n_queries, mean_reward_net, bayes_reward_net, mean_reward (cost-free), fraction, fraction_lo, fraction_hi, found_pct,
        mean_k, median_k, p90_k, whole_list_pct`` (K == N), plus the condition's spec fields
        (``variant, n_candidates, separation, distribution, ties, train, noise``) when its
        name is ``synthetic-gen-<variant>``. K statistics pool all seeds' rows; rewards are
        first averaged over seeds per query.

    Raises:
        ValueError: missing columns, a condition without Bayes rows, or a method whose
            queries differ from Bayes's.
    """
    missing = [c for c in _REQUIRED if c not in per_query.columns]
    if missing:
        raise ValueError(f"per-query rows lack column(s) {', '.join(missing)}")
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must lie in (0, 1), got {level}")
    if n_boot < 1:
        raise ValueError(f"n_boot must be >= 1, got {n_boot}")
    rows = []
    for condition, cdf in per_query.groupby("condition", sort=True):
        per_method = {m: g.groupby("qid", sort=True)["reward_net"].mean() for m, g in cdf.groupby("method", sort=True)}
        if bayes not in per_method:
            raise ValueError(f"condition {condition!r} has no {bayes!r} rows to compare with")
        base = per_method[bayes]
        q = len(base)
        idx = query_resamples(q, n_boot, seed)
        b = base.to_numpy(dtype=np.float64)
        b_mean = float(b.mean())
        spec_cols = _spec_columns(str(condition))
        for method, rewards in per_method.items():
            if not rewards.index.equals(base.index):
                raise ValueError(
                    f"condition {condition!r}: method {method!r} was scored on other queries than {bayes!r}"
                )
            r = rewards.to_numpy(dtype=np.float64)
            g = cdf[cdf["method"] == method]
            k = g["k"].to_numpy(dtype=np.float64)
            frac, lo, hi = ratio_interval(r, b, idx, level)
            rows.append(
                {
                    "condition": condition,
                    "method": method,
                    "n_seeds": int(g["seed"].nunique()),
                    "n_queries": q,
                    "mean_reward_net": float(r.mean()),
                    "bayes_reward_net": b_mean,
                    "mean_reward": float(g["reward"].mean()),
                    "fraction": frac,
                    "fraction_lo": float(lo),
                    "fraction_hi": float(hi),
                    "found_pct": 100.0 * float(g["found"].mean()) if "found" in g else math.nan,
                    "mean_k": float(k.mean()),
                    **depth_spread(k, g["n"].to_numpy()),
                    **spec_cols,
                }
            )
    return pd.DataFrame(rows)


def _f(x: float, digits: int = 3) -> str:
    return fmt(x, nd=digits)


def synthetic_markdown(
    table: pd.DataFrame, title: str = "Synthetic benchmark: fraction of the Bayes optimum"
) -> Section:
    """A page section: what the fractions are, then one subsection per condition with its table of
    :func:`bayes_fraction_table` rows (Bayes first)."""
    intro = Paragraph(
        "Mean per-query net reward of each method as a fraction of the Bayes-optimal policy's on the same test "
        "queries (the exact optimum of every score-only policy under the known generator), with a paired "
        "bootstrap 95% interval over test queries. K statistics pool seeds; 'whole list' = share of queries "
        "shown all N candidates."
    )
    if table.empty:
        return Section(title, [intro, Paragraph("(no synthetic results)")])
    subsections = []
    header = ["method", "fraction of Bayes [95% CI]", "net reward", "mean K", "median K", "p90 K", "whole list %",
              "seeds"]  # fmt: skip
    for condition, g in table.groupby("condition", sort=True):
        g = g.assign(_b=g["method"] != BAYES_METHOD).sort_values(["_b", "fraction"], ascending=[True, False])
        rows = [
            [r["method"], f"{_f(r['fraction'])} [{_f(r['fraction_lo'])}, {_f(r['fraction_hi'])}]",
             _f(r["mean_reward_net"]), _f(r["mean_k"], 2), _f(r["median_k"], 1), _f(r["p90_k"], 1),
             _f(r["whole_list_pct"], 1), int(r["n_seeds"])]
            for _, r in g.iterrows()
        ]  # fmt: skip
        subsections.append(Section(str(condition), [Table(header, rows)]))
    return Section(title, [intro], subsections)


_FIGURES = {
    "difficulty": ("synthetic_difficulty", "separation d' (distractor sd units)", False),
    "train": ("synthetic_train_size", "training queries", True),
    "noise": ("synthetic_label_noise", "label-noise rate of training labels", False),
}


def _axis_points(table: pd.DataFrame, field: str, variants: Sequence[str]) -> pd.DataFrame:
    order = {v: i for i, v in enumerate(variants)}
    t = table.assign(variant=[condition_variant(str(c)) for c in table["condition"]])
    t = t[t["variant"].isin(order)]
    specs = [parse_variant(v) for v in t["variant"]]
    if field == "distribution":  # the tied-distractor variant is also "normal": name its ties
        x: list[object] = [f"{sp.distribution}" + (f" with {sp.ties:g} ties" if sp.ties else "") for sp in specs]
    else:
        x = [getattr(sp, field) for sp in specs]
    return t.assign(x=x)


#: Methods drawn in the synthetic figures (every method is in the tables).
FIGURE_METHODS = (
    "bor-dqn",
    "bor-tabular",
    "bor-cutoff",
    "bor-posterior",
    "bor-choppy",
    "bor-threshold",
    "bor-topp",
    "bor-greedyk",
    "gap-tail10-buffer5",
    "bor-dp",
)


def synthetic_figures(
    table: pd.DataFrame,
    out_dir: Path,
    axes: Mapping[str, tuple[str, Sequence[str]]] | None = None,
    methods: Sequence[str] | None = None,
) -> list[Path]:
    """Fraction of the Bayes optimum against difficulty, training-set size and label noise.

    One PNG per axis of ``axes`` (default :data:`SYNTHETIC_AXES`; the difficulty, train and
    noise axes) with at least one point, each with a sibling CSV of exactly the plotted
    numbers (``axis, x_field, x, condition, method, fraction, fraction_lo, fraction_hi``).
    Files are written atomically. The Bayes line (fraction 1) is the dashed reference.

    Returns:
        The written paths (PNG, CSV, PNG, CSV, ...).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes = SYNTHETIC_AXES if axes is None else axes
    out_dir = Path(out_dir)
    written: list[Path] = []
    for axis, (stem, xlabel, logx) in _FIGURES.items():
        if axis not in axes:
            continue
        field, variants = axes[axis]
        pts = _axis_points(table, field, variants)
        pts = pts[pts["method"] != BAYES_METHOD]
        if methods is not None:
            pts = pts[pts["method"].isin(methods)]
        if pts.empty:
            continue
        pts = pts.sort_values(["method", "x"])
        csv = pts.assign(axis=axis, x_field=field)[
            ["axis", "x_field", "x", "condition", "method", "fraction", "fraction_lo", "fraction_hi"]
        ].reset_index(drop=True)
        fig, ax = plt.subplots(figsize=(6.4, 4.2))
        for method, g in csv.groupby("method", sort=True):
            y = g["fraction"].to_numpy(dtype=float)
            err = np.vstack([y - g["fraction_lo"].to_numpy(dtype=float), g["fraction_hi"].to_numpy(dtype=float) - y])
            x = g["x"].to_numpy(dtype=float)
            ax.errorbar(
                x, y, yerr=np.maximum(err, 0.0), marker="o", capsize=3, label=method, color=method_color(method)
            )
        ax.axhline(1.0, color="black", linestyle="--", linewidth=1, label="Bayes optimum")
        if logx:
            ax.set_xscale("log", base=2)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("net reward / Bayes-optimal net reward")
        ax.set_title(f"Synthetic benchmark: fraction of the Bayes optimum against {xlabel}", fontsize=9)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        png, csv_path = out_dir / f"{stem}.png", out_dir / f"{stem}.csv"
        save_png(fig, png)
        atomic_write_csv(csv, csv_path)
        written += [png, csv_path]
    return written


def _axis_summary(table: pd.DataFrame) -> list[str]:
    """One computed sentence per axis (a list item each): at each point, the best score-only method's fraction
    of the Bayes optimum and each RL agent's, with their paired query-bootstrap intervals."""
    lines = []
    above: set[str] = set()
    above_within: set[str] = set()

    def frac(r: pd.Series) -> str:
        return f"{r['method']} {r['fraction']:.3f} [{r['fraction_lo']:.3f}, {r['fraction_hi']:.3f}]"

    for axis, (field, variants) in SYNTHETIC_AXES.items():
        pts = _axis_points(table, field, variants)
        pts = pts[~pts["method"].isin([BAYES_METHOD, "oracle"])]
        if pts.empty:
            continue
        parts = []
        for x, g in pts.groupby("x", sort=True):
            best = g.loc[g["fraction"].idxmax()]
            rl = [frac(r) for _, r in g[g["method"].isin(["bor-tabular", "bor-dqn"])].iterrows()]
            parts.append(f"{field} {x}: best {frac(best)}" + (f"; RL: {', '.join(rl)}" if rl else ""))
            if best["fraction"] > 1.0:  # a condition on several axes (the base point) is counted once
                above.add(str(best["condition"]))
                if best["fraction_lo"] <= 1.0:
                    above_within.add(str(best["condition"]))
        lines.append(f"**{axis}** (best method other than the limits that read labels): " + "; ".join(parts) + ".")
    if above:
        lines.append(
            f"On {len(above)} distinct condition(s) the best fraction lies above 1; on {len(above_within)} of them "
            "its interval holds 1 "
            "(the Bayes policy is optimal in expectation; on a finite test set a method can beat it by chance)."
        )
    return lines


def goal_table(fr: pd.DataFrame) -> pd.DataFrame:
    """The synthetic goal, per point it names (every difficulty; training sizes >= :data:`GOAL_MIN_TRAIN`;
    noise rates <= :data:`GOAL_MAX_NOISE`): the best learned policy (:data:`LEARNED`) and its fraction of the
    Bayes optimum with the paired interval, and whether it reaches :data:`GOAL_FRACTION`."""
    rows = []
    for axis, keep in (("difficulty", lambda x: True), ("train", lambda x: x >= GOAL_MIN_TRAIN),
                       ("noise", lambda x: x <= GOAL_MAX_NOISE)):  # fmt: skip
        field, variants = SYNTHETIC_AXES[axis]
        pts = _axis_points(fr, field, variants)
        pts = pts[pts["method"].isin(LEARNED)]
        for x, g in pts.groupby("x", sort=True):
            if not keep(x):
                continue
            best = g.loc[g["fraction"].idxmax()]
            rows.append(
                {"axis": axis, "x_field": field, "x": x, "condition": best["condition"], "best_learned": best["method"],
                 "fraction": best["fraction"], "fraction_lo": best["fraction_lo"], "fraction_hi": best["fraction_hi"],
                 "met": bool(best["fraction"] >= GOAL_FRACTION)}
            )  # fmt: skip
    return pd.DataFrame(rows)


def goal_lines(goal: pd.DataFrame) -> list[Block]:
    if goal.empty:
        return []
    rows = [[r["axis"], f"{r['x_field']} = {r['x']}", r["best_learned"],
             f"{r['fraction']:.3f} [{r['fraction_lo']:.3f}, {r['fraction_hi']:.3f}]", "yes" if r["met"] else "no"]
            for _, r in goal.iterrows()]  # fmt: skip
    met = int(goal["met"].sum())
    return [
        Paragraph(
            f"**Answer.** Goal, stated before running: the best learned policy ({', '.join(LEARNED)}) reaches at "
            f"least {GOAL_FRACTION} of the Bayes optimum of the judged net reward at every difficulty, every training "
            f"size >= {GOAL_MIN_TRAIN} and every label-noise rate <= {GOAL_MAX_NOISE}: met at {met} of {len(goal)} "
            "points"
            + (" (goal met)." if met == len(goal) else " (goal NOT met).")
            + " The best learned policy is chosen per point on the test queries (it favours it slightly); `goal.csv`."
        ),
        Table(["axis", "point", "best learned policy", "fraction of Bayes [95% paired]", ">= goal"], rows),
    ]


def write_synthetic_report(out: Path, per_query: pd.DataFrame, title: str = "Known optimum") -> Path | None:
    """``out/synthetic/``: fractions.csv, goal.csv, figures and the page ``README.md`` titled ``title`` (the
    study names its scope in it); None when the synthetic study did not run, else the page."""
    syn = per_query[per_query["condition"].astype(str).str.startswith(CONDITION_PREFIX)]
    if syn.empty:
        return None
    folder = out / "synthetic"
    table = bayes_fraction_table(syn)
    goal = goal_table(table)
    atomic_write_csv(table, folder / "fractions.csv")
    atomic_write_csv(goal, folder / "goal.csv")
    figs = synthetic_figures(table, folder / "figures", methods=FIGURE_METHODS)
    pngs = [p for p in figs if p.suffix == ".png"]
    how = Paragraph(
        "Generated by `shortlist reproduce` from the run directories under `../runs/` (indexed in `../runs.csv`); "
        "do not edit by hand. "
        "Score lists come from a known generator (`benchmarks/synthetic.py`: N candidates, the gold's score "
        "shifted by d' distractor standard deviations; normal, Student-t or tied distractors; training labels "
        "optionally replaced by a random candidate). Because the generator is known, the Bayes-optimal depth "
        "(`agents/bayes.py`: exact posterior of the gold's rank given the whole list, then the K with the highest "
        "expected net reward) is the true ceiling of every score-only policy on the judged objective; the learners "
        "train on that same objective (gamma 1, the same step cost), so it is also their training-objective optimum. "
        "The oracle reads labels and may exceed it."
    )
    page = Page(
        title=title,
        group="study",
        lede="A synthetic benchmark with a known optimum: every method against the Bayes optimum.",
        answer=Section("", goal_lines(goal)),
        sections=(
            Section("", [how, Paragraph("Per axis:"), Bullets(_axis_summary(table))]),
            Section("", [Figure(f"figures/{p.name}", p.stem) for p in pngs]),
            synthetic_markdown(table, title="Every condition and method"),
        ),
    )
    return write_page(folder, page)
