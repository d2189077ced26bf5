"""benchmarks.conditions: the BFCL + BM25 condition, seeded splits and name checks."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks.bfcl import load_bfcl
from benchmarks.conditions import BENCHMARKS, Condition, build_condition, seeded_split
from benchmarks.score_cache import cached_scores
from benchmarks.scorers import BM25Scorer


@pytest.fixture(scope="module")
def cache_dir(shared_cache: Path) -> Path:
    return shared_cache


@pytest.fixture(scope="module")
def bfcl_bm25(cache_dir: Path) -> Condition:
    return build_condition("bfcl", "bm25", cache_dir=cache_dir)


def test_bfcl_bm25_shape(bfcl_bm25: Condition) -> None:
    c = bfcl_bm25
    assert c.name == "bfcl-bm25"
    assert len(c.queries) == 400
    for q in c.queries:
        assert q.n_candidates == 370
        assert q.length == 370
        assert len(q.relevant_ranks) == 1
        assert 1 <= q.gold_rank <= 370
        assert np.all(np.diff(q.scores) <= 0)
    assert c.meta["n_tools"] == 370
    assert c.meta["n_candidates"] == [370]
    assert c.meta["n_queries"] == 400
    assert c.meta["scorer_identity"] == BM25Scorer().identity()


def test_bfcl_bm25_queries_follow_corpus_order_and_gold(bfcl_bm25: Condition, cache_dir: Path) -> None:
    corpus = load_bfcl()
    assert [q.qid for q in bfcl_bm25.queries] == [r.qid for r in corpus.queries]
    scores, hit = cached_scores(BM25Scorer(), [r.text for r in corpus.queries], list(corpus.tool_texts), cache_dir)
    assert hit is True  # build_condition filled this entry
    index = corpus.tool_index()
    for i, (rq, rec) in enumerate(zip(bfcl_bm25.queries, corpus.queries, strict=True)):
        row = scores[i]
        gold = row[index[rec.gold[0]]]
        # rank = 1 + number of tools scored strictly higher, plus earlier ties (candidate order)
        expected = 1 + int(np.sum(row > gold)) + int(np.sum(row[: index[rec.gold[0]]] == gold))
        assert rq.gold_rank == expected, rec.qid
        np.testing.assert_array_equal(rq.scores, np.sort(row)[::-1])


def test_bfcl_bm25_split(bfcl_bm25: Condition) -> None:
    c = bfcl_bm25
    assert (len(c.train_idx), len(c.test_idx)) == (280, 120)
    assert c.meta["n_train"] == 280 and c.meta["n_test"] == 120 and c.meta["split_seed"] == 0
    assert not set(c.train_idx.tolist()) & set(c.test_idx.tolist())
    assert sorted(c.train_idx.tolist() + c.test_idx.tolist()) == list(range(400))
    assert [q.qid for q in c.train] == [c.queries[i].qid for i in c.train_idx]
    assert len(c.test) == 120


def test_bfcl_bm25_split_seeded(bfcl_bm25: Condition, cache_dir: Path) -> None:
    again = build_condition("bfcl", "bm25", cache_dir=cache_dir)
    assert again.meta["score_cache_hit"] is True
    np.testing.assert_array_equal(again.train_idx, bfcl_bm25.train_idx)
    np.testing.assert_array_equal(again.test_idx, bfcl_bm25.test_idx)
    assert [q.gold_rank for q in again.queries] == [q.gold_rank for q in bfcl_bm25.queries]
    other = build_condition("bfcl", "bm25", cache_dir=cache_dir, split_seed=1)
    assert len(other.train_idx) == 280
    assert not np.array_equal(other.train_idx, bfcl_bm25.train_idx)
    assert other.meta["split_seed"] == 1


def test_bfcl_bm25_sanity(bfcl_bm25: Condition) -> None:
    """BM25 on BFCL is a decent but imperfect ranker: many, not all, golds at rank 1."""
    ranks = np.array([q.gold_rank for q in bfcl_bm25.queries])
    assert 30.0 < bfcl_bm25.meta["found_at_1_pct_all"] < 100.0
    assert bfcl_bm25.meta["found_at_1_pct_all"] == pytest.approx(100.0 * np.mean(ranks == 1))
    assert bfcl_bm25.meta["found_at_5_pct_all"] == pytest.approx(100.0 * np.mean(ranks <= 5))
    assert len(bfcl_bm25.meta["corpus_fingerprint"]) == 64


def test_unknown_benchmark_lists_valid_names(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="nosuch") as exc:
        build_condition("nosuch", "bm25", cache_dir=tmp_path)
    for name in BENCHMARKS:
        assert name in str(exc.value)
    assert not any(tmp_path.iterdir())


def test_unknown_variant(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="variant"):
        build_condition("bfcl", "bm25", cache_dir=tmp_path, variant="n20")


def _queries_cell(variant: str) -> str:
    """The queries column of the module docstring's rule table, row ``bfcl/...  <variant>`` (with its continuation
    lines), as one line."""
    import benchmarks.conditions as conditions

    lines = (conditions.__doc__ or "").splitlines()
    start = next(line for line in lines if line.startswith("benchmark  variant")).index("queries")
    row = next(i for i, line in enumerate(lines) if line.split()[:2] == ["bfcl/...", variant])
    cells = [lines[row][start : start + 11]]
    cells += [line[start : start + 11] for line in itertools.takewhile(lambda x: x.startswith(" "), lines[row + 1 :])]
    return " ".join(c.strip() for c in cells if c.strip())


def test_the_docstring_states_the_sub_registry_query_counts_the_code_samples() -> None:
    """MetaTool's sub<N> samples 1,200 queries (as its top<N>), not its base's 2,000; the others keep the base's."""
    from benchmarks.conditions import candidate_rule

    assert candidate_rule("metatool", "sub50").n_queries == candidate_rule("metatool", "top50").n_queries == 1200
    assert candidate_rule("metatool", "").n_queries == 2000
    for benchmark in ("bfcl", "toolbench"):
        assert candidate_rule(benchmark, "sub50").n_queries == candidate_rule(benchmark, "").n_queries
    assert _queries_cell("sub<N>") == "as the base (metatool: 1,200 sampled, as top<N>)"


# --------------------------------------------------------------------------- seeded_split


@pytest.mark.parametrize("n", [0, 1, -3])
def test_split_needs_two(n: int) -> None:
    with pytest.raises(ValueError, match=str(n)):
        seeded_split(n, 0.7, 0)


@pytest.mark.parametrize("frac", [0.0, 1.0, -0.1, 1.5, float("nan")])
def test_split_frac_outside_open_interval(frac: float) -> None:
    with pytest.raises(ValueError, match="train_frac"):
        seeded_split(10, frac, 0)


def test_split_smallest_cases() -> None:
    tr, te = seeded_split(2, 0.5, 0)
    assert len(tr) == 1 and len(te) == 1 and {int(tr[0]), int(te[0])} == {0, 1}
    # extreme fractions still leave both sides non-empty
    assert tuple(map(len, seeded_split(10, 0.01, 0))) == (1, 9)
    assert tuple(map(len, seeded_split(10, 0.99, 0))) == (9, 1)


def test_split_sizes() -> None:
    assert tuple(map(len, seeded_split(400, 0.7, 0))) == (280, 120)
    assert tuple(map(len, seeded_split(2000, 0.7, 3))) == (1400, 600)
    assert tuple(map(len, seeded_split(474, 0.7, 0))) == (332, 142)


@given(n=st.integers(2, 500), frac=st.floats(0.01, 0.99), seed=st.integers(0, 2**32 - 1))
def test_split_properties(n: int, frac: float, seed: int) -> None:
    tr, te = seeded_split(n, frac, seed)
    assert tr.dtype.kind == "i" and te.dtype.kind == "i"
    assert len(tr) >= 1 and len(te) >= 1
    assert len(tr) == min(n - 1, max(1, round(frac * n)))
    assert np.all(np.diff(tr) > 0) and np.all(np.diff(te) > 0)
    assert np.array_equal(np.sort(np.concatenate([tr, te])), np.arange(n))
    tr2, te2 = seeded_split(n, frac, seed)
    assert np.array_equal(tr, tr2) and np.array_equal(te, te2)


@given(need=st.integers(1, 40), frac=st.floats(0.01, 0.99))
def test_fewest_to_split_is_the_fewest_that_gives_the_training_size(need: int, frac: float) -> None:
    """What ``train`` tells a user whose split is too small for the kind (``auto`` needs 2 training queries)."""
    from benchmarks.split import fewest_to_split

    n = fewest_to_split(need, frac)
    assert len(seeded_split(n, frac, 0)[0]) >= need and (n == 2 or len(seeded_split(n - 1, frac, 0)[0]) < need)
    assert (fewest_to_split(2, 0.7), fewest_to_split(2, 0.5), fewest_to_split(2, 0.3)) == (3, 3, 5)


def test_tied_tail_stats_by_hand() -> None:
    """Two lists: [3, 2, 0, 0, 0] with the gold at rank 4 (in the 3-item tied tail) and
    [3, 2, 1] with a unique lowest score (no tail) and the gold at rank 1."""
    from benchmarks.conditions import tied_tail_stats
    from envs import RankedQuery

    qs = [
        RankedQuery(np.array([3.0, 2.0, 0.0, 0.0, 0.0]), [4], "a"),
        RankedQuery(np.array([3.0, 2.0, 1.0]), [1], "b"),
    ]
    assert tied_tail_stats(qs) == {"tied_tail_pct": 30.0, "gold_in_tied_tail_pct": 50.0}


def test_condition_meta_records_the_tied_tail(bfcl_bm25: Condition) -> None:
    assert 0.0 <= bfcl_bm25.meta["tied_tail_pct"] <= 100.0
    assert 0.0 <= bfcl_bm25.meta["gold_in_tied_tail_pct"] <= 100.0


def _reference_fusion_weight(a: list, b: list, gold_pos: list) -> tuple[float, float]:
    """The fusion fit as first written: a RankedQuery per query and weight (fit_fusion_weight must agree)."""
    from benchmarks.conditions import FUSION_WEIGHTS, fused_scores
    from envs import RankedQuery

    mrr = []
    for w in FUSION_WEIGHTS:
        fused = [fused_scores(x, y, float(w)) for x, y in zip(a, b, strict=True)]
        ranks = [RankedQuery.from_scores(f, g, "ref")[0].gold_rank for f, g in zip(fused, gold_pos, strict=True)]
        mrr.append(float(np.mean([1.0 / r if r else 0.0 for r in ranks])))
    best = max(range(len(FUSION_WEIGHTS)), key=lambda i: (mrr[i], -abs(FUSION_WEIGHTS[i] - 0.5), -FUSION_WEIGHTS[i]))
    return float(FUSION_WEIGHTS[best]), mrr[best]


@given(seed=st.integers(0, 2**32 - 1))
def test_fusion_weight_is_the_one_ranked_queries_give(seed: int) -> None:
    """Scores with many ties (rounded, constant lists, signed zeros) and several gold items: the fitted weight
    and its MRR are those of ranking every fused list with RankedQuery.from_scores."""
    from benchmarks.conditions import fit_fusion_weight

    rng = np.random.default_rng(seed)
    a, b, gold = [], [], []
    for _ in range(12):
        n = int(rng.integers(1, 9))
        a.append(np.round(rng.normal(size=n), 1) * rng.choice([0.0, -0.0, 1.0], p=[0.1, 0.1, 0.8]))
        b.append(np.round(rng.normal(size=n), 1))
        gold.append(sorted(rng.choice(n, size=int(rng.integers(0, min(n, 3) + 1)), replace=False).tolist()))
    assert fit_fusion_weight(a, b, gold) == _reference_fusion_weight(a, b, gold)


def test_first_relevant_rank_refuses_what_from_scores_refuses() -> None:
    from envs.ranked import first_relevant_rank

    with pytest.raises(ValueError, match="query 'q': score of candidate 1 is nan"):
        first_relevant_rank([1.0, float("nan")], [0], "q")
    with pytest.raises(ValueError, match="query 'q': relevant candidate index out of range 0..1"):
        first_relevant_rank([1.0, 2.0], [2], "q")
    assert first_relevant_rank([1.0, 2.0], [], "q") == 0
    assert first_relevant_rank([2.0, 2.0, 3.0], [1], "q") == 3  # one higher, one tied before it


def test_source_memo_builds_the_same_conditions_and_keeps_nothing_outside(cache_dir: Path) -> None:
    """Inside source_memo the five splits share one corpus, score matrix and candidate draw, and every
    condition is the one built without it; the memo is gone after the block."""
    import benchmarks.conditions as bc
    from experiments.runner import scores_digest

    def sig(c: Condition) -> tuple:
        meta = {k: v for k, v in c.meta.items() if not k.startswith("seconds") and k != "score_cache_hit"}
        return scores_digest(c.queries), [q.qid for q in c.train], [q.qid for q in c.test], repr(sorted(meta.items()))

    loads = []
    real = bc._load_corpus
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bc, "_load_corpus", lambda *a: loads.append(a) or real(*a))
        with bc.source_memo():
            memo = [build_condition("bfcl", "bm25", cache_dir=cache_dir, split_seed=s) for s in (0, 1)]
            assert bc._MEMO  # noqa: SLF001 - the memo is live inside the block
        assert len(loads) == 1
        assert bc._MEMO is None  # noqa: SLF001
        plain = [build_condition("bfcl", "bm25", cache_dir=cache_dir, split_seed=s) for s in (0, 1)]
        assert len(loads) == 3
    assert [sig(c) for c in memo] == [sig(c) for c in plain]
    assert sig(memo[0]) != sig(memo[1])  # the splits still differ
