"""A depth-policy method: a registered kind, the reward it trains towards and the value of its name field.

``bor-dqn``, ``fixed-5``, ``gap``: :class:`MethodSpec` parses and names them, builds the kind's settings and
derives the episode a method runs in (:meth:`MethodSpec.episode`). The study's cells, the Python API and a
loaded run directory all name their policies with it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from agents import registry
from envs import EpisodeConfig
from rewards import REWARD_KINDS


@dataclass(frozen=True)
class MethodSpec:
    """One depth policy: a registered kind, its training reward, and the value of its name field.

    The reward is stored here only: a cell's episode reward is derived from it. Kinds not
    trained towards a reward always carry ``"bor"`` (the evaluation reward). ``k`` is the value
    of the kind's :attr:`~agents.registry.PolicyKind.name_field` (fixed K's K: ``fixed-5``), 0 for
    kinds without one.
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
        if kind.name_field:
            self.settings()  # validates the named value (e.g. K >= 1)

    @property
    def kind(self) -> registry.PolicyKind:
        return registry.get(self.agent)

    def settings(self, base: Any = None) -> Any:
        """The kind's settings (``base``, else its defaults) with the method's name field applied."""
        settings = self.kind.settings(base)
        return replace(settings, **{self.kind.name_field: self.k}) if self.kind.name_field else settings

    @property
    def name(self) -> str:
        """``<kind>-<value>`` for a kind with a name field (``fixed-5``), ``<reward>-<agent>`` for trained
        methods, else ``<agent>``."""
        if self.kind.name_field:
            return f"{self.agent}-{self.k}"
        return f"{self.reward}-{self.agent}" if self.kind.uses_reward else self.agent

    @property
    def group(self) -> str:
        return self.kind.group

    def episode(self, base: EpisodeConfig) -> EpisodeConfig:
        """The episode this method trains and is evaluated in: ``base`` with the method's reward, and with
        the observation set reset to ``auto`` for a kind that reads none (a rule on the raw scores is the same
        policy under every set: one cell, no tag). The one place a method changes its episode settings:
        ``shortlist train`` (through :class:`experiments.config.Cell`) and ``shortlist_depth.fit`` both call it."""
        observation = base.observation if self.kind.observes else "auto"
        if base.reward == self.reward and base.observation == observation:
            return base
        return replace(base, reward=self.reward, observation=observation)

    @classmethod
    def parse(cls, name: str) -> MethodSpec:
        """Inverse of :attr:`name` (a ``@<observation>`` suffix, see :attr:`Cell.label`, is ignored)."""
        name = name.partition("@")[0]
        head, _, tail = name.partition("-")
        if head in registry.KINDS and registry.KINDS[head].name_field:
            if not tail.isdigit():
                raise ValueError(f"bad method {name!r}: expected {head}-<{registry.KINDS[head].name_field}>")
            return cls(head, "bor", int(tail))
        if head in REWARD_KINDS and tail:
            return cls(tail, head)
        return cls(name)


def method_group(method: str) -> str:
    """``agent``, ``peer``, ``baseline`` or ``limit`` for a method name."""
    return MethodSpec.parse(method).group
