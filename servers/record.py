"""What ``shortlist serve mcp --record DIR`` and ``shortlist serve openai --record DIR`` write: the log a policy is
trained on, from the agent's own traffic.

Each line of ``DIR/log.jsonl`` is one request and the tools called for it, in the format ``shortlist recommend
--log`` reads (:mod:`benchmarks.toollog`), with what the request was shown::

    {"request": "<text>", "tools": ["<called>", ...], "shortlist": ["<sent>", ...], "k": 3, "policy": "bor-topp",
     "time": "..."}

(``recommend`` reads ``request`` and ``tools``; the same request again is one request, the union of its calls).

- ``serve mcp``, in front of upstreams: the server sees both halves of a tool use, the agent's
  ``search_tools(query)`` and the ``tools/call`` that follows. Each call of a tool that is not pinned is one line,
  tied to the latest search whose answer holds the tool, else to the latest search (its query the request): an
  agent may search twice, then call from both answers. A call before any search is not written. Over stdio only:
  one agent per server process, so a call follows its own agent's search (over streamable HTTP, MCP's 2026-07-28
  requests carry no session, and a call could not be told from another agent's).
- ``serve openai``: each answer of a shortlisted Chat Completions, Responses or Messages request that calls tools
  is one line (``api`` says which), its request the user text the tools were shortlisted on: the calls of the
  request's ranked tools, streamed or not, but those ``tool_choice`` forced. An answer the client left before its
  end is not written.

``DIR/tools.json`` holds every tool searched (an MCP ``tools/list`` result, each tool's latest schema, replaced
whole, never half written, when a new list is seen), so the folder retrains a policy as it is::

    shortlist recommend --log DIR --out rec    # (= --tools DIR/tools.json --log DIR/log.jsonl)
    shortlist serve mcp --searcher rec/searcher --upstream-config mcp.json

The log holds the agents' requests: it is created readable by its owner only (0600), and lines are appended,
each in one write under the folder's lock file (``DIR/.lock``), never rewritten; a line that cannot be written
whole (a full disk) is taken back and logged, a part of a line a stopped writer left is cut off before the next
line is written, and the request is answered all the same. Several processes may record into one folder (their
lines never mix; ``tools.json`` is merged under the same lock). On a file system without locks (Windows), record
into a folder from one process only.
``recommend`` ranks every logged request over every tool of ``tools.json``: behind the proxy, or with a folder
shared by agents with different tools, that is more tools than a request was sent.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from servers import RECORD_LOG, RECORD_TOOLS

try:
    import fcntl
except ImportError:  # (Windows: no file locks)
    fcntl = None  # type: ignore[assignment]

LOG = logging.getLogger("servers.record")
#: The latest ``search_tools`` answers a ``serve mcp`` call may be tied to.
SEARCHES_KEPT = 16


class Recorder:
    """Appends each tool call, with the request it was for, to ``DIR/log.jsonl``; keeps ``DIR/tools.json``.

    Several processes may record into one folder (each stdio agent session runs its own server): a line is one
    append, and ``tools.json`` is read, merged and replaced, each under a lock file (``DIR/.lock``), so no process
    drops the tools another added, and a part of a line a stopped writer left (cut off before the next line) is
    never another's line in progress.
    """

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        if self.folder.exists() and not self.folder.is_dir():
            raise ValueError(f"--record {self.folder}: not a folder")
        self.folder.mkdir(parents=True, exist_ok=True)
        self.log = self.folder / RECORD_LOG
        self.tools_file = self.folder / RECORD_TOOLS
        self._lock_file = self.folder / ".lock"
        self._can_lock = fcntl is not None
        with self._locked():
            self._read_tools()  # (refused at once when it is not one this server wrote)
        self._fd: int | None = os.open(self.log, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        self.searches: deque[dict[str, Any]] = deque(maxlen=SEARCHES_KEPT)
        self.written = 0

    @contextmanager
    def _locked(self) -> Iterator[None]:
        """This folder's lock, held across processes (``fcntl.flock``) for a line's write or a merge of
        ``tools.json``. Where there is no lock (Windows, a file system without ``flock``), nothing is held: one
        process a folder there (said once)."""
        if fcntl is None or not self._can_lock:
            yield
            return
        with open(self._lock_file, "a") as lock:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX)
            except OSError as e:  # (ENOLCK: no locks on this file system)
                LOG.warning("--record %s: no file lock here (%s): record into this folder from one process only",
                            self.folder, e)  # fmt: skip
                self._can_lock = False
                yield
                return
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _line_start(self) -> int:
        """Where the next line goes: the log's end, after cutting off a part of a line a writer left when it stopped
        in the middle of one (a kill, a full disk). Called with the folder's lock held, so no other recorder is
        writing: the part is nobody's line in progress."""
        assert self._fd is not None
        size = os.fstat(self._fd).st_size
        if size == 0 or os.pread(self._fd, 1, size - 1) == b"\n":  # (every line but after a stopped writer)
            return size
        end = size
        while end > 0:  # back to the last newline, a block at a time (a part of a line may be long)
            start = max(0, end - (1 << 16))
            block = os.pread(self._fd, end - start, start)
            newline = block.rfind(b"\n")
            if newline >= 0:
                end = start + newline + 1
                break
            end = start
        os.ftruncate(self._fd, end)
        LOG.warning("--record %s: a part of a line (%d bytes), left by a writer that stopped in it, cut off",
                    self.log, size - end)  # fmt: skip
        return end

    def _read_tools(self) -> dict[str, dict[str, Any]]:
        """The tools ``tools.json`` holds (other runs' too: their log lines name them), by name."""
        if not self.tools_file.exists():
            return {}
        try:
            listed = json.loads(self.tools_file.read_text(encoding="utf-8"))["tools"]
            return {t["name"]: t for t in listed}
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"--record {self.tools_file}: not a tools file this server wrote ({e})") from e

    def registry(self, tools: Sequence[dict[str, Any]]) -> None:
        """The tools searched now (MCP shape), added to ``tools.json`` (a tool seen before: its latest schema). The
        file is read again, merged and replaced whole under the folder's lock, never left half written. A file that
        cannot be written is logged, and serving goes on."""
        tmp = None
        try:
            with self._locked():
                merged = {**self._read_tools(), **{t["name"]: t for t in tools}}
                with tempfile.NamedTemporaryFile("w", dir=self.folder, suffix=".tmp", delete=False,
                                                 encoding="utf-8") as f:  # fmt: skip
                    tmp = f.name
                    json.dump({"tools": list(merged.values())}, f, indent=1)
                os.replace(tmp, self.tools_file)
        except (OSError, ValueError) as e:
            LOG.warning("--record %s: the tools could not be written (%s)", self.tools_file, e)
            if tmp is not None and os.path.exists(tmp):
                os.unlink(tmp)

    def write(
        self, request: str, tools: Sequence[str], shortlist: Sequence[str], k: int, policy: str, **extra: Any
    ) -> None:
        """One line: the request, the tools called for it, and what it was shown (``extra``: more keys), in one
        append under the folder's lock. A line that cannot be written whole (a full disk) is taken back, logged and
        lost; the request it came from is answered all the same."""
        if self._fd is None:
            return
        line = {"request": request, "tools": list(tools), "shortlist": list(shortlist), "k": k, "policy": policy,
                **extra, "time": datetime.now(UTC).isoformat(timespec="seconds")}  # fmt: skip
        data = (json.dumps(line) + "\n").encode()
        try:
            with self._locked():  # (no other recorder writes meanwhile: a part left behind is nobody's line)
                before = self._line_start()
                try:
                    if os.write(self._fd, data) != len(data):
                        raise OSError("only part of the line was written (disk full?)")
                except OSError:
                    if os.fstat(self._fd).st_size > before:  # a part of it went in: taken back
                        os.ftruncate(self._fd, before)
                    raise
        except OSError as e:
            LOG.warning("--record %s: a line could not be written (%s)", self.log, e)
            return
        self.written += 1

    def searched(self, query: str, shortlist: Sequence[str], k: int, policy: str) -> None:
        """A ``search_tools`` query and its answer: what the next calls are tied to."""
        self.searches.append({"request": query, "shortlist": list(shortlist), "k": k, "policy": policy})

    def called(self, tool: str) -> None:
        """A ``tools/call`` of ``tool`` (not pinned): one line, tied to the latest search whose shortlist holds it
        (an agent may search twice, then call from both answers), else to the latest search (none yet: nothing
        written)."""
        for search in reversed(self.searches):
            if tool in search["shortlist"]:
                break
        else:
            if not self.searches:
                return
            search = self.searches[-1]
        self.write(tools=[tool], **search)

    def close(self) -> None:
        """Close the log (again: nothing), saying how many lines this run wrote (logger ``servers.record``, INFO)."""
        if self._fd is None:
            return
        os.close(self._fd)
        self._fd = None
        LOG.info("--record %s: %d tool calls written to %s", self.folder, self.written, self.log)


__all__: Sequence[str] = ["Recorder"]
