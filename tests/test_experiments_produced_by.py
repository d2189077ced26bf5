"""A report remade from finished runs keeps the record of what running them cost (``produced_by``), and only then."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from experiments.bench import measured_main_job_minutes, measured_runs, measured_study_minutes
from experiments.io import code_fingerprint, write_csv
from experiments.pipeline import Pipeline, Produced, check_out_is_ours
from experiments.produced import PRODUCED_BY, produced_by


def _pipeline(out: Path, name: str = "reproduce") -> Pipeline:
    def produce() -> Produced:
        raise AssertionError("not called")

    return Pipeline(name=name, out=out, command="shortlist test", plan=list, produce=produce, report=lambda *_: {})


def _carry(out: Path, index: pd.DataFrame | None = None, ran: int | None = 0, name: str = "reproduce") -> dict | None:
    """What a rerun of ``name`` into ``out`` carries, as :func:`experiments.pipeline.run_pipeline` asks: the folder's
    manifest read by ``check_out_is_ours``, then ``produced_by`` on it."""
    there = check_out_is_ours(_pipeline(out, name), ["a", "b"])
    return produced_by(out, there, _index() if index is None else index, ran)


def _index(mean: float = 7.031146995123) -> pd.DataFrame:
    return pd.DataFrame({"run_id": ["a", "b"], "config_hash": ["h1", "h2"], "code_fingerprint": ["f", "f"],
                         "mean_reward": [mean, 1.5], "sha256_summary": ["s1", "s2"],
                         "float_path": ["here", "here"]})  # fmt: skip


def _folder(out: Path, **manifest: Any) -> None:
    """``out`` as a command that ran ``cells_run`` of its two runs left it: runs.csv and manifest.json."""
    out.mkdir(parents=True, exist_ok=True)
    write_csv(_index().assign(float_path="another machine"), out / "runs.csv")
    fields = {"pipeline": "reproduce", "command": "shortlist reproduce --seeds 42", "runs": ["a", "b"],
              "cells_run": 2, "runs_reused": [], "runs_folder": "runs", "git_sha": "abc1234def", "git_dirty": False,
              "finished_utc": "2026-12-07T18:00:00+00:00", "machine": {"cpu": "x"},
              "timings_seconds": {"produce": 240.0, "report": 30.0, "total": 270.0},
              "code_fingerprint": code_fingerprint()} | manifest  # fmt: skip
    (out / "manifest.json").write_text(json.dumps(fields), encoding="utf-8")


def test_a_rerun_that_ran_nothing_carries_who_ran_the_runs(tmp_path: Path) -> None:
    _folder(tmp_path)
    made = _carry(tmp_path)
    assert made is not None and set(made) == set(PRODUCED_BY)
    assert made["timings_seconds"] == {"produce": 240.0, "report": 30.0, "total": 270.0}
    assert made["cells_run"] == 2 and made["git_sha"] == "abc1234def"
    assert made["command"] == "shortlist reproduce --seeds 42"
    # a second rerun carries the record of the first as it is, not its own (which ran nothing)
    _folder(tmp_path, cells_run=0, git_sha="later", produced_by=made)
    assert _carry(tmp_path) == made


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"ran": 1}, "this invocation ran a run: its own times say what it cost"),
        ({"ran": None}, "this invocation does not count what it ran"),
        ({"index": _index(mean=7.0)}, "a run's table changed"),
        ({"index": _index().assign(config_hash=["h1", "other"])}, "a run's settings changed"),
        ({"index": _index().iloc[:1]}, "not the same runs"),
        ({"index": _index().iloc[:0]}, "no runs"),
        ({"manifest": {"code_fingerprint": "other code"}}, "the runs were made by other code"),
        ({"manifest": {"cells_run": 0}}, "the folder's command ran none of them either"),
        ({"manifest": {"cells_run": None}}, "the folder's command did not say what it ran"),
    ],
)
def test_nothing_is_carried_when_more_than_the_report_can_have_changed(
    tmp_path: Path, change: dict[str, Any], why: str
) -> None:
    _folder(tmp_path, **change.get("manifest", {}))
    index = change.get("index", _index())
    assert _carry(tmp_path, index, ran=change.get("ran", 0)) is None, why


def test_nothing_is_carried_from_a_missing_broken_or_other_folder(tmp_path: Path) -> None:
    assert _carry(tmp_path / "none") is None  # no folder yet: nothing to carry
    _folder(tmp_path)
    (tmp_path / "runs.csv").unlink()
    assert _carry(tmp_path) is None
    _folder(tmp_path)
    (tmp_path / "runs.csv").write_text('"unclosed\n', encoding="utf-8")
    assert _carry(tmp_path) is None
    (tmp_path / "manifest.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(ValueError, match="cannot be read"):  # the rerun stops first: it never reads a broken record
        _carry(tmp_path)
    _folder(tmp_path, pipeline="compare")
    with pytest.raises(ValueError, match="holds the results of"):  # another command's folder: refused, not carried
        _carry(tmp_path)


def test_bench_reads_the_carried_record(tmp_path: Path) -> None:
    """``shortlist bench`` judges the main job on the invocation that ran its cells, and names the report's rerun."""
    folder = tmp_path / "bfcl"
    _folder(folder)
    assert measured_main_job_minutes(measured_runs(tmp_path)) == (pytest.approx(4.0), True)
    made = _carry(folder)
    _folder(folder, cells_run=0, git_sha="fedcba987", produced_by=made,
            timings_seconds={"produce": 3.0, "report": 30.0, "total": 33.0})  # fmt: skip
    row = measured_runs(tmp_path).set_index("folder").loc["bfcl"]
    assert measured_main_job_minutes(measured_runs(tmp_path)) == (pytest.approx(4.0), True)
    assert row["commit"] == "abc1234" and row["report_commit"] == "fedcba9" and row["cells_run"] == 2
    _folder(folder, cells_run=0, git_sha="fedcba987", timings_seconds={"produce": 3.0, "total": 33.0})
    assert measured_main_job_minutes(measured_runs(tmp_path)) == (pytest.approx(0.05), False)  # without: not whole
    assert measured_runs(tmp_path).set_index("folder").loc["bfcl", "report_commit"] == ""


def test_bench_uses_a_record_only_for_a_rerun_of_the_same_cell_code(tmp_path: Path) -> None:
    folder = tmp_path / "bfcl"
    _folder(folder)
    made = _carry(folder)
    assert made is not None
    rerun = {"git_sha": "fedcba987", "produced_by": made, "timings_seconds": {"produce": 3.0, "total": 33.0}}
    _folder(folder, cells_run=2, **rerun)  # its own invocation ran the runs: its own times stand
    assert measured_main_job_minutes(measured_runs(tmp_path)) == (pytest.approx(0.05), True)
    _folder(folder, cells_run=0, **rerun | {"produced_by": made | {"code_fingerprint": "other"}})
    assert measured_main_job_minutes(measured_runs(tmp_path)) == (pytest.approx(0.05), False)  # other cell code
    _folder(folder, cells_run=0, **rerun | {"produced_by": made | {"cells_run": 1}})  # it ran 1 of the 2 itself
    assert measured_main_job_minutes(measured_runs(tmp_path)) == (pytest.approx(4.0), False)
    _folder(folder, cells_run=0, **rerun | {"git_sha": "abc1234def"})  # remade at the same commit: no second name
    assert measured_runs(tmp_path).set_index("folder").loc["bfcl", "report_commit"] == ""


def test_bench_judges_a_carried_comparison_with_the_study_it_reused(tmp_path: Path) -> None:
    """The comparison's record keeps which of the study's runs it reused, so the two stay made from nothing."""
    _folder(tmp_path, runs=["a", "b"], runs_reused=[], runs_folder="runs",
            timings_seconds={"produce": 500.0, "total": 600.0})  # fmt: skip
    peers = tmp_path / "peers"
    _folder(peers, pipeline="compare", runs=["a", "b"], cells_run=1, runs_reused=["a"], runs_folder="../runs",
            timings_seconds={"produce": 200.0, "total": 300.0})  # fmt: skip
    assert measured_study_minutes(measured_runs(tmp_path)) == (pytest.approx(15.0), True)
    made = _carry(peers, name="compare")
    assert made is not None and made["runs_reused"] == ["a"] and made["runs_folder"] == "../runs"
    _folder(peers, pipeline="compare", runs=["a", "b"], cells_run=0, runs_reused=["a", "b"], runs_folder="../runs",
            git_sha="later", produced_by=made, timings_seconds={"produce": 1.0, "total": 60.0})  # fmt: skip
    assert measured_study_minutes(measured_runs(tmp_path)) == (pytest.approx(15.0), True)


def test_an_index_of_other_columns_carries_nothing(tmp_path: Path) -> None:
    """A runs.csv written by an older run index (a column fewer) is not the same index."""
    _folder(tmp_path)
    write_csv(_index().drop(columns="sha256_summary"), tmp_path / "runs.csv")
    assert _carry(tmp_path) is None
