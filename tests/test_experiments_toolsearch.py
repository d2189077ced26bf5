"""The tool search from the command line (issue 38): ``shortlist search`` (one request, and stdin to JSON lines)
gives the Python API's shortlist; ``shortlist recommend --tools --log`` trains on an agent's log and saves a
searcher ready to serve; ``shortlist toolsearch default`` writes the LOBO table and a policy with its provenance;
a saved BM25 searcher serves without torch or sentence-transformers; bad input is one line and exit 2."""

from __future__ import annotations

import contextlib
import io
import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import TINY_RECOMMEND_SET, cli_env
from test_toolsearch import TOPICS, VERBS, labelled_lists, openai_tools, requests

import shortlist_depth as sd
from experiments.cli import main
from shortlist_depth.toolsearch import ToolSearch, policy_scorer

#: Tiny learner budgets: these tests check the wiring, not the learners.
TINY = ["--set", *TINY_RECOMMEND_SET, "--seeds", "42", "--no-progress"]


def run(args: list[str], stdin: str = "") -> tuple[int, str, str]:
    """``shortlist ARGS`` in this process: exit status, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    old = sys.stdin
    sys.stdin = io.StringIO(stdin)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(args)
    finally:
        sys.stdin = old
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved BM25 searcher over the generated registry, with a posterior fitted on its lists."""
    policy = sd.fit("posterior", labelled_lists(openai_tools()), seed=0)
    return ToolSearch.from_tools(openai_tools(), policy=policy).save(tmp_path_factory.mktemp("s") / "searcher")


def test_search_prints_the_python_apis_shortlist(saved: Path, tmp_path: Path) -> None:
    search = ToolSearch.load(saved)
    code, out, _ = run(["search", "--searcher", str(saved), "please book my hotel now", "--max-k", "2"])
    assert code == 0 and json.loads(out) == search.search("please book my hotel now", max_k=2).to_json()
    texts = requests(15, seed=4)
    code, out, _ = run(["search", "--searcher", str(saved), "--pin", "get_news", "--exclude", "book_hotel"],
                       stdin="\n".join(texts) + "\n")  # fmt: skip
    assert code == 0
    expected = search.search_many(texts, pinned=["get_news"], exclude=["book_hotel"])
    assert [json.loads(line) for line in out.splitlines()] == [s.to_json() for s in expected]
    code, crlf, _ = run(["search", "--searcher", str(saved), "--pin", "get_news", "--exclude", "book_hotel"],
                        stdin="\r\n".join(texts) + "\r\n")  # fmt: skip
    assert code == 0 and crlf == out  # (a CRLF line's request has no \r)
    (tmp_path / "tools.json").write_text(json.dumps(openai_tools()))
    code, out, _ = run(["search", "--tools", str(tmp_path / "tools.json"), "--policy", str(saved / "policy"), texts[0]])
    assert code == 0 and json.loads(out) == search.search(texts[0]).to_json()


@pytest.mark.parametrize(
    ("args", "stdin", "match"),
    [
        (["--searcher", "{missing}", "x"], "", "not a saved searcher"),
        (["--searcher", "{saved}"], "fine request\n\nnext\n", "stdin:2: a request with no text"),
        (["--searcher", "{saved}", "--pin", "nope", "x"], "", r"pinned tool\(s\) not in the registry: \['nope'\]"),
        (["--searcher", "{saved}", "--min-k", "3", "--max-k", "2", "x"], "", "--min-k 3 exceeds --max-k 2"),
        (["--searcher", "{saved}", "--tools", "t.json", "x"], "", "give one of --searcher DIR and --tools FILE"),
        (["--searcher", "{saved}", "--scorer", "minilm", "x"], "", "--scorer and --policy go without --searcher"),
        (["--searcher", "{saved}", "--min-k", "21", "x"], "", r"--min-k 21 exceeds --max-k 20 \(the default: --no-max"),
        (["--searcher", "{saved}", "--max-k", "5", "--no-max-k", "x"], "", "give --max-k 5 or --no-max-k, not both"),
        (["--tools", "{missing}", "x"], "", "cannot read the tools file"),
        (["--searcher", "{saved}", ""], "a request\n", r"request 0 has no text"),  # given empty: not the stdin
    ],
)
def test_search_errors_are_one_line_and_exit_2(saved: Path, tmp_path: Path, args: list[str], stdin: str,
                                               match: str) -> None:  # fmt: skip
    filled = [a.format(saved=saved, missing=tmp_path / "missing") for a in args]
    code, out, err = run(["search", *filled], stdin)
    assert code == 2 and err.count("\n") == 1 and err.startswith("shortlist: error: ")
    assert re.search(match, err), err
    if stdin and "" not in args:  # the requests before the bad line were answered
        assert json.loads(out.splitlines()[0])["request"] == "fine request"


def test_a_saved_bm25_searcher_serves_without_torch(saved: Path, tmp_path: Path) -> None:
    """Stand-ins that raise on import prove that serving a BM25 searcher (posterior policy) imports neither torch nor
    sentence-transformers nor stable-baselines3, nor even pandas or scipy (a fast start)."""
    fake = tmp_path / "fake"
    for name in ("torch", "sentence_transformers", "stable_baselines3", "pandas", "scipy"):
        (fake / name).mkdir(parents=True)
        (fake / name / "__init__.py").write_text(f"raise ImportError('{name} was imported')\n")
    env = cli_env()
    env["PYTHONPATH"] = f"{fake}:{env['PYTHONPATH']}"
    command = [sys.executable, "-m", "experiments.cli", "search", "--searcher", str(saved), "please get my news now"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-800:]
    assert json.loads(done.stdout)["names"][0] == "get_news"


# ------------------------------------------------------------------------------------------ recommend


def write_agent_log(folder: Path, n: int = 90, seed: int = 0) -> tuple[Path, Path]:
    """The registry and a log of ``n`` requests, each calling its own verb-topic tool, plus 3 requests naming a
    tool the registry lacks, 2 repeats and one request that called nothing."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for i in range(n):
        verb, topic = VERBS[int(rng.integers(5))], TOPICS[int(rng.integers(20))]
        said = verb if rng.random() < 0.5 else "handle"  # half the time the verb is not said: a tie among 5 tools
        rows.append({"request": f"could you {said} {topic} today #{i}", "tools": [f"{verb}_{topic}"]})
    rows += [{"request": "order a pizza", "tools": ["order_pizza"]}] * 2 + [{"request": "x", "tool": "make_tea"}]
    rows += [rows[0], rows[1], {"request": "hello there", "tools": []}]
    log = folder / "agent.log.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tools = folder / "tools.json"
    tools.write_text(json.dumps(openai_tools()))
    return tools, log


def test_recommend_on_an_agent_log_saves_a_searcher_ready_to_serve(tmp_path: Path) -> None:
    tools, log = write_agent_log(tmp_path / "data")
    out, live = tmp_path / "rec", tmp_path / "live"
    ToolSearch.from_tools(openai_tools()).save(live)  # the searcher served now: replaced by --publish
    code, stdout, err = run(["recommend", "--tools", str(tools), "--log", str(log), *TINY, "--out", str(out),
                             "--publish", str(live)])  # fmt: skip
    assert code == 0, err
    assert f"published it into {live}" in stdout and ToolSearch.load(live).policy.method == "bor-auto"
    assert ToolSearch.load(live).policy.depths([[3.0, 2.0, 1.0]]) == ToolSearch.load(out / "searcher").policy.depths(
        [[3.0, 2.0, 1.0]]
    )
    t = pd.read_csv(out / "recommend.csv")
    assert {"bor-auto", "fixed-1", "gap", "bor-posterior"} <= set(t["method"])
    assert "note: tools the log names but the registry lacks: 'order_pizza' (2 lines), 'make_tea' (1 line)" in err
    assert "note: 2 log lines repeat an earlier request: merged into it" in err
    assert "warning: only 27 test queries, under 30: intervals will be wide (here a paired 95% interval spans" in err
    assert "skipped 3 lines of requests naming a tool not in the registry, 1 lines that called no tool" in err
    search = ToolSearch.load(out / "searcher")
    recommended = sd.load_policy(out / "recommended")
    assert search.policy.method == recommended.method == "bor-auto" and search.scorer == "bm25"
    assert (
        f"wrote the searcher {out / 'searcher'}" in stdout
        and "`shortlist search --searcher" in (out / "README.md").read_text()
    )
    code, printed, _ = run(["search", "--searcher", str(out / "searcher"), "could you cancel taxi today"])
    assert code == 0 and json.loads(printed) == search.search("could you cancel taxi today").to_json()
    # the log is a condition like any: evaluate the recommended run on it, train one kind on it
    code, _, err = run(["evaluate", "--run-dir", str(out / "recommended"), "--out", str(tmp_path / "ev")])
    assert code == 0, err
    evaluated = pd.read_csv(tmp_path / "ev" / "per_query.csv")
    assert len(evaluated) == 27 and set(evaluated["condition"]) == {
        json.loads((out / "recommended" / "config.json").read_text())["condition"]
    }
    code, _, err = run(
        ["train", "--tools", str(tools), "--log", str(log), "--agent", "gap", "--out", str(tmp_path / "tr")]
    )
    assert code == 0, err
    # the depth the searcher serves is the recommended policy's, on the same ranking
    lists = labelled_lists(openai_tools(), n=10)
    np.testing.assert_array_equal(
        search.policy.depths([q.scores for q in lists]), recommended.depths([q.scores for q in lists])
    )


def test_recommend_on_a_log_refuses_bad_input_and_writes_nothing(tmp_path: Path) -> None:
    tools, log = write_agent_log(tmp_path / "data", n=20)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(log.read_text() + "not json\n")
    out = tmp_path / "rec"
    code, _, err = run(["recommend", "--tools", str(tools), "--log", str(bad), *TINY, "--out", str(out)])
    assert code == 2 and "bad.jsonl:27: malformed JSON" in err and not out.exists()
    code, _, err = run(["recommend", "--tools", str(tools), "--log", str(log), "--scorer", "fused", "--out", str(out)])
    assert code == 2 and "rank with bm25, minilm or hybrid" in err
    code, _, err = run(["recommend", "--tools", str(tools), "--out", str(out)])
    assert code == 2 and "--tools and --log go together" in err and not out.exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    for where, message in (
        (mine, "holds something other than a saved searcher"),
        (out / "live", "one holds the other"),
    ):
        code, _, err = run(["recommend", "--tools", str(tools), "--log", str(log), "--out", str(out), "--publish",
                            str(where)])  # fmt: skip
        assert code == 2 and message in err and not out.exists(), err
    assert (mine / "notes.txt").read_text() == "mine"
    served = ToolSearch.from_tools(openai_tools()).save(tmp_path / "served")
    (served / "NOTES.md").write_text("mine")
    other = tmp_path / "other"
    ToolSearch.from_tools(openai_tools()).save(other / "searcher")
    (other / "recommend.csv").write_text("rank\n")
    cases = [
        (["--out", str(out), "--publish", str(served)], "holds files that are not its searcher's (NOTES.md)"),
        (["--out", str(served / "rec"), "--publish", str(served)], "one holds the other"),
        (["--out", str(out), "--publish", str(other / "searcher")], "the searcher of another recommendation"),
        (["--out", str(other)], "holds files that are not a recommendation (searcher)"),
    ]
    for flags, message in cases:
        code, _, err = run(["recommend", "--tools", str(tools), "--log", str(log), *TINY, *flags])
        assert code == 2 and message in err and "Traceback" not in err, (flags, err)
    assert (served / "NOTES.md").read_text() == "mine" and not out.exists() and not (served / "rec").exists()
    # a log whose every tool name differs from the registry's (a prefix, say) keeps no request: why, in one line
    renamed = tmp_path / "renamed.jsonl"
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    named = [{"request": w["request"], "tools": w.get("tools", [w.get("tool")])} for w in lines]
    renamed.write_text("".join(json.dumps({**w, "tools": [f"srv_{t}" for t in w["tools"]]}) + "\n" for w in named))
    for args in (["recommend"], ["train", "--agent", "gap"]):
        code, _, err = run([*args, "--tools", str(tools), "--log", str(renamed), "--out", str(out)])
        assert code == 2 and f"{renamed}: 0 usable requests, at least 2 needed ({len(lines)} lines read, " in err, err
        assert "requests naming a tool not in the registry: 'srv_" in err, err
        assert len(err.strip().splitlines()) == 1 and not out.exists()


def test_train_auto_on_too_small_a_log_says_so_before_it_writes(tmp_path: Path) -> None:
    """``auto`` holds training requests out to validate, so it needs 2 of them: on a log whose split leaves it 1,
    ``train --agent auto`` fails before it runs or writes anything, naming the log, its usable requests and how
    many are needed (it failed at fit time, "auto: needs at least 2 training queries ..."); ``recommend`` refuses
    the same log as it did; a log that gives 2 training requests trains."""
    tools, _ = write_agent_log(tmp_path / "data", n=1)
    rows = [{"request": "could you get weather today", "tools": ["get_weather"]},
            {"request": "could you book hotel today", "tools": ["book_hotel"]},
            {"request": "could you cancel taxi today", "tools": ["cancel_taxi"]}]  # fmt: skip
    two, three = tmp_path / "two.jsonl", tmp_path / "three.jsonl"
    two.write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    three.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    code, _, err = run(["train", "--tools", str(tools), "--log", str(two), "--agent", "auto", "--out", str(out)])
    assert code == 2 and not out.exists(), err
    assert (f"{two}: 2 usable requests give 1 training and 1 test request (train fraction 0.7); --agent auto needs "
            "at least 2 training and 1 test request: at least 3 usable requests" in err), err  # fmt: skip
    assert "--train-frac" not in err and len(err.strip().splitlines()) == 1, err  # (2 requests: 1 to train, whatever)
    flags = ["--agent", "auto", "--train-frac", "0.3", "--out", str(out)]
    code, _, err = run(["train", "--tools", str(tools), "--log", str(three), *flags])
    assert code == 2 and not out.exists(), err
    assert (f"{three}: 3 usable requests give 1 training and 2 test requests (train fraction 0.3); --agent auto "
            "needs at least 2 training and 1 test request: at least 5 usable requests, or another --train-frac"
            in err), err  # fmt: skip
    code, _, err = run(["recommend", "--tools", str(tools), "--log", str(two), "--out", str(out)])
    assert code == 2 and f"{two}: 2 usable requests give 1 training and 1 test request" in err and not out.exists()
    code, _, err = run(
        ["train", "--tools", str(tools), "--log", str(three), *TINY, "--agent", "auto", "--out", str(out)]
    )
    assert code == 0 and (out / "summary.csv").is_file(), err


# ------------------------------------------------------------------------------------------ default policy


def test_toolsearch_default_writes_the_lobo_table_and_a_policy_with_its_provenance(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """... and the manifest records the git state of the code that ran, taken before the fits: the tree turns
    dirty once the command has rewritten the shipped policies (here: every later look at it says dirty)."""
    import experiments.io

    looks = iter([{"git_sha": "a" * 40, "git_dirty": False}])
    monkeypatch.setattr(experiments.io, "git_state", lambda: next(looks, {"git_sha": "a" * 40, "git_dirty": True}))
    out, table = tmp_path / "policies", tmp_path / "table"
    args = ["toolsearch", "default", "--scorers", "bm25", "--benchmarks", "bfcl", "metatool", "--candidates",
            "threshold", "greedyk", "--n-boot", "200", "--out", str(out), "--table", str(table)]  # fmt: skip
    code, stdout, err = run(args)
    assert code == 0, err
    lobo = pd.read_csv(table / "lobo.csv")
    assert set(lobo["held_out"]) == {"bfcl", "metatool"} and set(lobo["scorer"]) == {"bm25"}
    assert {"bor-threshold", "bor-greedyk", "fixed-3", "fixed-5", "fixed-8", "gap"} == set(lobo["method"])
    assert set(lobo.loc[lobo["held_out"] == "bfcl", "n_queries"]) == {400}
    diffs = pd.read_csv(table / "lobo_diffs.csv")
    assert (
        len(diffs) == 2 * 2 * 4
        and (diffs["diff_lo"] <= diffs["diff"]).all()
        and (diffs["diff"] <= diffs["diff_hi"]).all()
    )
    means = lobo.groupby("method")["mean_reward_net"].mean()
    chosen = max(["bor-threshold", "bor-greedyk"], key=lambda m: means[m])
    readme = (table / "README.md").read_text()
    assert (
        f"Default for `bm25`: **{chosen}**" in readme
        and f"{chosen} (mean held-out net reward {means[chosen]:.3f}" in stdout
    )
    manifest = json.loads((table / "manifest.json").read_text())
    policy = sd.load_policy(out / "bm25")
    assert policy.method == chosen and policy.config["provenance"]["data_sha256"] == manifest["data_sha256"]
    assert policy.config["provenance"]["command"] == "shortlist " + " ".join(args)
    assert manifest["git_dirty"] is False and policy.config["provenance"]["git_dirty"] is False
    assert policy.config["n_train"] == 2400  # refitted on every query of both benchmarks
    assert ToolSearch.from_tools(openai_tools(), policy=out / "bm25").search("please get my news now").k >= 1
    code, _, err = run(["toolsearch", "default", "--benchmarks", "bfcl", "--out", str(out)])
    assert code == 2 and "two or more of bfcl, metatool, toolbench" in err


def test_toolsearch_latency_times_a_search_on_bfcl(saved: Path) -> None:
    code, out, err = run(["toolsearch", "latency", "--scorers", "bm25", "--requests", "5", "--warmup", "1",
                          "--policy", str(saved / "policy")])  # fmt: skip
    assert code == 0, err
    header, _, row = out.splitlines()
    assert header.startswith("| scorer | policy | tools | requests |")
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:4] == ["bm25", "bor-posterior", "370", "5"] and all(float(c) >= 0 for c in cells[4:])
    assert len(cells) == len(header.strip("|").split("|")) == 12


def test_a_study_run_serves_a_search_of_its_own_scorer_only(tmp_path: Path) -> None:
    """A run directory of ``shortlist train`` records its scorer (config) and the scorer identity (manifest): it
    serves a BM25 search, and a MiniLM search refuses it in one line."""
    code, _, err = run(["train", "--benchmark", "bfcl", "--scorer", "bm25", "--agent", "threshold", "--seeds", "1",
                        "--no-progress", "--out", str(tmp_path)])  # fmt: skip
    assert code == 0, err
    (run_dir,) = (tmp_path / "runs").iterdir()
    policy = sd.load_policy(run_dir)
    record = policy_scorer(policy)
    assert record["scorer"] == "bm25" and record["identity"]["rank"]["scorer"] == "bm25"
    assert ToolSearch.from_tools(openai_tools(), policy=run_dir).search("please get my news now").names[0] == "get_news"
    with pytest.raises(ValueError, match="policy bor-threshold was trained on bm25 scores, not minilm"):
        ToolSearch.from_tools(openai_tools(), scorer="minilm", policy=run_dir)
