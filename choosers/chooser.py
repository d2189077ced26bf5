"""The chooser protocol: an LLM (or a model of one) picks exactly one tool from a shortlist.

A *shortlist* is a sequence of :class:`Tool` in the scorer's order (best first). A chooser
returns a :class:`Choice`: the 0-based position of the one tool it picked, or ``None`` when
it picked none (a refusal, or a name that is not in the shortlist), with the raw response
and its token counts.

The study asks for many shortlists per query that are all prefixes of ONE ranking (every
depth policy shows the first K tools of the same ranked list), so the batch entry point is
:meth:`Chooser.choose_prefixes`::

    choose_prefixes(query, ranked_tools, ks) -> {k: choice on ranked_tools[:k] for k in ks}

:class:`BaseChooser` implements it once for every chooser: for each k it computes the cache
key (runtime id, model id, digest of everything the request sends; see
:mod:`choosers.choice_cache`), returns cached choices without any call, and passes only
the missing k to :meth:`BaseChooser._choose_missing`, whose default loops over
:meth:`BaseChooser._choose_one`. A chooser that can share work between prefixes (the local
LM reuses the tool-list prefix) overrides ``_choose_missing``. Each answer is written to the
cache as soon as it arrives (``emit``), so an interrupted study loses nothing answered.
"""

from __future__ import annotations

import hashlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Protocol, runtime_checkable

ChoiceStatus = Literal["ok", "refused", "invalid"]
"""``ok``: a tool of the shortlist was chosen; ``refused``: the model called no tool;
``invalid``: the model named a tool that is not in the shortlist (``Choice.error`` says which)."""

STATUSES: tuple[ChoiceStatus, ...] = ("ok", "refused", "invalid")


class ChooserError(ValueError):
    """A chooser cannot work at all (bad key, unknown model, unreachable endpoint, missing
    package or option). One line, never containing a secret; a ValueError so that the CLI
    prints it as ``shortlist: error: ...`` and exits with status 2."""


@dataclass(frozen=True)
class Tool:
    """One tool as shown to a chooser.

    Attributes:
        name: the tool's name, unique within a shortlist (a registry key).
        description: what the tool does, in the registry's words.
        parameters: JSON schema of the arguments (an object schema with ``properties``),
            as in the registry (BFCL writes ``"type": "dict"``; the OpenAI chooser converts).
        score: the scorer's relevance score of this tool for the query, when known. Only the
            simulated chooser reads it (distractor pull); no request or cache digest includes it.
    """

    name: str
    description: str
    parameters: Mapping[str, Any] = field(default_factory=dict)
    score: float | None = None

    @property
    def param_names(self) -> list[str]:
        """Names of the schema's properties, in schema order."""
        props = self.parameters.get("properties") or {}
        return [str(p) for p in props] if isinstance(props, Mapping) else []

    def spec(self) -> dict[str, Any]:
        """What a request sends about this tool (name, description, parameters), for digests."""
        return {"name": self.name, "description": self.description, "parameters": self.parameters}


@dataclass(frozen=True)
class Choice:
    """A chooser's answer on one shortlist.

    Attributes:
        index: 0-based position of the chosen tool in the shortlist; None when no tool of the
            shortlist was chosen (status ``refused`` or ``invalid``).
        status: ``ok``, ``refused`` or ``invalid`` (see :data:`ChoiceStatus`).
        name: the tool name the model gave (for ``invalid``, the name that is not in the
            shortlist); None for a refusal.
        raw: the raw response text (the API's message as JSON; the local LM's scores as JSON).
        prompt_tokens: tokens of the prompt, as the endpoint or tokenizer counted them.
        completion_tokens: tokens of the answer (the local LM: tokens of the chosen name).
        error: one-line message for ``invalid`` (naming the tool and the query), else "".
        cached: True when this answer was read from the choice cache, not asked for.
    """

    index: int | None
    status: ChoiceStatus
    name: str | None = None
    raw: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    error: str = ""
    cached: bool = False

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"Choice: unknown status {self.status!r}; expected one of {', '.join(STATUSES)}")
        if (self.index is None) != (self.status != "ok"):
            raise ValueError(f"Choice: status {self.status!r} with index {self.index!r} (index is set iff ok)")


@runtime_checkable
class Chooser(Protocol):
    """Anything that picks one tool from a shortlist (see the module docstring)."""

    @property
    def name(self) -> str:
        """Display name (the simulated chooser says it is not an LLM)."""
        ...

    def choose(self, query: str, tools: Sequence[Tool]) -> Choice:
        """The choice on one shortlist ``tools`` (scorer order) for ``query``."""
        ...

    def choose_prefixes(self, query: str, ranked_tools: Sequence[Tool], ks: Iterable[int]) -> dict[int, Choice]:
        """For each k in ``ks``, the choice on the shortlist ``ranked_tools[:k]``."""
        ...


def digest_of(payload: Any) -> str:
    """sha256 hex digest of ``payload`` as canonical JSON (sorted keys, no spaces, UTF-8)."""
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def check_shortlist(tools: Sequence[Tool], what: str = "shortlist") -> None:
    """Raise ValueError (one line) for an empty shortlist or a repeated tool name."""
    if len(tools) == 0:
        raise ValueError(f"{what}: empty (a chooser needs at least one tool)")
    seen: set[str] = set()
    for t in tools:
        if not isinstance(t, Tool):
            raise ValueError(f"{what}: expected Tool items, got {type(t).__name__}")
        if t.name in seen:
            raise ValueError(f"{what}: tool {t.name!r} appears twice")
        seen.add(t.name)


def check_ks(ks: Iterable[int], n_tools: int) -> list[int]:
    """The distinct depths of ``ks`` in increasing order; ValueError unless 1 <= k <= n_tools."""
    out = sorted({int(k) for k in ks})
    if not out:
        raise ValueError("choose_prefixes: no depth k given")
    bad = [k for k in out if not 1 <= k <= n_tools]
    if bad:
        raise ValueError(f"choose_prefixes: depth {bad[0]} outside 1..{n_tools} (the ranking has {n_tools} tools)")
    return out


Emit = Callable[[int, Choice], None]
"""``emit(k, choice)``: hands one fresh answer back (it is cached at once)."""


class ChoiceStore(Protocol):
    """What :class:`BaseChooser` needs of a choice cache (:class:`choosers.choice_cache.ChoiceCache` is
    the one the package ships): a key per request, reading an answer and keeping one. Defined here, so this
    module does not import the cache module that imports it."""

    def key(self, runtime: str, model: str, digest: str) -> Any: ...

    def get(self, key: Any) -> Choice | None: ...

    def put(self, key: Any, choice: Choice, *, query: str, tools: Sequence[str], chooser: str) -> Any: ...


class BaseChooser(ABC):
    """Cache handling and the prefix loop shared by every chooser (see the module docstring).

    Subclasses name their runtime and model, say what a request sends (:meth:`request_digest`)
    and answer one shortlist (:meth:`_choose_one`).
    """

    def __init__(self, cache: ChoiceStore | None = None) -> None:
        self.cache = cache

    @property
    @abstractmethod
    def name(self) -> str:
        """Display name."""

    @property
    @abstractmethod
    def runtime_id(self) -> str:
        """The endpoint (base URL) or local runtime, first part of the cache key."""

    @property
    @abstractmethod
    def model_id(self) -> str:
        """The model, second part of the cache key."""

    @abstractmethod
    def request_digest(self, query: str, tools: Sequence[Tool]) -> str:
        """sha256 of everything sent for this shortlist (query, tools in order with schemas,
        prompt template version, decoding settings): the third part of the cache key."""

    @abstractmethod
    def _choose_one(self, query: str, tools: Sequence[Tool]) -> Choice:
        """Ask for the choice on one shortlist (no cache)."""

    def _choose_missing(self, query: str, ranked_tools: Sequence[Tool], ks: list[int], emit: Emit) -> None:
        """Answer the shortlists ``ranked_tools[:k]`` for each k in ``ks`` (not cached), calling
        ``emit(k, choice)`` for each as soon as it is known. Default: one call per k."""
        for k in ks:
            emit(k, self._choose_one(query, ranked_tools[:k]))

    def choose(self, query: str, tools: Sequence[Tool]) -> Choice:
        """The choice on one shortlist (from the cache when present)."""
        return self.choose_prefixes(query, tools, [len(tools)])[len(tools)]

    def choose_prefixes(self, query: str, ranked_tools: Sequence[Tool], ks: Iterable[int]) -> dict[int, Choice]:
        """For each k in ``ks``, the choice on ``ranked_tools[:k]``; cached choices are reused.

        Raises:
            ValueError: empty query, empty ranking, repeated tool name, k outside 1..len.
            ChooserError: the chooser cannot work (answers received before are cached).
        """
        if not query.strip():
            raise ValueError("choose_prefixes: empty query text")
        ranked = list(ranked_tools)
        check_shortlist(ranked, "ranked tools")
        depths = check_ks(ks, len(ranked))
        out: dict[int, Choice] = {}
        keys = {}
        missing: list[int] = []
        for k in depths:
            if self.cache is None:
                missing.append(k)
                continue
            keys[k] = self.cache.key(self.runtime_id, self.model_id, self.request_digest(query, ranked[:k]))
            hit = self.cache.get(keys[k])
            if hit is None:
                missing.append(k)
            else:
                out[k] = hit

        def emit(k: int, choice: Choice) -> None:
            if self.cache is not None:
                self.cache.put(keys[k], choice, query=query, tools=[t.name for t in ranked[:k]], chooser=self.name)
            out[k] = replace(choice, cached=False)

        if missing:
            self._choose_missing(query, ranked, missing, emit)
        lost = [k for k in depths if k not in out]
        if lost:
            raise RuntimeError(f"{self.name}: no answer for depth(s) {lost}")  # a bug in a chooser, never user input
        return {k: out[k] for k in depths}
