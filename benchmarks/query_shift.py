"""Rule-based query shift: the same queries, gold tools and candidate sets, with rewritten query text.

Realistic requests rarely name the tool and are often shorter or sloppier than benchmark queries.
Three seeded, deterministic rewrites (condition variants of the benchmarks' main candidate rule,
e.g. ``metatool-bm25-qtrunc20``) test a trained policy on such text, unchanged:

=========  ==================================================================================
variant    rewrite of every query (train and test: a shift evaluation reads the test split)
=========  ==================================================================================
qnotools   every registry tool name removed (case-insensitive, whole words), in its raw form
           (``get_weather``) and as words (``get weather``: ``_ . - /`` and camelCase split)
qtrunc20   the first 20 whitespace-separated words
qdrop30    each word dropped with probability 0.3 (``default_rng([0, sha256(qid)])``: the same
           words for the same query on every machine); at least the first word is kept
=========  ==================================================================================
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence

import numpy as np

#: variant -> one-line description (the condition's meta records it).
QUERY_SHIFTS: dict[str, str] = {
    "qnotools": "registry tool names removed from the query",
    "qtrunc20": "query truncated to its first 20 words",
    "qdrop30": "each query word dropped with probability 0.3 (seeded by the query id)",
}
TRUNCATE_WORDS = 20
DROP_PROBABILITY = 0.3
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")
_SEPARATORS = re.compile(r"[_./\-]+")


def _name_forms(name: str) -> set[str]:
    words = _SEPARATORS.sub(" ", _CAMEL.sub(" ", name)).split()
    return {f for f in (name.strip(), " ".join(words)) if f and len(f) > 1}


def tool_name_pattern(tool_names: Sequence[str]) -> re.Pattern[str] | None:
    """One case-insensitive whole-word pattern for every tool name's forms (longest first)."""
    forms = sorted({f for n in tool_names for f in _name_forms(n)}, key=len, reverse=True)
    if not forms:
        return None
    return re.compile(r"(?<!\w)(?:" + "|".join(re.escape(f) for f in forms) + r")(?!\w)", re.IGNORECASE)


def strip_tool_names(text: str, pattern: re.Pattern[str] | None) -> str:
    """``text`` without the tool names ``pattern`` matches, whitespace collapsed."""
    return " ".join((pattern.sub(" ", text) if pattern else text).split())


def truncate_words(text: str, n: int = TRUNCATE_WORDS) -> str:
    """The first ``n`` whitespace-separated words."""
    return " ".join(text.split()[:n])


def keyword_dropout(text: str, qid: str, p: float = DROP_PROBABILITY) -> str:
    """Each word dropped with probability ``p``, seeded by the query id; the first word is kept when
    every word would be dropped."""
    words = text.split()
    if not words:
        return ""
    rng = np.random.default_rng([0, int.from_bytes(hashlib.sha256(qid.encode()).digest()[:8], "big")])
    keep = rng.random(len(words)) >= p
    if not keep.any():
        keep[0] = True
    return " ".join(w for w, k in zip(words, keep, strict=True) if k)


def shift_queries(kind: str, texts: Sequence[str], qids: Sequence[str], tool_names: Sequence[str]) -> list[str]:
    """Every query text rewritten by the rule ``kind`` (a key of :data:`QUERY_SHIFTS`)."""
    if kind not in QUERY_SHIFTS:
        raise ValueError(f"unknown query shift {kind!r}; expected one of {', '.join(QUERY_SHIFTS)}")
    if kind == "qnotools":
        pattern = tool_name_pattern(tool_names)
        return [strip_tool_names(t, pattern) for t in texts]
    if kind == "qtrunc20":
        return [truncate_words(t) for t in texts]
    return [keyword_dropout(t, q) for t, q in zip(texts, qids, strict=True)]
