"""``shortlist serve openai``: an OpenAI-compatible proxy (Anthropic's Messages API too) that sends the model only
the tools worth showing.

An agent points its OpenAI client at the proxy (``base_url="http://127.0.0.1:8080/v1"``); the proxy forwards
every request to the upstream (``--upstream``, the base URL an OpenAI client would use, e.g.
``https://api.openai.com/v1``), changing one thing:

- ``POST /v1/chat/completions`` with a non-empty ``tools`` list: ``tools`` is replaced by the shortlist of the
  latest user message's text (a string, or the ``text`` of its content parts), ranked and cut by the tool
  search's scorer and policy (:class:`shortlist_depth.SearchSpec`: the library's defaults, ``--policy``, or a
  saved searcher's; :meth:`~shortlist_depth.SearchSpec.over` the request's own tools; a registry seen before
  costs a hash), K bounded as the library bounds it (``max_k`` :data:`shortlist_depth.DEFAULT_MAX_K` unless
  configured). The tools keep their schemas as sent. A ``tool_choice`` naming a function is pinned: that tool is
  always sent, first, besides the policy's K; so are all the functions of an ``allowed_tools`` choice.
- ``POST /v1/responses`` (the Responses API) likewise, on the text of ``input`` (a string, or the latest user
  message among its items): its function tools (``{"type": "function", "name", ...}``) are ranked and cut, any
  other tool (built-in, such as ``web_search``, or custom) is kept, sent first as it was. A request whose input
  holds no user text (only a tool's output) and continues a response (``previous_response_id``) the proxy
  answered is shortlisted on the text that response's request was (kept by response id, the last
  ``responses_kept``; ``x-shortlist-text: previous response``); continuing another, it goes with every tool.
  Functions the hosted ``tool_search`` loads on demand (``defer_loading: true``) are kept too: they are its
  pool. The functions of a ``namespace`` tool are ranked with the others, each by its qualified name
  (``crm.list_open_orders``, :func:`qualified`; a ``function_call`` item names its ``namespace``) and with the
  namespace's name and description after its own (:func:`in_namespace`); the namespace is
  sent with its own keys, the tools it keeps (deferred, custom) and its chosen functions: first with the kept tools
  when it keeps one, else where its best-ranked function is, or not at all when it then holds none (a namespace
  marked ``defer_loading`` itself is kept whole). A ``tool_choice`` names a function by its own name: a namespace's
  function of that name is pinned when no top-level one has it (so is a ``function_call`` in use that leaves its
  ``namespace`` out). ``POST /v1/responses/input_tokens`` is counted with the shortlist its request would be sent
  with.
- Anthropic's ``POST /v1/messages`` likewise (an Anthropic client's ``base_url`` is the proxy's root, without
  ``/v1``), on the text of the latest user message that is not a tool loop's turn (one beginning with
  ``tool_result`` blocks; the request is the message before): its client tools (no ``type``, a null one, or
  ``custom``; the text ranked from ``input_schema``) are ranked and cut, server tools (``web_search_20250305``,
  ...) and tools its tool search defers (``defer_loading``) kept, sent first; a ``tool_choice`` of ``{"type":
  "tool", "name"}`` is pinned; ``POST /v1/messages/count_tokens`` is counted with the shortlist. The proxy's own
  errors on these paths, or on a path passed through with an ``anthropic-version`` header, take Anthropic's shape
  (``{"type": "error", "error": {"type", "message", "details": {"error_code"}}}``).
- in every API a tool the conversation has called so far (``tool_calls``, ``function_call`` items, ``tool_use``
  blocks) or made available (Anthropic's ``tool_addition`` / ``tool_removal``) is sent too: at the shortlist's
  end when the policy left it out.
- everything else passes unchanged: a request without ``tools`` (or with an empty list, or no function tool), and
  every other path under ``/v1`` (``/v1/models``, ``/v1/responses/{id}``, ``/v1/messages/batches``, ...), any
  method.

Response headers: ``x-shortlist-k`` (the policy's K for the request), ``x-shortlist-tools`` (``shown/sent``,
pinned tools included, a namespace's tools counted one by one), ``x-shortlist-policy`` (the policy's method),
``server-timing: shortlist;dur=<ms>`` (the proxy's own time on the request: from the whole body in hand to the
upstream call, parsing, searching and serialising included, plus its work on the upstream's answer; not the waits
for the client or the upstream); when
the request went with all its tools or unchanged, ``x-shortlist-fallback`` says why: ``no tools``, ``no
function tools`` (Anthropic: ``no client tools``), ``no user text`` (the latest user message has no text; a
Responses continuation the proxy does not know), ``tied scores`` (the text scores every tool alike, e.g. "yes,
go ahead", which shares no word with any tool: the library would show ``min_k`` tools in registry order, which
would drop the tool the conversation needs), ``searcher error: <exception type>``
(the searcher failed: logged with the reason; the request goes with every tool, never dropped).

Passed through: the upstream's status, body and headers (hop-by-hop headers aside); ``stream: true`` responses
relayed chunk by chunk as they come. Request headers go upstream as sent, ``Authorization`` included; no header
is ever logged. Errors of the proxy's own are JSON ``{"error": {"message", "type", "code"}}``:

- 400: a request body of a shortlisted path that is not a JSON object;
- 413: a body over ``max_body_bytes`` (checked on ``Content-Length`` and while reading);
- 502: the upstream cannot be reached; 504: it did not answer within ``timeout`` seconds.

An upstream that fails in the middle of a streamed response ends the stream there (its status was sent
already): the client sees a stream without its final ``data: [DONE]``.
"""

from __future__ import annotations

import asyncio
import gc
import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import httpx
import msgspec
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from benchmarks.corpus import DataError
from benchmarks.tools import ToolSchema, parse_tool
from servers import FALLBACK_TIED, HEALTH_PATH, SERVER_TIMING, health, listen, redact_url
from servers.listen import Listener
from servers.record import Recorder
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
#: Answer headers the proxy's own server writes (uvicorn): the upstream's are not relayed, or each would come twice.
OWN_ANSWER_HEADERS = frozenset({"date", "server"})
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
    responses_kept: int = 1024
    """Responses API answers whose request text is kept, by response id, for a request continuing one
    (``previous_response_id``) with no user text of its own (least recently used dropped)."""
    reload: str | None = None
    """A saved searcher's folder: each searcher saved into it later is served from then on (:mod:`servers.reload`)."""
    cache_dir: str | None = None
    """The package cache folder a reloaded searcher loads its scorer with."""
    reload_since: Any = None
    """The ``reload`` folder's stamp when the searcher served was loaded (:func:`servers.reload.folder_stamp`;
    None: when the proxy starts)."""


@dataclass(frozen=True)
class Plan:
    """What to send upstream for one request: the body and the ``x-shortlist-*`` headers."""

    body: bytes
    headers: dict[str, str] = field(default_factory=dict)
    text: str | None = None
    """The user text the tools were shortlisted on (None: not shortlisted)."""
    ready: Prepared | None = None
    """The request's tool list as prepared: its searcher and namespaces (None: not shortlisted)."""
    shown: tuple[str, ...] = ()
    """The ranked tools sent, in order (the shortlist, then tools in use it left out)."""
    pinned: tuple[str, ...] = ()
    """The tools ``tool_choice`` forced (their calls are not a choice)."""
    k: int = 0
    """The policy's K."""

    @property
    def search(self) -> ToolSearch | None:
        """The searcher of the request's ranked tools (None: not shortlisted)."""
        return None if self.ready is None else self.ready.search


def error(status: int, message: str, code: str) -> JSONResponse:
    """The proxy's own error, in the OpenAI error shape."""
    return JSONResponse({"error": {"message": message, "type": "shortlist_proxy_error", "code": code}}, status)


def user_text(messages: object, loop_turns: bool = False) -> str | None:
    """The text of the latest user message (a string, or its text content parts joined by a newline); None when
    there is no user message or it has no text. With ``loop_turns`` (Anthropic's Messages API), a user message
    that begins with a ``tool_result`` block is a tool loop's turn, whatever text or images an agent adds after
    it (the API requires the results first), and is passed over: the request is the message before."""
    if not isinstance(messages, list):
        return None
    for m in reversed(messages):
        if not isinstance(m, dict) or m.get("role") != "user":
            continue
        content = m.get("content")
        if isinstance(content, list):
            first = content[0] if content else None
            if loop_turns and isinstance(first, dict) and first.get("type") == "tool_result":
                continue
            parts = [p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str)]
            content = "\n".join(parts)
        return content if isinstance(content, str) and content.strip() else None
    return None


def input_text(value: object) -> str | None:
    """The Responses API's ``input``: the string itself, or the latest user message's text among its items
    (:func:`user_text`: ``{"role": "user", "content": ...}``, content parts of ``input_text``); None when there is
    none (e.g. only tool outputs, continuing a previous response)."""
    if isinstance(value, str):
        return value if value.strip() else None
    return user_text(value)


def _function_name(ref: object) -> str | None:
    """The function a tool reference names: ``{"type": "function", "function": {"name"}}`` (Chat Completions; the
    ``type`` may be left out) or ``{"type": "function", "name"}`` (Responses)."""
    if not isinstance(ref, dict) or ref.get("type", "function") != "function":  # (vLLM defaults a missing type)
        return None
    name = ref["function"].get("name") if isinstance(ref.get("function"), dict) else ref.get("name")
    return name if isinstance(name, str) else None


def chosen_tools(tool_choice: object) -> list[str]:
    """The functions a ``tool_choice`` names, in order, in either API's shape: one function (``{"type":
    "function", ...}``), or the ``allowed_tools`` the model is restricted to (Chat Completions: ``{"type":
    "allowed_tools", "allowed_tools": {"tools": [...]}}``; Responses: ``{"type": "allowed_tools", "tools": [...]}``);
    none for ``auto``, ``none``, ``required`` or a built-in tool."""
    if not isinstance(tool_choice, dict):
        return []
    if tool_choice.get("type") == "allowed_tools":
        allowed = tool_choice.get("allowed_tools")
        refs = (allowed if isinstance(allowed, dict) else tool_choice).get("tools")
        names = [_function_name(r) for r in refs] if isinstance(refs, list) else []
        return [n for n in dict.fromkeys(names) if n is not None]
    name = _function_name(tool_choice)
    return [] if name is None else [name]


#: Between a namespace's name and its function's in the name a namespaced function is ranked, logged and recorded
#: by (``crm.list_open_orders``): an OpenAI function name holds no dot, so it never meets a top-level function's.
NAMESPACE_DOT = "."


def qualified(name: object, namespace: object) -> object:
    """A Responses function's name in the proxy's registry: ``namespace.name`` for a function of a ``namespace``
    tool (a ``function_call`` item says its ``namespace``), ``name`` itself otherwise."""
    if isinstance(name, str) and isinstance(namespace, str):
        return f"{namespace}{NAMESPACE_DOT}{name}"
    return name


def called_tools(conversation: object) -> list[str]:
    """The tools a conversation has called or made available so far, in order, in any family's shape: Chat
    Completions' assistant ``tool_calls``, Responses' ``function_call`` items (a function of a namespace by its
    :func:`qualified` name), Anthropic's ``tool_use`` blocks and
    the ``tool_reference`` of its ``tool_addition`` / ``tool_removal`` blocks (a reference to a tool missing from
    ``tools`` is refused upstream). A tool in use stays in the list sent."""
    names: list[object] = []
    for item in conversation if isinstance(conversation, list) else []:
        if not isinstance(item, dict):
            continue
        if item.get("type") == "function_call":  # Responses (a namespace's function by its qualified name)
            names.append(qualified(item.get("name"), item.get("namespace")))
        calls = item.get("tool_calls")  # chat
        for call in calls if isinstance(calls, list) else []:
            names.append(_function_name({"type": "function", **call}) if isinstance(call, dict) else None)
        content = item.get("content")
        for block in content if isinstance(content, list) else []:  # Anthropic
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_use":
                names.append(block.get("name"))
            elif block.get("type") in ("tool_addition", "tool_removal") and isinstance(block.get("tool"), dict):
                names.append(block["tool"].get("name"))
    return list(dict.fromkeys(n for n in names if isinstance(n, str)))  # (a name that is not a string: not hashed)


@dataclass(frozen=True)
class Api:
    """One shortlisted endpoint: its path under the base URL, the top-level key of the user's text, and its
    family (``openai``: Chat Completions and Responses; ``anthropic``: Messages), which says which tools are
    ranked, how a ``tool_choice`` names one, and the shape of the proxy's own errors."""

    name: str
    path: str
    text_key: str
    family: str = "openai"

    def text(self, value: object) -> str | None:
        """The request's user text, from its ``text_key`` value."""
        if self.text_key == "messages":
            return user_text(value, loop_turns=self.family == "anthropic")
        return input_text(value)

    def ranks(self, tool: object) -> bool:
        """Whether the proxy ranks (and may cut) a tool: a function (OpenAI: ``"type": "function"``; Anthropic: a
        client tool, ``"type": "custom"``; or no type, or a null one), unless it is loaded on demand by the
        provider's hosted tool search (``defer_loading``: the pool that search reads). Any other tool (built-in,
        server) is kept."""
        if not isinstance(tool, dict) or tool.get("defer_loading") is True:
            return False
        return tool.get("type") in (None, "custom" if self.family == "anthropic" else "function")

    def pins(self, tool_choice: object) -> list[str]:
        """The tools a ``tool_choice`` names (:func:`chosen_tools`; Anthropic: ``{"type": "tool", "name"}``)."""
        if self.family != "anthropic":
            return chosen_tools(tool_choice)
        named = isinstance(tool_choice, dict) and tool_choice.get("type") == "tool"
        name = tool_choice.get("name") if named and isinstance(tool_choice, dict) else None
        return [name] if isinstance(name, str) else []

    def error(self, status: int, message: str, code: str) -> JSONResponse:
        """The proxy's own error, in this family's shape (Anthropic's: its error type for the status, the proxy's
        code in ``details``)."""
        if self.family == "anthropic":
            kind = ANTHROPIC_ERRORS.get(status, "api_error")
            body = {"type": kind, "message": message, "details": {"error_code": code}}
            return JSONResponse({"type": "error", "error": body}, status)
        return error(status, message, code)

    @property
    def no_tools(self) -> str:
        """The fallback a request without a tool the proxy ranks gets."""
        return "no client tools" if self.family == "anthropic" else "no function tools"


#: Anthropic's error type for each status the proxy answers itself.
ANTHROPIC_ERRORS = {400: "invalid_request_error", 413: "request_too_large", 502: "api_error", 504: "timeout_error"}

#: ``POST /v1/chat/completions``, ``POST /v1/responses`` and ``POST /v1/responses/input_tokens`` (a request's input
#: tokens counted as it would be sent: with the shortlist); Anthropic's ``POST /v1/messages`` and
#: ``POST /v1/messages/count_tokens``.
CHAT = Api("chat", "/chat/completions", "messages")
RESPONSES = Api("responses", "/responses", "input")
INPUT_TOKENS = Api("responses input_tokens", "/responses/input_tokens", "input")
MESSAGES = Api("messages", "/messages", "messages", "anthropic")
COUNT_TOKENS = Api("messages count_tokens", "/messages/count_tokens", "messages", "anthropic")
#: Every path the proxy shortlists (``POST /v1`` + the path), one route each.
SHORTLISTED = (CHAT, RESPONSES, INPUT_TOKENS, MESSAGES, COUNT_TOKENS)
#: The paths whose answers call tools: what ``--record`` writes from (not the token counts).
RECORDED = (CHAT, RESPONSES, MESSAGES)


#: The request body's top level, each value left as its raw JSON bytes (parsed only where needed: a 370-tool
#: body is 0.2 MB, and parsing all of it cost more than the search).
TOP_LEVEL = msgspec.json.Decoder(dict[str, msgspec.Raw])
#: A ``tools`` array as the raw bytes of each tool.
ITEMS = msgspec.json.Decoder(list[msgspec.Raw])
ENCODER = msgspec.json.Encoder()


def _value(raw: msgspec.Raw | None) -> Any:
    """A top-level value, parsed (None when absent)."""
    return None if raw is None else msgspec.json.decode(raw)


def _checked_tools(items: list[tuple[str, object]]) -> tuple[ToolSchema, ...]:
    """The ranked tools parsed, each malformed or repeated one named by where it is in the request (``tools[i]``,
    or ``tools[i].tools[j]`` in a namespace; :func:`benchmarks.tools.parse_tools` would number them among the ranked
    tools only)."""
    tools: list[ToolSchema] = []
    first: dict[str, str] = {}
    for where, item in items:
        tool = parse_tool(item, where)
        if tool.name in first:
            raise DataError(f"{where} ({tool.name!r}): duplicate tool name (first at {first[tool.name]})")
        first[tool.name] = where
        tools.append(tool)
    return tuple(tools)


@dataclass(frozen=True)
class Namespace:
    """A Responses ``namespace`` tool that holds ranked functions: sent with its own keys as they were and, in its
    ``tools``, the functions it keeps (not ranked: deferred, custom) and those chosen, or left out when it then
    holds none."""

    top: dict[str, msgspec.Raw]
    """Its keys, each value raw."""
    items: list[msgspec.Raw]
    """Its ``tools``, each one's raw bytes."""
    kept: list[int]
    """The indices in ``items`` of the tools it keeps whatever the shortlist, in order."""

    def encoded(self, chosen: list[int]) -> bytes:
        """The namespace with its kept tools, then ``chosen`` (indices in ``items``, in rank order)."""
        inner = b",".join(bytes(self.items[j]) for j in [*self.kept, *chosen])
        return ENCODER.encode({**self.top, "tools": msgspec.Raw(b"[" + inner + b"]")})


@dataclass(frozen=True)
class Prepared:
    """A tool list made ready once: the searcher over its ranked tools and where each item is in the list."""

    search: ToolSearch | None
    """None: the list has no tool to rank."""
    ranked: list[tuple[int, int | None]]
    """Where each tool the searcher ranks (:meth:`Api.ranks`) is, in the searcher's order: its list index, and its
    index in its namespace's ``tools`` (None: not in a namespace)."""
    kept: list[int]
    """The list indices of the other tools (built-in, server, custom ones, those the hosted tool search loads on
    demand, a namespace without a ranked function): always sent, first, as they were."""
    namespaces: dict[int, Namespace] = field(default_factory=dict)
    """The namespaces that hold ranked functions, by list index: sent first too when they keep a tool, else where
    their best-ranked chosen function is."""
    bare: dict[str, list[str]] = field(default_factory=dict)
    """The qualified names of the namespaced functions, by their own name (what a ``tool_choice`` names)."""
    sizes: list[int] = field(default_factory=list)
    """How many tools each list item is (a namespace: its tools; any other item: 1)."""

    def resolve(self, names: list[str], unique: bool = False) -> list[str]:
        """The ranked tools ``names`` mean, in order, once each: a name of the searcher's, or a bare name no
        top-level tool has, which means every namespace's function of that name (a ``tool_choice`` names a function
        by its own name; a ``function_call`` item may leave its ``namespace`` out): pinning or keeping more than
        was meant never sends less than the model may call. With ``unique`` (what a call is recorded as), a bare
        name means a function only when one namespace alone has it."""
        assert self.search is not None
        index = self.search.index
        out = []
        for n in names:
            spaced = self.bare.get(n, [])
            out += [n] if n in index else spaced if not unique or len(spaced) == 1 else []
        return list(dict.fromkeys(out))


def in_namespace(fn: dict[str, Any], namespace: dict[str, Any]) -> object:
    """The description a namespace's function is ranked by: its own, then the namespace's name and description in
    parentheses (``List open orders. (crm: CRM tools for customer lookup.)``): OpenAI's guide has a namespace's
    description say what its functions are for, so a request naming the namespace's subject finds them. A
    description that is not a string is left as it is (the searcher refuses it, naming where it is)."""
    own = fn.get("description")
    if own is not None and not isinstance(own, str):
        return own
    about = namespace.get("description")
    context = f"{namespace.get('name')}: {about}" if isinstance(about, str) and about.strip() else namespace.get("name")
    return f"{(own or '').strip()} ({context})".strip()


def _namespaced(raw: msgspec.Raw, tool: object, api: Api) -> tuple[str, Namespace, list[Any]] | None:
    """A Responses ``namespace`` tool (``{"type": "namespace", "name", "tools": [...]}``) that holds a function the
    proxy ranks: its name, its :class:`Namespace` (no tool kept yet) and its tools parsed; None for any other tool
    (a namespace that is deferred itself, or without a string name, a list of tools or a ranked function, is sent
    as it is)."""
    if api.family != "openai" or not isinstance(tool, dict) or tool.get("type") != "namespace":
        return None
    if tool.get("defer_loading") is True:  # (one version of OpenAI's guide marks a namespace so): its pool, whole
        return None
    name, tools = tool.get("name"), tool.get("tools")
    if not isinstance(name, str) or not isinstance(tools, list) or not any(api.ranks(t) for t in tools):
        return None
    top = TOP_LEVEL.decode(raw)
    return name, Namespace(top, ITEMS.decode(top["tools"]), []), tools


def _top_level(data: bytes) -> dict[str, msgspec.Raw]:
    """A JSON object's top level, each value raw; empty when ``data`` is not one."""
    try:
        return TOP_LEVEL.decode(data)
    except (msgspec.DecodeError, msgspec.ValidationError):
        return {}


#: How much of a streamed answer is held for one event before the watchers give up on it.
EVENT_BYTES = 1 << 20


def _split_events(buffer: bytes) -> tuple[list[bytes], bytes]:
    """The complete server-sent events at the start of ``buffer`` (each one's data: its ``data:`` lines, joined by
    newlines) and the rest, in one pass over it. Lines may end in LF, CRLF or CR; a CR at the very end waits for the
    next chunk (it may be half of a CRLF)."""
    cut = len(buffer) - 1 if buffer.endswith(b"\r") else len(buffer)
    text = buffer[:cut].replace(b"\r\n", b"\n").replace(b"\r", b"\n")
    *complete, rest = text.split(b"\n\n")
    events = []
    for event in complete:
        lines = [line[5:] for line in event.split(b"\n") if line.startswith(b"data:") or line == b"data"]
        events.append(b"\n".join(line[1:] if line.startswith(b" ") else line for line in lines))
    return events, rest + buffer[cut:]


async def _watching(chunks: AsyncIterator[bytes], sees: list[Callable[[bytes], bool]]) -> AsyncIterator[bytes]:
    """``chunks`` relayed unchanged as they come; each server-sent event's data, split once, to each of ``sees`` for
    as long as it answers True (and while no event is over :data:`EVENT_BYTES`)."""
    held, wanting = b"", list(sees)
    async for chunk in chunks:
        if wanting:
            events, held = _split_events(held + chunk)
            for data in events:
                wanting = [see for see in wanting if see(data)]
            if len(held) > EVENT_BYTES:
                wanting = []
        yield chunk


def _first_id(seen_id: Callable[[str], None]) -> Callable[[bytes], bool]:
    """A watcher of a streamed Responses answer: the id of its first event (``response.created``: ``data:
    {"response": {"id": ...}}``) to ``seen_id``; nothing more read."""

    def see(data: bytes) -> bool:
        if not data.strip():  # (a comment, a keep-alive: the first event is still to come)
            return True
        created = _value(_top_level(data).get("response"))
        if isinstance(created, dict) and isinstance(created.get("id"), str):
            seen_id(created["id"])
        return False

    return see


def answer_calls(api: Api, answer: object) -> list[str]:
    """The tools an answer of ``api`` calls, or one event of its stream, read by :func:`called_tools` from the items
    that hold its calls: Chat Completions' ``message`` (a chunk's ``delta``: each call's name comes in its first);
    Responses' ``output`` (of the answer or a ``response.*`` event; an ``output_item`` event's ``item``); Anthropic's
    answer itself (its ``content``; a ``content_block_start`` event's ``content_block``). Never the tools a response
    echoes from its request."""
    if not isinstance(answer, dict):
        return []
    items: list[object]
    if api.family == "anthropic":
        items = [answer if isinstance(answer.get("content"), list) else {"content": [answer.get("content_block")]}]
    elif api.text_key == "input":  # Responses
        response = answer.get("response") if isinstance(answer.get("response"), dict) else answer
        output = response.get("output") if isinstance(response, dict) else None
        items = output if isinstance(output, list) else [answer.get("item")]
    else:
        choices = answer.get("choices")
        items = [c.get("message") or c.get("delta") for c in choices if isinstance(c, dict)] if isinstance(
            choices, list) else []  # fmt: skip
    return called_tools(items)


class Calls:
    """The tools the model called in one answer (whole, or event by event), written to the recorder when the
    answer is over (:mod:`servers.record`): those of the request's ranked tools that ``tool_choice`` did not force."""

    def __init__(self, api: Api, plan: Plan, recorder: Recorder) -> None:
        self.api, self.plan, self.recorder = api, plan, recorder
        self.names: list[str] = []

    def see(self, data: bytes) -> bool:
        """One event's data (or the whole answer): its calls kept; always True (every event is read)."""
        try:
            self.names += answer_calls(self.api, msgspec.json.decode(data))
        except msgspec.DecodeError:  # ([DONE], a comment)
            pass
        return True

    def end(self) -> None:
        plan = self.plan
        assert plan.ready is not None and plan.ready.search is not None and plan.text is not None
        # a call that leaves its namespace out names the function when one namespace alone has it
        called = [n for n in plan.ready.resolve(self.names, unique=True) if n not in plan.pinned]
        if called:
            self.recorder.write(plan.text, called, plan.shown, plan.k, plan.ready.search.policy.method,
                                api=self.api.name)  # fmt: skip


async def _then(chunks: AsyncIterator[bytes], end: Callable[[], None]) -> AsyncIterator[bytes]:
    """``chunks`` relayed; ``end()`` once they are all relayed (not when the client leaves first)."""
    async for chunk in chunks:
        yield chunk
    end()


def _shortlisted(top: dict[str, msgspec.Raw], items: list[msgspec.Raw], ready: Prepared, chosen: list[int]) -> tuple[
        bytes, int]:  # fmt: skip
    """The body to send, the request's own bytes but for ``tools``, and how many tools it holds: the kept tools (and
    the namespaces that keep one) first, in the list's order, then the ``chosen`` ranked tools (the searcher's
    indices) in rank order, each namespace's at the place of its first and inside it."""
    inside: dict[int, list[int]] = {}  # the chosen functions of each namespace, in rank order
    order = sorted([*ready.kept, *(i for i, ns in ready.namespaces.items() if ns.kept)])
    placed = set(order)
    for r in chosen:
        i, j = ready.ranked[r]
        if j is not None:
            inside.setdefault(i, []).append(j)
        if i not in placed:
            order.append(i)
            placed.add(i)
    parts, sent = [], 0
    for i in order:
        namespace = ready.namespaces.get(i)
        if namespace is None:
            parts.append(bytes(items[i]))
            sent += ready.sizes[i]
        else:
            parts.append(namespace.encoded(inside.get(i, [])))
            sent += len(namespace.kept) + len(inside.get(i, []))
    return ENCODER.encode({**top, "tools": msgspec.Raw(b"[" + b",".join(parts) + b"]")}), sent


class Shortlister:
    """The tool search's scorer and policy on each request's tools (one prepared searcher per distinct tool list,
    keyed by the sha256 of the list's bytes as sent)."""

    def __init__(
        self,
        base: ToolSearch | SearchSpec,
        config: ProxyConfig,
        on_registry: Callable[[list[dict[str, Any]]], None] | None = None,
    ) -> None:
        """``on_registry``: called with the ranked tools (MCP dicts) of each tool list prepared."""
        self.spec = base.spec if isinstance(base, ToolSearch) else base
        self.config = config
        self.on_registry = on_registry
        self._prepared: OrderedDict[str, Prepared] = OrderedDict()
        self._texts: OrderedDict[str, str] = OrderedDict()

    def reload(self, search: ToolSearch) -> None:
        """Serve ``search``'s scorer and policy from the next request on (:mod:`servers.reload`): every tool list is
        prepared anew; a request being shortlisted finishes with the searcher it has."""
        self.spec = search.spec
        self._prepared.clear()

    def remember(self, response_id: str, text: str) -> None:
        """Keep the user text a Responses API answer's request was shortlisted on, by the answer's id."""
        self._texts[response_id] = text
        self._texts.move_to_end(response_id)
        while len(self._texts) > self.config.responses_kept:
            self._texts.popitem(last=False)

    def recall(self, previous: object) -> str | None:
        """The text kept for ``previous`` (a ``previous_response_id``), else None."""
        return self._texts.get(previous) if isinstance(previous, str) else None

    def prepared(self, tools: msgspec.Raw, items: list[msgspec.Raw], api: Api = CHAT) -> Prepared:
        """The searcher of a tool list (``tools``, its raw JSON; ``items``, each tool's), prepared once per distinct
        list and family: only then are the tools parsed. The tools ``api``'s family ranks (:meth:`Api.ranks`) are
        ranked; any other tool is kept."""
        key = f"{api.family}:{hashlib.sha256(tools).hexdigest()}"  # (the family says which tools are ranked)
        if key in self._prepared:
            self._prepared.move_to_end(key)
            return self._prepared[key]
        parsed = [msgspec.json.decode(item) for item in items]
        ranked: list[tuple[int, int | None]] = []
        readable: list[tuple[str, object]] = []  # (where, the tool as parse_tool reads it), in ranked's order
        kept: list[int] = []
        namespaces: dict[int, Namespace] = {}
        bare: dict[str, list[str]] = {}
        sizes: list[int] = []
        for i, tool in enumerate(parsed):
            inner = _namespaced(items[i], tool, api)
            if inner is not None:  # its functions ranked among the others, each by its qualified name
                name, namespace, fns = inner
                for j, fn in enumerate(fns):
                    if not api.ranks(fn):
                        namespace.kept.append(j)
                        continue
                    assert isinstance(fn, dict)
                    own = fn.get("name")
                    ranked.append((i, j))
                    readable.append((f"tools[{i}].tools[{j}]", {**fn, "name": qualified(own, name),
                                                                "description": in_namespace(fn, tool)}))  # fmt: skip
                    if isinstance(own, str):
                        bare.setdefault(own, []).append(str(qualified(own, name)))
                namespaces[i] = namespace
            elif api.ranks(tool):
                ranked.append((i, None))
                readable.append((f"tools[{i}]", tool))  # (as the library reads it: Anthropic's input_schema too)
            else:
                kept.append(i)
            inside = tool.get("tools") if isinstance(tool, dict) and tool.get("type") == "namespace" else None
            sizes.append(len(inside) if isinstance(inside, list) else 1)  # (a namespace counts its tools)
        search = None
        if ranked:  # a malformed or repeated tool named by where it is in the request
            search = self.spec.over_parsed(_checked_tools(readable))
            if self.on_registry is not None:
                self.on_registry([{"name": t.name, "description": t.description, "inputSchema": t.parameters}
                                  for t in search.tools])  # fmt: skip
        prepared = Prepared(search, ranked, kept, namespaces, bare, sizes)
        self._prepared[key] = prepared
        while len(self._prepared) > self.config.registries_kept:
            self._prepared.popitem(last=False)
        return prepared

    def plan(self, raw: bytes, top: dict[str, msgspec.Raw], api: Api = CHAT) -> Plan:
        """The body to send for one request of ``api``, and its headers (module docstring): the request's own bytes
        but for ``tools``, which holds the kept tools' and the chosen tools' own bytes, in rank order."""
        try:
            items = ITEMS.decode(top["tools"]) if "tools" in top else []
        except msgspec.ValidationError:  # not a list: not ours to judge
            items = []
        if not items:
            return Plan(raw, {"x-shortlist-fallback": "no tools"})
        conversation = _value(top.get(api.text_key))
        text, said = api.text(conversation), {}
        if text is None and api.text_key == "input":  # a tool's output continuing a response: its request's text
            text = self.recall(_value(top.get("previous_response_id")))
            said = {"x-shortlist-text": "previous response"} if text is not None else {}
        if text is None:
            LOG.info("%s request with %d tools and no user text: all tools forwarded", api.name, len(items))
            return Plan(raw, {"x-shortlist-fallback": "no user text"})
        try:
            ready = self.prepared(top["tools"], items, api)
            if ready.search is None:
                return Plan(raw, {"x-shortlist-fallback": api.no_tools})
            search = ready.search
            # a tool_choice names a function by its own name: a namespace's function with that name when no
            # top-level one has it (pinning more than it meant never sends less than the model may be forced to call)
            pinned = ready.resolve(api.pins(_value(top.get("tool_choice"))))
            shortlist = search.search(text, min_k=self.config.min_k, max_k=self.config.max_k, pinned=pinned)
            if shortlist.why["tied"]:  # the text ranks nothing (no word of it in any tool): nothing to improve
                LOG.info("%s request with %d tools whose text scores every tool alike: all tools forwarded",
                         api.name, len(items))  # fmt: skip
                return Plan(raw, {"x-shortlist-fallback": FALLBACK_TIED})
            # a tool in use that the shortlist left out goes at its end: the list's order, and so a provider's
            # prompt cache, stays as it was when the shortlist holds it already (the usual case in a tool loop)
            missing = [n for n in ready.resolve(called_tools(conversation)) if n not in shortlist.names]
        except Exception as e:  # the request is never dropped: it goes with every tool
            LOG.warning("searcher failed on a %s request with %d tools, all forwarded: %s: %s", api.name, len(items),
                        type(e).__name__, e)  # fmt: skip
            return Plan(raw, {"x-shortlist-fallback": f"searcher error: {type(e).__name__}"})
        body, sent = _shortlisted(top, items, ready, [search.index[n] for n in [*shortlist.names, *missing]])
        headers = {
            "x-shortlist-k": str(shortlist.k),
            "x-shortlist-tools": f"{sent}/{sum(ready.sizes)}",
            "x-shortlist-policy": search.policy.method,
            **said,
        }
        return Plan(body, headers, text, ready, (*shortlist.names, *missing), tuple(pinned), shortlist.k)


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

    def __init__(self, base: ToolSearch | SearchSpec, config: ProxyConfig, recorder: Recorder | None = None) -> None:
        self.config = config
        self.recorder = recorder
        self.shortlister = Shortlister(base, config, None if recorder is None else recorder.registry)
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
            watching = None
            if self.config.reload is not None:
                from servers.reload import SearcherWatch

                async def apply(search: ToolSearch) -> None:
                    self.shortlister.reload(search)

                watch = SearcherWatch(self.config.reload, apply, self.config.cache_dir,
                                      since=self.config.reload_since, registry=False)  # fmt: skip
                watching = asyncio.get_running_loop().create_task(watch.run())
            try:
                yield
            finally:
                if watching is not None:
                    watching.cancel()
        self.client = None
        if self.recorder is not None:  # (uvicorn re-raises a stopping signal once shut down: the last moment)
            self.recorder.close()

    async def health(self, request: Request) -> Response:
        """``GET /healthz``: 200 once started, and what is served (:func:`servers.health`)."""
        spec = self.shortlister.spec
        return JSONResponse(health("shortlist serve openai", spec.scorer, spec.policy, None))

    def endpoint(self, api: Api) -> Callable[[Request], Awaitable[Response]]:
        """The route handler of ``api``'s path: :meth:`shortlisted` with ``api``."""

        async def handle(request: Request) -> Response:
            return await self.shortlisted(request, api)

        return handle

    async def shortlisted(self, request: Request, api: Api) -> Response:
        """A request of ``api`` forwarded with the shortlist of its tools (module docstring)."""
        raw = await self.body(request, api)
        if isinstance(raw, Response):
            return raw
        t0 = time.perf_counter()  # the proxy's own time starts with the whole body in hand
        try:
            top = TOP_LEVEL.decode(raw)
        except msgspec.ValidationError as e:
            return api.error(400, f"the request body must be a JSON object ({e})", "invalid_json")
        except msgspec.DecodeError as e:
            return api.error(400, f"the request body is not JSON ({e})", "invalid_json")
        plan = self.shortlister.plan(raw, top, api)  # on the event loop: a BM25 search costs about a millisecond
        said = ", ".join(f"{k[12:]}={v}" for k, v in plan.headers.items())
        LOG.info("%s request: %s (%.1f ms in the proxy)", api.name, said, 1e3 * (time.perf_counter() - t0))
        stream = _value(top.get("stream")) is True
        seen_id = None
        if api is RESPONSES and plan.text is not None:  # its answer's id keeps the text for a request continuing it
            seen_id = partial(self.shortlister.remember, text=plan.text)
        calls = None
        if self.recorder is not None and plan.search is not None and api in RECORDED:
            calls = Calls(api, plan, self.recorder)
        return await self.forward(request, api.path, plan.body, plan.headers, stream, t0, seen_id, api, calls)

    async def passthrough(self, request: Request) -> Response:
        """Any other path under ``/v1``: forwarded unchanged."""
        path = request.path_params["path"]
        anthropic = path.startswith("messages") or "anthropic-version" in request.headers  # (every Anthropic client's)
        api = MESSAGES if anthropic else CHAT  # (the shape of the proxy's own errors)
        raw = await self.body(request, api)
        if isinstance(raw, Response):
            return raw
        return await self.forward(request, "/" + path, raw, {}, stream=False, api=api)

    async def body(self, request: Request, api: Api = CHAT) -> bytes | Response:
        """The request's body, or the answer that ends it: 499 when the client left, 413 over the size limit."""
        try:
            raw = await read_body(request, self.config.max_body_bytes)
        except ClientDisconnect:
            return Response(status_code=499)
        if raw is None:
            return api.error(413, f"request body over the proxy's limit of {self.config.max_body_bytes} bytes",
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
        seen_id: Callable[[str], None] | None = None,
        api: Api = CHAT,
        calls: Calls | None = None,
    ) -> Response:
        """Send ``content`` to the upstream's ``path``; its answer relayed (streamed when ``stream``). With ``since``
        (``time.perf_counter()`` when the proxy's own work on the request began), the answer carries
        ``server-timing: shortlist;dur=<ms>``: the proxy's own time, that work up to the upstream call plus its
        work on the upstream's answer (not the waits for the upstream). With ``seen_id``, the id of a successful
        Responses API answer (its JSON's ``id``, or the first event's ``response.id`` when streamed) goes to it.
        With ``calls``, a successful answer's tool calls are read (every event of a stream) and recorded once it is
        whole. An answer read here is asked for uncompressed (``accept-encoding: identity``): the client's
        ``accept-encoding`` would let the upstream send gzip, which the proxy relays as it comes."""
        assert self.client is not None, "the proxy's lifespan has not started"
        headers = _forwarded(request.headers)
        if seen_id is not None or calls is not None:  # the answer is read here too: not compressed
            headers = {k: v for k, v in headers.items() if k.lower() != "accept-encoding"} | {
                "accept-encoding": "identity"
            }
        sent = self.client.build_request(request.method, path, content=content, headers=headers,
                                         params=str(request.query_params))  # fmt: skip
        before = 0.0 if since is None else time.perf_counter() - since
        try:
            resp = await self.client.send(sent, stream=True)
        except httpx.TimeoutException:
            return api.error(504, f"the upstream did not answer within {self.config.timeout:g} s", "upstream_timeout")
        except httpx.HTTPError as e:
            return api.error(502, f"the upstream cannot be reached ({type(e).__name__})", "upstream_unreachable")
        if stream:
            t1 = time.perf_counter()
            headers = self._answer_headers(resp, extra, since, before, t1)
            closing = BackgroundTask(resp.aclose)
            chunks = resp.aiter_raw()
            if resp.status_code == 200 and (seen_id is not None or calls is not None):
                sees = [_first_id(seen_id)] if seen_id is not None else []
                chunks = _watching(chunks, sees + ([calls.see] if calls is not None else []))
                if calls is not None:
                    chunks = _then(chunks, calls.end)
            return StreamingResponse(chunks, resp.status_code, headers, background=closing)
        try:
            data = b"".join([chunk async for chunk in resp.aiter_raw()])
        except httpx.TimeoutException:
            return api.error(504, f"the upstream did not finish its answer within {self.config.timeout:g} s",
                             "upstream_timeout")  # fmt: skip
        except httpx.HTTPError as e:
            return api.error(502, f"the upstream's answer broke off ({type(e).__name__})", "upstream_unreachable")
        finally:
            await resp.aclose()
        if seen_id is not None and resp.status_code == 200:
            response_id = _value(_top_level(data).get("id"))
            if isinstance(response_id, str):
                seen_id(response_id)
        if calls is not None and resp.status_code == 200:
            calls.see(data)
            calls.end()
        return Response(data, resp.status_code, self._answer_headers(resp, extra, since, before, time.perf_counter()))

    @staticmethod
    def _answer_headers(
        resp: httpx.Response, extra: dict[str, str], since: float | None, before: float, t1: float
    ) -> dict[str, str]:
        """The upstream's headers (hop-by-hop ones and :data:`OWN_ANSWER_HEADERS` aside), the proxy's ``extra`` and,
        when timed, its own time."""
        relayed = {k: v for k, v in _forwarded(resp.headers).items() if k.lower() not in OWN_ANSWER_HEADERS}
        headers = {**relayed, **extra}
        if since is not None:
            own = before + time.perf_counter() - t1
            headers["server-timing"] = f"{SERVER_TIMING};dur={1e3 * own:.2f}"
        return headers


def create_app(searcher: ToolSearch | SearchSpec, config: ProxyConfig, recorder: Recorder | None = None) -> Starlette:
    """The proxy as an ASGI app (run it with uvicorn; :func:`serve`): ``searcher`` gives the scorer and policy (a
    saved searcher's, or :meth:`shortlist_depth.SearchSpec.create`'s defaults); with a ``recorder``, each answer's
    tool calls are written with the request they answer."""
    proxy = Proxy(searcher, config, recorder)
    routes = [
        Route(HEALTH_PATH, proxy.health, methods=["GET", "HEAD"]),
        *(Route(f"/v1{api.path}", proxy.endpoint(api), methods=["POST"]) for api in SHORTLISTED),
        Route("/v1/{path:path}", proxy.passthrough, methods=METHODS),
    ]
    return Starlette(routes=routes, lifespan=proxy.lifespan)


def serve(
    searcher: ToolSearch | SearchSpec, config: ProxyConfig, listener: Listener, recorder: Recorder | None = None
) -> None:
    """Run the proxy on ``listener`` (:func:`servers.listen.bind`) until interrupted; once it answers, it logs
    ``shortlist serve openai listening on http://host:port/v1``."""
    LOG.info("shortlist proxy: %r in front of %s", searcher, redact_url(config.upstream))
    # a client's idle connection is kept 75 s (nginx's default), not uvicorn's 5: on a saturated event loop the
    # keep-alive timer can fire in the same turn as the client's next request arrives, closing it unread
    listen.run(create_app(searcher, config, recorder), listener, "/v1", "shortlist serve openai", log_level="info",
               timeout_keep_alive=75)  # fmt: skip
