"""MetaTool (ToolE) single-tool queries over its 199-tool registry.

Files (pinned in :mod:`benchmarks.data`, obtained through :func:`benchmarks.data.ensure_file`):

- ``metatool/dataset/plugin_des.json``: ``{tool_name: description}``, 199 tools;
- ``metatool/dataset/data/all_clean_data.csv``: header ``Query,Tool``, 20,614 rows.

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
from pathlib import Path

from benchmarks.corpus import DataError, QueryRecord, ToolCorpus
from benchmarks.data import ensure_file, file_sha256

DATASET = "metatool"
PLUGIN_DES = "metatool/dataset/plugin_des.json"
QUERIES = "metatool/dataset/data/all_clean_data.csv"
HEADER = ["Query", "Tool"]

SKIP_UNKNOWN_TOOL = "csv rows whose tool is not in plugin_des.json"
SKIP_DUP_SAME = "duplicate query text, same tool (first occurrence kept)"
SKIP_DUP_OTHER = "duplicate query text, different tool (first occurrence kept)"
SKIP_EMPTY_DESC = "tools with an empty description (text = spaced name)"


def _line_of(text: str, key: str) -> int:
    """1-based line of the first occurrence of ``key`` as a JSON string (0 if not found)."""
    pos = text.find(json.dumps(key, ensure_ascii=False))
    if pos < 0:
        pos = text.find(json.dumps(key))
    return text.count("\n", 0, pos) + 1 if pos >= 0 else 0


def read_plugin_des(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """The registry of ``plugin_des.json`` as (name, description) pairs in file order.

    Args:
        path: the JSON file.

    Returns:
        The tools, in file order.

    Raises:
        DataError: not UTF-8, malformed JSON, not an object of strings, repeated key.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise DataError(f"{p}: not UTF-8 ({e.reason} at byte {e.start})") from e
    try:
        pairs = json.loads(text, object_pairs_hook=tuple)
    except json.JSONDecodeError as e:
        raise DataError(f"{p}:{e.lineno}: malformed JSON ({e.msg})") from e
    if not isinstance(pairs, tuple) or not pairs:
        raise DataError(f"{p}: expected a non-empty JSON object {{tool_name: description}}")
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for name, desc in pairs:

        def where(name: str = name) -> str:
            return f"{p}:{_line_of(text, name)}"

        if name in seen:
            raise DataError(f"{where()}: tool {name!r} appears twice in the registry")
        if not name.strip():
            raise DataError(f"{where()}: empty tool name")
        if not isinstance(desc, str):
            raise DataError(f"{where()}: description of tool {name!r} must be a string")
        seen.add(name)
        out.append((name, desc))
    return out


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
        raise DataError(f"{p}: not UTF-8 ({e.reason} at byte {e.start})") from e
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
    names = tuple(n for n, _ in tools)
    texts = tuple(tool_text(n, d) for n, d in tools)
    known = set(names)
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
    return ToolCorpus(
        name="metatool",
        tool_names=names,
        tool_texts=texts,
        queries=tuple(queries),
        inputs_sha256={PLUGIN_DES: file_sha256(plugin_des), QUERIES: file_sha256(queries_csv)},
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
