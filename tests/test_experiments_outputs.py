"""A user's folders are never replaced by another command's output, and partial studies still report (a new-user
audit of the researcher's path): a study of conditions outside the paper's main table gets its pages and an
overview that answers; ``shortlist site`` leaves your own HTML files; ``reproduce``/``compare``/``shift`` refuse an
``--out`` of another command or of more work, ``train`` one holding another command's results, ``evaluate`` a train
folder; ``evaluate`` keeps the run's ``--buckets`` and says which step cost it charges; a partial comparison does not
judge goals defined over conditions it did not run."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from test_experiments_own_run import write_run

from experiments.cli import main
from experiments.html import SITE_MARK, write_index
from experiments.pipeline import check_out_is_ours
from experiments.report.overview import answer_rows
from experiments.report.peers_page import verdict_lines
from experiments.report.tables import GOAL_BASE_CONDITIONS, GOAL_TWO_SCORER_CONDITIONS

TINY = ["--set", "dqn.total_timesteps=600", "dqn.learning_starts=100", "tabular.episodes=300", "cutoff.epochs=20",
        "choppy.epochs=20", "--seeds", "42", "--split-seeds", "0", "--no-progress"]  # fmt: skip


def test_a_study_without_the_papers_main_table_reports(tmp_path: Path) -> None:
    """A registry-sweep point alone: its pages and an overview answering for its own condition (it crashed)."""
    out = tmp_path / "sweep"
    assert main(["reproduce", "--only", "bfcl-bm25-sub20", *TINY, "--out", str(out)]) == 0
    paper = (out / "paper.md").read_text()
    assert "No condition of the paper's main table" in paper
    readme = (out / "README.md").read_text()
    assert "| bfcl-bm25-sub20 |" in readme and "No method table yet" not in readme


def test_the_overview_answers_for_a_study_of_none_of_the_goal_conditions(tmp_path: Path) -> None:
    cols = ["condition", "best", "mean_reward_net", "mean_reward_net_lo", "mean_reward_net_hi", "median_k", "p90_k",
            "runner_up", "diff", "diff_lo", "diff_hi"]  # fmt: skip
    row = ["bfcl-bm25-sub20", "fixed-1", 4.2, 4.0, 4.3, 1, 1, "bor-dqn", 0.05, 0.01, 0.1]
    pd.DataFrame([row], columns=cols).to_csv(tmp_path / "best.csv", index=False)
    assert [r["condition"] for _, r in answer_rows(tmp_path)] == ["bfcl-bm25-sub20"]
    goal = [GOAL_BASE_CONDITIONS[0], *row[1:]]
    pd.DataFrame([row, goal], columns=cols).to_csv(tmp_path / "best.csv", index=False)
    assert [r["condition"] for _, r in answer_rows(tmp_path)] == [GOAL_BASE_CONDITIONS[0]]  # goals first, as before


def test_site_leaves_your_own_html_and_says_what_it_wrote(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    (tmp_path / "notes.html").write_text("<html>my notes</html>")
    (tmp_path / "old-page.html").write_text(f'<nav><div {SITE_MARK}study"></div></nav>')  # an earlier site's page
    page = write_index(tmp_path)
    assert page.name == "tables.html" and page.is_file()  # no README: no index.html
    assert (tmp_path / "notes.html").read_text() == "<html>my notes</html>"
    assert not (tmp_path / "old-page.html").exists()
    assert main(["site", "--out", str(tmp_path)]) == 0
    assert f"rebuilt the site of {tmp_path} (tables.html and the pages it links)" in capsys.readouterr().out


def test_a_pipeline_refuses_an_out_of_another_command_or_of_more_work(tmp_path: Path) -> None:
    p = SimpleNamespace(name="shift", out=tmp_path)
    (tmp_path / "manifest.json").write_text(json.dumps({"pipeline": "reproduce", "command": "shortlist reproduce"}))
    with pytest.raises(ValueError, match=r"holds the results of `shortlist reproduce`; give another --out"):
        check_out_is_ours(p, ["a@b"])  # type: ignore[arg-type]
    made = {"pipeline": "shift", "command": "shortlist shift --only x", "unit": "evaluations",
            "units": ["r1@t1", "r1@t2"]}  # fmt: skip
    (tmp_path / "manifest.json").write_text(json.dumps(made))
    check_out_is_ours(p, ["r1@t1", "r1@t2", "r2@t1"])  # type: ignore[arg-type] (more work: rewritten)
    with pytest.raises(ValueError, match=r"whose 1 of 2 evaluations this command would drop \(e.g. r1@t2\)"):
        check_out_is_ours(p, ["r1@t1", "r2@t1"])  # type: ignore[arg-type]
    legacy = {"pipeline": "shift", "command": "shortlist shift", "runs": ["r1", "r2"]}  # written before units
    (tmp_path / "manifest.json").write_text(json.dumps(legacy))
    check_out_is_ours(p, ["r1@t1", "r2@t9"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"this command would drop \(e.g. r2\)"):
        check_out_is_ours(p, ["r1@t1"])  # type: ignore[arg-type]


def test_train_and_evaluate_never_replace_another_commands_tables(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run, qrels = write_run(tmp_path / "data", seed=0, n_queries=30)
    data = ["--run", str(run), "--qrels", str(qrels)]
    study = tmp_path / "study"
    study.mkdir()
    (study / "manifest.json").write_text(json.dumps({"pipeline": "reproduce", "command": "shortlist reproduce"}))
    assert main(["train", *data, "--agent", "fixed", "--k", "2", "--out", str(study), "--no-progress"]) == 2
    assert "holds the results of `shortlist reproduce`" in capsys.readouterr().err
    assert sorted(p.name for p in study.iterdir()) == ["manifest.json"]
    trained = tmp_path / "trained"
    code = main(["train", *data, "--agent", "threshold", "--buckets", "narrow", "--out", str(trained), "--no-progress"])
    assert code == 0
    run_dir = next((trained / "runs").iterdir())
    before = (trained / "summary.csv").read_bytes()
    assert main(["evaluate", "--run-dir", str(run_dir), "--run", str(run), "--qrels", str(qrels), "--out",
                 str(trained)]) == 2  # fmt: skip
    assert "holds the tables of `shortlist train`" in capsys.readouterr().err
    assert (trained / "summary.csv").read_bytes() == before
    # the run's --buckets carry to its evaluation (the same test queries, the same buckets)
    ev = tmp_path / "ev"
    assert main(["evaluate", "--run-dir", str(run_dir), "--run", str(run), "--qrels", str(qrels), "--out",
                 str(ev)]) == 0  # fmt: skip
    mine = pd.read_csv(ev / "buckets.csv")[["bucket", "n"]]
    theirs = pd.read_csv(trained / "buckets.csv")[["bucket", "n"]]
    pd.testing.assert_frame_equal(mine.reset_index(drop=True), theirs.reset_index(drop=True))
    assert json.loads((ev / "manifest.json").read_text())["buckets"] == "narrow"


def test_hybrid_is_a_tool_search_scorer_not_a_benchmarks(capsys: pytest.CaptureFixture, tmp_path: Path) -> None:
    assert main(["train", "--benchmark", "bfcl", "--scorer", "hybrid", "--out", str(tmp_path / "x")]) == 2
    assert "give --scorer bm25 --variant hybrid" in capsys.readouterr().err


def test_a_partial_comparison_does_not_judge_goals_over_conditions_it_did_not_run() -> None:
    sg = pd.DataFrame({"condition": [GOAL_TWO_SCORER_CONDITIONS[0], GOAL_BASE_CONDITIONS[0]],
                       "two_scorer_goal": [True, False], "base": [False, True], "ahead": [False, False],
                       "behind": [False, False]})  # fmt: skip
    lines = verdict_lines(sg, pd.DataFrame())
    assert f"not judged here: 1 of its {len(GOAL_TWO_SCORER_CONDITIONS)} conditions ran" in lines[0]
    assert f"not judged here: 1 of its {len(GOAL_BASE_CONDITIONS)} conditions ran" in lines[1]
    assert not any("NOT met" in line or "met)." in line.replace("judged here", "") for line in lines)
    # conditions that already decide a goal: four ahead of at least four; one behind of never behind
    four = pd.DataFrame({"condition": list(GOAL_TWO_SCORER_CONDITIONS[:4]), "two_scorer_goal": True, "base": False,
                         "ahead": True, "behind": False})  # fmt: skip
    behind = pd.DataFrame({"condition": [GOAL_BASE_CONDITIONS[0]], "two_scorer_goal": False, "base": True,
                           "ahead": False, "behind": True})  # fmt: skip
    decided = verdict_lines(pd.concat([four, behind], ignore_index=True), pd.DataFrame())
    assert decided[0].endswith("met).") and "NOT" not in decided[0] and decided[1].endswith("NOT met).")


class _Checked(Exception):
    """Raised once the output-folder check has passed: the command stops there."""


@pytest.mark.parametrize(
    "folder", ["results", "results/bfcl", "results/peers", "results/peers-topn", "results/strict", "results/downstream"]
)
def test_each_committed_folder_is_accepted_by_its_own_command(
    folder: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regenerating a committed folder into itself passes the check (its manifest's runs, written before units were
    recorded, some with an @tag, are all among the command's units); the command is stopped right after it."""
    import shlex

    import experiments.pipeline as pipeline

    repo = Path(__file__).resolve().parents[1]
    made = json.loads((repo / folder / "manifest.json").read_text())
    out = tmp_path / "out"
    out.mkdir()
    (out / "manifest.json").write_text(json.dumps(made))
    argv = shlex.split(made["command"])[1:]
    if "--out" in argv:
        at = argv.index("--out")
        del argv[at : at + 2]
    original = pipeline.check_out_is_ours

    def check_then_stop(p: Any, units: Any) -> None:
        original(p, units)
        raise _Checked

    monkeypatch.setattr(pipeline, "check_out_is_ours", check_then_stop)
    with pytest.raises(_Checked):
        main([*argv, "--out", str(out)])
    p = SimpleNamespace(name=made["pipeline"], out=out)
    with pytest.raises(ValueError, match="this command would drop"):
        original(p, ["nothing"])  # type: ignore[arg-type] (and a command of fewer units is refused)


def test_a_pipeline_refuses_a_train_folder(tmp_path: Path) -> None:
    (tmp_path / "summary.csv").write_text("condition\n")
    with pytest.raises(ValueError, match=r"holds the tables of `shortlist train`"):
        check_out_is_ours(SimpleNamespace(name="reproduce", out=tmp_path), ["x"])  # type: ignore[arg-type]
