"""TREC run / qrels parsing and conversion to RankedQuery, cross-checked against ir_measures."""

from __future__ import annotations

import gzip
import hashlib
import itertools
import random
import tracemalloc
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
    WrittenRun,
    iter_run_queries,
    load_run_queries,
    rank_docs,
    ranked_queries_from_run,
    read_qrels,
    read_run,
    truncate_run,
    write_trec_run,
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
        ("q1 Q0 d1 1 Infinity t\n", 1, "NaN/inf"),
        ("q1 Q0 d1 1 1.0 t\nq1 Q0 d2 2 1_0 t\n", 2, "score '1_0' is not a number"),  # float() reads it as 10
        ("q1 Q0 d1 1 1e_3 t\n", 1, "not a number"),
        ("q1 Q0 d1 1 \u0661 t\n", 1, "not a number"),  # an Arabic-Indic 1, which float() takes
        ("q1 Q0 d1 1 0x1p3 t\n", 1, "not a number"),
        ("q1 Q0 d1 one 1.0 t\n", 1, "rank must be an integer"),
        ("q1 Q0 d1 1_0 1.0 t\n", 1, "rank must be an integer"),
        ("q1 Q0 d1 1 1.0 t\nq2 Q0 d1 1 1.0 t\n\nq1 Q0 d1 2 0.5 t\n", 4, "duplicate document"),
    ],
)
def test_read_run_malformed(tmp_path: Path, body: str, line: int, needle: str) -> None:
    p = _write(tmp_path, "bad.run", body)
    with pytest.raises(DataError) as e:
        read_run(p)
    assert f"{p}:{line}:" in str(e.value)
    assert needle in str(e.value)


def test_read_run_takes_plain_decimal_and_exponent_scores(tmp_path: Path) -> None:
    forms = ["3", "-1.5", "2e-3", "+4.", ".5", "-6E+2", "007", "1.25e1"]
    p = _write(tmp_path, "run.txt", "".join(f"q1 Q0 d{i} {i + 1} {f} t\n" for i, f in enumerate(forms)))
    assert read_run(p) == {"q1": [(f"d{i}", float(f)) for i, f in enumerate(forms)]}


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
        ("q.txt", "q1 0 d1 1\nq1 0 d2 1_0\n", 2, "relevance must be an integer, got '1_0'"),
        ("q.tsv", "query-id\tcorpus-id\tscore\nq1\td1\t1_0\n", 2, "relevance must be an integer"),
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
    queries, skipped, shas, examples = loaded
    assert [q.qid for q in queries] == ["q1"]
    assert queries[0].relevant_ranks.tolist() == [2]
    assert (queries[0].n_candidates, queries[0].n_relevant) == (100, 2)
    assert skipped == {SKIP_NO_QRELS: 1} and examples == {SKIP_NO_QRELS: ["q9"]}
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


# ---------------------------------------------------------------- streaming read


def test_iter_run_queries_groups_and_ranks(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        "run.txt",
        "\ufeffq2 Q0 b 1 1.0 t\nq2 Q0 a 2 1.0 t\n\nq2 Q0 c 3 3.5 t\nq1\tQ0\tx 1 -2 t\r\nq1 Q0 y 2 0.5 t\n",
    )
    got = list(iter_run_queries(p))
    assert got == [("q2", [("c", 3.5), ("a", 1.0), ("b", 1.0)]), ("q1", [("y", 0.5), ("x", -2.0)])]
    # same lists as the in-memory reader followed by rank_docs
    assert got == [(q, rank_docs(d)) for q, d in read_run(p).items()]


def test_iter_run_queries_is_lazy(tmp_path: Path) -> None:
    p = _write(tmp_path, "run.txt", "q1 Q0 a 1 1 t\nq2 Q0 a 1 1 t\nq2 Q0 a 2 0 t\n")
    it = iter_run_queries(p)
    assert next(it) == ("q1", [("a", 1.0)])  # the error further down is not reached yet
    with pytest.raises(DataError, match=f"{p}:3: duplicate document 'a' for query 'q2' \\(first at line 2\\)"):
        next(it)


def test_iter_run_queries_ungrouped(tmp_path: Path) -> None:
    p = _write(tmp_path, "run.txt", "q1 Q0 a 1 1 t\nq2 Q0 a 1 1 t\nq1 Q0 b 2 0.5 t\n")
    with pytest.raises(DataError) as e:
        list(iter_run_queries(p))
    msg = str(e.value)
    assert msg.startswith(f"{p}:3: query 'q1' reappears after other queries")
    assert "grouped by query" in msg and "sort -k1,1 -s" in msg
    read_run(p)  # the in-memory reader accepts any order


@pytest.mark.parametrize(
    ("body", "line", "needle"),
    [
        ("q1 Q0 d1 1 1.0 t\nq1 Q0 d2 2 0.5\n", 2, "expected 6 columns"),
        ("q1 Q0 d1 1 1.0 t\nq1 Q0 d2 2 high t\n", 2, "not a number"),
        ("q1 Q0 d1 1 nan t\n", 1, "NaN/inf"),
        ("q1 Q0 d1 1 1.0 t\nq1 Q0 d2 2 1_0 t\n", 2, "not a number"),
        ("q1 Q0 d1 one 1.0 t\n", 1, "rank must be an integer"),
        ("q1 Q0 d1 1 1.0 t\n\nq1 Q0 d1 2 0.5 t\n", 3, "duplicate document"),
    ],
)
def test_iter_run_queries_malformed_same_messages(tmp_path: Path, body: str, line: int, needle: str) -> None:
    p = _write(tmp_path, "bad.run", body)
    with pytest.raises(DataError) as streamed:
        list(iter_run_queries(p))
    with pytest.raises(DataError) as in_memory:
        read_run(p)
    assert str(streamed.value) == str(in_memory.value)
    assert f"{p}:{line}:" in str(streamed.value) and needle in str(streamed.value)


@pytest.mark.parametrize("body", [b"", b"\n \n", b"q1 Q0 d\xff 1 1 t\n"])
def test_iter_run_queries_empty_or_not_utf8(tmp_path: Path, body: bytes) -> None:
    p = _write(tmp_path, "bad.run", body)
    with pytest.raises(DataError) as e:
        list(iter_run_queries(p))
    assert str(p) in str(e.value) and ("empty" in str(e.value) or "not UTF-8" in str(e.value))


# ---------------------------------------------------------------- gzip-compressed files

_GZ_RUN = "q2 Q0 b 1 1.0 t\nq2 Q0 a 2 1.0 t\nq2 Q0 c 3 3.5 t\nq1 Q0 x 1 -2 t\nq1 Q0 y 2 0.5 t\n"
_GZ_QRELS = "q1 0 y 1\nq2 0 a 0\nq2 0 c 2\n"


@pytest.mark.parametrize("name", ["run.gz", "run.txt.gz", "run.txt"])  # detected by magic bytes, not the name
def test_gzipped_run_and_qrels_read_like_plain_ones(tmp_path: Path, name: str) -> None:
    plain_run, plain_qrels = _write(tmp_path, "plain.run", _GZ_RUN), _write(tmp_path, "plain.qrels", _GZ_QRELS)
    run = _write(tmp_path, name, gzip.compress(_GZ_RUN.encode()))
    qrels = _write(tmp_path, f"qrels-{name}", gzip.compress(_GZ_QRELS.encode()))
    beir = _write(tmp_path, f"beir-{name}", gzip.compress(b"query-id\tcorpus-id\tscore\nq1\ty\t1\n"))
    assert read_run(run) == read_run(plain_run)
    assert list(iter_run_queries(run)) == list(iter_run_queries(plain_run))
    assert read_qrels(qrels) == read_qrels(plain_qrels)
    assert read_qrels(beir) == {"q1": {"y": 1}}
    loaded = load_run_queries(run, qrels)
    assert [(q.qid, q.relevant_ranks.tolist()) for q in loaded.queries] == [("q2", [1]), ("q1", [1])]
    assert loaded.inputs_sha256[str(run)] == hashlib.sha256(run.read_bytes()).hexdigest()  # the file as given
    if name.endswith(".gz"):  # ir_measures reads .gz files (by suffix) to the same scores
        theirs = {(d.query_id, d.doc_id): d.score for d in ir_measures.read_trec_run(str(run))}
        assert theirs == {(q, d): s for q, docs in read_run(run).items() for d, s in docs}


def test_truncate_run_reads_gzip_and_writes_plain_text(tmp_path: Path) -> None:
    run = _write(tmp_path, "run.gz", gzip.compress(_GZ_RUN.encode()))
    written = truncate_run(run, tmp_path / "out.run", lambda qid, scores: 1, "t")  # noqa: ARG005
    assert written == WrittenRun(2, 2)
    assert (tmp_path / "out.run").read_text() == "q2 Q0 c 1 3.5 t\nq1 Q0 y 1 0.5 t\n"


@pytest.mark.parametrize("cut", [True, False])
def test_corrupt_gzip_is_a_data_error_naming_the_file(tmp_path: Path, cut: bool) -> None:
    def corrupt(text: str) -> bytes:  # truncated stream, or the magic bytes followed by no gzip at all
        return gzip.compress(text.encode())[:-12] if cut else b"\x1f\x8b" + b"not a gzip stream" * 4

    run = _write(tmp_path, "bad.run.gz", corrupt(_GZ_RUN))
    qrels = _write(tmp_path, "bad.qrels", corrupt(_GZ_QRELS))
    for read, path in ((read_run, run), (lambda p: list(iter_run_queries(p)), run), (read_qrels, qrels)):
        with pytest.raises(DataError) as e:
            read(path)
        assert str(e.value).startswith(f"{path}: corrupt or truncated gzip file")


# ---------------------------------------------------------------- writing


def test_write_trec_run_is_read_by_ir_measures(tmp_path: Path) -> None:
    rows: list[tuple[str, list[tuple[str, float]]]] = [
        ("q1", [("d9", 3.25), ("d2", 1e-12), ("d7", -0.5)]),
        ("q2", [("x", np.float64(0.1))]),
        ("q_empty", []),
        ("q3", [("a", 2.0), ("b", 1.0)]),
    ]
    out = tmp_path / "out.run"
    assert write_trec_run(iter(rows), out, "bor-dqn") == WrittenRun(3, 6)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[:4] == [
        "q1 Q0 d9 1 3.25 bor-dqn",
        "q1 Q0 d2 2 1e-12 bor-dqn",
        "q1 Q0 d7 3 -0.5 bor-dqn",
        "q2 Q0 x 1 0.1 bor-dqn",
    ]
    assert all(len(line.split()) == 6 for line in lines)  # what trec_eval requires
    theirs = [(d.query_id, d.doc_id, d.score) for d in ir_measures.read_trec_run(str(out))]
    ours = [(q, d, float(s)) for q, docs in rows for d, s in docs]
    assert theirs == ours
    # and our own readers round-trip it exactly
    assert list(iter_run_queries(out)) == [(q, [(d, float(s)) for d, s in docs]) for q, docs in rows if docs]
    qrels = _write(tmp_path, "qrels.txt", "q1 0 d2 1\nq3 0 b 1\n")
    measures = [Success @ 1, Success @ 2]
    agg = ir_measures.calc_aggregate(
        measures, ir_measures.read_trec_qrels(str(qrels)), ir_measures.read_trec_run(str(out))
    )
    assert agg[Success @ 1] == 0.0 and agg[Success @ 2] == 1.0


def test_write_trec_run_scores_round_trip_exactly(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    scores = rng.normal(size=50) * 10.0 ** rng.integers(-30, 30, size=50)
    out = tmp_path / "out.run"
    write_trec_run([("q", [(f"d{i}", s) for i, s in enumerate(scores)])], out, "t")
    assert [s for _, s in read_run(out)["q"]] == scores.tolist()


@pytest.mark.parametrize(
    ("rows", "tag", "needle"),
    [
        ([("q 1", [("d", 1.0)])], "t", "qid"),
        ([("", [("d", 1.0)])], "t", "qid"),
        ([("q", [("d\t2", 1.0)])], "t", "docid"),
        ([("q", [("d", 1.0)])], "my tag", "tag"),
        ([("q", [("d", 1.0)])], "", "tag"),
        ([("q", [("d", float("nan"))])], "t", "not finite"),
        ([("q", [("d", "1_0")])], "t", "score '1_0' is not a number"),
        ([("q", [("d", 1.0), ("d", 0.5)])], "t", "appears twice"),
        ([("q", [("d", 1.0)]), ("r", [("d", 1.0)]), ("q", [("e", 1.0)])], "t", "'q' appears twice"),
    ],
)
def test_write_trec_run_rejects_and_leaves_target(tmp_path: Path, rows: list, tag: str, needle: str) -> None:
    out = _write(tmp_path, "out.run", "previous content\n")
    with pytest.raises(ValueError, match=needle):
        write_trec_run(rows, out, tag)
    assert out.read_text() == "previous content\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.run"]  # no temporary left


def test_write_trec_run_accepted_by_trec_eval_format(tmp_path: Path) -> None:
    """The columns trec_eval parses: qid, iter, docno, rank (int), sim (float), tag."""
    out = tmp_path / "out.run"
    write_trec_run([("301", [("FBIS3-10082", 12.0), ("FBIS3-10169", 11.5)])], out, "STANDARD")
    for i, line in enumerate(out.read_text().splitlines(), start=1):
        qid, it, docno, rank, sim, tag = line.split()
        assert (qid, it, tag, int(rank)) == ("301", "Q0", "STANDARD", i)
        float(sim)


# ---------------------------------------------------------------- truncation


def _generated_run(path: Path, n_queries: int, n_docs: int, seed: int = 0) -> dict[str, list[tuple[str, float]]]:
    """A run in shuffled line order within each query (grouped by query), with some tied scores."""
    rng = random.Random(seed)
    run: dict[str, list[tuple[str, float]]] = {}
    with open(path, "w", encoding="utf-8") as f:
        for q in range(n_queries):
            docs = [(f"doc{q}_{i}", float(rng.randint(0, n_docs // 2))) for i in range(n_docs)]
            rng.shuffle(docs)
            run[f"q{q}"] = docs
            for r, (d, s) in enumerate(docs, start=1):
                f.write(f"q{q} Q0 {d} {r} {s!r} gen\n")
    return run


def test_truncate_run_output(tmp_path: Path) -> None:
    src = tmp_path / "in.run"
    run = _generated_run(src, 30, 40)
    seen: list[tuple[str, int]] = []

    def depth(qid: str, scores: np.ndarray) -> int:
        assert scores.dtype == np.float64 and np.all(np.diff(scores) <= 0)  # ranked, descending
        seen.append((qid, len(scores)))
        return int(qid[1:]) % 7  # 0..6; 0 writes nothing

    out = tmp_path / "out.run"
    stats = truncate_run(src, out, depth, "trunc")
    expected = {q: rank_docs(d)[: int(q[1:]) % 7] for q, d in run.items()}
    expected = {q: d for q, d in expected.items() if d}
    assert stats == WrittenRun(len(expected), sum(len(d) for d in expected.values()))
    assert seen == [(q, 40) for q in run]
    assert read_run(out) == expected
    lines = out.read_text().splitlines()
    assert all(line.endswith(" trunc") for line in lines)
    ranks: dict[str, list[int]] = {}
    for line in lines:
        q, _, _, r, _, _ = line.split()
        ranks.setdefault(q, []).append(int(r))
    assert all(r == list(range(1, len(r) + 1)) for r in ranks.values())


def test_truncate_run_depth_larger_than_list_and_in_place(tmp_path: Path) -> None:
    src = _write(tmp_path, "in.run", "q1 Q0 b 1 1 t\nq1 Q0 a 2 1 t\nq2 Q0 z 1 5 t\n")
    assert truncate_run(src, src, lambda q, s: np.int64(10), "all") == WrittenRun(2, 3)
    assert src.read_text().splitlines() == ["q1 Q0 a 1 1.0 all", "q1 Q0 b 2 1.0 all", "q2 Q0 z 1 5.0 all"]


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3", None])
def test_truncate_run_bad_depth(tmp_path: Path, bad: object) -> None:
    src = _write(tmp_path, "in.run", "q1 Q0 a 1 1 t\n")
    out = tmp_path / "out.run"
    with pytest.raises(ValueError, match="'q1': depth"):
        truncate_run(src, out, lambda q, s: bad, "t")  # type: ignore[arg-type,return-value]
    assert not out.exists()


def test_truncate_run_error_midway_leaves_no_output(tmp_path: Path) -> None:
    src = _write(tmp_path, "in.run", "q1 Q0 a 1 1 t\nq2 Q0 a 1 1 t\nq1 Q0 b 1 1 t\n")
    out = _write(tmp_path, "out.run", "old\n")
    with pytest.raises(DataError, match="in.run:3: query 'q1' reappears"):
        truncate_run(src, out, lambda q, s: 1, "t")
    assert out.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.run", "out.run"]


def test_truncate_run_memory_is_bounded(tmp_path: Path) -> None:
    """Peak traced memory stays far below the input size: one query is held at a time."""
    src = tmp_path / "big.run"
    n_queries, n_docs, pad = 1000, 50, "x" * 200  # long docids: a large file in few lines
    with open(src, "w", encoding="utf-8") as f:
        for q in range(n_queries):
            f.writelines(f"query{q} Q0 {pad}{q}_{i} {i + 1} {1000.0 - i * 0.5!r} big\n" for i in range(n_docs))
    size = src.stat().st_size
    assert size > 10_000_000
    out = tmp_path / "top5.run"
    tracemalloc.start()
    try:
        stats = truncate_run(src, out, lambda q, s: 5, "top5")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert stats == WrittenRun(n_queries, 5 * n_queries)
    assert peak < size / 20, (peak, size)  # holding the whole run would take more than its file size
    with open(out, encoding="utf-8") as f:
        first = [next(f).split() for _ in range(6)]
    assert first[0] == ["query0", "Q0", f"{pad}0_0", "1", "1000.0", "top5"]
    assert first[4][:4] == ["query0", "Q0", f"{pad}0_4", "5"]
    assert first[5][:4] == ["query1", "Q0", f"{pad}1_0", "1"]
    with open(out, encoding="utf-8") as f:
        assert sum(1 for _ in f) == 5 * n_queries


# ---------------------------------------------------------------- input digests


# ---------------------------------------------------------------- condition names of own runs


def test_run_condition_name_hashes_the_contents_not_the_paths() -> None:
    from benchmarks.names import ConditionId, inputs_hash, run_condition_name

    a, b = "a" * 64, "b" * 64
    h = hashlib.sha256(f"run {a}\nqrels {b}\n".encode()).hexdigest()[:6]
    opts = {"run": "/data/my.run", "run_sha256": a, "qrels_sha256": b, "qrels": "/data/my.qrels"}
    assert inputs_hash(a, b) == h
    assert run_condition_name(opts) == f"run-my-{h}"
    assert run_condition_name({**opts, "run": "/elsewhere/deeper/my.run", "qrels": "/x/q"}) == f"run-my-{h}"
    assert run_condition_name({**opts, "run": "my.run.gz"}) == f"run-my-{h}"  # .gz is not part of the stem
    assert run_condition_name({**opts, "run_sha256": "c" * 64}) != f"run-my-{h}"
    assert run_condition_name({**opts, "qrels_sha256": "c" * 64}) != f"run-my-{h}"
    assert run_condition_name({**opts, "n_candidates": "5000", "train_frac": "0.5"}) == f"run-my-{h}-n5000-train0.5"
    assert run_condition_name({**opts, "train_frac": "0.7"}) == f"run-my-{h}"  # the default split says nothing
    assert ConditionId.parse(f"run-my-{h}").name == f"run-my-{h}"
    with pytest.raises(ValueError, match="run_sha256"):
        run_condition_name({"run": "my.run", "qrels_sha256": b})


def test_skipped_queries_keep_their_first_ids_for_the_console() -> None:
    """Five judged queries the run lacks: counted 5, the first three (sorted) kept; the note names them, then '...'."""
    from benchmarks.conditions import data_notes
    from benchmarks.trec import SKIP_QRELS_NOT_IN_RUN, ranked_queries_from_run

    run = {"q1": [("d1", 1.0), ("d2", 0.5)]}
    qrels = {"q1": {"d1": 1}, **{f"z{i}": {"d1": 1} for i in (5, 3, 1, 4, 2)}}
    examples: dict[str, list[str]] = {}
    queries, skipped = ranked_queries_from_run(run, qrels, examples=examples)
    assert len(queries) == 1 and skipped == {SKIP_QRELS_NOT_IN_RUN: 5}
    assert examples == {SKIP_QRELS_NOT_IN_RUN: ["z1", "z2", "z3"]}
    note = data_notes({"skipped": skipped, "skipped_examples": examples}, 40)[0]
    assert note == "note: skipped 5 qrels queries not in run ('z1', 'z2', 'z3', ...) (counted in manifest.json)"
