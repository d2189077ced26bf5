"""Synthetic score lists with controlled difficulty and a known generator (a provable optimum).

Generative model (one query; everything in units of the distractor noise sd)
----------------------------------------------------------------------------
A query has ``n`` candidates. The gold tool sits at a candidate position drawn uniformly
from ``0..n-1``; every candidate gets an independent noise draw ``e_j`` from the
distractor distribution D (mean 0, standard deviation 1), and

    ``x_j = e_j + separation * [j is the gold position]``,

so the gold's score distribution is D shifted by ``separation`` (d' in signal-detection
terms). D is

- ``"normal"``: the standard normal;
- ``"student-t"``: Student's t with ``df > 2`` degrees of freedom rescaled to unit
  variance, ``e = t_df * sqrt((df - 2) / df)`` (heavy tails: occasional distractors far
  above the gold).

Options:

- ``ties = h > 0``: every score is rounded to the grid ``h * round(x / h)``, so equal
  scores occur (the coarser the grid, the more ties).
- ``rho``: a second scorer with noise correlated ``rho`` with the first (normal only).
  Each candidate has a pair ``(x1, x2) = separation * [gold] + (z1, z2)`` with
  ``(z1, z2)`` bivariate standard normal with correlation rho; the list is ranked by the
  fused score ``(x1 + x2) / 2`` (the score fusion one would deploy). With equal
  separations the fused score is a sufficient statistic for the gold's position (the
  joint log likelihood ratio is ``separation * (x1 + x2) / (1 + rho) - separation^2 / (1 + rho)``),
  so the ranked list loses nothing a score-only policy could use. Its noise sd is
  ``sqrt((1 + rho) / 2)``: rho = 1 is one scorer, rho = 0 gives the sqrt(2) fusion gain.

Tie rule (stated here and tested)
---------------------------------
:meth:`envs.RankedQuery.from_scores` ranks by a stable sort, so tied scores keep
candidate order. The gold's candidate position is uniform and independent of all the
scores, so inside a block of tied scores the gold is equally likely at each of the
block's ranks: ties are broken neither for nor against the gold systematically
(unlike a registry order in which the gold could sit first).

Seeds and streams
-----------------
Query ``i`` is drawn from ``numpy.random.default_rng([seed, i])`` (gold position first,
then the noise), so query i is the same whatever ``n_queries``, ``train`` or ``noise``
are: the training-size and label-noise axes see nested / identical score lists.

Training set and label noise
----------------------------
``train = None`` uses the package's seeded 70/30 split
(:func:`benchmarks.split.seeded_split`); ``train = m`` puts a seeded random m of the
``n_queries`` queries in the training split and the rest in the test split (the study
fixes the test size by setting ``n_queries = m + 1000``). ``noise = p`` replaces, for each
TRAINING query independently with probability p, the gold label by a uniformly random
other candidate (drawn from ``default_rng([seed, split_seed, 1])``); test queries always
keep the true label. The score lists themselves are never changed.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from envs import RankedQuery

if TYPE_CHECKING:
    from benchmarks.split import Condition

__all__ = [
    "DEFAULT_N_QUERIES",
    "DISTRIBUTIONS",
    "GENERATOR_VERSION",
    "SyntheticSpec",
    "apply_label_noise",
    "candidate_scores",
    "generate",
    "parse_variant",
    "spec_from_qid",
    "synthetic_condition",
    "synthetic_split",
]

#: Version of the generative model and its random streams; bump when either changes.
GENERATOR_VERSION = "synthetic-v1"
#: Distractor noise distributions.
DISTRIBUTIONS = ("normal", "student-t")
#: Queries per condition when the variant does not say (``q<N>``).
DEFAULT_N_QUERIES = 2000
#: Separator between the variant and the query index in a qid (``<variant>#<index>``).
QID_SEP = "#"

_FLOAT = r"\d+(?:\.\d+)?"


def _fmt(x: float) -> str:
    """Shortest round-tripping positional form with at least one decimal (2.0, 0.25)."""
    return np.format_float_positional(float(x), trim="0")


def _fmt_df(x: float) -> str:
    """Degrees of freedom without a trailing ``.0`` (3, 2.5)."""
    return np.format_float_positional(float(x), trim="-")


@dataclass(frozen=True)
class SyntheticSpec:
    """A synthetic condition: how score lists are generated and split (see the module docstring).

    Raises:
        ValueError: naming the field, for an impossible spec.
    """

    n: int = 100
    """Candidates per query (N, also the N of P_rand); >= 1."""
    separation: float = 2.0
    """Gold mean shift in distractor-sd units (d'); finite, >= 0 (0 = the gold is indistinguishable)."""
    distribution: str = "normal"
    """Distractor noise: "normal" or "student-t" (unit variance in both cases)."""
    df: float | None = None
    """Degrees of freedom of "student-t" (> 2, so the variance exists); must be None for "normal"."""
    ties: float = 0.0
    """Grid width h: scores are rounded to h * round(x / h) so ties occur; 0 = continuous scores."""
    rho: float | None = None
    """Noise correlation of a second scorer in [0, 1], lists ranked by the fused mean score (normal only)."""
    n_queries: int = DEFAULT_N_QUERIES
    """Total queries (train + test); >= 2."""
    train: int | None = None
    """Training queries (1..n_queries-1; the rest are test); None = the package's seeded 70/30 split."""
    noise: float = 0.0
    """Label-noise rate p in [0, 1): each training gold label is replaced by a random other candidate w.p. p."""

    def __post_init__(self) -> None:
        def whole(name: str, v: object) -> int:
            if isinstance(v, bool) or not isinstance(v, int | np.integer):
                raise ValueError(f"{name} must be a whole number, got {v!r}")
            return int(v)

        def real(name: str, v: object) -> float:
            if isinstance(v, bool) or not isinstance(v, int | float | np.integer | np.floating):
                raise ValueError(f"{name} must be a number, got {v!r}")
            if not math.isfinite(float(v)):
                raise ValueError(f"{name} must be finite, got {v!r}")
            return float(v)

        if whole("n", self.n) < 1:
            raise ValueError(f"n (candidates) must be >= 1, got {self.n}")
        if real("separation", self.separation) < 0:
            raise ValueError(f"separation must be >= 0, got {self.separation}")
        if self.distribution not in DISTRIBUTIONS:
            raise ValueError(f"distribution must be one of {', '.join(DISTRIBUTIONS)}, got {self.distribution!r}")
        if self.distribution == "student-t":
            if self.df is None or real("df", self.df) <= 2:
                raise ValueError(f"df must be > 2 for the student-t distribution (unit variance), got {self.df}")
        elif self.df is not None:
            raise ValueError(f"df is only used by the student-t distribution; leave it None for {self.distribution!r}")
        if real("ties", self.ties) < 0:
            raise ValueError(f"ties (grid width) must be >= 0, got {self.ties}")
        if self.rho is not None:
            if not 0.0 <= real("rho", self.rho) <= 1.0:
                raise ValueError(f"rho must lie in [0, 1], got {self.rho}")
            if self.distribution != "normal":
                raise ValueError("rho (a second correlated scorer) is only supported with the normal distribution")
        if whole("n_queries", self.n_queries) < 2:
            raise ValueError(f"n_queries must be >= 2 (a train and a test query), got {self.n_queries}")
        if self.train is not None and not 1 <= whole("train", self.train) < self.n_queries:
            raise ValueError(f"train must lie in 1..n_queries-1 = 1..{self.n_queries - 1}, got {self.train}")
        if not 0.0 <= real("noise", self.noise) < 1.0:
            raise ValueError(f"noise must lie in [0, 1), got {self.noise}")
        if self.noise > 0 and self.n < 2:
            raise ValueError("noise needs n >= 2 (a wrong label must be another candidate)")

    @property
    def noise_sd(self) -> float:
        """Standard deviation of a candidate's score noise: 1, or sqrt((1 + rho) / 2) for fused scores."""
        return 1.0 if self.rho is None else math.sqrt((1.0 + float(self.rho)) / 2.0)

    @property
    def variant(self) -> str:
        """Compact, canonical name, e.g. ``n100-sep2.0-normal``, ``n100-sep2.0-t3-ties0.25-train200``.

        Parts, in this order: ``n<N>``, ``sep<d>``, ``normal`` | ``t<df>``, then only when not
        default ``ties<h>``, ``rho<r>``, ``q<n_queries>``, ``train<m>``, ``noise<p>``.
        :func:`parse_variant` is its inverse.
        """
        parts = [f"n{self.n}", f"sep{_fmt(self.separation)}"]
        parts.append("normal" if self.distribution == "normal" else f"t{_fmt_df(float(self.df or 0))}")
        if self.ties:
            parts.append(f"ties{_fmt(self.ties)}")
        if self.rho is not None:
            parts.append(f"rho{_fmt(self.rho)}")
        if self.n_queries != DEFAULT_N_QUERIES:
            parts.append(f"q{self.n_queries}")
        if self.train is not None:
            parts.append(f"train{self.train}")
        if self.noise:
            parts.append(f"noise{_fmt(self.noise)}")
        return "-".join(parts)

    def as_dict(self) -> dict:
        """Plain JSON-serialisable fields (inverse: ``SyntheticSpec(**d)``)."""
        return asdict(self)


_OPTIONAL = {
    "ties": (re.compile(rf"^ties({_FLOAT})$"), float),
    "rho": (re.compile(rf"^rho({_FLOAT})$"), float),
    "n_queries": (re.compile(r"^q(\d+)$"), int),
    "train": (re.compile(r"^train(\d+)$"), int),
    "noise": (re.compile(rf"^noise({_FLOAT})$"), float),
}


def parse_variant(s: str) -> SyntheticSpec:
    """Inverse of :attr:`SyntheticSpec.variant` (optional parts may come in any order).

    Raises:
        ValueError: naming the part that does not parse (or the field the spec rejects).
    """
    parts = str(s).split("-")
    if len(parts) < 3:
        raise ValueError(
            f"synthetic variant {s!r}: expected n<N>-sep<d>-<normal|t<df>>[-options], e.g. n100-sep2.0-normal"
        )
    m_n = re.fullmatch(r"n(\d+)", parts[0])
    if not m_n:
        raise ValueError(f"synthetic variant {s!r}: bad part {parts[0]!r}; expected n<N> (candidates)")
    m_sep = re.fullmatch(rf"sep({_FLOAT})", parts[1])
    if not m_sep:
        raise ValueError(f"synthetic variant {s!r}: bad part {parts[1]!r}; expected sep<d> (separation >= 0)")
    kw: dict = {"n": int(m_n.group(1)), "separation": float(m_sep.group(1))}
    m_t = re.fullmatch(rf"t({_FLOAT})", parts[2])
    if parts[2] == "normal":
        kw["distribution"] = "normal"
    elif m_t:
        kw["distribution"], kw["df"] = "student-t", float(m_t.group(1))
    else:
        raise ValueError(f"synthetic variant {s!r}: bad part {parts[2]!r}; expected 'normal' or t<df> (student-t)")
    for part in parts[3:]:
        for field_name, (pat, conv) in _OPTIONAL.items():
            m = pat.fullmatch(part)
            if m:
                if field_name in kw:
                    raise ValueError(f"synthetic variant {s!r}: part {part!r} repeats {field_name}")
                kw[field_name] = conv(m.group(1))
                break
        else:
            raise ValueError(
                f"synthetic variant {s!r}: unknown part {part!r}; expected ties<h>, rho<r>, q<N>, train<m> or noise<p>"
            )
    return SyntheticSpec(**kw)


def spec_from_qid(qid: str) -> SyntheticSpec:
    """The spec encoded in a generated query id (``<variant>#<index>``)."""
    variant, sep, _ = str(qid).rpartition(QID_SEP)
    if not sep:
        raise ValueError(f"query {qid!r} was not made by benchmarks.synthetic (no {QID_SEP!r} in its id)")
    return parse_variant(variant)


def _noise(rng: np.random.Generator, spec: SyntheticSpec, size: int) -> NDArray[np.float64]:
    if spec.distribution == "student-t":
        df = float(spec.df or 0)
        return rng.standard_t(df, size) * math.sqrt((df - 2.0) / df)
    if spec.rho is None:
        return rng.standard_normal(size)
    z1, z3 = rng.standard_normal((2, size))
    rho = float(spec.rho)
    z2 = rho * z1 + math.sqrt(max(0.0, 1.0 - rho * rho)) * z3
    return (z1 + z2) / 2.0


def candidate_scores(spec: SyntheticSpec, seed: int) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    """Unsorted candidate scores (n_queries, n) and the gold candidate position of each query.

    Row i comes from ``default_rng([seed, i])``: gold position ``~ U{0..n-1}``, then the noise.
    """
    out = np.empty((spec.n_queries, spec.n))
    gold = np.empty(spec.n_queries, dtype=np.int64)
    for i in range(spec.n_queries):
        rng = np.random.default_rng([int(seed), i])
        gold[i] = rng.integers(spec.n)
        out[i] = _noise(rng, spec, spec.n)
    out[np.arange(spec.n_queries), gold] += float(spec.separation)
    if spec.ties:
        out = float(spec.ties) * np.round(out / float(spec.ties))
    return out, gold


def generate(spec: SyntheticSpec, seed: int) -> list[RankedQuery]:
    """All ``n_queries`` ranked queries with their TRUE gold labels (no label noise).

    qids are ``<spec.variant>#<i>`` (i zero-padded), so a query names its generator
    (:func:`spec_from_qid`). Ranking: :meth:`RankedQuery.from_scores` (stable; see the
    module docstring for why the tie rule is neutral).
    """
    scores, gold = candidate_scores(spec, seed)
    width = len(str(spec.n_queries - 1))
    return [
        RankedQuery.from_scores(scores[i], [int(gold[i])], f"{spec.variant}{QID_SEP}{i:0{width}d}")[0]
        for i in range(spec.n_queries)
    ]


def apply_label_noise(queries: Sequence[RankedQuery], noise: float, rng: np.random.Generator) -> list[RankedQuery]:
    """Replace each query's gold rank, with probability ``noise``, by a uniform other rank.

    Draws ``flip ~ U[0,1) < noise`` and ``other ~ U{1..L-1}`` (shifted past the true rank)
    for every query, flipped or not, so the stream does not depend on the outcomes.
    Queries must have exactly one relevant item and L >= 2 when noise > 0.
    """
    if not 0.0 <= noise < 1.0:
        raise ValueError(f"noise must lie in [0, 1), got {noise}")
    q_list = list(queries)
    if noise == 0.0 or not q_list:
        return q_list
    lengths = np.array([q.length for q in q_list])
    if np.any(lengths < 2) or any(q.relevant_ranks.size != 1 for q in q_list):
        raise ValueError("label noise needs one gold item per query and at least 2 candidates")
    flip = rng.random(len(q_list)) < noise
    other = rng.integers(1, lengths)  # 1..L-1
    out = []
    for q, f, o in zip(q_list, flip, other, strict=True):
        if f:
            r = int(o) + (1 if o >= q.gold_rank else 0)
            q = RankedQuery(q.scores, np.array([r]), q.qid, q.n_candidates, q.n_relevant)
        out.append(q)
    return out


def synthetic_split(
    spec: SyntheticSpec, split_seed: int, train_frac: float = 0.7
) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
    """Train/test positions: ``spec.train`` seeded queries for training, or the seeded 70/30 split."""
    from benchmarks.split import seeded_split

    if spec.train is None:
        return seeded_split(spec.n_queries, train_frac, split_seed)
    perm = np.random.default_rng(split_seed).permutation(spec.n_queries)
    return np.sort(perm[: spec.train]), np.sort(perm[spec.train :])


def synthetic_condition(
    scorer: str, variant: str, *, split_seed: int = 0, train_frac: float = 0.7, seed: int = 0
) -> Condition:
    """The :class:`benchmarks.conditions.Condition` ``synthetic-<scorer>-<variant>``.

    ``scorer`` must be ``"gen"`` and ``variant`` canonical (``spec.variant``), so one
    condition has one name. ``seed`` draws the score lists; ``split_seed`` the split and
    the label noise, which touches training queries only.
    """
    from benchmarks.names import ConditionId
    from benchmarks.split import Condition, split_meta

    if scorer != "gen":
        raise ValueError(f"benchmark 'synthetic' has one scorer, 'gen' (the known generator), got {scorer!r}")
    spec = parse_variant(variant)
    if spec.variant != variant:
        raise ValueError(f"synthetic variant {variant!r} is not canonical; write {spec.variant!r}")
    clean = generate(spec, seed)
    train_idx, test_idx = synthetic_split(spec, split_seed, train_frac)
    noisy = apply_label_noise([clean[i] for i in train_idx], spec.noise, np.random.default_rng([seed, split_seed, 1]))
    queries = list(clean)
    for i, q in zip(train_idx, noisy, strict=True):
        queries[int(i)] = q
    flipped = sum(int(q.gold_rank != clean[int(i)].gold_rank) for i, q in zip(train_idx, noisy, strict=True))
    meta = {
        "benchmark": "synthetic",
        "scorer": scorer,
        "variant": variant,
        "spec": spec.as_dict(),
        "generator_version": GENERATOR_VERSION,
        "candidate_seed": seed,
        "n_candidates": [spec.n],
        "n_queries": spec.n_queries,
        "n_train_labels_flipped": flipped,
        **split_meta(clean, train_idx, test_idx, split_seed, train_frac),
    }
    if spec.train is not None:
        meta["train_frac"] = spec.train / spec.n_queries
    return Condition(ConditionId("synthetic", scorer, variant).name, queries, train_idx, test_idx, meta=meta)
