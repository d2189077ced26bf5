"""``shortlist serve mcp`` (issue 38): ``search_tools`` answers the library's shortlist; in front of an upstream MCP
server, ``tools/list`` is ``search_tools`` plus the pinned tools and ``tools/call`` is forwarded (results and
errors relayed). The logic through the SDK's in-process client/server pair; the transports with one real stdio
process (the README's command, fronting a fake upstream it starts) and one streamable-HTTP server on 127.0.0.1,
both driven by the SDK's own client."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from conftest import REPO, cli_env
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ToolListChangedNotification
from test_servers_openai import readme_command, saved_searcher
from test_toolsearch import mcp_tools

from servers import policy_id
from servers.fakes import fake_mcp_server
from servers.listen import wait_announced
from servers.mcp_server import SEARCH_TOOL, SearchSettings, ShortlistServer
from servers.upstreams import Upstream, Upstreams
from shortlist_depth.toolsearch import ToolSearch

QUERY = "please book my flight now"


@pytest.fixture(scope="module")
def searcher_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return saved_searcher(tmp_path_factory)


@pytest.fixture(scope="module")
def searcher(searcher_dir: Path) -> ToolSearch:
    return ToolSearch.load(searcher_dir)


def names(answer: Any) -> list[str]:
    return [t["name"] for t in answer.structured_content["tools"]]


@asynccontextmanager
async def fronting(searcher: ToolSearch, pin: tuple[str, ...] = ()) -> AsyncIterator[tuple[Client, Upstreams]]:
    """A client of the server in front of an in-process fake upstream (the generated tools, MCP shape)."""
    async with Client(fake_mcp_server(mcp_tools()["tools"])) as up:
        upstream = Upstreams([Upstream(up)], searcher)
        async with Client(ShortlistServer(searcher, SearchSettings(pin=pin), upstream)) as client:
            yield client, upstream


def test_healthz_in_front_of_an_upstream_counts_its_tools(searcher: ToolSearch) -> None:
    async def go() -> httpx.Response:
        async with Client(fake_mcp_server(mcp_tools()["tools"][:7])) as up:
            upstream = Upstreams([Upstream(up)], searcher)
            await upstream.refresh()
            app = ShortlistServer(searcher, SearchSettings(), upstream).streamable_http_app(host="127.0.0.1")
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as c:
                return await c.get("/healthz")

    r = anyio.run(go)
    assert r.status_code == 200 and r.json()["tools"] == 7 and r.json()["server"] == "shortlist serve mcp"


def test_search_tools_answers_the_librarys_shortlist(searcher: ToolSearch) -> None:
    async def go() -> None:
        async with Client(ShortlistServer(searcher, SearchSettings(max_k=3))) as c:
            listed = await c.list_tools()
            assert [t.name for t in listed.tools] == [SEARCH_TOOL]
            assert listed.tools[0].input_schema["required"] == ["query"]
            answer = await c.call_tool(SEARCH_TOOL, {"query": QUERY})
        expected = searcher.search(QUERY, max_k=3)
        assert not answer.is_error and names(answer) == list(expected.names)
        first = answer.structured_content["tools"][0]
        assert first == {"name": "book_flight", "description": "Book flight entries; flight service for the user.",
                         "inputSchema": expected.tools[0]["function"]["parameters"]}  # fmt: skip
        assert answer.structured_content["k"] == expected.k and answer.structured_content["policy"] == "bor-posterior"
        assert json.loads(answer.content[0].text) == answer.structured_content  # the same JSON as text

    anyio.run(go)


def test_pinned_tools_come_first_and_a_blank_query_is_an_error(searcher: ToolSearch) -> None:
    async def go() -> None:
        async with Client(ShortlistServer(searcher, SearchSettings(pin=("list_podcast",)))) as c:
            answer = await c.call_tool(SEARCH_TOOL, {"query": QUERY})
            blank = await c.call_tool(SEARCH_TOOL, {"query": "  "})
        assert names(answer) == list(searcher.search(QUERY, pinned=["list_podcast"]).names)
        assert names(answer)[0] == "list_podcast"
        assert blank.is_error and "the query has no text" in blank.content[0].text

    anyio.run(go)
    with pytest.raises(ValueError, match="--pin: tool\\(s\\) not in the searcher's registry: \\['nope'\\]"):
        ShortlistServer(searcher, SearchSettings(pin=("nope",)))


def test_a_failing_searcher_answers_every_tool_and_why(searcher: ToolSearch, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("index gone")

    monkeypatch.setattr(ToolSearch, "search", broken)

    async def go() -> None:
        async with Client(ShortlistServer(searcher, SearchSettings())) as c:
            answer = await c.call_tool(SEARCH_TOOL, {"query": QUERY})
        assert not answer.is_error and answer.structured_content["fallback"] == "searcher error: RuntimeError"
        assert names(answer) == list(searcher.names)

    anyio.run(go)


def test_in_front_of_an_upstream_lists_search_and_pinned_and_forwards_calls(searcher: ToolSearch) -> None:
    async def go() -> None:
        async with fronting(searcher, pin=("get_weather",)) as (c, upstream):
            listed = await c.list_tools()
            assert [t.name for t in listed.tools] == [SEARCH_TOOL, "get_weather"]
            assert listed.tools[1] == upstream.tools["get_weather"]  # as the upstream lists it
            answer = await c.call_tool(SEARCH_TOOL, {"query": "get the weather and the news"})
            expected = upstream.searcher.search("get the weather and the news", exclude=["get_weather"])
            assert names(answer) == list(expected.names) and "get_weather" not in names(answer)
            called = await c.call_tool("book_flight", {"flight_id": "AF1"})
            assert not called.is_error
            assert json.loads(called.content[0].text) == {"tool": "book_flight", "arguments": {"flight_id": "AF1"}}
            failed = await c.call_tool("book_flight", {"fail": True})  # the upstream's error result, relayed
            assert failed.is_error and json.loads(failed.content[0].text)["arguments"] == {"fail": True}
            unknown = await c.call_tool("nope", {})
            assert unknown.is_error and "unknown tool 'nope'" in unknown.content[0].text
            with pytest.raises(MCPError) as refused:  # the upstream's MCP error, relayed with its code
                await c.call_tool("book_flight", {"mcp_error": True})
            assert refused.value.error.code == INVALID_PARAMS
            assert refused.value.error.message == "fake upstream refuses book_flight"

    anyio.run(go)


def test_the_upstream_list_is_read_again_after_it_changes(searcher: ToolSearch) -> None:
    async def go() -> None:
        async with fronting(searcher) as (c, upstream):
            await c.list_tools()
            first = upstream.searcher
            await c.call_tool(SEARCH_TOOL, {"query": QUERY})
            assert upstream.searcher is first  # cached
            await upstream.upstreams[0].on_message(ToolListChangedNotification())
            assert upstream.upstreams[0].stale
            await c.call_tool(SEARCH_TOOL, {"query": QUERY})
            assert not upstream.upstreams[0].stale and upstream.searcher is not first

    anyio.run(go)


def test_the_readme_command_over_stdio_fronts_an_upstream(searcher_dir: Path, tmp_path: Path) -> None:
    """The README's command, through the SDK's stdio client; the upstream a fake MCP server process."""
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(mcp_tools()), encoding="utf-8")
    argv = readme_command("mcp")
    argv[argv.index("--searcher") + 1] = str(searcher_dir)
    argv[argv.index("--upstream-command") + 1] = shlex.join([sys.executable, "-m", "servers.fakes", "mcp",
                                                             "--tools", str(tools)])  # fmt: skip
    pinned = argv[argv.index("--pin") + 1]
    params = StdioServerParameters(command=sys.executable, args=["-m", "experiments.cli", *argv[1:]], env=cli_env())

    async def go() -> None:
        async with Client(params) as c:
            listed = await c.list_tools()
            assert [t.name for t in listed.tools] == [SEARCH_TOOL, pinned]
            answer = await c.call_tool(SEARCH_TOOL, {"query": QUERY})
            assert "book_flight" in names(answer) and pinned not in names(answer)
            called = await c.call_tool("book_flight", {"flight_id": "AF1"})
            assert json.loads(called.content[0].text)["tool"] == "book_flight"

    anyio.run(go)


def test_streamable_http_on_127_0_0_1(searcher_dir: Path, tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "experiments.cli", "serve", "mcp", "--searcher", str(searcher_dir),
           "--transport", "http", "--port", "0"]  # fmt: skip
    log = tmp_path / "mcp.log"
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, stdout=err, stderr=subprocess.STDOUT, env=cli_env())

    async def go(url: str) -> None:
        async with Client(url) as c:
            answer = await c.call_tool(SEARCH_TOOL, {"query": QUERY})
            assert names(answer)[0] == "book_flight"

    try:
        url = wait_announced(log, proc)
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/mcp", url), url
        anyio.run(go, url)
        health = httpx.get(f"{url.removesuffix('/mcp')}/healthz", timeout=10)
        saved = ToolSearch.load(searcher_dir)
        assert health.status_code == 200 and health.json() == {
            "status": "ok", "server": "shortlist serve mcp", "scorer": saved.scorer,
            "policy": saved.policy.method, "tools": len(saved.tools), "policy_id": policy_id(saved.policy),
        }  # fmt: skip
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_readme_mcp_client_config_is_a_valid_command_line() -> None:
    from experiments import options as o
    from experiments.cli import build, make_parser

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```json\n\s*(.*?)```", readme, flags=re.S)
    (entry,) = json.loads(block)["mcpServers"].values()
    assert entry["command"] == "shortlist" and entry["args"][:2] == ["serve", "mcp"]
    args = build(o.ServeMcpArgs, make_parser().parse_args(entry["args"]))
    assert args.transport == "stdio" and args.upstream_command == "python my_mcp_server.py"


@pytest.mark.parametrize("upstream", ["not-an-mcp-server", "invalid-tool-list"])
def test_an_upstream_that_cannot_serve_is_a_one_line_error(searcher_dir: Path, tmp_path: Path, upstream: str) -> None:
    tools = tmp_path / "tools.json"
    bad = [{"name": "f", "description": "BFCL writes dict", "inputSchema": {"type": "dict", "properties": {}}}]
    tools.write_text(json.dumps(bad), encoding="utf-8")
    fake = [sys.executable, "-m", "servers.fakes", "mcp", "--tools", str(tools)]
    command = {"not-an-mcp-server": [sys.executable, "-c", "pass"], "invalid-tool-list": fake}[upstream]
    cmd = [sys.executable, "-m", "experiments.cli", "serve", "mcp", "--searcher", str(searcher_dir),
           "--upstream-command", shlex.join(command)]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, env=cli_env(), timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("shortlist: error: "), done.stderr  # (the upstream's own log comes before it)
    if upstream == "invalid-tool-list":
        assert "--upstream-command: the upstream's tools/list failed" in last
