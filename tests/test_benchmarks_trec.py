"""TREC run / qrels parsing and conversion to RankedQuery, cross-checked against ir_measures."""

from __future__ import annotations

import hashlib
import itertools
import random
from pathlib import Path

import ir_measures
import numpy as np
import pytest
from ir_measures import Qrel, R, ScoredDoc, Success

from benchmarks.corpus import DataError
from benchmarks.trec import (
    SKIP_NO_QRELS,
    SKIP_NO_RELEVANT,
    SKIP_QRELS_NOT_IN_RUN,
    load_run_queries,
    rank_docs,
    ranked_queries_from_run,
    read_qrels,
    read_run,
)
from envs.ranked import RankedQuery


def _write(tmp_path: Path, name: str, text: str | bytes) -> Path:
    p = tmp_path / name
    if isinstance(text, bytes):
        p.write_bytes(text)
    else:
        p.write_text(text, encoding="utf-8")
    return p


def _recall_at(q: RankedQuery, k: int) -> float:
    return float(np.sum(q.relevant_ranks <= k)) / q.n_relevant


# ---------------------------------------------------------------- read_run


def test_read_run_good(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "run.txt",
        "q1 Q0 d1 1 12.5 bm25\nq1 Q0 d2 2 -3e-1 bm25\n\nq2\tQ0\td9\t1\t7\tbm25\r\nq1 0 d3 3 -4 bm25\n",
    )
    run = read_run(p)
    assert list(run) == ["q1", "q2"]
    assert run["q1"] == [("d1", 12.5), ("d2", -0.3), ("d3", -4.0)]
    assert run["q2"] == [("d9", 7.0)]


def test_read_run_tolerates_bom(tmp_path: Path) -> None:
    p = _write(tmp_path, "run.txt", "\ufeffq1 Q0 d1 1 1.0 t\n")
    assert read_run(p) == {"q1": [("d1", 1.0)]}


@pytest.mark.parametrize(
    ("body", "line", "needle"),
    [
        ("q1 Q0 d1 1 1.0 t\nq1 Q0 d2 2 0.5\n", 2, "expected 6 columns"),
        ("q1 Q0 d1 1 1.0 t extra\n", 1, "expected 6 columns"),
        ("q1 Q0 d1 1 1.0 t\nq1 Q0 d2 2 high t\n", 2, "not a number"),
        ("q1 Q0 d1 1 nan t\n", 1, "NaN/inf"),
        ("q1 Q0 d1 1 1.0 t\nq1 Q0 d2 2 -inf t\n", 2, "NaN/inf"),
        ("q1 Q0 d1 1 1e999 t\n", 1, "NaN/inf"),
        ("q1 Q0 d1 one 1.0 t\n", 1, "rank must be an integer"),
        ("q1 Q0 d1 1 1.0 t\nq2 Q0 d1 1 1.0 t\n\nq1 Q0 d1 2 0.5 t\n", 4, "duplicate document"),
    ],
)
def test_read_run_malformed(tmp_path: Path, body: str, line: int, needle: str) -> None:
    p = _write(tmp_path, "bad.run", body)
    with pytest.raises(DataError) as e:
        read_run(p)
    assert f"{p}:{line}:" in str(e.value)
    assert needle in str(e.value)


def test_read_run_duplicate_names_first_line(tmp_path: Path) -> None:
    p = _write(tmp_path, "bad.run", "q1 Q0 d1 1 1.0 t\nq1 Q0 d1 2 0.5 t\n")
    with pytest.raises(DataError, match="first at line 1"):
        read_run(p)


def test_read_run_not_utf8(tmp_path: Path) -> None:
    p = _write(tmp_path, "bad.run", b"q1 Q0 d1 1 1.0 t\nq1 Q0 d\xff2 2 0.5 t\n")
    with pytest.raises(DataError) as e:
        read_run(p)
    assert f"{p}:2:" in str(e.value) and "not UTF-8" in str(e.value)


@pytest.mark.parametrize("body", ["", "\n  \n\n"])
def test_read_run_empty(tmp_path: Path, body: str) -> None:
    p = _write(tmp_path, "empty.run", body)
    with pytest.raises(DataError) as e:
        read_run(p)
    # no line to name in an empty file: the message names the file
    assert str(p) in str(e.value) and "empty" in str(e.value)


# ---------------------------------------------------------------- read_qrels


def test_read_qrels_trec(tmp_path: Path) -> None:
    p = _write(tmp_path, "qrels.txt", "q1 0 d1 1\nq1 0 d2 0\n\nq2 Q0 d3 2.0\r\nq2 0 d4 -1\n")
    assert read_qrels(p) == {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2, "d4": -1}}


def test_read_qrels_beir(tmp_path: Path) -> None:
    p = _write(tmp_path, "test.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\t0\nq2\td3\t2\n")
    assert read_qrels(p) == {"q1": {"d1": 1, "d2": 0}, "q2": {"d3": 2}}


def test_read_qrels_matches_ir_measures(tmp_path: Path) -> None:
    p = _write(tmp_path, "qrels.txt", "q1 0 d1 1\nq1 0 d2 0\nq2 0 d3 2\nq2 0 d1 3\n")
    ours = read_qrels(p)
    theirs: dict[str, dict[str, int]] = {}
    for q in ir_measures.read_trec_qrels(str(p)):
        theirs.setdefault(q.query_id, {})[q.doc_id] = q.relevance
    assert ours == theirs


@pytest.mark.parametrize(
    ("name", "body", "line", "needle"),
    [
        ("q.txt", "q1 0 d1 1\nq1 0 d2 1 extra\n", 2, "expected 4 columns"),
        ("q.txt", "q1 0 d1 1\nq1 d2 1\n", 2, "expected 4 columns"),
        ("q.txt", "q1 d1 1\n", 1, "BEIR header"),
        ("q.txt", "q1 0 d1 1\nq1 0 d2 yes\n", 2, "relevance must be an integer"),
        ("q.txt", "q1 0 d1 1.5\n", 1, "relevance must be an integer"),
        ("q.txt", "q1 0 d1 1\nq2 0 d1 1\nq1 0 d1 0\n", 3, "duplicate judgment"),
        ("q.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\nq1\td2\n", 3, "expected 3 tab"),
        ("q.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1\t0\n", 2, "expected 3 tab"),
        ("q.tsv", "query-id\tcorpus-id\tscore\nq1\td1\tx\n", 2, "relevance must be an integer"),
    ],
)
def test_read_qrels_malformed(tmp_path: Path, name: str, body: str, line: int, needle: str) -> None:
    p = _write(tmp_path, name, body)
    with pytest.raises(DataError) as e:
        read_qrels(p)
    assert f"{p}:{line}:" in str(e.value)
    assert needle in str(e.value)


def test_read_qrels_not_utf8(tmp_path: Path) -> None:
    p = _write(tmp_path, "q.txt", b"q1 0 d1 1\n\nq1 0 \xe9t\xe9 1\n")
    with pytest.raises(DataError) as e:
        read_qrels(p)
    assert f"{p}:3:" in str(e.value) and "not UTF-8" in str(e.value)


@pytest.mark.parametrize("body", ["", "\n\n", "query-id\tcorpus-id\tscore\n"])
def test_read_qrels_empty(tmp_path: Path, body: str) -> None:
    p = _write(tmp_path, "q.tsv", body)
    with pytest.raises(DataError) as e:
        read_qrels(p)
    assert str(p) in str(e.value) and "empty" in str(e.value)


# ---------------------------------------------------------------- ranking


def test_ties_broken_by_docid_ascending() -> None:
    docs = [("d3", 1.0), ("b", 2.0), ("d10", 1.0), ("a", 2.0), ("d2", 1.0), ("z", 0.5)]
    expected = [("a", 2.0), ("b", 2.0), ("d10", 1.0), ("d2", 1.0), ("d3", 1.0), ("z", 0.5)]
    assert rank_docs(docs) == expected
    qrels = {"q": {"d2": 1, "z": 1}}
    seen = set()
    for perm in itertools.permutations(docs):
        (rq,), skipped = ranked_queries_from_run({"q": list(perm)}, qrels)
        seen.add((tuple(rq.scores.tolist()), tuple(rq.relevant_ranks.tolist())))
        assert skipped == {}
    # identical result for every file order; "d10" < "d2" (string order)
    assert seen == {((2.0, 2.0, 1.0, 1.0, 1.0, 0.5), (4, 6))}


def test_tie_at_the_cut_decides_success() -> None:
    run = {"q": [("b", 1.0), ("a", 1.0)]}
    (rq,), _ = ranked_queries_from_run(run, {"q": {"b": 1}})
    assert rq.gold_rank == 2  # "a" ranks first on the tie
    assert not rq.found_at(1) and rq.found_at(2)


def test_ir_measures_breaks_ties_the_other_way() -> None:
    """Documents why the cross-check below avoids ties: pytrec_eval sorts docid descending."""
    qrels = [Qrel("q", "b", 1)]
    run = [ScoredDoc("q", "a", 1.0), ScoredDoc("q", "b", 1.0)]
    theirs = ir_measures.calc_aggregate([Success @ 1], qrels, run)[Success @ 1]
    (rq,), _ = ranked_queries_from_run({"q": [("a", 1.0), ("b", 1.0)]}, {"q": {"b": 1}})
    assert theirs == 1.0  # "b" first for them
    assert not rq.found_at(1)  # "a" first for us


def test_relevant_ranks_r_and_n() -> None:
    run = {"q1": [("d1", 0.1), ("d2", 0.9), ("d3", 0.5)], "q2": [("x", 1.0), ("y", 0.0)]}
    qrels = {"q1": {"d1": 2, "d3": 1, "d2": 0}, "q2": {"nope": 1}}
    (q1, q2), skipped = ranked_queries_from_run(run, qrels)
    assert skipped == {}
    assert q1.qid == "q1" and q1.scores.tolist() == [0.9, 0.5, 0.1]
    assert q1.relevant_ranks.tolist() == [2, 3]
    assert (q1.n_candidates, q1.n_relevant) == (3, 2)
    # relevant doc absent from the run: kept, never found
    assert q2.relevant_ranks.tolist() == [] and q2.gold_rank == 0
    assert (q2.n_candidates, q2.n_relevant) == (2, 1)


def test_truncated_run_explicit_n() -> None:
    run = {"q": [("d5", 3.0), ("d7", 2.0), ("d1", 1.0)]}
    qrels = {"q": {"d7": 1, "d100": 1, "d200": 2, "d300": 0}}
    (rq,), skipped = ranked_queries_from_run(run, qrels, n_candidates=5183)
    assert skipped == {}
    assert rq.length == 3
    assert rq.n_candidates == 5183
    assert rq.n_relevant == 3  # two relevant docs the run never retrieved still count
    assert rq.relevant_ranks.tolist() == [2]


def test_truncated_run_errors_name_qid() -> None:
    run = {"query-7": [("d1", 3.0), ("d2", 2.0), ("d3", 1.0)]}
    with pytest.raises(DataError, match="'query-7'.*n_candidates=2 is smaller than its 3 ranked"):
        ranked_queries_from_run(run, {"query-7": {"d1": 1}}, n_candidates=2)
    many = {"query-7": {f"r{i}": 1 for i in range(5)}}
    with pytest.raises(DataError, match="'query-7'.*5 relevant.*pass n_candidates"):
        ranked_queries_from_run(run, many)
    with pytest.raises(DataError, match="'query-7'.*n_candidates=4 is smaller than its 5 relevant"):
        ranked_queries_from_run(run, many, n_candidates=4)
    (rq,), _ = ranked_queries_from_run(run, many, n_candidates=10)
    assert (rq.n_candidates, rq.n_relevant) == (10, 5)


def test_bad_arguments() -> None:
    run = {"q": [("d", 1.0)]}
    with pytest.raises(ValueError, match="on_missing_qrels"):
        ranked_queries_from_run(run, {"q": {"d": 1}}, on_missing_qrels="drop")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n_candidates"):
        ranked_queries_from_run(run, {"q": {"d": 1}}, n_candidates=0)


def test_skips_are_counted() -> None:
    run = {
        "ok": [("d1", 1.0)],
        "noqrels1": [("d1", 1.0)],
        "noqrels2": [("d1", 1.0)],
        "allzero": [("d1", 1.0)],
    }
    qrels = {
        "ok": {"d1": 1},
        "allzero": {"d1": 0, "d2": -1},
        "extra1": {"d": 1},
        "extra2": {"d": 0},
    }
    out, skipped = ranked_queries_from_run(run, qrels)
    assert [q.qid for q in out] == ["ok"]
    assert skipped == {SKIP_NO_QRELS: 2, SKIP_NO_RELEVANT: 1, SKIP_QRELS_NOT_IN_RUN: 2}
    with pytest.raises(DataError, match="'noqrels1'.*no qrels"):
        ranked_queries_from_run(run, qrels, on_missing_qrels="error")


def test_load_run_queries(tmp_path: Path) -> None:
    run_p = _write(tmp_path, "run.txt", "q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1.0 t\nq9 Q0 a 1 1.0 t\n")
    qrels_p = _write(tmp_path, "qrels.tsv", "query-id\tcorpus-id\tscore\nq1\tb\t1\nq1\tc\t1\n")
    loaded = load_run_queries(run_p, qrels_p, n_candidates=100)
    queries, skipped, shas = loaded
    assert [q.qid for q in queries] == ["q1"]
    assert queries[0].relevant_ranks.tolist() == [2]
    assert (queries[0].n_candidates, queries[0].n_relevant) == (100, 2)
    assert skipped == {SKIP_NO_QRELS: 1}
    assert shas == {
        str(run_p): hashlib.sha256(run_p.read_bytes()).hexdigest(),
        str(qrels_p): hashlib.sha256(qrels_p.read_bytes()).hexdigest(),
    }
    assert loaded.queries is queries


# ---------------------------------------------------------------- cross-check with ir_measures


def _tie_free_example() -> tuple[dict[str, list[tuple[str, float]]], dict[str, dict[str, int]]]:
    run = {
        # relevant at ranks 2 and 4, a third relevant doc never retrieved (R=3)
        "q1": [("d1", 9.0), ("d2", 8.5), ("d3", 7.0), ("d4", 6.0), ("d5", 5.5), ("d6", 1.0)],
        # relevant at rank 1
        "q2": [("a", 0.9), ("b", 0.8), ("c", 0.7)],
        # relevant at rank 5 only, a judged non-relevant doc at rank 1
        "q3": [("x1", -1.0), ("x2", -2.0), ("x3", -3.0), ("x4", -4.0), ("x5", -5.0), ("x6", -6.0)],
        # no relevant doc retrieved
        "q4": [("m", 3.0), ("n", 2.0)],
        # two relevant at ranks 1 and 3, file order scrambled
        "q5": [("p3", 0.2), ("p1", 0.6), ("p4", 0.1), ("p2", 0.4)],
    }
    qrels = {
        "q1": {"d2": 1, "d4": 2, "d99": 1, "d1": 0},
        "q2": {"a": 1},
        "q3": {"x5": 3, "x1": 0},
        "q4": {"zz": 1},
        "q5": {"p1": 1, "p3": 1},
    }
    return run, qrels


@pytest.mark.parametrize("shuffle_seed", [None, 0, 1])
def test_success_and_recall_match_ir_measures(shuffle_seed: int | None) -> None:
    run, qrels = _tie_free_example()
    if shuffle_seed is not None:
        rng = random.Random(shuffle_seed)
        run = {q: rng.sample(docs, len(docs)) for q, docs in run.items()}
    ours, skipped = ranked_queries_from_run(run, qrels)
    assert skipped == {} and len(ours) == 5
    ir_qrels = [Qrel(q, d, r) for q, ds in qrels.items() for d, r in ds.items()]
    ir_run = [ScoredDoc(q, d, s) for q, ds in run.items() for d, s in ds]
    ks = (1, 2, 3, 5)
    measures = [m for k in ks for m in (Success @ k, R @ k)]
    per_query = {(m.query_id, m.measure): m.value for m in ir_measures.iter_calc(measures, ir_qrels, ir_run)}
    agg = ir_measures.calc_aggregate(measures, ir_qrels, ir_run)
    for k in ks:
        for q in ours:
            assert float(q.found_at(k)) == pytest.approx(per_query[(q.qid, Success @ k)]), (
                q.qid,
                k,
            )
            assert _recall_at(q, k) == pytest.approx(per_query[(q.qid, R @ k)]), (q.qid, k)
        assert np.mean([float(q.found_at(k)) for q in ours]) == pytest.approx(agg[Success @ k])
        assert np.mean([_recall_at(q, k) for q in ours]) == pytest.approx(agg[R @ k])
    # sanity: the example exercises R > retrieved, misses and deep hits
    by_id = {q.qid: q for q in ours}
    assert by_id["q1"].relevant_ranks.tolist() == [2, 4] and by_id["q1"].n_relevant == 3
    assert by_id["q3"].gold_rank == 5 and by_id["q4"].gold_rank == 0
    assert by_id["q5"].relevant_ranks.tolist() == [1, 3]
