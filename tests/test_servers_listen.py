"""Where the HTTP servers listen (:mod:`servers.listen`): ``--port 0`` takes a free port and the log line names it,
once the server answers; a port in use, out of range or on another machine's address is a one-line error before
the searcher loads. (The servers started as processes with ``--port 0`` are in ``test_servers_openai.py``,
``test_servers_mcp.py`` and ``test_servers_defaults.py``.)"""

from __future__ import annotations

import logging
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from experiments.cli import main
from servers import DEFAULT_HOST, listen
from servers.listen import bind, wait_announced


@pytest.fixture
def taken() -> Iterator[int]:
    """A port something listens on, for the test's length."""
    with socket.socket() as s:
        s.bind((DEFAULT_HOST, 0))
        s.listen()
        yield s.getsockname()[1]


SERVE = {
    # a searcher that does not exist: the port error must come first, before anything loads
    "openai": ["serve", "openai", "--upstream", "http://127.0.0.1:9/v1", "--searcher", "/nonexistent/searcher"],
    "mcp": ["serve", "mcp", "--transport", "http", "--searcher", "/nonexistent/searcher"],
}


@pytest.mark.parametrize("server", sorted(SERVE))
def test_a_port_in_use_is_a_one_line_error_before_the_searcher_loads(
    server: str, taken: int, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*SERVE[server], "--port", str(taken)]) == 2
    err = capsys.readouterr().err.strip()
    assert err == (f"shortlist: error: --port {taken}: 127.0.0.1:{taken} is in use (another server?); give another, "
                   "or --port 0 (any free one)")  # fmt: skip


@pytest.mark.parametrize("server", sorted(SERVE))
def test_a_free_port_is_released_when_the_searcher_fails(server: str, capsys: pytest.CaptureFixture[str]) -> None:
    with bind(DEFAULT_HOST, 0) as probe:
        port = probe.port
    assert main([*SERVE[server], "--port", str(port)]) == 2
    assert "/nonexistent/searcher" in capsys.readouterr().err
    with bind(DEFAULT_HOST, port):  # not left bound by the failed start
        pass


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--port", "70000"], "--port must lie in 0..65535 (0: any free port), got 70000"),
        (["--port", "-1"], "--port must lie in 0..65535 (0: any free port), got -1"),
        (["--host", "192.0.2.1", "--port", "0"], "--host 192.0.2.1: not an address of this machine"),
        (["--host", "no-such-host.invalid", "--port", "0"], "--host no-such-host.invalid: cannot be resolved"),
    ],
)
def test_an_impossible_address_is_a_one_line_error(
    flags: list[str], said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([*SERVE["openai"], *flags]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"shortlist: error: {said}") and "\n" not in err, err


def resolving(monkeypatch: pytest.MonkeyPatch, *ips: str) -> None:
    """``getaddrinfo`` in :mod:`servers.listen` resolving any host to ``ips`` (IPv4), in order."""

    def fake(host: str, port: int, *args: object, **kw: object) -> list[tuple]:
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in ips]

    monkeypatch.setattr(listen.socket, "getaddrinfo", fake)


def test_port_0_binds_one_free_port_on_every_address_of_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    with bind("localhost", 0) as listener:
        assert listener.port > 0 and listener.url("/v1") == f"http://localhost:{listener.port}/v1"
        with pytest.raises(ValueError, match=f"--port {listener.port}: localhost:{listener.port} is in use"):
            bind("localhost", listener.port)
    assert listen.Listener("::1", 8080, []).url("/mcp") == "http://[::1]:8080/mcp"
    resolving(monkeypatch, "127.0.0.1", "127.0.0.2")  # a host of two addresses (Linux: all of 127/8 is local)
    with bind("two", 0) as listener:
        port = listener.port
        assert [s.getsockname() for s in listener.sockets] == [("127.0.0.1", port), ("127.0.0.2", port)]
        socket.create_connection(("127.0.0.2", port), timeout=5).close()  # listening already
    resolving(monkeypatch, "192.0.2.1", "127.0.0.1")  # an address not here among others: skipped, as asyncio does
    with bind("some", 0) as listener:
        assert [s.getsockname()[0] for s in listener.sockets] == ["127.0.0.1"]
    resolving(monkeypatch, "192.0.2.1")
    with pytest.raises(ValueError, match="--host none: not an address of this machine"):
        bind("none", 0)


def test_the_announcement_comes_once_the_app_has_started_and_names_where_it_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    started = threading.Event()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        time.sleep(0.3)  # a slow start (a model loading): the announcement must wait for it
        started.set()
        yield

    app = Starlette(routes=[Route("/v1/ping", lambda r: PlainTextResponse("pong"))], lifespan=lifespan)
    seen: list[tuple[str, bool]] = []

    class Spy(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append((record.getMessage(), started.is_set()))

    spy = Spy()
    listen.LOG.addHandler(spy)
    caplog.set_level(logging.INFO, logger=listen.LOG.name)
    try:
        with bind(DEFAULT_HOST, 0) as listener:
            server = listen.server(app, listener, "/v1", "test server", log_level="warning")
            thread = threading.Thread(target=server.run, args=(listener.sockets,), daemon=True)
            thread.start()
            deadline = time.monotonic() + 30
            while not seen and time.monotonic() < deadline:
                time.sleep(0.01)
            assert seen == [(f"test server listening on http://127.0.0.1:{listener.port}/v1", True)]
            url = seen[0][0].split()[-1]
            assert httpx.get(f"{url}/ping", timeout=10).text == "pong"
            server.should_exit = True
            thread.join(timeout=30)
    finally:
        listen.LOG.removeHandler(spy)


def test_wait_announced_reads_the_url_or_says_why_there_is_none(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    speak = "import sys, time; print('x servers.listen INFO fake listening on http://127.0.0.1:5/v1', flush=True); " \
            "time.sleep(30)"  # fmt: skip
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-c", speak], stdout=out, stderr=subprocess.STDOUT)
    try:
        assert wait_announced(log, proc, seconds=30) == "http://127.0.0.1:5/v1"
    finally:
        proc.kill()
        proc.wait()
    with log.open("w") as out:
        dead = subprocess.Popen([sys.executable, "-c", "print('boom'); raise SystemExit(3)"], stdout=out)
    dead.wait()
    with pytest.raises(RuntimeError, match=r"exited \(3\) before listening: boom"):
        wait_announced(log, dead)
    with log.open("w") as out:
        mute = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"], stdout=out)
    try:
        with pytest.raises(RuntimeError, match="announced no URL within 0 s"):
            wait_announced(log, mute, seconds=0.2)
    finally:
        mute.kill()
        mute.wait()


def test_serve_without_the_serve_extra_says_which_install_is_missing(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delitem(sys.modules, "servers.listen")
    monkeypatch.setitem(sys.modules, "uvicorn", None)  # import uvicorn: ModuleNotFoundError, as when not installed
    assert main([*SERVE["openai"], "--port", "0"]) == 2
    assert capsys.readouterr().err.strip() == (
        "shortlist: error: shortlist serve needs the serve extra, pip install 'shortlist-depth[serve]' (uvicorn is "
        "not installed)"
    )
