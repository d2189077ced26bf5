"""DQN as a residual on the listwise posterior: RL that starts from the best supervised model.

Why this kind exists (issue 39). The DQN trained on the score features stays significantly behind the supervised
listwise posterior (:mod:`agents.posterior`) on most conditions. Handing the DQN the posterior's belief as extra
observation columns closed only a third to a half of that gap on two conditions (docs/policies.md): a value learner
trained on two-point terminal rewards does not recover the posterior's decision even when it observes it. This kind
asks the remaining question directly: starting from the posterior's own decision, does RL on the rewards improve on
it?

Model
-----
Observation: the named set of the episode (``score`` or ``hybrid``; ``strict`` too) followed by the posterior's
belief at depth k, :data:`BELIEF_NAMES`:

- ``belief_found`` = F(k), the posterior's P(found by k);
- ``belief_stop`` = F(k) T(k) / s, the expected terminal reward of STOP at k under the posterior;
- ``belief_continue`` = (max_{j > k} V(j) + c (k - 1)) / s with V(j) = F(j) T(j) - c (j - 1), the value of going
  on and stopping at the posterior's best deeper depth (-1 when there is none: past the posterior's M ranks or
  the cap; clipped at -1),

with T the terminal reward when found, c the step cost and s = ``prior_scale``. Beyond the posterior's M ranks the
row is (F(M), 0, -1): the prior stops there.

Q-network: Q(s, a) = s * (belief_stop, belief_continue)[a] + MLP(s)[a], the MLP being the DQN's (64-64) with its
last layer initialised to zero (online and target network alike). Untrained, Q(STOP) >= Q(CONTINUE) exactly where
the posterior's expected net reward at k is at least that of its best deeper depth, so the untrained policy IS the
posterior's argmax (tests check the depths are equal), and the prior is the posterior's own Q under its model,
Bellman-consistent with the environment's -c per CONTINUE at gamma 1: the MLP only has to learn what the rewards
say the posterior gets wrong.

Beliefs on the training queries are cross-fitted (``folds`` folds of the sorted query ids, seeded by
``fold_seed``; :func:`agents.auto.cv_folds`): each query's belief comes from a posterior fitted on the other
folds, so the DQN trains on beliefs as wrong as they will be on unseen queries, not on a posterior that has seen
the query's label. At inference the belief comes from the posterior fitted on every training query (saved inside
the agent). Checkpoints: ``held_out`` (default 0.3) of the training queries score the greedy policy every
``eval_every`` steps and at step 0, before any gradient step, where it scores the posterior itself; trained
weights replace it only when they are significantly better on those queries (``start_margin``, a paired one-sided
test of each checkpoint, uncorrected for how many are scored; the best such weights win). Without that margin the
best mean won outright, and the trained weights it kept did not carry over to the test queries (docs/policies.md).
A fit records which step it kept (:attr:`ResidualDQN.chosen_step`, saved with the agent).

Every other setting is the DQN's (:class:`agents.dqn.DQNConfig`: SB3's DQN, squared-error loss, 4-step returns,
15,000 steps, gamma 1 on the judged net reward). The posterior is fitted with its kind's default settings.
"""

from __future__ import annotations

import functools
import json
import math
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from agents.base import json_record, record_params, return_objective
from agents.dqn import DQNAgent, DQNConfig
from agents.posterior import ListwisePosterior
from agents.registry import register
from envs import EpisodeConfig, RankedQuery, feature_matrix
from envs.features import OBSERVATIONS, observation_of

BELIEF_NAMES: tuple[str, ...] = ("belief_found", "belief_stop", "belief_continue")
"""The posterior's belief columns, observed after the named set's (module docstring)."""
PRIOR_FILE = "residual.json"
"""The zip entry holding the posterior (its JSON), the settings the prior needs and the checkpoint kept."""


@dataclass(frozen=True)
class ResidualConfig(DQNConfig):
    """The DQN's settings (:class:`agents.dqn.DQNConfig`) with a 30% hold-out by default, and the prior's."""

    held_out: float = 0.3
    """Share of the training queries held out to choose the weights (0: the last weights). The first score comes
    at step 0, before any gradient step, so the selection can keep the untrained residual, i.e. the posterior."""
    folds: int = 5
    """Folds of the cross-fitted training beliefs (each query's belief from a posterior fitted on the others)."""
    fold_seed: int = 7
    """Seed of the folds (a seeded permutation of the sorted query ids)."""
    prior_scale: float = 10.0
    """s: the belief columns are the prior's Q-values divided by s (to keep them near [-1, 1] for the MLP)."""
    start_margin: float = 1.96
    """Trained weights replace the start (the posterior) only when they are significantly better on the hold-out:
    their mean return minus the start's, paired over the held-out queries, above this many standard errors
    (1.96: the lower end of a paired 95% interval above 0, each checkpoint tested on its own;
    :class:`agents.sb3.Checkpoints`). 0: any trained weights whose paired mean beats the start's can win, the best
    of them: the best-mean rule used before this setting existed, except that with a single held-out query the
    start is always kept."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.folds < 2:
            raise ValueError(f"ResidualConfig.folds must be >= 2, got {self.folds}")
        if not (math.isfinite(self.prior_scale) and self.prior_scale > 0):
            raise ValueError(f"ResidualConfig.prior_scale must be finite and > 0, got {self.prior_scale}")
        if not (math.isfinite(self.start_margin) and self.start_margin >= 0):
            raise ValueError(f"ResidualConfig.start_margin must be finite and >= 0, got {self.start_margin}")


def beliefs(
    prior: ListwisePosterior, queries: Sequence[RankedQuery], config: EpisodeConfig, scale: float
) -> list[NDArray[np.float32]]:
    """Per query, the (cap, 3) belief columns of depths 1..cap (``config.cap``; module docstring)."""
    if not queries:
        return []
    found, value = prior.found_and_value(queries, config)
    out = []
    for q, f_all, v_all in zip(queries, found, value, strict=True):
        cap = config.cap(q)
        m = int(np.isfinite(v_all).sum())  # the finite prefix: depths 1..min(M, the prior's cap)
        f, v = f_all[:m], v_all[:m]  # m <= cap: the prior's cap is the episode's, or the break-even one below it
        k = np.arange(1, m + 1)
        after = np.full(m, -np.inf)  # best V(j) over j > k
        if m > 1:
            after[:-1] = np.maximum.accumulate(v[::-1])[::-1][1:]
        paid = config.step_cost * (k - 1)
        b = np.empty((cap, 3), dtype=np.float64)
        b[:m, 0] = f
        b[:m, 1] = (v + paid) / scale
        with np.errstate(invalid="ignore"):
            b[:m, 2] = np.maximum((after + paid) / scale, -1.0)
        b[m:] = (f[-1], 0.0, -1.0)
        out.append(b.astype(np.float32))
    return out


class BeliefObserver:
    """The named set's columns then the belief's (:class:`envs.Observer`), for the queries it was built for (by
    object: a query it does not know is a ValueError naming it)."""

    def __init__(self, observation: str, queries: Sequence[RankedQuery], rows: Sequence[NDArray[np.float32]]) -> None:
        self.observation = observation
        self.names: tuple[str, ...] = OBSERVATIONS[observation] + BELIEF_NAMES
        # keyed by object identity; holding each query keeps its id from being reused by another object
        self._rows = {id(q): (q, r) for q, r in zip(queries, rows, strict=True)}

    def __call__(self, query: RankedQuery, depth: int) -> NDArray[np.float32]:
        held = self._rows.get(id(query))
        if held is None:
            raise ValueError(f"query {query.qid!r}: no belief was computed for it")
        rows = held[1]
        if depth > len(rows):
            raise ValueError(f"query {query.qid!r}: belief rows for depths 1..{len(rows)}, asked for {depth}")
        return np.concatenate([feature_matrix(query, depth, self.observation), rows[:depth]], axis=1)


def cross_fitted_beliefs(
    queries: Sequence[RankedQuery], config: EpisodeConfig, reward: str, folds: int, seed: int, scale: float
) -> list[NDArray[np.float32]]:
    """Each query's belief from a posterior fitted on the other folds (:func:`agents.auto.cv_folds`)."""
    from agents.auto import cv_folds  # here: importing agents.auto registers its kind, which comes last

    if len(queries) < 2:
        raise ValueError(f"the residual DQN needs at least 2 training queries to cross-fit beliefs, got {len(queries)}")
    rows: dict[int, NDArray[np.float32]] = {}
    for part in cv_folds(queries, folds, seed):
        inside = set(part)
        prior = ListwisePosterior(reward).fit([q for i, q in enumerate(queries) if i not in inside], config, 0)
        rows.update(zip(part, beliefs(prior, [queries[i] for i in part], config, scale), strict=True))
    return [rows[i] for i in range(len(queries))]  # the folds cover every query once


class ResidualDQN(DQNAgent):
    """SB3 DQN whose Q-network is the posterior's Q plus a zero-initialised MLP (module docstring). Name
    ``<reward>-residual``."""

    extra_names = BELIEF_NAMES

    def __init__(self, reward: str = "bor", settings: ResidualConfig | None = None) -> None:
        super().__init__(reward, settings or ResidualConfig())
        self.settings: ResidualConfig
        self.name = f"{reward}-residual"
        self.prior: ListwisePosterior | None = None
        self.chosen_step = -1
        """The environment step whose weights were kept (the first score, before any gradient step, keeps the
        posterior); -1 without a hold-out (the last weights)."""

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> ResidualDQN:
        if observation_of(queries[0], config.observation).startswith("listwise"):
            raise ValueError(
                f"{self.name}: the residual DQN observes the score or hybrid set and the posterior's belief, "
                "not the listwise set (the posterior already reads the ranked items)"
            )
        self.prior = ListwisePosterior(self.reward).fit(queries, config, 0)  # its fit reads no depth cap
        super().fit(queries, config, seed)
        self.chosen_step = self.checkpoints.at if self.checkpoints is not None else -1
        return self

    def _training_observer(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> BeliefObserver:
        s = self.settings
        rows = cross_fitted_beliefs(queries, config, self.reward, s.folds, s.fold_seed, s.prior_scale)
        return BeliefObserver(self.observation, queries, rows)

    def _observer(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> BeliefObserver:
        if self.prior is None:
            raise RuntimeError(f"{self.name}: call fit() or load() first")
        return BeliefObserver(
            self.observation, queries, beliefs(self.prior, queries, config, self.settings.prior_scale)
        )

    def _checkpoint_margin(self) -> float | None:
        return self.settings.start_margin

    def _policy(self) -> Any:
        return residual_policy_class()

    def _policy_kwargs(self, observation: str) -> dict[str, Any]:
        return {**super()._policy_kwargs(observation), "prior_scale": self.settings.prior_scale}

    def save(self, path: Path) -> None:
        """The DQN's zip (:meth:`agents.dqn.DQNAgent.save`) with :data:`PRIOR_FILE` added: the posterior (the form
        of its own file, :func:`agents.base.save_json`), the prior's settings and the step kept."""
        if self.prior is None:
            raise RuntimeError(f"{self.name}: nothing to save")
        super().save(path)
        s = self.settings
        meta = {"posterior": json_record(self.prior.name, self.prior.params()), "prior_scale": s.prior_scale,
                "folds": s.folds, "fold_seed": s.fold_seed, "belief_names": list(BELIEF_NAMES),
                "chosen_step": self.chosen_step}  # fmt: skip
        with zipfile.ZipFile(path, "a") as z:
            z.writestr(PRIOR_FILE, json.dumps(meta, sort_keys=True))

    @classmethod
    def load(cls, path: Path, reward: str = "bor", settings: Any = None) -> ResidualDQN:
        """The DQN's weights (never unpickled, :meth:`agents.dqn.DQNAgent.load`) and the posterior (JSON). The
        file's ``prior_scale`` wins over the settings given."""
        try:
            meta = _record(path)
            scale = float(meta["prior_scale"])
            posterior = meta["posterior"]
            names = tuple(meta["belief_names"])
            chosen = int(meta["chosen_step"])
        except (zipfile.BadZipFile, KeyError, OSError, ValueError, TypeError) as e:
            raise ValueError(f"{path}: not a saved residual DQN ({e})") from e
        if names != BELIEF_NAMES:
            raise ValueError(f"{path}: saved with the belief columns {list(names)}, this code computes {BELIEF_NAMES}")
        agent = super().load(path, reward, replace(settings or ResidualConfig(), prior_scale=scale))
        assert isinstance(agent, ResidualDQN)
        where = f"{path}: {PRIOR_FILE}"
        agent.prior = ListwisePosterior.from_params(record_params(posterior, where, "listwise posterior"), where)
        agent.chosen_step = chosen
        return agent


def _record(path: Path) -> dict[str, Any]:
    """The :data:`PRIOR_FILE` record of a saved residual DQN (``agent.zip``)."""
    with zipfile.ZipFile(path) as z:
        out = json.loads(z.read(PRIOR_FILE))
    if not isinstance(out, dict):
        raise TypeError(f"{PRIOR_FILE} is not an object")
    return out


def kept_start(path: Path, settings: Mapping[str, Any]) -> bool:
    """Whether the residual DQN saved at ``path`` (its ``agent.zip``) kept its untrained start, the posterior: the
    checkpoint its hold-out chose came before any gradient step (at most ``learning_starts`` of ``settings``, the
    run's recorded settings); without a hold-out it kept its last, trained weights. ValueError naming ``path`` when
    the record is missing."""
    try:
        step = int(_record(path)["chosen_step"])
    except (OSError, KeyError, ValueError, TypeError, zipfile.BadZipFile) as e:
        raise ValueError(f"{path}: no checkpoint record in the saved residual DQN ({e})") from e
    if "learning_starts" not in settings:
        raise ValueError(f"{path}: its run's settings record no learning_starts")
    return 0 <= step <= int(settings["learning_starts"])


@functools.cache
def residual_policy_class() -> type:
    """SB3's ``DQNPolicy`` whose Q-networks (online and target) add ``prior_scale`` times the last two observed
    columns to a zero-initialised MLP (module docstring). Built once (SB3 is imported lazily)."""
    import torch
    from stable_baselines3.dqn.policies import DQNPolicy, QNetwork

    class ResidualQNetwork(QNetwork):
        def __init__(self, *args: Any, prior_scale: float, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.prior_scale = float(prior_scale)
            last = [m for m in self.q_net.modules() if isinstance(m, torch.nn.Linear)][-1]
            torch.nn.init.zeros_(last.weight)
            torch.nn.init.zeros_(last.bias)

        def forward(self, obs: Any) -> Any:
            return super().forward(obs) + self.prior_scale * obs[:, -2:]

    class ResidualPolicy(DQNPolicy):
        def __init__(self, *args: Any, prior_scale: float = 10.0, **kwargs: Any) -> None:
            self.prior_scale = float(prior_scale)
            super().__init__(*args, **kwargs)

        def make_q_net(self) -> Any:
            net_args = self._update_features_extractor(self.net_args, features_extractor=None)
            return ResidualQNetwork(**net_args, prior_scale=self.prior_scale).to(self.device)

    return ResidualPolicy


register(
    "residual",
    lambda reward, settings: ResidualDQN(reward, settings),
    group="agent",
    stochastic=True,
    uses_reward=True,
    description="SB3 DQN whose Q-network is the listwise posterior's own Q (its belief observed beside the score "
    "features, cross-fitted on train) plus a zero-initialised MLP: RL fine-tuning of the supervised model, which "
    "keeps the posterior unless trained weights are significantly better on a 30% hold-out (see agents/residual.py)",
    config=ResidualConfig,
    observes=True,
    objective=return_objective,
    budget="total_timesteps",
    torch_at_inference=True,
    min_train=2,  # its beliefs are cross-fitted
)
