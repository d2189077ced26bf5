"""Fake upstreams for the tests and ``shortlist bench``, run on 127.0.0.1 by whoever needs them.

- :func:`fake_openai_app`: an OpenAI-compatible chat-completions endpoint (ASGI) that records what it received
  (:class:`Received`) and answers at once, streamed (``stream: true``: three ``chat.completion.chunk`` events
  and ``data: [DONE]``) or not; its answer names the tools it was sent. ``POST /v1/responses`` likewise, in the
  Responses API's shape, its id ``resp-fake-<n>`` (n: the requests received so far; streamed as OpenAI streams:
  ``response.created``, the message's item and part added, two ``response.output_text.delta``, each done,
  ``response.completed``);
  ``POST /v1/responses/input_tokens`` answers a count that grows with the body. Anthropic's ``POST
  /v1/messages`` (streamed: message_start, a text block in two deltas, message_delta, message_stop) and ``POST
  /v1/messages/count_tokens`` likewise. A
  request header ``x-fake-status: N`` makes it answer status N, ``x-fake-delay: S`` makes it wait S seconds
  first, ``x-fake-chunk-gap: S`` S seconds between streamed chunks, ``x-fake-call: a,b`` answers with calls of
  the tools ``a`` and ``b`` instead of text (each API's shape, streamed or not; in the Responses API ``ns.f`` is
  ``f`` of namespace ``ns``), ``x-fake-tool-search: Q`` an answer (not streamed) that searches the tools for the
  query ``Q``: a client-executed ``tool_search_call`` (Responses), a ``tool_use`` of ``search_tools`` (Messages).
  ``GET /v1/models`` lists one model. Built with ``pick=True`` (``--pick``), a chat completion that sends tools calls
  the one a stated rule names (:func:`picked_tool`; not a model of any LLM), as a chooser is asked to.
- :func:`fake_mcp_server`: an MCP server whose tools are the given ones; a call answers
  ``{"tool": name, "arguments": ...}`` as text, an error result when the arguments hold ``"fail": true``, an MCP
  error (invalid params) when they hold ``"mcp_error": true``.
  ``python -m servers.fakes mcp --tools FILE`` serves it over stdio (the tests' and the bench's upstream);
  ``--transport http`` (or ``sse``) ``--port 0`` on 127.0.0.1, announced as below, ``--token-env VAR`` refusing
  (401) a request without ``Authorization: Bearer $VAR``.
- :func:`serve_in_thread`: any ASGI app on 127.0.0.1, a free port, in a background thread.

``python -m servers.fakes openai [--port P]`` serves the fake OpenAI upstream on 127.0.0.1 (port 0 by default: any
free one) and logs ``fake openai upstream listening on http://127.0.0.1:<port>/v1`` (:mod:`servers.listen`).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import threading
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.gzip import GZipMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from servers import DEFAULT_HOST, listen


@dataclass
class Received:
    """What a fake OpenAI upstream received: the last ``keep`` requests (method, path, headers, JSON body and, when
    it parses bodies, the raw bytes), the count of all of them, and how many times each ``x-request-id`` header
    came."""

    keep: int = 1000
    count: int = 0
    requests: deque[dict[str, Any]] = field(default_factory=deque)
    ids: Counter[str] = field(default_factory=Counter)

    def add(self, item: dict[str, Any]) -> None:
        self.count += 1
        if "x-request-id" in item["headers"]:
            self.ids[item["headers"]["x-request-id"]] += 1
        self.requests.append(item)
        while len(self.requests) > self.keep:
            self.requests.popleft()


def _names(body: dict[str, Any]) -> list[str]:
    """The names of the tools a request sent (either API's shape; a built-in tool by its type; a Responses
    namespace's tools as ``namespace.name``)."""
    names = []
    for t in body.get("tools") or []:
        if not isinstance(t, dict):
            continue
        if t.get("type") == "namespace" and isinstance(t.get("tools"), list):
            names += [f"{t.get('name')}.{n}" for n in _names({"tools": t["tools"]})]
            continue
        named = t.get("function", {}).get("name") or t.get("custom", {}).get("name") or t.get("name")
        names.append(str(named or t.get("type")))
    return names


def _completion(body: dict[str, Any], calls: Sequence[str] = ()) -> dict[str, Any]:
    """A chat completion naming the tools sent, or calling ``calls`` (``tool_calls``, each with ``{}``)."""
    message: dict[str, Any] = {"role": "assistant", "content": "tools: " + ",".join(_names(body))}
    if calls:
        message = {"role": "assistant", "content": None, "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": "{}"}}
            for i, n in enumerate(calls)]}  # fmt: skip
    choice = {"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": 0, "model": body.get("model", "fake"),
            "choices": [choice]}  # fmt: skip


async def _chunks(body: dict[str, Any], gap: float, calls: Sequence[str] = ()) -> AsyncIterator[bytes]:
    """A streamed chat completion: the text in two deltas, or each call's name in a delta and its arguments in the
    next, then the finish reason and ``data: [DONE]``."""
    text = _completion(body)["choices"][0]["message"]["content"]
    deltas: list[dict[str, Any]] = [{"content": text[: len(text) // 2]}, {"content": text[len(text) // 2 :]}]
    if calls:
        deltas = []
        for i, n in enumerate(calls):
            head = {"index": i, "id": f"call_{i}", "type": "function", "function": {"name": n, "arguments": ""}}
            deltas += [{"tool_calls": [head]}, {"tool_calls": [{"index": i, "function": {"arguments": "{}"}}]}]
    for i, delta in enumerate([*deltas, None]):
        if i and gap:
            await asyncio.sleep(gap)
        finish = None if delta is not None else "tool_calls" if calls else "stop"
        choice = {"index": 0, "delta": delta or {}, "finish_reason": finish}
        chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": 0, "model": "fake",
                 "choices": [choice]}  # fmt: skip
        yield f"data: {json.dumps(chunk)}\n\n".encode()
    yield b"data: [DONE]\n\n"


async def _sent(events: list[tuple[str, dict[str, Any]]], gap: float, numbered: bool) -> AsyncIterator[bytes]:
    """Server-sent events ``event: <kind>`` / ``data: {"type": <kind>, ...}``, ``gap`` seconds apart; ``numbered``:
    each with its ``sequence_number`` (the Responses API's)."""
    for i, (kind, data) in enumerate(events):
        if i and gap:
            await asyncio.sleep(gap)
        data = {"type": kind, **({"sequence_number": i} if numbered else {}), **data}
        yield f"event: {kind}\ndata: {json.dumps(data)}\n\n".encode()


def _function_call(i: int, name: str, done: bool = True) -> dict[str, Any]:
    """A Responses API ``function_call`` output item (``crm.list_orders``: ``list_orders`` of namespace ``crm``)."""
    namespace, dot, own = name.rpartition(".")
    return {"type": "function_call", "id": f"fc_{i}", "call_id": f"call_{i}", "name": own,
            **({"namespace": namespace} if dot else {}), "arguments": "{}" if done else "",
            "status": "completed" if done else "in_progress"}  # fmt: skip


def _response(
    body: dict[str, Any], rid: str = "resp-fake", calls: Sequence[str] = (), searched: str | None = None
) -> dict[str, Any]:
    """A Responses API answer (id ``rid``) naming the tools sent, or calling ``calls``, or a client-executed tool
    search for ``searched`` (a ``tool_search_call`` with the ``query``)."""
    text = {"type": "output_text", "text": "tools: " + ",".join(_names(body)), "annotations": []}
    message = {"type": "message", "id": "msg-fake", "role": "assistant", "status": "completed", "content": [text]}
    output: list[dict[str, Any]] = [message]
    if calls:
        output = [_function_call(i, n) for i, n in enumerate(calls)]
    if searched is not None:
        output = [{"type": "tool_search_call", "id": "ts_0", "call_id": "call_ts_0", "execution": "client",
                   "status": "completed", "arguments": {"query": searched}}]  # fmt: skip
    return {"id": rid, "object": "response", "created_at": 0, "status": "completed",
            "model": body.get("model", "fake"), "output": output, "tools": body.get("tools", [])}  # fmt: skip


async def _events(body: dict[str, Any], gap: float, rid: str, calls: Sequence[str] = ()) -> AsyncIterator[bytes]:
    """A streamed Responses API answer: created, the text in two deltas (or each call: its item added, its
    arguments, its item done), completed (server-sent events). Like OpenAI's, the response echoes the tools sent."""
    done = _response(body, rid, calls)
    events: list[tuple[str, dict[str, Any]]] = [("response.created", {"response": {**done, "status": "in_progress",
                                                                                   "output": []}})]  # fmt: skip
    if calls:
        for i, n in enumerate(calls):
            events += [("response.output_item.added", {"output_index": i, "item": _function_call(i, n, done=False)}),
                       ("response.function_call_arguments.delta", {"item_id": f"fc_{i}", "output_index": i,
                                                                   "delta": "{}"}),
                       ("response.output_item.done", {"output_index": i, "item": _function_call(i, n)})]  # fmt: skip
    else:  # as OpenAI streams a message: its item, its part, the text's deltas, each done
        message = done["output"][0]
        text = message["content"][0]["text"]
        at = {"item_id": "msg-fake", "output_index": 0, "content_index": 0}
        empty = {**message["content"][0], "text": ""}
        events += [
            ("response.output_item.added", {"output_index": 0, "item": {**message, "content": [],
                                                                        "status": "in_progress"}}),
            ("response.content_part.added", {**at, "part": empty}),
            ("response.output_text.delta", {**at, "delta": text[: len(text) // 2]}),
            ("response.output_text.delta", {**at, "delta": text[len(text) // 2 :]}),
            ("response.output_text.done", {**at, "text": text}),
            ("response.content_part.done", {**at, "part": message["content"][0]}),
            ("response.output_item.done", {"output_index": 0, "item": message}),
        ]  # fmt: skip
    events += [("response.completed", {"response": done})]
    async for event in _sent(events, gap, numbered=True):
        yield event


def _message(body: dict[str, Any], rid: str, calls: Sequence[str] = (), searched: str | None = None) -> dict[str, Any]:
    """An Anthropic Messages API answer (id ``rid``) naming the tools sent, or calling ``calls`` (``tool_use``), or
    calling ``search_tools`` with the query ``searched``."""
    content: list[dict[str, Any]] = [{"type": "text", "text": "tools: " + ",".join(_names(body))}]
    if calls:
        content = [{"type": "tool_use", "id": f"toolu_{i}", "name": n, "input": {}} for i, n in enumerate(calls)]
    if searched is not None:
        content = [{"type": "tool_use", "id": "toolu_ts", "name": "search_tools", "input": {"query": searched}}]
    return {"id": rid, "type": "message", "role": "assistant", "model": body.get("model", "fake"),
            "content": content, "stop_reason": "tool_use" if calls or searched is not None else "end_turn",
            "stop_sequence": None, "usage": {"input_tokens": 1, "output_tokens": 1}}  # fmt: skip


async def _message_events(
    body: dict[str, Any], gap: float, rid: str, calls: Sequence[str] = ()
) -> AsyncIterator[bytes]:
    """A streamed Messages API answer (server-sent events): message_start, one text block in two deltas (or a
    ``tool_use`` block a call, its input as one ``input_json_delta``), message_delta, message_stop."""
    done = _message(body, rid, calls)
    start = {**done, "content": [], "stop_reason": None}
    events: list[tuple[str, dict[str, Any]]] = [("message_start", {"message": start})]
    if calls:
        for i, block in enumerate(done["content"]):
            arguments = {"type": "input_json_delta", "partial_json": "{}"}
            events += [("content_block_start", {"index": i, "content_block": {**block, "input": {}}}),
                       ("content_block_delta", {"index": i, "delta": arguments}),
                       ("content_block_stop", {"index": i})]  # fmt: skip
    else:
        text = done["content"][0]["text"]
        events += [
            ("content_block_start", {"index": 0, "content_block": {"type": "text", "text": ""}}),
            ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": text[: len(text) // 2]}}),
            ("content_block_delta", {"index": 0, "delta": {"type": "text_delta", "text": text[len(text) // 2 :]}}),
            ("content_block_stop", {"index": 0}),
        ]
    events += [
        ("message_delta", {"delta": {"stop_reason": done["stop_reason"], "stop_sequence": None},
                           "usage": {"output_tokens": 1}}),
        ("message_stop", {}),
    ]  # fmt: skip
    async for event in _sent(events, gap, numbered=False):
        yield event


def picked_tool(body: dict[str, Any]) -> str | None:
    """The tool a chat-completions request's last user message asks for, by a stated rule (the fake's ``pick``;
    not a model of any LLM): the longest tool name the message contains, else the tool whose name shares the most
    words with it (the first on ties; ``_`` and ``.`` split a name into words). None when it sent no tools."""
    names = [n for n in _names(body) if n]
    users = [m for m in body.get("messages") or [] if isinstance(m, dict) and m.get("role") == "user"]
    text = str(users[-1].get("content") or "") if users else ""
    if not names:
        return None
    named = [n for n in names if n in text]
    if named:
        return max(named, key=len)
    words = set(re.findall(r"[a-z0-9]+", text.lower()))
    return max(names, key=lambda n: (len(set(re.findall(r"[a-z0-9]+", n.lower())) & words), -names.index(n)))


def fake_openai_app(
    received: Received | None = None, parse: bool = True, gzip: bool = False, pick: bool = False
) -> Starlette:
    """The fake OpenAI-compatible upstream (module docstring); ``received`` records what it got. With ``parse``
    False the body is read but not parsed (the answer names no tool): the same cost for any body, as a load
    benchmark's baseline needs. With ``gzip``, its answers are compressed for a client that accepts it, as
    api.openai.com's are. With ``pick``, a chat completion that sends tools (and no ``x-fake-call``) calls the one
    :func:`picked_tool` names, as a chooser is asked to. ``GET /fake/received`` answers the count and the
    ``x-request-id`` counts."""
    seen = received if received is not None else Received()

    async def record(request: Request) -> dict[str, Any]:
        """The request's JSON body (empty when not parsed), recorded."""
        raw = await request.body()
        body = json.loads(raw) if raw and parse else {}
        seen.add({"method": request.method, "path": request.url.path, "headers": dict(request.headers), "body": body,
                  "raw": raw if parse else b""})  # fmt: skip
        return body

    async def chat(request: Request) -> Response:
        body = await record(request)
        delay = float(request.headers.get("x-fake-delay", "0"))
        if delay:
            await asyncio.sleep(delay)
        status = int(request.headers.get("x-fake-status", "200"))
        if status != 200:
            if request.url.path.startswith("/v1/messages"):  # Anthropic's shape
                failed = {"type": "error", "error": {"type": "api_error", "message": f"fake upstream error {status}"}}
                return JSONResponse(failed, status)
            return JSONResponse({"error": {"message": f"fake upstream error {status}", "type": "fake"}}, status)
        path, rid = request.url.path, f"resp-fake-{seen.count}"
        gap = float(request.headers.get("x-fake-chunk-gap", "0"))
        calls = [n for n in request.headers.get("x-fake-call", "").split(",") if n]
        stream = body.get("stream") is True
        if pick and not calls and path.endswith("/chat/completions") and (chosen := picked_tool(body)):
            calls = [chosen]
        if path.endswith("/messages"):  # Anthropic's
            mid = f"msg-fake-{seen.count}"
            if stream:
                return StreamingResponse(_message_events(body, gap, mid, calls), media_type="text/event-stream")
            return JSONResponse(_message(body, mid, calls, request.headers.get("x-fake-tool-search")))
        if stream:
            responses = path.endswith("/responses")
            events = _events(body, gap, rid, calls) if responses else _chunks(body, gap, calls)
            return StreamingResponse(events, media_type="text/event-stream")
        if path.endswith("/responses"):
            return JSONResponse(_response(body, rid, calls, request.headers.get("x-fake-tool-search")))
        return JSONResponse(_completion(body, calls))

    async def models(request: Request) -> Response:
        seen.add({"method": request.method, "path": request.url.path, "headers": dict(request.headers), "body": None})
        return JSONResponse({"object": "list", "data": [{"id": "fake", "object": "model", "owned_by": "fake"}]})

    async def tokens(request: Request) -> Response:
        """``POST /v1/responses/input_tokens``, ``/v1/messages/count_tokens``: a count that grows with the body sent
        (its JSON's length / 4)."""
        body = await record(request)
        count: dict[str, Any] = {"input_tokens": len(json.dumps(body)) // 4}
        if request.url.path.endswith("/input_tokens"):
            count["object"] = "response.input_tokens"
        return JSONResponse(count)

    async def stats(request: Request) -> Response:
        return JSONResponse({"count": seen.count, "ids": dict(seen.ids)})

    answered = ["/v1/chat/completions", "/v1/responses", "/v1/messages"]
    counted = ["/v1/responses/input_tokens", "/v1/messages/count_tokens"]
    routes = [Route(p, chat, methods=["POST"]) for p in answered]
    routes += [Route(p, tokens, methods=["POST"]) for p in counted]
    routes += [Route("/v1/models", models), Route("/fake/received", stats)]
    app = Starlette(routes=routes, middleware=[Middleware(GZipMiddleware, minimum_size=0)] if gzip else None)
    app.state.received = seen
    return app


@contextmanager
def serve_in_thread(app: Any, host: str = DEFAULT_HOST, port: int = 0) -> Iterator[str]:
    """Serve an ASGI app with uvicorn in a background thread (port 0: a free one, bound before the thread starts);
    yields its base URL (``http://host:port``) once it answers."""
    with listen.bind(host, port) as listener:
        server = listen.server(app, listener, "", "fake", log_level="warning", lifespan="on")
        thread = threading.Thread(target=server.run, args=(listener.sockets,), daemon=True)
        thread.start()
        deadline = time.monotonic() + 30
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the server on {listener.url()} did not start")
            time.sleep(0.01)
        try:
            yield listener.url()
        finally:
            server.should_exit = True
            thread.join(timeout=30)


def fake_mcp_server(tools: Sequence[dict[str, Any]], label: str | None = None) -> Any:
    """An MCP server (the SDK's :class:`~mcp.server.mcpserver.MCPServer`) listing ``tools`` (MCP tool dicts:
    name, description, inputSchema) and answering each call (module docstring); with a ``label``, each answer says
    ``"server": label`` too (which of several fakes answered)."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.shared.exceptions import MCPError
    from mcp_types import INVALID_PARAMS, CallToolResult, TextContent, Tool

    listed = [Tool.model_validate(t) for t in tools]
    names = {t.name for t in listed}

    class FakeUpstream(MCPServer):
        async def list_tools(self) -> list[Tool]:
            return listed

        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            if name not in names:
                raise ToolError(f"unknown tool {name!r}")
            if arguments.get("mcp_error"):
                raise MCPError(code=INVALID_PARAMS, message=f"fake upstream refuses {name}", data={"tool": name})
            said = {"tool": name, "arguments": arguments, **({} if label is None else {"server": label})}
            text = json.dumps(said, sort_keys=True)
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=bool(arguments.get("fail")))

    return FakeUpstream("fake-upstream", log_level="WARNING")


def fake_fastmcp_server(tools: Sequence[dict[str, Any]], transform: Any = None) -> Any:
    """A FastMCP server (the ``fastmcp`` extra) serving ``tools`` (MCP tool dicts: name, description, inputSchema),
    each answering ``"<name> ran with <arguments as JSON>"`` (a ``cancel_*`` tool fails), with ``transform`` added
    (a search transform: :class:`servers.fastmcp_search.ShortlistSearchTransform`, FastMCP's own)."""
    from fastmcp import FastMCP
    from fastmcp.tools.base import Tool, ToolResult

    class SchemaTool(Tool):
        async def run(self, arguments: dict[str, Any]) -> ToolResult:
            if self.name.startswith("cancel_"):
                raise ValueError(f"{self.name} failed")
            return ToolResult(content=f"{self.name} ran with {json.dumps(arguments, sort_keys=True)}")

    server = FastMCP("fake-fastmcp")
    for t in tools:
        server.add_tool(SchemaTool(name=t["name"], description=t.get("description"), parameters=t["inputSchema"]))
    if transform is not None:
        server.add_transform(transform)
    return server


def main(argv: Sequence[str] | None = None) -> None:
    """``python -m servers.fakes mcp --tools FILE [--transport stdio|http|sse] [--port P] [--label L] [--token-env
    VAR]``: the fake MCP upstream (module docstring); ``python -m servers.fakes openai [--port P] [--no-parse]
    [--pick]``: the fake OpenAI upstream on 127.0.0.1 (keeping no request bodies)."""
    p = argparse.ArgumentParser(prog="python -m servers.fakes")
    p.add_argument("kind", choices=["mcp", "openai"])
    p.add_argument("--tools", help="mcp: a JSON file, a list of MCP tools (name, description, inputSchema)")
    p.add_argument(
        "--port",
        type=int,
        default=0,
        help="openai, mcp over http or sse: the port (0, the default: any free one, announced)",
    )
    p.add_argument("--no-parse", action="store_true", help="openai: answer without parsing the body")
    p.add_argument("--pick", action="store_true", help="openai: a chat completion sent tools calls one of them, by a "
                   "stated rule (servers.fakes.picked_tool; not an LLM)")  # fmt: skip
    p.add_argument("--transport", choices=["stdio", "http", "sse"], default="stdio",
                   help="mcp: over stdio (the default), streamable HTTP (/mcp) or SSE (/sse), announced")  # fmt: skip
    p.add_argument("--label", help='mcp: each answer says {"server": LABEL} too')
    p.add_argument("--token-env", help="mcp over http or sse: answer 401 to a request without the header "
                   "'Authorization: Bearer <this environment variable's value>'")  # fmt: skip
    a = p.parse_args(argv)
    if a.kind == "openai" or a.transport != "stdio":
        import logging

        logging.basicConfig(level=logging.INFO, format="%(name)s %(levelname)s %(message)s")  # the announcement
    if a.kind == "openai":
        app = fake_openai_app(Received(keep=0), parse=not a.no_parse, pick=a.pick)
        listener = listen.bind(DEFAULT_HOST, a.port)
        listen.run(app, listener, "/v1", "fake openai upstream", log_level="warning", access_log=False)
        return
    if not a.tools:
        p.error("mcp needs --tools FILE")
    tools = json.loads(Path(a.tools).read_text(encoding="utf-8"))
    fake = fake_mcp_server(tools["tools"] if isinstance(tools, dict) else tools, a.label)
    if a.transport == "stdio":
        fake.run("stdio")
        return
    path = {"http": "/mcp", "sse": "/sse"}[a.transport]
    app = fake.streamable_http_app() if a.transport == "http" else fake.sse_app()
    if a.token_env:
        app = bearer_only(app, os.environ[a.token_env])
    listener = listen.bind(DEFAULT_HOST, a.port)
    listen.run(app, listener, path, f"fake mcp upstream ({a.transport})", log_level="warning", access_log=False)


def bearer_only(app: Any, token: str) -> Any:
    """``app`` (ASGI), answering 401 to an HTTP request whose ``Authorization`` is not ``Bearer <token>``."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await JSONResponse({"error": "unauthorized"}, status_code=401)(scope, receive, send)
            return
        await app(scope, receive, send)

    return guarded


if __name__ == "__main__":
    main()
