"""MetaTool (ToolE) single-tool queries over its 199-tool registry.

Files (pinned in :mod:`benchmarks.data`, obtained through :func:`benchmarks.data.ensure_file`):

- ``metatool/dataset/plugin_des.json``: ``{tool_name: description}``, 199 tools;
- ``metatool/dataset/data/all_clean_data.csv``: header ``Query,Tool``, 20,614 rows;
- ``metatool/dataset/data/multi_tool_query_golden.json``: 497 multi-tool queries
  ``[{"query": str, "tool": [str, ...]}, ...]`` (:func:`load_metatool_multi`, at the end
  of this module).

Registry: the tools of ``plugin_des.json`` in file order (a key repeated in the JSON
object is a :class:`DataError`). The registry key is the exact tool name. Tool text
(what the scorers see) is, exactly::

    "<tool name with every _ replaced by a space>. <description stripped>"

e.g. ``"total query meta search engine. <description>"``; a tool with an empty
description gets the bare spaced name (counted in ``skipped``; none in the real data).

Queries: the CSV is read with :mod:`csv` (UTF-8, an optional BOM tolerated); the
header must be exactly ``Query,Tool`` and every row must have exactly two fields,
otherwise a :class:`DataError` names the file and line. The query text is the Query
field stripped of surrounding whitespace (an empty query or tool field is a
:class:`DataError`); the tool field is stripped too. ``qid = "metatool-<row number>"``
with the row number counted from 1 over data rows (the header is not a row; a quoted
field spanning two physical lines is one row, so row numbers and line numbers differ
after such a row). Rows are then filtered, each skip counted in ``ToolCorpus.skipped``:

- ``"csv rows whose tool is not in plugin_des.json"``: the row names a tool missing
  from the registry (0 in the real data);
- ``"duplicate query text, same tool (first occurrence kept)"`` and
  ``"duplicate query text, different tool (first occurrence kept)"``: a row whose
  (stripped) query text equals that of an earlier kept row.

Measured on the pinned files: 199 tools, 20,614 rows, 0 unknown tools, 70 duplicate
texts (54 same tool, 16 different tool; 64 of them are exact duplicates and 6 differ
only by trailing spaces) -> 20,544 queries, all 199 tools used as gold. One upstream
row (``metatool-5924``) is a mis-quoted merge of two lines (its text contains a
newline); it is kept as the CSV module parses it.
"""

from __future__ import annotations

import csv
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.corpus import DataError, QueryRecord, ToolCorpus, not_utf8, read_json_registry, read_utf8
from benchmarks.data import ensure_file, file_sha256

DATASET = "metatool"
PLUGIN_DES = "metatool/dataset/plugin_des.json"
QUERIES = "metatool/dataset/data/all_clean_data.csv"
HEADER = ["Query", "Tool"]

SKIP_UNKNOWN_TOOL = "csv rows whose tool is not in plugin_des.json"
SKIP_DUP_SAME = "duplicate query text, same tool (first occurrence kept)"
SKIP_DUP_OTHER = "duplicate query text, different tool (first occurrence kept)"
SKIP_EMPTY_DESC = "tools with an empty description (text = spaced name)"


def read_plugin_des(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """The registry of ``plugin_des.json`` as (name, description) pairs in file order.

    Args:
        path: the JSON file.

    Returns:
        The tools, in file order.

    Raises:
        DataError: not UTF-8, malformed JSON, not an object of strings, repeated key
            (:func:`benchmarks.corpus.read_json_registry`).
    """
    return read_json_registry(path, "{tool_name: description}", _description)


def _description(name: str, desc: Any, where: Callable[[], str]) -> str:
    """A tool's description in ``plugin_des.json``: a string, or a DataError at ``where()``."""
    if not isinstance(desc, str):
        raise DataError(f"{where()}: description of tool {name!r} must be a string")
    return desc


def tool_text(name: str, description: str) -> str:
    """The exact text scorers see for one MetaTool tool (see module docstring)."""
    pretty = name.replace("_", " ").strip()
    desc = description.strip()
    return f"{pretty}. {desc}" if desc else pretty


def read_queries(path: str | os.PathLike[str]) -> list[tuple[int, int, str, str]]:
    """Rows of ``all_clean_data.csv`` as (row number, first line, query, tool).

    Args:
        path: the CSV file.

    Returns:
        One tuple per data row, fields stripped.

    Raises:
        DataError: not UTF-8, wrong header, wrong column count, empty field, CSV syntax error.
    """
    p = Path(path)
    rows: list[tuple[int, int, str, str]] = []
    try:
        with open(p, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f, strict=True)
            try:
                header = next(reader, None)
                if header != HEADER:
                    raise DataError(f"{p}:1: expected the header {','.join(HEADER)}, found {header!r}")
                prev_end = reader.line_num
                for rowno, row in enumerate(reader, start=1):
                    line = prev_end + 1
                    prev_end = reader.line_num
                    if len(row) != len(HEADER):
                        raise DataError(f"{p}:{line}: expected {len(HEADER)} columns (Query,Tool), found {len(row)}")
                    query, tool = row[0].strip(), row[1].strip()
                    if not query:
                        raise DataError(f"{p}:{line}: empty Query field")
                    if not tool:
                        raise DataError(f"{p}:{line}: empty Tool field")
                    rows.append((rowno, line, query, tool))
            except csv.Error as e:
                raise DataError(f"{p}:{reader.line_num}: malformed CSV ({e})") from e
    except UnicodeDecodeError as e:
        raise not_utf8(str(p), e) from e
    if not rows:
        raise DataError(f"{p}: no data rows")
    return rows


def load_metatool_files(plugin_des: str | os.PathLike[str], queries_csv: str | os.PathLike[str]) -> ToolCorpus:
    """Build the MetaTool corpus from explicit files (no pinned-digest check).

    Args:
        plugin_des: ``plugin_des.json``.
        queries_csv: ``all_clean_data.csv``.

    Returns:
        The corpus (see module docstring); ``inputs_sha256`` holds the actual digests.

    Raises:
        DataError: malformed input (file and line named).
    """
    tools = read_plugin_des(plugin_des)
    known = {n for n, _ in tools}
    skipped = {
        SKIP_UNKNOWN_TOOL: 0,
        SKIP_DUP_SAME: 0,
        SKIP_DUP_OTHER: 0,
        SKIP_EMPTY_DESC: sum(1 for _, d in tools if not d.strip()),
    }
    kept_tool: dict[str, str] = {}
    queries: list[QueryRecord] = []
    for rowno, _line, query, tool in read_queries(queries_csv):
        if tool not in known:
            skipped[SKIP_UNKNOWN_TOOL] += 1
            continue
        first = kept_tool.get(query)
        if first is not None:
            skipped[SKIP_DUP_SAME if first == tool else SKIP_DUP_OTHER] += 1
            continue
        kept_tool[query] = tool
        queries.append(QueryRecord(qid=f"metatool-{rowno}", text=query, gold=(tool,)))
    if not queries:
        raise DataError(f"{queries_csv}: no query names a tool of {plugin_des}")
    return _corpus("metatool", tools, queries, {PLUGIN_DES: plugin_des, QUERIES: queries_csv}, skipped)


def _corpus(
    name: str,
    tools: list[tuple[str, str]],
    queries: list[QueryRecord],
    files: dict[str, str | os.PathLike[str]],
    skipped: dict[str, int],
) -> ToolCorpus:
    """A MetaTool corpus over the registry ``tools`` (:func:`read_plugin_des`; texts by :func:`tool_text`),
    with the sha256 of the input ``files`` (display path -> file)."""
    return ToolCorpus(
        name=name,
        tool_names=tuple(n for n, _ in tools),
        tool_texts=tuple(tool_text(n, d) for n, d in tools),
        queries=tuple(queries),
        inputs_sha256={key: file_sha256(path) for key, path in files.items()},
        skipped=skipped,
    )


def load_metatool(data_dir: str | os.PathLike[str] | None = None) -> ToolCorpus:
    """Load MetaTool as a :class:`ToolCorpus` from verified pinned files (see module docstring).

    Args:
        data_dir: data directory (explicit > ``SHORTLIST_DATA_DIR`` > per-user cache);
            missing files are downloaded from their pinned URLs.

    Returns:
        The corpus named ``metatool``.

    Raises:
        DataError: missing or corrupted files, malformed content.
    """
    plugin_des = ensure_file(DATASET, PLUGIN_DES, data_dir)
    queries_csv = ensure_file(DATASET, QUERIES, data_dir)
    return load_metatool_files(plugin_des, queries_csv)


# --- multi-tool queries (R_q >= 2) -----------------------------------------------------------

MULTI_QUERIES = "metatool/dataset/data/multi_tool_query_golden.json"
SKIP_MULTI_SINGLE = "multi-tool entries with fewer than 2 gold tools"
SKIP_MULTI_DUP = "multi-tool entries repeating an earlier query text (first occurrence kept)"


def _array_entries(text: str, where: str) -> list[tuple[int, object]]:
    """(1-based line, value) of each element of a top-level JSON array, in order.

    Raises:
        DataError: malformed JSON or a top level that is not an array (naming the line).
    """
    dec = json.JSONDecoder()

    def fail(pos: int, msg: str) -> DataError:
        return DataError(f"{where}:{text.count(chr(10), 0, pos) + 1}: {msg}")

    pos = len(text) - len(text.lstrip("\ufeff \t\r\n"))
    if not text.startswith("[", pos):
        raise fail(pos, "expected a JSON array of {query, tool} objects")
    pos += 1
    out: list[tuple[int, object]] = []
    while True:
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos < len(text) and text[pos] == "]" and not out:
            pos += 1
            break
        try:
            value, end = dec.raw_decode(text, pos)
        except json.JSONDecodeError as e:
            raise DataError(f"{where}:{e.lineno}: malformed JSON ({e.msg})") from e
        out.append((text.count("\n", 0, pos) + 1, value))
        pos = end
        while pos < len(text) and text[pos] in " \t\r\n":
            pos += 1
        if pos < len(text) and text[pos] == ",":
            pos += 1
            continue
        if pos < len(text) and text[pos] == "]":
            pos += 1
            break
        raise fail(pos, "malformed JSON (expected ',' or ']' after an array element)")
    if text[pos:].strip():
        raise fail(pos, "malformed JSON (extra data after the array)")
    return out


def read_multi_queries(
    path: str | os.PathLike[str], known_tools: set[str]
) -> list[tuple[int, int, str, tuple[str, ...]]]:
    """Entries of ``multi_tool_query_golden.json`` as (entry number, line, query, gold tools).

    The file is a JSON array of objects ``{"query": str, "tool": [str, ...]}`` (other keys
    are ignored). The query and each tool name are stripped; the gold tools keep file order.

    Args:
        path: the JSON file.
        known_tools: registry names (``plugin_des.json``); every gold tool must be one.

    Returns:
        One tuple per entry; entry numbers count from 1 in file order.

    Raises:
        DataError: ``file:line: entry <i>: ...`` for a non-object entry, a missing or empty
            query, a tool field that is not a non-empty list of non-empty strings, a tool
            named twice in one entry, or a tool missing from the registry; ``file:line``
            for malformed JSON; ``file`` for an empty array or non-UTF-8 bytes.
    """
    p = Path(path)
    text = read_utf8(p)
    rows: list[tuple[int, int, str, tuple[str, ...]]] = []
    for no, (line, entry) in enumerate(_array_entries(text, str(p)), start=1):
        where = f"{p}:{line}: entry {no}"
        if not isinstance(entry, dict):
            raise DataError(f"{where}: expected an object {{query, tool}}, got {type(entry).__name__}")
        query = entry.get("query")
        if not isinstance(query, str) or not query.strip():
            raise DataError(f"{where}: 'query' must be a non-empty string")
        tools = entry.get("tool")
        if not isinstance(tools, list) or not tools:
            raise DataError(f"{where}: 'tool' must be a non-empty list of tool names")
        names: list[str] = []
        for t in tools:
            if not isinstance(t, str) or not t.strip():
                raise DataError(f"{where}: 'tool' holds {t!r}, expected a non-empty tool name")
            t = t.strip()
            if t in names:
                raise DataError(f"{where}: tool {t!r} is listed twice")
            if t not in known_tools:
                raise DataError(f"{where}: tool {t!r} is not in plugin_des.json")
            names.append(t)
        rows.append((no, line, query.strip(), tuple(names)))
    if not rows:
        raise DataError(f"{p}: no entries")
    return rows


def load_metatool_multi_files(plugin_des: str | os.PathLike[str], multi_json: str | os.PathLike[str]) -> ToolCorpus:
    """Build the MetaTool multi-tool corpus from explicit files (no pinned-digest check).

    Registry and tool texts are those of :func:`load_metatool_files`. Queries are the
    entries of ``multi_tool_query_golden.json`` (:func:`read_multi_queries`) with
    ``qid = "metatool-multi-<entry number>"`` and ``gold`` = the entry's tool list.
    Counted skips: entries with fewer than 2 gold tools (:data:`SKIP_MULTI_SINGLE`) and
    repeated query texts (:data:`SKIP_MULTI_DUP`). Measured on the pinned file: 497
    entries, all with exactly 2 distinct gold tools among 15 registry tools, no skip.

    Args:
        plugin_des: ``plugin_des.json``.
        multi_json: ``multi_tool_query_golden.json``.

    Returns:
        The corpus named ``metatool-multi``.

    Raises:
        DataError: malformed input or unknown tools (file, line and entry named).
    """
    tools = read_plugin_des(plugin_des)
    skipped = {SKIP_MULTI_SINGLE: 0, SKIP_MULTI_DUP: 0}
    seen: set[str] = set()
    queries: list[QueryRecord] = []
    for no, _line, query, gold in read_multi_queries(multi_json, {n for n, _ in tools}):
        if len(gold) < 2:
            skipped[SKIP_MULTI_SINGLE] += 1
            continue
        if query in seen:
            skipped[SKIP_MULTI_DUP] += 1
            continue
        seen.add(query)
        queries.append(QueryRecord(qid=f"metatool-multi-{no}", text=query, gold=gold))
    if not queries:
        raise DataError(f"{multi_json}: no entry with at least 2 gold tools")
    return _corpus("metatool-multi", tools, queries, {PLUGIN_DES: plugin_des, MULTI_QUERIES: multi_json}, skipped)


def load_metatool_multi(data_dir: str | os.PathLike[str] | None = None) -> ToolCorpus:
    """Load the MetaTool multi-tool queries from verified pinned files (see :func:`load_metatool_multi_files`).

    Args:
        data_dir: data directory (explicit > ``SHORTLIST_DATA_DIR`` > per-user cache).

    Returns:
        The corpus named ``metatool-multi``.

    Raises:
        DataError: missing or corrupted files, malformed content.
    """
    plugin_des = ensure_file(DATASET, PLUGIN_DES, data_dir)
    multi_json = ensure_file(DATASET, MULTI_QUERIES, data_dir)
    return load_metatool_multi_files(plugin_des, multi_json)
