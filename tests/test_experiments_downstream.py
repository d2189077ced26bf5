"""``shortlist downstream`` end to end with tiny learner budgets: the simulated chooser (never an LLM) and the
OpenAI-compatible chooser against a real fake server on 127.0.0.1; the tables' arithmetic, the committed choices
table filling an empty cache, the outcome reward, and bad inputs."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from test_choosers_openai import KEY_ENV, SECRET, server  # noqa: F401 (the fake server fixture)

from experiments.cli import main

TINY = ["--seeds", "1", "--set", "dqn.total_timesteps=300", "dqn.learning_starts=100", "cutoff.epochs=4",
        "--strengths", "0", "1", "--no-progress"]  # fmt: skip


def run(tmp: Path, *args: str, cache: str, out: str = "out", tiny: list[str] = TINY) -> int:
    return main(["downstream", "--only", "bfcl-bm25", *tiny, "--out", str(tmp / out), "--runs-dir", str(tmp / "runs"),
                 "--cache-dir", cache, *args])  # fmt: skip


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("downstream")
    assert run(tmp, "--chooser", "simulated", "--choices", str(tmp / "none.csv"), cache=str(tmp / "c1")) == 0
    return tmp


def test_table1_is_the_arithmetic_of_the_choices(simulated: Path) -> None:
    out = simulated / "out"
    rows = pd.read_csv(out / "per_query.csv", dtype={"qid": str})
    choices = pd.read_csv(out / "choices.csv", dtype={"qid": str})
    t1 = pd.read_csv(out / "table1.csv").set_index("method")
    assert (rows["k"] <= 20).all() and (rows["e2e"] <= rows["presented"]).all()
    assert {"bor-dqn", "f1-dqn", "fixed-1", "fixed-5", "bor-posterior", "outcome-dqn", "outcome-greedyk"} <= set(
        t1.index
    )
    # every presented shortlist was asked once; e2e is the choice at the method's own depth
    asked = choices.set_index(["qid", "k"])["correct"]
    presented = rows[rows["presented"] == 1]
    assert [asked[(q, k)] for q, k in zip(presented["qid"], presented["k"], strict=True)] == presented["e2e"].tolist()
    f5 = rows[rows["method"] == "fixed-5"]
    assert t1.loc["fixed-5", "e2e_pct"] == pytest.approx(100 * f5["e2e"].mean())
    assert t1.loc["fixed-5", "choice_pct"] == pytest.approx(100 * f5["e2e"].sum() / f5["presented"].sum())
    assert t1.loc["fixed-1", "choice_pct"] == pytest.approx(100.0)  # one tool shown: nothing to confuse
    assert (t1["chooser"].str.startswith("simulated chooser, not an LLM")).all()


def test_readme_answers_first_and_names_the_simulated_chooser(simulated: Path) -> None:
    readme = (simulated / "out" / "README.md").read_text()
    first = readme.split("## Table 1")[0]
    assert "**Answer** (chooser: simulated chooser, not an LLM" in first and "end-to-end" in first
    assert "; fixed K = 1 " in first and "; fixed K = 5 " in first  # the simple rules beside the best
    assert "the chooser picks it 100% at K = 1" in first
    for part in ("Claude Sonnet 4.6", "## The cost of distraction", "## Outcome-trained against BoR-trained",
                 "## Sensitivity: the simulated chooser (not an LLM)", "figures/choice_vs_k.png"):  # fmt: skip
        assert part in readme, part
    sens = pd.read_csv(simulated / "out" / "sensitivity.csv")
    assert list(sens["strength"]) == [0.0, 1.0] and (sens["best_fixed_k"] >= 1).all()
    paired = pd.read_csv(simulated / "out" / "outcome.csv")
    assert set(paired["kind"]) == {"dqn", "threshold", "greedyk"}
    assert (paired["e2e_diff_lo"] <= paired["e2e_diff"]).all() and (paired["e2e_diff"] <= paired["e2e_diff_hi"]).all()
    assert json.loads((simulated / "out" / "manifest.json").read_text())["episode"]["max_depth"] == 20
    # the request count is computed from the tables, not asserted
    choices = pd.read_csv(simulated / "out" / "choices.csv")
    assert f"Requests: {len(choices):,} distinct (query, K) shortlists" in readme
    presented = int(pd.read_csv(simulated / "out" / "per_query.csv")["presented"].sum())
    assert f"shortlist holds the gold ({presented:,}) plus the curve ({len(choices):,})" in readme


def test_the_outcome_reward_pays_the_observed_choice() -> None:
    from agents.peers import objective_matrix
    from envs import OUTCOME, EpisodeConfig, RankedQuery, terminal_payoffs

    q = RankedQuery(np.linspace(1, 0, 6), [2], "q", payoffs=[0, 1, 1, 0, 1, 0])
    assert terminal_payoffs(q, np.array([1, 2, 4]), OUTCOME).tolist() == [0.0, 1.0, 0.0]
    net, _ = objective_matrix([q], EpisodeConfig(reward=OUTCOME, step_cost=0.1, gamma=1.0), OUTCOME)
    np.testing.assert_allclose(net[0], [0, 0.9, 0.8, -0.3, 0.6, -0.5])
    with pytest.raises(ValueError, match="'p'.*observed payoffs"):
        terminal_payoffs(RankedQuery(np.ones(3), [1], "p"), np.array([1]), OUTCOME)


def test_openai_chooser_through_the_fake_server_then_the_cache(
    server,  # noqa: F811 (the fixture imported above)
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    url, state = server
    args = ["--chooser", "openai", "--base-url", url, "--model", "fake-model", "--api-key-env", KEY_ENV]
    tiny = [
        *TINY[: TINY.index("--strengths")],
        "--strengths",
        "0",
        "--no-progress",
    ]  # no sensitivity sweep asserted here
    assert run(tmp_path, *args, "--choices", str(tmp_path / "none.csv"), cache=str(tmp_path / "c"), tiny=tiny) == 0
    choices = pd.read_csv(tmp_path / "out" / "choices.csv", dtype={"qid": str})
    asked = len(state.requests)
    assert asked == len(choices) > 0 and (choices["cached"] == 0).all()
    body = state.requests[0][2]
    assert body["tool_choice"] == "required" and body["temperature"] == 0 and body["model"] == "fake-model"
    # a rerun asks nothing; a fresh cache is filled from the committed table and asks nothing either
    none = str(tmp_path / "none.csv")
    assert run(tmp_path, *args, "--choices", none, cache=str(tmp_path / "c"), out="again", tiny=tiny) == 0
    committed = str(tmp_path / "out" / "choices.csv")
    assert run(tmp_path, *args, "--choices", committed, cache=str(tmp_path / "fresh"), out="fresh", tiny=tiny) == 0
    assert len(state.requests) == asked
    assert (pd.read_csv(tmp_path / "fresh" / "choices.csv")["cached"] == 1).all()
    for path in tmp_path.rglob("*"):  # the key is read from the environment and never written
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_bad_inputs_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["downstream", "--chooser", "openai", "--dry-run"]) == 2
    assert "needs --base-url and --model" in capsys.readouterr().err
    assert main(["downstream", "--only", "metatool-bm25", "--dry-run"]) == 2
    assert "metatool-bm25" in capsys.readouterr().err
    args = [
        "--chooser",
        "openai",
        "--base-url",
        "http://127.0.0.1:9/v1",
        "--model",
        "m",
        "--api-key-env",
        "NO_SUCH_KEY_",
    ]
    assert run(tmp_path, *args, "--choices", str(tmp_path / "none.csv"), cache=str(tmp_path / "c")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("shortlist: error: ") and "NO_SUCH_KEY_" in err[-1]
    assert not (tmp_path / "out" / "README.md").exists()
