"""shortlist-depth's public API under one import name: ``import shortlist_depth``.

>>> import shortlist_depth as sd
>>> sd.p_random(5, 370, 1)  # chance that a random top-5 of 370 candidates holds the one relevant item
0.013513513513513514

Exported (see each object's own docstring):

- the math (:mod:`rewards`): :func:`p_random`, :func:`p_random_all`, the BoR functions
  (:func:`bor_aggregate`, :func:`bor_aggregate_all`, :func:`bor_reward`, :func:`bor_reward_all`,
  :func:`bor_ceiling`, :func:`bor_ceiling_all`, :func:`bor_optimistic`), :func:`expected_random_hits`,
  :func:`break_even_depth`;
- the data types and the environment (:mod:`envs`): :class:`RankedQuery` (scores sorted descending,
  ``relevant_ranks`` 1-based), :class:`EpisodeConfig`, :data:`ENV_ID` (``"ShortlistDepth-v0"``,
  registered with Gymnasium on import);
- the policies: :func:`kinds` and :func:`make` (the registry, :mod:`agents.registry`), :func:`fit`
  (train a registered kind on your own ranked lists), :func:`evaluate` (per-query rows),
  :func:`load_policy` and :class:`TrainedPolicy` (a run directory written by ``shortlist train`` or by
  :meth:`TrainedPolicy.save`);
- the tool search (:mod:`shortlist_depth.toolsearch`): :class:`ToolSearch` (``ToolSearch.from_tools(tools)
  .search(text)``: a tool registry in any agent's shape, ranked by the package's scorers, with a per-request
  depth from a policy, the shipped default or your own) and its :class:`Shortlist`;
- :data:`__version__` (the installed distribution's version).

Importing this module imports numpy and gymnasium, never torch: the policy parts (:func:`fit`,
:func:`evaluate`, :func:`load_policy`, :class:`TrainedPolicy`, :func:`kinds`, :func:`make`) and the tool
search are loaded on first use (module ``__getattr__``).

One import name, whatever the current directory: the package's own top-level packages
(``rewards envs agents benchmarks choosers experiments servers``) import each other by those names, which a folder
of yours can shadow (Python puts the current directory first on ``sys.path``, so an
``experiments/`` folder there would be imported instead of ours), as can a PyPI project named
``envs``. On import this module checks where each of the seven names would load from; any that
would not load from this installation is bound to it (a finder placed first on ``sys.meta_path``
for those names only, loading from the folder that holds this file). The price: in this process
those names are ours, so import your own folder under another name. A module of one of those names
that is not ours and is already imported raises ImportError naming it: import ``shortlist_depth``
first, or rename it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.util
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

#: Where this installation's packages live: the folder that holds this one (site-packages, or the
#: repository for an editable install).
HOME = Path(__file__).resolve().parent.parent
#: The top-level packages of shortlist-depth, which import each other by these names.
PACKAGES = ("rewards", "envs", "agents", "benchmarks", "choosers", "experiments", "servers")


class _OwnPackages(importlib.abc.MetaPathFinder):
    """Finds the named top-level packages in :data:`HOME`, ahead of ``sys.path`` (their submodules
    follow through each package's ``__path__``)."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = frozenset(names)

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        init = HOME / fullname / "__init__.py"
        return importlib.util.spec_from_file_location(fullname, init, submodule_search_locations=[str(init.parent)])


def _origin(module_or_spec: Any) -> Path | None:
    where = getattr(module_or_spec, "origin", None) or getattr(module_or_spec, "__file__", None)
    return Path(where).resolve() if isinstance(where, str) and where not in ("namespace", "built-in") else None


def bind_own_packages() -> list[str]:
    """Make ``import <name>`` load this installation's package for each of :data:`PACKAGES`.

    Returns the names that had to be redirected (another module would have been imported: a folder
    in the current directory, another distribution); empty when ``sys.path`` already finds ours.

    Raises:
        ImportError: a module of one of those names that is not ours is already imported (naming
            where it came from), or this installation lacks one of its packages.
    """
    shadowed = []
    for name in PACKAGES:
        init = HOME / name / "__init__.py"
        if not init.is_file():
            raise ImportError(f"shortlist_depth: {init} is missing: the installation is incomplete")
        loaded = sys.modules.get(name)
        if loaded is not None:
            if _origin(loaded) != init:
                raise ImportError(
                    f"shortlist_depth: a module named {name!r} is already imported from "
                    f"{_origin(loaded) or getattr(loaded, '__path__', loaded)}, not shortlist-depth's ({init.parent}); "
                    f"import shortlist_depth before it, or give your {name!r} another name"
                )
            continue
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            spec = None
        if spec is None or _origin(spec) != init:
            shadowed.append(name)
    if shadowed:
        finder = next((f for f in sys.meta_path if isinstance(f, _OwnPackages)), None)
        if finder is not None:
            sys.meta_path.remove(finder)
            shadowed = sorted(set(shadowed) | finder.names)
        sys.meta_path.insert(0, _OwnPackages(shadowed))
    return shadowed


bind_own_packages()

# the light part: pure math, the data types and the environment (numpy and gymnasium, no torch)
from envs import ENV_ID, EpisodeConfig, RankedQuery  # noqa: E402
from rewards import (  # noqa: E402
    REWARD_KINDS,
    bor_aggregate,
    bor_aggregate_all,
    bor_ceiling,
    bor_ceiling_all,
    bor_optimistic,
    bor_reward,
    bor_reward_all,
    break_even_depth,
    expected_random_hits,
    p_random,
    p_random_all,
)

if TYPE_CHECKING:
    from agents.registry import kinds, make
    from agents.trained import TrainedPolicy, load_policy
    from shortlist_depth.api import evaluate, fit
    from shortlist_depth.toolsearch import DEFAULT_MAX_K, SearchSpec, Shortlist, ToolSearch

try:
    __version__ = version("shortlist-depth")
except PackageNotFoundError:  # run from a checkout that is not installed
    __version__ = "unknown"

#: The heavy part, loaded on first use: attribute -> the module that defines it.
_LAZY = {
    "fit": "shortlist_depth.api",
    "evaluate": "shortlist_depth.api",
    "load_policy": "agents.trained",
    "TrainedPolicy": "agents.trained",
    "kinds": "agents.registry",
    "make": "agents.registry",
    "ToolSearch": "shortlist_depth.toolsearch",
    "Shortlist": "shortlist_depth.toolsearch",
    "SearchSpec": "shortlist_depth.toolsearch",
    "DEFAULT_MAX_K": "shortlist_depth.toolsearch",
}

__all__ = [
    "DEFAULT_MAX_K",
    "ENV_ID",
    "REWARD_KINDS",
    "EpisodeConfig",
    "RankedQuery",
    "SearchSpec",
    "Shortlist",
    "ToolSearch",
    "TrainedPolicy",
    "__version__",
    "bor_aggregate",
    "bor_aggregate_all",
    "bor_ceiling",
    "bor_ceiling_all",
    "bor_optimistic",
    "bor_reward",
    "bor_reward_all",
    "break_even_depth",
    "evaluate",
    "expected_random_hits",
    "fit",
    "kinds",
    "load_policy",
    "make",
    "p_random",
    "p_random_all",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value  # once loaded, a plain attribute
        return value
    raise AttributeError(f"module 'shortlist_depth' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
