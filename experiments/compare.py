"""``shortlist compare``: the BoR agents against the peers practitioners use, and the limits.

Methods (one cell per condition x method x seed, through the one runner):

- agents: BoR-DQN, BoR tabular Q, F1-DQN (:mod:`agents.dqn`, :mod:`agents.tabular`);
- peers (:mod:`agents.peers`, :mod:`agents.choppy`): largest score gap (plain, tail 10%
  ignored, buffer +5, both), min-max score threshold (fitted for mean reward; 90% training
  coverage), top-p softmax mass, best fixed K on train (by mean reward; by BoR bits), the
  Choppy-style cut-off model, random depth;
- baselines: fixed K in {1, 3, 5, 10, 20, 50};
- limits (:mod:`agents.oracle`): the hindsight oracle, exact optimal stopping on the tabular
  state for mean reward (``bor-dp``) and for the RL episode return (``bor-dp-mdp``).

Stochastic methods (DQN, tabular Q, Choppy, random) run on every seed; deterministic ones
once, on the first seed (their other seeds would repeat the same numbers).

Outputs in ``out`` (default ``results/peers``): the runner's run directories (config,
command, manifest, per-query rows, agent) and combined tables, then ``aggregate.csv``
(mean and seeded bootstrap 95% interval over seeds per condition x method),
``buckets_aggregate.csv``, ``limits.csv`` (mean reward as a fraction of the DP policy's
and the oracle's), ``dp.csv`` (the DP policy's model, training and test values),
``goals.csv`` (the stated goal, checked), ``paired.csv`` (each BoR agent minus each peer,
paired bootstrap over test queries), ``figures/pareto_<condition>.png`` with a sibling
CSV of exactly the plotted numbers, ``figures/buckets_<condition>.png`` (+ CSV),
``manifest.json`` and a generated ``README.md``. Nothing in the folder is written by hand.
"""

from __future__ import annotations

import json
import math
import os
import platform
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from agents import registry
from agents.evaluation import BUCKET_ORDER, bootstrap_ci
from experiments.cli import CommonArgs, LearnArgs, opt
from experiments.config import FIXED_KS, Cell, MethodSpec

AGENTS: tuple[MethodSpec, ...] = (MethodSpec("dqn", "bor"), MethodSpec("tabular", "bor"), MethodSpec("dqn", "f1"))
PEERS: tuple[str, ...] = (
    "gap",
    "gap-tail10",
    "gap-buffer5",
    "gap-tail10-buffer5",
    "threshold",
    "threshold-cov90",
    "topp",
    "greedyk",
    "greedyk-bits",
    "choppy",
    "random",
)
LIMITS: tuple[str, ...] = ("oracle", "dp", "dp-mdp")
#: The agents whose goal is checked ("the BoR agent"), in report order.
BOR_AGENTS = ("bor-dqn", "bor-tabular")
BUCKET_METHODS = (
    "bor-dqn",
    "bor-tabular",
    "f1-dqn",
    "gap-tail10-buffer5",
    "bor-threshold",
    "bor-greedyk",
    "bor-choppy",
    "bor-dp",
    "oracle",
)
GOAL_FRACTION = 0.9
GROUP_ORDER = {"agent": 0, "peer": 1, "baseline": 2, "limit": 3}


@dataclass(frozen=True)
class CompareArgs:
    """Options of ``shortlist compare`` (with :class:`LearnArgs` and :class:`CommonArgs`)."""

    only: tuple[str, ...] = opt(
        (), "conditions to compare (default: every condition of the study except the registry-size sweep points)"
    )
    out: str = opt("results/peers", "results folder")
    runs_dir: str = opt(
        "results/runs",
        "run directories (shared with `shortlist reproduce --out results`, so cells "
        "both commands run, e.g. BoR-DQN, are trained once)",
    )
    dry_run: bool = opt(False, "print the cells without running them")


def compare_methods() -> list[MethodSpec]:
    """Agents, peers, limits and fixed K, in report order."""
    return [*AGENTS, *(MethodSpec(f) for f in (*PEERS, *LIMITS)), *(MethodSpec("fixed", "bor", k) for k in FIXED_KS)]


def method_group(method: str) -> str:
    """ "agent", "peer", "baseline" (fixed K) or "limit" for a method name."""
    spec = MethodSpec.parse(method)
    if spec.agent in ("dqn", "tabular"):
        return "agent"
    if spec.agent == "fixed":
        return "baseline"
    return "limit" if spec.agent in LIMITS else "peer"


def is_stochastic(spec: MethodSpec) -> bool:
    """Whether a method's result depends on the seed (then it runs on every seed)."""
    if spec.agent in ("dqn", "tabular"):
        return True
    if spec.agent == "fixed":
        return False
    return bool(getattr(registry.make(spec.agent, spec.reward), "stochastic", True))


def compare_cells(plans: Sequence, seeds: Sequence[int], learn: dict) -> list[Cell]:
    """Every cell of the comparison: stochastic methods on all seeds, the rest on the first."""
    from experiments.sweep import cells_for

    if not seeds:
        raise ValueError("give at least one seed")
    methods = compare_methods()
    stoch = [m for m in methods if is_stochastic(m)]
    det = [m for m in methods if not is_stochastic(m)]
    cells = cells_for(plans, seeds, {p.name: stoch for p in plans}, **learn)
    cells += cells_for(plans, list(seeds)[:1], {p.name: det for p in plans}, **learn)
    return cells


def resolve_plans(only: Sequence[str]) -> list:
    """Condition plans from ``experiments.sweep.PLANS`` as it is at call time.

    Default: every plan of the study except registry-size sweep points (``sweep_only``),
    which ``only`` can still name.
    """
    from experiments import sweep

    unknown = [c for c in only if c not in sweep.PLANS]
    if unknown:
        raise ValueError(f"unknown condition(s) {unknown}; expected some of {', '.join(sweep.PLANS)}")
    if only:
        return [sweep.PLANS[c] for c in only]
    return [p for p in sweep.PLANS.values() if not getattr(p, "sweep_only", False)]


def _condition_order(conds: Sequence[str]) -> list[str]:
    from experiments import sweep

    known = [c for c in sweep.PLANS if c in conds]
    return known + sorted(c for c in conds if c not in known)


def cmd_compare(ca: CompareArgs, la: LearnArgs, co: CommonArgs, command: str) -> int:
    """Run (or resume) every comparison cell, then write tables, figures and the README."""
    from experiments.cli import learn_kwargs, run_with
    from experiments.runner import collect, write_tables

    t0 = time.perf_counter()
    plans = resolve_plans(ca.only)
    cells = compare_cells(plans, la.seeds, learn_kwargs(la))
    out = Path(ca.out)
    if ca.dry_run:
        for c in cells:
            print(c.run_id)
        print(f"{len(cells)} cells")
        return 0
    runs = run_with(cells, out, co, command, runs_dir=Path(ca.runs_dir))
    t_runs = time.perf_counter() - t0
    per_query, summary, buckets = collect(runs)
    write_tables(out, per_query, summary, buckets)
    write_compare_report(
        out,
        per_query,
        summary,
        buckets,
        runs,
        command=command,
        seeds=la.seeds,
        timings={"cells (this invocation)": t_runs},
    )
    print(f"wrote {len(runs)} runs, tables, figures and README.md to {out}")
    return 0


# ----------------------------------------------------------------------------- tables


def _agg(summary: pd.DataFrame) -> pd.DataFrame:
    from experiments.report import aggregate

    agg = aggregate(summary)
    agg.insert(2, "group", agg["method"].map(method_group))
    return agg


def bucket_aggregate(buckets: pd.DataFrame) -> pd.DataFrame:
    """Per condition x method x bucket: n, and found % and mean K (mean, min, max over seeds)."""
    b = (
        buckets.groupby(["condition", "method", "bucket"], sort=False)
        .agg(
            n=("n", "first"),
            n_seeds=("seed", "nunique"),
            found_pct=("found_pct", "mean"),
            found_pct_min=("found_pct", "min"),
            found_pct_max=("found_pct", "max"),
            mean_k=("mean_k", "mean"),
            mean_k_min=("mean_k", "min"),
            mean_k_max=("mean_k", "max"),
        )
        .reset_index()
    )
    b["_b"] = b["bucket"].map({x: i for i, x in enumerate(BUCKET_ORDER)})
    return b.sort_values(["condition", "method", "_b"]).drop(columns="_b").reset_index(drop=True)


def limits_table(summary: pd.DataFrame, seed: int = 0) -> pd.DataFrame:
    """Mean test reward of every method as a fraction of ``bor-dp``'s and the oracle's.

    Fractions are per seed (the limits are deterministic) with a seeded bootstrap interval.
    """
    rows = []
    for cond, g in summary.groupby("condition", sort=True):
        ref = {m: float(g.loc[g["method"] == m, "mean_reward"].mean()) for m in ("bor-dp", "oracle")}
        for method, gm in g.groupby("method", sort=True):
            row: dict[str, object] = {
                "condition": cond,
                "method": method,
                "group": method_group(method),
                "n_seeds": len(gm),
                "mean_reward": float(gm["mean_reward"].mean()),
            }
            for key, name in (("bor-dp", "dp"), ("oracle", "oracle")):
                denom = ref[key]
                if math.isnan(denom) or denom == 0:
                    row[f"frac_{name}"] = row[f"frac_{name}_lo"] = row[f"frac_{name}_hi"] = math.nan
                    continue
                mean, lo, hi = bootstrap_ci((gm["mean_reward"] / denom).to_numpy(), seed=seed)
                row[f"frac_{name}"], row[f"frac_{name}_lo"], row[f"frac_{name}_hi"] = mean, lo, hi
            rows.append(row)
    return pd.DataFrame(rows)


def dp_table(runs: Sequence[Path], summary: pd.DataFrame) -> pd.DataFrame:
    """The DP policies' value in their own model, realised on train, and on test."""
    rows = []
    for run in runs:
        cfg = json.loads((run / "config.json").read_text())
        if cfg.get("agent") not in ("dp", "dp-mdp") or not (run / "agent.json").is_file():
            continue
        p = json.loads((run / "agent.json").read_text())["params"]
        s = summary[(summary["condition"] == cfg["condition"]) & (summary["method"] == cfg["method"])]
        rows.append(
            {
                "condition": cfg["condition"],
                "method": cfg["method"],
                "objective": p["objective"],
                "model_value_train": p["model_value"],
                "realised_value_train": p["train_value"],
                "mean_reward_test": float(s["mean_reward"].mean()),
                "solve_seconds": p["solve_seconds"],
                "states_seen": int(np.sum(p["seen"])),
            }
        )
    return pd.DataFrame(rows)


def pareto_front(found: np.ndarray, k: np.ndarray) -> np.ndarray:
    """True where no other point has found >= and K <= with one of them strict."""
    f = np.asarray(found, dtype=float)[:, None]
    kk = np.asarray(k, dtype=float)[:, None]
    dom = (f.T >= f) & (kk.T <= kk) & ((f.T > f) | (kk.T < kk))
    return ~dom.any(axis=1)


def pareto_figure(agg: pd.DataFrame, condition: str, out_png: Path) -> pd.DataFrame:
    """found % against mean K for every method of a condition; writes PNG + sibling CSV.

    The front is computed among every method except the oracle (which reads labels).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from experiments.runner import atomic_write_csv

    a = agg[agg["condition"] == condition].copy()
    cols = [
        "condition",
        "method",
        "group",
        "n_seeds",
        "mean_k",
        "mean_k_lo",
        "mean_k_hi",
        "found_pct",
        "found_pct_lo",
        "found_pct_hi",
        "mean_reward",
    ]
    a = a[cols].reset_index(drop=True)
    real = (a["method"] != "oracle").to_numpy()
    front = np.zeros(len(a), dtype=bool)
    front[real] = pareto_front(a.loc[real, "found_pct"].to_numpy(), a.loc[real, "mean_k"].to_numpy())
    a["pareto"] = front
    a = a.sort_values(["mean_k", "found_pct"]).reset_index(drop=True)
    style = {
        "agent": ("*", "tab:red", 160),
        "peer": ("o", "tab:blue", 50),
        "baseline": ("s", "tab:gray", 40),
        "limit": ("^", "tab:green", 70),
    }
    fig, ax = plt.subplots(figsize=(12, 7.5))
    for group, (marker, color, size) in style.items():
        g = a[a["group"] == group]
        if not len(g):
            continue
        ax.scatter(g["mean_k"], g["found_pct"], marker=marker, color=color, s=size, label=group, zorder=3)
        xerr = np.vstack([g["mean_k"] - g["mean_k_lo"], g["mean_k_hi"] - g["mean_k"]])
        yerr = np.vstack([g["found_pct"] - g["found_pct_lo"], g["found_pct_hi"] - g["found_pct"]])
        ax.errorbar(
            g["mean_k"],
            g["found_pct"],
            xerr=np.nan_to_num(xerr),
            yerr=np.nan_to_num(yerr),
            fmt="none",
            ecolor=color,
            alpha=0.5,
            zorder=2,
        )
    f = a[a["pareto"]].sort_values("mean_k")
    ax.step(
        f["mean_k"],
        f["found_pct"],
        where="post",
        color="black",
        alpha=0.4,
        lw=1,
        label="Pareto front (oracle excluded)",
    )
    # one label per coincident point; neighbouring labels alternate offsets to stay readable
    spots = a.groupby([a["mean_k"].round(2), a["found_pct"].round(1)], sort=True)["method"].agg(", ".join)
    offsets = ((5, 3), (5, -10), (-5, 8), (-5, -12))
    for i, ((k, found), names) in enumerate(spots.items()):
        dx, dy = offsets[i % len(offsets)]
        ax.annotate(
            names,
            (k, found),
            fontsize=6.5,
            xytext=(dx, dy),
            textcoords="offset points",
            ha="left" if dx > 0 else "right",
        )
    ax.set_xscale("log")
    ax.set_xlabel("mean K (shortlist depth, log scale)")
    ax.set_ylabel("found % (shortlist holds the gold tool)")
    ax.set_title(f"{condition}: found % against mean K, test split (whiskers: bootstrap 95% over seeds)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    out_png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    atomic_write_csv(a, out_png.with_suffix(".csv"))
    return a


def paired_differences(per_query: pd.DataFrame, seed: int = 0, n_boot: int = 10_000) -> pd.DataFrame:
    """Mean reward of each BoR agent minus each peer's, with a paired bootstrap over test queries.

    Per query, a method's reward is its mean over seeds; the difference of means is resampled
    over queries (the same resample for both methods) with a seeded generator. This interval
    covers test-set sampling noise, which the seed intervals do not.
    """
    rows = []
    for cond in _condition_order(per_query["condition"].unique()):
        pq = per_query[per_query["condition"] == cond]
        by = pq.groupby(["method", "qid"])["reward"].mean().unstack("qid")
        rng = np.random.default_rng(seed)
        idx = rng.integers(by.shape[1], size=(n_boot, by.shape[1]))
        for agent in BOR_AGENTS:
            if agent not in by.index:
                continue
            for peer in sorted(m for m in by.index if method_group(m) == "peer"):
                d = (by.loc[agent] - by.loc[peer]).to_numpy()
                boot = d[idx].mean(axis=1)
                rows.append(
                    {
                        "condition": cond,
                        "agent": agent,
                        "peer": peer,
                        "n_queries": d.size,
                        "diff": float(d.mean()),
                        "diff_lo": float(np.quantile(boot, 0.025)),
                        "diff_hi": float(np.quantile(boot, 0.975)),
                    }
                )
    return pd.DataFrame(rows)


def goal_checks(agg: pd.DataFrame, limits: pd.DataFrame) -> pd.DataFrame:
    """The stated goal per condition and BoR agent, checked on the point estimates.

    1. mean test reward >= every non-oracle peer's ("peer" group);
    2. mean test reward >= 90% of the exact optimal-stopping policy's (``bor-dp``);
    3. no peer has both a higher found % and a lower mean K.
    """
    rows = []
    for cond in _condition_order(agg["condition"].unique()):
        a = agg[agg["condition"] == cond].set_index("method")
        peers = a[a["group"] == "peer"]
        for agent in BOR_AGENTS:
            if agent not in a.index:
                continue
            me = a.loc[agent]
            better = peers[peers["mean_reward"] > me["mean_reward"]].sort_values("mean_reward", ascending=False)
            rows.append(
                {
                    "condition": cond,
                    "agent": agent,
                    "check": "reward >= every peer",
                    "passed": better.empty,
                    "detail": "; ".join(f"{m} {r['mean_reward']:.3f}" for m, r in better.iterrows())
                    or f"best peer {peers['mean_reward'].idxmax()} {peers['mean_reward'].max():.3f}"
                    if len(peers)
                    else "",
                }
            )
            lim = limits[(limits["condition"] == cond) & (limits["method"] == agent)]
            frac = float(lim["frac_dp"].iloc[0]) if len(lim) else math.nan
            rows.append(
                {
                    "condition": cond,
                    "agent": agent,
                    "check": f"reward >= {GOAL_FRACTION:.0%} of bor-dp",
                    "passed": bool(frac >= GOAL_FRACTION),
                    "detail": f"{frac:.3f}",
                }
            )
            dom = peers[(peers["found_pct"] > me["found_pct"]) & (peers["mean_k"] < me["mean_k"])]
            rows.append(
                {
                    "condition": cond,
                    "agent": agent,
                    "check": "no peer dominates (found up, K down)",
                    "passed": dom.empty,
                    "detail": "; ".join(f"{m} {r['found_pct']:.1f}% at K {r['mean_k']:.2f}" for m, r in dom.iterrows()),
                }
            )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- README


def _f(x: float, lo: float | None = None, hi: float | None = None, nd: int = 2) -> str:
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if isinstance(x, float) and math.isinf(x):
        return "-inf" if x < 0 else "inf"
    s = f"{x:.{nd}f}"
    if lo is not None and hi is not None and not (math.isnan(lo) or math.isnan(hi)) and hi - lo > 0:
        s += f" [{lo:.{nd}f}, {hi:.{nd}f}]"
    return s


def _ci(row: pd.Series, col: str, nd: int = 2, scale: float = 1.0) -> str:
    """``row[col]`` with its ``_lo``/``_hi`` interval, optionally scaled (e.g. to percent)."""
    return _f(scale * row[col], scale * row[f"{col}_lo"], scale * row[f"{col}_hi"], nd)


def _describe(method: str) -> str:
    spec = MethodSpec.parse(method)
    if spec.agent == "dqn":
        return f"SB3 DQN trained with the {spec.reward.upper()} reward"
    if spec.agent == "tabular":
        return f"tabular Q-learning on the discretised state, {spec.reward.upper()} reward"
    if spec.agent == "fixed":
        return f"always the top {spec.k}"
    return registry.FAMILIES[spec.agent].description


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
        "| method | group | seeds | found % | mean K | BoR bits | mean reward | % of bor-dp | % of oracle |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for _, r in a.iterrows():
        m = r["method"]
        fd = lim.loc[m, "frac_dp"] * 100 if m in lim.index else math.nan
        fo = lim.loc[m, "frac_oracle"] * 100 if m in lim.index else math.nan
        lines.append(
            f"| {m} | {r['group']} | {int(r['n_seeds'])} | {_ci(r, 'found_pct', 1)} | {_ci(r, 'mean_k')} | "
            f"{_ci(r, 'bor_bits')} | {_ci(r, 'mean_reward', 3)} | {_f(fd, nd=1)} | {_f(fo, nd=1)} |"
        )
    idx = a.set_index("method")
    peers = idx[idx["group"] == "peer"]
    fixed = idx[idx["group"] == "baseline"]
    lines += [
        "",
        '**Where the BoR agent wins and where it does not** (point estimates; "within seed noise" '
        "means the peer's value lies inside the agent's bootstrap interval):",
        "",
    ]
    for agent in BOR_AGENTS:
        if agent not in idx.index:
            continue
        me = idx.loc[agent]
        lo, hi = me["mean_reward_lo"], me["mean_reward_hi"]

        def noise(v: float, lo: float = lo, hi: float = hi) -> str:
            return " (within seed noise)" if lo < hi and lo <= v <= hi else ""

        better = peers[peers["mean_reward"] >= me["mean_reward"]].sort_values("mean_reward", ascending=False)
        worse = peers[peers["mean_reward"] < me["mean_reward"]].sort_values("mean_reward", ascending=False)
        text = (
            f"- {agent} earns {_f(me['mean_reward'], lo, hi, 3)} mean reward "
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
                f"{int(r['n_queries'])} test queries: {sign}). "
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
    lines += ["", "**Gap to the limits:** "]
    parts = []
    for agent in (*BOR_AGENTS, "f1-dqn"):
        if agent in lim.index:
            r = lim.loc[agent]
            parts.append(
                f"{agent} reaches {_ci(r, 'frac_dp', 1, 100)}% of bor-dp's mean test reward and "
                f"{_ci(r, 'frac_oracle', 1, 100)}% of the oracle's"
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
            "mean reward (test) | states seen | solve s |",
            "|---|---|---|---|---|---|---|",
        ]
        for _, r in d.iterrows():
            lines.append(
                f"| {r['method']} | {r['objective']} | {r['model_value_train']:.3f} | "
                f"{r['realised_value_train']:.3f} | {r['mean_reward_test']:.3f} | {int(r['states_seen'])} | "
                f"{r['solve_seconds']:.3f} |"
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
    front = pareto[pareto["pareto"]].sort_values("mean_k")["method"].tolist()
    lines += [
        "",
        f"![{cond} Pareto](figures/pareto_{cond}.png) (numbers: `figures/pareto_{cond}.csv`)",
        "",
        "Pareto front (oracle excluded), by increasing mean K: " + ", ".join(front) + ".",
        "",
    ]
    b = bagg[bagg["condition"] == cond]
    present = [x for x in BUCKET_ORDER if x in set(b["bucket"])]
    ns = {bk: int(b[b["bucket"] == bk]["n"].iloc[0]) for bk in present}
    lines += [
        "Per difficulty bucket (gold rank 1 / 2-5 / 6-20 / 21+), found % / mean K, mean over seeds:",
        "",
        "| method | " + " | ".join(f"{bk} (n={ns[bk]})" for bk in present) + " |",
        "|---|" + "---|" * len(present),
    ]
    for m in a["method"]:
        cells = []
        for bk in present:
            r = b[(b["method"] == m) & (b["bucket"] == bk)]
            cells.append(f"{r['found_pct'].iloc[0]:.1f} / {r['mean_k'].iloc[0]:.2f}" if len(r) else "-")
        lines.append(f"| {m} | " + " | ".join(cells) + " |")
    lines += ["", f"![{cond} buckets](figures/buckets_{cond}.png) (numbers: `figures/buckets_{cond}.csv`)", ""]
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
    timings: dict[str, float] | None = None,
) -> None:
    """aggregate.csv, buckets_aggregate.csv, limits.csv, dp.csv, goals.csv, figures, manifest and README."""
    from experiments.report import bucket_figure
    from experiments.runner import atomic_write_csv, atomic_write_text, git_state, package_versions

    t0 = time.perf_counter()
    agg = _agg(summary)
    atomic_write_csv(agg, out / "aggregate.csv")
    bagg = bucket_aggregate(buckets)
    atomic_write_csv(bagg, out / "buckets_aggregate.csv")
    limits = limits_table(summary)
    atomic_write_csv(limits, out / "limits.csv")
    dp = dp_table(runs, summary)
    atomic_write_csv(dp, out / "dp.csv")
    goals = goal_checks(agg, limits)
    atomic_write_csv(goals, out / "goals.csv")
    paired = paired_differences(per_query)
    atomic_write_csv(paired, out / "paired.csv")
    conds = _condition_order(agg["condition"].unique())
    paretos = {}
    for cond in conds:
        paretos[cond] = pareto_figure(agg, cond, out / "figures" / f"pareto_{cond}.png")
        present = set(agg.loc[agg["condition"] == cond, "method"])
        bucket_figure(
            buckets, cond, [m for m in BUCKET_METHODS if m in present], out / "figures" / f"buckets_{cond}.png"
        )
    stoch = sorted({m for m in agg["method"] if is_stochastic(MethodSpec.parse(m))})
    lines = [
        "# Peers and limits: is RL with a BoR reward better than what practitioners already do?",
        "",
        "Generated by `shortlist compare` from the run directories under `runs/` (each with its config, "
        "command and manifest); do not edit by hand. Every number is on the test split. Methods trained "
        "or tuned on data saw only the training split. Stochastic methods (" + ", ".join(stoch) + ") ran "
        f"with seeds {', '.join(map(str, seeds))}; deterministic ones ran once (seed {seeds[0]}). Brackets: "
        'seeded bootstrap 95% interval over seeds. "Mean reward" is the mean per-query BoR reward '
        '(found x -log2 P_rand(K)); "BoR bits" the aggregate log2(mean found / mean P_rand); they can rank '
        "methods differently.",
        "",
        f"Command: `{command}`",
        "",
        "## Summary",
        "",
        "Goal, stated before running and reported either way: the BoR agent's mean test reward is at least "
        "that of every non-oracle peer on every condition and within 10% of the exact optimal-stopping policy "
        "(bor-dp); no peer reaches both a higher found % and a lower mean K.",
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
                f"| {cond} | {agent} | {_ci(a.loc[agent], 'mean_reward', 3)} | "
                f"{bp} {peers.loc[bp, 'mean_reward']:.3f} | {'yes' if ok[0] else 'no'} | {100 * lim['frac_dp']:.1f} | "
                f"{'yes' if ok[1] else 'no'} | {100 * lim['frac_oracle']:.1f} | {'yes' if ok[2] else 'no'} |"
            )
    lines += [
        "",
        f"Over {total} (condition, BoR agent) pairs: at least every peer's mean reward in {met['reward']}, "
        f"within 10% of bor-dp in {met['dp']}, undominated by every peer in {met['pareto']}.",
        "",
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
        "costs). The oracle stops at the gold rank and is the ceiling for every policy.",
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
    if timings:  # this invocation's timings go to the manifest only, so the README is reproducible
        timings = {**timings, "report": time.perf_counter() - t0}
    atomic_write_text(out / "README.md", "\n".join(lines))
    manifest = {
        "command": command,
        "conditions": conds,
        "seeds": list(seeds),
        "runs": [p.name for p in runs],
        **git_state(),
        "versions": package_versions(),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "timings_seconds": {k: round(v, 3) for k, v in (timings or {}).items()},
    }
    atomic_write_text(out / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True) + "\n")
