"""Inference never reads a query's own R (a label, SPEC section 2): the supervised cut-off and the listwise
posterior price a depth with the R they fitted on their training queries (the median, ``r_assumed``), which they
save and load; a file written before it was recorded loads as R = 1."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from agents.base import assumed_relevant, read_assumed_relevant
from agents.cutoff import CutoffConfig, ExpectedRewardCutoff
from agents.posterior import ListwisePosterior
from envs import EpisodeConfig, RankedQuery


def lists(relevant: list[list[int]], n: int = 30, seed: int = 0) -> list[RankedQuery]:
    """One random sorted list per entry of ``relevant`` (its relevant ranks)."""
    rng = np.random.default_rng(seed)
    return [RankedQuery(np.sort(rng.random(n))[::-1].copy(), r, f"q{i:03d}") for i, r in enumerate(relevant)]


def models() -> list:
    return [ListwisePosterior(), ExpectedRewardCutoff(settings=CutoffConfig(epochs=30))]


def test_the_assumed_r_is_the_training_median() -> None:
    assert assumed_relevant(lists([[1], [2, 3], [1, 4, 9]])) == 2
    assert assumed_relevant(lists([[1], [2], [1, 4]])) == 1
    assert assumed_relevant(lists([[1, 2], [1, 2, 3]])) == 3  # median 2.5 rounds half up
    with pytest.raises(ValueError, match="no training queries"):
        assumed_relevant([])
    for bad in (0, 1.5, "2", True):
        with pytest.raises(ValueError, match="model.json: 'r_assumed' must be a whole number >= 1"):
            read_assumed_relevant({"r_assumed": bad}, "model.json")
    assert read_assumed_relevant({}, "old.json") == 1


@pytest.mark.parametrize("model", models(), ids=lambda m: m.name)
def test_depths_do_not_read_the_test_queries_r(model, tmp_path: Path) -> None:
    """Relabelling the test queries with any number of relevant items leaves every depth as it was; the depths
    are those priced with the training R (3 here), saved and loaded with the model."""
    cfg = EpisodeConfig(step_cost=0.05)
    rng = np.random.default_rng(1)
    train = lists([sorted(rng.choice(np.arange(1, 31), 3, replace=False).tolist()) for _ in range(60)], seed=2)
    model.fit(train, cfg, 0)
    assert model.r_assumed == 3
    test = lists([[1 + i % 7] for i in range(40)], seed=3)
    depths = model.depths(test, cfg)
    for relabel in ([[5]], [[2, 9]], [[1, 2, 3, 4, 5, 6]]):
        other = [RankedQuery(q.scores, relabel[0], q.qid) for q in test]
        np.testing.assert_array_equal(model.depths(other, cfg), depths)
    path = tmp_path / "agent.json"
    model.save(path)
    loaded = type(model).load(path)
    assert loaded.r_assumed == 3
    np.testing.assert_array_equal(loaded.depths(test, cfg), depths)
    record = json.loads(path.read_text())
    params = record.get("params", record)
    params.pop("r_assumed")
    path.write_text(json.dumps(record))
    assert type(model).load(path).r_assumed == 1
