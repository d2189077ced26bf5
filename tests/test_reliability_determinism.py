"""Determinism: the same command gives byte-identical results, whatever the worker count, and
seeding happens in one place.

A tiny ``shortlist reproduce`` (BFCL + BM25, 1 seed, 12 cells: 3 DQN, tabular, cut-off, posterior,
6 fixed K) is run three times as a subprocess: twice with ``--workers 1`` (conftest's ``tiny_runs``,
the reference of the crash suite too) and once with ``--workers 2``.
per_query.csv, summary.csv, buckets.csv (and the other generated tables, every run directory's
tables, config and tabular agent) must be byte-identical; manifests may differ only in their
timestamps and timings. (Resumed vs uninterrupted runs: ``test_reliability_crash.py``.)
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import TINY_REPRODUCE_ARGS, TINY_REPRODUCE_CELLS, cli_env, finish, tiny_reproduce_cmd  # noqa: E402

from agents import TabularConfig, TabularQ
from agents.base import seed_everything
from envs import EpisodeConfig, RankedQuery, ShortlistEnv

REPO = Path(__file__).resolve().parents[1]
TABLES = ("per_query.csv", "summary.csv", "buckets.csv")
DERIVED = ("aggregate.csv", "scorer_strength.csv", "figures/buckets_bfcl-bm25.csv")
RUN_FILES = ("per_query.csv", "summary.csv", "buckets.csv", "config.json")
TIME_KEYS = {"started_utc", "finished_utc", "wall_seconds", "fit_seconds", "eval_seconds"}
TINY = TINY_REPRODUCE_ARGS


@pytest.fixture(scope="module")
def three_runs(tiny_runs: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """a and b start together on one cold score cache (different hash seeds: conftest's ``tiny_runs``);
    then w2 with 2 workers."""
    w2 = tmp_path_factory.mktemp("determinism") / "w2"
    proc = subprocess.Popen(
        tiny_reproduce_cmd(w2, tiny_runs["cache"], "--workers", "2"),
        cwd=REPO,
        env=cli_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    finish(proc)
    return {**tiny_runs, "w2": w2}


def _run_dirs(out: Path) -> list[str]:
    return sorted(p.name for p in (out / "runs").iterdir() if not p.name.startswith("."))


def _assert_same_results(x: Path, y: Path) -> None:
    for f in (*TABLES, *DERIVED):
        assert (x / f).read_bytes() == (y / f).read_bytes(), f
    # the tiny sweep: 3 DQN rewards, tabular, cut-off, posterior, 6 fixed K
    assert _run_dirs(x) == _run_dirs(y) and len(_run_dirs(x)) == TINY_REPRODUCE_CELLS
    for run in _run_dirs(x):
        for f in RUN_FILES:
            assert (x / "runs" / run / f).read_bytes() == (y / "runs" / run / f).read_bytes(), f"{run}/{f}"
        if (x / "runs" / run / "agent.json").exists():
            assert (x / "runs" / run / "agent.json").read_bytes() == (y / "runs" / run / "agent.json").read_bytes()


def test_same_command_twice_gives_byte_identical_tables(three_runs: dict[str, Path]) -> None:
    _assert_same_results(three_runs["a"], three_runs["b"])


def test_workers_1_and_2_give_byte_identical_tables(three_runs: dict[str, Path]) -> None:
    _assert_same_results(three_runs["a"], three_runs["w2"])


def test_dqn_agents_are_identical_across_runs(three_runs: dict[str, Path]) -> None:
    """The saved SB3 networks hold the same weights (zip timestamps aside)."""
    import zipfile

    for run in _run_dirs(three_runs["a"]):
        za = three_runs["a"] / "runs" / run / "agent.zip"
        if not za.exists():
            continue
        for other in ("b", "w2"):
            with zipfile.ZipFile(za) as a, zipfile.ZipFile(three_runs[other] / "runs" / run / "agent.zip") as b:
                assert a.read("policy.pth") == b.read("policy.pth"), f"{run} ({other})"


def test_manifests_differ_only_in_timestamps(three_runs: dict[str, Path]) -> None:
    for run in _run_dirs(three_runs["a"]):
        docs = []
        for key in ("a", "w2"):
            m = json.loads((three_runs[key] / "runs" / run / "manifest.json").read_text())
            docs.append({k: v for k, v in m.items() if k not in TIME_KEYS})
        assert docs[0] == docs[1], run


def test_reproduce_readme_is_byte_identical(
    three_runs: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The generated README.md (a committed result file) must not depend on how long the run
    took: timestamps and timings belong in the manifests. Resuming a finished sweep twice with
    a slow and a fast clock must write the same README (today its "Wall time" table differs)."""
    import itertools
    import shutil
    import time

    from experiments.cli import main
    from experiments.runner import get_condition

    readmes = []
    for i, step in enumerate((0.5, 7.25)):
        out = tmp_path / f"copy{i}"
        shutil.copytree(three_runs["a"], out)
        clock = itertools.count(1000.0, step)
        monkeypatch.setattr(time, "perf_counter", lambda clock=clock: next(clock))
        get_condition.cache_clear()
        assert main(["reproduce", *TINY, "--out", str(out), "--cache-dir", str(three_runs["cache"])]) == 0
        monkeypatch.undo()
        # the README names the command that made it, whose --out is this copy's folder
        readmes.append((out / "README.md").read_text().replace(str(out), "OUT").splitlines())
    diff = [(x, y) for x, y in zip(*readmes, strict=False) if x != y]
    assert readmes[0] == readmes[1], f"README.md depends on the wall clock: {diff[:3]}"


def test_every_other_generated_file_is_byte_identical(three_runs: dict[str, Path]) -> None:
    """Catch-all for outputs added later: every file under OUT is byte-identical across the three
    runs except manifests (timestamps), command.txt (the --out path), agent.zip (zip member
    times; weights compared above), README.md (F13, tested above) and index.html (it names the
    results folder and renders README.md)."""
    skip = {"manifest.json", "command.txt", "agent.zip", "README.md", "index.html"}
    a = three_runs["a"]
    files = sorted(p.relative_to(a) for p in a.rglob("*") if p.is_file() and p.name not in skip)
    assert len(files) > 30
    for other in ("b", "w2"):
        o = three_runs[other]
        assert sorted(p.relative_to(o) for p in o.rglob("*") if p.is_file() and p.name not in skip) == files
        for f in files:
            assert (a / f).read_bytes() == (o / f).read_bytes(), f"{f} ({other})"


def test_figures_are_byte_identical(three_runs: dict[str, Path]) -> None:
    for f in sorted((three_runs["a"] / "figures").iterdir()):
        assert f.read_bytes() == (three_runs["w2"] / "figures" / f.name).read_bytes(), f.name


# ---------------------------------------------------------------- seeding in one place


def test_seed_everything_seeds_python_numpy_and_torch() -> None:
    def draws() -> tuple[float, float, float]:
        return random.random(), float(np.random.random()), float(torch.rand(1))  # noqa: NPY002

    seed_everything(7)
    first = draws()
    random.seed(99), np.random.seed(99), torch.manual_seed(99)  # noqa: NPY002
    seed_everything(7)
    assert draws() == first
    seed_everything(8)
    assert draws() != first


PACKAGES = ("rewards", "benchmarks", "envs", "agents", "experiments")
GLOBAL_SEEDING = re.compile(
    r"\b(np\.random\.seed|random\.seed|torch\.manual_seed|torch\.cuda\.manual_seed(_all)?|"
    r"set_random_seed)\("
)
GLOBAL_DRAWS = re.compile(
    r"\bnp\.random\.(rand|randn|randint|random|random_sample|choice|shuffle|permutation|"
    r"normal|uniform|binomial|poisson|exponential)\(|(?<![\w.])random\."
    r"(random|choice|shuffle|randint|uniform|sample|gauss)\("
)


def test_global_seeding_happens_in_one_place() -> None:
    """Only ``agents.base.seed_everything`` seeds the global RNGs; a local torch seed is
    allowed inside ``torch.random.fork_rng`` (it does not leak)."""
    offenders = []
    for pkg in PACKAGES:
        for f in (REPO / pkg).rglob("*.py"):
            lines = f.read_text(encoding="utf-8").splitlines()
            for i, line in enumerate(lines):
                if not GLOBAL_SEEDING.search(line) or line.lstrip().startswith(("#", "``", "Determinism")):
                    continue
                rel = f.relative_to(REPO).as_posix()
                in_seed_everything = rel == "agents/base.py" and any(
                    "def seed_everything" in ln for ln in lines[max(0, i - 12) : i]
                )
                forked = any("fork_rng" in ln for ln in lines[max(0, i - 3) : i])
                if not (in_seed_everything or forked):
                    offenders.append(f"{rel}:{i + 1}: {line.strip()}")
    assert not offenders, offenders


def test_no_global_rng_draws_in_package_code() -> None:
    """Envs, agents, rewards and benchmarks draw only from seeded Generators (never np.random.* / random.*)."""
    offenders = []
    for pkg in PACKAGES:
        for f in (REPO / pkg).rglob("*.py"):
            for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), start=1):
                if GLOBAL_DRAWS.search(line) and not line.lstrip().startswith("#"):
                    offenders.append(f"{f.relative_to(REPO).as_posix()}:{i}: {line.strip()}")
    assert not offenders, offenders


def _toy(seed: int, count: int = 30, n: int = 25) -> list[RankedQuery]:
    rng = np.random.default_rng(seed)
    return [
        RankedQuery(np.sort(rng.random(n))[::-1].copy(), np.array([int(rng.integers(1, 6))]), f"q{i}")
        for i in range(count)
    ]


def test_tabular_ignores_global_rng_state() -> None:
    qs, cfg = _toy(1), EpisodeConfig()
    np.random.seed(1), random.seed(1), torch.manual_seed(1)  # noqa: NPY002
    a = TabularQ("bor", TabularConfig(episodes=800)).fit(qs, cfg, seed=3)
    np.random.seed(2), random.seed(2), torch.manual_seed(2)  # noqa: NPY002
    np.random.random(1000)  # noqa: NPY002
    b = TabularQ("bor", TabularConfig(episodes=800)).fit(qs, cfg, seed=3)
    np.testing.assert_array_equal(a.q, b.q)
    np.testing.assert_array_equal(a.depths(qs, cfg), b.depths(qs, cfg))


def test_env_rollouts_ignore_global_rng_state() -> None:
    qs = _toy(2)

    def rollout() -> list:
        env = ShortlistEnv(qs)
        env.action_space.seed(5)
        out = []
        obs, info = env.reset(seed=5)
        for _ in range(200):
            obs, rew, term, trunc, info = env.step(env.action_space.sample())
            out.append((info.get("qid"), float(rew), obs.tobytes()))
            if term or trunc:
                obs, info = env.reset()
        return out

    np.random.seed(3)  # noqa: NPY002
    a = rollout()
    np.random.seed(4), random.seed(4)  # noqa: NPY002
    assert rollout() == a


DQN_SCRIPT = textwrap.dedent(
    """
    import hashlib, json, sys
    from pathlib import Path
    import numpy as np
    from agents import DQNAgent, DQNConfig
    from agents.base import stacked_features
    from benchmarks.conditions import build_condition
    from envs import EpisodeConfig
    cond = build_condition("bfcl", "bm25", variant="sub20", cache_dir=Path(sys.argv[1]))
    cfg = EpisodeConfig(step_cost=0.005)
    agent = DQNAgent("bor", DQNConfig(total_timesteps=1500, learning_starts=200)).fit(cond.train, cfg, seed=42)
    feats, _ = stacked_features(cond.test, cfg)
    print(json.dumps({"depths": agent.depths(cond.test, cfg).tolist(),
                      "q_sha256": hashlib.sha256(agent.q_values(feats).tobytes()).hexdigest()}))
    """
)


def test_sb3_dqn_same_seed_same_depths_across_processes(shared_cache: Path) -> None:
    """Two fresh processes (different hash seeds and thread settings) train the same SB3 DQN on
    a small condition (BFCL + BM25, random sub-registries of 20 tools): same depths, same Q-values.
    (The condition's build in fresh processes on separate cold caches: test_condition_build_is_deterministic.)"""
    procs = []
    for hash_seed, threads in (("1", "1"), ("999", "2")):
        env = {**cli_env(), "PYTHONHASHSEED": hash_seed, "OMP_NUM_THREADS": threads, "MKL_NUM_THREADS": threads}
        procs.append(
            subprocess.Popen(
                [sys.executable, "-c", DQN_SCRIPT, str(shared_cache)],
                cwd=REPO,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    assert outs[0] == outs[1]
    assert len(outs[0]["depths"]) == 120 and len(set(outs[0]["depths"])) >= 1


def test_condition_build_is_deterministic(tmp_path: Path) -> None:
    """Candidate sets, rankings and splits do not depend on the process (hash seed) or on the cache."""
    script = (
        "import hashlib,sys; from pathlib import Path; from benchmarks.conditions import build_condition;"
        "c = build_condition('bfcl','bm25',variant='sub50',cache_dir=Path(sys.argv[1]));"
        "h = hashlib.sha256();"
        "[h.update(q.qid.encode() + q.scores.tobytes() + q.relevant_ranks.tobytes()) for q in c.queries];"
        "h.update(c.train_idx.tobytes() + c.test_idx.tobytes()); print(h.hexdigest())"
    )
    procs = [  # two fresh processes side by side, each on its own cold cache
        subprocess.Popen(
            [sys.executable, "-c", script, str(tmp_path / f"cache{i}")],
            cwd=REPO,
            env={**cli_env(), "PYTHONHASHSEED": hash_seed},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i, hash_seed in enumerate(("0", "4242"))
    ]
    digests = set()
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-2000:]
        digests.add(out.strip())
    assert len(digests) == 1


def sha256_tree(root: Path) -> str:  # pragma: no cover - debugging helper
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(root)).encode() + p.read_bytes())
    return h.hexdigest()
