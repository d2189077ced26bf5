"""TREC run files and qrels -> :class:`~envs.ranked.RankedQuery` lists.

Formats (one record per line, blank lines ignored, UTF-8; a leading BOM is tolerated; a file may be
gzip-compressed, detected by its magic bytes whatever its name: ``run.gz``, as ``ir_measures`` writes
and reads them):

- Run: ``qid Q0 docid rank score tag`` (6 whitespace-separated columns). Only ``qid``,
  ``docid`` and ``score`` are used: the ``Q0`` and ``tag`` columns are ignored, the
  ``rank`` column must be an integer but is otherwise ignored (lists are re-ranked by
  score, see below).
- Qrels, detected from the first non-blank line:

  - TREC: ``qid iter docid rel`` (4 whitespace-separated columns);
  - BEIR TSV: header line ``query-id<TAB>corpus-id<TAB>score``, then 3 tab-separated
    columns per line.

  Relevance is an integer (``"2.0"`` is accepted as 2); ``rel > 0`` counts as relevant,
  ``rel <= 0`` is a judged non-relevant document.

Streaming (:func:`iter_run_queries`, :func:`truncate_run`): a run is read one query at a
time, assuming each query's lines are contiguous (the usual layout; ``sort -k1,1 -s``
groups a run that is not), so memory is bounded by the largest query. Runs are written
(:func:`write_trec_run`) atomically as ``qid Q0 docid rank score tag`` with ranks 1..K in
list order and scores in Python's round-trip ``repr``, which ``trec_eval`` and
``ir_measures`` read.

Every parsing error is a :class:`~benchmarks.corpus.DataError` naming ``file:line``:
wrong column count, non-numeric or NaN/inf score, non-integer rank or relevance (a number is ASCII digits
with an optional sign, point and exponent: ``3``, ``-1.5``, ``2e-3``; ``1_0``, which Python's ``float``
reads as 10, is not one),
duplicate ``(qid, docid)`` pair (in a run or in qrels), empty file, non-UTF-8 bytes; naming ``file``
for a corrupt or truncated gzip stream.

Ranking rule (:func:`ranked_queries_from_run`): documents are sorted by score
descending, ties broken by docid ascending (plain Python string order, so ``"10"``
ranks before ``"9"``). The result depends only on the set of ``(docid, score)`` pairs,
never on the order of lines in the file. Note that ``trec_eval`` / ``pytrec_eval``
(and hence ``ir_measures``) break ties by docid *descending*, so metrics on runs with
tied scores can differ from theirs; on tie-free runs they agree.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Literal, NamedTuple

import numpy as np
from numpy.typing import NDArray

from benchmarks.atomic import atomic_path
from benchmarks.corpus import DataError, count_skip, iter_text_lines, sha256_file
from envs.ranked import RankedQuery

BEIR_QRELS_HEADER = ("query-id", "corpus-id", "score")

#: Skip-counter keys used by :func:`ranked_queries_from_run` (only non-zero ones appear).
SKIP_NO_QRELS = "run queries without qrels"
SKIP_NO_RELEVANT = "run queries with no relevant doc in qrels"
SKIP_QRELS_NOT_IN_RUN = "qrels queries not in run"

Run = dict[str, list[tuple[str, float]]]
Qrels = dict[str, dict[str, int]]


#: A number as a TREC file writes it: ASCII digits, an optional sign, point and exponent (``3``, ``-1.5``,
#: ``2e-3``, ``.5``). Python's ``float``/``int`` also take ``1_0`` (as 10), non-ASCII digits, ``nan``/``inf`` and
#: surrounding blanks, none of which is a TREC number; so a column is matched against this first.
_NUMBER = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER = re.compile(r"[+-]?[0-9]+")


def _parse_int(field: str, what: str, where: str) -> int:
    """Parse an integer column (``"2"`` or ``"2.0"``), or raise naming ``where``."""
    if _INTEGER.fullmatch(field):
        return int(field)
    x = float(field) if _NUMBER.fullmatch(field) else math.nan
    if not math.isfinite(x) or x != math.floor(x):
        raise DataError(f"{where}: {what} must be an integer, got {field!r}")
    return int(x)


def _parse_score(field: str, where: str) -> float:
    """Parse a score column (:data:`_NUMBER`), or raise naming ``where``: not a number (``1_0``, ``high``), or
    NaN/inf (``nan``, ``-inf``, or a number too large for a float, ``1e999``)."""
    if _NUMBER.fullmatch(field):
        score = float(field)
        if math.isfinite(score):
            return score
    elif field.lower().lstrip("+-") not in ("nan", "inf", "infinity"):
        raise DataError(f"{where}: score {field!r} is not a number")
    raise DataError(f"{where}: score is {field!r} (NaN/inf scores are not allowed)")


def _parse_run_line(line: str, where: str) -> tuple[str, str, float]:
    """``(qid, docid, score)`` of one run line, or a :class:`DataError` naming ``where``."""
    cols = line.split()
    if len(cols) != 6:
        raise DataError(f"{where}: expected 6 columns 'qid Q0 docid rank score tag', got {len(cols)}")
    qid, _, docid, rank, score_s, _ = cols
    _parse_int(rank, "rank", where)
    return qid, docid, _parse_score(score_s, where)


def read_run(path: str | PathLike[str]) -> Run:
    """Read a TREC run file.

    Args:
        path: run file (``qid Q0 docid rank score tag`` per line).

    Returns:
        ``{qid: [(docid, score), ...]}`` in file order (queries in order of first
        appearance). The lists are *not* re-ranked here.

    Raises:
        DataError: naming ``file:line``, for a wrong column count, a non-integer rank,
            a non-numeric / NaN / inf score, a duplicate ``(qid, docid)`` pair,
            non-UTF-8 bytes, or a file without any entry.
    """
    run: Run = {}
    seen: dict[tuple[str, str], int] = {}
    for lineno, line in iter_text_lines(path):
        where = f"{path}:{lineno}"
        qid, docid, score = _parse_run_line(line, where)
        first = seen.setdefault((qid, docid), lineno)
        if first != lineno:
            raise DataError(f"{where}: duplicate document {docid!r} for query {qid!r} (first at line {first})")
        run.setdefault(qid, []).append((docid, score))
    if not run:
        raise DataError(f"{path}: empty run file (no entries)")
    return run


def iter_run_queries(path: str | PathLike[str]) -> Iterator[tuple[str, list[tuple[str, float]]]]:
    """Stream a TREC run one query at a time, each list ranked by :func:`rank_docs`.

    Lines of one query must be contiguous (the usual TREC layout); memory is bounded
    by the largest query (plus the set of finished qids). Parsing and its errors are
    those of :func:`read_run`.

    Args:
        path: run file (``qid Q0 docid rank score tag`` per line).

    Yields:
        ``(qid, [(docid, score), ...])`` in file order of the queries; each list sorted
        by score descending, ties by docid ascending.

    Raises:
        DataError: naming ``file:line``, for everything :func:`read_run` rejects, and
            for a qid that reappears after another query (the run is not grouped by
            query); naming the file for a run without entries.
    """
    done: set[str] = set()
    qid: str | None = None
    docs: list[tuple[str, float]] = []
    first_line: dict[str, int] = {}
    for lineno, line in iter_text_lines(path):
        where = f"{path}:{lineno}"
        q, docid, score = _parse_run_line(line, where)
        if q != qid:
            if q in done:
                raise DataError(
                    f"{where}: query {q!r} reappears after other queries; the run must be grouped by query "
                    f"(e.g. `sort -k1,1 -s {path} > grouped.run`)"
                )
            if qid is not None:
                yield qid, rank_docs(docs)
                done.add(qid)
            qid, docs, first_line = q, [], {}
        first = first_line.setdefault(docid, lineno)
        if first != lineno:
            raise DataError(f"{where}: duplicate document {docid!r} for query {q!r} (first at line {first})")
        docs.append((docid, score))
    if qid is None:
        raise DataError(f"{path}: empty run file (no entries)")
    yield qid, rank_docs(docs)


def iter_qrels(path: str | PathLike[str]) -> Iterator[tuple[int, str, str, int]]:
    """Yield ``(line number, qid, docid, relevance)`` for each judgment in a qrels file.

    The format (TREC 4-column or BEIR TSV with header) is detected from the first
    non-blank line; see the module docstring. Duplicates are *not* checked here.

    Raises:
        DataError: naming ``file:line``, for a wrong column count, an empty id, a
            non-integer relevance, non-UTF-8 bytes, or a file without any judgment.
    """
    beir: bool | None = None
    n = 0
    for lineno, line in iter_text_lines(path):
        where = f"{path}:{lineno}"
        if beir is None:
            header = tuple(c.strip().lower() for c in line.split("\t"))
            if header == BEIR_QRELS_HEADER:
                beir = True
                continue
            beir = False
        if beir:
            cols = [c.strip() for c in line.split("\t")]
            if len(cols) != 3:
                raise DataError(
                    f"{where}: expected 3 tab-separated columns "
                    f"'query-id corpus-id score' (BEIR qrels), got {len(cols)}"
                )
            qid, docid, rel_s = cols
        else:
            cols = line.split()
            if len(cols) != 4:
                hint = (
                    " (a 3-column file needs the BEIR header 'query-id\\tcorpus-id\\tscore')"
                    if len(cols) == 3 and n == 0
                    else ""
                )
                raise DataError(f"{where}: expected 4 columns 'qid iter docid rel' (TREC qrels), got {len(cols)}{hint}")
            qid, _, docid, rel_s = cols
        if not qid or not docid:
            raise DataError(f"{where}: empty query or document id")
        n += 1
        yield lineno, qid, docid, _parse_int(rel_s, "relevance", where)
    if n == 0:
        raise DataError(f"{path}: empty qrels file (no judgments)")


def read_qrels(path: str | PathLike[str]) -> Qrels:
    """Read TREC or BEIR-TSV qrels (format detected; see the module docstring).

    Args:
        path: qrels file.

    Returns:
        ``{qid: {docid: relevance}}`` with every judgment, including ``rel <= 0``
        (non-relevant) ones; ``rel > 0`` counts as relevant downstream.

    Raises:
        DataError: naming ``file:line``, for malformed lines, a duplicate
            ``(qid, docid)`` judgment, non-UTF-8 bytes, or an empty file.
    """
    qrels: Qrels = {}
    first_line: dict[tuple[str, str], int] = {}
    for lineno, qid, docid, rel in iter_qrels(path):
        first = first_line.setdefault((qid, docid), lineno)
        if first != lineno:
            raise DataError(
                f"{path}:{lineno}: duplicate judgment of document {docid!r} for query {qid!r} (first at line {first})"
            )
        qrels.setdefault(qid, {})[docid] = rel
    return qrels


def rank_docs(docs: Sequence[tuple[str, float]]) -> list[tuple[str, float]]:
    """Sort ``(docid, score)`` pairs by score descending, ties by docid ascending."""
    return sorted(docs, key=lambda d: (-d[1], d[0]))


def ranked_queries_from_run(
    run: Mapping[str, Sequence[tuple[str, float]]],
    qrels: Mapping[str, Mapping[str, int]],
    *,
    n_candidates: int | None = None,
    on_missing_qrels: Literal["skip", "error"] = "skip",
    examples: dict[str, list[str]] | None = None,
) -> tuple[list[RankedQuery], dict[str, int]]:
    """Turn a run and its qrels into ranked queries (with ``examples``, the first skipped qids of each counter
    are kept there too: :func:`benchmarks.corpus.count_skip`).

    For each run query (in run order): documents are ranked by score descending,
    ties by docid ascending (see the module docstring); ``relevant_ranks`` are the
    ranks of documents with relevance > 0; R (``n_relevant``) is the number of
    relevant documents in the qrels for that query, including those the run did not
    retrieve; N (``n_candidates``) is the argument when given (the corpus size for a
    run truncated to its top results), else the length of the query's list.

    Queries that cannot be used are counted, never dropped silently (only non-zero
    counters appear in the returned dict):

    - ``"run queries without qrels"`` (:data:`SKIP_NO_QRELS`): the qid has no
      judgment at all; with ``on_missing_qrels="error"`` this raises instead;
    - ``"run queries with no relevant doc in qrels"`` (:data:`SKIP_NO_RELEVANT`):
      judged, but no judgment has relevance > 0 (P_rand and the reward are undefined);
    - ``"qrels queries not in run"`` (:data:`SKIP_QRELS_NOT_IN_RUN`): qids with
      judgments that the run never mentions.

    A query whose relevant documents are all missing from the run is kept (it is a
    miss at every depth).

    Args:
        run: ``{qid: [(docid, score), ...]}`` as from :func:`read_run`; any order.
        qrels: ``{qid: {docid: relevance}}`` as from :func:`read_qrels`.
        n_candidates: candidate-set size N for every query; must be at least the
            length of each list (and at least each query's R).
        on_missing_qrels: ``"skip"`` (count) or ``"error"`` for run queries without qrels.

    Returns:
        The ranked queries and the skip counters.

    Raises:
        DataError: naming the qid, when ``n_candidates`` is smaller than a query's
            list or than its R, when R exceeds the list length and ``n_candidates``
            is not given, for a non-finite score or duplicate docid, or for a run
            query without qrels under ``on_missing_qrels="error"``.
        ValueError: for an unknown ``on_missing_qrels`` or a non-positive ``n_candidates``.
    """
    if on_missing_qrels not in ("skip", "error"):
        raise ValueError(f"on_missing_qrels must be 'skip' or 'error', got {on_missing_qrels!r}")
    if n_candidates is not None and (isinstance(n_candidates, bool) or int(n_candidates) < 1):
        raise ValueError(f"n_candidates must be a positive integer, got {n_candidates!r}")
    skipped: dict[str, int] = {}
    out: list[RankedQuery] = []
    for qid, docs in run.items():
        judged = qrels.get(qid)
        if not judged:
            if on_missing_qrels == "error":
                raise DataError(f"query {qid!r}: in the run but has no qrels")
            count_skip(skipped, SKIP_NO_QRELS, ids=[qid], examples=examples)
            continue
        n_rel = sum(1 for r in judged.values() if r > 0)
        if n_rel == 0:
            count_skip(skipped, SKIP_NO_RELEVANT, ids=[qid], examples=examples)
            continue
        out.append(_ranked_query(qid, docs, judged, n_rel, n_candidates))
    absent = sorted(q for q in qrels if q not in run)
    count_skip(skipped, SKIP_QRELS_NOT_IN_RUN, len(absent), ids=absent, examples=examples)
    return out, skipped


def _ranked_query(
    qid: str, docs: Sequence[tuple[str, float]], judged: Mapping[str, int], n_rel: int, n_candidates: int | None
) -> RankedQuery:
    """One judged run query with ``n_rel`` relevant documents, ranked by :func:`rank_docs`, with N from
    :func:`_list_size`; DataError naming the qid for an empty list, a repeated document id or a NaN/inf score."""
    if not docs:
        raise DataError(f"query {qid!r}: empty ranked list")
    ranked = rank_docs(docs)
    ids = [d for d, _ in ranked]
    if len(set(ids)) != len(ids):
        dup = sorted({d for d in ids if ids.count(d) > 1})[:3]
        raise DataError(f"query {qid!r}: duplicate document ids in the run: {dup}")
    scores = np.array([s for _, s in ranked], dtype=np.float64)
    if not np.all(np.isfinite(scores)):
        raise DataError(f"query {qid!r}: NaN/inf score in the run")
    n = _list_size(qid, n_rel, len(ranked), n_candidates)
    rel_ranks = np.array([i for i, d in enumerate(ids, start=1) if judged.get(d, 0) > 0], dtype=np.int64)
    return RankedQuery(scores, rel_ranks, qid, n_candidates=n, n_relevant=n_rel)


def _list_size(qid: str, n_rel: int, n_ranked: int, n_candidates: int | None) -> int:
    """A query's N: ``n_candidates`` when given (no smaller than its ``n_ranked`` documents nor its R =
    ``n_rel``), else the length of its list (no smaller than its R); DataError naming the qid otherwise."""
    if n_candidates is None:
        if n_rel > n_ranked:
            raise DataError(
                f"query {qid!r}: {n_rel} relevant documents in qrels but only {n_ranked} ranked; "
                "pass n_candidates (the corpus size) for truncated runs"
            )
        return n_ranked
    n = int(n_candidates)
    if n < n_ranked:
        raise DataError(f"query {qid!r}: n_candidates={n} is smaller than its {n_ranked} ranked documents")
    if n_rel > n:
        raise DataError(f"query {qid!r}: n_candidates={n} is smaller than its {n_rel} relevant documents in qrels")
    return n


class LoadedRun(NamedTuple):
    """Result of :func:`load_run_queries`.

    Attributes:
        queries: the ranked queries (run order).
        skipped: skip counters (see :func:`ranked_queries_from_run`).
        inputs_sha256: sha256 of the run and qrels files, keyed by the given paths.
        skipped_examples: the first skipped qids of each counter (sorted for ``qrels queries not in run``).
    """

    queries: list[RankedQuery]
    skipped: dict[str, int]
    inputs_sha256: dict[str, str]
    skipped_examples: dict[str, list[str]] = {}  # noqa: RUF012  (a NamedTuple's default, never mutated)


def load_run_queries(
    run_path: str | PathLike[str],
    qrels_path: str | PathLike[str],
    n_candidates: int | None = None,
    *,
    on_missing_qrels: Literal["skip", "error"] = "skip",
) -> LoadedRun:
    """Read a run and its qrels and build the ranked queries.

    Args:
        run_path: TREC run file.
        qrels_path: TREC or BEIR-TSV qrels file.
        n_candidates: candidate-set size N (corpus size for truncated runs); default:
            each query's list length.
        on_missing_qrels: see :func:`ranked_queries_from_run`.

    Returns:
        ``(queries, skipped, inputs_sha256)`` as a :class:`LoadedRun`.

    Raises:
        DataError: see :func:`read_run`, :func:`read_qrels`, :func:`ranked_queries_from_run`.
    """
    run = read_run(run_path)
    qrels = read_qrels(qrels_path)
    examples: dict[str, list[str]] = {}
    queries, skipped = ranked_queries_from_run(
        run, qrels, n_candidates=n_candidates, on_missing_qrels=on_missing_qrels, examples=examples
    )
    shas = {str(Path(run_path)): sha256_file(str(run_path))}
    shas[str(Path(qrels_path))] = sha256_file(str(qrels_path))
    return LoadedRun(queries, skipped, shas, examples)


def same_inputs(a: Mapping[str, str], b: Mapping[str, str]) -> bool:
    """Whether two sets of source options (``run_sha256``, ``qrels_sha256``) name the same run and qrels
    contents, wherever the files are: then their queries, and a policy's training queries among them,
    are the same."""
    keys = ("run_sha256", "qrels_sha256")
    return all(a.get(k) for k in keys) and all(a.get(k) == b.get(k) for k in keys)


# ---------------------------------------------------------------- writing and truncating runs


class WrittenRun(NamedTuple):
    """What :func:`write_trec_run` / :func:`truncate_run` wrote.

    Attributes:
        n_queries: queries with at least one line.
        n_docs: lines written.
    """

    n_queries: int
    n_docs: int


def _check_token(value: str, what: str) -> None:
    if not isinstance(value, str) or not value or any(c.isspace() for c in value):
        raise ValueError(f"{what} must be a non-empty string without whitespace, got {value!r}")


def write_trec_run(
    rows: Iterable[tuple[str, Sequence[tuple[str, float]]]],
    path: str | PathLike[str],
    tag: str,
) -> WrittenRun:
    """Write a TREC run atomically: one ``qid Q0 docid rank score tag`` line per document.

    Each row is a query's shortlist in rank order; its documents get ranks 1..K in that
    order and their scores (Python ``repr`` of the float: exact round trip). A row with
    no documents writes no line. The file appears under ``path`` only when every row was
    written (temporary file + rename, :func:`benchmarks.atomic.atomic_path`); on any error
    ``path`` is left as it was. ``rows`` may be a generator: it is consumed once.

    Note that ``trec_eval`` re-sorts each query by score (ties by docid descending),
    so with tied scores its order can differ from the rank column (see the module
    docstring); ``ir_measures.read_trec_run`` keeps the scores as written.

    Args:
        rows: ``(qid, [(docid, score), ...])`` per query; each qid at most once.
        path: output file.
        tag: run tag (last column), non-empty without whitespace.

    Returns:
        The number of queries and lines written.

    Raises:
        ValueError: a qid, docid or tag that is empty or holds whitespace, a NaN/inf
            score, a repeated qid, or a document repeated within a query (naming it).
    """
    _check_token(tag, "tag")
    seen: set[str] = set()
    n_queries = n_docs = 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as out:
        for qid, docs in rows:
            _check_token(qid, "qid")
            if qid in seen:
                raise ValueError(f"query {qid!r} appears twice in the rows to write")
            seen.add(qid)
            docids: set[str] = set()
            for rank, (docid, score) in enumerate(docs, start=1):
                _check_token(docid, f"docid of query {qid!r}")
                if docid in docids:
                    raise ValueError(f"query {qid!r}: document {docid!r} appears twice")
                docids.add(docid)
                if isinstance(score, bool) or not isinstance(score, numbers.Real):  # "1_0" would pass float()
                    raise ValueError(f"query {qid!r}, document {docid!r}: score {score!r} is not a number")
                x = float(score)
                if not math.isfinite(x):
                    raise ValueError(f"query {qid!r}, document {docid!r}: score {score!r} is not finite")
                out.write(f"{qid} Q0 {docid} {rank} {x!r} {tag}\n")
            n_docs += len(docids)
            n_queries += bool(docids)
    return WrittenRun(n_queries, n_docs)


#: ``depth_fn(qid, ranked scores) -> K`` (a Python or NumPy integer).
DepthFn = Callable[[str, NDArray[np.float64]], int | np.integer]


def _depth(k: object, qid: str, n: int) -> int:
    if isinstance(k, bool) or not isinstance(k, int | np.integer):
        raise ValueError(f"query {qid!r}: depth must be an integer, got {k!r}")
    if k < 0:
        raise ValueError(f"query {qid!r}: depth must be >= 0, got {k}")
    return min(int(k), n)


def truncate_run(
    in_path: str | PathLike[str],
    out_path: str | PathLike[str],
    depth_fn: DepthFn,
    tag: str,
) -> WrittenRun:
    """Stream a run and keep each query's top K documents, K = ``depth_fn(qid, scores)``.

    Queries are read with :func:`iter_run_queries` (grouped by query; ranked by score
    descending, ties by docid ascending) and written with :func:`write_trec_run`, so
    memory is bounded by the largest query. ``scores`` is the ranked score list,
    a float64 array of shape (L,). K larger than L keeps all L documents; K = 0 writes
    no line for that query.

    Args:
        in_path: input run file.
        out_path: output run file (written atomically; may equal ``in_path``).
        depth_fn: ``(qid, scores) -> K``, an integer >= 0.
        tag: run tag of the output.

    Returns:
        The number of queries and lines written.

    Raises:
        DataError: malformed or ungrouped input (see :func:`iter_run_queries`).
        ValueError: a depth that is not an integer >= 0, or a bad tag.
    """
    _check_token(tag, "tag")

    def rows() -> Iterator[tuple[str, list[tuple[str, float]]]]:
        for qid, ranked in iter_run_queries(in_path):
            scores = np.fromiter((s for _, s in ranked), dtype=np.float64, count=len(ranked))
            yield qid, ranked[: _depth(depth_fn(qid, scores), qid, len(ranked))]

    return write_trec_run(rows(), out_path, tag)
