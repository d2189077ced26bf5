"""``shortlist``: train, evaluate and reproduce shortlist-depth policies.

Options come from frozen dataclasses (one field = one flag; its help text is the
field's ``help`` metadata). User errors print one line ``shortlist: error: ...``
and exit with status 2; nothing half-written is left behind.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Sequence
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, get_args, get_origin, get_type_hints

from benchmarks.corpus import DataError


def opt(default: Any, help: str, **kw: Any) -> Any:  # noqa: A002
    """A dataclass field carrying its CLI help text."""
    if isinstance(default, list | tuple):
        return field(default_factory=lambda: tuple(default), metadata={"help": help, **kw})
    return field(default=default, metadata={"help": help, **kw})


@dataclass(frozen=True)
class CommonArgs:
    data_dir: str | None = opt(None, "benchmark data folder (default: $SHORTLIST_DATA_DIR or the per-user cache)")
    cache_dir: str | None = opt(
        None, "score cache folder (default: $SHORTLIST_CACHE_DIR or ~/.cache/shortlist-depth/scores)"
    )
    workers: int = opt(1, "cells run in parallel (local processes, or CPUs of a local Ray instance)")
    backend: str = opt("local", "where cells run: local (processes on this machine) or ray (Ray tasks)")
    ray_address: str | None = opt(
        None, "with --backend ray: address of an existing Ray cluster (ray.init(address=...))"
    )
    no_progress: bool = opt(False, "hide progress bars")


@dataclass(frozen=True)
class LearnArgs:
    seeds: tuple[int, ...] = opt((42, 123, 456), "training seeds (one run per seed)")
    step_cost: float | None = opt(None, "cost of each CONTINUE (default: the condition's paper setting, 0.01 or 0.005)")
    gamma: float | None = opt(None, "discount factor (default: the condition's paper setting, 0.95 or 1.0)")
    max_depth: int | None = opt(None, "depth cap that forces a STOP (default: N, the whole candidate list)")
    split_seed: int = opt(0, "seed of the train/test split (70/30)")
    dqn_timesteps: int = opt(30_000, "DQN training environment steps")
    dqn_exploration_fraction: float = opt(0.3, "fraction of DQN training over which epsilon decays 1.0 -> 0.05")
    dqn_learning_starts: int = opt(1_000, "DQN random steps before learning")
    dqn_train_freq: int = opt(1, "DQN environment steps per gradient update")
    dqn_target_update: int = opt(500, "DQN steps between target-network syncs")
    tabular_episodes: int = opt(20_000, "tabular Q-learning training episodes")


@dataclass(frozen=True)
class TrainArgs:
    benchmark: str = opt(
        "bfcl", "benchmark: bfcl, metatool, toolbench, beir (with --beir-dir) or run (with --run/--qrels)"
    )
    scorer: str = opt("bm25", "scorer: bm25, minilm, or a local sentence-transformers model path")
    variant: str = opt(
        "",
        "candidate-set variant: metatool top20/top50/top100, toolbench full, sub<N> (random "
        "sub-registry of N tools holding the gold tool); default: the benchmark's main rule",
    )
    buckets: str = opt(
        "",
        "difficulty buckets: default (1, 2-5, 6-20, 21+) or narrow (1, 2-3, 4-10, 11+); default: the condition's own",
    )
    run: str | None = opt(None, "bring your own ranked lists: a TREC run file (qid Q0 docid rank score tag)")
    qrels: str | None = opt(None, "qrels for --run: TREC (qid 0 docid rel) or BEIR TSV (query-id corpus-id score)")
    n_candidates: int | None = opt(
        None,
        "candidate-set size N for --run (default: each query's run length; give "
        "the corpus size for runs truncated from a larger corpus)",
    )
    beir_dir: str | None = opt(
        None, "BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/<split>.tsv) for --benchmark beir"
    )
    beir_split: str = opt("test", "qrels split of --beir-dir")
    agent: str = opt("dqn", "depth policy: dqn, tabular, fixed, or a registered peer")
    reward: str = opt("bor", "training reward: bor, f1 or constant (ignored for fixed)")
    k: tuple[int, ...] = opt((1, 3, 5, 10, 20, 50), "K values for --agent fixed")
    out: str = opt("runs", "output folder (run directories go to OUT/runs/<run_id>)")


@dataclass(frozen=True)
class EvaluateArgs:
    run_dir: str = opt("", "a run directory written by train/reproduce (OUT/runs/<run_id>)")
    benchmark: str | None = opt(None, "evaluate on this benchmark instead of the run's own")
    scorer: str | None = opt(None, "evaluate with this scorer instead of the run's own (query-shift tests)")
    split: str = opt("test", "which split to evaluate on: test, train or all")
    out: str = opt(
        "", "output folder for per_query.csv, summary.csv, buckets.csv (default: RUN_DIR/eval-<condition>-<split>)"
    )


@dataclass(frozen=True)
class ReproduceArgs:
    only: tuple[str, ...] = opt((), "conditions to run (default: all); e.g. bfcl-bm25 bfcl-minilm")
    out: str = opt("results", "results folder")
    dry_run: bool = opt(False, "print the cells and their commands without running them")


def add_dataclass_args(parser: argparse.ArgumentParser, cls: type) -> None:
    """One ``--flag`` per dataclass field, typed from the annotation, help from metadata."""
    hints = get_type_hints(cls)
    for f in fields(cls):
        flag = "--" + f.name.replace("_", "-")
        typ = hints[f.name]
        default = f.default if f.default is not MISSING else f.default_factory()  # type: ignore[misc]
        help_text = f"{f.metadata.get('help', '')} (default: {default if default not in ((), None) else 'none'})"
        if typ is bool:
            parser.add_argument(flag, action="store_true", help=help_text)
        elif get_origin(typ) is tuple:
            parser.add_argument(flag, type=get_args(typ)[0], nargs="+", default=default, help=help_text)
        else:
            base = [a for a in get_args(typ) if a is not type(None)] or [typ]
            parser.add_argument(flag, type=base[0], default=default, help=help_text)


def build(cls: type, ns: argparse.Namespace) -> Any:
    return cls(**{f.name: (tuple(v) if isinstance(v := getattr(ns, f.name), list) else v) for f in fields(cls)})


def make_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="shortlist",
        description="How many tools should an LLM agent see? Train and evaluate shortlist-depth policies "
        "with the Bits-over-Random reward.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser(
        "train",
        help="train depth policies on one condition, one run per seed, and evaluate them",
        description="Train on the train split, evaluate on the test split. Writes OUT/runs/<run_id>/ "
        "per seed and OUT/{per_query,summary,buckets}.csv for the runs of this command.",
    )
    for cls in (TrainArgs, LearnArgs, CommonArgs):
        add_dataclass_args(t, cls)
    e = sub.add_parser(
        "evaluate",
        help="evaluate a trained run's policy (optionally on another condition)",
        description="Loads the agent saved in a run directory (only directories this package wrote: "
        "SB3 zips embed pickles) and evaluates it.",
    )
    for cls in (EvaluateArgs, CommonArgs):
        add_dataclass_args(e, cls)
    from experiments.bench import BenchArgs
    from experiments.compare import CompareArgs

    c = sub.add_parser(
        "compare",
        help="BoR agents vs practitioner peers, the hindsight oracle and exact optimal stopping",
        description="Writes OUT (default results/peers): tables, Pareto plots and a generated README.",
    )
    for cls in (CompareArgs, LearnArgs, CommonArgs):
        add_dataclass_args(c, cls)
    b = sub.add_parser("bench", help="speed and memory benchmark on this machine (writes results/bench.md)")
    for cls in (BenchArgs, CommonArgs):
        add_dataclass_args(b, cls)
    tu = sub.add_parser(
        "tune",
        help="compare DQN settings on an inner validation split of the training queries",
        description="Never touches the test split. Writes OUT/<condition>.csv and <condition>_mean.csv.",
    )
    tu.add_argument("--benchmark", default="bfcl", help="benchmark (default: bfcl)")
    tu.add_argument("--scorer", default="bm25", help="scorer (default: bm25)")
    tu.add_argument("--variant", default="", help="candidate-set variant (default: none)")
    tu.add_argument(
        "--grid",
        nargs="*",
        default=[],
        help="DQNConfig fields and values, e.g. train_freq=1,4 "
        "exploration_fraction=0.3,0.5 (default: the package defaults only)",
    )
    tu.add_argument("--seeds", type=int, nargs="+", default=[42, 123, 456], help="seeds (default: 42 123 456)")
    tu.add_argument("--reward", default="bor", help="training reward (default: bor)")
    tu.add_argument("--step-cost", type=float, default=None, help="step cost (default: the condition's paper setting)")
    tu.add_argument("--gamma", type=float, default=None, help="discount (default: the condition's paper setting)")
    tu.add_argument("--out", default="results/tuning", help="output folder (default: results/tuning)")
    tu.add_argument("--data-dir", default=None, help="benchmark data folder")
    tu.add_argument("--cache-dir", default=None, help="score cache folder")
    d = sub.add_parser("data", help="list or fetch benchmark data files (pinned URLs, sha256-verified)")
    dsub = d.add_subparsers(dest="data_command", required=True)
    dl = dsub.add_parser("list", help="each dataset file: where it is, present, verified")
    dl.add_argument("--data-dir", default=None, help="data folder (default: $SHORTLIST_DATA_DIR or the per-user cache)")
    df = dsub.add_parser("fetch", help="download (pinned commit) and verify one dataset's files")
    df.add_argument("name", help="dataset: metatool or toolbench")
    df.add_argument("--data-dir", default=None, help="data folder (default: $SHORTLIST_DATA_DIR or the per-user cache)")
    r = sub.add_parser(
        "reproduce",
        help="run the study: every condition x method x seed, tables, figures, README",
        description="Resumable: a cell whose run directory exists with the same config hash is skipped.",
    )
    for cls in (ReproduceArgs, LearnArgs, CommonArgs):
        add_dataclass_args(r, cls)
    return p


def check_learn_args(la: LearnArgs) -> None:
    import math

    bad = []
    if any(s < 0 or s >= 2**32 for s in la.seeds):
        bad.append(f"--seeds must lie in [0, 2**32), got {list(la.seeds)}")
    if len(set(la.seeds)) != len(la.seeds):
        bad.append(f"--seeds holds duplicates: {list(la.seeds)}")
    if not 0 <= la.split_seed < 2**32:
        bad.append(f"--split-seed must lie in [0, 2**32), got {la.split_seed}")
    if la.dqn_timesteps < 1:
        bad.append(f"--dqn-timesteps must be >= 1, got {la.dqn_timesteps}")
    if la.dqn_learning_starts < 0:
        bad.append(f"--dqn-learning-starts must be >= 0, got {la.dqn_learning_starts}")
    elif la.dqn_learning_starts >= la.dqn_timesteps:
        bad.append(
            f"--dqn-learning-starts ({la.dqn_learning_starts}) must be below --dqn-timesteps "
            f"({la.dqn_timesteps}): the network would never train"
        )
    if not (math.isfinite(la.dqn_exploration_fraction) and 0 < la.dqn_exploration_fraction <= 1):
        bad.append(f"--dqn-exploration-fraction must lie in (0, 1], got {la.dqn_exploration_fraction}")
    if la.dqn_train_freq < 1:
        bad.append(f"--dqn-train-freq must be >= 1, got {la.dqn_train_freq}")
    if la.dqn_target_update < 1:
        bad.append(f"--dqn-target-update must be >= 1, got {la.dqn_target_update}")
    if la.tabular_episodes < 1:
        bad.append(f"--tabular-episodes must be >= 1, got {la.tabular_episodes}")
    if bad:
        raise ValueError(bad[0])


def run_with(cells: Sequence[Any], out: Path, ca: CommonArgs, command: str, runs_dir: Path | None = None) -> list[Path]:
    """Run cells with the common options (workers, backend, caches, progress) of any command."""
    from experiments.runner import run_cells

    return run_cells(
        cells,
        out,
        data_dir=ca.data_dir,
        cache_dir=ca.cache_dir,
        command=command,
        workers=ca.workers,
        progress=not ca.no_progress,
        backend=ca.backend,
        ray_address=ca.ray_address,
        runs_dir=runs_dir,
    )


def learn_kwargs(la: LearnArgs) -> dict[str, Any]:
    from agents.dqn import DQNConfig
    from agents.tabular import TabularConfig

    return {
        "dqn": DQNConfig(
            total_timesteps=la.dqn_timesteps,
            exploration_fraction=la.dqn_exploration_fraction,
            learning_starts=la.dqn_learning_starts,
            train_freq=la.dqn_train_freq,
            target_update_interval=la.dqn_target_update,
        ),
        "tabular": TabularConfig(episodes=la.tabular_episodes),
        "step_cost": la.step_cost,
        "gamma": la.gamma,
        "max_depth": la.max_depth,
        "split_seed": la.split_seed,
    }


def _source_options(ta: TrainArgs, benchmark: str) -> tuple[tuple[str, str], ...]:
    """Paths of user-supplied inputs, with their sha256 (so a changed file is never reused)."""
    from benchmarks.corpus import sha256_file

    def checked(path: str, flag: str) -> str:
        if not Path(path).is_file():
            raise FileNotFoundError(f"{flag} {path}: no such file")
        return sha256_file(path)

    if benchmark == "run":
        if not (ta.run and ta.qrels):
            raise ValueError("--run and --qrels go together")
        opts = [
            ("run", str(Path(ta.run).resolve())),
            ("run_sha256", checked(ta.run, "--run")),
            ("qrels", str(Path(ta.qrels).resolve())),
            ("qrels_sha256", checked(ta.qrels, "--qrels")),
        ]
        if ta.n_candidates is not None:
            opts.append(("n_candidates", str(ta.n_candidates)))
        return tuple(opts)
    if benchmark == "beir":
        if not ta.beir_dir:
            raise ValueError("--benchmark beir needs --beir-dir FOLDER")
        folder = Path(ta.beir_dir)
        files = [folder / "corpus.jsonl", folder / "queries.jsonl", folder / "qrels" / f"{ta.beir_split}.tsv"]
        digests = [(f"sha256:{f.relative_to(folder)}", checked(str(f), "--beir-dir")) for f in files]
        return (("beir_dir", str(folder.resolve())), ("split", ta.beir_split), *digests)
    return ()


def cmd_train(ta: TrainArgs, la: LearnArgs, ca: CommonArgs, command: str) -> int:
    from experiments.config import AGENTS, MethodSpec
    from experiments.runner import collect, write_tables
    from experiments.sweep import PLANS, ConditionPlan, cells_for
    from rewards import REWARD_KINDS

    if ta.agent not in AGENTS:
        raise ValueError(f"unknown agent {ta.agent!r}; expected one of {', '.join(AGENTS)}")
    check_learn_args(la)
    if len(set(ta.k)) != len(ta.k):
        raise ValueError(f"--k holds duplicates: {list(ta.k)}")
    if ta.n_candidates is not None and not 1 <= ta.n_candidates <= 2**53:
        raise ValueError(f"--n-candidates must lie in [1, 2**53], got {ta.n_candidates}")
    for flag, p in (("--out", ta.out), ("--cache-dir", ca.cache_dir)):
        if p and Path(p).exists() and not Path(p).is_dir():
            raise ValueError(f"{flag} {p}: exists and is not a folder")
    if ta.reward not in REWARD_KINDS:
        raise ValueError(f"unknown reward {ta.reward!r}; expected one of {', '.join(REWARD_KINDS)}")
    benchmark = "run" if ta.run or ta.qrels else ta.benchmark
    options = _source_options(ta, benchmark)
    plan = ConditionPlan(benchmark, ta.scorer if benchmark != "run" else "run", ta.variant)
    plan = PLANS.get(plan.name, plan)
    methods = (
        [MethodSpec("fixed", "bor", k) for k in ta.k] if ta.agent == "fixed" else [MethodSpec(ta.agent, ta.reward)]
    )
    if ta.buckets and ta.buckets not in ("default", "narrow"):
        raise ValueError(f"unknown bucket scheme {ta.buckets!r}; expected default or narrow")
    cells = cells_for([plan], la.seeds, {plan.name: methods}, buckets=ta.buckets, options=options, **learn_kwargs(la))
    out = Path(ta.out)
    runs = run_with(cells, out, ca, command)
    per_query, summary, buckets = collect(runs)
    write_tables(out, per_query, summary, buckets)
    cols = ["condition", "method", "seed", "found_pct", "mean_k", "std_k", "bor_bits", "mean_reward"]
    print(summary[cols].to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    print(f"wrote {len(runs)} run(s) under {out / 'runs'} and tables in {out}")
    return 0


def write_sweep_manifest(out: Path, command: str, runs: Sequence[Path], timings: dict[str, float]) -> None:
    """``OUT/manifest.json``: command, git state, versions, machine, run ids and this invocation's timings
    (timestamps and timings live only in manifests, never in tables or READMEs)."""
    import json
    import os
    import platform
    from datetime import UTC, datetime

    from experiments.runner import atomic_write_text, git_state, package_versions

    manifest = {
        "command": command,
        **git_state(),
        "versions": package_versions(),
        "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
        "runs": [p.name for p in runs],
        "finished_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "timings_seconds": {k: round(v, 3) for k, v in timings.items()},
    }
    atomic_write_text(out / "manifest.json", json.dumps(manifest, indent=2, sort_keys=True) + "\n")


def cmd_reproduce(ra: ReproduceArgs, la: LearnArgs, ca: CommonArgs, command: str) -> int:
    check_learn_args(la)
    ra = ReproduceArgs(**{**ra.__dict__, "only": tuple(dict.fromkeys(ra.only))})
    from experiments.report import write_report
    from experiments.runner import collect, write_tables
    from experiments.sweep import PLANS, cells_for

    unknown = [c for c in ra.only if c not in PLANS]
    if unknown:
        raise ValueError(f"unknown condition(s) {unknown}; expected some of {', '.join(PLANS)}")
    plans = [PLANS[c] for c in (ra.only or tuple(PLANS))]
    cells = cells_for(plans, la.seeds, **learn_kwargs(la))
    out = Path(ra.out)
    if ra.dry_run:
        for c in cells:
            m = c.method
            agent = f"--agent fixed --k {m.k}" if m.agent == "fixed" else f"--agent {m.agent} --reward {m.reward}"
            print(
                f"{c.run_id}\tshortlist train --benchmark {c.benchmark} --scorer {c.scorer} {agent} "
                f"--seeds {c.seed} --step-cost {c.episode.step_cost} --gamma {c.episode.gamma} --out {out}"
            )
        print(f"{len(cells)} cells")
        return 0
    t0 = time.perf_counter()
    runs = run_with(cells, out, ca, command)
    t_runs = time.perf_counter() - t0
    per_query, summary, buckets = collect(runs)
    write_tables(out, per_query, summary, buckets)
    from experiments.notes import notes_for
    from experiments.study import answers, explain, study_figures, table2, table2_markdown, write_table2
    from experiments.sweep import MAIN_CONDITIONS

    present = set(summary["condition"])
    main_conds = [c for c in MAIN_CONDITIONS if c in present]
    t2 = table2(summary, per_query, main_conds)
    write_table2(out, t2)
    preamble = [
        "## Beside the paper's main table (SPEC section 6)",
        "",
        "Ours: mean over seeds [seeded bootstrap 95% interval]; `table2.csv` holds these numbers.",
        "",
        *table2_markdown(t2),
        "",
        *answers(per_query, t2, main_conds),
    ]
    why = explain(t2, summary)
    if why:
        preamble += ["### Differences from the paper larger than our interval", "", *[f"- {w}" for w in why], ""]
    preamble += study_figures(out, per_query, summary)
    write_report(
        out,
        per_query,
        summary,
        buckets,
        title="Results: shortlist depth with a chance-corrected reward",
        notes=notes_for(per_query, summary),
        preamble=preamble,
        order=list(PLANS),
    )
    write_sweep_manifest(out, command, runs, {"cells": t_runs, "total": time.perf_counter() - t0})
    from experiments.html import write_index

    write_index(out)
    print(f"wrote {len(runs)} runs, tables, figures and README.md to {out}")
    return 0


def cmd_evaluate(ea: EvaluateArgs, ca: CommonArgs) -> int:
    import json

    from agents import DQNAgent, FixedK, TabularQ, bucket_table, evaluate, summarise
    from envs import EpisodeConfig
    from experiments.runner import atomic_write_csv, get_condition

    run = Path(ea.run_dir)
    cfg_path = run / "config.json"
    if not ea.run_dir or not cfg_path.is_file():
        raise FileNotFoundError(f"{run}: not a run directory (no config.json)")
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        if not isinstance(cfg, dict):
            raise TypeError("not a JSON object")
        missing = [
            k for k in ("agent", "train_reward", "episode", "benchmark", "scorer", "seed", "method") if k not in cfg
        ]
        if missing:
            raise KeyError(f"missing {missing}")
        episode = EpisodeConfig(**cfg["episode"])
        agent_kind, reward = cfg["agent"], cfg["train_reward"]

        def _int(key: str, default: object = None) -> int:
            v = cfg.get(key, default)
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{key!r} must be an integer, got {v!r}")
            return v

        k = _int("k") if agent_kind == "fixed" else 0
        split_seed = _int("split_seed", 0)
        from benchmarks.conditions import candidate_rule

        candidate_rule(cfg["benchmark"], cfg.get("variant", "") or "")
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{cfg_path}: malformed run config ({e})") from e
    if agent_kind == "fixed":
        policy = FixedK(k)
    elif agent_kind == "tabular":
        policy = TabularQ.load(run / "agent.json")
    elif agent_kind == "dqn":
        if not (run / "agent.zip").is_file():
            raise FileNotFoundError(f"{run / 'agent.zip'}: missing")
        policy = DQNAgent.load(run / "agent.zip", reward)
    else:
        raise ValueError(f"{cfg_path}: unknown agent {agent_kind!r}")
    if ea.split not in ("test", "train", "all"):
        raise ValueError(f"--split must be test, train or all, got {ea.split!r}")
    benchmark = ea.benchmark or cfg["benchmark"]
    scorer = ea.scorer or cfg["scorer"]
    same = benchmark == cfg["benchmark"]
    variant = cfg.get("variant", "") if same else ""
    options = tuple(sorted((cfg.get("options") or {}).items())) if same else ()
    cond = get_condition(benchmark, scorer, variant, split_seed, ca.data_dir, ca.cache_dir, options)
    queries = {"test": cond.test, "train": cond.train, "all": cond.queries}[ea.split]
    rows = evaluate(policy, queries, episode, cond.buckets)
    rows.insert(0, "seed", cfg["seed"])
    rows.insert(0, "method", cfg["method"])
    rows.insert(0, "condition", cond.name)
    out = Path(ea.out) if ea.out else run / f"eval-{cond.name}-{ea.split}"
    out.mkdir(parents=True, exist_ok=True)
    summary = summarise(rows)
    atomic_write_csv(rows, out / "per_query.csv")
    atomic_write_csv(summary, out / "summary.csv")
    atomic_write_csv(bucket_table(rows), out / "buckets.csv")
    print(summary.to_string(index=False, float_format=lambda x: f"{x:.2f}"))
    print(f"wrote {out}")
    return 0


def cmd_tune(ns: argparse.Namespace) -> int:
    from envs import EpisodeConfig
    from experiments.sweep import PLANS, ConditionPlan
    from experiments.tune import parse_grid, tune

    plan = ConditionPlan(ns.benchmark, ns.scorer, ns.variant)
    plan = PLANS.get(plan.name, plan)
    episode = EpisodeConfig(
        reward=ns.reward,
        step_cost=plan.step_cost if ns.step_cost is None else ns.step_cost,
        gamma=plan.gamma if ns.gamma is None else ns.gamma,
    )
    tune(
        ns.benchmark,
        ns.scorer,
        ns.variant,
        parse_grid(ns.grid),
        ns.seeds,
        episode,
        Path(ns.out),
        ns.data_dir,
        ns.cache_dir,
    )
    print(f"wrote {Path(ns.out)}")
    return 0


def cmd_data(ns: argparse.Namespace) -> int:
    from benchmarks import data

    if ns.data_command == "list":
        rows = data.status(ns.data_dir)
        print(f"data dir: {data.resolve_data_dir(ns.data_dir)}")
        for r in rows:
            state = "verified" if r.verified else ("PRESENT, sha256 MISMATCH" if r.present else "missing")
            print(f"{r.dataset:10s} {state:26s} {r.path}")
        print("BFCL: read from the installed bfcl-eval package (pip install --no-deps bfcl-eval)")
        return 0
    if ns.name not in data.DATASETS:
        raise ValueError(f"unknown dataset {ns.name!r}; expected one of {', '.join(data.DATASETS)}")
    paths = data.fetch(ns.name, ns.data_dir)
    for p in paths:
        print(f"verified {p}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``shortlist`` console script."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = make_parser()
    ns = parser.parse_args(argv)
    command = "shortlist " + " ".join(shlex.quote(a) for a in argv)
    try:
        if ns.command == "train":
            return cmd_train(build(TrainArgs, ns), build(LearnArgs, ns), build(CommonArgs, ns), command)
        if ns.command == "compare":
            from experiments.compare import CompareArgs, cmd_compare

            return cmd_compare(build(CompareArgs, ns), build(LearnArgs, ns), build(CommonArgs, ns), command)
        if ns.command == "bench":
            from experiments.bench import BenchArgs, cmd_bench

            return cmd_bench(build(BenchArgs, ns), build(CommonArgs, ns), command)
        if ns.command == "tune":
            return cmd_tune(ns)
        if ns.command == "data":
            return cmd_data(ns)
        if ns.command == "evaluate":
            return cmd_evaluate(build(EvaluateArgs, ns), build(CommonArgs, ns))
        if ns.command == "reproduce":
            return cmd_reproduce(build(ReproduceArgs, ns), build(LearnArgs, ns), build(CommonArgs, ns), command)
    except (ValueError, DataError, OSError, IndexError) as e:
        print(f"shortlist: error: {e}", file=sys.stderr)
        return 2
    parser.error(f"unknown command {ns.command}")
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
