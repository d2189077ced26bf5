"""The Choppy-style cut-off model: learns a known optimum, is deterministic per seed,
round-trips through JSON and never reads labels at inference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from agents import registry
from agents.base import learned_episode
from agents.choppy import ChoppyConfig, CutoffModel
from agents.peers import query_caps
from envs import EpisodeConfig, RankedQuery


def toy_queries(gold_rank: int, n: int = 20, count: int = 40, seed: int = 0) -> list[RankedQuery]:
    rng = np.random.default_rng(seed)
    return [RankedQuery(np.sort(rng.random(n))[::-1].copy(), [gold_rank], f"q{i}") for i in range(count)]


@pytest.mark.parametrize("gold_rank", [1, 3])
def test_learns_the_known_optimum(gold_rank: int) -> None:
    """Gold always at rank g: the expected reward is maximised by cutting at g on every query."""
    cfg = EpisodeConfig()
    model = CutoffModel("bor", ChoppyConfig(epochs=200, lr=1e-2)).fit(toy_queries(gold_rank, seed=1), cfg, 0)
    np.testing.assert_array_equal(model.depths(toy_queries(gold_rank, seed=2), cfg), gold_rank)
    test = toy_queries(gold_rank, seed=2)
    dist = model.cut_distribution(test, cfg)
    cap = int(query_caps(test, learned_episode(cfg, True)).max())  # the break-even cap (on by default)
    assert cap < 20 and dist.shape == (40, cap)
    np.testing.assert_allclose(dist.sum(axis=1), 1.0, rtol=1e-6)
    assert dist[:, gold_rank - 1].min() > 0.5


def test_deterministic_per_seed_and_leaves_global_rng_alone(tmp_path) -> None:
    qs = toy_queries(3, seed=3)
    cfg = EpisodeConfig(max_depth=10)
    torch.manual_seed(1234)
    before = torch.rand(1)
    torch.manual_seed(1234)
    a = CutoffModel("bor", ChoppyConfig(epochs=30)).fit(qs, cfg, 7)
    after = torch.rand(1)
    assert torch.equal(before, after)  # fit forks the RNG
    b = CutoffModel("bor", ChoppyConfig(epochs=30)).fit(qs, cfg, 7)
    c = CutoffModel("bor", ChoppyConfig(epochs=30)).fit(qs, cfg, 8)
    for (ka, va), (_, vb) in zip(a.net.state_dict().items(), b.net.state_dict().items(), strict=True):
        assert torch.equal(va, vb), ka
    assert not all(
        torch.equal(x, y) for x, y in zip(a.net.state_dict().values(), c.net.state_dict().values(), strict=True)
    )
    a.save(tmp_path / "agent.json")
    back = CutoffModel.load(tmp_path / "agent.json")
    np.testing.assert_array_equal(back.depths(qs, cfg), a.depths(qs, cfg))
    np.testing.assert_allclose(back.cut_distribution(qs, cfg), a.cut_distribution(qs, cfg))


def test_inference_reads_no_labels() -> None:
    qs = toy_queries(2, seed=4)
    cfg = EpisodeConfig()
    model = CutoffModel("bor", ChoppyConfig(epochs=20)).fit(qs, cfg, 0)
    relabelled = [RankedQuery(q.scores, [15], q.qid) for q in qs]
    np.testing.assert_array_equal(model.depths(qs, cfg), model.depths(relabelled, cfg))


def test_caps_and_registry_and_errors(tmp_path) -> None:
    qs = toy_queries(5, seed=5)
    cfg = EpisodeConfig(max_depth=4)
    pol = registry.make("choppy", "bor")
    assert pol.name == "bor-choppy" and pol.stochastic
    model = CutoffModel("f1", ChoppyConfig(epochs=10)).fit(qs, cfg, 0)
    assert model.name == "f1-choppy"
    k = model.depths(qs, cfg)
    assert k.min() >= 1 and k.max() <= 4
    with pytest.raises(RuntimeError, match="fit"):
        CutoffModel().depths(qs, cfg)
    (tmp_path / "bad.json").write_text('{"params": {"reward": "bor"}}')
    with pytest.raises(ValueError, match="malformed"):
        CutoffModel.load(tmp_path / "bad.json")


def _plain_forward(net: torch.nn.Module, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """The network's function written out without its shortcuts (3-D encoder input, mask always applied)."""
    h = net.enc(x)
    m = mask.unsqueeze(-1)
    mean = (h * m).sum(1) / m.sum(1).clamp_min(1)
    top = h.masked_fill(~m, float("-inf")).max(1).values
    ctx = net.head_ctx(torch.cat([mean, top], dim=-1)).unsqueeze(1)
    logits = net.out(torch.relu(net.head_pos(h) + ctx)).squeeze(-1)
    return logits.masked_fill(~mask, float("-inf"))


@pytest.mark.parametrize("ragged", [False, True])
def test_forward_shortcuts_are_bit_identical_in_value_and_gradient(ragged: bool) -> None:
    """The flattened encoder and the no-mask shortcut give the same bits as the plain computation, logits and
    every parameter gradient, so a fit (full-batch Adam on these gradients) gives the same weights."""
    from agents.choppy import _cut_net

    torch.manual_seed(0)
    net = _cut_net(13, 16)
    x = torch.rand(50, 37, 13)
    caps = torch.randint(1, 38, (50,)) if ragged else torch.full((50,), 37)
    mask = torch.arange(37)[None, :] < caps[:, None]
    target = torch.rand(50, 37)
    grads = []
    for forward in (net.forward, lambda a, b: _plain_forward(net, a, b)):
        net.zero_grad()
        logits = forward(x, mask)
        (-(torch.softmax(logits, dim=1) * target).sum(1).mean()).backward()
        grads.append([logits.detach()] + [p.grad.clone() for p in net.parameters()])
    for a, b in zip(*grads, strict=True):
        assert torch.equal(a, b)


@pytest.mark.parametrize("ragged", [False, True])
def test_forward_shortcuts_train_to_bit_identical_weights(ragged: bool) -> None:
    """Trained with the fit's own loop (:func:`agents.choppy._train`: full-batch Adam, weight decay) for 30 epochs,
    the network with its shortcuts and the plain computation from the same initial weights end with the same bits
    in every parameter."""
    import copy

    from agents.choppy import ChoppyConfig, _cut_net, _train

    torch.manual_seed(1)
    net = _cut_net(13, 16)
    start, plain = copy.deepcopy(net), copy.deepcopy(net)
    x = torch.rand(40, 29, 13)
    caps = torch.randint(1, 30, (40,)) if ragged else torch.full((40,), 29)
    mask = torch.arange(29)[None, :] < caps[:, None]
    target = torch.rand(40, 29) - 0.5
    for model, forward in ((net, net.forward), (plain, lambda a, b: _plain_forward(plain, a, b))):
        _train(model, forward, x, mask, target, ChoppyConfig(epochs=30))
    moved = [not torch.equal(a, b) for a, b in zip(net.parameters(), start.parameters(), strict=True)]
    assert any(moved), "training did not move the weights: the comparison would be empty"
    for a, b in zip(net.parameters(), plain.parameters(), strict=True):
        assert torch.equal(a, b)
