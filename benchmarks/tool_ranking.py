"""Ranking a whole tool registry for requests, as a tool search does: the one path from request text to a
ranked list, shared by :class:`shortlist_depth.ToolSearch` (serving) and the logged-request condition
(:mod:`benchmarks.toollog`, training), so a policy is trained on the scores it will be served.

Scorers (:data:`SEARCH_SCORERS`), the package's own (:mod:`benchmarks.scorers`):

- ``bm25``: BM25 over the tool texts (:class:`benchmarks.scorers.BM25Index`, bit-identical to rank-bm25's
  ``BM25Okapi``; the index is built once per registry, a request costs a few array additions);
- ``minilm``: cosine similarity of all-MiniLM-L6-v2 embeddings; the tools' embeddings are cached on disk by
  content digest (:func:`benchmarks.score_cache.cached_embeddings`: the scorer identity and the exact
  texts), so a registry seen before needs no embedding; a request is embedded when it comes, on
  :attr:`RegistryRanker.embed_threads` torch threads (1: a short text gains nothing from more, and on a busy
  machine extra threads spin; ``shortlist toolsearch latency --torch-threads`` measures both);
- ``bm25-hybrid`` (alias ``hybrid``) and ``minilm-hybrid``: rank by the first, observe both: each ranked
  list carries the other scorer's scores of the same tools (:attr:`envs.RankedQuery.aux_scores`), and the
  policy reads the two-scorer features of :mod:`envs.features`, as the ``-hybrid`` conditions do.

Ranking: scores descending, ties broken by registry order (:meth:`envs.RankedQuery.from_scores` on the
candidates in registry order), the rule of every condition (:mod:`benchmarks.conditions`).

Identity (:meth:`RegistryRanker.identity`): the ranking scorer's ``identity()``, and the observed one's for
a hybrid. :func:`identity_mismatch` compares two identities on what determines the scores (the tokeniser
and its digest, the model and its file digest), not on library versions, which are recorded only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from benchmarks.corpus import QueryRecord
from benchmarks.scorers import BM25Index, EmbeddingScorer, make_scorer
from envs import RankedQuery

#: Scorer name -> (the scorer that ranks, the scorer also observed or None).
SEARCH_SCORERS: dict[str, tuple[str, str | None]] = {
    "bm25": ("bm25", None),
    "minilm": ("minilm", None),
    "bm25-hybrid": ("bm25", "minilm"),
    "minilm-hybrid": ("minilm", "bm25"),
}
#: Other accepted names.
SCORER_ALIASES: dict[str, str] = {"hybrid": "bm25-hybrid"}
#: Identity fields that name a library version: recorded, never a reason to refuse a policy.
VERSION_FIELDS = frozenset({"impl"})


def resolve_scorer(name: str) -> str:
    """The canonical name of a tool-search scorer (``hybrid`` -> ``bm25-hybrid``); ValueError otherwise."""
    canonical = SCORER_ALIASES.get(name, name)
    if canonical not in SEARCH_SCORERS:
        known = ", ".join([*SEARCH_SCORERS, *SCORER_ALIASES])
        raise ValueError(f"unknown tool-search scorer {name!r}; expected one of {known}")
    return canonical


def scorer_observation(scorer: str) -> str:
    """The observation set a policy reads under ``scorer``: ``hybrid`` with a second scorer, else ``score``."""
    return "hybrid" if SEARCH_SCORERS[resolve_scorer(scorer)][1] else "score"


def scorer_identity(scorer: str) -> dict[str, Any]:
    """What a tool-search scorer's scores depend on, whatever the registry: ``{"scorer", "rank": <the ranking
    scorer's identity>}`` plus ``"observe"`` (the observed one's) for a hybrid."""
    canonical = resolve_scorer(scorer)
    rank_by, observe = SEARCH_SCORERS[canonical]
    out: dict[str, Any] = {"scorer": canonical, "rank": make_scorer(rank_by).identity()}
    if observe is not None:
        out["observe"] = make_scorer(observe).identity()
    return out


def identity_mismatch(recorded: Mapping[str, Any], current: Mapping[str, Any], path: str = "") -> list[str]:
    """The fields (dotted paths) on which two scorer identities differ, library versions left out."""
    out = []
    for key in sorted(set(recorded) | set(current)):
        if key in VERSION_FIELDS:
            continue
        a, b = recorded.get(key), current.get(key)
        where = f"{path}.{key}" if path else key
        if isinstance(a, Mapping) and isinstance(b, Mapping):
            out += identity_mismatch(a, b, where)
        elif a != b:
            out.append(where)
    return out


class RegistryRanker:
    """A registry prepared for one tool-search scorer: ``scores(requests)`` gives every tool's scores.

    Args:
        texts: the tools' texts (:func:`benchmarks.tools.tool_text`), in registry order.
        scorer: a name of :data:`SEARCH_SCORERS` (or an alias).
        cache_dir: the cache folder of embeddings (:func:`benchmarks.score_cache.scores_dir`; default
            ``$SHORTLIST_CACHE_DIR`` or the per-user cache).
    """

    def __init__(self, texts: Sequence[str], scorer: str = "bm25", cache_dir: Path | None = None) -> None:
        self.scorer = resolve_scorer(scorer)
        self.rank_by, self.observe = SEARCH_SCORERS[self.scorer]
        self.texts = tuple(texts)
        self.cache_dir = cache_dir
        self._bm25: BM25Index | None = None
        self._embedder: EmbeddingScorer | None = None
        self._tool_embeddings: NDArray[np.float32] | None = None
        #: torch threads a served request is embedded on (the process's own count is restored afterwards)
        self.embed_threads = 1
        for name in self.parts:
            self._prepare(name)

    @property
    def parts(self) -> tuple[str, ...]:
        """The scorers computed: the ranking one, then the observed one (hybrids)."""
        return (self.rank_by,) if self.observe is None else (self.rank_by, self.observe)

    @property
    def observation(self) -> str:
        """``hybrid`` when a second scorer is observed, else ``score``."""
        return "score" if self.observe is None else "hybrid"

    def _prepare(self, name: str) -> None:
        if name == "bm25":
            self._bm25 = BM25Index(self.texts)
            return
        from benchmarks.score_cache import cached_embeddings

        scorer = make_scorer(name)
        assert isinstance(scorer, EmbeddingScorer)
        self._embedder = scorer
        self._tool_embeddings = cached_embeddings(scorer, self.texts, self.cache_dir)

    def identity(self) -> dict[str, Any]:
        """What the scores depend on (:func:`scorer_identity`)."""
        return scorer_identity(self.scorer)

    def _matrix(self, name: str, requests: Sequence[str], cache_requests: bool) -> NDArray[np.float64]:
        if name == "bm25":
            assert self._bm25 is not None
            if not requests:
                return np.zeros((0, len(self.texts)))
            return np.stack([self._bm25.scores(r) for r in requests])
        assert self._embedder is not None and self._tool_embeddings is not None
        from benchmarks.score_cache import cached_embeddings, embedding_threads

        if cache_requests:
            emb = cached_embeddings(self._embedder, list(requests), self.cache_dir)
        else:
            with embedding_threads(self.embed_threads):
                emb = self._embedder.embed(list(requests))
        return np.asarray(emb @ self._tool_embeddings.T, dtype=np.float64)

    def scores(
        self, requests: Sequence[str], *, cache_requests: bool = False
    ) -> tuple[NDArray[np.float64], NDArray[np.float64] | None]:
        """Every tool's scores for each request, (Q, T), by the ranking scorer and (hybrids) the observed one.

        Args:
            requests: the request texts.
            cache_requests: also cache the requests' embeddings on disk (a training log); a served request
                is embedded in memory only.
        """
        primary = self._matrix(self.rank_by, requests, cache_requests)
        aux = None if self.observe is None else self._matrix(self.observe, requests, cache_requests)
        for name, m in ((self.rank_by, primary), (self.observe, aux)):
            if m is not None and not np.all(np.isfinite(m)):
                raise ValueError(f"scorer {name} produced NaN or infinite scores")
        return primary, aux


def rank_candidates(
    primary: NDArray[np.float64],
    aux: NDArray[np.float64] | None,
    candidates: NDArray[np.int64],
    relevant: Sequence[int],
    qid: str,
) -> tuple[RankedQuery, NDArray[np.int64]]:
    """One request's ranked list over ``candidates`` (registry indices, in registry order).

    Args:
        primary: the ranking scorer's scores of every tool (T,).
        aux: the observed scorer's (hybrids), or None.
        candidates: the tools ranked (e.g. all but the excluded ones), ascending registry indices.
        relevant: positions in ``candidates`` of the relevant tools (labels; empty when serving).
        qid: the request's id.

    Returns:
        The ranked query (N = the number of candidates) and the registry index of the tool at each rank.
    """
    rq, order = RankedQuery.from_scores(
        primary[candidates], relevant, qid, aux_scores=None if aux is None else aux[candidates]
    )
    return rq, candidates[order]


def rank_records(
    ranker: RegistryRanker, records: Sequence[QueryRecord], index: Mapping[str, int], prefix: str = ""
) -> list[RankedQuery]:
    """Labelled ranked queries of ``records`` over the whole registry (their relevant tools: ``gold``, mapped to
    registry positions by ``index``), the requests' embeddings cached (a log or a benchmark, read again).

    Args:
        ranker: the prepared registry.
        records: the requests and the tools relevant to each.
        index: tool name -> registry position.
        prefix: put before every query id (e.g. the benchmark's name, when several are pooled).
    """
    primary, aux = ranker.scores([r.text for r in records], cache_requests=True)
    everything = np.arange(len(ranker.texts), dtype=np.int64)
    return [
        rank_candidates(
            primary[i], None if aux is None else aux[i], everything, [index[g] for g in r.gold], prefix + r.qid
        )[0]
        for i, r in enumerate(records)
    ]
