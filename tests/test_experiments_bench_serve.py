"""``shortlist bench --sections toolsearch load`` (issue 38): the sections are chosen by their own flag and written
apart from the study's figures; the generated registry is deterministic and made of real words; the answered-once
check catches a lost, a duplicated and a failed request, and a fallback where none was meant; one tiny load run of
``serve openai`` (2 clients, 1 s) against the fake upstream answers every request once (a text that scores every
tool alike with every tool, as the proxy means to), and one of ``serve mcp`` (2 clients, 1 s) every call. The
figures are machine-dependent and not asserted."""

from __future__ import annotations

import types
from pathlib import Path

import pytest
from test_toolsearch import openai_tools

from experiments.bench_serve import (
    Sent,
    bench_load_mcp,
    bench_load_openai,
    check_once,
    generated_registry,
    openai_bodies,
    own_times,
    proxy_ms,
    tied_bodies,
)
from experiments.options import BenchArgs
from shortlist_depth import TrainedPolicy
from shortlist_depth.toolsearch import ToolSearch


def test_sections_have_their_own_flag_and_file() -> None:
    assert BenchArgs().sections == ("study",) and BenchArgs().output() == "results/bench.md"
    serve = BenchArgs(sections=("toolsearch", "load"))
    assert serve.output() == "results/bench-serve.md" and BenchArgs(sections=("load",), out="x.md").output() == "x.md"
    for bad, match in (({"sections": ("nope",)}, "--sections"), ({"duration": 0.0}, "--duration"),
                       ({"clients": 0}, "--clients")):  # fmt: skip
        with pytest.raises(ValueError, match=match):
            BenchArgs(**bad)


def test_the_generated_registry_is_seeded_and_made_of_the_given_words() -> None:
    texts = ["alpha beta gamma delta", "one two three four five six", "red green"]
    a, b = generated_registry(texts, 50, seed=3), generated_registry(texts, 50, seed=3)
    assert a == b and a != generated_registry(texts, 50, seed=4)
    assert len({t["name"] for t in a}) == 50
    vocabulary = {w for t in texts for w in t.split()}
    assert all(set(t["description"].split()) <= vocabulary for t in a)


def test_answered_once_catches_lost_duplicated_and_failed_requests() -> None:
    rows = [Sent("p-0-0", 200, 0.01, "2"), Sent("p-0-1", 200, 0.01, "3")]
    assert check_once(rows, {"p-0-0": 1, "p-0-1": 1}, True).startswith("all 2 answered")
    assert "1 lost" in check_once(rows, {"p-0-0": 1}, True)
    assert "1 duplicated" in check_once(rows, {"p-0-0": 2, "p-0-1": 1}, True)
    assert "1 failed (502 x1)" in check_once(
        [*rows[:1], Sent("p-0-1", 502, 0.01, None)], {"p-0-0": 1, "p-0-1": 1}, True
    )
    assert "(ReadError x1)" in check_once([*rows[:1], Sent("p-0-1", 0, 0.01, "ReadError")], {"p-0-0": 1}, True)
    assert "1 failed" in check_once([*rows[:1], Sent("p-0-1", 200, 0.01, None)], {"p-0-0": 1, "p-0-1": 1}, True)


def test_answered_once_takes_the_tied_fallback_only_where_the_text_is_tied() -> None:
    ids = {"p-0-0": 1, "p-0-1": 1}
    whole = Sent("p-0-1", 200, 0.01, None, 1.0, "tied scores", 7)  # body 7 sent with every tool
    shortlisted = Sent("p-0-0", 200, 0.01, "2", 1.0, None, 3)
    assert check_once([shortlisted, whole], ids, True, frozenset({7})) == (
        "all 2 answered 200 and received upstream exactly once; 1 of them, the texts that score every tool alike, "
        "sent with every tool (tied scores)"
    )
    assert "1 failed (tied scores x1)" in check_once([shortlisted, whole], ids, True)  # body 7 is not tied
    assert "1 failed (shortlisted for a tied text x1)" in check_once([shortlisted, whole], ids, True, frozenset({3, 7}))
    error = Sent("p-0-1", 200, 0.01, None, 1.0, "searcher error: DataError", 7)
    assert "(searcher error: DataError x1)" in check_once([shortlisted, error], ids, True)
    assert "(searcher error: DataError for a tied text x1)" in check_once(
        [shortlisted, error], ids, True, frozenset({7})
    )
    assert check_once([shortlisted, whole], ids, False).startswith("all 2 answered")  # straight: no header expected


def test_the_tied_bodies_are_the_texts_sharing_no_word_with_any_tool(tmp_path: Path) -> None:
    searcher = ToolSearch.from_tools(openai_tools(), policy=_fitted()).save(tmp_path / "searcher")
    assert tied_bodies(searcher, ["book a flight", "who discovered radium", "get the weather"]) == frozenset({1})


def test_a_tiny_load_run_answers_every_request_once(tmp_path: Path) -> None:
    import json

    tools = openai_tools()
    bodies = openai_bodies(tools, ["book a flight", "get the weather"])
    assert json.loads(bodies[1])["tools"] == tools
    searcher = ToolSearch.from_tools(tools, policy=_fitted()).save(tmp_path / "searcher")
    ba = types.SimpleNamespace(clients=2, duration=1.0)
    texts = ["book a flight", "get the weather", "who discovered radium"]  # the last shares no word with any tool
    runs = bench_load_openai(ba, tools, texts, searcher, tmp_path)
    assert [r[0].split(":")[0] for r in runs] == ["2 client(s)", "2 client(s)", "1 client(s)", "1 client(s)",
                                                  "2 client(s)"]  # fmt: skip
    for what, rows, _, check, _, _ in runs:
        assert rows and check.startswith(f"all {len(rows):,} answered"), (what, check)
    for _, rows, _, check, _, _ in runs[1::2]:  # through the proxy: the tied text went with every tool, the rest not
        whole = [r for r in rows if r.body == 2]
        assert whole and all(r.fallback == "tied scores" and r.k is None for r in whole)
        assert f"; {len(whole):,} of them, the texts that score every tool alike, sent with every tool" in check
        assert all(int(r.k) >= 1 and r.fallback is None for r in rows if r.body != 2)
    recorded = runs[4]
    shortlisted = sum(1 for r in recorded[1] if r.fallback is None)
    assert "--record" in recorded[0] and recorded[3].endswith(
        f"each shortlisted answer's call recorded once ({shortlisted:,} lines, none for the "
        f"{len(recorded[1]) - shortlisted:,} sent with every tool)"
    )
    proxied = runs[1]
    assert "MiB" in proxied[4] and float(proxied[5]) > 0
    # the proxy's own time, read from its server-timing header: on every proxied request, within its latency
    assert all(0 < r[4] < 1e3 * r[2] for _, rows, *_ in runs[1::2] for r in rows)
    assert all(r[4] is None for _, rows, *_ in runs[0:4:2] for r in rows)  # straight to the upstream: no header
    p50, p99 = own_times(proxied[1]) or (0.0, 0.0)
    assert 0 < p50 <= p99 and own_times(runs[0][1]) is None


def test_a_tiny_mcp_load_run_answers_every_call(tmp_path: Path) -> None:
    tools = openai_tools()
    searcher = ToolSearch.from_tools(tools, policy=_fitted()).save(tmp_path / "searcher")
    ba = types.SimpleNamespace(clients=2, duration=1.0)
    searched, called = bench_load_mcp(ba, tools, ["book a flight", "get the weather"], searcher, tmp_path)
    assert searched[0] == "2 clients: `serve mcp` (http), search_tools" and searched[1] and called[1]
    n = len(searched[1]) + len(called[1])
    assert searched[3] == called[3] == f"all {n:,} answered, each echo its own call's"
    assert "MiB" in searched[4] and float(searched[5]) > 0


def test_the_proxys_own_time_is_read_from_its_server_timing_entry() -> None:
    assert proxy_ms("shortlist;dur=1.25") == 1.25
    assert proxy_ms("cdn;dur=9, shortlist;dur=0.50") == 0.5
    assert proxy_ms("cdn;dur=9") is None and proxy_ms(None) is None and proxy_ms("shortlist") is None
    rows = [("a", 200, 0.01, "3", 1.0), ("b", 200, 0.01, "3", 3.0), ("c", 200, 0.01, "3", None)]
    p50, p99 = own_times(rows) or (0.0, 0.0)
    assert p50 == 2.0 and 2.9 < p99 < 3.0


def _fitted() -> TrainedPolicy:
    from test_toolsearch import labelled_lists

    import shortlist_depth as sd

    return sd.fit("gap", labelled_lists(openai_tools()), seed=0)


def test_the_fastmcp_rows_time_both_search_transforms_and_count_their_tools() -> None:
    from test_toolsearch import requests

    from experiments.bench_serve import fastmcp_rows, fastmcp_section

    rows = fastmcp_rows(openai_tools(), requests(6), 10)
    assert rows is not None
    assert [r[0].split("(")[0] for r in rows] == ["BM25SearchTransform", "ShortlistSearchTransform"]
    bm25, ours = rows
    assert bm25[1:3] == ["100", "10"] and bm25[5] == "5.00" and bm25[6] == "5 / 5"  # FastMCP's fixed five
    assert float(ours[3]) > 0 and 1 <= float(ours[5]) <= 20
    assert len(fastmcp_section(rows)) == 2 and fastmcp_section(None) == []
