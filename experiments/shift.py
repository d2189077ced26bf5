"""Shift suites: trained policies, unchanged, on inputs unlike their training data.

``shortlist shift`` reads the run directories of a study (default ``results/runs``) and, for every
trained BoR agent and practitioners' peer of the base conditions (:data:`SHIFT_SOURCES`), evaluates
the saved policy on the test split (same split seed) of each shift target:

- **scorer shift**: the same benchmark ranked by the other scorer (BM25 <-> MiniLM);
- **benchmark shift**: the other benchmarks' main conditions, same scorer (cross-benchmark transfer);
- **query shift**: the same benchmark and scorer with rewritten queries (``qnotools``, ``qtrunc20``,
  ``qdrop30``: :mod:`benchmarks.query_shift`);

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
import shlex
import time
from collections import Counter, defaultdict
from dataclasses import asdict
from pathlib import Path

import pandas as pd

from agents import registry
from agents.method import MethodSpec
from agents.trained import load_run_policy
from benchmarks.conditions import Condition, source_memo
from benchmarks.names import ConditionId
from benchmarks.query_shift import QUERY_SHIFTS
from envs import EpisodeConfig
from experiments.config import read_cell_config
from experiments.io import code_fingerprint
from experiments.options import FolderArgs, ShiftArgs
from experiments.pipeline import Pipeline, Produced, run_pipeline
from experiments.plan import BOR_AGENTS, DEFAULT_SEEDS, base_plan
from experiments.report.shift_page import FITTED_PEERS, GAP_RULE
from experiments.runner import RUN_KEYS, get_condition, labelled_rows

#: The conditions whose trained runs are shifted (the base benchmark/scorer pairs of the goal).
SHIFT_SOURCES: tuple[str, ...] = ("bfcl-bm25", "bfcl-minilm", "metatool-bm25", "metatool-minilm", "toolbench-minilm")
SHIFT_BENCHMARKS = ("bfcl", "metatool", "toolbench")
SCORER_SWAP = {"bm25": "minilm", "minilm": "bm25"}


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
    """The run directories to shift, grouped by (source condition, split seed): the BoR agents, the gap rule
    and the fitted peers (:data:`experiments.report.shift_page.FITTED_PEERS`) trained on one of ``sources``
    (``methods``: these instead; ``("all",)``: every BoR agent and every peer, no fixed K, no limits).

    Only runs made by the current code are taken (their manifest's code fingerprint is
    :func:`experiments.io.code_fingerprint`): a stale run left in a shared runs folder is never
    shifted beside current ones; when none is current the error says how many were passed over.
    """
    wanted = set(methods or (*BOR_AGENTS, GAP_RULE, *FITTED_PEERS))
    if not runs_dir.is_dir():
        raise FileNotFoundError(f"{runs_dir}: no run directories (run `shortlist reproduce` and `compare` first)")
    current = code_fingerprint()
    stale = 0
    groups: dict[tuple[str, int], list[tuple[Path, dict]]] = defaultdict(list)
    for run in sorted(p for p in runs_dir.iterdir() if (p / "config.json").is_file()):
        cfg = read_cell_config(run)
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
    uses = Counter((target, split) for source, split in groups for _, target in shift_targets(source))
    with source_memo():  # each target's corpus, scores and candidates once, whichever sources shift to it
        conditions: dict[tuple[str, int], Condition] = {}  # each (target, split) built once: sources share targets
        for (source, split), runs in groups.items():
            frames += _shifted_group(source, split, runs, conditions, fa)
            for _, target in shift_targets(source):  # freed once no later group shifts to it
                uses[(target, split)] -= 1
                if not uses[(target, split)]:
                    del conditions[(target, split)]
    per_query = pd.concat(frames, ignore_index=True)
    return per_query.sort_values([*RUN_KEYS, "qid"], kind="stable").reset_index(drop=True)


def _shifted_group(
    source: str, split: int, runs: list[tuple[Path, dict]], conditions: dict[tuple[str, int], Condition], fa: FolderArgs
) -> list[pd.DataFrame]:
    """The per-query rows of one (source, split) group's runs on each of the source's targets."""
    frames = []
    policies = [(load_run_policy(run, cfg), cfg) for run, cfg in runs]
    if not any(cfg["method"] == GAP_RULE for _, cfg in runs):  # untrained: built here when no run has it
        plan = base_plan(ConditionId.parse(source))
        episode = asdict(plan.episode)
        policies.append((registry.make(GAP_RULE), {"method": GAP_RULE, "seed": DEFAULT_SEEDS[0], "episode": episode}))
    for kind, target in shift_targets(source):
        if (target, split) not in conditions:
            cid = ConditionId.parse(target)
            conditions[(target, split)] = get_condition(
                cid.benchmark, cid.scorer, cid.variant, split, fa.data_dir, fa.cache_dir
            )
        cond = conditions[(target, split)]
        for policy, cfg in policies:
            labels = {
                "condition": f"{source}@{target}",
                "source": source,
                "shift": kind,
                "target": target,
                "method": cfg["method"],
                "seed": cfg["seed"],
                "split_seed": split,
            }
            frames.append(labelled_rows(policy, cond.test, EpisodeConfig(**cfg["episode"]), cond.buckets, **labels))
    print(f"shifted {len(runs)} runs of {source} split {split}", flush=True)
    return frames


def shift_plan(groups: dict[tuple[str, int], list[tuple[Path, dict]]]) -> list[tuple[str, str]]:
    """(unit, exact command) of every evaluation :func:`shift_rows` makes: ``shortlist evaluate`` of each
    run on each target's test split (the gap rule built here when no run holds it: no command)."""
    lines = []
    for (source, split), runs in groups.items():
        built_gap = not any(cfg["method"] == GAP_RULE for _, cfg in runs)
        for _, target in shift_targets(source):
            cid = ConditionId.parse(target)
            where = ["--benchmark", cid.benchmark, "--scorer", cid.scorer, "--variant", cid.variant]
            for run, _ in runs:
                args = ["shortlist", "evaluate", "--run-dir", str(run), *where, "--split", "test"]
                lines.append((f"{run.name}@{target}", shlex.join(args)))
            if built_gap:
                lines.append((f"{source}__{GAP_RULE}__split{split}@{target}", "(untrained gap rule, built in process)"))
    return lines


def source_step_costs(groups: dict[tuple[str, int], list[tuple[Path, dict]]]) -> dict[str, float]:
    """Each source condition's cost per extra shown tool, read from its runs' episode settings; a source whose
    runs disagree is left out, and the console says so (its pairs then have no row in ``transfer.csv``)."""
    seen: dict[str, set[float]] = defaultdict(set)
    for (source, _), runs in groups.items():
        seen[source].update(EpisodeConfig(**cfg["episode"]).step_cost for _, cfg in runs)
    for source, costs in seen.items():
        if len(costs) > 1:
            print(f"{source}: its runs have different step costs ({sorted(costs)}); left out of transfer.csv")
    return {source: costs.pop() for source, costs in seen.items() if len(costs) == 1}


def cmd_shift(sa: ShiftArgs, fa: FolderArgs, command: str) -> int:
    """``shortlist shift``: evaluate, aggregate and report through the one pipeline (see the module docstring)."""
    from agents import bucket_table, summarise
    from experiments.report.shift_page import write_shift_report

    sources = sa.only or SHIFT_SOURCES
    for s in sources:
        shift_targets(s)  # refuses a bad source before any work
    groups = shifted_runs(Path(sa.runs_dir), sources, sa.methods)
    out = Path(sa.out)

    def produce() -> Produced:
        t0 = time.perf_counter()
        per_query = shift_rows(groups, fa)
        runs = sorted(run for group in groups.values() for run, _ in group)
        summary, buckets = summarise(per_query, RUN_KEYS), bucket_table(per_query, RUN_KEYS)
        return Produced(per_query, summary, buckets, runs, time.perf_counter() - t0)

    def report(tmp: Path, p: Produced) -> dict:
        vg = write_shift_report(tmp, p.per_query, command, sa.runs_dir, source_step_costs(groups))
        print(vg.to_string(index=False, float_format=lambda x: f"{x:.3f}"))
        return {
            "runs_dir": sa.runs_dir,
            "sources": list(sources),
            "method_filter": list(sa.methods) or "BoR agents, the gap rule and the fitted peers",
            "n_runs": int(p.per_query.groupby([*RUN_KEYS]).ngroups),
            "methods": sorted(p.per_query["method"].unique()),
            "targets": {s: [t for _, t in shift_targets(s)] for s in sources},
        }

    pipeline = Pipeline(
        "shift",
        out,
        command,
        plan=lambda: shift_plan(groups),
        produce=produce,
        report=report,
        owned=(),
        unit="evaluations",
    )
    return run_pipeline(pipeline, sa.dry_run)


__all__ = ["SHIFT_SOURCES", "cmd_shift", "shift_plan", "shift_targets", "source_step_costs"]
