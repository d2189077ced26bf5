"""``shortlist tune``: DQN settings compared on an inner validation split, with a manifest."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from experiments.cli import main
from experiments.tune import INNER_SPLIT_SEED, parse_grid


@pytest.fixture(scope="module")
def cache_dir(shared_cache: Path) -> str:
    return str(shared_cache)


def test_parse_grid_types_values_and_refuses_unknown_fields() -> None:
    assert parse_grid(["n_envs=1,4", "exploration_fraction=0.3"]) == {"n_envs": [1, 4], "exploration_fraction": [0.3]}
    with pytest.raises(ValueError, match="kind 'dqn' has no setting 'bogus'"):
        parse_grid(["bogus=1"])
    with pytest.raises(ValueError, match="'dqn', setting 'n_envs': bad value 'two'"):
        parse_grid(["n_envs=two"])
    # booleans are spelled out (bool("false") would be True)
    assert parse_grid(["double_q=false,True"]) == {"double_q": [False, True]}
    with pytest.raises(ValueError, match="expected true or false"):
        parse_grid(["double_q=0"])
    # other kinds: typed from their own settings dataclass by the parser of --set
    assert parse_grid(["n_steps=1,4"], "tabular") == {"n_steps": [1, 4]}
    with pytest.raises(ValueError, match="kind 'tabular' has no setting 'n_envs'"):
        parse_grid(["n_envs=1"], "tabular")
    assert parse_grid(["buffer=0,5"], "gap") == {"buffer": [0, 5]}
    assert parse_grid(["temperatures=0.5,1;2"], "topp") == {"temperatures": [(0.5, 1.0), (2.0,)]}
    with pytest.raises(ValueError, match="kind 'random' has no setting 'x'; it has no settings"):
        parse_grid(["x=1"], "random")


def test_tune_other_agent_kinds_write_their_own_files(tmp_path: Path, cache_dir: str) -> None:
    out = tmp_path / "tuning"
    args = ["tune", "--agent", "tabular", "--grid", "n_steps=1,2", "episodes=300", "--seeds", "3"]
    assert main([*args, "--out", str(out), "--cache-dir", cache_dir]) == 0
    rows = pd.read_csv(out / "bfcl-bm25__tabular.csv")
    assert rows["n_steps"].tolist() == [1, 2]
    assert json.loads((out / "bfcl-bm25__tabular_manifest.json").read_text())["agent"] == "tabular"
    assert not (out / "bfcl-bm25.csv").exists()


def test_tune_writes_rows_means_and_a_manifest(tmp_path: Path, cache_dir: str) -> None:
    """Two settings (one and two vectorised environments) x one seed on the inner split: one row
    each, a per-setting mean, and a manifest naming the command, grid, split sizes and git state."""
    out = tmp_path / "tuning"
    args = ["tune", "--grid", "n_envs=1,2", "total_timesteps=300", "learning_starts=100", "--seeds", "3"]
    assert main([*args, "--out", str(out), "--cache-dir", cache_dir]) == 0
    rows = pd.read_csv(out / "bfcl-bm25.csv")
    assert rows["setting"].tolist() == [
        "n_envs=1, total_timesteps=300, learning_starts=100",
        "n_envs=2, total_timesteps=300, learning_starts=100",
    ]
    assert rows["n_envs"].tolist() == [1, 2] and (rows["seed"] == 3).all()
    assert len(pd.read_csv(out / "bfcl-bm25_mean.csv")) == 2
    man = json.loads((out / "bfcl-bm25_manifest.json").read_text())
    assert man["command"].startswith("shortlist tune --grid n_envs=1,2")
    assert man["grid"] == {"n_envs": ["1", "2"], "total_timesteps": ["300"], "learning_starts": ["100"]}
    assert man["inner_split_seed"] == INNER_SPLIT_SEED
    # the inner split divides the 280 training queries of split 0 (70/30): the test split is never used
    assert (man["n_fit"], man["n_validation"]) == (196, 84)
    assert {"git_sha", "git_dirty", "code_fingerprint", "versions", "machine"} <= set(man)
    assert len(man["fit_seconds"]) == 2
    assert {"median_k", "p90_k", "whole_list_pct"} <= set(rows.columns)


def test_tune_runs_on_your_own_run_and_names_it(tmp_path: Path) -> None:
    """``--run/--qrels`` as ``train`` takes them: the files are named by the condition (file name and digest) and
    in the manifest with their sha256; a changed run is another condition, never the same file; a bare
    ``--benchmark run`` is refused naming the options tune has."""
    from test_experiments_own_run import write_run

    run, qrels = write_run(tmp_path, seed=1)
    out = tmp_path / "tuning"
    args = ["tune", "--agent", "threshold", "--run", str(run), "--qrels", str(qrels), "--seeds", "1", "2"]
    assert main([*args, "--out", str(out)]) == 0
    (manifest,) = out.glob("run-my-*__threshold_manifest.json")
    man = json.loads(manifest.read_text())
    assert man["inputs"]["run"] == str(run.resolve()) and len(man["inputs"]["run_sha256"]) == 64
    assert man["n_fit"] + man["n_validation"] == round(0.7 * 40)  # the training split of the run's 40 queries
    assert len(pd.read_csv(manifest.with_name(manifest.name.replace("_manifest.json", ".csv")))) == 2
    other, _ = write_run(tmp_path / "b", seed=2)
    assert main(["tune", "--agent", "threshold", "--run", str(other), "--qrels", str(qrels), "--seeds", "1",
                 "--out", str(out)]) == 0  # fmt: skip
    assert len(list(out.glob("run-my-*__threshold_manifest.json"))) == 2
    assert main(["tune", "--benchmark", "run", "--out", str(out)]) == 2  # needs --run/--qrels, which tune has
