"""BEIR-layout document retrieval as a :class:`~benchmarks.corpus.ToolCorpus`.

A BEIR dataset folder (SciFact, NFCorpus, MS MARCO ...) holds::

    corpus.jsonl        {"_id": ..., "title": ..., "text": ...} per line
    queries.jsonl       {"_id": ..., "text": ...} per line
    qrels/<split>.tsv   header "query-id<TAB>corpus-id<TAB>score", then one judgment a line

(other keys such as ``metadata`` are ignored; ``_id`` may be a JSON string or integer
and is used as a string). Mapping onto the tool-selection types:

- registry = the documents in the order of their ids (plain string order, ``"10"`` before ``"9"``), whatever
  the order of ``corpus.jsonl``'s lines: a condition ranks its candidates in registry order on tied scores
  (:meth:`envs.ranked.RankedQuery.from_scores`, a stable sort), so ties are broken by document id and
  reordering the corpus's lines never changes a ranking; the text scorers see is exactly
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
non-zero ones appear in ``ToolCorpus.skipped``): see the ``SKIP_*`` constants. The first
skipped ids of each (``ToolCorpus.skipped_examples``) go to the condition's meta, so the
console names them beside the count.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from os import PathLike
from pathlib import Path
from typing import Any

from benchmarks.corpus import DataError, QueryRecord, ToolCorpus, count_skip, iter_jsonl, sha256_file
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
    docs = dict(sorted(_read_by_id(corpus_p, "document", _document_text).items()))  # by id (module docstring)
    queries = _read_by_id(queries_p, "query", _query_text)
    skipped: dict[str, int] = {}
    examples: dict[str, list[str]] = {}  # the first skipped ids (query or doc) of each counter, for the console
    judged = _judged(qrels_p, queries, docs, strict, skipped, examples)
    records = _judged_queries(queries, judged, queries_p, skipped, examples)
    if not records:
        raise DataError(f"{qrels_p}: no query with a relevant document")
    return ToolCorpus(
        name=f"beir:{folder_name}",
        tool_names=tuple(docs),
        tool_texts=tuple(text for _, text in docs.values()),
        queries=tuple(records),
        inputs_sha256={
            f"{folder_name}/corpus.jsonl": sha256_file(str(corpus_p)),
            f"{folder_name}/queries.jsonl": sha256_file(str(queries_p)),
            f"{folder_name}/qrels/{split}.tsv": sha256_file(str(qrels_p)),
        },
        skipped=skipped,
        skipped_examples=examples,
    )


def _document_text(row: dict[str, Any], where: str) -> str:
    """The text scorers see for a ``corpus.jsonl`` row: :func:`doc_text` of its title and text."""
    return doc_text(_get_str(row, "title", where), _get_str(row, "text", where))


def _query_text(row: dict[str, Any], where: str) -> str:
    """The text of a ``queries.jsonl`` row (required)."""
    return _get_str(row, "text", where, required=True)


def _read_by_id(path: Path, kind: str, value: Callable[[dict[str, Any], str], str]) -> dict[str, tuple[int, str]]:
    """The rows of ``corpus.jsonl`` or ``queries.jsonl`` by ``_id`` (:func:`_get_id`), in file order: each
    row's line and ``value(row, "<file>:<line>")``; DataError naming the line of a repeated id (``kind``:
    ``document`` or ``query``) and the first line it was on."""
    out: dict[str, tuple[int, str]] = {}
    for lineno, row in iter_jsonl(path):
        where = f"{path}:{lineno}"
        rid = _get_id(row, where)
        if rid in out:
            raise DataError(f"{where}: duplicate {kind} id {rid!r} (first at line {out[rid][0]})")
        out[rid] = (lineno, value(row, where))
    return out


def _judged(
    qrels_p: Path,
    queries: Mapping[str, object],
    docs: Mapping[str, object],
    strict: bool,
    skipped: dict[str, int],
    examples: dict[str, list[str]],
) -> dict[str, dict[str, int]]:
    """The split's judgments ``{query id: {doc id: relevance}}`` of known queries and documents, in qrels
    order. A repeated ``(query, doc)`` pair is a DataError; a row naming an unknown query or document is a
    DataError when ``strict``, else counted in ``skipped`` (the first distinct unknown query or document ids
    kept in ``examples``)."""
    judged: dict[str, dict[str, int]] = {}
    first_line: dict[tuple[str, str], int] = {}
    for lineno, qid, did, rel in iter_qrels(qrels_p):
        where = f"{qrels_p}:{lineno}"
        first = first_line.setdefault((qid, did), lineno)
        if first != lineno:
            raise DataError(
                f"{where}: duplicate judgment of document {did!r} for query {qid!r} (first at line {first})"
            )
        if qid not in queries:
            if strict:
                raise DataError(f"{where}: query id {qid!r} is not in queries.jsonl")
            count_skip(skipped, SKIP_UNKNOWN_QUERY, ids=[qid], examples=examples)
            continue
        if did not in docs:
            if strict:
                raise DataError(f"{where}: document id {did!r} is not in corpus.jsonl")
            count_skip(skipped, SKIP_UNKNOWN_DOC, ids=[did], examples=examples)
            continue
        judged.setdefault(qid, {})[did] = rel
    return judged


def _judged_queries(
    queries: Mapping[str, tuple[int, str]],
    judged: Mapping[str, Mapping[str, int]],
    queries_p: Path,
    skipped: dict[str, int],
    examples: dict[str, list[str]],
) -> list[QueryRecord]:
    """The queries (file order) with at least one relevant document (relevance > 0), all of them gold in
    qrels order; queries without judgments or without a relevant one are counted in ``skipped`` (the first ids
    kept in ``examples``). A kept
    query with an empty text is a DataError naming its line."""
    out: list[QueryRecord] = []
    for qid, (line, text) in queries.items():
        rels = judged.get(qid)
        if rels is None:
            count_skip(skipped, SKIP_NOT_IN_QRELS, ids=[qid], examples=examples)
            continue
        gold = tuple(d for d, r in rels.items() if r > 0)
        if not gold:
            count_skip(skipped, SKIP_NO_RELEVANT, ids=[qid], examples=examples)
            continue
        if not text:
            raise DataError(f"{queries_p}:{line}: query {qid!r} has empty text")
        out.append(QueryRecord(qid=qid, text=text, gold=gold))
    return out
