"""Agent settings on an inner validation split of the training queries (the test split is never used).

``shortlist tune --benchmark bfcl --scorer bm25 --grid train_freq=1,4 exploration_fraction=0.3,0.5``
trains BoR-DQN for every combination of the grid values (on top of the package defaults)
and every seed on 70% of the condition's training queries, evaluates it on the other
30%, and writes one row per (setting, seed) plus a per-setting mean to ``OUT/<condition>.csv``
and ``OUT/<condition>_mean.csv``. ``--agent tabular`` (or any registered kind with a settings
dataclass) tunes that kind instead; its files are ``OUT/<condition>__<kind>*``. Choose settings
from these, then report test numbers. The user's own data are tuned on as ``train`` reads them
(``--run/--qrels``, ``--beir-dir``, ``--tools/--log``): their condition's name holds the file's name and
digest, so two data sets never share a file.
"""

from __future__ import annotations

import itertools
import time
import typing
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

import pandas as pd

from agents import evaluate, registry, summarise
from agents.base import seed_everything
from benchmarks.conditions import seeded_split
from envs import EpisodeConfig, EpisodeOverrides
from experiments.io import atomic_write_csv, write_manifest
from experiments.options import TuneArgs
from experiments.runner import get_condition

INNER_SPLIT_SEED = 99
#: The validation metrics of every row, in column order.
TUNE_METRICS = [
    "found_pct",
    "mean_k",
    "median_k",
    "p90_k",
    "whole_list_pct",
    "bor_bits",
    "mean_reward_net",
    "mean_reward",
]


def parse_grid(items: Sequence[str], agent: str = "dqn") -> dict[str, list]:
    """``["train_freq=1,4", ...]`` -> {"train_freq": [1, 4], ...}, each value typed from the settings
    dataclass of the registered kind ``agent`` by the parser of ``--set``
    (:func:`agents.registry.parse_value`); the values of a tuple-valued setting are separated by ``;``
    (``net_arch=64,64;128,128``)."""
    kind = registry.get(agent)
    grid: dict[str, list] = {}
    for item in items:
        named, key, values = registry.split_item(item)
        if named and named != kind.name:
            raise ValueError(f"bad --grid item {item!r}: it names kind {named!r}, not --agent {kind.name!r}")
        tuple_valued = typing.get_origin(typing.get_type_hints(kind.config).get(key)) is tuple
        texts = [v for v in values.split(";" if tuple_valued else ",") if v]
        if not texts:
            raise ValueError(f"bad --grid item {item!r}: expected {key}=v1,v2")
        grid[key] = [registry.parse_value(kind, key, v) for v in texts]
    return grid


def tune(
    benchmark: str,
    scorer: str,
    variant: str,
    grid: dict[str, list],
    seeds: Sequence[int],
    episode: EpisodeConfig,
    out: Path,
    data_dir: str | None,
    cache_dir: str | None,
    command: str = "",
    agent: str = "dqn",
    settings: Any = None,
    options: tuple[tuple[str, str], ...] = (),
) -> pd.DataFrame:
    """Train/evaluate every grid point x seed on the inner split; write the rows, the per-setting
    means and a manifest (``OUT/<condition>_manifest.json``: command, grid, git state, fit times);
    return the rows. ``options``: the user's own data (:func:`experiments.options.source_options`), with
    ``benchmark`` ``run``, ``beir`` or ``log``."""
    base = registry.get(agent).settings(settings)
    cond = get_condition(benchmark, scorer, variant, 0, data_dir, cache_dir, options)
    train = cond.train
    inner_train, inner_val = seeded_split(len(train), 0.7, INNER_SPLIT_SEED)
    fit_q, val_q = [train[i] for i in inner_train], [train[i] for i in inner_val]
    keys = list(grid)
    rows = []
    for values in itertools.product(*(grid[k] for k in keys)) if keys else [()]:
        setting = replace(base, **dict(zip(keys, values, strict=True)))
        label = ", ".join(f"{k}={v}" for k, v in zip(keys, values, strict=True)) or "defaults"
        for seed in seeds:
            seed_everything(seed)
            t0 = time.perf_counter()
            policy = registry.make(agent, episode.reward, setting).fit(fit_q, episode, seed)
            fit_s = time.perf_counter() - t0
            s = summarise(evaluate(policy, val_q, episode).assign(condition=cond.name, method=policy.name, seed=seed))
            rows.append(
                {
                    "setting": label,
                    **dict(zip(keys, values, strict=True)),
                    "seed": seed,
                    **s.iloc[0][TUNE_METRICS].to_dict(),
                    "fit_seconds": fit_s,
                }
            )
            print(
                f"{label:50s} seed {seed}: val net reward {rows[-1]['mean_reward_net']:.3f}  found "
                f"{rows[-1]['found_pct']:.1f}%  K {rows[-1]['mean_k']:.2f}  "
                f"whole list {rows[-1]['whole_list_pct']:.1f}%  ({fit_s:.1f}s)",
                flush=True,
            )
    df = pd.DataFrame(rows)
    out.mkdir(parents=True, exist_ok=True)
    stem = cond.name if agent == "dqn" else f"{cond.name}__{agent}"
    atomic_write_csv(df.drop(columns=["fit_seconds"]), out / f"{stem}.csv")
    metrics = ["mean_reward_net", "mean_reward", "found_pct", "mean_k", "whole_list_pct", "bor_bits"]
    mean = df.groupby("setting", sort=False)[metrics].agg(["mean", "min", "max"])
    mean.columns = [f"{a}_{b}" for a, b in mean.columns]
    atomic_write_csv(mean.reset_index(), out / f"{stem}_mean.csv")
    write_manifest(
        out / f"{stem}_manifest.json",
        command=command,
        condition=cond.name,
        agent=agent,
        grid={k: [str(v) for v in vs] for k, vs in grid.items()},
        seeds=[int(s) for s in seeds],
        episode=asdict(episode),
        inner_split_seed=INNER_SPLIT_SEED,
        inputs=dict(options),  # the user's files and their sha256 (none on a benchmark)
        n_fit=len(fit_q),
        n_validation=len(val_q),
        fit_seconds={f"{r['setting']} s{r['seed']}": r["fit_seconds"] for r in rows},
    )
    return df


def cmd_tune(ta: TuneArgs, command: str = "") -> int:
    """``shortlist tune``: every grid point x seed on the inner validation split of one condition."""
    from experiments.options import source_options
    from experiments.plan import PLANS, base_plan

    options = source_options(ta)  # (empty on a benchmark)
    cid = ta.condition_id
    plan = PLANS.get(cid.name) or base_plan(cid)
    observation = None if ta.observation == "auto" else ta.observation
    overrides = EpisodeOverrides(step_cost=ta.step_cost, gamma=ta.gamma, observation=observation)
    episode = replace(overrides.apply(plan.episode), reward=ta.reward)
    out = Path(ta.out)
    tune(
        cid.benchmark,
        cid.scorer,
        cid.variant,
        parse_grid(ta.grid, ta.agent),
        ta.seeds,
        episode,
        out,
        ta.data_dir,
        ta.cache_dir,
        command,
        ta.agent,
        ta.settings,
        options,
    )
    print(f"wrote {out}")
    return 0
