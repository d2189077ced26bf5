"""BFCL v4 ``simple_python``: 400 queries, 370 unique functions, one gold function each.

The data ships inside the ``bfcl-eval`` PyPI package (install it with ``--no-deps``:
only its data files are read, the package is never imported). Files are located
through :mod:`importlib.metadata`:

- ``bfcl_eval/data/BFCL_v4_simple_python.json`` (JSON lines: id, question, function)
- ``bfcl_eval/data/possible_answer/BFCL_v4_simple_python.json`` (id, ground_truth)

Registry: every distinct function name, in order of first appearance; a function
that appears in several entries keeps its first definition. Tool text (what the
scorers see) is, exactly::

    "<name with _ and . replaced by spaces>. <description> Parameters: <p1>, <p2>, ..."

(parameter names in schema order). The query text is the concatenated content of
the user turns. The gold tool is the function named in ``ground_truth`` (it always
equals the entry's own function in v4; a mismatch or a name missing from the
registry is a :class:`DataError` naming the file and line).
"""

from __future__ import annotations

import importlib.metadata
import os
from pathlib import Path

from benchmarks.corpus import DataError, QueryRecord, ToolCorpus, iter_jsonl, sha256_file

QUESTIONS = "bfcl_eval/data/BFCL_v4_simple_python.json"
ANSWERS = "bfcl_eval/data/possible_answer/BFCL_v4_simple_python.json"


def locate_files() -> tuple[Path, Path]:
    """Paths of the question and answer files inside the installed ``bfcl-eval`` distribution.

    ``SHORTLIST_BFCL_DIR`` (a folder holding ``BFCL_v4_simple_python.json`` and
    ``possible_answer/BFCL_v4_simple_python.json``) overrides the package lookup.
    """
    override = os.environ.get("SHORTLIST_BFCL_DIR")
    if override:
        base = Path(override)
        q, a = base / "BFCL_v4_simple_python.json", base / "possible_answer" / "BFCL_v4_simple_python.json"
    else:
        try:
            dist = importlib.metadata.distribution("bfcl-eval")
        except importlib.metadata.PackageNotFoundError as e:
            raise DataError(
                "BFCL data not found: install it with `pip install --no-deps bfcl-eval` "
                "(only its data files are used) or set SHORTLIST_BFCL_DIR"
            ) from e
        q, a = Path(str(dist.locate_file(QUESTIONS))), Path(str(dist.locate_file(ANSWERS)))
    for p in (q, a):
        if not p.is_file():
            raise DataError(f"BFCL data file missing: {p}")
    return q, a


def _read_jsonl(path: Path) -> list[dict]:
    rows = []
    for lineno, row in iter_jsonl(path):
        if "id" not in row:
            raise DataError(f"{path}:{lineno}: expected an object with an 'id'")
        if isinstance(row["id"], bool) or not isinstance(row["id"], str | int):
            raise DataError(f"{path}:{lineno}: 'id' must be a string or an integer")
        row["_line"] = lineno
        rows.append(row)
    return rows


def tool_text(fn: dict) -> str:
    """The exact text scorers see for one BFCL function definition (see module docstring)."""
    name = str(fn["name"])
    desc = str(fn.get("description", "")).strip()
    props = (fn.get("parameters") or {}).get("properties") or {}
    params = ", ".join(props.keys())
    pretty = name.replace("_", " ").replace(".", " ")
    return f"{pretty}. {desc} Parameters: {params}".strip()


def load_bfcl(questions: Path | None = None, answers: Path | None = None) -> ToolCorpus:
    """Load BFCL v4 simple_python as a :class:`ToolCorpus` (see module docstring)."""
    if (questions is None) != (answers is None):
        raise ValueError("load_bfcl: give both the questions and the answers file, or neither")
    if questions is None or answers is None:
        questions, answers = locate_files()
    qrows = _read_jsonl(questions)
    arows: dict[str, dict] = {}
    for r in _read_jsonl(answers):
        if r["id"] in arows:
            raise DataError(f"{answers}:{r['_line']}: duplicate query id {r['id']!r}")
        arows[r["id"]] = r
    qids: set[str] = set()
    names: list[str] = []
    texts: list[str] = []
    seen: set[str] = set()
    queries: list[QueryRecord] = []
    for row in qrows:
        where = f"{questions}:{row['_line']}"
        if row["id"] in qids:
            raise DataError(f"{where}: duplicate query id {row['id']!r}")
        qids.add(row["id"])
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
        for fn in fns:
            if fn["name"] not in seen:
                seen.add(fn["name"])
                names.append(str(fn["name"]))
                texts.append(tool_text(fn))
        try:
            turns = [t for conv in row["question"] for t in conv if t.get("role") == "user"]
            text = " ".join(str(t["content"]) for t in turns).strip()
        except (KeyError, TypeError, AttributeError) as e:
            raise DataError(f"{where}: malformed 'question' ({e!r})") from e
        if not text:
            raise DataError(f"{where}: query {row['id']!r} has empty text")
        ans = arows.get(row["id"])
        if ans is None:
            raise DataError(f"{answers}: no ground truth for query {row['id']!r}")
        truth = ans.get("ground_truth")
        if not isinstance(truth, list) or not truth or not all(isinstance(g, dict) and len(g) == 1 for g in truth):
            raise DataError(f"{answers}:{ans['_line']}: malformed 'ground_truth' (expected a list of {{name: args}})")
        gold = tuple(dict.fromkeys(str(next(iter(g))) for g in truth))
        own = {str(fn["name"]) for fn in fns}
        if not set(gold) <= own:
            raise DataError(
                f"{answers}:{ans['_line']}: ground truth {sorted(set(gold) - own)} of query {row['id']!r} "
                f"is not among the entry's own functions {sorted(own)}"
            )
        queries.append(QueryRecord(qid=str(row["id"]), text=text, gold=gold))
    missing = [(q.qid, g) for q in queries for g in q.gold if g not in seen]
    if missing:
        raise DataError(f"{answers}: gold function {missing[0][1]!r} of query {missing[0][0]!r} is not in the registry")
    return ToolCorpus(
        name="bfcl",
        tool_names=tuple(names),
        tool_texts=tuple(texts),
        queries=tuple(queries),
        inputs_sha256={QUESTIONS: sha256_file(str(questions)), ANSWERS: sha256_file(str(answers))},
    )
