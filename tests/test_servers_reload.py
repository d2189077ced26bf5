"""``--reload``: a server serves each searcher saved into its ``--searcher`` folder later, without a restart. The
watcher hands over a new searcher once, keeps the current one when the new one cannot be loaded or is refused and
tries again once the folder changes; ``serve openai`` (against the fake upstream on 127.0.0.1) and ``serve mcp``
switch policy between requests; ``--reload`` without ``--searcher`` is refused."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from starlette.testclient import TestClient
from test_toolsearch import labelled_lists, openai_tools

import shortlist_depth as sd
from agents.base import FixedConfig
from servers.fakes import fake_openai_app, serve_in_thread
from servers.mcp_server import SearchSettings, ShortlistServer
from servers.openai_proxy import ProxyConfig, create_app
from servers.reload import SearcherWatch
from shortlist_depth.toolsearch import ToolSearch


@pytest.fixture(scope="module")
def policies() -> dict[str, Any]:
    """Two policies of the generated tools' BM25 lists that choose differently: the posterior and fixed K = 5."""
    lists = labelled_lists(openai_tools())
    fixed = sd.fit("fixed", lists, settings=FixedConfig(5), seed=0)
    return {"posterior": sd.fit("posterior", lists, seed=0), "fixed": fixed}


def save(policy: Any, folder: Path) -> Path:
    return ToolSearch.from_tools(openai_tools(), policy=policy).save(folder, overwrite=True)


def test_the_watcher_hands_over_each_new_searcher_and_keeps_the_current_on_a_bad_one(
    policies: dict[str, Any], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = save(policies["posterior"], tmp_path / "searcher")
    got: list[ToolSearch] = []

    async def apply(search: ToolSearch) -> None:
        got.append(search)

    watch = SearcherWatch(folder, apply)

    async def scenario() -> list[bool]:
        steps = [await watch.check()]  # nothing saved since: nothing handed over
        save(policies["fixed"], folder)
        steps.append(await watch.check())
        steps.append(await watch.check())  # once only
        meta = folder / "searcher.json"
        meta.write_text(meta.read_text().replace('"scorer"', '"scorer_"', 1))  # a tampered searcher.json
        steps.append(await watch.check())
        steps.append(await watch.check())  # not tried again until the folder changes again
        save(policies["posterior"], folder)
        steps.append(await watch.check())
        return steps

    with caplog.at_level(logging.INFO, logger="servers.reload"):
        steps = anyio.run(scenario)
    assert steps == [False, True, False, False, False, True]
    assert [s.policy.method for s in got] == ["fixed-5", "bor-posterior"]
    assert "cannot be loaded" in caplog.text and "the current one is kept" in caplog.text
    assert "now serving bor-posterior (bm25, 100 tools; policy_id " in caplog.text

    async def refuse(search: ToolSearch) -> None:
        raise ValueError("its registry lacks the pinned tool(s) ['x']")

    refusing = SearcherWatch(folder, refuse)
    save(policies["fixed"], folder)
    with caplog.at_level(logging.WARNING, logger="servers.reload"):
        assert anyio.run(refusing.check) is False
    assert "is refused (its registry lacks the pinned tool(s) ['x'])" in caplog.text and refusing.loaded == 0


def test_serve_openai_switches_policy_between_requests(policies: dict[str, Any], tmp_path: Path) -> None:
    folder = save(policies["posterior"], tmp_path / "searcher")
    body = {"model": "m", "messages": [{"role": "user", "content": "please book my flight now"}],
            "tools": openai_tools()}  # fmt: skip
    with serve_in_thread(fake_openai_app()) as url:
        config = ProxyConfig(upstream=f"{url}/v1", reload=str(folder))
        with TestClient(create_app(ToolSearch.load(folder), config)) as proxy:
            first = proxy.post("/v1/chat/completions", json=body)
            assert first.headers["x-shortlist-policy"] == "bor-posterior"
            before = json.loads(proxy.get("/healthz").text)["policy_id"]
            save(policies["fixed"], folder)
            deadline, now = time.monotonic() + 20, first
            while now.headers["x-shortlist-policy"] == "bor-posterior" and time.monotonic() < deadline:
                time.sleep(0.2)
                now = proxy.post("/v1/chat/completions", json=body)
            assert now.status_code == 200 and now.headers["x-shortlist-policy"] == policies["fixed"].method
            assert now.headers["x-shortlist-k"] == "5"  # fixed K's depth, not the posterior's
            health = json.loads(proxy.get("/healthz").text)
            assert health["policy"] == policies["fixed"].method and health["policy_id"] != before


def test_serve_mcp_swaps_its_registry_and_refuses_one_without_the_pins(
    policies: dict[str, Any], tmp_path: Path
) -> None:
    first = ToolSearch.from_tools(openai_tools(), policy=policies["posterior"])
    server = ShortlistServer(first, SearchSettings(pin=("get_weather",)))
    fewer = ToolSearch.from_tools([t for t in openai_tools() if t["function"]["name"] != "get_weather"],
                                  policy=policies["fixed"])  # fmt: skip
    with pytest.raises(ValueError, match=r"lacks the pinned tool\(s\) \['get_weather'\]"):
        anyio.run(server.reload, fewer)
    assert server.searcher is first
    second = ToolSearch.from_tools(openai_tools(), policy=policies["fixed"])
    anyio.run(server.reload, second)
    answer = anyio.run(server.search_tools, "please book my flight now")
    assert server.searcher is second and answer.policy == policies["fixed"].method


def test_reload_needs_a_searcher_folder(capsys: pytest.CaptureFixture) -> None:
    from experiments.cli import main

    assert main(["serve", "openai", "--upstream", "http://127.0.0.1:9/v1", "--reload"]) == 2
    assert "--reload goes with --searcher DIR" in capsys.readouterr().err


def test_a_folder_filled_file_by_file_is_served_once_complete(policies: dict[str, Any], tmp_path: Path) -> None:
    """searcher.json first, its other files later (a copy by hand): the half folder fails to load, the whole one
    is served; a searcher saved before the watcher started (``since``: the stamp when the served one loaded) too."""
    import shutil

    from servers.reload import folder_stamp

    live = save(policies["posterior"], tmp_path / "live")
    since = folder_stamp(live)
    fixed = save(policies["fixed"], tmp_path / "fixed")
    got: list[str] = []

    async def apply(search: ToolSearch) -> None:
        got.append(search.policy.method)

    shutil.rmtree(live)
    live.mkdir()
    shutil.copy(fixed / "searcher.json", live / "searcher.json")
    watch = SearcherWatch(live, apply, since=since)
    assert anyio.run(watch.check) is False  # half a folder: cannot be loaded, the current one kept
    for path in fixed.rglob("*"):
        if path.is_file() and path.name != "searcher.json":
            (live / path.relative_to(fixed)).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(path, live / path.relative_to(fixed))
    assert anyio.run(watch.check) is True and got == ["fixed-5"]
    late = SearcherWatch(live, apply, since=since)  # saved between the served load and the watcher's start
    assert anyio.run(late.check) is True and got == ["fixed-5", "fixed-5"]


def test_upstreams_respec_searches_their_tools_with_the_new_policy(policies: dict[str, Any]) -> None:
    from mcp_types import Tool as McpTool

    from servers.upstreams import Upstreams

    fns = [t["function"] for t in openai_tools()]
    tools = {f["name"]: McpTool(name=f["name"], description=f["description"], inputSchema=f["parameters"]) for f in fns}
    upstream = SimpleNamespace(name="u", where="upstream u", tools=tools)
    first = ToolSearch.from_tools(openai_tools(), policy=policies["posterior"])
    registry = Upstreams([upstream], first)  # type: ignore[list-item]
    registry.tools = dict(tools)
    registry.searcher = registry.spec.over([t.model_dump(by_alias=True, mode="json", exclude_none=True)
                                            for t in tools.values()])  # fmt: skip
    anyio.run(registry.respec, ToolSearch.from_tools(openai_tools(), policy=policies["fixed"]).spec)
    assert registry.searcher.policy.method == "fixed-5" and registry.searcher.search("book my flight").k == 5


def test_a_real_serve_openai_reload_process(policies: dict[str, Any], tmp_path: Path) -> None:
    """``shortlist serve openai --searcher DIR --reload``, started as a user starts it: a searcher saved into DIR
    is served within seconds, and no request fails meanwhile."""
    import subprocess
    import sys

    import httpx
    from conftest import cli_env

    from servers.listen import wait_announced

    live = save(policies["posterior"], tmp_path / "live")
    body = {"model": "m", "messages": [{"role": "user", "content": "please book my flight now"}],
            "tools": openai_tools()}  # fmt: skip
    log = tmp_path / "proxy.log"
    with serve_in_thread(fake_openai_app()) as url:
        cmd = [sys.executable, "-m", "experiments.cli", "serve", "openai", "--searcher", str(live), "--reload",
               "--upstream", f"{url}/v1", "--port", "0"]  # fmt: skip
        with log.open("w") as err:
            proc = subprocess.Popen(cmd, stdout=err, stderr=subprocess.STDOUT, env=cli_env())
        try:
            base = wait_announced(log, proc)
            first = httpx.post(f"{base}/chat/completions", json=body, timeout=30)
            assert first.status_code == 200 and first.headers["x-shortlist-policy"] == "bor-posterior"
            for answer in (first, httpx.get(f"{base}/models", timeout=30)):  # the upstream's date and server: not twice
                assert len(answer.headers.get_list("date")) == 1 and len(answer.headers.get_list("server")) == 1
            save(policies["fixed"], live)
            deadline, seen = time.monotonic() + 30, []
            while time.monotonic() < deadline:
                r = httpx.post(f"{base}/chat/completions", json=body, timeout=30)
                assert r.status_code == 200
                seen.append(r.headers["x-shortlist-policy"])
                if seen[-1] == "fixed-5":
                    break
                time.sleep(0.2)
            assert seen[-1] == "fixed-5", seen
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    text = log.read_text()
    assert f"--reload {live}: now serving fixed-5 (bm25; policy_id " in text


def test_two_auto_searchers_are_told_apart_by_their_id_and_pick() -> None:
    """Every searcher recommend saves is ``bor-auto``: /healthz and the reload log say its id and auto's pick."""
    from servers import health

    lists = labelled_lists(openai_tools())
    a = sd.fit("auto", lists, seed=0)
    b = sd.fit("auto", lists[:150], seed=0)
    ha, hb = health("x", "bm25", a, None), health("x", "bm25", b, None)
    assert ha["policy"] == hb["policy"] == "bor-auto" and ha["policy_id"] != hb["policy_id"]
    assert ha["chosen"] == a.policy.chosen
