"""An agent's logged requests over its tool registry, as judged ranked queries (``shortlist recommend --tools
TOOLS --log LOG``).

Log format: JSON lines, one request a line::

    {"request": "What's the weather in Paris?", "tools": ["get_weather"]}

``tools`` names the tools the agent called for that request (a single ``"tool": "name"`` is accepted too);
other keys are ignored. The registry is a tools file (:func:`benchmarks.tools.read_tools_file`: an OpenAI
``tools`` list, an MCP ``tools/list`` result, or JSON lines of ``{name, description, parameters}``).

Rules (:func:`read_tool_log`):

- a line that is not JSON, not an object, without a non-blank string ``request`` or whose ``tools`` is not a
  list of strings: a :class:`~benchmarks.corpus.DataError` naming ``file:line``;
- a line that called no tool (``"tools": []``): skipped, counted (:data:`SKIP_NO_TOOL`);
- a request any of whose lines names a tool the registry lacks: skipped as a whole (its label would be
  partial), every line with its text, whichever order the lines come in (its other lines' known tools are not
  kept on their own); its lines that called a tool are counted (:data:`SKIP_UNKNOWN_TOOL`), and the unknown
  names kept (:attr:`ToolLog.unknown`) so the console names the first few;
- the counts are of lines: every line read is a usable request's first line, a line merged into it, or a
  skipped line (:attr:`ToolLog.n_lines` is their sum);
- the same request text again (exactly, after stripping): one query, whose relevant tools are the union of
  the lines' (counted as duplicates), so a repeated request never lands in both the training and the test
  split;
- a request's relevant tools are sorted by name, so a request merged from several lines has the same tools
  whichever line came first;
- query ids ``R<hex>``: ``R`` and the first 12 hex digits of the sha256 of the request text (stripped, UTF-8),
  so an id names the request, not its place in the file (two requests whose ids collide: a
  :class:`~benchmarks.corpus.DataError` naming both lines). The condition (:func:`log_condition`) sorts the
  queries by id before the seeded split (:func:`benchmarks.split.seeded_split` on the ids' order), so the same
  requests split the same way however the log's lines are ordered; :attr:`ToolLog.records` itself keeps the
  order of each request's first line.

Each query is the whole registry ranked for the request by the tool search's own path
(:class:`benchmarks.tool_ranking.RegistryRanker`, ties by registry order), relevant = the called tools.

The labels are biased: the tool the agent called counts as relevant, and every other tool as irrelevant,
even one that would have served the request as well (docs/toolsearch.md).
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks.corpus import DataError, QueryRecord, iter_jsonl
from benchmarks.names import log_condition_name
from benchmarks.split import Condition, seeded_split, split_meta
from benchmarks.tool_ranking import RegistryRanker, rank_records
from benchmarks.tools import read_tools_file, registry_digest

SKIP_NO_TOOL = "lines that called no tool"
SKIP_UNKNOWN_TOOL = "lines of requests naming a tool not in the registry"


@dataclass(frozen=True)
class ToolLog:
    """A log read against a registry.

    Attributes:
        records: one query per distinct request, in the order of their first lines: id ``R<hex>``
            (:func:`request_id`), its text, the called tools (union, sorted by name).
        skipped: skipped lines by why (:data:`SKIP_UNKNOWN_TOOL`, then :data:`SKIP_NO_TOOL`), non-zero only.
        unknown: each unknown tool name -> the number of log lines naming it, in order of appearance.
        duplicates: lines whose request repeats an earlier line's (merged into it).
        n_lines: non-blank lines read.
        sha256: the log file's sha256.
    """

    records: tuple[QueryRecord, ...]
    skipped: dict[str, int] = field(default_factory=dict)
    unknown: dict[str, int] = field(default_factory=dict)
    duplicates: int = 0
    n_lines: int = 0
    sha256: str = ""


def _called(row: dict, where: str) -> tuple[str, list[str]]:
    """The request text and the called tools of one log line (module docstring)."""
    text = row.get("request")
    if not isinstance(text, str) or not text.strip():
        raise DataError(f"{where}: 'request' must be a non-blank string (the user's request), got {text!r}")
    if "tools" in row:
        called = row["tools"]
    elif "tool" in row:
        called = [row["tool"]]
    else:
        raise DataError(f"{where}: no 'tools' (the names of the tools the agent called)")
    if not isinstance(called, list) or not all(isinstance(t, str) and t for t in called):
        raise DataError(f"{where}: 'tools' must be a list of tool names, got {called!r}")
    return text.strip(), list(dict.fromkeys(called))


def request_id(text: str) -> str:
    """A logged request's query id: ``R`` and 12 hex digits of the sha256 of its (stripped) text, so the id
    depends on what was asked, never on the line it was logged on (module docstring)."""
    return "R" + hashlib.sha256(text.strip().encode("utf-8")).hexdigest()[:12]


def _records(first: Mapping[str, tuple[int, list[str]]], where: Path) -> tuple[QueryRecord, ...]:
    """One record per distinct request (``text -> (first line, called tools)``), its id :func:`request_id` and its
    tools sorted; a DataError naming both lines when two requests' ids collide."""
    seen: dict[str, int] = {}
    records = []
    for text, (line, gold) in first.items():
        qid = request_id(text)
        if qid in seen:
            raise DataError(f"{where}:{line}: its request's id {qid} is also the id of line {seen[qid]}'s other "
                            "request (a sha256 prefix collision): reword one of them")  # fmt: skip
        seen[qid] = line
        records.append(QueryRecord(qid, text, tuple(sorted(gold))))
    return tuple(records)


def read_tool_log(path: str | os.PathLike[str], names: Collection[str]) -> ToolLog:
    """Read a log of requests against a registry of tool ``names`` (module docstring).

    Raises:
        DataError: a missing or empty file, or a malformed line (naming ``file:line``).
    """
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{p}: no such log file")
    known = set(names)
    lines = [(lineno, *_called(row, f"{p}:{lineno}")) for lineno, row in iter_jsonl(p)]
    partial = {text for _, text, called in lines if any(t not in known for t in called)}  # before any is kept
    first: dict[str, tuple[int, list[str]]] = {}
    skipped: dict[str, int] = {}
    unknown: dict[str, int] = {}
    duplicates = 0
    for lineno, text, called in lines:
        if not called or text in partial:
            key = SKIP_UNKNOWN_TOOL if called else SKIP_NO_TOOL
            skipped[key] = skipped.get(key, 0) + 1
            for t in called:
                if t not in known:
                    unknown[t] = unknown.get(t, 0) + 1
            continue
        if text in first:
            duplicates += 1
            first[text][1].extend(t for t in called if t not in first[text][1])
            continue
        first[text] = (lineno, called)
    skipped = {
        k: skipped[k] for k in (SKIP_UNKNOWN_TOOL, SKIP_NO_TOOL) if k in skipped
    }  # one order, whatever the lines'
    sha = hashlib.sha256(p.read_bytes()).hexdigest()
    return ToolLog(_records(first, p), skipped, unknown, duplicates, len(lines), sha)


def usable_summary(log: ToolLog) -> str:
    """How a log's lines came to its requests: ``12 lines read, 9 skipped (8 lines of requests naming a tool not in
    the registry: 'order_pizza' (8 lines); 1 line that called no tool), 1 line merged into an earlier request``;
    every count with its noun in the singular when it is 1."""
    why = [f"{n} {k if n != 1 else _ONE.get(k, k)}"
           + (": " + _unknown_names(log.unknown) if k == SKIP_UNKNOWN_TOOL and log.unknown else "")
           for k, n in log.skipped.items() if n]  # fmt: skip
    n_skipped = sum(log.skipped.values())
    out = f"{_lines(log.n_lines)} read, {n_skipped} skipped"
    out += f" ({'; '.join(why)})" if why else ""
    if log.duplicates:
        out += f", {_lines(log.duplicates)} merged into an earlier request"
    return out


#: The skip reasons said of one line (:func:`usable_summary`).
_ONE = {
    SKIP_NO_TOOL: "line that called no tool",
    SKIP_UNKNOWN_TOOL: "line of a request naming a tool not in the registry",
}


def _lines(n: int) -> str:
    """``1 line``, ``2 lines``."""
    return f"{n} line{'' if n == 1 else 's'}"


def _unknown_names(unknown: Mapping[str, int], first: int = 5) -> str:
    """The first ``first`` unknown tool names with their line counts, and how many more."""
    names = ", ".join(f"{name!r} ({_lines(n)})" for name, n in list(unknown.items())[:first])
    return names + (f" and {len(unknown) - first} more" if len(unknown) > first else "")


def log_condition(
    options: Mapping[str, str],
    scorer: str,
    variant: str,
    split_seed: int,
    train_frac: float,
    cache_dir: Path | None = None,
) -> Condition:
    """The logged requests of ``options["log"]`` over the registry of ``options["tools"]`` as a condition:
    one ranked query per distinct request (the whole registry, ranked by ``scorer``; ``variant="hybrid"``
    also observes the other scorer), in query-id order, split ``train_frac`` / ``1 - train_frac``.

    Raises:
        ValueError: fewer than 2 usable requests, an unknown scorer or variant.
        DataError: malformed tools or log (naming the file and the line or tool).
    """
    if variant not in ("", "hybrid"):
        raise ValueError(f"benchmark 'log' has one variant, hybrid (observe the other scorer), got {variant!r}")
    if not options.get("tools") or not options.get("log"):
        raise ValueError("benchmark 'log' needs --tools FILE and --log FILE")
    tools = read_tools_file(options["tools"])
    log = read_tool_log(options["log"], [t.name for t in tools])
    if len(log.records) < 2:
        raise ValueError(
            f"{options['log']}: need at least 2 usable requests, got {len(log.records)} ({usable_summary(log)})"
        )
    index = {t.name: i for i, t in enumerate(tools)}
    records = sorted(log.records, key=lambda r: r.qid)
    ranker = RegistryRanker([t.text for t in tools], f"{scorer}-hybrid" if variant else scorer, cache_dir)
    queries = rank_records(ranker, records, index)
    train_idx, test_idx = seeded_split(len(queries), train_frac, split_seed)
    tools_sha = hashlib.sha256(Path(options["tools"]).read_bytes()).hexdigest()
    shas = {"tools_sha256": tools_sha, "log_sha256": log.sha256, "log": options["log"], "train_frac": str(train_frac)}
    return Condition(
        name=log_condition_name(scorer, variant, shas),
        queries=queries,
        train_idx=train_idx,
        test_idx=test_idx,
        meta={
            "benchmark": "log",
            "scorer": scorer,
            "variant": variant,
            "toolsearch": {
                "scorer": ranker.scorer,
                "identity": ranker.identity(),
                "observation": ranker.observation,
                "registry_digest": registry_digest(tools),
            },
            "inputs_sha256": {str(Path(options["tools"])): tools_sha, str(Path(options["log"])): log.sha256},
            "skipped": dict(log.skipped),
            "unknown_tools": [[name, n] for name, n in list(log.unknown.items())[:20]],  # in order of appearance
            "n_unknown_tools": len(log.unknown),
            "duplicates_merged": log.duplicates,
            "n_log_lines": log.n_lines,
            "n_tools": len(tools),
            "n_candidates": sorted({q.n_candidates for q in queries}),
            "n_queries": len(queries),
            "n_lists_of_two_or_more": sum(q.length > 1 for q in queries),
            "n_tied_lists": sum(bool(q.length > 1 and q.scores[0] == q.scores[-1]) for q in queries),
            **split_meta(queries, train_idx, test_idx, split_seed, train_frac),
        },
    )
