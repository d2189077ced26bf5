"""Run cells (condition x method x seed): train on the train split, evaluate on the test split.

Each cell writes one run directory ``<out>/runs/<run_id>/`` holding ``config.json``
(resolved config and its hash), ``command.txt``, ``manifest.json`` (git sha, dirty
flag, seed, package versions, sha256 of inputs, wall time, timestamps),
``per_query.csv``, ``summary.csv``, ``buckets.csv`` and the trained agent. The
directory is built under a temporary name and renamed into place, so an
interrupted run never leaves a half-written result; a cell whose directory exists
with the same config hash is skipped (resume).
"""

from __future__ import annotations

import functools
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from agents import DQNAgent, FixedK, TabularQ, bucket_table, evaluate, registry, summarise
from agents.base import DepthPolicy
from benchmarks.atomic import DIR_MODE, atomic_path, temp_prefix
from benchmarks.conditions import Condition, build_condition
from experiments.config import Cell


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(folder: Path) -> None:
    """Remove ``.<name>.<pid>.*`` temporaries whose writer process is gone (killed runs)."""
    if not folder.is_dir():
        return
    for p in folder.iterdir():
        parts = p.name.split(".")
        pid = next((int(x) for x in parts[2:] if x.isdigit()), None) if p.name.startswith(".") else None
        if p.name.startswith(".") and (pid is None or (pid != os.getpid() and not _pid_alive(pid))):
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)


RUN_FILES = ("config.json", "command.txt", "manifest.json", "per_query.csv", "summary.csv", "buckets.csv")
FLOAT_FORMAT = "%.10g"
REPO = Path(__file__).resolve().parents[1]


def seed_everything(seed: int) -> None:
    """Seed Python, numpy's legacy global RNG (for libraries that use it) and torch, in one place."""
    import random

    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 - third-party code may read the global RNG
    torch.manual_seed(seed)
    torch.set_num_threads(1)


def get_condition(
    benchmark: str,
    scorer: str,
    variant: str,
    split_seed: int,
    data_dir: str | None,
    cache_dir: str | None,
    options: tuple[tuple[str, str], ...] = (),
) -> Condition:
    env = tuple(os.environ.get(k) for k in ("SHORTLIST_BFCL_DIR", "SHORTLIST_DATA_DIR", "SHORTLIST_CACHE_DIR"))
    return _get_condition(benchmark, scorer, variant, split_seed, data_dir, cache_dir, options, env)


get_condition.cache_clear = lambda: _get_condition.cache_clear()  # type: ignore[attr-defined]


@functools.lru_cache(maxsize=16)
def _get_condition(
    benchmark: str,
    scorer: str,
    variant: str,
    split_seed: int,
    data_dir: str | None,
    cache_dir: str | None,
    options: tuple[tuple[str, str], ...] = (),
    env: tuple = (),
) -> Condition:
    """Build (once per process) the ranked queries of a condition."""
    return build_condition(
        benchmark,
        scorer,
        variant=variant,
        data_dir=Path(data_dir) if data_dir else None,
        cache_dir=Path(cache_dir) if cache_dir else None,
        split_seed=split_seed,
        options=dict(options),
    )


def cell_condition(cell: Cell, data_dir: str | None, cache_dir: str | None) -> Condition:
    """The condition a cell trains and evaluates on."""
    return get_condition(cell.benchmark, cell.scorer, cell.variant, cell.split_seed, data_dir, cache_dir, cell.options)


def make_policy(cell: Cell) -> DepthPolicy:
    """The untrained policy of a cell's method."""
    m = cell.method
    if m.agent == "fixed":
        return FixedK(m.k)
    if m.agent == "tabular":
        return TabularQ(m.reward, cell.tabular)
    if m.agent == "dqn":
        return DQNAgent(m.reward, cell.dqn)
    return registry.make(m.agent, m.reward)


def git_state() -> dict[str, object]:
    """Commit sha and dirty flag of the package checkout (None outside git)."""
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no"],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
        return {"git_sha": sha, "git_dirty": dirty}
    except (OSError, subprocess.CalledProcessError):
        return {"git_sha": None, "git_dirty": None}


def package_versions() -> dict[str, str]:
    import importlib.metadata as md

    out = {"python": platform.python_version()}
    for name in (
        "numpy",
        "scipy",
        "pandas",
        "torch",
        "gymnasium",
        "stable-baselines3",
        "rank-bm25",
        "sentence-transformers",
    ):
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = "absent"
    return out


def _write_csv(df: pd.DataFrame, path: Path) -> None:
    df.to_csv(path, index=False, float_format=FLOAT_FORMAT, lineterminator="\n")


def run_cell(cell: Cell, runs: Path, data_dir: str | None, cache_dir: str | None, command: str) -> Path:
    """Train and evaluate one cell into ``runs/<run_id>``; returns that directory (skipped when done)."""
    final = runs / cell.run_id
    if is_done(cell, final):
        return final
    t0 = time.perf_counter()
    started = datetime.now(UTC).isoformat(timespec="seconds")
    cond = cell_condition(cell, data_dir, cache_dir)
    seed_everything(cell.seed)
    policy = make_policy(cell)
    t_fit = time.perf_counter()
    policy.fit(cond.train, cell.episode, cell.seed)
    t_fit = time.perf_counter() - t_fit
    t_eval = time.perf_counter()
    rows = evaluate(policy, cond.test, cell.episode, cell.buckets or cond.buckets)
    t_eval = time.perf_counter() - t_eval
    rows.insert(0, "seed", cell.seed)
    rows.insert(0, "method", cell.method.name)
    rows.insert(0, "condition", cell.condition)
    summary = summarise(rows)
    buckets = bucket_table(rows)
    runs.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=runs, prefix=temp_prefix(final)))
    os.chmod(tmp, DIR_MODE)
    try:
        config = {"config_hash": cell.config_hash(), **cell.resolved()}
        (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        (tmp / "command.txt").write_text(command + "\n")
        _write_csv(rows, tmp / "per_query.csv")
        _write_csv(summary, tmp / "summary.csv")
        _write_csv(buckets, tmp / "buckets.csv")
        artifact = getattr(policy, "artifact", None)
        if artifact:  # e.g. agent.zip (SB3) or agent.json (tabular, fitted heuristics)
            policy.save(tmp / artifact)
        manifest = {
            "run_id": cell.run_id,
            "config_hash": cell.config_hash(),
            "seed": cell.seed,
            **git_state(),
            "versions": package_versions(),
            "machine": {"platform": platform.platform(), "cpus": os.cpu_count()},
            "condition": {k: v for k, v in cond.meta.items() if not k.startswith("seconds") and k != "score_cache_hit"},
            "started_utc": started,
            "finished_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            "wall_seconds": round(time.perf_counter() - t0, 3),
            "fit_seconds": round(t_fit, 3),
            "eval_seconds": round(t_eval, 3),
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
        try:
            os.replace(tmp, final)
        except OSError:
            if is_done(cell, final):  # another process finished the same cell: keep its result
                shutil.rmtree(tmp, ignore_errors=True)
                return final
            aside = runs / f".{cell.run_id}.{os.getpid()}.old"
            os.replace(final, aside)
            os.replace(tmp, final)
            shutil.rmtree(aside, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def is_done(cell: Cell, run_dir: Path) -> bool:
    """A finished run of exactly this config exists."""
    if not all((run_dir / f).is_file() for f in RUN_FILES):
        return False
    try:
        return json.loads((run_dir / "config.json").read_text()).get("config_hash") == cell.config_hash()
    except (OSError, json.JSONDecodeError):
        return False


def _run_cell_worker(args: tuple) -> str:
    cell, runs, data_dir, cache_dir, command = args
    return str(run_cell(cell, Path(runs), data_dir, cache_dir, command))


def run_cells(
    cells: Sequence[Cell],
    out: Path,
    *,
    data_dir: str | None,
    cache_dir: str | None,
    command: str,
    workers: int = 1,
    progress: bool = True,
    backend: str = "local",
    ray_address: str | None = None,
    runs_dir: Path | None = None,
) -> list[Path]:
    """Run every cell (skipping finished ones): serially, in ``workers`` local processes, or as
    Ray tasks (``backend="ray"``; ``ray_address`` points at a cluster, default a local instance).

    Conditions are built once in the parent first, so a bad input fails before
    any cell runs and the score cache is warm for the workers. Every backend runs the
    same :func:`run_cell`, whose atomic directory rename makes results identical
    whichever process finished a cell. Run directories go to ``runs_dir`` (default
    ``out/runs``); commands that share it reuse each other's finished cells.
    """
    runs = Path(runs_dir) if runs_dir is not None else out / "runs"
    if backend not in ("local", "ray"):
        raise ValueError(f"unknown backend {backend!r}; expected local or ray")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    from tqdm.auto import tqdm

    cells = list({c.run_id: c for c in cells}.values())
    remove_stale_temporaries(out / "runs")
    remove_stale_temporaries(out)
    for c in cells:  # bad inputs and impossible depth caps fail before anything is written
        c.episode.check_queries(cell_condition(c, data_dir, cache_dir).queries)
    todo = [c for c in cells if not is_done(c, runs / c.run_id)]
    done = [runs / c.run_id for c in cells if c not in todo]
    bar = tqdm(total=len(cells), initial=len(done), desc="cells", disable=not progress, file=sys.stderr)
    if backend == "ray" and todo:
        for path, cell in _run_ray(todo, runs, data_dir, cache_dir, command, workers, ray_address):
            done.append(path)
            bar.set_postfix_str(cell.run_id)
            bar.update()
    elif workers <= 1 or len(todo) <= 1:
        for c in todo:
            bar.set_postfix_str(c.run_id)
            done.append(run_cell(c, runs, data_dir, cache_dir, command))
            bar.update()
    else:
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures = {pool.submit(_run_cell_worker, (c, str(runs), data_dir, cache_dir, command)): c for c in todo}
            for fut in as_completed(futures):
                done.append(Path(fut.result()))
                bar.set_postfix_str(futures[fut].run_id)
                bar.update()
    bar.close()
    order = {c.run_id: i for i, c in enumerate(cells)}
    return sorted(done, key=lambda p: order.get(p.name, len(order)))


def _run_ray(
    cells: Sequence[Cell],
    runs: Path,
    data_dir: str | None,
    cache_dir: str | None,
    command: str,
    workers: int,
    address: str | None,
):  # noqa: ANN202 - generator of (path, cell)
    """Run cells as Ray tasks (one CPU each), yielding results as they finish."""
    try:
        import ray
    except ImportError as e:
        raise ValueError("--backend ray needs Ray: pip install 'shortlist-depth[ray]'") from e
    started = False
    if not ray.is_initialized():
        kwargs: dict = {"address": address} if address else {"num_cpus": workers, "include_dashboard": False}
        ray.init(log_to_driver=False, **kwargs)
        started = True
    try:
        task = ray.remote(num_cpus=1)(_run_cell_worker)
        pending = {task.remote((c, str(runs.resolve()), data_dir, cache_dir, command)): c for c in cells}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                yield Path(ray.get(ref)), pending.pop(ref)
    finally:
        if started:
            ray.shutdown()


def collect(run_dirs: Sequence[Path]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Concatenate per-query rows of runs and recompute summary and bucket tables from them."""
    if not run_dirs:
        raise ValueError("no runs to collect")
    per_query = pd.concat([pd.read_csv(d / "per_query.csv", dtype={"qid": str}) for d in run_dirs], ignore_index=True)
    per_query = per_query.sort_values(["condition", "method", "seed"], kind="stable").reset_index(drop=True)
    return per_query, summarise(per_query), bucket_table(per_query)


def write_tables(out: Path, per_query: pd.DataFrame, summary: pd.DataFrame, buckets: pd.DataFrame) -> None:
    """Atomically write the combined long-format tables of a sweep."""
    out.mkdir(parents=True, exist_ok=True)
    for name, df in (("per_query.csv", per_query), ("summary.csv", summary), ("buckets.csv", buckets)):
        atomic_write_csv(df, out / name)


def atomic_write_csv(df: pd.DataFrame, path: Path) -> None:
    """Write a table atomically (:func:`benchmarks.atomic.atomic_path`)."""
    with atomic_path(path) as tmp:
        _write_csv(df, tmp)


def atomic_write_text(path: Path, text: str) -> None:
    """Write UTF-8 text atomically (:func:`benchmarks.atomic.atomic_path`)."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
