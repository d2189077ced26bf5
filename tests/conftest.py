"""Shared test setup: offline model loading, the shared benchmark data folder when present, and the
session-wide fixtures that keep the suite within its budget (docs/usage.md, "Tests").

- :func:`shared_cache`: one score/embedding cache for the whole session. Every test that only needs a
  built condition passes it as ``cache_dir`` / ``--cache-dir``, so each text set is embedded (and the
  ToolBench archive indexed) once per session, not once per test. The README's command runs two pytest
  workers (pytest-xdist, ``--dist loadfile``): each worker is a session of its own, with its own session
  fixtures, and two test files may run at the same time (docs/usage.md, "Two workers").
- :func:`tiny_runs`: the tiny ``shortlist reproduce`` (:data:`TINY_REPRODUCE_ARGS`) run twice at once on
  one cold cache, in subprocesses; the determinism and crash suites compare against it.
- the ``slow`` marker: heavy end-to-end runs, deselected by the README's test command and run by ``.ci/run``
  right after it.
- :func:`stepped_lists`: labelled ranked lists whose right depth differs per query and can be read from the
  examined scores (the strict set's tests and the P(found) stop's).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pytest

if TYPE_CHECKING:
    from envs import RankedQuery

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
    "cutoff.epochs=10",
    "--split-seeds",
    "0",
    "--no-progress",
]
#: Its cells: 3 DQN rewards, tabular, cut-off, posterior and 6 fixed K.
TINY_REPRODUCE_CELLS = 12

#: A tiny learning budget for every learned kind whose defaults train for seconds or more. A test that checks wiring
#: (a command, a table, a round trip), not what a learner learns, puts these ``--set`` items before its own, which win
#: (the last item of a key wins). ``test_every_learned_kind_has_a_tiny_budget`` checks that every registered kind with a
#: budget setting is here, so no test trains a new kind at its full budget by omission (fitted Q, PPO and the residual
#: DQN were, in eight test files: about four CPU-minutes of the suite).
TINY_BUDGETS = (
    "dqn.total_timesteps=300",
    "dqn.learning_starts=50",
    "tabular.episodes=100",
    "cutoff.epochs=5",
    "choppy.epochs=5",
    "pfound.epochs=5",
    "fqi.gradient_steps=50",
    "ppo.total_timesteps=256",
    "ppo.n_steps=64",
    "ppo.batch_size=64",
    "residual.total_timesteps=300",
    "residual.learning_starts=50",
)
#: The ``--set`` items of the tests' tiny ``shortlist recommend`` runs (recommend, toolsearch, toolsearch pays):
#: :data:`TINY_BUDGETS` with their own DQN, tabular, cut-off and Choppy budgets and three ``auto`` candidates.
TINY_RECOMMEND_SET = (*TINY_BUDGETS, "dqn.total_timesteps=600", "dqn.learning_starts=100", "tabular.episodes=300",
                      "cutoff.epochs=20", "choppy.epochs=20", "auto.candidates=gap,threshold,posterior")  # fmt: skip


def cli_env() -> dict[str, str]:
    """The environment of a ``python -m experiments.cli`` subprocess: offline, this checkout first."""
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TOKENIZERS_PARALLELISM="false", PYTHONPATH=str(REPO))
    return env


def tiny_reproduce_cmd(out: Path, cache: Path, *extra: str) -> list[str]:
    """The command line of the tiny ``shortlist reproduce`` into ``out`` with the score cache ``cache``."""
    return [sys.executable, "-m", "experiments.cli", "reproduce", *TINY_REPRODUCE_ARGS, "--out", str(out),
            "--cache-dir", str(cache), *extra]  # fmt: skip


def finish(*procs: subprocess.Popen) -> None:
    """Wait for ``shortlist`` subprocesses started with ``stderr=PIPE``; each must exit 0."""
    for p in procs:
        err = p.communicate(timeout=600)[1]
        assert p.returncode == 0, (err.decode() if isinstance(err, bytes) else str(err))[-3000:]


@pytest.fixture(scope="session")
def shared_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The session's score/embedding cache (starts empty, so a run tests the scoring code it runs).

    Pass it wherever a test only needs a condition built; a test about the cache itself (hits, misses,
    corrupt or concurrently written entries, a cold start) keeps a folder of its own.
    """
    return tmp_path_factory.mktemp("shared-cache")


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The tiny reproduce run twice as subprocesses started together on one cold score cache: ``a`` (the
    reference every resumed or repeated run is compared with) and ``b`` (another ``PYTHONHASHSEED``);
    ``cache`` is their score cache, warm afterwards. Read-only for the tests: copy before changing."""
    base = tmp_path_factory.mktemp("tiny-reproduce")
    cache = base / "cache"
    procs = []
    for name, env in (("a", cli_env()), ("b", {**cli_env(), "PYTHONHASHSEED": "12345"})):
        procs.append(
            subprocess.Popen(
                tiny_reproduce_cmd(base / name, cache),
                cwd=REPO,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
            )  # fmt: skip
        )
    finish(*procs)
    return {"a": base / "a", "b": base / "b", "cache": cache}


def stepped_lists(seed: int, count: int = 60) -> list[RankedQuery]:
    """Lists whose gold sits at the end of a high block of 1 to 6 items, then a drop: the depth worth choosing
    differs per query, and it can be read from the examined scores."""
    from envs import RankedQuery

    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        g = int(rng.integers(1, 7))
        s = np.r_[1.0 + 0.1 * rng.random(g), 0.4 * rng.random(20 - g)]
        out.append(RankedQuery(np.sort(s)[::-1].copy(), [g], f"q{i}"))
    return out
