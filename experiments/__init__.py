"""Configs, CLI, runners, aggregation and plots: the only place that parses arguments and writes results.

``from experiments import load_policy`` gives a trained policy of any kind, ready to choose depths
on any retriever's scores (:mod:`agents.trained`; the public name is ``shortlist_depth.load_policy``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["load_policy"]


def __getattr__(name: str) -> Any:  # lazy: importing experiments.io or experiments.html needs no torch
    if name in ("load_policy", "TrainedPolicy"):
        from agents import trained

        return getattr(trained, name)
    raise AttributeError(f"module 'experiments' has no attribute {name!r}")
