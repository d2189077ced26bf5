"""choosers.openai_api against a real local HTTP server on 127.0.0.1 speaking the
OpenAI chat-completions protocol: request shape, retries, cache hits, refusals, errors, secrets."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from choosers import ChoiceCache, ChooserError, Tool, make_chooser
from choosers.openai_api import OpenAIChooser, OpenAIOptions, openai_schema, wire_names
from servers.fakes import picked_tool

KEY_ENV = "SHORTLIST_TEST_LLM_KEY"
SECRET = "sk-test-SECRET-d41d8cd98f00b204"
#: The retry test's client timeout: the retry must be answered within it, so it leaves room for a machine busy
#: with other tests.
RETRY_TIMEOUT_S = 0.5
#: How long the fake server's "slow" answer waits: 4 times that timeout, so a busy machine cannot make it look fast.
SLOW_ANSWER_S = 4 * RETRY_TIMEOUT_S

TOOLS = [
    Tool("math.factorial", "Factorial of a number.", {"type": "dict", "properties": {"number": {"type": "integer"}}}),
    Tool(
        "calculate_triangle_area",
        "Area of a triangle.",
        {"type": "dict", "properties": {"base": {"type": "float"}, "height": {"type": "float"}}, "required": ["base"]},
    ),
    Tool("get_weather", "Weather in a city.", {"type": "dict", "properties": {"city": {"type": "string"}}}),
    Tool("math_factorial", "A clash with math.factorial once sanitised.", {}),
]


@dataclass
class FakeState:
    """What the fake server does and saw.

    Attributes:
        script: behaviours for the next requests, consumed in order (then the rule answers).
        requests: (path, headers, parsed body) of every request.
        delay: seconds each answer waits (to observe concurrency).
        in_flight: requests being handled now; max_in_flight: the most seen at once.
    """

    script: list[str] = field(default_factory=list)
    requests: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)
    delay: float = 0.0
    in_flight: int = 0
    max_in_flight: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(http.server.BaseHTTPRequestHandler):
    state: FakeState

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (signature)
        return

    def _send(self, code: int, body: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client timed out and left (the slow answer's purpose): nothing to print from this thread

    def do_POST(self) -> None:  # noqa: N802 (http.server API)
        st = self.state
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        with st.lock:
            st.requests.append((self.path, {k.lower(): v for k, v in self.headers.items()}, body))
            action = st.script.pop(0) if st.script else "ok"
            st.in_flight += 1
            st.max_in_flight = max(st.max_in_flight, st.in_flight)
        try:
            time.sleep(st.delay)
        finally:
            # counted until the answer is written, not after: once written, the client may send its next request,
            # and a count still held here would see one more in flight than the client ever had
            with st.lock:
                st.in_flight -= 1
        self._answer(action, body)

    def _answer(self, action: str, body: Any) -> None:
        if action == "429":
            return self._send(429, b'{"error": {"message": "rate limited"}}', {"Retry-After": "1"})
        if action == "500":
            return self._send(500, b"internal error")
        if action == "malformed":
            return self._send(200, b'{"choices": [ {"message": ')
        if action == "slow":
            time.sleep(SLOW_ANSWER_S)
        if action in ("401", "403"):
            msg = {"error": {"message": f"Incorrect API key provided: {SECRET}"}}  # servers do echo keys
            return self._send(int(action), json.dumps(msg).encode())
        if action == "404":
            return self._send(404, b'{"error": {"message": "The model does not exist"}}')
        if action == "400":
            return self._send(400, b'{"error": {"message": "Invalid schema for function\\nsecond line"}}')
        if self.path != "/v1/chat/completions":
            return self._send(404, b'{"error": {"message": "no such route"}}')
        message: dict[str, Any] = {"role": "assistant", "content": None}
        if action == "no_tool":
            message["content"] = "None of these tools fits."
        else:
            # the tool named in the request, else the one sharing most words with it: the package fake's stated rule
            name = "no_such_tool" if action == "unknown_tool" else picked_tool(body)
            message["tool_calls"] = [
                {"id": "call_1", "type": "function", "function": {"name": name, "arguments": "{}"}}
            ]
        answer = {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
            "usage": {"prompt_tokens": 11 * len(body["tools"]), "completion_tokens": 7},
        }
        return self._send(200, json.dumps(answer).encode())


class _JoiningServer(http.server.ThreadingHTTPServer):
    """Its ``server_close`` waits for every request's thread: a slow answer still being written after its test ended
    would run in the next test file of the same pytest worker. (Python 3.11 formats a thread's traceback with
    ``ast.parse``, whose recursion counter is shared between threads: a test parsing source at that moment failed
    with "AST constructor recursion depth mismatch", CPython gh-106905.)"""

    daemon_threads = False


@pytest.fixture
def server() -> Iterator[tuple[str, FakeState]]:
    """The fake OpenAI-compatible server: (base URL ending in /v1, its state)."""
    state = FakeState()
    handler = type("H", (_Handler,), {"state": state})
    httpd = _JoiningServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1", state
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


@pytest.fixture(autouse=True)
def _key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, SECRET)


def _chooser(url: str, cache: ChoiceCache | None = None, sleeps: list[float] | None = None, **kw: Any) -> OpenAIChooser:
    opts = {"api_key_env": KEY_ENV, "backoff_s": 0.01, "max_retries": 3, **kw}
    log = sleeps if sleeps is not None else []
    return OpenAIChooser(OpenAIOptions(url, "test-model", **opts), cache, sleep=log.append)


def test_request_shape(server: tuple[str, FakeState]) -> None:
    url, st = server
    with _chooser(url) as chooser:
        got = chooser.choose("compute math factorial of 5", TOOLS[:3])
    assert (got.index, got.status, got.name) == (0, "ok", "math.factorial")
    assert (got.prompt_tokens, got.completion_tokens) == (33, 7)
    path, headers, body = st.requests[0]
    assert path == "/v1/chat/completions"
    assert headers["authorization"] == f"Bearer {SECRET}"
    assert body["model"] == "test-model"
    assert body["temperature"] == 0
    assert body["tool_choice"] == "required" and body["parallel_tool_calls"] is False
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert body["messages"][1]["content"] == "compute math factorial of 5"
    assert [t["type"] for t in body["tools"]] == ["function"] * 3
    fns = [t["function"] for t in body["tools"]]
    assert [f["name"] for f in fns] == ["math_factorial", "calculate_triangle_area", "get_weather"]  # scorer order
    assert fns[1]["description"] == "Area of a triangle."
    assert fns[1]["parameters"] == {
        "type": "object",
        "properties": {"base": {"type": "number"}, "height": {"type": "number"}},
        "required": ["base"],
    }


def test_schema_and_name_conversion() -> None:
    assert openai_schema({}) == {"type": "object", "properties": {}}
    nested = {"type": "dict", "properties": {"xs": {"type": "array", "items": {"type": "tuple"}}, "o": {"type": "any"}}}
    assert openai_schema(nested)["properties"] == {
        "xs": {"type": "array", "items": {"type": "array"}},
        "o": {"type": "string"},
    }
    assert wire_names(TOOLS) == ["math_factorial", "calculate_triangle_area", "get_weather", "math_factorial_2"]
    assert wire_names([Tool("x" * 80, ""), Tool("x" * 80 + "y", "")]) == ["x" * 64, "x" * 62 + "_2"]


def test_clashing_names_map_back(server: tuple[str, FakeState]) -> None:
    url, _ = server
    with _chooser(url) as chooser:
        got = chooser.choose("use math_factorial_2 please", TOOLS)
    assert (got.index, got.name) == (3, "math_factorial")


def test_retries_honour_retry_after_then_succeed(server: tuple[str, FakeState]) -> None:
    url, st = server
    st.script = ["429", "500", "malformed"]
    sleeps: list[float] = []
    with _chooser(url, sleeps=sleeps) as chooser:
        got = chooser.choose("weather in paris", TOOLS[:3])
    assert got.name == "get_weather"
    assert len(st.requests) == 4
    assert sleeps == [1.0, 0.02, 0.04]  # Retry-After, then exponential backoff


def test_gives_up_after_retries_one_line(server: tuple[str, FakeState]) -> None:
    url, st = server
    st.script = ["500"] * 4
    with _chooser(url) as chooser, pytest.raises(ChooserError) as e:
        chooser.choose("weather in paris", TOOLS[:3])
    msg = str(e.value)
    assert "HTTP 500" in msg and "gave up after 4 attempts" in msg and "\n" not in msg
    assert len(st.requests) == 4


def test_retry_after_too_long_fails_at_once(server: tuple[str, FakeState]) -> None:
    url, st = server
    st.script = ["429"]
    with _chooser(url, max_retry_after_s=0.5) as chooser, pytest.raises(ChooserError, match="asks to wait 1 s"):
        chooser.choose("weather", TOOLS[:3])
    assert len(st.requests) == 1


def test_timeout_is_retried(server: tuple[str, FakeState]) -> None:
    url, st = server
    st.script = ["slow"]
    with _chooser(url, timeout_s=RETRY_TIMEOUT_S) as chooser:
        assert chooser.choose("weather in paris", TOOLS[:3]).name == "get_weather"
    assert len(st.requests) == 2


@pytest.mark.parametrize(
    ("action", "expected"),
    [
        ("401", f"HTTP 401: the key in {KEY_ENV} was refused"),
        ("403", "HTTP 403"),
        ("404", "no model 'test-model'"),
        ("400", "HTTP 400 for model 'test-model': Invalid schema for function second line"),
    ],
)
def test_http_errors_are_one_line(server: tuple[str, FakeState], action: str, expected: str) -> None:
    url, st = server
    st.script = [action]
    with _chooser(url) as chooser, pytest.raises(ChooserError) as e:
        chooser.choose("weather", TOOLS[:3])
    msg = str(e.value)
    assert expected in msg and "\n" not in msg and SECRET not in msg
    assert len(st.requests) == 1  # never retried


def test_unreachable_endpoint() -> None:
    with _chooser("http://127.0.0.1:9/v1", max_retries=1) as chooser, pytest.raises(ChooserError) as e:
        chooser.choose("weather", TOOLS[:3])
    assert "cannot reach the endpoint" in str(e.value) and "\n" not in str(e.value)


def test_missing_key_env(monkeypatch: pytest.MonkeyPatch, server: tuple[str, FakeState]) -> None:
    url, _ = server
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(ChooserError, match=f"environment variable {KEY_ENV}") as e:
        make_chooser("openai", base_url=url, model="m", api_key_env=KEY_ENV)
    assert "\n" not in str(e.value)
    no_key = make_chooser("openai", base_url=url, model="m", api_key_env="")  # a local server needing no key
    assert isinstance(no_key, OpenAIChooser)


def test_cache_second_run_makes_no_request(server: tuple[str, FakeState], tmp_path: Path) -> None:
    url, st = server
    cache = ChoiceCache(tmp_path / "choices")
    with _chooser(url, cache) as chooser:
        first = chooser.choose_prefixes("weather in paris", TOOLS, [1, 2, 3, 4])
    assert len(st.requests) == 4 and not any(c.cached for c in first.values())
    with _chooser(url, cache) as again:
        second = again.choose_prefixes("weather in paris", TOOLS, [4, 3, 2, 1])
        assert again.choose("weather in paris", TOOLS[:3]).cached
    assert len(st.requests) == 4  # zero new requests
    assert all(c.cached for c in second.values())
    assert {k: (c.index, c.status) for k, c in second.items()} == {k: (c.index, c.status) for k, c in first.items()}
    frame = cache.to_frame()
    assert sorted(frame["k"]) == [1, 2, 3, 4]
    assert set(frame["runtime"]) == {url} and set(frame["model"]) == {"test-model"}
    # a different setting is a different key: asked again
    with _chooser(url, cache, temperature=0.5) as warm:
        warm.choose("weather in paris", TOOLS[:2])
    assert len(st.requests) == 5


def test_refusal_is_recorded(server: tuple[str, FakeState], tmp_path: Path) -> None:
    url, st = server
    st.script = ["no_tool"]
    cache = ChoiceCache(tmp_path)
    with _chooser(url, cache) as chooser:
        got = chooser.choose("tell me a joke", TOOLS[:3])
        assert (got.index, got.status, got.name) == (None, "refused", None)
        assert "None of these tools fits." in got.raw
        assert chooser.choose("tell me a joke", TOOLS[:3]).status == "refused"  # cached
    assert len(st.requests) == 1


def test_unknown_tool_is_invalid_and_cache_is_intact(
    server: tuple[str, FakeState], tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    url, st = server
    cache = ChoiceCache(tmp_path)
    with _chooser(url, cache, max_concurrency=1) as chooser:
        chooser.choose_prefixes("weather in paris", TOOLS, [1, 2])
        before = {p: p.read_bytes() for p in tmp_path.rglob("*.json")}
        st.script = ["ok", "unknown_tool"]
        got = chooser.choose_prefixes("weather in paris", TOOLS, [1, 2, 3, 4])
    bad = got[4]
    assert (bad.index, bad.status, bad.name) == (None, "invalid", "no_such_tool")
    assert "'no_such_tool'" in bad.error and "weather in paris" in bad.error and "\n" not in bad.error
    assert any("no_such_tool" in r.getMessage() for r in caplog.records)
    assert {p: p.read_bytes() for p in before} == before  # earlier answers untouched
    assert len(list(tmp_path.rglob("*.json"))) == 4
    assert cache.to_frame().set_index("k").loc[4, "status"] == "invalid"


def test_error_mid_batch_keeps_earlier_answers(server: tuple[str, FakeState], tmp_path: Path) -> None:
    url, st = server
    cache = ChoiceCache(tmp_path)
    st.script = ["ok", "ok", "401"]
    with _chooser(url, cache, max_concurrency=1) as chooser, pytest.raises(ChooserError):
        chooser.choose_prefixes("weather in paris", TOOLS, [1, 2, 3, 4])
    assert sorted(cache.to_frame()["k"]) == [1, 2]
    with _chooser(url, cache) as resumed:  # the resumed run asks only for what is missing
        resumed.choose_prefixes("weather in paris", TOOLS, [1, 2, 3, 4])
    assert len(st.requests) == 3 + 2


def test_bounded_concurrency(server: tuple[str, FakeState], tmp_path: Path) -> None:
    url, st = server
    st.delay = 0.1
    ranked = [Tool(f"tool_{i}", f"Tool number {i}.", {}) for i in range(10)]
    with _chooser(url, ChoiceCache(tmp_path), max_concurrency=3) as chooser:
        got = chooser.choose_prefixes("use tool_7", ranked, range(1, 11))
    assert len(st.requests) == 10
    assert 1 < st.max_in_flight <= 3
    assert got[10].name == "tool_7" and got[8].name == "tool_7"


def test_key_never_written(server: tuple[str, FakeState], tmp_path: Path) -> None:
    url, st = server
    cache = ChoiceCache(tmp_path / "choices")
    with _chooser(url, cache) as chooser:
        chooser.choose_prefixes("weather in paris", TOOLS, [1, 2, 3])
        st.script = ["unknown_tool", "no_tool"]
        chooser.choose_prefixes("factorial", TOOLS, [1, 2])
        st.script = ["401"]
        with pytest.raises(ChooserError) as e:
            chooser.choose("anything", TOOLS[:2])
        assert SECRET not in str(e.value) and SECRET not in repr(chooser)
    (tmp_path / "frame.csv").write_text(cache.to_frame().to_csv())
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert len(files) >= 6
    for p in files:
        assert SECRET.encode() not in p.read_bytes(), p
