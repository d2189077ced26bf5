"""Where the HTTP servers listen (:mod:`servers.listen`): ``--port 0`` takes a free port and the log line names it,
once the server answers; a port in use, out of range or on another machine's address is a one-line error before
the searcher loads. (The servers started as processes with ``--port 0`` are in ``test_servers_openai.py``,
``test_servers_mcp.py`` and ``test_servers_defaults.py``.)"""

from __future__ import annotations

import errno
import logging
import re
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
from conftest import REPO
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route

from experiments.cli import main
from experiments.options import SERVE_MODULES
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
def test_the_port_is_closed_when_the_searcher_fails(
    server: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    made: list[listen.Listener] = []

    def recording(host: str, port: int) -> listen.Listener:
        made.append(bind(host, port))
        return made[-1]

    monkeypatch.setattr(listen, "bind", recording)  # (the CLI imports it when it serves)
    assert main([*SERVE[server], "--port", "0"]) == 2
    assert "/nonexistent/searcher" in capsys.readouterr().err
    (listener,) = made
    assert listener.sockets and all(s.fileno() == -1 for s in listener.sockets)  # closed, not left to the collector


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


V4, V6 = socket.AF_INET, socket.AF_INET6


def resolving(monkeypatch: pytest.MonkeyPatch, *addresses: tuple[socket.AddressFamily, str]) -> None:
    """``getaddrinfo`` in :mod:`servers.listen` resolving any host to ``addresses`` (family, ip), in order."""

    def fake(host: str, port: int, *args: object, **kw: object) -> list[tuple]:
        return [(f, socket.SOCK_STREAM, 6, "", (ip, port) if f == V4 else (ip, port, 0, 0)) for f, ip in addresses]

    monkeypatch.setattr(listen.socket, "getaddrinfo", fake)


def failing(monkeypatch: pytest.MonkeyPatch, create: int | None = None, bind_on: str | None = None) -> list[str]:
    """``socket.socket`` failing to create a socket of family ``create`` (EAFNOSUPPORT: a kernel without it), and
    failing once to bind on ``bind_on`` (EADDRINUSE); returns the addresses bound, in order."""
    real, binds = socket.socket, []

    class Failing(real):  # type: ignore[misc,valid-type]
        def __init__(self, family: int = -1, *a: object, **kw: object) -> None:
            if family == create:
                raise OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")
            super().__init__(family, *a, **kw)

        def bind(self, address: tuple) -> None:
            binds.append(address[0])
            if address[0] == bind_on and binds.count(bind_on) == 1:
                raise OSError(errno.EADDRINUSE, "Address already in use")
            super().bind(address)

    monkeypatch.setattr(socket, "socket", Failing)
    return binds


def test_port_0_binds_one_free_port_on_every_address_of_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    with bind("localhost", 0) as listener:
        assert listener.port > 0 and listener.url("/v1") == f"http://localhost:{listener.port}/v1"
        with pytest.raises(ValueError, match=f"--port {listener.port}: localhost:{listener.port} is in use"):
            bind("localhost", listener.port)
    assert listen.Listener("::1", 8080, []).url("/mcp") == "http://[::1]:8080/mcp"
    with bind() as listener:  # the default: loopback only
        assert [s.getsockname()[0] for s in listener.sockets] == ["127.0.0.1"] and listener.exposed == []
    for empty in ("", " "):  # never read as every interface
        with pytest.raises(ValueError, match=r"--host '\s*': give an address \(127\.0\.0\.1, the default"):
            bind(empty, 0)
    with bind("0.0.0.0", 0) as listener:  # every interface: only when asked by address
        assert [s.getsockname()[:2] for s in listener.sockets] == [("0.0.0.0", listener.port)]
        assert listener.url() == f"http://0.0.0.0:{listener.port}"
    resolving(monkeypatch, (V4, "127.0.0.1"), (V4, "127.0.0.2"))  # two addresses (Linux: all of 127/8 is local)
    with bind("two", 0) as listener:
        port = listener.port
        assert [s.getsockname() for s in listener.sockets] == [("127.0.0.1", port), ("127.0.0.2", port)]
        socket.create_connection(("127.0.0.2", port), timeout=5).close()  # listening already


def test_an_address_that_is_not_here_is_skipped_among_others(monkeypatch: pytest.MonkeyPatch) -> None:
    resolving(monkeypatch, (V4, "192.0.2.1"), (V4, "127.0.0.1"))  # an address of another machine
    with bind("some", 0) as listener:
        assert [s.getsockname()[0] for s in listener.sockets] == ["127.0.0.1"]
    resolving(monkeypatch, (V6, "::1"), (V4, "127.0.0.1"))  # localhost on a kernel without IPv6
    failing(monkeypatch, create=V6)
    with bind("localhost", 0) as listener:
        assert [s.getsockname()[0] for s in listener.sockets] == ["127.0.0.1"]
    resolving(monkeypatch, (V4, "192.0.2.1"))
    with pytest.raises(ValueError, match="--host none: not an address of this machine"):
        bind("none", 0)


def test_a_picked_port_taken_on_another_address_is_picked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    resolving(monkeypatch, (V4, "127.0.0.1"), (V4, "127.0.0.2"))
    binds = failing(monkeypatch, bind_on="127.0.0.2")
    with bind("two", 0) as listener:
        assert binds == ["127.0.0.1", "127.0.0.2", "127.0.0.1", "127.0.0.2"]  # the first pick given up, then kept
        assert {s.getsockname()[1] for s in listener.sockets} == {listener.port}
    port = listener.port  # free again
    binds = failing(monkeypatch, bind_on="127.0.0.2")  # a port asked for is never picked again
    with pytest.raises(ValueError, match=f"--port {port}: two:{port} is in use"):
        bind("two", port)
    assert binds == ["127.0.0.1", "127.0.0.2"]  # tried once


@pytest.mark.parametrize("host", [DEFAULT_HOST, "0.0.0.0"])
def test_the_announcement_comes_once_the_app_has_started_and_names_where_it_answers(
    host: str, caplog: pytest.LogCaptureFixture
) -> None:
    """And a server other machines may reach (``--host 0.0.0.0``: every interface) says so at once."""
    started = threading.Event()

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        time.sleep(0.3)  # a slow start (a model loading): the announcement must wait for it
        started.set()
        yield

    app = Starlette(routes=[Route("/v1/ping", lambda r: PlainTextResponse("pong"))], lifespan=lifespan)
    seen: list[tuple[int, str, bool]] = []

    class Spy(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append((record.levelno, record.getMessage(), started.is_set()))

    spy = Spy()
    listen.LOG.addHandler(spy)
    caplog.set_level(logging.INFO, logger=listen.LOG.name)
    try:
        with bind(host, 0) as listener:
            expected = [(logging.INFO, f"test server listening on {listener.url('/v1')}", True)]
            if host == "0.0.0.0":
                assert listener.exposed == ["0.0.0.0"]
                warned = (f"test server: {', '.join(listener.exposed)} may be reached from other machines, and the "
                          "server authenticates no one (the default --host 127.0.0.1 does not expose it)")  # fmt: skip
                expected.append((logging.WARNING, warned, True))
            else:
                assert listener.exposed == []
            server = listen.server(app, listener, "/v1", "test server", log_level="warning")
            thread = threading.Thread(target=server.run, args=(listener.sockets,), daemon=True)
            thread.start()
            deadline = time.monotonic() + 30
            while len(seen) < len(expected) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert seen == expected
            assert httpx.get(f"http://127.0.0.1:{listener.port}/v1/ping", timeout=10).text == "pong"
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
        with pytest.raises(RuntimeError, match="announced no URL within 0.2 s"):
            wait_announced(log, mute, seconds=0.2)
        # another program's line in the same log (an MCP upstream's), and the announcement half written
        log.write_text("upstream: listening on http://127.0.0.1:1/\nx servers.listen INFO s listening on http://127.0")
        with pytest.raises(RuntimeError, match="announced no URL"):
            wait_announced(log, mute, seconds=0.2)
        with log.open("a") as out:
            out.write(".0.1:7/mcp\n")
        assert wait_announced(log, mute, seconds=5) == "http://127.0.0.1:7/mcp"
    finally:
        mute.kill()
        mute.wait()


@pytest.mark.parametrize("gone", [("uvicorn",), ("mcp", "msgspec")])
def test_serve_without_the_serve_extra_names_what_is_missing(
    gone: tuple[str, ...], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    for module in gone:
        monkeypatch.setitem(sys.modules, module, None)  # find_spec: None, as when not installed
    assert main([*SERVE["openai"], "--port", "0"]) == 2
    assert capsys.readouterr().err.strip() == (
        "shortlist: error: shortlist serve needs the serve extra, pip install 'shortlist-depth[serve]' (not "
        f"installed: {', '.join(gone)})"
    )


def test_the_modules_checked_are_the_serve_extras_packages() -> None:
    import tomllib

    extras = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    packages = [re.split(r"[\[<>=!~ ]", spec, maxsplit=1)[0] for spec in extras["serve"]]
    assert tuple(packages) == SERVE_MODULES
