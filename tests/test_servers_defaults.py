"""One set of defaults for every entry point (issue 38): with no saved searcher, ``shortlist serve openai``, ``shortlist
serve mcp --upstream-command`` and ``shortlist serve mcp --tools`` serve the library's defaults (``--scorer`` bm25,
the shipped default policy, K at most ``DEFAULT_MAX_K``), and each answers the Python API's shortlist
(``ToolSearch.from_tools(tools).search(request)``) for the same tools and request: one real process each, over HTTP
against a fake upstream on 127.0.0.1 and over stdio."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from pathlib import Path

import anyio
import httpx
import pytest
from conftest import cli_env
from mcp import Client, StdioServerParameters
from test_toolsearch import mcp_tools, openai_tools

from experiments import options as o
from experiments.cli import build, make_parser
from servers.fakes import Received, fake_openai_app, serve_in_thread
from servers.listen import wait_announced
from servers.mcp_server import SEARCH_TOOL
from shortlist_depth import DEFAULT_MAX_K, ToolSearch

#: Requests: two ordinary ones, one that shares no word with any tool (no ranking information: the library shows 1
#: tool, the OpenAI proxy passes the request on with every tool).
REQUESTS = ("please book my flight now", "what is the weather and the news today", "zebra quokka xylophone")


def api_names() -> list[list[str]]:
    search = ToolSearch.from_tools(openai_tools())
    return [list(s.names) for s in search.search_many(list(REQUESTS))]


def test_the_servers_defaults_are_the_librarys() -> None:
    for argv, cls in ((["serve", "openai", "--upstream", "http://u/v1"], o.ServeOpenaiArgs),
                      (["serve", "mcp", "--upstream-command", "x"], o.ServeMcpArgs)):  # fmt: skip
        args = build(cls, make_parser().parse_args(argv))
        assert args.searcher is None and args.scorer == "bm25" and args.policy is None
        assert args.bound() == DEFAULT_MAX_K and args.min_k is None
    lifted = build(o.ServeOpenaiArgs, make_parser().parse_args(["serve", "openai", "--upstream", "http://u/v1",
                                                                 "--no-max-k"]))  # fmt: skip
    assert lifted.bound() is None
    for bad, match in ((o.ServeMcpArgs, "serve mcp searches a registry: give --upstream-command CMD"),
                       (lambda: o.ServeMcpArgs(upstream_command="x", tools="t.json"), "--tools goes without"),
                       (lambda: o.ServeOpenaiArgs(upstream="http://u", searcher="s", scorer="minilm"),
                        "--scorer and --policy go without --searcher")):  # fmt: skip
        with pytest.raises(ValueError, match=match):
            bad()


def test_serve_openai_without_a_searcher_sends_the_python_apis_shortlist(tmp_path: Path) -> None:
    received = Received()
    log = tmp_path / "proxy.log"
    with serve_in_thread(fake_openai_app(received)) as upstream:
        cmd = [sys.executable, "-m", "experiments.cli", "serve", "openai", "--upstream", f"{upstream}/v1",
               "--port", "0"]  # fmt: skip
        with log.open("w") as err:
            proc = subprocess.Popen(cmd, stdout=err, stderr=subprocess.STDOUT, env=cli_env())
        try:
            base = wait_announced(log, proc)
            sent = []
            for text in REQUESTS:
                body = {"model": "m", "messages": [{"role": "user", "content": text}], "tools": openai_tools()}
                r = httpx.post(f"{base}/chat/completions", json=body, timeout=60)
                tied = text == REQUESTS[2]
                assert r.status_code == 200, r.text
                assert r.headers.get("x-shortlist-fallback" if tied else "x-shortlist-policy") == (
                    "tied scores" if tied else "bor-topp"
                ), r.headers
                sent.append([t["function"]["name"] for t in received.requests[-1]["body"]["tools"]])
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    expected = api_names()
    assert sent[:2] == expected[:2] and len(expected[2]) == 1  # the library's shortlists; its tie rule's 1 tool
    assert sent[2] == [t["function"]["name"] for t in openai_tools()]  # the proxy: every tool, as sent


def test_serve_mcp_without_a_searcher_answers_the_python_apis_shortlist(tmp_path: Path) -> None:
    """In front of an upstream (its tools the registry), and alone over a tools file."""
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(mcp_tools()), encoding="utf-8")
    upstream = shlex.join([sys.executable, "-m", "servers.fakes", "mcp", "--tools", str(tools)])
    expected = api_names()
    for extra in (["--upstream-command", upstream], ["--tools", str(tools)]):
        argv = ["-m", "experiments.cli", "serve", "mcp", *extra]
        params = StdioServerParameters(command=sys.executable, args=argv, env=cli_env())

        async def go(params: StdioServerParameters = params) -> list[list[str]]:
            async with Client(params) as c:
                answers = [await c.call_tool(SEARCH_TOOL, {"query": text}) for text in REQUESTS]
            assert all(a.structured_content["policy"] == "bor-topp" for a in answers)
            return [[t["name"] for t in a.structured_content["tools"]] for a in answers]

        assert anyio.run(go) == expected, extra[0]
