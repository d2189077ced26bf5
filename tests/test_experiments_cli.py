"""The ``shortlist`` CLI end to end on BFCL: outputs, determinism, resume, bad input."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from experiments.cli import main

SUMMARY_COLS = {"condition", "method", "seed", "found_pct", "mean_k", "std_k", "bor_bits", "bor_ceiling", "mean_reward"}
TABLES = ("per_query.csv", "summary.csv", "buckets.csv")


@pytest.fixture(scope="module")
def cache_dir(shared_cache: Path) -> str:
    return str(shared_cache)


def run(args: list[str], cache_dir: str) -> int:
    quiet = [] if args[0] == "evaluate" else ["--no-progress"]  # evaluate shows no progress bar
    return main([*args, "--cache-dir", cache_dir, *quiet])


def test_train_fixed_writes_run_dirs_and_tables(tmp_path: Path, cache_dir: str) -> None:
    out = tmp_path / "o"
    assert (
        run(
            [
                "train",
                "--benchmark",
                "bfcl",
                "--scorer",
                "bm25",
                "--agent",
                "fixed",
                "--k",
                "1",
                "5",
                "--seeds",
                "42",
                "--out",
                str(out),
            ],
            cache_dir,
        )
        == 0
    )
    runs = sorted(p.name for p in (out / "runs").iterdir())
    assert runs == ["bfcl-bm25__fixed-1__s42", "bfcl-bm25__fixed-5__s42"]
    run_dir = out / "runs" / runs[0]
    for f in ("config.json", "command.txt", "manifest.json", *TABLES):
        assert (run_dir / f).is_file(), f
    manifest = json.loads((run_dir / "manifest.json").read_text())
    for key in ("git_sha", "git_dirty", "seed", "versions", "wall_seconds", "condition"):
        assert key in manifest
    assert len(manifest["condition"]["inputs_sha256"]) == 2
    summary = pd.read_csv(out / "summary.csv")
    assert SUMMARY_COLS <= set(summary.columns)
    assert summary["found_pct"].between(0, 100).all()
    pq = pd.read_csv(out / "per_query.csv")
    assert len(pq) == 2 * 120
    assert {"qid", "gold_rank", "bucket", "k", "found", "p_random", "reward"} <= set(pq.columns)
    buckets = pd.read_csv(out / "buckets.csv")
    assert {"condition", "method", "seed", "bucket", "n", "found_pct", "mean_k"} <= set(buckets.columns)
    # fixed-1 finds exactly the queries whose gold tool the scorer ranks first
    f1 = pq[pq["method"] == "fixed-1"]
    assert (f1["found"] == (f1["gold_rank"] == 1)).all()


def test_same_command_twice_is_byte_identical_and_resumes(tmp_path: Path, cache_dir: str) -> None:
    args = [
        "train",
        "--benchmark",
        "bfcl",
        "--scorer",
        "bm25",
        "--agent",
        "tabular",
        "--set",
        "tabular.episodes=300",
        "--seeds",
        "1",
        "2",
    ]
    a, b = tmp_path / "a", tmp_path / "b"
    assert run([*args, "--out", str(a)], cache_dir) == 0
    assert run([*args, "--out", str(b), "--workers", "2"], cache_dir) == 0
    for t in TABLES:
        assert (a / t).read_bytes() == (b / t).read_bytes(), t
    run_dir = a / "runs" / "bfcl-bm25__bor-tabular__s1"
    stamp = (run_dir / "manifest.json").stat().st_mtime_ns
    assert run([*args, "--out", str(a)], cache_dir) == 0  # finished cells are skipped
    assert (run_dir / "manifest.json").stat().st_mtime_ns == stamp
    # a changed config re-runs the cell
    assert run([*args[:-3], "--seeds", "1", "--set", "tabular.episodes=301", "--out", str(a)], cache_dir) == 0
    assert json.loads((run_dir / "config.json").read_text())["settings"]["episodes"] == 301


def test_evaluate_reloads_a_trained_agent(tmp_path: Path, cache_dir: str) -> None:
    out = tmp_path / "o"
    assert (
        run(
            ["train", "--agent", "tabular", "--set", "tabular.episodes=300", "--seeds", "3", "--out", str(out)],
            cache_dir,
        )
        == 0
    )
    run_dir = out / "runs" / "bfcl-bm25__bor-tabular__s3"
    ev = tmp_path / "ev"
    assert run(["evaluate", "--run-dir", str(run_dir), "--out", str(ev)], cache_dir) == 0
    assert (ev / "per_query.csv").read_bytes() == (run_dir / "per_query.csv").read_bytes()


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--scorer", "no-such-model-xyz"], "no-such-model-xyz"),
        (["--agent", "sac"], "unknown agent 'sac'"),
        (["--reward", "ndcg"], "unknown reward 'ndcg'"),
        (["--benchmark", "nope"], "unknown benchmark 'nope'"),
        (["--max-depth", "0"], "max_depth must be >= 1"),
        (["--max-depth", "371"], "max_depth=371 exceeds"),
        (["--step-cost", "nan"], "step_cost"),
        (["--gamma", "1.5"], "gamma"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(
    tmp_path: Path, cache_dir: str, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    out = tmp_path / "o"
    code = run(["train", "--agent", "fixed", "--k", "1", "--seeds", "1", *extra, "--out", str(out)], cache_dir)
    err = capsys.readouterr().err
    assert code == 2
    assert message in err
    assert err.startswith("shortlist: error: ") and "Traceback" not in err
    assert not out.exists()


def test_evaluate_bad_run_dir(tmp_path: Path, cache_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["evaluate", "--run-dir", str(tmp_path / "missing")], cache_dir) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_reproduce_dry_run_lists_cells(capsys: pytest.CaptureFixture[str], cache_dir: str) -> None:
    assert run(["reproduce", "--only", "bfcl-bm25", "--seeds", "1", "2", "--dry-run"], cache_dir) == 0
    out = capsys.readouterr().out
    assert "bfcl-bm25__bor-dqn__s1\tshortlist train" in out
    assert "bfcl-bm25__constant-dqn__s2" in out
    # 24 cells on each of the 5 default train/test splits of a main condition: 3 DQN rewards, tabular,
    # the cut-off, the posterior and 6 fixed K, each with 2 seeds
    assert out.strip().endswith("120 cells")
    assert "bfcl-bm25__bor-posterior__s2__split3" in out
    split4 = [line for line in out.splitlines() if line.startswith("bfcl-bm25__fixed-3__s2__split4\t")]
    assert len(split4) == 1 and " --split-seeds 4 " in split4[0]
    assert (
        run(["reproduce", "--only", "bfcl-bm25-richtext", "--seeds", "1", "--split-seeds", "2", "--dry-run"], cache_dir)
        == 0
    )
    out = capsys.readouterr().out
    # the tool-text suite: BoR-DQN, BoR-tabular, the BoR cut-off, the posterior and 6 fixed K on the given split
    assert out.strip().endswith("10 cells") and "bfcl-bm25-richtext__bor-dqn__s1__split2" in out
    assert "bfcl-bm25-richtext__bor-posterior__s1__split2" in out


@pytest.mark.parametrize(
    ("method", "learn"),
    [
        (("tabular", "bor", 0), {"set": ("tabular.episodes=250", "tabular.eps_end=0.1"), "max_depth": 40}),
        (("cutoff", "bor", 0), {"set": ("cutoff.epochs=30",), "observation": "strict", "split_seeds": (2,)}),
        (("fixed", "bor", 3), {"step_cost": 0.02, "gamma": 1.0}),
    ],
)
def test_cell_command_recreates_the_cell(
    tmp_path: Path, cache_dir: str, method: tuple[str, str, int], learn: dict
) -> None:
    """``Cell.command()`` (what ``--dry-run`` prints) is the exact ``shortlist train`` command of the cell:
    run as printed, it makes a run with the same config hash and byte-identical tables."""
    import shlex

    from agents.method import MethodSpec
    from experiments.options import LearnArgs
    from experiments.plan import PLANS, cells_for
    from experiments.runner import run_cells

    la = LearnArgs(seeds=(7,), **learn)
    (cell,) = cells_for([PLANS["bfcl-bm25"]], la.seeds, {"bfcl-bm25": [MethodSpec(*method)]}, learning=la.learning())
    (made,) = run_cells([cell], tmp_path / "a", data_dir=None, cache_dir=cache_dir, command="test", progress=False)
    argv = shlex.split(cell.command(str(tmp_path / "b")))
    assert argv[:2] == ["shortlist", "train"]
    assert run(argv[1:], cache_dir) == 0
    again = tmp_path / "b" / "runs" / cell.run_id
    config = json.loads((again / "config.json").read_text())
    assert config["config_hash"] == cell.config_hash()
    for t in TABLES:
        assert (again / t).read_bytes() == (made / t).read_bytes(), t


def test_reproduce_unknown_condition(capsys: pytest.CaptureFixture[str], cache_dir: str) -> None:
    assert run(["reproduce", "--only", "bfcl-xyz", "--dry-run"], cache_dir) == 2
    assert "unknown condition" in capsys.readouterr().err


def test_reproduce_tiny_sweep_writes_report(tmp_path: Path, cache_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "r"
    args = [
        "reproduce",
        "--only",
        "bfcl-bm25",
        "--seeds",
        "1",
        "--set",
        "dqn.total_timesteps=400",
        "dqn.learning_starts=100",
        "--set",
        "tabular.episodes=200",
        "cutoff.epochs=10",
        "--split-seeds",
        "0",
        "2",
        "--out",
        str(out),
    ]
    # a validation run in out/tuning (kept by the study, not written by it) reaches the README
    (out / "tuning" / "n_steps").mkdir(parents=True)
    (out / "tuning" / "n_steps" / "bfcl-bm25_mean.csv").write_text(
        "setting,mean_reward_mean,mean_reward_min,mean_reward_max,whole_list_pct_mean,whole_list_pct_min,"
        "whole_list_pct_max,mean_k_mean\n" + '"n_steps=1, double_q=False",6.6,6.5,6.7,0.4,0,1.2,4.7\n'
    )
    assert run(args, cache_dir) == 0
    assert "files in `tuning/n_steps/`" in (out / "paper.md").read_text()
    for f in (
        "README.md",
        "paper.md",
        "conditions.md",
        "aggregate.csv",
        "scorer_strength.csv",
        "splits.csv",
        "factors.csv",
        *TABLES,
        "figures/buckets_bfcl-bm25.png",
        "figures/buckets_bfcl-bm25.csv",
    ):
        assert (out / f).is_file(), f
    readme = (out / "README.md").read_text()
    assert readme.startswith('<!-- page {"group": "study", "title": "BFCL study"} -->')  # a study of BFCL only
    assert "<!-- answer -->" in readme and "(paper.md)" in readme and "(conditions.md)" in readme
    assert (out / "figures" / "answer.png").is_file() and (out / "figures" / "answer.csv").is_file()
    paper = (out / "paper.md").read_text()
    assert "Beside the paper" in paper and "## Split variance" in paper
    assert "## bfcl-bm25" in (out / "conditions.md").read_text()
    plotted = pd.read_csv(out / "figures" / "buckets_bfcl-bm25.csv")
    assert set(plotted["method"]) == {
        "bor-dqn",
        "f1-dqn",
        "constant-dqn",
        "bor-tabular",
        "bor-cutoff",
        "bor-posterior",
        "fixed-1",
        "fixed-5",
    }
    assert len(list((out / "runs").iterdir())) == 2 * 12
    agg = pd.read_csv(out / "aggregate.csv")
    assert (agg["n_splits"] == 2).all() and (agg["n_seeds"] == 1).all()
    summary = pd.read_csv(out / "summary.csv")
    assert sorted(summary["split_seed"].unique()) == [0, 2]
    fixed = summary[summary["method"] == "fixed-1"].set_index("split_seed")["found_pct"]
    row = agg.set_index("method").loc["fixed-1"]
    assert (row["found_pct_split_min"], row["found_pct_split_max"]) == (fixed.min(), fixed.max())
    factors = pd.read_csv(out / "factors.csv").iloc[0]
    assert factors["n_splits"] == 2 and factors["tool_text"] == "description + parameter names"
    assert set(pd.read_csv(out / "runs.csv")["run_id"]) == {p.name for p in (out / "runs").iterdir()}

    # a report that fails half-way leaves the study folder byte for byte as it was (staged writes)
    before = {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()}

    def broken(folder: Path, *a: object, **kw: object) -> None:
        (folder / "aggregate.csv").write_text("half written\n")
        raise KeyError("report")

    monkeypatch.setattr("experiments.report.study.write_study_report", broken)
    with pytest.raises(KeyError):
        run(args, cache_dir)
    assert {p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(f".{out.name}.")]


def test_ray_backend_matches_local(tmp_path: Path, cache_dir: str) -> None:
    """The same cells as Ray tasks on a local Ray instance give byte-identical tables."""
    import ray  # noqa: F401 - in the test extras: a missing Ray is a set-up error, not a skip

    args = ["train", "--agent", "tabular", "--set", "tabular.episodes=300", "--seeds", "5", "6"]
    local, ray_out = tmp_path / "local", tmp_path / "ray"
    assert run([*args, "--out", str(local)], cache_dir) == 0
    assert run([*args, "--out", str(ray_out), "--backend", "ray", "--workers", "2"], cache_dir) == 0
    for t in TABLES:
        assert (local / t).read_bytes() == (ray_out / t).read_bytes(), t


def test_unknown_backend(tmp_path: Path, cache_dir: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        run(
            [
                "train",
                "--agent",
                "fixed",
                "--k",
                "1",
                "--seeds",
                "1",
                "--backend",
                "slurm",
                "--out",
                str(tmp_path / "o"),
            ],
            cache_dir,
        )
        == 2
    )
    assert "unknown backend 'slurm'" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_changed_code_never_reuses_a_finished_cell(
    tmp_path: Path, cache_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cell key holds a fingerprint of the package code: after a code change the same
    command re-runs the cell instead of reusing a result the new code did not produce."""
    import experiments.config as config_module

    args = ["train", "--agent", "fixed", "--k", "3", "--seeds", "1", "--out", str(tmp_path / "o")]
    assert run(args, cache_dir) == 0
    run_dir = tmp_path / "o" / "runs" / "bfcl-bm25__fixed-3__s1"
    first = json.loads((run_dir / "manifest.json").read_text())
    assert first["code_fingerprint"] == config_module.code_fingerprint()
    stamp = (run_dir / "manifest.json").stat().st_mtime_ns
    assert run(args, cache_dir) == 0
    assert (run_dir / "manifest.json").stat().st_mtime_ns == stamp  # same code: reused
    monkeypatch.setattr(config_module, "code_fingerprint", lambda: "0" * 64)
    assert run(args, cache_dir) == 0
    again = json.loads((run_dir / "manifest.json").read_text())
    assert again["config_hash"] != first["config_hash"]  # changed code: recomputed


def test_other_split_seeds_get_their_own_run_directories(tmp_path: Path, cache_dir: str) -> None:
    """``--split-seeds 3`` writes ``...__s1__split3`` beside the split-0 run instead of replacing it;
    ``--split-seeds 0 3`` runs both (train defaults to split 0)."""
    out = tmp_path / "o"
    base = ["train", "--agent", "fixed", "--k", "3", "--seeds", "1", "--out", str(out)]
    assert run(base, cache_dir) == 0
    assert run([*base, "--split-seeds", "3"], cache_dir) == 0
    runs = out / "runs"
    assert sorted(p.name for p in runs.iterdir()) == ["bfcl-bm25__fixed-3__s1", "bfcl-bm25__fixed-3__s1__split3"]
    assert run([*base, "--split-seeds", "0", "3"], cache_dir) == 0
    summary = pd.read_csv(out / "summary.csv")
    assert sorted(summary["split_seed"]) == [0, 3]
    assert json.loads((runs / "bfcl-bm25__fixed-3__s1__split3" / "config.json").read_text())["split_seed"] == 3
    assert json.loads((runs / "bfcl-bm25__fixed-3__s1" / "config.json").read_text())["split_seed"] == 0


def test_version_prints_the_installed_version_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    from importlib.metadata import version

    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    assert capsys.readouterr().out == f"shortlist {version('shortlist-depth')}\n"


def test_pool_workers_run_on_the_conditions_the_parent_built(
    tmp_path: Path, cache_dir: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """run_cells builds each (condition, split) once in the parent and its forked workers use those: no worker
    builds a condition (on Linux; elsewhere the pool spawns and workers build their own). Outside run_cells
    nothing stays held."""
    import os
    import sys

    import experiments.runner as runner
    from agents.method import MethodSpec
    from experiments.options import LearnArgs
    from experiments.plan import PLANS, cells_for

    if not sys.platform.startswith("linux"):
        pytest.skip("the pool forks only on Linux")
    log = tmp_path / "builds.txt"
    real = runner.get_condition

    def unmemoised(*a: object) -> object:  # no per-process memo: only holding can spare a worker a build
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        real.cache_clear()
        return real(*a)

    monkeypatch.setattr(runner, "get_condition", unmemoised)
    la = LearnArgs(seeds=(7,), split_seeds=(0, 1))
    specs = {"bfcl-bm25": [MethodSpec("fixed", "bor", 1), MethodSpec("fixed", "bor", 3)]}
    cells = cells_for([PLANS["bfcl-bm25"]], la.seeds, specs, learning=la.learning())
    assert len(cells) == 4
    made = runner.run_cells(
        cells, tmp_path / "o", data_dir=None, cache_dir=cache_dir, command="t", workers=2, progress=False
    )
    assert len(made) == 4
    assert log.read_text().split() == [str(os.getpid())] * 2  # two splits, built by the parent only
    assert runner._HELD == {}  # noqa: SLF001
    again = runner.run_cells(  # every cell finished: reused without building a condition
        cells, tmp_path / "o", data_dir=None, cache_dir=cache_dir, command="t", workers=2, progress=False
    )
    assert again == made and log.read_text().split() == [str(os.getpid())] * 2
    shutil.rmtree(made[0])  # one cell to run again: only its condition (split) is built
    assert runner.run_cells(cells, tmp_path / "o", data_dir=None, cache_dir=cache_dir, command="t") == made
    assert log.read_text().split() == [str(os.getpid())] * 3
