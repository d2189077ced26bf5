"""Observation features of the shortlist-depth process, computed from scores only.

One function, :func:`feature_matrix`, serves the Gymnasium environment (row by row)
and the batched evaluator (all depths at once), so both always see the same numbers.

Four named observation sets (:data:`OBSERVATIONS`). By default (``observation="auto"``) a
query's data sets which one it gives; ``EpisodeConfig.observation`` names one explicitly:

- ``score`` (13 features, below): the ranking scorer's scores only;
- ``hybrid`` (20 features): the 13 of ``score`` plus 7 two-scorer features (agreement and
  fusion, table below), for queries that carry a second scorer's scores of the same
  candidates (:attr:`envs.RankedQuery.aux_scores`; the ``hybrid`` condition variants);
- ``strict`` (12 features, table at the end): the paper's examined-items-only view. At depth k it
  reads the scores of items 1..k and the list length, nothing of the unexamined items k+1..L
  (no next score, no statistics of the whole list);
- ``listwise`` (133 features; 220 as ``listwise-hybrid``, which ``listwise`` resolves to on queries
  with a second scorer): the 13 of ``score`` (20 of ``hybrid``) followed by the listwise posterior's
  per-item features of the top :data:`LISTWISE_RANKS` ranks (:func:`rank_features`, the view of
  :mod:`agents.posterior`) and which of them are already shown (table after the per-rank tables).

Per-query normalisation (so BM25 and cosine scores live on the same range): with
``mu`` and ``sd`` the mean and standard deviation of the query's full candidate
score list (a list with ``sd <= 1e-12 * max|s|`` counts as constant: all z = 0),

- ``z_i = (s_i - mu) / sd`` (z-scores; "how far above the pack" each item is);
- ``u_i = (s_i - s_min) / (s_max - s_min)`` (min-max; all ones for a constant list).

Features at depth k (1-based; "next" is item k+1, or item k itself at the end of
the list), all float32 and bounded:

==  ====================  =================================================  ========
 #  name                  definition                                         range
==  ====================  =================================================  ========
 0  top_z                 clip(z_1, -8, 8) / 8                               [-1, 1]
 1  cur_z                 clip(z_k, -8, 8) / 8                               [-1, 1]
 2  next_z                clip(z_{k+1}, -8, 8) / 8                           [-1, 1]
 3  gap_top_cur           clip(z_1 - z_k, 0, 16) / 16                        [0, 1]
 4  gap_cur_next          clip(z_k - z_{k+1}, 0, 8) / 8                      [0, 1]
 5  spread                2 * std(u)                                         [0, 1]
 6  cur_over_top          u_k (current score relative to the top)            [0, 1]
 7  depth_frac            k / L (L = ranked-list length)                     [0, 1]
 8  log_depth             log2(k + 1) / log2(L + 1)                          [0, 1]
 9  log_n                 min(1, log10(N) / 7)                               [0, 1]
10  ceiling               min(1, -log2 P_rand(k; N, 1) / 24) = log2(N/k)/24  [0, 1]
11  gap_rel               (z_k - z_{k+1}) / largest consecutive gap in the   [0, 1]
                          top min(L, 50)
12  max_gap_passed_rel    largest consecutive gap among ranks 1..k (gaps     [0, 1]
                          i -> i+1 with i < k) / the same window maximum
==  ====================  =================================================  ========

Two-scorer features (``hybrid``): with ``a_i`` the second scorer's score of the item the first
ranks at i, ``za`` its z-scores over the list (as ``z``), ``ra_i = 1 + #{j : a_j > a_i}`` its
rank under the second scorer (ties share the best rank), ``f_i = z_i + za_i`` the equal-weight
z-fusion and ``rf_i`` the rank by ``f`` (same tie rule); ranks are scaled as
``lr(r) = log2(r) / log2(L)`` (0 for L = 1):

==  ====================  =================================================  ========
 #  name                  definition                                         range
==  ====================  =================================================  ========
13  aux_agree_top         1 if the first scorer's top item is also the       {0, 1}
                          second's top (ra_1 = 1)
14  aux_top_seen          1 if an item the second scorer ranks first lies    {0, 1}
                          in the top k
15  aux_rank_cur          lr(ra_k)                                           [0, 1]
16  aux_best_unseen       lr(min ra_j over j > k); 1 at the end of the list  [0, 1]
17  aux_z_cur             clip(za_k, -8, 8) / 8                              [-1, 1]
18  fused_z_cur           clip(f_k / 2, -8, 8) / 8                           [-1, 1]
19  fused_rank_cur        lr(rf_k)                                           [0, 1]
==  ====================  =================================================  ========

Examined-items-only features (``strict``): with ``m_k`` and ``sd_k`` the mean and standard
deviation of the examined scores s_1..s_k (``sd_k`` at rounding level counts as 0: all z = 0),
``e_k = (s_i - m_k) / sd_k`` their z-scores and ``d_i = s_i - s_{i+1}`` the drops already seen
(i < k):

==  ====================  =================================================  ========
 #  name                  definition                                         range
==  ====================  =================================================  ========
 0  ex_top_z              clip(e_1, -8, 8) / 8                               [0, 1]
 1  ex_cur_z              clip(e_k, -8, 8) / 8                               [-1, 0]
 2  ex_gap_top_cur        clip(e_1 - e_k, 0, 16) / 16                        [0, 1]
 3  ex_cur_over_top       clip(s_k / s_1, -1, 1) when s_1 > 0, else          [-1, 1]
                          1 if s_k = s_1 and 0 otherwise
 4  ex_last_drop_rel      d_{k-1} / max(d_1..d_{k-1}); 0 at k = 1            [0, 1]
 5  ex_last_drop_top      d_{k-1} / (s_1 - s_k); 0 at k = 1 or s_k = s_1     [0, 1]
 6  ex_spread             min(1, 2 sd_k / (s_1 - s_k)); 0 when s_k = s_1      [0, 1]
 7  ex_tie_run            (items equal to s_k among s_1..s_k, minus 1) / k   [0, 1)
 8  depth_frac            k / L                                              [0, 1]
 9  log_depth             log2(k + 1) / log2(L + 1)                          [0, 1]
10  log_n                 min(1, log10(N) / 7)                               [0, 1]
11  ceiling               min(1, log2(N/k) / 24)                             [0, 1]
==  ====================  =================================================  ========

For numerical range the strict features are computed on ``(s - s_1) / (s_1 - s_L)`` (a falling,
affine rescaling of the whole list, 0 for a constant list; scores whose range overflows are first
divided by their largest magnitude, as for the other sets). None of them changes under such a
rescaling except ``ex_cur_over_top``, which reads the raw scores, so the rescaling carries nothing of
the unexamined items into them (a test changes items k+1..L and checks rows 1..k).

Per-rank features (:func:`rank_features`, the listwise model of :mod:`agents.posterior`): not an
observation at a depth but one row per ITEM, ranks i = 1..M (M = min(m, L)), each item described in
the context of the whole list (``z``, ``u`` as above, on the full list; ``p_i = softmax(z)_i`` over
the full list; "next" of the last item and "previous" of the first give a gap of 0). Tied scores get
equal score features; only the position features (``log_rank``, ``is_rank1``, ``is_rank2``) follow
the ranking's order (ties broken as the ranking breaks them):

==  ====================  =================================================  ==========
 #  name                  definition                                         range
==  ====================  =================================================  ==========
 0  z                     clip(z_i, -8, 8) / 8                               [-1, 1]
 1  gap_next              clip(z_i - z_{i+1}, 0, 8) / 8; 0 at i = L          [0, 1]
 2  gap_prev              clip(z_{i-1} - z_i, 0, 8) / 8; 0 at i = 1          [0, 1]
 3  gap_top               clip(z_1 - z_i, 0, 16) / 16                        [0, 1]
 4  log_rank              log2(i)                                            [0, log2 L]
 5  is_rank1              1 if i = 1                                         {0, 1}
 6  is_rank2              1 if i = 2                                         {0, 1}
 7  minmax                u_i                                                [0, 1]
 8  softmax_mass          p_i = exp(z_i) / sum_j exp(z_j)                    [0, 1]
==  ====================  =================================================  ==========

With a second scorer (``aux_scores``; ``za``, ``ra`` and the fusion rank ``rf`` as in the two-scorer
table above), six more columns:

==  ====================  =================================================  ==========
 #  name                  definition                                         range
==  ====================  =================================================  ==========
 9  aux_log_rank          log2(ra_i)                                         [0, log2 L]
10  aux_z                 clip(za_i, -8, 8) / 8                              [-1, 1]
11  aux_top1              1 if ra_i = 1 (ties at the top: every tied item)   {0, 1}
12  fused_log_rank        log2(rf_i)                                         [0, log2 L]
13  aux_agree_top         1 if ra_1 = 1 (the same on every row: in a         {0, 1}
                          softmax over the ranks it only moves mass between
                          the list and a "beyond the list" pseudo-item)
14  both_top              1 if i = 1 and ra_1 = 1 (the item both scorers     {0, 1}
                          rank first)
==  ====================  =================================================  ==========

Listwise observation (``listwise``): at depth k, the columns of ``score`` (``hybrid`` on queries with
a second scorer; then the set is called ``listwise-hybrid``), then one block per rank i = 1..M,
M = :data:`LISTWISE_RANKS` = 20, item-major (``item<i>_<name>``), each column taken from
:func:`rank_features` of the query (statistics over the whole list) and bounded:

==================  ========================================================  ==========
name                definition                                                range
==================  ========================================================  ==========
item<i>_z           ``z`` of rank i                                           [-1, 1]
item<i>_gap_next    ``gap_next`` of rank i                                    [0, 1]
item<i>_gap_top     ``gap_top`` of rank i                                     [0, 1]
item<i>_minmax      ``minmax`` of rank i                                      [0, 1]
item<i>_mass        ``softmax_mass`` of rank i                                [0, 1]
item<i>_shown       1 if i <= k (rank i is in the shortlist at this depth)   {0, 1}
==================  ========================================================  ==========

With a second scorer, four more per rank: ``item<i>_aux_rank`` = ``aux_log_rank / log2(L)``,
``item<i>_aux_z`` = ``aux_z``, ``item<i>_aux_top1`` = ``aux_top1``, ``item<i>_fused_rank`` =
``fused_log_rank / log2(L)`` (ranks scaled as ``lr`` above: [0, 1]; 0 for L = 1). Ranks beyond a list
shorter than M give all-zero blocks. Left out of the per-rank view, because they add nothing in a window
of fixed positions: ``gap_prev`` (rank i's equals rank i-1's ``gap_next``), ``log_rank``, ``is_rank1``,
``is_rank2`` (the same at a position on every list), ``aux_agree_top`` (a column of ``hybrid``) and
``both_top`` (rank 1's ``aux_top1`` times ``aux_agree_top``). The per-item block is the same at every
depth of a query except its ``shown`` flags, which carry the depth.

Why M = 20: the listwise posterior itself (:mod:`agents.posterior`, 60 ranks), refitted on m = 10, 20, 30 and 60
ranks, earns on the inner validation split of the training queries (``shortlist tune --agent posterior --benchmark
B --scorer S --grid m=10,20,30,60 --seeds 42``: the fit is deterministic; ``results/tuning/posterior-m/``) at 20
ranks 7.018 / 7.005 / 3.413 / 4.238 / 3.539 against 6.903 / 7.005 / 3.411 / 4.234 / 3.549 at 60 (bfcl-bm25 /
bfcl-minilm / metatool-bm25 / metatool-minilm / toolbench-minilm): its decisions use the top ranks, so 20 carry
its information at a third of the width.
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Protocol

import numpy as np
from numpy.typing import NDArray

from envs.ranked import RankedQuery

FEATURE_NAMES: tuple[str, ...] = (
    "top_z",
    "cur_z",
    "next_z",
    "gap_top_cur",
    "gap_cur_next",
    "spread",
    "cur_over_top",
    "depth_frac",
    "log_depth",
    "log_n",
    "ceiling",
    "gap_rel",
    "max_gap_passed_rel",
)
N_FEATURES = len(FEATURE_NAMES)
HYBRID_NAMES: tuple[str, ...] = (
    "aux_agree_top",
    "aux_top_seen",
    "aux_rank_cur",
    "aux_best_unseen",
    "aux_z_cur",
    "fused_z_cur",
    "fused_rank_cur",
)
STRICT_NAMES: tuple[str, ...] = (
    "ex_top_z",
    "ex_cur_z",
    "ex_gap_top_cur",
    "ex_cur_over_top",
    "ex_last_drop_rel",
    "ex_last_drop_top",
    "ex_spread",
    "ex_tie_run",
    "depth_frac",
    "log_depth",
    "log_n",
    "ceiling",
)
#: Columns of :func:`rank_features` (score only), and the six added with a second scorer.
RANK_FEATURE_NAMES: tuple[str, ...] = (
    "z",
    "gap_next",
    "gap_prev",
    "gap_top",
    "log_rank",
    "is_rank1",
    "is_rank2",
    "minmax",
    "softmax_mass",
)
RANK_HYBRID_NAMES: tuple[str, ...] = (
    "aux_log_rank",
    "aux_z",
    "aux_top1",
    "fused_log_rank",
    "aux_agree_top",
    "both_top",
)
LISTWISE_RANKS = 20
"""Ranks of the per-item block of the ``listwise`` observation (module docstring: why 20)."""
#: Per-rank columns of the ``listwise`` block (score only), and the four added with a second scorer.
LISTWISE_ITEM_NAMES: tuple[str, ...] = ("z", "gap_next", "gap_top", "minmax", "mass", "shown")
LISTWISE_ITEM_HYBRID_NAMES: tuple[str, ...] = ("aux_rank", "aux_z", "aux_top1", "fused_rank")


def listwise_names(hybrid: bool) -> tuple[str, ...]:
    """Column names of the ``listwise`` observation (``listwise-hybrid`` when ``hybrid``)."""
    per = LISTWISE_ITEM_NAMES + (LISTWISE_ITEM_HYBRID_NAMES if hybrid else ())
    base = FEATURE_NAMES + HYBRID_NAMES if hybrid else FEATURE_NAMES
    return base + tuple(f"item{i}_{n}" for i in range(1, LISTWISE_RANKS + 1) for n in per)


#: The named observation sets: name -> feature names, in column order (``listwise-hybrid`` is what
#: ``listwise`` gives on queries with a second scorer).
OBSERVATIONS: dict[str, tuple[str, ...]] = {
    "score": FEATURE_NAMES,
    "hybrid": FEATURE_NAMES + HYBRID_NAMES,
    "strict": STRICT_NAMES,
    "listwise": listwise_names(False),
    "listwise-hybrid": listwise_names(True),
}
#: Accepted values of ``observation``: ``auto`` (the query's own set) or a named set (``listwise`` gives its
#: two-scorer variant by itself, so ``listwise-hybrid`` is not asked for by name).
OBSERVATION_CHOICES: tuple[str, ...] = ("auto", "score", "hybrid", "strict", "listwise")
#: The sets whose row at depth k reads nothing of the items below k (the other sets read the next score or
#: statistics of the whole list): a policy that decides depth by depth on one of them sees the examined items only
#: (:func:`agents.registry.reads_examined_only`).
EXAMINED_ONLY_SETS: tuple[str, ...] = ("strict",)
Z_CLIP = 8.0
GAP_WINDOW = 50


def observation_of(query: RankedQuery, observation: str = "auto") -> str:
    """The observation set a query gives: with ``auto``, ``hybrid`` when it carries a second scorer's
    scores and ``score`` otherwise; ``listwise`` likewise resolves to ``listwise-hybrid`` with a second
    scorer; a named set as asked (``hybrid`` needs the second scorer)."""
    if observation not in OBSERVATION_CHOICES:
        raise ValueError(f"unknown observation {observation!r}; expected one of {', '.join(OBSERVATION_CHOICES)}")
    if observation == "auto":
        return "hybrid" if query.hybrid else "score"
    if observation == "listwise":
        return "listwise-hybrid" if query.hybrid else "listwise"
    if observation == "hybrid" and not query.hybrid:
        raise ValueError(f"query {query.qid!r}: the hybrid observation needs a second scorer's scores (aux_scores)")
    return observation


def observation_width(queries: Sequence[RankedQuery], observation: str = "auto") -> int:
    """The one feature width of a query set; ValueError naming the first query whose set differs."""
    if not queries:
        raise ValueError("no queries given")
    kind = observation_of(queries[0], observation)
    for q in queries:
        if observation_of(q, observation) != kind:
            raise ValueError(
                f"query {q.qid!r} gives the {observation_of(q, observation)!r} observation but query "
                f"{queries[0].qid!r} gives {kind!r}: a query set must carry a second scorer on every query or on none"
            )
    return len(OBSERVATIONS[kind])


def zscores(s: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per-list z-scores (all 0 for a list whose spread is at rounding level), overflow-safe: the
    ``z`` of every feature here and of the fused scorer (:func:`benchmarks.conditions.fused_scores`)."""
    with np.errstate(over="ignore", invalid="ignore"):
        if not (np.isfinite(s.mean()) and np.isfinite(s.std()) and np.isfinite(s.max() - s.min())):
            s = s / float(np.abs(s).max())  # z-scores are scale-invariant
    sd = s.std()
    if sd <= 1e-12 * max(1.0, float(np.abs(s).max())):
        return np.zeros_like(s)
    return (s - s.mean()) / sd


def _ranks(v: NDArray[np.float64]) -> NDArray[np.int64]:
    """1 + the number of strictly larger entries (ties share the best rank)."""
    srt = np.sort(v)
    return (v.size - np.searchsorted(srt, v, side="right") + 1).astype(np.int64)


def _hybrid_columns(query: RankedQuery, z: NDArray[np.float64], D: int) -> NDArray[np.float64]:
    a = np.asarray(query.aux_scores, dtype=np.float64)
    L = a.size
    za = zscores(a)
    ra = _ranks(a)
    rf = _ranks(z + za)
    scale = np.log2(L) if L > 1 else 1.0

    def lr(r: NDArray[np.int64]) -> NDArray[np.float64]:
        return np.log2(r) / scale if L > 1 else np.zeros(r.shape)

    k = np.arange(1, D + 1)
    first_top = int(np.flatnonzero(ra == 1)[0]) + 1  # 1-based rank (first scorer) of the second's top
    unseen = np.append(np.minimum.accumulate(ra[::-1])[::-1][1:], L)  # min ra_j over j > k, L at the end
    out = np.empty((D, len(HYBRID_NAMES)), dtype=np.float64)
    out[:, 0] = float(ra[0] == 1)
    out[:, 1] = (k >= first_top).astype(np.float64)
    out[:, 2] = lr(ra[:D])
    out[:, 3] = lr(unseen[:D])
    out[:, 4] = np.clip(za[:D], -Z_CLIP, Z_CLIP) / Z_CLIP
    out[:, 5] = np.clip((z[:D] + za[:D]) / 2, -Z_CLIP, Z_CLIP) / Z_CLIP
    out[:, 6] = lr(rf[:D])
    return out


def _depth_columns(k: NDArray[np.int64], L: int, n: int) -> NDArray[np.float64]:
    """depth_frac, log_depth, log_n and ceiling at depths ``k`` (shared by the score and strict sets)."""
    return np.column_stack(
        [
            k / L,
            np.log2(k + 1) / np.log2(L + 1),
            np.full(k.size, min(1.0, np.log10(n) / 7.0)),
            np.minimum(1.0, np.log2(n / k) / 24.0),
        ]
    )


def _strict_matrix(query: RankedQuery, D: int) -> NDArray[np.float64]:
    raw = query.scores
    L = raw.size
    k = np.arange(1, D + 1)
    s = raw
    with np.errstate(over="ignore", invalid="ignore"):
        if not np.isfinite(s[0] - s[-1]):
            s = s / float(np.abs(s).max())  # the features below are scale-invariant
    rng = s[0] - s[-1]
    x = (s - s[0]) / rng if rng > 0 else np.zeros(L)  # <= 0, falling, affine in the scores
    xe = x[:D]
    mean = np.cumsum(xe) / k
    sd = np.sqrt(np.maximum(np.cumsum(xe**2) / k - mean**2, 0.0))  # x_1 = 0: the shift keeps this exact
    flat = sd <= 1e-12
    safe = np.where(flat, 1.0, sd)
    top_z = np.where(flat, 0.0, (xe[0] - mean) / safe)
    cur_z = np.where(flat, 0.0, (xe - mean) / safe)
    fall = xe[0] - xe  # s_1 - s_k, rescaled
    drops = np.concatenate([[0.0], -np.diff(xe)])  # d_{k-1} at depth k (0 at k = 1)
    seen = np.maximum.accumulate(drops)
    tie = np.concatenate([[True], drops[1:] <= 0])  # s_k equals s_{k-1}
    start = np.maximum.accumulate(np.where(tie, 0, k - 1))  # 0-based index where the tie run starts
    run = k - start  # items equal to s_k among s_1..s_k
    s1 = float(raw[0])
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        ratio = np.clip(raw[:D] / s1, -1, 1) if s1 > 0 else (raw[:D] == s1).astype(np.float64)
    out = np.empty((D, len(STRICT_NAMES)), dtype=np.float64)
    out[:, 0] = np.clip(top_z, -Z_CLIP, Z_CLIP) / Z_CLIP
    out[:, 1] = np.clip(cur_z, -Z_CLIP, Z_CLIP) / Z_CLIP
    out[:, 2] = np.clip(top_z - cur_z, 0, 2 * Z_CLIP) / (2 * Z_CLIP)
    out[:, 3] = np.nan_to_num(ratio, nan=0.0)
    out[:, 4] = np.where(seen > 0, drops / np.where(seen > 0, seen, 1.0), 0.0)
    out[:, 5] = np.where(fall > 0, np.clip(drops / np.where(fall > 0, fall, 1.0), 0, 1), 0.0)
    out[:, 6] = np.where(fall > 0, np.minimum(1.0, 2 * sd / np.where(fall > 0, fall, 1.0)), 0.0)
    out[:, 7] = (run - 1) / k
    out[:, 8:12] = _depth_columns(k, L, query.n_candidates)
    return out


#: Feature matrices already computed, per query object (dropped with the query) and (depth, set): the
#: learners, the environments (one per vectorised copy) and the evaluator of every cell of a condition
#: ask for the same matrices, and a query's scores never change (it is frozen and its arrays read-only).
_MEMO: weakref.WeakKeyDictionary[RankedQuery, dict[tuple[int, str], NDArray[np.float32]]] = weakref.WeakKeyDictionary()


def feature_matrix(query: RankedQuery, max_depth: int | None = None, observation: str = "auto") -> NDArray[np.float32]:
    """Observations for depths k = 1..D (D = ``max_depth`` or the list length): shape (D, 13) for the
    ``score`` set, (D, 20) for ``hybrid`` (the default for a query with a second scorer), (D, 12)
    for ``strict`` and (D, 133) / (D, 220) for ``listwise`` without / with a second scorer
    (:func:`observation_of` resolves ``observation``).

    Computed once per query, depth and set in a process (:data:`_MEMO`) and returned read-only."""
    kind = observation_of(query, observation)
    L = query.scores.size
    D = L if max_depth is None else min(int(max_depth), L)
    if D < 1:
        raise ValueError(f"query {query.qid!r}: max_depth must be >= 1")
    memo = _MEMO.setdefault(query, {})
    out = memo.get((D, kind))
    if out is None:
        out = _feature_matrix(query, D, kind)
        out.setflags(write=False)
        memo[(D, kind)] = out
    return out


class Observer(Protocol):
    """What a learner observes instead of a named set: ``names`` its columns, ``observer(query, D)`` the
    (D, len(names)) float32 matrix of depths 1..D. For a learner whose state holds more than the scores (a fitted
    model's belief per depth, :mod:`agents.residual`); the environment, the greedy roll-out and the held-out
    scores read it through :func:`observed_matrix`."""

    names: tuple[str, ...]

    def __call__(self, query: RankedQuery, depth: int) -> NDArray[np.float32]: ...


def observed_matrix(
    query: RankedQuery, depth: int, observation: str = "auto", observer: Observer | None = None
) -> NDArray[np.float32]:
    """The observations of depths 1..``depth``: the named set's (:func:`feature_matrix`) or, with ``observer``,
    its matrix, checked: ValueError naming the query when its shape is not (depth, len(observer.names)) or a value
    is NaN or infinite."""
    if observer is None:
        return feature_matrix(query, depth, observation)
    out = observer(query, depth)
    width = len(observer.names)
    if out.shape != (depth, width):
        raise ValueError(f"query {query.qid!r}: the observer gave shape {out.shape}, expected ({depth}, {width})")
    if not np.all(np.isfinite(out)):
        raise ValueError(f"query {query.qid!r}: the observer gave a NaN or infinite observation")
    return out


def _feature_matrix(query: RankedQuery, D: int, kind: str) -> NDArray[np.float32]:
    L = query.scores.size
    if kind == "strict":
        return _strict_matrix(query, D).astype(np.float32)
    if kind.startswith("listwise"):
        base = feature_matrix(query, D, "hybrid" if query.hybrid else "score")
        return np.concatenate([base, _listwise_block(query, D)], axis=1)
    s = query.scores
    with np.errstate(over="ignore", invalid="ignore"):
        if not (np.isfinite(s.mean()) and np.isfinite(s.std()) and np.isfinite(s[0] - s[-1])):
            s = s / float(np.abs(s).max())  # z-scores and min-max are scale-invariant
    z = zscores(s)  # a list whose spread is at rounding level is constant: all z-scores are 0
    rng = s[0] - s[-1]
    u = (s - s[-1]) / rng if rng > 0 else np.ones_like(s)
    k = np.arange(1, D + 1)
    cur = z[:D]
    nxt = z[np.minimum(k, L - 1)]
    drops = -np.diff(z)  # >= 0: drop from rank i to rank i+1 (length L-1)
    window = drops[:GAP_WINDOW]
    gmax = float(window.max()) if window.size and window.max() > 0 else 1.0
    gap_next = np.where(k < L, cur - nxt, 0.0)
    # largest drop already passed at depth k: among drops between ranks i and i+1, i < k
    passed = np.concatenate([[0.0], np.maximum.accumulate(drops)])[:D]
    out = np.empty((D, 13), dtype=np.float64)
    out[:, 0] = np.clip(z[0], -Z_CLIP, Z_CLIP) / Z_CLIP
    out[:, 1] = np.clip(cur, -Z_CLIP, Z_CLIP) / Z_CLIP
    out[:, 2] = np.clip(nxt, -Z_CLIP, Z_CLIP) / Z_CLIP
    out[:, 3] = np.clip(z[0] - cur, 0, 2 * Z_CLIP) / (2 * Z_CLIP)
    out[:, 4] = np.clip(gap_next, 0, Z_CLIP) / Z_CLIP
    out[:, 5] = min(1.0, 2.0 * float(u.std()))
    out[:, 6] = u[:D]
    out[:, 7:11] = _depth_columns(k, L, query.n_candidates)
    out[:, 11] = np.clip(gap_next / gmax, 0, 1)
    out[:, 12] = np.clip(passed / gmax, 0, 1)
    if kind == "hybrid":
        out = np.concatenate([out, _hybrid_columns(query, z, D)], axis=1)
    return out.astype(np.float32)


def _listwise_block(query: RankedQuery, D: int) -> NDArray[np.float32]:
    """The per-rank block of the ``listwise`` observation at depths 1..D (module docstring), (D, M * P)."""
    ranks = rank_features(query, LISTWISE_RANKS)
    M, L = ranks.shape[0], query.scores.size
    names = rank_feature_names(query.hybrid)
    col = {n: ranks[:, names.index(n)] for n in names}
    per = [col["z"], col["gap_next"], col["gap_top"], col["minmax"], col["softmax_mass"], np.zeros(M)]
    if query.hybrid:
        scale = np.log2(L) if L > 1 else 1.0
        per += [col["aux_log_rank"] / scale, col["aux_z"], col["aux_top1"], col["fused_log_rank"] / scale]
    items = np.zeros((LISTWISE_RANKS, len(per)))
    items[:M] = np.column_stack(per)
    block = np.repeat(items[None], D, axis=0)  # (D, ranks, P)
    shown = LISTWISE_ITEM_NAMES.index("shown")
    block[:, :, shown] = np.arange(1, LISTWISE_RANKS + 1)[None, :] <= np.arange(1, D + 1)[:, None]
    return block.reshape(D, -1).astype(np.float32)


def rank_feature_names(hybrid: bool) -> tuple[str, ...]:
    """Column names of :func:`rank_features` for queries without (``hybrid=False``) or with a second scorer."""
    return RANK_FEATURE_NAMES + RANK_HYBRID_NAMES if hybrid else RANK_FEATURE_NAMES


def rank_features(query: RankedQuery, m: int | None = None) -> NDArray[np.float64]:
    """Per-item features of ranks i = 1..M, M = min(m, L) (``m`` None: the whole list): shape (M, 9), or
    (M, 15) when the query carries a second scorer's scores (the tables in the module docstring).

    Computed from the scores (and the second scorer's) only, never from ``relevant_ranks``; the
    statistics (z-scores, min-max, softmax, ranks) are over the full list, not over the first M items.
    """
    L = query.scores.size
    M = L if m is None else min(int(m), L)
    if M < 1:
        raise ValueError(f"query {query.qid!r}: m must be >= 1")
    s = query.scores
    with np.errstate(over="ignore", invalid="ignore"):
        if not (np.isfinite(s.mean()) and np.isfinite(s.std()) and np.isfinite(s[0] - s[-1])):
            s = s / float(np.abs(s).max())  # z-scores and min-max are scale-invariant
    z = zscores(s)
    rng = s[0] - s[-1]
    u = (s - s[-1]) / rng if rng > 0 else np.ones_like(s)
    e = np.exp(z - z.max())
    mass = e / e.sum()
    i = np.arange(1, M + 1)
    zm = z[:M]
    nxt = np.append(z[1:], z[-1])[:M]  # the last item's "next" is itself: gap 0
    prv = np.append(z[0], z[:-1])[:M]  # the first item's "previous" is itself: gap 0
    out = np.empty((M, len(rank_feature_names(query.hybrid))), dtype=np.float64)
    out[:, 0] = np.clip(zm, -Z_CLIP, Z_CLIP) / Z_CLIP
    out[:, 1] = np.clip(zm - nxt, 0, Z_CLIP) / Z_CLIP
    out[:, 2] = np.clip(prv - zm, 0, Z_CLIP) / Z_CLIP
    out[:, 3] = np.clip(z[0] - zm, 0, 2 * Z_CLIP) / (2 * Z_CLIP)
    out[:, 4] = np.log2(i)
    out[:, 5] = i == 1
    out[:, 6] = i == 2
    out[:, 7] = u[:M]
    out[:, 8] = mass[:M]
    if query.hybrid:
        a = np.asarray(query.aux_scores, dtype=np.float64)
        za = zscores(a)
        ra = _ranks(a)
        rf = _ranks(z + za)
        agree = float(ra[0] == 1)
        out[:, 9] = np.log2(ra[:M])
        out[:, 10] = np.clip(za[:M], -Z_CLIP, Z_CLIP) / Z_CLIP
        out[:, 11] = ra[:M] == 1
        out[:, 12] = np.log2(rf[:M])
        out[:, 13] = agree
        out[:, 14] = (i == 1) * agree
    return out
