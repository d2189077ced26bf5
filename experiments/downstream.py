"""``shortlist downstream``: does a shorter list help the LLM pick the right tool? The paper's Table 1, and depth
policies trained for a given LLM.

A chooser (:mod:`choosers`: the embedded local LM, any OpenAI-compatible endpoint, or a simulated
model of one) must call exactly one tool from each method's shortlist. Per BFCL condition (both scorers):

1. **Cells**: the paper's Table 1 methods, retrained in its setting (step cost 0.01, gamma 0.95; the shortlist
   capped at :data:`MAX_K` tools, the depths the chooser is asked about): BoR-DQN, F1-DQN, fixed K = 1 and 5,
   the fitted peers, the cut-off and the posterior model (:data:`DOWNSTREAM_METHODS`), through the one runner
   (run directories under ``--runs-dir``, apart from the study's, whose cells have another episode).
2. **Choices**: the chooser's answer for every (test query, K <= :data:`MAX_K`) whose top K holds the gold
   (:mod:`experiments.downstream_choices`); every method's shortlist is a prefix of one ranking, so each
   (query, K) is asked once and read by every method. Cached, and committed as ``choices.csv``.
3. **Per query and method**: presented (the gold in the shortlist), chosen correctly (given presented) and
   end-to-end (both) at the method's depth (:func:`outcome_rows`).
4. **Outcome-trained policies**: the end-to-end outcome minus the cost of each extra tool is a reward too
   (``outcome``, :func:`envs.terminal_payoffs`). The RL agents and the fitted peers of
   :data:`OUTCOME_KINDS` are trained on it from the cached choices, cross-fitted on the test queries (each
   query's depth comes from a policy fitted on the other folds: the chooser answers only for test queries),
   and compared with their BoR-trained counterparts, paired over queries.
5. **Sensitivity** (simulated chooser only, never evidence about a real model): its distraction strength is
   swept and the best depth and the BoR-versus-outcome comparison follow it.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from benchmarks.names import ConditionId
from envs import EpisodeOverrides
from experiments.config import Cell
from experiments.downstream_choices import choices_table, chooser_for, downstream_queries, seed_cache
from experiments.plan import (
    DOWNSTREAM_CONDITIONS,
    DOWNSTREAM_METHODS,
    GAMMA,
    MAX_K,
    STEP_COST,
)
from experiments.report.downstream_tables import OUTCOME_KINDS, best_fixed_k, outcome_rows, query_means

FOLDS = 5


def downstream_cells(conditions: Sequence[str], seeds: Sequence[int], settings: dict | None = None) -> list[Cell]:
    """The cells of the study (module docstring): stochastic methods on every seed, the others on the first."""
    from experiments.plan import PLANS, Learning, cells_for

    unknown = [c for c in conditions if c not in DOWNSTREAM_CONDITIONS]
    if unknown:
        raise ValueError(
            f"downstream: unknown condition(s) {unknown}; expected some of {', '.join(DOWNSTREAM_CONDITIONS)}"
        )
    plans = [PLANS[c] for c in conditions]
    learning = Learning(settings or {}, EpisodeOverrides(step_cost=STEP_COST, gamma=GAMMA, max_depth=MAX_K))
    stoch = [m for m in DOWNSTREAM_METHODS if m.kind.stochastic]
    det = [m for m in DOWNSTREAM_METHODS if not m.kind.stochastic]
    cells = cells_for(plans, seeds, {p.name: stoch for p in plans}, learning=learning)
    return cells + cells_for(plans, list(seeds)[:1], {p.name: det for p in plans}, learning=learning)


def fold_of(qid: str) -> int:
    """The cross-fitting fold of a query: a hash of its id (independent of any order)."""
    return int(hashlib.sha256(qid.encode()).hexdigest(), 16) % FOLDS


def with_payoffs(queries: Sequence[Any], choices: pd.DataFrame) -> list[Any]:
    """The queries with their observed ``payoffs``: 1 at depth K when the chooser picked the gold from the top K
    (K <= :data:`MAX_K`), else 0 (:attr:`envs.RankedQuery.payoffs`, read by the ``outcome`` reward)."""
    correct = choices.set_index(["qid", "k"])["correct"]
    out = []
    for q in queries:
        pay = np.zeros(q.length)
        for k in range(1, min(MAX_K, q.length) + 1):
            pay[k - 1] = float(correct.get((q.qid, k), 0))
        out.append(replace(q, payoffs=pay))
    return out


def cross_fitted_depths(kind: str, queries: Sequence[Any], seed: int, settings: Any = None) -> pd.DataFrame:
    """Depths of ``kind`` trained on the ``outcome`` reward (net of :data:`STEP_COST` per extra tool,
    undiscounted), each query's from the policy fitted on the other folds (:func:`fold_of`)."""
    from agents import registry
    from envs import OUTCOME, EpisodeConfig

    episode = EpisodeConfig(reward=OUTCOME, step_cost=STEP_COST, gamma=1.0, max_depth=MAX_K)
    folds = np.array([fold_of(q.qid) for q in queries])
    k = np.zeros(len(queries), dtype=np.int64)
    for f in range(FOLDS):
        train = [q for q, g in zip(queries, folds, strict=True) if g != f]
        test_idx = np.flatnonzero(folds == f)
        if not len(test_idx):
            continue
        policy = registry.make(kind, OUTCOME, settings).fit(train, episode, seed)
        k[test_idx] = policy.depths([queries[int(i)] for i in test_idx], episode)
    return pd.DataFrame({"qid": [q.qid for q in queries], "k": k})


def outcome_trained(
    cond: Any, choices: pd.DataFrame, seeds: Sequence[int], settings: dict, kinds: Sequence[str] = OUTCOME_KINDS
) -> pd.DataFrame:
    """Per (outcome-trained method, seed, test query) rows like the runs' (``outcome-<kind>``, with each query's
    bucket), to score with :func:`outcome_rows`."""
    from agents.evaluation import bucket_labels

    queries = with_payoffs(cond.test, choices)
    gold = {q.qid: q.gold_rank for q in queries}
    frames = []
    for kind in kinds:  # one seed: cross-fitting already trains FOLDS policies per kind
        for seed in list(seeds)[:1]:
            d = cross_fitted_depths(kind, queries, seed, settings.get(kind))
            d["gold_rank"] = d["qid"].map(gold)
            d["found"] = ((d["gold_rank"] >= 1) & (d["k"] >= d["gold_rank"])).astype(int)
            d["bucket"] = bucket_labels(d["gold_rank"].to_numpy(), cond.buckets)
            frames.append(d.assign(condition=cond.name, method=f"outcome-{kind}", seed=seed))
    return pd.concat(frames, ignore_index=True)


def sensitivity(cond: Any, queries: Sequence[Any], bor_rows: pd.DataFrame, strengths: Sequence[float]) -> pd.DataFrame:
    """The simulated chooser (never an LLM) at each distraction strength s (its K penalty b times s): the best
    fixed K it rewards, the best BoR-trained method's end-to-end % and depth, and the fitted peers of
    :data:`OUTCOME_KINDS` (not the RL agents: seconds, not minutes) trained on its outcome, cross-fitted."""
    from choosers.simulated import SimulatedParams
    from experiments.downstream_choices import choices_table, chooser_for

    rows = []
    for s in strengths:
        params = SimulatedParams()
        chooser = chooser_for("simulated", queries, None, b=params.b * s)
        ch = choices_table(chooser, queries, list(range(1, MAX_K + 1)), progress=False).assign(condition=cond.name)
        k_best, e2e_best = best_fixed_k(ch, len(queries))
        bor = query_means(outcome_rows(bor_rows, ch)).groupby("method")[["e2e", "k"]].mean()
        peers = [k for k in OUTCOME_KINDS if not k == "dqn"]
        out = outcome_trained(cond, ch, [0], {}, kinds=peers)
        ot = query_means(outcome_rows(out, ch)).groupby("method")[["e2e", "k"]].mean()
        b_m, o_m = str(bor["e2e"].idxmax()), str(ot["e2e"].idxmax())
        rows.append(
            {
                "condition": cond.name,
                "strength": s,
                "b": params.b * s,
                "best_fixed_k": k_best,
                "best_fixed_e2e_pct": e2e_best,
                "best_bor_method": b_m,
                "best_bor_e2e_pct": 100 * float(bor.loc[b_m, "e2e"]),
                "best_bor_mean_k": float(bor.loc[b_m, "k"]),
                "best_outcome_method": o_m,
                "best_outcome_e2e_pct": 100 * float(ot.loc[o_m, "e2e"]),
                "best_outcome_mean_k": float(ot.loc[o_m, "k"]),
            }
        )
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------- the command


def cmd_downstream(da: Any, la: Any, ca: Any, command: str) -> int:
    """``shortlist downstream`` through the one pipeline (:mod:`experiments.pipeline`; module docstring)."""
    from choosers import ChoiceCache
    from experiments.pipeline import Pipeline, Produced, cells_plan, run_pipeline, run_with
    from experiments.report.downstream_page import write_downstream_report
    from experiments.runner import collect_runs, get_condition

    settings = la.settings_for()
    cells = downstream_cells(da.only, la.seeds, settings)
    out, runs_dir = Path(da.out), Path(da.runs_dir)
    options = da.chooser_options(ca.cache_dir)
    if da.chooser == "openai" and not da.dry_run:  # a missing key or a bad option fails before any cell runs
        from choosers import make_chooser

        make_chooser("openai", **options)
    committed = pd.read_csv(da.choices, dtype={"qid": str}) if da.choices and Path(da.choices).is_file() else None
    state: dict[str, Any] = {}

    def plan() -> list[tuple[str, str]]:
        lines = cells_plan(cells, runs_dir.parent)()
        lines += [(f"{c}@choices", f"(ask {da.chooser} for every (test query, K <= {MAX_K}) holding the gold)")
                  for c in da.only]  # fmt: skip
        return lines

    def produce() -> Produced:
        t0 = time.perf_counter()
        runs = run_with(cells, out, ca, command, runs_dir)
        per_query, _, _ = collect_runs(runs)
        frames, extra, sens = [], [], []
        for name in da.only:
            c = ConditionId.parse(name)
            cond = get_condition(c.benchmark, c.scorer, c.variant, 0, ca.data_dir, ca.cache_dir)
            queries = downstream_queries(cond, [q.qid for q in cond.test], ca.data_dir, ca.cache_dir)
            chooser = chooser_for(da.chooser, queries, ChoiceCache(cache_dir=ca.cache_dir), **options)
            if committed is not None:
                seed_cache(chooser, committed[committed["condition"] == name], queries)
            ch = choices_table(chooser, queries, list(range(1, MAX_K + 1)), not ca.no_progress)
            frames.append(ch.assign(condition=name, chooser=chooser.name))
            extra.append(outcome_trained(cond, frames[-1], la.seeds, settings))
            bor = per_query[per_query["condition"] == name]
            sens.append(sensitivity(cond, queries, bor, da.strengths))
        state.update(chooser=chooser.name, choices=pd.concat(frames, ignore_index=True),
                     sensitivity=pd.concat(sens, ignore_index=True))  # fmt: skip
        rows = outcome_rows(pd.concat([per_query, *extra], ignore_index=True), state["choices"])
        keys = ["condition", "method", "seed"]
        summary = rows.groupby(keys, sort=True)[["k", "presented", "correct", "e2e"]].mean().reset_index()
        buckets = rows.groupby([*keys, "bucket"], sort=True)[["k", "presented", "e2e"]].mean().reset_index()
        return Produced(rows, summary, buckets, runs, time.perf_counter() - t0)

    def report(tmp: Path, p: Produced) -> dict:
        write_downstream_report(
            tmp, p.per_query, state["choices"], state["sensitivity"], state["chooser"], command, da.chooser
        )
        return {"chooser": state["chooser"], "conditions": list(da.only), "seeds": list(la.seeds),
                "episode": {"step_cost": STEP_COST, "gamma": GAMMA, "max_depth": MAX_K}}  # fmt: skip

    return run_pipeline(Pipeline("downstream", out, command, plan, produce, report), da.dry_run)
