"""``auto``: pick the depth-policy kind for your data on an inner validation split of the training queries.

The honest way to answer "which rule should I use on my retriever?": the training queries are split once more
(a seeded split of their sorted query ids, :data:`AutoConfig.inner_frac` to fit, the rest to validate; never the
test queries), every candidate kind (:data:`AutoConfig.candidates`) is fitted on the inner training part and
scored on the validation part by the mean net reward (the judged objective: the episode's terminal reward minus
the step cost per extra shown item, undiscounted), and the best one (ties: the earlier candidate) is refitted on
all training queries. ``depths`` are the chosen policy's.

Saved as the chosen kind's own file with the selection added (``auto``: the chosen kind and every candidate's
validation score), so :meth:`AutoPolicy.load` reads it back through the chosen kind (JSON; never a pickle).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agents.base import DepthPolicy, net_objective
from agents.registry import register
from envs import EpisodeConfig, RankedQuery

__all__ = ["AutoConfig", "AutoPolicy", "inner_split"]


@dataclass(frozen=True)
class AutoConfig:
    """Settings of the ``auto`` selector."""

    candidates: tuple[str, ...] = ("gap", "threshold", "topp", "greedyk", "choppy", "cutoff", "posterior", "tabular")
    """The kinds compared (any registered kinds that save JSON; DQN's zip is not one)."""
    inner_frac: float = 0.7
    """Share of the training queries the candidates are fitted on; the rest validate them."""
    inner_seed: int = 99
    """Seed of the inner split."""

    def __post_init__(self) -> None:
        if not self.candidates:
            raise ValueError("AutoConfig.candidates must name at least one kind")
        if not 0.0 < self.inner_frac < 1.0:
            raise ValueError(f"AutoConfig.inner_frac must lie in (0, 1), got {self.inner_frac}")


def inner_split(queries: Sequence[RankedQuery], frac: float, seed: int) -> tuple[list[int], list[int]]:
    """Positions of the fit and validation queries, each listed in query-id order: a seeded permutation of the
    sorted query ids, so the order the queries come in changes neither the split nor what a candidate is fitted on."""
    order = sorted(range(len(queries)), key=lambda i: queries[i].qid)
    perm = np.random.default_rng(seed).permutation(len(order))
    n_fit = min(len(order) - 1, max(1, round(frac * len(order))))
    fit, val = sorted(perm[:n_fit]), sorted(perm[n_fit:])  # in query-id order, so fits see the same sequence
    return [order[i] for i in fit], [order[i] for i in val]


def net_reward(depths: NDArray[np.int64], queries: Sequence[RankedQuery], config: EpisodeConfig) -> float:
    """Mean net reward of ``depths`` (:func:`agents.peers.objective_matrix`, ``"net"``: terminal payoff minus the
    step cost per extra shown item, undiscounted; depths clipped to each query's cap)."""
    from agents.peers import objective_matrix

    table, caps = objective_matrix(queries, config, config.reward, "net")
    k = np.minimum(np.asarray(depths, dtype=np.int64), caps)
    return float(table[np.arange(len(queries)), k - 1].mean())


class AutoPolicy:
    """The candidate kind with the best validation net reward, refitted on every training query (module
    docstring). Name ``<reward>-auto``."""

    artifact = "agent.json"
    stochastic = True

    def __init__(self, reward: str = "bor", settings: AutoConfig | None = None) -> None:
        self.reward = reward
        self.settings = settings or AutoConfig()
        self.name = f"{reward}-auto"
        self.chosen = ""
        self.validation: dict[str, float] = {}
        self.policy: DepthPolicy | None = None

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> AutoPolicy:
        from agents import registry

        config.check_queries(queries)
        if len(queries) < 2:
            raise ValueError("auto: needs at least 2 training queries to hold some out for validation")
        fit_idx, val_idx = inner_split(queries, self.settings.inner_frac, self.settings.inner_seed)
        fit_q, val_q = [queries[i] for i in fit_idx], [queries[i] for i in val_idx]
        self.validation = {}
        for kind in self.settings.candidates:
            policy = registry.make(kind, self.reward).fit(fit_q, config, seed)
            self.validation[kind] = net_reward(policy.depths(val_q, config), val_q, config)
        self.chosen = max(self.settings.candidates, key=lambda k: self.validation[k])  # first of equals
        by_id = sorted(queries, key=lambda q: q.qid)  # the refit, too, never depends on the order given
        self.policy = registry.make(self.chosen, self.reward).fit(by_id, config, seed)
        return self

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        if self.policy is None:
            raise RuntimeError(f"{self.name}: call fit() or load() first")
        return self.policy.depths(queries, config)

    def save(self, path: Path) -> None:
        """The chosen policy's own file, with ``auto`` (the chosen kind, the validation scores) added."""
        if self.policy is None:
            raise RuntimeError(f"{self.name}: nothing to save")
        self.policy.save(path)
        payload = json.loads(Path(path).read_text())
        payload["auto"] = {"chosen": self.chosen, "validation_net_reward": self.validation, "reward": self.reward,
                           "candidates": list(self.settings.candidates)}  # fmt: skip
        Path(path).write_text(json.dumps(payload, sort_keys=True) + "\n")

    @classmethod
    def load(cls, path: Path, reward: str = "bor", settings: Any = None) -> AutoPolicy:
        """Read a file written by :meth:`save` through its chosen kind (JSON; never executes code)."""
        from agents import registry

        try:
            auto = json.loads(Path(path).read_text())["auto"]
            out = cls(str(auto["reward"]), settings)
            out.chosen = str(auto["chosen"])
            out.validation = {k: float(v) for k, v in auto["validation_net_reward"].items()}
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: malformed auto policy file ({e})") from e
        out.policy = registry.get(out.chosen).load(Path(path), out.reward)
        return out


register(
    "auto",
    lambda reward, settings: AutoPolicy(reward, settings),
    group="agent",
    stochastic=True,
    uses_reward=True,
    description="picks the best of several kinds on an inner validation split of the training queries (by net "
    "reward; never the test split), refitted on every training query (see agents/auto.py)",
    config=AutoConfig,
    objective=net_objective,
)
