"""The ``metatool-bm25-multi`` condition on the real MetaTool multi-tool file.

Kept apart from ``test_benchmarks_multitool.py`` because it embeds the 199 tools with
MiniLM (the distractor similarity). The candidate sets are checked against
:func:`multi_candidate_sets` recomputed from the tool similarity alone (no scores), which
is what makes them identical for every scorer (``metatool-minilm-multi`` included; its
build embeds the 497 queries as well and is left to the study runs).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from agents.evaluation import score_depths_multi, summary_row_multi
from benchmarks.conditions import Condition, build_condition, candidate_rule, multi_candidate_sets, tool_similarity
from benchmarks.metatool import load_metatool_multi

REAL = Path(os.environ.get("SHORTLIST_DATA_DIR", Path(__file__).resolve().parents[1].parent / "shared" / "data"))


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("scores")


@pytest.fixture(scope="module")
def bm25_multi(cache: Path) -> Condition:
    return build_condition("metatool", "bm25", variant="multi", data_dir=REAL, cache_dir=cache)


def test_multi_condition_shape_and_scorer_free_candidates(bm25_multi: Condition, cache: Path) -> None:
    c = bm25_multi
    assert c.name == "metatool-bm25-multi"
    assert len(c.queries) == 497 and (len(c.train_idx), len(c.test_idx)) == (348, 149)
    assert c.meta["n_candidates"] == [100]
    assert c.meta["candidate_rule"]["query_set"] == "multi"
    corpus = load_metatool_multi(REAL)
    index = corpus.tool_index()
    gold_sets = [np.array([index[g] for g in rec.gold]) for rec in corpus.queries]
    for q, tools, gs in zip(c.queries, c.ranked_tools, gold_sets, strict=True):
        assert q.n_relevant == 2 and q.relevant_ranks.size == 2 and q.n_candidates == 100
        assert sorted(tools[q.relevant_ranks - 1].tolist()) == sorted(gs.tolist())
    rows = np.unique(np.concatenate(gold_sets))
    sim = tool_similarity(corpus, rows, cache)
    expected = multi_candidate_sets(
        gold_sets,
        len(corpus.tool_names),
        candidate_rule("metatool", "multi"),
        sim,
        {int(g): i for i, g in enumerate(rows)},
        0,
    )
    for tools, want in zip(c.ranked_tools, expected, strict=True):
        np.testing.assert_array_equal(np.sort(tools), want)


def test_multi_condition_completeness_rows(bm25_multi: Condition) -> None:
    c = bm25_multi
    last = np.array([q.relevant_ranks[-1] for q in c.queries])
    first = np.array([q.gold_rank for q in c.queries])
    for k in (1, 2, 5, 20):
        rows = score_depths_multi(c.queries, np.full(len(c.queries), k))
        np.testing.assert_array_equal(rows["complete"], (last <= k).astype(int))
        np.testing.assert_array_equal(rows["found"], (first <= k).astype(int))
        assert np.all(rows["complete"] <= rows["found"])
        s = summary_row_multi(rows)
        assert s["complete_pct"] == pytest.approx(100 * np.mean(last <= k))
        if k == 1:
            assert rows["complete"].sum() == 0 and np.all(rows["p_random_all"] == 0)
            assert math.isnan(s["bor_bits_all"])
        else:
            pa = k * (k - 1) / (100 * 99)
            assert s["bor_bits_all"] == pytest.approx(math.log2(np.mean(last <= k) / pa))
    # measured on the pinned data (BM25): found 43.3% / complete 0% at K=1, 79.7% / 29.8% at K=5
    assert np.mean(first <= 5) == pytest.approx(0.797, abs=0.002)
    assert np.mean(last <= 5) == pytest.approx(0.298, abs=0.002)
