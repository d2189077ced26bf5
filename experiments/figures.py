"""Comparison figures across methods, registries and scorers, each with a sibling CSV.

Every function takes frames in the package's long formats (``summary.csv``: one row per
condition x method x seed; ``per_query.csv``: one row per query x method x seed), writes
``out_png`` and ``out_png.with_suffix(".csv")`` holding exactly the plotted numbers, and
returns that table. Spread over runs (training seeds x train/test splits) is shown as min-max
whiskers around the mean over runs.

Iso-BoR lines. With one relevant item among N candidates the random baseline at depth K is
``P_rand = K / N``, so a method finding a fraction ``f`` of gold tools at mean depth ``K``
has ``BoR = log2(f / (K / N))`` (exact for adaptive depths too, since the mean of ``K_q / N``
is ``mean K / N``). The line of constant BoR ``b`` bits is therefore
``found % = 100 * 2**b * K / N``; it reaches 100% at ``K = N / 2**b``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axis import Axis  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.lines import Line2D  # noqa: E402
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from agents import registry  # noqa: E402
from agents.evaluation import BUCKET_ORDER  # noqa: E402
from agents.method import MethodSpec  # noqa: E402
from experiments.io import atomic_write_csv, save_png  # noqa: E402

#: Most iso-BoR lines drawn when the caller does not choose them.
MAX_ISO_LINES = 8
#: The registry groups in plot order, and how each is drawn in the Pareto view (marker, size).
GROUP_MARKERS: dict[str, tuple[str, int]] = {
    "baseline": ("o", 5),
    "agent": ("*", 13),
    "peer": ("s", 7),
    "limit": ("^", 9),
}
#: A palette of distinct colours (tab20, then tab20b) for the methods of :func:`method_colors`.
_PALETTE = [plt.get_cmap(name)(i) for name in ("tab20", "tab20b", "tab20c") for i in range(20)]


def _spec(method: str) -> MethodSpec | None:
    try:
        return MethodSpec.parse(method)
    except ValueError:  # a name no registered kind produces (e.g. a user's own label)
        return None


def _group(method: str) -> str:
    """The method's registry group (``agent``, ``peer``, ``baseline``, ``limit``); ``peer`` for a name
    no registered kind produces (a figure draws it as a peer)."""
    spec = _spec(method)
    return spec.group if spec is not None else "peer"


def fixed_k(method: str) -> int | None:
    """The value of the method's name field (fixed K's K: ``fixed-5`` -> 5), else None (from the registry)."""
    spec = _spec(method)
    return spec.k if spec is not None and spec.kind.name_field else None


def method_colors() -> dict[str, str]:
    """One colour per method name, the same in every figure: the methods of every registered kind in
    registry order (each training reward of a reward-trained kind: ``bor-``, ``f1-``, ``constant-``),
    coloured from a fixed palette; the fixed-K baselines in greys (darker for larger K)."""
    from matplotlib.colors import to_hex

    from rewards import REWARD_KINDS

    names = []
    for name, kind in registry.KINDS.items():
        if kind.name_field:
            continue
        names += [f"{r}-{name}" for r in REWARD_KINDS] if kind.uses_reward else [name]
    return {m: to_hex(_PALETTE[i % len(_PALETTE)]) for i, m in enumerate(names)}


def method_color(method: str) -> str:
    """:func:`method_colors` of ``method`` (a grey by K for fixed K; a palette colour picked by the name's
    characters for a name no registered kind produces)."""
    from matplotlib.colors import to_hex

    k = fixed_k(method)
    if k is not None:
        return to_hex(str(max(0.15, 0.75 - 0.12 * math.log2(k + 1))))
    known = method_colors()
    name = method.partition("@")[0]
    return known.get(name) or to_hex(_PALETTE[sum(map(ord, name)) % len(_PALETTE)])


def pareto_front(found: np.ndarray, k: np.ndarray) -> np.ndarray:
    """True where no other point has found >= and K <= with one of them strict."""
    f = np.asarray(found, dtype=float)[:, None]
    kk = np.asarray(k, dtype=float)[:, None]
    dom = (f.T >= f) & (kk.T <= kk) & ((f.T > f) | (kk.T < kk))
    return np.asarray(~dom.any(axis=1), dtype=bool)


def iso_bor_found_pct(bits: float, k: float | np.ndarray, n: int) -> float | np.ndarray:
    """Found % on the iso-BoR line of ``bits`` at depth ``k`` for one relevant among ``n``.

    ``found % = 100 * 2**bits * k / n`` (not clipped; values above 100 are unreachable).
    """
    return 100.0 * np.power(2.0, bits) * np.asarray(k, dtype=np.float64) / n


def candidate_set_size(per_query: pd.DataFrame, condition: str) -> int:
    """The single candidate-set size N of ``condition`` in a per-query frame.

    Raises:
        ValueError: if the condition is absent, its queries have different N, or some query has
            more than one relevant item (the iso-BoR lines assume R = 1).
    """
    g = per_query[per_query["condition"] == condition]
    if g.empty:
        raise ValueError(f"condition {condition!r} not in the per-query frame")
    sizes = sorted(set(g["n"].astype(int)))
    if len(sizes) != 1:
        raise ValueError(f"condition {condition!r} mixes candidate-set sizes {sizes}")
    if "r" in g and (g["r"] != 1).any():
        raise ValueError(f"condition {condition!r} has queries with R != 1; iso-BoR lines need R = 1")
    return sizes[0]


def run_spread(
    summary: pd.DataFrame, cols: Sequence[str], keys: Sequence[str] = ("condition", "method")
) -> pd.DataFrame:
    """Per group of ``keys``: ``n_runs`` and the mean, min and max over runs (training seeds x
    train/test splits) of each column."""
    agg: dict[str, tuple[str, str]] = {"n_runs": (cols[0], "size")}
    for c in cols:
        agg[c] = (c, "mean")
        agg[f"{c}_min"] = (c, "min")
        agg[f"{c}_max"] = (c, "max")
    return summary.groupby(list(keys), sort=True).agg(**agg).reset_index()


def with_splits(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with a ``split_seed`` column (0 when absent: rows of a single split, e.g. one run's)."""
    return df if "split_seed" in df.columns else df.assign(split_seed=0)


def bucket_spread(buckets: pd.DataFrame, keys: Sequence[str]) -> pd.DataFrame:
    """Per group of ``keys`` of a bucket table: its test-unit count ``n`` (queries in the bucket,
    summed over train/test splits) and :func:`run_spread` of found % and mean K."""
    spread = run_spread(buckets, ["found_pct", "mean_k"], keys)
    per_split = with_splits(buckets).groupby([*keys, "split_seed"], sort=True)["n"].first()
    n = per_split.groupby(list(keys), sort=True).sum().reset_index()
    return n.merge(spread, on=list(keys), validate="one_to_one")


def bucket_figure(buckets: pd.DataFrame, condition: str, methods: list[str], out_png: Path) -> pd.DataFrame:
    """Paper Figure 1 style: per difficulty bucket, found % and mean K per method (mean over runs).

    Writes ``out_png`` and a sibling CSV with exactly the plotted numbers; returns that table.
    """
    b = buckets[(buckets["condition"] == condition) & (buckets["method"].isin(methods))]
    plotted = bucket_spread(b, ("method", "bucket"))[
        ["method", "bucket", "n", "found_pct", "mean_k", "found_pct_min", "found_pct_max", "mean_k_min", "mean_k_max"]
    ]
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
            offset = (i - (len(methods) - 1) / 2) * width
            ax.bar(x + offset, mid, width, yerr=_whiskers(sub, col), label=m, capsize=2, color=method_color(m))
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
        f"{condition}: found % and mean K per difficulty bucket (the scorer's rank of the gold tool); "
        "bars: mean over runs, whiskers: min-max over runs"
    )
    fig.tight_layout()
    save_png(fig, out_png)
    out = plotted.copy()
    out["bucket"] = out["bucket"].astype(str)
    out["method"] = out["method"].astype(str)
    atomic_write_csv(out, out_png.with_suffix(".csv"))
    return out


def _save(fig: Figure, plotted: pd.DataFrame, out_png: Path) -> pd.DataFrame:
    """Atomically write the PNG and its sibling CSV; close the figure."""
    save_png(fig, Path(out_png))
    plotted = plotted.reset_index(drop=True)
    atomic_write_csv(plotted, out_png.with_suffix(".csv"))
    return plotted


def _whiskers(df: pd.DataFrame, col: str) -> np.ndarray:
    """Min-max whiskers around the mean; clipped at 0 (the mean of identical values can exceed
    their max by one ulp)."""
    mid = df[col].to_numpy(dtype=float)
    lo = mid - df[f"{col}_min"].to_numpy(dtype=float)
    hi = df[f"{col}_max"].to_numpy(dtype=float) - mid
    return np.clip(np.vstack([lo, hi]), 0.0, None)


def _plain_log_ticks(axis: Axis) -> None:
    """Ticks at 1, 2, 5 x 10^k written as plain numbers on a log-scaled axis."""
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def _default_bits(points: pd.DataFrame, n: int) -> list[int]:
    """Integer bit levels spanning the methods' own BoR (found / (K / N)), at most MAX_ISO_LINES."""
    f = points["found_pct"].to_numpy(dtype=float) / 100.0
    k = points["mean_k"].to_numpy(dtype=float)
    ok = (f > 0) & (k > 0)
    if not ok.any():
        return [0]
    b = np.log2(f[ok] * n / k[ok])
    lo, hi = max(0, math.floor(b.min())), max(0, math.ceil(b.max()))
    step = max(1, math.ceil((hi - lo + 1) / MAX_ISO_LINES))
    return list(range(lo, hi + 1, step))


def pareto_table(
    summary: pd.DataFrame, condition: str, n: int | None, bits: Sequence[int] | None = None
) -> pd.DataFrame:
    """The numbers of the Pareto view of one condition (see :func:`pareto_figure`): one row per method
    (``kind`` = its registry group; means and min/max over runs; ``pareto`` True on the front among
    every method but the label-reading limits) and one row per point of each iso-BoR line
    ``found % = 100 * 2**b * K / N`` (``kind`` iso_bor; none when ``n`` is None), in plot order."""
    s = summary[summary["condition"] == condition]
    if s.empty:
        raise ValueError(f"condition {condition!r} not in the summary")
    pts = run_spread(s, ["mean_k", "found_pct"])
    pts["kind"] = pts["method"].map(_group)
    order = sorted(pts["method"], key=lambda m: (list(GROUP_MARKERS).index(_group(m)), fixed_k(m) or 0, m))
    pts = pts.set_index("method").loc[order].reset_index()
    pts["bits"] = np.nan
    real = ~pts["method"].map(_reads_labels).to_numpy(dtype=bool)
    front = np.zeros(len(pts), dtype=bool)
    front[real] = pareto_front(pts.loc[real, "found_pct"].to_numpy(), pts.loc[real, "mean_k"].to_numpy())
    pts["pareto"] = front
    levels = [] if n is None else list(bits) if bits is not None else _default_bits(pts, n)
    x_lo, x_hi = _k_range(pts, n, levels)
    iso_rows = []
    for b in levels:
        right = min(x_hi, n / 2.0**b)  # type: ignore[operator] # where the line reaches 100% found
        if right <= x_lo:
            continue
        for k in np.geomspace(x_lo, right, 60):
            found = float(iso_bor_found_pct(b, k, n))  # type: ignore[arg-type]
            iso_rows.append(
                {"condition": condition, "method": f"iso-BoR {b} bits", "kind": "iso_bor", "bits": float(b),
                 "mean_k": float(k), "found_pct": found}
            )  # fmt: skip
    cols = ["condition", "kind", "method", "bits", "n_runs", "mean_k", "mean_k_min", "mean_k_max", "found_pct",
            "found_pct_min", "found_pct_max", "pareto"]  # fmt: skip
    plotted = pd.concat([pts, pd.DataFrame(iso_rows)], ignore_index=True).reindex(columns=cols)
    plotted["pareto"] = plotted["pareto"].fillna(False).astype(bool)
    plotted.insert(1, "n", n)
    return plotted


def _reads_labels(method: str) -> bool:
    spec = _spec(method)
    return spec is not None and spec.kind.reads_labels


def _k_range(pts: pd.DataFrame, n: int | None, levels: Sequence[int]) -> tuple[float, float]:
    """The x range of the Pareto view: every method's whiskers and every iso line's 100% point."""
    k_lo = float(pts["mean_k_min"].min())
    full = [n / 2.0**b for b in levels if n is not None and n / 2.0**b >= k_lo]
    return k_lo / 1.5, float(max(pts["mean_k_max"].max(), *full, k_lo)) * 1.5


def pareto_figure(
    summary: pd.DataFrame, condition: str, out_png: Path, n: int | None, bits: Sequence[int] | None = None
) -> pd.DataFrame:
    """Found % against mean K (log x) for every method of one condition, with iso-BoR lines.

    Each method is a point at its mean over runs with min-max whiskers over runs on both axes, in
    its own colour (:func:`method_color`) and its group's marker (:data:`GROUP_MARKERS`); the fixed-K
    baselines are joined as a curve; the Pareto front among every method but the label-reading limits
    is a step line. Writes ``out_png`` and the sibling CSV of :func:`pareto_table`; returns that table.

    Args:
        summary: Summary rows (``condition, method, seed, found_pct, mean_k, ...``).
        condition: The condition to plot.
        out_png: Output PNG; the plotted numbers go to the sibling ``.csv``.
        n: Candidate-set size N (see :func:`candidate_set_size` to take it from per-query rows), or None.
        bits: Integer bit levels of the iso-BoR lines; default: those spanning the methods' BoR.
    """
    plotted = pareto_table(summary, condition, n, bits)
    pts = plotted[plotted["kind"] != "iso_bor"]
    fig, ax = plt.subplots(figsize=(9.5, max(5.5, 0.22 * (len(pts) + 4))))
    _draw_iso_lines(ax, plotted[plotted["kind"] == "iso_bor"])
    _draw_methods(ax, pts)
    on_front = pts[pts["pareto"]].sort_values("mean_k")
    if len(on_front):
        ax.step(on_front["mean_k"], on_front["found_pct"], where="post", color="black", alpha=0.35, lw=1,
                label="Pareto front (label-reading limits excluded)", zorder=2)  # fmt: skip
    x_lo, x_hi = _k_range(pts, n, sorted(set(plotted["bits"].dropna().astype(int))))
    ax.set_xscale("log")
    ax.set_xlim(x_lo, x_hi)
    _plain_log_ticks(ax.xaxis)
    ax.set_ylim(0, 101.5)
    ax.set_xlabel("mean K (shortlist depth, log scale)")
    ax.set_ylabel("found % (shortlist holds the gold tool)")
    ax.set_title(
        f"{condition} (N = {n if n is not None else 'mixed'}): found % against mean K per method; dotted: "
        'iso-BoR lines found = 2^b K / N ("3b")\npoints: mean over runs (seeds x splits); whiskers: min-max over runs',
        fontsize=10,
        pad=16,
    )
    ax.grid(alpha=0.3, which="both")
    handles, labels = ax.get_legend_handles_labels()
    handles.append(Line2D([], [], color="0.6", ls=":", lw=0.9))
    labels.append("iso-BoR line (b bits)")
    ax.legend(handles, labels, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    return _save(fig, plotted, out_png)


def _draw_iso_lines(ax: plt.Axes, iso: pd.DataFrame) -> None:
    """Dotted iso-BoR lines, labelled where they leave the top of the frame (or at their end)."""
    for b, line in iso.groupby("bits", sort=True):
        ax.plot(line["mean_k"], line["found_pct"], color="0.6", lw=0.9, ls=":", zorder=1)
        last = line.iloc[-1]
        style: dict[str, Any] = {"fontsize": 8, "color": "0.35"}
        if last["found_pct"] >= 100.0 - 1e-9:  # label where the line leaves the top, above the frame
            ax.text(last["mean_k"], 1.0, f"{int(b)}b", transform=ax.get_xaxis_transform(), ha="center",
                    va="bottom", **style)  # fmt: skip
        else:
            ax.annotate(f"{int(b)}b", (last["mean_k"], last["found_pct"]), xytext=(2, 0), textcoords="offset points",
                        va="center", ha="left", **style)  # fmt: skip


def _draw_methods(ax: plt.Axes, pts: pd.DataFrame) -> None:
    """The fixed-K curve (labelled K=...) and one marker per other method, in its colour."""
    fixed = pts[pts["kind"] == "baseline"]
    if len(fixed):
        ax.errorbar(fixed["mean_k"], fixed["found_pct"], xerr=_whiskers(fixed, "mean_k"),
                    yerr=_whiskers(fixed, "found_pct"), color="0.2", marker="o", ms=5, lw=1.4, capsize=2,
                    label="fixed K (curve)", zorder=3)  # fmt: skip
        for _, r in fixed.iterrows():
            ax.annotate(f"K={fixed_k(r['method'])}", (r["mean_k"], r["found_pct"]), xytext=(4, -4),
                        textcoords="offset points", fontsize=8, color="0.2", ha="left", va="top", zorder=5,
                        bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.7})  # fmt: skip
    for _, r in pts[pts["kind"] != "baseline"].iterrows():
        one = pts.loc[[r.name]]
        marker, size = GROUP_MARKERS[r["kind"]]
        ax.errorbar(one["mean_k"], one["found_pct"], xerr=_whiskers(one, "mean_k"), yerr=_whiskers(one, "found_pct"),
                    ls="none", marker=marker, ms=size, capsize=3, color=method_color(r["method"]), mec="black",
                    mew=0.6, label=f"{r['method']} ({r['kind']})", zorder=4)  # fmt: skip


def sweep_table(
    summary: pd.DataFrame,
    sweeps: Mapping[str, Sequence[tuple[int, str]]],
    per_query: pd.DataFrame,
    methods: Sequence[str] = ("bor-dqn", "f1-dqn", "fixed-5"),
) -> pd.DataFrame:
    """The numbers of :func:`registry_sweep_figure`: one row per (family, N, method) with the means and
    min/max over runs of ``mean_reward_net``, ``mean_reward``, ``mean_k`` and ``found_pct``, and ``ceiling_bits``:
    the mean over the method's test rows (every run's) of each query's -log2 P_rand(K), the reward had every
    shortlist held a relevant item. Found <= 1 and the cost >= 0, so no run's mean net reward can exceed its own
    mean of that, and their mean over runs of equal size none of ``ceiling_bits`` (log2(N / mean K), the ceiling
    shown before, is not a bound: it sits below the mean of log2(N / K) when K varies). Methods or conditions
    absent are skipped.

    ``sweeps``: family -> [(N, condition), ...], e.g. ``{"toolbench": [(50, "toolbench-minilm")]}``.
    """
    parts = []
    cols = [c for c in ("mean_reward_net", "mean_reward", "mean_k", "found_pct") if c in summary.columns]
    ceiling = (
        per_query.assign(_c=-np.log2(per_query["p_random"].astype(float))).groupby(["condition", "method"])["_c"].mean()
    )
    for family, points in sweeps.items():
        for n, cond in points:
            s = summary[(summary["condition"] == cond) & summary["method"].isin(methods)].copy()
            if s.empty:
                continue
            g = run_spread(s, cols)
            g["ceiling_bits"] = [float(ceiling.get((cond, m), np.nan)) for m in g["method"]]
            g.insert(0, "family", family)
            g.insert(1, "n", int(n))
            parts.append(g)
    if not parts:
        raise ValueError("none of the sweep conditions and methods is in the summary")
    plotted = pd.concat(parts, ignore_index=True)
    plotted["_m"] = plotted["method"].map(list(methods).index)
    return plotted.sort_values(["family", "_m", "n"], kind="stable").drop(columns="_m").reset_index(drop=True)


def registry_sweep_figure(
    summary: pd.DataFrame,
    sweeps: Mapping[str, Sequence[tuple[int, str]]],
    out_png: Path,
    per_query: pd.DataFrame,
    methods: Sequence[str] = ("bor-dqn", "f1-dqn", "fixed-5"),
) -> pd.DataFrame:
    """Mean net reward, mean K and found % against registry size N, per family and method.

    Three panels against N (log x): (1) the mean per-query net reward (the judged quantity) with,
    dashed, its ceiling at the method's depths (:func:`sweep_table`'s ``ceiling_bits``: the mean of each query's
    log2(N / K), the reward had every shortlist held the gold tool); (2) mean K; (3) found %. One
    line per benchmark family x method; colour = method (:func:`method_color`), marker = family. Writes
    ``out_png`` and the sibling CSV of :func:`sweep_table`; returns that table.
    """
    plotted = sweep_table(summary, sweeps, per_query, methods)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.8))
    markers = "osD^vP*X"
    families = list(dict.fromkeys(plotted["family"]))
    for (family, method), line in plotted.groupby(["family", "method"], sort=False):
        c, mk = method_color(str(method)), markers[families.index(family) % len(markers)]
        for ax, col in zip(axes, ("mean_reward_net", "mean_k", "found_pct"), strict=True):
            ax.errorbar(line["n"], line[col], yerr=_whiskers(line, col), color=c, marker=mk, ms=5, capsize=2, lw=1.4,
                        label=f"{family}: {method}" if col == "mean_reward_net" else None)  # fmt: skip
        axes[0].plot(line["n"], line["ceiling_bits"], color=c, ls="--", lw=1.0, marker=mk, ms=3, mfc="none")
    titles = ("mean net reward (bits); dashed: its ceiling, mean log2(N/K)", "mean K (shortlist depth)",
              "found % (shortlist holds the gold tool)")  # fmt: skip
    for ax, title, yl in zip(axes, titles, ("bits", "mean K (log scale)", "found %"), strict=True):
        ax.set_xscale("log")
        ax.set_xlabel("candidate-set size N (log scale)")
        ax.set_ylabel(yl)
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3, which="both")
        _sparse_ticks(ax, sorted(set(plotted["n"])))
    axes[1].set_yscale("log")
    _plain_log_ticks(axes[1].yaxis)
    axes[2].set_ylim(0, 105)
    handles, labels = axes[0].get_legend_handles_labels()
    handles.append(Line2D([], [], color="0.3", ls="--", lw=1.0))
    labels.append("ceiling: mean over queries of log2(N / K), every shortlist holding the gold")
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(4, len(labels)),
               fontsize=8, frameon=False)  # fmt: skip
    fig.suptitle("Registry-size sweep: net reward, depth and found % against N; means over runs, whiskers min-max")
    fig.tight_layout()
    return _save(fig, plotted, out_png)


def _sparse_ticks(ax: plt.Axes, ns: Sequence[int], min_ratio: float = 1.6) -> None:
    """Tick every N, but label only those at least ``min_ratio`` apart on the log axis (so 370 and 500
    never overprint: the later one keeps its tick, unlabelled)."""
    labelled: list[int] = []
    for v in ns:
        if not labelled or v / labelled[-1] >= min_ratio:
            labelled.append(v)
    ax.set_xticks(list(ns), [str(v) if v in labelled else "" for v in ns], minor=False)
    ax.minorticks_off()


def scorer_found_at_1(per_query: pd.DataFrame, condition: str) -> float:
    """found@1 (%) of the scorer alone: share of the condition's distinct queries at gold rank 1."""
    g = per_query[per_query["condition"] == condition].drop_duplicates("qid")
    if g.empty:
        raise ValueError(f"condition {condition!r} not in the per-query frame")
    return 100.0 * float((g["gold_rank"] == 1).mean())


def scorer_table(
    summary: pd.DataFrame, conditions: Mapping[str, str], method: str = "bor-dqn", per_query: pd.DataFrame | None = None
) -> pd.DataFrame:
    """The numbers of :func:`scorer_figure`: one row per scorer with the means and min/max over runs of
    ``method``'s ``mean_k`` and ``found_pct``, and ``scorer_found_at_1`` when ``per_query`` is given."""
    rows = []
    for scorer, cond in conditions.items():
        s = summary[(summary["condition"] == cond) & (summary["method"] == method)]
        if s.empty:
            raise ValueError(f"no {method!r} rows for condition {cond!r} in the summary")
        g = run_spread(s, ["mean_k", "found_pct"])
        g.insert(0, "scorer", scorer)
        if per_query is not None:
            g["scorer_found_at_1"] = scorer_found_at_1(per_query, cond)
        rows.append(g)
    return pd.concat(rows, ignore_index=True)


def scorer_figure(
    summary: pd.DataFrame,
    conditions: Mapping[str, str],
    out_png: Path,
    method: str = "bor-dqn",
    per_query: pd.DataFrame | None = None,
) -> pd.DataFrame:
    """Paper Figure 2: the learned mean K and found % of ``method`` per scorer.

    Bars are means over runs with min-max whiskers; with ``per_query``, each scorer's found@1
    (:func:`scorer_found_at_1`) is marked on the found % panel and named in the tick labels. Writes
    ``out_png`` and the sibling CSV of :func:`scorer_table` (``conditions``: scorer label -> condition);
    returns that table.
    """
    plotted = scorer_table(summary, conditions, method, per_query)
    fig, axes = plt.subplots(1, 2, figsize=(max(8.0, 2.2 * len(plotted) + 4), 4.4))
    x = np.arange(len(plotted))
    colors = [_PALETTE[2 * i % len(_PALETTE)] for i in range(len(plotted))]  # scorers, not methods
    labels = list(plotted["scorer"])
    if per_query is not None:
        labels = [
            f"{s}\nfound@1 {f:.1f}%" for s, f in zip(plotted["scorer"], plotted["scorer_found_at_1"], strict=True)
        ]
    for ax, col in zip(axes, ("mean_k", "found_pct"), strict=True):
        ax.bar(x, plotted[col], 0.6, yerr=_whiskers(plotted, col), capsize=4, color=colors, edgecolor="black", lw=0.6)
        for xi, v, top in zip(x, plotted[col], plotted[f"{col}_max"], strict=True):
            text = f"{v:.2f}" if col == "mean_k" else f"{v:.1f}"
            ax.annotate(text, (xi, top), xytext=(0, 3), textcoords="offset points", ha="center", fontsize=8)
        ax.set_xticks(x, labels, fontsize=9)
        ax.set_title(f"{method}: {'learned mean K' if col == 'mean_k' else 'found %'}", fontsize=10)
        ax.set_xlim(-0.6, len(plotted) - 0.4)
        ax.grid(axis="y", alpha=0.3)
    axes[0].set_ylabel("mean K (shortlist depth)")
    axes[0].set_ylim(0, float(plotted["mean_k_max"].max()) * 1.15)
    axes[1].set_ylabel("found % (shortlist holds the gold tool)")
    axes[1].set_ylim(0, 110)
    if per_query is not None:
        axes[1].scatter(x, plotted["scorer_found_at_1"], marker="_", s=900, color="black", lw=2, zorder=4)
        fig.legend([Line2D([], [], color="black", lw=2)],
                   ["scorer alone: found@1 (share of queries with the gold tool ranked first)"],
                   loc="upper center", bbox_to_anchor=(0.5, 0.0), fontsize=8, frameon=False)  # fmt: skip
    fig.suptitle(
        f"{method}: learned mean K and found % per scorer (bars: mean over runs, whiskers: min-max over runs)",
        fontsize=11,
    )
    fig.tight_layout()
    return _save(fig, plotted, out_png)


#: How :func:`answer_figure` draws each role of a method (marker, size, colour: None for the method's own).
ANSWER_ROLES: dict[str, tuple[str, int, str | None]] = {
    "learned": ("o", 7, None),
    "best peer": ("s", 7, "0.45"),
    "best fixed K": ("D", 6, "0.75"),
}


def answer_figure(points: pd.DataFrame, out_png: Path) -> pd.DataFrame:
    """The overview's figure beside its answer table: per condition (one row each, in the order given), the net
    reward of every learned policy, of the best peer and of the best fixed K, each minus the net reward of the
    method to use (ringed; at 0 by construction).

    ``points`` has one row per plotted marker: ``condition``, ``method``, ``role`` (a key of
    :data:`ANSWER_ROLES`), ``best`` (whether it is the method to use), ``mean_reward_net`` and ``minus_best`` (the
    plotted x). Writes ``out_png`` and its sibling CSV of exactly these rows; returns them.
    """
    conds = list(dict.fromkeys(points["condition"]))
    y_of = {c: len(conds) - 1 - i for i, c in enumerate(conds)}
    height = 0.27 * len(conds) + 1.6
    fig, ax = plt.subplots(figsize=(3.6, height))
    ax.axvline(0.0, color="black", lw=0.8, zorder=1)
    seen: set[str] = set()
    for _, r in points.iterrows():
        marker, size, colour = ANSWER_ROLES[r["role"]]
        label = r["method"] if r["role"] == "learned" else r["role"]
        ax.plot([r["minus_best"]], [y_of[r["condition"]]], ls="none", marker=marker, ms=size, mec="black", mew=0.5,
                color=colour or method_color(str(r["method"])), alpha=0.9, zorder=3,
                label=None if label in seen else label)  # fmt: skip
        seen.add(label)
    best = points[points["best"].astype(bool)]
    ax.plot(best["minus_best"], [y_of[c] for c in best["condition"]], ls="none", marker="o", ms=13, mfc="none",
            mec="black", mew=1.3, zorder=4, label="the method to use")  # fmt: skip
    ax.set_yticks(list(y_of.values()), list(y_of), fontsize=7)
    ax.tick_params(axis="x", labelsize=7)
    ax.set_ylim(-0.6, len(conds) - 0.4)
    ax.set_xlabel("net reward minus the method to use's (bits)", fontsize=7)
    ax.grid(axis="x", alpha=0.3)
    ax.set_title("Net reward by method per condition", fontsize=8)
    handles, labels = ax.get_legend_handles_labels()
    rows = -(-len(labels) // 3)
    fig.legend(handles, labels, fontsize=6.5, ncol=3, loc="lower center", frameon=False, handletextpad=0.2,
               columnspacing=0.6)  # fmt: skip
    fig.tight_layout(rect=(0.0, (0.05 + 0.14 * rows) / height, 1.0, 1.0))
    return _save(fig, points, out_png)
