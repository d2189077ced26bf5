"""Frozen run configuration: a method (policy kind + training reward) and a cell (condition x
method x seed with every setting it depends on). Its resolved form is hashed: a finished run
is reused only when the hash matches."""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import asdict, dataclass, replace
from typing import Any

from agents import registry
from agents.base import Objective
from benchmarks.names import ConditionId, run_condition_name
from envs import EpisodeConfig
from experiments.io import code_fingerprint
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


@dataclass(frozen=True)
class Cell:
    """One independent unit of work: a condition, a method and a seed."""

    condition_id: ConditionId
    method: MethodSpec
    seed: int
    episode: EpisodeConfig
    settings: Any = None
    """The policy kind's settings (an instance of its settings dataclass; None: the kind's defaults).
    A kind's name field (fixed K's K) comes from the method, never from here."""
    split_seed: int = 0
    buckets: str = ""
    """Bucket scheme override ("default" or "narrow"); empty = the condition's own."""
    options: tuple[tuple[str, str], ...] = ()
    """Source options for user data (run/qrels paths, N, BEIR folder), with the inputs' sha256."""

    def __post_init__(self) -> None:
        if self.settings is not None:
            self.method.kind.settings(self.settings)  # the kind's own dataclass, or TypeError
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

    def policy_settings(self) -> Any:
        """The settings the cell's policy kind is built with: :attr:`settings` (or the kind's defaults)
        with the method's name field applied."""
        return self.method.settings(self.settings)

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
            "objective": asdict(self.objective()),
        }
        settings = asdict(self.policy_settings())
        if self.method.kind.name_field:
            settings.pop(self.method.kind.name_field)  # named by the method (fixed-5) and by ``k``
        if settings:
            d["settings"] = settings
        return d

    def objective(self) -> Objective:
        """What the cell's policy is fitted or trained to maximise (:attr:`agents.registry.PolicyKind.objective`)."""
        return self.method.kind.objective(self.method.reward, self.policy_settings(), self.episode)

    def command(self, out: str = "runs") -> str:
        """The exact ``shortlist train`` command that recreates this cell (the same config hash, hence the
        same tables byte for byte on the same machine) under ``out/runs``."""
        m, e, c = self.method, self.episode, self.condition_id
        opts = dict(self.options)
        if c.benchmark == "run":
            args = ["--run", opts["run"], "--qrels", opts["qrels"]]
            args += ["--n-candidates", opts["n_candidates"]] if "n_candidates" in opts else []
        else:
            args = ["--benchmark", c.benchmark, "--scorer", c.scorer] + (["--variant", c.variant] if c.variant else [])
            if c.benchmark == "beir":
                args += ["--beir-dir", opts["beir_dir"], "--beir-split", opts["split"]]
        args += ["--agent", m.agent]
        args += ["--reward", m.reward] if m.kind.uses_reward else []
        args += [f"--{m.kind.name_field}", str(m.k)] if m.kind.name_field else []
        args += ["--seeds", str(self.seed), "--split-seeds", str(self.split_seed)]
        args += ["--step-cost", repr(e.step_cost), "--gamma", repr(e.gamma)]
        args += ["--max-depth", str(e.max_depth)] if e.max_depth is not None else []
        args += ["--observation", e.observation] if e.observation != "auto" else []
        args += ["--buckets", self.buckets] if self.buckets else []
        for item in registry.changed_items(m.kind, self.policy_settings()):
            args += ["--set", item]
        return shlex.join(["shortlist", "train", *args, "--out", out])

    def config_hash(self) -> str:
        """sha256 of the resolved config and of the package code (:func:`experiments.io.code_fingerprint`):
        a result is reused only when both match."""
        payload = {"config": self.resolved(), "code": code_fingerprint()}
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
