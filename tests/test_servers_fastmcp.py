"""The tool search as a FastMCP search transform (:mod:`servers.fastmcp_search`): a FastMCP server with the
generated 100 tools, its listing replaced by ``search_tools`` and ``call_tool``, driven with FastMCP's own client in
memory. Its answer is the library's shortlist for the same tools (the same names, in rank order; the entry points
agree), where FastMCP's ``BM25SearchTransform`` answers its fixed 5; a saved searcher's policy is used; a tool found
is called through ``call_tool``; a catalog the searcher refuses returns every tool, logged."""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from fastmcp import Client, FastMCP
from fastmcp.server.transforms.search import BM25SearchTransform
from test_toolsearch import labelled_lists, mcp_tools, openai_tools, requests

import shortlist_depth as sd
from benchmarks.toollog import read_tool_log
from benchmarks.tools import read_tools_file
from servers.fakes import fake_fastmcp_server
from servers.fastmcp_search import FASTMCP_SEARCH_DESCRIPTION, ShortlistSearchTransform
from shortlist_depth.toolsearch import SEARCH_DESCRIPTION, ToolSearch


def server(transform: Any, tools: list[dict[str, Any]] | None = None) -> FastMCP:
    return fake_fastmcp_server(mcp_tools()["tools"] if tools is None else tools, transform)


def found(mcp: FastMCP, query: str) -> list[str]:
    async def ask() -> list[str]:
        async with Client(mcp) as client:
            result = await client.call_tool("search_tools", {"query": query})
        return [t["name"] for t in result.structured_content["result"]]

    return anyio.run(ask)


def test_search_tools_answers_the_librarys_shortlist_where_bm25_answers_5() -> None:
    mcp = server(ShortlistSearchTransform())
    library = ToolSearch.from_tools(mcp_tools())
    depths = set()
    queries = [*requests(8), "cancel my hotel booking and my flight", "list podcast news weather"]
    for query in queries:
        names = found(mcp, query)
        assert names == list(library.search(query).names), query
        depths.add(len(names))
    fixed = server(BM25SearchTransform(max_results=5))
    assert {len(found(fixed, q)) for q in queries} == {5}
    assert len(depths) > 1, depths  # (a per-request depth: not FastMCP's fixed five)


def test_the_listing_is_the_search_and_a_tool_found_is_called_through_call_tool() -> None:
    mcp = server(ShortlistSearchTransform(always_visible=["get_weather"]))

    async def run() -> tuple[list[str], str, str]:
        async with Client(mcp) as client:
            listed = await client.list_tools()
            search = next(t for t in listed if t.name == "search_tools")
            called = await client.call_tool("call_tool", {"name": "book_flight", "arguments": {"flight_id": "F1"}})
        return [t.name for t in listed], search.description or "", called.content[0].text  # type: ignore[union-attr]

    names, description, text = anyio.run(run)
    assert names == ["get_weather", "search_tools", "call_tool"] and description == FASTMCP_SEARCH_DESCRIPTION
    assert "call_tool" in description and description != SEARCH_DESCRIPTION  # (the listing holds only the two)
    assert text == 'book_flight ran with {"flight_id": "F1"}'
    assert "get_weather" not in found(mcp, "please get my weather now")  # (pinned: listed, never searched)


def test_a_saved_searchers_policy_and_the_bounds_are_used(tmp_path: Path) -> None:
    policy = sd.fit("posterior", labelled_lists(openai_tools()), seed=0)
    saved = ToolSearch.from_tools(openai_tools(), policy=policy).save(tmp_path / "searcher")
    library = ToolSearch.load(saved).with_tools(mcp_tools())
    query = "please book my flight now"
    assert found(server(ShortlistSearchTransform(saved)), query) == list(library.search(query).names)
    assert found(server(ShortlistSearchTransform(saved, min_k=4)), query) == list(
        library.search(query, min_k=4).names)  # fmt: skip
    assert len(found(server(ShortlistSearchTransform(max_k=2)), query)) <= 2
    assert "bor-posterior" in repr(ShortlistSearchTransform(saved))


@pytest.mark.parametrize(
    ("bounds", "said"),
    [
        ({"max_k": 0}, "max_k must be an integer >= 1, got 0"),
        ({"min_k": 0}, "min_k must be an integer >= 1"),
        ({"max_k": "5"}, "max_k must be an integer"),
        ({"max_k": 2.5}, "max_k must be an integer"),
        ({"min_k": 25}, "min_k=25 exceeds max_k="),
    ],  # fmt: skip
)
def test_bad_bounds_are_refused_when_the_transform_is_made(bounds: dict, said: str) -> None:
    """Not in every search, where each would fall back to every tool."""
    with pytest.raises(ValueError, match=re.escape(said)):
        ShortlistSearchTransform(**bounds)


def test_a_catalog_the_searcher_refuses_returns_every_tool_and_says_why(caplog: pytest.LogCaptureFixture) -> None:
    """A tool FastMCP serves whose schema the searcher refuses (``properties`` not an object): the search cannot
    improve on the catalog, so it answers all of it."""
    tools = [*mcp_tools()["tools"][:5], {"name": "odd", "description": "Odd.", "inputSchema": {
        "type": "object", "properties": []}}]  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="servers.fastmcp_search"):
        names = found(server(ShortlistSearchTransform(), tools), "please get my weather now")
    assert names == [t["name"] for t in tools]
    assert any("searcher failed" in m and "properties" in m for m in caplog.messages), caplog.messages


def test_a_changed_catalog_is_searched_as_it_is_now_and_searches_run_off_the_event_loop() -> None:
    """A tool added after the first search is found by the next; a tool replaced with another description is
    searched by the new one; each search runs in a worker thread (the event loop's stays free)."""
    import threading

    transform = ShortlistSearchTransform(max_k=3)
    mcp = server(transform, mcp_tools()["tools"][:20])
    threads: list[int] = []
    shortlist = transform._shortlist

    def spy(tools: Any, query: str) -> Any:
        threads.append(threading.get_ident())
        return shortlist(tools, query)

    transform._shortlist = spy  # type: ignore[method-assign]
    translate = {"name": "translate", "description": "Translate text into French.", "inputSchema": {"type": "object"}}

    async def session() -> list[list[str]]:
        answers = []
        async with Client(mcp) as client:
            for change in (None, translate, {**translate, "description": "Weather in Paris."}):
                if change is not None:
                    mcp.add_tool(await server(None, [change]).get_tool("translate"))
                result = await client.call_tool("search_tools", {"query": "translate this text into french"})
                answers.append([t["name"] for t in result.structured_content["result"]])
        threads.append(-threading.get_ident())
        return answers

    first, added, replaced = anyio.run(session)
    assert "translate" not in first and added[0] == "translate" and "translate" not in replaced
    loop = -threads.pop()
    assert len(threads) == 3 and loop not in threads and len(transform._prepared) == 3


def test_a_query_with_no_text_is_an_error_result_not_the_whole_catalog() -> None:
    async def ask() -> tuple[bool, str]:
        async with Client(server(ShortlistSearchTransform())) as client:
            result = await client.call_tool("search_tools", {"query": "  "}, raise_on_error=False)
        return result.is_error, result.content[0].text  # type: ignore[union-attr]

    failed, said = anyio.run(ask)
    assert failed and "the query has no text" in said


def test_recording_writes_each_call_with_the_search_it_followed_and_the_catalog(tmp_path: Path) -> None:
    """As ``serve mcp --record``: a call through ``call_tool`` is tied to the latest search whose answer holds it;
    a tool that fails was still the agent's choice; a name FastMCP refuses is no label. The folder reads as
    ``shortlist recommend --log`` reads it."""
    folder = tmp_path / "rec"
    transform = ShortlistSearchTransform(record=folder, always_visible=["list_weather"])
    mcp = server(transform)
    flights, weather = "please book my flight now", "please get my weather now"

    async def session() -> list[bool]:
        failed = []
        async with Client(mcp) as client:
            await client.call_tool("search_tools", {"query": flights})
            await client.call_tool("search_tools", {"query": weather})
            for name in ("book_flight", "get_weather", "cancel_flight", "no_such_tool", "search_tools", "list_weather"):
                result = await client.call_tool("call_tool", {"name": name, "arguments": {}}, raise_on_error=False)
                failed.append(result.is_error)
        return failed

    assert anyio.run(session) == [False, False, True, True, True, False]  # (list_weather: pinned, not written)
    lines = [json.loads(line) for line in (folder / "log.jsonl").read_text().splitlines()]
    assert [(w["request"], w["tools"]) for w in lines] == [
        (flights, ["book_flight"]), (weather, ["get_weather"]), (flights, ["cancel_flight"])]  # fmt: skip
    library = ToolSearch.from_tools(mcp_tools())
    assert lines[0]["shortlist"] == list(library.search(flights).names) and lines[0]["policy"] == "bor-topp"
    registry = read_tools_file(folder / "tools.json")
    assert [t.name for t in registry] == [t["name"] for t in mcp_tools()["tools"] if t["name"] != "list_weather"]
    log = read_tool_log(folder / "log.jsonl", [t.name for t in registry])
    assert len(log.records) == 2 and log.duplicates == 1 and not log.skipped  # (flights twice: one request)
    assert transform.recorder is not None and transform.recorder.written == 3
    transform.close()
    transform.close()  # again: nothing
    assert transform.recorder._fd is None  # noqa: SLF001 (the log closed: it says how many calls it wrote)
