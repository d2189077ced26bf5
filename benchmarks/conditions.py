"""Conditions: a benchmark, a candidate-set rule and a scorer, turned into ranked queries.

A condition is named ``<benchmark>-<scorer>`` (``bfcl-bm25``, ``bfcl-minilm``).
:func:`build_condition` loads the corpus, builds each query's candidate set, scores
it (through the on-disk score cache), ranks it (:meth:`RankedQuery.from_scores`:
ties broken by candidate order) and makes the seeded train/test split.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from benchmarks.cache import cached_scores
from benchmarks.corpus import ToolCorpus
from benchmarks.scorers import make_scorer
from envs import RankedQuery


@dataclass
class Condition:
    """Ranked queries of one condition, with their split and provenance.

    Attributes:
        name: ``<benchmark>-<scorer>`` (plus a suffix for candidate-set variants).
        queries: ranked queries, in corpus order.
        train_idx, test_idx: positions in ``queries`` of the seeded split.
        buckets: difficulty bucket scheme ("default" or "narrow").
        meta: provenance for manifests (input sha256, split seed, N, skips, timings).
    """

    name: str
    queries: list[RankedQuery]
    train_idx: NDArray[np.int64]
    test_idx: NDArray[np.int64]
    buckets: str = "default"
    meta: dict = field(default_factory=dict)

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
    n_train = min(n - 1, max(1, round(train_frac * n)))
    return np.sort(perm[:n_train]), np.sort(perm[n_train:])


def full_registry_queries(corpus: ToolCorpus, scores: NDArray[np.float64]) -> list[RankedQuery]:
    """Rank the whole registry for every query (candidate set = all tools)."""
    index = corpus.tool_index()
    return [
        RankedQuery.from_scores(scores[i], [index[g] for g in q.gold], q.qid)[0]
        for i, q in enumerate(corpus.queries)
    ]


def _load_bfcl(data_dir: Path | None) -> ToolCorpus:
    from benchmarks.bfcl import load_bfcl

    return load_bfcl()


#: benchmark name -> (loader(data_dir) -> corpus, default bucket scheme)
BENCHMARKS: dict[str, Callable[[Path | None], ToolCorpus]] = {"bfcl": _load_bfcl}
SCORERS = ("bm25", "minilm")


def build_condition(
    benchmark: str,
    scorer: str,
    *,
    data_dir: Path | None = None,
    cache_dir: Path | None = None,
    variant: str = "",
    split_seed: int = 0,
    train_frac: float = 0.7,
) -> Condition:
    """Build the ranked queries and split of ``<benchmark>-<scorer>``.

    ``scorer`` is ``bm25``, ``minilm`` or any sentence-transformers model name or local
    path (an unavailable model fails when it is loaded, naming it). BFCL data comes
    from the ``bfcl-eval`` package (or ``SHORTLIST_BFCL_DIR``), not from ``data_dir``.

    Raises:
        ValueError: unknown benchmark name (listing the valid ones) or variant.
    """
    if benchmark not in BENCHMARKS:
        raise ValueError(f"unknown benchmark {benchmark!r}; expected one of {', '.join(BENCHMARKS)}")
    if variant:
        raise ValueError(f"benchmark {benchmark!r} has no candidate-set variant {variant!r}")
    t0 = time.perf_counter()
    corpus = BENCHMARKS[benchmark](data_dir)
    t_load = time.perf_counter() - t0
    sc = make_scorer(scorer)
    t1 = time.perf_counter()
    scores, hit = cached_scores(sc, [q.text for q in corpus.queries], list(corpus.tool_texts), cache_dir)
    t_score = time.perf_counter() - t1
    queries = full_registry_queries(corpus, scores)
    train_idx, test_idx = seeded_split(len(queries), train_frac, split_seed)
    gold = np.array([q.gold_rank for q in queries])
    return Condition(
        name=f"{benchmark}-{scorer}",
        queries=queries,
        train_idx=train_idx,
        test_idx=test_idx,
        buckets="default",
        meta={
            "benchmark": benchmark,
            "scorer": scorer,
            "scorer_identity": sc.identity(),
            "inputs_sha256": corpus.inputs_sha256,
            "corpus_fingerprint": corpus.fingerprint(),
            "skipped": corpus.skipped,
            "n_tools": len(corpus.tool_names),
            "n_candidates": sorted({q.n_candidates for q in queries}),
            "n_queries": len(queries),
            "split_seed": split_seed,
            "train_frac": train_frac,
            "n_train": len(train_idx),
            "n_test": len(test_idx),
            "found_at_1_pct_all": 100.0 * float(np.mean(gold == 1)),
            "found_at_5_pct_all": 100.0 * float(np.mean((gold >= 1) & (gold <= 5))),
            "score_cache_hit": hit,
            "seconds_load": round(t_load, 3),
            "seconds_score": round(t_score, 3),
        },
    )
