"""Registry of every depth-policy kind: learned agents, fixed K, practitioners' peers and limits.

One :class:`PolicyKind` per kind holds everything the rest of the package needs to know
about it: its group, whether its result depends on the seed, its settings dataclass, how
to build it untrained and how to load a trained one from the file it saved. The runner,
the CLI (``shortlist train --agent X`` / ``evaluate``), the comparison and the reports read
this table; none of them switch on kind names. Adding a policy is one :func:`register`
call beside its class.

Method names: ``fixed-<K>`` for the fixed baseline, ``<reward>-<kind>`` for kinds trained
towards a reward (``bor-dqn``), else the kind's name (``gap``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from agents.base import DepthPolicy, FixedConfig, FixedK

Group = Literal["agent", "peer", "baseline", "limit"]
GROUPS: tuple[Group, ...] = ("agent", "peer", "baseline", "limit")
"""Report order of the groups: learned agents, practitioners' peers, fixed K, limits (read labels
or solve a model)."""


@dataclass(frozen=True)
class PolicyKind:
    """A registered depth-policy kind.

    Attributes:
        name: kind name (``dqn``, ``tabular``, ``fixed``, ``gap``, ...); no ``_``.
        group: ``agent`` (learned by RL), ``peer`` (heuristic or supervised method
            practitioners use), ``baseline`` (fixed K) or ``limit`` (oracle, exact optimum).
        stochastic: whether the result depends on the seed (then it runs on every seed).
        uses_reward: whether it is trained towards a reward (its method name then starts with it).
        description: one line for reports and ``--help``.
        build: ``build(reward, settings)`` -> an untrained policy; ``settings`` is an instance
            of ``config`` or None for its defaults.
        config: the settings dataclass, or None when the kind has no settings.
        only_benchmarks: the benchmarks the kind applies to (empty: every benchmark), e.g. a
            limit that needs a known generator.
        reads_labels: whether its depths read the labels (the hindsight oracle): then it is a
            reference, never a policy to apply to unlabelled lists.
        observes: whether it reads an observation set of :mod:`envs.features` (the episode's
            ``observation``): only then does a named set (``--observation strict``) change its
            cell and tag its method (``bor-dqn@strict``); a rule on the raw scores is the same
            policy under every set.
    """

    name: str
    group: Group
    stochastic: bool
    uses_reward: bool
    description: str
    build: Callable[[str, Any], DepthPolicy]
    config: type | None = None
    only_benchmarks: tuple[str, ...] = ()
    reads_labels: bool = False
    observes: bool = False

    def applies_to(self, benchmark: str) -> bool:
        """Whether the kind can run on ``benchmark``."""
        return not self.only_benchmarks or benchmark in self.only_benchmarks

    def make(self, reward: str = "bor", settings: Any = None) -> DepthPolicy:
        """An untrained policy (``settings`` defaults to ``config()``)."""
        if settings is not None and self.config is not None and not isinstance(settings, self.config):
            raise TypeError(f"{self.name}: settings must be a {self.config.__name__}, got {type(settings).__name__}")
        return self.build(reward, settings)

    def load(self, path: Path, reward: str = "bor", settings: Any = None) -> DepthPolicy:
        """A trained policy from the file it saved (``path`` = run dir / artifact)."""
        policy = self.make(reward, settings)
        return type(policy).load(Path(path), reward, settings)


KINDS: dict[str, PolicyKind] = {}


def register(
    name: str,
    build: Callable[[str, Any], DepthPolicy],
    *,
    group: Group,
    stochastic: bool,
    uses_reward: bool,
    description: str,
    config: type | None = None,
    only_benchmarks: tuple[str, ...] = (),
    reads_labels: bool = False,
    observes: bool = False,
) -> PolicyKind:
    """Add a kind to :data:`KINDS` (names are unique and contain no ``_``)."""
    if not name or "_" in name or name in KINDS:
        raise ValueError(f"invalid or duplicate policy kind name {name!r}")
    if group not in GROUPS:
        raise ValueError(f"policy kind {name!r}: group must be one of {GROUPS}, got {group!r}")
    kind = PolicyKind(
        name, group, stochastic, uses_reward, description, build, config, only_benchmarks, reads_labels, observes
    )
    KINDS[name] = kind
    return kind


def get(name: str) -> PolicyKind:
    """The registered kind ``name``; ValueError listing the registered ones otherwise."""
    if name not in KINDS:
        raise ValueError(f"unknown policy {name!r}; registered: {', '.join(KINDS) or 'none'}")
    return KINDS[name]


def make(name: str, reward: str = "bor", settings: Any = None) -> DepthPolicy:
    """Instantiate a registered kind (untrained)."""
    return get(name).make(reward, settings)


def kinds(group: Group | None = None) -> list[str]:
    """Registered kind names (of one group), in registration order."""
    return [k for k, v in KINDS.items() if group is None or v.group == group]


register(
    "fixed",
    lambda reward, settings: FixedK((settings or FixedConfig()).k),
    group="baseline",
    stochastic=False,
    uses_reward=False,
    description="always the top K",
    config=FixedConfig,
)
