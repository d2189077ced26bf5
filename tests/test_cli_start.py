"""A CLI that starts at once: ``--help``, ``data list`` and ``evaluate`` of a rule that needs no torch never import
torch, sentence-transformers or stable-baselines3 (a stand-in that raises on import proves it), and finish well
inside a generous bound (the figures themselves are measured by ``shortlist bench``)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import cli_env

HEAVY = ("torch", "sentence_transformers", "stable_baselines3")


@pytest.fixture(scope="module")
def no_heavy(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """An environment whose heavy packages raise on import (stand-ins first on the path)."""
    fake = tmp_path_factory.mktemp("fake")
    for name in HEAVY:
        (fake / name).mkdir()
        (fake / name / "__init__.py").write_text(f"raise ImportError('{name} was imported')\n")
    env = cli_env()
    env["PYTHONPATH"] = f"{fake}:{env['PYTHONPATH']}"
    return env


def shortlist(args: list[str], env: dict[str, str], cwd: Path) -> tuple[subprocess.CompletedProcess[str], float]:
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "experiments.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True)  # fmt: skip
    return done, time.perf_counter() - t0


def test_help_data_list_and_evaluate_of_a_rule_need_no_torch(no_heavy: dict[str, str], tmp_path: Path) -> None:
    env = cli_env()
    trained = subprocess.run(
        [sys.executable, "-m", "experiments.cli", "train", "--agent", "gap", "--seeds", "1", "--out", str(tmp_path),
         "--no-progress"],
        env=env, cwd=tmp_path, capture_output=True, text=True,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr
    run = next((tmp_path / "runs").iterdir())
    for args in (["--help"], ["train", "--help"], ["kinds"], ["data", "list"],
                 ["evaluate", "--run-dir", str(run), "--out", str(tmp_path / "ev")]):  # fmt: skip
        done, seconds = shortlist(args, no_heavy, tmp_path)
        assert done.returncode == 0, (args, done.stderr[-500:])
        assert seconds < 30.0, (args, seconds)  # generous: shared CI machines; bench measures the real figure
    assert (tmp_path / "ev" / "summary.csv").is_file()


def test_version(tmp_path: Path) -> None:
    done, _ = shortlist(["--version"], cli_env(), tmp_path)
    assert done.returncode == 0 and done.stdout.startswith("shortlist ")
