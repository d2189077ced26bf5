"""Choosers: an LLM (or a model of one) picks exactly one tool from each shortlist.

- :mod:`~choosers.chooser`: the :class:`Chooser` protocol, :class:`Tool`, :class:`Choice`.
- :mod:`~choosers.choice_cache`: the persistent choice cache.
- :mod:`~choosers.local`: the embedded default (Gemma 3 270M from PyPI, calibrated scoring).
- :mod:`~choosers.openai_api`: any OpenAI-compatible chat-completions endpoint.
- :mod:`~choosers.simulated`: a stated error model, never evidence about real models.

:func:`make_chooser` builds one by name; :func:`bfcl_tools` turns BFCL's schemas into tools.
The heavy modules (torch/transformers, httpx) are imported only by the chooser that needs them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

from choosers.choice_cache import ChoiceCache, ChoiceKey
from choosers.chooser import BaseChooser, Choice, Chooser, ChooserError, Tool

CHOOSERS = ("local", "openai", "simulated")
"""Names :func:`make_chooser` knows."""

__all__ = [
    "CHOOSERS",
    "BaseChooser",
    "Choice",
    "ChoiceCache",
    "ChoiceKey",
    "Chooser",
    "ChooserError",
    "Tool",
    "bfcl_tools",
    "make_chooser",
    "tools_from_schemas",
]


def tools_from_schemas(names: Sequence[str], schemas: Mapping[str, tuple[str, dict]]) -> list[Tool]:
    """The tools ``names`` (in that order) from ``schemas`` (name -> (description, parameters)).

    Raises:
        ValueError: a name has no schema.
    """
    missing = [n for n in names if n not in schemas]
    if missing:
        raise ValueError(f"no schema for tool {missing[0]!r}")
    return [Tool(n, schemas[n][0], schemas[n][1]) for n in names]


def bfcl_tools(**kwargs: Any) -> list[Tool]:
    """Every BFCL registry tool, in registry order (keyword arguments: :func:`benchmarks.bfcl.load_bfcl_schemas`)."""
    from benchmarks.bfcl import load_bfcl_schemas

    schemas = load_bfcl_schemas(**kwargs)
    return tools_from_schemas(list(schemas), schemas)


def _options(cls: type, chooser: str, options: Mapping[str, Any]) -> Any:
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise ValueError(f"{chooser} chooser: unknown option {unknown[0]!r}; options: {', '.join(known)}")
    try:
        return cls(**options)
    except TypeError as e:
        required = [
            f.name
            for f in dataclasses.fields(cls)
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        raise ValueError(f"{chooser} chooser: needs option(s) {', '.join(required)} ({e})") from e


def make_chooser(name: str, *, cache: ChoiceCache | None = None, **options: Any) -> BaseChooser:
    """The chooser called ``name`` (:data:`CHOOSERS`), built from keyword ``options``.

    ``local``: fields of :class:`~choosers.local.LocalOptions`;
    ``openai``: of :class:`~choosers.openai_api.OpenAIOptions` (``base_url`` and
    ``model`` required); ``simulated``: ``gold`` (query text -> gold tool name) plus fields of
    :class:`~choosers.simulated.SimulatedParams`.

    Raises:
        ValueError: unknown chooser (listing the names) or option, one line.
        ChooserError: the chooser cannot start (missing package, key variable, model file).
    """
    if name == "local":
        from choosers.local import LocalChooser, LocalOptions

        return LocalChooser(_options(LocalOptions, name, options), cache)
    if name == "openai":
        from choosers.openai_api import OpenAIChooser, OpenAIOptions

        return OpenAIChooser(_options(OpenAIOptions, name, options), cache)
    if name == "simulated":
        from choosers.simulated import SimulatedChooser, SimulatedParams

        opts = dict(options)
        if "gold" not in opts:
            raise ValueError("simulated chooser: needs gold= (query text -> gold tool name)")
        gold = opts.pop("gold")
        return SimulatedChooser(gold, _options(SimulatedParams, name, opts), cache)
    raise ValueError(f"unknown chooser {name!r}; expected one of: {', '.join(CHOOSERS)}")
