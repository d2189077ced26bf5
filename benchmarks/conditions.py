"""Conditions: a benchmark, a candidate-set rule and a scorer, turned into ranked queries.

A condition is named ``<benchmark>-<scorer>[-<variant>]`` (``bfcl-bm25``,
``metatool-minilm-top50``, ``toolbench-minilm-full``); a BEIR folder's adds the folder's name and a hash of
its files' contents (``beir-bm25-scifact-3fa2c1``, :func:`benchmarks.names.beir_condition_name`), as a user's
run and log do. :func:`build_condition` loads
the corpus, samples queries (seeded) where the rule says so, builds each query's
candidate set, scores it through the on-disk score cache, ranks it
(:meth:`RankedQuery.from_scores`: ties broken by candidate order, and candidates are
always in registry order, so a tie is won by whichever tool comes first in the registry,
the gold included: neither pessimistic nor optimistic for the gold, but a stable,
documented rule) and makes the seeded 70/30 train/test split.

The split is a seeded permutation of the query positions (:func:`seeded_split`). For the built-in
benchmarks the positions follow the pinned data files. For a user's own data (a TREC run, a BEIR
folder) the queries are first put in the order of their ids (plain string order), so the split, and
every result, depends on the set of query ids only, never on the order of lines in the files; a
BEIR folder's registry is in document-id order too (:mod:`benchmarks.beir`), so its ties go by document id. A
run's train fraction is its ``train_frac`` source option (default 0.7).

Candidate-set rules (SPEC section 4), per benchmark and variant:

=========  =========  ==========================================  ===========  =======
benchmark  variant    candidate set (N)                           queries      buckets
=========  =========  ==========================================  ===========  =======
bfcl       (none)     all 370 functions                           all 400      default
metatool   (none)     gold + 24 most similar + 75 random (100)    2,000 sampled default
metatool   top20      gold + 19 most similar (20)                 1,200 sampled narrow
metatool   top50      gold + 49 most similar (50)                 1,200 sampled narrow
metatool   top100     gold + 99 most similar (100)                1,200 sampled default
metatool   multi      all R gold + 24 most similar to the gold    all 497      default
                      set + random fill (100); multi-tool file,
                      R_q >= 2 (see :func:`multi_candidate_sets`)
toolbench  (none)     gold + 49 most similar (50)                 all 474      default
toolbench  full       the whole registry (3,406)                  all 474      default
bfcl/...   sub<N>     a random sub-registry of N tools holding    as the base  default
                      the query's gold tool (registry sweep)      (metatool:
                                                                  1,200
                                                                  sampled, as
                                                                  top<N>)
bfcl/...   hybrid     the main rule; each query also carries the  as the base  as the base
                      other scorer's scores (bm25 <-> minilm)
bfcl/...   q<shift>   the main rule with rewritten query text:    as the base  as the base
                      qnotools, qtrunc20, qdrop30
                      (:mod:`benchmarks.query_shift`)
run        (none)     a TREC run + qrels (``run=...``, ``qrels=``) the run's   default
beir       (none)     the whole corpus of a BEIR folder           split qrels  default
synthetic  <spec>     generated score lists, scorer ``gen``       n_queries    default
                      (:mod:`benchmarks.synthetic`, e.g.
                      ``n100-sep2.0-normal``)
=========  =========  ==========================================  ===========  =======

Scorer ``fused`` (any benchmark with a candidate rule): the candidates ranked by the weighted
z-fusion ``(1 - w) z(BM25) + w z(MiniLM)`` of each query's candidate scores, with ``w`` in
{0, 0.05, ..., 1} chosen on the training split by the gold tool's mean reciprocal rank
(:func:`fit_fusion_weight`; recorded in the meta as ``fusion_weight``).

"Most similar distractors" are the nearest tools to the gold tool by cosine
similarity of all-MiniLM-L6-v2 embeddings of the tool texts (tool-tool similarity),
ties broken by registry order. The similarity is fixed per benchmark and does not
depend on the scorer being evaluated, so every scorer of a condition is compared on
identical candidate sets. Random fill and sub-registries are drawn with
``numpy.random.default_rng([candidate_seed, query position])`` (never the global RNG).
P_rand always uses the candidate-set size N, not the registry size.
"""

from __future__ import annotations

import contextlib
import functools
import re
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from benchmarks.corpus import DataError, QueryRecord, ToolCorpus
from benchmarks.names import ConditionId, beir_condition_name, run_condition_name
from benchmarks.query_shift import QUERY_SHIFTS, shift_queries
from benchmarks.score_cache import cached_embeddings, cached_scores
from benchmarks.scorers import EmbeddingScorer, make_scorer
from benchmarks.split import Condition, seeded_split, sha_lines, split_meta
from envs import RankedQuery
from envs.ranked import first_relevant_rank

SIMILARITY_MODEL = "minilm"


@dataclass(frozen=True)
class CandidateRule:
    """How a query's candidate set is built.

    Attributes:
        n: candidate-set size; None = the whole registry.
        n_similar: distractors taken from the gold tool's nearest neighbours.
        n_random: further distractors drawn uniformly from the rest of the registry.
        n_queries: queries sampled (seeded) from the corpus; None = all.
        buckets: default bucket scheme.
    """

    n: int | None = None
    n_similar: int = 0
    n_random: int = 0
    n_queries: int | None = None
    buckets: str = "default"
    query_set: str = ""
    """Which queries of the benchmark: "" = its main file; "multi" = its multi-tool file
    (several gold tools per query; candidate sets by :func:`multi_candidate_sets`)."""
    tool_text: str = ""
    """Which tool text the scorers see: "" = the benchmark's default (BFCL: SPEC's description +
    parameter names); "rich" = BFCL's richer text with the function name (variant ``richtext``)."""
    hybrid: bool = False
    """Whether every query also carries the other scorer's scores of the same candidates (variant
    ``hybrid``: the learners then observe the two-scorer features, :mod:`envs.features`)."""
    query_shift: str = ""
    """A rule-based rewrite of the query text (:data:`benchmarks.query_shift.QUERY_SHIFTS`; variants
    ``qnotools``, ``qtrunc20``, ``qdrop30``); "" = the queries as written."""

    def __post_init__(self) -> None:
        if self.n is not None and self.n_similar + self.n_random + 1 > self.n:
            raise ValueError(f"candidate rule: 1 + {self.n_similar} + {self.n_random} exceeds N={self.n}")


def _bfcl(data_dir: Path | None, cache_dir: Path | None, opts: Mapping[str, str]) -> ToolCorpus:
    from benchmarks.bfcl import load_bfcl

    return load_bfcl(data_dir=data_dir, cache_dir=cache_dir, text_kind=opts.get("tool_text") or "spec")


def _metatool(data_dir: Path | None, cache_dir: Path | None, opts: Mapping[str, str]) -> ToolCorpus:
    from benchmarks.metatool import load_metatool, load_metatool_multi

    return load_metatool_multi(data_dir) if opts.get("query_set") == "multi" else load_metatool(data_dir)


def _toolbench(data_dir: Path | None, cache_dir: Path | None, opts: Mapping[str, str]) -> ToolCorpus:
    from benchmarks.toolbench import load_toolbench

    return load_toolbench(data_dir, cache_dir)


def _beir(data_dir: Path | None, cache_dir: Path | None, opts: Mapping[str, str]) -> ToolCorpus:
    from benchmarks.beir import load_beir

    if not opts.get("beir_dir"):
        raise ValueError("benchmark 'beir' needs a BEIR folder (--beir-dir)")
    return load_beir(opts["beir_dir"], opts.get("split", "test"))


#: benchmark -> (corpus loader, {variant: candidate rule})
BENCHMARKS: dict[
    str, tuple[Callable[[Path | None, Path | None, Mapping[str, str]], ToolCorpus], dict[str, CandidateRule]]
] = {
    "bfcl": (
        _bfcl,
        {"": CandidateRule(), "richtext": CandidateRule(tool_text="rich"), "hybrid": CandidateRule(hybrid=True)},
    ),
    "metatool": (
        _metatool,
        {
            "": CandidateRule(100, 24, 75, 2000),
            "top20": CandidateRule(20, 19, 0, 1200, "narrow"),
            "top50": CandidateRule(50, 49, 0, 1200, "narrow"),
            "top100": CandidateRule(100, 99, 0, 1200),
            "multi": CandidateRule(100, 24, 74, None, query_set="multi"),
            "hybrid": CandidateRule(100, 24, 75, 2000, hybrid=True),
        },
    ),
    "toolbench": (
        _toolbench,
        {"": CandidateRule(50, 49, 0), "full": CandidateRule(), "hybrid": CandidateRule(50, 49, 0, hybrid=True)},
    ),
    "beir": (_beir, {"": CandidateRule()}),
}
for _b in ("bfcl", "metatool", "toolbench"):  # query-shift variants of each main candidate rule
    BENCHMARKS[_b][1].update({k: replace(BENCHMARKS[_b][1][""], query_shift=k) for k in QUERY_SHIFTS})
_SUB = re.compile(r"^sub(\d+)$")


def candidate_rule(benchmark: str, variant: str) -> CandidateRule:
    """The rule of ``benchmark``/``variant`` (``sub<N>``: random sub-registry of N tools)."""
    if benchmark not in BENCHMARKS and benchmark not in ("run", "synthetic", "log"):
        raise ValueError(
            f"unknown benchmark {benchmark!r}; expected one of {', '.join([*BENCHMARKS, 'run', 'synthetic', 'log'])}"
        )
    if benchmark == "log":  # the whole registry (benchmarks.toollog); hybrid observes the other scorer
        if variant not in ("", "hybrid"):
            raise ValueError(f"benchmark 'log' has one variant, hybrid, got {variant!r}")
        return CandidateRule(hybrid=variant == "hybrid")
    if benchmark == "synthetic":  # generated score lists (benchmarks.synthetic); N from the variant
        from benchmarks.synthetic import parse_variant

        spec = parse_variant(variant)
        return CandidateRule(spec.n, 0, 0, spec.n_queries)
    if benchmark == "run":
        if variant:
            raise ValueError("benchmark 'run' has no variants")
        return CandidateRule()
    rules = BENCHMARKS[benchmark][1]
    if variant in rules:
        return rules[variant]
    m = _SUB.match(variant)
    if m and int(m.group(1)) < 1:
        raise ValueError(f"variant {variant!r}: sub<N> needs N >= 1")
    if m and benchmark in ("bfcl", "toolbench", "metatool"):
        base = rules[""]
        return CandidateRule(
            int(m.group(1)), 0, int(m.group(1)) - 1, base.n_queries if benchmark != "metatool" else 1200
        )
    raise ValueError(
        f"benchmark {benchmark!r} has no candidate-set variant {variant!r}; expected one of "
        f"{', '.join(repr(v) for v in rules)} or sub<N>"
    )


def sample_queries(n_total: int, n_sample: int | None, seed: int) -> NDArray[np.int64]:
    """Seeded sample of query positions (sorted); all when ``n_sample`` is None or >= n_total."""
    if n_sample is None or n_sample >= n_total:
        return np.arange(n_total)
    return np.sort(np.random.default_rng(seed).choice(n_total, size=n_sample, replace=False))


def candidate_set_size(rule: CandidateRule, n_tools: int) -> int:
    """N of the rule's candidate sets over a registry of ``n_tools`` tools (the whole registry when
    ``rule.n`` is None); ValueError when N exceeds the registry."""
    n = int(rule.n or n_tools)
    if n > n_tools:
        raise ValueError(f"candidate-set size N={n} exceeds the registry of {n_tools} tools")
    return n


def fill_candidates(
    gold: list[int], nearest: NDArray[np.int64] | None, n_similar: int, n: int, n_tools: int, seed: int, i: int
) -> NDArray[np.int64]:
    """One query's candidate set in registry order: its gold tools, then the first ``n_similar`` tools of
    ``nearest`` (registry indices, most similar first; needed when ``n_similar > 0``) outside them, then a
    uniform random fill from the rest of the registry up to N = ``n`` tools, drawn with
    ``numpy.random.default_rng([seed, i])`` (``i``: the query's position)."""
    chosen = list(gold)
    if n_similar:
        assert nearest is not None
        golds = set(chosen)
        chosen += [int(j) for j in nearest if j not in golds][:n_similar]
    rest = np.setdiff1d(np.arange(n_tools), chosen, assume_unique=False)
    fill = n - len(chosen)
    if fill:
        chosen += np.random.default_rng([seed, i]).choice(rest, size=fill, replace=False).tolist()
    return np.sort(chosen)


def candidate_sets(
    sim_row: NDArray[np.int64],
    gold: NDArray[np.int64],
    n_tools: int,
    rule: CandidateRule,
    similarity: NDArray[np.float64] | None,
    seed: int,
) -> NDArray[np.int64]:
    """Candidate tool indices per query, shape (Q, N), each row in registry order (:func:`fill_candidates`).

    Args:
        sim_row: for each query, the row of ``similarity`` that belongs to its gold tool.
        gold: the gold tool index of each query.
        n_tools: registry size.
        rule: the candidate rule (``rule.n`` set).
        similarity: (rows, n_tools) tool-tool similarity, needed when ``rule.n_similar > 0``.
        seed: seed of the random fill (per query: ``default_rng([seed, i])``).
    """
    n = candidate_set_size(rule, n_tools)
    out = np.empty((len(gold), n), dtype=np.int64)
    for i, g in enumerate(gold):
        nearest = None
        if rule.n_similar:
            assert similarity is not None
            nearest = np.argsort(-similarity[sim_row[i]], kind="stable")
        out[i] = fill_candidates([int(g)], nearest, rule.n_similar, n, n_tools, seed, i)
    return out


def tool_similarity(corpus: ToolCorpus, rows: NDArray[np.int64], cache_dir: Path | None) -> NDArray[np.float64]:
    """Cosine similarity of MiniLM tool embeddings (cached) between tools ``rows`` and every tool, (len(rows), T)."""
    emb = cached_embeddings(EmbeddingScorer(SIMILARITY_MODEL), list(corpus.tool_texts), cache_dir)
    return (emb[rows] @ emb.T).astype(np.float64)


#: How :func:`multi_candidate_sets` ranks distractors for a gold set (recorded in the condition's meta).
MULTI_DISTRACTORS = "max cosine (MiniLM tool-tool) to any gold tool, ties by registry order"


def multi_candidate_sets(
    gold_sets: list[NDArray[np.int64]],
    n_tools: int,
    rule: CandidateRule,
    similarity: NDArray[np.float64] | None,
    sim_rows: Mapping[int, int],
    seed: int,
) -> NDArray[np.int64]:
    """Candidate tool indices per query for several gold tools, shape (Q, N), rows in registry order.

    The main MetaTool rule generalised to a gold set G of R tools: all R gold tools, then
    the ``rule.n_similar`` tools outside G with the largest ``max_{g in G} cos(t, g)``
    (MiniLM tool-tool similarity; ties broken by registry order via a stable sort), then
    a uniform random fill from the remaining tools up to ``N = rule.n`` drawn with
    ``numpy.random.default_rng([seed, i])`` (query position i). With R = 1 this is exactly
    :func:`candidate_sets` (same neighbours, same random draw: both fill with :func:`fill_candidates`).
    The sets do not depend on the scorer being evaluated.

    Args:
        gold_sets: per query, the registry indices of its gold tools.
        n_tools: registry size.
        rule: the candidate rule (``rule.n`` set).
        similarity: (rows, n_tools) tool-tool similarity, needed when ``rule.n_similar > 0``.
        sim_rows: registry index of a gold tool -> its row in ``similarity``.
        seed: seed of the random fill.

    Raises:
        ValueError: N larger than the registry, or a gold set that does not fit in N.
    """
    n = candidate_set_size(rule, n_tools)
    out = np.empty((len(gold_sets), n), dtype=np.int64)
    for i, gs in enumerate(gold_sets):
        chosen = [int(g) for g in gs]
        if len(set(chosen)) != len(chosen) or len(chosen) + rule.n_similar > n:
            raise ValueError(f"query {i}: gold set {chosen} repeats a tool or does not fit with N={n}")
        nearest = None
        if rule.n_similar:
            assert similarity is not None
            nearest = np.argsort(-similarity[[sim_rows[g] for g in chosen]].max(axis=0), kind="stable")
        out[i] = fill_candidates(chosen, nearest, rule.n_similar, n, n_tools, seed, i)
    return out


def query_candidates(
    benchmark: str,
    corpus: ToolCorpus,
    records: Sequence[QueryRecord],
    rule: CandidateRule,
    cache_dir: Path | None,
    seed: int,
) -> tuple[list[NDArray[np.int64]], list[list[int]]]:
    """Candidate registry indices and the gold positions among them, per query, under ``rule``: the whole
    registry (``rule.n`` None), the ``multi`` rule (:func:`multi_candidate_sets`) or one gold tool per
    query (:func:`candidate_sets`).

    Raises:
        DataError: a query with other than one gold tool under a single-gold rule, or with one under ``multi``.
    """
    index = corpus.tool_index()
    if rule.n is None:
        return [np.arange(len(corpus.tool_names))] * len(records), [[index[g] for g in q.gold] for q in records]
    if rule.query_set == "multi":
        return _multi_candidates(corpus, records, rule, cache_dir, seed)
    if any(len(q.gold) != 1 for q in records):
        raise DataError(f"{benchmark}: candidate-set rules need exactly one gold tool per query")
    gold = np.array([index[q.gold[0]] for q in records])
    rows = np.unique(gold)
    sim = tool_similarity(corpus, rows, cache_dir) if rule.n_similar else None
    cands = list(candidate_sets(np.searchsorted(rows, gold), gold, len(corpus.tool_names), rule, sim, seed))
    return cands, [np.flatnonzero(c == g).tolist() for c, g in zip(cands, gold, strict=True)]


def _multi_candidates(
    corpus: ToolCorpus,
    records: Sequence[QueryRecord],
    rule: CandidateRule,
    cache_dir: Path | None,
    seed: int,
) -> tuple[list[NDArray[np.int64]], list[list[int]]]:
    """Candidate registry indices and the gold positions among them, per query, for the ``multi`` rule."""
    index = corpus.tool_index()
    gold_sets = [np.array([index[g] for g in q.gold], dtype=np.int64) for q in records]
    short = [q.qid for q in records if len(q.gold) < 2]
    if short:
        raise DataError(f"{corpus.name}: the multi rule needs R_q >= 2; query {short[0]!r} has one gold tool")
    rows = np.unique(np.concatenate(gold_sets))
    sim = tool_similarity(corpus, rows, cache_dir) if rule.n_similar else None
    sim_rows = {int(g): i for i, g in enumerate(rows)}
    cands = multi_candidate_sets(gold_sets, len(corpus.tool_names), rule, sim, sim_rows, seed)
    return list(cands), [np.flatnonzero(np.isin(c, g)).tolist() for c, g in zip(cands, gold_sets, strict=True)]


#: The two scorers of the package: a ``hybrid`` condition observes the other one beside its own.
SCORER_PAIR: dict[str, str] = {"bm25": "minilm", "minilm": "bm25"}
#: The fused-ranking scorer and the scorers it fuses (weighted z-fusion, weight fitted on train).
FUSED = "fused"
FUSED_SCORERS: tuple[str, str] = ("bm25", "minilm")
FUSION_WEIGHTS = np.round(np.linspace(0.0, 1.0, 21), 2)


def fused_scores(a: NDArray[np.float64], b: NDArray[np.float64], weight: float) -> NDArray[np.float64]:
    """Weighted z-fusion of two scorers' scores of one candidate set: (1 - w) z(a) + w z(b), with z the
    per-list z-score (0 for a constant list)."""
    from envs.features import zscores

    return (1.0 - weight) * zscores(np.asarray(a, dtype=np.float64)) + weight * zscores(np.asarray(b, dtype=np.float64))


def fit_fusion_weight(
    a: Sequence[NDArray[np.float64]], b: Sequence[NDArray[np.float64]], gold_pos: Sequence[Sequence[int]]
) -> tuple[float, float]:
    """The weight w in {0, 0.05, ..., 1} whose fused ranking has the largest mean reciprocal rank of the
    first relevant candidate over the given (training) queries, and that MRR. Ties go to the weight
    nearest 0.5 (then the smaller). Ranks count ties pessimistically: 1 + #{candidates with a strictly
    higher fused score} + #{tied candidates before it in candidate order}, the ranking rule of every
    condition (:meth:`envs.RankedQuery.from_scores`)."""
    from envs.features import zscores

    if not a:
        raise ValueError("fit_fusion_weight: no training queries")
    # each query's z-scores once (fused_scores' own terms, so every fused score is the one it computes), and
    # the gold rank of every weight by RankedQuery.from_scores' rule without building the query
    za = [zscores(np.asarray(x, dtype=np.float64)) for x in a]
    zb = [zscores(np.asarray(y, dtype=np.float64)) for y in b]
    mrr = []
    for w in FUSION_WEIGHTS:
        rr = []
        for x, y, g in zip(za, zb, gold_pos, strict=True):
            gold_rank = first_relevant_rank((1.0 - float(w)) * x + float(w) * y, g, "fusion fit")
            rr.append(1.0 / gold_rank if gold_rank else 0.0)
        mrr.append(float(np.mean(rr)))
    best = max(range(len(FUSION_WEIGHTS)), key=lambda i: (mrr[i], -abs(FUSION_WEIGHTS[i] - 0.5), -FUSION_WEIGHTS[i]))
    return float(FUSION_WEIGHTS[best]), mrr[best]


def build_condition(
    benchmark: str,
    scorer: str,
    *,
    variant: str = "",
    data_dir: Path | None = None,
    cache_dir: Path | None = None,
    split_seed: int = 0,
    train_frac: float = 0.7,
    candidate_seed: int = 0,
    options: Mapping[str, str] | None = None,
) -> Condition:
    """Build the ranked queries and split of a condition (see the module docstring).

    ``scorer`` is ``bm25``, ``minilm`` or any sentence-transformers model name or local
    path (an unavailable model fails when it is loaded, naming it). BFCL data comes
    from the pinned ``bfcl-eval`` wheel (see :mod:`benchmarks.bfcl` for the lookup order).
    ``options`` carries source paths: ``run``/``qrels``/``n_candidates`` (and ``train_frac``, which
    then replaces the argument) for ``benchmark="run"``, ``beir_dir``/``split`` for ``benchmark="beir"`` and
    ``tools``/``log`` (and ``train_frac``) for ``benchmark="log"`` (:func:`benchmarks.toollog.log_condition`).

    The steps, in order: load the corpus, sample its queries (:func:`sampled_records`), rewrite their
    text (:func:`query_texts`), score them against the whole registry (:func:`score_queries`), build the
    candidate sets (:func:`query_candidates`), split, fit the fusion weight on the training split
    (:func:`fusion_fit`, ``fused`` only) and rank each candidate set (:func:`rank_candidates`).

    Raises:
        ValueError: unknown benchmark (listing the valid ones) or variant.
        DataError: malformed or missing data (naming file and position).
    """
    opts = dict(options or {})
    if benchmark == "log":  # a tool registry and a log of the agent's requests (benchmarks.toollog)
        from benchmarks.toollog import log_condition

        frac = float(opts.get("train_frac") or train_frac)
        return log_condition(opts, scorer, variant, split_seed, frac, cache_dir)
    rule = candidate_rule(benchmark, variant)
    if rule.hybrid and scorer not in SCORER_PAIR:
        raise ValueError(f"variant 'hybrid' pairs bm25 with minilm: scorer must be one of them, got {scorer!r}")
    name = ConditionId(benchmark, scorer, variant).name
    if benchmark == "synthetic":
        from benchmarks.synthetic import synthetic_condition

        return synthetic_condition(scorer, variant, split_seed=split_seed, train_frac=train_frac, seed=candidate_seed)
    if benchmark == "run":
        return _run_condition(opts, split_seed, float(opts.get("train_frac") or train_frac))
    t0 = time.perf_counter()
    source = (benchmark, rule, data_dir, cache_dir, tuple(sorted(opts.items())), candidate_seed)
    corpus = _memo(("corpus", *source), lambda: _load_corpus(benchmark, rule, data_dir, cache_dir, opts))
    t_load = time.perf_counter() - t0
    records = sampled_records(benchmark, corpus, rule, candidate_seed)
    texts, shift_meta = query_texts(rule, records, corpus)
    t1 = time.perf_counter()
    scores = _memo(("scores", scorer, *source), lambda: score_queries(scorer, rule, texts, corpus, cache_dir))
    t_score = time.perf_counter() - t1
    draw = functools.partial(query_candidates, benchmark, corpus, records, rule, cache_dir, candidate_seed)
    cands, gold_pos = _memo(("candidates", *source), draw)
    train_idx, test_idx = seeded_split(len(records), train_frac, split_seed)
    fusion = fusion_fit(scorer, scores.matrices, cands, gold_pos, train_idx)
    weight = fusion.get("fusion_weight")
    queries, ranked_tools = rank_candidates(scorer, rule, scores.matrices, records, cands, gold_pos, weight)
    meta = {
        "benchmark": benchmark,
        "scorer": scorer,
        "variant": variant,
        "candidate_rule": _rule_meta(rule),
        **({"tool_text": rule.tool_text or "spec"} if benchmark == "bfcl" else {}),
        "candidate_seed": candidate_seed,
        "scorer_identity": scores.identities.get(scorer, scores.identities),
        **({"second_scorer": SCORER_PAIR[scorer], "observation": "hybrid"} if rule.hybrid else {}),
        **fusion,
        **shift_meta,
        **_queries_meta(corpus, records, queries),
        **split_meta(queries, train_idx, test_idx, split_seed, train_frac),
        "score_cache_hit": scores.cache_hit,
        "seconds_load": round(t_load, 3),
        "seconds_score": round(t_score, 3),
    }
    name = _beir_condition_name(scorer, variant, opts, corpus) if benchmark == "beir" else name
    return Condition(name, queries, train_idx, test_idx, buckets=rule.buckets, meta=meta, ranked_tools=ranked_tools)


_MEMO: dict[tuple, Any] | None = None
"""What :func:`build_condition` has read inside :func:`source_memo` (None outside it)."""


@contextlib.contextmanager
def source_memo() -> Iterator[None]:
    """Inside the block, :func:`build_condition` reads each corpus, scores each query set and draws each
    candidate set once, however many conditions share them: the five train/test splits of a condition share all
    three (only the split and the fitted fusion weight differ), and the bm25 and minilm conditions of a benchmark
    share the corpus and the candidate sets. What is kept is what those steps return, so every condition is the
    one built without the block. Outside it nothing is kept: a long-lived process (a server, a notebook) reads
    its files afresh. Nested blocks share the outer one's memo."""
    global _MEMO
    outer = _MEMO
    _MEMO = {} if outer is None else outer
    try:
        yield
    finally:
        _MEMO = outer


def _memo(key: tuple, make: Callable[[], Any]) -> Any:
    """``make()``, once per ``key`` inside :func:`source_memo`; every time outside it."""
    if _MEMO is None:
        return make()
    if key not in _MEMO:
        _MEMO[key] = make()
    return _MEMO[key]


def _load_corpus(
    benchmark: str, rule: CandidateRule, data_dir: Path | None, cache_dir: Path | None, opts: Mapping[str, str]
) -> ToolCorpus:
    """The benchmark's corpus, read by its loader (:data:`BENCHMARKS`) with the rule's query set and tool text."""
    loader_opts = {
        **opts,
        **({"query_set": rule.query_set} if rule.query_set else {}),
        **({"tool_text": rule.tool_text} if rule.tool_text else {}),
    }
    return BENCHMARKS[benchmark][0](data_dir, cache_dir, loader_opts)


def sampled_records(benchmark: str, corpus: ToolCorpus, rule: CandidateRule, seed: int) -> list[QueryRecord]:
    """The corpus's queries the rule samples (seeded, :func:`sample_queries`; all when it samples none), in
    corpus order; a BEIR folder's in query-id order instead, so that a user's split never depends on the line
    order of ``queries.jsonl``."""
    records = [corpus.queries[i] for i in sample_queries(len(corpus.queries), rule.n_queries, seed)]
    if benchmark == "beir":
        records = sorted(records, key=lambda q: q.qid)
    return records


def query_texts(
    rule: CandidateRule, records: Sequence[QueryRecord], corpus: ToolCorpus
) -> tuple[list[str], dict[str, Any]]:
    """The query texts the scorers read, rewritten by the rule's query shift when it has one
    (:func:`benchmarks.query_shift.shift_queries`), and the shift's record for the meta ({} without one)."""
    texts = [q.text for q in records]
    if not rule.query_shift:
        return texts, {}
    shifted = shift_queries(rule.query_shift, texts, [q.qid for q in records], corpus.tool_names)
    return shifted, {
        "query_shift": rule.query_shift,
        "query_shift_rule": QUERY_SHIFTS[rule.query_shift],
        "queries_changed": sum(a != b for a, b in zip(texts, shifted, strict=True)),
        "queries_emptied": sum(not t.strip() for t in shifted),
    }


@dataclass(frozen=True)
class QueryScores:
    """What :func:`score_queries` returns."""

    matrices: dict[str, NDArray[np.float64]]
    """Scorer name -> its (Q, T) scores of the queries against every tool of the registry."""
    identities: dict[str, Any]
    """Scorer name -> the scorer's identity (model, digest, settings)."""
    cache_hit: bool
    """Whether every matrix came from the score cache."""


def score_queries(
    scorer: str, rule: CandidateRule, texts: list[str], corpus: ToolCorpus, cache_dir: Path | None
) -> QueryScores:
    """The scores of ``texts`` against every tool text, through the on-disk score cache, by the condition's
    scorer (both of :data:`FUSED_SCORERS` for ``fused``) and, on a ``hybrid`` condition, by the other one."""
    matrices: dict[str, NDArray[np.float64]] = {}
    hits, identities = [], {}
    for name in (FUSED_SCORERS if scorer == FUSED else (scorer,)) + ((SCORER_PAIR[scorer],) if rule.hybrid else ()):
        sc = make_scorer(name)
        matrices[name], hit = cached_scores(sc, texts, list(corpus.tool_texts), cache_dir)
        hits.append(hit)
        identities[name] = sc.identity()
    return QueryScores(matrices, identities, all(hits))


def fusion_fit(
    scorer: str,
    matrices: Mapping[str, NDArray[np.float64]],
    cands: Sequence[NDArray[np.int64]],
    gold_pos: Sequence[Sequence[int]],
    train_idx: NDArray[np.int64],
) -> dict[str, Any]:
    """For the ``fused`` scorer, the fusion weight fitted on the training queries (:func:`fit_fusion_weight`),
    its training MRR and the scorers it fuses, as recorded in the meta; {} for every other scorer."""
    if scorer != FUSED:
        return {}
    weight, train_mrr = fit_fusion_weight(
        [matrices[FUSED_SCORERS[0]][i, cands[i]] for i in train_idx],
        [matrices[FUSED_SCORERS[1]][i, cands[i]] for i in train_idx],
        [gold_pos[i] for i in train_idx],
    )
    return {"fusion_weight": weight, "fusion_train_mrr": round(train_mrr, 6), "fusion_of": list(FUSED_SCORERS)}


def rank_candidates(
    scorer: str,
    rule: CandidateRule,
    matrices: Mapping[str, NDArray[np.float64]],
    records: Sequence[QueryRecord],
    cands: Sequence[NDArray[np.int64]],
    gold_pos: Sequence[Sequence[int]],
    weight: float | None,
) -> tuple[list[RankedQuery], list[NDArray[np.int64]]]:
    """Each query's candidates ranked by the scorer's scores (:meth:`RankedQuery.from_scores`; for ``fused``
    the fused scores with ``weight``), with the other scorer's scores beside them on a ``hybrid`` condition,
    and the candidates' registry indices in ranked order."""
    queries: list[RankedQuery] = []
    ranked_tools: list[NDArray[np.int64]] = []
    for i, q in enumerate(records):
        c = cands[i]
        if scorer == FUSED:
            assert weight is not None
            primary = fused_scores(matrices[FUSED_SCORERS[0]][i, c], matrices[FUSED_SCORERS[1]][i, c], weight)
        else:
            primary = matrices[scorer][i, c]
        aux = matrices[SCORER_PAIR[scorer]][i, c] if rule.hybrid else None
        rq, order = RankedQuery.from_scores(primary, gold_pos[i], q.qid, aux_scores=aux)
        queries.append(rq)
        ranked_tools.append(c[order])
    return queries, ranked_tools


def _rule_meta(rule: CandidateRule) -> dict[str, Any]:
    """The candidate rule as recorded in a condition's meta."""
    return {
        "n": rule.n,
        "n_similar": rule.n_similar,
        "n_random": rule.n_random,
        "n_queries": rule.n_queries,
        "similarity": SIMILARITY_MODEL if rule.n_similar else None,
        **({"query_set": rule.query_set, "distractors": MULTI_DISTRACTORS} if rule.query_set else {}),
    }


def _queries_meta(corpus: ToolCorpus, records: Sequence[QueryRecord], queries: Sequence[RankedQuery]) -> dict[str, Any]:
    """What a condition's ranked queries are made of, as recorded in its meta: the corpus's inputs and skips,
    the registry and candidate-set sizes, which queries were sampled and how much of the lists is a tied tail."""
    return {
        "inputs_sha256": corpus.inputs_sha256,
        "corpus_fingerprint": corpus.fingerprint(),
        "skipped": corpus.skipped,
        **({"skipped_examples": corpus.skipped_examples} if corpus.skipped_examples else {}),
        "n_tools": len(corpus.tool_names),
        "n_candidates": sorted({q.n_candidates for q in queries}),
        "n_queries_available": len(corpus.queries),
        "n_queries": len(queries),
        "sampled_qids_sha256": sha_lines([q.qid for q in records]),
        **tied_tail_stats(queries),
    }


def tied_tail_stats(queries: Sequence[RankedQuery]) -> dict[str, float]:
    """How much of the ranked lists is a tied tail: ``tied_tail_pct``, the mean share of a list's
    candidates that tie with its lowest score (0 for a list whose lowest score is unique), and
    ``gold_in_tied_tail_pct``, the share of queries whose first relevant item sits in that tail
    (its position there is then set by candidate order, not by the scorer)."""
    shares, gold = [], []
    for q in queries:
        tail = q.scores == q.scores[-1]
        n_tail = int(tail.sum())
        shares.append(n_tail / len(q.scores) if n_tail > 1 else 0.0)
        g = q.gold_rank
        gold.append(bool(n_tail > 1 and 1 <= g <= len(q.scores) and tail[g - 1]))
    return {
        "tied_tail_pct": round(100.0 * float(np.mean(shares)), 3) if shares else 0.0,
        "gold_in_tied_tail_pct": round(100.0 * float(np.mean(gold)), 3) if gold else 0.0,
    }


#: Below this many evaluated queries the console warns that intervals will be wide.
SMALL_QUERY_SET = 30


def data_notes(
    meta: Mapping[str, Any], n_evaluated: int, split: str = "test", interval_width: float | None = None
) -> list[str]:
    """What a user should know about their own data (a TREC run, a BEIR folder), one console line each.

    Each line starts with ``note:`` or ``warning:``. From the condition's ``meta``: the skipped queries
    (every non-zero counter of ``meta["skipped"]``, e.g. run queries without qrels and judged queries
    absent from the run), the judged queries none of whose relevant documents the run holds, the fully
    tied lists (a warning when every list of two or more items is: no ranking information at all), the
    lists that leave no choice (R >= N, e.g. one candidate: every depth is random there); and
    a warning when fewer than :data:`SMALL_QUERY_SET` queries are evaluated (``n_evaluated`` of the
    ``split``: test, train or all), with ``interval_width`` (the width of a typical paired 95% interval of
    the command's table) when given. For a log of requests (:mod:`benchmarks.toollog`): the first unknown
    tool names and the duplicate requests merged.
    """
    lines = []
    skipped = {k: int(v) for k, v in sorted((meta.get("skipped") or {}).items()) if int(v)}
    if skipped:
        examples = meta.get("skipped_examples") or {}

        def named(key: str, n: int) -> str:  # the first skipped ids, where the loader kept them
            ids = list(examples.get(key) or [])
            return f" ({', '.join(map(repr, ids))}{', ...' if n > len(ids) else ''})" if ids else ""

        counts = ", ".join(f"{v} {k}{named(k, v)}" for k, v in skipped.items())
        lines.append(f"note: skipped {counts} (counted in manifest.json)")
    unknown = dict(meta.get("unknown_tools") or [])  # [name, lines] pairs, in order of appearance
    if unknown:
        first = ", ".join(f"{name!r} ({n} line{'s' if n > 1 else ''})" for name, n in list(unknown.items())[:5])
        more = int(meta.get("n_unknown_tools", len(unknown))) - min(5, len(unknown))
        tail = f" and {more} more" if more else ""
        lines.append(f"note: tools the log names but the registry lacks: {first}{tail} (those requests are skipped)")
    if merged := int(meta.get("duplicates_merged", 0)):
        repeat = "log line repeats" if merged == 1 else "log lines repeat"
        lines.append(f"note: {merged} {repeat} an earlier request: merged into it (one query, the union of the tools "
                     "called)")  # fmt: skip
    absent, n = int(meta.get("n_relevant_not_in_run", 0)), int(meta.get("n_queries", 0))
    tied, ranked = int(meta.get("n_tied_lists", 0)), int(meta.get("n_lists_of_two_or_more", 0))
    if tied and tied == ranked:
        lines.append(
            "warning: every list is fully tied (all scores equal within each query): the lists carry no ranking "
            "information (their order is the docids'), so no depth chosen from the scores can beat a random shortlist"
        )
    elif tied:
        lines.append(f"note: {tied} of {n} lists are fully tied (all scores equal): no ranking information in them")
    if absent:
        lines.append(
            f"note: {absent} of {n} judged queries have none of their relevant documents in the run (a miss at "
            "every depth; for a run cut from a larger corpus give --n-candidates, the corpus size)"
        )
    no_choice = int(meta.get("n_lists_without_choice", 0))
    if no_choice:
        lines.append(
            f"note: {no_choice} of {n} lists leave no choice (one candidate, or every candidate relevant): every "
            "depth is random there, and BoR counts them as chance (0 bits; rewards.bor_aggregate)"
        )
    if n_evaluated < SMALL_QUERY_SET:
        what = {"test": "test ", "train": "training "}.get(split, "")
        width = "" if interval_width is None else f" (here a paired 95% interval spans {interval_width:.2f} bits)"
        lines.append(
            f"warning: only {n_evaluated} {what}{'query' if n_evaluated == 1 else 'queries'}, under "
            f"{SMALL_QUERY_SET}: intervals will be wide{width}"
        )
    return lines


def _run_condition(opts: Mapping[str, str], split_seed: int, train_frac: float) -> Condition:
    """A user's TREC run + qrels as a condition: its judged queries in the order of their ids (so the
    seeded split and every result depend on the query ids only, not on the order of lines in either
    file), split ``train_frac`` / ``1 - train_frac``."""
    from benchmarks.trec import load_run_queries

    if not opts.get("run") or not opts.get("qrels"):
        raise ValueError("benchmark 'run' needs --run FILE and --qrels FILE")
    n_cand = int(opts["n_candidates"]) if opts.get("n_candidates") else None
    loaded = load_run_queries(opts["run"], opts["qrels"], n_cand)
    queries = sorted(loaded.queries, key=lambda q: q.qid)  # the split is on the ids, never on the line order
    if len(queries) < 2:
        raise ValueError(f"{opts['run']}: need at least 2 judged queries, got {len(queries)}")
    train_idx, test_idx = seeded_split(len(queries), train_frac, split_seed)
    return Condition(
        name=run_condition_name({**opts, **_run_shas(opts["run"], opts["qrels"], loaded.inputs_sha256)}),
        queries=queries,
        train_idx=train_idx,
        test_idx=test_idx,
        meta={
            "benchmark": "run",
            "inputs_sha256": dict(loaded.inputs_sha256),
            "skipped": dict(loaded.skipped),
            "skipped_examples": dict(loaded.skipped_examples),
            "n_candidates": sorted({q.n_candidates for q in queries}),
            "n_queries": len(queries),
            "n_relevant_not_in_run": sum(q.relevant_ranks.size == 0 for q in queries),
            "n_lists_of_two_or_more": sum(q.length > 1 for q in queries),
            "n_tied_lists": sum(bool(q.length > 1 and q.scores[0] == q.scores[-1]) for q in queries),
            "n_lists_without_choice": sum(q.n_relevant >= q.n_candidates for q in queries),
            **split_meta(queries, train_idx, test_idx, split_seed, train_frac),
        },
    )


def _beir_condition_name(scorer: str, variant: str, opts: Mapping[str, str], corpus: ToolCorpus) -> str:
    """The name of a BEIR folder's condition (:func:`benchmarks.names.beir_condition_name`), from the digests
    the loader took of its files."""
    folder = corpus.name.removeprefix("beir:")
    split = opts.get("split", "test")
    shas = {
        f"{what}_sha256": corpus.inputs_sha256[f"{folder}/{path}"]
        for what, path in (("corpus", "corpus.jsonl"), ("queries", "queries.jsonl"), ("qrels", f"qrels/{split}.tsv"))
    }
    return beir_condition_name(scorer, variant, {"beir_folder": folder, "split": split, **shas})


def _run_shas(run: str, qrels: str, shas: Mapping[str, str]) -> dict[str, str]:
    """The ``run_sha256`` and ``qrels_sha256`` source options from the digests the loader took."""
    return {"run_sha256": shas[str(Path(run))], "qrels_sha256": shas[str(Path(qrels))]}
