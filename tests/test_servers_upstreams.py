"""``shortlist serve mcp`` in front of several upstream MCP servers (:mod:`servers.upstreams`): an MCP client's
``mcpServers`` config read (stdio, streamable HTTP and SSE entries, ``${VAR}`` from the environment, every bad entry a
one-line error naming it), one registry over every server's tools (``<server>_<tool>``), each call sent to its
server under the tool's own name. The logic in-process; the transports with real processes on 127.0.0.1: the
command over stdio, fronting a stdio, a streamable-HTTP (bearer token from the environment) and an SSE fake."""

from __future__ import annotations

import json
import logging
import re
import shlex
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import cli_env
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED
from test_toolsearch import mcp_tools

from servers.fakes import fake_mcp_server
from servers.listen import wait_announced
from servers.mcp_server import SEARCH_TOOL, SearchSettings, ShortlistServer
from servers.upstreams import Upstream, Upstreams, read_config, specs
from shortlist_depth.toolsearch import ToolSearch

TOOLS = mcp_tools()["tools"]
ONE, TWO = TOOLS[:60], TOOLS[40:]  # 20 names in both: told apart by their server's name
SECRET = "s3cret-token-never-logged"


def write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def names(answer: Any) -> list[str]:
    return [t["name"] for t in answer.structured_content["tools"]]


# --- the config file ---


def test_an_mcp_client_config_is_read_with_its_variables(tmp_path: Path) -> None:
    cfg = write(tmp_path / "claude_desktop_config.json", {"mcpServers": {
        "files": {"command": "npx", "args": ["-y", "server-fs", "${HOME_DIR:-/srv}"], "env": {"KEY": "${API_KEY}"}},
        "web": {"type": "http", "url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"}},
        "old": {"url": "http://127.0.0.1:9/sse", "transport": "sse"},
        "inferred": {"url": "http://127.0.0.1:9/mcp"},
        "off": {"command": "nope", "disabled": True},
    }})  # fmt: skip
    environ = {"API_KEY": "k-1", "TOKEN": SECRET}
    files, web, old, inferred = read_config(cfg, environ)
    assert (files.name, files.transport, files.command) == ("files", "stdio", ("npx", "-y", "server-fs", "/srv"))
    assert dict(files.env) == {"KEY": "k-1"}
    assert (web.transport, web.url, dict(web.headers)) == ("http", "https://mcp.example.com/mcp",
                                                           {"Authorization": f"Bearer {SECRET}"})  # fmt: skip
    assert (old.transport, inferred.transport) == ("sse", "http")
    assert SECRET not in repr(web) and "k-1" not in repr(files)  # keys are never shown
    assert web.where == f"{cfg}: server 'web'"
    vscode = write(tmp_path / "mcp.json", {"servers": {"x": {"type": "stdio", "command": "python", "args": ["s.py"]}}})
    assert [s.command for s in read_config(vscode, {})] == [("python", "s.py")]


def test_skipped_entries_are_said(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    cfg = write(tmp_path / "c.json", {"mcpServers": {
        "off": {"command": "a", "disabled": True},
        "itself": {"command": "shortlist", "args": ["serve", "mcp", "--upstream-config", "c.json"]},
        "kept": {"command": "python", "args": ["server.py"]},
    }})  # fmt: skip
    with caplog.at_level(logging.WARNING, logger="servers.upstreams"):
        assert [s.name for s in read_config(cfg, {})] == ["kept"]
    assert "server 'off': skipped (disabled)" in caplog.text
    assert "server 'itself': skipped (it runs shortlist serve mcp" in caplog.text


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"mcpServers": {\n  "a": {"command": "x",}\n}}', "c.json: line 2 column 24: not JSON"),
        ('["not", "a", "config"]', 'c.json: an MCP client config is an object with "mcpServers"'),
        ('{"mcpServers": {"a": "python s.py"}}', "c.json: server 'a': an entry is an object with command or url"),
        ('{"mcpServers": {"a": {"command": "x", "type": "websocket"}}}', "server 'a': type 'websocket' is not one of"),
        ('{"mcpServers": {"a": {"type": "stdio", "url": "http://h/mcp"}}}', "server 'a': a stdio server has a command"),
        ('{"mcpServers": {"a": {"type": "http", "command": "x"}}}', "server 'a': an http server has a url"),
        ('{"mcpServers": {"a": {"url": "ftp://h/mcp"}}}', "server 'a': url must be an http(s) URL with a host"),
        ('{"mcpServers": {"a": {"url": "http://h:99999/mcp"}}}', "server 'a': url 'http://h:99999/mcp'"),
        ('{"mcpServers": {"a": {"command": "x", "args": "-v"}}}', "server 'a': args must be a list of strings"),
        ('{"mcpServers": {"a": {"command": "x", "env": {"N": 1}}}}', "server 'a': env must be an object of strings"),
        ('{"mcpServers": {"a": {"url": "http://h/mcp", "headers": {"A": "${UNSET_VAR}"}}}}',
         "server 'a': headers.A: ${UNSET_VAR} is not set in the environment"),
        ('{"mcpServers": {}}', "c.json: no MCP server to front"),
        ('{"mcpServers": {"a": {"command": "x", "disabled": true}}}', "c.json: no MCP server to front"),
        ('{"mcpServers": {"my files": {"command": "x"}, "b": {"command": "y"}}}',
         "server 'my files': a name of letters, digits, _, - or ."),
    ],
)  # fmt: skip
def test_a_bad_config_is_a_one_line_error_naming_where(tmp_path: Path, content: str, message: str) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError) as refused:
        read_config(cfg, {})
    assert message in str(refused.value) and "\n" not in str(refused.value)
    assert str(cfg) in str(refused.value)


def test_the_flags_name_one_upstream_each() -> None:
    (command,) = specs(command="python my_server.py --verbose")
    assert (command.transport, command.command, command.where) == ("stdio", ("python", "my_server.py", "--verbose"),
                                                                   "--upstream-command")  # fmt: skip
    (url,) = specs(url="http://127.0.0.1:8000/mcp")
    assert (url.transport, url.where) == ("http", "--upstream-url")
    with pytest.raises(ValueError, match="--upstream-url must be an http"):
        specs(url="127.0.0.1:8000/mcp")
    with pytest.raises(ValueError, match="missing.json: No such file"):
        specs(config="missing.json")
    assert specs() == []


def test_the_cli_takes_one_upstream_flag() -> None:
    from experiments import options as o
    from experiments.cli import build, make_parser

    def args(*argv: str) -> o.ServeMcpArgs:
        return build(o.ServeMcpArgs, make_parser().parse_args(["serve", "mcp", *argv]))

    assert args("--upstream-config", "mcp.json").upstream_config == "mcp.json"
    with pytest.raises(ValueError, match="give one upstream flag, not --upstream-command and --upstream-url"):
        args("--upstream-command", "python s.py", "--upstream-url", "http://127.0.0.1:1/mcp")
    with pytest.raises(ValueError, match="--tools goes without --upstream-config"):
        args("--upstream-config", "mcp.json", "--tools", "t.json")


# --- one registry over several servers, in-process ---


@asynccontextmanager
async def two_servers(searcher: ToolSearch, pin: tuple[str, ...] = ()) -> AsyncIterator[tuple[Client, Upstreams]]:
    """A client of the server in front of two in-process fake upstreams, ``one`` and ``two``."""
    async with Client(fake_mcp_server(ONE)) as a, Client(fake_mcp_server(TWO)) as b:
        registry = Upstreams([Upstream(a, "one", "c.json: server 'one'"), Upstream(b, "two", "c.json: server 'two'")],
                             searcher)  # fmt: skip
        await registry.refresh(strict=True)
        async with Client(ShortlistServer(searcher, SearchSettings(pin=pin), registry)) as client:
            yield client, registry


@pytest.fixture(scope="module")
def searcher() -> ToolSearch:
    return ToolSearch.from_tools(TOOLS)


def test_several_servers_are_one_registry_each_call_sent_to_its_server(searcher: ToolSearch) -> None:
    async def go() -> None:
        async with two_servers(searcher, pin=("two_get_map",)) as (c, registry):
            assert list(registry.tools) == [f"one_{t['name']}" for t in ONE] + [f"two_{t['name']}" for t in TWO]
            listed = await c.list_tools()
            assert [t.name for t in listed.tools] == [SEARCH_TOOL, "two_get_map"]
            answer = await c.call_tool(SEARCH_TOOL, {"query": "please book my music now"})
            found = names(answer)
            expected = registry.searcher.search("please book my music now", exclude=["two_get_map"])
            assert found == list(expected.names) and {"one_book_music", "two_book_music"} & set(found)
            for server, tools in (("one", ONE), ("two", TWO)):
                tool = tools[-1]["name"]
                called = await c.call_tool(f"{server}_{tool}", {"x": 1})  # its own name, at its own server
                assert json.loads(called.content[0].text) == {"tool": tool, "arguments": {"x": 1}}
            unknown = await c.call_tool("book_flight", {})  # a name only an upstream knows
            assert unknown.is_error and "unknown tool 'book_flight'" in unknown.content[0].text

    anyio.run(go)


def test_two_servers_tools_of_one_name_are_refused_at_start_and_kept_out_later(searcher: ToolSearch) -> None:
    async def go() -> None:
        clash = [{"name": "book_flight", "description": "x", "inputSchema": {"type": "object"}}]
        other = [{"name": "flight", "description": "y", "inputSchema": {"type": "object"}}]
        async with Client(fake_mcp_server(clash)) as a, Client(fake_mcp_server(other)) as b:
            registry = Upstreams([Upstream(a, "one", "one"), Upstream(b, "one_book", "one_book")], searcher)
            with pytest.raises(ValueError, match="one_book: its tool 'flight' is named 'one_book_flight', as a tool "
                                                 "of one is"):  # fmt: skip
                await registry.refresh(strict=True)
            assert registry.searcher is None
            await registry.refresh()  # serving: logged, nothing built from it
            assert registry.tools == {}

    anyio.run(go)


class Broken:
    """A client whose connection is gone: the SDK's error when its server process has exited (or the stream's)."""

    def __init__(self, error: BaseException) -> None:
        self.error = error

    async def list_tools(self, **kw: Any) -> Any:
        raise self.error

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        raise self.error


@pytest.mark.parametrize(
    "error", [MCPError(CONNECTION_CLOSED, "Connection closed"), anyio.ClosedResourceError()], ids=["process", "stream"]
)
def test_an_upstream_gone_keeps_its_list_and_its_calls_are_error_results(
    searcher: ToolSearch, caplog: pytest.LogCaptureFixture, error: BaseException
) -> None:
    async def go() -> None:
        async with two_servers(searcher) as (c, registry):
            gone = registry.upstreams[1]
            gone.client = Broken(error)  # type: ignore[assignment]
            before = dict(registry.tools)
            gone.stale = True  # it said its list changed, then went
            with caplog.at_level(logging.WARNING):
                answer = await c.call_tool(SEARCH_TOOL, {"query": "please book my flight now"})
            assert not answer.is_error and registry.tools == before  # searched on its last list
            assert f"c.json: server 'two': tools/list failed, its last list kept: {type(error).__name__}" in caplog.text
            called = await c.call_tool("two_book_music", {})
            assert called.is_error and "the upstream (c.json: server 'two') failed on 'book_music'" in (
                called.content[0].text
            )
            fine = await c.call_tool("one_book_music", {})
            assert not fine.is_error

    anyio.run(go)


# --- the command, with real upstream processes on 127.0.0.1 ---


@contextmanager
def fake_upstream(
    tools: list[dict[str, Any]], transport: str, log: Path, env: dict[str, str], *extra: str
) -> Iterator[str]:
    """A fake MCP upstream process over ``transport`` (http or sse) on 127.0.0.1; its announced URL."""
    file = write(log.with_suffix(".tools.json"), tools)
    cmd = [sys.executable, "-m", "servers.fakes", "mcp", "--tools", str(file), "--transport", transport, "--port", "0",
           *extra]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        yield wait_announced(log, proc)
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_the_command_fronts_a_stdio_an_http_and_an_sse_server_from_one_config(tmp_path: Path) -> None:
    env = {**cli_env(), "FAKE_MCP_TOKEN": SECRET}
    third = TOOLS[80:]
    with ExitStack() as stack:
        guarded = ("--token-env", "FAKE_MCP_TOKEN")
        web = stack.enter_context(fake_upstream(TWO, "http", tmp_path / "web.log", env, *guarded))
        old = stack.enter_context(fake_upstream(third, "sse", tmp_path / "old.log", env))
        stdio = [sys.executable, "-m", "servers.fakes", "mcp", "--tools", str(write(tmp_path / "one.json", ONE))]
        cfg = write(tmp_path / "mcp.json", {"mcpServers": {
            "one": {"command": stdio[0], "args": stdio[1:]},
            "web": {"type": "http", "url": web, "headers": {"Authorization": "Bearer ${FAKE_MCP_TOKEN}"}},
            "old": {"type": "sse", "url": old},
        }})  # fmt: skip
        argv = ["-m", "experiments.cli", "serve", "mcp", "--upstream-config", str(cfg), "--pin", "web_get_map"]
        log = tmp_path / "shortlist.log"

        async def go() -> None:
            with log.open("w") as err:
                params = StdioServerParameters(command=sys.executable, args=argv, env=env)
                async with Client(stdio_params(params, err)) as c:
                    listed = await c.list_tools()
                    assert [t.name for t in listed.tools] == [SEARCH_TOOL, "web_get_map"]
                    answer = await c.call_tool(SEARCH_TOOL, {"query": "please book my music now"})
                    assert {"one_book_music", "web_book_music"} & set(names(answer)), names(answer)
                    for name in ("one_book_flight", "web_book_music", f"old_{third[0]['name']}"):
                        called = await c.call_tool(name, {"n": 2})
                        assert json.loads(called.content[0].text)["tool"] == name.split("_", 1)[1], name

        anyio.run(go)
    said = log.read_text(encoding="utf-8")
    assert "upstream 'web' lists 60 tools" in said and "upstream 'old' lists 20 tools" in said, said
    assert SECRET not in said


def stdio_params(params: StdioServerParameters, errlog: Any) -> Any:
    """The SDK's stdio transport of ``params``, the server's stderr written to ``errlog``."""
    from mcp.client.stdio import stdio_client

    return stdio_client(params, errlog=errlog)


def test_the_command_fronts_one_http_server_by_its_url(tmp_path: Path) -> None:
    env = cli_env()
    with fake_upstream(ONE, "http", tmp_path / "web.log", env) as url:
        argv = ["-m", "experiments.cli", "serve", "mcp", "--upstream-url", url]
        params = StdioServerParameters(command=sys.executable, args=argv, env=env)

        async def go() -> None:
            async with Client(params) as c:
                answer = await c.call_tool(SEARCH_TOOL, {"query": "please book my flight now"})
                assert names(answer)[0] == "book_flight"  # one upstream: its tools' own names
                called = await c.call_tool("book_flight", {})
                assert json.loads(called.content[0].text)["tool"] == "book_flight"

        anyio.run(go)


@pytest.mark.parametrize("case", ["wrong token", "nothing listening"])
def test_an_upstream_that_refuses_is_a_one_line_error_naming_it(tmp_path: Path, case: str) -> None:
    env = {**cli_env(), "FAKE_MCP_TOKEN": SECRET, "WRONG": "not-the-token"}
    with (
        fake_upstream(ONE, "http", tmp_path / "web.log", env, "--token-env", "FAKE_MCP_TOKEN") as url,
        socket.socket() as unheard,
    ):
        unheard.bind(("127.0.0.1", 0))  # bound, never listened on: a connection to it is refused
        if case == "nothing listening":
            url = f"http://127.0.0.1:{unheard.getsockname()[1]}/mcp"
        cfg = write(tmp_path / "mcp.json", {"mcpServers": {
            "web": {"url": url, "headers": {"Authorization": "Bearer ${WRONG}"}},
        }})  # fmt: skip
        cmd = [sys.executable, "-m", "experiments.cli", "serve", "mcp", "--upstream-config", str(cfg)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    because = {"wrong token": "(HTTP 401; MCPError: ", "nothing listening": "(ConnectError: "}[case]
    assert last.startswith(f"shortlist: error: {cfg}: server 'web': could not connect to the upstream {because}"), last
    assert "not-the-token" not in done.stderr and SECRET not in done.stderr
    assert shlex.split(last)  # one line


def test_the_docs_config_example_is_read(tmp_path: Path) -> None:
    from conftest import REPO

    docs = (REPO / "docs" / "servers.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```json\n(\s*\{\"mcpServers\".*?)```", docs, flags=re.S)
    cfg = tmp_path / "claude_desktop_config.json"
    cfg.write_text(block, encoding="utf-8")
    read = read_config(cfg, {"GITHUB_TOKEN": SECRET})
    assert [(s.name, s.transport) for s in read] == [("files", "stdio"), ("github", "http"), ("legacy", "sse")]
    assert read[1].headers == {"Authorization": f"Bearer {SECRET}"}
