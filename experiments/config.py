"""Frozen run configuration: every option is a dataclass field with a docstring, and the CLI
is generated from these fields (see :func:`experiments.cli.add_dataclass_args`)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field

from agents.dqn import DQNConfig
from agents.tabular import TabularConfig
from envs import EpisodeConfig

AGENTS = ("dqn", "tabular", "fixed")
FIXED_KS = (1, 3, 5, 10, 20, 50)


@dataclass(frozen=True)
class MethodSpec:
    """One depth policy: a learner and its training reward, or a fixed K."""

    agent: str
    reward: str = "bor"
    k: int = 0

    def __post_init__(self) -> None:
        if self.agent not in AGENTS:
            raise ValueError(f"unknown agent {self.agent!r}; expected one of {', '.join(AGENTS)}")
        if self.agent == "fixed" and self.k < 1:
            raise ValueError("a fixed-K method needs k >= 1")

    @property
    def name(self) -> str:
        """``fixed-<K>`` or ``<reward>-<agent>``."""
        return f"fixed-{self.k}" if self.agent == "fixed" else f"{self.reward}-{self.agent}"

    @classmethod
    def parse(cls, name: str) -> MethodSpec:
        """Inverse of :attr:`name`."""
        head, _, tail = name.partition("-")
        if head == "fixed":
            if not tail.isdigit():
                raise ValueError(f"bad method {name!r}: expected fixed-<K>")
            return cls("fixed", "bor", int(tail))
        if tail not in AGENTS:
            raise ValueError(f"bad method {name!r}: expected <reward>-<agent> or fixed-<K>")
        return cls(tail, head)


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

    @property
    def condition(self) -> str:
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
            "train_reward": self.method.reward if self.method.agent != "fixed" else None,
            "k": self.method.k or None,
            "seed": self.seed,
            "split_seed": self.split_seed,
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
