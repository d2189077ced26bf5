"""``shortlist serve mcp`` in front of several upstream MCP servers (:mod:`servers.upstreams`): an MCP client's
``mcpServers`` config read (stdio, streamable HTTP and SSE entries, ``${VAR}`` from the environment, every bad entry a
one-line error naming it), one registry over every server's tools (``<server>_<tool>``), each call sent to its
server under the tool's own name. The logic in-process; the transports with real processes on 127.0.0.1: the
command over stdio, fronting a stdio, a streamable-HTTP (bearer token from the environment) and an SSE fake."""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import cli_env
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, INTERNAL_ERROR, ListToolsResult, Tool, ToolListChangedNotification
from test_toolsearch import mcp_tools

from servers.fakes import fake_mcp_server
from servers.listen import wait_announced
from servers.mcp_server import SEARCH_TOOL, SearchSettings, ShortlistServer, run
from servers.upstreams import (
    FRONTED,
    Upstream,
    Upstreams,
    client,
    close_all,
    connect,
    expand,
    read_config,
    specs,
)
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
    async with Client(fake_mcp_server(ONE, "one")) as a, Client(fake_mcp_server(TWO, "two")) as b:
        registry = Upstreams([Upstream(a, "one", "c.json: server 'one'"), Upstream(b, "two", "c.json: server 'two'")],
                             searcher, reserved=[SEARCH_TOOL])  # fmt: skip
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
            for server in ("one", "two"):  # a name both servers have: each call at its own server, its own name
                called = await c.call_tool(f"{server}_book_music", {"x": 1})
                said = {"tool": "book_music", "arguments": {"x": 1}, "server": server}
                assert json.loads(called.content[0].text) == said
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
        self.listed = 0

    async def list_tools(self, **kw: Any) -> Any:
        self.listed += 1
        raise self.error

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
        raise self.error


@pytest.mark.parametrize(
    "error", [MCPError(CONNECTION_CLOSED, "Connection closed"), anyio.ClosedResourceError()], ids=["process", "stream"]
)
@pytest.mark.parametrize("seen_by", ["call", "list"])
def test_an_upstream_gone_is_dropped_and_its_calls_are_error_results(
    searcher: ToolSearch, caplog: pytest.LogCaptureFixture, error: BaseException, seen_by: str
) -> None:
    """A stdio server's exit is seen by the next call or list (its transport does not end): its tools leave the
    search, its calls are error results naming it, the other server's still answer."""

    async def go() -> None:
        async with two_servers(searcher) as (c, registry):
            gone = registry.upstreams[1]
            gone.client = Broken(error)  # type: ignore[assignment]
            with caplog.at_level(logging.WARNING):
                if seen_by == "call":
                    called = await c.call_tool("two_book_music", {})
                    assert called.is_error and (
                        "the upstream (c.json: server 'two') failed on 'book_music': its connection failed ("
                        in called.content[0].text
                    )
                else:
                    gone.stale = True  # it said its list changed, then went
                answer = await c.call_tool(SEARCH_TOOL, {"query": "please book my music now"})
            assert not answer.is_error and names(answer) and not [n for n in names(answer) if n.startswith("two_")]
            assert list(registry.tools) == [f"one_{t['name']}" for t in ONE]
            assert "c.json: server 'two': the connection to the upstream failed" in caplog.text
            again = await c.call_tool("two_book_music", {})
            assert again.is_error and "unknown tool 'two_book_music'" in again.content[0].text
            assert not (await c.call_tool("one_book_music", {})).is_error

    anyio.run(go)


def test_an_upstream_whose_list_fails_keeps_its_last_list(
    searcher: ToolSearch, caplog: pytest.LogCaptureFixture
) -> None:
    async def go() -> None:
        async with two_servers(searcher) as (c, registry):
            before, searcher_before = dict(registry.tools), registry.searcher
            failing = Broken(MCPError(INTERNAL_ERROR, "boom"))
            registry.upstreams[1].client, registry.upstreams[1].stale = failing, True
            with caplog.at_level(logging.WARNING):
                for _ in range(3):
                    answer = await c.call_tool(SEARCH_TOOL, {"query": "please book my music now"})
                    assert not answer.is_error
            assert registry.tools == before and registry.searcher is searcher_before  # nothing rebuilt
            assert registry.upstreams[1].stale and failing.listed == 1  # asked again only after RETRY_SECONDS
            assert "c.json: server 'two': tools/list failed, its last list kept (asked again in 10 s or more): " \
                   "MCPError: boom" in caplog.text  # fmt: skip

    anyio.run(go)


# --- the command, with real upstream processes on 127.0.0.1 ---


@contextmanager
def fake_process(
    tools: list[dict[str, Any]], transport: str, log: Path, env: dict[str, str], *extra: str
) -> Iterator[tuple[str, subprocess.Popen]]:
    """A fake MCP upstream process over ``transport`` (http or sse) on 127.0.0.1: its announced URL, the process."""
    file = write(log.with_suffix(".tools.json"), tools)
    cmd = [sys.executable, "-m", "servers.fakes", "mcp", "--tools", str(file), "--transport", transport, "--port", "0",
           *extra]  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
    try:
        yield wait_announced(log, proc), proc
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@contextmanager
def fake_upstream(
    tools: list[dict[str, Any]], transport: str, log: Path, env: dict[str, str], *extra: str
) -> Iterator[str]:
    """:func:`fake_process`'s URL."""
    with fake_process(tools, transport, log, env, *extra) as (url, _):
        yield url


def test_the_command_fronts_a_stdio_an_http_and_an_sse_server_from_one_config(tmp_path: Path) -> None:
    env = {**cli_env(), "FAKE_MCP_TOKEN": SECRET}
    third = TOOLS[80:]
    with ExitStack() as stack:
        guarded = ("--token-env", "FAKE_MCP_TOKEN")
        web = stack.enter_context(fake_upstream(TWO, "http", tmp_path / "web.log", env, *guarded, "--label", "web"))
        old = stack.enter_context(fake_upstream(third, "sse", tmp_path / "old.log", env, "--label", "old"))
        stdio = [sys.executable, "-m", "servers.fakes", "mcp", "--tools", str(write(tmp_path / "one.json", ONE)),
                 "--label", "one"]  # fmt: skip
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
                    # names two servers share, each call at its own server under its own name
                    for name in ("one_book_music", "web_book_music", "web_get_sports", "old_get_sports"):
                        called = await c.call_tool(name, {"n": 2})
                        server, tool = name.split("_", 1)
                        assert json.loads(called.content[0].text) == {"tool": tool, "arguments": {"n": 2},
                                                                      "server": server}, name  # fmt: skip

        anyio.run(go)
    said = log.read_text(encoding="utf-8")
    assert "upstream 'web' lists 60 tools" in said and "upstream 'old' lists 20 tools" in said, said
    assert SECRET not in said


def stdio_params(params: StdioServerParameters, errlog: Any) -> Any:
    """The SDK's stdio transport of ``params``, the server's stderr written to ``errlog``."""
    from mcp.client.stdio import stdio_client

    return stdio_client(params, errlog=errlog)


def test_an_upstream_that_prints_a_banner_to_stdout_is_read_on_and_said_in_one_line(tmp_path: Path) -> None:
    """A stdio server that writes a non-JSON line first (a start-up banner): the SDK skips it and logged a traceback;
    the command says it in one line, without the line's text, and the server is fronted as usual."""
    env = cli_env()
    fake = shlex.join([sys.executable, "-m", "servers.fakes", "mcp", "--tools", str(write(tmp_path / "t.json", ONE))])
    upstream = f"sh -c {shlex.quote('echo Server starting with key sk-banner-123; exec ' + fake)}"
    argv = ["-m", "experiments.cli", "serve", "mcp", "--upstream-command", upstream]
    log = tmp_path / "shortlist.log"

    async def go() -> None:
        with log.open("w") as err:
            params = StdioServerParameters(command=sys.executable, args=argv, env=env)
            async with Client(stdio_params(params, err)) as c:
                answer = await c.call_tool(SEARCH_TOOL, {"query": "please book my flight now"})
                assert names(answer)[0] == "book_flight"

    anyio.run(go)
    said = log.read_text(encoding="utf-8")
    assert "an upstream stdio server wrote a line to stdout that is not a JSON-RPC message" in said, said
    assert "Traceback" not in said and "sk-banner-123" not in said and "Server starting" not in said


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


@pytest.mark.parametrize("case", ["wrong token", "wrong token over sse", "nothing listening"])
def test_an_upstream_that_refuses_is_a_one_line_error_naming_it(tmp_path: Path, case: str) -> None:
    env = {**cli_env(), "FAKE_MCP_TOKEN": SECRET, "WRONG": "not-the-token"}
    transport = "sse" if "sse" in case else "http"
    with (
        fake_upstream(ONE, transport, tmp_path / "web.log", env, "--token-env", "FAKE_MCP_TOKEN") as url,
        socket.socket() as unheard,
    ):
        unheard.bind(("127.0.0.1", 0))  # bound, never listened on: a connection to it is refused
        if case == "nothing listening":
            url = f"http://127.0.0.1:{unheard.getsockname()[1]}/mcp"
        cfg = write(tmp_path / "mcp.json", {"mcpServers": {
            "web": {"type": transport, "url": url + "?key=${WRONG}", "headers": {"Authorization": "Bearer ${WRONG}"}},
        }})  # fmt: skip
        cmd = [sys.executable, "-m", "experiments.cli", "serve", "mcp", "--upstream-config", str(cfg)]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    because = {"wrong token": "(HTTP 401; MCPError: ", "wrong token over sse": "(HTTP 401)",
               "nothing listening": "(ConnectError: "}[case]  # fmt: skip
    error = f"shortlist: error: {cfg}: server 'web': could not connect to the upstream {because}"
    assert done.stderr.strip().splitlines()[-1].startswith(error), done.stderr
    assert "Traceback" not in done.stderr and "http" not in done.stderr.split("shortlist: error: ")[-1]
    assert "not-the-token" not in done.stderr and SECRET not in done.stderr  # (the key was in the url, too)


def test_the_docs_config_example_is_read(tmp_path: Path) -> None:
    from conftest import REPO

    docs = (REPO / "docs" / "servers.md").read_text(encoding="utf-8")
    (block,) = re.findall(r"```json\n(\s*\{\"mcpServers\".*?)```", docs, flags=re.S)
    cfg = tmp_path / "claude_desktop_config.json"
    cfg.write_text(block, encoding="utf-8")
    read = read_config(cfg, {"GITHUB_TOKEN": SECRET})
    assert [(s.name, s.transport) for s in read] == [("files", "stdio"), ("github", "http"), ("legacy", "sse")]
    assert read[1].headers == {"Authorization": f"Bearer {SECRET}"}


# --- what the review of the first version found ---


@pytest.mark.parametrize(
    ("value", "environ", "expanded"),
    [
        ("${V}", {"V": ""}, ""),  # set, even empty: its value
        ("${V:-d}", {"V": ""}, "d"),  # unset or empty: the default, as a shell reads it
        ("${V:-d}", {"V": "x"}, "x"),
        ("${V:-}", {}, ""),
        ("a ${env:V} b", {"V": "x"}, "a x b"),  # VS Code's spelling
        ("${V:-a:b}", {}, "a:b"),
        ("${V-d}", {"V": ""}, ""),  # unset only: the default
        ("${V-d}", {}, "d"),
    ],
)
def test_variables_are_read_as_a_shell_reads_them(value: str, environ: dict[str, str], expanded: str) -> None:
    assert expand(value, "w", environ) == expanded


@pytest.mark.parametrize("value", ["${input:api-key}", "${workspaceFolder}/x", "${userHome}", "${env:V:-d}"])
def test_an_editors_variables_are_refused_by_name(value: str) -> None:
    inside = value[2 : value.index("}")]
    with pytest.raises(ValueError, match=re.escape(f"w: ${{{inside}}} is an editor's variable, not read here")):
        expand(value, "w", {"V": "x"})


def test_a_file_that_is_not_utf8_or_holds_comments_is_said_so(tmp_path: Path) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text('{"mcpServers": {"a": {"command": "x"}}}', encoding="utf-16")
    with pytest.raises(ValueError, match=r"c\.json: not UTF-8 text \(byte 0: .*\); save it as UTF-8"):
        read_config(cfg, {})
    cfg.write_text('{\n  // VS Code allows this\n  "servers": {"a": {"command": "x"}}\n}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 2 column 3: not JSON .*\(comments, as VS Code allows in mcp\.json"):
        read_config(cfg, {})


@pytest.mark.parametrize("kind", [["stdio"], {}, 3])
def test_a_type_that_is_not_a_string_is_a_one_line_error(tmp_path: Path, kind: object) -> None:
    cfg = write(tmp_path / "c.json", {"mcpServers": {"a": {"command": "x", "type": kind}}})
    with pytest.raises(ValueError, match=re.escape(f"server 'a': type {kind!r} is not one of")):
        read_config(cfg, {})


@pytest.mark.parametrize(
    "entry",
    [
        {"command": "uv", "args": ["run", "shortlist", "serve", "mcp"]},
        {"command": "uvx", "args": ["--from", "shortlist-depth", "shortlist", "serve", "mcp"]},
        {"command": "bash", "args": ["-c", "shortlist serve mcp --upstream-config c.json"]},
        {"command": "/opt/venv/bin/shortlist", "args": ["serve", "mcp", "--searcher", "s"]},
        {"command": "python", "args": ["-m", "experiments.cli", "serve", "mcp"]},
    ],
)
def test_this_server_is_skipped_whatever_launches_it(tmp_path: Path, entry: dict[str, Any]) -> None:
    cfg = write(tmp_path / "c.json", {"mcpServers": {"me": entry, "kept": {"command": "python", "args": ["s.py"]}}})
    assert [s.name for s in read_config(cfg, {})] == ["kept"]
    other = {"command": "python", "args": ["-m", "shortlist_tools", "serve", "mcp"]}  # another program: kept
    assert [s.name for s in read_config(write(tmp_path / "d.json", {"mcpServers": {"x": other}}), {})] == ["x"]


def test_a_config_server_gets_the_sdks_safe_environment_and_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As the MCP clients start it: not this process's whole environment (a key meant for another server's header
    stays out); ``--upstream-command`` runs with this process's environment, as documented."""
    monkeypatch.setenv("GITHUB_TOKEN", SECRET)
    cfg = write(tmp_path / "c.json", {"mcpServers": {"a": {"command": "python", "env": {"OWN": "1"}}}})
    env = client(read_config(cfg)[0], None).server.env
    assert env["OWN"] == "1" and env["PATH"] == os.environ["PATH"] and env[FRONTED] == "1"
    assert "GITHUB_TOKEN" not in env
    assert client(specs(command="python s.py")[0], None).server.env["GITHUB_TOKEN"] == SECRET


def test_an_upstream_that_never_answers_is_an_error_after_the_timeout() -> None:
    async def go() -> None:
        async with anyio.create_task_group() as tasks:
            with pytest.raises(ValueError, match=r"--upstream-command: the upstream did not answer within 1 s"):
                await connect(specs(command="sleep 1000")[0], tasks, timeout=1)

    anyio.run(go)


def test_a_server_started_by_another_as_its_upstream_refuses_to_front(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FRONTED, "1")
    with pytest.raises(ValueError, match="this shortlist serve mcp was started as an upstream by another one"):
        run(ToolSearch.from_tools(TOOLS[:5]), SearchSettings(), upstreams=specs(command="python s.py"))


class Listing:
    """A client whose ``tools/list`` takes ``seconds`` and, while it waits, hears the list changed (``changes``)."""

    def __init__(self, upstream: Upstream, seconds: float = 0.0, changes: bool = False) -> None:
        self.upstream, self.seconds, self.changes, self.asked = upstream, seconds, changes, 0

    async def list_tools(self, **kw: Any) -> Any:
        self.asked += 1
        if self.changes:
            await self.upstream.on_message(ToolListChangedNotification())
        await anyio.sleep(self.seconds)
        return ListToolsResult(tools=[Tool.model_validate(t) for t in TOOLS[:3]])


def test_a_change_said_while_the_list_is_read_is_kept(searcher: ToolSearch) -> None:
    async def go() -> None:
        upstream = Upstream(None)
        upstream.client = Listing(upstream, changes=True)
        await upstream.read()
        assert upstream.stale  # read again on the next request

    anyio.run(go)


def test_one_slow_upstream_holds_no_other_request(searcher: ToolSearch) -> None:
    async def go() -> None:
        upstream = Upstream(None)
        upstream.client = Listing(upstream)
        registry = Upstreams([upstream], searcher)
        await registry.refresh(strict=True)
        upstream.client.seconds, upstream.stale = 5.0, True  # it said its list changed, and is slow to list it
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(registry.refresh)
            await anyio.sleep(0.05)
            with anyio.fail_after(1):  # a second request: answered from the registry as it was
                await registry.refresh()
            tasks.cancel_scope.cancel()

    anyio.run(go)


def test_an_upstream_tool_named_search_tools_is_left_out(
    searcher: ToolSearch, caplog: pytest.LogCaptureFixture
) -> None:
    async def go() -> None:
        own = {"name": SEARCH_TOOL, "description": "the upstream's own search", "inputSchema": {"type": "object"}}
        async with Client(fake_mcp_server([own, *TOOLS[:5]])) as up:
            registry = Upstreams([Upstream(up)], searcher, reserved=[SEARCH_TOOL])
            with caplog.at_level(logging.WARNING):
                await registry.refresh(strict=True)
            assert SEARCH_TOOL not in registry.tools and len(registry.tools) == 5
            assert f"its tool {SEARCH_TOOL!r} is named {SEARCH_TOOL!r}, as this server's own tool: left out" in (
                caplog.text
            )

    anyio.run(go)


def test_a_clash_after_a_good_list_keeps_the_good_list(searcher: ToolSearch, caplog: pytest.LogCaptureFixture) -> None:
    async def go() -> None:
        first = [{"name": "book_flight", "description": "x", "inputSchema": {"type": "object"}}]
        clash = [{"name": "flight", "description": "y", "inputSchema": {"type": "object"}}]
        a, b = Upstream(None, "one", "one"), Upstream(None, "one_book", "one_book")
        for upstream, tools in ((a, first), (b, first)):
            upstream.client = Client(fake_mcp_server(tools))
        async with a.client, b.client:
            registry = Upstreams([a, b], searcher)
            await registry.refresh(strict=True)
            good = dict(registry.tools)
            assert list(good) == ["one_book_flight", "one_book_book_flight"]
            b.tools, b.stale = {}, True
            b.client = Client(fake_mcp_server(clash))  # its list changes to a name the other's tool has
            async with b.client:
                with caplog.at_level(logging.WARNING):
                    await registry.refresh()
            assert registry.tools == good
            assert "one_book: its tool 'flight' is named 'one_book_flight', as a tool of one is" in caplog.text

    anyio.run(go)


def test_an_http_upstream_gone_is_an_error_result_and_the_others_still_answer(tmp_path: Path) -> None:
    """A real streamable-HTTP upstream process killed while the server runs: its calls are error results at once,
    its tools leave the search, and the stdio server's tools are still searched and called."""
    env = cli_env()
    log = tmp_path / "shortlist.log"
    with fake_process(TWO, "http", tmp_path / "web.log", env, "--label", "web") as (url, web):
        stdio = [sys.executable, "-m", "servers.fakes", "mcp", "--tools", str(write(tmp_path / "one.json", ONE))]
        cfg = write(tmp_path / "mcp.json", {"mcpServers": {"one": {"command": stdio[0], "args": stdio[1:]},
                                                            "web": {"url": url}}})  # fmt: skip
        argv = ["-m", "experiments.cli", "serve", "mcp", "--upstream-config", str(cfg)]

        async def go() -> None:
            with log.open("w") as err:
                params = StdioServerParameters(command=sys.executable, args=argv, env=env)
                async with Client(stdio_params(params, err)) as c:
                    assert not (await c.call_tool("web_book_music", {})).is_error
                    web.kill()
                    web.wait(timeout=30)
                    with anyio.fail_after(30):
                        gone = await c.call_tool("web_book_music", {})
                    assert gone.is_error and f"the upstream ({cfg}: server 'web') failed on 'book_music'" in (
                        gone.content[0].text
                    )
                    found = names(await c.call_tool(SEARCH_TOOL, {"query": "please book my music now"}))
                    assert found and not [n for n in found if n.startswith("web_")], found
                    assert not (await c.call_tool("one_book_music", {})).is_error

        anyio.run(go)
    assert f"{cfg}: server 'web': the connection to the upstream failed" in log.read_text(encoding="utf-8")


def test_a_call_waiting_on_an_upstream_that_is_lost_ends_at_once() -> None:
    """A transport that never fails its waiting requests: losing the upstream ends them, as errors."""

    class Hanging:
        async def call_tool(self, name: str, arguments: dict[str, Any]) -> Any:
            await anyio.sleep_forever()

    async def go() -> None:
        upstream = Upstream(None, "web", "c.json: server 'web'")
        upstream.client = Hanging()
        failed: list[BaseException] = []

        async def call() -> None:
            try:
                await upstream.call("book_flight", {})
            except ConnectionError as e:
                failed.append(e)

        with anyio.fail_after(5):
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(call)
                await anyio.sleep(0.05)
                upstream.lose(RuntimeError("the server went"))
        assert [str(e) for e in failed] == ["its connection failed (RuntimeError: the server went)"]

    anyio.run(go)


def children(pid: int) -> list[int]:
    """The processes ``pid`` started (Linux's /proc)."""
    found = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return [int(c) for c in found]


def test_sigterm_closes_the_upstreams_and_says_what_was_recorded(tmp_path: Path) -> None:
    tools = write(tmp_path / "tools.json", TOOLS)
    upstream = f"{sys.executable} -m servers.fakes mcp --tools {tools}"
    cmd = [sys.executable, "-m", "experiments.cli", "serve", "mcp", "--upstream-command", upstream,
           "--record", str(tmp_path / "rec")]  # fmt: skip
    err = tmp_path / "serve.log"
    with err.open("w") as out:
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=out, env=cli_env())
    try:
        deadline = time.monotonic() + 60
        while "over stdio" not in err.read_text() and time.monotonic() < deadline:
            time.sleep(0.1)
        started = children(proc.pid)
        assert started, err.read_text()
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        proc.kill()
        proc.wait()
    said = err.read_text()
    assert "SIGTERM: closing the upstreams' connections, then stopping" in said
    assert f"--record {tmp_path / 'rec'}: 0 tool calls written" in said
    time.sleep(0.5)
    assert not [c for c in started if Path(f"/proc/{c}").exists()]  # the upstream stopped with it


def test_a_failed_list_is_asked_again_after_the_wait_and_then_forgotten(
    searcher: ToolSearch, monkeypatch: pytest.MonkeyPatch
) -> None:
    from servers import upstreams as module

    async def go() -> None:
        upstream = Upstream(None)
        upstream.client = Broken(MCPError(INTERNAL_ERROR, "boom"))
        registry = Upstreams([upstream], searcher)
        upstream.tools = {t["name"]: Tool.model_validate(t) for t in TOOLS[:3]}
        await registry.refresh()  # (first: builds from its last list)
        assert upstream.failed_at is not None and upstream.stale
        monkeypatch.setattr(module, "RETRY_SECONDS", 0.0)
        upstream.client = Listing(upstream)  # it answers again
        await registry.refresh()
        assert upstream.failed_at is None and not upstream.stale and len(registry.tools) == 3
        upstream.failed_at = anyio.current_time()  # a failure just now, then the connection is lost:
        monkeypatch.setattr(module, "RETRY_SECONDS", 60.0)
        upstream.lose(RuntimeError("gone"))
        await registry.refresh()  # its tools leave now, not after the retry's wait
        assert registry.tools == {}

    anyio.run(go)


def test_sigterm_over_http_closes_the_upstreams_too(tmp_path: Path) -> None:
    """uvicorn owns the signals over HTTP and ends the process with the signal once shut down: the connections are
    closed in the app's shutdown, before that."""
    tools = write(tmp_path / "tools.json", TOOLS)
    upstream = f"{sys.executable} -m servers.fakes mcp --tools {tools}"
    cmd = [sys.executable, "-m", "experiments.cli", "serve", "mcp", "--upstream-command", upstream,
           "--transport", "http", "--port", "0"]  # fmt: skip
    err = tmp_path / "serve.log"
    with err.open("w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=cli_env())
    try:
        wait_announced(err, proc)
        started = children(proc.pid)
        assert started, err.read_text()
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    finally:
        proc.kill()
        proc.wait()
    assert "closing the connections to 1 upstream(s)" in err.read_text()
    time.sleep(0.5)
    assert not [c for c in started if Path(f"/proc/{c}").exists()]


def test_with_every_upstream_gone_search_tools_says_so(searcher: ToolSearch) -> None:
    async def go() -> None:
        async with Client(fake_mcp_server(TOOLS[:5])) as up:
            registry = Upstreams([Upstream(up)], searcher, reserved=[SEARCH_TOOL])
            await registry.refresh(strict=True)
            async with Client(ShortlistServer(searcher, SearchSettings(), registry)) as c:
                registry.upstreams[0].lose(RuntimeError("gone"))
                answer = await c.call_tool(SEARCH_TOOL, {"query": "please book my flight now"})
                assert answer.is_error and "no upstream lists a tool now" in answer.content[0].text

    anyio.run(go)


async def _back(registry: Upstreams, name: str, seconds: float = 30.0) -> None:
    """Wait until ``name`` is among the registry's tools again (refreshing it as requests would)."""
    with anyio.fail_after(seconds):
        while name not in registry.tools:
            await anyio.sleep(0.1)
            await registry.refresh()


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_lost_upstream_is_connected_again_and_its_tools_come_back(
    tmp_path: Path, searcher: ToolSearch, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
    transport: str,
) -> None:  # fmt: skip
    """A stdio server killed (started again by connecting again), an HTTP server killed and then started again on
    its port: its calls fail while it is gone, then it is connected again, its tools read again and called."""
    from servers import upstreams as module

    monkeypatch.setattr(module, "RECONNECT_SECONDS", 0.2)
    env = cli_env()
    web: list[subprocess.Popen] = []

    async def go(spec: Any, kill: Any, start: Any) -> None:
        async with anyio.create_task_group() as tasks:
            before = set(children(os.getpid()))
            upstream = await connect(spec, tasks, timeout=60)
            registry = Upstreams([upstream], searcher)
            await registry.refresh(strict=True)
            assert not (await upstream.call("book_weather", {})).is_error
            kill(set(children(os.getpid())) - before)
            with pytest.raises(ConnectionError):
                await upstream.call("book_weather", {})
            await registry.refresh()
            assert registry.tools == {}  # gone: its tools left the search
            start()
            await _back(registry, "book_weather")
            called = await upstream.call("book_weather", {"n": 1})
            assert json.loads(called.content[0].text) == {"tool": "book_weather", "arguments": {"n": 1}}
            await close_all([upstream], 10)
            tasks.cancel_scope.cancel()

    def serve_web(port: str) -> str:
        cmd = [sys.executable, "-m", "servers.fakes", "mcp", "--tools", str(write(tmp_path / "web.json", TOOLS[:10])),
               "--transport", "http", "--port", port]  # fmt: skip
        log = tmp_path / f"web{len(web)}.log"
        with log.open("w") as out:
            web.append(subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env))
        return wait_announced(log, web[-1])

    def kill_web(_: set[int]) -> None:
        web[-1].kill()
        web[-1].wait(timeout=30)

    def kill_child(started: set[int]) -> None:
        (pid,) = started
        os.kill(pid, signal.SIGKILL)

    try:
        with caplog.at_level(logging.INFO, logger="servers.upstreams"):
            if transport == "stdio":
                stdio = f"{sys.executable} -m servers.fakes mcp --tools {write(tmp_path / 'one.json', TOOLS[:10])}"
                anyio.run(go, specs(command=stdio)[0], kill_child, lambda: None)  # (connecting again starts it)
            else:
                url = serve_web("0")
                port = url.rsplit(":", 1)[1].split("/")[0]
                anyio.run(go, specs(url=url)[0], kill_web, lambda: serve_web(port))
    finally:
        for p in web:
            p.kill()
            p.wait(timeout=30)
    assert "connected again (it had failed: " in caplog.text
