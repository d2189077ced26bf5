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

import contextlib
import functools
import hashlib
import io
import json
import os
import platform
import sys
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from agents import bucket_table, evaluate, summarise
from agents.base import DepthPolicy, seed_everything, set_training_progress
from agents.memo import fit_memo
from benchmarks.conditions import Condition, build_condition, source_memo
from benchmarks.data import resolve_cache_dir
from envs import EpisodeConfig, RankedQuery
from experiments.config import Cell
from experiments.io import code_fingerprint, manifest, now_utc, remove_stale_temporaries, staged_folder, write_csv

RUN_FILES = ("config.json", "command.txt", "manifest.json", "per_query.csv", "summary.csv", "buckets.csv")
#: The folder under the cache directory (:func:`benchmarks.data.resolve_cache_dir`, beside the score cache) where
#: cells share fitted networks (:mod:`agents.memo`, keyed by the code fingerprint and the fit's inputs): the
#: cut-off's network, which the P(found) stop reuses.
FIT_MEMO = "fits"


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


def _clear_condition_memo() -> None:
    _get_condition.cache_clear()


get_condition.cache_clear = _clear_condition_memo  # type: ignore[attr-defined]


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


_HELD: dict[tuple, Condition] = {}
"""The conditions of the cells :func:`run_cells` is running (:func:`held_conditions`), by :func:`_held_key`."""


def _held_key(cell: Cell, data_dir: str | None, cache_dir: str | None) -> tuple:
    return (cell.benchmark, cell.scorer, cell.variant, cell.split_seed, data_dir, cache_dir, cell.options)


def cell_condition(cell: Cell, data_dir: str | None, cache_dir: str | None) -> Condition:
    """The condition a cell trains and evaluates on: the one :func:`held_conditions` holds, else built
    (once per process, :func:`get_condition`)."""
    held = _HELD.get(_held_key(cell, data_dir, cache_dir))
    if held is not None:
        return held
    return get_condition(cell.benchmark, cell.scorer, cell.variant, cell.split_seed, data_dir, cache_dir, cell.options)


@contextlib.contextmanager
def held_conditions(cells: Sequence[Cell], data_dir: str | None, cache_dir: str | None) -> Iterator[None]:
    """Build the condition of every cell once, reading each corpus, score matrix and candidate draw once
    (:func:`benchmarks.conditions.source_memo`), and hold them all while the block runs.

    :func:`run_cells` runs its pool inside the block: on Linux the workers are forked from this process, so
    they start with every condition already built instead of building each again (the per-process memo of
    :func:`get_condition` keeps 16, fewer than a study's 128 (condition, split) pairs, so a worker rebuilt
    conditions as cells of other conditions came between). The whole study holds about 0.5 GB of
    conditions, shared by the forked workers until one writes to them. Nested blocks keep the outer one's."""
    outer = dict(_HELD)
    try:
        with source_memo():
            for c in cells:
                key = _held_key(c, data_dir, cache_dir)
                if key not in _HELD:
                    _HELD[key] = get_condition(
                        c.benchmark, c.scorer, c.variant, c.split_seed, data_dir, cache_dir, c.options
                    )
        yield
    finally:
        _HELD.clear()
        _HELD.update(outer)


def _pool_context() -> Any:
    """The process start method of :func:`run_cells`' pool: fork on Linux (the workers inherit the held
    conditions, and it stays the method on Pythons whose default moved to forkserver), the platform's default
    elsewhere (macOS and Windows spawn, whose workers build the conditions they run)."""
    import multiprocessing

    return multiprocessing.get_context("fork" if sys.platform.startswith("linux") else None)


def run_cell(
    cell: Cell, runs: Path, data_dir: str | None, cache_dir: str | None, command: str, progress_line: int = 0
) -> Path:
    """Train and evaluate one cell into ``runs/<run_id>``; returns that directory (skipped when done).

    ``progress_line`` > 0 shows the learner's training bar on that terminal line (0: none).
    """
    final = runs / cell.run_id
    if is_done(cell, final):
        return final
    set_training_progress(progress_line > 0, progress_line)
    t0 = time.perf_counter()
    started = now_utc()
    cond = cell_condition(cell, data_dir, cache_dir)
    seed_everything(cell.seed)
    policy = cell.method.kind.make(cell.method.reward, cell.policy_settings())
    t_fit = time.perf_counter()
    with fit_memo(resolve_cache_dir(cache_dir) / FIT_MEMO, code_fingerprint()):
        policy.fit(cond.train, cell.episode, cell.seed)
    t_fit = time.perf_counter() - t_fit
    t_eval = time.perf_counter()
    rows = labelled_rows(
        policy,
        cond.test,
        cell.episode,
        cell.buckets or cond.buckets,
        condition=cell.condition,
        method=cell.label,
        seed=cell.seed,
    )
    t_eval = time.perf_counter() - t_eval
    runs.mkdir(parents=True, exist_ok=True)
    with staged_folder(final, keep_existing=lambda p: is_done(cell, p)) as tmp:
        config = {"config_hash": cell.config_hash(), **cell.resolved()}
        (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
        (tmp / "command.txt").write_text(command + "\n")
        write_csv(rows, tmp / "per_query.csv")
        write_csv(summarise(rows), tmp / "summary.csv")
        write_csv(bucket_table(rows), tmp / "buckets.csv")
        policy.save(tmp / policy.artifact)  # agent.zip (SB3 weights) or agent.json
        man = manifest(
            run_id=cell.run_id,
            config_hash=cell.config_hash(),
            seed=cell.seed,
            condition={k: v for k, v in cond.meta.items() if not k.startswith("seconds") and k != "score_cache_hit"},
            scores_sha256=scores_digest([*cond.train, *cond.test]),
            started_utc=started,
            wall_seconds=time.perf_counter() - t0,
            fit_seconds=t_fit,
            eval_seconds=t_eval,
        )
        (tmp / "manifest.json").write_text(json.dumps(man, indent=2, sort_keys=True) + "\n")
    return final


def scores_digest(queries: Sequence[RankedQuery]) -> str:
    """sha256 of a condition's score matrix: each query's id, its scores and (with a second scorer) the
    other scorer's scores, as little-endian float64, in query-id order. Recorded in every run's manifest and
    in ``runs.csv``, so a cell that does not reproduce on another machine says at once whether its inputs
    (the embeddings, the BM25 scores) differed or only the learner did."""
    h = hashlib.sha256()
    for q in sorted(queries, key=lambda q: q.qid):
        h.update(q.qid.encode() + b"\x00" + np.asarray(q.scores, dtype="<f8").tobytes())
        if q.aux_scores is not None:
            h.update(b"\x01" + np.asarray(q.aux_scores, dtype="<f8").tobytes())
    return h.hexdigest()


def labelled_rows(
    policy: DepthPolicy, queries: Sequence[RankedQuery], episode: EpisodeConfig, buckets: str, **labels: object
) -> pd.DataFrame:
    """The one evaluator's per-query rows (:func:`agents.evaluate`) with ``labels`` as their first
    columns, in the order given (e.g. condition, method, seed): the rows of a run, of an evaluation and
    of a shifted policy alike."""
    rows = evaluate(policy, queries, episode, buckets)
    for name, value in reversed(labels.items()):
        rows.insert(0, name, value)
    return rows


def is_done(cell: Cell, run_dir: Path) -> bool:
    """A finished run of exactly this config exists."""
    if not all((run_dir / f).is_file() for f in RUN_FILES):
        return False
    try:
        return json.loads((run_dir / "config.json").read_text()).get("config_hash") == cell.config_hash()
    except (OSError, json.JSONDecodeError):
        return False


def runs_folder(out: Path, runs_dir: Path | str | None = None) -> Path:
    """Where :func:`run_cells` puts the run directories: ``runs_dir``, by default ``out/runs``."""
    return Path(runs_dir) if runs_dir is not None else Path(out) / "runs"


def pending(cells: Sequence[Cell], runs: Path) -> list[Cell]:
    """The cells (one per run id, first kept) with no finished run of their config under ``runs``: what
    :func:`run_cells` runs; the others it reuses."""
    unique = {c.run_id: c for c in cells}.values()
    return [c for c in unique if not is_done(c, runs / c.run_id)]


_WORKER_LINE = 0


def _init_worker(counter: Any, progress: bool) -> None:
    """Give each pool worker its own terminal line for training bars (1, 2, ... under the cells bar)."""
    global _WORKER_LINE
    with counter.get_lock():
        counter.value += 1
        _WORKER_LINE = counter.value if progress else 0


def _run_cell_worker(args: tuple) -> str:
    cell, runs, data_dir, cache_dir, command = args
    return str(run_cell(cell, Path(runs), data_dir, cache_dir, command, _WORKER_LINE))


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

    The conditions of the cells to run are built once in the parent first, so a bad input fails before
    any cell runs and the score cache is warm for the workers; cells with a finished run are reused without
    building theirs. The cells of kinds that reuse another kind's
    fitted network (``PolicyKind.shares_fit``: the P(found) stop) run after every other, so the network they
    reuse is stored by then (:data:`FIT_MEMO` in the cache directory, :mod:`agents.memo`). Every backend runs the
    same :func:`run_cell`, whose atomic directory rename makes results identical
    whichever process finished a cell. Run directories go to ``runs_dir`` (default
    ``out/runs``); commands that share it reuse each other's finished cells.
    """
    from tqdm.auto import tqdm

    runs = runs_folder(out, runs_dir)
    if backend not in ("local", "ray"):
        raise ValueError(f"unknown backend {backend!r}; expected local or ray")
    if workers < 1:
        raise ValueError(f"workers must be >= 1, got {workers}")
    cells = list({c.run_id: c for c in cells}.values())
    remove_stale_temporaries(runs)
    remove_stale_temporaries(out)
    todo = sorted(pending(cells, runs), key=lambda c: bool(c.method.kind.shares_fit))  # after the fits they reuse
    fresh = {c.run_id for c in todo}
    done = [runs / c.run_id for c in cells if c.run_id not in fresh]
    with held_conditions(todo, data_dir, cache_dir):  # only what runs: a reused cell needs no condition
        for c in todo:  # bad inputs and impossible depth caps fail before anything is written
            c.episode.check_queries(cell_condition(c, data_dir, cache_dir).queries)
        bar = tqdm(total=len(cells), initial=len(done), desc="cells", disable=not progress, file=sys.stderr)
        if backend == "ray" and todo:
            for path, cell in _run_ray(todo, runs, data_dir, cache_dir, command, workers, ray_address):
                done.append(path)
                bar.set_postfix_str(cell.run_id)
                bar.update()
        elif workers <= 1 or len(todo) <= 1:
            for c in todo:
                bar.set_postfix_str(c.run_id)
                done.append(run_cell(c, runs, data_dir, cache_dir, command, 1 if progress else 0))
                bar.update()
        else:
            ctx = _pool_context()
            counter = ctx.Value("i", 0)
            with ProcessPoolExecutor(
                max_workers=workers, mp_context=ctx, initializer=_init_worker, initargs=(counter, progress)
            ) as pool:
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
) -> Iterator[tuple[Path, Cell]]:
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


RUN_KEYS = ("condition", "method", "seed", "split_seed")
"""The columns naming a run in the combined tables (``split_seed`` read from each run's config.json)."""


def collect(run_dirs: Sequence[Path]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Concatenate per-query rows of runs and recompute summary and bucket tables from them."""
    if not run_dirs:
        raise ValueError("no runs to collect")
    frames = []
    for d in run_dirs:
        rows = pd.read_csv(d / "per_query.csv", dtype={"qid": str})
        split = json.loads((d / "config.json").read_text(encoding="utf-8")).get("split_seed", 0)
        rows.insert(rows.columns.get_loc("seed") + 1, "split_seed", int(split))
        frames.append(rows)
    per_query = pd.concat(frames, ignore_index=True)
    per_query = per_query.sort_values(list(RUN_KEYS), kind="stable").reset_index(drop=True)
    return per_query, summarise(per_query, RUN_KEYS), bucket_table(per_query, RUN_KEYS)


def collect_runs(runs: Sequence[Path], observation: str = "auto") -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """:func:`collect`, with plain method names on a named ``observation`` set (:func:`untag`): a study or
    comparison on one set gives its tables plain names (then in the run order and with the summaries of
    the default tables); ``auto`` keeps the names as the runs wrote them."""
    per_query, summary, buckets = collect(runs)
    if observation != "auto":
        per_query = untag(per_query, observation).sort_values(list(RUN_KEYS), kind="stable").reset_index(drop=True)
        summary, buckets = summarise(per_query, RUN_KEYS), bucket_table(per_query, RUN_KEYS)
    return per_query, summary, buckets


def untag(frame: pd.DataFrame, observation: str) -> pd.DataFrame:
    """``frame`` with the ``@<observation>`` tag taken off its method names (``bor-dqn@strict`` ->
    ``bor-dqn``).

    A study or comparison runs on one observation set, named in its README and manifest, so inside its folder
    the learners keep their plain names and every report lookup (the BoR agents, the supervised
    cut-off, the peers) matches them. Rows tagged with another set are refused, naming the method.
    """
    if observation == "auto" or "method" not in frame.columns:
        return frame
    methods = frame["method"].astype(str)
    tags = methods.str.partition("@")[2]
    foreign = sorted(set(methods[(tags != "") & (tags != observation)]))
    if foreign:
        raise ValueError(f"methods {foreign} carry another observation set than {observation!r}")
    return frame.assign(method=methods.str.partition("@")[0])


#: The tables of a run directory whose sha256 the run index records.
RUN_TABLES = ("per_query.csv", "summary.csv", "buckets.csv")


def float_path() -> str:
    """This machine's floating-point path for torch: its SIMD level and CPU model.

    Learned torch cells (DQN, the cut-off, the Choppy-style model) repeat byte for byte on the same
    path; on another one their float rounding differs and training drifts a little (seen here: 8 of
    120 depths of one BFCL DQN cell, -0.03 in its mean reward, between two machines of this project).
    """
    import torch

    model = platform.processor()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():
        names = [ln.split(":", 1)[1].strip() for ln in cpuinfo.read_text().splitlines() if ln.startswith("model name")]
        model = names[0] if names else model
    return f"{torch.backends.cpu.get_cpu_capability()} {model}".strip()


def run_index(runs: Sequence[Path], machine: str | None = None) -> pd.DataFrame:
    """One row per run directory: its id, config hash, code fingerprint, commit, the sha256 of its
    condition's score matrix (:func:`scores_digest`), mean reward, the
    sha256 of its tables (:data:`RUN_TABLES`) and ``float_path``, the machine that wrote the index
    (:func:`float_path` unless ``machine`` names it; empty: not known). No timings: like every
    table, the index is byte-identical when the same commit remakes it (wall times stay in the runs'
    manifests and the folder's).

    Run directories are not committed (they are large and any command remakes them); this index is,
    so a committed table names exactly the runs behind it and a rerun can be checked against it
    byte for byte (``tests/test_results_reproduce.py``; on another float path, torch cells to within
    a tolerance).
    """
    path = float_path() if machine is None else machine
    rows = []
    for run in runs:
        cfg = json.loads((run / "config.json").read_text(encoding="utf-8"))
        man = json.loads((run / "manifest.json").read_text(encoding="utf-8"))
        tables = {t: (run / t).read_bytes() for t in RUN_TABLES}  # read once: hashed, and the summary parsed
        row = {
            "run_id": run.name,
            "config_hash": cfg.get("config_hash", ""),
            "code_fingerprint": man.get("code_fingerprint", ""),
            "git_sha": man.get("git_sha", ""),
            "git_dirty": man.get("git_dirty"),
            "scores_sha256": man.get("scores_sha256", ""),
            "mean_reward": float(pd.read_csv(io.BytesIO(tables["summary.csv"]))["mean_reward"].mean()),
            "float_path": path,
        }
        row |= {f"sha256_{t.removesuffix('.csv')}": hashlib.sha256(data).hexdigest() for t, data in tables.items()}
        rows.append(row)
    return pd.DataFrame(rows).sort_values("run_id", kind="stable").reset_index(drop=True)
