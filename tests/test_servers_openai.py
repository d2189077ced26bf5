"""``shortlist serve openai`` (issue 38): the OpenAI-compatible proxy against a fake upstream on 127.0.0.1 that the
tests start. Each chat request with tools goes with the library's shortlist of its latest user message (same
names, original schemas, ``tool_choice`` pinned), the K in a header; everything else passes unchanged; streaming
relayed; upstream errors and timeouts relayed with their status; bad bodies refused; the key passed on and never
logged. One real ``shortlist serve openai`` process, started with the README's command, streams chunk by chunk."""

from __future__ import annotations

import json
import logging
import re
import shlex
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from conftest import REPO, cli_env
from starlette.testclient import TestClient
from test_toolsearch import labelled_lists, openai_tools

import shortlist_depth as sd
from servers import DEFAULT_HOST
from servers.fakes import Received, fake_openai_app, serve_in_thread
from servers.listen import wait_announced
from servers.openai_proxy import ProxyConfig, chosen_tools, create_app, input_text, qualified, user_text
from shortlist_depth.toolsearch import ToolSearch

KEY = "sk-test-5f0c1d2e3a4b"  # a made-up key: must reach the upstream and no log


def saved_searcher(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A saved searcher over the 100 generated tools, its posterior fitted on their BM25 lists."""
    policy = sd.fit("posterior", labelled_lists(openai_tools()), seed=0)
    return ToolSearch.from_tools(openai_tools(), policy=policy).save(tmp_path_factory.mktemp("s") / "searcher")


@pytest.fixture(scope="module")
def searcher_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return saved_searcher(tmp_path_factory)


@pytest.fixture(scope="module")
def searcher(searcher_dir: Path) -> ToolSearch:
    return ToolSearch.load(searcher_dir)


@pytest.fixture(scope="module")
def upstream() -> Iterator[tuple[str, Received]]:
    received = Received()
    with serve_in_thread(fake_openai_app(received)) as url:
        yield url, received


@pytest.fixture(scope="module")
def make_proxy(searcher: ToolSearch, upstream: tuple[str, Received]) -> Iterator[Callable[..., TestClient]]:
    """Proxies in front of the fake upstream (``ProxyConfig`` fields as keywords), closed at the end."""
    opened: list[TestClient] = []

    def make(**kw: Any) -> TestClient:
        client = TestClient(create_app(searcher, ProxyConfig(upstream=upstream[0] + "/v1", **kw)))
        opened.append(client.__enter__())
        return client

    yield make
    for c in opened:
        c.__exit__(None, None, None)


@pytest.fixture(scope="module")
def proxy(make_proxy: Callable[..., TestClient]) -> TestClient:
    return make_proxy()


def chat(text: str | None = "please book my flight now", **extra: Any) -> dict[str, Any]:
    messages = [{"role": "system", "content": "You are helpful."}]
    if text is not None:
        messages.append({"role": "user", "content": text})
    return {"model": "m", "messages": messages, "tools": openai_tools(), **extra}


def last(received: Received) -> dict[str, Any]:
    return received.requests[-1]


def test_a_chat_request_goes_with_the_librarys_shortlist(proxy: TestClient, upstream: Any, searcher: Any) -> None:
    r = proxy.post("/v1/chat/completions", json=chat(), headers={"Authorization": f"Bearer {KEY}"})
    assert r.status_code == 200, r.text
    expected = searcher.with_tools(openai_tools()).search("please book my flight now")
    sent = last(upstream[1])["body"]
    assert sent["tools"] == list(expected.tools)  # the original schemas, in rank order
    assert len(sent["tools"]) < len(openai_tools()) and sent["tools"][0]["function"]["name"] == "book_flight"
    assert sent["messages"] == chat()["messages"] and sent["model"] == "m"
    assert r.headers["x-shortlist-k"] == str(expected.k)
    assert r.headers["x-shortlist-tools"] == f"{len(expected.tools)}/100"
    assert r.headers["x-shortlist-policy"] == "bor-posterior" and "x-shortlist-fallback" not in r.headers
    assert r.json()["choices"][0]["message"]["content"] == "tools: " + ",".join(expected.names)
    assert last(upstream[1])["headers"]["authorization"] == f"Bearer {KEY}"


def test_the_upstream_gets_the_requests_own_bytes_but_for_the_tools_left_out(
    proxy: TestClient, upstream: Any, searcher: Any
) -> None:
    """The client's formatting is kept (nothing is parsed and written again but the tools array, which holds the
    chosen tools' own bytes)."""
    import msgspec

    raw = json.dumps(chat(temperature=0.5, user="u-1"), indent=3, ensure_ascii=False).encode()
    r = proxy.post("/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 200
    top = msgspec.json.Decoder(dict[str, msgspec.Raw])
    given, sent = top.decode(raw), top.decode(last(upstream[1])["raw"])
    assert list(sent) == list(given) and all(bytes(sent[k]) == bytes(given[k]) for k in given if k != "tools")
    items = msgspec.json.Decoder(list[msgspec.Raw]).decode(sent["tools"])
    expected = searcher.with_tools(openai_tools()).search("please book my flight now")
    assert [json.loads(bytes(i)) for i in items] == list(expected.tools)
    assert all(bytes(i) in bytes(given["tools"]) for i in items)  # each tool's bytes as the client wrote them


def test_server_timing_is_the_proxys_own_time_without_the_upstreams(proxy: TestClient) -> None:
    """The upstream waits 0.6 s before answering: the end-to-end time holds it, the proxy's own time does not."""
    for body in (chat(), chat(stream=True)):
        t0 = time.perf_counter()
        r = proxy.post("/v1/chat/completions", json=body, headers={"x-fake-delay": "0.6"})
        wall = 1e3 * (time.perf_counter() - t0)
        timing = re.fullmatch(r"shortlist;dur=(\d+\.\d\d)", r.headers["server-timing"])
        assert r.status_code == 200 and timing and wall >= 600, (r.headers, wall)
        assert 0 < float(timing.group(1)) < 600
    assert "server-timing" not in proxy.get("/v1/models").headers  # unchanged passthrough: no work of the proxy's


def test_the_request_is_the_latest_user_messages_text_string_or_parts() -> None:
    parts = [{"type": "text", "text": "find a hotel"}, {"type": "image_url", "image_url": {"url": "x"}}]
    messages = [{"role": "user", "content": "old request"}, {"role": "assistant", "content": "ok"},
                {"role": "user", "content": parts}, {"role": "tool", "content": "42", "tool_call_id": "1"}]  # fmt: skip
    assert user_text(messages) == "find a hotel"
    assert user_text([{"role": "user", "content": [{"type": "image_url"}]}]) is None
    assert user_text([{"role": "system", "content": "hi"}]) is None and user_text("nope") is None
    assert input_text("find a hotel") == "find a hotel" and input_text(" ") is None
    items = [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "find a hotel"}]},
             {"type": "function_call_output", "call_id": "c1", "output": "42"}]  # fmt: skip
    assert input_text(items) == "find a hotel" and input_text(items[1:]) is None
    easy = [{"role": "user", "content": "find a hotel"}, {"role": "developer", "content": "be brief"},
            {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"}]  # fmt: skip
    assert input_text(easy) == "find a hotel"  # a developer or system message after it is not the request


def chat_refs(*names: str) -> list[dict[str, Any]]:
    """Chat Completions' references to functions (an ``allowed_tools`` list)."""
    return [{"type": "function", "function": {"name": n}} for n in names]


def test_tool_choice_pins_the_functions_it_names_in_either_apis_shape() -> None:
    assert chosen_tools({"type": "function", "function": {"name": "get_news"}}) == ["get_news"]  # chat
    assert chosen_tools({"type": "function", "name": "get_news"}) == ["get_news"]  # responses
    chat_allowed = {"type": "allowed_tools", "allowed_tools": {"mode": "auto", "tools": chat_refs("a", "b")}}
    refs = [{"type": "function", "name": "a"}, {"type": "web_search"}, {"type": "function", "name": "a"}]
    responses_allowed = {"type": "allowed_tools", "mode": "required", "tools": refs}
    assert chosen_tools(chat_allowed) == ["a", "b"] and chosen_tools(responses_allowed) == ["a"]
    for none in ("auto", "none", "required", {"type": "web_search"}, {"type": "function"}, None):
        assert chosen_tools(none) == []


def test_tool_choice_naming_a_tool_pins_it_first(proxy: TestClient, upstream: Any, searcher: Any) -> None:
    choice = {"type": "function", "function": {"name": "list_podcast"}}
    r = proxy.post("/v1/chat/completions", json=chat(tool_choice=choice))
    names = [t["function"]["name"] for t in last(upstream[1])["body"]["tools"]]
    expected = searcher.with_tools(openai_tools()).search("please book my flight now", pinned=["list_podcast"])
    assert names == list(expected.names) and names[0] == "list_podcast" and "book_flight" in names
    assert r.headers["x-shortlist-k"] == str(expected.k) and last(upstream[1])["body"]["tool_choice"] == choice


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"model": "m", "messages": [{"role": "user", "content": "hi"}]}, "no tools"),
        ({"model": "m", "messages": [{"role": "user", "content": "hi"}], "tools": []}, "no tools"),
        (chat(None), "no user text"),
        (chat(" "), "no user text"),
    ],
)
def test_requests_without_tools_or_user_text_pass_unchanged(
    proxy: TestClient, upstream: Any, body: dict, reason: str
) -> None:
    raw = json.dumps(body).encode()
    r = proxy.post("/v1/chat/completions", content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 200 and r.headers["x-shortlist-fallback"] == reason
    assert last(upstream[1])["body"] == body and "x-shortlist-k" not in r.headers


def test_a_text_that_scores_every_tool_alike_goes_with_every_tool(
    proxy: TestClient, upstream: Any, searcher: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A "yes, go ahead" after a request shares no word with any tool: the library would show min_k tools in registry
    order (its tie rule), dropping the tool the conversation needs; the proxy sends every tool instead."""
    body = chat("please book my flight now")
    body["messages"] += [{"role": "assistant", "content": "Shall I?"}, {"role": "user", "content": "yes, go ahead"}]
    assert searcher.with_tools(openai_tools()).search("yes, go ahead").why["tied"]  # the premise
    with caplog.at_level(logging.INFO, logger="servers.openai_proxy"):
        r = proxy.post("/v1/chat/completions", json=body)
    assert r.status_code == 200 and r.headers["x-shortlist-fallback"] == "tied scores"
    assert last(upstream[1])["body"] == body and "x-shortlist-k" not in r.headers
    assert "scores every tool alike" in caplog.text


def test_a_failing_searcher_forwards_every_tool_and_logs_why(
    proxy: TestClient, upstream: Any, caplog: pytest.LogCaptureFixture
) -> None:
    tools = [*openai_tools(), {"type": "function", "function": {"description": "no name"}}]
    with caplog.at_level(logging.WARNING, logger="servers.openai_proxy"):
        r = proxy.post("/v1/chat/completions", json={**chat(), "tools": tools})
    assert r.status_code == 200 and r.headers["x-shortlist-fallback"] == "searcher error: DataError"
    assert last(upstream[1])["body"]["tools"] == tools
    assert any("searcher failed" in m and "tools[100]: no tool name" in m for m in caplog.messages)


#: A Responses input continuing a previous response with a tool's output only (no user text), and built-in tools.
TOOL_OUTPUT = [{"type": "function_call_output", "call_id": "c1", "output": "42"}]
BUILT_IN = [{"type": "web_search"}, {"type": "file_search", "vector_store_ids": ["v"]}]


def flat_tools() -> list[dict[str, Any]]:
    """The generated tools in the Responses API's flat shape."""
    return [{"type": "function", **t["function"]} for t in openai_tools()]


def respond(text: object = "please book my flight now", tools: list | None = None, **extra: Any) -> dict[str, Any]:
    return {"model": "m", "input": text, "tools": flat_tools() if tools is None else tools, **extra}


def test_a_responses_request_goes_with_the_shortlist_of_its_function_tools(
    proxy: TestClient, upstream: Any, searcher: Any
) -> None:
    """Function tools are ranked and cut; a built-in tool is kept, first, as sent."""
    built_in = {"type": "web_search"}
    parts = [{"type": "input_text", "text": "please book my flight now"}]
    items = [{"type": "message", "role": "user", "content": parts}]
    r = proxy.post("/v1/responses", json=respond(items, [*flat_tools()[:50], built_in, *flat_tools()[50:]]),
                   headers={"Authorization": f"Bearer {KEY}"})  # fmt: skip
    assert r.status_code == 200, r.text
    registry = searcher.with_tools(openai_tools())
    expected = registry.search("please book my flight now")
    sent = last(upstream[1])
    assert sent["path"] == "/v1/responses" and sent["body"]["input"] == items
    assert sent["body"]["tools"] == [built_in, *[flat_tools()[registry.index[n]] for n in expected.names]]
    assert r.headers["x-shortlist-k"] == str(expected.k)
    assert r.headers["x-shortlist-tools"] == f"{len(expected.tools) + 1}/101"
    assert r.json()["output"][0]["content"][0]["text"] == "tools: web_search," + ",".join(expected.names)
    assert sent["headers"]["authorization"] == f"Bearer {KEY}"


def test_a_responses_tool_choice_is_pinned_and_the_rest_passes(proxy: TestClient, upstream: Any, searcher: Any) -> None:
    choice = {"type": "function", "name": "list_podcast"}
    r = proxy.post("/v1/responses", json=respond(tool_choice=choice))
    names = [t["name"] for t in last(upstream[1])["body"]["tools"]]
    expected = searcher.with_tools(openai_tools()).search("please book my flight now", pinned=["list_podcast"])
    assert names == list(expected.names) and names[0] == "list_podcast"
    assert r.headers["x-shortlist-k"] == str(expected.k)
    # allowed_tools: every function the model is restricted to is sent, in either API
    allowed = {"mode": "auto", "tools": chat_refs("list_podcast", "get_news")}
    restricted = {"type": "allowed_tools", "allowed_tools": allowed}
    proxy.post("/v1/chat/completions", json=chat(tool_choice=restricted))
    assert [t["function"]["name"] for t in last(upstream[1])["body"]["tools"]][:2] == ["list_podcast", "get_news"]
    refs = [{"type": "function", "name": "list_podcast"}, {"type": "function", "name": "get_news"}]
    proxy.post("/v1/responses", json=respond(tool_choice={"type": "allowed_tools", "mode": "auto", "tools": refs}))
    assert [t["name"] for t in last(upstream[1])["body"]["tools"]][:2] == ["list_podcast", "get_news"]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (respond(TOOL_OUTPUT, previous_response_id="r"), "no user text"),
        (respond(" "), "no user text"),
        (respond(tools=BUILT_IN), "no function tools"),
        (respond(tools=[]), "no tools"),
        ({"model": "m", "input": "hi"}, "no tools"),
    ],
)
def test_responses_requests_it_cannot_improve_pass_unchanged(
    proxy: TestClient, upstream: Any, body: dict, reason: str
) -> None:
    r = proxy.post("/v1/responses", json=body)
    assert r.status_code == 200 and r.headers["x-shortlist-fallback"] == reason
    assert last(upstream[1])["body"] == body and "x-shortlist-k" not in r.headers


@pytest.mark.parametrize(
    ("bad", "said"),
    [
        ({"type": "function", "description": "no name"}, "tools[4]: no tool name"),
        (
            {"type": "function", "name": "get_weather"},
            "tools[4] ('get_weather'): duplicate tool name (first at tools[1])",
        ),
    ],
)
def test_a_malformed_function_tool_beside_a_built_in_one_is_named_by_its_index_in_the_request(
    proxy: TestClient, upstream: Any, caplog: pytest.LogCaptureFixture, bad: dict, said: str
) -> None:
    tools = [{"type": "web_search"}, *flat_tools()[:3], bad]
    assert flat_tools()[0]["name"] == "get_weather"
    with caplog.at_level(logging.WARNING, logger="servers.openai_proxy"):
        r = proxy.post("/v1/responses", json=respond(tools=tools))
    assert r.status_code == 200 and r.headers["x-shortlist-fallback"] == "searcher error: DataError"
    assert last(upstream[1])["body"]["tools"] == tools
    assert any("a responses request" in m and said in m for m in caplog.messages), caplog.messages


def test_custom_tools_and_the_tool_searchs_pool_are_kept_in_either_api(
    proxy: TestClient, upstream: Any, searcher: Any
) -> None:
    """A tool that is not a function is kept, first; so are functions the hosted tool search loads on demand
    (``defer_loading``): cutting them would empty its pool."""
    expected = searcher.with_tools(openai_tools()).search("please book my flight now").names
    custom = {"type": "custom", "custom": {"name": "sql", "description": "Run SQL."}}
    proxy.post("/v1/chat/completions", json=chat(tools=[*openai_tools(), custom]))
    sent = last(upstream[1])["body"]["tools"]
    assert sent[0] == custom and [t["function"]["name"] for t in sent[1:]] == list(expected)
    deferred = [{**t, "defer_loading": True} for t in flat_tools()[60:]]
    tools = [*flat_tools()[:60], {"type": "tool_search"}, *deferred, {"type": "custom", "name": "sql"}]
    r = proxy.post("/v1/responses", json=respond(tools=tools))
    sent = last(upstream[1])["body"]["tools"]
    kept = [{"type": "tool_search"}, *deferred, {"type": "custom", "name": "sql"}]
    shown = searcher.with_tools(openai_tools()[:60]).search("please book my flight now").names
    assert sent[: len(kept)] == kept and [t["name"] for t in sent[len(kept) :]] == list(shown)
    assert r.headers["x-shortlist-tools"] == f"{len(kept) + len(shown)}/{len(tools)}"


def namespace(name: str, tools: list[dict[str, Any]]) -> dict[str, Any]:
    return {"type": "namespace", "name": name, "description": f"The {name} tools.", "tools": tools}


def namespaced_request() -> tuple[list[dict[str, Any]], list[str]]:
    """A Responses tool list with namespaces (OpenAI's recommended shape): ``other`` (functions 60-99), a built-in
    tool, functions 14-59 at the top level, ``air`` (10, 11 and 70), ``trip`` (12, and 13 deferred), ``later``
    (0-9, all deferred), ``then`` (0-9, the namespace deferred); and the names of its ranked functions in list
    order, qualified (``air.get_flight``)."""
    flat = flat_tools()
    deferred = [{**t, "defer_loading": True} for t in flat]
    tools = [namespace("other", flat[60:]), {"type": "web_search"}, *flat[14:60],
             namespace("air", [*flat[10:12], flat[70]]), namespace("trip", [flat[12], deferred[13]]),
             namespace("later", deferred[:10]), {**namespace("then", flat[:10]), "defer_loading": True}]  # fmt: skip
    ranked = [*(f"other.{t['name']}" for t in flat[60:]), *(t["name"] for t in flat[14:60]),
              "air.get_flight", "air.search_flight", f"air.{flat[70]['name']}", "trip.book_flight"]  # fmt: skip
    return tools, ranked


def leaves(tools: list[dict[str, Any]]) -> list[str]:
    """The names of the tools sent, a namespace's as ``namespace.name``, a built-in tool by its type."""
    out = []
    for t in tools:
        inner = [f"{t['name']}.{f['name']}" for f in t["tools"]] if t.get("type") == "namespace" else None
        out += inner if inner is not None else [t.get("name") or t["type"]]
    return out


def qualified_registry(searcher: ToolSearch, ranked: list[str]) -> ToolSearch:
    """The searcher over the generated tools named and described as the proxy ranks a namespaced request's
    functions: ``space.name``, the function's description then ``(space: The space tools.)``."""
    by_name = {t["function"]["name"]: t["function"] for t in openai_tools()}
    tools = []
    for n in ranked:
        space, _, own = n.rpartition(".")
        fn = by_name[own]
        about = f"{fn['description']} ({space}: The {space} tools.)" if space else fn["description"]
        tools.append({"type": "function", "function": {**fn, "name": n, "description": about}})
    return searcher.with_tools(tools)


def test_a_namespaces_functions_are_ranked_with_the_others_and_it_is_sent_with_those_chosen(
    make_proxy: Callable[..., TestClient], upstream: Any, searcher: Any
) -> None:
    """Each function of a ``namespace`` is ranked among the top-level ones, by its qualified name; the namespace
    goes with its own keys and, inside, the functions it keeps (deferred) and those chosen, in rank order: first
    with the kept tools when it keeps one, else at the place of its best-ranked function; without any, it is left
    out. A namespace of deferred functions only is kept whole."""
    tools, ranked = namespaced_request()
    expected = qualified_registry(searcher, ranked).search("please book my flight now", min_k=4)
    names = list(expected.names)
    assert any(n.startswith("air.") for n in names) and any(n.startswith("trip.") for n in names)
    assert not any(n.startswith("other.") for n in names)  # (so: left out)
    r = make_proxy(min_k=4).post("/v1/responses", json=respond(tools=tools))
    assert r.status_code == 200 and "x-shortlist-fallback" not in r.headers, r.headers
    sent = last(upstream[1])["body"]["tools"]
    later = [f"{space}.{t['name']}" for space in ("later", "then") for t in flat_tools()[:10]]
    trip = ["trip.cancel_flight", *(n for n in names if n.startswith("trip."))]  # its deferred function first
    rest: list[str] = []  # a namespace's chosen functions together, where its first one ranks
    for n in names:
        space = n.rpartition(".")[0]
        if not space:
            rest.append(n)
        elif space != "trip" and not any(m.startswith(f"{space}.") for m in rest):
            rest += [m for m in names if m.startswith(f"{space}.")]
    assert leaves(sent) == ["web_search", *trip, *later, *rest]
    spaces = [t["name"] for t in sent if t.get("type") == "namespace"]
    assert spaces == ["trip", "later", "then", "air"]  # each once; air where its first function ranks
    own = {t["name"]: {k: v for k, v in t.items() if k != "tools"} for t in sent if t.get("type") == "namespace"}
    given = {t["name"]: {k: v for k, v in t.items() if k != "tools"} for t in tools if t.get("type") == "namespace"}
    assert own == {n: given[n] for n in spaces}  # its keys as sent
    assert sent[2:4] == tools[-2:]  # later and then: kept whole, as sent
    assert r.headers["x-shortlist-k"] == str(expected.k)
    assert r.headers["x-shortlist-tools"] == f"{len(leaves(sent))}/{len(leaves(tools))}"
    assert r.json()["output"][0]["content"][0]["text"] == "tools: " + ",".join(leaves(sent))


def test_a_namespace_goes_where_its_best_function_ranks_holding_its_chosen_ones_in_rank_order(
    searcher: ToolSearch,
) -> None:
    """The body for a given rank order (air.get, top, air.list): the namespace once, at its first function's place,
    its chosen functions inside in rank order, the one not chosen left out; the tool count counts functions."""
    import msgspec

    from servers.openai_proxy import ITEMS, RESPONSES, ProxyConfig, Shortlister, _shortlisted

    flat = flat_tools()
    tools = [flat[11], namespace("air", [flat[14], flat[10], flat[70]]), flat[20]]
    raw = msgspec.json.encode(tools)
    shortlister = Shortlister(searcher, ProxyConfig(upstream="http://127.0.0.1:9"))
    ready = shortlister.prepared(msgspec.Raw(raw), ITEMS.decode(raw), RESPONSES)
    assert ready.search is not None
    order = ["air.get_flight", "search_flight", "air.list_flight"]
    body, sent = _shortlisted({"tools": msgspec.Raw(raw)}, ITEMS.decode(raw), ready,
                              [ready.search.index[n] for n in order])  # fmt: skip
    out = msgspec.json.decode(body)["tools"]
    assert leaves(out) == ["air.get_flight", "air.list_flight", "search_flight"] and sent == 3
    assert out[0] == namespace("air", [flat[10], flat[14]])  # (flat[70], not chosen, left out)
    assert sum(ready.sizes) == 5


def test_a_namespaces_name_and_description_are_part_of_its_functions_text(
    proxy: TestClient, upstream: Any, searcher: ToolSearch
) -> None:
    """Two namespaces with the same function: the request naming one's subject gets that one first."""
    send = {"type": "function", "name": "send", "description": "Send a message.", "parameters": {"type": "object"}}
    gmail = {**namespace("gmail", [send]), "description": "Email: compose and read mail."}
    slack = {**namespace("slack", [send]), "description": "Team chat: channels and direct messages."}
    for text, first in (("send a message to the team chat channel", "slack"), ("send an email", "gmail")):
        proxy.post("/v1/responses", json=respond(text, tools=[gmail, slack, *flat_tools()[:20]]))
        assert leaves(last(upstream[1])["body"]["tools"])[0] == f"{first}.send", text


def test_a_function_in_use_or_pinned_by_its_bare_name_means_every_namespaces_function_of_that_name(
    make_proxy: Callable[..., TestClient], upstream: Any
) -> None:
    """A ``function_call`` without ``namespace``, or a ``tool_choice``, names a function by its own name: a top-level
    function of that name is the one meant; else every namespace's function of it is kept."""
    flat = flat_tools()
    podcast = flat[99]["name"]
    tools = [*flat[:30], namespace("a", [flat[99], flat[98]]), namespace("b", [flat[99]]), namespace("c", [flat[0]])]
    proxy = make_proxy(max_k=1)
    called = {"type": "function_call", "call_id": "c1", "name": podcast, "arguments": "{}"}
    items = [{"role": "user", "content": "please book my flight now"}, called, TOOL_OUTPUT[0]]
    r = proxy.post("/v1/responses", json=respond(items, tools=tools))
    sent = leaves(last(upstream[1])["body"]["tools"])
    assert {f"a.{podcast}", f"b.{podcast}"} <= set(sent) and f"a.{flat[98]['name']}" not in sent
    assert r.headers["x-shortlist-tools"] == f"{len(sent)}/{30 + 2 + 1 + 1}"
    proxy.post("/v1/responses", json=respond(tools=tools, tool_choice={"type": "function", "name": flat[0]["name"]}))
    sent = leaves(last(upstream[1])["body"]["tools"])
    assert sent[0] == flat[0]["name"] and f"c.{flat[0]['name']}" not in sent  # the top-level one is meant
    assert qualified("x", 3) == "x" and qualified(3, "ns") == 3 and qualified("x", "ns") == "ns.x"


def test_a_namespaced_function_in_use_or_forced_is_sent_in_its_namespace(proxy: TestClient, upstream: Any) -> None:
    """A ``function_call`` item names a namespace's function by ``name`` and ``namespace``: it stays in the list. A
    ``tool_choice`` names a function by its own name only: a namespace's function of that name is pinned."""
    tools, _ = namespaced_request()
    podcast = flat_tools()[99]["name"]  # in namespace other
    called = {"type": "function_call", "call_id": "c1", "name": podcast, "namespace": "other", "arguments": "{}"}
    items = [{"role": "user", "content": "please book my flight now"}, called, TOOL_OUTPUT[0]]
    proxy.post("/v1/responses", json=respond(items, tools=tools))
    assert leaves(last(upstream[1])["body"]["tools"])[-1] == f"other.{podcast}"
    proxy.post("/v1/responses", json=respond(tools=tools, tool_choice={"type": "function", "name": podcast}))
    sent = leaves(last(upstream[1])["body"]["tools"])
    after_kept = 1 + max(i for i, n in enumerate(sent) if n.startswith("then."))
    assert sent[after_kept] == f"other.{podcast}"  # pinned: first of the ranked tools


def test_a_malformed_function_in_a_namespace_is_named_where_it_is(
    proxy: TestClient, upstream: Any, caplog: pytest.LogCaptureFixture
) -> None:
    tools = [*flat_tools()[:3], namespace("crm", [flat_tools()[3], {"type": "function", "description": "no name"}])]
    with caplog.at_level(logging.WARNING, logger="servers.openai_proxy"):
        r = proxy.post("/v1/responses", json=respond(tools=tools))
    assert r.headers["x-shortlist-fallback"] == "searcher error: DataError"
    assert last(upstream[1])["body"]["tools"] == tools
    assert any("tools[3].tools[1]: no tool name" in m for m in caplog.messages), caplog.messages


def test_an_untyped_tool_choice_still_pins_its_function(proxy: TestClient, upstream: Any) -> None:
    """vLLM and servers like it default a tool_choice's missing ``type`` to ``function``."""
    proxy.post("/v1/chat/completions", json=chat(tool_choice={"function": {"name": "list_podcast"}}))
    assert last(upstream[1])["body"]["tools"][0]["function"]["name"] == "list_podcast"


def test_a_responses_request_keeps_its_own_bytes_but_for_the_tools(proxy: TestClient, upstream: Any) -> None:
    import msgspec

    raw = json.dumps(respond(instructions="Be brief.", temperature=0.5, store=False), indent=2).encode()
    proxy.post("/v1/responses", content=raw, headers={"content-type": "application/json"})
    top = msgspec.json.Decoder(dict[str, msgspec.Raw])
    given, sent = top.decode(raw), top.decode(last(upstream[1])["raw"])
    assert list(sent) == list(given) and all(bytes(sent[k]) == bytes(given[k]) for k in given if k != "tools")
    items = msgspec.json.Decoder(list[msgspec.Raw]).decode(sent["tools"])
    assert 0 < len(items) < 100 and all(bytes(i) in bytes(given["tools"]) for i in items)


@pytest.mark.parametrize("stream", [False, True])
def test_a_response_continued_with_a_tools_output_is_shortlisted_on_its_requests_text(
    make_proxy: Callable[..., TestClient], upstream: Any, searcher: Any, stream: bool
) -> None:
    """An agent loop on the Responses API: the next request holds only the tool's output and the previous
    response's id; the proxy remembers the text that response's request was shortlisted on (its id read from the
    answer, or from the stream's first event), along the whole chain."""
    proxy = make_proxy(responses_kept=2)
    expected = searcher.with_tools(openai_tools()).search("please book my flight now").names

    def sent(r: Any) -> list[str]:
        assert r.status_code == 200
        return [t["name"] for t in last(upstream[1])["body"]["tools"]]

    def answer_id(r: Any) -> str:
        if not stream:
            return str(r.json()["id"])
        created = json.loads(r.text.split("\n\n")[0].split("data: ", 1)[1])
        return str(created["response"]["id"])

    first = proxy.post("/v1/responses", json=respond(stream=stream))
    assert sent(first) == list(expected) and "x-shortlist-text" not in first.headers
    rid = answer_id(first)
    for _ in range(2):  # the text carries along the chain
        follow = proxy.post("/v1/responses", json=respond(TOOL_OUTPUT, previous_response_id=rid, stream=stream))
        assert sent(follow) == list(expected) and follow.headers["x-shortlist-text"] == "previous response"
        rid = answer_id(follow)
    unknown = proxy.post("/v1/responses", json=respond(TOOL_OUTPUT, previous_response_id="resp-other"))
    assert unknown.headers["x-shortlist-fallback"] == "no user text" and len(sent(unknown)) == 100
    for _ in range(2):  # two other responses remembered: the bound (2) drops the oldest, rid
        proxy.post("/v1/responses", json=respond())
    dropped = proxy.post("/v1/responses", json=respond(TOOL_OUTPUT, previous_response_id=rid))
    assert dropped.headers["x-shortlist-fallback"] == "no user text"


def test_input_tokens_are_counted_with_the_shortlist(proxy: TestClient, upstream: Any) -> None:
    r = proxy.post("/v1/responses/input_tokens", json=respond())
    sent = last(upstream[1])
    assert sent["path"] == "/v1/responses/input_tokens" and 0 < len(sent["body"]["tools"]) < 100
    assert r.status_code == 200 and r.json()["input_tokens"] == len(json.dumps(sent["body"])) // 4
    assert r.headers["x-shortlist-tools"] == f"{len(sent['body']['tools'])}/100"


#: The events of the fake upstream's streamed Responses answer with text, as OpenAI streams one.
STREAMED_TEXT = ["response.created", "response.output_item.added", "response.content_part.added",
                 "response.output_text.delta", "response.output_text.delta", "response.output_text.done",
                 "response.content_part.done", "response.output_item.done", "response.completed"]  # fmt: skip


def test_a_streamed_responses_answer_is_relayed(proxy: TestClient, upstream: Any, searcher: Any) -> None:
    r = proxy.post("/v1/responses", json=respond(stream=True))
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = [e for e in r.text.split("\n\n") if e]
    kinds = [e.split("\n")[0] for e in events]
    assert kinds == [f"event: {kind}" for kind in STREAMED_TEXT]
    expected = searcher.with_tools(openai_tools()).search("please book my flight now").names
    assert [t["name"] for t in last(upstream[1])["body"]["tools"]] == list(expected)
    assert r.headers["x-shortlist-k"] == str(len(expected))


def test_the_official_openai_sdk_gets_the_shortlist_in_both_apis(proxy: TestClient, searcher: Any) -> None:
    """The ``openai`` package's client (its requests, its parsing of the answers, streamed or not) through the
    proxy: the agent's code changes only its base URL."""
    from openai import OpenAI

    client = OpenAI(base_url="http://testserver/v1", api_key=KEY, http_client=proxy)
    expected = searcher.with_tools(openai_tools()).search("please book my flight now")
    shown = "tools: " + ",".join(expected.names)
    messages: Any = [{"role": "user", "content": "please book my flight now"}]
    chat_tools: Any = openai_tools()
    raw = client.chat.completions.with_raw_response.create(model="m", messages=messages, tools=chat_tools)
    assert raw.parse().choices[0].message.content == shown and raw.headers["x-shortlist-k"] == str(expected.k)
    chunks: Any = client.chat.completions.create(model="m", messages=messages, tools=chat_tools, stream=True)
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == shown
    tools: Any = [{"type": "web_search"}, *flat_tools()]
    answer = client.responses.create(model="m", input="please book my flight now", tools=tools)
    assert answer.output_text == "tools: web_search," + ",".join(expected.names)
    with client.responses.stream(model="m", input=messages, tools=tools) as events:
        kinds = [e.type for e in events]
        assert events.get_final_response().output_text == "tools: web_search," + ",".join(expected.names)
    assert kinds == STREAMED_TEXT


def anthropic_tools() -> list[dict[str, Any]]:
    """The generated tools as Anthropic client tools (``input_schema``)."""
    return [{"name": f["name"], "description": f["description"], "input_schema": f["parameters"]}
            for f in (t["function"] for t in openai_tools())]  # fmt: skip


def ask(messages: Any = "please book my flight now", tools: list | None = None, **extra: Any) -> dict[str, Any]:
    """An Anthropic Messages API request body."""
    if isinstance(messages, str):
        messages = [{"role": "user", "content": messages}]
    return {"model": "m", "max_tokens": 64, "messages": messages,
            "tools": anthropic_tools() if tools is None else tools, **extra}  # fmt: skip


WEB_SEARCH = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}


USE = {"type": "tool_use", "id": "t1", "name": "book_flight", "input": {}}
RESULT = {"type": "tool_result", "tool_use_id": "t1", "content": "booked"}
IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
ASKED = {"role": "user", "content": [{"type": "text", "text": "please book my flight now"}]}


@pytest.mark.parametrize(
    ("messages", "pinned"),
    [
        ("please book my flight now", []),
        # a tool loop's turn (tool_result first, whatever follows) is not the request: the message before is;
        # the tool in use (in the shortlist already: the same list as the first turn's) stays
        ([ASKED, {"role": "assistant", "content": [USE]}, {"role": "user", "content": [RESULT]}], ["book_flight"]),
        ([ASKED, {"role": "assistant", "content": [USE]},
          {"role": "user", "content": [RESULT, {"type": "text", "text": "<reminder>no todos</reminder>"}, IMAGE]}],
         ["book_flight"]),
        # a tool made available mid-conversation (beta tool_addition) must stay in tools
        ([{"role": "user", "content": [{"type": "tool_addition", "tool": {"type": "tool_reference",
                                                                          "name": "list_podcast"}}]}, ASKED],
         ["list_podcast"]),
    ],
)  # fmt: skip
def test_an_anthropic_messages_request_goes_with_the_shortlist_of_its_client_tools(
    proxy: TestClient, upstream: Any, searcher: Any, messages: Any, pinned: list[str]
) -> None:
    """Client tools (no type, a null one, or ``custom``) are ranked on the request's text; server tools and tools
    the tool search defers are kept, first."""
    shortlist = searcher.with_tools(openai_tools()).search("please book my flight now")
    expected = [*shortlist.names, *(n for n in pinned if n not in shortlist.names)]  # a tool in use: at the end
    deferred = {**anthropic_tools()[3], "name": "later", "defer_loading": True}
    first, second, *rest = anthropic_tools()
    client = [{**first, "type": "custom"}, {**second, "type": None}, *rest]
    tools = [WEB_SEARCH, *client, deferred]
    r = proxy.post("/v1/messages", json=ask(messages, tools), headers={"x-api-key": KEY})
    assert r.status_code == 200, r.text
    sent = last(upstream[1])
    assert sent["path"] == "/v1/messages" and sent["headers"]["x-api-key"] == KEY
    assert sent["body"]["tools"][:2] == [WEB_SEARCH, deferred]
    assert [t["name"] for t in sent["body"]["tools"][2:]] == expected
    assert r.headers["x-shortlist-tools"] == f"{len(expected) + 2}/{len(tools)}"
    assert r.json()["content"][0]["text"] == "tools: web_search,later," + ",".join(expected)


def test_an_anthropic_tool_choice_pins_and_what_cannot_be_improved_passes(proxy: TestClient, upstream: Any) -> None:
    proxy.post("/v1/messages", json=ask(tool_choice={"type": "tool", "name": "list_podcast"}))
    assert last(upstream[1])["body"]["tools"][0]["name"] == "list_podcast"
    for body, reason in ((ask(tools=[WEB_SEARCH]), "no client tools"),
                         (ask([{"role": "user", "content": [IMAGE]}]), "no user text")):  # fmt: skip
        r = proxy.post("/v1/messages", json=body)
        assert r.headers["x-shortlist-fallback"] == reason and last(upstream[1])["body"] == body


def test_the_proxys_own_errors_take_anthropics_shape_on_its_paths(make_proxy: Callable[..., TestClient]) -> None:
    small = make_proxy(max_body_bytes=2000)
    for r, status, kind, code in (
        (small.post("/v1/messages", content=b"{not json"), 400, "invalid_request_error", "invalid_json"),
        (small.post("/v1/messages", json=ask()), 413, "request_too_large", "body_too_large"),
        (small.post("/v1/models", content=b"x" * 3000, headers={"anthropic-version": "2023-06-01"}), 413,
         "request_too_large", "body_too_large"),
    ):  # fmt: skip
        assert r.status_code == status and r.json()["type"] == "error", r.text
        assert r.json()["error"]["type"] == kind and r.json()["error"]["details"]["error_code"] == code
    assert "error" in small.post("/v1/models", content=b"x" * 3000).json()  # an OpenAI client's: OpenAI's shape
    assert small.post("/v1/models", content=b"x" * 3000).json()["error"]["code"] == "body_too_large"


def test_one_tool_list_is_read_by_each_familys_rules(proxy: TestClient, upstream: Any) -> None:
    """The same bytes: Anthropic ranks its ``custom`` client tools; for OpenAI a ``custom`` tool is not a function.
    (The prepared list is kept per family.)"""
    tools = [{**t, "type": "custom"} for t in anthropic_tools()]
    assert int(proxy.post("/v1/messages", json=ask(tools=tools)).headers["x-shortlist-k"]) >= 1
    r = proxy.post("/v1/responses", json=respond(tools=tools))
    assert r.headers["x-shortlist-fallback"] == "no function tools" and len(last(upstream[1])["body"]["tools"]) == 100


def test_tools_called_earlier_in_an_openai_conversation_stay(proxy: TestClient, upstream: Any) -> None:
    call = {"id": "c1", "type": "function", "function": {"name": "list_podcast", "arguments": "{}"}}
    messages = [{"role": "user", "content": "please book my flight now"},
                {"role": "assistant", "content": None, "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "c1", "content": "[]"}]  # fmt: skip
    proxy.post("/v1/chat/completions", json={"model": "m", "messages": messages, "tools": openai_tools()})
    names = [t["function"]["name"] for t in last(upstream[1])["body"]["tools"]]
    assert names[-1] == "list_podcast" and "list_podcast" not in names[:-1] and names[0] == "book_flight"
    items = [{"role": "user", "content": "please book my flight now"},
             {"type": "function_call", "call_id": "c1", "name": "list_podcast", "arguments": "{}"},
             {"type": "function_call_output", "call_id": "c1", "output": "[]"}]  # fmt: skip
    proxy.post("/v1/responses", json=respond(items))
    assert [t["name"] for t in last(upstream[1])["body"]["tools"]][-1] == "list_podcast"


def test_the_official_anthropic_sdk_gets_the_shortlist(proxy: TestClient, upstream: Any, searcher: Any) -> None:
    """The ``anthropic`` package's client through the proxy (its base URL the proxy's root): create, stream and
    count_tokens."""
    from anthropic import Anthropic

    client = Anthropic(base_url="http://testserver", api_key=KEY, http_client=proxy)
    names = searcher.with_tools(openai_tools()).search("please book my flight now").names
    shown = "tools: web_search," + ",".join(names)
    tools: Any = [WEB_SEARCH, *anthropic_tools()]
    messages: Any = [{"role": "user", "content": "please book my flight now"}]
    message = client.messages.create(model="m", max_tokens=64, messages=messages, tools=tools)
    assert message.content[0].type == "text" and message.content[0].text == shown
    headers = last(upstream[1])["headers"]  # the key (x-api-key, or a bearer token in newer clients) passed on
    assert KEY in headers.get("x-api-key", "") + headers.get("authorization", "") and "anthropic-version" in headers
    with client.messages.stream(model="m", max_tokens=64, messages=messages, tools=tools) as stream:
        assert "".join(stream.text_stream) == shown
    counted = client.messages.count_tokens(model="m", messages=messages, tools=tools)
    sent = last(upstream[1])
    assert sent["path"] == "/v1/messages/count_tokens" and len(sent["body"]["tools"]) == len(names) + 1
    assert counted.input_tokens == len(json.dumps(sent["body"])) // 4


def test_streaming_is_relayed(proxy: TestClient, upstream: Any) -> None:
    r = proxy.post("/v1/chat/completions", json=chat(stream=True))
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    events = [line for line in r.text.split("\n\n") if line]
    assert len(events) == 4 and events[-1] == "data: [DONE]" and "x-shortlist-k" in r.headers
    text = "".join(json.loads(e[6:])["choices"][0]["delta"].get("content", "") for e in events[:-1])
    assert text.startswith("tools: book_flight")


def test_other_paths_pass_unchanged_with_the_key(proxy: TestClient, upstream: Any) -> None:
    r = proxy.get("/v1/models", headers={"Authorization": f"Bearer {KEY}"})
    assert r.status_code == 200 and r.json()["data"][0]["id"] == "fake"
    assert last(upstream[1])["path"] == "/v1/models"
    assert last(upstream[1])["headers"]["authorization"] == f"Bearer {KEY}"


def test_healthz_answers_what_is_served_and_goes_nowhere(proxy: TestClient, upstream: Any, searcher: Any) -> None:
    before = upstream[1].count
    r = proxy.get("/healthz")
    from servers import policy_id

    assert r.status_code == 200 and r.json() == {"status": "ok", "server": "shortlist serve openai",
                                                 "scorer": searcher.scorer, "policy": searcher.policy.method,
                                                 "tools": None, "policy_id": policy_id(searcher.policy)}  # fmt: skip
    assert proxy.head("/healthz").status_code == 200 and proxy.post("/healthz").status_code == 405
    assert upstream[1].count == before  # not forwarded


def test_upstream_errors_keep_their_status(proxy: TestClient) -> None:
    for status in (401, 429, 503):
        r = proxy.post("/v1/chat/completions", json=chat(), headers={"x-fake-status": str(status)})
        assert r.status_code == status and r.json()["error"]["message"] == f"fake upstream error {status}"


def test_an_upstream_that_times_out_is_a_504(make_proxy: Callable[..., TestClient]) -> None:
    r = make_proxy(timeout=0.3).post("/v1/chat/completions", json=chat(), headers={"x-fake-delay": "1.5"})
    assert r.status_code == 504 and r.json()["error"]["code"] == "upstream_timeout"


def test_an_unreachable_upstream_is_a_502(searcher: ToolSearch) -> None:
    with socket.socket() as dead:  # a port bound here and never listened on: every connection is refused
        dead.bind((DEFAULT_HOST, 0))
        config = ProxyConfig(upstream=f"http://{DEFAULT_HOST}:{dead.getsockname()[1]}/v1", timeout=5)
        with TestClient(create_app(searcher, config)) as c:
            r = c.post("/v1/chat/completions", json=chat())
    assert r.status_code == 502 and r.json()["error"]["code"] == "upstream_unreachable"


def test_bad_bodies_are_refused_and_never_forwarded(make_proxy: Callable[..., TestClient], upstream: Any) -> None:
    small = make_proxy(max_body_bytes=2000)
    before = upstream[1].count
    r = small.post("/v1/chat/completions", json=chat())  # ~9 kB of tools
    assert r.status_code == 413 and "2000 bytes" in r.json()["error"]["message"]
    assert small.post("/v1/models", content=b"x" * 3000).status_code == 413
    for raw, what in ((b"{not json", "not JSON"), (b"[1, 2]", "must be a JSON object")):
        r = small.post("/v1/chat/completions", content=raw)
        assert r.status_code == 400 and what in r.json()["error"]["message"]
    assert upstream[1].count == before


def test_the_key_is_in_no_log_record(proxy: TestClient, upstream: Any, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG):
        for body in (chat(), chat(stream=True), chat(None)):
            proxy.post("/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {KEY}"})
        proxy.get("/v1/models", headers={"Authorization": f"Bearer {KEY}"})
    assert caplog.records and last(upstream[1])["headers"]["authorization"] == f"Bearer {KEY}"
    assert not [r for r in caplog.records if KEY in r.getMessage() or KEY in str(r.args)]


def readme_command(name: str) -> list[str]:
    """The README's ``shortlist serve <name>`` command line (section "In your agent")."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    found = re.findall(rf"^(shortlist serve {name} .*?)(?:\s+#.*)?$", readme, flags=re.M)
    assert len(found) == 1, f"the README shows one `shortlist serve {name}` command, found {found}"
    return shlex.split(found[0])


def test_the_readme_command_serves_and_streams_chunk_by_chunk(
    searcher_dir: Path, upstream: Any, tmp_path: Path
) -> None:
    argv = readme_command("openai")
    argv[argv.index("--searcher") + 1] = str(searcher_dir)
    argv[argv.index("--upstream") + 1] = upstream[0] + "/v1"
    log = tmp_path / "proxy.log"
    cmd = [sys.executable, "-m", "experiments.cli", *argv[1:], "--port", "0"]
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, stdout=err, stderr=subprocess.STDOUT, env=cli_env())
    try:
        base = wait_announced(log, proc)
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", base), base
        assert httpx.get(f"{base.removesuffix('/v1')}/healthz", timeout=10).json()["status"] == "ok"
        headers = {"Authorization": f"Bearer {KEY}", "x-fake-chunk-gap": "0.4"}
        url = f"{base}/chat/completions"
        arrived = []
        with httpx.stream("POST", url, json=chat(stream=True), headers=headers, timeout=30) as r:
            assert r.status_code == 200 and int(r.headers["x-shortlist-k"]) >= 1
            for line in r.iter_lines():
                if line:
                    arrived.append((time.monotonic(), line))
        assert arrived[-1][1] == "data: [DONE]" and len(arrived) == 4
        assert arrived[-1][0] - arrived[0][0] > 0.6, "the chunks came together: the stream was buffered"
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    text = log.read_text()
    assert "chat request: k=" in text and KEY not in text


def test_a_key_in_a_url_is_never_logged(searcher_dir: Path, upstream: Any, tmp_path: Path) -> None:
    """A key in the upstream's URL (user info) or in a client's query string: in no log line of the proxy (its
    start, its HTTP client's request lines, uvicorn's access log), nor in the error refusing a bad --upstream."""
    from servers import check_url, redact_url

    secret, query = "UPSECRET-999", "QUERYSECRET-888"
    with_key = upstream[0].replace("http://", f"http://tok:{secret}@") + "/v1"
    assert redact_url(with_key) == upstream[0].replace("http://", "http://***@") + "/v1"
    assert redact_url("https://h/v1?api-key=k#f") == "https://h/v1?***#***"
    assert redact_url("http://h:1/") == "http://h:1/"
    with pytest.raises(ValueError, match=r"no query or fragment") as refused:
        check_url(f"{with_key}?api-key={secret}", "--upstream", base=True)
    assert secret not in str(refused.value)
    log = tmp_path / "proxy.log"
    cmd = [sys.executable, "-m", "experiments.cli", "serve", "openai", "--searcher", str(searcher_dir),
           "--upstream", with_key, "--port", "0"]  # fmt: skip
    with log.open("w") as err:
        proc = subprocess.Popen(cmd, stdout=err, stderr=subprocess.STDOUT, env=cli_env())
    try:
        base = wait_announced(log, proc)
        assert httpx.get(f"{base}/models?key={query}", timeout=30).status_code == 200
        assert httpx.post(f"{base}/chat/completions", json=chat(), timeout=30).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    text = log.read_text()
    assert "GET /v1/models?*** HTTP" in text and "chat request: k=" in text  # the lines are there, without the keys
    assert secret not in text and query not in text


def test_the_readme_base_url_is_the_proxys_default_address() -> None:
    from experiments import options as o

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    urls = set(re.findall(r"http://127\.0\.0\.1:\d+/v1", readme))
    defaults = o.ServeOpenaiArgs(searcher="s", upstream="http://u")
    assert urls == {f"http://{defaults.host}:{defaults.port}/v1"}
    assert 'OpenAI(base_url="http://127.0.0.1:8080/v1")' in readme


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("localhost:8080/v1", "--upstream must be an http(s) URL with a host, got 'localhost:8080/v1'"),
        ("ftp://h/v1", "--upstream must be an http(s) URL with a host, got 'ftp://h/v1'"),
        ("http://", "--upstream must be an http(s) URL with a host, got 'http://'"),
        ("http://h:99999/v1", "--upstream 'http://h:99999/v1': Port out of range 0-65535"),
        ("http://h/v1?key=1", "--upstream is a base URL, as an OpenAI client's base_url: no query or fragment"),
    ],
)
def test_an_upstream_that_is_no_base_url_is_a_one_line_error(
    url: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from experiments.cli import main

    assert main(["serve", "openai", "--upstream", url, "--port", "0"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"shortlist: error: {said}") and "\n" not in err, err
    assert main(["downstream", "--chooser", "openai", "--base-url", url, "--model", "m", "--dry-run"]) == 2
    assert capsys.readouterr().err.strip().startswith(f"shortlist: error: {said.replace('--upstream', '--base-url')}")
