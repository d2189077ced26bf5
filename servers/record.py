"""What ``shortlist serve mcp --record DIR`` writes: the log a policy is trained on, from the agent's own traffic.

In front of upstreams, the server sees both halves of a tool use: the agent's ``search_tools(query)`` and then its
``tools/call`` of a tool. Each call of a tool that is not pinned is written as one line of ``DIR/log.jsonl``, in
the format ``shortlist recommend --log`` reads (:mod:`benchmarks.toollog`), tied to the latest search::

    {"request": "<the query of the latest search>", "tools": ["<the tool called>"],
     "shortlist": ["<the tools that search answered>", ...], "k": 3, "policy": "bor-topp", "time": "..."}

(``recommend`` reads ``request`` and ``tools``; the same query again is one request, the union of its calls).
``DIR/tools.json`` holds every tool the server has searched (an MCP ``tools/list`` result, each tool's latest
schema, written again, whole, whenever an upstream's list changes), so the folder retrains a policy as it is::

    shortlist recommend --tools DIR/tools.json --log DIR/log.jsonl --out rec
    shortlist serve mcp --searcher rec/searcher --upstream-config mcp.json

Not written: a call before any search, and a call of a pinned tool (the agent has it without searching). Over
stdio only: one agent per server process, so a call follows its own agent's search (over streamable HTTP, MCP's
2026-07-28 requests carry no session, and a call could not be told from another agent's). The log holds the
agents' queries: it is created readable by its owner only (0600), and lines are appended, never rewritten.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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

    def searched(self, query: str, shortlist: Sequence[str], k: int, policy: str) -> None:
        """A search's query and answer: what the next calls are tied to."""
        self.last = {"request": query, "shortlist": list(shortlist), "k": k, "policy": policy}

    def called(self, tool: str) -> None:
        """A call of ``tool`` (not pinned): one line, tied to the latest search (none yet: nothing written)."""
        if self.last is None:
            return
        line = {"request": self.last["request"], "tools": [tool]}
        line.update((k, v) for k, v in self.last.items() if k != "request")  # what it was shown: shortlist, k, policy
        line["time"] = datetime.now(UTC).isoformat(timespec="seconds")
        self._out.write(json.dumps(line) + "\n")
        self._out.flush()
        self.written += 1

    def close(self) -> None:
        self._out.close()


__all__: Sequence[str] = ["LOG_FILE", "TOOLS_FILE", "Recorder"]
