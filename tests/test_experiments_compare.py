"""``shortlist compare`` end to end on BFCL BM25 with tiny budgets: outputs, seeds per
method, the Pareto CSV is exactly the plotted numbers, limits, resume, and the argparse
wiring built from the dataclasses."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import TINY_BUDGETS

from agents.method import MethodSpec, method_group
from experiments.cli import add_dataclass_args, build
from experiments.compare import cmd_compare
from experiments.figures import pareto_front
from experiments.options import CommonArgs, CompareArgs, LearnArgs
from experiments.plan import BOR_AGENTS, INFORMATION_LABEL, RL_AGENTS, compare_cells, compare_methods, resolve_plans
from experiments.report.page import Section, section_lines
from experiments.report.peers_page import examined_lines
from experiments.report.tables import best_examined_only, limits_table

TINY = {
    "seeds": (1, 2),
    "split_seeds": (0,),
    "set": (
        *TINY_BUDGETS,
        "dqn.total_timesteps=400",
        "dqn.learning_starts=100",
        "tabular.episodes=200",
        "cutoff.epochs=10",
        "choppy.epochs=10",
        "fqi.gradient_steps=100",
    ),
    "max_depth": 20,
}


@pytest.fixture(scope="module")
def result(tmp_path_factory: pytest.TempPathFactory, shared_cache: Path) -> tuple[Path, str]:
    out = tmp_path_factory.mktemp("peers")
    cache = str(shared_cache)
    rc = cmd_compare(
        CompareArgs(only=("bfcl-bm25",), out=str(out), runs_dir=str(out / "runs")),
        LearnArgs(**TINY),
        CommonArgs(cache_dir=cache, no_progress=True),
        "shortlist compare (test)",
    )
    assert rc == 0
    return out, cache


def test_writes_every_output(result: tuple[Path, str]) -> None:
    out, _ = result
    manifest = json.loads((out / "manifest.json").read_text())  # made from nothing: every cell ran here
    assert manifest["cells_run"] == len(manifest["runs"]) == 42
    assert manifest["runs_reused"] == [] and manifest["runs_folder"] == "runs"
    for f in (
        "README.md",
        "manifest.json",
        "aggregate.csv",
        "buckets_aggregate.csv",
        "limits.csv",
        "dp.csv",
        "goals.csv",
        "paired.csv",
        "split_goal.csv",
        "best.csv",
        "rl_goal.csv",
        "causes.csv",
        "per_query.csv",
        "summary.csv",
        "buckets.csv",
        "figures/pareto_bfcl-bm25.png",
        "figures/pareto_bfcl-bm25.csv",
        "figures/buckets_bfcl-bm25.png",
        "figures/buckets_bfcl-bm25.csv",
    ):
        assert (out / f).is_file(), f
    for run in (out / "runs").iterdir():
        for f in ("config.json", "command.txt", "manifest.json", "per_query.csv"):
            assert (run / f).is_file(), (run, f)
    readme = (out / "README.md").read_text()
    agg = pd.read_csv(out / "aggregate.csv")
    for m in agg["method"]:
        assert f"| {m} |" in readme, m
    for text in ("## Per agent", "## bfcl-bm25", "Goal check", "Gap to the limits", "Pareto front", "## Wall time",
                 "## Why RL trails the supervised models", "RL against the best supervised model"):  # fmt: skip
        assert text in readme
    # the first screen answers: the method to use, then the verdicts, before how the numbers were made
    assert readme.index("**Answer.**") < readme.index("## How these numbers were made")
    best = pd.read_csv(out / "best.csv")
    assert best["best"].iloc[0] in readme.split("## How these numbers were made")[0]
    assert json.loads((out / "manifest.json").read_text())["conditions"] == ["bfcl-bm25"]


def test_seeds_per_method(result: tuple[Path, str]) -> None:
    out, _ = result
    summary = pd.read_csv(out / "summary.csv")
    seeds = summary.groupby("method")["seed"].apply(lambda s: sorted(s.tolist()))
    expected = {m.name for m in compare_methods()} | {INFORMATION_LABEL}  # the listwise probe runs beside
    assert set(seeds.index) == expected
    for m, s in seeds.items():
        assert s == ([1, 2] if MethodSpec.parse(m).kind.stochastic else [1]), m
    assert {"bor-dqn", "bor-tabular", "bor-cutoff", "f1-dqn", "bor-choppy", "random", "bor-fqi", "bor-ppo",
            "bor-residual", "bor-pfound", INFORMATION_LABEL} == {
        m for m in seeds.index if len(seeds[m]) == 2
    }  # fmt: skip


def test_pareto_csv_is_the_plotted_numbers(result: tuple[Path, str]) -> None:
    out, _ = result
    plotted = pd.read_csv(out / "figures" / "pareto_bfcl-bm25.csv")
    plotted = plotted[plotted["kind"] != "iso_bor"]
    agg = pd.read_csv(out / "aggregate.csv").set_index("method")
    assert set(plotted["method"]) == set(agg.index)
    for _, r in plotted.iterrows():
        assert r["found_pct"] == pytest.approx(agg.loc[r["method"], "found_pct"])
        assert r["mean_k"] == pytest.approx(agg.loc[r["method"], "mean_k"])
        assert r["kind"] == MethodSpec.parse(r["method"]).group  # the registry group
    real = plotted[~plotted["method"].isin(["oracle", "threshold-insample", "greedyk-insample"])]
    np.testing.assert_array_equal(real["pareto"].to_numpy(), pareto_front(real["found_pct"], real["mean_k"]))
    assert not plotted.loc[plotted["method"] == "oracle", "pareto"].item()


def test_oracle_and_limits(result: tuple[Path, str]) -> None:
    out, _ = result
    pq = pd.read_csv(out / "per_query.csv", dtype={"qid": str})
    oracle = pq[pq["method"] == "oracle"].set_index("qid")["reward_net"]  # the ceiling of the judged net reward
    for (_, _), g in pq.groupby(["method", "seed"]):
        r = g.set_index("qid")["reward_net"]
        assert np.all(oracle.loc[r.index].to_numpy() >= r.to_numpy() - 1e-9)
    limits = pd.read_csv(out / "limits.csv").set_index("method")
    assert limits.loc["bor-dp", "frac_dp"] == pytest.approx(1.0)
    assert limits.loc["oracle", "frac_oracle"] == pytest.approx(1.0)
    assert (limits["frac_oracle"] <= 1.0 + 1e-12).all()
    goals = pd.read_csv(out / "goals.csv")
    agents = set(BOR_AGENTS)
    assert len(goals) == 3 * len(agents) and set(goals["agent"]) == agents
    dp = pd.read_csv(out / "dp.csv")
    assert set(dp["method"]) == {"bor-dp"}  # with gamma 1 the RL return is the net reward: one DP objective
    assert "solve_seconds" not in dp.columns  # timings live in manifests, tables stay byte-reproducible


def test_paired_differences_match_per_query_means(result: tuple[Path, str]) -> None:
    out, _ = result
    pq = pd.read_csv(out / "per_query.csv", dtype={"qid": str})
    paired = pd.read_csv(out / "paired.csv")
    assert set(paired["agent"]) == set(BOR_AGENTS)
    # each RL agent is also paired with the supervised models; those only with the peers
    for sup in ("bor-cutoff", "bor-posterior"):
        assert set(paired.loc[paired["peer"] == sup, "agent"]) == set(RL_AGENTS)
    for _, r in paired.iterrows():  # differences of the judged net reward
        a = pq[pq["method"] == r["agent"]].groupby("qid")["reward_net"].mean()
        b = pq[pq["method"] == r["peer"]].groupby("qid")["reward_net"].mean()
        assert r["diff"] == pytest.approx(float((a - b.loc[a.index]).mean()))
        assert r["diff_lo"] <= r["diff"] <= r["diff_hi"]
        assert r["n_queries"] == 120


def test_rerun_resumes_every_cell(result: tuple[Path, str]) -> None:
    out, cache = result
    stamps = {p.name: (p / "manifest.json").stat().st_mtime_ns for p in (out / "runs").iterdir()}
    before = json.loads((out / "manifest.json").read_text())
    assert (
        cmd_compare(
            CompareArgs(only=("bfcl-bm25",), out=str(out), runs_dir=str(out / "runs")),
            LearnArgs(**TINY),
            CommonArgs(cache_dir=cache, no_progress=True),
            "again",
        )
        == 0
    )
    assert stamps == {p.name: (p / "manifest.json").stat().st_mtime_ns for p in (out / "runs").iterdir()}
    manifest = json.loads((out / "manifest.json").read_text())  # nothing ran: its time is not a from-nothing time
    assert manifest["cells_run"] == 0 and len(manifest["runs"]) == 42
    assert manifest["runs_reused"] == sorted(manifest["runs"])  # which ones, so bench can tell who made them
    made = manifest["produced_by"]  # the same runs at the same code: the invocation that ran them is carried
    assert made["cells_run"] == before["cells_run"] == 42 and made["command"] == before["command"]
    assert made["timings_seconds"] == before["timings_seconds"] and made["finished_utc"] == before["finished_utc"]


def test_argparse_wiring_and_dry_run(capsys: pytest.CaptureFixture[str]) -> None:
    """The flags proposed for ``shortlist compare``: CompareArgs + LearnArgs + CommonArgs."""
    parser = argparse.ArgumentParser()
    for cls in (CompareArgs, LearnArgs, CommonArgs):
        add_dataclass_args(parser, cls)
    ns = parser.parse_args(["--only", "bfcl-bm25", "bfcl-minilm", "--seeds", "1", "2", "3", "--dry-run"])
    ca, la, co = build(CompareArgs, ns), build(LearnArgs, ns), build(CommonArgs, ns)
    assert ca.out == "results/peers"
    assert cmd_compare(ca, la, co, "dry") == 0
    lines = [line.split("\t")[0] for line in capsys.readouterr().out.strip().splitlines()]
    # per condition and split (5 by default on main conditions): 11 stochastic methods x 3 seeds (with fitted
    # Q, PPO, the residual DQN and the listwise probe) + 20 deterministic methods x 1 seed
    assert lines[-1] == f"{2 * 5 * (11 * 3 + 20)} cells"
    assert "bfcl-bm25__bor-fqi@listwise__s2__split1" in lines
    assert "bfcl-minilm__bor-dp__s1" in lines and "bfcl-minilm__bor-dp__s2" not in lines
    assert "bfcl-bm25__bor-choppy__s3" in lines and "bfcl-bm25__bor-choppy__s3__split4" in lines
    ns = parser.parse_args(["--only", "bfcl-bm25", "--seeds", "1", "--split-seeds", "7", "--dry-run"])
    assert cmd_compare(build(CompareArgs, ns), build(LearnArgs, ns), build(CommonArgs, ns), "dry") == 0
    printed = capsys.readouterr().out.strip().splitlines()
    lines = [line.split("\t")[0] for line in printed]
    assert lines[-1] == f"{11 + 20} cells" and all(line.endswith("__split7") for line in lines[:-1])
    assert all("\tshortlist train " in line and " --split-seeds 7 " in line for line in printed[:-1])


def test_unknown_condition_and_no_seeds() -> None:
    with pytest.raises(ValueError, match="unknown condition"):
        resolve_plans(["bfcl-nope"])
    with pytest.raises(ValueError, match="seed"):
        compare_cells(resolve_plans(["bfcl-bm25"]), [])


def test_pareto_front_and_limits_by_hand() -> None:
    found = np.array([80.0, 90.0, 85.0, 90.0, 70.0])
    k = np.array([1.0, 2.0, 3.0, 2.0, 1.0])
    # (85, 3) is dominated by (90, 2); (70, 1) by (80, 1); the two (90, 2) tie and both stay
    np.testing.assert_array_equal(pareto_front(found, k), [True, True, False, True, False])
    # two test queries; bor-dqn ran on two seeds (per query its reward is the mean over seeds)
    per_query = pd.DataFrame(
        {
            "condition": "c",
            "method": ["bor-dp"] * 2 + ["oracle"] * 2 + ["bor-dqn"] * 4,
            "seed": [1, 1, 1, 1, 1, 1, 2, 2],
            "qid": ["a", "b"] * 4,
            "reward_net": [4.0, 8.0, 6.0, 10.0, 2.0, 8.8, 4.0, 6.8],
        }
    )
    lim = limits_table(per_query, n_boot=4000).set_index("method")
    # bor-dqn per query: a 3.0, b 7.8 -> mean 5.4; bor-dp mean 6.0; oracle mean 8.0
    assert lim.loc["bor-dqn", "frac_dp"] == pytest.approx(5.4 / 6.0)
    assert lim.loc["bor-dqn", "frac_oracle"] == pytest.approx(5.4 / 8.0)
    assert lim.loc["bor-dqn", "n_seeds"] == 2
    # paired resamples: both queries a (3/4), both b (7.8/8), or one of each (5.4/6)
    assert lim.loc["bor-dqn", "frac_dp_lo"] == pytest.approx(3.0 / 4.0)
    assert lim.loc["bor-dqn", "frac_dp_hi"] == pytest.approx(7.8 / 8.0)
    assert lim.loc["bor-dp", "frac_dp"] == pytest.approx(1.0)


def test_split_goal_picks_the_best_bor_agent_and_checks_it(result: tuple[Path, str]) -> None:
    out, _ = result
    sg = pd.read_csv(out / "split_goal.csv")
    agg = pd.read_csv(out / "aggregate.csv").set_index("method")
    assert len(sg) == 1
    r = sg.iloc[0]
    agents = [m for m in BOR_AGENTS if m in agg.index]
    assert r["best_agent"] == max(agents, key=lambda m: agg.loc[m, "mean_reward_net"])
    peers = agg[agg["group"] == "peer"]
    assert r["best_peer"] == peers["mean_reward_net"].idxmax()
    assert bool(r["at_least_every_peer"]) == bool(
        (peers["mean_reward_net"] <= agg.loc[r["best_agent"], "mean_reward_net"]).all()
    )
    assert bool(r["ahead"]) == bool(r["diff_lo"] > 0) and bool(r["behind"]) == bool(r["diff_hi"] < 0)
    assert r["base"] and not r["second_scorer"] and not r["two_scorer_goal"]
    readme = (out / "README.md").read_text()
    assert "## Goal over repeated splits" in readme and "never significantly behind" in readme


def test_split_goal_oracle_part_only_with_a_second_scorer() -> None:
    from experiments.report.tables import split_goal

    agg = pd.DataFrame(
        [
            {"condition": c, "method": m, "group": g, "mean_reward_net": v, "n_splits": 5}
            for c in ("bfcl-bm25", "bfcl-bm25-hybrid")
            for m, g, v in (("bor-dqn", "agent", 6.0), ("bor-cutoff", "agent", 6.5), ("gap", "peer", 6.2))
        ]
    )
    paired = pd.DataFrame(
        [
            {"condition": c, "agent": "bor-cutoff", "peer": "gap", "diff": 0.3, "diff_lo": lo, "diff_hi": 0.5}
            for c, lo in (("bfcl-bm25", 0.1), ("bfcl-bm25-hybrid", -0.1))
        ]
    )
    limits = pd.DataFrame(
        [
            {"condition": c, "method": "bor-cutoff", "frac_oracle": f}
            for c, f in (("bfcl-bm25", 0.8), ("bfcl-bm25-hybrid", 0.85))
        ]
    )
    sg = split_goal(agg, paired, limits).set_index("condition")
    assert (sg["best_agent"] == "bor-cutoff").all() and sg["at_least_every_peer"].all()
    assert sg.loc["bfcl-bm25", "ahead"] and not sg.loc["bfcl-bm25-hybrid", "ahead"]
    assert sg.loc["bfcl-bm25-hybrid", "two_scorer_goal"] and not sg.loc["bfcl-bm25", "two_scorer_goal"]
    ofm = sg.loc["bfcl-bm25", "oracle_fraction_met"]
    assert ofm is None or pd.isna(ofm)
    assert sg.loc["bfcl-bm25-hybrid", "oracle_fraction_met"] == False  # noqa: E712 (0.85 < 0.9)


def test_two_scorer_suite_leaves_out_the_f1_ablation() -> None:
    main = {c.method.name for c in compare_cells(resolve_plans(["bfcl-bm25"]), [42])}
    hybrid = {c.method.name for c in compare_cells(resolve_plans(["bfcl-bm25-hybrid"]), [42])}
    assert "f1-dqn" in main and "f1-dqn" not in hybrid
    assert main - {"f1-dqn"} == hybrid


@pytest.fixture(scope="module")
def strict(result: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``shortlist compare --observation strict`` into its own folder, over the default comparison's runs."""
    out, cache = result
    strict_out = tmp_path_factory.mktemp("strict")
    rc = cmd_compare(
        CompareArgs(only=("bfcl-bm25",), out=str(strict_out), runs_dir=str(out / "runs")),
        LearnArgs(**TINY, observation="strict"),
        CommonArgs(cache_dir=cache, no_progress=True),
        "shortlist compare --observation strict (test)",
    )
    assert rc == 0
    return strict_out


#: The RL agents of the comparison that decide from the examined items only on the strict set.
RL_ON_STRICT = ("bor-dqn", "bor-fqi", "bor-ppo", "bor-tabular")


def test_compare_on_a_named_observation_set_end_to_end(result: tuple[Path, str], strict: Path) -> None:
    out, _ = result
    index = pd.read_csv(strict / "runs.csv")
    runs = set(index["run_id"])
    # the learners ran on the strict set, in their own run directories ...
    for learner in ("bor-dqn", "bor-tabular", "bor-cutoff", "bor-choppy", "bor-dp"):
        tagged = {r for r in runs if r.startswith(f"bfcl-bm25__{learner}@strict__")}
        assert tagged, learner
        for r in tagged:
            assert json.loads((out / "runs" / r / "config.json").read_text())["episode"]["observation"] == "strict"
    # ... while the rules on raw scores are the default comparison's cells, reused untagged
    default = set(pd.read_csv(out / "runs.csv")["run_id"])
    rules = {r for r in runs if "@" not in r}
    assert {"bfcl-bm25__gap__s1", "bfcl-bm25__fixed-3__s1", "bfcl-bm25__oracle__s1"} <= rules <= default
    # every table names the learners plainly, so the report's lookups find them
    for table in ("per_query.csv", "summary.csv", "aggregate.csv", "paired.csv", "split_goal.csv", "limits.csv"):
        assert "@" not in (strict / table).read_text(), table
    paired = pd.read_csv(strict / "paired.csv")
    assert {"bor-dqn", "bor-tabular"} <= set(paired.loc[paired["peer"] == "bor-cutoff", "agent"])
    assert set(pd.read_csv(strict / "split_goal.csv")["condition"]) == {"bfcl-bm25"}
    readme = (strict / "README.md").read_text()
    assert "Observation set: `strict`" in readme and "**RL against bor-cutoff:**" in readme
    assert json.loads((strict / "manifest.json").read_text())["observation"] == "strict"
    # the first screen answers with the methods that read the examined items only, then every method
    examined = pd.read_csv(strict / "examined.csv")
    agg = pd.read_csv(strict / "aggregate.csv").set_index("method")
    (row,) = examined.to_dict("records")
    assert row["method"] in {
        "bor-dqn",
        "bor-fqi",
        "bor-ppo",
        "bor-tabular",
        "bor-pfound",
        "bor-greedyk",
        "greedyk-bits",
        "random",
    } | {f"fixed-{k}" for k in (1, 3, 5, 10, 20, 50)}
    assert row["best"] == pd.read_csv(strict / "best.csv")["best"].iloc[0]
    assert row["diff"] == pytest.approx(
        agg.loc[row["method"], "mean_reward_net"] - agg.loc[row["best"], "mean_reward_net"]
    )
    runner = agg.loc[row["runner_up"]]  # the examined-only runner-up: below the answer, and examined-only too
    assert row["runner_up"] in {"bor-dqn", "bor-fqi", "bor-ppo", "bor-tabular", "bor-pfound", "bor-greedyk"} | {
        "greedyk-bits",
        "random",
        *(f"fixed-{k}" for k in (1, 3, 5, 10, 20, 50)),
    }
    assert row["runner_up_diff"] == pytest.approx(agg.loc[row["method"], "mean_reward_net"] - runner["mean_reward_net"])
    # RL beside supervised learning, both examined-only: the P(found) stop is the one examined-only supervised model
    assert row["supervised"] == "bor-pfound" and row["rl"] in {"bor-dqn", "bor-fqi", "bor-ppo", "bor-tabular"}
    assert agg.loc[row["rl"], "mean_reward_net"] == max(agg.loc[m, "mean_reward_net"] for m in RL_ON_STRICT)
    assert row["rl_vs_supervised_diff"] == pytest.approx(
        agg.loc[row["rl"], "mean_reward_net"] - agg.loc["bor-pfound", "mean_reward_net"]
    )
    behind = set(row["rl_behind"].split(";")) if isinstance(row["rl_behind"], str) else set()
    assert behind <= set(RL_ON_STRICT)
    assert (row["rl_vs_supervised_diff_hi"] < 0) == (row["rl"] in behind)
    answer = readme.split("<!-- /answer -->")[0]
    agents = "the RL agents `bor-dqn`, `bor-fqi`, `bor-ppo`, `bor-tabular` against the supervised `bor-pfound`"
    assert f"RL against supervised learning, both examined-only ({agents};" in answer
    assert f"ahead on {int(row['rl_vs_supervised_diff_hi'] >= 0)} of 1 conditions" in answer
    assert answer.index("(`examined.csv`)") < answer.index("**Every method.**")
    assert "read scores beyond the depth they show, whatever the set: `bor-cutoff`, `bor-posterior`" in answer
    assert not (out / "examined.csv").exists() and "**Every method.**" not in (out / "README.md").read_text()
    # the strict cut-off read the 12 strict features, the default one the 13 score features
    width = {
        name: json.loads((out / "runs" / f"bfcl-bm25__{name}__s1" / "agent.json").read_text())["params"]["n_features"]
        for name in ("bor-cutoff@strict", "bor-cutoff")
    }
    assert width == {"bor-cutoff@strict": 12, "bor-cutoff": 13}


def test_a_failing_report_leaves_the_folder_as_it_was(
    result: tuple[Path, str], strict: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, cache = result
    before = {p.relative_to(strict): p.read_bytes() for p in strict.rglob("*") if p.is_file()}

    def broken(folder: Path, *args: object, **kwargs: object) -> None:
        (folder / "aggregate.csv").write_text("half written\n")
        raise KeyError("peer")

    monkeypatch.setattr("experiments.compare.write_compare_report", broken)
    with pytest.raises(KeyError):
        cmd_compare(
            CompareArgs(only=("bfcl-bm25",), out=str(strict), runs_dir=str(out / "runs")),
            LearnArgs(**TINY, observation="strict"),
            CommonArgs(cache_dir=cache, no_progress=True),
            "shortlist compare (failing report)",
        )
    after = {p.relative_to(strict): p.read_bytes() for p in strict.rglob("*") if p.is_file()}
    assert after == before
    assert not [p for p in strict.parent.iterdir() if p.name.startswith(".strict.")]


def test_untag_refuses_another_observation_set() -> None:
    from experiments.runner import untag

    frame = pd.DataFrame({"method": ["bor-dqn@strict", "gap", "bor-cutoff@strict"]})
    assert untag(frame, "strict")["method"].tolist() == ["bor-dqn", "gap", "bor-cutoff"]
    assert untag(frame, "auto").equals(frame)
    with pytest.raises(ValueError, match="bor-dqn@hybrid"):
        untag(pd.DataFrame({"method": ["bor-dqn@hybrid"]}), "strict")


def test_staged_moves_files_in_and_removes_what_a_killed_writer_left(tmp_path: Path) -> None:
    """``staged_folder(merge=True)``: files land in ``out`` only at the end, files of an owned subfolder the invocation
    did not write are removed (others kept); a staging folder whose writer is gone (a SIGKILL
    during a report) is removed by the next invocation, a live writer's is kept."""
    import os
    import subprocess
    import sys

    from experiments.io import staged_folder

    out = tmp_path / "peers"
    out.mkdir()
    (out / "keep.csv").write_text("old\n")
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = tmp_path / f".peers.{int(dead.stdout)}.abc"
    live = tmp_path / f".peers.{os.getppid()}.abc"
    other = tmp_path / f".shift.{int(dead.stdout)}.abc"  # another folder's: not ours to remove
    for folder in (gone, live, other):
        folder.mkdir()
    (out / "figures").mkdir()
    (out / "figures" / "gone.png").write_text("old\n")  # plotted by an earlier, wider run
    with staged_folder(out, merge=True, owned=("figures",)) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(f".peers.{os.getpid()}.")
        (tmp / "figures").mkdir()
        (tmp / "figures" / "a.csv").write_text("new\n")
        assert not (out / "figures" / "a.csv").exists() and (out / "figures" / "gone.png").exists()
    assert (out / "figures" / "a.csv").read_text() == "new\n" and (out / "keep.csv").read_text() == "old\n"
    assert not (out / "figures" / "gone.png").exists()  # the owned folder holds this invocation's files only
    assert not gone.exists() and live.is_dir() and other.is_dir()
    assert not tmp.exists()


def test_a_sub_report_refreshes_the_enclosing_index(tmp_path: Path) -> None:
    """``compare`` / ``shift`` into ``results/<folder>`` rebuild the site of ``results/`` (the folder's page
    ``peers.html``, and the study's overview when ``results/`` is a study), and create none where the parent
    has no site."""
    from experiments.html import write_index
    from experiments.pipeline import refresh_index

    results = tmp_path / "results"
    (results / "peers").mkdir(parents=True)
    (results / "README.md").write_text("# Study\n")
    (results / "peers" / "README.md").write_text("# Peers\n\nold numbers\n")
    write_index(results)
    (results / "peers" / "README.md").write_text("# Peers\n\nnew numbers\n")
    refresh_index(results / "peers")
    page = (results / "peers.html").read_text(encoding="utf-8")
    assert "new numbers" in page and "old numbers" not in page
    assert 'href="peers.html"' in (results / "index.html").read_text(encoding="utf-8")  # the navigation
    (results / "manifest.json").write_text('{"pipeline": "reproduce", "command": "shortlist reproduce"}')
    (results / "peers" / "best.csv").write_text(
        "condition,best,group,mean_reward_net,mean_reward_net_lo,mean_reward_net_hi,found_pct,mean_k,median_k,"
        "p90_k,whole_list_pct,runner_up,runner_up_mean_reward_net,diff,diff_lo,diff_hi\n"
        "bfcl-bm25,bor-posterior,agent,6.5,6.3,6.7,88,2.1,1,5,0,bor-threshold,6.4,0.1,-0.05,0.2\n"
    )
    refresh_index(results / "peers")  # a study folder: its overview answers from the new table
    overview = (results / "README.md").read_text(encoding="utf-8")
    assert overview.startswith('<!-- page {"group": "study", "title": "Answer"} -->\n# Answer\n')
    assert "**bor-posterior**" in overview and "[Peers](peers/README.md)" in overview
    lone = tmp_path / "elsewhere" / "peers"
    lone.mkdir(parents=True)
    refresh_index(lone)
    assert not (lone.parent / "index.html").exists()


def test_an_overview_over_a_part_from_an_older_version_says_so(tmp_path: Path) -> None:
    """A study folder whose peers/ tables predate the goal columns (an older ``shortlist compare``) gets an
    overview that names that part as older and asks for a rerun, instead of failing the study command."""
    from experiments.report.overview import write_overview

    (tmp_path / "peers").mkdir()
    pd.DataFrame({"condition": ["bfcl-bm25"], "ahead": [True]}).to_csv(tmp_path / "peers" / "split_goal.csv")
    pd.DataFrame({"condition": ["bfcl-bm25"], "method": ["bor-dqn"]}).to_csv(tmp_path / "peers" / "best.csv")
    text = write_overview(tmp_path).read_text(encoding="utf-8")
    assert "`peers/` was written by an older version of the package" in text and "rerun `shortlist compare`" in text
    assert "No method table yet" in text


def test_site_rebuilds_a_study_overview_and_leaves_other_readmes(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    """``shortlist site``: a study folder gets its overview and index.html; a folder reproduce did not write keeps
    its README and gets its index.html; a missing folder is a one-line error."""
    from experiments.cli import main

    study = tmp_path / "results"
    study.mkdir()
    (study / "manifest.json").write_text(json.dumps({"pipeline": "reproduce", "command": "shortlist reproduce"}))
    assert main(["site", "--out", str(study)]) == 0
    assert (study / "README.md").read_text(encoding="utf-8").startswith("<!-- page ")
    assert (study / "index.html").is_file()
    other = tmp_path / "mine"
    other.mkdir()
    (other / "README.md").write_text("# Mine\n")
    assert main(["site", "--out", str(other)]) == 0
    assert (other / "README.md").read_text() == "# Mine\n" and (other / "index.html").is_file()
    assert main(["site", "--out", str(tmp_path / "missing")]) == 2
    assert "no such results folder" in capsys.readouterr().err


def test_the_examined_only_answer_with_one_such_method_and_with_none() -> None:
    rows = [{"condition": "bfcl-bm25", "method": m, "seed": 1, "split_seed": 0, "qid": f"q{i}", "reward_net": v + i % 2}
            for m, v in (("bor-posterior", 7.0), ("fixed-3", 6.0), ("gap", 6.5)) for i in range(20)]  # fmt: skip
    per_query = pd.DataFrame(rows)
    agg = per_query.groupby(["condition", "method"], as_index=False)["reward_net"].mean()
    agg = agg.rename(columns={"reward_net": "mean_reward_net"})
    agg["group"] = agg["method"].map(method_group)
    for col in (
        "mean_reward_net_lo",
        "mean_reward_net_hi",
        "found_pct",
        "mean_k",
        "median_k",
        "p90_k",
        "whole_list_pct",
    ):
        agg[col] = 0.0
    (row,) = best_examined_only(per_query, agg, "strict", n_boot=200).to_dict("records")
    assert (row["method"], row["best"], row["runner_up"]) == ("fixed-3", "bor-posterior", None)
    assert row["diff"] == pytest.approx(-1.0) and np.isnan(row["runner_up_diff"])
    page = "\n".join(section_lines(Section("", examined_lines(pd.DataFrame([row]), agg, "strict"))))
    assert "| **fixed-3** (baseline) |" in page and "| - | - | bor-posterior | -1.000 [-1.000, -1.000] |" in page
    assert (
        "ahead of the examined-only runner-up on 0 of 1" in page and "behind the best of every method on 1 of 1" in page
    )
    assert row["rl"] is None and row["supervised"] is None and np.isnan(row["rl_vs_supervised_diff"])
    assert "RL against supervised learning" not in page  # neither side is examined-only here
    others = per_query["method"] != "fixed-3"
    assert best_examined_only(per_query[others], agg[agg["method"] != "fixed-3"], "strict").empty
    none = examined_lines(pd.DataFrame(), agg, "strict")
    assert "No method of this comparison" in "\n".join(section_lines(Section("", none)))


def test_the_examined_only_answer_sets_rl_beside_the_examined_only_supervised_model() -> None:
    """The posterior model reads the whole list, so the supervised side is the P(found) stop alone; DQN is ahead of
    it, tabular Q behind (the per-query differences are constant, so each interval is a point)."""
    values = (("bor-posterior", 7.0), ("bor-pfound", 6.5), ("bor-dqn", 6.6), ("bor-tabular", 6.0), ("fixed-3", 5.0))
    rows = [{"condition": "bfcl-bm25", "method": m, "seed": 1, "split_seed": 0, "qid": f"q{i}", "reward_net": v + i % 2}
            for m, v in values for i in range(20)]  # fmt: skip
    per_query = pd.DataFrame(rows)
    agg = per_query.groupby(["condition", "method"], as_index=False)["reward_net"].mean()
    agg = agg.rename(columns={"reward_net": "mean_reward_net"})
    agg["group"] = agg["method"].map(method_group)
    for col in ("mean_reward_net_lo", "mean_reward_net_hi", "found_pct", "mean_k", "median_k", "p90_k"):
        agg[col] = 0.0
    agg["whole_list_pct"] = 0.0
    (row,) = best_examined_only(per_query, agg, "strict", n_boot=200).to_dict("records")
    assert (row["method"], row["runner_up"], row["best"]) == ("bor-dqn", "bor-pfound", "bor-posterior")
    assert (row["rl"], row["supervised"], row["rl_behind"]) == ("bor-dqn", "bor-pfound", "bor-tabular")
    assert row["rl_vs_supervised_diff"] == row["rl_vs_supervised_diff_lo"] == pytest.approx(0.1)
    page = "\n".join(section_lines(Section("", examined_lines(pd.DataFrame([row]), agg, "strict"))))
    assert (
        "RL against supervised learning, both examined-only (the RL agents `bor-dqn`, `bor-tabular` against the "
        "supervised `bor-pfound`; `examined.csv`, `rl_*` columns): the best examined-only RL agent is within noise of "
        "the best examined-only supervised model or ahead on 1 of 1 conditions (significantly ahead on 1, behind on "
        "0). Significantly behind that model, per RL agent: bor-dqn 0 of 1, bor-tabular 1 of 1." in page
    )


def test_a_fixed_k_above_the_list_size_is_left_out_and_said() -> None:
    """fixed-50 on MetaTool's top-20 lists would show the whole list under the name fixed-50 (fixed-20's rows):
    the study's and the comparison's plans leave it out, name it in one console line, and keep every fixed K
    where the registry sets N."""
    from experiments.plan import all_methods_for, left_out_note, methods_for, study_cells

    top20, whole = resolve_plans(("metatool-minilm-top20", "metatool-minilm"))
    names = {c.method.name for c in compare_cells([top20], (42,))}
    assert "fixed-20" in names and "fixed-50" not in names
    assert {m.name for m in methods_for(top20)} == {m.name for m in all_methods_for(top20)} - {"fixed-50"}
    assert "fixed-50" in {c.method.name for c in study_cells([whole], (42,))}
    note = left_out_note([top20, whole], all_methods_for)
    assert note.endswith("fixed-50 on metatool-minilm-top20 (N = 20)")
    assert left_out_note([whole], all_methods_for) == ""
