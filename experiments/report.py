"""Aggregation across seeds, figures (each with a sibling CSV of the plotted numbers) and the
generated README of a results folder. Nothing here is written by hand."""

from __future__ import annotations

import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from agents.evaluation import BUCKET_ORDER, bootstrap_ci  # noqa: E402
from benchmarks.atomic import atomic_path  # noqa: E402
from experiments.paper import PAPER  # noqa: E402
from experiments.runner import atomic_write_csv, atomic_write_text  # noqa: E402

METRICS = ("found_pct", "mean_k", "bor_bits", "mean_reward")


def save_png(fig: plt.Figure, out_png: Path) -> None:
    """Write a figure atomically (:func:`benchmarks.atomic.atomic_path`) and close it."""
    try:
        with atomic_path(out_png, ".png") as tmp:
            fig.savefig(tmp, dpi=110, format="png", bbox_inches="tight")
    finally:
        plt.close(fig)


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


def _fmt(x: float, lo: float | None = None, hi: float | None = None, nd: int = 1) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    s = f"{x:.{nd}f}"
    if lo is not None and hi is not None and not (math.isnan(lo) or math.isnan(hi)) and hi - lo > 0:
        s += f" [{lo:.{nd}f}, {hi:.{nd}f}]"
    return s


def bucket_figure(buckets: pd.DataFrame, condition: str, methods: list[str], out_png: Path) -> pd.DataFrame:
    """Paper Figure 1 style: per difficulty bucket, found % and mean K per method (mean over seeds).

    Writes ``out_png`` and a sibling CSV with exactly the plotted numbers; returns that table.
    """
    b = buckets[(buckets["condition"] == condition) & (buckets["method"].isin(methods))]
    plotted = (
        b.groupby(["method", "bucket"], sort=False)
        .agg(
            n=("n", "first"),
            found_pct=("found_pct", "mean"),
            mean_k=("mean_k", "mean"),
            found_pct_min=("found_pct", "min"),
            found_pct_max=("found_pct", "max"),
            mean_k_min=("mean_k", "min"),
            mean_k_max=("mean_k", "max"),
        )
        .reset_index()
    )
    present = [x for x in BUCKET_ORDER if x in set(plotted["bucket"])]
    plotted["bucket"] = pd.Categorical(plotted["bucket"], present, ordered=True)
    plotted["method"] = pd.Categorical(plotted["method"], methods, ordered=True)
    plotted = plotted.sort_values(["method", "bucket"]).reset_index(drop=True)
    plotted.insert(0, "condition", condition)
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / max(1, len(methods))
    x = np.arange(len(present))
    for i, m in enumerate(methods):
        sub = plotted[plotted["method"] == m].set_index("bucket").reindex(present)
        for ax, col in zip(axes, ("found_pct", "mean_k"), strict=True):
            mid = sub[col].to_numpy(dtype=float)
            err = np.vstack(
                [mid - sub[f"{col}_min"].to_numpy(dtype=float), sub[f"{col}_max"].to_numpy(dtype=float) - mid]
            )
            ax.bar(x + (i - (len(methods) - 1) / 2) * width, mid, width, yerr=err, label=m, capsize=2)
    ns = plotted.drop_duplicates("bucket").set_index("bucket")["n"].reindex(present)
    labels = [f"{bk}\n(n={int(n)})" for bk, n in zip(present, ns, strict=True)]
    for ax, title in zip(axes, ("found % (shortlist holds the gold tool)", "mean K (shortlist depth)"), strict=True):
        ax.set_xticks(x, labels)
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylim(0, 105)
    axes[1].set_yscale("log")
    axes[1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle(
        f"{condition}: difficulty buckets by the scorer's rank of the gold tool "
        "(bars: mean over seeds; whiskers: min-max)"
    )
    fig.tight_layout()
    save_png(fig, out_png)
    out = plotted.copy()
    out["bucket"] = out["bucket"].astype(str)
    out["method"] = out["method"].astype(str)
    atomic_write_csv(out, out_png.with_suffix(".csv"))
    return out


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


def best_fixed(agg: pd.DataFrame, cond: str, by: str) -> pd.Series:
    f = agg[(agg["condition"] == cond) & agg["method"].str.startswith("fixed-")]
    return f.loc[f[by].idxmax()]


def write_report(
    out: Path,
    per_query: pd.DataFrame,
    summary: pd.DataFrame,
    buckets: pd.DataFrame,
    title: str,
    notes: dict[str, str] | None = None,
    preamble: list[str] | None = None,
    order: list[str] | None = None,
) -> None:
    """aggregate.csv, scorer_strength.csv, figures/*.png (+csv) and README.md of a results folder."""
    agg = aggregate(summary)
    atomic_write_csv(agg, out / "aggregate.csv")
    strength = scorer_strength(per_query)
    atomic_write_csv(strength, out / "scorer_strength.csv")
    lines = [
        f"# {title}",
        "",
        "Generated by `shortlist reproduce` from the run directories under `runs/`; "
        "do not edit by hand. Found % and mean K are on the test split; each cell is the mean over seeds "
        'with a seeded bootstrap 95% interval in brackets. "BoR bits" is the aggregate '
        'log2(mean found / mean P_rand) and "mean reward" the mean per-query BoR reward; they are '
        "different quantities and can rank methods differently.",
        "",
    ]
    lines += preamble or []
    present = list(agg["condition"].unique())
    ranked = [c for c in (order or []) if c in present] + sorted(c for c in present if c not in (order or []))
    for cond in ranked:
        a = agg[agg["condition"] == cond].copy()
        a["_order"] = a["method"].map(
            lambda m: (m.startswith("fixed-"), int(m.split("-")[1]) if m.startswith("fixed-") else 0, m)
        )
        a = a.sort_values("_order")
        s = strength[strength["condition"] == cond].iloc[0]
        lines += [
            f"## {cond}",
            "",
            f"Scorer alone on the {int(s['n_test'])} test queries: found@1 {s['found@1']:.1f}%, "
            f"found@3 {s['found@3']:.1f}%, found@5 {s['found@5']:.1f}%, found@20 {s['found@20']:.1f}%, "
            f"found@50 {s['found@50']:.1f}%.",
            "",
            "| method | seeds | found % | mean K | BoR bits | mean reward | ceiling |",
            "|---|---|---|---|---|---|---|",
        ]
        for _, r in a.iterrows():
            lines.append(
                f"| {r['method']} | {int(r['n_seeds'])} | {_fmt(r['found_pct'], r['found_pct_lo'], r['found_pct_hi'])} | "
                f"{_fmt(r['mean_k'], r['mean_k_lo'], r['mean_k_hi'], 2)} | {_fmt(r['bor_bits'], r['bor_bits_lo'], r['bor_bits_hi'], 2)} | "
                f"{_fmt(r['mean_reward'], r['mean_reward_lo'], r['mean_reward_hi'], 2)} | {r['bor_ceiling']:.2f} |"
            )
        paper = PAPER.get(cond)
        if paper:
            lines += [
                "",
                "Beside the paper (SPEC section 6):",
                "",
                "| | paper found % | paper mean K | ours found % | ours mean K | diff found (pts) |",
                "|---|---|---|---|---|---|",
            ]
            for key, method in (("bor", "bor-dqn"), ("f1", "f1-dqn")):
                if key in paper and method in set(a["method"]):
                    p, o = paper[key], a[a["method"] == method].iloc[0]
                    psd = f" +- {p['found_sd']}" if "found_sd" in p else ""
                    ksd = f" +- {p['k_sd']}" if "k_sd" in p else ""
                    lines.append(
                        f"| {method} | {p['found_pct']}{psd} | {p['mean_k']}{ksd} | "
                        f"{_fmt(o['found_pct'], o['found_pct_lo'], o['found_pct_hi'])} | "
                        f"{_fmt(o['mean_k'], o['mean_k_lo'], o['mean_k_hi'], 2)} | {o['found_pct'] - p['found_pct']:+.1f} |"
                    )
            bf = paper.get("best_fixed")
            if bf:
                mine = a[a["method"] == f"fixed-{bf['k']}"]
                if len(mine):
                    lines.append(
                        f"| fixed-{bf['k']} (paper's best fixed K) | {bf['found_pct']} | {bf['k']} | "
                        f"{mine.iloc[0]['found_pct']:.1f} | {bf['k']} | {mine.iloc[0]['found_pct'] - bf['found_pct']:+.1f} |"
                    )
            if "found_at_1" in paper:
                lines.append(
                    f"| scorer found@1 | {paper['found_at_1']} | 1 | {s['found@1']:.1f} | 1 | {s['found@1'] - paper['found_at_1']:+.1f} |"
                )
            if "found_at_5" in paper:
                lines.append(
                    f"| scorer found@5 | {paper['found_at_5']} | 5 | {s['found@5']:.1f} | 5 | {s['found@5'] - paper['found_at_5']:+.1f} |"
                )
        collapse = summary[(summary["condition"] == cond) & (summary["collapse_pct"] > 0)]
        if len(collapse):
            worst = collapse.groupby("method")["collapse_pct"].mean().sort_values(ascending=False)
            lines += [
                "",
                "Collapse-zone warning (expected random hits lambda = K R / N >= 3, no method can be "
                "selective there): " + ", ".join(f"{m} {v:.0f}% of queries" for m, v in worst.items()) + ".",
            ]
        methods = [
            m
            for m in ("bor-dqn", "f1-dqn", "constant-dqn", "bor-tabular", "fixed-1", "fixed-5")
            if m in set(a["method"])
        ]
        fig = out / "figures" / f"buckets_{cond}.png"
        bucket_figure(buckets, cond, methods, fig)
        lines += ["", f"![{cond} buckets](figures/{fig.name}) (numbers: `figures/{fig.with_suffix('.csv').name}`)", ""]
        b = buckets[(buckets["condition"] == cond) & buckets["method"].isin(methods)]
        pb = (
            b.groupby(["method", "bucket"])
            .agg(n=("n", "first"), found=("found_pct", "mean"), k=("mean_k", "mean"))
            .reset_index()
        )
        present = [x for x in BUCKET_ORDER if x in set(pb["bucket"])]
        lines += [
            "| method | "
            + " | ".join(f"{bk} (n={int(pb[pb['bucket'] == bk]['n'].iloc[0])}) found % / K" for bk in present)
            + " |",
            "|---|" + "---|" * len(present),
        ]
        for m in methods:
            cells = []
            for bk in present:
                r = pb[(pb["method"] == m) & (pb["bucket"] == bk)]
                cells.append(f"{r['found'].iloc[0]:.1f} / {r['k'].iloc[0]:.2f}" if len(r) else "-")
            lines.append(f"| {m} | " + " | ".join(cells) + " |")
        if notes and cond in notes:
            lines += ["", notes[cond]]
        lines.append("")
    if notes and "_all" in notes:
        lines += [notes["_all"], ""]
    atomic_write_text(out / "README.md", "\n".join(lines))
