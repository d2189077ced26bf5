"""``shortlist recommend`` on a researcher's own TREC run (issue 28): every kind that applies in one ranked
table judged on the net reward, the recommendation is ``auto``'s pick (made on training queries only), its run
directory is copied ready for ``shortlist predict``, and bad input is refused before anything is written."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pandas as pd
import pytest
from conftest import TINY_RECOMMEND_SET
from test_experiments_own_run import write_run

from experiments.cli import main
from experiments.recommend import interval_width, recommend_methods
from experiments.report.page import split_page

#: Tiny learner budgets: the test checks the command's wiring, not the learners.
TINY = ["--set", *TINY_RECOMMEND_SET, "--seeds", "42", "--no-progress"]


@pytest.fixture(scope="module")
def recommended(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, str]:
    folder = tmp_path_factory.mktemp("recommend")
    run, qrels = write_run(folder / "data", seed=0, n_queries=60)
    out = folder / "out"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(buf):
        assert main(["recommend", "--run", str(run), "--qrels", str(qrels), *TINY, "--out", str(out)]) == 0
    return out, run, qrels, buf.getvalue()


def test_every_applicable_kind_is_ranked_on_the_net_reward(recommended: tuple[Path, Path, Path, str]) -> None:
    out, *_ = recommended
    t = pd.read_csv(out / "recommend.csv")
    n = int(pd.read_csv(out / "recommended" / "per_query.csv")["n"].max())  # the lists' size: no fixed K above it
    expected = {m.name for m in recommend_methods("run") if not (m.agent == "fixed" and m.k > n)}
    assert set(t["method"]) == expected and {"bor-dqn", "bor-tabular", "bor-auto", "fixed-5", "gap"} <= expected
    policies = t[t["group"] != "limit"]
    assert list(policies["mean_reward_net"]) == sorted(policies["mean_reward_net"], reverse=True)
    assert (t.loc[t["group"] == "limit", "rank"] > policies["rank"].max()).all()  # limits read labels: last
    best = policies.iloc[0]
    assert best["diff_to_best"] == 0 and best["diff_lo"] == 0 == best["diff_hi"]
    assert (policies["diff_lo"] <= policies["diff_to_best"]).all() and (policies["diff_to_best"] <= 0 + 1e-12).all()
    assert t[["found_pct", "mean_k", "median_k", "p90_k", "whole_list_pct"]].notna().all().all()


def test_the_table_shows_bor_bits_beside_the_mean_reward(recommended: tuple[Path, Path, Path, str]) -> None:
    """SPEC asks for both "BoR bits" and "mean reward" (they can rank methods differently): recommend.csv and the
    page's table carry each run's ``bor_bits`` (its summary.csv) next to the mean reward."""
    out, *_ = recommended
    t = pd.read_csv(out / "recommend.csv").set_index("method")
    assert list(t.columns[list(t.columns).index("mean_reward") :][:2]) == ["mean_reward", "bor_bits"]
    runs = pd.concat(pd.read_csv(d / "summary.csv") for d in (out / "runs").iterdir() if not d.name.startswith("."))
    bits = runs.set_index("method")["bor_bits"]
    assert t["bor_bits"].to_dict() == pytest.approx(bits.loc[t.index].to_dict(), rel=1e-9, nan_ok=True)
    answer = split_page((out / "README.md").read_text())[1]
    assert "| mean reward | BoR bits | found % |" in answer
    assert '"BoR bits" is the aggregate log2(mean found / mean P_rand) over the test queries' in answer


def test_bor_bits_of_a_method_that_finds_nothing_show_as_missing_and_are_said(tmp_path: Path) -> None:
    """BoR bits = log2(mean found / mean P_rand) over the test queries (the oracle, by hand); a method that finds no
    test query has none (log2 0): empty in recommend.csv, ``-`` on the page and the console, and said, never -inf
    or nan. The ranking is the net reward's whatever the bits."""
    import math

    from agents.evaluation import summarise
    from experiments.io import write_csv
    from experiments.recommend import bits_note, recommend_table, table_lines, unfound_line
    from experiments.report.tables import aggregate_with_groups

    found = {"gap": [1, 1, 0, 1], "fixed-1": [0, 0, 0, 0], "fixed-3": [1, 1, 1, 0]}
    k = {"gap": [2, 1, 4, 2], "fixed-1": [1, 1, 1, 1], "fixed-3": [3, 3, 3, 3]}
    rows = []
    for method in found:
        for q, (f, kk) in enumerate(zip(found[method], k[method], strict=True)):
            p = kk / 10  # (N = 10, R = 1)
            reward = f * -math.log2(p)
            rows.append({"condition": "c", "method": method, "seed": 0, "qid": f"q{q}", "k": kk, "found": f,
                         "p_random": p, "reward": reward, "reward_net": reward - 0.01 * (kk - 1), "n": 10,
                         "r": 1})  # fmt: skip
    per_query = pd.DataFrame(rows)
    t = recommend_table(per_query, aggregate_with_groups(summarise(per_query), per_query), n_boot=200).set_index(
        "method"
    )
    for method in ("gap", "fixed-3"):
        expected = math.log2(sum(found[method]) / 4 / (sum(k[method]) / 10 / 4))
        assert t.loc[method, "bor_bits"] == pytest.approx(expected, rel=1e-12)
    assert math.isnan(t.loc["fixed-1", "bor_bits"])
    assert list(t.index) == list(t.sort_values("mean_reward_net", ascending=False).index)
    shown = dict(zip(t.index, (row[6] for row in table_lines(t.reset_index()).rows), strict=True))
    assert shown["fixed-1"] == "-" and shown["fixed-3"] == f"{t.loc['fixed-3', 'bor_bits']:.2f}"
    write_csv(t.reset_index(), tmp_path / "recommend.csv")  # (as recommend writes it)
    csv = (tmp_path / "recommend.csv").read_text()
    assert "inf" not in csv and "nan" not in csv.lower()
    assert math.isnan(pd.read_csv(tmp_path / "recommend.csv").set_index("method").loc["fixed-1", "bor_bits"])
    said = 'BoR bits shown "-" (empty in recommend.csv): fixed-1 found no test query'
    assert unfound_line(t.reset_index()).startswith(said) and said in bits_note(t.reset_index())
    assert unfound_line(t.drop(index="fixed-1").reset_index()) == ""


def test_the_recommendation_is_autos_pick_and_is_ready_for_predict(
    recommended: tuple[Path, Path, Path, str], tmp_path: Path
) -> None:
    out, run, _, console = recommended
    auto = json.loads((out / "recommended" / "agent.json").read_text())["auto"]
    assert auto["chosen"] in {"gap", "threshold", "posterior"}
    assert set(auto["validation_net_reward"]) == {"gap", "threshold", "posterior"}
    chosen = auto["chosen"] if auto["chosen"] == "gap" else f"bor-{auto['chosen']}"
    readme = (out / "README.md").read_text()
    condition = json.loads((out / "recommended" / "config.json").read_text())["condition"]
    assert readme.split("\n")[1] == f"# Rule for {condition}" and condition.startswith("run-my-")
    assert split_page(readme)[1].startswith("Recommended: **" + chosen + "**")
    assert f"Recommended: {chosen}." in console
    # the test rank and score quoted are those of the policy saved (auto's refit), not of the chosen kind's own cell
    t = pd.read_csv(out / "recommend.csv").set_index("method")
    assert f"On the test split `bor-auto` ranks #{int(t.loc['bor-auto', 'rank'])}: " in console
    if t.loc["bor-auto", "rank"] != 1:
        assert f"`bor-auto` is {t.loc['bor-auto', 'diff_to_best']:+.3f} [" in console
    predicted = tmp_path / "shortlist.run"
    rc = main(["predict", "--run-dir", str(out / "recommended"), "--run", str(run), "--out", str(predicted)])
    assert rc == 0 and predicted.is_file() and predicted.stat().st_size > 0


def test_a_small_test_set_is_reported_with_the_width_of_its_intervals(
    recommended: tuple[Path, Path, Path, str],
) -> None:
    """The README promises it: 60 judged queries leave 18 for test, under 30, and the console says so, with the
    median width of the table's paired intervals; the auto pick on 42 training queries is cross-validated."""
    out, _, _, console = recommended
    width = interval_width(pd.read_csv(out / "recommend.csv"))
    assert width > 0
    said = "warning: only 18 test queries, under 30: intervals will be wide (here a paired 95% interval spans"
    assert f"{said} {width:.2f} bits)" in console
    assert "Chosen by `auto` on 5-fold cross-validation (a small training set) of the training queries" in console


def test_bad_input_is_refused_and_leaves_nothing(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run, qrels = write_run(tmp_path / "data", seed=1, n_queries=20)
    out = tmp_path / "out"
    missing = tmp_path / "missing.run"
    assert main(["recommend", "--run", str(missing), "--qrels", str(qrels), *TINY, "--out", str(out)]) == 2
    assert "missing.run" in capsys.readouterr().err
    bad_key = ["recommend", "--run", str(run), "--qrels", str(qrels), "--set", "dqn.no_such_key=1", "--out", str(out)]
    assert main(bad_key) == 2
    assert "no_such_key" in capsys.readouterr().err
    assert not out.exists()


def test_several_seeds_are_refused_before_anything_runs_and_one_is_used(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """recommend trains each kind once: ``--seeds 1 2`` is one line naming the option (it silently trained seed 1
    alone), as ``--split-seeds 0 1`` is, with nothing written; one ``--seeds`` value is the seed every run has."""
    run, qrels = write_run(tmp_path / "data", seed=1, n_queries=20)
    out = tmp_path / "out"
    args = ["recommend", "--run", str(run), "--qrels", str(qrels), "--set", *TINY_RECOMMEND_SET, "--no-progress"]
    seeds = ("recommend trains each kind once, with one seed: give one --seeds value, not 1 2 (a spread over seeds: "
             "shortlist train or compare)")  # fmt: skip
    for many, said in ((["--seeds", "1", "2"], seeds),
                       (["--split-seeds", "0", "1"], "give one --split-seeds value, not 0 1")):  # fmt: skip
        assert main([*args, *many, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert said in err and len(err.strip().splitlines()) == 1 and not out.exists(), err
    assert main([*args, "--seeds", "7", "--out", str(out)]) == 0
    assert {d.name.rsplit("__", 1)[1] for d in (out / "runs").iterdir() if not d.name.startswith(".")} == {"s7"}
    assert json.loads((out / "recommended" / "config.json").read_text())["seed"] == 7


def test_a_recommendation_from_other_inputs_is_never_replaced(
    recommended: tuple[Path, Path, Path, str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out, *_ = recommended
    before = (out / "recommended" / "agent.json").read_bytes()
    other_run, other_qrels = write_run(tmp_path / "other", seed=5, n_queries=30)
    assert main(["recommend", "--run", str(other_run), "--qrels", str(other_qrels), *TINY, "--out", str(out)]) == 2
    assert "made from other inputs" in capsys.readouterr().err
    assert (out / "recommended" / "agent.json").read_bytes() == before


def write_beir_folder(root: Path, n_queries: int = 40, n_docs: int = 80) -> Path:
    """A BEIR-layout folder (corpus.jsonl, queries.jsonl, qrels/test.tsv) whose queries share words with
    their relevant document, so BM25 ranks it high but not always first."""
    import numpy as np

    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(200)]
    docs = [{"_id": f"d{i}", "title": "", "text": " ".join(rng.choice(vocab, 12))} for i in range(n_docs)]
    queries, qrels = [], []
    for q in range(n_queries):
        gold = docs[int(rng.integers(n_docs))]
        words = gold["text"].split()
        text = " ".join([*rng.choice(words, 3), *rng.choice(vocab, 2)])
        queries.append({"_id": f"q{q}", "text": text})
        qrels.append(f"q{q}\t{gold['_id']}\t1")
    folder = root / "mini-beir"
    (folder / "qrels").mkdir(parents=True)
    (folder / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs), encoding="utf-8")
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries), encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(qrels) + "\n")
    return folder


def test_recommend_on_a_beir_folder(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    folder = write_beir_folder(tmp_path)
    out = tmp_path / "out"
    args = ["recommend", "--benchmark", "beir", "--beir-dir", str(folder), "--scorer", "bm25", *TINY]
    assert main([*args, "--cache-dir", str(tmp_path / "cache"), "--out", str(out)]) == 0
    t = pd.read_csv(out / "recommend.csv")
    assert {"bor-auto", "fixed-1", "gap"} <= set(t["method"]) and t["mean_reward_net"].notna().all()
    assert "Recommended:" in capsys.readouterr().out and (out / "recommended" / "agent.json").is_file()
    # the run directories carry the condition the runs built: the folder's name and a hash of its files
    from benchmarks.conditions import build_condition

    named = {json.loads((r / "config.json").read_text())["condition"] for r in (out / "runs").iterdir()}
    cond = build_condition("beir", "bm25", cache_dir=tmp_path / "cache", options={"beir_dir": str(folder)})
    assert named == {cond.name} and re.fullmatch(rf"beir-bm25-{folder.resolve().name}-[0-9a-f]{{6}}", cond.name)
    assert all(r.name.startswith(f"{cond.name}__") for r in (out / "runs").iterdir())
    # another BEIR folder's recommendation never replaces this one
    before = {f.relative_to(out): f.read_bytes() for f in out.rglob("*") if f.is_file()}
    other = write_beir_folder(tmp_path / "other", n_queries=30)
    assert main([*args[:4], str(other), *args[5:], "--cache-dir", str(tmp_path / "cache"), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "made from other inputs than beir-bm25-mini-beir-" in err and cond.name in err, err
    assert {f.relative_to(out): f.read_bytes() for f in out.rglob("*") if f.is_file()} == before
    moved = tmp_path / "moved" / "mini-beir"  # the same files elsewhere: the same inputs, rerun in place
    moved.parent.mkdir()
    folder.rename(moved)
    assert main([*args[:4], str(moved), *args[5:], "--cache-dir", str(tmp_path / "cache"), "--out", str(out)]) == 0


def test_too_few_judged_queries_to_rank_on_is_one_line_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """4 judged queries split into 3 and 1: one test query gives no interval (it was a KeyError's traceback after
    30 runs had been trained; 2 queries, a fitted-Q error naming no input)."""
    out = tmp_path / "out"
    for n in (2, 4):
        run, qrels = write_run(tmp_path / f"d{n}", seed=1, n_queries=n)
        assert main(["recommend", "--run", str(run), "--qrels", str(qrels), *TINY, "--out", str(out)]) == 2
        err = capsys.readouterr().err
        assert f"{run} and {qrels}: {n} judged queries give" in err, err
        assert "recommend needs at least 2 training and 2 test queries: at least" in err, err
        assert "Traceback" not in err and not out.exists()


def test_predict_cuts_as_the_table_judged_on_several_relevant_items(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """On data with several relevant items per query, the cut-off and the posterior choose their test depths with
    the R they fitted on the training queries (never a test query's own R), so ``predict``, which reads scores
    alone, cuts each test query where the table judged it, and recommend has no depth difference to report. Its
    guard is shown to fire: a policy whose depths from the scores alone differ (as if it had read a label) is said,
    on the console and the page."""
    from test_experiments_sources import write_run as write_several

    run, qrels = write_several(tmp_path, n_queries=60)  # (odd queries: 1 to 3 relevant documents)
    out = tmp_path / "out"
    assert main(["recommend", "--run", str(run), "--qrels", str(qrels), *TINY, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "depths differ" not in err and "relevant item" not in err, err
    for method in ("bor-posterior", "bor-cutoff"):
        learned = next(d for d in (out / "runs").iterdir() if d.name.endswith(f"__{method}__s42"))
        rows = pd.read_csv(learned / "per_query.csv", dtype={"qid": str}).set_index("qid")
        assert (rows["r"] > 1).any()
        cut = tmp_path / f"{method}.run"
        assert main(["predict", "--run-dir", str(learned), "--run", str(run), "--out", str(cut)]) == 0
        k = pd.read_csv(cut, sep=" ", header=None, dtype={0: str})[0].value_counts().reindex(rows.index).to_numpy()
        assert (k == rows["k"].to_numpy()).all(), method

    # The guard fires: were the posterior's depths from the scores alone not those the table judged (as if it had
    # read a test query's R), the same command says so, on how many queries, and the net reward at predict's depths.
    import agents.trained
    import experiments.runner
    from agents import score_depths

    real_policy, real_condition = agents.trained.load_policy, experiments.runner.cell_condition
    seen: dict[str, Any] = {}

    class OneDeeper:  # the loaded policy, one rank deeper on the first test query (the posterior only)
        def __init__(self, run: Path) -> None:
            self.policy, self.deeper = real_policy(run), run.name.endswith("__bor-posterior__s42")

        def __getattr__(self, name: str) -> Any:
            return getattr(self.policy, name)

        def depths(self, scores: list, n: list) -> Any:
            k = self.policy.depths(scores, n).copy()
            if self.deeper:
                k[0] += 1
                seen["k"], seen["step_cost"] = k, self.policy.episode.step_cost
            return k

    def condition(*args: Any) -> Any:
        built = real_condition(*args)
        seen["test"] = built.test
        return built

    with pytest.MonkeyPatch.context() as m:
        m.setattr(agents.trained, "load_policy", OneDeeper)
        m.setattr(experiments.runner, "cell_condition", condition)
        assert main(["recommend", "--run", str(run), "--qrels", str(qrels), *TINY, "--out", str(out)]) == 0
    err = capsys.readouterr().err
    table = pd.read_csv(out / "recommend.csv").set_index("method")
    test = seen["test"]
    net = float(score_depths(test, seen["k"], step_cost=seen["step_cost"])["reward_net"].mean())
    judged = table.loc["bor-posterior", "mean_reward_net"]
    assert net != pytest.approx(judged, abs=5e-4)  # (one query deeper moves the mean: the line shows both)
    assert "have more than one relevant item, and these policies' test depths are not those" in err, err
    assert (f"bor-posterior: depths differ on 1 of {len(test)} test queries; net reward at predict's depths "
            f"{net:.3f} (table: {judged:.3f})") in err, err  # fmt: skip
    assert "bor-cutoff: depths differ" not in err, err
    assert f"bor-posterior: depths differ on 1 of {len(test)} test queries" in (out / "README.md").read_text()


def cut_run(run: Path, out: Path, keep: Callable[[str, int], bool]) -> Path:
    """The lines of ``run`` that ``keep(qid, rank)`` keeps (a truncated run, as another depth rule writes one)."""
    lines = [line for line in run.read_text().splitlines() if keep(line.split()[0], int(line.split()[3]))]
    out.write_text("\n".join(lines) + "\n")
    return out


def test_your_own_shortlists_are_ranked_beside_every_kind(
    recommended: tuple[Path, Path, Path, str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """A run cut at K = 3 everywhere is judged exactly as fixed K = 3 is: same rows, same interval against the best;
    the training queries it holds are said on the console, not scored."""
    done, run, qrels, _ = recommended
    out = shutil.copytree(done, tmp_path / "out")  # (its runs are reused: the table is the fixture's and yours)
    top3 = cut_run(run, tmp_path / "top3.run", lambda q, r: r <= 3)
    code = main(["recommend", "--run", str(run), "--qrels", str(qrels), *TINY, "--yours", str(top3), "--out", str(out)])
    assert code == 0
    t = pd.read_csv(out / "recommend.csv").set_index("method")
    mine, fixed = t.loc["yours:top3"], t.loc["fixed-3"]
    assert mine["group"] == "yours"
    cols = ["mean_reward_net", "diff_to_best", "diff_lo", "diff_hi", "mean_reward", "found_pct", "mean_k", "median_k",
            "p90_k", "whole_list_pct"]  # fmt: skip
    pd.testing.assert_series_equal(mine[cols], fixed[cols], check_names=False)
    from experiments.recommend import yours_rows
    from experiments.runner import get_condition

    auto = json.loads((out / "recommended" / "config.json").read_text())
    cond = get_condition("run", "run", "", 0, None, None, tuple(sorted(auto["options"].items())))
    cell = SimpleNamespace(condition=auto["condition"], seed=auto["seed"], buckets=auto["buckets"],
                           episode=SimpleNamespace(step_cost=auto["episode"]["step_cost"]))  # fmt: skip
    rows, _ = yours_rows((str(top3),), str(run), cond, cell)
    runs = pd.read_csv(out / "recommended" / "per_query.csv", dtype={"qid": str})
    assert list(rows.columns) == list(runs.columns)  # labelled as a run's rows are
    assert set(rows["condition"]) == set(runs["condition"]) and list(rows["bucket"]) == list(runs["bucket"])
    err = capsys.readouterr().err
    assert "--yours " in err and "queries of the training split not scored (the table is the test split's 18)" in err
    assert "Rows `yours:<name>` are your shortlists" in (out / "README.md").read_text()


def test_your_shortlists_must_be_the_top_k_of_the_run_for_every_test_query(
    recommended: tuple[Path, Path, Path, str], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Each bad --yours file is refused naming it and the query, into a finished recommendation (nothing rewritten)
    and into a new --out, before anything trains: nothing is written there (it failed after every kind had trained,
    leaving their run folders and no page)."""
    done, run, qrels, _ = recommended
    out = shutil.copytree(done, tmp_path / "out")
    before = (out / "recommend.csv").read_bytes()
    t = pd.read_csv(out / "recommended" / "per_query.csv", dtype={"qid": str})
    test = sorted(set(t["qid"]))
    cases = [
        (cut_run(run, tmp_path / "skip.run", lambda q, r: r <= 2 and r != 1), "is not among the top 1 of --run"),
        (cut_run(run, tmp_path / "gap.run", lambda q, r: r in (1, 3)), "is not among the top 2 of --run"),
        (cut_run(run, tmp_path / "less.run", lambda q, r: r <= 2 and q != test[0]),
         f"no shortlist for test query {test[0]!r}"),
    ]  # fmt: skip
    stray = tmp_path / "stray.run"
    stray.write_text((tmp_path / "less.run").read_text().replace(f"{test[1]} Q0", "nobody Q0", 1) + "\n")
    cases.append((stray, "query 'nobody' is not in --run"))
    fresh = tmp_path / "fresh"
    for path, message in cases:
        for into in (out, fresh):
            code = main(["recommend", "--run", str(run), "--qrels", str(qrels), *TINY, "--yours", str(path), "--out",
                         str(into)])  # fmt: skip
            err = capsys.readouterr().err
            assert code == 2 and message in err and "Traceback" not in err, (path, err)
            assert not fresh.exists(), path  # (checked before training: no run folder, no half-written --out)
    assert (out / "recommend.csv").read_bytes() == before  # nothing rewritten
    code = main(["recommend", "--benchmark", "bfcl", "--yours", str(stray), "--out", str(tmp_path / "x")])
    assert code == 2 and "--yours goes with --run/--qrels" in capsys.readouterr().err


def test_a_fixed_k_above_the_lists_of_your_run_is_left_out_and_said(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Lists of 12: fixed-20 and fixed-50 would show every list whole under their own names (fixed-12's rows).
    recommend and train leave the default ones out and say so on the console; train refuses one given with --k."""
    from test_experiments_sources import write_run as write_lists

    run, qrels = write_lists(tmp_path, n_queries=40, n_docs=12)
    out = tmp_path / "rec"
    assert main(["recommend", "--run", str(run), "--qrels", str(qrels), *TINY, "--out", str(out)]) == 0
    said = capsys.readouterr().out
    assert "left out, a fixed K above the list's size" in said and "fixed-20, fixed-50 on run" in said, said
    assert said.count("(lists of 12 at most)") == 1
    methods = set(pd.read_csv(out / "recommend.csv")["method"])
    assert {"fixed-1", "fixed-10"} <= methods and not {"fixed-20", "fixed-50"} & methods
    trained = tmp_path / "train"
    args = ["train", "--run", str(run), "--qrels", str(qrels), "--agent", "fixed", "--no-progress"]
    assert main([*args, "--out", str(trained)]) == 0
    assert "fixed-20, fixed-50 on run" in capsys.readouterr().out
    assert set(pd.read_csv(trained / "summary.csv")["method"]) == {f"fixed-{k}" for k in (1, 3, 5, 10)}
    assert main([*args, "--k", "3", "20", "--out", str(tmp_path / "train2")]) == 2
    err = capsys.readouterr().err
    assert "--k 20: above the lists' size (12 ranked items at most) on run-" in err, err
    assert not (tmp_path / "train2").exists()
