"""The cause table (:mod:`experiments.report.causes`) on tiny inputs: the measured differences are the paired
means of the per-unit rewards, the objective check reads each run's recorded objective, the sentence names the
cause that explains a remaining gap, and the RL goal counts the issue's pairs."""

from __future__ import annotations

import json
import zipfile
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments.report.causes import (
    cause_section,
    cause_sentence,
    cause_table,
    rl_goal,
    rl_goal_bullets,
    run_objectives,
    tabular_sentence,
)
from experiments.report.page import section_lines
from experiments.report.tables import GOAL_BASE_CONDITIONS, GOAL_TWO_SCORER_CONDITIONS
from experiments.runner import untag


def per_query(rewards: dict[str, list[float]], condition: str = "bfcl-minilm") -> pd.DataFrame:
    """One seed, one split, one row per (method, test query)."""
    rows = [
        {"condition": condition, "method": m, "seed": 42, "split_seed": 0, "qid": f"q{i}", "reward_net": r}
        for m, values in rewards.items()
        for i, r in enumerate(values)
    ]
    return pd.DataFrame(rows)


def write_run(folder: Path, method: str, observation: str = "auto", gamma: float = 1.0, cost: float = 0.01) -> Path:
    folder.mkdir(parents=True)
    objective = {"target": "net", "reward": "bor", "step_cost": cost, "gamma": gamma}
    config = {"condition": "bfcl-minilm", "method": method, "episode": {"observation": observation},
              "objective": objective}  # fmt: skip
    (folder / "config.json").write_text(json.dumps(config))
    return folder


REWARDS = {  # ten test queries
    "bor-posterior": [8.0] * 10,
    "bor-cutoff": [7.5] * 10,
    "bor-dqn": [6.0, 7.0] * 5,
    "bor-fqi@listwise": [6.0, 7.0] * 5,
    "bor-fqi": [7.0, 8.0] * 5,
    "bor-ppo": [6.0, 7.0] * 5,
    "bor-tabular": [5.0] * 10,
}


def test_differences_are_paired_means_and_the_objective_check_reads_the_configs(tmp_path: Path) -> None:
    runs = [write_run(tmp_path / m, m.partition("@")[0], m.partition("@")[2] or "auto") for m in REWARDS]
    runs.append(write_run(tmp_path / "late", "bor-ppo", gamma=0.95))  # one RL run on another objective
    objectives = run_objectives(runs)
    assert objectives.set_index("run").loc["bor-fqi@listwise", "method"] == "bor-fqi@listwise"
    t = cause_table(per_query(REWARDS), objectives, n_boot=500)
    by = t.set_index(["cause", "first", "second"])
    gap = by.loc[("gap", "bor-fqi", "bor-posterior")]  # the best RL agent and the best supervised model
    assert gap["diff"] == pytest.approx(-0.5) and gap["diff_lo"] <= -0.5 <= gap["diff_hi"] and gap["n_units"] == 10
    assert by.loc[("information", "bor-fqi@listwise", "bor-fqi"), "diff"] == pytest.approx(-1.0)
    assert by.loc[("optimisation", "bor-fqi", "bor-dqn"), "diff"] == pytest.approx(1.0)
    assert by.loc[("optimisation", "bor-fqi", "bor-dqn"), "diff_lo"] == pytest.approx(1.0)  # constant differences
    assert by.loc[("optimisation", "bor-ppo", "bor-dqn"), "diff"] == pytest.approx(0.0)
    objective = t[t["cause"] == "objective"].iloc[0]
    assert objective["diff"] == 1 and "5 of 6 RL runs" in objective["detail"] and "late" in objective["detail"]
    assert list(t["cause"]) == ["gap", "information", "optimisation", "optimisation", "objective"]  # no residual
    with_residual = cause_table(per_query({**REWARDS, "bor-residual": [8.0, 7.2] * 5}), objectives, n_boot=500)
    tuned = with_residual.set_index(["cause", "first", "second"]).loc[("fine-tuning", "bor-residual", "bor-posterior")]
    assert tuned["diff"] == pytest.approx(-0.4) and tuned["diff_lo"] <= -0.4 <= tuned["diff_hi"]
    assert list(with_residual["cause"])[-2:] == ["fine-tuning", "objective"]
    assert "best RL agent bor-residual minus best supervised model bor-posterior" in cause_sentence(with_residual)
    sentence = cause_sentence(t)
    assert sentence.startswith("A gap remains") and sentence.endswith(
        "explained by the objective: some RL runs did not train on the judged net reward."
    )
    partly = cause_sentence(t[t["cause"] != "objective"])
    assert "optimisation (bor-fqi minus bor-dqn +1.000" in partly and "explains part of it" in partly
    assert "information" not in partly  # its difference is negative
    lines = section_lines(cause_section(t))
    assert "### bfcl-minilm" in lines and sentence in lines


def test_a_cause_explains_a_gap_only_in_the_agent_that_carries_its_fix() -> None:
    """The gap is the best RL agent's: fitted Q's gain over the DQN explains part of it only when fitted Q (or
    fitted Q on another observation set) is that agent. Held by the residual DQN (which starts from the posterior)
    or by PPO, the gain is said as one below it."""

    def sentence(rewards: dict[str, list[float]]) -> str:
        return cause_sentence(cause_table(per_query(rewards), pd.DataFrame(), n_boot=500))

    residual = {**REWARDS, "bor-residual": [7.5, 7.9] * 5}  # best RL agent, significantly below the posterior
    said = sentence(residual)
    assert said.startswith("A gap remains (best RL agent bor-residual minus best supervised model bor-posterior")
    assert "held by an agent that starts from the posterior model (its fine-tuning row says" in said
    assert "explains part of it" not in said
    assert said.endswith(
        "below it, gain significantly from optimisation (bor-fqi minus bor-dqn +1.000 [+1.000, +1.000])."
    )
    alone = sentence({**residual, "bor-fqi": [6.0, 7.0] * 5})  # no gain anywhere: the committed pages' case
    assert alone.endswith("which none of the three causes, about agents that learn on their own, addresses.")
    ppo = {**REWARDS, "bor-fqi": [6.5, 7.5] * 5, "bor-ppo": [7.9, 6.3] * 5}  # PPO best, within noise of the DQN
    said = sentence(ppo)
    assert said.startswith("A gap remains (best RL agent bor-ppo minus best supervised model bor-posterior")
    assert "that none of the three measured causes explains in the best RL agent" in said
    assert said.endswith("gain significantly from optimisation (bor-fqi minus bor-dqn +0.500 [+0.500, +0.500]).")
    both = {**REWARDS, "bor-ppo": [6.5, 7.5] * 5}  # fitted Q best and carries its gain; PPO's, below it, is said too
    said = sentence(both)
    assert "; optimisation (bor-fqi minus bor-dqn +1.000 [+1.000, +1.000]) explains part of it, in the best" in said
    assert said.endswith(
        "below it, gain significantly from optimisation (bor-ppo minus bor-dqn +0.500 [+0.500, +0.500])."
    )
    listwise = {**REWARDS, "bor-fqi@listwise": [7.1, 8.1] * 5}  # carries fitted Q's fix and the listwise view
    said = sentence(listwise)
    assert said.startswith("A gap remains (best RL agent bor-fqi@listwise minus")
    assert "; information (bor-fqi@listwise minus bor-fqi +0.100 [+0.100, +0.100]) and optimisation (bor-fqi " \
           "minus bor-dqn +1.000 [+1.000, +1.000]) explain part of it" in said  # fmt: skip
    assert "below it" not in said


def test_no_gap_and_an_unexplained_gap_are_said_so() -> None:
    close = {**REWARDS, "bor-fqi": [8.0, 8.0, 7.0, 9.0] * 2 + [8.0, 8.0]}  # the best RL agent within noise
    t = cause_table(per_query(close), pd.DataFrame(), n_boot=500)
    assert cause_sentence(t).startswith("No significant gap remains (best RL agent bor-fqi")
    flat = {m: ([4.0] * 10 if m not in ("bor-posterior", "bor-cutoff") else [8.0] * 10) for m in REWARDS}
    sentence = cause_sentence(cause_table(per_query(flat), pd.DataFrame(), n_boot=500))
    assert "none of the three measured causes explains" in sentence and "+0.000" in sentence


GOAL_CONDITIONS = ("bfcl-bm25", "bfcl-minilm")


def goal_frames(
    means: Callable[[str], dict[str, float]], diffs: dict[str, float], conditions: Sequence[str] = GOAL_CONDITIONS
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(aggregate, paired) on goal ``conditions`` (two by default): each method's mean per condition
    (``means(condition)``) and each RL agent's difference from the posterior model (interval: -0.2 / +0.1 around
    it)."""
    agg = pd.DataFrame(
        [{"condition": c, "method": m, "mean_reward_net": v} for c in conditions for m, v in means(c).items()]
    )
    paired = pd.DataFrame(
        [{"condition": c, "agent": a, "peer": "bor-posterior", "diff": d, "diff_lo": d - 0.2, "diff_hi": d + 0.1}
         for c in conditions for a, d in diffs.items()]
    )  # fmt: skip
    return agg, paired


def test_rl_goal_counts_the_issues_pairs_against_the_best_supervised_model() -> None:
    agg, paired = goal_frames(
        lambda c: {"bor-posterior": 7.0, "bor-cutoff": 6.9, "bor-dqn": 6.5, "bor-tabular": 6.8, "bor-fqi": 6.95},
        {"bor-dqn": -0.5, "bor-tabular": -0.2, "bor-fqi": -0.05},
    )
    g = rl_goal(agg, paired)
    assert set(g["supervised"]) == {"bor-posterior"} and g["goal_condition"].all()
    assert g.loc[g["best_rl"], "agent"].tolist() == ["bor-fqi", "bor-fqi"] and g.loc[g["best_rl"], "within_noise"].all()
    counted = g[g["counted"]]
    assert set(counted["agent"]) == {"bor-dqn", "bor-tabular"} and counted["behind"].sum() == 4
    ((line,),) = (b.items for b in rl_goal_bullets(g))
    assert "within noise of it or ahead on 2 of 2" in line and "in 4 of 4 (condition, RL agent) pairs" in line
    assert "bor-fqi 0 of 2" in line
    # the goal's counts are stated on all 10 conditions: on 2 of them they are shown, not judged
    assert "on 2 base and 0 two-scorer conditions of its 10: not judged here" in line and "met" not in line
    assert "(goal on all 10: >= 8)" in line and "(goal on all 10: at most 2)" in line
    assert np.isnan(rl_goal(agg, paired.iloc[:0])["diff"]).all()  # no paired rows: no interval, none claimed


def test_the_rl_goal_is_judged_on_all_ten_conditions() -> None:
    every = (*GOAL_BASE_CONDITIONS, *GOAL_TWO_SCORER_CONDITIONS)
    agg, paired = goal_frames(
        lambda c: {"bor-posterior": 7.0, "bor-dqn": 6.5, "bor-tabular": 6.8, "bor-fqi": 6.95},
        {"bor-dqn": -0.5, "bor-tabular": -0.05, "bor-fqi": -0.05},
        every,
    )
    ((line,),) = (b.items for b in rl_goal_bullets(rl_goal(agg, paired)))
    assert "(goal of issue 39, on the 10 base and two-scorer conditions)" in line
    assert "ahead on 10 of 10 (goal: >= 8; met)" in line
    assert "in 10 of 20 (condition, RL agent) pairs (goal: at most 2; NOT met)" in line


def test_the_goal_says_where_the_best_rl_agent_stands_without_the_residual() -> None:
    agg, paired = goal_frames(
        lambda c: {"bor-posterior": 7.0, "bor-cutoff": 6.9, "bor-dqn": 6.5, "bor-tabular": 6.4,
                   "bor-residual": 6.99 if c == "bfcl-bm25" else 6.3},
        {"bor-dqn": -0.5, "bor-tabular": -0.6, "bor-residual": -0.01},
    )  # fmt: skip
    g = rl_goal(agg, paired)
    assert g.loc[g["best_rl"], "agent"].tolist() == ["bor-residual", "bor-dqn"]
    ((line,),) = (b.items for b in rl_goal_bullets(g))
    assert "within noise of it or ahead on 1 of 2" in line
    assert line.endswith("Without bor-residual, which starts from the posterior model, the best RL agent is within "
                         "noise of it or ahead on 0 of 2.")  # fmt: skip
    # with the runs' records: how often it kept its untrained start, summed over the goal conditions
    objectives = pd.DataFrame(
        [
            {"condition": c, "method": m, "kept_prior": kept}
            for c, m, kept in [
                ("bfcl-bm25", "bor-residual", True),
                ("bfcl-bm25", "bor-residual", False),
                ("bfcl-minilm", "bor-residual", True),
                ("bfcl-minilm", "bor-dqn", None),
                ("metatool-bm25-multi", "bor-residual", True),
            ]
        ]  # (no goal condition) # fmt: skip
    )
    g = rl_goal(agg, paired, objectives)
    counts = g.set_index(["condition", "agent"])[["runs", "kept_start"]]
    assert counts.loc[("bfcl-bm25", "bor-residual")].tolist() == [2.0, 1.0]
    assert counts.loc[("bfcl-minilm", "bor-residual")].tolist() == [1.0, 1.0]
    assert counts.loc[("bfcl-minilm", "bor-dqn")].isna().all()  # not an agent that starts from a supervised model
    ((kept,),) = (b.items for b in rl_goal_bullets(g))
    assert kept == line + " bor-residual kept that start, untrained, in 2 of its 3 runs on these conditions."


def residual_run(folder: Path, chosen_step: int, observation: str = "auto") -> Path:
    """A residual-DQN run directory: its config (``learning_starts`` 1,000) and the checkpoint record of its agent."""
    run = write_run(folder, "bor-residual", observation=observation)
    cfg = json.loads((run / "config.json").read_text())
    (run / "config.json").write_text(json.dumps({**cfg, "settings": {"learning_starts": 1000}}))
    with zipfile.ZipFile(run / "agent.zip", "w") as z:
        z.writestr("residual.json", json.dumps({"chosen_step": chosen_step}))
    return run


def test_the_fine_tuning_row_says_how_often_the_hold_out_kept_the_untrained_start(tmp_path: Path) -> None:
    # the first score (no gradient step yet), a trained checkpoint, no hold-out (the last weights)
    runs = [residual_run(tmp_path / f"res{i}", step) for i, step in enumerate((1000, 5000, -1))]
    runs.append(write_run(tmp_path / "dqn", "bor-dqn"))
    objectives = run_objectives(runs)
    assert objectives.set_index("run")["kept_prior"].to_dict() == {"res0": True, "res1": False, "res2": False,
                                                                   "dqn": None}  # fmt: skip
    rewards = per_query({**REWARDS, "bor-residual": [8.0, 7.2] * 5})
    t = cause_table(rewards, objectives, n_boot=500)
    row = t[t["cause"] == "fine-tuning"].iloc[0]
    assert row["detail"] == "kept its untrained start in 1 of 3 runs"
    assert any("(kept its untrained start in 1 of 3 runs)" in line for line in section_lines(cause_section(t)))
    # a comparison on a named set: its runs are labelled @strict, its tables carry plain names (runner.untag)
    strict = [residual_run(tmp_path / f"strict{i}", step, "strict") for i, step in enumerate((1000, 3000))]
    t = cause_table(rewards, untag(run_objectives(strict), "strict"), n_boot=500)
    assert t[t["cause"] == "fine-tuning"].iloc[0]["detail"] == "kept its untrained start in 1 of 2 runs"
    broken = write_run(tmp_path / "broken", "bor-residual")
    with pytest.raises(ValueError, match="broken/agent.zip: no checkpoint record in the saved residual DQN"):
        run_objectives([broken])


def test_tabular_qs_state_and_its_learning_are_measured_apart() -> None:
    """bor-dp (the DP optimum of tabular Q's state on train) minus the best supervised model, and tabular Q minus
    bor-dp: the sentence names which one keeps tabular Q behind."""
    capped = {**REWARDS, "bor-dp": [5.0, 6.0] * 5}  # the state's best rule is itself 2.5 behind; tabular Q 0.5 below it
    t = cause_table(per_query(capped), pd.DataFrame(), n_boot=500)
    assert list(t["cause"])[-2:] == ["tabular state", "tabular learning"]
    by = t.set_index(["cause", "first", "second"])
    state = by.loc[("tabular state", "bor-dp", "bor-posterior")]  # against the best supervised model
    assert state["diff"] == pytest.approx(-2.5) and state["diff_hi"] < 0
    assert state["detail"] == "the DP optimum of tabular Q's state on the training queries"
    assert by.loc[("tabular learning", "bor-tabular", "bor-dp"), "diff"] == pytest.approx(-0.5)
    sentence = tabular_sentence(t)
    assert sentence.startswith("Tabular Q's state keeps it behind (bor-dp (the DP optimum of bor-tabular's "
                               "discretised state on the training queries) minus bor-posterior: -2.500")  # fmt: skip
    assert sentence.endswith("and tabular Q is also significantly below that rule.")
    assert cause_sentence(t) == cause_sentence(t[~t["cause"].str.startswith("tabular")])  # (the RL gap's own)
    lines = section_lines(cause_section(t))
    assert sentence in lines and any(
        line.startswith("| tabular state | bor-dp minus bor-posterior |") for line in lines
    )
    # the state's rule as good as the supervised model, tabular Q below it: the learning
    t = cause_table(per_query({**REWARDS, "bor-dp": [8.0, 8.0, 7.0, 9.0] * 2 + [8.0, 8.0]}), pd.DataFrame(), n_boot=500)
    assert tabular_sentence(t).startswith("Tabular Q's learning keeps it below what its state allows")
    t = cause_table(per_query({**REWARDS, "bor-tabular": [8.0] * 10, "bor-dp": [8.0] * 10}), pd.DataFrame(), n_boot=500)
    assert tabular_sentence(t).startswith("Neither its state nor its learning is significantly short here")
    assert tabular_sentence(cause_table(per_query(REWARDS), pd.DataFrame(), n_boot=500)) == ""  # no bor-dp ran


def test_the_goal_says_on_how_many_conditions_tabular_qs_state_caps_it() -> None:
    agg, paired = goal_frames(
        lambda c: {"bor-posterior": 7.0, "bor-dqn": 6.5, "bor-tabular": 6.4},
        {"bor-dqn": -0.5, "bor-tabular": -0.6},
    )
    frames = [per_query({**REWARDS, "bor-dp": [5.0, 6.0] * 5}, "bfcl-bm25"),
              per_query({**REWARDS, "bor-dp": [8.0, 8.0, 7.0, 9.0] * 2 + [8.0, 8.0]}, "bfcl-minilm"),
              per_query({**REWARDS, "bor-dp": [1.0] * 10}, "metatool-bm25-multi")]  # (no goal condition) # fmt: skip
    causes = cause_table(pd.concat(frames), pd.DataFrame(), n_boot=500)
    ((line,),) = (b.items for b in rl_goal_bullets(rl_goal(agg, paired), causes))
    assert line.endswith("The best rule on bor-tabular's own discretised state (bor-dp, exact dynamic programming on "
                         "the training queries) is itself significantly behind the best supervised model on 1 of 2: "
                         "on those, better learning on that state would not close the gap, in the model estimated "
                         "from the training queries (the cause table).")  # fmt: skip
    ((without,),) = (b.items for b in rl_goal_bullets(rl_goal(agg, paired)))
    assert line.startswith(without) and "discretised" not in without
