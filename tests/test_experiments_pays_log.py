"""``shortlist toolsearch pays --tools --log``: does the tool search pay on your registry, log and LLM? Run end to end
against a real OpenAI-compatible server on 127.0.0.1 (the fake upstream, calling a tool by a stated rule): the
requests judged are recommend's test split; the chooser is asked only the (request, K) some method shows and whose
top K holds a called tool, each once (a rerun asks nothing); end to end is recomputed here from the rule; a request
with two called tools counts either; an --out of other inputs is refused and left as it was; the key is never
written; the simulated chooser is named as simulated; bad options are refused in one line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
from test_experiments_toolsearch import run
from test_experiments_toolsearch_pays import FAKE_TOKENIZER, TINY_SET
from test_toolsearch import TOPICS, VERBS, openai_tools

from benchmarks.split import seeded_split
from benchmarks.toollog import read_tool_log
from choosers import Tool
from experiments.downstream_choices import DownstreamQuery, choices_table
from experiments.options import ToolsearchPaysArgs
from experiments.pays_log import (
    asked_depths,
    check_out_is_ours,
    depth_frame,
    log_queries,
    ranked_requests,
    run_pays_log,
)
from experiments.report.page import split_page
from servers.fakes import Received, fake_openai_app, picked_tool, serve_in_thread

KEY_ENV = "SHORTLIST_TEST_PAYS_KEY"
SECRET = "sk-test-PAYS-5a1e0b"


def write_inputs(folder: Path, n: int = 60) -> tuple[Path, Path]:
    """The 100 generated tools and a log of ``n`` requests: some name their tool, some only its topic (the fake's
    rule then picks another verb), one in ten called a second tool too."""
    rng = np.random.default_rng(3)
    forms = ("please {v} my {t} now", "{t} things", "could you {v} some {t} for me")
    lines = []
    for i in range(n):
        v, t, form = VERBS[rng.integers(5)], TOPICS[rng.integers(20)], forms[rng.integers(3)]
        called = [f"{v}_{t}"]
        text = form.format(v=v, t=t) + f" (#{i})"
        if i % 10 == 0:  # a second tool called, and named in the request: the fake's rule picks it
            called.append(f"{VERBS[(VERBS.index(v) + 1) % 5]}_{t}")
            text = f"{t} things, then {called[1]} (#{i})"
        lines.append(json.dumps({"request": text, "tools": called}))
    folder.mkdir(parents=True, exist_ok=True)
    tools, log = folder / "tools.json", folder / "log.jsonl"
    tools.write_text(json.dumps(openai_tools()))
    log.write_text("\n".join(lines) + "\n")
    return tools, log


@pytest.fixture(scope="module")
def upstream() -> Any:
    """The fake OpenAI-compatible server on 127.0.0.1 with its tool-picking rule: (its /v1 URL, what it received)."""
    received = Received(keep=100_000)
    with serve_in_thread(fake_openai_app(received, pick=True)) as url:
        yield f"{url}/v1", received


def args_for(url: str, tools: Path, log: Path, out: Path, cache: Path, **kw: Any) -> ToolsearchPaysArgs:
    return ToolsearchPaysArgs(tools=str(tools), log=str(log), out=str(out), cache_dir=str(cache), chooser="openai",
                              base_url=url, model="fake-model", api_key_env=KEY_ENV, n_boot=200, set=TINY_SET,
                              **kw)  # fmt: skip


@pytest.fixture(scope="module")
def paid(upstream: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One pays on the generated log, asked of the fake: its folder, inputs and how many requests it sent."""
    url, received = upstream
    root = tmp_path_factory.mktemp("pays")
    tools, log = write_inputs(root / "in")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, SECRET)
        before = received.count
        out = run_pays_log(args_for(url, tools, log, root / "pays", root / "cache"), "pays test", len, FAKE_TOKENIZER)
        asked = received.count - before
    return {"out": out, "tools": tools, "log": log, "root": root, "asked": asked, "url": url}


def logged(paid: dict[str, Any]) -> dict[str, Any]:
    """The module log's requests by query id, as recommend reads them."""
    return {r.qid: r for r in read_tool_log(paid["log"], [t["function"]["name"] for t in openai_tools()]).records}


def test_the_requests_judged_are_recommends_test_split(paid: dict[str, Any]) -> None:
    rows = pd.read_csv(paid["out"] / "per_query.csv", dtype={"qid": str})
    qids = sorted(logged(paid))
    _, test = seeded_split(len(qids), 0.7, 0)
    assert sorted(set(rows["qid"])) == sorted(qids[i] for i in test)
    assert set(rows["method"]) == {"recommended", "default", "fixed-3", "fixed-5", "fixed-8"}
    assert len(rows) == 5 * len(test)
    manifest = json.loads((paid["out"] / "manifest.json").read_text())
    assert manifest["policies"]["recommended"]["n_test"] == len(test)
    assert manifest["identity"]["chooser_model"] == "fake-model"


def test_end_to_end_follows_the_choosers_rule_and_any_called_tool_counts(paid: dict[str, Any]) -> None:
    """Recomputed here: the top K holds a called tool, and the fake's rule, shown those K tools, picks a called one."""
    rows = pd.read_csv(paid["out"] / "per_query.csv", dtype={"qid": str})
    records = logged(paid)
    choices = pd.read_csv(paid["out"] / "choices.csv", dtype={"qid": str})
    shown = {(r.qid, int(r.k)): r for r in choices.itertuples()}
    as_logged = {row["request"]: row["tools"] for row in map(json.loads, paid["log"].read_text().splitlines())}
    several = second = 0
    for r in rows.itertuples():
        called = set(records[r.qid].gold)
        several += len(called) > 1
        if r.gold_rank > r.k:
            assert r.e2e == 0 and (r.qid, r.k) not in shown  # a top K without a called tool is never asked
            continue
        asked = shown[(r.qid, int(r.k))]
        ranked = _ranking(paid, records[r.qid].text, int(r.k))
        body = {"tools": [{"type": "function", "function": {"name": n}} for n in ranked],
                "messages": [{"role": "user", "content": records[r.qid].text}]}  # fmt: skip
        expected = picked_tool(body)
        assert asked.chosen_tool == expected
        assert r.e2e == int(expected in called)
        second += int(len(called) > 1 and expected == as_logged[records[r.qid].text][1] and r.e2e == 1)
    assert several and second  # a multi-tool request judged, and its second called tool picked counts


def test_each_policys_k_is_the_one_its_tool_search_shows(paid: dict[str, Any]) -> None:
    """recommended's K is its searcher's, default's the shipped policy's (neither swapped nor the other's)."""
    from shortlist_depth.toolsearch import ToolSearch

    rows = pd.read_csv(paid["out"] / "per_query.csv", dtype={"qid": str})
    records = logged(paid)
    searchers = {"recommended": ToolSearch.load(paid["out"] / "runs" / "recommend-bm25" / "searcher"),
                 "default": ToolSearch.from_file(paid["tools"], "bm25")}  # fmt: skip
    differ = 0
    for method, search in searchers.items():
        mine = rows[rows["method"] == method]
        shown = [len(search.search(records[q].text, max_k=None).names) for q in mine["qid"]]
        assert list(mine["policy_k"]) == shown, method
        differ += sum(a != b for a, b in zip(shown, rows[rows["method"] == "recommended"]["policy_k"], strict=True))
    assert differ  # the two policies choose differently somewhere: a swap would be seen


def _ranking(paid: dict[str, Any], text: str, k: int) -> list[str]:
    """The top k tool names of a judged request, as the recommended searcher ranks it."""
    from shortlist_depth.toolsearch import ToolSearch

    if "search" not in paid:
        paid["search"] = ToolSearch.load(paid["out"] / "runs" / "recommend-bm25" / "searcher")
    n = len(paid["search"].tools)
    return list(paid["search"].search(text, min_k=n, max_k=n).names[:k])


def test_the_chooser_is_asked_each_needed_shortlist_once_and_a_rerun_asks_nothing(
    paid: dict[str, Any], upstream: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    rows = pd.read_csv(paid["out"] / "per_query.csv", dtype={"qid": str})
    choices = pd.read_csv(paid["out"] / "choices.csv", dtype={"qid": str})
    needed = {(q, k) for q, k, g in zip(rows["qid"], rows["k"], rows["gold_rank"], strict=True) if g <= k}
    assert set(zip(choices["qid"], choices["k"], strict=True)) == needed
    assert paid["asked"] == len(choices) == len(needed)
    url, received = upstream
    monkeypatch.setenv(KEY_ENV, SECRET)
    before = received.count
    args = args_for(url, paid["tools"], paid["log"], paid["out"], paid["root"] / "cache")
    run_pays_log(args, "pays test", len, FAKE_TOKENIZER)
    assert received.count == before  # every answer from the cache
    again = pd.read_csv(paid["out"] / "per_query.csv", dtype={"qid": str})
    pd.testing.assert_frame_equal(again, rows)
    assert pd.read_csv(paid["out"] / "choices.csv")["cached"].all()


def test_the_key_is_never_written(paid: dict[str, Any]) -> None:
    for path in paid["root"].rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_the_page_answers_first(paid: dict[str, Any]) -> None:
    _, answer, after = split_page((paid["out"] / "README.md").read_text())
    assert "held-out requests" in answer and "recommended minus fixed-3: end to end" in answer
    assert "Given a tool the agent called is among the K shown" in answer
    assert "no policy was trained on them, and none was picked on them" in after
    assert "Only 18 requests were judged (fewer than 30): the intervals are wide" in answer  # 30% of 60
    methods = pd.read_csv(paid["out"] / "methods.csv")
    plotted = pd.read_csv(paid["out"] / "figures" / "pays.csv")
    np.testing.assert_allclose(plotted["e2e_pct"], methods["e2e_pct"])


def test_an_out_of_other_inputs_is_refused_and_left_as_it_was(
    paid: dict[str, Any], upstream: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    url, _ = upstream
    monkeypatch.setenv(KEY_ENV, SECRET)
    other = paid["root"] / "other.jsonl"
    other.write_text(paid["log"].read_text() + json.dumps({"request": "list my news", "tools": ["list_news"]}) + "\n")
    before = {p: p.read_bytes() for p in paid["out"].rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match=r"holds the pays of other inputs \(log_sha256"):
        run_pays_log(args_for(url, paid["tools"], other, paid["out"], paid["root"] / "cache"), "x", len,
                     FAKE_TOKENIZER)  # fmt: skip
    with pytest.raises(ValueError, match=r"chooser_model 'fake-model' -> 'another-model'"):
        args = args_for(url, paid["tools"], paid["log"], paid["out"], paid["root"] / "cache")
        run_pays_log(ToolsearchPaysArgs(**{**args.__dict__, "model": "another-model"}), "x", len, FAKE_TOKENIZER)
    assert {p: p.read_bytes() for p in paid["out"].rglob("*") if p.is_file()} == before
    bfcl = paid["root"] / "bfcl-like"
    bfcl.mkdir()
    (bfcl / "manifest.json").write_text(json.dumps({"command": "shortlist toolsearch pays"}))
    with pytest.raises(ValueError, match=r"holds another command's results"):
        check_out_is_ours(bfcl, {})
    mine = json.loads((paid["out"] / "manifest.json").read_text())["identity"]
    with pytest.raises(ValueError, match=r"chooser_runtime 'http://127.0.0.1:\d+/v1' -> 'http://elsewhere/v1'"):
        check_out_is_ours(paid["out"], {**mine, "chooser_runtime": "http://elsewhere/v1"})
    yours = paid["root"] / "yours"
    (yours / "figures").mkdir(parents=True)
    (yours / "figures" / "architecture.png").write_bytes(b"png")
    with pytest.raises(ValueError, match=r"holds files that are not a pays of yours \(figures\)"):
        check_out_is_ours(yours, mine)
    (yours / "figures" / "architecture.png").unlink()
    (yours / "figures").rmdir()
    (yours / "runs").mkdir()
    check_out_is_ours(yours, mine)  # an earlier try's recommend runs only: this command's own


def test_an_endpoint_that_calls_no_tool_stops_the_command(
    paid: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)
    out = paid["root"] / "texts"
    cached = paid["root"] / "cache" / "choices"
    before = sorted(cached.rglob("*"))
    with serve_in_thread(fake_openai_app()) as url:  # answers every request in text
        args = args_for(f"{url}/v1", paid["tools"], paid["log"], out, paid["root"] / "cache",
                        runs_dir=str(paid["out"] / "runs"), limit=4)  # fmt: skip
        with pytest.raises(
            ValueError,
            match=r"called no listed tool on any of the \d+ shortlists asked \(\d+ "
            r"refused\): check --base-url and --model \(these \d+ answers were not",
        ):
            run_pays_log(args, "x", len, FAKE_TOKENIZER)
    assert not (out / "README.md").exists()
    assert sorted(p for p in cached.rglob("*") if p.is_file()) == [p for p in before if p.is_file()]  # none kept


def test_the_simulated_chooser_is_named_as_simulated(paid: dict[str, Any]) -> None:
    out = paid["root"] / "simulated"
    args = ToolsearchPaysArgs(tools=str(paid["tools"]), log=str(paid["log"]), out=str(out), chooser="simulated",
                              cache_dir=str(paid["root"] / "cache"), n_boot=200, set=TINY_SET, limit=8,
                              runs_dir=str(paid["out"] / "runs"))  # fmt: skip
    run_pays_log(args, "pays simulated", len, FAKE_TOKENIZER)
    page = (out / "README.md").read_text()
    assert "simulated chooser, not an LLM" in split_page(page)[1]
    assert "Only 8 requests were judged (fewer than 30)" in split_page(page)[1]
    assert pd.read_csv(out / "per_query.csv")["qid"].nunique() == 8


def test_choices_count_any_relevant_tool() -> None:
    """A request with two called tools: picking either is correct; only the Ks asked for that request are asked."""

    class First:
        name, runtime_id, model_id = "first", "t", "m"

        def choose_prefixes(self, query: str, ranked: list[Tool], ks: list[int]) -> dict[int, Any]:
            from choosers import Choice

            return {k: Choice(k - 1, "ok", ranked[k - 1].name) for k in ks}  # the last tool shown

        def request_digest(self, query: str, tools: list[Tool]) -> str:
            return "0" * 64

    class Refuses(First):
        def choose_prefixes(self, query: str, ranked: list[Tool], ks: list[int]) -> dict[int, Any]:
            from choosers import Choice

            return {k: Choice(None, "refused") for k in ks}

    tools = [Tool(f"t{i}", "", {}) for i in range(1, 7)]
    q = DownstreamQuery("q", "text", tools, 2, "t2", (2, 5))
    got = choices_table(First(), [q], {"q": [1, 2, 3, 5]}, progress=False)  # type: ignore[arg-type]
    assert list(got["k"]) == [2, 3, 5] and list(got["correct"]) == [1, 0, 1]
    refused = choices_table(Refuses(), [q], {"q": [2, 5]}, progress=False)  # type: ignore[arg-type]
    assert list(refused["correct"]) == [0, 0] and list(refused["chosen_rank"]) == [0, 0]
    depths = pd.DataFrame({"qid": ["a", "a", "b"], "policy_k": [3, 40, 3]})
    assert asked_depths(depths, 20) == {"a": [3, 20], "b": [3]}
    small = [DownstreamQuery("a", "x", tools, 1, "t1")]  # 6 tools: a limit of 8 shows all 6
    frame = depth_frame("c", "bm25", small, {"recommended": [2]}, {"recommended": "bor-x"}, (3, 8))
    assert list(frame["policy_k"]) == [2, 3, 6]


def test_a_request_with_no_ranking_information_is_shown_one_tool_and_rankings_must_agree() -> None:
    from shortlist_depth.toolsearch import ToolSearch

    search = ToolSearch.from_tools(openai_tools(), "bm25")
    rankings, ks = ranked_requests(search, ["zzz qqq", "please get my weather now"], "x")
    assert ks[0] == 1 and len(rankings[0]) == 100  # every score ties: the tool search shows 1
    assert ks[1] == len(search.search("please get my weather now", max_k=None).names)

    class Reversed:
        tools = search.tools

        def search_many(self, texts: list[str], **kw: Any) -> list[Any]:
            got = search.search_many(texts, **kw)
            return [type(s)(**{**s.__dict__, "names": s.names[::-1], "scores": s.scores[::-1]}) if len(s.names) == 100
                    else s for s in got]  # fmt: skip

    records = {"L1": type("R", (), {"text": "please get my weather now", "gold": ("get_weather",)})()}
    tools = {t["function"]["name"]: type("T", (), {"description": "", "parameters": {}})() for t in openai_tools()}
    with pytest.raises(ValueError, match=r"request L1: the default policy's tool search ranks it differently"):
        log_queries(tools, records, search, Reversed(), ["L1"], "log.jsonl")


def test_the_cache_dir_is_checked_in_both_modes(tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    for kw in ({}, {"tools": "t.json", "log": "l.jsonl"}):
        with pytest.raises(ValueError, match=r"--cache-dir .*afile: exists and is not a folder"):
            ToolsearchPaysArgs(cache_dir=str(afile), **kw)


def test_bad_options_are_refused_in_one_line(tmp_path: Path) -> None:
    tools, log = write_inputs(tmp_path / "in", n=10)
    cases = [
        (["--chooser", "openai"], "--chooser goes with --tools/--log"),
        (["--tools", str(tools)], "--tools and --log go together"),
        (["--tools", str(tools), "--log", str(log), "--scorers", "bm25"], "--scorers goes with BFCL"),
        (["--tools", str(tools), "--log", str(log), "--chooser", "openai"], "--chooser openai needs --base-url"),
        (["--tools", str(tools), "--log", str(log), "--fixed", "3", "25"], "--fixed: distinct limits in 1..20"),
        (["--tools", str(tools), "--log", str(log), "--scorer", "fused"], "--scorer: bm25, minilm or hybrid"),
        (["--tools", str(tools), "--log", str(tmp_path)], "a folder is one `shortlist serve --record` wrote"),
    ]
    for flags, message in cases:
        code, _, err = run(["toolsearch", "pays", *flags, "--out", str(tmp_path / "out")])
        assert code == 2 and message in err and "Traceback" not in err, (flags, err)
    assert not (tmp_path / "out").exists()
    ok = ToolsearchPaysArgs(tools=str(tools), log=str(log), max_k=30, fixed=(3, 25))
    assert ok.out == "pays" and ok.fixed == (3, 25)


def test_a_test_request_missing_from_the_log_is_named_with_the_two_reasons() -> None:
    """A recommendation whose test ids the log no longer holds (the log changed, or the run named requests by
    their line, as before ids came from the text): one error naming the log and the request, before any search."""
    from experiments.pays_log import log_queries

    with pytest.raises(ValueError, match=r"log\.jsonl: no request 'L0007' of recommend's test split: the log changed"):
        log_queries({}, {"Rabc": object()}, None, None, ["Rabc", "L0007"], "log.jsonl")
