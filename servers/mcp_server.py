"""``shortlist serve mcp``: the tool search as an MCP server, alone or in front of an upstream MCP server.

Alone (``--searcher DIR``, or ``--tools FILE`` with the library's defaults): one tool, ``search_tools(query)``,
answers the shortlist of the registry for the query: each tool's ``name``, ``description`` and ``inputSchema``, the
policy's ``k`` and ``policy`` (structured content, and the same JSON as text). ``--pin NAME`` tools come first in
every answer, besides the policy's K.

In front of upstreams (:mod:`servers.upstreams`: ``--upstream-command CMD``, a server over stdio;
``--upstream-url URL``, one over streamable HTTP; ``--upstream-config FILE``, the several servers of an MCP client's
``mcpServers`` config): each upstream's ``tools/list`` is read before the first request (every page) and again after
it says its list changed; the registry searched is every upstream's tools (named ``<server>_<tool>`` when there are
several), with the tool search's scorer and policy (:class:`shortlist_depth.SearchSpec`: the library's defaults,
``--policy``, or a saved searcher's). K is bounded as the library bounds it (``max_k``
:data:`shortlist_depth.DEFAULT_MAX_K` unless configured). ``tools/list`` answers ``search_tools`` plus the pinned
upstream tools (as their upstream lists them); ``search_tools`` never returns a pinned tool (the agent has them
already); ``tools/call`` of an upstream tool (any of them, listed or found by a search) is forwarded to its upstream
under its own name and its result, or its MCP error, relayed unchanged; an upstream whose connection failed answers an
error result naming it.

A query with no text is an error result (``isError``). When the searcher fails on a query, ``search_tools``
answers every tool of the registry, says why in ``fallback`` and logs it. Transports: stdio (default) or
streamable HTTP (``--transport http``, on 127.0.0.1 unless ``--host`` says otherwise, path ``/mcp``).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
import signal
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult, Tool
from pydantic import BaseModel
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from benchmarks.tools import ToolSchema
from servers import CONNECT_TIMEOUT, HEALTH_PATH, health, listen
from servers.listen import Listener
from servers.record import Recorder
from servers.reload import SearcherWatch
from servers.upstreams import FRONTED, Upstream, Upstreams, UpstreamSpec, close_all, connect, innermost
from shortlist_depth.toolsearch import DEFAULT_MAX_K, SEARCH_DESCRIPTION, SearchSpec, Shortlist, ToolSearch

LOG = logging.getLogger("servers.mcp_server")
SEARCH_TOOL = "search_tools"
#: Seconds the upstreams' connections have to close when the server stops (then they are cut).
CLOSE_SECONDS = 10.0


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


class ShortlistServer(MCPServer):
    """The MCP server (module docstring): ``search_tools``, and with an upstream, its tools behind it."""

    def __init__(
        self,
        searcher: ToolSearch | SearchSpec,
        settings: SearchSettings,
        upstream: Upstreams | None = None,
        recorder: Recorder | None = None,
    ) -> None:
        super().__init__("shortlist", instructions=SEARCH_DESCRIPTION, log_level="WARNING")
        self.searcher = searcher
        self.search_settings = settings
        self.upstream = upstream
        if recorder is not None and upstream is None:
            raise ValueError("--record needs an upstream: alone, the tools found are called elsewhere")
        self.recorder = recorder
        self.limiter = anyio.CapacityLimiter(1)  # one search at a time, off the event loop
        if upstream is None:
            if not isinstance(searcher, ToolSearch):
                raise ValueError("serve mcp without an upstream searches a registry: --searcher DIR or --tools FILE")
            unknown = [n for n in settings.pin if n not in searcher.names]
            if unknown:
                raise ValueError(f"--pin: tool(s) not in the searcher's registry: {unknown[:5]}")
        self.add_tool(self.search_tools, name=SEARCH_TOOL, description=SEARCH_DESCRIPTION)
        self.custom_route(HEALTH_PATH, methods=["GET", "HEAD"])(self.health)  # streamable HTTP only

    async def reload(self, search: ToolSearch) -> None:
        """Serve ``search`` from the next search on (``--reload``: :mod:`servers.reload`): its registry without an
        upstream (it must hold the pinned tools), its scorer and policy over the upstreams' tools with one.

        Raises:
            ValueError: the new searcher cannot serve here (the current one is kept).
        """
        if self.upstream is not None:
            await self.upstream.respec(search.spec)
        else:
            unknown = [n for n in self.search_settings.pin if n not in search.names]
            if unknown:
                raise ValueError(f"its registry lacks the pinned tool(s) {unknown[:5]}")
        self.searcher = search

    async def health(self, request: Request) -> Response:
        """``GET /healthz`` (streamable HTTP): 200 once started, and what is served (:func:`servers.health`): the
        tools searched are the upstream's as last listed, or the registry's."""
        if self.upstream is not None:
            tools = len(self.upstream.tools)
        else:
            assert isinstance(self.searcher, ToolSearch)  # (checked at start)
            tools = len(self.searcher.tools)
        return JSONResponse(health("shortlist serve mcp", self.searcher.scorer, self.searcher.policy, tools))

    async def search_tools(self, query: str) -> SearchAnswer:
        """The shortlist for ``query`` (module docstring)."""
        if not query.strip():
            raise ToolError("the query has no text: give the request or the step the tools are for")
        s = self.search_settings
        if self.upstream is not None:
            await self.upstream.refresh()
            assert self.upstream.searcher is not None
            if not self.upstream.tools:
                raise ToolError("no upstream lists a tool now (their connections failed: see the server's log)")
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
            result = SearchAnswer(tools=tools, k=len(tools), policy=search.policy.method,
                                  fallback=f"searcher error: {type(e).__name__}")  # fmt: skip
        else:
            result = answer(search, shortlist)
        if self.recorder is not None:
            self.recorder.searched(query, [t.name for t in result.tools], result.k, result.policy)
        return result

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
        if name not in self.upstream.route:
            raise ToolError(f"unknown tool {name!r}: neither {SEARCH_TOOL} nor a tool of the upstream server")
        upstream, tool = self.upstream.route[name]
        if self.recorder is not None and name not in self.search_settings.pin:
            self.recorder.called(name)  # the agent's choice, whatever its upstream answers
        try:
            result: CallToolResult = await upstream.call(tool, arguments)
        except MCPError:
            raise  # the upstream's error, relayed with its code
        except ConnectionError as e:  # its connection is gone (the process exited, the server is down)
            raise ToolError(f"the upstream ({upstream.where}) failed on {tool!r}: {e}") from e
        except Exception as e:  # anything else of the client's: an error result naming it, never a crash
            LOG.warning("%s: tools/call %r failed: %s: %s", upstream.where, tool, type(e).__name__, e)
            raise ToolError(f"the upstream ({upstream.where}) failed on {tool!r}: {type(e).__name__}: {e}") from e
        return result


async def run_async(
    searcher: ToolSearch | SearchSpec,
    settings: SearchSettings,
    upstreams: Sequence[UpstreamSpec] = (),
    listener: Listener | None = None,
    path: str = "/mcp",
    recorder: Recorder | None = None,
    connect_timeout: float = CONNECT_TIMEOUT,
    reload: str | None = None,
    cache_dir: str | None = None,
    reload_since: Any = None,
) -> None:
    """Serve until interrupted: over stdio, or, given a ``listener`` (:func:`servers.listen.bind`), streamable HTTP
    on it at ``path`` (announced once it answers: ``shortlist serve mcp listening on http://host:port/mcp``); with
    upstreams (:mod:`servers.upstreams`), connected to each first, in order, and their tools read before the first
    request (``connect_timeout`` seconds for each to connect, and for their first lists); with a ``recorder``
    (:mod:`servers.record`), each call written with the search it followed; with ``reload`` (the saved searcher's
    folder), each searcher saved there later served from then on (:mod:`servers.reload`; its scorer loaded with
    ``cache_dir``; ``reload_since``: the folder's stamp when ``searcher`` was loaded)."""

    async def serve(server: ShortlistServer, connected: Sequence[Upstream] = ()) -> None:
        gc.freeze()  # what is loaded stays: the collector no longer walks it on every request's garbage
        watch = None if reload is None else SearcherWatch(reload, server.reload, cache_dir, since=reload_since,
                                                          registry=server.upstream is None)  # fmt: skip
        if listener is None:
            LOG.info("serving %r over stdio", searcher)
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(_stop_on_sigterm, connected, recorder)
                if watch is not None:
                    tasks.start_soon(watch.run)
                await server.run_stdio_async()
                tasks.cancel_scope.cancel()
            await close_all(connected, CLOSE_SECONDS)  # stdin's end: each connection closed as its SDK closes it
        else:
            LOG.info("serving %r over streamable HTTP", searcher)
            # the SDK's own run_streamable_http_async, on sockets bound before anything loaded
            app = server.streamable_http_app(streamable_http_path=path, host=listener.host)
            served = app.router.lifespan_context

            @asynccontextmanager
            async def lifespan(app: Any) -> AsyncIterator[Any]:
                async with served(app) as state:
                    watching = None if watch is None else asyncio.get_running_loop().create_task(watch.run())
                    try:
                        yield state
                    finally:
                        if watching is not None:
                            watching.cancel()
                await close_all(connected, CLOSE_SECONDS)  # (uvicorn re-raises a stopping signal after: now or never)

            app.router.lifespan_context = lifespan
            await listen.serve(app, listener, path, "shortlist serve mcp", log_level=server.settings.log_level.lower())

    if not upstreams:
        await serve(ShortlistServer(searcher, settings))
        return
    if os.environ.get(FRONTED):
        raise ValueError("this shortlist serve mcp was started as an upstream by another one: an entry of the "
                         "config runs it (remove that entry), or it fronts itself")  # fmt: skip
    async with anyio.create_task_group() as tasks:  # each upstream's connection in a task of its own
        connected = [await connect(spec, tasks, connect_timeout) for spec in upstreams]
        on_change = None if recorder is None else recorder.registry
        registry = Upstreams(connected, searcher, on_change, reserved=[SEARCH_TOOL])
        await registry.refresh(strict=True, timeout=connect_timeout)
        missing = [n for n in settings.pin if n not in registry.tools]
        if missing:
            raise ValueError(f"--pin: tool(s) no upstream lists: {missing[:5]}")
        await serve(ShortlistServer(searcher, settings, registry, recorder), connected)  # (which closes them)
        tasks.cancel_scope.cancel()


async def _stop_on_sigterm(upstreams: Sequence[Upstream], recorder: Recorder | None) -> None:
    """On SIGTERM (over stdio): close the upstreams' connections as their SDK closes them (a stdio server's stdin
    ended, then it is stopped; an HTTP session ended), for at most :data:`CLOSE_SECONDS`, close the recorder (it
    says what it wrote), and end the process with SIGTERM's status. Ending it is what stops the server: the SDK's
    stdio transport reads stdin in a thread that no cancellation reaches."""
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        async for _ in signals:
            LOG.info("SIGTERM: closing the upstreams' connections, then stopping")
            await close_all(upstreams, CLOSE_SECONDS)
            if recorder is not None:
                recorder.close()
            logging.shutdown()
            os._exit(128 + signal.SIGTERM)


def run(searcher: ToolSearch | SearchSpec, settings: SearchSettings, **kw: Any) -> None:
    """:func:`run_async` in a fresh event loop.

    Raises:
        ValueError: the server could not start or stopped on an error (an upstream that is not an MCP server or
            cannot be started or reached, an upstream whose tool list is invalid, two upstreams' tools of one name, a
            pin no upstream lists), in one line naming it.
    """
    try:
        anyio.run(lambda: run_async(searcher, settings, **kw))
    except BaseExceptionGroup as group:
        leaf = innermost(group)
        if isinstance(leaf, ValueError | OSError | MCPError):
            raise ValueError(str(leaf) if isinstance(leaf, ValueError) else f"{type(leaf).__name__}: {leaf}") from group
        raise


__all__: Sequence[str] = ["SEARCH_TOOL", "SearchAnswer", "SearchSettings", "ShortlistServer", "run"]
