"""The tool search served where agents are: an MCP server (and proxy) and an OpenAI-compatible proxy.

Thin layers over :class:`shortlist_depth.ToolSearch` (a handler parses, calls the library, formats):

- :mod:`servers.mcp_server`: ``shortlist serve mcp``: a ``search_tools(query)`` tool (stdio or streamable HTTP);
  with upstream MCP servers it fronts them (``tools/list``: ``search_tools`` plus the pinned tools; ``tools/call``
  forwarded to the tool's server);
- :mod:`servers.upstreams`: those upstreams (a command over stdio, a streamable-HTTP URL, or the ``mcpServers`` of an
  MCP client's config file) and one registry over their tools;
- :mod:`servers.record`: ``serve mcp --record DIR``: each tool call written with the search it followed, the log
  ``shortlist recommend --log`` trains on;
- :mod:`servers.openai_proxy`: ``shortlist serve openai``: Chat Completions, Responses and Anthropic Messages
  requests forwarded to their upstream with only the shortlist of their ``tools``;
- :mod:`servers.listen`: where the HTTP servers listen (the port bound before anything loads; ``--port 0``; the
  ``listening on URL`` log line);
- :mod:`servers.fakes`: the fake upstreams the tests and ``shortlist bench`` run on 127.0.0.1.

Needs the ``serve`` extra (``pip install 'shortlist-depth[serve]'``: the MCP Python SDK, Starlette, uvicorn,
httpx, msgspec). Servers bind 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from agents.trained import TrainedPolicy

#: Where a server binds unless told otherwise.
DEFAULT_HOST = "127.0.0.1"
#: The metric name of the OpenAI proxy's own time in the ``server-timing`` header of a chat answer
#: (``shortlist;dur=<ms>``: :mod:`servers.openai_proxy`).
SERVER_TIMING = "shortlist"
#: The OpenAI proxy's ``x-shortlist-fallback`` for a request whose text scores every tool alike: sent with every
#: tool, no ``x-shortlist-k``, not recorded (:mod:`servers.openai_proxy`; ``shortlist bench`` expects it there).
FALLBACK_TIED = "tied scores"
#: Where each HTTP server answers ``GET`` (and ``HEAD``) once it has started: 200 and what it serves, a readiness
#: check for a load balancer or an orchestrator (never forwarded upstream; the OpenAI proxy forwards only ``/v1``).
HEALTH_PATH = "/healthz"
#: The files ``--record DIR`` writes (:mod:`servers.record`): the log ``shortlist recommend --log`` reads, and the
#: tools searched (``recommend --log DIR`` reads both).
RECORD_LOG = "log.jsonl"
RECORD_TOOLS = "tools.json"
#: Seconds an upstream MCP server has to connect (start and answer ``initialize``) and to answer a ``tools/list``,
#: by default (``npx -y`` may install a package first): ``shortlist serve mcp --upstream-timeout``.
CONNECT_TIMEOUT = 120.0


def health(server: str, scorer: str, policy: TrainedPolicy, tools: int | None) -> dict[str, object]:
    """The JSON a server answers at :data:`HEALTH_PATH`: ``status`` ok, the server, its scorer and policy (the
    method of the :class:`~agents.trained.TrainedPolicy` it serves), the number of tools it searches (None: each
    request brings its own), :func:`policy_id` and the kind ``auto`` chose (:func:`chosen_kind`; so two searchers
    ``recommend`` saved, both ``bor-auto``, are told apart after a ``--reload``)."""
    out: dict[str, object] = {"status": "ok", "server": server, "scorer": scorer, "policy": policy.method,
                              "tools": tools, "policy_id": policy_id(policy)}  # fmt: skip
    if chosen := chosen_kind(policy):
        out["chosen"] = chosen
    return out


def chosen_kind(policy: TrainedPolicy) -> str | None:
    """The kind an ``auto`` policy chose (None for any other policy)."""
    return getattr(policy.policy, "chosen", None) or None


def policy_id(policy: TrainedPolicy) -> str:
    """A short digest of a trained policy's method and config (what it was trained on, with which settings and
    seed): another training, another id."""
    import hashlib
    import json

    text = json.dumps({"method": policy.method, "config": policy.config}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def redact_url(url: str) -> str:
    """``url`` fit for a log line or an error message: its user info (``user:key@``) and its query and fragment
    (``?api-key=...``) shown as ``***``, so a credential written into a URL is never logged."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "<a URL that does not parse>"
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit((parts.scheme, f"***@{host}" if "@" in parts.netloc else host, parts.path,
                       "***" if parts.query else "", "***" if parts.fragment else ""))  # fmt: skip


def check_url(url: str, where: str, base: bool = False, shown: str | None = None) -> None:
    """ValueError naming ``where`` unless ``url`` is http(s) with a host and a valid port; with ``base`` (a base URL,
    as an OpenAI client's ``base_url``), also without a query or fragment. The message shows ``shown`` (default: the
    url; e.g. the url as a config file wrote it, before its ``${VAR}`` were read), :func:`redact_url`'d."""
    from urllib.parse import urlsplit

    said = redact_url(url if shown is None else shown)
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"{where} must be an http(s) URL with a host, got {said!r}")
    try:
        _ = parts.port  # (parsed on reading: out of range or not a number raises)
    except ValueError as e:
        raise ValueError(f"{where} {said!r}: {e}") from e
    if base and (parts.query or parts.fragment):
        raise ValueError(f"{where} is a base URL, as an OpenAI client's base_url: no query or fragment, got {said!r}")
