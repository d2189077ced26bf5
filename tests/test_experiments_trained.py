"""A trained policy on any retriever, driven as a user would: ``load_policy`` for every registered
kind, ``shortlist predict`` and ``shortlist evaluate --run/--qrels`` as subprocesses in fresh
temporary folders, the input-change note, the output-folder rule, progress bars, and help text."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import ir_measures
import numpy as np
import pandas as pd
import pytest
from conftest import TINY_BUDGETS, cli_env  # noqa: E402

from agents import registry
from experiments import load_policy
from experiments.cli import main

REPO = Path(__file__).resolve().parents[1]
SYN = "n20-sep2.0-normal-q200"  # a generated condition: no data, builds in well under a second
TINY = ["--set", *TINY_BUDGETS, "dqn.total_timesteps=400", "dqn.learning_starts=100", "tabular.episodes=300",
        "--no-progress"]  # fmt: skip


def shortlist(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "experiments.cli", *args], cwd=cwd, env=cli_env(), capture_output=True, text=True
    )


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One synthetic run per registered kind (one seed), trained through the CLI."""
    out = tmp_path_factory.mktemp("kinds")
    for kind in registry.KINDS:
        extra = ["--k", "3"] if kind == "fixed" else []
        argv = ["train", "--benchmark", "synthetic", "--scorer", "gen", "--variant", SYN, "--agent", kind]
        assert main([*argv, *extra, "--seeds", "7", *TINY, "--out", str(out)]) == 0, kind
    return out / "runs"


def test_load_policy_for_every_registered_kind_gives_the_evaluated_depths(trained: Path) -> None:
    """policy.depths(scores) from scores alone equals the depths the evaluator recorded."""
    from experiments.runner import get_condition

    cond = get_condition("synthetic", "gen", SYN, 0, None, None)
    scores = [q.scores for q in cond.test]
    qids = [q.qid for q in cond.test]
    seen = set()
    for run in sorted(trained.iterdir()):
        policy = load_policy(run)
        seen.add(json.loads((run / "config.json").read_text())["agent"])
        if registry.KINDS[seen_kind(run)].reads_labels:
            with pytest.raises(ValueError, match="reads the labels"):
                policy.depths(scores)
            continue
        rows = pd.read_csv(run / "per_query.csv", dtype={"qid": str}).set_index("qid")
        np.testing.assert_array_equal(policy.depths(scores), rows.loc[qids, "k"].to_numpy(), err_msg=run.name)
        assert policy.depth(scores[0]) == rows.loc[qids[0], "k"]
    assert seen == set(registry.KINDS)


def seen_kind(run: Path) -> str:
    return str(json.loads((run / "config.json").read_text())["agent"])


def test_depths_validate_scores(trained: Path) -> None:
    policy = load_policy(trained / f"synthetic-gen-{SYN}__bor-tabular__s7")
    with pytest.raises(ValueError, match="sorted descending"):
        policy.depth([0.1, 0.9])
    with pytest.raises(ValueError, match="NaN"):
        policy.depth([0.9, float("nan")])
    assert policy.depths([]).shape == (0,)
    k = policy.depths([[3.0, 1.0, 0.5], [2.0, 1.9, 1.8, 0.1]], n_candidates=370)
    assert k.shape == (2,) and (k >= 1).all() and k[0] <= 3 and k[1] <= 4


def test_readme_python_snippet_runs(tmp_path: Path) -> None:
    """The README's load_policy snippet, executed as written, in a folder where the README main job's
    tabular run exists (run directories are not committed: ``shortlist train`` makes the same cell)."""
    text = (REPO / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    snippet = next(b for b in blocks if "load_policy" in b)
    path = re.search(r'load_policy\("([^"]+)"\)', snippet)
    assert path and path.group(1) == "results/bfcl/runs/bfcl-bm25__bor-tabular__s42", "update this test's cell"
    made = shortlist(
        "train", "--benchmark", "bfcl", "--scorer", "bm25", "--agent", "tabular", "--seeds", "42",
        "--out", "results/bfcl", cwd=tmp_path,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    done = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, env=cli_env(), capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def _write_run(path: Path, rng: np.random.Generator, n_queries: int = 30, depth: int = 20) -> dict[str, str]:
    """A TREC run (grouped by query) and qrels with one relevant doc per query."""
    lines, qrels = [], []
    for q in range(n_queries):
        scores = np.sort(rng.normal(size=depth))[::-1]
        gold = int(rng.integers(depth))
        for rank, s in enumerate(scores, 1):
            lines.append(f"q{q} Q0 d{q}_{rank} {rank} {s:.6f} bm25")
        qrels.append(f"q{q} 0 d{q}_{gold + 1} 1")
    path.write_text("\n".join(lines) + "\n")
    (path.parent / "qrels.txt").write_text("\n".join(qrels) + "\n")
    return {f"q{q}": f"d{q}_{1}" for q in range(n_queries)}


def test_predict_writes_a_truncated_trec_run(trained: Path, tmp_path: Path) -> None:
    run_file = tmp_path / "mine.run"
    _write_run(run_file, np.random.default_rng(0))
    run_dir = trained / f"synthetic-gen-{SYN}__bor-tabular__s7"
    out = tmp_path / "short.run"
    done = shortlist("predict", "--run-dir", str(run_dir), "--run", str(run_file), "--out", str(out), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "ERROR" not in done.stderr
    written = list(ir_measures.read_trec_run(str(out)))
    policy = load_policy(run_dir)
    by_q: dict[str, list[float]] = {}
    for line in run_file.read_text().splitlines():
        qid, _, _, _, score, _ = line.split()
        by_q.setdefault(qid, []).append(float(score))
    expect = {q: policy.depth(np.array(s)) for q, s in by_q.items()}
    got: dict[str, int] = {}
    for r in written:
        got[r.query_id] = got.get(r.query_id, 0) + 1
    assert got == expect
    assert all(len(line.split()) == 6 for line in out.read_text().splitlines())


def test_predict_reads_a_gzipped_run(trained: Path, tmp_path: Path) -> None:
    """A gzipped run (as ir_measures writes them) is read, whatever its name, and gives the plain run's output."""
    import gzip

    run_file = tmp_path / "mine.run"
    _write_run(run_file, np.random.default_rng(0))
    run_dir = trained / f"synthetic-gen-{SYN}__bor-tabular__s7"
    outs = {}
    for name in ("mine.run", "mine.run.gz", "zipped.run"):
        path = tmp_path / name
        if name != "mine.run":
            path.write_bytes(gzip.compress(run_file.read_bytes()))
        outs[name] = tmp_path / f"{name}.short"
        argv = ["predict", "--run-dir", str(run_dir), "--run", str(path), "--out", str(outs[name])]
        done = shortlist(*argv, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    assert outs["mine.run.gz"].read_bytes() == outs["mine.run"].read_bytes() == outs["zipped.run"].read_bytes()


def test_predict_errors_are_one_line(trained: Path, tmp_path: Path) -> None:
    run_dir = trained / f"synthetic-gen-{SYN}__bor-tabular__s7"
    done = shortlist("predict", "--run-dir", str(run_dir), "--run", str(tmp_path / "nope.run"), cwd=tmp_path)
    assert done.returncode == 2 and "nope.run" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    bad = tmp_path / "bad.run"
    bad.write_text("q1 Q0 d1 1 0.9 t\nq1 Q0 d2 2\n")
    done = shortlist("predict", "--run-dir", str(run_dir), "--run", str(bad), cwd=tmp_path)
    assert done.returncode == 2 and "bad.run" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.glob("bad.*.trec"))


def test_evaluate_on_your_own_run_and_qrels(trained: Path, tmp_path: Path) -> None:
    run_file = tmp_path / "mine.run"
    _write_run(run_file, np.random.default_rng(1))
    run_dir = trained / f"synthetic-gen-{SYN}__bor-tabular__s7"
    before = sorted(p.name for p in run_dir.iterdir())
    done = shortlist(
        "evaluate", "--run-dir", str(run_dir), "--run", str(run_file), "--qrels", str(tmp_path / "qrels.txt"),
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (out,) = (tmp_path / "evaluations" / run_dir.name).glob("run-mine-*-all")  # run-<stem>-<hash>-<split>
    rows = pd.read_csv(out / "per_query.csv")
    assert len(rows) == 30 and {"reward", "reward_net"} <= set(rows.columns)
    step_cost = json.loads((run_dir / "config.json").read_text())["episode"]["step_cost"]
    np.testing.assert_allclose(rows["reward_net"], rows["reward"] - step_cost * (rows["k"] - 1))
    summary = pd.read_csv(out / "summary.csv")
    assert len(summary) == 1 and "mean_reward_net" in summary.columns
    assert (out / "manifest.json").is_file()
    assert sorted(p.name for p in run_dir.iterdir()) == before, "evaluate wrote into the run directory"


def test_evaluate_refuses_an_out_folder_inside_a_run_directory(trained: Path, tmp_path: Path) -> None:
    run_dir = trained / f"synthetic-gen-{SYN}__fixed-3__s7"
    done = shortlist("evaluate", "--run-dir", str(run_dir), "--out", str(run_dir / "x"), cwd=tmp_path)
    assert done.returncode == 2 and "inside the run directory" in done.stderr
    assert not (run_dir / "x").exists()


def test_evaluate_says_when_inputs_differ(tmp_path: Path) -> None:
    """Trained on a run file that has changed since: evaluate still runs and names the change."""
    run_file = tmp_path / "mine.run"
    _write_run(run_file, np.random.default_rng(2))
    qrels = tmp_path / "qrels.txt"
    done = shortlist(
        "train", "--run", str(run_file), "--qrels", str(qrels), "--agent", "fixed", "--k", "2", "--seeds", "1",
        "--out", str(tmp_path / "o"), "--no-progress", cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (run_dir,) = (tmp_path / "o" / "runs").glob("run-mine-*__fixed-2__s1")
    same = shortlist("evaluate", "--run-dir", str(run_dir), cwd=tmp_path)
    assert same.returncode == 0 and "differ" not in same.stderr
    _write_run(run_file, np.random.default_rng(3))
    changed = shortlist("evaluate", "--run-dir", str(run_dir), "--out", str(tmp_path / "e2"), cwd=tmp_path)
    assert changed.returncode == 0, changed.stderr
    assert "the inputs differ from the run's" in changed.stderr and "mine.run" in changed.stderr
    manifest = json.loads((tmp_path / "e2" / "manifest.json").read_text())
    assert manifest["input_changes"]


def test_progress_bars_under_the_cells_bar_and_no_progress_silences_all(tmp_path: Path) -> None:
    argv = ["train", "--benchmark", "synthetic", "--scorer", "gen", "--variant", SYN, "--agent", "dqn",
            "--seeds", "1", "--set", "dqn.total_timesteps=300", "dqn.learning_starts=100"]  # fmt: skip
    procs = [  # side by side: the two runs are independent
        subprocess.Popen(
            [sys.executable, "-m", "experiments.cli", *args],
            cwd=tmp_path,
            env=cli_env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        for args in ([*argv, "--out", str(tmp_path / "a")], [*argv, "--out", str(tmp_path / "b"), "--no-progress"])
    ]
    (shown, shown_code), (quiet, quiet_code) = [(p.communicate(timeout=600)[1], p.returncode) for p in procs]
    assert shown_code == 0, shown
    assert "cells" in shown and "bor-dqn s1" in shown and "step" in shown
    assert quiet_code == 0 and quiet.strip() == ""


def test_help_text_lists_every_kind_and_only_useful_options(tmp_path: Path) -> None:
    train = shortlist("train", "--help", cwd=tmp_path).stdout
    flat = re.sub(r"-\s+", "-", " ".join(train.split()))  # argparse wraps (at hyphens too)
    for name, kind in registry.KINDS.items():  # every kind, with its one-line description
        assert f"{name} = {kind.summary}" in flat, name
    for group in ("data:", "policy:", "learner settings:", "execution:"):  # options grouped by role
        assert f"\n{group}\n" in train, group
    assert "this command's runs only" in train
    evaluate = shortlist("evaluate", "--help", cwd=tmp_path).stdout
    for useless in ("--workers", "--backend", "--ray-address", "--seeds", "--set"):
        assert useless not in evaluate
    for text in (train, evaluate, shortlist("reproduce", "--help", cwd=tmp_path).stdout):
        assert "(default: none)" not in text
        for option in re.findall(r"\n  (--[a-z-]+)", text):
            block = text.split(option, 1)[1].split("\n  --", 1)[0]
            assert block.count("(default:") <= 1, option
