"""Chooser for any OpenAI-compatible chat-completions endpoint (forced single tool call).

Request (``POST <base_url>/chat/completions``)::

    {"model": M, "temperature": 0,
     "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": query}],
     "tools": [{"type": "function", "function": {"name": n, "description": d, "parameters": p}}, ...],
     "tool_choice": "required", "parallel_tool_calls": false}

with the shortlist in scorer order. Tool names are sent as the API allows them
(``[A-Za-z0-9_-]``, at most 64 characters: every other character becomes ``_``, e.g. BFCL's
``math.factorial`` -> ``math_factorial``; a clash within one shortlist gets ``_2``, ``_3``);
the answer is mapped back to the shortlist position by that name (or by the original name).
Parameter schemas are converted from BFCL's types to JSON schema types as BFCL's own OpenAI
handler does (``dict`` -> ``object``, ``float`` -> ``number``, ``tuple`` -> ``array``,
``any`` -> ``string``; :data:`TYPE_MAP`), recursively through ``properties`` and ``items``.

Answer: the first tool call's function name. No tool call = a refusal (``status="refused"``,
``index=None``); a name not in the shortlist = ``status="invalid"`` with a one-line error
naming the name and the query (logged as a warning and cached like any answer: at
temperature 0 the same request gives the same answer). Token counts come from ``usage``.

Failures: 429, 5xx, connection errors, timeouts and malformed bodies are retried with
exponential backoff (``backoff_s * 2**attempt``, at most ``max_backoff_s``; a ``Retry-After``
header, in seconds or as an HTTP date, replaces the backoff, and one longer than
``max_retry_after_s`` fails at once) up to ``max_retries`` times, then raise
:class:`~choosers.chooser.ChooserError`. 401/403 (key refused), 404 (no such endpoint
or model), 400 (naming the model) and other 4xx raise at once, as does a key variable that is
unset. Every error is one line, with the key's value redacted should a server echo it.

The key is read from the environment variable named by ``api_key_env`` (at construction) and
kept only in the HTTP client's headers: it is never logged, cached or written anywhere.

Why ``httpx`` rather than the official ``openai`` client: one small dependency (the ``openai``
package pulls in pydantic, jiter, distro ... and changes its surface often), explicit control
of timeouts and of the retry policy above (the official client retries on its own schedule,
which would hide the attempts the tests count), and the request is a plain JSON body that any
OpenAI-compatible server (vLLM, llama.cpp's server, Ollama, hosted APIs) accepts, easy to test
against the local HTTP server of ``tests/test_choosers_openai.py``.

Concurrency: :meth:`OpenAIChooser.choose_prefixes` sends the missing shortlists of one query
through a thread pool of ``max_concurrency`` workers sharing one ``httpx.Client``; each answer
is cached as it arrives, and when one request fails the answers already received are cached
before the error is raised.
"""

from __future__ import annotations

import email.utils
import json
import logging
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any

from choosers.choice_cache import ChoiceCache
from choosers.chooser import BaseChooser, Choice, ChooserError, Emit, Tool, digest_of

log = logging.getLogger(__name__)

TEMPLATE_VERSION = "openai-chat-v1"
SYSTEM_PROMPT = (
    "You route a user's request to a tool. Call exactly one of the available tools: the one that best "
    "serves the request. The arguments may be your best guess."
)
TYPE_MAP = {
    "dict": "object",
    "object": "object",
    "float": "number",
    "double": "number",
    "number": "number",
    "integer": "integer",
    "int": "integer",
    "long": "integer",
    "string": "string",
    "str": "string",
    "char": "string",
    "any": "string",
    "boolean": "boolean",
    "bool": "boolean",
    "array": "array",
    "list": "array",
    "tuple": "array",
}
"""BFCL (Gorilla) parameter types -> JSON schema types; an unknown type is sent unchanged."""

_NAME_OK = re.compile(r"[^A-Za-z0-9_-]")
MAX_NAME = 64


@dataclass(frozen=True)
class OpenAIOptions:
    """Settings of the OpenAI-compatible chooser.

    Attributes:
        base_url: the API root, e.g. ``http://127.0.0.1:8000/v1``; ``/chat/completions`` is appended.
        model: the model id sent as ``model`` (also the cache's model id).
        api_key_env: NAME of the environment variable holding the key (its value is never
            logged or written); "" for a server that needs no key (no Authorization header).
        temperature: sampling temperature (0: the study's setting).
        tool_choice: ``required`` forces exactly one call; ``auto`` lets the model decline.
        max_concurrency: requests in flight at once for one query's shortlists.
        timeout_s: seconds allowed for one HTTP request (connect, read, write).
        max_retries: retries after the first attempt for 429, 5xx, connection errors, timeouts
            and malformed bodies.
        backoff_s: first retry delay; doubled at each retry.
        max_backoff_s: cap of the exponential delay.
        max_retry_after_s: longest ``Retry-After`` honoured; a longer one fails at once.
        max_tokens: ``max_tokens`` of the request, or None to leave it to the server.
    """

    base_url: str
    model: str
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = 0.0
    tool_choice: str = "required"
    max_concurrency: int = 4
    timeout_s: float = 60.0
    max_retries: int = 5
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0
    max_retry_after_s: float = 120.0
    max_tokens: int | None = None

    def __post_init__(self) -> None:
        if not self.base_url.startswith(("http://", "https://")):
            raise ValueError(f"openai chooser: base_url must start with http:// or https://, got {self.base_url!r}")
        if not self.model:
            raise ValueError("openai chooser: model is empty")
        if self.tool_choice not in ("required", "auto"):
            raise ValueError(f"openai chooser: tool_choice must be 'required' or 'auto', got {self.tool_choice!r}")
        if self.max_concurrency < 1 or self.max_retries < 0 or self.timeout_s <= 0:
            raise ValueError("openai chooser: max_concurrency >= 1, max_retries >= 0 and timeout_s > 0 are required")


def openai_schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    """``schema`` with BFCL types mapped to JSON schema types (:data:`TYPE_MAP`), recursively.

    The top level is always an object schema (``{"type": "object", "properties": {}}`` when empty).
    """
    out = _convert(dict(schema))
    out["type"] = "object"
    out.setdefault("properties", {})
    return out


def _convert(node: dict[str, Any]) -> dict[str, Any]:
    out = dict(node)
    if isinstance(out.get("type"), str):
        out["type"] = TYPE_MAP.get(out["type"], out["type"])
    if isinstance(out.get("properties"), Mapping):
        out["properties"] = {
            k: _convert(dict(v)) if isinstance(v, Mapping) else v for k, v in out["properties"].items()
        }
    if isinstance(out.get("items"), Mapping):
        out["items"] = _convert(dict(out["items"]))
    return out


def wire_names(tools: Sequence[Tool]) -> list[str]:
    """The names sent for ``tools``: API-safe, at most 64 characters, unique within the list."""
    out: list[str] = []
    used: set[str] = set()
    for t in tools:
        base = _NAME_OK.sub("_", t.name)[:MAX_NAME] or "tool"
        name, n = base, 1
        while name in used:
            n += 1
            name = f"{base[: MAX_NAME - len(str(n)) - 1]}_{n}"
        used.add(name)
        out.append(name)
    return out


def openai_tools(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    """The ``tools`` array of a request for ``tools``, in order: each ``{"type": "function", "function": {name,
    description, parameters}}`` with its :func:`wire_names` name and its :func:`openai_schema` parameters."""
    return [
        {
            "type": "function",
            "function": {"name": n, "description": t.description, "parameters": openai_schema(t.parameters)},
        }
        for n, t in zip(wire_names(tools), tools, strict=True)
    ]


def tools_json(tools: Sequence[Tool]) -> str:
    """The ``tools`` array of :func:`openai_tools` as the request body carries it: httpx's JSON encoding
    (``json.dumps`` with ``ensure_ascii=False``, ``separators=(",", ":")``, ``allow_nan=False``), the bytes
    this chooser sends for them."""
    return json.dumps(openai_tools(tools), ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _one_line(text: str, limit: int = 200) -> str:
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def _retry_after(value: str | None) -> float | None:
    """Seconds of a ``Retry-After`` header (delta-seconds or HTTP date), None when absent or unreadable."""
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


class _Retryable(Exception):
    """A failed attempt that may succeed if tried again (message: why)."""

    def __init__(self, why: str, delay: float | None = None) -> None:
        super().__init__(why)
        self.delay = delay


class OpenAIChooser(BaseChooser):
    """The OpenAI-compatible chooser (see the module docstring)."""

    def __init__(
        self,
        options: OpenAIOptions,
        cache: ChoiceCache | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """Args:
        options: endpoint, model and request settings.
        cache: the choice cache (None: no caching).
        sleep: the delay function between retries (tests replace it).

        Raises:
            ChooserError: ``httpx`` is not installed, or the key variable is unset or empty.
        """
        super().__init__(cache)
        try:
            import httpx
        except ImportError as e:
            raise ChooserError("the openai chooser needs httpx: pip install 'shortlist-depth[llm]'") from e
        self.options = options
        self._sleep = sleep
        self._url = options.base_url.rstrip("/") + "/chat/completions"
        headers = {"Content-Type": "application/json"}
        self._secret = ""
        if options.api_key_env:
            key = os.environ.get(options.api_key_env, "")
            if not key.strip():
                raise ChooserError(
                    f"openai chooser: the environment variable {options.api_key_env} (named by api_key_env) "
                    f"is not set or empty; it must hold the API key for {options.base_url}"
                )
            self._secret = key.strip()
            headers["Authorization"] = f"Bearer {self._secret}"
        self._httpx = httpx
        self._client = httpx.Client(headers=headers, timeout=httpx.Timeout(options.timeout_s))

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()

    def __enter__(self) -> OpenAIChooser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"OpenAIChooser(base_url={self.options.base_url!r}, model={self.options.model!r})"

    @property
    def name(self) -> str:
        return f"openai-compatible {self.options.model} at {self.runtime_id}"

    @property
    def runtime_id(self) -> str:
        return self.options.base_url.rstrip("/")

    @property
    def model_id(self) -> str:
        return self.options.model

    def payload(self, query: str, tools: Sequence[Tool]) -> dict[str, Any]:
        """The JSON body sent for one shortlist."""
        body: dict[str, Any] = {
            "model": self.options.model,
            "messages": [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": query}],
            "tools": openai_tools(tools),
            "tool_choice": self.options.tool_choice,
            "parallel_tool_calls": False,
            "temperature": self.options.temperature,
        }
        if self.options.max_tokens is not None:
            body["max_tokens"] = self.options.max_tokens
        return body

    def request_digest(self, query: str, tools: Sequence[Tool]) -> str:
        return digest_of({"template": TEMPLATE_VERSION, "body": self.payload(query, tools)})

    def _redact(self, text: str) -> str:
        return text.replace(self._secret, "***") if self._secret else text

    def _fail(self, message: str) -> ChooserError:
        return ChooserError(self._redact(message))

    def _server_message(self, resp: Any) -> str:
        try:
            body = resp.json()
            err = body.get("error") if isinstance(body, dict) else None
            text = err.get("message", err) if isinstance(err, dict) else (err or body)
        except ValueError:
            text = resp.text
        return _one_line(self._redact(str(text))) or "no message"

    def _attempt(self, body: dict[str, Any]) -> dict[str, Any]:
        """One POST; the parsed body, or _Retryable / ChooserError."""
        httpx = self._httpx
        o = self.options
        try:
            resp = self._client.post(self._url, json=body)
        except httpx.TimeoutException as e:
            raise _Retryable(f"no answer within {o.timeout_s:g} s ({type(e).__name__})") from e
        except httpx.TransportError as e:
            raise _Retryable(f"cannot reach the endpoint ({type(e).__name__}: {_one_line(str(e), 120)})") from e
        code = resp.status_code
        if code == 200:
            try:
                parsed = resp.json()
                message = parsed["choices"][0]["message"]
                if not isinstance(message, dict):
                    raise TypeError("message is not an object")
            except (ValueError, KeyError, IndexError, TypeError) as e:
                raise _Retryable(f"malformed response body ({type(e).__name__})") from e
            return parsed
        if code == 429 or code >= 500:
            raise _Retryable(
                f"HTTP {code} ({self._server_message(resp)})", _retry_after(resp.headers.get("Retry-After"))
            )
        if code in (401, 403):
            where = f"the key in {o.api_key_env}" if o.api_key_env else "no key (api_key_env is empty)"
            raise self._fail(f"{self._url}: HTTP {code}: {where} was refused ({self._server_message(resp)})")
        if code == 404:
            raise self._fail(
                f"{self._url}: HTTP 404: no such endpoint, or no model {o.model!r} there ({self._server_message(resp)})"
            )
        if code == 400:
            raise self._fail(f"{self._url}: HTTP 400 for model {o.model!r}: {self._server_message(resp)}")
        raise self._fail(f"{self._url}: HTTP {code} for model {o.model!r}: {self._server_message(resp)}")

    def _post(self, body: dict[str, Any]) -> dict[str, Any]:
        """POST with retries (see the module docstring)."""
        o = self.options
        for attempt in range(o.max_retries + 1):
            try:
                return self._attempt(body)
            except _Retryable as r:
                if attempt == o.max_retries:
                    raise self._fail(
                        f"{self._url}: {r} (model {o.model!r}; gave up after {attempt + 1} attempts)"
                    ) from r
                delay = min(o.max_backoff_s, o.backoff_s * 2**attempt)
                if r.delay is not None:
                    if r.delay > o.max_retry_after_s:
                        raise self._fail(
                            f"{self._url}: {r}: the endpoint asks to wait {r.delay:.0f} s "
                            f"(more than max_retry_after_s={o.max_retry_after_s:g})"
                        ) from r
                    delay = r.delay
                log.info("%s: %s; retry %d of %d in %.2f s", self._url, r, attempt + 1, o.max_retries, delay)
                self._sleep(delay)
        raise AssertionError("unreachable")

    def _choose_one(self, query: str, tools: Sequence[Tool]) -> Choice:
        body = self._post(self.payload(query, tools))
        message = body["choices"][0]["message"]
        usage: dict[str, Any] = body["usage"] if isinstance(body.get("usage"), dict) else {}
        n_prompt = int(usage.get("prompt_tokens") or 0)
        n_completion = int(usage.get("completion_tokens") or 0)
        raw = self._redact(json.dumps(message, ensure_ascii=False, sort_keys=True))
        calls = message.get("tool_calls") or []
        first = calls[0] if isinstance(calls, list) and calls else None
        fn = first.get("function") if isinstance(first, dict) else None
        name = fn.get("name") if isinstance(fn, dict) else None
        if not isinstance(name, str) or not name:
            return Choice(None, "refused", None, raw, n_prompt, n_completion)
        positions = {n: i for i, n in enumerate(wire_names(tools))}
        for i, t in enumerate(tools):
            positions.setdefault(t.name, i)
        if name not in positions:
            error = _one_line(
                f"{self.options.model} named tool {name!r}, which is not in the shortlist of {len(tools)} "
                f"for query {query!r}",
                300,
            )
            log.warning("%s", error)
            return Choice(None, "invalid", name, raw, n_prompt, n_completion, error)
        index = positions[name]
        return Choice(index, "ok", tools[index].name, raw, n_prompt, n_completion)

    def _choose_missing(self, query: str, ranked_tools: Sequence[Tool], ks: list[int], emit: Emit) -> None:
        workers = min(self.options.max_concurrency, len(ks))
        if workers <= 1:
            super()._choose_missing(query, ranked_tools, ks, emit)
            return
        error: BaseException | None = None
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="chooser") as pool:
            pending: dict[Future[Choice], int] = {pool.submit(self._choose_one, query, ranked_tools[:k]): k for k in ks}
            while pending:
                done, _ = wait(pending, return_when=FIRST_EXCEPTION)
                for fut in done:
                    k = pending.pop(fut)
                    exc = fut.exception()
                    if exc is None:
                        emit(k, fut.result())
                    elif error is None:
                        error = exc
                if error is not None:
                    for fut in pending:
                        fut.cancel()
                    for fut in list(pending):  # keep the answers of requests already in flight
                        if not fut.cancelled() and fut.exception() is None:
                            emit(pending[fut], fut.result())
                    break
        if error is not None:
            raise error
