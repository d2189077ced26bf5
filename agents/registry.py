"""Registry of depth-policy families beyond fixed K, DQN and tabular Q (heuristics, oracles, ...).

A family registers a factory ``factory(reward) -> DepthPolicy`` and whether it is trained
towards a reward (then its method name is ``<reward>-<name>``, else just ``<name>``).
The experiment runner builds every method through :func:`make`, so all families share
one runner and one evaluator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from agents.base import DepthPolicy


@dataclass(frozen=True)
class PolicyFamily:
    """A registered policy family."""

    factory: Callable[[str], DepthPolicy]
    uses_reward: bool
    description: str


FAMILIES: dict[str, PolicyFamily] = {}


def register(name: str, factory: Callable[[str], DepthPolicy], *, uses_reward: bool, description: str) -> None:
    """Add a family; names must not clash with the built-in agents (dqn, tabular, fixed)."""
    if name in ("dqn", "tabular", "fixed") or "_" in name:
        raise ValueError(f"invalid policy family name {name!r}")
    FAMILIES[name] = PolicyFamily(factory, uses_reward, description)


def make(name: str, reward: str) -> DepthPolicy:
    """Instantiate a registered family (untrained)."""
    if name not in FAMILIES:
        raise ValueError(f"unknown policy {name!r}; registered: {', '.join(sorted(FAMILIES)) or 'none'}")
    return FAMILIES[name].factory(reward)
