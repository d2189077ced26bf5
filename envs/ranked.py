"""The ranked-list data type every environment, agent and evaluator works on."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray


@dataclass(frozen=True, eq=False)
class RankedQuery:
    """One query's candidate list, ranked by a scorer.

    Attributes:
        scores: relevance scores sorted descending (non-increasing), float64, finite.
            Length = number of ranked candidates (the depth cap can never exceed it).
        relevant_ranks: sorted, unique 1-based ranks of the relevant items present in ``scores``.
        qid: query id (used in every error message and result row).
        n_candidates: candidate-set size N used by P_rand; defaults to ``len(scores)``.
            Larger when a run was truncated from a bigger corpus.
        n_relevant: number of relevant items R used by P_rand; defaults to
            ``len(relevant_ranks)`` (it may be larger for truncated runs).
        aux_scores: optional, a second scorer's scores of the same ranked items, in this
            ranking's order (not sorted; finite). Present on two-scorer ("hybrid") conditions,
            where the learners then observe the two-scorer features of :mod:`envs.features`.
        payoffs: optional, an observed outcome of showing the top k, for k = 1..L (finite): e.g. 1
            when a downstream LLM, shown the top k, chose the gold tool, else 0. The ``outcome``
            reward pays it on STOP (:func:`envs.terminal_payoffs`); labels, never observed by a policy.

    Raises:
        ValueError: naming ``qid``, for empty/NaN/inf/unsorted scores, ranks out of
            range or duplicated, or inconsistent N/R.
    """

    scores: NDArray[np.float64]
    relevant_ranks: NDArray[np.int64]
    qid: str
    n_candidates: int = 0
    n_relevant: int = -1
    aux_scores: NDArray[np.float64] | None = None
    payoffs: NDArray[np.float64] | None = None

    def __post_init__(self) -> None:
        s = np.asarray(self.scores, dtype=np.float64)
        if s.ndim != 1 or s.size == 0:
            raise ValueError(f"query {self.qid!r}: scores must be a non-empty 1-D array")
        if not np.all(np.isfinite(s)):
            pos = int(np.flatnonzero(~np.isfinite(s))[0]) + 1
            raise ValueError(
                f"query {self.qid!r}: score at rank {pos} is {s[pos - 1]} (NaN/inf scores are not allowed)"
            )
        if np.any(np.diff(s) > 0):
            pos = int(np.flatnonzero(np.diff(s) > 0)[0]) + 2
            raise ValueError(f"query {self.qid!r}: scores must be sorted descending (rank {pos} > rank {pos - 1})")
        rr = np.asarray(self.relevant_ranks)
        if rr.size and not np.issubdtype(rr.dtype, np.integer):
            if not np.all(np.isfinite(rr)) or np.any(rr != np.floor(rr)):
                raise ValueError(f"query {self.qid!r}: relevant ranks must be whole numbers")
        rr = np.asarray(rr, dtype=np.int64).ravel()
        if rr.size and (rr.min() < 1 or rr.max() > s.size):
            raise ValueError(f"query {self.qid!r}: relevant rank out of range 1..{s.size}: {rr.tolist()[:5]}")
        if np.unique(rr).size != rr.size:
            raise ValueError(f"query {self.qid!r}: duplicate relevant ranks {rr.tolist()[:5]}")
        n = int(self.n_candidates) or s.size
        r = rr.size if int(self.n_relevant) < 0 else int(self.n_relevant)
        if n < s.size:
            raise ValueError(f"query {self.qid!r}: n_candidates={n} is smaller than the {s.size} ranked items")
        if r < rr.size or r > n:
            raise ValueError(f"query {self.qid!r}: n_relevant={r} must lie in [{rr.size}, {n}]")
        if self.aux_scores is not None:
            aux = np.array(self.aux_scores, dtype=np.float64)
            if aux.shape != s.shape:
                raise ValueError(
                    f"query {self.qid!r}: aux_scores has shape {aux.shape}, expected one per ranked item {s.shape}"
                )
            if not np.all(np.isfinite(aux)):
                pos = int(np.flatnonzero(~np.isfinite(aux))[0]) + 1
                raise ValueError(f"query {self.qid!r}: second-scorer score at rank {pos} is {aux[pos - 1]}")
            aux.setflags(write=False)
            object.__setattr__(self, "aux_scores", aux)
        if self.payoffs is not None:
            pay = np.array(self.payoffs, dtype=np.float64)
            if pay.shape != s.shape or not np.all(np.isfinite(pay)):
                raise ValueError(f"query {self.qid!r}: payoffs must be one finite value per ranked item {s.shape}")
            pay.setflags(write=False)
            object.__setattr__(self, "payoffs", pay)
        s.setflags(write=False)
        rr = np.sort(rr)
        rr.setflags(write=False)
        object.__setattr__(self, "scores", s)
        object.__setattr__(self, "relevant_ranks", rr)
        object.__setattr__(self, "n_candidates", n)
        object.__setattr__(self, "n_relevant", r)

    @property
    def hybrid(self) -> bool:
        """Whether a second scorer's scores come with the ranking (two-scorer features)."""
        return self.aux_scores is not None

    @property
    def length(self) -> int:
        """Number of ranked candidates (the largest possible depth)."""
        return int(self.scores.size)

    @property
    def gold_rank(self) -> int:
        """Rank of the first relevant item, or 0 when none is in the list."""
        return int(self.relevant_ranks[0]) if self.relevant_ranks.size else 0

    def found_at(self, k: ArrayLike) -> NDArray[np.bool_]:
        """Whether the top-k shortlist holds at least one relevant item."""
        g = self.gold_rank
        kk = np.asarray(k)
        return (kk >= g) & (g > 0)

    @classmethod
    def from_scores(
        cls,
        scores: ArrayLike,
        relevant: Sequence[int],
        qid: str,
        n_candidates: int = 0,
        n_relevant: int = -1,
        aux_scores: ArrayLike | None = None,
    ) -> tuple[RankedQuery, NDArray[np.int64]]:
        """Rank unsorted candidate scores.

        Ties are broken by candidate position (stable sort: the earlier candidate
        ranks first), so rankings are deterministic.

        Args:
            scores: one score per candidate, in candidate order.
            relevant: candidate positions (0-based) of the relevant items.
            qid: query id.
            aux_scores: optional second-scorer scores, in candidate order (reordered with the ranking).

        Returns:
            The ranked query and the candidate order (``order[i]`` = candidate at rank i+1).
        """
        s, rel = _checked(scores, relevant, qid)
        order = np.argsort(-s, kind="stable")
        rank_of = np.empty_like(order)
        rank_of[order] = np.arange(1, s.size + 1)
        aux = None
        if aux_scores is not None:
            aux = np.asarray(aux_scores, dtype=np.float64).ravel()
            if aux.shape != s.shape:
                raise ValueError(f"query {qid!r}: {aux.size} second-scorer scores for {s.size} candidates")
            aux = aux[order]
        return cls(s[order], rank_of[rel], qid, n_candidates, n_relevant, aux), order


def _checked(scores: ArrayLike, relevant: Sequence[int], qid: str) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """One query's candidate scores (float64, flat) and relevant candidate indices, checked: ValueError naming
    ``qid`` and the candidate for a NaN/inf score, or for a relevant index outside the candidates."""
    s = np.asarray(scores, dtype=np.float64).ravel()
    if s.size and not np.all(np.isfinite(s)):
        bad = int(np.flatnonzero(~np.isfinite(s))[0])
        raise ValueError(f"query {qid!r}: score of candidate {bad} is {s[bad]} (NaN/inf scores are not allowed)")
    rel = np.asarray(list(relevant), dtype=np.int64)
    if rel.size and (rel.min() < 0 or rel.max() >= s.size):
        raise ValueError(f"query {qid!r}: relevant candidate index out of range 0..{s.size - 1}")
    return s, rel


def first_relevant_rank(scores: ArrayLike, relevant: Sequence[int], qid: str) -> int:
    """The rank :meth:`RankedQuery.from_scores` gives the first relevant item (its ``gold_rank``; 0 when
    ``relevant`` is empty) without building the query: a candidate's rank under the stable descending sort is
    1 + #{candidates scored strictly higher} + #{candidates scored equal and earlier in candidate order}.
    For callers that need only that rank many times over (the fusion-weight fit ranks every training query
    at 21 weights); the same checks as ``from_scores`` (one checker, :func:`_checked`)."""
    s, rel = _checked(scores, relevant, qid)
    if not rel.size:
        return 0
    return min(1 + int(np.count_nonzero(s > s[j])) + int(np.count_nonzero(s[:j] == s[j])) for j in rel.tolist())
