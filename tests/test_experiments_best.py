"""The method to use per condition (experiments/report/tables.py ``best_methods``) and its answer cells: methods that
are the same policy on a condition (the same net reward on every test unit) are named beside the best, the runner-up
is the best method that differs, ties go to the first by name whatever the row order, and the two answer tables
(the comparison's and the overview's) say so."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments.io import write_csv
from experiments.report.markdown import runner_up_cells, same_as_best
from experiments.report.tables import JUDGED, best_methods, best_of, same_policy, split_goal

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


def test_the_same_policy_needs_the_same_rewards_in_every_run_not_only_on_average() -> None:
    """Two seeds whose rewards swap between two methods average to the same per query: not one policy."""
    per_query, agg = frames(REWARDS, list(REWARDS))
    second = per_query.assign(seed=123)
    swap = second["method"].isin(["bor-residual", "bor-posterior"])
    second.loc[swap, "method"] = second.loc[swap, "method"].map({"bor-residual": "bor-posterior",
                                                                  "bor-posterior": "bor-residual"})  # fmt: skip
    first = per_query.copy()
    first.loc[first["method"] == "bor-residual", "reward_net"] += [1.0, 0.0, 0.0, 0.0]
    second.loc[second["method"] == "bor-posterior", "reward_net"] += [1.0, 0.0, 0.0, 0.0]
    both = pd.concat([first, second], ignore_index=True)
    assert same_policy(both, "c", "bor-posterior", ["bor-residual"]) == []  # the seed means agree; the runs do not
    assert same_policy(per_query, "c", "bor-posterior", ["bor-residual", "bor-threshold"]) == ["bor-residual"]
    one_seed = pd.concat([per_query, per_query[per_query["method"] == "bor-posterior"].assign(seed=123)])
    assert same_policy(one_seed, "c", "bor-posterior", ["bor-residual"]) == []  # a run the other lacks: differs


def test_best_of_breaks_equal_means_by_name_whatever_the_order() -> None:
    means = pd.Series({"b": 1.0, "a": 1.0, "c": 0.5})
    assert best_of(means) == best_of(means.iloc[::-1]) == "a"
    assert best_of(means, ["c", "b"]) == "b"
    with pytest.raises(ValueError, match="no names"):
        best_of(means, [])


def test_the_examined_only_runner_up_differs_from_the_best(monkeypatch: pytest.MonkeyPatch) -> None:
    """The examined-only table skips the same policy too (``same_as_best``) and its runner-up is one that differs."""
    import experiments.report.tables as tables

    monkeypatch.setattr(tables, "examined_view", lambda m, observation: "examined" if m != "fixed-3" else None)
    for order in (list(REWARDS), list(reversed(REWARDS))):
        row = tables.best_examined_only(*frames(REWARDS, order), "auto", n_boot=200).iloc[0]
        assert row["method"] == "bor-posterior" and row["same_as_best"] == "bor-residual"
        assert row["runner_up"] == "bor-threshold"


def test_the_answer_cells_read_back_from_best_csv(tmp_path: Path) -> None:
    """best.csv as written and read back (None and "" become NaN) still gives the answer cells."""
    rewards = {m: [1.0, 1.0, 1.0, 1.0] for m in ("bor-residual", "bor-posterior")}
    rows = pd.concat([best_methods(*frames(r, list(r)), n_boot=200) for r in (rewards, REWARDS)])
    write_csv(rows, tmp_path / "best.csv")
    back = pd.read_csv(tmp_path / "best.csv")
    alone, usual = back.iloc[0], back.iloc[1]
    assert runner_up_cells(alone) == ["-", "-"] and same_as_best(alone, "") == "the same test rewards as bor-residual"
    assert runner_up_cells(usual)[0] == "bor-threshold" and same_as_best(usual, "; ").endswith("bor-residual")
    no_twin = pd.read_csv(io.StringIO(back.assign(same_as_best="").to_csv(index=False))).iloc[1]
    assert same_as_best(no_twin, "; ") == ""  # an empty cell reads back as NaN


def test_split_goal_breaks_equal_means_by_name() -> None:
    """The best BoR agent and the best peer of the split goal: equal means go to the first by name."""
    agg = pd.DataFrame([{"condition": "bfcl-bm25", "method": m, "group": g, JUDGED: 2.0}
                        for m, g in (("bor-tabular", "agent"), ("bor-dqn", "agent"), ("threshold-cov90", "peer"),
                                     ("bor-threshold", "peer"))])  # fmt: skip
    paired = pd.DataFrame([{"condition": "bfcl-bm25", "agent": a, "peer": p, "diff": 0.0, "diff_lo": -1.0,
                            "diff_hi": 1.0} for a in ("bor-tabular", "bor-dqn")
                           for p in ("threshold-cov90", "bor-threshold")])  # fmt: skip
    limits = pd.DataFrame(columns=["condition", "method", "frac_oracle"])
    for frame in (agg, agg.iloc[::-1]):
        row = split_goal(frame, paired, limits).iloc[0]
        assert row["best_agent"] == "bor-dqn" and row["best_peer"] == "bor-threshold"
