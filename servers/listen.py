"""Where an HTTP server listens: its port bound before anything loads, and one log line saying where it answers.

- :func:`bind`: listening sockets on ``host:port`` (every address ``host`` resolves to, one port; port 0: a free one the
  system picks), bound before the searcher loads, so a port in use is a one-line error at once, and a port
  asked as 0 is known. A refused bind is a :class:`ValueError` naming the flag.
- :func:`run` / :func:`serve`: uvicorn on those sockets; once it answers, the line
  ``<name> listening on http://<host>:<port><path>`` (logger ``servers.listen``, INFO), and a warning when an
  address other machines may reach is listened on (the servers authenticate no one).
- :func:`wait_announced`: the URL of that line in a server process's log (the tests and ``shortlist bench`` start
  servers with ``--port 0`` and read where they answer, so no port is guessed free and then taken by another).
"""

from __future__ import annotations

import errno
import ipaddress
import logging
import re
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from servers import DEFAULT_HOST

LOG = logging.getLogger(__name__)
#: The announcement's words before the URL, and the pattern :func:`wait_announced` reads it with: a whole line of
#: this module's logger (its name and level in the line, as the CLI's and the fakes' log formats write them), so
#: neither a line half written nor another program's line in the same log (an MCP upstream's) is read.
ANNOUNCED = "listening on"
_ANNOUNCED_URL = re.compile(rf"^.*{re.escape(__name__)} INFO .* {ANNOUNCED} (http://\S+)\n", re.M)
#: Connections a listening socket queues (uvicorn's default).
BACKLOG = 2048


@dataclass
class Listener:
    """Sockets listening on ``host``, all on ``port`` (the bound one), not yet served (:func:`serve` serves them)."""

    host: str
    port: int
    sockets: list[socket.socket]

    def url(self, path: str = "") -> str:
        """``http://host:port`` and ``path`` (an IPv6 address in brackets)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}{path}"

    @property
    def exposed(self) -> list[str]:
        """The addresses listened on that other machines may reach (not loopback), in order."""
        return [a for a in (s.getsockname()[0] for s in self.sockets) if not ipaddress.ip_address(a).is_loopback]

    def close(self) -> None:
        for s in self.sockets:
            s.close()

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def bind(host: str = DEFAULT_HOST, port: int = 0) -> Listener:
    """Bind and listen on ``port`` on every address ``host`` resolves to (127.0.0.1 unless given: every interface
    only when asked by address, ``0.0.0.0`` or ``::``; port 0: the system picks a free one, the same on each
    address), with ``SO_REUSEADDR`` and an IPv6 socket IPv6 only, as asyncio's ``create_server`` binds. When
    ``host`` has several addresses, one this machine cannot take (a family not enabled, like localhost's ``::1``
    without IPv6) is skipped; with port 0, a port the system picked that another address has in use is given up
    for another pick (up to :data:`PICKS` times).

    Raises:
        ValueError: the port is out of range (:func:`check_port`), in use or needs privileges, or ``host`` is
            empty (never read as every interface) or not an address here.
    """
    check_port(port)
    if not host.strip():
        raise ValueError(f"--host {host!r}: give an address ({DEFAULT_HOST}, the default; 0.0.0.0 for every interface)")
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise ValueError(f"--host {host}: cannot be resolved ({e.strerror})") from e
    addresses = list(dict.fromkeys((family, address) for family, _, _, _, address in infos))
    picks = 1
    while True:
        try:
            return Listener(host, *_bind_all(addresses, port))
        except OSError as e:
            if port == 0 and e.errno == errno.EADDRINUSE and picks < PICKS:
                picks += 1  # the system's pick on the first address is taken on another: pick again
                continue
            raise ValueError(_refused(host, port, e)) from e


#: How many times :func:`bind` lets the system pick a port (port 0) for a host of several addresses.
PICKS = 5
#: What a socket of one of several addresses may fail with and be skipped: the address or its family is not here.
_NOT_HERE = (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT, errno.EPROTONOSUPPORT)


def _bind_all(addresses: Sequence[tuple[int, tuple]], port: int) -> tuple[int, list[socket.socket]]:
    """The bound port and a listening socket on each address that is here, all on that port; OSError (every
    socket closed) when one fails otherwise or none is here."""
    bound: list[socket.socket] = []
    try:
        for family, address in addresses:
            try:
                s = socket.socket(family, socket.SOCK_STREAM)
            except OSError as e:
                if e.errno in _NOT_HERE and len(addresses) > 1:
                    continue
                raise
            try:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                if family == socket.AF_INET6:
                    s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                # the first socket's port (the system's choice when 0 was asked) for every other address
                s.bind((address[0], bound[0].getsockname()[1] if bound else port, *address[2:]))
                # listening at once: the port is held (a bound socket that does not listen can be bound again by
                # another with SO_REUSEADDR); a connection made before the server answers waits in the backlog
                s.listen(BACKLOG)
            except OSError as e:
                s.close()
                if e.errno in _NOT_HERE and len(addresses) > 1:
                    continue
                raise
            bound.append(s)
        if not bound:
            raise OSError(errno.EADDRNOTAVAIL, "no address of this machine")
    except OSError:
        for s in bound:
            s.close()
        raise
    return bound[0].getsockname()[1], bound


def check_port(port: int) -> None:
    """ValueError unless ``port`` is 0 (any free one) or a TCP port."""
    if not 0 <= port <= 65535:
        raise ValueError(f"--port must lie in 0..65535 (0: any free port), got {port}")


def _refused(host: str, port: int, e: OSError) -> str:
    if e.errno == errno.EADDRINUSE:
        return f"--port {port}: {host}:{port} is in use (another server?); give another, or --port 0 (any free one)"
    if e.errno == errno.EACCES:
        return (f"--port {port}: this user may not listen on {host}:{port} (ports below 1024 need privileges); give "
                "one of 1024 or more, or --port 0")  # fmt: skip
    if e.errno == errno.EADDRNOTAVAIL:
        return f"--host {host}: not an address of this machine"
    return f"--host {host} --port {port}: cannot listen there ({e.strerror or e})"


class _Announcing(uvicorn.Server):
    """uvicorn's server, logging where it answers once its startup (the app's lifespan included) is done."""

    def __init__(self, config: uvicorn.Config, listener: Listener, path: str, name: str) -> None:
        super().__init__(config)
        self.url, self.exposed, self.name = listener.url(path), listener.exposed, name

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and not self.should_exit:  # (a signal during the start: stopping, not answering)
            LOG.info("%s %s %s", self.name, ANNOUNCED, self.url)
            if self.exposed:
                where = ", ".join(self.exposed)
                LOG.warning("%s: %s may be reached from other machines, and the server authenticates no one (the "
                            "default --host 127.0.0.1 does not expose it)", self.name, where)  # fmt: skip


class _NoQuery(logging.Filter):
    """uvicorn's access log line with the request's query shown as ``***``: a client may put a key in it
    (``?key=...``), and no key is ever logged."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str) and "?" in args[2]:
            record.args = (*args[:2], args[2].partition("?")[0] + "?***", *args[3:])  # (client, method, path, ...)
        return True


def server(app: Any, listener: Listener, path: str, name: str, **config: Any) -> uvicorn.Server:
    """A uvicorn server of ``app`` for ``listener``'s sockets (``config``: more :class:`uvicorn.Config` settings),
    announcing ``listener.url(path)`` as ``name`` once it answers; start it with ``.serve(listener.sockets)`` or
    ``.run(listener.sockets)``. Its access log shows no query string (:class:`_NoQuery`)."""
    cfg = uvicorn.Config(app, host=listener.host, port=listener.port, **config)
    access = logging.getLogger("uvicorn.access")
    if not any(isinstance(f, _NoQuery) for f in access.filters):
        access.addFilter(_NoQuery())
    return _Announcing(cfg, listener, path, name)


async def serve(app: Any, listener: Listener, path: str, name: str, **config: Any) -> None:
    """Serve ``app`` on ``listener`` until interrupted, in the running event loop (:func:`server`)."""
    with listener:
        await server(app, listener, path, name, **config).serve(listener.sockets)


def run(app: Any, listener: Listener, path: str, name: str, **config: Any) -> None:
    """Serve ``app`` on ``listener`` until interrupted, in a fresh event loop (:func:`server`)."""
    with listener:
        server(app, listener, path, name, **config).run(listener.sockets)


def wait_announced(log: Path, proc: subprocess.Popen, seconds: float = 120) -> str:
    """The URL a server process announced in ``log`` (its output), once it has.

    Raises:
        RuntimeError: the process exited first, or nothing was announced within ``seconds`` (with the log's end).
    """
    deadline = time.monotonic() + seconds
    while True:
        exited = proc.poll() is not None  # read before the log, so the log read after holds all it wrote
        text = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
        found = _ANNOUNCED_URL.search(text)
        if found:
            return found.group(1)
        if exited:
            raise RuntimeError(f"{_argv(proc.args)} exited ({proc.returncode}) before listening: {text[-2000:]}")
        if time.monotonic() > deadline:
            raise RuntimeError(f"{_argv(proc.args)} announced no URL within {seconds:g} s: {text[-2000:]}")
        time.sleep(0.05)


def _argv(args: Any) -> str:
    return " ".join(map(str, args)) if isinstance(args, Sequence) and not isinstance(args, str) else str(args)


__all__: Sequence[str] = ["ANNOUNCED", "Listener", "bind", "check_port", "run", "serve", "server", "wait_announced"]
