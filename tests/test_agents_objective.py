"""One objective for every method: what each kind is fitted or trained to maximise, read from the config a
run records, is the judged net reward (or, for a rule, says it fits nothing or names its other target)."""

from __future__ import annotations

from dataclasses import asdict

import numpy as np
import pytest

from agents import registry
from agents.base import NOT_FITTED, Objective, judged_objective
from agents.peers import objective_matrix
from envs import EpisodeConfig, RankedQuery
from experiments.plan import PLANS, compare_cells, resolve_plans, study_cells

#: Rules that fit nothing, and the practitioners' rules fitted to a target of their own (reported as such).
OTHER_TARGETS = {
    "fixed": NOT_FITTED,
    "gap": NOT_FITTED,
    "gap-tail10": NOT_FITTED,
    "gap-buffer5": NOT_FITTED,
    "gap-tail10-buffer5": NOT_FITTED,
    "random": NOT_FITTED,
    "threshold-cov90": Objective("coverage 0.9"),
    "greedyk-bits": Objective("BoR bits"),
}


def _cells() -> list:
    plans = resolve_plans([])
    cells = study_cells(plans, [42]) + compare_cells(resolve_plans([], ("main", "hybrid", "multi")), [42])
    return list({c.run_id: c for c in cells}.values())


def test_every_study_and_comparison_cell_records_the_judged_objective() -> None:
    """Per cell of ``reproduce`` and ``compare``: the objective in its resolved config (what ``config.json``
    holds) is the judged net reward for every BoR-trained kind, learners included (gamma 1, the
    condition's step cost); the F1 and constant-reward ablations train on their own reward by design."""
    seen: dict[str, int] = {}
    for cell in _cells():
        recorded = cell.resolved()["objective"]
        kind = cell.method.agent
        seen[kind] = seen.get(kind, 0) + 1
        if kind in OTHER_TARGETS:
            assert recorded == asdict(OTHER_TARGETS[kind]), cell.run_id
        elif cell.method.reward == "bor":
            assert recorded == asdict(judged_objective(cell.episode)), cell.run_id
        else:  # the reward ablations: the same net objective of another terminal reward
            assert recorded == {**asdict(judged_objective(cell.episode)), "reward": cell.method.reward}, cell.run_id
    # every registered kind runs in the study or the comparison, but auto (shortlist recommend's selector: it
    # fits every candidate kind per cell)
    assert set(seen) == set(registry.KINDS) - {"auto"}
    assert registry.get("auto").objective("bor", None, EpisodeConfig(step_cost=0.02)) == judged_objective(
        EpisodeConfig(step_cost=0.02)
    )


@pytest.mark.parametrize("name", sorted(PLANS))
def test_every_plan_trains_its_learners_undiscounted(name: str) -> None:
    assert PLANS[name].episode.gamma == 1.0


def test_net_objective_matrix_is_the_judged_quantity() -> None:
    """objective_matrix("net") = found x log2(N/k) - c (k - 1), undiscounted, and equals the RL return at
    gamma = 1 (so learners and fitted peers optimise one quantity)."""
    q = RankedQuery(scores=np.linspace(1, 0, 10), relevant_ranks=[3], qid="q")
    cfg = EpisodeConfig(step_cost=0.05, gamma=1.0)
    net, _ = objective_matrix([q], cfg, "bor", "net")
    k = np.arange(1, 11)
    expected = np.where(k >= 3, np.log2(10 / k), 0.0) - 0.05 * (k - 1)
    np.testing.assert_allclose(net[0], expected, atol=1e-12)
    ret, _ = objective_matrix([q], cfg, "bor", "return")
    np.testing.assert_allclose(ret, net, atol=1e-12)


def test_oracle_stops_at_gold_only_when_it_pays_net() -> None:
    """The hindsight oracle maximises each query's net reward: the gold rank g when log2(N/g) - c (g - 1) > 0,
    else depth 1 (which earns 0, more than any depth that costs more than it finds)."""
    near = RankedQuery(scores=np.linspace(1, 0, 100), relevant_ranks=[4], qid="near")
    far = RankedQuery(scores=np.linspace(1, 0, 100), relevant_ranks=[90], qid="far")
    oracle = registry.make("oracle")
    assert oracle.depths([near, far], EpisodeConfig(step_cost=0.01)).tolist() == [4, 1]
    assert oracle.depths([near, far], EpisodeConfig(step_cost=0.0)).tolist() == [4, 90]
