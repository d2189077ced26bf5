"""Two scorers on the same candidates: the second scorer's scores on a ranked query, the two-scorer
("hybrid") observation, every learner on it, the hybrid and fused conditions, and the paired
comparison of the study report."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import TINY_BUDGETS

from agents import DQNAgent, DQNConfig, TabularConfig, TabularQ, registry
from agents.choppy import ChoppyConfig, CutoffModel
from agents.cutoff import CutoffConfig, ExpectedRewardCutoff
from agents.oracle import OptimalStopping
from agents.tabular import N_STATES, discretise
from benchmarks.conditions import build_condition, fit_fusion_weight, fused_scores
from envs import EpisodeConfig, RankedQuery, ShortlistEnv, feature_matrix
from envs.features import HYBRID_NAMES, N_FEATURES, OBSERVATIONS, observation_width


def hybrid_queries(count: int = 60, n: int = 20, seed: int = 0) -> list[RankedQuery]:
    """The gold sits at rank 1 or 5 of the first scorer; the second scorer ranks the gold first always,
    so "has the second scorer's top item been shown?" says where to stop."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        s = np.sort(rng.random(n))[::-1].copy()
        gold = 1 if i % 2 else 5
        aux = rng.random(n) * 0.5
        aux[gold - 1] = 1.0
        out.append(RankedQuery(s, [gold], f"h{i}", aux_scores=aux))
    return out


# ----------------------------------------------------------------------------- data type and features


def test_aux_scores_are_checked_frozen_and_follow_the_ranking() -> None:
    with pytest.raises(ValueError, match="'q': aux_scores has shape"):
        RankedQuery(np.array([2.0, 1.0]), [1], "q", aux_scores=np.array([1.0]))
    with pytest.raises(ValueError, match="'q': second-scorer score at rank 2 is nan"):
        RankedQuery(np.array([2.0, 1.0]), [1], "q", aux_scores=np.array([1.0, np.nan]))
    q, order = RankedQuery.from_scores([0.1, 0.9, 0.5], [1], "q", aux_scores=[10.0, 20.0, 30.0])
    np.testing.assert_array_equal(order, [1, 2, 0])
    np.testing.assert_array_equal(q.aux_scores, [20.0, 30.0, 10.0])  # reordered with the ranking
    assert q.hybrid and not q.aux_scores.flags.writeable
    with pytest.raises(ValueError, match="2 second-scorer scores for 3 candidates"):
        RankedQuery.from_scores([0.1, 0.9, 0.5], [1], "q", aux_scores=[1.0, 2.0])
    assert not RankedQuery(np.array([1.0]), [1], "p").hybrid


def test_hybrid_features_by_hand() -> None:
    """First scorer ranks items A B C D; the second scores them 1, 4, 4, 0 (B and C tie for its top)."""
    q = RankedQuery(np.array([4.0, 3.0, 2.0, 1.0]), [2], "q", aux_scores=np.array([1.0, 4.0, 4.0, 0.0]))
    f = feature_matrix(q)
    assert f.shape == (4, N_FEATURES + len(HYBRID_NAMES)) == (4, len(OBSERVATIONS["hybrid"]))
    np.testing.assert_array_equal(f[:, :N_FEATURES], feature_matrix(RankedQuery(q.scores, [2], "s")))
    h = {name: f[:, N_FEATURES + i] for i, name in enumerate(HYBRID_NAMES)}
    lr = np.log2(np.array([3, 1, 1, 4])) / 2  # second-scorer ranks 3, 1, 1, 4 (ties share the best)
    np.testing.assert_allclose(h["aux_agree_top"], 0.0)
    np.testing.assert_allclose(h["aux_top_seen"], [0, 1, 1, 1])
    np.testing.assert_allclose(h["aux_rank_cur"], lr, rtol=1e-6)
    np.testing.assert_allclose(h["aux_best_unseen"], [0, 0, 1, 1], atol=1e-7)  # min rank after k: 1, 1, 4, end
    za = (q.aux_scores - q.aux_scores.mean()) / q.aux_scores.std()
    np.testing.assert_allclose(h["aux_z_cur"], np.clip(za, -8, 8) / 8, rtol=1e-6)
    z = (q.scores - q.scores.mean()) / q.scores.std()
    np.testing.assert_allclose(h["fused_z_cur"], (z + za) / 2 / 8, rtol=1e-6)
    fused_rank = np.array([1 + np.sum((z + za) > v) for v in z + za])
    np.testing.assert_allclose(h["fused_rank_cur"], np.log2(fused_rank) / 2, rtol=1e-6)
    assert np.all(f >= -1) and np.all(f <= 1) and f.dtype == np.float32


def test_hybrid_features_ignore_labels_and_handle_constant_and_single_lists() -> None:
    q = RankedQuery(np.array([1.0, 1.0, 1.0]), [3], "c", aux_scores=np.array([2.0, 2.0, 2.0]))
    f = feature_matrix(q)
    assert np.all(np.isfinite(f)) and f[:, N_FEATURES + 4 :].max() == 0  # constant lists: z = 0
    one = feature_matrix(RankedQuery(np.array([1.0]), [1], "o", aux_scores=np.array([5.0])))
    assert one.shape == (1, 20) and np.all(np.isfinite(one))
    relabelled = RankedQuery(q.scores, [1], "c", aux_scores=q.aux_scores)
    np.testing.assert_array_equal(f, feature_matrix(relabelled))


def test_a_query_set_is_all_hybrid_or_none() -> None:
    mixed = [hybrid_queries(1)[0], RankedQuery(np.array([1.0, 0.5]), [1], "plain")]
    with pytest.raises(ValueError, match="'plain' gives the 'score' observation"):
        observation_width(mixed)
    with pytest.raises(ValueError, match="'plain'"):
        ShortlistEnv(mixed)
    env = ShortlistEnv(hybrid_queries(3))
    obs, _ = env.reset(seed=0)
    assert env.observation_space.shape == (20,) and obs.shape == (20,) and env.feature_names[-1] == "fused_rank_cur"


# ----------------------------------------------------------------------------- learners


def test_tabular_and_dp_use_the_extra_bin_and_learn_where_to_stop() -> None:
    """Score-only, ranks 1 and 5 look alike; with the second scorer the policy stops once its top is shown."""
    train, test = hybrid_queries(seed=1), hybrid_queries(seed=2)
    cfg = EpisodeConfig()
    feats = np.concatenate([feature_matrix(q) for q in train])
    states = discretise(feats, np.tile(np.arange(1, 21), len(train)))
    assert states.max() >= N_STATES  # the aux_top_seen bin
    tab = TabularQ("bor", TabularConfig(episodes=6000)).fit(train, cfg, 0)
    assert tab.q.shape == (2 * N_STATES, 2)
    gold = np.array([q.gold_rank for q in test])
    assert np.mean(tab.depths(test, cfg) == gold) >= 0.9
    dp = OptimalStopping("bor").fit(train, cfg, 0)
    assert dp.stop.size == 2 * N_STATES
    assert np.mean(dp.depths(test, cfg) == gold) >= 0.9
    plain = [RankedQuery(q.scores, q.relevant_ranks, q.qid) for q in test]
    with pytest.raises(ValueError, match="same observation set"):
        tab.depths(plain, cfg)
    with pytest.raises(ValueError, match="same observation set"):
        dp.depths(plain, cfg)


def test_cutoff_and_choppy_read_the_second_scorer_and_round_trip(tmp_path: Path) -> None:
    train, test = hybrid_queries(seed=1), hybrid_queries(seed=2)
    cfg = EpisodeConfig()
    gold = np.array([q.gold_rank for q in test])
    plain = [RankedQuery(q.scores, q.relevant_ranks, q.qid) for q in test]
    for model, kind in (
        (ExpectedRewardCutoff("bor", CutoffConfig(epochs=300)), ExpectedRewardCutoff),
        (CutoffModel("bor", ChoppyConfig(epochs=300, lr=1e-2)), CutoffModel),
    ):
        model.fit(train, cfg, 0)
        assert model.n_features == 20
        assert np.mean(model.depths(test, cfg) == gold) >= 0.9, model.name
        model.save(tmp_path / "agent.json")
        back = kind.load(tmp_path / "agent.json")
        np.testing.assert_array_equal(back.depths(test, cfg), model.depths(test, cfg))
        with pytest.raises(ValueError, match="same observation set"):
            back.depths(plain, cfg)


def test_dqn_on_the_hybrid_observation_saves_and_loads_its_width(tmp_path: Path) -> None:
    qs = hybrid_queries(20, seed=3)
    cfg = EpisodeConfig()
    agent = DQNAgent("bor", DQNConfig(total_timesteps=600, learning_starts=100)).fit(qs, cfg, 0)
    agent.save(tmp_path / "agent.zip")
    back = DQNAgent.load(tmp_path / "agent.zip")
    assert back.model.observation_space.shape == (20,)
    np.testing.assert_array_equal(back.depths(qs, cfg), agent.depths(qs, cfg))
    with pytest.raises(ValueError, match="same observation set"):
        back.depths([RankedQuery(q.scores, q.relevant_ranks, q.qid) for q in qs], cfg)


def test_every_registered_agent_runs_on_hybrid_queries() -> None:
    qs = hybrid_queries(12, seed=4)
    cfg = EpisodeConfig(max_depth=10)
    small = registry.parse_settings([*TINY_BUDGETS, "tabular.episodes=200"])
    for name in registry.kinds("agent"):
        pol = registry.make(name, "bor", small.get(name)).fit(qs, cfg, 0)
        k = pol.depths(qs, cfg)
        assert k.shape == (12,) and k.min() >= 1 and k.max() <= 10, name


# ----------------------------------------------------------------------------- conditions


def test_fusion_weight_is_fitted_to_the_informative_scorer() -> None:
    rng = np.random.default_rng(0)
    a = [rng.random(30) for _ in range(40)]  # uninformative
    b = [rng.random(30) for _ in range(40)]
    gold = [[int(np.argmax(x))] for x in b]  # the second scorer always ranks the gold first
    w, mrr = fit_fusion_weight(a, b, gold)
    assert w == 1.0 and mrr == 1.0
    w, _ = fit_fusion_weight(b, a, gold)
    assert w == 0.0
    np.testing.assert_allclose(
        fused_scores(np.array([1.0, 2.0, 3.0]), np.array([5.0, 5.0, 5.0]), 0.5),
        [-0.5 * 1.2247449, 0, 0.5 * 1.2247449],
        rtol=1e-6,
    )
    with pytest.raises(ValueError, match="no training queries"):
        fit_fusion_weight([], [], [])


def test_hybrid_and_fused_bfcl_conditions(shared_cache: Path) -> None:
    base = build_condition("bfcl", "bm25", cache_dir=shared_cache)
    hyb = build_condition("bfcl", "bm25", variant="hybrid", cache_dir=shared_cache)
    other = build_condition("bfcl", "minilm", cache_dir=shared_cache)
    assert hyb.name == "bfcl-bm25-hybrid" and hyb.meta["second_scorer"] == "minilm"
    np.testing.assert_array_equal(hyb.test_idx, base.test_idx)
    for qb, qh, qo, rb, ro in zip(
        base.queries, hyb.queries, other.queries, base.ranked_tools, other.ranked_tools, strict=True
    ):
        np.testing.assert_array_equal(qh.scores, qb.scores)  # same ranking as the score-only condition
        np.testing.assert_array_equal(qh.relevant_ranks, qb.relevant_ranks)
        pos = np.argsort(ro)  # registry index -> rank under MiniLM
        np.testing.assert_allclose(qh.aux_scores, qo.scores[pos[rb]])  # MiniLM's score of each BM25-ranked tool
    fused = build_condition("bfcl", "fused", cache_dir=shared_cache, split_seed=1)
    assert 0.0 <= fused.meta["fusion_weight"] <= 1.0 and fused.meta["fusion_of"] == ["bm25", "minilm"]
    assert fused.meta["fusion_train_mrr"] > 0 and not fused.queries[0].hybrid
    with pytest.raises(ValueError, match="pairs bm25 with minilm"):
        build_condition("bfcl", "fused", variant="hybrid", cache_dir=shared_cache)


# ----------------------------------------------------------------------------- report


def test_paired_conditions_is_the_mean_difference_over_shared_units() -> None:
    from experiments.report.tables import paired_conditions

    rng = np.random.default_rng(0)
    rows = []
    for cond, shift in (("a", 0.0), ("a-hybrid", 0.5)):
        for split in (0, 1):
            for seed in (1, 2):
                for q in range(20):
                    rows.append(
                        {"condition": cond, "method": "m", "seed": seed, "split_seed": split, "qid": f"q{q}",
                         "reward_net": rng.random() + shift}
                    )  # fmt: skip
    pq = pd.DataFrame(rows)
    out = paired_conditions(pq, [("a", "a-hybrid"), ("a", "missing")], ["m", "absent"], n_boot=500)
    assert len(out) == 1 and out.iloc[0]["n_units"] == 40
    by = pq.groupby(["condition", "split_seed", "qid"])["reward_net"].mean()
    assert out.iloc[0]["diff"] == pytest.approx(float((by["a-hybrid"] - by["a"]).mean()))
    assert out.iloc[0]["diff_lo"] < out.iloc[0]["diff"] < out.iloc[0]["diff_hi"]


def test_hybrid_section_shows_one_found_at_1_per_ranking() -> None:
    """A -hybrid pair ranks by one scorer (one found@1); a -fused pair shows score-only -> fused."""
    from experiments.report.page import Section, section_lines
    from experiments.report.study import HYBRID_METHODS, hybrid_blocks
    from experiments.report.tables import HYBRID_PAIRS, paired_conditions, scorer_strength

    rows = []
    # gold at rank 1 on 3 of 10 queries for the BM25 ranking (and its -hybrid), 7 of 10 fused
    for cond, n_top in (("bfcl-bm25", 3), ("bfcl-bm25-hybrid", 3), ("bfcl-fused", 7)):
        for seed in (1, 2):
            for q in range(10):
                rows.append(
                    {"condition": cond, "method": "bor-cutoff", "seed": seed, "split_seed": 0, "qid": f"q{q}",
                     "reward_net": 1.0 + 0.1 * q, "gold_rank": 1 if q < n_top else 2}
                )  # fmt: skip
    pq = pd.DataFrame(rows)
    body_blocks, verdict = hybrid_blocks(paired_conditions(pq, HYBRID_PAIRS, HYBRID_METHODS), scorer_strength(pq), {})
    lines = section_lines(Section("", [*body_blocks, verdict]))
    body = [ln for ln in lines if ln.startswith("| bfcl-bm25 |")]
    assert len(body) == 2 and verdict.text.startswith("Of 2 (pair, method) comparisons")
    cells = {ln.split("|")[2].strip(): ln.split("|")[3].strip() for ln in body}
    assert cells == {"bfcl-bm25-hybrid": "30.0", "bfcl-fused": "30.0 -> 70.0"}
    assert "found@1 of the ranking" in "\n".join(lines)
