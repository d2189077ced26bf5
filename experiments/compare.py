"""``shortlist compare``: the BoR agents against the peers practitioners use, and the limits.

Methods (one cell per condition x method x seed, through the one runner):

- agents: BoR-DQN, BoR tabular Q, F1-DQN (:mod:`agents.dqn`, :mod:`agents.tabular`);
- peers (:mod:`agents.peers`, :mod:`agents.choppy`): largest score gap (plain, tail 10%
  ignored, buffer +5, both), min-max score threshold (fitted for mean reward; 90% training
  coverage), top-p softmax mass, best fixed K on train (by mean reward; by BoR bits), the
  Choppy-style cut-off model, random depth;
- baselines: fixed K in {1, 3, 5, 10, 20, 50};
- limits (:mod:`agents.oracle`): the hindsight oracle, exact optimal stopping on the tabular
  state for mean reward (``bor-dp``) and for the RL episode return (``bor-dp-mdp``).

Stochastic methods (DQN, tabular Q, Choppy, random) run on every seed; deterministic ones
once, on the first seed (their other seeds would repeat the same numbers).

Outputs in ``out`` (default ``results/peers``): the runner's run directories (config,
command, manifest, per-query rows, agent) and combined tables, then ``aggregate.csv``
(mean over seeds with a 95% bootstrap interval over test queries per condition x method, the seed range beside it),
``buckets_aggregate.csv``, ``limits.csv`` (mean reward as a fraction of the DP policy's
and the oracle's), ``dp.csv`` (the DP policy's model, training and test values),
``goals.csv`` (the stated goal, checked), ``paired.csv`` (each BoR agent minus each peer,
paired bootstrap over test queries), ``figures/pareto_<condition>.png`` with a sibling
CSV of exactly the plotted numbers, ``figures/buckets_<condition>.png`` (+ CSV),
``manifest.json`` and a generated ``README.md``. Nothing in the folder is written by hand.
"""

from __future__ import annotations

from pathlib import Path

from experiments.options import CommonArgs, CompareArgs, LearnArgs
from experiments.pipeline import Pipeline, Produced, cells_plan, cells_producer, run_pipeline
from experiments.plan import COMPARE_SUITES, compare_cells, compare_methods, left_out_note, resolve_plans
from experiments.report.peers_page import write_compare_report


def cmd_compare(ca: CompareArgs, la: LearnArgs, co: CommonArgs, command: str) -> int:
    """Run (or resume) every comparison cell, then write tables, figures and the README through the one
    pipeline (:mod:`experiments.pipeline`): a failing report leaves ``out`` as it was."""
    plans = resolve_plans(ca.only, COMPARE_SUITES)
    cells = compare_cells(plans, la.seeds, la.learning())
    if note := left_out_note(plans, lambda plan: compare_methods(plan.condition.benchmark)):
        print(note, flush=True)
    out = Path(ca.out)

    def report(tmp: Path, p: Produced) -> dict:
        conditions = write_compare_report(
            tmp, p.per_query, p.summary, p.buckets, p.runs, command=command, seeds=la.seeds, observation=la.observation
        )
        return {"conditions": conditions, "seeds": list(la.seeds), "observation": la.observation}

    pipeline = Pipeline(
        "compare",
        out,
        command,
        plan=cells_plan(cells, Path(ca.runs_dir).parent),
        produce=cells_producer(cells, out, co, command, Path(ca.runs_dir), la.observation),
        report=report,
    )
    return run_pipeline(pipeline, ca.dry_run)
