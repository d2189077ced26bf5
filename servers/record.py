"""What ``shortlist serve mcp --record DIR`` and ``shortlist serve openai --record DIR`` write: the log a policy is
trained on, from the agent's own traffic.

Each line of ``DIR/log.jsonl`` is one request and the tools called for it, in the format ``shortlist recommend
--log`` reads (:mod:`benchmarks.toollog`), with what the request was shown::

    {"request": "<text>", "tools": ["<called>", ...], "shortlist": ["<sent>", ...], "k": 3, "policy": "bor-topp",
     "time": "..."}

(``recommend`` reads ``request`` and ``tools``; the same request again is one request, the union of its calls).

- ``serve mcp``, in front of upstreams: the server sees both halves of a tool use, the agent's
  ``search_tools(query)`` and the ``tools/call`` that follows. Each call of a tool that is not pinned is one line,
  tied to the latest search (its query the request). A call before any search is not written. Over stdio only:
  one agent per server process, so a call follows its own agent's search (over streamable HTTP, MCP's 2026-07-28
  requests carry no session, and a call could not be told from another agent's).
- ``serve openai``: each answer of a shortlisted Chat Completions, Responses or Messages request that calls tools
  is one line (``api`` says which), its request the user text the tools were shortlisted on: the calls of the
  request's ranked tools, streamed or not, but those ``tool_choice`` forced. An answer the client left before its
  end is not written.

``DIR/tools.json`` holds every tool searched (an MCP ``tools/list`` result, each tool's latest schema, replaced
whole, never half written, when a new list is seen), so the folder retrains a policy as it is::

    shortlist recommend --tools DIR/tools.json --log DIR/log.jsonl --out rec
    shortlist serve mcp --searcher rec/searcher --upstream-config mcp.json

The log holds the agents' requests: it is created readable by its owner only (0600), and lines are appended,
never rewritten; a line that cannot be written (a full disk) is logged, and its request answered all the same.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

LOG = logging.getLogger("servers.record")
LOG_FILE = "log.jsonl"
TOOLS_FILE = "tools.json"


class Recorder:
    """Appends each tool call, with the search it followed, to ``DIR/log.jsonl``; keeps ``DIR/tools.json``."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        if self.folder.exists() and not self.folder.is_dir():
            raise ValueError(f"--record {self.folder}: not a folder")
        self.folder.mkdir(parents=True, exist_ok=True)
        self.log = self.folder / LOG_FILE
        self.tools_file = self.folder / TOOLS_FILE
        self.tools = self._read_tools()
        fd = os.open(self.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        self._out = os.fdopen(fd, "a", encoding="utf-8")
        self.last: dict[str, Any] | None = None
        self.written = 0

    def _read_tools(self) -> dict[str, dict[str, Any]]:
        """The tools an earlier run wrote (kept: its log's lines name them), by name."""
        if not self.tools_file.exists():
            return {}
        try:
            listed = json.loads(self.tools_file.read_text(encoding="utf-8"))["tools"]
            return {t["name"]: t for t in listed}
        except (ValueError, KeyError, TypeError) as e:
            raise ValueError(f"--record {self.tools_file}: not a tools file this server wrote ({e})") from e

    def registry(self, tools: Sequence[dict[str, Any]]) -> None:
        """The tools searched now (MCP shape), added to ``tools.json`` (a tool seen before: its latest schema). The
        file is replaced whole, never left half written."""
        self.tools.update({t["name"]: t for t in tools})
        with tempfile.NamedTemporaryFile("w", dir=self.folder, suffix=".tmp", delete=False, encoding="utf-8") as f:
            json.dump({"tools": list(self.tools.values())}, f, indent=1)
        os.replace(f.name, self.tools_file)

    def write(
        self, request: str, tools: Sequence[str], shortlist: Sequence[str], k: int, policy: str, **extra: Any
    ) -> None:
        """One line: the request, the tools called for it, and what it was shown (``extra``: more keys). A line that
        cannot be written (a full disk) is logged and lost; the request it came from is answered all the same."""
        line = {"request": request, "tools": list(tools), "shortlist": list(shortlist), "k": k, "policy": policy,
                **extra, "time": datetime.now(UTC).isoformat(timespec="seconds")}  # fmt: skip
        try:
            self._out.write(json.dumps(line) + "\n")
            self._out.flush()
        except OSError as e:
            LOG.warning("--record %s: a line could not be written (%s)", self.log, e)
            return
        self.written += 1

    def searched(self, query: str, shortlist: Sequence[str], k: int, policy: str) -> None:
        """A ``search_tools`` query and its answer: what the next calls are tied to."""
        self.last = {"request": query, "shortlist": list(shortlist), "k": k, "policy": policy}

    def called(self, tool: str) -> None:
        """A ``tools/call`` of ``tool`` (not pinned): one line, tied to the latest search (none yet: nothing
        written)."""
        if self.last is not None:
            self.write(tools=[tool], **self.last)

    def close(self) -> None:
        """Close the log (again: nothing), saying how many lines this run wrote (logger ``servers.record``, INFO)."""
        if self._out.closed:
            return
        self._out.close()
        LOG.info("--record %s: %d tool calls written to %s", self.folder, self.written, self.log)


__all__: Sequence[str] = ["LOG_FILE", "TOOLS_FILE", "Recorder"]
