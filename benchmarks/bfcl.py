"""BFCL v4 ``simple_python``: 400 queries, 370 unique functions, one gold function each.

The data ships inside the ``bfcl-eval`` wheel (pinned in
:data:`benchmarks.data.WHEELS`: version 2026.3.23 and the wheel's sha256). Two members
are read, straight from the zip; the package is never installed by this module nor
imported:

- ``bfcl_eval/data/BFCL_v4_simple_python.json`` (JSON lines: id, question, function)
- ``bfcl_eval/data/possible_answer/BFCL_v4_simple_python.json`` (id, ground_truth)

Where the two files come from (:func:`locate_files`; first that applies):

1. ``SHORTLIST_BFCL_DIR``: a folder holding ``BFCL_v4_simple_python.json`` and
   ``possible_answer/BFCL_v4_simple_python.json``, used as is (a missing file is an
   error, never a reason to look elsewhere);
2. the pinned wheel already present, ``<data dir>/bfcl/<wheel>`` then
   ``<cache dir>/bfcl/<wheel>`` (verified: zip archive with the pinned sha256; a bad
   copy is an error);
3. an installed ``bfcl-eval`` distribution, found through :mod:`importlib.metadata`
   (not imported), when both of its files have the pinned content
   (:data:`MEMBER_SHA256`; any version with the same data qualifies);
4. the pinned wheel, downloaded with pip into ``<cache dir>/bfcl/`` (see
   :func:`benchmarks.data.ensure_wheel`), unless downloads are disabled.

Routes 2-4 give byte-identical files, hence the same corpus. Error messages name the
file and line; for a wheel the file is ``<wheel path>!<member>``.

Registry: every distinct function name, in order of first appearance; a function
that appears in several entries keeps its first definition. Tool text (what the
scorers see; :func:`benchmarks.tools.tool_text`, the one rule every tool search shares)
is SPEC's "description + parameter names", exactly::

    "<description> Parameters: <p1>, <p2>, ..."

(parameter names in schema order). The named option ``tool_text="rich"`` (condition
variant ``richtext``, e.g. ``bfcl-bm25-richtext``) puts the function name first::

    "<name with _ and . replaced by spaces>. <description> Parameters: <p1>, <p2>, ..."

The query text is the concatenated content of the user turns. The gold tool is the
function named in ``ground_truth`` (it always equals the entry's own function in v4; a
mismatch or a name missing from the registry is a :class:`DataError` naming the file
and line).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from benchmarks import data
from benchmarks.corpus import DataError, QueryRecord, ToolCorpus, iter_jsonl
from benchmarks.tools import TOOL_TEXTS, tool_text

__all__ = ["TOOL_TEXTS", "load_bfcl", "load_bfcl_schemas", "locate_files", "tool_text"]

QUESTIONS = "bfcl_eval/data/BFCL_v4_simple_python.json"
ANSWERS = "bfcl_eval/data/possible_answer/BFCL_v4_simple_python.json"
ENV_BFCL_DIR = "SHORTLIST_BFCL_DIR"
PROJECT = "bfcl-eval"

#: sha256 of the two members in the pinned wheel (also recorded as ``inputs_sha256``
#: by every BFCL result so far).
MEMBER_SHA256 = {
    QUESTIONS: "82dd63ba502eb2520c6b5d1d9a5c4b590e03ff261565175561f6228a367d1991",
    ANSWERS: "90cd5bc653690ee8e459b5b3f3fc9458606f7f3fcbf795bb51b7dc581f8c86dc",
}

Route = Literal["dir", "wheel", "installed"]


@dataclass(frozen=True)
class BfclSource:
    """Where the BFCL question and answer files are read from (see the module docstring).

    Attributes:
        route: ``"dir"`` (``SHORTLIST_BFCL_DIR`` or explicit paths), ``"wheel"`` or ``"installed"``.
        questions: the questions file; for the wheel route the member name.
        answers: the answers file; for the wheel route the member name.
        wheel: the verified wheel (wheel route only).
    """

    route: Route
    questions: Path | str
    answers: Path | str
    wheel: Path | None = None

    def label(self, which: Literal["questions", "answers"]) -> str:
        """Name used in error messages: the file path, or ``<wheel>!<member>``."""
        item = self.questions if which == "questions" else self.answers
        return f"{self.wheel}!{item}" if self.wheel is not None else str(item)

    def read(self, which: Literal["questions", "answers"]) -> bytes:
        """The bytes of the questions or answers file.

        Raises:
            DataError: the file (or wheel member) is missing or unreadable, naming it.
        """
        item = self.questions if which == "questions" else self.answers
        if self.wheel is not None:
            return data.read_wheel_member(self.wheel, str(item))
        try:
            return Path(item).read_bytes()
        except OSError as e:
            raise DataError(f"BFCL data file missing or unreadable: {item} ({e.strerror})") from e


def _from_dir(base: Path) -> BfclSource:
    q, a = base / "BFCL_v4_simple_python.json", base / "possible_answer" / "BFCL_v4_simple_python.json"
    for p in (q, a):
        if not p.is_file():
            raise DataError(f"BFCL data file missing: {p} ({ENV_BFCL_DIR}={base})")
    return BfclSource("dir", q, a)


def _installed() -> tuple[BfclSource | None, str]:
    """The installed distribution when its files have the pinned content, else ``(None, reason)``."""
    try:
        dist = importlib.metadata.distribution(PROJECT)
    except importlib.metadata.PackageNotFoundError:
        return None, f"{PROJECT} is not installed"
    q, a = Path(str(dist.locate_file(QUESTIONS))), Path(str(dist.locate_file(ANSWERS)))
    for member, path in ((QUESTIONS, q), (ANSWERS, a)):
        if not path.is_file():
            return None, f"the installed {PROJECT} {dist.version} has no {path}"
        if data.file_sha256(path) != MEMBER_SHA256[member]:
            return None, (
                f"the installed {PROJECT} {dist.version} has other data ({path}); "
                f"set {ENV_BFCL_DIR}={path.parent if member == QUESTIONS else path.parent.parent} to use it anyway"
            )
    return BfclSource("installed", q, a), ""


def locate_files(
    data_dir: data.PathLike | None = None,
    cache_dir: data.PathLike | None = None,
    *,
    download: bool = True,
    downloader: data.Downloader | None = None,
) -> BfclSource:
    """Find the BFCL question and answer files (order: see the module docstring).

    Args:
        data_dir: data directory searched for the wheel (default: ``SHORTLIST_DATA_DIR`` / per-user).
        cache_dir: cache directory searched for the wheel, and where a download goes.
        download: allow downloading the pinned wheel with pip (last route).
        downloader: replaces :func:`benchmarks.data.pip_download` (tests).

    Returns:
        The source of the two files.

    Raises:
        DataError: ``SHORTLIST_BFCL_DIR`` lacks a file, a present wheel is bad, or no
            route applies (the message says why each failed).
    """
    override = os.environ.get(ENV_BFCL_DIR)
    if override:
        return _from_dir(Path(override))
    wheel = data.WHEELS["bfcl"]
    if data.find_wheel(wheel, data_dir, cache_dir) is not None:
        return BfclSource("wheel", QUESTIONS, ANSWERS, data.ensure_wheel(wheel, data_dir, cache_dir, download=False))
    source, why_not = _installed()
    if source is not None:
        return source
    if not download:
        raise DataError(
            f"BFCL data not found: no {wheel.filename} in {data.resolve_data_dir(data_dir) / 'bfcl'} or "
            f"{data.resolve_cache_dir(cache_dir) / 'bfcl'}, {why_not}, and downloads are disabled; "
            f"run `shortlist data fetch bfcl` or set {ENV_BFCL_DIR}"
        )
    path = data.ensure_wheel(wheel, data_dir, cache_dir, downloader=downloader)
    return BfclSource("wheel", QUESTIONS, ANSWERS, path)


def _read_jsonl(path: str, content: bytes) -> list[dict]:
    rows = []
    for lineno, row in iter_jsonl(path, content):
        if "id" not in row:
            raise DataError(f"{path}:{lineno}: expected an object with an 'id'")
        if isinstance(row["id"], bool) or not isinstance(row["id"], str | int):
            raise DataError(f"{path}:{lineno}: 'id' must be a string or an integer")
        row["_line"] = lineno
        rows.append(row)
    return rows


def load_bfcl(
    questions: Path | None = None,
    answers: Path | None = None,
    *,
    data_dir: data.PathLike | None = None,
    cache_dir: data.PathLike | None = None,
    download: bool = True,
    source: BfclSource | None = None,
    text_kind: str = "spec",
) -> ToolCorpus:
    """Load BFCL v4 simple_python as a :class:`ToolCorpus` (see module docstring).

    Args:
        questions: the questions file (with ``answers``); default: :func:`locate_files`.
        answers: the answers file (with ``questions``).
        data_dir: data directory searched for the pinned wheel.
        cache_dir: cache directory searched for the wheel, and where a download goes.
        download: allow downloading the pinned wheel with pip.
        source: read from this source instead (overrides everything above).
        text_kind: the tool-text kind (:data:`TOOL_TEXTS`).

    Returns:
        The corpus; ``inputs_sha256`` maps the two package paths (:data:`QUESTIONS`,
        :data:`ANSWERS`) to the sha256 of the bytes read, whatever the route.

    Raises:
        DataError: missing data or malformed content, naming the file (``<wheel>!<member>``
            for the wheel) and line.
        ValueError: only one of ``questions`` and ``answers`` is given.
    """
    if text_kind not in TOOL_TEXTS:
        raise ValueError(f"load_bfcl: unknown tool text {text_kind!r}; expected one of {', '.join(TOOL_TEXTS)}")
    if (questions is None) != (answers is None):
        raise ValueError("load_bfcl: give both the questions and the answers file, or neither")
    if source is None:
        if questions is not None and answers is not None:
            source = BfclSource("dir", Path(questions), Path(answers))
        else:
            source = locate_files(data_dir, cache_dir, download=download)
    q_bytes, a_bytes = source.read("questions"), source.read("answers")
    questions_label, answers_label = source.label("questions"), source.label("answers")
    qrows = _read_jsonl(questions_label, q_bytes)
    answers_by_id = _answers_by_id(answers_label, a_bytes)
    qids: set[str | int] = set()
    registry: dict[str, str] = {}  # function name -> tool text, in order of first appearance
    queries: list[QueryRecord] = []
    for row in qrows:
        where = f"{questions_label}:{row['_line']}"
        if row["id"] in qids:
            raise DataError(f"{where}: duplicate query id {row['id']!r}")
        qids.add(row["id"])
        fns = _functions(row, where)
        for fn in fns:
            if fn["name"] not in registry:
                registry[str(fn["name"])] = tool_text(fn, text_kind)
        text = _query_text(row, where)
        gold = _gold_tools(row, answers_by_id.get(row["id"]), answers_label, fns)
        queries.append(QueryRecord(qid=str(row["id"]), text=text, gold=gold))
    missing = [(q.qid, g) for q in queries for g in q.gold if g not in registry]
    if missing:
        raise DataError(
            f"{answers_label}: gold function {missing[0][1]!r} of query {missing[0][0]!r} is not in the registry"
        )
    return ToolCorpus(
        name="bfcl",
        tool_names=tuple(registry),
        tool_texts=tuple(registry.values()),
        queries=tuple(queries),
        inputs_sha256={QUESTIONS: hashlib.sha256(q_bytes).hexdigest(), ANSWERS: hashlib.sha256(a_bytes).hexdigest()},
    )


def _answers_by_id(label: str, content: bytes) -> dict[str | int, dict]:
    """The rows of the answers file by query id; DataError naming the line of a repeated id."""
    rows: dict[str | int, dict] = {}
    for r in _read_jsonl(label, content):
        if r["id"] in rows:
            raise DataError(f"{label}:{r['_line']}: duplicate query id {r['id']!r}")
        rows[r["id"]] = r
    return rows


def _functions(row: dict, where: str) -> list[dict]:
    """The function definitions of a question row: a non-empty list of named functions, each with
    ``parameters`` that are an object whose ``properties`` are an object; DataError at ``where`` otherwise."""
    fns = row.get("function")
    if (
        not isinstance(fns, list)
        or not fns
        or not all(isinstance(f, dict) and isinstance(f.get("name"), str) and f["name"] for f in fns)
    ):
        raise DataError(f"{where}: 'function' must be a non-empty list of named functions")
    for fn in fns:
        params = fn.get("parameters") or {}
        if not isinstance(params, dict) or not isinstance(params.get("properties") or {}, dict):
            raise DataError(f"{where}: 'parameters' of function {fn['name']!r} must be an object with 'properties'")
    return fns


def _query_text(row: dict, where: str) -> str:
    """The query text of a question row: the content of its user turns, joined by spaces and stripped;
    DataError at ``where`` for a malformed ``question`` or an empty text."""
    try:
        turns = [t for conv in row["question"] for t in conv if t.get("role") == "user"]
        text = " ".join(str(t["content"]) for t in turns).strip()
    except (KeyError, TypeError, AttributeError) as e:
        raise DataError(f"{where}: malformed 'question' ({e!r})") from e
    if not text:
        raise DataError(f"{where}: query {row['id']!r} has empty text")
    return text


def _gold_tools(row: dict, answer: dict | None, answers_label: str, fns: list[dict]) -> tuple[str, ...]:
    """The gold functions of a question row: the names in its answer's ``ground_truth`` (distinct, in order),
    which must be among the row's own functions; DataError naming the answers file (and line) otherwise."""
    if answer is None:
        raise DataError(f"{answers_label}: no ground truth for query {row['id']!r}")
    truth = answer.get("ground_truth")
    if not isinstance(truth, list) or not truth or not all(isinstance(g, dict) and len(g) == 1 for g in truth):
        raise DataError(
            f"{answers_label}:{answer['_line']}: malformed 'ground_truth' (expected a list of {{name: args}})"
        )
    gold = tuple(dict.fromkeys(str(next(iter(g))) for g in truth))
    own = {str(fn["name"]) for fn in fns}
    if not set(gold) <= own:
        raise DataError(
            f"{answers_label}:{answer['_line']}: ground truth {sorted(set(gold) - own)} of query {row['id']!r} "
            f"is not among the entry's own functions {sorted(own)}"
        )
    return gold


def load_bfcl_schemas(
    *,
    data_dir: data.PathLike | None = None,
    cache_dir: data.PathLike | None = None,
    download: bool = True,
    source: BfclSource | None = None,
) -> dict[str, tuple[str, dict]]:
    """The registry's tool schemas: name -> (description, parameters JSON schema).

    Read from the same verified questions file as :func:`load_bfcl` (same lookup order, see
    the module docstring), in registry order (first appearance), and a function defined in
    several entries keeps its first definition, as the loader does: so the keys equal
    ``load_bfcl().tool_names`` and ``tool_text`` of each entry equals the loader's tool text.
    Schemas are returned as written in BFCL (``"type": "dict"``, ``"float"``, ...).

    Args:
        data_dir: data directory searched for the pinned wheel.
        cache_dir: cache directory searched for the wheel, and where a download goes.
        download: allow downloading the pinned wheel with pip.
        source: read from this source instead.

    Raises:
        DataError: missing data or a malformed function entry, naming the file and line.
    """
    if source is None:
        source = locate_files(data_dir, cache_dir, download=download)
    label = source.label("questions")
    out: dict[str, tuple[str, dict]] = {}
    for row in _read_jsonl(label, source.read("questions")):
        fns = row.get("function")
        if not isinstance(fns, list) or not all(isinstance(f, dict) and isinstance(f.get("name"), str) for f in fns):
            raise DataError(f"{label}:{row['_line']}: 'function' must be a list of named functions")
        for fn in fns:
            params = fn.get("parameters") or {}
            if not isinstance(params, dict):
                raise DataError(f"{label}:{row['_line']}: 'parameters' of function {fn['name']!r} must be an object")
            out.setdefault(str(fn["name"]), (str(fn.get("description", "")).strip(), params))
    return out
