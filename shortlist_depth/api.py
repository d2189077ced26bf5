"""Train and evaluate a depth policy from Python on your own ranked lists (``shortlist_depth.fit``,
``shortlist_depth.evaluate``). Imports torch (through the policies): the facade loads it on first use."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import pandas as pd

from agents import registry
from agents.base import DepthPolicy, FixedConfig, seed_everything
from agents.evaluation import evaluate as evaluate_policy
from agents.method import MethodSpec
from agents.trained import TrainedPolicy
from envs import EpisodeConfig, RankedQuery


def fit(
    kind: str,
    queries: Sequence[RankedQuery],
    *,
    reward: str = "bor",
    settings: Any = None,
    episode: EpisodeConfig | None = None,
    seed: int = 0,
) -> TrainedPolicy:
    """Train a registered policy kind on your own labelled ranked lists; the fitted policy.

    The same steps as one cell of ``shortlist train``: seed Python, numpy's global RNG and torch
    with ``seed``, build the kind with ``settings``, fit it on ``queries`` in the method's episode
    (:meth:`agents.method.MethodSpec.episode` of ``episode``). With the same queries in the same order, seed,
    settings and episode settings (``shortlist train``'s are the condition's: on your own run, ``EpisodeConfig()``'s
    defaults, step cost 0.01 and gamma 1) it gives the same policy (a test trains one cell both ways). The order
    counts: a learner that samples queries (tabular Q, DQN) draws them by position, so the same queries in another
    order can give another policy; on your own run ``shortlist train`` passes them sorted by query id, which
    ``sorted(queries, key=lambda q: q.qid)`` reproduces.

    Args:
        kind: a registered kind (:func:`shortlist_depth.kinds`): ``tabular``, ``dqn``, ``cutoff``,
            ``gap``, ``threshold``, ``fixed`` (with ``settings=FixedConfig(k)``), ...
        queries: the training queries, one :class:`~envs.RankedQuery` each: its scores sorted
            descending and ``relevant_ranks`` the **1-based** ranks of its relevant items in that
            order (``[1]``: the top item is relevant), optionally N (``n_candidates``) and R
            (``n_relevant``) when the list was truncated from a larger pool.
        reward: the training reward (``bor``, ``f1``, ``constant``) of kinds trained towards one;
            the others ignore it.
        settings: the kind's settings dataclass (e.g. ``TabularConfig(episodes=5000)``); None = its
            defaults.
        episode: step cost, discount, depth cap and observation set (default: ``EpisodeConfig()``:
            step cost 0.01, gamma 1, the judged net reward); its reward is set to the method's.
        seed: the training seed.

    Returns:
        A :class:`~agents.trained.TrainedPolicy` (``run_dir`` None): ``.depth(scores)`` and
        ``.depths(score_lists)`` choose K from scores alone; :func:`evaluate` scores it; ``.save(dir)``
        writes a run directory that :func:`~agents.trained.load_policy` reads.

    Raises:
        ValueError: an unknown kind or reward, settings of another kind, a kind that needs a known
            generator (the synthetic benchmark's Bayes limit), or queries its episode settings reject.
    """
    k = settings.k if isinstance(settings, FixedConfig) else 0
    spec = MethodSpec(kind, reward, k)
    if spec.kind.only_benchmarks:
        raise ValueError(f"{kind!r} applies only to the benchmarks {', '.join(spec.kind.only_benchmarks)}")
    ep = spec.episode(episode or EpisodeConfig())
    ep.check_queries(queries)
    seed_everything(seed)
    built = spec.settings(settings)
    policy = registry.make(kind, spec.reward, built)
    policy.fit(queries, ep, seed)
    kept = {k: v for k, v in asdict(built).items() if k != spec.kind.name_field}
    config = {
        "agent": kind,
        "method": spec.name,
        "train_reward": spec.reward if spec.kind.uses_reward else None,
        "k": spec.k or None,
        "seed": seed,
        "episode": asdict(ep),
        "settings": kept,
        "source": "shortlist_depth.fit",
        "n_train": len(queries),
    }
    return TrainedPolicy(policy, ep, spec.name, None, config)


def evaluate(
    policy: TrainedPolicy | DepthPolicy,
    queries: Sequence[RankedQuery],
    episode: EpisodeConfig | None = None,
    buckets: str = "default",
) -> pd.DataFrame:
    """Per-query rows of a policy on labelled queries: the package's one evaluator.

    One row per query: ``qid, gold_rank, bucket, k, found, p_random, reward, n, r`` (plus
    ``reward_net``, ``break_even`` and, with several relevant items, the completeness columns);
    ``bor_aggregate(rows.found, rows.k, rows.n, rows.r)`` is its BoR in bits.

    Args:
        policy: from :func:`fit` or :func:`~agents.trained.load_policy` (its own episode settings),
            or any fitted :class:`~agents.base.DepthPolicy`.
        queries: labelled ranked queries (``relevant_ranks`` 1-based).
        episode: the episode settings (default: the policy's own, else ``EpisodeConfig()``).
        buckets: difficulty bucket scheme, ``default`` or ``narrow``.
    """
    if isinstance(policy, TrainedPolicy):
        return evaluate_policy(policy.policy, queries, episode or policy.episode, buckets)
    return evaluate_policy(policy, queries, episode or EpisodeConfig(), buckets)
