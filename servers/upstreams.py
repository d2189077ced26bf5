"""The upstream MCP servers ``shortlist serve mcp`` fronts: where each is, the connection to it, one registry over all.

Where (:class:`UpstreamSpec`, read by :func:`specs`):

- ``--upstream-command CMD``: a command that starts an MCP server over stdio (split like a shell; run with this
  process's environment);
- ``--upstream-url URL``: a streamable-HTTP MCP server;
- ``--upstream-config FILE``: several, in the ``mcpServers`` JSON an MCP client is configured with (Claude Desktop's
  ``claude_desktop_config.json``, Claude Code's and Cursor's ``.mcp.json``; VS Code's ``servers`` key too). Each
  entry is a stdio server (``command``, ``args``, ``env`` added to this process's environment, ``cwd``) or an HTTP
  one (``url``, ``headers``; ``type`` ``http`` / ``streamable-http``, or ``sse`` for the older SSE transport).
  ``${VAR}`` and ``${VAR:-default}`` in ``command``, ``args``, ``env``, ``cwd``, ``url`` and ``headers`` are read
  from the environment, as Claude Code reads them, so a key stays in the environment, not in the file; no value of
  ``env`` or ``headers`` is logged or shown. An entry with ``"disabled": true`` is skipped, and so is one that runs
  ``shortlist serve mcp`` itself (it would start itself again); each skip is logged.

One registry (:class:`Upstreams`): every upstream's tools, read (every page) before the first request and again
after that upstream says its list changed. With one upstream the tools keep their names; with several, each is
named ``<server>_<tool>`` (as FastMCP names the tools of a multi-server config), so two servers' ``search`` are
told apart, and a call is sent to its server under the tool's own name.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.to_thread
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import Tool, ToolListChangedNotification

from servers import check_url
from shortlist_depth.toolsearch import SearchSpec, ToolSearch

LOG = logging.getLogger("servers.upstreams")
#: ``${VAR}`` or ``${VAR:-default}`` in a config value.
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
#: What a server's name may hold when it prefixes its tools' names (MCP's tool-name characters).
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
#: A config entry's ``type`` (or ``transport``) and the transport it means.
TRANSPORTS = {"stdio": "stdio", "http": "http", "streamable-http": "http", "streamable_http": "http",
              "streamableHttp": "http", "sse": "sse"}  # fmt: skip
#: The MCP SDK's HTTP timeouts (its ``create_mcp_http_client``): 30 s to connect, write and wait for a connection,
#: 300 s to read (a server may hold a stream open).
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)


@dataclass(frozen=True)
class UpstreamSpec:
    """Where one upstream MCP server is, and how to start or reach it. ``env`` and ``headers`` (keys, often) are
    left out of its repr."""

    name: str
    """Its name: the config's key (it prefixes the tools' names when there are several), ``upstream`` for a flag."""
    where: str
    """What errors name: ``--upstream-command``, ``--upstream-url``, or ``FILE: server 'NAME'``."""
    transport: str
    """``stdio``, ``http`` (streamable HTTP) or ``sse``."""
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    """Added to this process's environment for a stdio server."""
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)


def from_command(command: str) -> UpstreamSpec:
    """``--upstream-command``: the command (split like a shell) of an MCP server over stdio."""
    argv = tuple(shlex.split(command))
    if not argv:
        raise ValueError("--upstream-command is empty")
    return UpstreamSpec("upstream", "--upstream-command", "stdio", command=argv)


def from_url(url: str) -> UpstreamSpec:
    """``--upstream-url``: a streamable-HTTP MCP server."""
    check_url(url, "--upstream-url")
    return UpstreamSpec("upstream", "--upstream-url", "http", url=url)


def expand(value: str, where: str, environ: Mapping[str, str]) -> str:
    """``value`` with each ``${VAR}`` (``${VAR:-default}``) replaced by the environment's value (the default when the
    variable is unset or empty). ValueError naming ``where`` and the variable when it is unset with no default."""

    def one(m: re.Match[str]) -> str:
        var, default = m.group(1), m.group(2)
        if environ.get(var):
            return environ[var]
        if default is not None:
            return default
        raise ValueError(f"{where}: ${{{var}}} is not set in the environment (or write ${{{var}:-default}})")

    return _VAR.sub(one, value)


def read_config(path: str | Path, environ: Mapping[str, str] | None = None) -> list[UpstreamSpec]:
    """The enabled upstreams of an ``mcpServers`` config file (module docstring), in the file's order.

    Raises:
        ValueError: the file is missing or not that JSON (its line and column named), or an entry is not a server
            (its name and what is wrong named), or no server is left.
    """
    env = os.environ if environ is None else environ
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ValueError(f"--upstream-config {path}: {e.strerror or e}") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}: line {e.lineno} column {e.colno}: not JSON ({e.msg})") from e
    servers = data.get("mcpServers", data.get("servers")) if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        raise ValueError(f'{path}: an MCP client config is an object with "mcpServers" (or "servers"): '
                         '{"mcpServers": {"name": {"command": ...} or {"url": ...}}}')  # fmt: skip
    specs = []
    for name, entry in servers.items():
        where = f"{path}: server {name!r}"
        if not isinstance(entry, dict):
            raise ValueError(f"{where}: an entry is an object with command or url, got {type(entry).__name__}")
        if entry.get("disabled") is True:
            LOG.warning("%s: skipped (disabled)", where)
            continue
        spec = _entry(name, entry, where, env)
        if _is_shortlist_mcp(spec.command):
            LOG.warning("%s: skipped (it runs shortlist serve mcp, which would start itself again)", where)
            continue
        specs.append(spec)
    if not specs:
        raise ValueError(f"{path}: no MCP server to front (none listed, or every one skipped)")
    if len(specs) > 1:
        for spec in specs:
            if not _NAME.fullmatch(spec.name):
                raise ValueError(f"{spec.where}: a name of letters, digits, _, - or . (it prefixes the names of "
                                 "its tools when several servers are fronted)")  # fmt: skip
    return specs


def _entry(name: str, entry: dict[str, Any], where: str, env: Mapping[str, str]) -> UpstreamSpec:
    """One config entry (validated, its variables expanded)."""

    def text(key: str) -> str | None:
        value = entry.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            raise ValueError(f"{where}: {key} must be a string, got {type(value).__name__}")
        return expand(value, f"{where}: {key}", env)

    def strings(key: str, kind: type) -> Any:
        value: Any = entry.get(key, kind())
        values = list(value.values()) if isinstance(value, dict) else value
        if not isinstance(value, kind) or not all(isinstance(v, str) for v in values):
            shape = "a list of strings" if kind is list else "an object of strings"
            raise ValueError(f"{where}: {key} must be {shape}")
        if isinstance(value, dict):
            return {k: expand(v, f"{where}: {key}.{k}", env) for k, v in value.items()}
        return [expand(v, f"{where}: {key}[{i}]", env) for i, v in enumerate(cast(list[str], value))]

    kind = entry.get("type", entry.get("transport"))
    command, url = text("command"), text("url")
    if kind is None:
        kind = "stdio" if command is not None else "http"
    if kind not in TRANSPORTS:
        raise ValueError(f"{where}: type {kind!r} is not one of {', '.join(TRANSPORTS)}")
    transport = TRANSPORTS[kind]
    if transport == "stdio":
        if not command or url is not None:
            raise ValueError(f"{where}: a stdio server has a command (and args), not a url")
        argv = (command, *strings("args", list))
        return UpstreamSpec(name, where, "stdio", command=argv, env=strings("env", dict), cwd=text("cwd"))
    if not url or command is not None:
        raise ValueError(f"{where}: an {kind} server has a url (and headers), not a command")
    check_url(url, f"{where}: url")
    return UpstreamSpec(name, where, transport, url=url, headers=strings("headers", dict))


def _is_shortlist_mcp(argv: Sequence[str]) -> bool:
    """Whether ``argv`` runs ``shortlist serve mcp`` (the command, or ``python -m experiments.cli``)."""
    if not argv:
        return False
    ours = Path(argv[0]).name.startswith("shortlist") or "experiments.cli" in argv
    return ours and any(argv[i : i + 2] == ("serve", "mcp") for i in range(len(argv)))


def specs(command: str | None = None, url: str | None = None, config: str | None = None) -> list[UpstreamSpec]:
    """The upstreams the CLI's flags name (at most one of them is given; none: no upstream)."""
    if command is not None:
        return [from_command(command)]
    if url is not None:
        return [from_url(url)]
    return read_config(config) if config is not None else []


@asynccontextmanager
async def _http(spec: UpstreamSpec, refused: list[int]) -> AsyncIterator[Any]:
    """The transport streams of a streamable-HTTP server, its headers on every request; the status of each answer
    that is not a success goes to ``refused`` (the SDK's error for it does not say it)."""

    async def seen(response: httpx2.Response) -> None:
        if response.status_code >= 400:
            refused.append(response.status_code)

    hooks = {"response": [seen]}
    async with httpx2.AsyncClient(headers=dict(spec.headers), timeout=HTTP_TIMEOUT, event_hooks=hooks) as http:
        async with streamable_http_client(spec.url, http_client=http) as streams:
            yield streams


def client(spec: UpstreamSpec, message_handler: Any, refused: list[int] | None = None) -> Client:
    """An SDK client of the upstream (not yet connected); over streamable HTTP, the status of each refused request
    goes to ``refused``."""
    if spec.transport == "stdio":
        env = {**os.environ, **spec.env}
        params = StdioServerParameters(command=spec.command[0], args=list(spec.command[1:]), env=env, cwd=spec.cwd)
        return Client(params, message_handler=message_handler)
    if spec.transport == "sse":
        return Client(sse_client(spec.url, headers=dict(spec.headers)), message_handler=message_handler)
    return Client(_http(spec, [] if refused is None else refused), message_handler=message_handler)


async def connect(spec: UpstreamSpec, stack: AsyncExitStack) -> Upstream:
    """The upstream ``spec`` names, connected for as long as ``stack`` stays open. ValueError naming it when it
    cannot be started or reached, or does not answer as an MCP server."""
    holder: list[Upstream] = []

    async def on_message(message: Any) -> None:
        if holder:
            await holder[0].on_message(message)

    refused: list[int] = []
    try:
        connected = await stack.enter_async_context(client(spec, on_message, refused))
    except Exception as e:
        status = f"HTTP {refused[-1]}; " if refused else ""
        raise ValueError(f"{spec.where}: could not connect to the upstream ({status}{_reason(e)})") from e
    holder.append(Upstream(connected, spec.name, spec.where))
    return holder[0]


class Upstream:
    """One connected upstream: its SDK client, its tools as it lists them (read again after it says they changed)."""

    def __init__(self, client: Client, name: str = "upstream", where: str = "--upstream-command") -> None:
        self.client = client
        self.name = name
        self.where = where
        self.tools: dict[str, Tool] = {}
        self.stale = True

    async def on_message(self, message: Any) -> None:
        """The client's message handler: a ``tools/list_changed`` notification marks the list stale."""
        if isinstance(message, ToolListChangedNotification):
            self.stale = True

    async def read(self) -> None:
        """Read the tools, every page."""
        tools: list[Tool] = []
        cursor: str | None = None
        while True:
            page = await self.client.list_tools(cursor=cursor, cache_mode="refresh")
            tools += page.tools
            cursor = page.next_cursor
            if cursor is None:
                break
        self.tools = {t.name: t for t in tools}
        self.stale = False
        LOG.info("upstream %r lists %d tools", self.name, len(tools))


class Upstreams:
    """The tools of one or several upstreams as the agent sees them (``<server>_<tool>`` when several), where each
    call goes, and the searcher over them (the base searcher's scorer and policy)."""

    def __init__(
        self,
        upstreams: Sequence[Upstream],
        base: ToolSearch | SearchSpec,
        on_change: Callable[[list[dict[str, Any]]], None] | None = None,
    ) -> None:
        """``on_change``: called with the tools (MCP dicts, the agent's names) each time the registry is built."""
        if not upstreams:
            raise ValueError("no upstream")
        self.upstreams = list(upstreams)
        self.on_change = on_change
        self.spec = base.spec if isinstance(base, ToolSearch) else base
        self.tools: dict[str, Tool] = {}
        """Each tool by the name the agent sees, as its upstream lists it (renamed when several)."""
        self.route: dict[str, tuple[Upstream, str]] = {}
        """The upstream of each tool the agent sees, and the tool's name there."""
        self.searcher: ToolSearch | None = None
        self._lock = anyio.Lock()

    @property
    def stale(self) -> bool:
        return any(u.stale for u in self.upstreams)

    def exposed(self, upstream: Upstream, tool: str) -> str:
        """The name the agent sees for ``upstream``'s ``tool``."""
        return tool if len(self.upstreams) == 1 else f"{upstream.name}_{tool}"

    def _combined(self) -> tuple[dict[str, Tool], dict[str, tuple[Upstream, str]]]:
        """Every upstream's tools by the name the agent sees, and the route of each. ValueError when two share one."""
        tools: dict[str, Tool] = {}
        route: dict[str, tuple[Upstream, str]] = {}
        for u in self.upstreams:
            for name, tool in u.tools.items():
                seen = self.exposed(u, name)
                if seen in route:
                    other = route[seen][0].where
                    raise ValueError(f"{u.where}: its tool {name!r} is named {seen!r}, as a tool of {other} is")
                tools[seen] = tool if seen == name else tool.model_copy(update={"name": seen})
                route[seen] = (u, name)
        return tools, route

    def _searcher(self, tools: list[dict[str, Any]]) -> ToolSearch:
        """The searcher over ``tools``; ValueError naming the upstream(s) when the searcher refuses them."""
        try:
            return self.spec.over(tools)
        except ValueError as e:
            named = self.upstreams[0].where if len(self.upstreams) == 1 else "the upstreams"
            raise ValueError(f"{named}: the tools listed cannot be searched ({e})") from e

    async def refresh(self, strict: bool = False) -> None:
        """Read again the tools of each upstream whose list changed (all of them at first), and prepare the
        searcher over every upstream's tools.

        An upstream that fails to list is logged and keeps its last list (it is asked again on the next request),
        and a list whose names two servers share is logged and not used, so every request is still answered.
        With ``strict`` (at start), either is a ValueError naming the upstream.
        """
        async with self._lock:
            if not self.stale and self.searcher is not None:
                return
            for u in [u for u in self.upstreams if u.stale]:
                try:
                    await u.read()
                except Exception as e:
                    if strict:
                        raise ValueError(f"{u.where}: the upstream's tools/list failed ({_reason(e)})") from e
                    LOG.warning("%s: tools/list failed, its last list kept: %s", u.where, _reason(e))
            try:
                tools, route = self._combined()
                listed = [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in tools.values()]
                searcher = await anyio.to_thread.run_sync(self._searcher, listed)
            except ValueError as e:
                if strict:
                    raise
                LOG.warning("%s; the tool list before it kept", e)
                return
            self.searcher = searcher
            self.tools, self.route = tools, route
            if self.on_change is not None:
                self.on_change(listed)


def _reason(e: BaseException) -> str:
    """The innermost error of ``e`` (the first of an exception group), as ``Type: message``."""
    while isinstance(e, BaseExceptionGroup):
        e = e.exceptions[0]
    return f"{type(e).__name__}: {e}"


__all__: Sequence[str] = ["Upstream", "UpstreamSpec", "Upstreams", "client", "connect", "expand", "read_config",
                          "specs"]  # fmt: skip
