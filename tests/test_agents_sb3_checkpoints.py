"""The weights a hold-out keeps (agents.sb3.Checkpoints): the best mean without a margin; with one, trained weights
replace the first ones scored only when they are significantly better, paired over the held-out queries (the
residual DQN's start, agents/residual.py)."""

from __future__ import annotations

import numpy as np
import pytest

from agents.sb3 import Checkpoints


def no_rule(module: object, feats: np.ndarray) -> np.ndarray:
    """The stop rule the scripted hold-out never calls (its returns are given)."""
    return np.zeros(len(feats), dtype=bool)


class Scripted:
    """A stand-in for :class:`agents.sb3.HeldOut` whose per-query returns are given in the order they are asked for."""

    def __init__(self, returns: list[list[float]]) -> None:
        self.queue = [np.asarray(r, dtype=np.float64) for r in returns]

    def returns(self, stop: object) -> np.ndarray:
        return self.queue.pop(0)


class Weights:
    """A module whose state is the step it was seen at."""

    def __init__(self) -> None:
        self.step = 0

    def state_dict(self) -> dict:
        return {"step": self.step}

    def load_state_dict(self, state: dict) -> None:
        self.step = state["step"]


def scripted_choice(returns: list[list[float]], margin: float | None) -> tuple[int, list[tuple[int, float]]]:
    """The step kept from checkpoints scored at steps 1, 2, ... with these per-query returns."""
    ck = Checkpoints(Scripted(returns), no_rule, margin)  # type: ignore[arg-type]  # a stand-in HeldOut
    module = Weights()
    for step in range(1, len(returns)):
        module.step = step
        ck.see(step, module)
    module.step = len(returns)
    ck.finish(len(returns), module)
    assert module.step == ck.at  # the kept weights are loaded
    return ck.at, ck.history


def test_trained_weights_replace_the_start_only_when_significantly_better() -> None:
    start = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    noisy = [1.0, 1.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0]  # one query better, one worse: mean +0.0
    lucky = [1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0]  # same mean as the start, shuffled
    better_by_noise = [1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 1.0, 0.0]  # +1 query of 8: mean +0.125, one standard error
    better = [2.0, 1.0, 2.0, 1.0, 2.0, 1.0, 2.0, 1.0]  # +1 on every query
    # without a margin the best mean wins (the old rule): +0.125 on one query is enough
    assert scripted_choice([start, noisy, better_by_noise, lucky], None)[0] == 3
    assert scripted_choice([start, noisy, better_by_noise, lucky], 0.0)[0] == 3  # margin 0: the same rule
    # with 1.96 standard errors, that single query is not enough: the start stays
    at, history = scripted_choice([start, noisy, better_by_noise, lucky], 1.96)
    assert at == 1 and [t for t, _ in history] == [1, 2, 3, 4]  # every checkpoint is still scored and recorded
    # a checkpoint better on every query passes, and among those that pass the best mean wins (ties: the earlier)
    assert scripted_choice([start, better_by_noise, better, better], 1.96)[0] == 3
    much = [3.0, 2.0, 3.0, 2.0, 3.0, 2.0, 3.0, 2.0]
    assert scripted_choice([start, better, much, better_by_noise], 1.96)[0] == 3
    # a checkpoint that beats a passing one on the mean but not the start significantly is not kept
    high_noise = [9.0, -5.0, 9.0, -5.0, 9.0, -5.0, 9.0, -5.0]  # mean 2.0 > 1.5, but +1.5 on the start is 0.6 SE
    assert scripted_choice([start, better, high_noise], 1.96)[0] == 2
    assert scripted_choice([start, better, high_noise], None)[0] == 3
    # a single held-out query can never show significance, even at margin 0 (the best-mean rule takes it)
    assert scripted_choice([[0.0], [5.0]], 1.96)[0] == 1
    assert scripted_choice([[0.0], [5.0]], 0.0)[0] == 1
    assert scripted_choice([[0.0], [5.0]], None)[0] == 2
    # differences that are all equal and positive have no spread: they pass at any margin
    assert scripted_choice([[0.0, 1.0], [0.5, 1.5]], 1e9)[0] == 2


def test_a_bad_margin_is_refused() -> None:
    for bad in (-0.5, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="margin must be finite and >= 0"):
            Checkpoints(None, no_rule, bad)
