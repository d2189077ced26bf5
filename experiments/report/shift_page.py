"""The report of ``shortlist shift``: trained policies, unchanged, under scorer, benchmark and query shift.

:func:`versus_gap` is the table (DataFrames in, a DataFrame out); :func:`write_shift_report` writes it
with the aggregates and the paired differences, then the page (README.md).
"""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

from experiments.io import atomic_write_csv
from experiments.plan import BOR_AGENTS
from experiments.report.markdown import ci, fmt, rates, signed_ci
from experiments.report.page import Block, Page, Paragraph, Section, Table, write_page
from experiments.report.tables import aggregate_with_groups, paired_differences
from experiments.runner import RUN_KEYS

#: The reference rule of the goal under shift (no training).
GAP_RULE = "gap"
#: The practitioners' rules fitted on the training split, each a reference of the goal under shift (issue 39).
FITTED_PEERS: tuple[str, ...] = ("bor-threshold", "bor-topp", "bor-greedyk", "bor-choppy")


def versus_gap(agg: pd.DataFrame, paired: pd.DataFrame) -> pd.DataFrame:
    """Per (source, target): the best BoR agent (largest mean reward) against the largest-gap rule, with
    the paired interval, and every BoR agent's whole-list rate."""
    rows = []
    for key, a in agg.groupby("condition", sort=False):
        a = a.set_index("method")
        agents = [m for m in BOR_AGENTS if m in a.index]
        if not agents or GAP_RULE not in a.index:
            continue
        best = max(agents, key=lambda m: a.loc[m, "mean_reward_net"])
        pr = paired[(paired["condition"] == key) & (paired["agent"] == best) & (paired["peer"] == GAP_RULE)]
        source, target = str(key).split("@")
        rows.append(
            {
                "source": source,
                "target": target,
                "shift": a["shift"].iloc[0] if "shift" in a.columns else "",
                "best_agent": best,
                "mean_reward_net": float(a.loc[best, "mean_reward_net"]),
                "gap_mean_reward_net": float(a.loc[GAP_RULE, "mean_reward_net"]),
                "diff": float(pr["diff"].iloc[0]) if len(pr) else float("nan"),
                "diff_lo": float(pr["diff_lo"].iloc[0]) if len(pr) else float("nan"),
                "diff_hi": float(pr["diff_hi"].iloc[0]) if len(pr) else float("nan"),
                "at_least_gap": bool(a.loc[best, "mean_reward_net"] >= a.loc[GAP_RULE, "mean_reward_net"]),
                **{f"whole_list_pct_{m}": float(a.loc[m, "whole_list_pct"]) for m in agents},
            }
        )
    return pd.DataFrame(rows)


def versus_peers(agg: pd.DataFrame, paired: pd.DataFrame) -> pd.DataFrame:
    """Per (source, target) and fitted peer (:data:`FITTED_PEERS`) that ran: the best BoR agent (largest mean net
    reward) minus the peer, with the paired interval, and whether the agent's point estimate is at least the
    peer's."""
    rows = []
    for key, a in agg.groupby("condition", sort=False):
        a = a.set_index("method")
        agents = [m for m in BOR_AGENTS if m in a.index]
        if not agents:
            continue
        best = max(agents, key=lambda m: a.loc[m, "mean_reward_net"])
        source, target = str(key).split("@")
        for peer in (p for p in FITTED_PEERS if p in a.index):
            pr = paired[(paired["condition"] == key) & (paired["agent"] == best) & (paired["peer"] == peer)]
            rows.append(
                {
                    "source": source,
                    "target": target,
                    "shift": a["shift"].iloc[0] if "shift" in a.columns else "",
                    "best_agent": best,
                    "peer": peer,
                    "mean_reward_net": float(a.loc[best, "mean_reward_net"]),
                    "peer_mean_reward_net": float(a.loc[peer, "mean_reward_net"]),
                    **{c: float(pr[c].iloc[0]) if len(pr) else math.nan for c in ("diff", "diff_lo", "diff_hi")},
                    "at_least_peer": bool(a.loc[best, "mean_reward_net"] >= a.loc[peer, "mean_reward_net"]),
                }
            )
    return pd.DataFrame(rows)


def peer_goal_lines(vp: pd.DataFrame) -> list[Block]:
    """The goal against every fitted peer under shift (issue 39), per shift kind, with the pairs that miss it."""
    shifted = vp[vp["shift"] != "none"] if len(vp) else vp
    if shifted.empty:
        return []
    pairs = shifted.groupby(["source", "target"], sort=False)
    met = pairs["at_least_peer"].all()
    below = shifted[shifted["diff_hi"] < 0]
    kinds = ", ".join(
        f"{kind} {int(g.groupby(['source', 'target'])['at_least_peer'].all().sum())} of "
        f"{g.groupby(['source', 'target']).ngroups}"
        for kind, g in shifted.groupby("shift", sort=False)
    )
    missed = [f"{s} -> {t} ({', '.join(g.loc[~g['at_least_peer'], 'peer'])})" for (s, t), g in pairs
              if not g["at_least_peer"].all()]  # fmt: skip
    return [
        Paragraph(
            "**Against every fitted peer.** Goal, stated before running: under every shift, the best BoR-trained "
            f"policy's mean net reward is at least that of each fitted peer ({', '.join(FITTED_PEERS)}; fitted on the "
            f"source's training split, applied unchanged). Met on {int(met.sum())} of {len(met)} (source, shifted "
            "target) pairs" + (" (goal met)" if bool(met.all()) else " (goal NOT met)") + f": {kinds}. "
            f"Significantly below a fitted peer (interval entirely below 0) in {len(below)} (pair, peer) comparisons"
            + (
                ": "
                + "; ".join(
                    f"{r['source']} -> {r['target']} vs {r['peer']} {signed_ci(r)}" for _, r in below.iterrows()
                )
                if len(below)
                else ""
            )  # fmt: skip
            + "."
            + (f" Pairs below a peer's point estimate: {'; '.join(missed)}." if missed else "")
        )
    ]


def shift_tables(per_query: pd.DataFrame) -> dict[str, pd.DataFrame]:
    """The tables of the shift folder (DataFrames in, DataFrames out): aggregate (with the shift kind),
    paired differences (each BoR agent minus each peer) and the comparison with the gap rule."""
    from agents import summarise

    agg = aggregate_with_groups(summarise(per_query, RUN_KEYS), per_query)
    kinds = per_query.drop_duplicates("condition").set_index("condition")["shift"]
    agg.insert(1, "shift", agg["condition"].map(kinds))
    paired = paired_differences(per_query)
    return {
        "aggregate": agg,
        "paired": paired,
        "versus_gap": versus_gap(agg, paired),
        "versus_peers": versus_peers(agg, paired),
    }


def write_shift_report(out: Path, per_query: pd.DataFrame, command: str, runs_dir: str) -> pd.DataFrame:
    """aggregate.csv, paired.csv, versus_gap.csv, versus_peers.csv (:func:`shift_tables`) and the page (README.md); returns the
    versus-gap table."""
    t = shift_tables(per_query)
    for name, df in t.items():
        atomic_write_csv(df, out / f"{name}.csv")
    agg, vg = t["aggregate"], t["versus_gap"]
    how = (
        "Generated by `shortlist shift` from the run directories in "
        f"`{runs_dir}` (listed in `runs.csv` with the sha256 of their tables); do not edit by hand. "
        f"The methods ({', '.join(sorted(set(agg['method'])))}) of each base "
        f"condition ({', '.join(dict.fromkeys(per_query['source']))}) are evaluated, "
        "without retraining, on the test split (same split seed) of: the other scorer's ranking (scorer), the "
        "other benchmarks (benchmark), and rewritten queries (query: tool names removed, first 20 words, 30% "
        "word dropout; `benchmarks/query_shift.py`). `none` is the policy's own test split. Judged on the net reward "
        "(found x -log2 P_rand(K) minus the source condition's cost per extra shown tool). Means are over runs "
        "(seeds x splits), brackets a 95% query bootstrap stratified by split; differences are paired over the "
        "same test units."
    )
    page = Page(
        title="Under shift",
        group="study",
        lede="Trained policies, unchanged, on unlike inputs: another scorer, another benchmark, rewritten queries.",
        answer=Section("", [*gap_goal_lines(vg, agg), *peer_goal_lines(t["versus_peers"])]),
        sections=(
            Section("How these numbers were made", [Paragraph(how), Paragraph(f"Command: `{command}`")]),
            versus_gap_table(vg),
            Section(
                "Every method",
                subsections=[Section(f"{key} ({a['shift'].iloc[0]})", [method_rows(a)])
                             for key, a in agg.groupby("condition", sort=False)],
            ),
        ),
    )  # fmt: skip
    write_page(out, page)
    return vg


def gap_goal_lines(vg: pd.DataFrame, agg: pd.DataFrame) -> list[Block]:
    """The answer: the goal against the untrained largest-gap rule, with what is ahead and behind."""
    shifted = vg[vg["shift"] != "none"]
    below = shifted[shifted["diff_hi"] < 0]
    ahead = shifted[shifted["diff_lo"] > 0]
    learned = [m for m in BOR_AGENTS if m in set(agg["method"])]
    shifted_learned = agg[agg["method"].isin(learned) & (agg["shift"] != "none")]
    return [
        Paragraph(
            "**Answer.** Goal, stated before running: under every shift, the best BoR-trained policy's mean net reward "
            f"is at least that of the largest-gap rule (`{GAP_RULE}`, no training). Met on "
            f"{int(shifted['at_least_gap'].sum())} of {len(shifted)} (source, shifted target) pairs"
            + (" (goal met)" if bool(shifted["at_least_gap"].all()) else " (goal NOT met)")
            + f"; significantly ahead of it on {len(ahead)}, significantly below it (interval entirely below 0) on "
            f"{len(below)}"
            + (": " + ", ".join(f"{r['source']} -> {r['target']}" for _, r in below.iterrows()) if len(below) else "")
            + "."
        ),
        Paragraph(
            "Whole-list episodes (K = N) of the BoR agents under shift: " + rates(shifted_learned, "whole_list_pct")
        ),
        Paragraph(
            "The learned agents stop at the latest at the break-even depth (`rewards.break_even_depth`: deeper, no "
            "shortlist can earn more than its steps cost), so K = N is out of their reach. Stops at that depth under "
            "shift, where the bound and not the learned values decided (the runaway that remains): "
            + rates(shifted_learned, "break_even_pct")
        ),
    ]


def versus_gap_table(vg: pd.DataFrame) -> Section:
    header = ["source", "shift", "target", "best BoR agent", "net reward", "gap", "difference [95% paired]"]
    rows = [
        [r["source"], r["shift"], r["target"], r["best_agent"], f"{r['mean_reward_net']:.3f}",
         f"{r['gap_mean_reward_net']:.3f}", signed_ci(r)]
        for _, r in vg.iterrows()
    ]  # fmt: skip
    return Section("Against the largest-gap rule", [Table(header, rows)])


def method_rows(a: pd.DataFrame) -> Table:
    header = ["method", "group", "runs", "found %", "mean K", "whole list %", "at break-even %", "net reward",
              "mean reward (cost-free)"]  # fmt: skip
    rows = [
        [r["method"], r["group"], str(int(r["n_seeds"]) * int(r["n_splits"])), fmt(r["found_pct"], nd=1),
         fmt(r["mean_k"]), fmt(r["whole_list_pct"], nd=2), fmt(r.get("break_even_pct", math.nan), nd=2),
         ci(r, "mean_reward_net", 3), fmt(r["mean_reward"], nd=3)]
        for _, r in a.sort_values("mean_reward_net", ascending=False).iterrows()
    ]  # fmt: skip
    return Table(header, rows)
