"""No learned policy shows the whole candidate list on the committed conditions.

Reads the committed study tables (``results/bfcl/aggregate.csv`` of the README main job and
``results/aggregate.csv`` of the full study): on every condition, every DQN and tabular
policy stops before K = N on every test query of every split and seed.
A change that brings the runaway back fails here once ``results/`` is regenerated.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

RESULTS = Path(__file__).resolve().parents[1] / "results"


@pytest.mark.parametrize("table", ["bfcl/aggregate.csv", "aggregate.csv"])
def test_learned_policies_never_show_the_whole_list(table: str) -> None:
    agg = pd.read_csv(RESULTS / table)
    learned = agg[agg["method"].str.endswith(("-dqn", "-tabular"))]
    assert len(learned) >= 5, f"{table}: no learned policies found"
    bad = learned[learned["whole_list_pct"] > 0]
    assert bad.empty, "whole-list episodes (K = N):\n" + bad[["condition", "method", "whole_list_pct"]].to_string()
