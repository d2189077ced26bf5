"""``auto``: pick the depth-policy kind for your data on the training queries only, then refit it on all of them.

The honest way to answer "which rule should I use on my retriever?": the training queries are split once more
(a seeded split of their sorted query ids, :data:`AutoConfig.inner_frac` to fit, the rest to validate; never the
test queries), every candidate kind (:data:`AutoConfig.candidates`) is fitted on the inner training part and
scored on the validation part by the mean net reward (the judged objective: the episode's terminal reward minus
the step cost per extra shown item, undiscounted), and the best one (ties: the earlier candidate) is refitted on
all training queries. ``depths`` are the chosen policy's.

Small training sets: when that validation part would hold fewer than :data:`AutoConfig.min_validation` queries
(30, the size under which the reports call a query set small; with ``inner_frac`` 0.7, fewer than 99 training
queries), one split would judge the candidates on a handful of queries. The candidates are then compared by
k-fold cross-validation instead (:data:`AutoConfig.cv_folds`, default 5; leave-one-out with fewer queries than
folds): the training queries, in a seeded permutation of their sorted ids, are cut into k folds, each candidate is
fitted on k - 1 of them and scored on the held-out one, and its score is the mean net reward over every training
query, each scored once by a fit that never saw it (:func:`cv_folds`).

Saved as the chosen kind's own file with the selection added (``auto``: the chosen kind and every candidate's
validation score), so :meth:`AutoPolicy.load` reads it back through the chosen kind (JSON; never a pickle).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agents.base import DepthPolicy, net_objective
from agents.registry import SETTING_ITEMS, normal_items, register
from envs import EpisodeConfig, RankedQuery

__all__ = [
    "AutoConfig",
    "AutoPolicy",
    "cv_folds",
    "inner_split",
    "net_reward",
    "net_rewards",
    "with_candidate_settings",
]


@dataclass(frozen=True)
class AutoConfig:
    """Settings of the ``auto`` selector."""

    candidates: tuple[str, ...] = ("gap", "threshold", "topp", "greedyk", "choppy", "cutoff", "posterior", "tabular")
    """The kinds compared (any registered kinds that save JSON; DQN's zip is not one)."""
    inner_frac: float = 0.7
    """Share of the training queries the candidates are fitted on; the rest validate them."""
    inner_seed: int = 99
    """Seed of the inner split (and of the cross-validation folds)."""
    min_validation: int = 30
    """Fewest validation queries one inner split may judge on; below it the candidates are compared by
    k-fold cross-validation (module docstring). 0: always one split."""
    cv_folds: int = 5
    """Folds of that cross-validation (at most the number of training queries: leave-one-out)."""
    candidate_settings: tuple[str, ...] = field(default=(), metadata={SETTING_ITEMS: True})
    """Settings of the candidate kinds, as ``--set`` items (``cutoff.epochs=10``): each candidate is fitted, and the
    chosen one refitted, with its kind's items applied over its defaults. A command fills it from its own ``--set``
    items of the candidate kinds (:func:`with_candidate_settings`), so ``--set cutoff.epochs=10`` reaches the
    cut-off that ``auto`` fits, and a run's config (and so its hash) records them. Kept in one standard form
    (:func:`agents.registry.normal_items`: one item per changed setting, the last given winning, defaults dropped,
    kinds by name), so equal fits are equal configs with equal hashes and a finished run is reused. As text (``--set
    auto.candidate_settings=topp.temperatures=0.5,1.0,cutoff.epochs=3``) it splits only where a ``kind.key=`` item
    starts (:data:`agents.registry.SETTING_ITEMS`), so an item's value may hold commas."""

    def __post_init__(self) -> None:
        if not self.candidates:
            raise ValueError("AutoConfig.candidates must name at least one kind")
        if not 0.0 < self.inner_frac < 1.0:
            raise ValueError(f"AutoConfig.inner_frac must lie in (0, 1), got {self.inner_frac}")
        if self.min_validation < 0 or self.cv_folds < 2:
            raise ValueError(
                f"AutoConfig: min_validation >= 0 and cv_folds >= 2 required, got {self.min_validation}, "
                f"{self.cv_folds}"
            )

        given = self.candidate_settings
        if not isinstance(given, tuple | list) or not all(isinstance(item, str) for item in given):
            # one string is refused, not read as one item: "a,b" would be one item here but two in --set text
            raise ValueError(f"AutoConfig.candidate_settings: expected a tuple of --set items, e.g. "
                             f"('cutoff.epochs=3',), got {given!r}")  # fmt: skip
        # one standard form (agents.registry.normal_items), so equal fits have equal configs and hashes
        object.__setattr__(self, "candidate_settings", normal_items(self.candidate_settings))
        self.kind_settings()  # every item is for a candidate kind

    def kind_settings(self) -> dict[str, Any]:
        """Candidate kind -> its settings dataclass, from :attr:`candidate_settings` (kinds not named: absent)."""
        from agents.registry import parse_settings

        settings = parse_settings(self.candidate_settings)
        others = sorted(set(settings) - set(self.candidates))
        if others:
            raise ValueError(f"AutoConfig.candidate_settings: {others[0]!r} is not a candidate kind "
                             f"({', '.join(self.candidates)})")  # fmt: skip
        return settings

    def uses_cv(self, n_train: int) -> bool:
        """Whether ``n_train`` training queries are compared by cross-validation (their inner validation part
        would hold fewer than :attr:`min_validation` queries)."""
        n_fit = min(n_train - 1, max(1, round(self.inner_frac * n_train)))
        return n_train - n_fit < self.min_validation


def with_candidate_settings(base: AutoConfig | None, settings: Mapping[str, Any]) -> AutoConfig:
    """``base`` (or the defaults) with :attr:`AutoConfig.candidate_settings` holding, besides its own items, the
    changed settings of each candidate kind that ``settings`` (kind -> settings dataclass, a command's ``--set``)
    names: the one path by which a command's settings reach the kinds ``auto`` fits. The command's items come after
    ``base``'s, so for the same setting they win (:func:`agents.registry.normal_items` keeps the last)."""
    from agents.registry import changed_items, get

    base = base or AutoConfig()
    items = [i for kind in base.candidates if kind in settings for i in changed_items(get(kind), settings[kind])]
    if not items:
        return base
    return replace(base, candidate_settings=(*base.candidate_settings, *items))


def inner_split(queries: Sequence[RankedQuery], frac: float, seed: int) -> tuple[list[int], list[int]]:
    """Positions of the fit and validation queries, each listed in query-id order: a seeded permutation of the
    sorted query ids, so the order the queries come in changes neither the split nor what a candidate is fitted on."""
    order = sorted(range(len(queries)), key=lambda i: queries[i].qid)
    perm = np.random.default_rng(seed).permutation(len(order))
    n_fit = min(len(order) - 1, max(1, round(frac * len(order))))
    fit, val = sorted(perm[:n_fit]), sorted(perm[n_fit:])  # in query-id order, so fits see the same sequence
    return [order[i] for i in fit], [order[i] for i in val]


def cv_folds(queries: Sequence[RankedQuery], k: int, seed: int) -> list[list[int]]:
    """Positions of the queries in each of ``min(k, len(queries))`` folds, each listed in query-id order: a seeded
    permutation of the sorted query ids cut into near-equal parts (as :func:`inner_split`, so the order the
    queries come in changes nothing)."""
    order = sorted(range(len(queries)), key=lambda i: queries[i].qid)
    perm = np.random.default_rng(seed).permutation(len(order))
    parts = np.array_split(perm, min(k, len(order)))
    return [[order[i] for i in sorted(part)] for part in parts]


def net_rewards(
    depths: NDArray[np.int64], queries: Sequence[RankedQuery], config: EpisodeConfig
) -> NDArray[np.float64]:
    """Per-query net reward of ``depths`` (:func:`agents.peers.objective_matrix`, ``"net"``: terminal payoff minus
    the step cost per extra shown item, undiscounted; depths clipped to each query's cap)."""
    from agents.peers import objective_matrix

    table, caps = objective_matrix(queries, config, config.reward, "net")
    k = np.minimum(np.asarray(depths, dtype=np.int64), caps)
    return np.asarray(table[np.arange(len(queries)), k - 1], dtype=np.float64)


def net_reward(depths: NDArray[np.int64], queries: Sequence[RankedQuery], config: EpisodeConfig) -> float:
    """Mean net reward of ``depths`` (:func:`net_rewards`)."""
    return float(net_rewards(depths, queries, config).mean())


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
        self.selection = "split"
        self.policy: DepthPolicy | None = None

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> AutoPolicy:
        from agents import registry

        config.check_queries(queries)
        if len(queries) < 2:
            raise ValueError("auto: needs at least 2 training queries to hold some out for validation")
        s = self.settings
        if s.uses_cv(len(queries)):
            folds = cv_folds(queries, s.cv_folds, s.inner_seed)
            self.selection = f"{len(folds)}-fold cross-validation"
            rank_of = {p: r for r, p in enumerate(sorted(range(len(queries)), key=lambda i: queries[i].qid))}
            parts = [
                (sorted((i for f in folds if f is not fold for i in f), key=rank_of.__getitem__), fold)
                for fold in folds
            ]
        else:
            self.selection = "split"
            parts = [inner_split(queries, s.inner_frac, s.inner_seed)]
        self.validation = {}
        kind_settings = s.kind_settings()
        for kind in s.candidates:
            held_out = []
            for fit_idx, val_idx in parts:
                fit_q, val_q = [queries[i] for i in fit_idx], [queries[i] for i in val_idx]
                policy = registry.make(kind, self.reward, kind_settings.get(kind)).fit(fit_q, config, seed)
                held_out.append(net_rewards(policy.depths(val_q, config), val_q, config))
            self.validation[kind] = float(np.concatenate(held_out).mean())
        self.chosen = max(s.candidates, key=lambda k: self.validation[k])  # first of equals
        by_id = sorted(queries, key=lambda q: q.qid)  # the refit, too, never depends on the order given
        chosen = registry.make(self.chosen, self.reward, kind_settings.get(self.chosen))
        self.policy = chosen.fit(by_id, config, seed)
        return self

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        if self.policy is None:
            raise RuntimeError(f"{self.name}: call fit() or load() first")
        return self.policy.depths(queries, config)

    def explain(
        self, queries: Sequence[RankedQuery], config: EpisodeConfig
    ) -> tuple[NDArray[np.int64], list[dict[str, Any]]]:
        """The chosen kind's depths and explanation (when it has one), with the kind ``auto`` chose."""
        if self.policy is None:
            raise RuntimeError(f"{self.name}: call fit() or load() first")
        inner = getattr(self.policy, "explain", None)
        if inner is None:
            return self.policy.depths(queries, config), [{"chosen": self.chosen} for _ in queries]
        depths, rows = inner(queries, config)
        return depths, [{"chosen": self.chosen, **row} for row in rows]

    def save(self, path: Path) -> None:
        """The chosen policy's own file, with ``auto`` (the chosen kind, the validation scores) added."""
        if self.policy is None:
            raise RuntimeError(f"{self.name}: nothing to save")
        self.policy.save(path)
        payload = json.loads(Path(path).read_text())
        payload["auto"] = {"chosen": self.chosen, "validation_net_reward": self.validation, "reward": self.reward,
                           "candidates": list(self.settings.candidates), "selection": self.selection}  # fmt: skip
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
            out.selection = str(auto.get("selection", "split"))
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
    description="picks the best of several kinds on an inner validation split of the training queries (k-fold "
    "cross-validation on a small training set; by net reward; never the test split), refitted on every training "
    "query (see agents/auto.py)",
    config=AutoConfig,
    objective=net_objective,
    min_train=2,  # one to fit the candidates on, one to validate them
)
