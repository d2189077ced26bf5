"""ToolBench G1 at the tool level: 474 StableToolBench test queries over 3,406 tools.

Files (pinned in :mod:`benchmarks.data`, obtained through :func:`benchmarks.data.ensure_file`):

- registry: ``toolbench/anytool/tool_details.json`` (``{tool_name: {"tool_description":
  str | null, "score": {...}}}``);
- queries: ``toolbench/stabletoolbench/solvable_queries/test_instruction/G1_{instruction,
  category,tool}.json`` (lists of ``{query, query_id, "relevant APIs": [[tool_name,
  api_name], ...], api_list}``), read in that order;
- API documentation: ``toolbench/toolenv2404_filtered_archive/toolenv2404_filtered.tar.xz``
  (members ``tools/toolenv2404_filtered/<Category>/<tool>.json`` with ``tool_name,
  tool_description, api_list[{name, description, ...}]``).

Registry: every key of ``tool_details.json`` in file order; the registry key is the
exact tool name (names differing only by case or trailing spaces, e.g. ``Weather`` and
``weather``, are distinct tools upstream and stay distinct). A key repeated in the JSON
object is a :class:`DataError` (none in the real file). A null or blank description is
treated as empty (34 tools; counted in ``skipped``).

Archive match: a registry tool matches the archive files whose ``tool_name`` equals its
name exactly. One such file -> that file. Several files (the same name is reused across
categories, e.g. ``QR Code Generator`` in 6 categories) -> the one whose
``tool_description`` equals the registry description (after collapsing whitespace); when
none or several do, the match is ambiguous and the tool falls back to its description
(counted). The query files are never used to choose a file (that would leak gold labels
into the tool texts).

Tool text (what the scorers see) is, exactly::

    "<name>. <description> APIs: <api 1 name>: <api 1 description>; <api 2 name>: ..."

where every component has runs of whitespace collapsed to one space and is stripped,
``_`` is replaced by a space in the tool and API names (text only; the registry key is
unchanged), the description is the registry's (``tool_details.json``), APIs are in the
archive file's order, an API with an empty description contributes its name alone, an
empty tool description gives ``"<name> APIs: ..."``, and a tool with no matched archive
file (or an empty ``api_list``) gets ``"<name>. <description>"`` (``"<name>"`` if the
description is empty too). Texts are not truncated (the 256-token window of MiniLM cuts
long ones; BM25 sees everything).

Queries: ``qid = "<file stem>-<query_id>"`` (e.g. ``G1_tool-394``); text = ``query``
stripped (empty is a :class:`DataError`); gold = the single tool named by the query's
relevant APIs. Counted skips: relevant APIs naming no tool, naming several tools, or a
gold tool missing from the registry. Malformed entries are a :class:`DataError` naming
the file and the line of the entry's ``query_id``.

Archive reading: streamed once with :mod:`tarfile` mode ``r|xz``, never extracted.
Members with an absolute path or a ``..`` component, links and any non-regular,
non-directory member are a :class:`DataError`; so are a truncated or corrupt stream,
a member over 32 MiB, malformed member JSON, and a member path present twice. Regular
files not ending in ``.json`` are ignored. The parsed index (per member: tool_name,
tool_description, API names and descriptions) is cached as JSON in the cache
directory (:func:`benchmarks.data.resolve_cache_dir`), named and keyed by the
archive's sha256 and written atomically (temporary file + :func:`os.replace`); an
unreadable, stale or malformed cache file is rebuilt, an unwritable cache directory
only costs the re-read (a warning).

Measured on the pinned files: 12,301 member files, 46,803 APIs, 11,984 distinct
``tool_name`` values (201 of them shared by several files). Of the 3,406 registry
tools, 2,624 match one file, 69 more are resolved by description among several, 29
are ambiguous and 684 are absent: 2,693 (79.1%) get API text. 474 queries, all with
exactly one gold tool present in the registry (0 skipped), 339 distinct gold tools, of
which 267 get API text (257 unique + 10 resolved by description; 6 ambiguous, 66
absent; 273 have at least one archive file with their exact name, as
``data/SOURCES.md`` says); 6 gold tools have an empty registry description.

``ToolCorpus.skipped`` carries every fallback and skip under a descriptive key (the
``SKIP_*`` constants): empty descriptions (34), tools absent from the archive (684),
ambiguous archive matches (29), distinct gold tools without API text (72), and the
three query skips (0, 0, 0).
"""

from __future__ import annotations

import json
import lzma
import os
import re
import tarfile
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from benchmarks.atomic import atomic_path
from benchmarks.corpus import (
    DataError,
    QueryRecord,
    ToolCorpus,
    decode_utf8,
    parse_json,
    read_json_registry,
    read_utf8,
)
from benchmarks.data import ensure_file, file_sha256, resolve_cache_dir

DATASET = "toolbench"
REGISTRY = "toolbench/anytool/tool_details.json"
QUERY_DIR = "toolbench/stabletoolbench/solvable_queries/test_instruction"
QUERIES = tuple(f"{QUERY_DIR}/G1_{kind}.json" for kind in ("instruction", "category", "tool"))
ARCHIVE = "toolbench/toolenv2404_filtered_archive/toolenv2404_filtered.tar.xz"

CACHE_FORMAT = "shortlist-depth/toolenv-index/1"
MAX_MEMBER_BYTES = 32 << 20

SKIP_EMPTY_DESC = "registry tools with an empty description (text starts with the name)"
SKIP_NOT_IN_ARCHIVE = "registry tools with no archive file of that name (text = name + description)"
SKIP_AMBIGUOUS = (
    "registry tools with several archive files, none or several matching the description (text = name + description)"
)
SKIP_GOLD_NO_APIS = "distinct gold tools without archive API text"
SKIP_NO_TOOL = "queries whose relevant APIs name no tool"
SKIP_SEVERAL_TOOLS = "queries whose relevant APIs name several tools"
SKIP_GOLD_MISSING = "queries whose gold tool is not in the registry"


@dataclass(frozen=True)
class ArchiveTool:
    """One per-tool JSON file of the archive, reduced to what the tool text needs.

    Attributes:
        member: member path inside the archive.
        tool_name: the file's ``tool_name``.
        tool_description: the file's ``tool_description`` ("" when null).
        apis: (API name, API description) pairs in file order.
    """

    member: str
    tool_name: str
    tool_description: str
    apis: tuple[tuple[str, str], ...]


def _clean(s: str) -> str:
    return " ".join(s.split())


def tool_text(name: str, description: str, apis: Sequence[tuple[str, str]] = ()) -> str:
    """The exact text scorers see for one ToolBench tool (see module docstring).

    Args:
        name: registry tool name.
        description: registry tool description ("" if none).
        apis: (API name, API description) pairs of the matched archive file, or empty.

    Returns:
        The tool text.
    """
    pretty = _clean(name.replace("_", " "))
    desc = _clean(description)
    head = f"{pretty}. {desc}" if desc else pretty
    parts: list[str] = []
    for api_name, api_desc in apis:
        an, ad = _clean(api_name.replace("_", " ")), _clean(api_desc)
        part = f"{an}: {ad}" if an and ad else (an or ad)
        if part:
            parts.append(part)
    return f"{head} APIs: {'; '.join(parts)}" if parts else head


# ---------------------------------------------------------------------------- registry


def read_registry(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """The tools of ``tool_details.json`` as (name, description) in file order.

    Args:
        path: the JSON file.

    Returns:
        The tools; a null description becomes "".

    Raises:
        DataError: malformed JSON or structure, a repeated or empty tool name
            (:func:`benchmarks.corpus.read_json_registry`).
    """
    return read_json_registry(path, "{tool_name: {tool_description: ...}}", _registry_description)


def _registry_description(name: str, value: Any, where: Callable[[], str]) -> str:
    """A tool's ``tool_description`` in ``tool_details.json`` ("" when null or absent); DataError at ``where()``
    when its entry is not an object or the description not a string or null."""
    if not isinstance(value, list) or not all(isinstance(kv, tuple) for kv in value):
        raise DataError(f"{where()}: the entry of tool {name!r} must be an object")
    desc = dict(value).get("tool_description")
    if desc is not None and not isinstance(desc, str):
        raise DataError(f"{where()}: tool_description of {name!r} must be a string or null")
    return desc or ""


# ---------------------------------------------------------------------------- archive


def _check_member(archive: Path, m: tarfile.TarInfo) -> bool:
    """Validate one member; True when it is a regular file to read."""
    name = m.name
    parts = PurePosixPath(name).parts
    if name.startswith(("/", "\\")) or PurePosixPath(name).is_absolute() or re.match(r"^[A-Za-z]:", name):
        raise DataError(f"{archive}: member {name!r} has an absolute path")
    if ".." in parts or ".." in name.split("\\"):
        raise DataError(f"{archive}: member {name!r} has a '..' component")
    if m.issym() or m.islnk():
        raise DataError(f"{archive}: member {name!r} is a link (to {m.linkname!r}); links are not allowed")
    if m.isdir():
        return False
    if not m.isreg():
        raise DataError(f"{archive}: member {name!r} is not a regular file (tar type {m.type!r})")
    if m.size > MAX_MEMBER_BYTES:
        raise DataError(f"{archive}: member {name!r} is {m.size} bytes (limit {MAX_MEMBER_BYTES})")
    return True


def _parse_member(archive: Path, member: str, raw: bytes) -> ArchiveTool:
    where = f"{archive}:{member}"
    d = parse_json(decode_utf8(raw, where), where)
    if not isinstance(d, dict):
        raise DataError(f"{where}: expected a JSON object")
    name = d.get("tool_name")
    if not isinstance(name, str) or not name.strip():
        raise DataError(f"{where}: missing or empty 'tool_name'")
    desc = d.get("tool_description")
    if desc is not None and not isinstance(desc, str):
        raise DataError(f"{where}: 'tool_description' must be a string or null")
    api_list = d.get("api_list")
    if not isinstance(api_list, list):
        raise DataError(f"{where}: 'api_list' must be a list")
    apis: list[tuple[str, str]] = []
    for i, api in enumerate(api_list):
        if not isinstance(api, dict) or not isinstance(api.get("name"), str):
            raise DataError(f"{where}: api_list[{i}] must be an object with a string 'name'")
        adesc = api.get("description")
        if adesc is not None and not isinstance(adesc, str):
            raise DataError(f"{where}: api_list[{i}].description must be a string or null")
        apis.append((api["name"], adesc or ""))
    return ArchiveTool(member=member, tool_name=name, tool_description=desc or "", apis=tuple(apis))


def read_archive(path: str | os.PathLike[str]) -> list[ArchiveTool]:
    """Stream the archive once (``r|xz``) and parse every ``.json`` member, in archive order.

    Args:
        path: the ``.tar.xz`` file.

    Returns:
        One :class:`ArchiveTool` per JSON member.

    Raises:
        DataError: truncated/corrupt stream, unsafe or non-regular member, malformed JSON.
    """
    archive = Path(path)
    tools: list[ArchiveTool] = []
    seen: set[str] = set()
    try:
        with tarfile.open(archive, mode="r|xz") as tf:
            for m in tf:
                if not _check_member(archive, m):
                    continue
                if m.name in seen:
                    raise DataError(f"{archive}: member {m.name!r} appears twice")
                seen.add(m.name)
                if not m.name.endswith(".json"):
                    continue
                f = tf.extractfile(m)
                if f is None:  # pragma: no cover - regular files always have data
                    raise DataError(f"{archive}: member {m.name!r} has no data")
                raw = f.read()
                if len(raw) != m.size:
                    raise DataError(f"{archive}: member {m.name!r} is truncated")
                tools.append(_parse_member(archive, m.name, raw))
    except (tarfile.TarError, lzma.LZMAError, EOFError, OSError) as e:
        raise DataError(f"{archive}: truncated or corrupt archive ({type(e).__name__}: {e})") from e
    if not tools:
        raise DataError(f"{archive}: no per-tool JSON members")
    return tools


def _cache_path(cache_dir: Path, archive_sha256: str) -> Path:
    return cache_dir / f"toolenv-index-{archive_sha256}.json"


def _load_cache(path: Path, archive_sha256: str) -> list[ArchiveTool] | None:
    """The cached index, or None when absent, unreadable, stale or malformed."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        if doc.get("format") != CACHE_FORMAT or doc.get("archive_sha256") != archive_sha256:
            return None
        out = []
        for member, name, desc, apis in doc["tools"]:
            pairs = tuple((str(a), str(b)) for a, b in apis)
            if not all(isinstance(x, str) for x in (member, name, desc)):
                return None
            out.append(ArchiveTool(member=member, tool_name=name, tool_description=desc, apis=pairs))
        return out or None
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def _save_cache(path: Path, archive_sha256: str, tools: Sequence[ArchiveTool]) -> None:
    doc = {
        "format": CACHE_FORMAT,
        "archive_sha256": archive_sha256,
        "tools": [[t.member, t.tool_name, t.tool_description, [list(a) for a in t.apis]] for t in tools],
    }
    try:
        with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False)
    except OSError as e:
        warnings.warn(f"could not write the ToolBench archive index cache {path}: {e}", stacklevel=3)


def archive_index(
    path: str | os.PathLike[str], cache_dir: str | os.PathLike[str] | None = None
) -> tuple[list[ArchiveTool], bool]:
    """Parsed archive members, from the JSON cache when it holds this archive's sha256.

    Args:
        path: the ``.tar.xz`` file.
        cache_dir: cache directory (explicit > ``SHORTLIST_CACHE_DIR`` > per-user cache).

    Returns:
        The members (archive order) and whether they came from the cache.

    Raises:
        DataError: see :func:`read_archive` (only on a cache miss).
    """
    sha = file_sha256(path)
    cpath = _cache_path(resolve_cache_dir(cache_dir), sha)
    cached = _load_cache(cpath, sha)
    if cached is not None:
        return cached, True
    tools = read_archive(path)
    _save_cache(cpath, sha, tools)
    return tools, False


def match_archive(
    registry: Sequence[tuple[str, str]], archive: Sequence[ArchiveTool]
) -> tuple[dict[str, ArchiveTool], set[str], set[str]]:
    """Match registry tools to archive files (rule in the module docstring).

    Args:
        registry: (name, description) pairs.
        archive: parsed archive members.

    Returns:
        (name -> matched file, names without any file of that name, ambiguous names).
    """
    by_name: dict[str, list[ArchiveTool]] = {}
    for t in archive:
        by_name.setdefault(t.tool_name, []).append(t)
    matched: dict[str, ArchiveTool] = {}
    absent: set[str] = set()
    ambiguous: set[str] = set()
    for name, desc in registry:
        cands = by_name.get(name, [])
        if not cands:
            absent.add(name)
            continue
        if len(cands) > 1:
            cands = [c for c in cands if _clean(c.tool_description) == _clean(desc)]
        if len(cands) == 1:
            matched[name] = cands[0]
        else:
            ambiguous.add(name)
    return matched, absent, ambiguous


# ---------------------------------------------------------------------------- queries


def _line_of_query(text: str, query_id: object) -> int:
    m = re.search(r'"query_id"\s*:\s*' + re.escape(json.dumps(query_id)) + r"(?![0-9])", text)
    return text.count("\n", 0, m.start()) + 1 if m else 0


def read_queries(path: str | os.PathLike[str]) -> list[tuple[str, int | str, str, tuple[str, ...]]]:
    """Queries of one ``G1_*.json`` file as (qid, raw query_id, text, distinct relevant tools).

    Args:
        path: the JSON file (a list of query objects).

    Returns:
        One tuple per entry, in file order; tools in order of first mention.

    Raises:
        DataError: malformed JSON or entry (file and line named), empty query text.
    """
    p = Path(path)
    text = read_utf8(p)
    data = parse_json(text, str(p))
    if not isinstance(data, list):
        raise DataError(f"{p}: expected a JSON list of queries")
    out: list[tuple[str, int | str, str, tuple[str, ...]]] = []
    for i, entry in enumerate(data):
        if not isinstance(entry, dict) or "query_id" not in entry:
            raise DataError(f"{p}: entry {i} is not an object with a 'query_id'")
        query_id = entry["query_id"]

        def where(i: int = i, query_id: object = query_id) -> str:
            return f"{p}:{_line_of_query(text, query_id)} (entry {i}, query_id {query_id!r})"

        if not isinstance(query_id, int | str) or isinstance(query_id, bool):
            raise DataError(f"{where()}: query_id must be an integer or string")
        query = entry.get("query")
        if not isinstance(query, str):
            raise DataError(f"{where()}: 'query' must be a string")
        if not query.strip():
            raise DataError(f"{where()}: empty query text")
        rel = entry.get("relevant APIs")
        if not isinstance(rel, list) or not all(
            isinstance(r, list) and len(r) == 2 and all(isinstance(x, str) for x in r) for r in rel
        ):
            raise DataError(f"{where()}: 'relevant APIs' must be a list of [tool_name, api_name] pairs")
        tools = tuple(dict.fromkeys(r[0] for r in rel))
        out.append((f"{p.stem}-{query_id}", query_id, query.strip(), tools))
    return out


# ---------------------------------------------------------------------------- loader


def load_toolbench_files(
    registry: str | os.PathLike[str],
    query_files: Sequence[str | os.PathLike[str]],
    archive: str | os.PathLike[str],
    cache_dir: str | os.PathLike[str] | None = None,
) -> ToolCorpus:
    """Build the ToolBench corpus from explicit files (no pinned-digest check).

    Args:
        registry: ``tool_details.json``.
        query_files: ``G1_*.json`` query files (qids are prefixed with each file's stem).
        archive: the ``toolenv2404_filtered.tar.xz`` archive.
        cache_dir: cache directory for the parsed archive index.

    Returns:
        The corpus (see module docstring).

    Raises:
        DataError: malformed input (file and position named), corrupt archive.
    """
    tools = read_registry(registry)
    members, _ = archive_index(archive, cache_dir)
    matched, absent, ambiguous = match_archive(tools, members)
    names = tuple(n for n, _ in tools)
    texts = tuple(tool_text(n, d, matched[n].apis if n in matched else ()) for n, d in tools)
    known = set(names)
    skipped = {
        SKIP_EMPTY_DESC: sum(1 for _, d in tools if not d.strip()),
        SKIP_NOT_IN_ARCHIVE: len(absent),
        SKIP_AMBIGUOUS: len(ambiguous),
        SKIP_NO_TOOL: 0,
        SKIP_SEVERAL_TOOLS: 0,
        SKIP_GOLD_MISSING: 0,
    }
    queries: list[QueryRecord] = []
    seen: dict[str, str] = {}
    for qf in query_files:
        for qid, query_id, text, rel_tools in read_queries(qf):
            if qid in seen:
                line = _line_of_query(Path(qf).read_text(encoding="utf-8"), query_id)
                raise DataError(f"{qf}:{line}: query id {qid!r} already used in {seen[qid]}")
            seen[qid] = str(qf)
            if not rel_tools:
                skipped[SKIP_NO_TOOL] += 1
            elif len(rel_tools) > 1:
                skipped[SKIP_SEVERAL_TOOLS] += 1
            elif rel_tools[0] not in known:
                skipped[SKIP_GOLD_MISSING] += 1
            else:
                queries.append(QueryRecord(qid=qid, text=text, gold=rel_tools))
    gold = {q.gold[0] for q in queries}
    skipped[SKIP_GOLD_NO_APIS] = sum(1 for g in gold if not (g in matched and matched[g].apis))
    if not queries:
        raise DataError(f"no usable query in {[str(q) for q in query_files]}")
    sha = {REGISTRY: file_sha256(registry), ARCHIVE: file_sha256(archive)}
    for qf in query_files:
        sha[f"{QUERY_DIR}/{Path(qf).name}"] = file_sha256(qf)
    return ToolCorpus(
        name="toolbench",
        tool_names=names,
        tool_texts=texts,
        queries=tuple(queries),
        inputs_sha256=sha,
        skipped=skipped,
    )


def load_toolbench(
    data_dir: str | os.PathLike[str] | None = None, cache_dir: str | os.PathLike[str] | None = None
) -> ToolCorpus:
    """Load ToolBench G1 as a :class:`ToolCorpus` from verified pinned files (see module docstring).

    Args:
        data_dir: data directory (explicit > ``SHORTLIST_DATA_DIR`` > per-user cache); missing
            downloadable files are fetched, the archive must already be there.
        cache_dir: cache directory for the parsed archive index (explicit >
            ``SHORTLIST_CACHE_DIR`` > per-user cache).

    Returns:
        The corpus named ``toolbench``.

    Raises:
        DataError: missing or corrupted files, malformed content.
    """
    registry = ensure_file(DATASET, REGISTRY, data_dir)
    query_files = [ensure_file(DATASET, q, data_dir) for q in QUERIES]
    archive = ensure_file(DATASET, ARCHIVE, data_dir)
    return load_toolbench_files(registry, query_files, archive, cache_dir)
