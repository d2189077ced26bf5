"""The P(found) stop: the cut-off's network with a stepwise decision, STOP at the first depth where P(found by k)
passes a level fitted exactly to the training net reward; it learns a known optimum, its level is the best one on
train, it never shows the whole list under the BoR reward, is deterministic per seed, depends on the set of training
queries and not their order, round-trips through JSON with its level and reads no labels at inference. That it reads
no item below its depth on the strict set is checked with every examined-only kind in
tests/test_observation_strict.py."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from conftest import stepped_lists

from agents import registry
from agents.cutoff import CutoffConfig, ExpectedRewardCutoff
from agents.peers import objective_matrix
from agents.pfound import PFoundStop
from envs import EpisodeConfig, RankedQuery


def toy_queries(gold_rank: int, n: int = 20, count: int = 40, seed: int = 0) -> list[RankedQuery]:
    rng = np.random.default_rng(seed)
    return [RankedQuery(np.sort(rng.random(n))[::-1].copy(), [gold_rank], f"q{i}") for i in range(count)]


def train_net_reward(model: PFoundStop, queries: list[RankedQuery], cfg: EpisodeConfig, level: float) -> float:
    """Mean training net reward of the rule at ``level``, by brute force over the depths it gives."""
    p, offsets = model.found_probability(queries, cfg)
    pay, _ = objective_matrix(queries, cfg, "bor")
    stop = p > level
    stop[offsets[1:] - 1] = True
    k = np.array([int(np.argmax(stop[a:b])) + 1 for a, b in zip(offsets[:-1], offsets[1:], strict=True)])
    return float(pay[np.arange(len(queries)), k - 1].mean())


@pytest.mark.parametrize("gold_rank", [1, 3, 12])
def test_learns_the_known_optimum(gold_rank: int) -> None:
    """Gold always at rank g: P(found by k) is a step at g, and the best level stops there (no horizon: it looks
    again at every depth, so a deep gold is reached too)."""
    cfg = EpisodeConfig()
    model = PFoundStop("bor", CutoffConfig(epochs=300)).fit(toy_queries(gold_rank, seed=1), cfg, 0)
    np.testing.assert_array_equal(model.depths(toy_queries(gold_rank, seed=2), cfg), gold_rank)


def test_the_level_is_the_best_one_on_train_and_the_depth_its_first_crossing() -> None:
    qs = stepped_lists(1)
    cfg = EpisodeConfig(step_cost=0.02)
    model = PFoundStop("bor", CutoffConfig(epochs=200)).fit(qs, cfg, 0)
    p, offsets = model.found_probability(qs, cfg)
    fitted = train_net_reward(model, qs, cfg, model.level)
    for level in np.r_[np.unique(p), np.unique(p) - 1e-9, -1.0, 2.0]:  # every piece of the rule, and both ends
        assert train_net_reward(model, qs, cfg, float(level)) <= fitted + 1e-9
    k, why = model.explain(qs, cfg)
    assert len(set(k.tolist())) > 1, "the depths differ per query"
    bounds = list(zip(offsets[:-1], offsets[1:], strict=True))
    first = [int(np.argmax(np.r_[p[a : b - 1] > model.level, True])) + 1 for a, b in bounds]  # the cap stops
    np.testing.assert_array_equal(k, first)
    np.testing.assert_array_equal(model.depths(qs, cfg), k)
    assert all(w["level"] == model.level for w in why)
    assert all(w["p_found"] > model.level or kk == b - a for w, kk, (a, b) in zip(why, k, bounds, strict=True))


def test_same_network_as_the_cutoff_only_the_decision_differs() -> None:
    qs = stepped_lists(2)
    cfg = EpisodeConfig(step_cost=0.02)
    a = PFoundStop("bor", CutoffConfig(epochs=50)).fit(qs, cfg, 4)
    b = ExpectedRewardCutoff("bor", CutoffConfig(epochs=50)).fit(qs, cfg, 4)
    for pa, pb in zip(a.net.parameters(), b.net.parameters(), strict=True):
        assert torch.equal(pa, pb)


def test_never_the_whole_list_with_bor() -> None:
    """The cap is the break-even depth, below N under BoR: even a gold that always sits last is never shown."""
    qs = [RankedQuery(np.r_[np.linspace(5, 3, 5), np.zeros(45)], [50], f"t{i}") for i in range(30)]
    for cost in (0.0, 0.01):
        cfg = EpisodeConfig(step_cost=cost)
        model = PFoundStop("bor", CutoffConfig(epochs=50)).fit(qs, cfg, 0)
        assert model.depths(qs, cfg).max() < 50


def test_deterministic_per_seed_round_trip_and_global_rng(tmp_path) -> None:
    qs = stepped_lists(3)
    cfg = EpisodeConfig(max_depth=10)
    torch.manual_seed(1234)
    before = torch.rand(1)
    torch.manual_seed(1234)
    a = PFoundStop("bor", CutoffConfig(epochs=30)).fit(qs, cfg, 7)
    assert torch.equal(before, torch.rand(1))  # fit forks the RNG
    b = PFoundStop("bor", CutoffConfig(epochs=30)).fit(qs, cfg, 7)
    c = PFoundStop("bor", CutoffConfig(epochs=30)).fit(qs, cfg, 8)
    assert a.level == b.level
    sa, sb, sc = (m.net.state_dict() for m in (a, b, c))
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)
    a.save(tmp_path / "agent.json")
    saved = json.loads((tmp_path / "agent.json").read_text())["params"]
    assert saved["level"] == a.level and np.isfinite(saved["final_train_loss"])
    back = PFoundStop.load(tmp_path / "agent.json")
    assert back.level == a.level and back.settings == a.settings
    np.testing.assert_array_equal(back.depths(qs, cfg), a.depths(qs, cfg))
    k = a.depths(qs, cfg)
    assert k.min() >= 1 and k.max() <= 10
    del saved["level"]
    (tmp_path / "nolevel.json").write_text(json.dumps({"name": a.name, "params": saved}))
    with pytest.raises(ValueError, match="nolevel.json: malformed P\\(found\\) stop file"):
        PFoundStop.load(tmp_path / "nolevel.json")


def test_fit_depends_on_the_set_of_queries_not_their_order() -> None:
    qs = stepped_lists(5)
    cfg = EpisodeConfig(step_cost=0.02)
    shuffled = [qs[i] for i in np.random.default_rng(0).permutation(len(qs))]
    a = PFoundStop("bor", CutoffConfig(epochs=30)).fit(qs, cfg, 7)
    b = PFoundStop("bor", CutoffConfig(epochs=30)).fit(shuffled, cfg, 7)
    assert a.level == b.level
    np.testing.assert_array_equal(a.depths(qs, cfg), b.depths(qs, cfg))


def test_inference_reads_no_labels() -> None:
    qs = stepped_lists(4)
    cfg = EpisodeConfig()
    model = PFoundStop("bor", CutoffConfig(epochs=20)).fit(qs, cfg, 0)
    relabelled = [RankedQuery(q.scores, [15], q.qid) for q in qs]
    np.testing.assert_array_equal(model.depths(qs, cfg), model.depths(relabelled, cfg))


def test_registry_and_errors(tmp_path) -> None:
    pol = registry.make("pfound", "bor")
    assert pol.name == "bor-pfound" and pol.stochastic
    kind = registry.get("pfound")
    assert kind.group == "agent" and kind.view == "stepwise"
    assert registry.reads_examined_only(kind, "strict") and not registry.reads_examined_only(kind, "score")
    assert registry.parse_settings(["pfound.epochs=5"])["pfound"] == CutoffConfig(epochs=5)
    assert PFoundStop("f1").name == "f1-pfound"
    assert PFoundStop().depths([], EpisodeConfig()).size == 0
    with pytest.raises(RuntimeError, match="fit"):
        PFoundStop().depths(toy_queries(1), EpisodeConfig())
    (tmp_path / "bad.json").write_text('{"params": {"reward": "bor"}}')
    with pytest.raises(ValueError, match="bad.json: malformed P\\(found\\) stop"):
        PFoundStop.load(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="no queries"):
        PFoundStop().fit([], EpisodeConfig(), 0)
    model = PFoundStop("bor", CutoffConfig(epochs=5)).fit(toy_queries(1), EpisodeConfig(), 0)
    with pytest.raises(ValueError, match="bor-pfound"):  # trained on 13 features, given the strict set's
        model.depths(toy_queries(1), EpisodeConfig(observation="strict"))
