"""The report of ``shortlist shift``: trained policies, unchanged, under scorer, benchmark and query shift.

:func:`versus_gap` is the table (DataFrames in, a DataFrame out); :func:`write_shift_report` writes it
with the aggregates and the paired differences, then the page (README.md).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from experiments.io import atomic_write_csv
from experiments.plan import BOR_AGENTS
from experiments.report.markdown import ci, fmt, rates, signed_ci
from experiments.report.page import Block, Page, Paragraph, Section, Table, write_page
from experiments.report.tables import JUDGED, aggregate_with_groups, paired_conditions, paired_differences
from experiments.runner import RUN_KEYS

#: The reference rule of the goal under shift (no training).
GAP_RULE = "gap"
#: The practitioners' rules fitted on the training split, each a reference of the goal under shift (issue 39).
FITTED_PEERS: tuple[str, ...] = ("bor-threshold", "bor-topp", "bor-greedyk", "bor-choppy")
#: The shift kinds whose target is another base condition: when that condition is a source too, a policy
#: trained on it is the reference for what moving a policy there costs (:func:`transfer_costs`).
MOVES: tuple[str, ...] = ("scorer", "benchmark")


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
    return with_own_test(pd.DataFrame(rows))


OWN = {"best_agent": "own_best_agent", "diff": "own_diff", "diff_lo": "own_diff_lo", "diff_hi": "own_diff_hi",
       "at_least_peer": "own_at_least_peer"}  # fmt: skip


def with_own_test(vp: pd.DataFrame) -> pd.DataFrame:
    """:func:`versus_peers` rows with the same comparison on the source's own test split (its ``none`` row for the
    same peer: ``own_best_agent``, ``own_diff`` and its interval, ``own_at_least_peer``; missing when that row is),
    so that a miss under shift can be told from one the source already had."""
    if vp.empty:
        return vp.assign(**{c: pd.Series(dtype=float) for c in OWN.values()})
    own = vp.loc[vp["shift"] == "none", ["source", "peer", *OWN]].rename(columns=OWN)
    return vp.merge(own, on=["source", "peer"], how="left", validate="many_to_one")


def miss_causes(vp: pd.DataFrame) -> pd.DataFrame:
    """The (pair, peer) comparisons where the best BoR policy is below a fitted peer under shift (``at_least_peer``
    false), each labelled by the same test on the source's own test split: ``own test`` when it was below that peer
    there too, ``shift`` when it was at least the peer there, ``unknown`` when the source has no own row."""
    if vp.empty:
        return vp.assign(cause=pd.Series(dtype=str))
    missed = vp[(vp["shift"] != "none") & ~vp["at_least_peer"].astype(bool)].copy()
    home = missed["own_at_least_peer"]
    missed["cause"] = ["unknown" if pd.isna(h) else ("shift" if bool(h) else "own test") for h in home]
    return missed


def transfer_costs(
    per_query: pd.DataFrame, step_costs: Mapping[str, float], seed: int = 0, n_boot: int = 10_000
) -> pd.DataFrame:
    """What moving a policy costs: per scorer- or benchmark-shifted pair (:data:`MOVES`) whose target is itself a
    source, and per method run on both, the method's mean net reward on the target when trained on the source
    (``transferred``) minus when trained on the target itself (``native``, the target's ``none`` rows), with
    :func:`experiments.report.tables.paired_conditions` (a unit's value its mean over seeds, the split-stratified
    paired bootstrap).

    Both sides are judged at the target's own cost per extra shown tool (``step_costs[target]``), and each row
    names the source's cost too: where the two differ, the moved policy was also trained for another cost. A
    target without a step cost is left out, and so is a pair whose two sides do not hold the same test units (the
    console says which)."""
    cols = ["source", "target", "shift", "method", "n_queries", "transferred", "native", "diff", "diff_lo", "diff_hi",
            "source_step_cost", "target_step_cost"]  # fmt: skip
    own = per_query[per_query["shift"] == "none"]
    moved = per_query[per_query["shift"].isin(MOVES) & per_query["target"].isin(set(own["source"]))]
    frames = []
    for (source, target, kind), g in moved.groupby(["source", "target", "shift"], sort=True):
        if target not in step_costs:
            continue
        native = own[own["source"] == target]
        methods = sorted(set(g["method"]) & set(native["method"]))
        both = pd.concat([native, g], ignore_index=True)
        both = both[both["method"].isin(methods)]
        both = both.assign(reward_net=both["reward"] - step_costs[target] * (both["k"] - 1))
        pc = paired_conditions(both, [(f"{target}@{target}", f"{source}@{target}")], methods, seed, n_boot)
        if pc.empty:
            if methods:
                print(f"transfer: {source} -> {target} left out: the two sides do not hold the same test units")
            continue
        frames.append(
            pc.rename(columns={"n_units": "n_queries", f"other_{JUDGED}": "transferred", f"base_{JUDGED}": "native"})
            .drop(columns=["base", "other"])
            .assign(source=source, target=target, shift=kind, source_step_cost=step_costs.get(source, math.nan),
                    target_step_cost=step_costs[target])
        )  # fmt: skip
    return pd.concat(frames, ignore_index=True)[cols] if frames else pd.DataFrame(columns=cols)


def transfer_summary(tc: pd.DataFrame) -> pd.DataFrame:
    """Per method of :func:`transfer_costs` (the untrained gap rule left out: it is the same policy on both
    sides): pairs, mean and worst difference, the mean over the pairs whose source and target share a cost per
    extra tool, and the pairs significantly below / above the policy trained on the target (interval entirely
    below / above 0); the largest mean difference first (ties: the larger worst difference)."""
    cols = ["method", "pairs", "mean_cost", "worst_cost", "same_cost_pairs", "mean_cost_same_cost", "below", "above"]
    tc = tc[tc["method"] != GAP_RULE]
    if tc.empty:
        return pd.DataFrame(columns=cols)
    same = tc["source_step_cost"] == tc["target_step_cost"]
    out = (
        tc.assign(same=same, same_diff=tc["diff"].where(same))
        .groupby("method")
        .agg(
            pairs=("diff", "size"),
            mean_cost=("diff", "mean"),
            worst_cost=("diff", "min"),
            same_cost_pairs=("same", "sum"),
            mean_cost_same_cost=("same_diff", "mean"),
            below=("diff_hi", lambda x: int((x < 0).sum())),
            above=("diff_lo", lambda x: int((x > 0).sum())),
        )
    )
    out = out.sort_values(["mean_cost", "worst_cost"], ascending=False, kind="stable").reset_index()
    return out[cols]


def shifted_rows(frame: pd.DataFrame) -> pd.DataFrame:
    """The rows of a shift table whose target is shifted (``shift`` other than ``none``); an empty table as it is."""
    return frame[frame["shift"] != "none"] if len(frame) else frame


def peer_goal_met(vp: pd.DataFrame) -> pd.Series:
    """Per shifted (source, target) pair of ``versus_peers.csv``, whether the best BoR policy's mean net reward is
    at least every fitted peer's (issue 39's goal under shift); empty without shifted rows."""
    shifted = shifted_rows(vp)
    if shifted.empty:
        return pd.Series(dtype=bool)
    return shifted.groupby(["source", "target"], sort=False)["at_least_peer"].all()


def peer_goal_lines(vp: pd.DataFrame) -> list[Block]:
    """The goal against every fitted peer under shift (issue 39), per shift kind, with the pairs that miss it."""
    met = peer_goal_met(vp)
    if met.empty:
        return []
    shifted = shifted_rows(vp)
    below = shifted[shifted["diff_hi"] < 0]
    per_kind = {kind: peer_goal_met(g) for kind, g in shifted.groupby("shift", sort=False)}
    kinds = ", ".join(f"{kind} {int(m.sum())} of {len(m)}" for kind, m in per_kind.items())
    missed = [f"{s} -> {t} ({', '.join(g.loc[~g['at_least_peer'], 'peer'])})"
              for (s, t), g in shifted.groupby(["source", "target"], sort=False) if not met[(s, t)]]  # fmt: skip
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


def miss_lines(vp: pd.DataFrame) -> list[Block]:
    """Which misses under shift (:func:`miss_causes`) the source already had on its own test split, counted per
    cause, peer and shift kind, with how many are significant there and under the shift."""
    missed = miss_causes(vp)
    if missed.empty:
        return []

    def counts(g: pd.DataFrame) -> str:
        per = (f"{peer} {len(h)} ({', '.join(f'{k} {len(x)}' for k, x in h.groupby('shift', sort=False))})"
               for peer, h in g.groupby("peer", sort=True))  # fmt: skip
        return "; ".join(per)

    def sig(g: pd.DataFrame, col: str) -> int:
        return int((g[col] < 0).sum())

    own, moved, unknown = (missed[missed["cause"] == c] for c in ("own test", "shift", "unknown"))
    parts = [
        f"**Why the misses.** Of the {len(missed)} (pair, peer) comparisons where the best BoR policy is below a "
        f"fitted peer under shift ({sig(missed, 'diff_hi')} significantly), {len(own)} were below that peer on the "
        f"source's own test split too (point estimates; significantly there on {sig(own, 'own_diff_hi')}, under the "
        f"shift on {sig(own, 'diff_hi')})" + (f": {counts(own)}" if len(own) else ""),
        f"{len(moved)} were at least the peer on the source's own test split and below it under the shift "
        f"(significantly on {sig(moved, 'diff_hi')})" + (f": {counts(moved)}" if len(moved) else ""),
    ]
    if len(unknown):
        parts.append(f"{len(unknown)} have no row on the source's own test split to tell")
    return [Paragraph("; ".join(parts[:-1]) + "; and " + parts[-1] + " (`versus_peers.csv`, the `own_` columns).")]


def transfer_lines(summary: pd.DataFrame, tc: pd.DataFrame) -> list[Block]:
    """The answer's paragraph on what moving a policy costs (:func:`transfer_summary`)."""
    if summary.empty:
        return []
    pairs = tc[tc["method"] != GAP_RULE].drop_duplicates(["source", "target"])
    other = pairs[pairs["source_step_cost"] != pairs["target_step_cost"]]
    each = ", ".join(
        f"{r['method']} {r['mean_cost']:+.3f} (below on {int(r['below'])}, above on {int(r['above'])})"
        for _, r in summary.iterrows()
    )
    largest = [
        f"among the {label}: {g['method'].iloc[0]} ({g['mean_cost'].iloc[0]:+.3f})"
        for label, g in (("BoR agents", summary[summary["method"].isin(BOR_AGENTS)]),
                         ("fitted peers", summary[summary["method"].isin(FITTED_PEERS)]))
        if len(g)
    ]  # fmt: skip
    costs = ""
    if len(other):
        moves = ", ".join(f"{r['source']} -> {r['target']}" for _, r in other.iterrows())
        costs = (
            f" On {len(other)} of the pairs the source's cost per extra tool differs from the target's ({moves}), so "
            "the moved policy was also trained for another cost; the mean over the other pairs is in the section "
            "below."
        )
    return [
        Paragraph(
            f"**What moving a policy costs.** On the {len(pairs)} scorer and benchmark shifts whose target is itself "
            "a source condition: each method trained on the source minus the same method trained on the target, on "
            "the target's test split at the target's cost per extra tool. Mean difference, largest first, with the "
            f"pairs where it is significantly below / above the target's own policy: {each}."
            + (f" Largest {'; '.join(largest)}." if largest else "")
            + costs
            + " The untrained gap rule is the same policy on both sides. Per pair: the section below and "
            "`transfer.csv`."
        )
    ]


def transfer_section(summary: pd.DataFrame, tc: pd.DataFrame) -> Section:
    """Per method (:func:`transfer_summary`), then per pair (:func:`transfer_costs`)."""
    if summary.empty:
        return Section(
            "What moving a policy costs",
            [Paragraph("Nothing to compare: no trained method here ran both on a source condition and on a scorer- or "
                       "benchmark-shifted target that is itself a source (with a known cost per extra tool, on the "
                       "same test units).")],
        )  # fmt: skip
    head = ["method", "pairs", "mean difference", "worst", "pairs at the same cost", "mean there",
            "significantly below", "significantly above"]  # fmt: skip
    rows = [[r["method"], str(int(r["pairs"])), f"{r['mean_cost']:+.3f}", f"{r['worst_cost']:+.3f}",
             str(int(r["same_cost_pairs"])), fmt(r["mean_cost_same_cost"], nd=3), str(int(r["below"])),
             str(int(r["above"]))] for _, r in summary.iterrows()]  # fmt: skip
    pair_head = ["source", "shift", "target", "method", "trained on the source", "trained on the target",
                 "difference [95% paired]", "cost per tool (source / target)"]  # fmt: skip
    pair_rows = [[r["source"], r["shift"], r["target"], r["method"], f"{r['transferred']:.3f}", f"{r['native']:.3f}",
                  signed_ci(r), f"{r['source_step_cost']:g} / {r['target_step_cost']:g}"]
                 for _, r in tc.iterrows()]  # fmt: skip
    how = (
        "A policy trained on the source condition and applied unchanged to the target, against the same method "
        "trained on the target itself (the target's own runs of this study), both on the target's test split "
        "(same split seeds and queries) and judged at the target's cost per extra shown tool. Negative: moving the "
        "policy costs net reward. Where the source's cost per extra tool differs from the target's, the moved "
        "policy was also trained for another cost; `mean there` is the mean over the pairs where they agree. "
        "Intervals: the split-stratified query bootstrap, paired over the same test units."
    )
    return Section(
        "What moving a policy costs",
        [Paragraph(how), Table(head, rows)],
        subsections=[Section("Per pair", [Table(pair_head, pair_rows)])],
    )


def shift_tables(per_query: pd.DataFrame, step_costs: Mapping[str, float]) -> dict[str, pd.DataFrame]:
    """The tables of the shift folder (DataFrames in, DataFrames out): aggregate (with the shift kind),
    paired differences (each BoR agent minus each peer), the comparisons with the gap rule and the fitted peers,
    and what moving a policy costs (``step_costs``: each source condition's cost per extra shown tool)."""
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
        "transfer": transfer_costs(per_query, step_costs),
    }


def write_shift_report(
    out: Path, per_query: pd.DataFrame, command: str, runs_dir: str, step_costs: Mapping[str, float]
) -> pd.DataFrame:
    """aggregate.csv, paired.csv, versus_gap.csv, versus_peers.csv, transfer.csv (:func:`shift_tables`) and the page
    (README.md); returns the versus-gap table."""
    t = shift_tables(per_query, step_costs)
    for name, df in t.items():
        atomic_write_csv(df, out / f"{name}.csv")
    agg, vg = t["aggregate"], t["versus_gap"]
    moved = transfer_summary(t["transfer"])
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
        answer=Section(
            "",
            [*gap_goal_lines(vg, agg), *peer_goal_lines(t["versus_peers"]), *miss_lines(t["versus_peers"]),
             *transfer_lines(moved, t["transfer"])],
        ),  # fmt: skip
        sections=(
            Section("How these numbers were made", [Paragraph(how), Paragraph(f"Command: `{command}`")]),
            versus_gap_table(vg),
            transfer_section(moved, t["transfer"]),
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
