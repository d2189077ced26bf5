"""The tool search as a FastMCP search transform: a per-request depth where FastMCP's search returns a fixed top 5.

FastMCP (4.x) replaces a server's tool listing with a ``search_tools`` tool and a ``call_tool`` proxy when a search
transform is added; its own, ``BM25SearchTransform`` and ``RegexSearchTransform``, return ``max_results`` tools (5)
for every query. :class:`ShortlistSearchTransform` is the same interface with this package's scorer and depth policy
(:class:`shortlist_depth.SearchSpec`: the library's defaults, or a saved searcher's, e.g. the one ``shortlist
recommend --log`` trains on the agent's own calls), so the swap is one line::

    from fastmcp import FastMCP
    from servers.fastmcp_search import ShortlistSearchTransform

    mcp = FastMCP("Server")
    ...  # its tools
    mcp.add_transform(ShortlistSearchTransform())  # was: BM25SearchTransform(max_results=5)

The searcher over the server's tools is prepared once per catalog (its tools' names, descriptions and parameter
schemas hashed; FastMCP's visibility and auth rules apply, as for its own transforms, so sessions may see different
catalogs: the last 8 are kept) and each search runs off the event loop, one at a time. A query with no text is an
error result, as in ``shortlist serve mcp``. Results are FastMCP's (the same serializer, the tools in rank order);
the policy's K is bounded by ``min_k`` / ``max_k`` (:data:`shortlist_depth.DEFAULT_MAX_K`, 20, unless given). A
catalog the searcher cannot read (a tool FastMCP serves but the searcher refuses) is logged, and that search returns
every tool: the request is never dropped. Needs the ``fastmcp`` extra (``pip install shortlist-depth[fastmcp]``).

With ``record=DIR`` (or a :class:`servers.record.Recorder`), each ``call_tool`` of a tool of the catalog is written
with the search it followed, as ``shortlist serve mcp --record`` writes it (:mod:`servers.record`): the latest
search whose answer holds the tool; an ``always_visible`` tool's calls are not written (it was never searched for);
each catalog goes to ``DIR/tools.json``; the recorder the transform opened is closed when the process ends (or by
:meth:`ShortlistSearchTransform.close`), saying how many calls it wrote. A hidden tool called by its name rather
than through ``call_tool`` (FastMCP runs it: the transform hides tools, it does not bar them) is not seen, so not
written; ``search_tools`` tells the model to use ``call_tool``. The folder trains a policy as it is
(``shortlist recommend --log DIR``), which the transform then takes (``ShortlistSearchTransform("rec/searcher")``).
Calls are tied to searches in the order they come, so record one agent per server process (stdio): over HTTP,
agents searching at once would have their calls tied to one another's searches.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import logging
import os
from collections import OrderedDict
from collections.abc import Sequence
from typing import Annotated, Any

import anyio
from fastmcp.exceptions import NotFoundError, ToolError
from fastmcp.server.context import Context
from fastmcp.server.transforms.search.base import BaseSearchTransform, SearchResultSerializer
from fastmcp.tools.base import Tool, ToolResult
from fastmcp.tools.function_tool import FunctionTool

from servers.record import Recorder
from shortlist_depth.toolsearch import DEFAULT_MAX_K, SEARCH_DESCRIPTION, SearchSpec, ToolSearch, k_bounds

LOG = logging.getLogger("servers.fastmcp_search")
#: What ``search_tools`` tells the model under FastMCP: the tool search's description, the found tools called through
#: ``call_tool`` (the listing holds only the two).
FASTMCP_SEARCH_DESCRIPTION = SEARCH_DESCRIPTION.replace(
    "Call one of them by its name.", "Call one of them with call_tool (its name and arguments)."
)
#: Searchers kept, one per distinct catalog (sessions may see different tools: FastMCP's visibility and auth).
CATALOGS_KEPT = 8


def _mcp_tool(tool: Tool) -> dict[str, Any]:
    """A FastMCP tool as the searcher reads it (an MCP ``tools/list`` entry: name, description, input schema)."""
    return {"name": tool.name, "description": tool.description or "", "inputSchema": tool.parameters}


class ShortlistSearchTransform(BaseSearchTransform):
    """FastMCP's search transform with a per-request depth (module docstring).

    Args:
        searcher: the scorer and policy: None for the library's defaults (BM25 and the policy shipped for it), a
            :class:`~shortlist_depth.SearchSpec` or :class:`~shortlist_depth.ToolSearch` (its scorer and policy,
            not its tools), or a saved searcher's folder.
        min_k: show at least this many tools (None: 1, the library's).
        max_k: show at most this many (the library's default bound; None: no bound).
        record: a folder (or a :class:`~servers.record.Recorder`) to write each ``call_tool`` with the search it
            followed (module docstring); None: nothing written.
        always_visible, search_tool_name, call_tool_name, search_result_serializer: FastMCP's, as for its own
            search transforms.
    """

    def __init__(
        self,
        searcher: SearchSpec | ToolSearch | str | os.PathLike[str] | None = None,
        *,
        min_k: int | None = None,
        max_k: int | None = DEFAULT_MAX_K,
        record: str | os.PathLike[str] | Recorder | None = None,
        always_visible: list[str] | None = None,
        search_tool_name: str = "search_tools",
        call_tool_name: str = "call_tool",
        search_result_serializer: SearchResultSerializer | None = None,
    ) -> None:
        super().__init__(
            max_results=max_k or 0,  # (FastMCP's bound, unused here: the policy's K is bounded by min_k / max_k)
            always_visible=always_visible,
            search_tool_name=search_tool_name,
            call_tool_name=call_tool_name,
            search_result_serializer=search_result_serializer,
        )
        if searcher is None:
            self.spec = SearchSpec.create()
        elif isinstance(searcher, SearchSpec):
            self.spec = searcher
        elif isinstance(searcher, ToolSearch):
            self.spec = searcher.spec
        else:
            self.spec = ToolSearch.load(searcher).spec
        k_bounds(min_k, max_k)  # a bad pair stops here, not in every search (each would then return every tool)
        self.min_k, self.max_k = min_k, max_k
        self.recorder = record if isinstance(record, Recorder) or record is None else Recorder(record)
        if self.recorder is not None and not isinstance(record, Recorder):  # its own: closed when the process ends
            atexit.register(self.close)
        self._owns_recorder = self.recorder is not None and not isinstance(record, Recorder)
        self._prepared: OrderedDict[str, ToolSearch] = OrderedDict()
        # one search, and one write to the recorder, at a time, off the event loop: the recorder's searches and
        # calls are never read and written at once
        self._limiter = anyio.CapacityLimiter(1)

    def close(self) -> None:
        """Close the recorder this transform opened (``record=DIR``; it says how many calls it wrote); one passed in
        is its owner's to close. Called when the process ends; again, nothing."""
        if self._owns_recorder and self.recorder is not None:
            self.recorder.close()

    def _make_search_tool(self) -> Tool:
        transform = self

        async def search_tools(
            query: Annotated[str, "The user's request, or the step at hand"],
            ctx: Context = None,  # type: ignore[assignment]  # (FastMCP fills it in)
        ) -> str | list[dict[str, Any]]:
            if not query.strip():
                raise ToolError("the query has no text: give the request or the step the tools are for")
            hidden = await transform._get_visible_tools(ctx)
            return await transform._render_results(await transform._search(hidden, query))

        return Tool.from_function(fn=search_tools, name=self._search_tool_name, description=FASTMCP_SEARCH_DESCRIPTION)

    def _make_call_tool(self) -> Tool:
        """FastMCP's ``call_tool`` proxy; recording, each call of a tool of the catalog is written (the agent's
        choice, whether the tool then succeeds or fails; a name FastMCP refuses, or an ``always_visible`` tool's,
        is not written, as ``serve mcp --record`` writes no pinned tool's)."""
        proxy = super()._make_call_tool()
        if self.recorder is None:
            return proxy
        assert isinstance(proxy, FunctionTool)
        inner, recorder, transform = proxy.fn, self.recorder, self

        async def write(name: str) -> None:
            if name not in transform._always_visible:
                await anyio.to_thread.run_sync(recorder.called, name, limiter=transform._limiter)

        async def call_tool(
            name: Annotated[str, "The name of the tool to call"],
            arguments: Annotated[dict[str, Any] | None, "Arguments to pass to the tool"] = None,
            ctx: Context = None,  # type: ignore[assignment]  # (FastMCP fills it in)
        ) -> ToolResult:
            """Call a tool by name with the given arguments.

            Use this to execute tools discovered via search_tools.
            """
            try:
                result: ToolResult = await inner(name, arguments, ctx)
            except (NotFoundError, ValueError):  # (no tool of the catalog: not a choice to learn from)
                raise
            except Exception:
                await write(name)
                raise
            await write(name)
            return result

        return Tool.from_function(fn=call_tool, name=self._call_tool_name)

    def _searcher(self, tools: Sequence[Tool]) -> ToolSearch:
        """The searcher over ``tools``, prepared once per distinct catalog (the last :data:`CATALOGS_KEPT`; a
        recorder gets each catalog once)."""
        registry = [_mcp_tool(t) for t in tools]  # (its sha256, in order, is the catalog's key)
        key = hashlib.sha256(json.dumps(registry, sort_keys=True, default=str).encode()).hexdigest()
        if key in self._prepared:
            self._prepared.move_to_end(key)
            return self._prepared[key]
        search = self._prepared[key] = self.spec.over(registry)
        while len(self._prepared) > CATALOGS_KEPT:
            self._prepared.popitem(last=False)
        if self.recorder is not None:
            self.recorder.registry(registry)
        return search

    def _shortlist(self, tools: Sequence[Tool], query: str) -> list[str]:
        shortlist = self._searcher(tools).search(query, min_k=self.min_k, max_k=self.max_k)
        if self.recorder is not None:
            self.recorder.searched(query, shortlist.names, shortlist.k, str(shortlist.why.get("method", "")))
        return list(shortlist.names)

    async def _search(self, tools: Sequence[Tool], query: str) -> Sequence[Tool]:
        """The shortlist of ``query`` among ``tools``, in rank order (every tool when the searcher fails)."""
        if not tools:
            return []
        try:
            names = await anyio.to_thread.run_sync(self._shortlist, tools, query, limiter=self._limiter)
        except Exception as e:  # never drop the request: every tool, and why
            LOG.warning("searcher failed on a query, every tool returned: %s: %s", type(e).__name__, e)
            return list(tools)
        by_name = {t.name: t for t in tools}
        return [by_name[n] for n in names]

    def __repr__(self) -> str:
        return f"ShortlistSearchTransform({self.spec!r}, min_k={self.min_k}, max_k={self.max_k})"


__all__: Sequence[str] = ["ShortlistSearchTransform"]
