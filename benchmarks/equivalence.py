"""Equivalent-tool label expansion without an LLM: near-duplicate tools count as relevant too.

Exact labels name one (or a few) gold tools per query, but registries hold near
duplicates (two weather tools, two PDF readers); a shortlist that shows the twin and
not the labelled tool is scored a miss. This module measures how much that matters.

Definition. Tool text is the text the scorers see (``ToolCorpus.tool_texts``: for
BFCL ``"<name>. <description> Parameters: <parameter names>"``, i.e. description plus
the parameter schema's field names; for MetaTool name plus description, which has no
parameter schema; ToolBench's aggregated API docs), or an explicit ``texts`` override.
Tools are embedded with all-MiniLM-L6-v2 through the on-disk embedding cache
(:func:`benchmarks.score_cache.cached_embeddings`, the same entries that
:func:`benchmarks.conditions.tool_similarity` fills), L2-normalised, so ``cos(a, b)``
is a dot product. For a threshold ``tau``, query q's expanded relevant set is::

    G'_q = G_q  U  { t in candidates(q) : max_{g in G_q} cos(t, g) >= tau }

(expansion is not transitive and stays inside the query's candidate set, so N is
unchanged; R'_q = R_q + |G'_q \\ G_q|). The chance term uses R'_q: expanded labels make
success easier for chance too, which BoR accounts for.

Outputs:

- :func:`expand_condition`: a copy of a condition with the expanded relevant sets;
- :func:`equivalence_sweep`: exact vs expanded found % and BoR bits (success "any")
  side by side with their difference, per threshold and depth policy;
- :func:`expanded_pairs`: a seeded sample of (gold tool, added tool, cosine, both texts)
  for a person to check whether the added tools really are equivalent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
from numpy.typing import ArrayLike, NDArray

from benchmarks.conditions import BENCHMARKS, SIMILARITY_MODEL, Condition, candidate_rule
from benchmarks.corpus import ToolCorpus
from benchmarks.score_cache import cached_embeddings
from benchmarks.scorers import EmbeddingScorer
from envs import RankedQuery
from rewards import bor_aggregate, bor_reward

__all__ = [
    "DEFAULT_TAUS",
    "tool_cosine",
    "load_condition_corpus",
    "gold_tools",
    "expanded_relevant",
    "expand_condition",
    "fixed_depths",
    "equivalence_sweep",
    "expanded_pairs",
]

#: Cosine thresholds swept by default (MetaTool's closest MiniLM tool pair is at 0.755, hence 0.70 and 0.75).
DEFAULT_TAUS = (0.70, 0.75, 0.80, 0.85, 0.90, 0.95)


def tool_cosine(
    corpus: ToolCorpus,
    cache_dir: Path | None = None,
    *,
    texts: Sequence[str] | None = None,
    model: str = SIMILARITY_MODEL,
) -> NDArray[np.float64]:
    """Cosine similarity between every pair of registry tools, shape (T, T).

    Args:
        corpus: the registry.
        cache_dir: score/embedding cache folder (default: the package cache).
        texts: tool texts to embed instead of ``corpus.tool_texts`` (aligned with the registry).
        model: sentence-transformers model (default all-MiniLM-L6-v2).

    Raises:
        ValueError: ``texts`` not aligned with the registry.
    """
    tt = list(corpus.tool_texts if texts is None else texts)
    if len(tt) != len(corpus.tool_names):
        raise ValueError(f"{corpus.name}: {len(tt)} texts for {len(corpus.tool_names)} tools")
    emb = cached_embeddings(EmbeddingScorer(model), tt, cache_dir).astype(np.float64)
    norms = np.linalg.norm(emb, axis=1, keepdims=True)
    emb = emb / np.where(norms > 0, norms, 1.0)
    return emb @ emb.T


def load_condition_corpus(
    condition: Condition,
    data_dir: Path | None = None,
    cache_dir: Path | None = None,
    options: Mapping[str, str] | None = None,
) -> ToolCorpus:
    """The corpus a condition was built from (same loader, same query file).

    Args:
        condition: a condition from :func:`benchmarks.conditions.build_condition`.
        data_dir, cache_dir, options: as given to ``build_condition``.

    Raises:
        ValueError: a condition without a registry (``run``/``synthetic``).
    """
    bench = condition.meta.get("benchmark")
    if bench not in BENCHMARKS:
        raise ValueError(f"condition {condition.name!r}: benchmark {bench!r} has no tool registry to expand")
    rule = candidate_rule(bench, condition.meta.get("variant", ""))
    opts = dict(options or {})
    if rule.query_set:
        opts["query_set"] = rule.query_set
    corpus = BENCHMARKS[bench][0](data_dir, cache_dir, opts)
    fp = condition.meta.get("corpus_fingerprint")
    if fp is not None and corpus.fingerprint() != fp:
        raise ValueError(f"condition {condition.name!r}: the loaded corpus differs from the one it was built from")
    return corpus


def gold_tools(condition: Condition) -> list[NDArray[np.int64]]:
    """Per query, the registry indices of its relevant tools (from ``ranked_tools``).

    Raises:
        ValueError: the condition has no ``ranked_tools`` (user runs).
    """
    if len(condition.ranked_tools) != len(condition.queries):
        raise ValueError(f"condition {condition.name!r} has no registry indices (ranked_tools) to expand labels")
    return [
        np.asarray(tools[q.relevant_ranks - 1], dtype=np.int64)
        for q, tools in zip(condition.queries, condition.ranked_tools, strict=True)
    ]


def expanded_relevant(condition: Condition, cosine: NDArray[np.float64], tau: float) -> list[NDArray[np.int64]]:
    """Per query, sorted 1-based ranks of the expanded relevant set ``G'_q`` (module docstring).

    Args:
        condition: the condition (with ``ranked_tools``).
        cosine: (T, T) tool-tool cosine (:func:`tool_cosine`).
        tau: threshold; a candidate t is added when ``max_{g in G_q} cos(t, g) >= tau``.

    Raises:
        ValueError: tau outside [-1, 1] or NaN, or a cosine matrix of the wrong shape.
    """
    if not (-1.0 <= float(tau) <= 1.0):
        raise ValueError(f"tau must lie in [-1, 1], got {tau}")
    gold = gold_tools(condition)
    t = max((int(x.max()) for x in condition.ranked_tools if x.size), default=-1) + 1
    if cosine.ndim != 2 or cosine.shape[0] != cosine.shape[1] or cosine.shape[0] < t:
        raise ValueError(f"cosine must be a square (T, T) matrix over the registry, got shape {cosine.shape}")
    out = []
    for g, tools in zip(gold, condition.ranked_tools, strict=True):
        if g.size == 0:
            out.append(np.zeros(0, dtype=np.int64))
            continue
        near = cosine[np.ix_(g, tools)].max(axis=0) >= tau
        near[np.isin(tools, g)] = True
        out.append(np.flatnonzero(near).astype(np.int64) + 1)
    return out


def expand_condition(condition: Condition, cosine: NDArray[np.float64], tau: float) -> Condition:
    """A copy of ``condition`` whose queries carry the expanded relevant sets (R'_q in P_rand).

    Scores, candidate sets, split and ``ranked_tools`` are unchanged; ``n_relevant`` grows by
    the number of added tools; ``meta["equivalence_tau"]`` records tau.
    """
    ranks = expanded_relevant(condition, cosine, tau)
    queries = [
        RankedQuery(q.scores, rr, q.qid, q.n_candidates, q.n_relevant + int(rr.size - q.relevant_ranks.size))
        for q, rr in zip(condition.queries, ranks, strict=True)
    ]
    return dataclasses.replace(
        condition, name=f"{condition.name}@eq{tau:g}", queries=queries, meta={**condition.meta, "equivalence_tau": tau}
    )


def fixed_depths(queries: Sequence[RankedQuery], ks: Sequence[int]) -> dict[str, NDArray[np.int64]]:
    """``{"fixed-<k>": depths}`` with k clipped to each query's list length."""
    lengths = np.array([q.length for q in queries], dtype=np.int64)
    return {f"fixed-{k}": np.minimum(int(k), lengths) for k in ks}


def _found(queries: Sequence[RankedQuery], k: NDArray[np.int64]) -> NDArray[np.int64]:
    return np.array([bool(q.found_at(int(kq))) for q, kq in zip(queries, k, strict=True)], dtype=np.int64)


def equivalence_sweep(
    condition: Condition,
    cosine: NDArray[np.float64],
    taus: Sequence[float] = DEFAULT_TAUS,
    depths: Mapping[str, ArrayLike] | None = None,
    split: str = "test",
) -> pd.DataFrame:
    """Exact-label vs expanded-label found % and BoR bits, per tau and depth policy.

    Success is "any" (>= 1 relevant in the top K). For each (tau, method) row: ``found_pct``
    and ``bor_bits`` (``log2(mean found / mean P_rand(K; N, R))``) with the exact labels
    (R_q) and with the expanded labels (R'_q), their differences (expanded - exact),
    ``mean_reward`` both ways, ``mean_r_expanded`` and ``pct_queries_expanded`` (queries
    whose set grew). The depths are the same in both columns: only the labels change.

    Args:
        condition: the condition.
        cosine: (T, T) tool-tool cosine (:func:`tool_cosine`).
        taus: thresholds.
        depths: method -> per-query depths over the chosen split (default: fixed K in
            1, 3, 5, 10).
        split: "test", "train" or "all".

    Returns:
        One row per (tau, method).
    """
    idx = {"test": condition.test_idx, "train": condition.train_idx, "all": np.arange(len(condition.queries))}
    if split not in idx:
        raise ValueError(f"split must be one of {', '.join(idx)}, got {split!r}")
    sel = np.asarray(idx[split], dtype=np.int64)
    exact = [condition.queries[i] for i in sel]
    methods = {m: np.asarray(d, dtype=np.int64) for m, d in (depths or fixed_depths(exact, (1, 3, 5, 10))).items()}
    n = np.array([q.n_candidates for q in exact])
    r = np.array([q.n_relevant for q in exact])
    rows = []
    for tau in taus:
        expanded = expand_condition(condition, cosine, float(tau))
        exp_q = [expanded.queries[i] for i in sel]
        r2 = np.array([q.n_relevant for q in exp_q])
        for method, k in methods.items():
            if k.shape != (len(exact),):
                raise ValueError(f"method {method!r}: expected {len(exact)} depths, got shape {k.shape}")
            f1, f2 = _found(exact, k), _found(exp_q, k)
            b1, b2 = bor_aggregate(f1, k, n, r), bor_aggregate(f2, k, n, r2)
            rows.append(
                {
                    "condition": condition.name,
                    "split": split,
                    "tau": float(tau),
                    "method": method,
                    "n_queries": len(exact),
                    "mean_k": float(k.mean()),
                    "mean_r_exact": float(r.mean()),
                    "mean_r_expanded": float(r2.mean()),
                    "pct_queries_expanded": 100.0 * float(np.mean(r2 > r)),
                    "found_pct_exact": 100.0 * float(f1.mean()),
                    "found_pct_expanded": 100.0 * float(f2.mean()),
                    "found_pct_diff": 100.0 * float(f2.mean() - f1.mean()),
                    "bor_bits_exact": b1,
                    "bor_bits_expanded": b2,
                    "bor_bits_diff": b2 - b1,
                    "mean_reward_exact": float(np.mean(bor_reward(f1, k, n, np.maximum(r, 1)))),
                    "mean_reward_expanded": float(np.mean(bor_reward(f2, k, n, np.maximum(r2, 1)))),
                }
            )
    return pd.DataFrame(rows)


def expanded_pairs(
    condition: Condition,
    corpus: ToolCorpus,
    cosine: NDArray[np.float64],
    tau: float,
    n_sample: int = 20,
    seed: int = 0,
) -> pd.DataFrame:
    """A seeded sample of (gold tool, added equivalent tool) pairs for a human to check.

    Pairs are taken over all queries of the condition: every (g, t) with g a gold tool of
    some query, t a candidate of that query outside its gold set and ``cos(g, t) >= tau``.
    Unique pairs are listed with the number of queries in which t was added because of g;
    ``n_sample`` of them are drawn with ``numpy.random.default_rng(seed)`` (all when fewer)
    and sorted by cosine, descending.

    Returns:
        Columns ``tool_a, tool_b, cosine, n_queries, text_a, text_b``.
    """
    gold = gold_tools(condition)
    counts: dict[tuple[int, int], int] = {}
    for g, tools in zip(gold, condition.ranked_tools, strict=True):
        others = tools[~np.isin(tools, g)]
        for a in g:
            for b in others[cosine[a, others] >= tau]:
                counts[(int(a), int(b))] = counts.get((int(a), int(b)), 0) + 1
    pairs = sorted(counts)
    if len(pairs) > n_sample:
        pick = np.sort(np.random.default_rng(seed).choice(len(pairs), size=n_sample, replace=False))
        pairs = [pairs[i] for i in pick]
    df = pd.DataFrame(
        {
            "tool_a": [corpus.tool_names[a] for a, _ in pairs],
            "tool_b": [corpus.tool_names[b] for _, b in pairs],
            "cosine": [float(cosine[a, b]) for a, b in pairs],
            "n_queries": [counts[p] for p in pairs],
            "text_a": [corpus.tool_texts[a] for a, _ in pairs],
            "text_b": [corpus.tool_texts[b] for _, b in pairs],
        }
    )
    return df.sort_values(["cosine", "tool_a", "tool_b"], ascending=[False, True, True]).reset_index(drop=True)
