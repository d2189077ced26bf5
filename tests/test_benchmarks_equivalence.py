"""benchmarks.equivalence: expanded relevant sets, the exact-vs-expanded sweep and the pair sample."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from benchmarks.conditions import Condition, build_condition
from benchmarks.corpus import QueryRecord, ToolCorpus
from benchmarks.equivalence import (
    equivalence_sweep,
    expand_condition,
    expanded_pairs,
    expanded_relevant,
    fixed_depths,
    gold_tools,
    load_condition_corpus,
    tool_cosine,
)
from envs import RankedQuery
from rewards import bor_aggregate

# 6 tools; 0~1 (0.9), 2~3 (0.82), 4~5 (0.5)
COS = np.eye(6)
for a, b, v in [(0, 1, 0.9), (2, 3, 0.82), (4, 5, 0.5), (0, 2, 0.6)]:
    COS[a, b] = COS[b, a] = v


def _condition() -> Condition:
    # query 0: candidates in ranked order [1, 0, 2, 3] (gold 0 at rank 2); query 1: [3, 4, 2] (gold 2 at rank 3)
    ranked = [np.array([1, 0, 2, 3]), np.array([3, 4, 2])]
    queries = [
        RankedQuery(np.array([4.0, 3.0, 2.0, 1.0]), np.array([2]), "a", 10),
        RankedQuery(np.array([3.0, 2.0, 1.0]), np.array([3]), "b", 10),
    ]
    return Condition("toy-bm25", queries, np.array([0]), np.array([1]), ranked_tools=ranked, meta={})


def test_gold_and_expanded_sets() -> None:
    c = _condition()
    assert [g.tolist() for g in gold_tools(c)] == [[0], [2]]
    assert [r.tolist() for r in expanded_relevant(c, COS, 0.85)] == [[1, 2], [3]]
    assert [r.tolist() for r in expanded_relevant(c, COS, 0.80)] == [[1, 2], [1, 3]]
    assert [r.tolist() for r in expanded_relevant(c, COS, 0.95)] == [[2], [3]]
    assert [r.tolist() for r in expanded_relevant(c, COS, 0.5)] == [[1, 2, 3], [1, 3]]
    e = expand_condition(c, COS, 0.80)
    assert [q.n_relevant for q in e.queries] == [2, 2]
    assert [q.gold_rank for q in e.queries] == [1, 1]
    assert e.meta["equivalence_tau"] == 0.80 and e.name == "toy-bm25@eq0.8"
    assert [q.n_relevant for q in c.queries] == [1, 1]  # original untouched
    with pytest.raises(ValueError, match="tau"):
        expanded_relevant(c, COS, 1.5)
    with pytest.raises(ValueError, match="square"):
        expanded_relevant(c, COS[:3, :3], 0.9)


def test_sweep_side_by_side() -> None:
    c = _condition()
    df = equivalence_sweep(c, COS, taus=(0.80, 0.95), depths={"fixed-1": np.array([1, 1])}, split="all")
    assert len(df) == 2
    lo = df[df["tau"] == 0.80].iloc[0]
    assert lo["found_pct_exact"] == 0.0 and lo["found_pct_expanded"] == 100.0 and lo["found_pct_diff"] == 100.0
    assert lo["bor_bits_exact"] == -math.inf
    assert lo["bor_bits_expanded"] == pytest.approx(math.log2(1 / 0.2))  # N = 10, R' = 2, K = 1 -> P = 0.2
    assert lo["mean_r_expanded"] == 2.0 and lo["pct_queries_expanded"] == 100.0
    hi = df[df["tau"] == 0.95].iloc[0]
    assert hi["found_pct_diff"] == 0.0 and hi["mean_r_expanded"] == 1.0
    test_only = equivalence_sweep(c, COS, taus=(0.80,), depths={"k2": np.array([2])}, split="test")
    row = test_only.iloc[0]
    assert row["n_queries"] == 1 and row["found_pct_exact"] == 0.0 and row["found_pct_expanded"] == 100.0
    assert row["bor_bits_expanded"] == pytest.approx(bor_aggregate([1], [2], [10], [2]))
    with pytest.raises(ValueError, match="split"):
        equivalence_sweep(c, COS, split="dev")
    assert list(fixed_depths(c.queries, (1, 5))["fixed-5"]) == [4, 3]


def test_pairs_sample() -> None:
    c = _condition()
    names = tuple(f"t{i}" for i in range(6))
    corpus = ToolCorpus("toy", names, tuple(f"text {i}" for i in range(6)), (QueryRecord("a", "x", ("t0",)),))
    df = expanded_pairs(c, corpus, COS, 0.80)
    assert df[["tool_a", "tool_b"]].values.tolist() == [["t0", "t1"], ["t2", "t3"]]
    assert df["cosine"].tolist() == pytest.approx([0.9, 0.82])
    assert df["text_b"].tolist() == ["text 1", "text 3"] and df["n_queries"].tolist() == [1, 1]
    one = expanded_pairs(c, corpus, COS, 0.5, n_sample=1, seed=3)
    assert len(one) == 1 and one.equals(expanded_pairs(c, corpus, COS, 0.5, n_sample=1, seed=3))


def test_real_metatool_registry_has_no_pair_above_080(tmp_path: Path) -> None:
    """Measured: MetaTool's closest pair (MiniLM, name + description) is HouseRentingTool /
    HousePurchasingTool at 0.755, so tau >= 0.80 expands nothing there."""
    c = build_condition("metatool", "bm25", variant="multi", cache_dir=tmp_path)
    corpus = load_condition_corpus(c, cache_dir=tmp_path)
    cos = tool_cosine(corpus, tmp_path)
    assert cos.shape == (199, 199)
    np.testing.assert_allclose(np.diag(cos), 1.0, atol=1e-5)
    np.testing.assert_allclose(cos, cos.T, atol=1e-6)
    off = cos - 2 * np.eye(199)
    a, b = np.unravel_index(np.argmax(off), off.shape)
    assert {corpus.tool_names[a], corpus.tool_names[b]} == {"HouseRentingTool", "HousePurchasingTool"}
    assert 0.70 < off.max() < 0.80
    df = equivalence_sweep(c, cos, taus=(0.80, 0.70))
    assert np.all(df.loc[df["tau"] == 0.80, "found_pct_diff"] == 0.0)
    assert np.all(df.loc[df["tau"] == 0.70, "found_pct_diff"] >= 0.0)
    assert np.all(df.loc[df["tau"] == 0.70, "mean_r_expanded"] >= 2.0)
