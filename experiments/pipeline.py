"""The one pipeline of every command that writes a results folder: ``reproduce``, ``compare`` and ``shift``.

Each command only configures a :class:`Pipeline`; :func:`run_pipeline` does the rest, the same way for all:

1. **plan**: the lines ``--dry-run`` prints, one per unit of work, each an exact command that redoes it
   (``shortlist train ...`` for a cell, :meth:`experiments.config.Cell.command`; ``shortlist evaluate ...``
   for a shifted policy);
2. **produce**: the per-query rows and the run directories behind them (run the cells resumably through
   :func:`experiments.runner.run_cells`; or evaluate trained runs);
3. **write**: the combined tables (``per_query.csv``, ``summary.csv``, ``buckets.csv``, ``runs.csv``), then
   the command's report, then ``manifest.json``, all into a staging folder that is moved into ``out`` only
   once everything is written (:func:`experiments.io.staged_folder`): a failing report leaves ``out`` as
   it was;
4. **index**: the static HTML page that shows the folder is rebuilt (``out/index.html`` for the study,
   the enclosing results folder's for a sub-folder such as ``results/peers``).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from experiments.config import Cell
from experiments.io import staged_folder, write_manifest, write_tables
from experiments.options import CommonArgs, SourceArgs
from experiments.produced import produced_by


@dataclass(frozen=True)
class Produced:
    """What the produce step gives the report: the combined tables and the runs behind them."""

    per_query: pd.DataFrame
    summary: pd.DataFrame
    buckets: pd.DataFrame
    runs: list[Path]
    """The run directories behind the tables, indexed in ``runs.csv``."""
    seconds: float = 0.0
    """Wall time of the produce step (cells run or policies evaluated by this invocation)."""
    ran: int | None = None
    """How many of ``runs`` this invocation ran (the others were finished cells it reused), recorded in the manifest
    as ``cells_run`` so a time is never taken for a from-nothing time when it is not; None where not counted."""
    reused: tuple[str, ...] | None = None
    """The run ids of ``runs`` this invocation reused (finished before it started), recorded in the manifest as
    ``runs_reused``: with ``runs_folder`` it tells which earlier command made them (``shortlist bench`` adds the
    study's and the comparison's times only when the comparison reused the study's own runs); None where not
    counted."""
    runs_folder: str | None = None
    """Where the run directories are, relative to the results folder (``runs``; ``../runs`` for a comparison in
    ``results/peers`` that shares the study's), recorded in the manifest; None where not recorded."""


@dataclass(frozen=True)
class Pipeline:
    """A command's configuration of the one pipeline (see the module docstring)."""

    name: str
    """The command (``reproduce``, ``compare``, ``shift``), recorded in the manifest."""
    out: Path
    """The results folder written."""
    command: str
    """The command line, recorded in the manifest."""
    plan: Callable[[], list[tuple[str, str]]]
    """(unit id, exact command) for every unit of work, printed by ``--dry-run``."""
    produce: Callable[[], Produced]
    """Runs the work (resumably) and returns the combined tables."""
    report: Callable[[Path, Produced], dict[str, Any]]
    """Writes the report's files into the staging folder it is given; returns the manifest's own fields."""
    owned: tuple[str, ...] = ("figures",)
    """Subfolders of ``out`` holding this invocation's files only (:func:`experiments.io.staged_folder`)."""
    index: Literal["own", "enclosing"] = "enclosing"
    """``own``: ``out`` gets its own ``index.html``; ``enclosing``: the results folder holding ``out`` has
    its index rebuilt, if it has one."""
    unit: str = "cells"
    """What a plan line is, for the ``--dry-run`` total."""
    tables: tuple[str, ...] = field(default=("per_query.csv", "summary.csv", "buckets.csv", "runs.csv"))
    """The combined tables written (a report may add its own)."""


def run_pipeline(p: Pipeline, dry_run: bool = False) -> int:
    """Print the plan (``dry_run``), or produce, write and index (see the module docstring)."""
    if dry_run:
        lines = p.plan()
        for unit, command in lines:
            print(f"{unit}\t{command}")
        print(f"{len(lines)} {p.unit}")
        return 0
    from experiments.runner import run_index

    units = [unit for unit, _ in p.plan()]
    there = check_out_is_ours(p, units)
    t0 = time.perf_counter()
    produced = p.produce()
    index = run_index(produced.runs)
    made_by = produced_by(p.out, there, index, produced.ran)  # before the staged folder replaces runs.csv
    with staged_folder(p.out, merge=True, owned=p.owned) as tmp:
        tables = {
            "per_query.csv": produced.per_query,
            "summary.csv": produced.summary,
            "buckets.csv": produced.buckets,
            "runs.csv": index,
        }
        write_tables(tmp, {name: df for name, df in tables.items() if name in p.tables})
        t_report = time.perf_counter()
        fields = p.report(tmp, produced)
        write_manifest(
            tmp / "manifest.json",
            pipeline=p.name,
            command=p.command,
            runs=[run.name for run in produced.runs],
            unit=p.unit,
            units=sorted(units),
            **({} if produced.ran is None else {"cells_run": produced.ran}),
            **({} if produced.reused is None else {"runs_reused": list(produced.reused)}),
            **({} if produced.runs_folder is None else {"runs_folder": produced.runs_folder}),
            **({} if made_by is None else {"produced_by": made_by}),
            **fields,
            timings_seconds={
                "produce": produced.seconds,
                "report": time.perf_counter() - t_report,
                "total": time.perf_counter() - t0,
            },
        )
    refresh_index(p.out, own=p.index == "own")
    reused = len(produced.reused or ())
    made = f" ({len(produced.runs) - reused} trained, {reused} reused)" if reused else ""
    print(f"wrote {len(produced.runs)} runs{made}, tables and README.md to {p.out}")
    return 0


def check_out_is_ours(p: Pipeline, units: Sequence[str]) -> dict[str, Any] | None:
    """Never replace the results of another command, or of more work: ``p.out`` may hold this command's results of
    some of these units (rewritten with all of them), nothing else. Its manifest names the pipeline and the units
    (a manifest written before units were recorded: the run directories, a unit ``<run>@<target>`` naming its
    run). Returns that manifest (None when the folder has none), read once for :func:`run_pipeline`.

    Raises:
        ValueError: naming the folder, the command that wrote it and a unit this command would drop.
    """
    import json

    path = p.out / "manifest.json"
    if not path.is_file():
        if (p.out / "summary.csv").is_file():  # tables without a manifest: `shortlist train`'s
            raise ValueError(f"--out {p.out}: holds the tables of `shortlist train` (summary.csv, no manifest), which "
                             "this command's would replace; give another --out (it is left as it is)")  # fmt: skip
        return None
    try:
        there = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ValueError(f"--out {p.out}: holds a manifest.json that cannot be read ({e}); give another --out") from e
    if not isinstance(there, dict) or there.get("pipeline") != p.name:
        made = there.get("command", "another command") if isinstance(there, dict) else "another command"
        raise ValueError(f"--out {p.out}: holds the results of `{made}`; give another --out (it is left as it is)")
    if "units" in there:
        theirs, mine = set(there["units"]), set(units)
    else:  # a run id may carry an @tag (bor-fqi@listwise); a shift unit is <run>@<target>
        theirs, mine = set(there.get("runs") or ()), {*units, *(unit.rsplit("@", 1)[0] for unit in units)}
    dropped = sorted(theirs - mine)
    if dropped:
        raise ValueError(
            f"--out {p.out}: holds `{there.get('command')}`, whose {len(dropped)} of {len(theirs)} "
            f"{there.get('unit') or 'units'} this command would drop (e.g. {dropped[0]}); give another --out (it is "
            "left as it is), or remove it to replace it"
        )
    return there


def refresh_index(out: Path, own: bool = False) -> None:
    """Rebuild the static site that shows ``out``: its own (``own``), else that of the results folder holding
    it, if it has one. A study folder (written by ``reproduce``) first gets its overview README rebuilt
    (:func:`experiments.report.overview.write_overview`), so the answer on its first screen always reads
    the current tables of every part (a ``compare`` into ``results/peers`` changes the answer of
    ``results/``); then every page of the site (:func:`experiments.html.write_index`)."""
    from experiments.html import write_index

    target = Path(out).resolve() if own else Path(out).resolve().parent
    if not own and not (target / "index.html").is_file():
        return
    if own or _is_study(target):
        from experiments.report.overview import write_overview

        write_overview(target)
    write_index(target)


def rebuild_site(folder: Path) -> tuple[bool, Path]:
    """``shortlist site``: the overview README of a study folder (from its tables and those of its parts) and the
    static site of ``folder``, without running anything. Returns whether the overview was rebuilt (a folder
    ``reproduce`` did not write keeps its README) and the site's first page."""
    from experiments.html import write_index

    study = _is_study(Path(folder))
    if study:
        from experiments.report.overview import write_overview

        write_overview(Path(folder))
    return study, write_index(Path(folder))


def _is_study(folder: Path) -> bool:
    """Whether ``folder`` was written by ``shortlist reproduce`` (its manifest names that pipeline)."""
    import json

    path = folder / "manifest.json"
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("pipeline") == "reproduce"
    except (OSError, ValueError, AttributeError):
        return False


def cells_plan(cells: Sequence[Cell], out: Path) -> Callable[[], list[tuple[str, str]]]:
    """The plan of a cell-based pipeline: each cell's run id and the ``shortlist train`` command that
    recreates it (run directories under ``out/runs``)."""
    return lambda: [(c.run_id, c.command(str(out))) for c in cells]


def cells_producer(
    cells: Sequence[Cell], out: Path, ca: CommonArgs, command: str, runs_dir: Path | None, observation: str
) -> Callable[[], Produced]:
    """The produce step of ``reproduce`` and ``compare``: run (or resume) the cells, then collect their
    per-query rows (plain method names on a named ``observation`` set)."""

    def produce() -> Produced:
        from experiments.runner import collect_runs, pending, runs_folder

        folder = runs_folder(out, runs_dir)
        todo = {c.run_id for c in pending(cells, folder)}  # what run_cells will run; it reuses the rest
        reused = tuple(sorted({c.run_id for c in cells} - todo))
        t0 = time.perf_counter()
        runs = run_with(cells, out, ca, command, runs_dir)
        seconds = time.perf_counter() - t0
        per_query, summary, buckets = collect_runs(runs, observation)
        where = Path(os.path.relpath(Path(folder).resolve(), Path(out).resolve())).as_posix()
        return Produced(per_query, summary, buckets, runs, seconds, len(todo), reused, where)

    return produce


#: The replaced runs named one by one on the console; the rest are counted.
REPLACED_NAMED = 10


def _differences(made: dict, wanted: dict, prefix: str = "") -> list[str]:
    """The settings two resolved configs differ in, as ``key: old -> new`` (nested keys dotted)."""
    out = []
    for key in sorted(set(made) | set(wanted)):
        a, b = made.get(key), wanted.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            out += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            out.append(f"{prefix}{key}: {a} -> {b}")
    return out


def replaced_runs(cells: Sequence[Cell], folder: Path) -> list[str]:
    """The console lines naming each finished run the cells will replace (the same run id, made with other
    settings or inputs: what changed), and counting those made by other code only."""
    import json

    from experiments.runner import RUN_FILES, pending

    named, by_code = [], 0
    for cell in pending(cells, folder):
        run = folder / cell.run_id
        if not all((run / f).is_file() for f in RUN_FILES):
            continue
        try:
            made = json.loads((run / "config.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        made.pop("config_hash", None)
        changed = _differences(made, json.loads(json.dumps(cell.resolved(), default=str)))
        if not changed:
            by_code += 1
            continue
        named.append(f"shortlist: note: replacing {run}, made with other settings or inputs: " + "; ".join(changed[:4])
                     + (f"; and {len(changed) - 4} more" if len(changed) > 4 else ""))  # fmt: skip
    lines = named[:REPLACED_NAMED]
    if len(named) > REPLACED_NAMED:
        lines.append(f"shortlist: note: and {len(named) - REPLACED_NAMED} more runs made with other settings or "
                     "inputs are replaced")  # fmt: skip
    if by_code:
        lines.append(f"shortlist: note: {by_code} run(s) under {folder} made by other code are run again")
    return lines


def run_with(
    cells: Sequence[Cell], out: Path, ca: CommonArgs, command: str, runs_dir: Path | None = None
) -> list[Path]:
    """Run cells with the common options (workers, backend, caches, progress) of any command; a finished run the
    cells replace (the same run id, another config) is said on the console first (:func:`replaced_runs`)."""
    import sys

    from experiments.runner import run_cells, runs_folder

    for line in replaced_runs(cells, runs_folder(out, runs_dir)):
        print(line, file=sys.stderr)
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


#: The sources whose list size only their data says (a user's run, a BEIR corpus, a log's registry).
USER_SOURCES = ("run", "beir", "log")


def largest_list(cell: Cell, co: CommonArgs) -> tuple[int, str] | None:
    """The longest ranked list of ``cell``'s condition where only its data says it (:data:`USER_SOURCES`), and the
    condition's name (a run's holds its file's name and digest), from the condition the cells build
    (:func:`experiments.runner.cell_condition`, memoised, so it is built once); None for a benchmark, whose plan
    knows its size (:func:`experiments.plan.fixed_n`). The list's length, not N: a run truncated at 30 of
    ``--n-candidates`` 1,000,000 shows 30 tools at most, so a fixed K of 50 there is the whole list."""
    from experiments.runner import cell_condition

    if cell.benchmark not in USER_SOURCES:
        return None
    cond = cell_condition(cell, co.data_dir, co.cache_dir)
    return max(q.length for q in cond.queries), cond.name


def inputs_label(sa: SourceArgs, name: str) -> str:
    """How an error names a command's inputs: its run and qrels, BEIR folder or log, else the condition ``name``."""
    return " and ".join(p for p in (sa.run, sa.qrels, sa.beir_dir, sa.log) if p) or name


def check_split(cell: Cell, co: CommonArgs, inputs: str, who: str, min_train: int, min_test: int) -> None:
    """ValueError, before anything is run or written, when ``cell``'s train/test split holds fewer than
    ``min_train`` training or ``min_test`` test queries (``who`` needs them: ``recommend`` to rank, ``--agent auto``
    to hold some out), naming ``inputs``, the counts and the fewest queries that would do at the split's train
    fraction."""
    from benchmarks.split import fewest_to_split, split_sizes
    from experiments.runner import cell_condition

    cond = cell_condition(cell, co.data_dir, co.cache_dir)
    n, n_train, n_test = len(cond.queries), len(cond.train), len(cond.test)
    if n_train >= min_train and n_test >= min_test:
        return
    frac = float(cond.meta["train_frac"])
    fewest = fewest_to_split(min_train, frac)
    while split_sizes(fewest, frac)[1] < min_test:
        fewest += 1
    one, many = ("request", "requests") if cell.benchmark == "log" else ("query", "queries")
    usable = "usable" if cell.benchmark == "log" else "judged"
    other = ", or another --train-frac" if cell.benchmark != "beir" and n >= min_train + min_test else ""
    raise ValueError(
        f"{inputs}: {n} {usable} {one if n == 1 else many} give {n_train} training and {n_test} test "
        f"{one if n_test == 1 else many} (train fraction {frac:g}); {who} needs at least {min_train} training and "
        f"{min_test} test {one if min_test == 1 else many}: at least {fewest} {usable} {many}{other}"
    )


def fixed_within_lists(
    plan: Any, methods: Sequence[Any], cells: list[Cell], co: CommonArgs, refuse: bool
) -> list[Cell]:
    """``cells`` (of ``plan`` and ``methods``) without a fixed K above the lists' size (the whole list under another
    K's name: :func:`experiments.plan.beyond_n`, the size :func:`largest_list` or the plan's): those left out are
    said on the console, or, with ``refuse`` (a K the user named), a ValueError."""
    from experiments.plan import beyond_n, fixed_n, left_out_note

    if not cells or not any(m.agent == "fixed" for m in methods):
        return cells
    found = largest_list(cells[0], co)
    n, name = found if found is not None else (None, plan.name)
    drop = beyond_n(plan, methods, n)
    if drop and refuse:
        size = f"N = {fixed_n(plan)}" if n is None else f"{n} ranked items at most"
        raise ValueError(f"--k {' '.join(str(m.k) for m in drop)}: above the lists' size ({size}) on {name} (every "
                         "list shown whole, under another K's name); give a K within it")  # fmt: skip
    if note := left_out_note([plan], lambda _: methods, n, name):
        print(note, flush=True)
    return [c for c in cells if c.method not in drop]
