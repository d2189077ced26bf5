"""The shift report's tables made from rows written here (no runs): what moving a policy costs, and why the best
BoR policy falls below a fitted peer (:mod:`experiments.report.shift_page`,
:func:`experiments.shift.source_step_costs`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from experiments.report.shift_page import (
    miss_causes,
    miss_lines,
    transfer_costs,
    transfer_lines,
    transfer_section,
    transfer_summary,
    with_own_test,
)
from experiments.shift import source_step_costs

QIDS = [f"q{i}" for i in range(8)]


def rows(source: str, target: str, shift: str, method: str, k: list[int], reward: list[float], split: int = 0,
         seed: int = 42) -> pd.DataFrame:  # fmt: skip
    return pd.DataFrame({"condition": f"{source}@{target}", "source": source, "shift": shift, "target": target,
                         "method": method, "seed": seed, "split_seed": split, "qid": QIDS[: len(k)], "k": k,
                         "reward": reward})  # fmt: skip


def test_transfer_cost_is_the_source_trained_policy_minus_the_target_trained_one_at_the_targets_cost(
    capsys: pytest.CaptureFixture[str],
) -> None:
    k_moved, r_moved = [1, 3, 2, 5], [8.0, 0.0, 7.0, 6.0]
    k_own, r_own = [1, 1, 2, 2], [8.0, 0.0, 7.0, 7.0]
    pq = pd.concat([
        rows("a", "a", "none", "m", [1, 1, 1, 1], [1.0] * 4),
        rows("b", "b", "none", "m", k_own, r_own),
        rows("a", "b", "benchmark", "m", k_moved, r_moved),
        rows("a", "b", "benchmark", "only-moved", [1] * 4, [1.0] * 4),  # no policy of it trained on b: left out
        rows("a", "a-q", "query", "m", [1] * 4, [0.0] * 4),  # a query shift has no target-trained policy
        rows("a", "c", "scorer", "m", [1] * 4, [0.0] * 4),  # c is no source: nothing to compare with
        rows("b", "a", "scorer", "m", [2] * 4, [1.0] * 4),
    ])  # fmt: skip
    tc = transfer_costs(pq, {"a": 0.5, "b": 0.1}, n_boot=500)
    assert tc[["source", "target", "shift", "method"]].values.tolist() == [
        ["a", "b", "benchmark", "m"], ["b", "a", "scorer", "m"]]  # fmt: skip
    moved = np.array(r_moved) - 0.1 * (np.array(k_moved) - 1)  # b's cost, not a's
    own = np.array(r_own) - 0.1 * (np.array(k_own) - 1)
    r = tc.iloc[0]
    assert r["n_queries"] == 4 and (r["source_step_cost"], r["target_step_cost"]) == (0.5, 0.1)
    assert r["transferred"] == pytest.approx(moved.mean()) and r["native"] == pytest.approx(own.mean())
    assert r["diff"] == pytest.approx((moved - own).mean()) and r["diff_lo"] < r["diff"] < r["diff_hi"]
    back = tc.iloc[1]  # onto a, judged at a's cost: 1 - 0.5 against 1
    assert back["diff"] == pytest.approx(-0.5) and back["diff_lo"] == back["diff_hi"] == pytest.approx(-0.5)
    only_a = transfer_costs(pq, {"a": 0.5})  # b has no step cost: a -> b is left out
    assert only_a[["source", "target", "diff", "source_step_cost"]].values.tolist()[0][:3] == ["b", "a", -0.5]
    assert len(only_a) == 1 and np.isnan(only_a["source_step_cost"].iloc[0])
    assert transfer_costs(pq.iloc[:0], {}).empty
    capsys.readouterr()
    short = pq[~((pq["condition"] == "a@b") & (pq["qid"] == "q3"))]  # a -> b misses one of b's test queries
    assert transfer_costs(short, {"a": 0.5, "b": 0.1})["target"].tolist() == ["a"]
    assert "a -> b left out: the two sides do not hold the same test units" in capsys.readouterr().out


def test_transfer_cost_averages_seeds_per_query_and_resamples_within_each_split() -> None:
    pq = pd.concat([
        rows("b", "b", "none", "m", [1, 1], [2.0, 4.0], split=0),
        rows("b", "b", "none", "m", [1, 1], [6.0, 6.0], split=1),
        rows("a", "b", "scorer", "m", [1, 1], [0.0, 4.0], split=0, seed=1),
        rows("a", "b", "scorer", "m", [1, 1], [2.0, 4.0], split=0, seed=2),
        rows("a", "b", "scorer", "m", [1, 1], [6.0, 6.0], split=1, seed=1),
        rows("a", "b", "scorer", "m", [1, 1], [6.0, 6.0], split=1, seed=2),
    ])  # fmt: skip
    r = transfer_costs(pq, {"a": 0.0, "b": 0.0}, n_boot=200).iloc[0]
    assert r["n_queries"] == 4  # (split, query) units, the seeds averaged: q0 of split 0 gives 1 - 2
    assert r["transferred"] == pytest.approx((1 + 4 + 6 + 6) / 4) and r["diff"] == pytest.approx(-1 / 4)
    # split 0 differs by -1 on every query, split 1 by 0: a resample keeps each split's size, so every resampled
    # mean is -0.5 / 2 = -0.25 (a bootstrap that pooled the splits would spread it)
    pq = pd.concat([
        rows("b", "b", "none", "m", [1, 1], [2.0, 2.0], split=0),
        rows("b", "b", "none", "m", [1, 1], [6.0, 6.0], split=1),
        rows("a", "b", "scorer", "m", [1, 1], [1.0, 1.0], split=0),
        rows("a", "b", "scorer", "m", [1, 1], [6.0, 6.0], split=1),
    ])  # fmt: skip
    r = transfer_costs(pq, {"b": 0.0}, n_boot=200).iloc[0]
    assert r["diff"] == r["diff_lo"] == r["diff_hi"] == pytest.approx(-0.5)


def transfer_rows(diffs: dict[str, list[float]], same_cost: list[bool]) -> pd.DataFrame:
    out = []
    for method, ds in diffs.items():
        for i, (d, same) in enumerate(zip(ds, same_cost, strict=True)):
            out.append({"source": f"s{i}", "target": f"t{i}", "shift": "scorer", "method": method,
                        "transferred": 3.0 + d, "native": 3.0, "diff": d, "diff_lo": d - 0.05,
                        "diff_hi": d + 0.05, "source_step_cost": 0.01 if same else 0.005,
                        "target_step_cost": 0.01})  # fmt: skip
    return pd.DataFrame(out)


def test_transfer_summary_ranks_methods_and_leaves_the_untrained_rule_out() -> None:
    tc = transfer_rows({"m": [-0.25, 0.0], "n": [0.25, -0.5], "bor-ppo": [-0.5, -0.5], "bor-choppy": [0.5, 0.5],
                        "gap": [0.0, 0.0]}, same_cost=[True, False])  # fmt: skip
    s = transfer_summary(tc)
    assert s["method"].tolist() == ["bor-choppy", "m", "n", "bor-ppo"]  # m and n tie at -0.125: m's worst is better
    n = s.set_index("method").loc["n"]
    assert n[["pairs", "below", "above", "same_cost_pairs"]].tolist() == [2, 1, 1, 1]
    assert n["worst_cost"] == -0.5 and n["mean_cost_same_cost"] == 0.25  # the same-cost pair only
    text = transfer_lines(s, tc)[0].text
    assert "On the 2 scorer and benchmark shifts" in text and "n -0.125 (below on 1, above on 1)" in text
    assert "Largest among the BoR agents: bor-ppo (-0.500); among the fitted peers: bor-choppy (+0.500)." in text
    assert "On 1 of the pairs the source's cost per extra tool differs from the target's (s1 -> t1)" in text
    section = transfer_section(s, tc)
    assert [r[0] for r in section.blocks[1].rows] == s["method"].tolist()
    assert len(section.subsections[0].blocks[0].rows) == len(tc)
    empty = transfer_costs(pd.DataFrame(columns=["shift", "target", "source"]), {})
    assert transfer_lines(transfer_summary(empty), empty) == []
    assert "Nothing to compare" in transfer_section(transfer_summary(empty), empty).blocks[0].text


def peer_rows() -> pd.DataFrame:
    def row(source: str, target: str, shift: str, peer: str, diff: float, best: str = "bor-x") -> dict:
        return {"source": source, "target": target, "shift": shift, "best_agent": best, "peer": peer,
                "diff": diff, "diff_lo": diff - 0.03, "diff_hi": diff + 0.03, "at_least_peer": diff >= 0}  # fmt: skip

    return pd.DataFrame([
        row("a", "a", "none", "bor-threshold", -0.05, best="bor-home"),  # already behind the threshold at home
        row("a", "a", "none", "bor-choppy", 0.0, best="bor-home"),  # a tie at home counts as at least the peer
        row("a", "a-q", "query", "bor-threshold", -0.04),
        row("a", "a-q", "query", "bor-choppy", 0.01),
        row("a", "b", "scorer", "bor-threshold", -0.01),
        row("a", "b", "scorer", "bor-choppy", -0.08),  # at least it at home, behind under the shift
        row("c", "d", "benchmark", "bor-choppy", -0.02),  # c has no own row: the cause is unknown
    ])  # fmt: skip


def test_misses_are_told_apart_by_the_sources_own_test_split() -> None:
    vp = with_own_test(peer_rows())
    assert vp["own_diff"].tolist()[:6] == pytest.approx([-0.05, 0.0, -0.05, 0.0, -0.05, 0.0])
    assert (vp["own_best_agent"].iloc[:6] == "bor-home").all() and pd.isna(vp["own_diff"].iloc[6])
    missed = miss_causes(vp)
    assert list(zip(missed["target"], missed["peer"], missed["cause"], strict=True)) == [
        ("a-q", "bor-threshold", "own test"), ("b", "bor-threshold", "own test"), ("b", "bor-choppy", "shift"),
        ("d", "bor-choppy", "unknown")]  # fmt: skip
    text = miss_lines(vp)[0].text
    assert text.startswith("**Why the misses.** Of the 4 (pair, peer) comparisons")
    assert "under shift (2 significantly), 2 were below that peer on the source's own test split too" in text
    assert (
        "(point estimates; significantly there on 2, under the shift on 1): bor-threshold 2 (query 1, scorer 1)" in text
    )
    assert (
        "1 were at least the peer on the source's own test split and below it under the shift (significantly on 1)"
        in text
    )
    assert "bor-choppy 1 (scorer 1)" in text and "1 have no row on the source's own test split" in text
    assert miss_lines(with_own_test(peer_rows().iloc[:2])) == []  # nothing missed under shift
    assert with_own_test(peer_rows().iloc[:0]).columns[-1] == "own_at_least_peer"


def test_source_step_costs_leave_out_a_source_whose_runs_disagree(capsys: pytest.CaptureFixture[str]) -> None:
    def run(cost: float) -> tuple[Path, dict]:
        return Path("r"), {"episode": {"step_cost": cost}}

    groups = {("a", 0): [run(0.01), run(0.01)], ("a", 1): [run(0.01)], ("b", 0): [run(0.01), run(0.02)]}
    assert source_step_costs(groups) == {"a": 0.01}
    assert "b: its runs have different step costs ([0.01, 0.02]); left out of transfer.csv" in capsys.readouterr().out
