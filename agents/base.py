"""The one protocol every depth policy follows, and helpers shared by the learners."""

from __future__ import annotations

import ctypes
import functools
import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, ClassVar, Protocol, Self, runtime_checkable

import numpy as np
from numpy.typing import NDArray

from envs import EpisodeConfig, RankedQuery
from envs.features import N_FEATURES, OBSERVATIONS, Observer, observation_of, observation_width, observed_matrix


@runtime_checkable
class DepthPolicy(Protocol):
    """A shortlist-depth policy: learned, fixed, heuristic or oracle.

    ``fit`` sees training queries (with labels) and the episode configuration;
    ``depths`` returns one depth per query in 1..cap(query) and must never read
    labels (``relevant_ranks``) except in an explicitly named oracle. ``save`` writes
    what a fitted policy needs into the file ``artifact`` of a run directory and the
    classmethod ``load(path, reward, settings)`` rebuilds it (JSON or weights only: never
    unpickling). A kind that estimates something on the way to a depth may also have
    ``explain(queries, config) -> (depths, [dict per query])``: the same depths as ``depths`` and the
    estimate behind each (docs/policies.md; the tool search shows it as a shortlist's ``why``).
    """

    name: str
    artifact: str
    stochastic: bool

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> DepthPolicy: ...

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]: ...

    def save(self, path: Path) -> None: ...

    @classmethod
    def load(cls, path: Path, reward: str = "bor", settings: Any = None) -> DepthPolicy: ...


_PROGRESS: dict[str, Any] = {"enabled": False, "position": 1}


def set_training_progress(enabled: bool, position: int = 1) -> None:
    """Whether learners show a per-run progress bar while they train, and on which terminal line
    (1 = just under the runner's cells bar; each parallel worker gets its own line)."""
    _PROGRESS.update(enabled=bool(enabled), position=int(position))


def training_bar(total: int, desc: str) -> Any:
    """A tqdm bar for one training run (steps, rate, ETA), or a disabled one (see :func:`set_training_progress`)."""
    import sys

    from tqdm.auto import tqdm

    return tqdm(
        total=total,
        desc=desc,
        disable=not _PROGRESS["enabled"],
        position=_PROGRESS["position"],
        leave=False,
        file=sys.stderr,
        unit="step",
        mininterval=0.5,
    )


def json_record(name: str, params: dict) -> dict:
    """``{"name": ..., "params": ...}``: the saved form of every JSON-backed policy (:func:`save_json` writes it to a
    file; a policy saved inside another's file, the residual DQN's posterior, is this record too)."""
    return {"name": name, "params": params}


def record_params(record: Any, where: str, what: str) -> dict:
    """The ``params`` of a :func:`json_record`; ValueError naming ``where`` and ``what`` otherwise."""
    try:
        params = record["params"]
        if not isinstance(params, dict):
            raise TypeError("params is not an object")
    except (KeyError, TypeError) as e:
        raise ValueError(f"{where}: malformed {what} file ({e})") from e
    return params


def save_json(path: Path, name: str, params: dict) -> None:
    """:func:`json_record` as JSON: the saved form of every JSON-backed policy."""
    Path(path).write_text(json.dumps(json_record(name, params), sort_keys=True) + "\n")


def learned_episode(config: EpisodeConfig, break_even: bool) -> EpisodeConfig:
    """The episode a learned agent (DQN, tabular Q, the cut-off) trains and acts in: ``config``, also
    capped at each query's break-even depth (:func:`rewards.break_even_depth`) when its ``break_even``
    setting is on. Every deeper STOP earns <= 0 in the agents' objective on every query whatever the
    labels, no more than K = 1, so it is never worth choosing; under BoR with a step cost this excludes
    the whole list (K = N). A bound, not a learned behaviour: the reports say how often a policy stops
    there (``break_even_pct``)."""
    return replace(config, break_even=True) if break_even and not config.break_even else config


def check_observation(name: str, trained: int, given: int, unit: str = "features per depth") -> None:
    """ValueError when a policy trained on one observation set (score-only or with a second scorer) is
    applied to queries of the other: ``trained`` and ``given`` count ``unit`` (features or table states)."""
    if trained != given:
        raise ValueError(
            f"{name}: trained on {trained} {unit} but these queries give {given}: train and apply it on the "
            "same observation set (with or without a second scorer)"
        )


def check_observation_set(name: str, trained: str, queries: Sequence[RankedQuery], config: EpisodeConfig) -> None:
    """ValueError when ``queries`` under ``config`` give another observation set than ``trained`` (a resolved
    name of :data:`envs.features.OBSERVATIONS`): by name, so two sets of one width are told apart too."""
    observation_width(queries, config.observation)  # one set on every query, or names the query that differs
    given = observation_of(queries[0], config.observation)
    if given != trained:
        raise ValueError(
            f"{name}: trained on the {trained!r} observation set ({len(OBSERVATIONS.get(trained, ()))} features per "
            f"depth) but these queries give {given!r} ({len(OBSERVATIONS[given])}): train and apply it on the same "
            "observation set (with or without a second scorer)"
        )


def read_json(path: Path, what: str) -> dict:
    """The ``params`` of a file written by :func:`save_json`; ValueError naming the file otherwise."""
    try:
        payload = json.loads(Path(path).read_text())
    except FileNotFoundError as e:
        raise FileNotFoundError(f"{path}: missing") from e
    except (OSError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: malformed {what} file ({e})") from e
    return record_params(payload, str(path), what)


class TorchJsonPolicy:
    """The construction, save and load shared by the torch policies of one reward kind whose settings (a
    frozen dataclass) set the shape of their network: the Choppy-style cut-off model (:mod:`agents.choppy`), the
    expected-reward cut-off (:mod:`agents.cutoff`) and its stepwise form (:mod:`agents.pfound`).

    The saved file (:func:`save_json`; no pickle) holds the reward kind, the settings, the fit's record
    (:meth:`fit_record`), the observation width (features per depth) and the network's weights as JSON lists.
    A subclass sets :attr:`kind` (its policies are named ``<reward>-<kind>``), :attr:`settings_type`,
    :attr:`file_kind` (what its file is called in error messages) and :meth:`new_net`, and fits ``net``.
    """

    artifact = "agent.json"
    stochastic = True
    kind: ClassVar[str]
    settings_type: ClassVar[type]
    file_kind: ClassVar[str]

    def __init__(self, reward: str = "bor", settings: Any = None) -> None:
        self.reward = reward
        self.settings = settings or self.settings_type()
        self.name = f"{reward}-{self.kind}"
        self.net: Any = None
        self.n_features = N_FEATURES
        self.final_loss = float("nan")

    @staticmethod
    def new_net(n_features: int, settings: Any) -> Any:
        """A freshly built network reading ``n_features`` features per depth, shaped by ``settings`` (its width
        ``hidden``, and whatever else of the settings sets the network's shape)."""
        raise NotImplementedError

    def fit_record(self) -> dict[str, float]:
        """What the saved file records of the last fit (e.g. its final training loss)."""
        raise NotImplementedError

    def read_record(self, params: dict) -> None:
        """Read back what the policy needs of its saved fit record at inference (nothing, unless a subclass fits a
        value beside its network); a missing or malformed entry raises KeyError, TypeError or ValueError."""

    def save(self, path: Path) -> None:
        """Weights and settings as JSON lists (no pickle)."""
        if self.net is None:
            raise RuntimeError(f"{self.name}: nothing to save")
        params = {
            "reward": self.reward,
            "settings": asdict(self.settings),
            **self.fit_record(),
            "n_features": self.n_features,
            "state": {k: v.tolist() for k, v in self.net.state_dict().items()},
        }
        save_json(path, self.name, params)

    @classmethod
    def load(cls, path: Path, reward: str = "bor", settings: Any = None) -> Self:
        """Rebuild a policy written by :meth:`save` (JSON; never executes code). The file's reward kind and
        settings win over the arguments; of the fit's record, only what :meth:`read_record` reads is read back."""
        import torch

        params = read_json(path, cls.file_kind)
        try:
            out = cls(params["reward"], cls.settings_type(**params["settings"]))
            out.n_features = int(params.get("n_features", N_FEATURES))
            net = cls.new_net(out.n_features, out.settings)
            net.load_state_dict({k: torch.tensor(v, dtype=torch.float32) for k, v in params["state"].items()})
            out.read_record(params)
        except (KeyError, TypeError, ValueError, RuntimeError, AttributeError) as e:
            raise ValueError(f"{path}: malformed {cls.file_kind} file ({e})") from e
        out.net = net.eval()
        return out


@dataclass(frozen=True)
class Objective:
    """What a policy is fitted or trained to maximise on its training queries (mean over queries).

    ``target="net"``: the terminal reward of ``reward`` when the shortlist holds a relevant item, minus
    ``step_cost`` per shown item after the first, with the K - 1 steps discounted by ``gamma`` as an RL
    return is (``gamma^(K-1) T(K) - c sum_{i<K-1} gamma^i``). With the BoR reward and ``gamma = 1`` this is
    the study's judged quantity, the **net reward** (:func:`judged_objective`). Other targets name what a
    kind fits instead: ``none`` (nothing is fitted: a fixed rule), ``coverage 0.9``, ``BoR bits``.
    """

    target: str
    reward: str = ""
    step_cost: float = 0.0
    gamma: float = 1.0


NOT_FITTED = Objective("none")
"""The objective of a rule that fits nothing (fixed K, the gap rule, a random depth)."""


def judged_objective(config: EpisodeConfig) -> Objective:
    """The study's judged objective for episodes of ``config``: the net reward, ``found x -log2 P_rand(K)
    - c (K - 1)`` undiscounted, with the condition's step cost c (the ``reward_net`` column of the
    evaluator; a shown tool costs tokens, which is also what a user pays)."""
    return Objective("net", "bor", float(config.step_cost), 1.0)


def net_objective(reward: str, settings: Any, config: EpisodeConfig) -> Objective:
    """The objective of a kind fitted to the undiscounted net reward of its ``reward`` (the judged one for
    BoR): the ``objective`` of every fitted peer, the cut-off and the DP and Bayes references."""
    return Objective("net", reward, float(config.step_cost), 1.0)


def return_objective(reward: str, settings: Any, config: EpisodeConfig) -> Objective:
    """The objective of an RL learner: the episode return with the episode's step cost and discount (the
    net reward when ``gamma = 1``)."""
    return Objective("net", reward, float(config.step_cost), float(config.gamma))


@dataclass(frozen=True)
class FixedConfig:
    """Settings of the fixed-K baseline."""

    k: int = 1
    """The depth shown for every query (clipped to each query's cap)."""

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"fixed K must be an integer >= 1, got {self.k!r}")


class FixedK:
    """Always show the top K (clipped to each query's depth cap)."""

    artifact = "agent.json"
    stochastic = False

    def __init__(self, k: int) -> None:
        if int(k) < 1:
            raise ValueError(f"fixed K must be >= 1, got {k}")
        self.k = int(k)
        self.name = f"fixed-{self.k}"

    def save(self, path: Path) -> None:
        save_json(path, self.name, {"k": self.k})

    @classmethod
    def load(cls, path: Path, reward: str = "bor", settings: Any = None) -> FixedK:
        p = read_json(path, "fixed-K policy")
        try:
            return cls(int(p["k"]))
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"{path}: malformed fixed-K policy file ({e})") from e

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> FixedK:
        return self

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        return np.array([min(self.k, config.cap(q)) for q in queries], dtype=np.int64)


def seed_everything(seed: int) -> None:
    """Seed Python, numpy's legacy global RNG (for libraries that use it) and torch, in one place: what a cell
    of ``shortlist train`` and ``shortlist_depth.fit`` both do before they build and fit a policy."""
    import random

    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 - third-party code may read the global RNG
    torch.manual_seed(seed)
    torch.set_num_threads(1)


def torch_on_one_thread() -> None:
    """What every torch learner sets before it fits or predicts: one CPU thread (the determinism the run
    directories promise) and, on glibc, freed memory kept for reuse (:func:`retain_freed_memory`)."""
    import torch

    torch.set_num_threads(1)
    retain_freed_memory()


@functools.cache
def retain_freed_memory() -> bool:
    """Ask glibc to keep freed memory for reuse instead of handing it back to the system at once.

    A full-batch fit frees and allocates the same multi-megabyte tensors at every epoch. glibc serves
    blocks above its mmap threshold with fresh mappings and trims the top of the heap on free, so every
    epoch faulted its pages in anew. With the mmap threshold at its largest (32 MiB) and heap trimming from
    256 MiB the pages are reused: fewer page faults and less CPU for bit-identical weights (the gain varies
    by model and machine; ``shortlist bench`` reports the fits' CPU seconds, tests/test_agents_cutoff.py checks
    that the setting applies). The process then keeps up to 256 MiB of freed heap. Once per process; returns
    whether it applied (False off Linux or glibc)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl has no mallopt)
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # glibc's <malloc.h> parameter numbers
    return bool(mallopt(m_mmap_threshold, 32 << 20)) and bool(mallopt(m_trim_threshold, 256 << 20))


def assumed_relevant(queries: Sequence[RankedQuery]) -> int:
    """The number of relevant items R a policy assumes at inference, fitted on its training ``queries``: the median
    of their R (at least 1), rounded half up. Inference never reads a query's own R (a label; SPEC section 2): a
    deployed tool search does not know it. On every benchmark condition R is the same on train and test (1, or 2
    on the multi-tool ones), so this is the test queries' R there; on a user's run whose R varies it is a guess."""
    if len(queries) == 0:
        raise ValueError("no training queries to take R from")
    r = np.maximum(np.array([q.n_relevant for q in queries], dtype=np.float64), 1.0)
    return max(1, int(np.floor(np.median(r) + 0.5)))


def read_assumed_relevant(params: dict, where: str) -> int:
    """The ``r_assumed`` a saved policy records (1 in a file written before it was recorded: every shipped and
    benchmark policy was fitted on R = 1 queries or records it); ValueError naming ``where`` if it is not a whole
    number >= 1."""
    raw = params.get("r_assumed", 1)
    if isinstance(raw, bool) or not isinstance(raw, int) or raw < 1:
        raise ValueError(f"{where}: 'r_assumed' must be a whole number >= 1, got {raw!r}")
    return raw


def in_id_order(queries: Sequence[RankedQuery]) -> list[RankedQuery]:
    """The queries sorted by query id (stable). A full-batch fit sums its loss over the queries in float32,
    and such a sum depends on the order of its terms; fitting on the id-sorted list makes the model a
    function of the set of training queries, never of the order a caller or a file lists them in."""
    return sorted(queries, key=lambda q: q.qid)


def stacked_features(
    queries: Sequence[RankedQuery], config: EpisodeConfig, observer: Observer | None = None
) -> tuple[NDArray[np.float32], NDArray[np.int64]]:
    """All observations of all queries at every depth, stacked: (sum of caps, F) and the offsets
    (F = 13, or 20 when the queries carry a second scorer; a mixed set is refused, naming a query; with
    ``observer``, its columns: :func:`envs.features.observed_matrix`)."""
    observation_width(queries, config.observation)
    mats = [observed_matrix(q, config.cap(q), config.observation, observer) for q in queries]
    offsets = np.zeros(len(mats) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum([m.shape[0] for m in mats])
    return np.concatenate(mats, axis=0), offsets


def row_depths(offsets: NDArray[np.int64]) -> NDArray[np.int64]:
    """Depth (1-based) of every stacked row, given the per-query offsets."""
    lengths = np.diff(offsets)
    return np.arange(int(offsets[-1])) - np.repeat(offsets[:-1], lengths) + 1


def first_stop(stop: NDArray[np.bool_], offsets: NDArray[np.int64]) -> NDArray[np.int64]:
    """Depth of the first STOP per query (the cap when the policy never stops).

    Args:
        stop: flat boolean "STOP at this depth" for every stacked row.
        offsets: query i owns rows offsets[i]:offsets[i+1] (depths 1..cap).
    """
    stop = stop.copy()
    stop[offsets[1:] - 1] = True  # the cap forces a STOP
    idx = np.flatnonzero(stop)
    first = idx[np.searchsorted(idx, offsets[:-1])]
    return (first - offsets[:-1] + 1).astype(np.int64)


def greedy_depths(
    queries: Sequence[RankedQuery],
    config: EpisodeConfig,
    stop_fn: Callable[[NDArray[np.float32]], NDArray[np.bool_]],
    observer: Observer | None = None,
) -> NDArray[np.int64]:
    """Roll a state-based STOP rule over every query at once (no per-step Python loop); the rule sees
    :func:`stacked_features` (``observer``'s columns when given)."""
    if len(queries) == 0:
        return np.zeros(0, dtype=np.int64)
    feats, offsets = stacked_features(queries, config, observer)
    return first_stop(np.asarray(stop_fn(feats), dtype=bool), offsets)
