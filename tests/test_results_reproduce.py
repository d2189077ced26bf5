"""The committed results come from the committed code.

Re-running a few committed cells of the README main job (``results/bfcl``: fixed K, tabular
Q-learning and one full-budget BoR-DQN) from this checkout must give their ``per_query.csv``
byte for byte; and every committed manifest must name a clean tree at a commit of this
history. A code change that moves a committed number fails here until ``results/`` is
regenerated.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from experiments.plan import resolve_plans, study_cells
from experiments.runner import run_cell

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "results"
MAIN_JOB_RUNS = RESULTS / "bfcl" / "runs"

#: Cheap and deterministic cells of both scorers, and one DQN cell at its full budget (about
#: 40 s on 2 cores) so that the learned policies are covered too.
CELLS = (
    "bfcl-bm25__fixed-3__s42",
    "bfcl-minilm__fixed-1__s42",
    "bfcl-bm25__bor-tabular__s42",
    "bfcl-bm25__bor-dqn__s42",
    "bfcl-minilm__fixed-5__s123__split3",
)


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("cache"))


@pytest.mark.parametrize("run_id", CELLS)
def test_committed_cell_regenerates_byte_for_byte(run_id: str, tmp_path: Path, cache_dir: str) -> None:
    committed = MAIN_JOB_RUNS / run_id
    assert (committed / "per_query.csv").is_file(), f"{committed}: not committed (run the README's first command)"
    cfg = json.loads((committed / "config.json").read_text())
    cells = {c.run_id: c for c in study_cells(resolve_plans([cfg["condition"]]), [cfg["seed"]])}
    assert run_id in cells, f"{run_id} is no longer a cell of the study plan"
    cell = cells[run_id]
    resolved = cell.resolved()
    assert {k: cfg.get(k) for k in resolved} == json.loads(json.dumps(resolved)), "the plan's settings changed"
    run_dir = run_cell(cell, tmp_path / "runs", None, cache_dir, "test")
    for table in ("per_query.csv", "summary.csv", "buckets.csv"):
        assert (run_dir / table).read_bytes() == (committed / table).read_bytes(), (
            f"{run_id}/{table} differs from the committed result: regenerate results/ from a clean tree"
        )


def _git(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=False)


def test_committed_manifests_name_a_clean_tree_of_this_history() -> None:
    assert _git("rev-parse", "HEAD").returncode == 0, "the tests need the git checkout"
    tracked = _git("ls-files", "results").stdout.split()
    manifests = [RESULTS.parent / p for p in tracked if p.endswith("manifest.json")]
    assert manifests, "no committed manifests under results/"
    bad = []
    for path in manifests:
        man = json.loads(path.read_text())
        sha = man.get("git_sha")
        if man.get("git_dirty") is not False or not sha:
            bad.append(f"{path.relative_to(REPO)}: git_dirty={man.get('git_dirty')}")
        elif _git("merge-base", "--is-ancestor", sha, "HEAD").returncode != 0:
            bad.append(f"{path.relative_to(REPO)}: git_sha {sha[:12]} is not a commit of this history")
    assert not bad, "results not produced from a clean committed tree:\n" + "\n".join(bad[:20])
