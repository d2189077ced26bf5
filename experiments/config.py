"""Frozen run configuration: every option is a dataclass field with a docstring, and the CLI
is generated from these fields (see :func:`experiments.cli.add_dataclass_args`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from agents import registry
from agents.dqn import DQNConfig
from agents.tabular import TabularConfig
from envs import EpisodeConfig
from rewards import REWARD_KINDS

AGENTS = ("dqn", "tabular", "fixed")
FIXED_KS = (1, 3, 5, 10, 20, 50)


@dataclass(frozen=True)
class MethodSpec:
    """One depth policy: a learner and its training reward, or a fixed K."""

    agent: str
    reward: str = "bor"
    k: int = 0

    def __post_init__(self) -> None:
        if self.agent not in AGENTS and self.agent not in registry.FAMILIES:
            known = ", ".join([*AGENTS, *sorted(registry.FAMILIES)])
            raise ValueError(f"unknown agent {self.agent!r}; expected one of {known}")
        if self.reward not in REWARD_KINDS:
            raise ValueError(f"unknown reward {self.reward!r}; expected one of {', '.join(REWARD_KINDS)}")
        if self.agent == "fixed" and self.k < 1:
            raise ValueError("a fixed-K method needs k >= 1")

    @property
    def uses_reward(self) -> bool:
        """Whether the method is trained towards a reward (its name then starts with it)."""
        if self.agent in ("dqn", "tabular"):
            return True
        return self.agent in registry.FAMILIES and registry.FAMILIES[self.agent].uses_reward

    @property
    def name(self) -> str:
        """``fixed-<K>``, ``<reward>-<agent>`` for trained methods, else ``<agent>``."""
        if self.agent == "fixed":
            return f"fixed-{self.k}"
        return f"{self.reward}-{self.agent}" if self.uses_reward else self.agent

    @classmethod
    def parse(cls, name: str) -> MethodSpec:
        """Inverse of :attr:`name`."""
        head, _, tail = name.partition("-")
        if head == "fixed":
            if not tail.isdigit():
                raise ValueError(f"bad method {name!r}: expected fixed-<K>")
            return cls("fixed", "bor", int(tail))
        if head in REWARD_KINDS and tail:
            return cls(tail, head)
        return cls(name)


@dataclass(frozen=True)
class Cell:
    """One independent unit of work: a condition, a method and a seed."""

    benchmark: str
    scorer: str
    method: MethodSpec
    seed: int
    episode: EpisodeConfig
    dqn: DQNConfig = field(default_factory=DQNConfig)
    tabular: TabularConfig = field(default_factory=TabularConfig)
    split_seed: int = 0
    variant: str = ""
    buckets: str = ""
    """Bucket scheme override ("default" or "narrow"); empty = the condition's own."""
    options: tuple[tuple[str, str], ...] = ()
    """Source options for user data (run/qrels paths, N, BEIR folder), with the inputs' sha256."""

    @property
    def condition(self) -> str:
        if self.benchmark == "run":
            return f"run-{Path(dict(self.options)['run']).stem}"
        base = f"{self.benchmark}-{self.scorer}"
        return f"{base}-{self.variant}" if self.variant else base

    @property
    def run_id(self) -> str:
        """Deterministic id, e.g. ``bfcl-bm25__bor-dqn__s42``."""
        return f"{self.condition}__{self.method.name}__s{self.seed}"

    def resolved(self) -> dict:
        """Plain-dict config (only the agent settings the method uses)."""
        d = {
            "condition": self.condition,
            "benchmark": self.benchmark,
            "scorer": self.scorer,
            "variant": self.variant,
            "method": self.method.name,
            "agent": self.method.agent,
            "train_reward": self.method.reward if self.method.uses_reward else None,
            "k": self.method.k or None,
            "seed": self.seed,
            "split_seed": self.split_seed,
            "buckets": self.buckets or None,
            "options": dict(self.options) or None,
            "episode": asdict(self.episode),
        }
        if self.method.agent == "dqn":
            d["dqn"] = {**asdict(self.dqn), "net_arch": list(self.dqn.net_arch)}
        if self.method.agent == "tabular":
            d["tabular"] = asdict(self.tabular)
        return d

    def config_hash(self) -> str:
        """sha256 of the resolved config: a result is reused only when this matches."""
        return hashlib.sha256(json.dumps(self.resolved(), sort_keys=True).encode()).hexdigest()
