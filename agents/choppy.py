"""A supervised cut-off model in the spirit of Choppy (Bahri et al., SIGIR 2020).

A small torch network reads a query's whole ranked list, as the RL agents see it (the
13 score-only features of :func:`envs.feature_matrix` at every depth 1..cap), and
outputs a distribution over cut positions:

    h_k     = MLP_enc(x_k)                          (per position: 13 -> H -> H, ReLU)
    c       = [mean_k h_k, max_k h_k]               (the whole list's context)
    logit_k = w . relu(A h_k + B c + b) + b0,   p(cut = k) = softmax_k(logit_k), k = 1..cap

Training maximises the expected net reward of the cut, as Choppy does its metric,

    L = - mean_q sum_{k <= cap_q} p_q(cut = k) * T_q(k) / scale

with T_q(k) the net reward of the family's reward kind (the terminal reward minus the step
cost c (k - 1), undiscounted: :func:`agents.peers.objective_matrix`, the study's judged
quantity) and ``scale`` the largest |T| (a constant, so the optimum is unchanged); full-batch
Adam. Inference reads no labels: ``k = argmax_k logit_k`` (first maximum).

Determinism: parameters are initialised under ``torch.manual_seed(seed)`` inside a
forked RNG (the global torch RNG is left as it was), training is full-batch with one
CPU thread, so one seed always gives the same model. The fit reads the training queries in query-id
order (:func:`agents.base.in_id_order`), so the model depends on the set of queries, never on the
order they are passed in. Saved as JSON (no pickle).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from numpy.typing import NDArray

from agents.base import (
    TorchJsonPolicy,
    check_observation,
    in_id_order,
    learned_episode,
    net_objective,
    torch_on_one_thread,
)
from agents.peers import objective_matrix, query_caps
from agents.registry import register

if TYPE_CHECKING:
    import torch
    from torch import nn
from envs import EpisodeConfig, RankedQuery, feature_matrix
from envs.features import observation_width

__all__ = ["ChoppyConfig", "CutoffModel"]


@dataclass(frozen=True)
class ChoppyConfig:
    """Cut-off model settings."""

    hidden: int = 16
    """Hidden width H of the position encoder and the head."""
    epochs: int = 150
    """Full-batch Adam steps. Chosen on the inner validation split of the training queries (never the test
    split): ``shortlist tune --agent choppy --grid epochs=75,150,300,600`` (and ``epochs=100,200``) on the five
    base conditions (``results/tuning/choppy-epochs/``, 3 seeds) gave mean validation net rewards 4.81 (75),
    4.89 (100), 4.99 (150), 4.94 (200), 4.91 (300) and 4.89 (600, the earlier default): 150 is best on BFCL
    (BM25 +0.26, MiniLM +0.25 over 600) and MetaTool + MiniLM, 0.04 below 600 on MetaTool + BM25 and 0.01 on
    ToolBench. On three two-scorer conditions (``hybrid/``) 150, 300 and 600 are within 0.03 of each other.
    The smaller budget also makes this kind's fits a quarter as long."""
    lr: float = 3e-3
    """Adam learning rate."""
    weight_decay: float = 1e-4
    """Adam weight decay (L2)."""
    break_even: bool = True
    """Cut at the latest at each query's break-even depth (:func:`agents.base.learned_episode`), as the learned
    agents do: every deeper cut pays at most 0 in the net reward the model is fitted to, no more than depth 1,
    so those positions are dominated; leaving them out also shortens every training tensor (BFCL, N = 370,
    c = 0.005: 191 positions instead of 370)."""

    def __post_init__(self) -> None:
        if self.hidden < 1 or self.epochs < 1 or not self.lr > 0 or self.weight_decay < 0:
            raise ValueError(f"ChoppyConfig: hidden, epochs >= 1, lr > 0 and weight_decay >= 0 required, got {self}")


def _cut_net(n_features: int, hidden: int) -> nn.Module:
    """The cut-off network (torch is imported here, on first use, so importing the package stays light)."""
    import torch
    from torch import nn

    class _CutNet(nn.Module):
        def __init__(self, n_features: int, hidden: int) -> None:
            super().__init__()
            self.enc = nn.Sequential(  # ReLU in place: one (B, D, H) tensor fewer each, the same numbers
                nn.Linear(n_features, hidden), nn.ReLU(inplace=True), nn.Linear(hidden, hidden), nn.ReLU(inplace=True)
            )
            # head([h_k, c]) with its first layer split as W_h h_k + W_c c: the same function as a
            # linear layer on the concatenation, with the context part computed once per query
            self.head_pos = nn.Linear(hidden, hidden)
            self.head_ctx = nn.Linear(2 * hidden, hidden, bias=False)
            self.out = nn.Linear(hidden, 1)

        def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            """Logits (B, D) for features x (B, D, F); positions where mask is False get -inf.

            Two shortcuts that leave every number bit-identical (tests/test_agents_choppy.py compares them
            with the plain computation, weights after training included): the encoder reads the positions
            as one (B * D, F) matrix, and when no position is masked (every query has the same cap, as on
            BFCL and MetaTool), multiplying by the mask and filling masked positions are skipped."""
            b, d, f = x.shape
            h = self.enc(x.reshape(b * d, f)).reshape(b, d, -1)
            full = bool(mask.all())
            if full:
                mean = h.sum(1) / d
                top = h.max(1).values
            else:
                m = mask.unsqueeze(-1)
                mean = (h * m).sum(1) / m.sum(1).clamp_min(1)
                top = h.masked_fill(~m, float("-inf")).max(1).values
            ctx = self.head_ctx(torch.cat([mean, top], dim=-1)).unsqueeze(1)
            logits = self.out(torch.relu_(self.head_pos(h) + ctx)).squeeze(-1)  # in place on a temporary
            return logits if full else logits.masked_fill(~mask, float("-inf"))

    return _CutNet(n_features, hidden)


def _train(
    net: nn.Module,
    forward: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    x: torch.Tensor,
    mask: torch.Tensor,
    target: torch.Tensor,
    s: ChoppyConfig,
) -> float:
    """The fit's loop: ``s.epochs`` full-batch Adam steps on ``net``'s parameters, minimising the negative expected
    (scaled) net reward of the cut, with logits from ``forward(x, mask)`` (the network itself in a fit; the tests
    pass the plain computation too). Returns the last loss."""
    import torch

    opt = torch.optim.Adam(net.parameters(), lr=s.lr, weight_decay=s.weight_decay)
    loss = torch.zeros(())
    for _ in range(s.epochs):
        prob = torch.softmax(forward(x, mask), dim=1)
        loss = -(prob * target).sum(1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return float(loss.detach())


def _inputs(queries: Sequence[RankedQuery], config: EpisodeConfig) -> tuple[torch.Tensor, torch.Tensor]:
    import torch

    caps = query_caps(queries, config)
    d = int(caps.max())
    x = np.zeros((len(queries), d, observation_width(queries, config.observation)), dtype=np.float32)
    for i, q in enumerate(queries):  # feature_matrix is per query (it is vectorised over depths)
        x[i, : caps[i]] = feature_matrix(q, int(caps[i]), config.observation)
    mask = np.arange(d)[None, :] < caps[:, None]
    return torch.from_numpy(x), torch.from_numpy(mask)


class CutoffModel(TorchJsonPolicy):
    """Choppy-style cut-off distribution model (see the module docstring). Name ``<reward>-choppy``; saved and
    loaded as :class:`agents.base.TorchJsonPolicy` does, recording the final training objective."""

    kind = "choppy"
    settings_type = ChoppyConfig
    file_kind = "cut-off model"
    settings: ChoppyConfig
    net: nn.Module | None

    def __init__(self, reward: str = "bor", settings: ChoppyConfig | None = None) -> None:
        super().__init__(reward, settings)

    @staticmethod
    def new_net(n_features: int, settings: ChoppyConfig) -> nn.Module:
        return _cut_net(n_features, settings.hidden)

    def fit_record(self) -> dict[str, float]:
        return {"final_train_objective": -self.final_loss}

    def _inputs(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> tuple[torch.Tensor, torch.Tensor]:
        x, mask = _inputs(queries, learned_episode(config, self.settings.break_even))
        check_observation(self.name, self.n_features, int(x.shape[-1]))
        return x, mask

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> CutoffModel:
        import torch

        config.check_queries(queries)
        queries = in_id_order(queries)
        s = self.settings
        torch_on_one_thread()
        episode = learned_episode(config, s.break_even)
        pay, _ = objective_matrix(queries, episode, self.reward)
        x, mask = _inputs(queries, episode)
        self.n_features = int(x.shape[-1])
        scale = float(np.abs(pay).max()) or 1.0
        target = torch.from_numpy((pay / scale).astype(np.float32))
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(seed))
            net = _cut_net(self.n_features, s.hidden)
            loss = _train(net, net, x, mask, target, s)
        self.net = net.eval()
        self.final_loss = loss * scale
        return self

    def cut_distribution(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.float64]:
        """p(cut = k) for k = 1..D (D = largest cap of the episode it acts in, break-even cap included when on),
        shape (Q, D); zero beyond each cap."""
        import torch

        if self.net is None:
            raise RuntimeError(f"{self.name}: call fit() or load() first")
        x, mask = self._inputs(queries, config)
        with torch.no_grad():
            return torch.softmax(self.net(x, mask), dim=1).double().numpy()

    def depths(self, queries: Sequence[RankedQuery], config: EpisodeConfig) -> NDArray[np.int64]:
        import torch

        if len(queries) == 0:
            return np.zeros(0, dtype=np.int64)
        if self.net is None:
            raise RuntimeError(f"{self.name}: call fit() or load() first")
        torch_on_one_thread()
        x, mask = self._inputs(queries, config)
        with torch.no_grad():
            logits = self.net(x, mask).numpy()
        return (np.argmax(logits, axis=1) + 1).astype(np.int64)


register(
    "choppy",
    lambda reward, settings: CutoffModel(reward, settings),
    group="peer",
    stochastic=True,
    uses_reward=True,
    description="Choppy-style cut-off model (torch) trained to maximise expected reward",
    config=ChoppyConfig,
    observes=True,
    objective=net_objective,
    budget="epochs",
    torch_at_inference=True,
)
