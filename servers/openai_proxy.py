"""``shortlist serve openai``: an OpenAI-compatible proxy that sends the model only the tools worth showing.

An agent points its OpenAI client at the proxy (``base_url="http://127.0.0.1:8080/v1"``); the proxy forwards
every request to the upstream (``--upstream``, the base URL an OpenAI client would use, e.g.
``https://api.openai.com/v1``), changing one thing:

- ``POST /v1/chat/completions`` with a non-empty ``tools`` list: ``tools`` is replaced by the shortlist of the
  latest user message's text (a string, or the ``text`` of its content parts), ranked and cut by the tool
  search's scorer and policy (:class:`shortlist_depth.SearchSpec`: the library's defaults, ``--policy``, or a
  saved searcher's; :meth:`~shortlist_depth.SearchSpec.over` the request's own tools; a registry seen before
  costs a hash), K bounded as the library bounds it (``max_k`` :data:`shortlist_depth.DEFAULT_MAX_K` unless
  configured). The tools keep their schemas as sent. A ``tool_choice`` naming a function is pinned: that tool is
  always sent, first, besides the policy's K.
- everything else passes unchanged: a chat request without ``tools`` (or with an empty list), and every other
  path under ``/v1`` (``/v1/models``, ...), any method.

Response headers: ``x-shortlist-k`` (the policy's K for the request), ``x-shortlist-tools`` (``shown/sent``,
pinned tools included), ``x-shortlist-policy`` (the policy's method), ``server-timing: shortlist;dur=<ms>`` (the
proxy's own time on the request: from the whole body in hand to the upstream call, parsing, searching and
serialising included, plus its work on the upstream's answer; not the waits for the client or the upstream); when
the request went with all its tools or unchanged, ``x-shortlist-fallback`` says why: ``no tools``, ``no user
text`` (the latest user message has no text), ``searcher error: <exception type>`` (the searcher failed: logged
with the reason; the request goes with every tool, never dropped).

Passed through: the upstream's status, body and headers (hop-by-hop headers aside); ``stream: true`` responses
relayed chunk by chunk as they come. Request headers go upstream as sent, ``Authorization`` included; no header
is ever logged. Errors of the proxy's own are JSON ``{"error": {"message", "type", "code"}}``:

- 400: a chat request body that is not a JSON object;
- 413: a body over ``max_body_bytes`` (checked on ``Content-Length`` and while reading);
- 502: the upstream cannot be reached; 504: it did not answer within ``timeout`` seconds.

An upstream that fails in the middle of a streamed response ends the stream there (its status was sent
already): the client sees a stream without its final ``data: [DONE]``.
"""

from __future__ import annotations

import gc
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from servers import HEALTH_PATH, SERVER_TIMING, health, listen
from servers.listen import Listener
from shortlist_depth.toolsearch import DEFAULT_MAX_K, SearchSpec, ToolSearch

LOG = logging.getLogger("servers.openai_proxy")
#: The largest request body accepted by default (bytes): 16 MiB (BFCL's 370 tools are 0.2 MB).
DEFAULT_MAX_BODY = 16 * 2**20
#: Seconds the upstream has to answer (connect, each read) by default.
DEFAULT_TIMEOUT = 120.0
#: Headers of one hop, never forwarded either way.
HOP_HEADERS = frozenset(
    {"host", "content-length", "connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
     "proxy-authorization", "proxy-authenticate"}
)  # fmt: skip
METHODS = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]


@dataclass(frozen=True)
class ProxyConfig:
    """How the proxy forwards and shortlists."""

    upstream: str
    """Base URL of the OpenAI-compatible upstream (what an OpenAI client's ``base_url`` would be)."""
    max_body_bytes: int = DEFAULT_MAX_BODY
    """Largest request body accepted; a larger one gets 413."""
    timeout: float = DEFAULT_TIMEOUT
    """Seconds the upstream has to connect and to send each part of its answer; then 504."""
    min_k: int | None = None
    """Show at least this many ranked tools (None: 1, the library's)."""
    max_k: int | None = DEFAULT_MAX_K
    """Show at most this many ranked tools (the library's default bound; None: no bound)."""
    registries_kept: int = 32
    """Distinct tool lists whose prepared searchers are kept (least recently used dropped)."""


@dataclass(frozen=True)
class Plan:
    """What to send upstream for one chat request: the body and the ``x-shortlist-*`` headers."""

    body: bytes
    headers: dict[str, str] = field(default_factory=dict)


def error(status: int, message: str, code: str) -> JSONResponse:
    """The proxy's own error, in the OpenAI error shape."""
    return JSONResponse({"error": {"message": message, "type": "shortlist_proxy_error", "code": code}}, status)


def user_text(messages: object) -> str | None:
    """The text of the latest user message (a string, or its text content parts joined by a newline); None when
    there is no user message or it has no text."""
    if not isinstance(messages, list):
        return None
    for m in reversed(messages):
        if not isinstance(m, dict) or m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, list):
            parts = [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
            content = "\n".join(parts)
        return content if isinstance(content, str) and content.strip() else None
    return None


def chosen_tool(tool_choice: object) -> str | None:
    """The function a ``tool_choice`` names (``{"type": "function", "function": {"name": ...}}``), else None."""
    if isinstance(tool_choice, dict) and isinstance(tool_choice.get("function"), dict):
        name = tool_choice["function"].get("name")
        return name if isinstance(name, str) else None
    return None


#: The request body's top level, each value left as its raw JSON bytes (parsed only where needed: a 370-tool
#: body is 0.2 MB, and parsing all of it cost more than the search).
TOP_LEVEL = msgspec.json.Decoder(dict[str, msgspec.Raw])
#: A ``tools`` array as the raw bytes of each tool.
ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
ENCODER = msgspec.json.Encoder()


def _value(raw: msgspec.Raw | None) -> Any:
    """A top-level value, parsed (None when absent)."""
    return None if raw is None else msgspec.json.decode(raw)


class Shortlister:
    """The tool search's scorer and policy on each request's tools (one prepared searcher per distinct tool list,
    keyed by the sha256 of the list's bytes as sent)."""

    def __init__(self, base: ToolSearch | SearchSpec, config: ProxyConfig) -> None:
        self.spec = base.spec if isinstance(base, ToolSearch) else base
        self.config = config
        self._searchers: OrderedDict[str, ToolSearch] = OrderedDict()

    def searcher(self, tools: msgspec.Raw, items: list[msgspec.Raw]) -> ToolSearch:
        """The searcher of a tool list (``tools``, its raw JSON; ``items``, each tool's), prepared once per distinct
        list: only then are the tools parsed."""
        key = hashlib.sha256(tools).hexdigest()
        if key in self._searchers:
            self._searchers.move_to_end(key)
            return self._searchers[key]
        search = self.spec.over([msgspec.json.decode(item) for item in items])
        self._searchers[key] = search
        while len(self._searchers) > self.config.registries_kept:
            self._searchers.popitem(last=False)
        return search

    def plan(self, raw: bytes, top: dict[str, msgspec.Raw]) -> Plan:
        """The body to send for one chat request, and its headers (module docstring): the request's own bytes but
        for ``tools``, which holds the chosen tools' own bytes, in rank order."""
        try:
            items = ITEMS.decode(top["tools"]) if "tools" in top else []
        except msgspec.ValidationError:  # not a list: not ours to judge
            items = []
        if not items:
            return Plan(raw, {"x-shortlist-fallback": "no tools"})
        text = user_text(_value(top.get("messages")))
        if text is None:
            LOG.info("chat request with %d tools and no user text: all tools forwarded", len(items))
            return Plan(raw, {"x-shortlist-fallback": "no user text"})
        try:
            search = self.searcher(top["tools"], items)
            pin = chosen_tool(_value(top.get("tool_choice")))
            pinned = [pin] if pin is not None and pin in search.index else []
            shortlist = search.search(text, min_k=self.config.min_k, max_k=self.config.max_k, pinned=pinned)
        except Exception as e:  # the request is never dropped: it goes with every tool
            LOG.warning("searcher failed on a request with %d tools, all forwarded: %s: %s", len(items),
                        type(e).__name__, e)  # fmt: skip
            return Plan(raw, {"x-shortlist-fallback": f"searcher error: {type(e).__name__}"})
        headers = {
            "x-shortlist-k": str(shortlist.k),
            "x-shortlist-tools": f"{len(shortlist.tools)}/{len(items)}",
            "x-shortlist-policy": search.policy.method,
        }
        chosen = b",".join(bytes(items[search.index[name]]) for name in shortlist.names)
        return Plan(ENCODER.encode({**top, "tools": msgspec.Raw(b"[" + chosen + b"]")}), headers)


async def read_body(request: Request, limit: int) -> bytes | None:
    """The request body, or None when it is over ``limit`` bytes (said by ``Content-Length`` or counted)."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        return None
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _forwarded(headers: Mapping[str, str]) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in HOP_HEADERS}


class Proxy:
    """The proxy's handlers and its one HTTP client to the upstream."""

    def __init__(self, base: ToolSearch | SearchSpec, config: ProxyConfig) -> None:
        self.config = config
        self.shortlister = Shortlister(base, config)
        self.client: httpx.AsyncClient | None = None

    @asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[None]:
        timeout = httpx.Timeout(self.config.timeout)
        # an idle connection is dropped before the upstream's own keep-alive timeout (uvicorn's: 5 s) can close it
        # under a request being sent on it (a 502 the client never caused)
        limits = httpx.Limits(max_connections=512, max_keepalive_connections=128, keepalive_expiry=2.0)
        async with httpx.AsyncClient(base_url=self.config.upstream.rstrip("/"), timeout=timeout, limits=limits) as c:
            self.client = c
            gc.freeze()  # what is loaded stays: the collector no longer walks it on every request's garbage
            yield
        self.client = None

    async def health(self, request: Request) -> Response:
        """``GET /healthz``: 200 once started, and what is served (:func:`servers.health`)."""
        spec = self.shortlister.spec
        return JSONResponse(health("shortlist serve openai", spec.scorer, spec.policy.method, None))

    async def chat(self, request: Request) -> Response:
        """``POST /v1/chat/completions``: the shortlist of the request's tools forwarded (module docstring)."""
        raw = await self.body(request)
        if isinstance(raw, Response):
            return raw
        t0 = time.perf_counter()  # the proxy's own time starts with the whole body in hand
        try:
            top = TOP_LEVEL.decode(raw)
        except msgspec.ValidationError as e:
            return error(400, f"the request body must be a JSON object ({e})", "invalid_json")
        except msgspec.DecodeError as e:
            return error(400, f"the request body is not JSON ({e})", "invalid_json")
        plan = self.shortlister.plan(raw, top)  # on the event loop: a BM25 search costs about a millisecond
        LOG.info("chat request: %s (%.1f ms in the proxy)", ", ".join(f"{k[12:]}={v}" for k, v in plan.headers.items()),
                 1e3 * (time.perf_counter() - t0))  # fmt: skip
        stream = _value(top.get("stream")) is True
        return await self.forward(request, "/chat/completions", plan.body, plan.headers, stream, since=t0)

    async def passthrough(self, request: Request) -> Response:
        """Any other path under ``/v1``: forwarded unchanged."""
        raw = await self.body(request)
        if isinstance(raw, Response):
            return raw
        return await self.forward(request, "/" + request.path_params["path"], raw, {}, stream=False)

    async def body(self, request: Request) -> bytes | Response:
        """The request's body, or the answer that ends it: 499 when the client left, 413 over the size limit."""
        try:
            raw = await read_body(request, self.config.max_body_bytes)
        except ClientDisconnect:
            return Response(status_code=499)
        if raw is None:
            return error(413, f"request body over the proxy's limit of {self.config.max_body_bytes} bytes",
                         "body_too_large")  # fmt: skip
        return raw

    async def forward(
        self,
        request: Request,
        path: str,
        content: bytes,
        extra: dict[str, str],
        stream: bool,
        since: float | None = None,
    ) -> Response:
        """Send ``content`` to the upstream's ``path``; its answer relayed (streamed when ``stream``). With ``since``
        (``time.perf_counter()`` when the proxy's own work on the request began), the answer carries
        ``server-timing: shortlist;dur=<ms>``: the proxy's own time, that work up to the upstream call plus its
        work on the upstream's answer (not the waits for the upstream)."""
        assert self.client is not None, "the proxy's lifespan has not started"
        sent = self.client.build_request(request.method, path, content=content, headers=_forwarded(request.headers),
                                         params=str(request.query_params))  # fmt: skip
        before = 0.0 if since is None else time.perf_counter() - since
        try:
            resp = await self.client.send(sent, stream=True)
        except httpx.TimeoutException:
            return error(504, f"the upstream did not answer within {self.config.timeout:g} s", "upstream_timeout")
        except httpx.HTTPError as e:
            return error(502, f"the upstream cannot be reached ({type(e).__name__})", "upstream_unreachable")
        if stream:
            t1 = time.perf_counter()
            headers = self._answer_headers(resp, extra, since, before, t1)
            closing = BackgroundTask(resp.aclose)
            return StreamingResponse(resp.aiter_raw(), resp.status_code, headers, background=closing)
        try:
            data = b"".join([chunk async for chunk in resp.aiter_raw()])
        except httpx.TimeoutException:
            return error(504, f"the upstream did not finish its answer within {self.config.timeout:g} s",
                         "upstream_timeout")  # fmt: skip
        except httpx.HTTPError as e:
            return error(502, f"the upstream's answer broke off ({type(e).__name__})", "upstream_unreachable")
        finally:
            await resp.aclose()
        return Response(data, resp.status_code, self._answer_headers(resp, extra, since, before, time.perf_counter()))

    @staticmethod
    def _answer_headers(
        resp: httpx.Response, extra: dict[str, str], since: float | None, before: float, t1: float
    ) -> dict[str, str]:
        """The upstream's headers (hop-by-hop ones aside), the proxy's ``extra`` and, when timed, its own time."""
        headers = {**_forwarded(resp.headers), **extra}
        if since is not None:
            own = before + time.perf_counter() - t1
            headers["server-timing"] = f"{SERVER_TIMING};dur={1e3 * own:.2f}"
        return headers


def create_app(searcher: ToolSearch | SearchSpec, config: ProxyConfig) -> Starlette:
    """The proxy as an ASGI app (run it with uvicorn; :func:`serve`): ``searcher`` gives the scorer and policy (a
    saved searcher's, or :meth:`shortlist_depth.SearchSpec.create`'s defaults)."""
    proxy = Proxy(searcher, config)
    routes = [
        Route(HEALTH_PATH, proxy.health, methods=["GET", "HEAD"]),
        Route("/v1/chat/completions", proxy.chat, methods=["POST"]),
        Route("/v1/{path:path}", proxy.passthrough, methods=METHODS),
    ]
    return Starlette(routes=routes, lifespan=proxy.lifespan)


def serve(searcher: ToolSearch | SearchSpec, config: ProxyConfig, listener: Listener) -> None:
    """Run the proxy on ``listener`` (:func:`servers.listen.bind`) until interrupted; once it answers, it logs
    ``shortlist serve openai listening on http://host:port/v1``."""
    LOG.info("shortlist proxy: %r in front of %s", searcher, config.upstream)
    # a client's idle connection is kept 75 s (nginx's default), not uvicorn's 5: on a saturated event loop the
    # keep-alive timer can fire in the same turn as the client's next request arrives, closing it unread
    listen.run(create_app(searcher, config), listener, "/v1", "shortlist serve openai", log_level="info",
               timeout_keep_alive=75)  # fmt: skip
