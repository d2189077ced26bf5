"""Persistent cache of choices: one small JSON file per (runtime, model, request digest).

Key: the chooser's runtime id (an endpoint's base URL, or the local runtime), its model id,
and the sha256 digest of everything the request sends (query, the exact shortlist with
schemas and order, prompt template version, temperature, tool_choice; see each chooser's
``request_digest``). A different prompt, order, schema or setting is a different key, so a
stale answer is never reused.

Layout, under ``<cache dir>/choices`` (the cache dir of
:func:`benchmarks.data.resolve_cache_dir`: ``--cache-dir``, else ``$SHORTLIST_CACHE_DIR``,
else the per-user cache)::

    <slug(runtime)>-<sha8(runtime)>/<slug(model)>-<sha8(model)>/<digest[:2]>/<digest>.json

Each file is written with :func:`benchmarks.atomic.atomic_path` (temporary name, then
rename) as soon as its answer arrives, so an interrupted study resumes and loses nothing
already answered, and concurrent writers of the same key both leave a complete file. A file
that cannot be read or whose stored key differs (corruption, a slug collision) counts as a
miss and is overwritten. Records hold the query, the shortlist's tool names, the answer and
its token counts; never a request header, so never an API key. :meth:`ChoiceCache.to_frame`
reads every record back into one DataFrame.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from benchmarks.atomic import atomic_path
from benchmarks.data import PathLike, resolve_cache_dir
from choosers.chooser import STATUSES, Choice

FORMAT = "shortlist-depth choice v1"
FIELDS = ("index", "status", "name", "raw", "prompt_tokens", "completion_tokens", "error")
_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


def slug(text: str, width: int = 48) -> str:
    """A readable, file-name-safe form of ``text`` plus 8 hex digits of its sha256 (collision-free)."""
    readable = _SLUG.sub("_", text).strip("._")[:width] or "x"
    return f"{readable}-{hashlib.sha256(text.encode('utf-8')).hexdigest()[:8]}"


@dataclass(frozen=True)
class ChoiceKey:
    """Identifies one cached choice.

    Attributes:
        runtime: endpoint base URL or local runtime id.
        model: model id.
        digest: sha256 hex digest of everything the request sends.
    """

    runtime: str
    model: str
    digest: str

    def relpath(self) -> Path:
        """Path of the record under the cache root."""
        return Path(slug(self.runtime)) / slug(self.model) / self.digest[:2] / f"{self.digest}.json"


class ChoiceCache:
    """The choice cache under ``root`` (default ``<cache dir>/choices``; see the module docstring)."""

    def __init__(self, root: PathLike | None = None, *, cache_dir: PathLike | None = None) -> None:
        """Args:
        root: the folder of records; default ``<cache dir>/choices``.
        cache_dir: the package cache dir used when ``root`` is None (default: ``$SHORTLIST_CACHE_DIR``).
        """
        self.root = Path(root) if root is not None else resolve_cache_dir(cache_dir) / "choices"

    def key(self, runtime: str, model: str, digest: str) -> ChoiceKey:
        """The key of one request."""
        if not re.fullmatch(r"[0-9a-f]{64}", digest):
            raise ValueError(f"choice cache: digest must be 64 lowercase hex digits, got {digest!r}")
        return ChoiceKey(runtime, model, digest)

    def path(self, key: ChoiceKey) -> Path:
        """The record file of ``key``."""
        return self.root / key.relpath()

    def get(self, key: ChoiceKey) -> Choice | None:
        """The cached choice of ``key`` (``cached=True``), or None when absent or unreadable."""
        path = self.path(key)
        try:
            rec = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(rec, dict) or rec.get("format") != FORMAT:
            return None
        if (rec.get("runtime"), rec.get("model"), rec.get("digest")) != (key.runtime, key.model, key.digest):
            return None
        try:
            return _choice_from_record(rec)
        except (TypeError, ValueError, KeyError):
            return None

    def put(self, key: ChoiceKey, choice: Choice, *, query: str, tools: Sequence[str], chooser: str) -> Path:
        """Write the record of ``choice`` atomically; returns its path.

        Args:
            key: the request's key.
            choice: the answer.
            query: the query text (for reading the cache back).
            tools: the shortlist's tool names, in order.
            chooser: the chooser's display name.
        """
        rec: dict[str, Any] = {
            "format": FORMAT,
            "runtime": key.runtime,
            "model": key.model,
            "digest": key.digest,
            "chooser": chooser,
            "query": query,
            "k": len(tools),
            "tools": list(tools),
            **{f: getattr(choice, f) for f in FIELDS},
            "written_at": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
        }
        path = self.path(key)
        with atomic_path(path, ".json") as tmp:
            tmp.write_text(json.dumps(rec, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        return path

    def drop(self, key: ChoiceKey) -> bool:
        """Remove the record of ``key`` (so the request is asked again); whether there was one."""
        try:
            self.path(key).unlink()
        except FileNotFoundError:
            return False
        return True

    def records(self) -> Iterator[dict[str, Any]]:
        """Every readable record, in path order (temporary files and unreadable files skipped)."""
        if not self.root.is_dir():
            return
        for path in sorted(self.root.rglob("*.json")):
            if path.name.startswith("."):
                continue
            try:
                rec = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(rec, dict) and rec.get("format") == FORMAT:
                yield rec

    def to_frame(self) -> pd.DataFrame:
        """All records as a DataFrame, one row per cached choice.

        Columns: runtime, model, digest, chooser, query, k, tools (names joined by ``|``),
        index, status, name, raw, prompt_tokens, completion_tokens, error, written_at.
        """
        cols = ["runtime", "model", "digest", "chooser", "query", "k", "tools", *FIELDS, "written_at"]
        rows = [{c: ("|".join(r["tools"]) if c == "tools" else r.get(c)) for c in cols} for r in self.records()]
        frame = pd.DataFrame(rows, columns=cols)
        return frame.astype({"k": "int64", "prompt_tokens": "int64", "completion_tokens": "int64", "index": "Int64"})


def _choice_from_record(rec: dict[str, Any]) -> Choice:
    index = rec["index"]
    status = rec["status"]
    if status not in STATUSES or (index is not None and (not isinstance(index, int) or index >= rec["k"])):
        raise ValueError("malformed record")
    return Choice(
        index=index,
        status=status,
        name=rec.get("name"),
        raw=str(rec.get("raw", "")),
        prompt_tokens=int(rec.get("prompt_tokens", 0)),
        completion_tokens=int(rec.get("completion_tokens", 0)),
        error=str(rec.get("error", "")),
        cached=True,
    )
