"""Whole-data forward passes in chunks (agents.sb3.forward_rows): the same numbers bit for bit as one pass."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from gymnasium import spaces

from agents.sb3 import FORWARD_ROWS, batched_stop, forward_rows, listwise_extractor_class, listwise_layout
from envs.features import LISTWISE_ITEM_NAMES, LISTWISE_RANKS, OBSERVATIONS


def _net(width: int, listwise: bool) -> torch.nn.Module:
    torch.manual_seed(3)
    space = spaces.Box(-np.inf, np.inf, (width,), np.float32)
    head: torch.nn.Module = listwise_extractor_class()(space) if listwise else torch.nn.Flatten()
    dim = head.features_dim if listwise else width  # type: ignore[union-attr]
    return torch.nn.Sequential(head, torch.nn.Linear(dim, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))


def _rows(width: int, listwise: bool, n: int) -> np.ndarray:
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (n, width)).astype(np.float32)
    if listwise:  # the "shown" column of each rank: a prefix of ones, as the environment writes it
        base, per = listwise_layout(width)
        shown = LISTWISE_ITEM_NAMES.index("shown")
        depth = rng.integers(0, LISTWISE_RANKS + 1, n)
        for r in range(LISTWISE_RANKS):
            x[:, base + r * per + shown] = (r < depth).astype(np.float32)
    return x


@pytest.mark.parametrize("observation", ["score", "hybrid", "listwise", "listwise-hybrid"])
def test_chunked_passes_equal_one_pass_bit_for_bit(observation: str) -> None:
    width = len(OBSERVATIONS[observation])
    listwise = observation.startswith("listwise")
    net = _net(width, listwise)
    x = _rows(width, listwise, 3 * FORWARD_ROWS + 17)  # several chunks and a ragged last one
    with torch.no_grad():
        whole = net(torch.from_numpy(x))
    chunked = forward_rows(net, x)
    assert chunked.shape == whole.shape
    assert torch.equal(chunked, whole)
    assert not chunked.requires_grad
    assert np.array_equal(batched_stop(net, x), (whole[:, 0] >= whole[:, 1]).numpy())


def test_small_and_empty_inputs() -> None:
    net = _net(13, False)
    x = _rows(13, False, 5)
    with torch.no_grad():
        assert torch.equal(forward_rows(net, x), net(torch.from_numpy(x)))
    assert batched_stop(net, x[:0]).shape == (0,)
    assert batched_stop(net, x[:0]).dtype == bool
