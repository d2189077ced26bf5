"""The tool search as a provider's client-executed tool search (:mod:`shortlist_depth.toolsearch`): OpenAI's
Responses API ``tool_search`` with ``"execution": "client"`` answered by ``ToolSearch.answer_tool_search_call``,
checked against the official ``openai`` SDK's own types and driven with its client through a fake upstream on
127.0.0.1; the tools given back in the Responses function shape whatever shape they came in. Anthropic's: a
client tool answered by ``ToolSearch.answer_tool_use`` with ``tool_reference`` blocks, driven with the official
``anthropic`` client likewise."""

from __future__ import annotations

import json
from typing import Any

import anthropic
import openai
import pytest
from openai.types.responses import ResponseToolSearchOutputItemParam, ToolSearchTool
from test_toolsearch import mcp_tools, openai_tools

from servers.fakes import Received, fake_openai_app, serve_in_thread
from shortlist_depth.toolsearch import TOOL_SEARCH_PARAMETERS, ToolSearch, responses_function

REQUEST = "please book my flight now"


@pytest.fixture(scope="module")
def search() -> ToolSearch:
    return ToolSearch.from_tools(openai_tools())


def test_the_tools_come_back_in_the_responses_function_shape_from_every_shape() -> None:
    """Chat Completions' ``function`` lifted, an MCP tool's ``inputSchema`` as its parameters, a flat one as it is;
    ``defer_loading`` dropped (the answer loads the tool)."""
    chat = openai_tools()[12]
    flat = {"type": "function", **chat["function"]}
    assert responses_function(chat) == flat
    assert responses_function({**flat, "defer_loading": True, "strict": True}) == {**flat, "strict": True}
    mcp = {**mcp_tools()["tools"][12], "title": "Book", "annotations": {"readOnlyHint": False}}
    assert responses_function(mcp) == flat
    bare = {k: v for k, v in flat.items() if k != "type"}
    assert responses_function(bare) == flat
    assert responses_function({"name": "ping", "inputSchema": {"type": "object"}}) == {
        "type": "function", "name": "ping", "parameters": {"type": "object"}}  # fmt: skip


def test_the_tool_and_its_answer_are_what_the_openai_sdk_reads(search: ToolSearch) -> None:
    tool = search.openai_tool_search_tool()
    assert ToolSearchTool.model_validate(tool).execution == "client"
    tool["parameters"]["properties"].clear()  # (a copy: the module's schema is untouched)
    assert TOOL_SEARCH_PARAMETERS["properties"]
    call = {"type": "tool_search_call", "call_id": "c7", "arguments": {"query": REQUEST}, "execution": "client"}
    answer = search.answer_tool_search_call(call, max_k=3)
    shortlist = search.search(REQUEST, max_k=3)
    assert answer == shortlist.as_tool_search_output("c7")
    assert [t["name"] for t in answer["tools"]] == list(shortlist.names)
    parsed = ResponseToolSearchOutputItemParam.model_validate(answer)
    assert parsed.call_id == "c7" and parsed.execution == "client" and len(parsed.tools) == len(shortlist.names)
    as_string = {**call, "arguments": json.dumps({"query": REQUEST})}  # (a client that keeps the arguments as JSON)
    assert search.answer_tool_search_call(as_string, max_k=3) == answer
    # the search's own bounds and pins, the library's default bound
    assert search.answer_tool_search_call(call) == search.search(REQUEST).as_tool_search_output("c7")
    pinned = search.answer_tool_search_call(call, max_k=2, pinned=["get_news"], exclude=["book_flight"])
    assert [t["name"] for t in pinned["tools"]] == list(
        search.search(REQUEST, max_k=2, pinned=["get_news"], exclude=["book_flight"]).names)  # fmt: skip
    assert pinned["tools"][0]["name"] == "get_news" and "book_flight" not in {t["name"] for t in pinned["tools"]}
    assert responses_function({"type": "custom", "name": "sql", "description": "Run SQL."})["type"] == "custom"


@pytest.mark.parametrize(
    ("call", "said"),
    [
        ({"type": "function_call", "call_id": "c1", "name": "x"}, "call 'c1': not a tool_search_call"),
        ({"type": "tool_search_call", "call_id": "c2", "arguments": {"paths": ["a"]}}, "'c2': its arguments hold no"),
        ({"type": "tool_search_call", "call_id": "c3", "arguments": "{not json"}, "'c3': its arguments are not JSON"),
        ({"type": "tool_search_call", "call_id": "c4"}, "'c4': its arguments hold no 'query' string"),
        ({"type": "tool_search_call", "call_id": "c5", "arguments": {"query": " "}}, "'c5': its query has no text"),
        (
            {"type": "tool_search_call", "call_id": "c6", "execution": "server", "arguments": {"query": "a"}},
            "'c6': executed by the server",
        ),
        ({"type": "tool_search_call", "arguments": {"query": "a"}}, "tool_search_call without its call_id"),
    ],
)
def test_a_call_it_cannot_answer_is_one_line_naming_it(search: ToolSearch, call: dict[str, Any], said: str) -> None:
    with pytest.raises(ValueError, match=said):
        search.answer_tool_search_call(call)


def test_the_official_client_runs_the_loop_with_the_searcher_as_its_tool_search(search: ToolSearch) -> None:
    """The model (a fake upstream) calls the client-executed tool search; the SDK's own call object is answered and
    both go back in the next request's input, as the SDK sends them."""
    received = Received()
    with serve_in_thread(fake_openai_app(received)) as url:
        client = openai.OpenAI(base_url=f"{url}/v1", api_key="sk-test")
        tools = [search.openai_tool_search_tool()]
        first = client.responses.create(model="m", input=REQUEST, tools=tools,
                                        extra_headers={"x-fake-tool-search": "book a flight"})  # fmt: skip
        (call,) = [item for item in first.output if item.type == "tool_search_call"]
        answer = search.answer_tool_search_call(call)
        client.responses.create(model="m", input=[{"role": "user", "content": REQUEST}, call, answer], tools=tools)
    assert received.requests[0]["body"]["tools"] == tools
    sent = received.requests[-1]["body"]["input"]
    assert sent[1]["type"] == "tool_search_call" and sent[1]["arguments"] == {"query": "book a flight"}
    assert sent[2] == answer and answer["call_id"] == call.call_id == "call_ts_0"
    assert [t["name"] for t in answer["tools"]] == list(search.search("book a flight").names)


def test_the_official_anthropic_client_runs_the_loop_with_the_searcher_as_its_tool_search(search: ToolSearch) -> None:
    """The model (a fake upstream) calls the search tool; the SDK's own ``tool_use`` block is answered with a
    ``tool_result`` of ``tool_reference`` blocks, sent back in the next user message as the SDK sends it."""
    from anthropic.types import ToolUseBlock

    received = Received()
    deferred = [{"name": f["name"], "description": f["description"], "input_schema": f["parameters"],
                 "defer_loading": True} for f in (t["function"] for t in openai_tools())]  # fmt: skip
    tool = search.anthropic_tool_search_tool()
    assert tool["name"] == "search_tools" and tool["input_schema"] == TOOL_SEARCH_PARAMETERS
    with serve_in_thread(fake_openai_app(received)) as url:
        client = anthropic.Anthropic(base_url=url, api_key="sk-ant-test")
        asked = [{"role": "user", "content": REQUEST}]
        first = client.messages.create(model="m", max_tokens=64, messages=asked, tools=[tool, *deferred],
                                       extra_headers={"x-fake-tool-search": "book a flight"})  # fmt: skip
        (block,) = [b for b in first.content if isinstance(b, ToolUseBlock)]
        answer = search.answer_tool_use(block, max_k=3)
        client.messages.create(model="m", max_tokens=64, tools=[tool, *deferred], messages=[
            {"role": "user", "content": REQUEST}, {"role": "assistant", "content": first.content},
            {"role": "user", "content": [answer]}])  # fmt: skip
    sent = received.requests[-1]["body"]["messages"]
    assert sent[1]["content"][0] == {"type": "tool_use", "id": "toolu_ts", "name": "search_tools",
                                     "input": {"query": "book a flight"}}  # fmt: skip
    names = list(search.search("book a flight", max_k=3).names)
    assert sent[2]["content"] == [answer] and answer == {
        "type": "tool_result", "tool_use_id": "toolu_ts",
        "content": [{"type": "tool_reference", "tool_name": n} for n in names]}  # fmt: skip


@pytest.mark.parametrize(
    ("block", "said"),
    [
        ({"type": "text", "id": "b1", "text": "hi"}, "call 'b1': not a tool_use"),
        ({"type": "tool_use", "id": "b2", "name": "search_tools", "input": {}}, "tool_use 'b2': its arguments hold no"),
        ({"type": "tool_use", "id": "b3", "input": {"query": ""}}, "tool_use 'b3': its query has no text"),
        ({"type": "tool_use", "input": {"query": "a"}}, "tool_use without its id"),
    ],
)
def test_a_tool_use_it_cannot_answer_is_one_line_naming_it(
    search: ToolSearch, block: dict[str, Any], said: str
) -> None:
    with pytest.raises(ValueError, match=said):
        search.answer_tool_use(block)
