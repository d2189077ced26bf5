"""Frozen run configuration: a method (policy kind + training reward) and a cell (condition x
method x seed with every setting it depends on). Its resolved form is hashed: a finished run
is reused only when the hash matches."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from agents import registry
from agents.base import FixedConfig
from agents.dqn import DQNConfig
from agents.tabular import TabularConfig
from benchmarks.names import ConditionId, run_condition_name
from envs import EpisodeConfig
from experiments.io import code_fingerprint
from rewards import REWARD_KINDS


@dataclass(frozen=True)
class MethodSpec:
    """One depth policy: a registered kind, its training reward, and K for the fixed baseline.

    The reward is stored here only: a cell's episode reward is derived from it. Kinds not
    trained towards a reward always carry ``"bor"`` (the evaluation reward).
    """

    agent: str
    reward: str = "bor"
    k: int = 0

    def __post_init__(self) -> None:
        kind = registry.get(self.agent)
        if self.reward not in REWARD_KINDS:
            raise ValueError(f"unknown reward {self.reward!r}; expected one of {', '.join(REWARD_KINDS)}")
        if not kind.uses_reward:
            object.__setattr__(self, "reward", "bor")
        if kind.config is FixedConfig:
            FixedConfig(self.k)  # validates k

    @property
    def kind(self) -> registry.PolicyKind:
        return registry.get(self.agent)

    @property
    def name(self) -> str:
        """``fixed-<K>``, ``<reward>-<agent>`` for trained methods, else ``<agent>``."""
        if self.kind.config is FixedConfig:
            return f"{self.agent}-{self.k}"
        return f"{self.reward}-{self.agent}" if self.kind.uses_reward else self.agent

    @property
    def group(self) -> str:
        return self.kind.group

    @classmethod
    def parse(cls, name: str) -> MethodSpec:
        """Inverse of :attr:`name` (a ``@<observation>`` suffix, see :attr:`Cell.label`, is ignored)."""
        name = name.partition("@")[0]
        head, _, tail = name.partition("-")
        if head in registry.KINDS and registry.KINDS[head].config is FixedConfig:
            if not tail.isdigit():
                raise ValueError(f"bad method {name!r}: expected {head}-<K>")
            return cls(head, "bor", int(tail))
        if head in REWARD_KINDS and tail:
            return cls(tail, head)
        return cls(name)


def method_group(method: str) -> str:
    """``agent``, ``peer``, ``baseline`` or ``limit`` for a method name."""
    return MethodSpec.parse(method).group


@dataclass(frozen=True)
class Cell:
    """One independent unit of work: a condition, a method and a seed."""

    condition_id: ConditionId
    method: MethodSpec
    seed: int
    episode: EpisodeConfig
    dqn: DQNConfig = field(default_factory=DQNConfig)
    tabular: TabularConfig = field(default_factory=TabularConfig)
    split_seed: int = 0
    buckets: str = ""
    """Bucket scheme override ("default" or "narrow"); empty = the condition's own."""
    options: tuple[tuple[str, str], ...] = ()
    """Source options for user data (run/qrels paths, N, BEIR folder), with the inputs' sha256."""

    def __post_init__(self) -> None:
        if self.episode.reward != self.method.reward:  # the method's reward is the one stored
            object.__setattr__(self, "episode", replace(self.episode, reward=self.method.reward))
        if self.episode.observation != "auto" and not self.method.kind.observes:
            # a rule on the raw scores is the same policy under every observation set: one cell, no tag
            object.__setattr__(self, "episode", replace(self.episode, observation="auto"))

    @property
    def benchmark(self) -> str:
        return self.condition_id.benchmark

    @property
    def scorer(self) -> str:
        return self.condition_id.scorer

    @property
    def variant(self) -> str:
        return self.condition_id.variant

    @property
    def condition(self) -> str:
        if self.benchmark == "run":  # the file's stem and a hash of the inputs' contents
            return run_condition_name(dict(self.options))
        return self.condition_id.name

    @property
    def label(self) -> str:
        """The method's name in run ids and tables: :attr:`MethodSpec.name`, plus ``@<set>`` when the
        episode names an observation set (``bor-dqn@strict``), so runs on another set never share a
        run directory or a table row with the default ones. Only kinds that read an observation set
        (:attr:`agents.registry.PolicyKind.observes`) carry one; the others keep their plain name."""
        obs = self.episode.observation
        return self.method.name if obs == "auto" else f"{self.method.name}@{obs}"

    @property
    def run_id(self) -> str:
        """Deterministic id, e.g. ``bfcl-bm25__bor-dqn__s42``; a split seed other than 0 adds
        ``__split<n>`` (``bfcl-bm25__bor-dqn__s42__split3``), so cells of different splits
        never share a run directory."""
        base = f"{self.condition}__{self.label}__s{self.seed}"
        return base if self.split_seed == 0 else f"{base}__split{self.split_seed}"

    def settings(self) -> Any:
        """The settings the cell's policy kind is built with (None: the kind's defaults)."""
        config = self.method.kind.config
        if config is FixedConfig:
            return FixedConfig(self.method.k)
        configured: dict[type | None, Any] = {DQNConfig: self.dqn, TabularConfig: self.tabular}
        return configured.get(config)

    def resolved(self) -> dict:
        """Plain-dict config (only the agent settings the method uses)."""
        d: dict[str, Any] = {
            "condition": self.condition,
            "benchmark": self.benchmark,
            "scorer": self.scorer,
            "variant": self.variant,
            "method": self.method.name,
            "agent": self.method.agent,
            "train_reward": self.method.reward if self.method.kind.uses_reward else None,
            "k": self.method.k or None,
            "seed": self.seed,
            "split_seed": self.split_seed,
            "buckets": self.buckets or None,
            "options": dict(self.options) or None,
            "episode": asdict(self.episode),
        }
        settings = self.settings()
        if settings is not None and not isinstance(settings, FixedConfig):
            d[self.method.agent] = asdict(settings)
        return d

    def config_hash(self) -> str:
        """sha256 of the resolved config and of the package code (:func:`experiments.io.code_fingerprint`):
        a result is reused only when both match."""
        payload = {"config": self.resolved(), "code": code_fingerprint()}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
