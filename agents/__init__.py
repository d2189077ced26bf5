"""Every depth policy (learned, fixed, heuristic, oracle) behind one protocol, and the evaluator."""

from agents import choppy, oracle, peers, registry  # noqa: F401 - importing registers the peer families
from agents.base import DepthPolicy, FixedK, first_stop, greedy_depths, stacked_features
from agents.dqn import DQNAgent, DQNConfig
from agents.evaluation import (
    BUCKET_SCHEMES,
    bootstrap_ci,
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
    "FixedK",
    "TabularConfig",
    "TabularQ",
    "bootstrap_ci",
    "bucket_table",
    "evaluate",
    "first_stop",
    "greedy_depths",
    "registry",
    "score_depths",
    "stacked_features",
    "summarise",
]
