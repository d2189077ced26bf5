"""Shared test setup: offline model loading, and the shared benchmark data folder when present."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
if "SHORTLIST_DATA_DIR" not in os.environ and SHARED_DATA.is_dir():
    os.environ["SHORTLIST_DATA_DIR"] = str(SHARED_DATA)

#: Arguments of the tiny ``shortlist reproduce`` the crash and determinism suites run (one BFCL
#: condition, one seed, one split, learning budgets small enough for CI).
TINY_REPRODUCE_ARGS = [
    "--only",
    "bfcl-bm25",
    "--seeds",
    "1",
    "--set",
    "dqn.total_timesteps=300",
    "dqn.learning_starts=100",
    "--set",
    "tabular.episodes=200",
    "--split-seeds",
    "0",
    "--no-progress",
]


def cli_env() -> dict[str, str]:
    """The environment of a ``python -m experiments.cli`` subprocess: offline, this checkout first."""
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(REPO))
    return env
