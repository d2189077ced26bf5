"""A researcher's own TREC run + qrels through ``shortlist train | evaluate | predict`` (issue 28):
run ids that carry the inputs' hash, a split on the query ids, no silent leakage, console notes
for small or skipped data, tied and one-candidate lists."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments import load_policy
from experiments.cli import main

FAST = ["--agent", "threshold", "--seeds", "42", "--no-progress"]


def write_run(folder: Path, seed: int, n_queries: int = 40, depth: int = 20, name: str = "my") -> tuple[Path, Path]:
    """A TREC run (grouped by query) and its qrels: one relevant document per query, most often near the top."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    lines, qrels = [], []
    for q in range(n_queries):
        scores = np.sort(rng.normal(size=depth))[::-1]
        gold = min(int(rng.geometric(0.3)), depth)
        lines += [f"q{q} Q0 d{q}_{r} {r} {s:.6f} bm25" for r, s in enumerate(scores, 1)]
        qrels.append(f"q{q} 0 d{q}_{gold} 1")
    run, qrels_path = folder / f"{name}.run", folder / f"{name}.qrels"
    run.write_text("\n".join(lines) + "\n")
    qrels_path.write_text("\n".join(qrels) + "\n")
    return run, qrels_path


def train(run: Path, qrels: Path, out: Path, *extra: str) -> int:
    return main(["train", "--run", str(run), "--qrels", str(qrels), *FAST, *extra, "--out", str(out)])


def run_dirs(out: Path) -> list[Path]:
    return sorted(p for p in (out / "runs").iterdir() if p.is_dir() and not p.name.startswith("."))


# ---------------------------------------------------------------- 1. run ids carry the inputs' hash


def test_a_run_of_other_data_never_overwrites_an_earlier_one(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """data/my.run and data2/my.run hold other lists: two run directories, the first left as it was;
    the same bytes in a third folder get the first one's name (and reuse its cell)."""
    out = tmp_path / "runs-byo"
    first = write_run(tmp_path / "data", seed=0)
    assert train(*first, out) == 0
    (before,) = run_dirs(out)
    kept = {f.name: f.read_bytes() for f in before.iterdir() if f.is_file()}
    assert train(*write_run(tmp_path / "data2", seed=1), out) == 0
    dirs = run_dirs(out)
    assert len(dirs) == 2 and before in dirs, [d.name for d in dirs]
    assert {f.name: f.read_bytes() for f in before.iterdir() if f.is_file()} == kept
    assert all(d.name.startswith("run-my-") and d.name.endswith("__bor-threshold__s42") for d in dirs)
    hashes = {d.name.split("__")[0].removeprefix("run-my-") for d in dirs}
    assert len(hashes) == 2 and all(len(h) == 6 and int(h, 16) >= 0 for h in hashes)

    elsewhere = tmp_path / "elsewhere" / "deeper"
    elsewhere.mkdir(parents=True)
    copies = [Path(shutil.copy(f, elsewhere / f.name)) for f in first]
    capsys.readouterr()
    assert train(*copies, out) == 0
    assert run_dirs(out) == dirs  # same bytes, same condition name, wherever the files live
    assert before.name.split("__")[0] in capsys.readouterr().out


def test_hashed_run_dirs_work_with_evaluate_load_policy_and_predict(tmp_path: Path) -> None:
    run, qrels = write_run(tmp_path / "data", seed=0)
    assert train(run, qrels, tmp_path / "o") == 0
    (run_dir,) = run_dirs(tmp_path / "o")
    condition = run_dir.name.split("__")[0]
    assert json.loads((run_dir / "config.json").read_text())["condition"] == condition
    assert set(pd.read_csv(run_dir / "per_query.csv")["condition"]) == {condition}

    assert main(["evaluate", "--run-dir", str(run_dir), "--out", str(tmp_path / "e")]) == 0
    evaluated = pd.read_csv(tmp_path / "e" / "per_query.csv", dtype={"qid": str})
    trained = pd.read_csv(run_dir / "per_query.csv", dtype={"qid": str})
    pd.testing.assert_frame_equal(evaluated[trained.columns], trained)

    policy = load_policy(run_dir)
    assert policy.depth([3.0, 1.0, 0.9, 0.1]) >= 1
    short = tmp_path / "short.run"
    assert main(["predict", "--run-dir", str(run_dir), "--run", str(run), "--out", str(short)]) == 0
    assert short.is_file() and short.read_text().count("\n") >= 40
