"""Every depth policy (learned, fixed, heuristic, oracle) behind one protocol, and the evaluator."""

# importing a policy module registers its kinds in agents.registry; this order is the registry's order
from agents import bayes, choppy, cutoff, posterior, oracle, peers, registry  # noqa: E402, F401, I001
from agents.base import DepthPolicy, FixedConfig, FixedK, first_stop, greedy_depths, stacked_features
from agents.dqn import DQNAgent, DQNConfig
from agents.evaluation import (
    BUCKET_SCHEMES,
    bucket_table,
    evaluate,
    score_depths,
    summarise,
)
from agents.tabular import TabularConfig, TabularQ

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
