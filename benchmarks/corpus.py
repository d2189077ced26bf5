"""A tool-selection corpus: a registry of tools (name -> text) and queries with gold tools.

Every loader (BFCL, MetaTool, ToolBench, BEIR) returns a :class:`ToolCorpus`; candidate
sets, scoring and ranking are built from it by :mod:`benchmarks.conditions`.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import sys
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")


class DataError(ValueError):
    """Malformed or inconsistent benchmark data. The message names the file and position."""


@dataclass(frozen=True)
class QueryRecord:
    """One query of a benchmark.

    Attributes:
        qid: unique query id (as in the source data where it has one).
        text: the user request.
        gold: names of the relevant tools (registry keys); one for tool benchmarks.
    """

    qid: str
    text: str
    gold: tuple[str, ...]


@dataclass(frozen=True)
class ToolCorpus:
    """A registry of tools and the queries over it.

    Attributes:
        name: benchmark name (``bfcl``, ``metatool``, ``toolbench`` ...).
        tool_names: registry order (fixed; index i is tool i).
        tool_texts: text the scorers see for each tool, aligned with ``tool_names``.
        queries: the queries, each with gold tools present in the registry.
        inputs_sha256: sha256 of every input file read, keyed by a display path.
        skipped: documented skips, e.g. ``{"csv rows with tool missing from registry": 3}``.
        skipped_examples: the first skipped ids of a counter, where the loader names them (a BEIR folder's
            query ids, and doc ids for unknown docs: :func:`count_skip`), for the console to name.
    """

    name: str
    tool_names: tuple[str, ...]
    tool_texts: tuple[str, ...]
    queries: tuple[QueryRecord, ...]
    inputs_sha256: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, int] = field(default_factory=dict)
    skipped_examples: dict[str, list[str]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if len(self.tool_names) != len(self.tool_texts):
            raise DataError(f"{self.name}: {len(self.tool_names)} tool names but {len(self.tool_texts)} texts")
        if len(set(self.tool_names)) != len(self.tool_names):
            dup = sorted({t for t in self.tool_names if self.tool_names.count(t) > 1})[:3]
            raise DataError(f"{self.name}: duplicate tool names in the registry: {dup}")
        known = set(self.tool_names)
        seen: set[str] = set()
        for q in self.queries:
            if q.qid in seen:
                raise DataError(f"{self.name}: duplicate query id {q.qid!r}")
            seen.add(q.qid)
            if not q.text.strip():
                raise DataError(f"{self.name}: query {q.qid!r} has empty text")
            if not q.gold:
                raise DataError(f"{self.name}: query {q.qid!r} has no gold tool")
            missing = [g for g in q.gold if g not in known]
            if missing:
                raise DataError(f"{self.name}: query {q.qid!r} names gold tool(s) missing from the registry: {missing}")

    def tool_index(self) -> dict[str, int]:
        """Map tool name -> registry position."""
        return {t: i for i, t in enumerate(self.tool_names)}

    def fingerprint(self) -> str:
        """sha256 over tool names, texts and queries: identifies the text set for caches."""
        h = hashlib.sha256()
        h.update(json.dumps([self.name, self.tool_names, self.tool_texts], ensure_ascii=False).encode())
        h.update(json.dumps([(q.qid, q.text, q.gold) for q in self.queries], ensure_ascii=False).encode())
        return h.hexdigest()


#: How many skipped ids a skip counter keeps as examples (:func:`count_skip`), for the console to name.
SKIP_EXAMPLES = 3


def count_skip(
    skipped: dict[str, int],
    key: str,
    n: int = 1,
    ids: Sequence[str] = (),
    examples: dict[str, list[str]] | None = None,
) -> None:
    """Add ``n`` to the skip counter ``key`` of ``skipped``; a counter appears only once it is non-zero. With
    ``examples``, the first :data:`SKIP_EXAMPLES` distinct skipped ``ids`` are kept under ``key`` too (a counter of
    rows may name one id on several rows)."""
    if n:
        skipped[key] = skipped.get(key, 0) + n
        if examples is not None and ids:
            kept = examples.setdefault(key, [])
            for i in ids:
                if len(kept) >= SKIP_EXAMPLES:
                    break
                if i not in kept:
                    kept.append(i)


def sha256_file(path: str) -> str:
    """sha256 hex digest of a file, streamed."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


#: The first two bytes of every gzip stream (RFC 1952).
GZIP_MAGIC = b"\x1f\x8b"
#: The path that names the standard input (:func:`open_binary`).
STDIN = "-"


def open_binary(path: str | os.PathLike[str], data: bytes | None = None) -> io.BufferedIOBase | gzip.GzipFile:
    """A binary stream of a file (or of ``data``), decompressed when it is gzip.

    gzip is detected by its magic bytes (``1f 8b``), never by the file name, so ``run.gz``,
    ``run.txt.gz`` and a gzip stream saved as ``run.txt`` all read the same. The path ``-`` is the standard
    input (read as a stream: one pass, memory bounded as for a file).
    """
    if str(path) == STDIN and data is None:
        stream: Any = sys.stdin.buffer
        reader = stream if isinstance(stream, io.BufferedReader) else io.BufferedReader(stream)  # peek needs one
        return gzip.GzipFile(fileobj=reader) if reader.peek(2)[:2] == GZIP_MAGIC else reader
    if data is not None:
        raw: io.BufferedIOBase = io.BytesIO(data)
        return gzip.GzipFile(fileobj=raw) if data[:2] == GZIP_MAGIC else raw
    with open(path, "rb") as f:
        magic = f.read(2)
    return gzip.GzipFile(path, "rb") if magic == GZIP_MAGIC else open(path, "rb")


def iter_text_lines(path: str | os.PathLike[str], data: bytes | None = None) -> Iterator[tuple[int, str]]:
    """Yield ``(line number, stripped text)`` of the non-blank lines of a UTF-8 file (a BOM is dropped).

    A gzip-compressed file (detected by its magic bytes, whatever its name; :func:`open_binary`) is
    read decompressed; line numbers are those of the decompressed text.

    Args:
        path: the file; when ``data`` is given, only the name used in error messages
            (e.g. ``wheel.whl!member`` for a file read from an archive).
        data: the file's bytes, read instead of opening ``path`` (split into lines
            exactly as reading the file would: at ``\\n`` only).

    Raises:
        DataError: ``file:line`` for bytes that are not valid UTF-8; ``file`` for a corrupt or
            truncated gzip stream.
    """
    with open_binary(path, data) as f:
        lineno = 0
        lines = iter(f)
        while True:
            try:
                raw = next(lines)
            except StopIteration:
                return
            except (OSError, EOFError, zlib.error) as e:  # gzip.BadGzipFile is an OSError
                if not isinstance(f, gzip.GzipFile):
                    raise
                raise DataError(f"{path}: corrupt or truncated gzip file after line {lineno} ({e})") from e
            lineno += 1
            line = decode_utf8(raw, f"{path}:{lineno}")
            if lineno == 1:
                line = line.removeprefix("\ufeff")
            line = line.strip()
            if line:
                yield lineno, line


def iter_jsonl(path: str | os.PathLike[str], data: bytes | None = None) -> Iterator[tuple[int, dict[str, Any]]]:
    """Yield ``(line number, object)`` for each non-blank line of a JSON-lines file.

    Args:
        path: the file, or only its display name when ``data`` is given.
        data: the file's bytes (see :func:`iter_text_lines`).

    Raises:
        DataError: ``file:line`` for non-UTF-8 bytes, malformed JSON or a non-object;
            ``file`` for a file without any entry.
    """
    n = 0
    for lineno, line in iter_text_lines(path, data):
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(f"{path}:{lineno}: malformed JSON ({e.msg})") from e
        if not isinstance(row, dict):
            raise DataError(f"{path}:{lineno}: expected a JSON object")
        n += 1
        yield lineno, row
    if n == 0:
        raise DataError(f"{path}: no entries")


# ---------------------------------------------------------------- JSON files (the MetaTool and ToolBench loaders)


def not_utf8(where: str, e: UnicodeDecodeError) -> DataError:
    """The error for bytes that are not UTF-8, at ``where`` (a file, ``file:line`` or ``archive:member``)."""
    return DataError(f"{where}: not UTF-8 ({e.reason} at byte {e.start})")


def decode_utf8(raw: bytes, where: str) -> str:
    """``raw`` decoded as UTF-8; :func:`not_utf8` at ``where`` otherwise."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise not_utf8(where, e) from e


def read_utf8(path: str | os.PathLike[str]) -> str:
    """The text of a UTF-8 file, read as :meth:`pathlib.Path.read_text` does (universal newlines);
    :func:`not_utf8` naming the file otherwise."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise not_utf8(str(p), e) from e


def parse_json(text: str, where: str, **kwargs: Any) -> Any:
    """``json.loads(text, **kwargs)``; DataError ``<where>:<line>: malformed JSON (...)`` otherwise."""
    try:
        return json.loads(text, **kwargs)
    except json.JSONDecodeError as e:
        raise DataError(f"{where}:{e.lineno}: malformed JSON ({e.msg})") from e


def json_string_line(text: str, s: str) -> int:
    """1-based line of the first occurrence of ``s`` as a JSON string literal in ``text`` (0 if not found)."""
    for literal in (json.dumps(s, ensure_ascii=False), json.dumps(s)):
        pos = text.find(literal)
        if pos >= 0:
            return text.count("\n", 0, pos) + 1
    return 0


def read_json_registry(
    path: str | os.PathLike[str], expected: str, entry: Callable[[str, Any, Callable[[], str]], T]
) -> list[tuple[str, T]]:
    """The tools of a registry file holding one JSON object ``{tool name: entry}``, in file order, as
    ``(name, entry(name, value, where))``: ``entry`` checks and converts a tool's value (JSON objects inside
    it are lists of ``(key, value)`` pairs) and calls ``where()`` for the ``file:line`` of the tool's name
    when it raises a DataError.

    Raises:
        DataError: not UTF-8, malformed JSON, not a non-empty JSON object (``expected`` says which, e.g.
            ``{tool_name: description}``), a repeated or empty tool name, or what ``entry`` raises.
    """
    p = Path(path)
    text = read_utf8(p)
    top = parse_json(text, str(p), object_pairs_hook=list)  # every object -> list of (key, value) pairs
    if not isinstance(top, list) or not top or not all(isinstance(item, tuple) for item in top):
        raise DataError(f"{p}: expected a non-empty JSON object {expected}")
    out: list[tuple[str, T]] = []
    seen: set[str] = set()
    for name, value in top:

        def where(name: str = name) -> str:
            return f"{p}:{json_string_line(text, name)}"

        if name in seen:
            raise DataError(f"{where()}: tool {name!r} appears twice in the registry")
        if not name.strip():
            raise DataError(f"{where()}: empty tool name")
        seen.add(name)
        out.append((name, entry(name, value, where)))
    return out
