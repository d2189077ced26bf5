"""Formatting helpers shared by every report page (compute lives in :mod:`.tables`, pages in :mod:`.page`)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from agents import registry
from agents.evaluation import BUCKET_ORDER
from experiments.report.page import Block, Paragraph, Table


def fmt(x: object, lo: float | None = None, hi: float | None = None, nd: int = 2) -> str:
    """``x`` to ``nd`` decimals with `` [lo, hi]`` when the interval is finite and not empty;
    ``-`` for missing values, ``inf``/``-inf`` for infinities."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "-inf" if x < 0 else "inf"
    s = f"{float(x):.{nd}f}"  # type: ignore[arg-type]
    if lo is not None and hi is not None and not (math.isnan(lo) or math.isnan(hi)) and hi - lo > 0:
        s += f" [{lo:.{nd}f}, {hi:.{nd}f}]"
    return s


def ci(row: pd.Series, col: str, nd: int = 2, scale: float = 1.0) -> str:
    """``row[col]`` with its ``_lo``/``_hi`` interval, optionally scaled (e.g. to percent)."""
    return fmt(scale * row[col], scale * row[f"{col}_lo"], scale * row[f"{col}_hi"], nd)


def signed_ci(row: pd.Series, col: str = "diff", nd: int = 3) -> str:
    """A paired difference ``row[col]`` with its ``_lo``/``_hi`` interval, signed, to ``nd`` decimals:
    ``+0.052 [-0.055, +0.164]``."""
    return f"{row[col]:+.{nd}f} [{row[f'{col}_lo']:+.{nd}f}, {row[f'{col}_hi']:+.{nd}f}]"


def rates(rows: pd.DataFrame, col: str) -> str:
    """``condition method x.xx%`` for each row with ``col`` > 0, joined and ended by a full stop;
    ``none.`` when no row has it (the whole-list and break-even sentences of the reports)."""
    shown = rows[rows[col] > 0] if col in rows else rows.iloc[:0]
    if shown.empty:
        return "none."
    return ", ".join(f"{r['condition']} {r['method']} {r[col]:.2f}%" for _, r in shown.iterrows()) + "."


def bucket_table(agg: pd.DataFrame, condition: str, methods: Sequence[str], n_splits: int = 1) -> list[Block]:
    """Per difficulty bucket, ``found % / mean K`` of ``methods`` on one condition, from a
    :func:`experiments.figures.bucket_spread` table (means over runs: seeds x splits; a bucket's
    ``n`` counts its test queries summed over the ``n_splits`` train/test splits)."""
    pb = agg[(agg["condition"] == condition) & agg["method"].isin(methods)]
    present = [x for x in BUCKET_ORDER if x in set(pb["bucket"])]
    ns = {bk: int(pb[pb["bucket"] == bk]["n"].iloc[0]) for bk in present}
    rows = []
    for m in methods:
        if m not in set(pb["method"]):
            continue
        cells = []
        for bk in present:
            r = pb[(pb["method"] == m) & (pb["bucket"] == bk)]
            cells.append(f"{r['found_pct'].iloc[0]:.1f} / {r['mean_k'].iloc[0]:.2f}" if len(r) else "-")
        rows.append([m, *cells])
    return [
        Paragraph(
            "Per difficulty bucket (the scorer's rank of the gold tool), found % / mean K, mean over runs"
            + (f" (n: test queries summed over {n_splits} splits):" if n_splits > 1 else ":")
        ),
        Table(["method", *(f"{bk} (n={ns[bk]})" for bk in present)], rows),
    ]


def reads_second_scorer(observation: str) -> bool:
    """Whether learners on ``observation`` see a second scorer's view on ``-hybrid`` conditions (``auto``,
    ``hybrid``); on ``score`` or ``strict`` they do not, so no two-scorer section is written."""
    return observation in ("auto", "hybrid")


def observation_blocks(observation: str) -> list[Block]:
    """The paragraph naming the learners' observation set (none for ``auto``)."""
    if observation == "auto":
        return []
    text = (
        f"**Observation set: `{observation}`.** The kinds that read an observation set ("
        + ", ".join(f"`{k}`" for k, kind in registry.KINDS.items() if kind.observes)
        + f") were trained and applied on the `{observation}` set (`envs/features.py`); their run ids carry "
        f"`@{observation}` (`runs.csv`), the tables here their plain names. The other kinds read the raw "
        "scores whatever the set: the same cells as in the default run."
        + (
            ""
            if reads_second_scorer(observation)
            else " The learners do not see a second scorer on this set, so there is no two-scorer section."
        )
    )
    return [Paragraph(text)]


def judged(checks: Sequence[tuple[str, str, bool | None]]) -> list[list[str]]:
    """Rows of the targets table from (target, measured, met or None when shown but not judged), each printed."""
    verdict = {True: ("met", "yes"), False: ("NOT met", "NO"), None: ("not judged", "-")}
    for what, shown, ok in checks:
        print(f"target {what}: {shown} -> {verdict[ok][0]}")
    return [[what, shown, verdict[ok][1]] for what, shown, ok in checks]


def same_as_best(r: pd.Series, lead: str) -> str:
    """``lead`` + "the same test rewards as ..." when other methods of a :func:`best_methods` row are the same policy
    on its condition (its ``same_as_best``), else nothing."""
    same = r.get("same_as_best")
    return f"{lead}the same test rewards as {same.replace(';', ',')}" if isinstance(same, str) and same else ""


def runner_up_cells(r: pd.Series, col: str = "diff") -> list[str]:
    """The runner-up of a :func:`best_methods` row (or :func:`best_examined_only`'s, ``col`` ``runner_up_diff``) and
    best minus it with its interval, ``r[col]`` ("-" when there is none: every method is the same policy as the
    best, or it is alone)."""
    return [r["runner_up"], signed_ci(r, col)] if isinstance(r["runner_up"], str) else ["-", "-"]
