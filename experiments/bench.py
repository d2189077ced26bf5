"""``shortlist bench``: how fast the package is on the current machine, and where the study's time goes.

Measured (wall clock and CPU time of this one process; best of ``repeats`` for the fast ones):

- **CLI start**: ``shortlist --help``, ``shortlist data list`` and ``shortlist evaluate`` of a trained rule
  (no torch), each a fresh process.
- **Batch evaluation**: depth policies over a seeded synthetic padded score matrix (``queries`` x
  ``depth``) through the vectorised cores of :mod:`agents.peers`, with and without scoring, and the
  object path through :func:`agents.evaluate` for reference.
- **Environment** steps/s: one ``ShortlistEnv`` on the first condition's training queries, random actions,
  the bare class and ``gymnasium.make``.
- **Fits per condition**: every registered kind the study or the comparison trains, fitted on each
  condition's training split. A kind whose cost grows with one setting (its ``budget``: DQN's steps, tabular
  Q's episodes, the torch models' epochs; :attr:`agents.registry.PolicyKind.budget`) is fitted at
  ``fraction`` and at twice that of its budget and extrapolated linearly to the full budget (the
  intercept is the set-up); the others are fitted once at full size. CPU seconds, so that a loaded machine
  inflates them less than wall seconds. A kind that reuses another's fitted network in a study (the P(found)
  stop reuses the cut-off's: :attr:`agents.registry.PolicyKind.shares_fit`, :mod:`agents.memo`) is timed with
  that network stored first, as the study runs it.
- **Projection**: the cells ``shortlist reproduce`` and ``shortlist compare`` run (deduplicated by run id:
  the two commands share ``results/runs``), each costed by its kind's fit on its condition (or on the
  nearest measured condition of its benchmark) plus the measured per-cell overhead, summed per stage
  (kind) and divided by the workers. A projection, labelled as such, beside:
- **Measured runs**: the wall time each committed results folder's manifest records, with its command.
- Peak memory and the targets.

Those are the ``study`` section (the default). ``--sections toolsearch load`` measure the tool search per
request and the servers under load instead (:mod:`experiments.bench_serve`), written to
``results/bench-serve.md`` unless ``--out`` says otherwise.

Prints the figures and writes them, with the machine description, to ``out`` (``results/bench.md``).
"""

from __future__ import annotations

import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from experiments.io import package_versions
from experiments.options import BenchArgs
from experiments.produced import carried
from experiments.report.markdown import judged
from experiments.report.page import Page, Paragraph, Section, Table, write_page

if TYPE_CHECKING:
    from envs import EpisodeConfig

TARGETS = {
    "batch_seconds": 1.0,
    "env_steps_per_s": 20_000.0,
    "cli_seconds": 1.5,
    "study_minutes": 15.0,
    "main_job_cells_minutes": 5.0,
    "recommend_seconds": 180.0,
}
#: Results folders whose manifests record a measured run (path relative to the results folder).
MEASURED = ("bfcl", ".", "peers", "shift", "downstream")


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _best(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def machine() -> dict[str, str]:
    """CPU model, cores, memory, OS, library versions and the load at start."""
    import torch

    info = {"model name": platform.processor() or "unknown", "MemTotal": "unknown"}
    for path, key in (("/proc/cpuinfo", "model name"), ("/proc/meminfo", "MemTotal")):
        try:
            line = next(ln for ln in Path(path).read_text().splitlines() if ln.startswith(key))
            info[key] = line.split(":", 1)[1].strip()
        except (OSError, StopIteration):
            pass
    mem = info["MemTotal"]
    mem = f"{int(mem.split()[0]) / 2**20:.1f} GiB" if mem[:1].isdigit() else mem
    v = package_versions()
    return {
        "cpu": info["model name"],
        "logical cpus": str(os.cpu_count()),
        "memory": mem,
        "os": platform.platform(),
        **{k: v[k] for k in ("python", "numpy", "torch", "gymnasium", "stable-baselines3")},
        "torch threads": str(torch.get_num_threads()),
        "load average (1/5/15 min) at start": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


# ----------------------------------------------------------------------------- CLI start


def cli_start(repeats: int, data_dir: str | None, cache_dir: str | None) -> list[tuple[str, float]]:
    """Wall seconds of fresh ``shortlist`` processes (best of ``repeats``): help, data list, and evaluate of
    a trained rule (a gap-rule run made first, in a temporary folder)."""
    exe = [sys.executable, "-m", "experiments.cli"]
    folders = [*(["--data-dir", data_dir] if data_dir else []), *(["--cache-dir", cache_dir] if cache_dir else [])]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run([*exe, "train", "--agent", "gap", "--seeds", "1", "--out", tmp, "--no-progress", *folders],
                       check=True, capture_output=True)  # fmt: skip
        run = next(Path(tmp, "runs").iterdir())
        commands = {
            "shortlist --help": ["--help"],
            "shortlist data list": ["data", "list", *folders],
            "shortlist evaluate (gap rule, BFCL test split)": [
                "evaluate",
                "--run-dir",
                str(run),
                "--out",
                str(Path(tmp) / "ev"),
                *folders,
            ],  # fmt: skip
        }
        out = []
        for label, args in commands.items():
            t, _ = _best(partial(subprocess.run, [*exe, *args], check=True, capture_output=True), repeats)
            out.append((label, t))
    return out


def write_bench_run(folder: Path, queries: int, candidates: int, seed: int) -> tuple[Path, Path]:
    """A seeded TREC run (``queries`` x ``candidates``, the scores of :func:`synthetic_batch`, written by
    :func:`benchmarks.trec.write_trec_run`) and its qrels (the batch's gold rank relevant), the shape a user's
    retriever writes."""
    from benchmarks.trec import write_trec_run

    scores, gold = synthetic_batch(queries, candidates, seed)
    run, qrels = folder / "bench.run", folder / "bench.qrels"
    write_trec_run(((f"q{q}", [(f"d{q}_{r}", float(s)) for r, s in enumerate(scores[q], 1)]) for q in range(queries)),
                   run, "bench")  # fmt: skip
    qrels.write_text("".join(f"q{q} 0 d{q}_{int(gold[q])} 1\n" for q in range(queries)), encoding="utf-8")
    return run, qrels


def bench_recommend(queries: int, candidates: int, workers: int, seed: int, settings: Sequence[str]) -> float:
    """Wall seconds of ``shortlist recommend`` (every applicable kind, at its default settings unless
    ``settings`` (``kind.key=value``) change them, one seed) on a seeded ``queries`` x ``candidates`` TREC run,
    in a fresh process with ``workers`` workers."""
    with tempfile.TemporaryDirectory() as tmp:
        run, qrels = write_bench_run(Path(tmp), queries, candidates, seed)
        cmd = [sys.executable, "-m", "experiments.cli", "recommend", "--run", str(run), "--qrels", str(qrels),
               "--seeds", "42", "--workers", str(workers), "--out", str(Path(tmp) / "out"), "--no-progress",
               "--cache-dir", str(Path(tmp) / "cache"), *(["--set", *settings] if settings else [])]  # fmt: skip
        t0 = time.perf_counter()
        subprocess.run(cmd, check=True, capture_output=True)
        return time.perf_counter() - t0


# ----------------------------------------------------------------------------- batch and environment


def synthetic_batch(queries: int, depth: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded (Q, D) score matrix sorted descending, with gold ranks in 1..D."""
    rng = np.random.default_rng(seed)
    s = rng.standard_normal((queries, depth))
    s[:, 0] += rng.exponential(2.0, queries)  # a clear top item in some lists
    s = -np.sort(-s, axis=1)
    gold = rng.geometric(0.4, queries).clip(1, depth)
    return s, gold


def score_batch(k: np.ndarray, gold: np.ndarray, n: int) -> tuple[float, float]:
    """Vectorised scoring of depths: mean per-query BoR reward and BoR bits (R = 1)."""
    from rewards import bor_aggregate, bor_reward

    found = (k >= gold).astype(np.int64)
    reward = np.asarray(bor_reward(found, k, n, 1))
    return float(reward.mean()), bor_aggregate(found, k, n, 1)


def bench_batch(ba: BenchArgs) -> list[tuple[str, float, str]]:
    """Depth policies over the synthetic batch; rows (what, seconds, note)."""
    from agents import evaluate
    from agents.peers import GapPolicy, gap_depths, threshold_depths, topp_depths
    from envs import EpisodeConfig, RankedQuery

    s, gold = synthetic_batch(ba.queries, ba.depth, ba.seed)
    caps = np.full(ba.queries, ba.depth)
    cores: dict[str, Callable[[], np.ndarray]] = {
        "fixed-5": lambda: np.minimum(5, caps),
        "gap": lambda: gap_depths(s, None, caps),
        "gap-tail10-buffer5": lambda: gap_depths(s, None, caps, tail=0.1, buffer=5),
        "threshold (t=0.6)": lambda: threshold_depths(s, None, caps, t=0.6),
        "top-p (p=0.9, T=0.5)": lambda: topp_depths(s, None, caps, p=0.9, temperature=0.5),
    }
    rows = []
    for name, fn in cores.items():
        t, _ = _best(fn, ba.repeats)
        rows.append((f"{name}: depths", t, f"{ba.queries / t:,.0f} queries/s"))
        t2, _ = _best(partial(lambda f: score_batch(f(), gold, ba.depth), fn), ba.repeats)
        rows.append((f"{name}: depths + scoring", t2, f"{ba.queries / t2:,.0f} queries/s"))
    tracemalloc.start()
    gap_depths(s, None, caps, tail=0.1, buffer=5)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    rows.append(("gap-tail10-buffer5 core: peak traced allocation", float("nan"), f"{peak / 2**20:.0f} MiB"))
    t0 = time.perf_counter()
    qs = [RankedQuery(s[i], np.array([int(gold[i])]), f"q{i}") for i in range(ba.queries)]
    rows.append((f"build {ba.queries:,} RankedQuery objects (data loading)", time.perf_counter() - t0, ""))
    t, _ = _best(lambda: evaluate(GapPolicy(0.1, 5), qs, EpisodeConfig()), 1)
    rows.append(("gap-tail10-buffer5 through agents.evaluate (objects, rows)", t, f"{ba.queries / t:,.0f} queries/s"))
    return rows


def bench_env(train: list, episode: EpisodeConfig, steps: int, seed: int) -> dict[str, float]:
    """Steps/s of one environment with random actions (bare class and gymnasium.make)."""
    import gymnasium as gym

    from envs import ENV_ID, ShortlistEnv

    out = {}
    actions = np.random.default_rng(seed).integers(0, 2, size=steps)
    for label, env in (
        ("ShortlistEnv", ShortlistEnv(train, episode)),
        ("gymnasium.make", gym.make(ENV_ID, queries=train, episode=episode)),
    ):
        for i in range(len(train)):  # warm-up: every query's tables are built
            env.reset(options={"index": i})
        env.reset(seed=seed)
        t0 = time.perf_counter()
        for a in actions:
            _, _, term, trunc, _ = env.step(int(a))
            if term or trunc:
                env.reset()
        out[label] = steps / (time.perf_counter() - t0)
        env.close()
    return out


# ----------------------------------------------------------------------------- fits, projection


def fit_costs(plans: Sequence[Any], methods: Sequence[Any], fraction: float, data_dir: str | None,
              cache_dir: str | None, settings: dict | None = None) -> pd.DataFrame:  # fmt: skip
    """CPU seconds of one fit of every method on every plan's training split (module docstring): one row per
    (condition, method) with ``fit_cpu`` (extrapolated to the full budget where the kind has one), ``measured``
    (how) and ``n_train``."""
    import torch

    from agents.base import seed_everything
    from experiments.runner import get_condition

    torch.set_num_threads(1)
    rows = []
    for plan in plans:
        c = plan.condition
        cond = get_condition(c.benchmark, c.scorer, c.variant, 0, data_dir, cache_dir)
        episode = plan.episode
        for m, observation in _with_probe(methods):
            if not m.kind.applies_to(c.benchmark):
                continue
            full = m.settings((settings or {}).get(m.agent))
            ep = replace(episode, reward=m.reward, observation=observation)
            cost, how = _fit_cost(m, full, cond.train, ep, fraction, seed_everything)
            label = m.name if observation == "auto" else f"{m.name}@{observation}"
            rows.append({"condition": plan.name, "method": label, "n_train": len(cond.train), "fit_cpu": cost,
                         "measured": how})  # fmt: skip
            print(f"fit    {plan.name:26s} {label:22s} {cost:8.2f} cpu-s ({how})", flush=True)
    return pd.DataFrame(rows)


def _with_probe(methods: Sequence[Any]) -> list[tuple[Any, str]]:
    """(method, observation set) of every fit to time: each method on ``auto``, and the comparison's information
    probe (:data:`experiments.plan.INFORMATION_PROBE`) on its observation set too, as ``compare`` runs it."""
    from experiments.plan import INFORMATION_OBSERVATION, INFORMATION_PROBE

    out = [(m, "auto") for m in methods]
    return out + [(m, INFORMATION_OBSERVATION) for m in methods if m == INFORMATION_PROBE]


def _fit_cost(
    m: Any, full: Any, train: list, episode: Any, fraction: float, seed_everything: Callable[[int], None]
) -> tuple:
    """(CPU seconds of a fit of ``m`` with settings ``full``, how it was measured). A kind that reuses another's
    fitted network (``PolicyKind.shares_fit``) is timed as a study runs it: with that network stored first
    (untimed). Every fit runs in a fit memo of its own (:mod:`agents.memo`), as every cell's fit does."""
    from agents.memo import fit_memo
    from agents.registry import KINDS

    kind = m.kind

    def once(settings: Any) -> float:
        with tempfile.TemporaryDirectory() as tmp, fit_memo(tmp, "bench"):  # every cell's fit runs in one
            if kind.shares_fit:
                seed_everything(0)
                KINDS[kind.shares_fit].make(m.reward, settings).fit(train, episode, 0)
            seed_everything(0)
            t = _cpu()
            kind.make(m.reward, settings).fit(train, episode, 0)
            return _cpu() - t

    if not kind.budget:
        return once(full), "full"
    n = int(getattr(full, kind.budget))
    lo = max(1, round(fraction * n))
    t1, t2 = once(replace(full, **{kind.budget: lo})), once(replace(full, **{kind.budget: 2 * lo}))
    slope = max(t2 - t1, 0.0) / lo
    return max(t1 - slope * lo, 0.0) + slope * n, f"{kind.budget} {lo} and {2 * lo}, extrapolated to {n}"


def study_cells_all() -> list[Any]:
    """Every cell of ``shortlist reproduce`` (all suites) and ``shortlist compare`` (its default suites) with
    the default options, deduplicated by run id (the two commands share ``results/runs``)."""
    from experiments.plan import COMPARE_SUITES, DEFAULT_SEEDS, compare_cells, resolve_plans, study_cells

    cells = study_cells(resolve_plans(()), DEFAULT_SEEDS) + compare_cells(resolve_plans((), COMPARE_SUITES),
                                                                         DEFAULT_SEEDS)  # fmt: skip
    return list({c.run_id: c for c in cells}.values())


def projection(cells: Sequence[Any], costs: pd.DataFrame, overhead: float, workers: int) -> pd.DataFrame:
    """Per stage (method) of the cells: how many, the projected CPU seconds (the method's fit on the cell's
    condition, else on the nearest measured condition of the same benchmark, else its mean over conditions;
    plus ``overhead`` per cell) and the share of the total."""
    from benchmarks.names import ConditionId

    by = {(r["condition"], r["method"]): r["fit_cpu"] for _, r in costs.iterrows()}
    measured = sorted(set(costs["condition"]))

    def cost(cell: Any) -> float:
        name, method = cell.condition, cell.label
        if (name, method) in by:
            return by[(name, method)]
        cid = ConditionId.parse(name)
        same = [c for c in measured if ConditionId.parse(c).benchmark == cid.benchmark and (c, method) in by]
        near = [c for c in same if ConditionId.parse(c).scorer == cid.scorer] or same
        if near:
            return float(np.mean([by[(c, method)] for c in near]))
        vals = costs.loc[costs["method"] == method, "fit_cpu"]
        return float(vals.mean()) if len(vals) else 0.0

    rows = pd.DataFrame([{"method": c.label, "cpu": cost(c) + overhead} for c in cells])
    out = rows.groupby("method").agg(cells=("cpu", "size"), cpu_seconds=("cpu", "sum")).reset_index()
    out["share_pct"] = 100.0 * out["cpu_seconds"] / out["cpu_seconds"].sum()
    out["wall_minutes_at_workers"] = out["cpu_seconds"] / workers / 60.0
    return out.sort_values("cpu_seconds", ascending=False).reset_index(drop=True)


def cell_overhead(data_dir: str | None, cache_dir: str | None) -> float:
    """CPU seconds of one cell beyond its fit: a fixed-K cell through the runner (condition warm: evaluation,
    tables, manifest, atomic writes)."""
    from agents.method import MethodSpec
    from experiments.plan import PLANS, cells_for
    from experiments.runner import run_cell

    with tempfile.TemporaryDirectory() as tmp:
        cells = cells_for([PLANS["bfcl-bm25"]], [1, 2, 3], {"bfcl-bm25": [MethodSpec("fixed", "bor", 5)]})
        run_cell(cells[0], Path(tmp), data_dir, cache_dir, "bench")  # warms the condition
        t = _cpu()
        for c in cells[1:]:
            run_cell(c, Path(tmp), data_dir, cache_dir, "bench")
        return (_cpu() - t) / (len(cells) - 1)


def measured_runs(results: Path) -> pd.DataFrame:
    """One row per committed results folder of :data:`MEASURED` that has a manifest: ``folder`` (relative to
    ``results``), ``command``, ``runs``, ``cells_run`` (how many of them the command ran; the others it reused
    from earlier commands; NaN when the manifest does not say), ``cells_min`` (wall minutes of the cells this
    invocation ran, NaN when not recorded), ``total_min`` and ``commit``, from the folder's manifest (from its
    ``produced_by`` when it has one: its report was remade from finished runs, and those fields are the invocation
    that ran them, :func:`experiments.produced.carried`; ``report_commit`` then names the rerun's commit, else it is
    empty, as it is when the rerun was at the same commit); ``whole``:
    the command ran every one of its runs, so its times are what the folder costs from nothing (False when it
    reused cells or does not say: a manifest written before ``cells_run`` was recorded). For
    :func:`measured_study_minutes`: ``run_ids`` (the runs, a frozenset), ``reused`` (the run ids it reused, a
    frozenset; None when not recorded), ``runs_at`` (the resolved folder of its run directories; None when not
    recorded), ``fingerprint`` (the code fingerprint) and ``unit`` (what its command's units of work are: ``cells``
    when the manifest does not say; ``evaluations`` for ``shortlist shift``, which trains nothing and evaluates runs
    an earlier command trained)."""
    rows = []
    for rel in MEASURED:
        path = results / rel / "manifest.json"
        if not path.is_file():
            continue
        m = json.loads(path.read_text(encoding="utf-8"))
        made = carried(m) or m  # a report remade from finished runs: the invocation that ran them
        t = made.get("timings_seconds") or {}
        produce = t.get("produce", t.get("cells", t.get("cells (this invocation)")))
        total = t.get("total", made.get("wall_seconds"))
        ran, reused, where = made.get("cells_run"), made.get("runs_reused"), made.get("runs_folder")
        rows.append({"folder": rel, "command": made.get("command", m.get("command", "?")),
                     "runs": len(m.get("runs", [])),
                     "cells_run": np.nan if ran is None else float(ran),
                     "cells_min": np.nan if produce is None else produce / 60,
                     "total_min": np.nan if total is None else total / 60,
                     "commit": str(made.get("git_sha", "?"))[:7],
                     "report_commit": str(m.get("git_sha", "?"))[:7]
                     if made is not m and m.get("git_sha") != made.get("git_sha") else "",
                     "run_ids": frozenset(m.get("runs", [])),
                     "reused": None if reused is None else frozenset(reused),
                     "runs_at": None if where is None else (results / rel / where).resolve(),
                     "fingerprint": m.get("code_fingerprint"), "unit": m.get("unit", "cells")})  # fmt: skip
    columns = ["folder", "command", "runs", "cells_run", "cells_min", "total_min", "commit", "report_commit",
               "run_ids", "reused", "runs_at", "fingerprint", "unit"]  # fmt: skip
    out = pd.DataFrame(rows, columns=columns)
    return out.assign(whole=out["cells_run"] == out["runs"])


Measured = tuple[float, bool]
"""Minutes read from committed manifests, and whether every folder behind them was made from nothing."""


def measured_study_minutes(runs: pd.DataFrame) -> Measured | None:
    """Wall minutes of the committed full study (``results``) plus the comparison (``results/peers``), from
    :func:`measured_runs`, and whether the two together were made from nothing; None unless both manifests record
    a total.

    Together they were made from nothing when the study ran every one of its cells and the comparison ran every
    one of its own except runs it reused from that study: every reused id is one of the study's runs, in the same
    folder of run directories, at the same code fingerprint (the comparison reuses the cells the two share, as
    ``shortlist compare`` after ``shortlist reproduce`` does)."""
    by = runs.set_index("folder")
    if not {".", "peers"} <= set(by.index):
        return None
    study, peers = by.loc["."], by.loc["peers"]
    if np.isnan(study["total_min"]) or np.isnan(peers["total_min"]):
        return None
    from_study = (
        peers["reused"] is not None
        and peers["runs_at"] is not None
        and peers["runs_at"] == study["runs_at"]
        and peers["fingerprint"] == study["fingerprint"]
        and peers["reused"] <= study["run_ids"]
        and peers["cells_run"] + len(peers["reused"]) == peers["runs"]
    )
    whole = bool(study["whole"]) and (bool(peers["whole"]) or from_study)
    return float(study["total_min"] + peers["total_min"]), whole


def measured_main_job_minutes(runs: pd.DataFrame) -> Measured | None:
    """Wall minutes of the README main job's cells (``results/bfcl``, its manifest's cell time), from
    :func:`measured_runs`, and whether it was made from nothing; None when that manifest records none."""
    by = runs.set_index("folder")
    if "bfcl" not in by.index or np.isnan(by.loc["bfcl", "cells_min"]):
        return None
    return float(by.loc["bfcl", "cells_min"]), bool(by.loc["bfcl", "whole"])


def measured_lines(runs: pd.DataFrame, study: Measured | None) -> Section:
    """The measured-runs section: every folder of :func:`measured_runs`, which of them no target is judged on, and
    how the study + comparison target (``study``, :func:`measured_study_minutes` of the same runs) is judged."""

    def minutes(v: float) -> str:
        return "-" if np.isnan(v) else f"{v:.1f}"

    rows = [[_label(r.folder), f"`{r.command}`", str(r.runs), minutes(r.cells_min), minutes(r.total_min),
             r.commit + (f" (report remade at {r.report_commit})" if r.report_commit else "")]
            for r in runs.itertuples()]  # fmt: skip
    header = ["folder", "command", "runs", "cells run (min)", "total (min)", "commit"]
    judged = study is not None and study[1]  # the comparison reused only the study's own runs, if any
    unjudged = ", ".join(f"{_label(r.folder)} ({_not_whole(r)})" for r in runs.itertuples()
                         if not r.whole and not (judged and r.folder == "peers"))  # fmt: skip
    how = (
        "`results/peers` reused only the study's own runs (its manifest's `runs_reused`, in the study's run folder, "
        "at the same code fingerprint) and the study ran all of its cells, so the two together were made from "
        "nothing: the study + comparison target adds their times and is judged."
        if judged
        else "The study + comparison target adds the times of `results` and `results/peers`; it is judged only when "
        "the study ran all its cells and the comparison reused only the study's own runs (its manifest's "
        "`runs_reused`, in the same run folder, at the same code fingerprint)."
    )
    what = Paragraph(
        "A folder's times are those of the command that wrote it last, or, where that command only remade the "
        "report from the same finished runs at the same cell code (code fingerprint), of the command that ran them "
        "(the manifest's `produced_by`; the commit column says when the report was remade). Where it reused cells "
        "of earlier commands "
        "(its manifest's `cells_run` below its runs, or not recorded) or only evaluates runs an earlier command "
        "trained, they are not what the folder costs from nothing, and no target is judged on them: "
        f"{unjudged or 'none'}. {how}"
    )
    return Section("Measured runs (from the committed manifests)", [what, Table(header, rows)])


def _label(folder: str) -> str:
    """A :data:`MEASURED` folder as the page names it: `` `results/peers` ``, `` `results` `` for ``.``."""
    return "`results`" if folder == "." else f"`results/{folder}`"


def _not_whole(r: Any) -> str:
    """Why a :func:`measured_runs` row is not a from-nothing time, in a few words."""
    if r.unit != "cells":
        return f"evaluates {r.runs:,} runs an earlier command trained; trains none"
    return f"{'not recorded how many' if np.isnan(r.cells_run) else f'{int(r.cells_run):,}'} of {r.runs:,} cells"


# ----------------------------------------------------------------------------- the command


def cmd_bench(ba: BenchArgs, fa: Any, command: str) -> int:
    """Run the measurements of ``ba.sections``, print them and write the page ``ba.output()`` (written only once
    every part succeeded): the study's (``study``), the tool search's per request (``toolsearch``) and the servers
    under load (``load``; :mod:`experiments.bench_serve`). Each part gives its targets (the answer block: what was
    measured against each target, and whether it was met) and its sections."""
    import torch

    from experiments.plan import BENCH_SUITES, resolve_plans

    torch.set_num_threads(1)
    plans = resolve_plans(ba.only, BENCH_SUITES) if "study" in ba.sections else []  # refused before any work
    t_all = time.perf_counter()
    mach = machine()
    targets: list[list[str]] = []
    parts: list[Section] = []
    if "study" in ba.sections:
        rows, sections = study_sections(ba, fa, plans)
        targets, parts = targets + rows, parts + sections
    if "toolsearch" in ba.sections:
        from experiments.bench_serve import bench_toolsearch

        rows, section = bench_toolsearch(ba)
        targets, parts = targets + rows, [*parts, section]
    if "load" in ba.sections:
        from experiments.bench_serve import bench_load

        rows, section = bench_load(ba)
        targets, parts = targets + rows, [*parts, section]
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    page = Page(
        title="Speed and memory" if "study" in ba.sections else "Tool search speed and load",
        group="speed",
        lede="Speed benchmark: each measured target, then every measurement on this machine.",
        answer=Section("Targets", [Table(["target", "measured", "met"], targets)]),
        sections=(
            Section("", [
                Paragraph("Generated by `shortlist bench`; do not edit by hand. CPU seconds are of one process on "
                          "one thread; the machine's other load inflates them less than it inflates wall time."),
                Paragraph(f"Command: `{command}`"),
            ]),
            Section("Machine", [Table(["", ""], [[k, v] for k, v in mach.items()])]),
            *parts,
            Section("Peak memory", [
                Paragraph(f"Maximum resident set size of the benchmark process: {peak:,.0f} MiB."),
                Paragraph(f"Total benchmark wall time: {time.perf_counter() - t_all:.1f} s."),
            ]),
        ),
    )  # fmt: skip
    out = Path(ba.output())
    write_page(out.parent, page, out.name)
    print(f"wrote {out}")
    return 0


def study_sections(ba: BenchArgs, fa: Any, plans: list) -> tuple[list[list[str]], list[Section]]:
    """The study's measurements (module docstring): its target rows and its sections."""
    from experiments.runner import get_condition

    cli = cli_start(ba.repeats, fa.data_dir, fa.cache_dir)
    batch = bench_batch(ba)
    c0 = plans[0].condition
    cond0 = get_condition(c0.benchmark, c0.scorer, c0.variant, 0, fa.data_dir, fa.cache_dir)
    env_rate = bench_env(cond0.train, plans[0].episode, ba.env_steps, ba.seed)
    rec_s = bench_recommend(ba.recommend_queries, 100, ba.workers, ba.seed, ba.set)
    costs, overhead, proj = _fits_and_projection(ba, fa, plans)
    total_min = float(proj["wall_minutes_at_workers"].sum())
    runs = measured_runs(Path(ba.output()).resolve().parent)
    study = measured_study_minutes(runs)
    targets = target_rows(batch, env_rate, cli, total_min, rec_s, ba.recommend_queries, study,
                          measured_main_job_minutes(runs))  # fmt: skip
    how = f"the settings {' '.join(ba.set)}" if ba.set else "its default settings"
    sections = [
        Section("CLI start (fresh process, best of the repeats)",
                [Table(["command", "seconds"], [[c, f"{t:.2f}"] for c, t in cli])]),
        Section(f"Batch evaluation: {ba.queries:,} queries x depth {ba.depth} (seeded synthetic scores)",
                [Table(["what", "seconds", "throughput"],
                       [[w, "-" if np.isnan(t) else f"{t:.4f}", n] for w, t, n in batch])]),
        Section(f"Environment ({plans[0].name} training queries, random actions, {ba.env_steps:,} steps)",
                [Table(["env", "steps/s"], [[k, f"{v:,.0f}"] for k, v in env_rate.items()])]),
        Section(f"`shortlist recommend` on a {ba.recommend_queries:,}-query x 100-candidate TREC run", [
            Paragraph(f"Every applicable kind at {how}, one seed, {ba.workers} workers, a fresh process (seeded "
                      f"synthetic run and qrels): **{rec_s:.0f} s** wall."),
        ]),
        fit_lines(costs, ba.fraction),
        projection_lines(proj, overhead, ba.workers, total_min),
        measured_lines(runs, study),
    ]  # fmt: skip
    return targets, sections


def _fits_and_projection(ba: BenchArgs, fa: Any, plans: list) -> tuple[pd.DataFrame, float, pd.DataFrame]:
    """The fit costs of every kind with a training step on ``plans``, the per-cell overhead, and the projection of
    the full study and comparison from them."""
    from agents import registry
    from experiments.plan import compare_methods

    methods = [m for m in compare_methods() if m.kind.group != "baseline"]
    costs = fit_costs(plans, methods, ba.fraction, fa.data_dir, fa.cache_dir, registry.parse_settings(ba.set))
    overhead = cell_overhead(fa.data_dir, fa.cache_dir)
    return costs, overhead, projection(study_cells_all(), costs, overhead, ba.workers)


def fit_lines(costs: pd.DataFrame, fraction: float) -> Section:
    wide = costs.pivot(index="condition", columns="method", values="fit_cpu").round(2)
    order = list(dict.fromkeys(costs["condition"]))
    wide = wide.loc[order, list(dict.fromkeys(costs["method"]))]
    n_train = costs.drop_duplicates("condition").set_index("condition")["n_train"]
    rows = [[c, str(int(n_train[c])), *(f"{v:.2f}" if not np.isnan(v) else "-" for v in wide.loc[c])] for c in order]
    return Section(
        "Fits per condition (CPU seconds, full budget)",
        [
            Paragraph(
                f"Kinds with a training budget were fitted at {fraction:g} and {2 * fraction:g} of it and "
                "extrapolated linearly (`shortlist bench --fraction`); the others once at full size."
            ),
            Table(["condition", "train queries", *wide.columns], rows),
        ],
    )


def projection_lines(proj: pd.DataFrame, overhead: float, workers: int, total_min: float) -> Section:
    rows = [[r["method"], str(int(r["cells"])), f"{r['cpu_seconds']:,.0f}", f"{r['share_pct']:.1f}",
             f"{r['wall_minutes_at_workers']:.1f}"] for _, r in proj.iterrows()]  # fmt: skip
    header = ["stage (method)", "cells", "CPU seconds", "share %", f"minutes at {workers} workers"]
    what = (
        f"`shortlist reproduce` and `shortlist compare` from nothing: {int(proj['cells'].sum()):,} distinct cells "
        f"(shared run directories), each costed by its kind's fit above plus {overhead:.2f} CPU-s of per-cell "
        f"overhead (evaluation and writing). Projected: **{total_min:.0f} minutes** of wall time at {workers} "
        "workers, before the reports. It shows where the time goes and undercounts how long a run takes: each "
        "fit here is timed alone in CPU seconds, while in a run the workers' fits share the machine (the "
        "Choppy-style fit is bound by memory bandwidth) and building conditions, scheduling and "
        "the reports come on top; docs/study.md has a measured run for comparison."
    )
    return Section(
        f"Where the time of the full study and comparison goes (a projection, {workers} workers)",
        [Paragraph(what), Table(header, rows)],
    )


def target_rows(
    batch: list,
    env_rate: dict,
    cli: list,
    total_min: float,
    rec_s: float,
    rec_q: int,
    study: Measured | None = None,
    main: Measured | None = None,
) -> list[list[str]]:
    """The rows of the targets table (target, measured, met; and one console line per target); the measured study
    row only when ``study`` (:func:`measured_study_minutes`) is known, the main job's cells only when
    ``main`` (:func:`measured_main_job_minutes`) is. The projection of the full study is shown but not judged
    (``None``): it times each fit alone and leaves out the reports, so it undercounts a real run (docs/study.md
    has one measured against it), and a target must be met by a measurement. A measured row is judged only when
    its folders were made from nothing (the flag of :data:`Measured`); a remake from reused cells is shown, not
    judged."""
    slowest = max(t for what, t, _ in batch if what.endswith("depths + scoring"))
    worst_cli = max(t for _, t in cli)
    checks = [
        ("batch evaluation of a heuristic policy over the batch < 1 s (slowest, depths + scoring)",
         f"{slowest:.3f} s", slowest < TARGETS["batch_seconds"]),
        ("environment >= 20,000 steps/s (gymnasium.make)", f"{env_rate['gymnasium.make']:,.0f} steps/s",
         env_rate["gymnasium.make"] >= TARGETS["env_steps_per_s"]),
        ("every CLI start above < 1.5 s", f"max {worst_cli:.2f} s", worst_cli < TARGETS["cli_seconds"]),
        (f"full study + comparison from nothing <= {TARGETS['study_minutes']:.0f} min on 2 cores (projection, fits "
         "timed alone: it undercounts, so it is not judged)", f"{total_min:.0f} min", None),
        (f"shortlist recommend on {rec_q:,} queries x 100 candidates < 3 min on 2 cores", f"{rec_s:.0f} s",
         rec_s < TARGETS["recommend_seconds"]),
    ]  # fmt: skip

    def row(what: str, m: Measured, limit: float) -> tuple[str, str, bool | None]:
        minutes, whole = m
        shown = f"{minutes:.1f} min" + ("" if whole else " (reused cells, or not recorded: not a from-nothing time)")
        return f"{what} <= {limit:.0f} min", shown, minutes <= limit if whole else None

    if study is not None:
        checks.insert(4, row("full study + comparison as committed (`results` + `results/peers` manifests, their "
                             "seeds; from nothing when the comparison reused only the study's runs)", study,
                             TARGETS["study_minutes"]))  # fmt: skip
    if main is not None:
        checks.append(row("the README main job's cells (`results/bfcl` manifest)", main,
                          TARGETS["main_job_cells_minutes"]))  # fmt: skip
    return judged(checks)


__all__ = ["cmd_bench", "fit_costs", "projection"]
