"""BEIR-layout loader on a fixture written into tmp_path."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any

import pytest

from benchmarks.beir import (
    SKIP_NO_RELEVANT,
    SKIP_NOT_IN_QRELS,
    SKIP_UNKNOWN_DOC,
    SKIP_UNKNOWN_QUERY,
    doc_text,
    load_beir,
)
from benchmarks.conditions import Condition, build_condition
from benchmarks.corpus import DataError
from benchmarks.names import beir_condition_name
from benchmarks.trec import ranked_queries_from_run, read_qrels

DOCS: list[dict[str, Any]] = [
    {"_id": "d1", "title": "Vitamin D", "text": "Vitamin D reduces fracture risk."},
    {"_id": "d2", "title": "", "text": "Statins lower LDL cholesterol."},
    {"_id": "d3", "title": "Sleep", "text": " Short sleep raises blood pressure. ", "metadata": {}},
    {"_id": 4, "title": "Coffee", "text": "Coffee intake and liver health."},
    {"_id": "d5", "title": "Exercise", "text": "Aerobic exercise lowers blood pressure."},
    {"_id": "d6", "text": "Salt intake and hypertension."},
]
QUERIES: list[dict[str, Any]] = [
    {"_id": "q1", "text": "what lowers blood pressure"},
    {"_id": "q2", "text": "does coffee harm the liver", "metadata": {"x": 1}},
    {"_id": "q3", "text": "statins and cholesterol"},
]
QRELS = [
    ("q1", "d3", 1),
    ("q1", "d5", 2),
    ("q1", "d6", 1),
    ("q1", "d1", 0),
    ("q2", "4", 1),
    ("q3", "d2", 1),
]


def _jsonl(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def _qrels_tsv(rows: list[tuple[str, str, int]]) -> str:
    return "query-id\tcorpus-id\tscore\n" + "".join(f"{q}\t{d}\t{r}\n" for q, d, r in rows)


def write_beir(
    root: Path,
    docs: list[dict[str, Any]] | None = None,
    queries: list[dict[str, Any]] | None = None,
    qrels: list[tuple[str, str, int]] | None = None,
    split: str = "test",
) -> Path:
    """Write a tiny BEIR dataset folder ``root/scifacts-mini`` and return it."""
    folder = root / "scifacts-mini"
    (folder / "qrels").mkdir(parents=True, exist_ok=True)
    (folder / "corpus.jsonl").write_text(_jsonl(DOCS if docs is None else docs), encoding="utf-8")
    (folder / "queries.jsonl").write_text(_jsonl(QUERIES if queries is None else queries), encoding="utf-8")
    (folder / "qrels" / f"{split}.tsv").write_text(_qrels_tsv(QRELS if qrels is None else qrels), encoding="utf-8")
    return folder


@pytest.fixture
def beir_dir(tmp_path: Path) -> Path:
    return write_beir(tmp_path)


def test_load_fixture(beir_dir: Path) -> None:
    c = load_beir(beir_dir)
    assert c.name == "beir:scifacts-mini"
    assert c.tool_names == ("4", "d1", "d2", "d3", "d5", "d6")  # in id order, not the file's
    assert c.tool_texts == (
        "Coffee. Coffee intake and liver health.",
        "Vitamin D. Vitamin D reduces fracture risk.",
        "Statins lower LDL cholesterol.",
        "Sleep. Short sleep raises blood pressure.",
        "Exercise. Aerobic exercise lowers blood pressure.",
        "Salt intake and hypertension.",
    )
    assert [q.qid for q in c.queries] == ["q1", "q2", "q3"]
    assert c.queries[0].text == "what lowers blood pressure"
    # R_q > 1 kept: every relevant doc, in qrels order; rel 0 is not gold
    assert c.queries[0].gold == ("d3", "d5", "d6")
    assert c.queries[1].gold == ("4",)
    assert c.queries[2].gold == ("d2",)
    assert c.skipped == {}
    assert c.inputs_sha256 == {
        "scifacts-mini/corpus.jsonl": hashlib.sha256((beir_dir / "corpus.jsonl").read_bytes()).hexdigest(),
        "scifacts-mini/queries.jsonl": hashlib.sha256((beir_dir / "queries.jsonl").read_bytes()).hexdigest(),
        "scifacts-mini/qrels/test.tsv": hashlib.sha256((beir_dir / "qrels" / "test.tsv").read_bytes()).hexdigest(),
    }


def test_doc_text() -> None:
    assert doc_text(" T ", " body ") == "T. body"
    assert doc_text("", "body") == "body"


def test_other_split_and_trec_format_qrels(tmp_path: Path) -> None:
    folder = write_beir(tmp_path, qrels=[("q2", "4", 1)], split="dev")
    (folder / "qrels" / "train.tsv").write_text("q1 0 d3 1\nq1 0 d5 1\n", encoding="utf-8")
    dev = load_beir(folder, split="dev")
    assert [q.qid for q in dev.queries] == ["q2"]
    assert dev.skipped == {SKIP_NOT_IN_QRELS: 2}
    train = load_beir(folder, split="train")
    assert [(q.qid, q.gold) for q in train.queries] == [("q1", ("d3", "d5"))]
    with pytest.raises(DataError, match="missing.*test.tsv"):
        load_beir(folder)


def test_queries_restricted_and_skips_counted(tmp_path: Path) -> None:
    queries = QUERIES + [{"_id": "q4", "text": "unjudged"}, {"_id": "q5", "text": "only zeros"}]
    qrels = QRELS + [
        ("q5", "d1", 0),
        ("q5", "d2", 0),
        ("ghost", "d1", 1),
        ("ghost", "d2", 1),  # one unknown query on two rows: counted twice, named once
        ("q3", "d404", 1),
        ("q3", "d405", 1),
    ]
    c = load_beir(write_beir(tmp_path, queries=queries, qrels=qrels))
    assert [q.qid for q in c.queries] == ["q1", "q2", "q3"]
    assert c.queries[2].gold == ("d2",)  # unknown docs do not count towards R_q
    assert c.skipped == {
        SKIP_UNKNOWN_QUERY: 2,
        SKIP_UNKNOWN_DOC: 2,
        SKIP_NOT_IN_QRELS: 1,
        SKIP_NO_RELEVANT: 1,
    }
    assert c.skipped_examples == {  # the first ids of each skip, for the console to name
        SKIP_UNKNOWN_QUERY: ["ghost"],
        SKIP_UNKNOWN_DOC: ["d404", "d405"],
        SKIP_NOT_IN_QRELS: ["q4"],
        SKIP_NO_RELEVANT: ["q5"],
    }


@pytest.mark.parametrize(
    ("row", "line", "needle"),
    [(("ghost", "d1", 1), 8, "query id 'ghost'"), (("q3", "d404", 1), 8, "document id 'd404'")],
)
def test_unknown_qrels_ids_strict(tmp_path: Path, row: tuple[str, str, int], line: int, needle: str) -> None:
    folder = write_beir(tmp_path, qrels=QRELS + [row])
    with pytest.raises(DataError) as e:
        load_beir(folder, strict=True)
    assert f"{folder / 'qrels' / 'test.tsv'}:{line}:" in str(e.value)
    assert needle in str(e.value)


@pytest.mark.parametrize(
    ("fname", "body", "line", "needle"),
    [
        ("corpus.jsonl", _jsonl(DOCS[:2]) + '{"_id": "d3", "text": \n', 3, "malformed JSON"),
        (
            "corpus.jsonl",
            _jsonl(DOCS[:1]) + "\n" + '{"title": "x", "text": "y"}\n',
            3,
            "missing '_id'",
        ),
        ("corpus.jsonl", _jsonl(DOCS[:3] + [DOCS[1]]), 4, "duplicate document id 'd2'"),
        ("corpus.jsonl", _jsonl(DOCS[:1]) + "[1, 2]\n", 2, "expected a JSON object"),
        ("corpus.jsonl", _jsonl([{"_id": "", "text": "x"}]), 1, "empty '_id'"),
        ("corpus.jsonl", _jsonl([{"_id": ["a"], "text": "x"}]), 1, "'_id' must be"),
        ("corpus.jsonl", _jsonl([{"_id": "a", "text": 3}]), 1, "'text' must be a string"),
        ("queries.jsonl", _jsonl(QUERIES[:1]) + "{oops}\n", 2, "malformed JSON"),
        ("queries.jsonl", _jsonl(QUERIES + [{"text": "no id"}]), 4, "missing '_id'"),
        ("queries.jsonl", _jsonl(QUERIES + [QUERIES[0]]), 4, "duplicate query id 'q1'"),
        ("queries.jsonl", _jsonl(QUERIES[:1] + [{"_id": "q2"}]), 2, "missing 'text'"),
        ("queries.jsonl", _jsonl(QUERIES[:1] + [{"_id": "q2", "text": " "}]), 2, "empty text"),
        ("qrels/test.tsv", _qrels_tsv(QRELS) + "q1\td2\n", 8, "expected 3 tab"),
        ("qrels/test.tsv", _qrels_tsv(QRELS) + "q1\td2\thigh\n", 8, "relevance must be"),
        ("qrels/test.tsv", _qrels_tsv(QRELS + [("q1", "d3", 0)]), 8, "duplicate judgment"),
    ],
)
def test_malformed_names_file_and_line(tmp_path: Path, fname: str, body: str, line: int, needle: str) -> None:
    folder = write_beir(tmp_path)
    (folder / fname).write_text(body, encoding="utf-8")
    with pytest.raises(DataError) as e:
        load_beir(folder)
    assert f"{folder / fname}:{line}:" in str(e.value)
    assert needle in str(e.value)


@pytest.mark.parametrize("fname", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_not_utf8(tmp_path: Path, fname: str) -> None:
    folder = write_beir(tmp_path)
    p = folder / fname
    p.write_bytes(p.read_bytes().split(b"\n", 1)[0] + b"\n\xc3\x28\n")
    with pytest.raises(DataError) as e:
        load_beir(folder)
    assert f"{p}:2:" in str(e.value) and "not UTF-8" in str(e.value)


@pytest.mark.parametrize("fname", ["corpus.jsonl", "queries.jsonl", "qrels/test.tsv"])
def test_missing_or_empty_file(tmp_path: Path, fname: str) -> None:
    folder = write_beir(tmp_path)
    p = folder / fname
    p.write_text("\n", encoding="utf-8")
    with pytest.raises(DataError, match=str(p)):
        load_beir(folder)
    p.unlink()
    with pytest.raises(DataError, match=f"missing: {p}"):
        load_beir(folder)


def test_no_usable_query(tmp_path: Path) -> None:
    folder = write_beir(tmp_path, qrels=[("q1", "d1", 0)])
    with pytest.raises(DataError, match="no query with a relevant document"):
        load_beir(folder)


def test_beir_qrels_feed_ranked_queries(beir_dir: Path) -> None:
    """End to end: BEIR qrels + a toy run -> RankedQuery with R_q = 3 for q1."""
    corpus = load_beir(beir_dir)
    qrels = read_qrels(beir_dir / "qrels" / "test.tsv")
    run = {"q1": [("d5", 0.9), ("d1", 0.8), ("d6", 0.3)]}  # d3 (relevant) not retrieved
    (rq,), skipped = ranked_queries_from_run(run, qrels, n_candidates=len(corpus.tool_names))
    assert rq.relevant_ranks.tolist() == [1, 3]
    assert rq.n_relevant == len(corpus.queries[0].gold) == 3
    assert rq.n_candidates == 6
    assert skipped == {"qrels queries not in run": 2}


#: Documents that tie for every query (the same words), so their ranks are set by the tie rule alone.
TIED = [{"_id": f"t{i}", "title": "Blood pressure", "text": "Salt raises blood pressure."} for i in range(1, 6)]
TIED_QUERIES = [{"_id": "q1", "text": "salt and blood pressure"}, {"_id": "q2", "text": "coffee liver"}]
TIED_QRELS = [("q1", "t2", 1), ("q1", "t3", 1), ("q2", "4", 1)]


def _ranked(cond: Condition) -> list[tuple]:
    return [
        (q.qid, q.scores.tolist(), q.relevant_ranks.tolist(), t.tolist())
        for q, t in zip(cond.queries, cond.ranked_tools, strict=True)
    ]


def test_the_order_of_the_corpus_lines_never_changes_a_ranking(tmp_path: Path) -> None:
    """Ties (five documents of the same text, two of them relevant) are broken by document id, not by the line a
    document sits on: the corpus in file order, reversed or shuffled gives the same ranked queries."""
    docs = DOCS + TIED
    orders = [docs, docs[::-1], [docs[i] for i in (7, 3, 9, 0, 10, 5, 1, 8, 2, 6, 4)]]
    built = []
    for i, order in enumerate(orders):
        folder = write_beir(tmp_path / f"v{i}", docs=order, queries=TIED_QUERIES, qrels=TIED_QRELS)
        cond = build_condition("beir", "bm25", options={"beir_dir": str(folder)}, cache_dir=tmp_path / "cache")
        assert load_beir(folder).tool_names == tuple(sorted(str(d["_id"]) for d in docs))
        built.append((_ranked(cond), [q.qid for q in cond.test]))
    assert built[0] == built[1] == built[2]
    _, scores, ranks, tools = built[0][0][0]  # q1
    assert scores[:5] == [scores[0]] * 5 and ranks == [2, 3]  # t1..t5 tie on top: t2 and t3 rank 2 and 3
    assert tools[:5] == [6, 7, 8, 9, 10]  # the registry indices of t1..t5 (after 4, d1..d3, d5, d6), in id order


def test_a_beir_conditions_name_carries_a_hash_of_the_folders_files(tmp_path: Path) -> None:
    """Two folders of the same name but other files get other names (so never the same run directory); the same
    files elsewhere get the same name; another split says so."""

    def name(folder: Path, split: str = "test") -> str:
        options = {"beir_dir": str(folder), "split": split}
        return build_condition("beir", "bm25", options=options, cache_dir=tmp_path / "cache").name

    a = write_beir(tmp_path / "a")
    b = write_beir(tmp_path / "b", queries=[*QUERIES, {"_id": "q9", "text": "sleep"}], qrels=[*QRELS, ("q9", "d3", 1)])
    moved = write_beir(tmp_path / "elsewhere" / "deeper")
    assert name(a) != name(b) and name(a) == name(moved)
    shas = {
        f"{what}_sha256": hashlib.sha256((a / path).read_bytes()).hexdigest()
        for what, path in (("corpus", "corpus.jsonl"), ("queries", "queries.jsonl"), ("qrels", "qrels/test.tsv"))
    }
    expected = beir_condition_name("bm25", "", {"beir_folder": "scifacts-mini", "split": "test", **shas})
    assert name(a) == expected and re.fullmatch(r"beir-bm25-scifacts-mini-[0-9a-f]{6}", expected)
    (a / "qrels" / "dev.tsv").write_bytes((a / "qrels" / "test.tsv").read_bytes())
    assert name(a, "dev").endswith("-dev") and name(a, "dev")[: -len("-dev")] != name(a)
    with pytest.raises(ValueError, match="needs the source option 'qrels_sha256'"):
        beir_condition_name(
            "bm25", "", {"beir_folder": "x", "split": "test", "corpus_sha256": "", "queries_sha256": ""}
        )
