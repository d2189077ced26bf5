"""Rule-based query shift: the three rewrites, their conditions (same candidates and splits, other
query text) and evaluating a trained policy on them unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from benchmarks.conditions import build_condition
from benchmarks.query_shift import (
    QUERY_SHIFTS,
    keyword_dropout,
    shift_queries,
    strip_tool_names,
    tool_name_pattern,
    truncate_words,
)
from experiments.cli import main


def test_strip_tool_names_removes_raw_and_spaced_forms_as_whole_words() -> None:
    pattern = tool_name_pattern(["get_weather", "calcArea", "x", "math.sqrt"])
    assert strip_tool_names("Use get_weather, then Get Weather for Paris", pattern) == "Use , then for Paris"
    assert strip_tool_names("calc area of a circle via calcArea", pattern) == "of a circle via"
    assert strip_tool_names("forget_weather and math sqrt 9", pattern) == "forget_weather and 9"
    assert strip_tool_names("x marks the spot", pattern) == "x marks the spot"  # one-letter names are kept
    assert tool_name_pattern([]) is None and strip_tool_names(" a  b ", None) == "a b"


def test_truncate_and_dropout_are_deterministic_and_bounded() -> None:
    text = " ".join(f"w{i}" for i in range(30))
    assert truncate_words(text).split() == [f"w{i}" for i in range(20)]
    assert truncate_words("short one") == "short one"
    a, b = keyword_dropout(text, "q1"), keyword_dropout(text, "q1")
    assert a == b and a != keyword_dropout(text, "q2")
    kept = a.split()
    assert set(kept) <= set(text.split()) and kept == sorted(kept, key=lambda w: int(w[1:]))  # order kept
    assert 0.4 < len(kept) / 30 < 0.95
    assert keyword_dropout("only", "q", p=1.0) == "only" and keyword_dropout("", "q") == ""


def test_shift_queries_dispatch_and_unknown_kind() -> None:
    texts, qids = ["call get_weather now please", "b"], ["1", "2"]
    assert shift_queries("qnotools", texts, qids, ["get_weather"]) == ["call now please", "b"]
    assert shift_queries("qtrunc20", texts, qids, []) == texts
    assert set(QUERY_SHIFTS) == {"qnotools", "qtrunc20", "qdrop30"}
    with pytest.raises(ValueError, match="unknown query shift 'qx'"):
        shift_queries("qx", texts, qids, [])


@pytest.mark.parametrize("variant", sorted(QUERY_SHIFTS))
def test_query_shift_conditions_keep_candidates_gold_and_split(variant: str, shared_cache: Path) -> None:
    base = build_condition("bfcl", "bm25", cache_dir=shared_cache)
    shifted = build_condition("bfcl", "bm25", variant=variant, cache_dir=shared_cache)
    assert shifted.name == f"bfcl-bm25-{variant}" and shifted.meta["query_shift"] == variant
    assert shifted.meta["queries_changed"] > 0 and shifted.meta["query_shift_rule"] == QUERY_SHIFTS[variant]
    np.testing.assert_array_equal(shifted.test_idx, base.test_idx)
    assert [q.qid for q in shifted.queries] == [q.qid for q in base.queries]
    for qs, qb, rs, rb in zip(shifted.queries, base.queries, shifted.ranked_tools, base.ranked_tools, strict=True):
        assert set(rs.tolist()) == set(rb.tolist())  # the same candidates (all 370 tools)
        assert set(rs[qs.relevant_ranks - 1].tolist()) == set(rb[qb.relevant_ranks - 1].tolist())  # same gold


def test_evaluate_a_trained_policy_under_query_shift(tmp_path: Path, shared_cache: Path) -> None:
    cache_dir = str(shared_cache)
    out = tmp_path / "o"
    args = ["train", "--agent", "tabular", "--set", "tabular.episodes=300", "--seeds", "3", "--out", str(out)]
    assert main([*args, "--cache-dir", cache_dir]) == 0
    run_dir = out / "runs" / "bfcl-bm25__bor-tabular__s3"
    ev = tmp_path / "ev"
    cmd = ["evaluate", "--run-dir", str(run_dir), "--variant", "qtrunc20", "--out", str(ev), "--cache-dir", cache_dir]
    assert main(cmd) == 0
    rows = pd.read_csv(ev / "per_query.csv", dtype={"qid": str})
    own = pd.read_csv(run_dir / "per_query.csv", dtype={"qid": str})
    assert (rows["condition"] == "bfcl-bm25-qtrunc20").all() and rows["qid"].tolist() == own["qid"].tolist()
    man = json.loads((ev / "manifest.json").read_text())
    assert man["condition"]["query_shift"] == "qtrunc20" and man["input_changes"] == []
    assert main(["evaluate", "--run-dir", str(run_dir), "--variant", "nope", "--cache-dir", cache_dir]) == 2
