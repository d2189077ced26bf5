"""Shift suites: trained policies, unchanged, on inputs unlike their training data.

``shortlist shift`` reads the run directories of a study (default ``results/runs``) and, for every
trained BoR agent and practitioners' peer of the base conditions (:data:`SHIFT_SOURCES`), evaluates
the saved policy on the test split (same split seed) of each shift target:

- **scorer shift**: the same benchmark ranked by the other scorer (BM25 <-> MiniLM);
- **benchmark shift**: the other benchmarks' main conditions, same scorer (cross-benchmark transfer);
- **query shift**: the same benchmark and scorer with rewritten queries (``qnotools``, ``qtrunc20``,
  ``qdrop30``: :mod:`benchmarks.shift`);

plus **none** (its own test split, which reproduces the run's own rows). Nothing is retrained; the
fitted peers keep their fitted parameters. The largest-gap rule (``gap``) needs no training, so it
is the reference a learned policy must not fall below under shift (built here, with the first
study seed's label, when the runs folder holds no ``gap`` run of a source and split).

Writes ``OUT/per_query.csv`` (one row per test query x run x target; ``condition`` is
``<source>@<target>``), ``aggregate.csv`` (means over runs with the split-stratified query
bootstrap), ``paired.csv`` (each BoR agent minus each peer on the same test units), ``versus_gap.csv``
and a generated README with its manifest.
"""

from __future__ import annotations

import json
import math
import time
from collections import defaultdict
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from agents import evaluate, registry
from benchmarks.names import ConditionId
from benchmarks.shift import QUERY_SHIFTS
from envs import EpisodeConfig
from experiments.commands import refresh_enclosing_index, run_index, staged
from experiments.config import MethodSpec
from experiments.io import atomic_write_csv, atomic_write_text, code_fingerprint, write_manifest
from experiments.options import FolderArgs, ShiftArgs
from experiments.plan import BOR_AGENTS, DEFAULT_SEEDS, base_plan
from experiments.report.markdown import ci, fmt, rates, table
from experiments.report.tables import aggregate_with_groups, paired_differences
from experiments.runner import RUN_KEYS, get_condition
from experiments.trained import load_run_policy, read_run_config

#: The conditions whose trained runs are shifted (the base benchmark/scorer pairs of the goal).
SHIFT_SOURCES: tuple[str, ...] = ("bfcl-bm25", "bfcl-minilm", "metatool-bm25", "metatool-minilm", "toolbench-minilm")
SHIFT_BENCHMARKS = ("bfcl", "metatool", "toolbench")
SCORER_SWAP = {"bm25": "minilm", "minilm": "bm25"}
#: The reference rule of the goal under shift.
GAP_RULE = "gap"


def shift_targets(source: str) -> list[tuple[str, str]]:
    """``(shift kind, target condition)`` for a base condition ``<benchmark>-<bm25|minilm>``."""
    cid = ConditionId.parse(source)
    if cid.variant or cid.benchmark not in SHIFT_BENCHMARKS or cid.scorer not in SCORER_SWAP:
        raise ValueError(
            f"shift source {source!r}: expected <{'|'.join(SHIFT_BENCHMARKS)}>-<bm25|minilm> without a variant"
        )
    out = [("none", source), ("scorer", f"{cid.benchmark}-{SCORER_SWAP[cid.scorer]}")]
    out += [("benchmark", f"{b}-{cid.scorer}") for b in SHIFT_BENCHMARKS if b != cid.benchmark]
    out += [("query", f"{source}-{q}") for q in QUERY_SHIFTS]
    return out


def shifted_runs(
    runs_dir: Path, sources: tuple[str, ...], methods: tuple[str, ...] = ()
) -> dict[tuple[str, int], list[tuple[Path, dict]]]:
    """The run directories to shift, grouped by (source condition, split seed): the BoR agents and the
    gap rule trained on one of ``sources`` (``methods``: these instead; ``("all",)``: every BoR agent
    and every peer, no fixed K, no limits).

    Only runs made by the current code are taken (their manifest's code fingerprint is
    :func:`experiments.io.code_fingerprint`): a stale run left in a shared runs folder is never
    shifted beside current ones; when none is current the error says how many were passed over.
    """
    wanted = set(methods or (*BOR_AGENTS, GAP_RULE))
    if not runs_dir.is_dir():
        raise FileNotFoundError(f"{runs_dir}: no run directories (run `shortlist reproduce` and `compare` first)")
    current = code_fingerprint()
    stale = 0
    groups: dict[tuple[str, int], list[tuple[Path, dict]]] = defaultdict(list)
    for run in sorted(p for p in runs_dir.iterdir() if (p / "config.json").is_file()):
        cfg = read_run_config(run)
        if cfg["condition"] not in sources or cfg["episode"].get("observation", "auto") != "auto":
            continue  # another condition, or a learner on a named observation set (its own comparison)
        group = MethodSpec.parse(cfg["method"]).kind.group
        if cfg["method"] in wanted or ("all" in wanted and (cfg["method"] in BOR_AGENTS or group == "peer")):
            if _fingerprint(run) != current:
                stale += 1
                continue
            groups[(cfg["condition"], int(cfg.get("split_seed", 0)))].append((run, cfg))
    if not groups:
        why = f" ({stale} made by other code: rerun them with this checkout)" if stale else ""
        raise ValueError(f"{runs_dir}: no runs of {', '.join(sorted(wanted))} on {', '.join(sources)}{why}")
    return dict(sorted(groups.items()))


def _fingerprint(run: Path) -> str | None:
    """The code fingerprint a run's manifest records (None when it has no readable manifest)."""
    try:
        return json.loads((run / "manifest.json").read_text(encoding="utf-8")).get("code_fingerprint")
    except (OSError, ValueError, AttributeError):
        return None


def shift_rows(groups: dict[tuple[str, int], list[tuple[Path, dict]]], fa: FolderArgs) -> pd.DataFrame:
    """Per-query rows of every shifted run (``groups``, from :func:`shifted_runs`) on every target (see
    the module docstring)."""
    frames = []
    for (source, split), runs in groups.items():
        policies = [(load_run_policy(run, cfg), cfg) for run, cfg in runs]
        if not any(cfg["method"] == GAP_RULE for _, cfg in runs):  # untrained: built here when no run has it
            plan = base_plan(ConditionId.parse(source))
            episode = asdict(EpisodeConfig(step_cost=plan.step_cost, gamma=plan.gamma))
            policies.append(
                (registry.make(GAP_RULE), {"method": GAP_RULE, "seed": DEFAULT_SEEDS[0], "episode": episode})
            )
        for kind, target in shift_targets(source):
            cid = ConditionId.parse(target)
            cond = get_condition(cid.benchmark, cid.scorer, cid.variant, split, fa.data_dir, fa.cache_dir)
            for policy, cfg in policies:
                rows = evaluate(policy, cond.test, EpisodeConfig(**cfg["episode"]), cond.buckets)
                rows.insert(0, "split_seed", split)
                rows.insert(0, "seed", cfg["seed"])
                rows.insert(0, "method", cfg["method"])
                rows.insert(0, "target", target)
                rows.insert(0, "shift", kind)
                rows.insert(0, "source", source)
                rows.insert(0, "condition", f"{source}@{target}")
                frames.append(rows)
        print(f"shifted {len(runs)} runs of {source} split {split}", flush=True)
    per_query = pd.concat(frames, ignore_index=True)
    return per_query.sort_values([*RUN_KEYS, "qid"], kind="stable").reset_index(drop=True)


def versus_gap(agg: pd.DataFrame, paired: pd.DataFrame) -> pd.DataFrame:
    """Per (source, target): the best BoR agent (largest mean reward) against the largest-gap rule, with
    the paired interval, and every BoR agent's whole-list rate."""
    rows = []
    for key, a in agg.groupby("condition", sort=False):
        a = a.set_index("method")
        agents = [m for m in BOR_AGENTS if m in a.index]
        if not agents or GAP_RULE not in a.index:
            continue
        best = max(agents, key=lambda m: a.loc[m, "mean_reward"])
        pr = paired[(paired["condition"] == key) & (paired["agent"] == best) & (paired["peer"] == GAP_RULE)]
        source, target = str(key).split("@")
        rows.append(
            {
                "source": source,
                "target": target,
                "shift": a["shift"].iloc[0] if "shift" in a.columns else "",
                "best_agent": best,
                "mean_reward": float(a.loc[best, "mean_reward"]),
                "gap_mean_reward": float(a.loc[GAP_RULE, "mean_reward"]),
                "diff": float(pr["diff"].iloc[0]) if len(pr) else float("nan"),
                "diff_lo": float(pr["diff_lo"].iloc[0]) if len(pr) else float("nan"),
                "diff_hi": float(pr["diff_hi"].iloc[0]) if len(pr) else float("nan"),
                "at_least_gap": bool(a.loc[best, "mean_reward"] >= a.loc[GAP_RULE, "mean_reward"]),
                **{f"whole_list_pct_{m}": float(a.loc[m, "whole_list_pct"]) for m in agents},
            }
        )
    return pd.DataFrame(rows)


def write_shift_report(out: Path, per_query: pd.DataFrame, command: str, runs_dir: str) -> pd.DataFrame:
    """aggregate.csv, paired.csv, versus_gap.csv and README.md; returns the versus-gap table."""
    from agents import summarise

    summary = summarise(per_query, RUN_KEYS)
    agg = aggregate_with_groups(summary, per_query)
    kinds = per_query.drop_duplicates("condition").set_index("condition")["shift"]
    agg.insert(1, "shift", agg["condition"].map(kinds))
    paired = paired_differences(per_query)
    vg = versus_gap(agg, paired)
    atomic_write_csv(per_query, out / "per_query.csv")
    atomic_write_csv(agg, out / "aggregate.csv")
    atomic_write_csv(paired, out / "paired.csv")
    atomic_write_csv(vg, out / "versus_gap.csv")
    shifted = vg[vg["shift"] != "none"]
    met = int(shifted["at_least_gap"].sum())
    sig_below = shifted[shifted["diff_hi"] < 0]
    learned = [m for m in BOR_AGENTS if m in set(agg["method"])]
    shifted_learned = agg[agg["method"].isin(learned) & (agg["shift"] != "none")]
    lines = [
        "# Shift: trained policies, unchanged, on unlike inputs",
        "",
        "Generated by `shortlist shift` from the run directories in "
        f"`{runs_dir}` (listed in `runs.csv` with the sha256 of their tables); do not edit by hand. "
        f"The methods ({', '.join(sorted(set(agg['method'])))}) of each base "
        f"condition ({', '.join(dict.fromkeys(per_query['source']))}) are evaluated, "
        "without retraining, on the test split (same split seed) of: the other scorer's ranking (scorer), the "
        "other benchmarks (benchmark), and rewritten queries (query: tool names removed, first 20 words, 30% "
        "word dropout; `benchmarks/shift.py`). `none` is the policy's own test split. Means are over runs "
        "(seeds x splits), brackets a 95% query bootstrap stratified by split; differences are paired over the "
        "same test units.",
        "",
        f"Command: `{command}`",
        "",
        "## Against the largest-gap rule",
        "",
        "Goal, stated before running: under every shift, the best BoR-trained policy's mean reward is at least "
        f"that of the largest-gap rule (`{GAP_RULE}`, no training). Met on {met} of {len(shifted)} "
        f"(source, shifted target) pairs; significantly below it (interval entirely below 0) on {len(sig_below)}"
        + (
            ": " + ", ".join(f"{r['source']} -> {r['target']}" for _, r in sig_below.iterrows())
            if len(sig_below)
            else ""
        )
        + ".",
        "",
        "Whole-list episodes (K = N) of the BoR agents under shift: " + rates(shifted_learned, "whole_list_pct"),
        "",
        "The learned agents stop at the latest at the break-even depth (`rewards.break_even_depth`: deeper, no "
        "shortlist can earn more than its steps cost), so K = N is out of their reach. Stops at that depth under "
        "shift, where the bound and not the learned values decided (the runaway that remains): "
        + rates(shifted_learned, "break_even_pct"),
        "",
    ]
    header = ["source", "shift", "target", "best BoR agent", "mean reward", "gap", "difference [95% paired]"]
    rows = [
        [
            r["source"],
            r["shift"],
            r["target"],
            r["best_agent"],
            f"{r['mean_reward']:.3f}",
            f"{r['gap_mean_reward']:.3f}",
            f"{r['diff']:+.3f} [{r['diff_lo']:+.3f}, {r['diff_hi']:+.3f}]",
        ]
        for _, r in vg.iterrows()
    ]
    lines += [*table(header, rows), "", "## Every method", ""]
    for key, a in agg.groupby("condition", sort=False):
        lines += [
            f"### {key} ({a['shift'].iloc[0]})",
            "",
            *table(
                ["method", "group", "runs", "found %", "mean K", "whole list %", "at break-even %", "mean reward"],
                [
                    [
                        r["method"],
                        r["group"],
                        str(int(r["n_seeds"]) * int(r["n_splits"])),
                        fmt(r["found_pct"], nd=1),
                        fmt(r["mean_k"]),
                        fmt(r["whole_list_pct"], nd=2),
                        fmt(r.get("break_even_pct", math.nan), nd=2),
                        ci(r, "mean_reward", 3),
                    ]
                    for _, r in a.sort_values("mean_reward", ascending=False).iterrows()
                ],
            ),
            "",
        ]
    atomic_write_text(out / "README.md", "\n".join(lines))
    return vg


def cmd_shift(sa: ShiftArgs, fa: FolderArgs, command: str) -> int:
    """``shortlist shift``: evaluate, aggregate and report (see the module docstring)."""
    t0 = time.perf_counter()
    sources = sa.only or SHIFT_SOURCES
    for s in sources:
        shift_targets(s)  # refuses a bad source before any work
    groups = shifted_runs(Path(sa.runs_dir), sources, sa.methods)
    per_query = shift_rows(groups, fa)
    runs = sorted(run for group in groups.values() for run, _ in group)
    out = Path(sa.out)
    with staged(out) as tmp:
        vg = write_shift_report(tmp, per_query, command, sa.runs_dir)
        atomic_write_csv(run_index(runs), tmp / "runs.csv")
        write_manifest(
            tmp / "manifest.json",
            command=command,
            runs_dir=sa.runs_dir,
            runs=[run.name for run in runs],
            sources=list(sources),
            method_filter=list(sa.methods) or "BoR agents and the gap rule",
            n_runs=int(per_query.groupby([*RUN_KEYS]).ngroups),
            methods=sorted(per_query["method"].unique()),
            targets={s: [t for _, t in shift_targets(s)] for s in sources},
            wall_seconds=round(time.perf_counter() - t0, 1),
        )
    refresh_enclosing_index(out)
    print(vg.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print(f"wrote {out}")
    return 0


__all__ = ["SHIFT_SOURCES", "cmd_shift", "shift_targets", "versus_gap"]
