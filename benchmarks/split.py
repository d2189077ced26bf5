"""A condition's ranked queries and their seeded train/test split (shared by every condition builder).

:class:`Condition` is what every builder returns (:func:`benchmarks.conditions.build_condition`,
:func:`benchmarks.synthetic.synthetic_condition`); :func:`seeded_split` the split of its query positions and
:func:`split_meta` the record of it that goes into every run manifest.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from envs import RankedQuery


@dataclass
class Condition:
    """Ranked queries of one condition, with their split and provenance.

    Attributes:
        name: ``<benchmark>-<scorer>[-<variant>]``.
        queries: ranked queries, in (sampled) corpus order; a user's run or BEIR folder: in query-id order.
        train_idx, test_idx: positions in ``queries`` of the seeded split.
        buckets: default difficulty bucket scheme ("default" or "narrow").
        meta: provenance for manifests (input sha256, split seed, N, skips, timings).
    """

    name: str
    queries: list[RankedQuery]
    train_idx: NDArray[np.int64]
    test_idx: NDArray[np.int64]
    buckets: str = "default"
    meta: dict = field(default_factory=dict)
    ranked_tools: list[NDArray[np.int64]] = field(default_factory=list)
    """Per query, the registry indices of its candidates in ranked order (empty for user runs)."""

    @property
    def train(self) -> list[RankedQuery]:
        return [self.queries[i] for i in self.train_idx]

    @property
    def test(self) -> list[RankedQuery]:
        return [self.queries[i] for i in self.test_idx]


def seeded_split(n: int, train_frac: float, seed: int) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Seeded permutation split: the first round(train_frac * n) go to train (both sorted)."""
    if n < 2:
        raise ValueError(f"need at least 2 queries to split, got {n}")
    if not 0.0 < train_frac < 1.0:
        raise ValueError(f"train_frac must lie in (0, 1), got {train_frac}")
    perm = np.random.default_rng(seed).permutation(n)
    n_train = split_sizes(n, train_frac)[0]
    return np.sort(perm[:n_train]), np.sort(perm[n_train:])


def split_sizes(n: int, train_frac: float) -> tuple[int, int]:
    """The training and test sizes :func:`seeded_split` gives ``n >= 2`` queries: ``round(train_frac * n)``, at
    least 1 and at most ``n - 1``, and the rest."""
    n_train = min(n - 1, max(1, round(train_frac * n)))
    return n_train, n - n_train


def fewest_to_split(n_train: int, train_frac: float) -> int:
    """The fewest queries whose :func:`seeded_split` at ``train_frac`` (in (0, 1)) puts at least ``n_train`` of
    them in training (and one in test)."""
    n = 2
    while split_sizes(n, train_frac)[0] < n_train:
        n += 1
    return n


def sha_lines(lines: list[str]) -> str:
    """sha256 of the lines joined by newlines (e.g. the query ids of a test split)."""
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def split_meta(
    queries: list[RankedQuery],
    train_idx: NDArray[np.int64],
    test_idx: NDArray[np.int64],
    split_seed: int,
    train_frac: float,
) -> dict:
    """The manifest's record of a split: its seed and sizes, the sha256 of the test query ids, and the
    scorer's found@1 and found@5 over all queries."""
    gold = np.array([q.gold_rank for q in queries])
    return {
        "split_seed": split_seed,
        "train_frac": train_frac,
        "n_train": len(train_idx),
        "n_test": len(test_idx),
        "test_qids_sha256": sha_lines([queries[i].qid for i in test_idx]),
        "found_at_1_pct_all": 100.0 * float(np.mean(gold == 1)),
        "found_at_5_pct_all": 100.0 * float(np.mean((gold >= 1) & (gold <= 5))),
    }
