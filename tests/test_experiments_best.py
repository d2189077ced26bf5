"""The method to use per condition (experiments/report/tables.py ``best_methods``) and its answer cells: methods that
are the same policy on a condition (the same net reward on every test unit) are named beside the best, the runner-up
is the best method that differs, ties go to the first by name whatever the row order, and the two answer tables
(the comparison's and the overview's) say so."""

from __future__ import annotations

import numpy as np
import pandas as pd

from experiments.report.markdown import runner_up_cells, same_as_best
from experiments.report.tables import JUDGED, best_methods

REWARDS = {
    "bor-residual": [3.0, 1.0, 2.0, 2.0],  # the posterior's rewards exactly: the residual kept its start
    "bor-posterior": [3.0, 1.0, 2.0, 2.0],
    "bor-threshold": [3.0, 2.0, 1.0, 1.5],
    "fixed-3": [1.0, 1.0, 1.0, 1.0],
    "oracle": [9.0, 9.0, 9.0, 9.0],
}
GROUPS = {"bor-residual": "agent", "bor-posterior": "agent", "bor-threshold": "peer", "fixed-3": "baseline",
          "oracle": "limit"}  # fmt: skip


def frames(rewards: dict[str, list[float]], order: list[str]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Per-query rows (two splits of two queries) and one aggregate row per method, in ``order``."""
    per_query = pd.DataFrame(
        [
            {"condition": "c", "method": m, "seed": 42, "split_seed": i // 2, "qid": f"q{i % 2}", "reward_net": r}
            for m in order
            for i, r in enumerate(rewards[m])
        ]  # fmt: skip
    )
    agg = pd.DataFrame(
        [
            {
                "condition": "c",
                "method": m,
                "group": GROUPS[m],
                JUDGED: float(np.mean(rewards[m])),
                f"{JUDGED}_lo": 0.0,
                f"{JUDGED}_hi": 9.0,
                "found_pct": 50.0,
                "mean_k": 2.0,
                "median_k": 2.0,
                "p90_k": 3.0,
                "whole_list_pct": 0.0,
            }
            for m in order
        ]  # fmt: skip
    )
    return per_query, agg


def test_the_same_policy_is_named_beside_the_best_and_the_runner_up_differs() -> None:
    for order in (list(REWARDS), list(reversed(REWARDS))):  # row order never changes the answer
        per_query, agg = frames(REWARDS, order)
        row = best_methods(per_query, agg, n_boot=200).iloc[0]
        assert row["best"] == "bor-posterior" and row["same_as_best"] == "bor-residual"
        assert row["runner_up"] == "bor-threshold"  # the tie with the same rewards is skipped; the limit never counts
        assert row["diff"] == np.mean(REWARDS["bor-posterior"]) - np.mean(REWARDS["bor-threshold"])
        assert same_as_best(row, "; ") == "; the same test rewards as bor-residual"
        assert runner_up_cells(row)[0] == "bor-threshold"


def test_an_equal_mean_with_other_rewards_is_a_runner_up_not_the_same_policy() -> None:
    rewards = {**REWARDS, "bor-threshold": [2.0, 2.0, 2.0, 2.0]}  # the posterior's mean, other rewards
    row = best_methods(*frames(rewards, list(rewards)), n_boot=200).iloc[0]
    assert row["best"] == "bor-posterior" and row["same_as_best"] == "bor-residual"
    assert row["runner_up"] == "bor-threshold" and row["diff"] == 0.0


def test_every_method_the_same_leaves_no_runner_up() -> None:
    rewards = {m: [1.0, 1.0, 1.0, 1.0] for m in ("bor-residual", "bor-posterior", "fixed-3")}
    row = best_methods(*frames(rewards, list(rewards)), n_boot=200).iloc[0]
    assert row["best"] == "bor-posterior" and row["same_as_best"] == "bor-residual; fixed-3"
    assert row["runner_up"] is None and np.isnan(row["diff"])
    assert runner_up_cells(row) == ["-", "-"]
    assert same_as_best(row, "") == "the same test rewards as bor-residual, fixed-3"
    without = pd.Series({"same_as_best": float("nan"), "runner_up": "x"})  # as read back from a CSV: NaN, not ""
    assert same_as_best(without, "; ") == ""
