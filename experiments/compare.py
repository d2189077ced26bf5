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

import time
from pathlib import Path

from experiments.commands import collect_and_write, refresh_enclosing_index, run_with, staged
from experiments.options import CommonArgs, CompareArgs, LearnArgs
from experiments.plan import COMPARE_SUITES, compare_cells, resolve_plans
from experiments.report.peers import write_compare_report


def cmd_compare(ca: CompareArgs, la: LearnArgs, co: CommonArgs, command: str) -> int:
    """Run (or resume) every comparison cell, then write tables, figures and the README.

    The outputs are written into a temporary folder and moved into ``out`` only when all of them are
    (:func:`experiments.commands.staged`), so a failing report leaves ``out`` as it was.
    """
    t0 = time.perf_counter()
    plans = resolve_plans(ca.only, COMPARE_SUITES)
    cells = compare_cells(plans, la.seeds, **la.learn_kwargs())
    out = Path(ca.out)
    if ca.dry_run:
        for c in cells:
            print(c.run_id)
        print(f"{len(cells)} cells")
        return 0
    runs = run_with(cells, out, co, command, runs_dir=Path(ca.runs_dir))
    t_runs = time.perf_counter() - t0
    with staged(out, owned=("figures",)) as tmp:
        per_query, summary, buckets = collect_and_write(runs, tmp, la.observation)
        write_compare_report(
            tmp,
            per_query,
            summary,
            buckets,
            runs,
            command=command,
            seeds=la.seeds,
            observation=la.observation,
            timings={"cells (this invocation)": t_runs},
        )
    refresh_enclosing_index(out)
    print(f"wrote {len(runs)} runs, tables, figures and README.md to {out}")
    return 0
