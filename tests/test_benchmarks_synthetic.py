"""The synthetic generator: spec validation, variant names, determinism, ties, label noise, conditions."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchmarks.conditions import build_condition, candidate_rule
from benchmarks.synthetic import (
    DEFAULT_N_QUERIES,
    GENERATOR_VERSION,
    SyntheticSpec,
    apply_label_noise,
    candidate_scores,
    generate,
    parse_variant,
    spec_from_qid,
)
from envs import RankedQuery

# --------------------------------------------------------------------------- spec and variant names


@pytest.mark.parametrize(
    "spec, variant",
    [
        (SyntheticSpec(), "n100-sep2.0-normal"),
        (SyntheticSpec(n=20, separation=0.5), "n20-sep0.5-normal"),
        (SyntheticSpec(distribution="student-t", df=3.0), "n100-sep2.0-t3"),
        (SyntheticSpec(distribution="student-t", df=2.5, ties=0.1), "n100-sep2.0-t2.5-ties0.1"),
        (SyntheticSpec(rho=0.5), "n100-sep2.0-normal-rho0.5"),
        (SyntheticSpec(n_queries=1200, train=200), "n100-sep2.0-normal-q1200-train200"),
        (SyntheticSpec(noise=0.2), "n100-sep2.0-normal-noise0.2"),
        (SyntheticSpec(separation=0.0, rho=0.0), "n100-sep0.0-normal-rho0.0"),
    ],
)
def test_variant_round_trip(spec: SyntheticSpec, variant: str) -> None:
    assert spec.variant == variant
    assert parse_variant(variant) == spec
    assert parse_variant(spec.variant).variant == variant


def test_parse_variant_accepts_any_option_order() -> None:
    a = parse_variant("n100-sep2-normal-noise0.1-train200-q1200")
    assert a == SyntheticSpec(separation=2.0, noise=0.1, train=200, n_queries=1200)
    assert a.variant == "n100-sep2.0-normal-q1200-train200-noise0.1"


@pytest.mark.parametrize(
    "variant, part",
    [
        ("n100", "n100"),
        ("x100-sep2.0-normal", "x100"),
        ("n100-sepx-normal", "sepx"),
        ("n100-sep2.0-cauchy", "cauchy"),
        ("n100-sep2.0-normal-foo3", "foo3"),
        ("n100-sep2.0-normal-noise0.1-noise0.2", "noise0.2"),
        ("n100-sep-1.0-normal", "sep"),
    ],
)
def test_parse_variant_names_the_bad_part(variant: str, part: str) -> None:
    with pytest.raises(ValueError, match=part):
        parse_variant(variant)


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"n": 0}, "n "),
        ({"n": 2.5}, "n must"),
        ({"separation": -1.0}, "separation"),
        ({"separation": math.nan}, "separation"),
        ({"distribution": "cauchy"}, "distribution"),
        ({"distribution": "student-t"}, "df"),
        ({"distribution": "student-t", "df": 2.0}, "df"),
        ({"df": 3.0}, "df"),
        ({"ties": -0.1}, "ties"),
        ({"rho": 1.5}, "rho"),
        ({"distribution": "student-t", "df": 3.0, "rho": 0.5}, "rho"),
        ({"n_queries": 1}, "n_queries"),
        ({"train": 2000}, "train"),
        ({"train": 0}, "train"),
        ({"noise": 1.0}, "noise"),
        ({"noise": -0.1}, "noise"),
        ({"n": 1, "noise": 0.1}, "noise"),
    ],
)
def test_impossible_spec_names_the_field(kwargs: dict, field: str) -> None:
    with pytest.raises(ValueError, match=field):
        SyntheticSpec(**kwargs)


def test_parse_variant_reports_spec_errors() -> None:
    with pytest.raises(ValueError, match="train"):
        parse_variant("n100-sep2.0-normal-q100-train100")
    with pytest.raises(ValueError, match="noise"):
        parse_variant("n100-sep2.0-normal-noise1.0")


# --------------------------------------------------------------------------- generation


def test_generate_is_deterministic_and_seeded() -> None:
    spec = SyntheticSpec(n=10, n_queries=50)
    a, b, c = generate(spec, 3), generate(spec, 3), generate(spec, 4)
    assert [q.qid for q in a] == [q.qid for q in b]
    assert all(np.array_equal(x.scores, y.scores) and x.gold_rank == y.gold_rank for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x.scores, y.scores) for x, y in zip(a, c, strict=True))
    assert len(a) == 50 and all(q.length == 10 and q.n_candidates == 10 and q.n_relevant == 1 for q in a)
    assert a[7].qid == "n10-sep2.0-normal-q50#07"
    assert spec_from_qid(a[7].qid) == spec


def test_queries_nest_across_n_queries_train_and_noise() -> None:
    small = generate(SyntheticSpec(n=10, n_queries=30, train=10, noise=0.3), 0)
    large = generate(SyntheticSpec(n=10, n_queries=60), 0)
    for x, y in zip(small, large[:30], strict=True):
        assert np.array_equal(x.scores, y.scores) and x.gold_rank == y.gold_rank


@pytest.mark.parametrize(
    "spec", [SyntheticSpec(n=10, n_queries=4000), SyntheticSpec(n=10, n_queries=4000, distribution="student-t", df=4.0)]
)
def test_scores_follow_the_generator(spec: SyntheticSpec) -> None:
    scores, gold = candidate_scores(spec, 1)
    counts = np.bincount(gold, minlength=spec.n)
    # uniform gold position: each of 10 positions ~ Binomial(4000, 0.1) (sd 19)
    assert np.all(np.abs(counts - 400) < 80)
    is_gold = np.zeros_like(scores, dtype=bool)
    is_gold[np.arange(len(gold)), gold] = True
    d = scores[~is_gold]
    assert abs(d.mean()) < 0.03 and abs(d.std() - 1.0) < 0.05  # unit-variance distractors
    assert abs(scores[is_gold].mean() - spec.separation) < 0.08  # mean shift = separation


def test_rho_sets_the_fused_noise_sd() -> None:
    spec = SyntheticSpec(n=10, n_queries=3000, rho=0.2, separation=0.0)
    scores, _ = candidate_scores(spec, 0)
    assert spec.noise_sd == pytest.approx(math.sqrt(0.6))
    assert scores.std() == pytest.approx(math.sqrt(0.6), rel=0.03)


def test_generated_ranks_match_a_stable_sort() -> None:
    spec = SyntheticSpec(n=12, n_queries=40, ties=0.5)
    scores, gold = candidate_scores(spec, 2)
    for q, s, g in zip(generate(spec, 2), scores, gold, strict=True):
        order = np.argsort(-s, kind="stable")
        assert np.array_equal(q.scores, s[order])
        assert q.gold_rank == int(np.flatnonzero(order == g)[0]) + 1


def test_ties_lie_on_the_grid_and_occur() -> None:
    spec = SyntheticSpec(n=50, n_queries=20, ties=0.25)
    qs = generate(spec, 0)
    for q in qs:
        assert np.allclose(q.scores / 0.25, np.round(q.scores / 0.25))
    assert sum(int(np.unique(q.scores).size < q.length) for q in qs) == len(qs)


def test_from_scores_breaks_ties_by_candidate_position() -> None:
    q, order = RankedQuery.from_scores([1.0, 2.0, 1.0, 2.0], [2], "t")
    assert order.tolist() == [1, 3, 0, 2] and q.gold_rank == 4


def test_tie_rule_is_neutral_for_the_gold() -> None:
    """Within a block of tied scores, the gold's place is uniform: its mean relative
    position in the block is 1/2 (a rule favouring the gold would give 0)."""
    spec = SyntheticSpec(n=20, separation=0.0, ties=1.0, n_queries=3000)
    rel = []
    for q in generate(spec, 5):
        g = q.gold_rank
        block = np.flatnonzero(q.scores == q.scores[g - 1]) + 1
        if block.size > 1:
            rel.append((g - block[0]) / (block.size - 1))
    rel_a = np.asarray(rel)
    assert rel_a.size > 2500
    # uniform on the block's places: mean 1/2, sd of the mean < 0.3 / sqrt(2500) = 0.006
    assert abs(rel_a.mean() - 0.5) < 0.025


# --------------------------------------------------------------------------- label noise


def test_label_noise_flips_to_another_candidate() -> None:
    qs = generate(SyntheticSpec(n=5, n_queries=4000), 0)
    noisy = apply_label_noise(qs, 0.3, np.random.default_rng(1))
    flipped = np.array([a.gold_rank != b.gold_rank for a, b in zip(qs, noisy, strict=True)])
    assert abs(flipped.mean() - 0.3) < 0.03
    assert all(np.array_equal(a.scores, b.scores) for a, b in zip(qs, noisy, strict=True))
    # the new label is uniform over the 4 other ranks
    new = np.array([b.gold_rank for a, b in zip(qs, noisy, strict=True) if a.gold_rank == 1 and b.gold_rank != 1])
    assert set(new.tolist()) == {2, 3, 4, 5}
    assert apply_label_noise(qs, 0.0, np.random.default_rng(1)) == qs
    with pytest.raises(ValueError, match="noise"):
        apply_label_noise(qs, 1.0, np.random.default_rng(1))


# --------------------------------------------------------------------------- conditions


def test_build_condition_synthetic() -> None:
    variant = "n20-sep1.0-normal-q300-train100-noise0.25"
    c = build_condition("synthetic", "gen", variant=variant, split_seed=3)
    assert c.name == f"synthetic-gen-{variant}"
    assert c.meta["spec"] == parse_variant(variant).as_dict()
    assert c.meta["generator_version"] == GENERATOR_VERSION
    assert len(c.train_idx) == 100 and len(c.test_idx) == 200
    assert np.intersect1d(c.train_idx, c.test_idx).size == 0
    clean = generate(parse_variant(variant), 0)
    test_same = [c.queries[i].gold_rank == clean[i].gold_rank for i in c.test_idx]
    train_same = [c.queries[i].gold_rank == clean[i].gold_rank for i in c.train_idx]
    assert all(test_same)  # test labels stay clean
    assert 10 <= train_same.count(False) <= 40  # ~25 of 100 training labels flipped
    assert c.meta["n_train_labels_flipped"] == train_same.count(False)
    again = build_condition("synthetic", "gen", variant=variant, split_seed=3)
    assert np.array_equal(again.train_idx, c.train_idx)
    assert [q.gold_rank for q in again.queries] == [q.gold_rank for q in c.queries]
    other = build_condition("synthetic", "gen", variant=variant, split_seed=4)
    assert not np.array_equal(other.train_idx, c.train_idx)


def test_build_condition_default_split_and_errors() -> None:
    c = build_condition("synthetic", "gen", variant="n10-sep1.0-normal-q100")
    assert (len(c.train_idx), len(c.test_idx)) == (70, 30)
    with pytest.raises(ValueError, match="canonical"):
        build_condition("synthetic", "gen", variant="n10-sep1-normal-q100")
    with pytest.raises(ValueError, match="gen"):
        build_condition("synthetic", "bm25", variant="n10-sep1.0-normal-q100")
    with pytest.raises(ValueError, match="cauchy"):
        build_condition("synthetic", "gen", variant="n10-sep1.0-cauchy")


def test_candidate_rule_accepts_synthetic_variants() -> None:
    rule = candidate_rule("synthetic", "n50-sep2.0-t3")
    assert rule.n == 50 and rule.n_queries == DEFAULT_N_QUERIES
    with pytest.raises(ValueError, match="sepx"):
        candidate_rule("synthetic", "n50-sepx-normal")
