"""``shortlist bench`` end to end with tiny budgets: which conditions it times by default (the
two-scorer ones included), every section it writes, the projection's arithmetic, and a refused condition
that writes nothing. The figures themselves are machine-dependent and are not asserted (results/bench.md)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from conftest import TINY_BUDGETS

from experiments.bench import (
    cmd_bench,
    measured_lines,
    measured_main_job_minutes,
    measured_runs,
    measured_study_minutes,
    projection,
    study_cells_all,
    target_rows,
)
from experiments.options import BenchArgs
from experiments.plan import BENCH_SUITES, COMPARE_SUITES, resolve_plans
from experiments.report.page import Paragraph

TINY: dict[str, Any] = {
    "queries": 200,
    "depth": 20,
    "env_steps": 300,
    "repeats": 1,
    "fraction": 0.5,
    "recommend_queries": 30,
    # tiny budgets: the test checks what the page holds, not what a full fit costs (the heavy kinds' full budgets
    # took about a minute here; P(found)'s, which trains the cut-off's network untimed first, 20 s)
    "set": (*TINY_BUDGETS, "dqn.total_timesteps=400", "cutoff.epochs=4", "choppy.epochs=4", "fqi.gradient_steps=100",
            "ppo.total_timesteps=512", "residual.total_timesteps=400"),
}  # fmt: skip


def test_default_conditions_are_those_of_compare_with_the_two_scorer_ones() -> None:
    names = [p.name for p in resolve_plans((), BENCH_SUITES)]
    assert names == [p.name for p in resolve_plans((), COMPARE_SUITES)]
    for c in ("bfcl-bm25", "bfcl-bm25-hybrid", "metatool-fused", "toolbench-bm25", "metatool-minilm-multi"):
        assert c in names


def _manifest(
    folder: Path,
    command: str,
    total: float,
    cells: float | None = None,
    ran: int | None = 2,
    runs: tuple[str, ...] = ("a", "b"),
    reused: tuple[str, ...] | None = None,
    where: str | None = None,
    fingerprint: str = "f0",
    unit: str | None = None,
) -> None:
    """A results folder's manifest of ``runs``, ``ran`` of them run by its command (None: not recorded), the run ids
    it reused and its folder of run directories (``runs_reused`` and ``runs_folder``; None: not recorded)."""
    folder.mkdir(parents=True, exist_ok=True)
    timings = {"total": total} | ({} if cells is None else {"cells": cells})
    man: dict[str, object] = {"command": command, "runs": list(runs), "timings_seconds": timings,
                              "git_sha": "0123456789", "code_fingerprint": fingerprint}  # fmt: skip
    man |= {} if ran is None else {"cells_run": ran}
    man |= {} if reused is None else {"runs_reused": list(reused)}
    man |= {} if where is None else {"runs_folder": where}
    man |= {} if unit is None else {"unit": unit}
    (folder / "manifest.json").write_text(json.dumps(man), encoding="utf-8")


def test_bench_writes_every_section(tmp_path: Path, shared_cache: Path) -> None:
    out = tmp_path / "bench.md"
    _manifest(tmp_path, "shortlist reproduce --seeds 42", 1800.0, 1700.0)  # the study: 30 min
    _manifest(tmp_path / "peers", "shortlist compare --seeds 42", 660.0)  # the comparison: 11 min
    rc = cmd_bench(
        BenchArgs(only=("bfcl-bm25", "bfcl-bm25-hybrid"), out=str(out), cache_dir=str(shared_cache), **TINY),
        BenchArgs(cache_dir=str(shared_cache)),
        "shortlist bench (test)",
    )
    assert rc == 0
    text = out.read_text(encoding="utf-8")
    for heading in (
        "## Machine",
        "## CLI start",
        "## Batch evaluation: 200 queries x depth 20",
        "## Environment (bfcl-bm25",
        "## `shortlist recommend` on a 30-query x 100-candidate TREC run",
        "## Fits per condition",
        "## Where the time of the full study and comparison goes (a projection, 2 workers)",
        "## Measured runs",
        "## Peak memory",
        "## Targets",
    ):
        assert heading in text, heading
    fits = re.findall(r"^\| (bfcl-\S+) \| (\d+) \|", text, re.M)
    assert [f[0] for f in fits] == ["bfcl-bm25", "bfcl-bm25-hybrid"] and fits[0][1] == fits[1][1]  # same queries
    for cmd in ("shortlist --help", "shortlist data list", "shortlist evaluate"):
        assert cmd in text
    targets = re.findall(r"^\| (batch|environment|every CLI start|full study|shortlist recommend)\D.* \| (yes|NO) \|$",
                         text, re.M)  # fmt: skip
    assert [t[0] for t in targets] == ["batch", "environment", "every CLI start", "full study",
                                       "shortlist recommend"]  # fmt: skip
    # the projection undercounts a real run, so it is shown but never passes or fails the target
    assert re.search(r"^\| full study \+ comparison from nothing .*projection.* \| \d+ min \| - \|$", text, re.M)
    assert "| `results` | `shortlist reproduce --seeds 42` | 2 | 28.3 | 30.0 | 0123456 |" in text
    assert "no target is judged on them: none." in text
    assert "| `results/peers` | `shortlist compare --seeds 42` | 2 | - | 11.0 | 0123456 |" in text
    assert re.search(r"^\| full study \+ comparison as committed .* \| 41\.0 min \| NO \|$", text, re.M)
    assert "Total benchmark wall time" in text and "shortlist bench (test)" in text


def test_projection_costs_every_distinct_cell_once() -> None:
    cells = study_cells_all()
    assert len({c.run_id for c in cells}) == len(cells)
    costs = pd.DataFrame(
        [{"condition": "bfcl-bm25", "method": "bor-dqn", "n_train": 280, "fit_cpu": 10.0, "measured": "x"},
         {"condition": "metatool-bm25", "method": "bor-dqn", "n_train": 1400, "fit_cpu": 20.0, "measured": "x"}]
    )  # fmt: skip
    proj = projection(cells, costs, overhead=1.0, workers=2).set_index("method")
    dqn = [c for c in cells if c.label == "bor-dqn"]  # the listwise probe's cells are a stage of their own
    assert proj.loc["bor-dqn", "cells"] == len(dqn)
    # measured conditions cost their own fit, other BFCL ones the BFCL fit, others the nearest or the mean
    assert proj.loc["bor-dqn", "cpu_seconds"] > 11.0 * len(dqn) - 1e-9
    assert proj["share_pct"].sum() == pytest.approx(100.0)
    assert proj["wall_minutes_at_workers"].sum() == pytest.approx(proj["cpu_seconds"].sum() / 2 / 60)


def test_measured_study_needs_both_manifests(tmp_path: Path) -> None:
    assert measured_study_minutes(measured_runs(tmp_path)) is None  # no manifests: no measured row
    _manifest(tmp_path, "shortlist reproduce", 600.0)
    assert measured_study_minutes(measured_runs(tmp_path)) is None  # the comparison is missing
    _manifest(tmp_path / "peers", "shortlist compare", 300.0)
    assert measured_study_minutes(measured_runs(tmp_path)) == (pytest.approx(15.0), True)  # made from nothing
    _manifest(tmp_path / "peers", "shortlist compare", 30.0, ran=0)  # its report remade from the runs of before
    assert measured_study_minutes(measured_runs(tmp_path)) == (pytest.approx(10.5), False)
    _manifest(tmp_path / "peers", "shortlist compare", 300.0, ran=None)  # written before cells_run was recorded
    assert measured_study_minutes(measured_runs(tmp_path)) == (pytest.approx(15.0), False)


def measured_text(results: Path) -> str:
    """The measured-runs paragraph of the bench page for the manifests under ``results``, judged as the page does."""
    runs = measured_runs(results)
    block = measured_lines(runs, measured_study_minutes(runs)).blocks[0]
    assert isinstance(block, Paragraph)
    return block.text


def test_measured_study_counts_the_comparisons_reuse_of_the_study(tmp_path: Path) -> None:
    """``compare`` after ``reproduce`` reuses the cells the two share: together they are still made from nothing,
    but only when every reused run is the study's own (same run folder, same code) and the study ran all of its."""
    study = ("a", "b", "c")
    _manifest(tmp_path, "shortlist reproduce", 600.0, ran=3, runs=study, reused=(), where="runs")

    def peers(**kw: object) -> tuple[float, bool] | None:
        args = {"ran": 2, "runs": ("b", "c", "d", "e"), "reused": ("b", "c"), "where": "../runs"} | kw
        _manifest(tmp_path / "peers", "shortlist compare", 300.0, **args)  # type: ignore[arg-type]
        return measured_study_minutes(measured_runs(tmp_path))

    assert peers() == (pytest.approx(15.0), True)  # it reused two of the study's runs and ran the other two
    text = measured_text(tmp_path)
    assert "no target is judged on them: none." in text and "so the two together were made from nothing" in text
    assert peers(reused=("b", "x"), runs=("b", "x", "d", "e")) == (pytest.approx(15.0), False)  # x: not the study's
    assert peers(where="runs") == (pytest.approx(15.0), False)  # its own run folder: not the study's runs
    assert peers(fingerprint="f1") == (pytest.approx(15.0), False)  # other code: not the study's cells
    assert peers(reused=None) == (pytest.approx(15.0), False)  # which runs it reused is not recorded
    assert peers(ran=1) == (pytest.approx(15.0), False)  # the counts do not add up to its runs
    text = measured_text(tmp_path)
    assert "judged on them: `results/peers` (1 of 4 cells)" in text and "it is judged only when" in text
    _manifest(tmp_path / "shift", "shortlist shift", 300.0, ran=None, runs=("a", "b", "c"), unit="evaluations")
    _manifest(tmp_path / "downstream", "shortlist downstream", 60.0, ran=None)  # its cells: not recorded how many
    runs = measured_runs(tmp_path)
    assert runs.set_index("folder")["unit"].to_dict() == {".": "cells", "peers": "cells", "shift": "evaluations",
                                                          "downstream": "cells"}  # fmt: skip
    text = measured_text(tmp_path)
    assert "`results/shift` (evaluates 3 runs an earlier command trained; trains none)" in text
    assert "`results/downstream` (not recorded how many of 2 cells)" in text
    _manifest(tmp_path, "shortlist reproduce", 600.0, ran=2, runs=study, reused=("a",), where="runs")
    assert peers() == (pytest.approx(15.0), False)  # the study itself reused a cell
    assert measured_main_job_minutes(measured_runs(tmp_path)) is None  # no such folder
    _manifest(tmp_path / "bfcl", "shortlist reproduce", 300.0, 240.0)
    assert measured_main_job_minutes(measured_runs(tmp_path)) == (pytest.approx(4.0), True)
    rows = target_rows([("x: depths + scoring", 0.1, "")], {"gymnasium.make": 1e5}, [("a", 0.1)], 20.0, 10.0, 100,
                       (3.0, False), (4.0, True))  # fmt: skip
    (row,) = [r for r in rows if r[0].startswith("full study + comparison as")]
    assert row[1:] == ["3.0 min (reused cells, or not recorded: not a from-nothing time)", "-"]
    (main,) = [r for r in rows if r[0].startswith("the README main job")]
    assert main == ["the README main job's cells (`results/bfcl` manifest) <= 5 min", "4.0 min", "yes"]


def test_unknown_condition_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    out = tmp_path / "bench.md"
    with pytest.raises(ValueError, match="bfcl-nope"):
        cmd_bench(BenchArgs(only=("bfcl-nope",), out=str(out), **TINY), BenchArgs(), "x")
    assert not out.exists()
