"""``shortlist bench``: how fast the package is on the current machine.

Measured (best of ``repeats`` for the fast ones, wall clock, one process):

- Gymnasium environment steps/s: one ``ShortlistEnv`` on the first condition's training
  queries, random actions drawn up front from a seeded Generator, resets included;
  both the bare class and ``gymnasium.make`` (with its checker/order wrappers), after a
  warm-up that fills the per-query feature cache.
- Batch evaluation throughput: depth policies over a synthetic padded score matrix
  (``queries`` x ``depth``, seeded, sorted descending), through the vectorised cores of
  :mod:`agents.peers` (no per-query or per-step Python loop); then the same plus scoring
  (found, P_rand, per-query BoR reward, mean reward and BoR bits) on arrays; and, for
  reference, the object path (``RankedQuery`` list through :func:`agents.evaluate`).
- DQN training steps/s (:class:`agents.DQNAgent`, the study's settings, ``dqn_steps``).
- Tabular Q training time, exact-DP solve (and fit) time and the Choppy-style model's fit
  time, per condition, with each condition's episode settings.
- Peak memory: the process's maximum resident set size, and the peak traced numpy
  allocation of the batch core.

Prints the figures and writes them, with the machine description, to ``out``
(``results/bench.md``).
"""

from __future__ import annotations

import os
import platform
import resource
import time
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

from experiments.io import atomic_write_text, package_versions
from experiments.options import BenchArgs, CommonArgs
from experiments.plan import ConditionPlan

TARGETS = {"batch_seconds": 1.0, "env_steps_per_s": 20_000.0, "dp_solve_seconds": 1.0}


def _cid(plan: ConditionPlan) -> tuple[str, str, str]:
    c = plan.condition
    return c.benchmark, c.scorer, c.variant


def _best(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def machine() -> dict[str, str]:
    """CPU model, cores, memory, OS and library versions."""
    import torch

    cpu = platform.processor() or "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                mem = f"{int(line.split()[1]) / 2**20:.1f} GiB"
                break
    except OSError:
        pass
    v = package_versions()
    return {
        "cpu": cpu,
        "logical cpus": str(os.cpu_count()),
        "memory": mem,
        "os": platform.platform(),
        "python": v["python"],
        "numpy": v["numpy"],
        "torch": v["torch"],
        "gymnasium": v["gymnasium"],
        "stable-baselines3": v["stable-baselines3"],
        "torch threads": str(torch.get_num_threads()),
        "load average (1/5/15 min) at start": " / ".join(f"{x:.2f}" for x in os.getloadavg()),
    }


def synthetic_batch(queries: int, depth: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded (Q, D) score matrix sorted descending, with gold ranks in 1..D."""
    rng = np.random.default_rng(seed)
    s = rng.standard_normal((queries, depth))
    s[:, 0] += rng.exponential(2.0, queries)  # a clear top item in some lists
    s = -np.sort(-s, axis=1)
    gold = rng.geometric(0.4, queries).clip(1, depth)
    return s, gold


def score_batch(k: np.ndarray, gold: np.ndarray, n: int) -> tuple[float, float]:
    """Vectorised scoring of depths: mean per-query BoR reward and BoR bits (R = 1)."""
    from rewards import bor_aggregate, bor_reward

    found = (k >= gold).astype(np.int64)
    reward = np.asarray(bor_reward(found, k, n, 1))
    return float(reward.mean()), bor_aggregate(found, k, n, 1)


def bench_batch(ba: BenchArgs) -> list[tuple[str, float, str]]:
    """Depth policies over the synthetic batch; rows (what, seconds, note)."""
    from agents.peers import gap_depths, threshold_depths, topp_depths

    s, gold = synthetic_batch(ba.queries, ba.depth, ba.seed)
    caps = np.full(ba.queries, ba.depth)
    n = ba.depth
    cores: dict[str, Callable[[], np.ndarray]] = {
        "fixed-5": lambda: np.minimum(5, caps),
        "gap": lambda: gap_depths(s, None, caps),
        "gap-tail10-buffer5": lambda: gap_depths(s, None, caps, tail=0.1, buffer=5),
        "threshold (t=0.6)": lambda: threshold_depths(s, None, caps, t=0.6),
        "top-p (p=0.9, T=0.5)": lambda: topp_depths(s, None, caps, p=0.9, temperature=0.5),
    }
    rows = []
    for name, fn in cores.items():
        t, k = _best(fn, ba.repeats)
        rows.append((f"{name}: depths", t, f"{ba.queries / t:,.0f} queries/s"))
        t2, _ = _best(partial(lambda f: score_batch(f(), gold, n), fn), ba.repeats)
        rows.append((f"{name}: depths + scoring", t2, f"{ba.queries / t2:,.0f} queries/s"))
    tracemalloc.start()
    gap_depths(s, None, caps, tail=0.1, buffer=5)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rows.append(("gap-tail10-buffer5 core: peak traced allocation", float("nan"), f"{peak / 2**20:.0f} MiB"))
    # the object path, for reference: RankedQuery list through the one evaluator
    from agents import evaluate
    from agents.peers import GapPolicy
    from envs import EpisodeConfig, RankedQuery

    t0 = time.perf_counter()
    qs = [RankedQuery(s[i], np.array([int(gold[i])]), f"q{i}") for i in range(ba.queries)]
    t_build = time.perf_counter() - t0
    rows.append((f"build {ba.queries:,} RankedQuery objects (data loading, not evaluation)", t_build, ""))
    t, _ = _best(lambda: evaluate(GapPolicy(0.1, 5), qs, EpisodeConfig()), 1)
    rows.append(
        ("gap-tail10-buffer5 through agents.evaluate (objects, per-query rows)", t, f"{ba.queries / t:,.0f} queries/s")
    )
    return rows


def bench_env(train: list, reward: str, step_cost: float, steps: int, seed: int) -> dict[str, float]:
    """Steps/s of one environment with random actions (bare class and gymnasium.make)."""
    import gymnasium as gym

    from envs import ENV_ID, ShortlistEnv

    out = {}
    rng = np.random.default_rng(seed)
    actions = rng.integers(0, 2, size=steps)
    for label, env in (
        ("ShortlistEnv", ShortlistEnv(train, reward=reward, step_cost=step_cost)),
        ("gymnasium.make", gym.make(ENV_ID, queries=train, reward=reward, step_cost=step_cost)),
    ):
        env.reset(seed=seed)
        for _ in range(3):  # warm-up passes: every query's features get cached
            for i in range(len(train)):
                env.reset(options={"index": i})
                done = False
                while not done:
                    done = env.step(1)[2]
        env.reset(seed=seed)
        t0 = time.perf_counter()
        for a in actions:
            _, _, term, trunc, _ = env.step(int(a))
            if term or trunc:
                env.reset()
        out[label] = steps / (time.perf_counter() - t0)
        env.close()
    return out


def cmd_bench(ba: BenchArgs, co: CommonArgs, command: str) -> int:
    """Run every measurement, print it and write ``ba.out``."""
    import torch

    from agents import DQNAgent, DQNConfig, TabularConfig, TabularQ
    from agents.choppy import CutoffModel
    from agents.oracle import OptimalStopping
    from envs import EpisodeConfig
    from experiments.plan import BENCH_SUITES, resolve_plans
    from experiments.runner import get_condition

    torch.set_num_threads(1)
    plans = resolve_plans(ba.only, BENCH_SUITES)
    t_all = time.perf_counter()
    lines = [
        "# Speed benchmark",
        "",
        "Generated by `shortlist bench`; do not edit by hand.",
        "",
        f"Command: `{command}`",
        "",
        "## Machine",
        "",
        "| | |",
        "|---|---|",
    ]
    mach = machine()
    lines += [f"| {k} | {v} |" for k, v in mach.items()]
    print("machine: " + "; ".join(f"{k} {v}" for k, v in mach.items()))

    batch = bench_batch(ba)
    lines += [
        "",
        f"## Batch evaluation: {ba.queries:,} queries x depth {ba.depth} (seeded synthetic scores)",
        "",
        'Best of the repeats; "depths" is the vectorised core on the padded matrix, "+ scoring" adds '
        "found, P_rand, per-query reward, mean reward and BoR bits on arrays.",
        "",
        "| what | seconds | throughput |",
        "|---|---|---|",
    ]
    for what, t, note in batch:
        lines.append(f"| {what} | {'-' if np.isnan(t) else f'{t:.4f}'} | {note} |")
        print(f"batch  {what:70s} {'' if np.isnan(t) else f'{t:8.4f} s'}  {note}")
    slowest_core = max(t for what, t, _ in batch if what.endswith("depths + scoring"))

    first = plans[0]
    cond0 = get_condition(*_cid(first), 0, co.data_dir, co.cache_dir)
    env_rate = bench_env(cond0.train, "bor", first.step_cost, ba.env_steps, ba.seed)
    lines += [
        "",
        f"## Environment ({first.name} training queries, random actions, {ba.env_steps:,} steps)",
        "",
        "| env | steps/s |",
        "|---|---|",
    ]
    lines += [f"| {k} | {v:,.0f} |" for k, v in env_rate.items()]
    for k, v in env_rate.items():
        print(f"env    {k:20s} {v:12,.0f} steps/s")

    t0 = time.perf_counter()
    DQNAgent("bor", DQNConfig(total_timesteps=ba.dqn_steps)).fit(
        cond0.train, EpisodeConfig(step_cost=first.step_cost, gamma=first.gamma), ba.seed
    )
    t_dqn = time.perf_counter() - t0
    d = DQNConfig()
    lines += [
        "",
        f"## DQN training ({first.name}, {ba.dqn_steps:,} steps; learning starts at "
        f"{d.learning_starts}, one gradient step of batch {d.batch_size} every {d.train_freq} steps)",
        "",
        f"{ba.dqn_steps / t_dqn:,.0f} steps/s ({t_dqn:.1f} s).",
    ]
    print(f"dqn    {ba.dqn_steps / t_dqn:12,.0f} steps/s ({t_dqn:.1f} s for {ba.dqn_steps} steps)")

    lines += [
        "",
        "## Per condition",
        "",
        f"| condition | train queries | tabular Q ({ba.tabular_episodes:,} episodes) s | exact DP solve s | "
        "exact DP fit (features + model + solve) s | Choppy-style fit s |",
        "|---|---|---|---|---|---|",
    ]
    dp_solves = []
    for plan in plans:
        cond = get_condition(*_cid(plan), 0, co.data_dir, co.cache_dir)
        cfg = EpisodeConfig(step_cost=plan.step_cost, gamma=plan.gamma)
        t0 = time.perf_counter()
        TabularQ("bor", TabularConfig(episodes=ba.tabular_episodes)).fit(cond.train, cfg, ba.seed)
        t_tab = time.perf_counter() - t0
        t_fit, dp = _best(partial(OptimalStopping("bor").fit, cond.train, cfg, ba.seed), ba.repeats)
        solve = float(dp.solve_seconds)  # type: ignore[attr-defined]
        dp_solves.append(solve)
        t0 = time.perf_counter()
        CutoffModel("bor").fit(cond.train, cfg, ba.seed)
        t_ch = time.perf_counter() - t0
        lines.append(f"| {plan.name} | {len(cond.train)} | {t_tab:.2f} | {solve:.4f} | {t_fit:.3f} | {t_ch:.1f} |")
        print(
            f"cond   {plan.name:16s} tabular {t_tab:7.2f} s  dp solve {solve:.4f} s  dp fit {t_fit:.3f} s  "
            f"choppy {t_ch:.1f} s"
        )

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    lines += ["", "## Peak memory", "", f"Maximum resident set size of the benchmark process: {peak:,.0f} MiB.", ""]
    print(f"memory peak RSS {peak:,.0f} MiB")
    checks = [
        (
            f"batch evaluation of a fixed or heuristic policy over {ba.queries:,} x {ba.depth} < "
            f"{TARGETS['batch_seconds']:.0f} s (slowest policy, depths + scoring)",
            slowest_core,
            slowest_core < TARGETS["batch_seconds"],
            f"{slowest_core:.3f} s",
        ),
        (
            f"environment >= {TARGETS['env_steps_per_s']:,.0f} steps/s (gymnasium.make)",
            env_rate["gymnasium.make"],
            env_rate["gymnasium.make"] >= TARGETS["env_steps_per_s"],
            f"{env_rate['gymnasium.make']:,.0f} steps/s",
        ),
        (
            f"exact DP solve < {TARGETS['dp_solve_seconds']:.0f} s (every condition measured, BFCL included)",
            max(dp_solves),
            all(s < TARGETS["dp_solve_seconds"] for s in dp_solves),
            f"max {max(dp_solves):.4f} s",
        ),
    ]
    lines += ["## Targets", "", "| target | measured | met |", "|---|---|---|"]
    for what, _, ok, shown in checks:
        lines.append(f"| {what} | {shown} | {'yes' if ok else 'NO'} |")
        print(f"target {what}: {shown} -> {'met' if ok else 'NOT met'}")
    lines += ["", f"Total benchmark wall time: {time.perf_counter() - t_all:.1f} s.", ""]
    atomic_write_text(Path(ba.out), "\n".join(lines))
    print(f"wrote {ba.out}")
    return 0
