"""A trained depth policy with its episode settings: saved to and loaded from a run directory.

>>> import shortlist_depth as sd
>>> policy = sd.load_policy("results/bfcl/runs/bfcl-bm25__bor-dqn__s42")   # doctest: +SKIP
>>> policy.depth([12.1, 9.3, 9.2, 4.0, 3.9])                               # doctest: +SKIP
1

:func:`load_policy` reads a run directory written by ``shortlist train`` / ``reproduce`` or by
:meth:`TrainedPolicy.save` (a policy fitted from Python with ``shortlist_depth.fit``): its ``config.json``
and the policy file it saved. It returns a :class:`TrainedPolicy`: the policy of any registered kind with
the episode settings it was trained with. It decides depths from scores alone (the observation features of
:mod:`envs.features`), so it applies to any scorer's lists: scores sorted descending, one list per query,
and optionally the candidate-set size N when a list was truncated from a larger pool.

What a policy needs to exist and load lives here, beside the policies, never in the study layer: the method
(:class:`agents.method.MethodSpec`), the seeding (:func:`agents.base.seed_everything`) and this module.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from agents.base import DepthPolicy, FixedK
from agents.method import MethodSpec
from envs import EpisodeConfig, RankedQuery

#: The keys every run directory's ``config.json`` holds (a study run adds its condition: benchmark, scorer, ...).
CONFIG_KEYS = ("agent", "train_reward", "episode", "seed", "method")


def read_run_config(run_dir: str | Path) -> dict[str, Any]:
    """The checked ``config.json`` of a run directory; a one-line error naming the file otherwise."""
    run = Path(run_dir)
    cfg_path = run / "config.json"
    if not str(run_dir) or not cfg_path.is_file():
        raise FileNotFoundError(f"{run}: not a run directory (no config.json)")
    try:
        cfg = json.loads(cfg_path.read_text(encoding="utf-8"))
        if not isinstance(cfg, dict):
            raise TypeError("not a JSON object")
        missing = [k for k in CONFIG_KEYS if k not in cfg]
        if missing:
            raise KeyError(f"missing {missing}")
        for key in ("seed", "split_seed"):
            v = cfg.get(key, 0)
            if isinstance(v, bool) or not isinstance(v, int):
                raise TypeError(f"{key!r} must be an integer, got {v!r}")
        if not isinstance(cfg["method"], str):
            raise TypeError(f"'method' must be a string, got {cfg['method']!r}")
        spec = MethodSpec.parse(cfg["method"])
        if cfg["agent"] != spec.kind.name:
            raise ValueError(f"'agent' {cfg['agent']!r} disagrees with method {cfg['method']!r}")
        if "k" in cfg and cfg["k"] != (spec.k or None):
            raise ValueError(f"'k' {cfg['k']!r} disagrees with method {cfg['method']!r}")
        if not isinstance(cfg["episode"], dict):
            raise TypeError("'episode' must be an object")
        EpisodeConfig(**cfg["episode"])
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as e:
        raise ValueError(f"{cfg_path}: malformed run config ({e})") from e
    return cfg


def _settings(cfg: dict[str, Any], spec: MethodSpec, run: Path) -> Any:
    """The run's policy settings: ``settings`` of its config (older runs: the key named after the kind),
    over the kind's defaults, with the method's name field (fixed K's K) applied."""
    raw = cfg.get("settings", cfg.get(spec.kind.name)) or {}
    if not isinstance(raw, dict):
        raise ValueError(f"{run / 'config.json'}: malformed {spec.kind.name} settings (not an object)")
    if spec.kind.name_field:
        raw = {k: v for k, v in raw.items() if k != spec.kind.name_field}
    return spec.settings(spec.kind.from_dict(raw, str(run / "config.json")))


def load_run_policy(run_dir: str | Path, cfg: dict[str, Any] | None = None) -> DepthPolicy:
    """The fitted policy saved in a run directory, of any registered kind.

    Fixed K, which learns nothing, is rebuilt from the config when an older run directory
    holds no policy file; every other kind needs the file it saved.
    """
    run = Path(run_dir)
    cfg = cfg if cfg is not None else read_run_config(run)
    spec = MethodSpec.parse(cfg["method"])
    settings = _settings(cfg, spec, run)
    policy = spec.kind.make(spec.reward, settings)
    artifact = run / policy.artifact
    if artifact.is_file():
        return spec.kind.load(artifact, spec.reward, settings)
    if isinstance(policy, FixedK):  # learns nothing: older run directories hold no policy file
        return policy
    raise FileNotFoundError(f"{artifact}: missing")


@dataclass(frozen=True)
class TrainedPolicy:
    """A fitted depth policy with the episode settings it was trained with.

    Attributes:
        policy: the fitted policy (any registered kind).
        episode: its episode settings (reward, step cost, discount, depth cap).
        method: its method name, e.g. ``bor-dqn``.
        run_dir: where it was loaded from; None for a policy fitted in this process
            (``shortlist_depth.fit``).
        config: the run's resolved config.
    """

    policy: DepthPolicy
    episode: EpisodeConfig
    method: str
    run_dir: Path | None
    config: dict[str, Any]

    def queries(
        self, score_lists: Sequence[ArrayLike], n_candidates: int | Sequence[int] | None = None
    ) -> list[RankedQuery]:
        """Unlabelled ranked queries from score lists (each sorted descending)."""
        ns = (
            [n_candidates] * len(score_lists) if n_candidates is None or isinstance(n_candidates, int) else n_candidates
        )
        if len(ns) != len(score_lists):
            raise ValueError(f"{len(ns)} n_candidates for {len(score_lists)} score lists")
        return [
            RankedQuery(np.asarray(s, dtype=np.float64), np.zeros(0, dtype=np.int64), f"list-{i}", int(n or 0))
            for i, (s, n) in enumerate(zip(score_lists, ns, strict=True))
        ]

    def depths(
        self, score_lists: Sequence[ArrayLike], n_candidates: int | Sequence[int] | None = None
    ) -> NDArray[np.int64]:
        """The depth K chosen for each score list (1 <= K <= min(len, depth cap)).

        Args:
            score_lists: one array of scores per query, sorted descending (ties allowed).
            n_candidates: candidate-set size N per list (or one for all) when the lists were
                truncated from a larger pool; default each list's length.
        """
        if MethodSpec.parse(self.method).kind.reads_labels:
            raise ValueError(f"{self.method} reads the labels: it cannot choose depths from scores alone")
        if len(score_lists) == 0:
            return np.zeros(0, dtype=np.int64)
        return np.asarray(self.policy.depths(self.queries(score_lists, n_candidates), self.episode), dtype=np.int64)

    def depth(self, scores: ArrayLike, n_candidates: int | None = None) -> int:
        """The depth K chosen for one score list (sorted descending)."""
        return int(self.depths([scores], n_candidates)[0])

    def save(self, run_dir: str | Path, *, overwrite: bool = False) -> Path:
        """Write this policy as a run directory that :func:`load_policy` reads: ``config.json`` (its config,
        with the method, reward and episode settings) and the policy's own file (``agent.json`` or
        ``agent.zip``; weights and numbers, never a pickle). The folder is written beside ``run_dir`` and
        renamed into place once complete, so a reader never sees half of it.

        Raises:
            FileExistsError: ``run_dir`` exists and is not empty (another policy, or another run's
                results), unless ``overwrite``.
        """
        run = Path(run_dir)
        if run.exists() and (not run.is_dir() or any(run.iterdir())) and not overwrite:
            raise FileExistsError(f"{run}: exists and is not empty; save elsewhere or pass overwrite=True")
        config = {**self.config, "method": self.method, "episode": asdict(self.episode)}
        run.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=run.parent, prefix=f".{run.name}.{os.getpid()}."))
        try:
            (tmp / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
            self.policy.save(tmp / self.policy.artifact)
            read_run_config(tmp)  # what load_policy will read: checked before it replaces anything
            if run.exists():
                shutil.rmtree(run) if run.is_dir() else run.unlink()
            os.replace(tmp, run)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        return run


def load_policy(run_dir: str | Path) -> TrainedPolicy:
    """The trained policy of a run directory (any registered kind), ready for :meth:`TrainedPolicy.depth`."""
    run = Path(run_dir)
    cfg = read_run_config(run)
    return TrainedPolicy(load_run_policy(run, cfg), EpisodeConfig(**cfg["episode"]), cfg["method"], run, cfg)
