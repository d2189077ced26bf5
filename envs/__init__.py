"""The shortlist-depth Gymnasium environment, its ranked-list type and observation features.

Importing this package registers ``ShortlistDepth-v0``.
"""

import gymnasium

from envs.features import FEATURE_NAMES, N_FEATURES, Observer, feature_matrix, observed_matrix
from envs.ranked import RankedQuery
from envs.shortlist_env import (
    CONTINUE,
    EPISODE_REWARDS,
    OUTCOME,
    STOP,
    EpisodeConfig,
    EpisodeOverrides,
    ShortlistEnv,
    terminal_payoffs,
)

ENV_ID = "ShortlistDepth-v0"
if ENV_ID not in gymnasium.registry:
    gymnasium.register(id=ENV_ID, entry_point="envs.shortlist_env:ShortlistEnv")

__all__ = [
    "CONTINUE",
    "ENV_ID",
    "EPISODE_REWARDS",
    "OUTCOME",
    "Observer",
    "FEATURE_NAMES",
    "N_FEATURES",
    "STOP",
    "EpisodeConfig",
    "EpisodeOverrides",
    "RankedQuery",
    "ShortlistEnv",
    "feature_matrix",
    "observed_matrix",
    "terminal_payoffs",
]
