"""``shortlist bench`` end to end with tiny budgets: which conditions it times by default (the
two-scorer ones included), the markdown it writes, and a refused condition that writes nothing.
The figures themselves are machine-dependent and are not asserted (see results/bench.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import agents.choppy
from experiments.bench import cmd_bench
from experiments.options import BenchArgs, CommonArgs
from experiments.plan import BENCH_SUITES, COMPARE_SUITES, resolve_plans

TINY = {"queries": 200, "depth": 20, "env_steps": 300, "dqn_steps": 200, "tabular_episodes": 50, "repeats": 1}


def test_default_conditions_are_those_of_compare_with_the_two_scorer_ones() -> None:
    names = [p.name for p in resolve_plans((), BENCH_SUITES)]
    assert names == [p.name for p in resolve_plans((), COMPARE_SUITES)]
    for c in ("bfcl-bm25", "bfcl-bm25-hybrid", "metatool-fused", "toolbench-bm25", "metatool-minilm-multi"):
        assert c in names


def test_bench_writes_every_section_for_plain_hybrid_and_fused_conditions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = agents.choppy.CutoffModel
    # the cut-off model's 600 full-batch steps are what the bench times; a smoke test needs 5
    monkeypatch.setattr(agents.choppy, "CutoffModel", lambda reward: real(reward, agents.choppy.ChoppyConfig(epochs=5)))
    out = tmp_path / "bench.md"
    conds = ("bfcl-bm25", "bfcl-bm25-hybrid", "bfcl-fused")
    rc = cmd_bench(
        BenchArgs(only=conds, out=str(out), **TINY),
        CommonArgs(cache_dir=str(tmp_path / "scores"), no_progress=True),
        "shortlist bench (test)",
    )
    assert rc == 0
    text = out.read_text(encoding="utf-8")
    headings = (
        "## Machine",
        "## Batch evaluation: 200 queries x depth 20",
        "## Environment (bfcl-bm25",
        "## DQN training (bfcl-bm25, 200 steps",
        "## Per condition",
        "## Peak memory",
        "## Targets",
    )
    for heading in headings:
        assert heading in text, heading
    rows = {
        m.group(1): m.groups()[1:]
        for m in re.finditer(r"^\| (bfcl-\S+) \| (\d+) \| ([\d.]+) \| ([\d.]+) \|", text, re.M)
    }
    assert set(rows) == set(conds)
    assert len({r[0] for r in rows.values()}) == 1 and int(rows["bfcl-bm25"][0]) > 0  # same training queries
    targets = re.findall(r"^\| (batch evaluation|environment|exact DP solve).* \| (yes|NO) \|$", text, re.M)
    assert [t[0] for t in targets] == ["batch evaluation", "environment", "exact DP solve"]
    assert "Total benchmark wall time" in text and "shortlist bench (test)" in text


def test_unknown_condition_is_refused_and_nothing_is_written(tmp_path: Path) -> None:
    out = tmp_path / "bench.md"
    with pytest.raises(ValueError, match="bfcl-nope"):
        cmd_bench(BenchArgs(only=("bfcl-nope",), out=str(out), **TINY), CommonArgs(no_progress=True), "x")
    assert not out.exists()
