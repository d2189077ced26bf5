"""A tool search with a per-request depth: ``ToolSearch.from_tools(tools).search(text)`` in place of "top 5".

>>> from shortlist_depth import ToolSearch
>>> search = ToolSearch.from_tools(openai_tools)                     # doctest: +SKIP
>>> shortlist = search.search("What's the weather in Paris?")        # doctest: +SKIP
>>> shortlist.names, shortlist.k, shortlist.why                      # doctest: +SKIP

A :class:`ToolSearch` ranks a tool registry for a request with one of the package's scorers (``bm25``,
``minilm``, or a hybrid: rank by one, observe both; :mod:`benchmarks.tool_ranking`) and lets a depth policy
choose how many of the top tools to show (K per request, from the scores alone). The tools come in any shape
an agent holds them (:mod:`benchmarks.tools`: an OpenAI ``tools`` list, an MCP ``tools/list`` result, bare
``{name, description, parameters}`` dicts), and a :class:`Shortlist` gives them back as given.

The policy: by default the one shipped inside the package for the scorer (``shortlist_depth/default_policy/``,
chosen and trained by ``shortlist toolsearch default`` on BFCL, MetaTool and ToolBench; see
``results/toolsearch/default-policy/``), or any trained policy: a :class:`~agents.trained.TrainedPolicy`
(``shortlist_depth.fit``), a run directory (``shortlist recommend --tools ... --log ...`` saves a ready
searcher under ``OUT/searcher``). A policy records the scorer it was trained on (its scorer identity and
observation set; :func:`policy_scorer`); one trained with another scorer is refused in one line. A policy that
records none (fitted from Python on your own ranked lists) is trusted to match, and is checked to read this
scorer's observation set.

Pinned tools are shown on every shortlist, first, in the order given, IN ADDITION to the policy's K: they are
left out of the ranked list the policy reads (so they are never shown twice, and K counts ranked tools only).
Excluded tools are never ranked. Both leave the BM25 statistics of the registry as they are (the index is the
registry's). ``min_k`` / ``max_k`` clip the policy's K (and K never exceeds the tools left to rank); ``max_k``
is :data:`DEFAULT_MAX_K` (20) unless the caller gives another bound or ``None`` (no bound). A list with no ranking
information, every ranked tool scored the same by the ranking scorer (a request that shares no word with any tool
under BM25), shows ``min_k`` tools (1 by default) whatever the policy says: any shortlist of it is a random draw
of the registry, as likely to hold the right tool per tool shown as chance, so a longer one costs tokens and buys
no selectivity (docs/toolsearch.md).

:class:`SearchSpec` is the scorer and policy without a registry (the library's defaults resolved and checked):
``ToolSearch.from_tools`` is ``SearchSpec.create(scorer, policy).over(tools)``, and a server that gets its tools
per request (the OpenAI proxy, the MCP proxy) holds one.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agents.method import MethodSpec
from agents.trained import TrainedPolicy, load_policy
from benchmarks.tool_ranking import (
    SEARCH_SCORERS,
    RegistryRanker,
    identity_mismatch,
    rank_candidates,
    resolve_scorer,
    scorer_identity,
    scorer_observation,
)
from benchmarks.tools import ToolSchema, parse_tools, read_tools_file, registry_digest
from envs import RankedQuery

__all__ = [
    "DEFAULT_MAX_K",
    "DEFAULT_POLICY_DIR",
    "FORMAT",
    "SEARCH_DESCRIPTION",
    "TOOL_SEARCH_PARAMETERS",
    "SearchSpec",
    "Shortlist",
    "ToolSearch",
    "default_policy_path",
    "k_bounds",
    "policy_scorer",
    "responses_function",
]

#: The most ranked tools a shortlist shows unless the caller says otherwise (``max_k=None``: no bound). Every tool
#: search the issue cites returns 3-8 tools, and the downstream study's chooser answered for at most 20.
DEFAULT_MAX_K = 20
#: Where the default policies ship: one run directory per scorer (``bm25``, ``minilm``, ...).
DEFAULT_POLICY_DIR = Path(__file__).resolve().parent / "default_policy"
#: The format of a saved searcher's ``searcher.json``.
FORMAT = "shortlist-depth toolsearch 1"
#: The files of a saved searcher, besides ``searcher.json`` (which records their sha256).
SAVED_FILES = ("tools.json", "policy/config.json")
#: What a search tool tells the model: the MCP server's ``search_tools``, and the client-executed ``tool_search`` of
#: OpenAI's Responses API (:meth:`ToolSearch.openai_tool_search_tool`).
SEARCH_DESCRIPTION = (
    "Find the tools for a task. Give the user's request (or the step at hand) as the query; the answer lists "
    "the tools worth considering for it, best first, each with its name, description and input schema. How many "
    "it lists depends on the request. Call one of them by its name."
)
#: The arguments a client-executed ``tool_search`` asks the model for: the request, in its words.
TOOL_SEARCH_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {"query": {"type": "string", "description": "The user's request, or the step at hand."}},
    "required": ["query"],
    "additionalProperties": False,
}
_RANKERS: OrderedDict[tuple[str, str, str], RegistryRanker] = OrderedDict()
_RANKERS_KEPT = 16


@dataclass(frozen=True)
class Shortlist:
    """The tools to show for one request.

    Attributes:
        request: the request text.
        tools: the chosen tools' schemas as they were given (OpenAI or MCP shape): the pinned tools first, then
            the top K ranked tools in rank order. (The searcher's own objects: copy before changing them.)
        names: their names, in the same order.
        k: the number of ranked tools shown (the policy's K after ``min_k`` / ``max_k``; pinned tools extra).
        scores: the ranking scorer's score of each tool in ``tools``.
        pinned: the names of the pinned tools (the first ``len(pinned)`` of ``names``).
        why: how K was chosen: ``method`` and ``kind`` of the policy, ``policy_k`` (its K before clipping),
            ``max_k`` (the upper bound applied, None for none), ``clipped`` (``min_k`` / ``max_k`` / ``list`` when
            a bound changed it, ``tied`` when every ranked tool scored the same and ``min_k`` tools are shown, else
            None), ``n_ranked`` (the tools ranked) and, where the policy has one, ``estimate`` (e.g. the
            posterior's ``p_found``, P(a relevant tool is among the K), and ``expected_net_reward``).
    """

    request: str
    tools: tuple[dict[str, Any], ...]
    names: tuple[str, ...]
    k: int
    scores: tuple[float, ...]
    pinned: tuple[str, ...]
    why: dict[str, Any]

    def as_tool_references(self) -> list[dict[str, str]]:
        """The ``tool_reference`` blocks a client-side Anthropic tool search returns, one per tool in order."""
        return [{"type": "tool_reference", "tool_name": name} for name in self.names]

    def as_tool_search_output(self, call_id: str | None) -> dict[str, Any]:
        """The ``tool_search_output`` item that answers an OpenAI Responses API client-executed ``tool_search_call``
        (its ``call_id``): the tools in the Responses API's function shape (:func:`responses_function`), in order.
        :meth:`ToolSearch.answer_tool_search_call` reads the call and searches."""
        return {"type": "tool_search_output", "call_id": call_id, "execution": "client", "status": "completed",
                "tools": [responses_function(t) for t in self.tools]}  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        """A plain dict (JSON-serialisable)."""
        return {
            "request": self.request,
            "names": list(self.names),
            "k": self.k,
            "pinned": list(self.pinned),
            "scores": list(self.scores),
            "why": self.why,
            "tools": list(self.tools),
        }


def responses_function(schema: Mapping[str, Any]) -> dict[str, Any]:
    """A tool's schema (any shape :func:`benchmarks.tools.parse_tool` reads) in the Responses API's function shape,
    ``{"type": "function", "name", "description", "parameters", ...}``: Chat Completions' ``function`` lifted, an MCP
    tool's ``inputSchema`` as its ``parameters`` (its other MCP keys left out), a flat one as it is; without
    ``defer_loading`` (a tool search's answer loads it)."""
    if schema.get("type") == "function" and isinstance(schema.get("function"), Mapping):
        flat = {"type": "function", **schema["function"]}
    elif "inputSchema" in schema:
        flat = {"type": "function", "name": schema.get("name"), "parameters": schema["inputSchema"]}
        if schema.get("description") is not None:
            flat["description"] = schema["description"]
    else:
        flat = {"type": "function", **schema}
    flat.pop("defer_loading", None)
    return flat


def _call_field(call: object, key: str) -> Any:
    """A field of a provider's call (a ``tool_search_call``, a ``tool_use`` block) given as a dict or as the SDK's
    object."""
    return call.get(key) if isinstance(call, Mapping) else getattr(call, key, None)


def _query(arguments: object, what: str) -> str:
    """The ``query`` of a tool search call's arguments (an object, or its JSON); ValueError naming ``what``."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as e:
            raise ValueError(f"{what}: its arguments are not JSON ({e})") from e
    query = arguments.get("query") if isinstance(arguments, Mapping) else None
    if not isinstance(query, str):
        raise ValueError(f"{what}: its arguments hold no 'query' string ({arguments!r:.200})")
    if not query.strip():
        raise ValueError(f"{what}: its query has no text")
    return query


def default_policy_path(scorer: str) -> Path:
    """The run directory of the policy shipped for ``scorer``; ValueError naming the shipped ones otherwise."""
    path = DEFAULT_POLICY_DIR / resolve_scorer(scorer)
    if not (path / "config.json").is_file():
        shipped = sorted(p.name for p in DEFAULT_POLICY_DIR.glob("*") if (p / "config.json").is_file())
        raise ValueError(
            f"no default policy ships for scorer {scorer!r} (shipped: {', '.join(shipped) or 'none'}); pass "
            "policy= (e.g. the searcher `shortlist recommend --tools T --log L` saves)"
        )
    return path


def policy_scorer(policy: TrainedPolicy) -> dict[str, Any] | None:
    """What a policy records of the scorer it was trained on: ``{"scorer", "identity", "observation"}``, or None.

    Read from its config's ``toolsearch`` entry (a searcher's policy, the shipped defaults, a ``--tools --log``
    run), else from a study run directory (its ``scorer`` and ``variant``, and the scorer identity its
    ``manifest.json`` holds). None: nothing recorded (``shortlist_depth.fit`` on your own lists, a TREC run).
    """
    cfg = policy.config
    if isinstance(cfg.get("toolsearch"), dict):
        return dict(cfg["toolsearch"])
    scorer, variant = cfg.get("scorer"), cfg.get("variant") or ""
    if cfg.get("benchmark") in (None, "run") or not isinstance(scorer, str):
        return None
    name = f"{scorer}-hybrid" if variant == "hybrid" else scorer
    if variant not in ("", "hybrid") and not variant.startswith(("top", "sub")):
        name = f"{scorer} ({variant})"  # another kind of list (a rewritten query, a richer tool text)
    record: dict[str, Any] = {"scorer": name, "observation": "hybrid" if variant == "hybrid" else "score"}
    manifest = policy.run_dir / "manifest.json" if policy.run_dir is not None else None
    if manifest is not None and manifest.is_file():
        condition = json.loads(manifest.read_text(encoding="utf-8")).get("condition") or {}
        if isinstance(condition.get("toolsearch"), dict):
            return dict(condition["toolsearch"])
        if isinstance(condition.get("scorer_identity"), dict):
            record["identity"] = {"scorer": name, "rank": condition["scorer_identity"]}
    return record


def _check_policy(policy: TrainedPolicy, scorer: str, where: str) -> dict[str, Any]:
    """The record of the scorer a policy serves under (``policy_scorer``, or this scorer's when none is recorded);
    ValueError, one line, for a policy of another scorer, identity or observation set."""
    label = f"{where}: policy {policy.method}"
    if MethodSpec.parse(policy.method).kind.reads_labels:
        raise ValueError(f"{label} reads the labels: it cannot choose depths for a request")
    record = policy_scorer(policy)
    observation = scorer_observation(scorer)
    if record is not None:
        if record.get("scorer") != scorer:
            raise ValueError(f"{label} was trained on {record.get('scorer')} scores, not {scorer}")
        if record.get("observation", observation) != observation:
            raise ValueError(
                f"{label} reads the {record.get('observation')!r} observation set, a {scorer} search gives "
                f"{observation!r}"
            )
    identity = scorer_identity(scorer)
    recorded = None if record is None else record.get("identity")
    if isinstance(recorded, dict):
        differ = identity_mismatch(recorded, {k: v for k, v in identity.items() if k in recorded})
        if differ:
            raise ValueError(f"{label} was trained with another {scorer} scorer (differs in {differ})")
    _probe(policy, scorer, observation, label)
    return {"scorer": scorer, "identity": identity, "observation": observation}


def _probe(policy: TrainedPolicy, scorer: str, observation: str, label: str) -> None:
    """Run the policy on one made-up list of this scorer's observation set: a policy fitted on the other set
    refuses it (``agents.base.check_observation``), here rather than at the first request."""
    scores = np.linspace(1.0, 0.0, 8)
    aux = scores[::-1].copy() if observation == "hybrid" else None
    probe = RankedQuery(scores, np.zeros(0, dtype=np.int64), "probe", aux_scores=aux)
    try:
        policy.policy.depths([probe], policy.episode)
    except ValueError as e:
        raise ValueError(f"{label} does not apply to {scorer} searches ({e})") from e


def _ranker(tools: Sequence[ToolSchema], scorer: str, cache_dir: Path | None) -> RegistryRanker:
    """The prepared registry (a BM25 index, the tools' embeddings) of ``tools``, kept for the last few
    registries: a registry seen again costs nothing."""
    key = (resolve_scorer(scorer), registry_digest(tools), str(cache_dir or ""))
    if key in _RANKERS:
        _RANKERS.move_to_end(key)
        return _RANKERS[key]
    ranker = RegistryRanker([t.text for t in tools], scorer, cache_dir)
    _RANKERS[key] = ranker
    while len(_RANKERS) > _RANKERS_KEPT:
        _RANKERS.popitem(last=False)
    return ranker


def _as_policy(policy: TrainedPolicy | str | os.PathLike[str] | None, scorer: str) -> TrainedPolicy:
    if policy is None:
        return load_policy(default_policy_path(scorer))
    if isinstance(policy, TrainedPolicy):
        return policy
    if isinstance(policy, str | os.PathLike):
        return load_policy(Path(policy))
    raise TypeError(f"policy must be a TrainedPolicy, a run directory or None, got {type(policy).__name__}")


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@dataclass(frozen=True)
class SearchSpec:
    """A tool search's scorer and depth policy, checked against each other, without a registry: the library's
    defaults in one place. ``over(tools)`` is the :class:`ToolSearch` of a registry (``ToolSearch.from_tools`` is
    ``SearchSpec.create(scorer, policy).over(tools)``); a server that gets its tools per request holds one.

    Attributes:
        scorer: the scorer's canonical name.
        policy: the depth policy.
        record: what the scorer is (``{"scorer", "identity", "observation"}``), as a saved searcher records it.
        cache_dir: the cache folder of tool embeddings (None: ``$SHORTLIST_CACHE_DIR`` or the per-user one).
    """

    scorer: str
    policy: TrainedPolicy
    record: dict[str, Any]
    cache_dir: Path | None = None

    @classmethod
    def create(
        cls,
        scorer: str = "bm25",
        policy: TrainedPolicy | str | os.PathLike[str] | None = None,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
        where: str = "ToolSearch",
    ) -> SearchSpec:
        """The scorer (default ``bm25``) and policy (default: the one shipped for the scorer; else a trained policy
        or a run directory), checked as :meth:`ToolSearch.from_tools` documents; ``where`` starts any error.

        Raises:
            ValueError: an unknown scorer, no default policy for it, or a policy of another scorer.
        """
        canonical = resolve_scorer(scorer)
        trained = _as_policy(policy, canonical)
        record = _check_policy(trained, canonical, where)
        return cls(canonical, trained, record, Path(cache_dir) if cache_dir else None)

    def over(self, tools: object) -> ToolSearch:
        """The searcher of ``tools`` (any shape of :mod:`benchmarks.tools`, or the MCP SDK's objects:
        :func:`plain_tools`; prepared once per distinct registry for the last few: a registry seen again costs its
        digest only)."""
        return self.over_parsed(parse_tools(plain_tools(tools)))

    def over_parsed(self, tools: tuple[ToolSchema, ...]) -> ToolSearch:
        """:meth:`over` for tools already parsed (:func:`benchmarks.tools.parse_tools`, ``read_tools_file``)."""
        return ToolSearch(tools, _ranker(tools, self.scorer, self.cache_dir), self.policy, self.record)

    def __repr__(self) -> str:
        return f"SearchSpec(scorer={self.scorer!r}, policy={self.policy.method!r})"


class ToolSearch:
    """A tool registry, a scorer and a depth policy: ``search(request)`` -> :class:`Shortlist` (module docstring).

    Build one with :meth:`from_tools`, :meth:`from_file` or :meth:`load`.
    """

    def __init__(
        self, tools: tuple[ToolSchema, ...], ranker: RegistryRanker, policy: TrainedPolicy, record: dict[str, Any]
    ) -> None:
        self.tools = tools
        self.ranker = ranker
        self.policy = policy
        self.record = record
        self.digest = registry_digest(tools)
        self._index = {t.name: i for i, t in enumerate(tools)}
        self._episode = policy.episode  # its own observation set (auto: the one the lists give)
        self._explain = getattr(policy.policy, "explain", None)

    @classmethod
    def from_tools(
        cls,
        tools: object,
        scorer: str = "bm25",
        policy: TrainedPolicy | str | os.PathLike[str] | None = None,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> ToolSearch:
        """A searcher over ``tools`` (any shape of :mod:`benchmarks.tools`).

        Args:
            tools: an OpenAI ``tools`` list, bare function dicts, an MCP ``tools/list`` result or its list, as
                JSON or as the MCP SDK's objects (``await session.list_tools()``, or its ``.tools``).
            scorer: ``bm25`` (default), ``minilm``, ``hybrid`` (= ``bm25-hybrid``) or ``minilm-hybrid``.
            policy: None (the default shipped for ``scorer``), a trained policy or a run directory.
            cache_dir: the cache folder of tool embeddings (default ``$SHORTLIST_CACHE_DIR`` or the per-user one).

        Raises:
            DataError: a malformed tool (naming its index and name), duplicate names, an empty registry.
            ValueError: an unknown scorer, no default policy for it, or a policy of another scorer.
        """
        parsed = parse_tools(plain_tools(tools))
        return SearchSpec.create(scorer, policy, cache_dir=cache_dir).over_parsed(parsed)

    @classmethod
    def from_file(
        cls,
        path: str | os.PathLike[str],
        scorer: str = "bm25",
        policy: TrainedPolicy | str | os.PathLike[str] | None = None,
        *,
        cache_dir: str | os.PathLike[str] | None = None,
    ) -> ToolSearch:
        """A searcher over the tools of a file: JSON (any shape) or JSON lines of ``{name, description,
        parameters}`` (:func:`benchmarks.tools.read_tools_file`); the rest as :meth:`from_tools`."""
        parsed = read_tools_file(path)
        return SearchSpec.create(scorer, policy, cache_dir=cache_dir, where=str(path)).over_parsed(parsed)

    @property
    def scorer(self) -> str:
        """The scorer's canonical name (``bm25``, ``minilm``, ``bm25-hybrid``, ``minilm-hybrid``)."""
        return self.ranker.scorer

    @property
    def names(self) -> tuple[str, ...]:
        """The tools' names, in registry order."""
        return tuple(t.name for t in self.tools)

    @property
    def index(self) -> Mapping[str, int]:
        """Each tool's position in the registry, by name (read-only)."""
        return MappingProxyType(self._index)

    @property
    def spec(self) -> SearchSpec:
        """This searcher's scorer and policy, without its registry."""
        return SearchSpec(self.scorer, self.policy, self.record, self.ranker.cache_dir)

    def with_tools(self, tools: object) -> ToolSearch:
        """The same scorer and policy on another registry (prepared once per distinct registry: a repeated list
        costs its digest only)."""
        return self.spec.over(tools)

    # ------------------------------------------------------------------------------------------------ search

    def _candidates(self, pinned: Sequence[str], exclude: Sequence[str]) -> tuple[list[int], NDArray[np.int64]]:
        """Registry indices of the pinned tools (in the order given) and of the tools ranked (registry order)."""
        for what, names in (("pinned", pinned), ("excluded", exclude)):
            if isinstance(names, str):
                raise TypeError(f"{what} tools must be a list of names, got the string {names!r}")
            unknown = [n for n in names if n not in self._index]
            if unknown:
                raise ValueError(f"{what} tool(s) not in the registry: {unknown[:5]}")
        both = sorted(set(pinned) & set(exclude))
        if both:
            raise ValueError(f"tool(s) both pinned and excluded: {both[:5]}")
        pins = [self._index[n] for n in dict.fromkeys(pinned)]
        dropped = set(pins) | {self._index[n] for n in exclude}
        ranked = np.array([i for i in range(len(self.tools)) if i not in dropped], dtype=np.int64)
        return pins, ranked

    def search(
        self,
        request: str,
        *,
        min_k: int | None = None,
        max_k: int | None = DEFAULT_MAX_K,
        pinned: Sequence[str] = (),
        exclude: Sequence[str] = (),
    ) -> Shortlist:
        """The shortlist for one request (see :meth:`search_many`)."""
        return self.search_many([request], min_k=min_k, max_k=max_k, pinned=pinned, exclude=exclude)[0]

    @staticmethod
    def openai_tool_search_tool(description: str = SEARCH_DESCRIPTION) -> dict[str, Any]:
        """The client-executed ``tool_search`` tool of OpenAI's Responses API (``{"type": "tool_search",
        "execution": "client", ...}``) whose calls :meth:`answer_tool_search_call` answers: put it in the request's
        ``tools``; the model calls it with a ``query`` (:data:`TOOL_SEARCH_PARAMETERS`)."""
        return {"type": "tool_search", "execution": "client", "description": description,
                "parameters": copy.deepcopy(TOOL_SEARCH_PARAMETERS)}  # fmt: skip

    def answer_tool_search_call(
        self,
        call: object,
        *,
        min_k: int | None = None,
        max_k: int | None = DEFAULT_MAX_K,
        pinned: Sequence[str] = (),
        exclude: Sequence[str] = (),
    ) -> dict[str, Any]:
        """The ``tool_search_output`` item that answers a Responses API ``tool_search_call`` of the tool
        :meth:`openai_tool_search_tool` defines (the item as a dict, or the OpenAI SDK's object): the shortlist of
        its ``query`` (:meth:`search`, the same bounds), :meth:`Shortlist.as_tool_search_output`. Append the call
        and the answer to the next request's ``input``.

        Raises:
            ValueError: the call is no client-executed ``tool_search_call`` (a server-executed one is answered by
                the server), has no ``call_id``, or its arguments hold no ``query`` with text (naming its
                ``call_id``).
        """
        if _call_field(call, "type") == "tool_search_call" and _call_field(call, "execution") == "server":
            raise ValueError(f"tool_search_call {_call_field(call, 'call_id')!r}: executed by the server (the hosted "
                             "tool search), its output in the response already; only a client-executed call is "
                             "answered")  # fmt: skip
        bounds = {"min_k": min_k, "max_k": max_k, "pinned": pinned, "exclude": exclude}
        call_id, shortlist = self._answered(call, "tool_search_call", "call_id", "arguments", bounds)
        return shortlist.as_tool_search_output(call_id)

    @staticmethod
    def anthropic_tool_search_tool(name: str = "search_tools", description: str = SEARCH_DESCRIPTION) -> dict[str, Any]:
        """A client tool of Anthropic's Messages API (``{"name", "description", "input_schema"}``) that searches the
        tools: put it in ``tools`` beside the tools marked ``defer_loading``; the model calls it with a ``query``
        (:data:`TOOL_SEARCH_PARAMETERS`) and :meth:`answer_tool_use` answers, with ``tool_reference`` blocks."""
        return {"name": name, "description": description, "input_schema": copy.deepcopy(TOOL_SEARCH_PARAMETERS)}

    def answer_tool_use(
        self,
        block: object,
        *,
        min_k: int | None = None,
        max_k: int | None = DEFAULT_MAX_K,
        pinned: Sequence[str] = (),
        exclude: Sequence[str] = (),
    ) -> dict[str, Any]:
        """The ``tool_result`` block that answers a Messages API ``tool_use`` of the tool
        :meth:`anthropic_tool_search_tool` defines (the block as a dict, or the Anthropic SDK's object): the
        shortlist of its ``query`` (:meth:`search`, the same bounds) as ``tool_reference`` blocks
        (:meth:`Shortlist.as_tool_references`), which load those tools. Send it in the next user message.

        Raises:
            ValueError: the block is no ``tool_use``, has no ``id``, or its input holds no ``query`` with text
                (naming its ``id``).
        """
        bounds = {"min_k": min_k, "max_k": max_k, "pinned": pinned, "exclude": exclude}
        block_id, shortlist = self._answered(block, "tool_use", "id", "input", bounds)
        return {"type": "tool_result", "tool_use_id": block_id, "content": shortlist.as_tool_references()}

    def _answered(
        self, call: object, kind: str, id_key: str, arguments_key: str, bounds: dict[str, Any]
    ) -> tuple[str, Shortlist]:
        """A provider's tool search call (a dict, or its SDK's object) of type ``kind``: its id (``id_key``) and the
        shortlist of the ``query`` of its ``arguments_key`` (:meth:`search` with ``bounds``); ValueError, naming the
        call, when it is of another type, has no id, or its arguments hold no query with text."""
        call_id = _call_field(call, id_key)
        if _call_field(call, "type") != kind:
            raise ValueError(f"call {call_id!r}: not a {kind} (type {_call_field(call, 'type')!r})")
        if not isinstance(call_id, str) or not call_id:
            raise ValueError(f"{kind} without its {id_key}: the answer could not be tied to it")
        return call_id, self.search(_query(_call_field(call, arguments_key), f"{kind} {call_id!r}"), **bounds)

    def search_many(
        self,
        requests: Sequence[str],
        *,
        min_k: int | None = None,
        max_k: int | None = DEFAULT_MAX_K,
        pinned: Sequence[str] = (),
        exclude: Sequence[str] = (),
    ) -> list[Shortlist]:
        """The shortlists of several requests: one scorer call and one policy call for all of them.

        Args:
            requests: the request texts (each non-blank).
            min_k: the fewest ranked tools shown (>= 1); None: 1. Also what a list with no ranking information
                shows (every ranked tool scored the same: module docstring).
            max_k: the most ranked tools shown (>= min_k); default :data:`DEFAULT_MAX_K` (20); None: no bound.
            pinned: tools always shown, first, besides the K ranked ones (module docstring).
            exclude: tools never ranked nor shown.

        Raises:
            ValueError: a request with no text (naming its position), a bad min_k / max_k, unknown or
                contradictory pinned / excluded names.
        """
        if isinstance(requests, str):
            raise TypeError("search_many takes a list of requests; use search() for one")
        requests = list(requests)
        for i, r in enumerate(requests):
            if not isinstance(r, str) or not r.strip():
                raise ValueError(f"request {i} has no text ({r!r}): a request must be a non-blank string")
        lo, hi = k_bounds(min_k, max_k)
        pins, ranked = self._candidates(pinned, exclude)
        if len(requests) == 0:
            return []
        primary, aux = self.ranker.scores(list(requests))
        if ranked.size == 0:  # everything pinned or excluded: the pinned tools only
            why = self._why(0, None, 0, None, max_k, tied=False)
            return [self._shortlist(r, primary[i], pins, ranked, 0, why) for i, r in enumerate(requests)]
        lists = [
            rank_candidates(primary[i], None if aux is None else aux[i], ranked, [], f"request-{i}")
            for i in range(len(requests))
        ]
        queries = [q for q, _ in lists]
        estimates: list[dict[str, Any]] | None = None
        if self._explain is not None:  # the depths and the estimate behind each, in one pass
            depths, estimates = self._explain(queries, self._episode)
        else:
            depths = self.policy.policy.depths(queries, self._episode)
        depths = np.asarray(depths, dtype=np.int64)
        out = []
        for i, (request, (query, order)) in enumerate(zip(requests, lists, strict=True)):
            tied = bool(np.all(query.scores == query.scores[0]))  # no ranking information: min_k tools
            k = shown_k(int(depths[i]), tied, lo, hi, int(ranked.size))
            clipped = None if k == depths[i] else ("min_k" if k > depths[i] else ("max_k" if k == hi else "list"))
            why = self._why(int(depths[i]), "tied" if tied and clipped else clipped, int(ranked.size),
                            estimates[i] if estimates else None, max_k, tied)  # fmt: skip
            out.append(self._shortlist(request, primary[i], pins, order, k, why))
        return out

    def _why(
        self, policy_k: int, clipped: str | None, n_ranked: int, estimate: dict | None, max_k: int | None, tied: bool
    ) -> dict[str, Any]:
        spec = MethodSpec.parse(self.policy.method)
        why: dict[str, Any] = {"method": self.policy.method, "kind": spec.kind.name, "policy_k": policy_k}
        why.update(max_k=max_k, clipped=clipped, tied=tied, n_ranked=n_ranked)
        if estimate:
            why["estimate"] = estimate
        return why

    def _shortlist(
        self, request: str, scores: NDArray[np.float64], pins: list[int], order: NDArray[np.int64], k: int, why: dict
    ) -> Shortlist:
        shown = [*pins, *(int(i) for i in order[:k])]
        return Shortlist(
            request=request,
            tools=tuple(self.tools[i].schema for i in shown),
            names=tuple(self.tools[i].name for i in shown),
            k=k,
            scores=tuple(float(scores[i]) for i in shown),
            pinned=tuple(self.tools[i].name for i in pins),
            why=why,
        )

    # ------------------------------------------------------------------------------------------------ save/load

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Write the searcher to a folder :meth:`load` reads: ``tools.json`` (the schemas as given),
        ``policy/`` (a run directory :func:`~agents.trained.load_policy` reads, recording this scorer) and
        ``searcher.json`` (the scorer, its identity, the observation set, the registry digest and the sha256 of
        every file). Written beside ``path`` and renamed into place once complete.

        Raises:
            FileExistsError: ``path`` exists and is not empty, unless ``overwrite``.
        """
        final = Path(path)
        if final.exists() and (not final.is_dir() or any(final.iterdir())) and not overwrite:
            raise FileExistsError(f"{final}: exists and is not empty; save elsewhere or pass overwrite=True")
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.{os.getpid()}."))
        try:
            tools = [t.schema for t in self.tools]
            (tmp / "tools.json").write_text(json.dumps(tools, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
            config = {**self.policy.config, "toolsearch": self.record}
            policy = TrainedPolicy(self.policy.policy, self.policy.episode, self.policy.method, None, config)
            policy.save(tmp / "policy")
            files = [*SAVED_FILES, f"policy/{self.policy.policy.artifact}"]
            meta = {
                "format": FORMAT,
                **self.record,
                "registry_digest": self.digest,
                "n_tools": len(self.tools),
                "method": self.policy.method,
                "files": {f: _sha256(tmp / f) for f in files},
            }
            (tmp / "searcher.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            _folders_as_umask(tmp)
            _replace_folder(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return final

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, cache_dir: str | os.PathLike[str] | None = None) -> ToolSearch:
        """A searcher saved by :meth:`save`.

        Raises:
            FileNotFoundError: ``path`` is not a saved searcher, or one of its files is missing (named).
            ValueError: a file changed after saving (its sha256 differs), a malformed ``searcher.json``, a
                registry whose digest differs, or a policy of another scorer, identity or observation set.
        """
        folder = Path(path)
        meta = _read_meta(folder)
        tools = read_tools_file(folder / "tools.json")
        if registry_digest(tools) != meta["registry_digest"]:
            raise ValueError(f"{folder / 'tools.json'}: the registry's digest differs from searcher.json's")
        trained = load_policy(folder / "policy")
        recorded = policy_scorer(trained) or {}
        for key in ("scorer", "observation", "identity"):
            if recorded.get(key) != meta.get(key):
                said = "" if key == "identity" else f" (policy: {recorded.get(key)}, searcher: {meta.get(key)})"
                raise ValueError(f"{folder}: the policy records another {key} than searcher.json{said}")
        record = _check_policy(trained, meta["scorer"], str(folder))
        return SearchSpec(meta["scorer"], trained, record, Path(cache_dir) if cache_dir else None).over_parsed(tools)

    def __repr__(self) -> str:
        return f"ToolSearch({len(self.tools)} tools, scorer={self.scorer!r}, policy={self.policy.method!r})"


def plain_tools(tools: object) -> object:
    """``tools`` as JSON: the MCP SDK's ``ListToolsResult`` or a list of its ``Tool`` objects (pydantic models) as
    the dicts of their wire format (``inputSchema``, ...); anything else as it is."""
    if not isinstance(tools, dict | list | tuple) and hasattr(tools, "model_dump"):
        tools = tools.model_dump(by_alias=True, exclude_none=True)  # a tools/list result: {"tools": [...]}
    if isinstance(tools, list | tuple) and any(hasattr(t, "model_dump") for t in tools):
        return [t.model_dump(by_alias=True, exclude_none=True) if hasattr(t, "model_dump") else t for t in tools]
    return tools


def shown_k(policy_k: int, tied: bool, lo: int, hi: int, n_ranked: int) -> int:
    """How many of ``n_ranked`` ranked tools a search shows: the policy's K clipped to ``lo``..``hi`` (the
    ``min_k`` / ``max_k`` bounds, :func:`k_bounds`) and to the tools there are, or ``lo`` where every score
    tied (the ranking says nothing)."""
    return min(lo, n_ranked) if tied else int(np.clip(policy_k, lo, min(hi, n_ranked)))


def k_bounds(min_k: int | None, max_k: int | None) -> tuple[int, int]:
    """(lowest, highest) K from ``min_k`` / ``max_k`` (None: 1 / no bound); ValueError for a bad pair, as
    :meth:`ToolSearch.search` raises it (a server or transform checks its bounds with it when it is made)."""
    for name, v in (("min_k", min_k), ("max_k", max_k)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | np.integer) or v < 1):
            raise ValueError(f"{name} must be an integer >= 1, got {v!r}")
    lo, hi = int(min_k or 1), int(max_k) if max_k is not None else np.iinfo(np.int64).max
    if lo > hi:
        hint = " (the default bound: max_k=None lifts it)" if max_k == DEFAULT_MAX_K else ""
        raise ValueError(f"min_k={min_k} exceeds max_k={max_k}{hint}")
    return lo, hi


def _read_meta(folder: Path) -> dict[str, Any]:
    """The checked ``searcher.json`` of a saved searcher, every file it lists present and unchanged."""
    where = folder / "searcher.json"
    if not where.is_file():
        raise FileNotFoundError(f"{folder}: not a saved searcher (no searcher.json)")
    try:
        meta = json.loads(where.read_text(encoding="utf-8"))
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise ValueError(f"not a {FORMAT!r} file")
        missing = [k for k in ("scorer", "observation", "registry_digest", "files") if k not in meta]
        if missing:
            raise KeyError(f"missing {missing}")
        if resolve_scorer(meta["scorer"]) != meta["scorer"] or meta["scorer"] not in SEARCH_SCORERS:
            raise ValueError(f"unknown scorer {meta['scorer']!r}")
        if scorer_observation(meta["scorer"]) != meta["observation"]:
            raise ValueError(f"observation {meta['observation']!r} does not go with scorer {meta['scorer']!r}")
        files = dict(meta["files"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise ValueError(f"{where}: malformed searcher file ({e})") from e
    for name in [*SAVED_FILES, *(f for f in files if f not in SAVED_FILES)]:
        file = folder / name
        if not file.is_file():
            raise FileNotFoundError(f"{file}: missing (a saved searcher holds {', '.join(sorted(files))})")
        if name not in files or _sha256(file) != files[name]:
            raise ValueError(f"{file}: changed after the searcher was saved (its sha256 differs from searcher.json's)")
    return meta


def _folders_as_umask(top: Path) -> None:
    """``top`` and the folders in it with the mode a plain ``mkdir`` gives (``0o777`` less the umask): the temporary
    folders they were made as are their owner's only (``tempfile.mkdtemp``: 0o700), and a server running as another
    user could not read a saved searcher. (Its files were written with the umask's mode already.)"""
    mask = os.umask(0)
    os.umask(mask)
    for folder in [top, *(p for p in top.rglob("*") if p.is_dir())]:
        folder.chmod(0o777 & ~mask)


def _replace_folder(tmp: Path, final: Path) -> None:
    """Move the complete folder ``tmp`` to ``final``; an earlier ``final`` is moved aside first, then removed."""
    old = None
    if final.exists():
        old = final.with_name(f".{final.name}.{os.getpid()}.old")
        os.replace(final, old)
    try:
        os.replace(tmp, final)
    except OSError:
        if old is not None:
            os.replace(old, final)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink()
