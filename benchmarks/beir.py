"""BEIR-layout document retrieval as a :class:`~benchmarks.corpus.ToolCorpus`.

A BEIR dataset folder (SciFact, NFCorpus, MS MARCO ...) holds::

    corpus.jsonl        {"_id": ..., "title": ..., "text": ...} per line
    queries.jsonl       {"_id": ..., "text": ...} per line
    qrels/<split>.tsv   header "query-id<TAB>corpus-id<TAB>score", then one judgment a line

(other keys such as ``metadata`` are ignored; ``_id`` may be a JSON string or integer
and is used as a string). Mapping onto the tool-selection types:

- registry = the documents in ``corpus.jsonl`` order; the text scorers see is exactly
  ``title + ". " + text`` (both stripped), or just ``text`` when the title is empty or
  absent;
- queries = the queries of ``queries.jsonl`` (file order) with at least one relevant
  document (score > 0) in the split's qrels; ``gold`` = ALL their relevant doc ids,
  in qrels order (R_q > 1 is kept).

Errors (:class:`~benchmarks.corpus.DataError`, naming ``file:line``): non-UTF-8 bytes,
malformed JSON, a line that is not an object, a missing/empty/non-scalar ``_id``,
non-string ``title``/``text``, a query without ``text``, a duplicate id (doc, query or
``(query, doc)`` judgment), malformed qrels lines, empty files, missing files.

Qrels rows naming an unknown query or document are a *counted skip* by default,
because published BEIR data has such rows (e.g. ArguAna's qrels name a document
absent from its corpus; NFCorpus's qrels name queries absent from ``queries.jsonl``).
Such a document simply does not count towards the query's gold set / R_q. With
``strict=True`` they are a DataError naming ``file:line`` instead. Skip keys (only
non-zero ones appear in ``ToolCorpus.skipped``): see the ``SKIP_*`` constants.
"""

from __future__ import annotations

from os import PathLike
from pathlib import Path
from typing import Any

from benchmarks.corpus import DataError, QueryRecord, ToolCorpus, iter_jsonl, sha256_file
from benchmarks.trec import iter_qrels

SKIP_UNKNOWN_QUERY = "qrels rows with query id not in queries.jsonl"
SKIP_UNKNOWN_DOC = "qrels rows with doc id not in corpus.jsonl"
SKIP_NOT_IN_QRELS = "queries without qrels in split"
SKIP_NO_RELEVANT = "queries with no relevant doc in split"


def _get_id(row: dict[str, Any], where: str) -> str:
    """The ``_id`` of a row as a non-empty string (JSON strings and integers accepted)."""
    if "_id" not in row:
        raise DataError(f"{where}: missing '_id'")
    raw = row["_id"]
    if isinstance(raw, bool) or not isinstance(raw, str | int):
        raise DataError(f"{where}: '_id' must be a string or integer, got {type(raw).__name__}")
    rid = str(raw).strip()
    if not rid:
        raise DataError(f"{where}: empty '_id'")
    return rid


def _get_str(row: dict[str, Any], key: str, where: str, required: bool = False) -> str:
    """A string field (stripped); absent or null gives ``""`` unless ``required``."""
    val = row.get(key)
    if val is None:
        if required:
            raise DataError(f"{where}: missing '{key}'")
        return ""
    if not isinstance(val, str):
        raise DataError(f"{where}: '{key}' must be a string, got {type(val).__name__}")
    return val.strip()


def doc_text(title: str, text: str) -> str:
    """The exact text scorers see for one document: ``"<title>. <text>"`` or ``text``."""
    title, text = title.strip(), text.strip()
    return f"{title}. {text}" if title else text


def load_beir(folder: str | PathLike[str], split: str = "test", *, strict: bool = False) -> ToolCorpus:
    """Load a BEIR-layout dataset folder as a :class:`ToolCorpus` (see module docstring).

    Args:
        folder: dataset folder holding ``corpus.jsonl``, ``queries.jsonl`` and ``qrels/``.
        split: qrels split, i.e. ``qrels/<split>.tsv``.
        strict: raise on qrels rows naming unknown query or document ids instead of
            counting them as skips.

    Returns:
        The corpus, named ``beir:<folder name>``.

    Raises:
        DataError: naming the file (and line) for missing files and malformed data.
    """
    base = Path(folder)
    corpus_p, queries_p = base / "corpus.jsonl", base / "queries.jsonl"
    qrels_p = base / "qrels" / f"{split}.tsv"
    for p in (corpus_p, queries_p, qrels_p):
        if not p.is_file():
            raise DataError(f"BEIR data file missing: {p}")
    folder_name = base.resolve().name
    name = f"beir:{folder_name}"

    doc_line: dict[str, int] = {}
    texts: list[str] = []
    for lineno, row in iter_jsonl(corpus_p):
        where = f"{corpus_p}:{lineno}"
        did = _get_id(row, where)
        if did in doc_line:
            raise DataError(f"{where}: duplicate document id {did!r} (first at line {doc_line[did]})")
        doc_line[did] = lineno
        texts.append(doc_text(_get_str(row, "title", where), _get_str(row, "text", where)))

    qtext: dict[str, str] = {}
    q_line: dict[str, int] = {}
    for lineno, row in iter_jsonl(queries_p):
        where = f"{queries_p}:{lineno}"
        qid = _get_id(row, where)
        if qid in q_line:
            raise DataError(f"{where}: duplicate query id {qid!r} (first at line {q_line[qid]})")
        q_line[qid] = lineno
        qtext[qid] = _get_str(row, "text", where, required=True)

    skipped: dict[str, int] = {}

    def skip(key: str, n: int = 1) -> None:
        if n:
            skipped[key] = skipped.get(key, 0) + n

    judged: dict[str, dict[str, int]] = {}
    first_line: dict[tuple[str, str], int] = {}
    for lineno, qid, did, rel in iter_qrels(qrels_p):
        where = f"{qrels_p}:{lineno}"
        first = first_line.setdefault((qid, did), lineno)
        if first != lineno:
            raise DataError(
                f"{where}: duplicate judgment of document {did!r} for query {qid!r} (first at line {first})"
            )
        if qid not in qtext:
            if strict:
                raise DataError(f"{where}: query id {qid!r} is not in {queries_p.name}")
            skip(SKIP_UNKNOWN_QUERY)
            continue
        if did not in doc_line:
            if strict:
                raise DataError(f"{where}: document id {did!r} is not in {corpus_p.name}")
            skip(SKIP_UNKNOWN_DOC)
            continue
        judged.setdefault(qid, {})[did] = rel

    queries: list[QueryRecord] = []
    for qid, text in qtext.items():
        rels = judged.get(qid)
        if rels is None:
            skip(SKIP_NOT_IN_QRELS)
            continue
        gold = tuple(d for d, r in rels.items() if r > 0)
        if not gold:
            skip(SKIP_NO_RELEVANT)
            continue
        if not text:
            raise DataError(f"{queries_p}:{q_line[qid]}: query {qid!r} has empty text")
        queries.append(QueryRecord(qid=qid, text=text, gold=gold))
    if not queries:
        raise DataError(f"{qrels_p}: no query with a relevant document")

    return ToolCorpus(
        name=name,
        tool_names=tuple(doc_line),
        tool_texts=tuple(texts),
        queries=tuple(queries),
        inputs_sha256={
            f"{folder_name}/corpus.jsonl": sha256_file(str(corpus_p)),
            f"{folder_name}/queries.jsonl": sha256_file(str(queries_p)),
            f"{folder_name}/qrels/{split}.tsv": sha256_file(str(qrels_p)),
        },
        skipped=skipped,
    )
