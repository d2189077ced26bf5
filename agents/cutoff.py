"""Expected-reward cut-off: predict P(a relevant item is within the top k), stop where the expected
reward minus the step cost is largest.

A supervised alternative to the RL agents on the same observation (the features of
:func:`envs.feature_matrix` at every depth: 13 from the scores, 20 when the queries carry a second
scorer). A small torch network reads the features of depth k
and predicts

    p_k = P(found(k) | x_k)          (found(k): the top k hold a relevant item)

trained by binary cross-entropy on every (query, depth) row of the training queries (depths
1..cap; each query's rows weighted 1/cap, so every query counts once). Found(k) can only grow
with k, so at inference the predictions are made monotone, ``p_k <- max_{j <= k} p_j``, and the
policy stops at

    K = argmax_k  p_k * T(k) - c * (k - 1)      (first maximum)

with T(k) the terminal reward of the family's reward kind when found (BoR: -log2 P_rand(k; N, R), R the
median R of the training queries: inference never reads a query's own R, :func:`agents.base.assumed_relevant`)
and c the step cost: the expected per-query reward net of step costs, undiscounted (the quantity
the evaluator reports). With the BoR reward, T(N) = 0 (a shortlist of the whole list is no better
than random), so for N > 1 the whole list is never the argmax: depth N pays -c (N - 1) < 0 <= the
payoff of depth 1. No value is bootstrapped, so nothing can run away along a tied tail.

Determinism: initialised under ``torch.manual_seed(seed)`` in a forked RNG, full-batch Adam on one
CPU thread. The fit reads the training queries in query-id order (:func:`agents.base.in_id_order`), so
the model depends on the set of queries, never on the order they are passed in. Saved as JSON (no pickle).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from agents.base import (
    TorchJsonPolicy,
    assumed_relevant,
    check_observation,
    in_id_order,
    learned_episode,
    net_objective,
    read_assumed_relevant,
    row_depths,
    stacked_features,
    torch_on_one_thread,
)
from agents.memo import fitted_once
from agents.registry import register

if TYPE_CHECKING:
    from torch import nn
from envs import EpisodeConfig, RankedQuery
from rewards import terminal_reward

__all__ = ["CutoffConfig", "ExpectedRewardCutoff"]


@dataclass(frozen=True)
class CutoffConfig:
    """Expected-reward cut-off settings."""

    hidden: int = 32
    """Hidden width of the two-layer MLP that predicts P(found by k)."""
    epochs: int = 300
    """Full-batch Adam steps."""
    lr: float = 1e-2
    """Adam learning rate."""
    weight_decay: float = 1e-4
    """Adam weight decay (L2)."""
    break_even: bool = True
    """Stop at the latest at each query's break-even depth (:func:`agents.base.learned_episode`)."""

    def __post_init__(self) -> None:
        if self.hidden < 1 or self.epochs < 1 or not self.lr > 0 or self.weight_decay < 0:
            raise ValueError(f"CutoffConfig: hidden, epochs >= 1, lr > 0 and weight_decay >= 0 required, got {self}")


def _net(n_features: int, hidden: int) -> nn.Module:
    from torch import nn

    return nn.Sequential(  # ReLU in place: one (rows, hidden) tensor fewer per layer and epoch, the same numbers
        nn.Linear(n_features, hidden),
        nn.ReLU(inplace=True),
        nn.Linear(hidden, hidden),
        nn.ReLU(inplace=True),
        nn.Linear(hidden, 1),
    )


class ExpectedRewardCutoff(TorchJsonPolicy):
    """Supervised P(found by k) model + expected-reward argmax (see the module docstring).
    Name ``<reward>-cutoff``; saved and loaded as :class:`agents.base.TorchJsonPolicy` does, recording the final
    training loss."""

    kind = "cutoff"
    settings_type = CutoffConfig
    file_kind = "cut-off policy"
    settings: CutoffConfig
    net: nn.Module | None

    def __init__(self, reward: str = "bor", settings: CutoffConfig | None = None) -> None:
        super().__init__(reward, settings)
        self.r_assumed = 1  # R at inference, fitted on the training queries (agents.base.assumed_relevant)

    @staticmethod
    def new_net(n_features: int, settings: CutoffConfig) -> nn.Module:
        return _net(n_features, settings.hidden)

    def fit_record(self) -> dict[str, float]:
        return {"final_train_loss": self.final_loss, "r_assumed": self.r_assumed}

    def read_record(self, params: dict) -> None:
        self.r_assumed = read_assumed_relevant(params, self.file_kind)

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> ExpectedRewardCutoff:
        import torch

        config.check_queries(queries)
        queries = in_id_order(queries)
        s = self.settings
        torch_on_one_thread()
        feats, offsets = stacked_features(queries, learned_episode(config, s.break_even))
        depths = row_depths(offsets)
        lengths = np.diff(offsets)
        gold = np.repeat(np.array([q.gold_rank for q in queries], dtype=np.int64), lengths)
        found = ((gold > 0) & (depths >= gold)).astype(np.float32)
        weight = np.repeat(1.0 / lengths, lengths).astype(np.float32)
        self.n_features = int(feats.shape[1])
        self.r_assumed = assumed_relevant(queries)
        x = torch.from_numpy(feats)
        y = torch.from_numpy(found)
        w = torch.from_numpy(weight / weight.sum())
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            net = _net(self.n_features, s.hidden)

            def train() -> dict:
                opt = torch.optim.Adam(net.parameters(), lr=s.lr, weight_decay=s.weight_decay)
                loss_fn = torch.nn.BCEWithLogitsLoss(reduction="none")
                for _ in range(s.epochs):
                    loss = (loss_fn(net(x).squeeze(-1), y) * w).sum()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                return {"net": net.state_dict(), "final_loss": loss.detach()}

            def inputs() -> tuple[bytes | str, ...]:  # what the fit reads: the rows, the settings and the seed
                fixed = repr((tuple(x.shape), s.hidden, s.epochs, s.lr, s.weight_decay, int(seed)))
                return ("cutoff-net", fixed, *(t.numpy().tobytes() for t in (x, y, w)))

            fitted = fitted_once(inputs, train)  # trained here, or by an earlier cell (agents.memo)
            net.load_state_dict(fitted["net"])
        self.net = net.eval()
        self.final_loss = float(fitted["final_loss"])
        return self

    def found_probability(
        self, queries: Sequence[RankedQuery], config: EpisodeConfig
    ) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        """Monotone P(found by k) for every stacked (query, depth) row, and the offsets."""
        import torch

        if self.net is None:
            raise RuntimeError(f"{self.name}: call fit() or load() first")
        torch_on_one_thread()
        feats, offsets = stacked_features(queries, learned_episode(config, self.settings.break_even))
        check_observation(self.name, self.n_features, int(feats.shape[1]))
        with torch.no_grad():
            p = torch.sigmoid(self.net(torch.from_numpy(feats)).squeeze(-1)).double().numpy()
        for a, b in zip(offsets[:-1], offsets[1:], strict=True):
            p[a:b] = np.maximum.accumulate(p[a:b])
        return p, offsets

    def _values(
        self, queries: Sequence[RankedQuery], config: EpisodeConfig
    ) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.int64]]:
        """Monotone P(found by k), the expected net reward ``p_k T(k) - c (k - 1)`` of every stacked row, and
        the offsets."""
        p, offsets = self.found_probability(queries, config)
        k = row_depths(offsets)
        lengths = np.diff(offsets)
        n = np.repeat(np.array([q.n_candidates for q in queries], dtype=np.int64), lengths)
        pay = np.asarray(terminal_reward(self.reward, np.ones(k.size, bool), k, n, self.r_assumed), dtype=np.float64)
        return p, p * pay - config.step_cost * (k - 1), offsets

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        if len(queries) == 0:
            return np.zeros(0, dtype=np.int64)
        return self.explain(queries, config)[0]

    def explain(
        self, queries: Sequence[RankedQuery], config: EpisodeConfig
    ) -> tuple[NDArray[np.int64], list[dict[str, float]]]:
        """The depths (those of :meth:`depths`) and why: the predicted P(found by K) and the expected net reward
        p_K T(K) - c (K - 1) at each."""
        if len(queries) == 0:
            return np.zeros(0, dtype=np.int64), []
        p, value, offsets = self._values(queries, config)
        depths = np.array([int(np.argmax(value[a:b])) + 1 for a, b in zip(offsets[:-1], offsets[1:], strict=True)])
        rows = offsets[:-1] + depths - 1
        return depths.astype(np.int64), [{"p_found": float(p[i]), "expected_net_reward": float(value[i])} for i in rows]


register(
    "cutoff",
    lambda reward, settings: ExpectedRewardCutoff(reward, settings),
    group="agent",
    stochastic=True,
    uses_reward=True,
    description="supervised P(found by k) per depth (torch MLP on the score features, plus the second scorer's "
    "on -hybrid conditions), stop at the argmax of expected reward minus step cost (see agents/cutoff.py)",
    config=CutoffConfig,
    observes=True,
    objective=net_objective,
    budget="epochs",
    torch_at_inference=True,
)
