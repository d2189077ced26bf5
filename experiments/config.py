"""Frozen run configuration: a cell (condition x method x seed with every setting it depends on; the method is
an :class:`agents.method.MethodSpec`). Its resolved form is hashed: a finished run is reused only when the hash
matches."""

from __future__ import annotations

import hashlib
import json
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from agents import registry
from agents.base import Objective
from agents.method import MethodSpec
from agents.trained import read_run_config
from benchmarks.names import (
    DEFAULT_TRAIN_FRAC,
    ConditionId,
    beir_source_name,
    log_condition_name,
    run_condition_name,
)
from envs import EpisodeConfig
from experiments.io import code_fingerprint


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
        # the method's reward and observation set are the ones stored (agents.method.MethodSpec.episode)
        object.__setattr__(self, "episode", self.method.episode(self.episode))

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
        if self.benchmark == "log":  # the log's stem and a hash of the tools' and the log's contents
            return log_condition_name(self.scorer, self.variant, dict(self.options))
        if self.benchmark == "beir":  # the folder's name and a hash of its files' contents
            return beir_source_name(self.scorer, self.variant, dict(self.options))
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
        elif c.benchmark == "log":
            args = ["--tools", opts["tools"], "--log", opts["log"], "--scorer", c.scorer]
            args += ["--variant", c.variant] if c.variant else []
            frac = float(opts.get("train_frac") or DEFAULT_TRAIN_FRAC)
            args += ["--train-frac", repr(frac)] if frac != DEFAULT_TRAIN_FRAC else []
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


#: What the ``config.json`` of a study run holds beside a policy's own keys (:data:`agents.trained.CONFIG_KEYS`):
#: the condition it was trained on.
CONDITION_KEYS = ("benchmark", "scorer")


def read_cell_config(run_dir: str | Path) -> dict[str, Any]:
    """The checked ``config.json`` of a run directory made by ``shortlist train`` / ``reproduce``:
    :func:`agents.trained.read_run_config`, and its condition (benchmark, scorer, variant) named and known; a
    one-line error naming the file otherwise. A policy saved from Python has no condition: ``shortlist
    evaluate`` and ``shortlist shift`` need one, ``load_policy`` does not."""
    from benchmarks.conditions import candidate_rule

    cfg = read_run_config(run_dir)
    path = Path(run_dir) / "config.json"
    try:
        missing = [k for k in CONDITION_KEYS if k not in cfg]
        if missing:
            raise KeyError(f"missing {missing} (a run of shortlist train names its condition)")
        candidate_rule(cfg["benchmark"], cfg.get("variant", "") or "")
    except (ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{path}: malformed run config ({e})") from e
    return cfg
