"""``shortlist toolsearch pays`` (issue 38): end to end and tool-definition tokens per query and method on a
handmade choices table with a fake tokenizer; a missing answer is an error naming the query and K; the tool
search's ranking is checked against the condition's; the tools array counted is the one httpx sends; the default
policy evaluated is the leave-BFCL-out one when the shipped one saw BFCL (checked against the LOBO table); and the
command end to end on six BFCL test queries with the committed choices."""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

import httpx
import numpy as np
import pandas as pd
import pytest
from conftest import TINY_RECOMMEND_SET
from test_experiments_toolsearch import run
from test_toolsearch import labelled_lists, openai_tools

import shortlist_depth as sd
import shortlist_depth.toolsearch as ts
from agents.trained import TrainedPolicy
from benchmarks.tool_ranking import RegistryRanker
from choosers import Tool
from choosers.openai_api import openai_tools as wire_tools
from choosers.openai_api import tools_json
from experiments.cli import main
from experiments.downstream_choices import DownstreamQuery
from experiments.options import ToolsearchPaysArgs
from experiments.report.page import read_meta, split_page
from experiments.report.pays_page import FIGURE_COLUMNS
from experiments.report.pays_tables import method_table, paired_table, pays_rows, token_counter, verdict
from experiments.toolsearch import (
    bfcl_requests,
    check_ranking,
    default_policy,
    leave_bfcl_out,
    policy_depths,
    run_pays,
)

REPO = Path(__file__).resolve().parents[1]
#: Tiny learner budgets for the recommend run: these tests check the wiring, not the learners.
TINY_SET = TINY_RECOMMEND_SET
FAKE_TOKENIZER = {"model": "fake (characters)", "gguf_sha256": "-", "tokenizer": "len", "tokenizer_json_sha256": "-",
                  "transformers": "-"}  # fmt: skip


def tool(i: int) -> Tool:
    return Tool(f"t{i}", f"does {i}", {"type": "dict", "properties": {"x": {"type": "float"}}})


def handmade() -> tuple[dict[str, dict[str, DownstreamQuery]], pd.DataFrame, pd.DataFrame]:
    """Two queries of condition ``c`` (gold at rank 1 and 3, 20 and 30 tools), three methods' Ks (one above the
    cap of 20, one missing the gold), and the answers those Ks need."""
    queries = {"c": {"q1": DownstreamQuery("q1", "first", [tool(i) for i in range(1, 21)], 1, "t1"),
                     "q2": DownstreamQuery("q2", "second", [tool(i) for i in range(21, 51)], 3, "t23")}}  # fmt: skip
    ks = {"default": (1, 25), "fixed-1": (1, 1), "fixed-3": (3, 3)}
    depths = pd.DataFrame(
        [{"condition": "c", "scorer": "bm25", "method": m, "policy": "bor-x" if m == "default" else m, "qid": q,
          "gold_rank": g, "policy_k": k}
         for m, pair in ks.items() for q, g, k in zip(("q1", "q2"), (1, 3), pair, strict=True)]
    )  # fmt: skip
    choices = pd.DataFrame({"condition": "c", "qid": ["q1", "q1", "q2", "q2"], "k": [1, 3, 3, 20],
                            "correct": [1, 0, 1, 0]})  # fmt: skip
    return queries, depths, choices


def test_end_to_end_and_tokens_per_query_and_method() -> None:
    queries, depths, choices = handmade()
    calls: list[str] = []

    def count(text: str) -> int:  # a fake tokenizer: one token a character
        calls.append(text)
        return len(text)

    rows = pays_rows(depths, choices, token_counter(queries, count)).assign(chooser="local")
    got = rows.set_index(["method", "qid"])
    expected = {  # (K shown, capped, presented, end to end)
        ("default", "q1"): (1, 0, 1, 1), ("default", "q2"): (20, 1, 1, 0),
        ("fixed-1", "q1"): (1, 0, 1, 1), ("fixed-1", "q2"): (1, 0, 0, 0),  # gold at 3: a miss, no answer needed
        ("fixed-3", "q1"): (3, 0, 1, 0), ("fixed-3", "q2"): (3, 0, 1, 1),
    }  # fmt: skip
    for key, want in expected.items():
        assert tuple(got.loc[key, ["k", "capped", "presented", "e2e"]]) == want, key
    one = '[{"type":"function","function":{"name":"t1","description":"does 1","parameters":{"type":"object",'
    one += '"properties":{"x":{"type":"number"}}}}}]'  # BFCL's dict and float as JSON schema types, compact
    assert got.loc[("default", "q1"), "tokens"] == len(one) == len(tools_json([tool(1)]))
    for (_, qid), r in got.iterrows():
        assert r["tokens"] == len(tools_json(queries["c"][qid].ranked[: r["k"]]))
        assert r["tokens_uncapped"] == len(tools_json(queries["c"][qid].ranked[: r["policy_k"]]))
    assert got.loc[("default", "q2"), "tokens_uncapped"] > got.loc[("default", "q2"), "tokens"]  # 25 tools, not 20
    assert len(calls) == len(set(calls)) == 6  # each (condition, query, K) counted once: q1@1, 3; q2@20, 25, 1, 3
    m = method_table(rows, n_boot=200, seed=0).set_index("method")
    assert m.loc["default", ["e2e_pct", "n_capped", "mean_k", "mean_policy_k", "max_policy_k"]].tolist() == [
        50.0, 1, 10.5, 13.0, 25]  # fmt: skip
    assert m.loc["default", "tokens"] == (len(one) + len(tools_json(queries["c"]["q2"].ranked[:20]))) / 2
    assert m.loc["fixed-1", "presented_pct"] == 50.0 and m.loc["fixed-3", "e2e_pct"] == 50.0
    p = paired_table(rows, n_boot=200, seed=0).set_index(["method", "fixed"])
    assert list(p.index) == [("default", "fixed-1"), ("default", "fixed-3")]
    tok = rows.pivot(index="qid", columns="method", values="tokens")
    assert p.loc[("default", "fixed-3"), "tokens_diff"] == (tok["default"] - tok["fixed-3"]).mean()
    unc = rows.pivot(index="qid", columns="method", values="tokens_uncapped")
    assert p.loc[("default", "fixed-3"), "tokens_uncapped_diff"] == (unc["default"] - unc["fixed-3"]).mean()
    assert p.loc[("default", "fixed-3"), "tokens_uncapped_diff"] > p.loc[("default", "fixed-3"), "tokens_diff"]
    assert p.loc[("default", "fixed-3"), "e2e_diff"] == 0.0  # +100 on q1, -100 on q2
    assert ((p["e2e_diff_lo"] <= p["e2e_diff"]) & (p["e2e_diff"] <= p["e2e_diff_hi"])).all()


def test_verdicts_need_the_interval_to_exclude_zero() -> None:
    assert verdict(0.1, 2.0) == "higher" and verdict(-2.0, -0.1) == "lower" and verdict(-1.0, 1.0) == "within noise"
    assert verdict(-3.0, -1.0, ("more", "fewer")) == "fewer" and verdict(0.0, 1.0) == "within noise"


def test_a_missing_answer_is_an_error_naming_the_query_and_k() -> None:
    queries, depths, choices = handmade()
    lacking = choices[~((choices["qid"] == "q2") & (choices["k"] == 20))]
    with pytest.raises(ValueError, match=r"no choice for c query 'q2' at K = 20"):
        pays_rows(depths, lacking, token_counter(queries, len))


def test_the_tools_counted_are_the_bytes_httpx_sends() -> None:
    tools = [tool(1), Tool("area", "Berechnet die Fläche – ü", {"type": "dict", "properties": {"b": {"type": "any"}}})]
    body = {"tools": wire_tools(tools)}
    sent = httpx.Request("POST", "http://127.0.0.1:9/v1/chat/completions", json=body).content
    assert sent == ('{"tools":' + tools_json(tools) + "}").encode("utf-8")


def test_the_tool_search_ranking_is_checked_against_the_condition() -> None:
    ranked = [("a", 0.9), ("b", 0.5), ("c", 0.2), ("d", 0.1), ("e", 0.1)]
    assert check_ranking(ranked, ranked, "q7", "bfcl-bm25 default", exact=3) is None
    swapped = [("a", 0.9), ("c", 0.5), ("b", 0.5), ("d", 0.1), ("e", 0.1)]
    with pytest.raises(ValueError, match=r"bfcl-bm25 default: .* query 'q7' differently .* \(rank 2: 'c', the "):
        check_ranking(swapped, ranked, "q7", "bfcl-bm25 default", exact=3)
    tied = [("a", 0.9), ("b", 0.5), ("c", 0.2), ("e", 0.1 + 5e-6), ("d", 0.1)]  # a tie within the noise, past 3
    assert check_ranking(tied, ranked, "q7", "x", exact=3) == 4
    apart = [("a", 0.9), ("b", 0.5), ("c", 0.2), ("e", 0.1 + 2e-5), ("d", 0.1)]
    with pytest.raises(ValueError, match=r"scores query 'q7' differently .* \(rank 4: 'e' 0.10002.*more than 1e-05"):
        check_ranking(apart, ranked, "q7", "x", exact=3)
    with pytest.raises(ValueError, match=r"query 'q7': the tool search ranks 4 tools, the condition 5"):
        check_ranking(ranked[:4], ranked, "q7", "x", exact=3)
    policy = sd.fit("threshold", labelled_lists(openai_tools()), seed=0)
    search = ts.ToolSearch.from_tools(openai_tools(), policy=policy)
    texts = ["please get my weather now", "book a taxi today", "list the news"]
    whole = search.search_many(texts, min_k=100, max_k=100)
    tools = {t.name: t.schema["function"]["description"] for t in search.tools}
    queries = []
    for i, (text, s) in enumerate(zip(texts, whole, strict=True)):
        ranked = [Tool(n, tools[n], score=v) for n, v in zip(s.names, s.scores, strict=True)]
        queries.append(DownstreamQuery(f"q{i}", text, ranked, 1, s.names[0]))
    k, found = policy_depths(search, queries, "generated")
    assert k.tolist() == [s.k for s in search.search_many(texts)]
    assert found == {"queries": 3, "top_identical": 20, "differ_beyond_top": {}, "max_abs_score_diff": 0.0}
    swapped_tools = list(queries[1].ranked)
    swapped_tools[4], swapped_tools[5] = swapped_tools[5], swapped_tools[4]
    queries[1] = replace(queries[1], ranked=swapped_tools)
    with pytest.raises(ValueError, match=r"generated: the tool search ranks query 'q1' differently .* \(rank 5: "):
        policy_depths(search, queries, "generated")


def saved_policy(folder: Path, provenance: dict | None) -> Path:
    """A threshold policy for BM25 searches saved as a shipped default, with ``provenance`` (None: none)."""
    p = sd.fit("threshold", labelled_lists(openai_tools()), seed=0)
    ranker = RegistryRanker(["probe"], "bm25")  # the scorer's identity, as `shortlist toolsearch default` records it
    config = {**p.config, "toolsearch": {"scorer": "bm25", "identity": ranker.identity(), "observation": "score"}}
    if provenance is not None:
        config["provenance"] = provenance
    return TrainedPolicy(p.policy, p.episode, p.method, None, config).save(folder / "bm25", overwrite=True)


def test_a_shipped_policy_that_never_saw_bfcl_is_evaluated_as_shipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(ts, "DEFAULT_POLICY_DIR", tmp_path / "shipped")
    saved_policy(tmp_path / "shipped", {"trained_on": {"metatool": 2000}})
    args = ToolsearchPaysArgs(out=str(tmp_path / "out"), lobo=str(tmp_path / "no-table"))
    policy, info = default_policy("bm25", args, tmp_path / "runs")
    assert info["evaluated"] == "shipped" and policy.method == "bor-threshold" and not (tmp_path / "runs").exists()
    assert set(info["shipped_files_sha256"]) == {"config.json", "agent.json"}
    saved_policy(tmp_path / "shipped", None)
    with pytest.raises(ValueError, match=r"no provenance.trained_on: cannot tell whether it saw BFCL"):
        default_policy("bm25", args, tmp_path / "runs")


@pytest.fixture(scope="module")
def lobo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A small ``shortlist toolsearch default`` (BM25, BFCL and MetaTool, one candidate): the shipped policy (it
    saw BFCL) and its leave-one-benchmark-out table."""
    root = tmp_path_factory.mktemp("lobo")
    code, _, err = run(["toolsearch", "default", "--scorers", "bm25", "--benchmarks", "bfcl", "metatool",
                        "--candidates", "threshold", "--n-boot", "200", "--out", str(root / "policies"),
                        "--table", str(root / "table")])  # fmt: skip
    assert code == 0, err
    return root / "policies", root / "table"


def test_the_leave_bfcl_out_policy_must_be_the_one_the_table_judged(lobo: tuple[Path, Path], tmp_path: Path) -> None:
    policies, table = lobo
    shipped = sd.load_policy(policies / "bm25")
    other = shutil.copytree(table, tmp_path / "other")
    manifest = json.loads((other / "manifest.json").read_text())
    (other / "manifest.json").write_text(json.dumps({**manifest, "command": "shortlist toolsearch default --seed 1"}))
    with pytest.raises(ValueError, match=r"come from different runs of `shortlist toolsearch default`"):
        leave_bfcl_out(shipped, "bm25", other, None, None)
    (other / "manifest.json").write_text(json.dumps(manifest))
    rows = pd.read_csv(other / "lobo.csv")
    rows.loc[rows["held_out"] == "bfcl", "mean_reward_net"] += 0.01
    rows.to_csv(other / "lobo.csv", index=False)
    with pytest.raises(
        ValueError, match=r"bm25: bor-threshold refitted without BFCL gives net reward .*not the policy"
    ):
        leave_bfcl_out(shipped, "bm25", other, None, None)


def test_pays_end_to_end_on_six_bfcl_test_queries(
    lobo: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    policies, table = lobo
    monkeypatch.setattr(ts, "DEFAULT_POLICY_DIR", policies)
    out = tmp_path / "toolsearch"
    (out / "default-policy").mkdir(parents=True)
    (out / "default-policy" / "README.md").write_text("another command's page\n")
    args = ToolsearchPaysArgs(out=str(out), lobo=str(table), scorers=("bm25",), limit=6, n_boot=200, set=TINY_SET,
                              choices=str(REPO / "results/downstream/choices.csv"),
                              simulated_choices=str(REPO / "results/downstream-simulated/choices.csv"))  # fmt: skip
    run_pays(args, "shortlist toolsearch pays --limit 6", len, FAKE_TOKENIZER)
    assert (out / "default-policy" / "README.md").read_text() == "another command's page\n"  # merged, not replaced
    rows = pd.read_csv(out / "per_query.csv", dtype={"qid": str})
    assert len(rows) == 2 * 5 * 6 and set(rows["method"]) == {"default", "recommended", "fixed-3", "fixed-5", "fixed-8"}
    # end to end from the committed answers, read here independently of the command
    req = bfcl_requests("bm25", None, None, 6)
    for kind, name in (("local", "downstream"), ("simulated", "downstream-simulated")):
        ch = pd.read_csv(REPO / f"results/{name}/choices.csv", dtype={"qid": str})
        correct = ch[ch["condition"] == "bfcl-bm25"].set_index(["qid", "k"])["correct"].to_dict()
        mine = rows[rows["chooser"] == kind]
        assert (mine["e2e"] == [correct[(q, k)] if g <= k else 0 for q, k, g in
                                zip(mine["qid"], mine["k"], mine["gold_rank"], strict=True)]).all()  # fmt: skip
    ranked = {q.qid: q.ranked for q in req.queries}
    assert all(
        t == len(tools_json(ranked[q][:k])) for q, k, t in zip(rows["qid"], rows["k"], rows["tokens"], strict=True)
    )
    fixed3 = rows[(rows["method"] == "fixed-3")]
    assert (fixed3["k"] == 3).all() and (fixed3["policy"] == "fixed-3").all()
    methods = pd.read_csv(out / "methods.csv")
    assert len(methods) == 2 * 5 and (methods["n_queries"] == 6).all()
    paired = pd.read_csv(out / "paired.csv")
    assert len(paired) == 2 * 2 * 3 and ((paired["tokens_diff_lo"] <= paired["tokens_diff"])
                                         & (paired["tokens_diff"] <= paired["tokens_diff_hi"])).all()  # fmt: skip
    plotted = pd.read_csv(out / "figures" / "pays.csv")
    assert list(plotted.columns) == list(FIGURE_COLUMNS) and (out / "figures" / "pays.png").stat().st_size > 0
    np.testing.assert_allclose(plotted["e2e_pct"], methods["e2e_pct"])
    page = (out / "README.md").read_text()
    assert read_meta(page) == ("Does the tool search pay?", "tool search")
    _, answer, after = split_page(page)
    assert "bfcl-bm25, default minus fixed-3: end to end" in answer and "Sensitivity: the simulated chooser" in after
    assert "so it is **not** evaluated here" in after and "capped at 20" in after
    manifest = json.loads((out / "manifest.json").read_text())
    about = manifest["policies"]["bfcl-bm25"]
    assert about["default"]["evaluated"] == "leave-bfcl-out" and about["default"]["trained_on"] == {"metatool": 2000}
    assert about["default"]["bfcl_net_reward"] == pytest.approx(about["default"]["lobo_bfcl_net_reward"], rel=1e-8)
    assert manifest["tokenizer"] == FAKE_TOKENIZER and str(REPO / "results/downstream/choices.csv") in manifest[
        "inputs_sha256"]  # fmt: skip
    assert sd.load_policy(out / "runs" / "default-leave-bfcl-out-bm25").config["n_train"] == 2000
    recommended = ts.ToolSearch.load(out / "runs" / "recommend-bm25" / "out" / "searcher")
    assert about["recommended"]["method"] == recommended.policy.method == "bor-auto"


def test_pays_refuses_bad_options_and_fails_without_its_tokenizer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    code, _, err = run(["toolsearch", "pays", "--fixed", "3", "25", "--out", str(tmp_path / "a")])
    assert code == 2 and "--fixed: distinct limits in 1..20" in err
    code, _, err = run(["toolsearch", "pays", "--scorers", "bm25-hybrid", "--out", str(tmp_path / "a")])
    assert code == 2 and "--scorers: some of bm25, minilm" in err
    monkeypatch.setattr("choosers.local.MODEL_PACKAGE", "no_such_model_package")
    code, _, err = run(["toolsearch", "pays", "--out", str(tmp_path / "a")])
    assert code == 2 and "needs the model package no_such_model_package" in err and not (tmp_path / "a").exists()
    assert main(["toolsearch", "pays", "--n-boot", "10", "--out", str(tmp_path / "a")]) == 2
