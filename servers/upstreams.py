"""The upstream MCP servers ``shortlist serve mcp`` fronts: where each is, the connection to it, one registry over all.

Where (:class:`UpstreamSpec`, read by :func:`specs`):

- ``--upstream-command CMD``: a command that starts an MCP server over stdio (split like a shell; run with this
  process's environment);
- ``--upstream-url URL``: a streamable-HTTP MCP server;
- ``--upstream-config FILE``: several, in the ``mcpServers`` JSON an MCP client is configured with (Claude Desktop's
  ``claude_desktop_config.json``, Claude Code's ``.mcp.json``, Cursor's ``.cursor/mcp.json``; VS Code's ``servers``
  key too). Each entry is a stdio server (``command``, ``args``, ``cwd``, ``env``: its environment is the MCP SDK's
  safe default, ``PATH``, ``HOME``, ..., and ``env``, as the MCP clients start it) or an HTTP one (``url``,
  ``headers``; ``type`` ``http`` / ``streamable-http``, or ``sse`` for the older SSE transport). ``${VAR}`` and
  ``${VAR:-default}`` (VS Code's ``${env:VAR}`` too) in ``command``, ``args``, ``env``, ``cwd``, ``url`` and
  ``headers`` are read from the environment (:func:`expand`), so a key stays in the environment, not in the file; no
  value of ``env`` or ``headers``, and no expanded url, is logged or shown. An entry with ``"disabled": true`` is
  skipped, and so is one that runs ``shortlist serve mcp`` itself (it would start itself again); each skip is
  logged.

One registry (:class:`Upstreams`): every upstream's tools, read (every page) before the first request and again
after that upstream says its list changed. With one upstream the tools keep their names; with several, each is
named ``<server>_<tool>`` (as FastMCP names the tools of a multi-server config), so two servers' ``search`` are
told apart, and a call is sent to its server under the tool's own name.

Each connection (:func:`connect`) runs in a task of its own: one that fails is lost (its tools leave the search,
its calls are errors) and made again with a growing wait, its tools then read again.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shlex
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.to_thread
import httpx2
from anyio.abc import TaskGroup, TaskStatus
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import get_default_environment
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, Tool, ToolListChangedNotification

from servers import CONNECT_TIMEOUT, check_url
from shortlist_depth.toolsearch import SearchSpec, ToolSearch

LOG = logging.getLogger("servers.upstreams")


class OneLine(logging.Filter):
    """The MCP SDK's stdio client logs each stdout line of an upstream that is not JSON-RPC (a start-up banner, say)
    with its whole traceback: one line instead, without the line's text (a server may print a key), the server
    read on as the SDK reads it. Installed by the CLI on the ``mcp.client.stdio`` logger."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.exc_info and "Failed to parse JSONRPC message" in record.getMessage():
            error = record.exc_info[1]
            record.msg = ("an upstream stdio server wrote a line to stdout that is not a JSON-RPC message (%s; "
                          "skipped: a server should write its own messages to stderr)")  # fmt: skip
            record.args = (type(error).__name__,)
            record.exc_info, record.exc_text = None, None
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        return True


#: ``${...}`` in a config value, and what it may hold: ``VAR`` or ``VAR:-default`` (``env:VAR``, VS Code's spelling).
_VAR = re.compile(r"\$\{([^}]*)\}")
#: VS Code's and Cursor's predefined variables (a config may hold them; this process has no workspace to read).
EDITOR_VARIABLES = frozenset({"workspaceFolder", "workspaceFolderBasename", "workspaceRoot", "userHome", "file",
                              "fileDirname", "fileBasename", "relativeFile", "cwd", "pathSeparator", "execPath",
                              "defaultBuildTask", "lineNumber", "selectedText"})  # fmt: skip
_NAMED = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?-)(.*))?", re.S)
#: What a server's name may hold when it prefixes its tools' names (MCP's tool-name characters).
_NAME = re.compile(r"[A-Za-z0-9_.-]+")
#: A config entry's ``type`` (or ``transport``) and the transport it means.
TRANSPORTS = {"stdio": "stdio", "http": "http", "streamable-http": "http", "streamable_http": "http",
              "streamableHttp": "http", "sse": "sse"}  # fmt: skip
#: The MCP SDK's HTTP timeouts (its ``create_mcp_http_client``): 30 s to connect, write and wait for a connection,
#: 300 s to read (a server may hold a stream open).
HTTP_TIMEOUT = httpx2.Timeout(30.0, read=300.0)
#: Seconds before a lost upstream is connected again; twice as long after each failed try, up to the maximum.
RECONNECT_SECONDS = 1.0
RECONNECT_MAX_SECONDS = 60.0
#: Seconds before an upstream whose ``tools/list`` failed is asked again (each request would ask otherwise).
RETRY_SECONDS = 10.0
#: Set in the environment of every stdio upstream started: ``shortlist serve mcp`` with upstreams refuses to start
#: under it, so a config entry that runs this server itself (by any launcher) stops at once instead of starting
#: copies of itself without end.
FRONTED = "SHORTLIST_FRONTED"


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
    """A stdio server's own variables, added to the environment it inherits (:attr:`inherits`)."""
    inherits: bool = False
    """A stdio server's inherited environment: this process's (``--upstream-command``), or the MCP SDK's safe default
    (``PATH``, ``HOME``, ...: a config's server, as the MCP clients start it)."""
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)


def from_command(command: str) -> UpstreamSpec:
    """``--upstream-command``: the command (split like a shell) of an MCP server over stdio."""
    argv = tuple(shlex.split(command))
    if not argv:
        raise ValueError("--upstream-command is empty")
    return UpstreamSpec("upstream", "--upstream-command", "stdio", command=argv, inherits=True)


def from_url(url: str) -> UpstreamSpec:
    """``--upstream-url``: a streamable-HTTP MCP server."""
    check_url(url, "--upstream-url")
    return UpstreamSpec("upstream", "--upstream-url", "http", url=url)


def expand(value: str, where: str, environ: Mapping[str, str]) -> str:
    """``value`` with each ``${VAR}`` replaced by the environment's value (set: even empty), ``${VAR:-default}`` by the
    value or, when it is unset or empty, the default, ``${VAR-default}`` when it is unset (as a shell reads them,
    and Claude Code's configs), and VS Code's ``${env:VAR}`` as ``${VAR}``. ValueError naming ``where`` and the
    variable when it is unset with no default, or for another editor's variable (``${input:...}``,
    ``${workspaceFolder}``): this process has no editor to ask."""

    def one(m: re.Match[str]) -> str:
        inside = m.group(1)
        named = _NAMED.fullmatch(inside.removeprefix("env:"))
        if (
            named is None
            or (inside.startswith("env:") and named.group(2) is not None)
            or (named.group(1) in EDITOR_VARIABLES and named.group(1) not in environ)
        ):
            raise ValueError(f"{where}: ${{{inside}}} is an editor's variable, not read here: give the value "
                             "through an environment variable, ${NAME}")  # fmt: skip
        var, dash, default = named.groups()
        value = environ.get(var)
        if dash == ":-":  # unset or empty: the default
            return value or default
        if value is not None:
            return value
        if dash == "-":  # unset: the default
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
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text (byte {e.start}: {e.reason}); save it as UTF-8") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        hint = " (comments, as VS Code allows in mcp.json, are not JSON: remove them)" if "//" in text else ""
        raise ValueError(f"{path}: line {e.lineno} column {e.colno}: not JSON ({e.msg}){hint}") from e
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
    if not isinstance(kind, str) or kind not in TRANSPORTS:
        raise ValueError(f"{where}: type {kind!r} is not one of {', '.join(TRANSPORTS)}")
    transport = TRANSPORTS[kind]
    if transport == "stdio":
        if not command or url is not None:
            raise ValueError(f"{where}: a stdio server has a command (and args), not a url")
        argv = (command, *strings("args", list))
        return UpstreamSpec(name, where, "stdio", command=argv, env=strings("env", dict), cwd=text("cwd"))
    if not url or command is not None:
        raise ValueError(f"{where}: an {kind} server has a url (and headers), not a command")
    check_url(url, f"{where}: url", shown=entry["url"])  # (as written: the expanded one may hold a key)
    return UpstreamSpec(name, where, transport, url=url, headers=strings("headers", dict))


def _is_shortlist_mcp(argv: Sequence[str]) -> bool:
    """Whether ``argv`` runs ``shortlist serve mcp``: a word ``shortlist`` (a path to it, or ``experiments.cli``)
    followed, later, by ``serve mcp``, in the arguments or in a shell command among them (``uv run shortlist serve
    mcp``, ``uvx --from shortlist-depth shortlist serve mcp``, ``bash -c "shortlist serve mcp ..."``). Any other
    launcher still stops at once: the server it starts finds :data:`FRONTED` in its environment."""
    words: list[str] = []
    for arg in argv:
        try:
            words += shlex.split(arg) if " " in arg else [arg]
        except ValueError:
            words.append(arg)
    ours = [i for i, w in enumerate(words) if Path(w).stem == "shortlist" or w == "experiments.cli"]
    return any(words[j : j + 2] == ["serve", "mcp"] for i in ours[:1] for j in range(i + 1, len(words)))


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
    goes to ``refused``. A stdio server's environment: :attr:`UpstreamSpec.inherits`, its ``env`` and
    :data:`FRONTED`."""
    if spec.transport == "stdio":
        base = os.environ if spec.inherits else get_default_environment()
        env = {**base, **spec.env, FRONTED: "1"}
        params = StdioServerParameters(command=spec.command[0], args=list(spec.command[1:]), env=env, cwd=spec.cwd)
        return Client(params, message_handler=message_handler)
    if spec.transport == "sse":
        return Client(sse_client(spec.url, headers=dict(spec.headers)), message_handler=message_handler)
    return Client(_http(spec, [] if refused is None else refused), message_handler=message_handler)


async def connect(spec: UpstreamSpec, tasks: TaskGroup, timeout: float = CONNECT_TIMEOUT) -> Upstream:
    """The upstream ``spec`` names, connected in a task of ``tasks`` of its own, for as long as that task group
    runs: its connection failing later (a process gone, a server down) ends that connection only. The upstream is
    then marked gone (:meth:`Upstream.lose`: its tools leave the search, its calls are errors) and connected
    again, :data:`RECONNECT_SECONDS` later, then twice as long each time it fails again (at most
    :data:`RECONNECT_MAX_SECONDS`); once connected again, its tools are read again and come back.

    Raises:
        ValueError: naming it, when it cannot be started or reached at first, does not answer as an MCP server, or
            does not answer within ``timeout`` seconds.
    """
    upstream = Upstream(None, spec.name, spec.where)
    refused: list[int] = []

    async def hold(*, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        started, delay = False, RECONNECT_SECONDS
        try:
            while True:
                try:
                    async with client(spec, upstream.on_message, refused) as c:
                        upstream.attach(c, again=started)
                        if not started:
                            started = True
                            task_status.started()
                        delay = RECONNECT_SECONDS
                        await upstream.wake.wait()  # closing (then the client closes as its SDK closes it), or lost
                except Exception as e:
                    if not started:
                        raise
                    if upstream.gone is None:
                        upstream.lose(e)
                    else:
                        LOG.info("%s: not connected again (%s)", spec.where, _reason(e))
                if upstream.closing.is_set():
                    return
                with anyio.move_on_after(delay):  # then connect again, unless the server stops meanwhile
                    await upstream.closing.wait()
                if upstream.closing.is_set():
                    return
                delay = min(2 * delay, RECONNECT_MAX_SECONDS)
        finally:
            upstream.closed.set()

    try:
        with anyio.fail_after(timeout):
            await tasks.start(hold)
    except TimeoutError as e:
        raise ValueError(f"{spec.where}: the upstream did not answer within {timeout:g} s") from e
    except Exception as e:
        status = f"HTTP {refused[-1]}; " if refused else ""
        raise ValueError(f"{spec.where}: could not connect to the upstream ({status}{_reason(e)})") from e
    return upstream


class Upstream:
    """One connected upstream: its SDK client, its tools as it lists them (read again after it says they changed),
    and why it is gone when its connection failed."""

    def __init__(self, client: Client | None, name: str = "upstream", where: str = "--upstream-command") -> None:
        self.client: Any = client
        self.name = name
        self.where = where
        self.tools: dict[str, Tool] = {}
        self.stale = True
        self.gone: str | None = None
        """Why its connection failed (None: it has not)."""
        self.failed_at: float | None = None
        """When its last ``tools/list`` failed (None: it did not); it is asked again :data:`RETRY_SECONDS` later."""
        self._calls: set[anyio.CancelScope] = set()
        self.closing = anyio.Event()
        """Set when the server stops (:meth:`close`): its connection closes (:func:`connect`)."""
        self.closed = anyio.Event()
        """Set once its connection has closed for good."""
        self.wake = anyio.Event()
        """Set when its connection is to end: the server stops, or the connection was lost (then made again)."""

    def attach(self, client: Any, again: bool = False) -> None:
        """Its connection is made (``again``: after it was lost): its tools are to be read (again)."""
        self.client, self.wake = client, anyio.Event()
        if again:
            LOG.info("%s: connected again (it had failed: %s); its tools are read again", self.where, self.gone)
        self.gone, self.stale, self.failed_at = None, True, None

    def close(self) -> None:
        """The server stops: its connection closes, and is not made again."""
        self.closing.set()
        self.wake.set()

    async def on_message(self, message: Any) -> None:
        """The client's message handler: a ``tools/list_changed`` notification marks the list stale."""
        if isinstance(message, ToolListChangedNotification):
            self.stale = True

    def lose(self, error: BaseException) -> None:
        """Its connection failed: its tools are no longer offered (at the next refresh), its calls, those waiting
        too, end as :class:`ConnectionError`."""
        self.gone = _reason(error)
        self.stale, self.failed_at = True, None  # (its tools leave at the next refresh, not after a retry's wait)
        LOG.warning("%s: the connection to the upstream failed (%s): its tools are dropped until it is connected "
                    "again", self.where, self.gone)  # fmt: skip
        for scope in self._calls:
            scope.cancel()
        self.wake.set()  # (:func:`connect` ends the connection, and makes it again)

    async def call(self, tool: str, arguments: dict[str, Any]) -> Any:
        """``tools/call`` of its ``tool``: the upstream's result (its MCP error raised as is). ConnectionError when
        its connection is gone, or goes while the call waits (it is then lost: :meth:`lose`)."""
        if self.gone is None:
            with anyio.CancelScope() as scope:
                self._calls.add(scope)
                try:
                    return await self.client.call_tool(tool, arguments)
                except Exception as e:
                    if not _closed(e):
                        raise
                    self.lose(e)
                finally:
                    self._calls.discard(scope)
        raise ConnectionError(f"its connection failed ({self.gone})")

    async def read(self, timeout: float = CONNECT_TIMEOUT) -> None:
        """Read the tools, every page (none when it is gone). A change said while it reads is not lost: the list is
        marked fresh before it is asked for."""
        self.stale = False
        if self.gone is not None:
            self.tools = {}
            return
        tools: list[Tool] = []
        cursor: str | None = None
        try:
            with anyio.fail_after(timeout):
                while True:
                    page = await self.client.list_tools(cursor=cursor, cache_mode="refresh")
                    tools += page.tools
                    cursor = page.next_cursor
                    if cursor is None:
                        break
        except TimeoutError as e:
            self.stale = True
            raise TimeoutError(f"no answer within {timeout:g} s") from e
        except Exception as e:
            if not _closed(e):
                self.stale = True
                raise
            self.lose(e)  # (a stdio server's exit is seen here, or by a call: its transport does not end)
            self.stale, self.tools = False, {}
            return
        self.tools = {t.name: t for t in tools}
        LOG.info("upstream %r lists %d tools", self.name, len(tools))


class Upstreams:
    """The tools of one or several upstreams as the agent sees them (``<server>_<tool>`` when several), where each
    call goes, and the searcher over them (the base searcher's scorer and policy)."""

    def __init__(
        self,
        upstreams: Sequence[Upstream],
        base: ToolSearch | SearchSpec,
        on_change: Callable[[list[dict[str, Any]]], None] | None = None,
        reserved: Sequence[str] = (),
    ) -> None:
        """``on_change``: called with the tools (MCP dicts, the agent's names) each time the registry is built;
        ``reserved``: names the server answers itself (its ``search_tools``): an upstream tool of that name is left
        out, and logged."""
        if not upstreams:
            raise ValueError("no upstream")
        self.upstreams = list(upstreams)
        self.on_change = on_change
        self.reserved = frozenset(reserved)
        self.spec = base.spec if isinstance(base, ToolSearch) else base
        self.tools: dict[str, Tool] = {}
        """Each tool by the name the agent sees, as its upstream lists it (renamed when several)."""
        self.route: dict[str, tuple[Upstream, str]] = {}
        """The upstream of each tool the agent sees, and the tool's name there."""
        self.searcher: ToolSearch | None = None
        self._lock = anyio.Lock()

    def exposed(self, upstream: Upstream, tool: str) -> str:
        """The name the agent sees for ``upstream``'s ``tool``."""
        return tool if len(self.upstreams) == 1 else f"{upstream.name}_{tool}"

    def _combined(self) -> tuple[dict[str, Tool], dict[str, tuple[Upstream, str]]]:
        """Every upstream's tools by the name the agent sees, and the route of each. ValueError when two share one;
        a reserved name left out (logged)."""
        tools: dict[str, Tool] = {}
        route: dict[str, tuple[Upstream, str]] = {}
        for u in self.upstreams:
            for name, tool in u.tools.items():
                seen = self.exposed(u, name)
                if seen in self.reserved:
                    LOG.warning("%s: its tool %r is named %r, as this server's own tool: left out", u.where, name, seen)
                    continue
                if seen in route:
                    other = route[seen][0].where
                    raise ValueError(f"{u.where}: its tool {name!r} is named {seen!r}, as a tool of {other} is")
                tools[seen] = tool if seen == name else tool.model_copy(update={"name": seen})
                route[seen] = (u, name)
        return tools, route

    async def respec(self, spec: SearchSpec) -> None:
        """Search with ``spec``'s scorer and policy from now on (``--reload``), the searcher over the tools listed now
        rebuilt with it first. ValueError (naming the upstreams) when it refuses them: the current one is kept."""
        async with self._lock:
            searcher = None
            if self.tools:
                listed = [t.model_dump(by_alias=True, mode="json", exclude_none=True) for t in self.tools.values()]
                old, self.spec = self.spec, spec
                try:
                    searcher = await anyio.to_thread.run_sync(self._searcher, listed)
                except BaseException:  # (whatever stopped it: the spec and searcher served stay as they were)
                    self.spec = old
                    raise
            self.spec = spec
            if searcher is not None:
                self.searcher = searcher

    def _searcher(self, tools: list[dict[str, Any]]) -> ToolSearch:
        """The searcher over ``tools``; ValueError naming the upstream(s) when the searcher refuses them."""
        try:
            return self.spec.over(tools)
        except ValueError as e:
            named = self.upstreams[0].where if len(self.upstreams) == 1 else "the upstreams"
            raise ValueError(f"{named}: the tools listed cannot be searched ({e})") from e

    async def refresh(self, strict: bool = False, timeout: float = CONNECT_TIMEOUT) -> None:
        """Read again the tools of each upstream whose list changed (all of them at first; a gone one's: none), and
        prepare the searcher over every upstream's tools.

        An upstream that fails to list is logged and keeps its last list (asked again by a request
        :data:`RETRY_SECONDS` later; nothing is rebuilt meanwhile), and a list whose names two servers share is
        logged and not used, so every request is still answered; while one request reads the lists, the others are
        answered from the registry as it was, not held behind a slow upstream; a list not read within ``timeout``
        seconds has failed. With ``strict`` (at start), a failure is a ValueError naming the upstream.
        """
        if not strict and self._lock.locked() and self.searcher is not None:
            return
        async with self._lock:
            now = anyio.current_time()
            due = [u for u in self.upstreams if u.stale and (u.failed_at is None or now - u.failed_at >= RETRY_SECONDS)]
            if not due and self.searcher is not None:
                return
            read = False
            for u in due:
                try:
                    await u.read(timeout)
                    read, u.failed_at = True, None
                except Exception as e:
                    if strict:
                        raise ValueError(f"{u.where}: the upstream's tools/list failed ({_reason(e)})") from e
                    u.failed_at = anyio.current_time()
                    LOG.warning("%s: tools/list failed, its last list kept (asked again in %g s or more): %s",
                                u.where, RETRY_SECONDS, _reason(e))  # fmt: skip
            if not read and self.searcher is not None:  # nothing new to build from
                return
            try:
                tools, route = self._combined()
                if not tools and not strict:  # every upstream gone (or listing none): nothing to search
                    LOG.warning("no upstream lists a tool now: search_tools answers an error until one does")
                    self.tools, self.route = {}, {}
                    return
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


async def close_all(upstreams: Sequence[Upstream], seconds: float) -> None:
    """Close each upstream's connection as its SDK closes it (a stdio server's stdin ended, then it is stopped; an
    HTTP session ended), waiting at most ``seconds`` for all of them."""
    if upstreams:
        LOG.info("closing the connections to %d upstream(s)", len(upstreams))
    for upstream in upstreams:
        upstream.close()
    with anyio.move_on_after(seconds):
        for upstream in upstreams:
            await upstream.closed.wait()


def _closed(e: BaseException) -> bool:
    """Whether ``e`` says the connection is gone (the SDK's ``CONNECTION_CLOSED``, a closed or broken stream)."""
    if isinstance(e, MCPError):
        return e.error.code == CONNECTION_CLOSED
    return isinstance(e, anyio.ClosedResourceError | anyio.BrokenResourceError | anyio.EndOfStream)


def innermost(e: BaseException) -> BaseException:
    """``e``, or the first error of an exception group, as deep as groups go (an SDK client's task group wraps the
    error that ended it)."""
    while isinstance(e, BaseExceptionGroup):
        e = e.exceptions[0]
    return e


def _reason(e: BaseException) -> str:
    """:func:`innermost` error of ``e``, as ``Type: message``; an HTTP status error as its status only (its message
    holds the url, and a url may hold a key)."""
    e = innermost(e)
    if isinstance(e, httpx2.HTTPStatusError):
        return f"HTTP {e.response.status_code}"
    return f"{type(e).__name__}: {e}" if str(e) else type(e).__name__


__all__: Sequence[str] = ["Upstream", "UpstreamSpec", "Upstreams", "client", "close_all", "connect", "expand",
                          "innermost", "read_config", "specs"]  # fmt: skip
