"""``shortlist serve mcp``: the tool search as an MCP server, alone or in front of an upstream MCP server.

Alone (``--searcher DIR``, or ``--tools FILE`` with the library's defaults): one tool, ``search_tools(query)``,
answers the shortlist of the registry for the query: each tool's ``name``, ``description`` and ``inputSchema``, the
policy's ``k`` and ``policy`` (structured content, and the same JSON as text). ``--pin NAME`` tools come first in
every answer, besides the policy's K.

In front of an upstream (``--upstream-command CMD``: the command that starts the upstream MCP server over stdio,
run with this process's environment): the upstream's ``tools/list`` is read once (every page) and again after
the upstream says its list changed; the registry searched is the upstream's tools, with the tool search's scorer
and policy (:class:`shortlist_depth.SearchSpec`: the library's defaults, ``--policy``, or a saved searcher's).
K is bounded as the library bounds it (``max_k`` :data:`shortlist_depth.DEFAULT_MAX_K` unless configured).
``tools/list`` answers ``search_tools`` plus the pinned upstream tools (as the upstream lists them);
``search_tools`` never returns a pinned tool (the agent has them already); ``tools/call`` of an upstream tool (any
of them, listed or found by a search) is forwarded as is and its result, or its MCP error, relayed unchanged.

A query with no text is an error result (``isError``). When the searcher fails on a query, ``search_tools``
answers every tool of the registry, says why in ``fallback`` and logs it. Transports: stdio (default) or
streamable HTTP (``--transport http``, on 127.0.0.1 unless ``--host`` says otherwise, path ``/mcp``).
"""

from __future__ import annotations

import gc
import logging
import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
from mcp import Client, StdioServerParameters
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, Tool, ToolListChangedNotification
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from benchmarks.tools import ToolSchema
from servers import HEALTH_PATH, health, listen
from servers.listen import Listener
from shortlist_depth.toolsearch import DEFAULT_MAX_K, SearchSpec, Shortlist, ToolSearch

LOG = logging.getLogger("servers.mcp_server")
SEARCH_TOOL = "search_tools"
SEARCH_DESCRIPTION = (
    "Find the tools for a task. Give the user's request (or the step at hand) as the query; the answer lists "
    "the tools worth considering for it, best first, each with its name, description and input schema. How many "
    "it lists depends on the request. Call one of them by its name."
)


class FoundTool(BaseModel):
    """One tool of a ``search_tools`` answer."""

    name: str
    description: str
    inputSchema: dict[str, Any]  # noqa: N815 (MCP's field name)


class SearchAnswer(BaseModel):
    """A ``search_tools`` answer: the tools, the policy's K (ranked tools shown) and method, and why every tool
    was returned when the searcher failed."""

    tools: list[FoundTool]
    k: int
    policy: str
    fallback: str | None = None


@dataclass(frozen=True)
class SearchSettings:
    """How ``search_tools`` cuts: pinned tools and the bounds of K."""

    pin: tuple[str, ...] = ()
    """Tools always shown (alone: first in every answer; with an upstream: in ``tools/list``)."""
    min_k: int | None = None
    """Show at least this many ranked tools (None: 1, the library's)."""
    max_k: int | None = DEFAULT_MAX_K
    """Show at most this many ranked tools (the library's default bound; None: no bound)."""


def found(tool: ToolSchema) -> FoundTool:
    """One tool of a ``search_tools`` answer (name, description, input schema), from the searcher's parsed tool."""
    return FoundTool(name=tool.name, description=tool.description, inputSchema=tool.parameters)


def answer(search: ToolSearch, shortlist: Shortlist) -> SearchAnswer:
    """The ``search_tools`` answer of a shortlist of ``search`` (its parsed tools, not parsed again)."""
    tools = [found(search.tools[search.index[name]]) for name in shortlist.names]
    return SearchAnswer(tools=tools, k=shortlist.k, policy=str(shortlist.why.get("method", "")))


class Upstream:
    """An upstream MCP server: a connected SDK client, its tools (read once, again after it says they changed)
    and the searcher over them."""

    def __init__(self, client: Client, base: ToolSearch | SearchSpec) -> None:
        self.client = client
        self.spec = base.spec if isinstance(base, ToolSearch) else base
        self.tools: dict[str, Tool] = {}
        self.searcher: ToolSearch | None = None
        self.stale = True

    async def on_message(self, message: Any) -> None:
        """The client's message handler: a ``tools/list_changed`` notification marks the list stale."""
        if isinstance(message, ToolListChangedNotification):
            self.stale = True

    async def refresh(self) -> None:
        """Read the upstream's tools (every page) when stale, and prepare the searcher over them."""
        if not self.stale:
            return
        tools: list[Tool] = []
        cursor: str | None = None
        while True:
            page = await self.client.list_tools(cursor=cursor, cache_mode="refresh")
            tools += page.tools
            cursor = page.next_cursor
            if cursor is None:
                break
        listed = [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in tools]
        self.searcher = await anyio.to_thread.run_sync(self.spec.over, listed)
        self.tools = {t.name: t for t in tools}
        self.stale = False
        LOG.info("upstream lists %d tools", len(tools))


class ShortlistServer(MCPServer):
    """The MCP server (module docstring): ``search_tools``, and with an upstream, its tools behind it."""

    def __init__(
        self, searcher: ToolSearch | SearchSpec, settings: SearchSettings, upstream: Upstream | None = None
    ) -> None:
        super().__init__("shortlist", instructions=SEARCH_DESCRIPTION, log_level="WARNING")
        self.searcher = searcher
        self.search_settings = settings
        self.upstream = upstream
        self.limiter = anyio.CapacityLimiter(1)  # one search at a time, off the event loop
        if upstream is None:
            if not isinstance(searcher, ToolSearch):
                raise ValueError("serve mcp without an upstream searches a registry: --searcher DIR or --tools FILE")
            unknown = [n for n in settings.pin if n not in searcher.names]
            if unknown:
                raise ValueError(f"--pin: tool(s) not in the searcher's registry: {unknown[:5]}")
        self.add_tool(self.search_tools, name=SEARCH_TOOL, description=SEARCH_DESCRIPTION)
        self.custom_route(HEALTH_PATH, methods=["GET", "HEAD"])(self.health)  # streamable HTTP only

    async def health(self, request: Request) -> Response:
        """``GET /healthz`` (streamable HTTP): 200 once started, and what is served (:func:`servers.health`): the
        tools searched are the upstream's as last listed, or the registry's."""
        if self.upstream is not None:
            tools = len(self.upstream.tools)
        else:
            assert isinstance(self.searcher, ToolSearch)  # (checked at start)
            tools = len(self.searcher.tools)
        return JSONResponse(health("shortlist serve mcp", self.searcher.scorer, self.searcher.policy.method, tools))

    async def search_tools(self, query: str) -> SearchAnswer:
        """The shortlist for ``query`` (module docstring)."""
        if not query.strip():
            raise ToolError("the query has no text: give the request or the step the tools are for")
        s = self.search_settings
        if self.upstream is not None:
            await self.upstream.refresh()
            assert self.upstream.searcher is not None
            search, kw = self.upstream.searcher, {"exclude": [p for p in s.pin if p in self.upstream.tools]}
        else:
            assert isinstance(self.searcher, ToolSearch)
            search, kw = self.searcher, {"pinned": list(s.pin)}
        try:
            shortlist = await anyio.to_thread.run_sync(
                lambda: search.search(query, min_k=s.min_k, max_k=s.max_k, **kw), limiter=self.limiter
            )
        except Exception as e:  # never drop the request: every tool, and why
            LOG.warning("searcher failed on a query, every tool returned: %s: %s", type(e).__name__, e)
            tools = [found(t) for t in search.tools]
            return SearchAnswer(tools=tools, k=len(tools), policy=search.policy.method,
                                fallback=f"searcher error: {type(e).__name__}")  # fmt: skip
        return answer(search, shortlist)

    async def list_tools(self) -> list[Tool]:
        """``search_tools``, plus (with an upstream) the pinned upstream tools."""
        own = await super().list_tools()
        if self.upstream is None:
            return own
        await self.upstream.refresh()
        return own + [self.upstream.tools[n] for n in self.search_settings.pin if n in self.upstream.tools]

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        """``search_tools`` here; any upstream tool forwarded to the upstream, its result relayed."""
        if name == SEARCH_TOOL or self.upstream is None:
            return await super().call_tool(name, arguments, context)
        await self.upstream.refresh()
        if name not in self.upstream.tools:
            raise ToolError(f"unknown tool {name!r}: neither {SEARCH_TOOL} nor a tool of the upstream server")
        result: CallToolResult = await self.upstream.client.call_tool(name, arguments)
        return result


def upstream_client(command: str, message_handler: Any) -> Client:
    """An SDK client that starts ``command`` (split like a shell) as an MCP server over stdio."""
    argv = shlex.split(command)
    if not argv:
        raise ValueError("--upstream-command is empty")
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    return Client(params, message_handler=message_handler)


async def run_async(
    searcher: ToolSearch | SearchSpec,
    settings: SearchSettings,
    upstream_command: str | None = None,
    listener: Listener | None = None,
    path: str = "/mcp",
) -> None:
    """Serve until interrupted: over stdio, or, given a ``listener`` (:func:`servers.listen.bind`), streamable HTTP
    on it at ``path`` (announced once it answers: ``shortlist serve mcp listening on http://host:port/mcp``); with
    an upstream command, connected to it first (its tools read before the first request)."""

    async def serve(server: ShortlistServer) -> None:
        gc.freeze()  # what is loaded stays: the collector no longer walks it on every request's garbage
        if listener is None:
            LOG.info("serving %r over stdio", searcher)
            await server.run_stdio_async()
        else:
            LOG.info("serving %r over streamable HTTP", searcher)
            # the SDK's own run_streamable_http_async, on sockets bound before anything loaded
            app = server.streamable_http_app(streamable_http_path=path, host=listener.host)
            await listen.serve(app, listener, path, "shortlist serve mcp", log_level=server.settings.log_level.lower())

    if upstream_command is None:
        await serve(ShortlistServer(searcher, settings))
        return
    holder: list[Upstream] = []

    async def on_message(message: Any) -> None:
        if holder:
            await holder[0].on_message(message)

    async with upstream_client(upstream_command, on_message) as client:
        upstream = Upstream(client, searcher)
        holder.append(upstream)
        try:
            await upstream.refresh()
        except MCPError as e:
            raise ValueError(f"--upstream-command: the upstream's tools/list failed ({e})") from e
        missing = [n for n in settings.pin if n not in upstream.tools]
        if missing:
            raise ValueError(f"--pin: tool(s) the upstream does not list: {missing[:5]}")
        await serve(ShortlistServer(searcher, settings, upstream))


def run(searcher: ToolSearch | SearchSpec, settings: SearchSettings, **kw: Any) -> None:
    """:func:`run_async` in a fresh event loop.

    Raises:
        ValueError: the server could not start or stopped on an error (an upstream command that is not an MCP
            server or cannot be started, an upstream whose tool list is invalid, a pin it does not list), in one
            line.
    """
    try:
        anyio.run(lambda: run_async(searcher, settings, **kw))
    except BaseExceptionGroup as group:
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        if isinstance(leaf, ValueError | OSError | MCPError):
            raise ValueError(str(leaf) if isinstance(leaf, ValueError) else f"{type(leaf).__name__}: {leaf}") from group
        raise


__all__: Sequence[str] = ["SEARCH_TOOL", "SearchAnswer", "SearchSettings", "ShortlistServer", "Upstream", "run"]
