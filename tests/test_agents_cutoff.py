"""The expected-reward cut-off: learns P(found by k), stops at the expected-reward argmax, never
shows the whole list under the BoR reward, is deterministic per seed, round-trips through JSON and
reads no labels at inference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents import registry
from agents.cutoff import CutoffConfig, ExpectedRewardCutoff
from envs import EpisodeConfig, RankedQuery
from rewards import break_even_depth, terminal_reward


def toy_queries(gold_rank: int, n: int = 20, count: int = 40, seed: int = 0) -> list[RankedQuery]:
    rng = np.random.default_rng(seed)
    return [RankedQuery(np.sort(rng.random(n))[::-1].copy(), [gold_rank], f"q{i}") for i in range(count)]


@pytest.mark.parametrize("gold_rank", [1, 3])
def test_learns_the_known_optimum(gold_rank: int) -> None:
    """Gold always at rank g: P(found by k) is a step at g, so the expected reward peaks at g."""
    cfg = EpisodeConfig()
    model = ExpectedRewardCutoff("bor", CutoffConfig(epochs=300)).fit(toy_queries(gold_rank, seed=1), cfg, 0)
    test = toy_queries(gold_rank, seed=2)
    np.testing.assert_array_equal(model.depths(test, cfg), gold_rank)
    p, offsets = model.found_probability(test, cfg)
    depth = break_even_depth("bor", 20, cfg.step_cost)  # the rows stop at the break-even depth
    assert offsets[-1] == 40 * depth
    rows = p.reshape(40, depth)
    assert np.all(np.diff(rows, axis=1) >= 0)  # made monotone in k
    assert rows[:, gold_rank - 1 :].min() > 0.8
    if gold_rank > 1:
        assert rows[:, : gold_rank - 1].max() < 0.2


def test_depth_is_the_expected_reward_argmax() -> None:
    """The chosen depth maximises p_k T(k) - c (k - 1) for the model's own p_k, first maximum."""
    qs = toy_queries(4, seed=6)
    cfg = EpisodeConfig(step_cost=0.05)
    model = ExpectedRewardCutoff("bor", CutoffConfig(epochs=40)).fit(qs, cfg, 3)
    p, _ = model.found_probability(qs, cfg)
    depth = break_even_depth("bor", 20, 0.05)  # rows stop at the break-even depth
    k = np.arange(1, depth + 1)
    pay = terminal_reward("bor", np.ones(depth, bool), k, 20, 1)
    value = p.reshape(40, depth) * pay - 0.05 * (k - 1)
    np.testing.assert_array_equal(model.depths(qs, cfg), np.argmax(value, axis=1) + 1)


def test_never_the_whole_list_with_bor() -> None:
    """Whatever the model predicts, BoR pays 0 at K = N, so K = N is never the argmax when N > 1,
    even with no step cost and a tied tail where the gold always sits last."""
    qs = [RankedQuery(np.r_[np.linspace(5, 3, 5), np.zeros(45)], [50], f"t{i}") for i in range(30)]
    for cost in (0.0, 0.01):
        cfg = EpisodeConfig(step_cost=cost)
        model = ExpectedRewardCutoff("bor", CutoffConfig(epochs=50)).fit(qs, cfg, 0)
        assert model.depths(qs, cfg).max() < 50


def test_deterministic_per_seed_round_trip_and_global_rng(tmp_path) -> None:
    qs = toy_queries(3, seed=3)
    cfg = EpisodeConfig(max_depth=10)
    torch.manual_seed(1234)
    before = torch.rand(1)
    torch.manual_seed(1234)
    a = ExpectedRewardCutoff("bor", CutoffConfig(epochs=30)).fit(qs, cfg, 7)
    assert torch.equal(before, torch.rand(1))  # fit forks the RNG
    b = ExpectedRewardCutoff("bor", CutoffConfig(epochs=30)).fit(qs, cfg, 7)
    c = ExpectedRewardCutoff("bor", CutoffConfig(epochs=30)).fit(qs, cfg, 8)
    sa, sb, sc = (m.net.state_dict() for m in (a, b, c))
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert not all(torch.equal(sa[k], sc[k]) for k in sa)
    a.save(tmp_path / "agent.json")
    back = ExpectedRewardCutoff.load(tmp_path / "agent.json")
    np.testing.assert_array_equal(back.depths(qs, cfg), a.depths(qs, cfg))
    k = a.depths(qs, cfg)
    assert k.min() >= 1 and k.max() <= 10


def test_inference_reads_no_labels() -> None:
    qs = toy_queries(2, seed=4)
    cfg = EpisodeConfig()
    model = ExpectedRewardCutoff("bor", CutoffConfig(epochs=20)).fit(qs, cfg, 0)
    relabelled = [RankedQuery(q.scores, [15], q.qid) for q in qs]
    np.testing.assert_array_equal(model.depths(qs, cfg), model.depths(relabelled, cfg))


def test_registry_and_errors(tmp_path) -> None:
    pol = registry.make("cutoff", "bor")
    assert pol.name == "bor-cutoff" and pol.stochastic
    assert registry.get("cutoff").group == "agent"
    assert ExpectedRewardCutoff("f1").name == "f1-cutoff"
    assert ExpectedRewardCutoff().depths([], EpisodeConfig()).size == 0
    with pytest.raises(RuntimeError, match="fit"):
        ExpectedRewardCutoff().depths(toy_queries(1), EpisodeConfig())
    with pytest.raises(ValueError, match="CutoffConfig"):
        CutoffConfig(epochs=0)
    (tmp_path / "bad.json").write_text('{"params": {"reward": "bor"}}')
    with pytest.raises(ValueError, match="malformed"):
        ExpectedRewardCutoff.load(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="no queries"):
        ExpectedRewardCutoff().fit([], EpisodeConfig(), 0)


@pytest.mark.parametrize("kind", ["cutoff", "choppy"])
def test_fit_depends_on_the_set_of_queries_not_their_order(kind: str) -> None:
    """A full-batch fit sums its loss in float32 over the training queries; both supervised learners fit on the
    id-sorted list, so listing the same queries in another order gives the same weights, bit for bit."""
    rng = np.random.default_rng(5)
    qs = [RankedQuery(np.sort(rng.random(30))[::-1].copy(), [int(rng.integers(1, 8))], f"q{i:03d}") for i in range(60)]
    cfg = EpisodeConfig(step_cost=0.02)
    settings = registry.parse_settings([f"{kind}.epochs=30"])[kind]
    shuffled = [qs[i] for i in rng.permutation(len(qs))]
    a = registry.make(kind, "bor", settings).fit(qs, cfg, 7)
    b = registry.make(kind, "bor", settings).fit(shuffled, cfg, 7)
    for pa, pb in zip(a.net.parameters(), b.net.parameters(), strict=True):
        assert torch.equal(pa, pb)
    np.testing.assert_array_equal(a.depths(qs, cfg), b.depths(qs, cfg))


def test_freed_memory_is_retained_on_glibc_and_numbers_do_not_depend_on_it() -> None:
    """On glibc the torch learners keep freed memory for reuse (fewer page faults); it applies once per process,
    and a fit in a fresh process without it (the setting is process-wide) gives the same weights."""
    import platform
    import subprocess
    import sys

    from agents.base import retain_freed_memory

    assert retain_freed_memory() is (platform.libc_ver()[0] == "glibc")
    assert retain_freed_memory.cache_info().currsize == 1
    script = (
        "import sys, numpy as np, torch\n"
        "import agents.base as B\n"
        "if sys.argv[1] == 'off': B.retain_freed_memory = lambda: False\n"
        "from agents.cutoff import CutoffConfig, ExpectedRewardCutoff\n"
        "from envs import EpisodeConfig, RankedQuery\n"
        "rng = np.random.default_rng(0)\n"
        "qs = [RankedQuery(np.sort(rng.random(400))[::-1].copy(), [int(rng.integers(1, 9))], str(i))\n"
        "      for i in range(60)]\n"
        "m = ExpectedRewardCutoff('bor', CutoffConfig(epochs=20)).fit(qs, EpisodeConfig(step_cost=0.0), 3)\n"
        "print(torch.cat([p.detach().flatten() for p in m.net.parameters()]).numpy().tobytes().hex())\n"
    )
    procs = [  # the two fresh processes run side by side
        subprocess.Popen(
            [sys.executable, "-c", script, mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for mode in ("on", "off")
    ]
    out = []
    for proc in procs:
        stdout, stderr = proc.communicate(timeout=600)
        assert proc.returncode == 0, stderr[-2000:]
        out.append(stdout)
    assert out[0] == out[1] and len(out[0]) > 100
