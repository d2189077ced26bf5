"""The peers README of ``shortlist compare``: the BoR agents beside practitioners' peers and the limits.

Renders the tables of :mod:`experiments.report.tables` (computed there) and writes them, the
figures, the manifest and README.md into the comparison folder.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from agents import registry
from experiments.config import MethodSpec, method_group
from experiments.figures import bucket_figure, candidate_set_size, pareto_figure
from experiments.io import atomic_write_csv, atomic_write_text
from experiments.plan import BOR_AGENTS, COMPARE_BUCKET_METHODS, SUPERVISED_AGENT, condition_order
from experiments.report.markdown import bucket_table, ci, figure_line, fmt, observation_lines, reads_second_scorer
from experiments.report.study import hybrid_section
from experiments.report.tables import (
    GOAL_BASE_CONDITIONS,
    GOAL_FRACTION_OF_ORACLE,
    GOAL_MIN_SIGNIFICANT,
    aggregate_with_groups,
    bucket_aggregate,
    condition_meta,
    dp_table,
    goal_checks,
    limits_table,
    paired_differences,
    scorer_strength,
    split_goal,
)

GROUP_ORDER: dict[str, int] = {g: i for i, g in enumerate(registry.GROUPS)}


def _describe(method: str) -> str:
    spec = MethodSpec.parse(method)
    if spec.kind.name_field:  # fixed K: the description of its value
        return f"{spec.kind.description} ({spec.kind.name_field} = {spec.k})"
    text = spec.kind.description
    return f"{text}; trained with the {spec.reward.upper()} reward" if spec.kind.uses_reward else text


def split_goal_lines(sg: pd.DataFrame) -> list[str]:
    """The goal over repeated splits (:func:`experiments.report.tables.split_goal`), table and verdicts."""
    if sg.empty:
        return []
    rows = []
    for _, r in sg.iterrows():
        oracle = f"{100 * r['frac_oracle']:.1f}" if not math.isnan(r["frac_oracle"]) else "-"
        rows.append(
            f"| {r['condition']} | {r['best_agent']} | {r['mean_reward']:.3f} | {r['best_peer']} "
            f"{r['best_peer_mean_reward']:.3f} | {r['diff']:+.3f} [{r['diff_lo']:+.3f}, {r['diff_hi']:+.3f}] | "
            f"{'yes' if r['at_least_every_peer'] else 'no'} | {'yes' if r['significant'] else 'no'} | {oracle} |"
        )
    base = sg[sg["base"]]
    sig = int(base["significant"].sum())
    two = sg[sg["second_scorer"]]
    every = int(sg["at_least_every_peer"].sum())
    lines = [
        "## Goal over repeated splits",
        "",
        "Stated before running, reported either way: on every condition the best BoR-trained policy (the BoR "
        "agent with the largest mean test reward; choosing it on the test split favours it slightly) has a mean "
        "reward at least that of every non-oracle peer, significantly (paired bootstrap over the test units of "
        f"all splits, interval above 0 against the best peer) on at least {GOAL_MIN_SIGNIFICANT} of the "
        f"{len(GOAL_BASE_CONDITIONS)} base benchmark/scorer pairs ({', '.join(GOAL_BASE_CONDITIONS)}), and at "
        f"least {GOAL_FRACTION_OF_ORACLE:.0%} of the oracle's mean reward where a second scorer exists "
        "(`-hybrid`, `-fused`). `split_goal.csv` holds these numbers.",
        "",
        "| condition | best BoR-trained policy | mean reward | best peer | difference [95% paired] | "
        ">= every peer | significant | % of oracle |",
        "|---|---|---|---|---|---|---|---|",
        *rows,
        "",
        f"- At least every peer's mean reward: {every} of {len(sg)} conditions"
        + (" (goal met)." if every == len(sg) else " (goal NOT met)."),
        f"- Significantly ahead of the best peer on {sig} of the {len(base)} base pairs that ran"
        + (
            f" (goal: {GOAL_MIN_SIGNIFICANT} of {len(GOAL_BASE_CONDITIONS)}; "
            + ("met)." if sig >= GOAL_MIN_SIGNIFICANT else "NOT met).")
        ),
        (
            f"- At least {GOAL_FRACTION_OF_ORACLE:.0%} of the oracle with a second scorer: "
            f"{int(two['oracle_goal_met'].astype(bool).sum())} of {len(two)} conditions."
            if len(two)
            else "- No condition with a second scorer ran, so the oracle part of the goal is not measured here."
        ),
        "- Under shift (scorer, benchmark, query): not measured by this comparison.",
        "",
    ]
    return lines


def _verdict(r: pd.Series) -> str:
    if r["diff_lo"] > 0:
        return "RL is ahead"
    return "the cut-off is ahead" if r["diff_hi"] < 0 else "no clear difference"


def rl_versus_cutoff(rows: pd.DataFrame) -> str:
    """One clause per RL agent: its mean reward minus the cut-off's, the paired interval and the verdict."""
    return "; ".join(
        f"{r['agent']} minus {r['peer']} = {r['diff']:+.3f} [{r['diff_lo']:+.3f}, {r['diff_hi']:+.3f}] ({_verdict(r)})"
        for _, r in rows.iterrows()
    )


def _condition_section(
    cond: str,
    agg: pd.DataFrame,
    limits: pd.DataFrame,
    bagg: pd.DataFrame,
    goals: pd.DataFrame,
    dp: pd.DataFrame,
    pareto: pd.DataFrame,
    paired: pd.DataFrame,
) -> list[str]:
    a = agg[agg["condition"] == cond].copy()
    a["_o"] = a["group"].map(GROUP_ORDER)
    a = a.sort_values(["_o", "mean_reward"], ascending=[True, False])
    lim = limits[limits["condition"] == cond].set_index("method")
    lines = [
        f"## {cond}",
        "",
        "| method | group | seeds x splits | found % | mean K | median / p90 K | whole list % | at break-even % | BoR bits "
        "| mean reward | % of bor-dp | % of oracle |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in a.iterrows():
        m = r["method"]
        fd = lim.loc[m, "frac_dp"] * 100 if m in lim.index else math.nan
        fo = lim.loc[m, "frac_oracle"] * 100 if m in lim.index else math.nan
        lines.append(
            f"| {m} | {r['group']} | {int(r['n_seeds'])} x {int(r['n_splits'])} | {ci(r, 'found_pct', 1)} | {ci(r, 'mean_k')} | "
            f"{fmt(r['median_k'], nd=0)} / {fmt(r['p90_k'], nd=1)} | {fmt(r['whole_list_pct'], nd=1)} | "
            f"{fmt(r.get('break_even_pct', math.nan), nd=1)} | {ci(r, 'bor_bits')} | {ci(r, 'mean_reward', 3)} | {fmt(fd, nd=1)} | {fmt(fo, nd=1)} |"
        )
    idx = a.set_index("method")
    peers = idx[idx["group"] == "peer"]
    fixed = idx[idx["group"] == "baseline"]
    lines += [
        "",
        '**Where the BoR agent wins and where it does not** (point estimates; "within noise" '
        "means the peer's value lies inside the agent's query-bootstrap interval):",
        "",
    ]
    for agent in BOR_AGENTS:
        if agent not in idx.index:
            continue
        me = idx.loc[agent]
        lo, hi = me["mean_reward_lo"], me["mean_reward_hi"]

        def noise(v: float, lo: float = lo, hi: float = hi) -> str:
            return " (within noise)" if lo < hi and lo <= v <= hi else ""

        better = peers[peers["mean_reward"] >= me["mean_reward"]].sort_values("mean_reward", ascending=False)
        worse = peers[peers["mean_reward"] < me["mean_reward"]].sort_values("mean_reward", ascending=False)
        text = (
            f"- {agent} earns {fmt(me['mean_reward'], lo, hi, 3)} mean reward "
            f"({me['found_pct']:.1f}% found at mean K {me['mean_k']:.2f}, {me['bor_bits']:.2f} BoR bits). "
        )
        if better.empty:
            text += (
                f"It beats every peer on mean reward; the closest is {worse.index[0]} "
                f"({worse.iloc[0]['mean_reward']:.3f}{noise(worse.iloc[0]['mean_reward'])}). "
            )
        else:
            text += (
                "Peers as good or better on mean reward: "
                + ", ".join(f"{m} {r['mean_reward']:.3f}{noise(r['mean_reward'])}" for m, r in better.iterrows())
                + f". It beats the other {len(worse)} peers. "
            )
        pr = paired[(paired["condition"] == cond) & (paired["agent"] == agent)].set_index("peer")
        if len(pr):
            best_peer = peers["mean_reward"].idxmax()
            r = pr.loc[best_peer]
            sign = (
                "no clear difference"
                if r["diff_lo"] <= 0 <= r["diff_hi"]
                else ("the agent is ahead" if r["diff_lo"] > 0 else "the peer is ahead")
            )
            text += (
                f"Against the best peer, {best_peer}: {agent} minus {best_peer} = {r['diff']:+.3f} "
                f"[{r['diff_lo']:+.3f}, {r['diff_hi']:+.3f}] bits per query (paired bootstrap over the "
                f"{int(r['n_queries'])} test queries of all splits: {sign}). "
            )
        fb = fixed[fixed["mean_reward"] >= me["mean_reward"]]
        if len(fb):
            text += (
                "Fixed K at least as good (chosen with hindsight on the test split, so not a fair "
                "peer; bor-greedyk is the train-chosen K): "
                + ", ".join(f"{m} {r['mean_reward']:.3f}" for m, r in fb.iterrows())
                + ". "
            )
        dom = peers[(peers["found_pct"] > me["found_pct"]) & (peers["mean_k"] < me["mean_k"])]
        text += (
            "No peer has both a higher found % and a lower mean K."
            if dom.empty
            else "Peers with both a higher found % and a lower mean K: "
            + ", ".join(f"{m} ({r['found_pct']:.1f}% at K {r['mean_k']:.2f})" for m, r in dom.iterrows())
            + "."
        )
        lines.append(text)
    sup = paired[(paired["condition"] == cond) & (paired["peer"] == SUPERVISED_AGENT)]
    if len(sup):
        lines += ["", f"**RL against the supervised cut-off ({SUPERVISED_AGENT}):** " + rl_versus_cutoff(sup) + "."]
    lines += ["", "**Gap to the limits:** "]
    parts = []
    for agent in (*BOR_AGENTS, "f1-dqn"):
        if agent in lim.index:
            r = lim.loc[agent]
            parts.append(
                f"{agent} reaches {ci(r, 'frac_dp', 1, 100)}% of bor-dp's mean test reward and "
                f"{ci(r, 'frac_oracle', 1, 100)}% of the oracle's"
            )
    if "bor-dp" in idx.index and "oracle" in idx.index:
        share = 100 * idx.loc["bor-dp", "mean_reward"] / idx.loc["oracle", "mean_reward"]
        parts.append(
            f"bor-dp itself reaches {share:.1f}% of the oracle's (the price of deciding from scores alone "
            "on the tabular state)"
        )
    lines[-1] += "; ".join(parts) + "."
    d = dp[dp["condition"] == cond]
    if len(d):
        lines += [
            "",
            "| DP policy | objective | value in its model (train) | realised on train | "
            "mean reward (test) | states seen |",
            "|---|---|---|---|---|---|",
        ]
        for _, r in d.iterrows():
            lines.append(
                f"| {r['method']} | {r['objective']} | {r['model_value_train']:.3f} | "
                f"{r['realised_value_train']:.3f} | {r['mean_reward_test']:.3f} | {int(r['states_seen'])} |"
            )
        lines += [
            "",
            "The model value is optimal in the certainty-equivalent model of the tabular state; the realised "
            "training value is lower where pooled states are not Markov (see `agents/oracle.py`). For "
            "`dp-mdp` the values are discounted episode returns with step costs, not mean rewards.",
        ]
    g = goals[goals["condition"] == cond]
    if len(g):
        lines += ["", "**Goal check** (stated before running):", ""]
        for _, r in g.iterrows():
            mark = "met" if r["passed"] else "NOT met"
            det = f" ({r['detail']})" if isinstance(r["detail"], str) and r["detail"] else ""
            lines.append(f"- {r['agent']}: {r['check']}: {mark}{det}")
    front = pareto[pareto["pareto"] & (pareto["kind"] != "iso_bor")].sort_values("mean_k")["method"].tolist()
    lines += [
        "",
        figure_line(f"{cond} Pareto", f"figures/pareto_{cond}.png"),
        "",
        "Pareto front (oracle excluded), by increasing mean K: " + ", ".join(front) + ".",
        "",
        *bucket_table(bagg, cond, list(a["method"]), int(a["n_splits"].max())),
        "",
        figure_line(f"{cond} buckets", f"figures/buckets_{cond}.png"),
        "",
    ]
    return lines


def write_compare_report(
    out: Path,
    per_query: pd.DataFrame,
    summary: pd.DataFrame,
    buckets: pd.DataFrame,
    runs: Sequence[Path],
    *,
    command: str,
    seeds: Sequence[int],
    observation: str = "auto",
) -> list[str]:
    """aggregate.csv, buckets_aggregate.csv, limits.csv, dp.csv, goals.csv, figures and README; returns the
    conditions reported, in report order.

    ``observation`` is the observation set the learners read (``auto``: each query's own, score or
    hybrid); on a named set the tables carry the learners' plain names and the README says which set.
    """
    agg = aggregate_with_groups(summary, per_query)
    atomic_write_csv(agg, out / "aggregate.csv")
    bagg = bucket_aggregate(buckets)
    atomic_write_csv(bagg, out / "buckets_aggregate.csv")
    limits = limits_table(per_query)
    atomic_write_csv(limits, out / "limits.csv")
    dp = dp_table(runs, summary)
    atomic_write_csv(dp, out / "dp.csv")
    goals = goal_checks(agg, limits)
    atomic_write_csv(goals, out / "goals.csv")
    paired = paired_differences(per_query)
    atomic_write_csv(paired, out / "paired.csv")
    sg = split_goal(agg, paired, limits)
    atomic_write_csv(sg, out / "split_goal.csv")
    conds = condition_order(agg["condition"].unique())
    paretos = {}
    for cond in conds:
        try:
            n: int | None = candidate_set_size(per_query, cond)
        except ValueError:
            n = None  # mixed N or several relevant items: no iso-BoR lines
        paretos[cond] = pareto_figure(summary, cond, out / "figures" / f"pareto_{cond}.png", n=n)
        present = set(agg.loc[agg["condition"] == cond, "method"])
        bucket_figure(
            buckets,
            cond,
            [m for m in COMPARE_BUCKET_METHODS if m in present],
            out / "figures" / f"buckets_{cond}.png",
        )
    stoch = sorted({m for m in agg["method"] if MethodSpec.parse(m).kind.stochastic})
    lines = [
        "# Peers and limits: is RL with a BoR reward better than what practitioners already do?",
        "",
        "Generated by `shortlist compare` from its run directories (not committed: the command remakes them; "
        "`runs.csv` lists each with its config hash and the sha256 of its tables; each holds its config, "
        "command and manifest); do not edit by hand. Every number is on the test split. Methods trained "
        "or tuned on data saw only the training split. Stochastic methods (" + ", ".join(stoch) + ") ran "
        f"with seeds {', '.join(map(str, seeds))}; deterministic ones ran once (seed {seeds[0]}); every method "
        "ran on each train/test split of its condition (the seeds x splits column: main conditions run on "
        "several seeded 70/30 splits, the multi-tool ones on the first). Brackets: 95% percentile bootstrap "
        "interval over test queries (2,000 resamples stratified by split, the same for every method of a "
        "condition; each resample averages the runs); the spreads over seeds and over splits are in "
        'aggregate.csv (`*_seed_min`/`*_seed_max`, `*_split_min`/`*_split_max`). "Mean reward" is the mean '
        "per-query BoR reward "
        '(found x -log2 P_rand(K)); "BoR bits" the aggregate log2(mean found / mean P_rand); they can rank '
        "methods differently.",
        "",
        f"Command: `{command}`",
        "",
        *observation_lines(observation),
        "## Summary",
        "",
        "Goal, stated before running and reported either way: the BoR agent's mean test reward is at least "
        "that of every non-oracle peer on every condition and within 10% of bor-dp (the DP optimum of the "
        "tabular model estimated on the training split: a reference, not a bound, since other policies can beat "
        "it on train and test); no peer reaches both a higher found % and a lower mean K.",
        "",
        "| condition | agent | mean reward | best peer (mean reward) | >= every peer | % of bor-dp | "
        ">= 90% of bor-dp | % of oracle | no peer dominates |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    met = {"reward": 0, "dp": 0, "pareto": 0}
    total = 0
    for cond in conds:
        a = agg[agg["condition"] == cond].set_index("method")
        peers = a[a["group"] == "peer"]
        for agent in BOR_AGENTS:
            if agent not in a.index:
                continue
            g = goals[(goals["condition"] == cond) & (goals["agent"] == agent)].set_index("check")
            lim = limits[(limits["condition"] == cond) & (limits["method"] == agent)].iloc[0]
            ok = [bool(g["passed"].iloc[i]) for i in range(3)]
            total += 1
            met["reward"] += ok[0]
            met["dp"] += ok[1]
            met["pareto"] += ok[2]
            bp = peers["mean_reward"].idxmax()
            lines.append(
                f"| {cond} | {agent} | {ci(a.loc[agent], 'mean_reward', 3)} | "
                f"{bp} {peers.loc[bp, 'mean_reward']:.3f} | {'yes' if ok[0] else 'no'} | {100 * lim['frac_dp']:.1f} | "
                f"{'yes' if ok[1] else 'no'} | {100 * lim['frac_oracle']:.1f} | {'yes' if ok[2] else 'no'} |"
            )
    sup = paired[paired["peer"] == SUPERVISED_AGENT]
    nothing = sup[sup["diff_lo"] <= 0]
    lines += [
        "",
        f"Over {total} (condition, BoR agent) pairs: at least every peer's mean reward in {met['reward']}, "
        f"within 10% of bor-dp in {met['dp']}, undominated by every peer in {met['pareto']}.",
        "",
    ]
    if len(sup):
        ahead = sup[sup["diff_lo"] > 0]
        named = ", ".join(f"{r['condition']} {r['agent']}" for _, r in ahead.iterrows())
        lines += [
            f"Where RL adds nothing over the supervised cut-off ({SUPERVISED_AGENT}: the same observation, "
            f"no bootstrapping): in {len(nothing)} of {len(sup)} (condition, RL agent) pairs the RL agent is not "
            "significantly ahead of it (paired interval reaching 0 or below); it is ahead in "
            + (f"{len(ahead)}: {named}." if len(ahead) else "none."),
            "",
        ]
    lines += split_goal_lines(sg)
    if reads_second_scorer(observation):
        lines += hybrid_section(
            per_query, scorer_strength(per_query), condition_meta(runs[0].parent) if runs else {}, out
        )
    lines += [
        "## Methods",
        "",
    ]
    for m in sorted(agg["method"].unique(), key=lambda x: (GROUP_ORDER[method_group(x)], x)):
        lines.append(f"- `{m}` ({method_group(m)}): {_describe(m)}")
    lines += [
        "",
        "bor-dp is the best stationary STOP/CONTINUE rule on the tabular agent's discretised state in the "
        "model estimated from the training split (exact dynamic programming, mean reward objective); "
        "bor-dp-mdp solves the same model for the RL agents' own objective (discounted return with step "
        "costs). Both are optimal only inside that estimated model, not bounds: a policy outside the model "
        "(tabular Q, DQN, a tuned peer) can beat them. The oracle stops at the gold rank: its mean reward is "
        "the ceiling of every policy's mean reward (per query it earns the most any depth can), but it is "
        "not a ceiling for BoR bits, where a shallow fixed K can score higher.",
        "",
    ]
    for cond in conds:
        lines += _condition_section(cond, agg, limits, bagg, goals, dp, paretos[cond], paired)
    wall = []
    for run in runs:
        man = json.loads((run / "manifest.json").read_text())
        cfg = json.loads((run / "config.json").read_text())
        wall.append({"method": cfg["method"], "seconds": float(man.get("wall_seconds", math.nan))})
    w = pd.DataFrame(wall).groupby("method")["seconds"].agg(["count", "sum"]).sort_values("sum", ascending=False)
    lines += [
        "## Wall time",
        "",
        "Per method, summed over its run directories (from their manifests; resumed "
        "cells keep the time of the run that made them):",
        "",
        "| method | runs | seconds |",
        "|---|---|---|",
    ]
    lines += [f"| {m} | {int(r['count'])} | {r['sum']:.1f} |" for m, r in w.iterrows()]
    lines += [f"| total | {int(w['count'].sum())} | {w['sum'].sum():.1f} |", ""]
    atomic_write_text(out / "README.md", "\n".join(lines))
    return conds
