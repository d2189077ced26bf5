"""Every depth policy (learned, fixed, heuristic, oracle) behind one protocol, and the evaluator.

Importing the package registers every kind (:mod:`agents.registry`) and stays light: torch, scipy's
optimisers and pandas are imported by the modules that use them, when they are used, so ``shortlist --help``
starts at once. The evaluator and the learners' classes are loaded on first access below.
"""

from typing import Any

# importing a policy module registers its kinds in agents.registry; this order is the registry's order
# isort: off
from agents import bayes, choppy, cutoff, oracle, peers, pfound, posterior, registry  # noqa: E402, F401
from agents.base import DepthPolicy, FixedConfig, FixedK, first_stop, greedy_depths, stacked_features
from agents.dqn import DQNAgent, DQNConfig
from agents import fittedq, ppo, residual  # noqa: E402, F401 (after DQN: they build on it)
from agents.tabular import TabularConfig, TabularQ
from agents import auto  # noqa: E402, F401 (last: the selector over every kind above)
# isort: on

#: Names loaded on first access (the evaluator needs pandas).
_LAZY = {name: "agents.evaluation" for name in ("BUCKET_SCHEMES", "bucket_table", "evaluate", "score_depths",
                                                "summarise")}  # fmt: skip

__all__ = [
    "BUCKET_SCHEMES",
    "DQNAgent",
    "DQNConfig",
    "DepthPolicy",
    "FixedConfig",
    "FixedK",
    "TabularConfig",
    "TabularQ",
    "bucket_table",
    "evaluate",
    "first_stop",
    "greedy_depths",
    "registry",
    "score_depths",
    "stacked_features",
    "summarise",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'agents' has no attribute {name!r}")
