"""The one protocol every depth policy follows, and helpers shared by the learners."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from envs import EpisodeConfig, RankedQuery, feature_matrix


@runtime_checkable
class DepthPolicy(Protocol):
    """A shortlist-depth policy: learned, fixed, heuristic or oracle.

    ``fit`` sees training queries (with labels) and the episode configuration;
    ``depths`` returns one depth per query in 1..cap(query) and must never read
    labels (``relevant_ranks``) except in an explicitly named oracle.
    """

    name: str

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> DepthPolicy: ...

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]: ...


class FixedK:
    """Always show the top K (clipped to each query's depth cap)."""

    def __init__(self, k: int) -> None:
        if int(k) < 1:
            raise ValueError(f"fixed K must be >= 1, got {k}")
        self.k = int(k)
        self.name = f"fixed-{self.k}"

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> FixedK:
        return self

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        return np.array([min(self.k, config.cap(q)) for q in queries], dtype=np.int64)


def stacked_features(
    queries: Sequence[RankedQuery], config: EpisodeConfig
) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
    """All observations of all queries at every depth, stacked: (sum of caps, F) and the offsets."""
    mats = [feature_matrix(q, config.cap(q)) for q in queries]
    offsets = np.zeros(len(mats) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([m.shape[0] for m in mats])
    return np.concatenate(mats, axis=0), offsets


def row_depths(offsets: NDArray[np.int64]) -> NDArray[np.int64]:
    """Depth (1-based) of every stacked row, given the per-query offsets."""
    lengths = np.diff(offsets)
    return np.arange(int(offsets[-1])) - np.repeat(offsets[:-1], lengths) + 1


def first_stop(stop: NDArray[np.bool_], offsets: NDArray[np.int64]) -> NDArray[np.int64]:
    """Depth of the first STOP per query (the cap when the policy never stops).

    Args:
        stop: flat boolean "STOP at this depth" for every stacked row.
        offsets: query i owns rows offsets[i]:offsets[i+1] (depths 1..cap).
    """
    stop = stop.copy()
    stop[offsets[1:] - 1] = True  # the cap forces a STOP
    idx = np.flatnonzero(stop)
    first = idx[np.searchsorted(idx, offsets[:-1])]
    return (first - offsets[:-1] + 1).astype(np.int64)


def greedy_depths(
    queries: Sequence[RankedQuery],
    config: EpisodeConfig,
    stop_fn: Callable[[NDArray[np.float32]], NDArray[np.bool_]],
) -> NDArray[np.int64]:
    """Roll a state-based STOP rule over every query at once (no per-step Python loop)."""
    if len(queries) == 0:
        return np.zeros(0, dtype=np.int64)
    feats, offsets = stacked_features(queries, config)
    return first_stop(np.asarray(stop_fn(feats), dtype=bool), offsets)
