"""P(found) stop: the expected-reward cut-off (:mod:`agents.cutoff`) made stepwise, so that on an examined-only
observation set (``strict``) it is a supervised model that decides from the examined items only.

The expected-reward cut-off predicts p_k = P(found(k) | x_k) at every depth and stops at the argmax over the whole
list of ``p_k T(k) - c (k - 1)``: to show depth k it has read the features of depths beyond k. This model fits the
same network the same way (binary cross-entropy on every (query, depth) row of the training queries; p made
monotone in k, ``p_k <- max_{j <= k} p_j``, which reads depths 1..k only) and decides at each depth from what it has
seen: it STOPs at the first depth k where

    p_k > level

(the cap, the break-even depth of :func:`agents.base.learned_episode`, forces a STOP). ``level`` is fitted on the
training queries to maximise their mean net reward, exactly: with p monotone the rule is a counting rule, depth =
1 + #{j < cap : p_j <= level}, whose total payoff is constant between consecutive distinct p_j
(:func:`agents.peers.sweep_depths`); the best piece wins, the shallowest among ties (:func:`agents.peers.best_piece`).
So the network is trained on P(found) and the one number the decision adds is fitted to the judged objective, as
the fitted peers' parameters are. Both are fitted on the same training queries (in-sample).

Its network is the cut-off's bit for bit (the same rows, settings and seed), so a study that runs both fits it once:
the kind is registered with ``shares_fit="cutoff"``, the fit goes through the shared store of :mod:`agents.memo`,
and the runner runs these cells after the cut-off's. Only the level is fitted here then.

Why a level and not a look-ahead: a rule that at depth k compares stopping with the best fixed depth it can see
ahead (``p_{k,j} T(k + j)`` from x_k, for j = 1..J) values going on as a plan it cannot revise. On ``strict``, x_1
holds the top item alone, so from depth 1 every list looks alike, and there stopping at 1 is the best fixed depth: a
draft of that rule (not kept) stopped at K = 1 on every validation query of BFCL + MiniLM and MetaTool + BM25. What
pays is the chance to look again, which a one-shot plan never counts; a level met for the first time is a rule that
looks again at every depth.

Whether its depth reads only the examined items is the observation set's matter: on ``strict`` x_k holds the
examined items only; on the default sets x_k carries features of the whole list (e.g. the largest drop in the top
50). Deterministic per seed (the network as :mod:`agents.cutoff`; the level is a function of its outputs). Saved as
JSON (no pickle), with the level.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from agents.base import first_stop, in_id_order, learned_episode, net_objective
from agents.cutoff import CutoffConfig, ExpectedRewardCutoff
from agents.peers import best_piece, objective_matrix, sweep_depths
from agents.registry import register
from envs import EpisodeConfig, RankedQuery

__all__ = ["PFoundStop"]


class PFoundStop(ExpectedRewardCutoff):
    """The cut-off's P(found by k) network, STOP at the first depth where it passes a level fitted to the net
    reward (see the module docstring). Name ``<reward>-pfound``; settings :class:`agents.cutoff.CutoffConfig`."""

    kind = "pfound"
    file_kind = "P(found) stop"

    def __init__(self, reward: str = "bor", settings: CutoffConfig | None = None) -> None:
        super().__init__(reward, settings)
        self.level = float("nan")

    def fit_record(self) -> dict[str, float]:
        return {"final_train_loss": self.final_loss, "level": self.level}

    def read_record(self, params: dict) -> None:
        self.level = float(params["level"])
        if np.isnan(self.level):
            raise ValueError("its level is NaN")

    def fit(self, queries: Sequence[RankedQuery], config: EpisodeConfig, seed: int) -> PFoundStop:
        super().fit(queries, config, seed)
        queries = in_id_order(queries)
        p, offsets = self.found_probability(queries, config)
        pay, caps = objective_matrix(queries, learned_episode(config, self.settings.break_even), self.reward)
        d = pay.shape[1]
        keys = np.zeros((len(queries), max(d - 1, 0)))
        ok = np.arange(1, d)[None, :] < caps[:, None]
        rows, cols = np.nonzero(ok)
        keys[rows, cols] = p[offsets[rows] + cols]  # going on from depth j = cols + 1 is read off p_j
        thetas, totals, extra = sweep_depths(keys, pay, caps)
        self.level = float(thetas[best_piece(totals, extra)])
        return self

    def explain(
        self, queries: Sequence[RankedQuery], config: EpisodeConfig
    ) -> tuple[NDArray[np.int64], list[dict[str, float]]]:
        """The depths (those of :meth:`depths`) and why: the predicted P(found by K) at the depth K where it stopped,
        and the fitted level it passed (or the cap it reached)."""
        if len(queries) == 0:
            return np.zeros(0, dtype=np.int64), []
        if np.isnan(self.level):
            raise RuntimeError(f"{self.name}: call fit() or load() first")
        p, offsets = self.found_probability(queries, config)
        depths = first_stop(p > self.level, offsets)
        return depths, [{"p_found": float(p[i]), "level": self.level} for i in offsets[:-1] + depths - 1]


register(
    "pfound",
    lambda reward, settings: PFoundStop(reward, settings),
    group="agent",
    stochastic=True,
    uses_reward=True,
    description="the cut-off's supervised P(found by k) from depth k's features, stop at the first depth where it "
    "passes a level fitted to the net reward on train: the cut-off made stepwise (see agents/pfound.py)",
    config=CutoffConfig,
    observes=True,
    objective=net_objective,
    budget="epochs",
    torch_at_inference=True,
    view="stepwise",
    shares_fit="cutoff",
)
