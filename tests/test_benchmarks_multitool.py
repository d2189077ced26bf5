"""MetaTool multi-tool queries: loader, candidate sets, the ``multi`` conditions and completeness rows."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from agents.evaluation import MULTI_COLUMNS, score_depths, score_depths_multi, summarise, summary_row_multi
from benchmarks import data
from benchmarks.conditions import (
    BENCHMARKS,
    CandidateRule,
    candidate_rule,
    candidate_sets,
    multi_candidate_sets,
)
from benchmarks.corpus import DataError
from benchmarks.metatool import (
    MULTI_QUERIES,
    SKIP_MULTI_DUP,
    SKIP_MULTI_SINGLE,
    load_metatool_multi,
    load_metatool_multi_files,
    read_multi_queries,
)
from envs import RankedQuery

REAL = Path(os.environ.get("SHORTLIST_DATA_DIR", Path(__file__).resolve().parents[1].parent / "shared" / "data"))
MULTI_SHA = "ef37d10a8cb5b41435d6ea3ae29819afdb8d6db0852268830e5ee77259507f51"  # data/SOURCES.md

TOOLS = {"alpha": "Alpha does a.", "Beta": "Beta does b.", "gamma": "Gamma does c.", "delta": "Delta does d."}


def _write(root: Path, entries: object | str, tools: dict[str, str] | None = None) -> tuple[Path, Path]:
    pd_ = root / "plugin_des.json"
    mq = root / "multi.json"
    pd_.write_text(json.dumps(tools or TOOLS), encoding="utf-8")
    mq.write_text(entries if isinstance(entries, str) else json.dumps(entries, indent=2), encoding="utf-8")
    return pd_, mq


# --- loader -------------------------------------------------------------------------------------


def test_pinned_entry_matches_sources_md() -> None:
    entry = data.DATASETS["metatool"][MULTI_QUERIES]
    assert entry.sha256 == MULTI_SHA
    assert entry.repo_path == "dataset/data/multi_tool_query_golden.json"


def test_real_multi_tool_queries() -> None:
    c = load_metatool_multi(REAL)
    assert c.name == "metatool-multi"
    assert len(c.queries) == 497
    assert {len(q.gold) for q in c.queries} == {2}
    assert len({g for q in c.queries for g in q.gold}) == 15
    assert len(c.tool_names) == 199
    assert c.queries[0].qid == "metatool-multi-1"
    assert c.queries[0].gold == ("FinanceTool", "NewsTool")
    assert c.inputs_sha256[MULTI_QUERIES] == MULTI_SHA
    assert c.skipped == {SKIP_MULTI_SINGLE: 0, SKIP_MULTI_DUP: 0}


def test_fixture_loader_skips_and_order(tmp_path: Path) -> None:
    entries = [
        {"query": " first ", "tool": ["Beta", " alpha "]},
        {"query": "single", "tool": ["gamma"]},
        {"query": "first", "tool": ["gamma", "delta"]},
        {"query": "third", "tool": ["gamma", "delta", "alpha"], "extra": 1},
    ]
    c = load_metatool_multi_files(*_write(tmp_path, entries))
    assert [(q.qid, q.text, q.gold) for q in c.queries] == [
        ("metatool-multi-1", "first", ("Beta", "alpha")),
        ("metatool-multi-4", "third", ("gamma", "delta", "alpha")),
    ]
    assert c.skipped == {SKIP_MULTI_SINGLE: 1, SKIP_MULTI_DUP: 1}
    rows = read_multi_queries(tmp_path / "multi.json", set(TOOLS))
    assert [r[1] for r in rows] == [2, 9, 15, 22]  # line of each entry's opening brace (indent=2 layout)


@pytest.mark.parametrize(
    ("entries", "match"),
    [
        (
            [{"query": "q", "tool": ["alpha", "Nope"]}],
            r"multi\.json:2: entry 1: tool 'Nope' is not in plugin_des\.json",
        ),
        ([{"query": "ok", "tool": ["alpha", "Beta"]}, "text"], r"multi\.json:9: entry 2: expected an object"),
        ([{"tool": ["alpha", "Beta"]}], r"entry 1: 'query' must be a non-empty string"),
        ([{"query": "  ", "tool": ["alpha", "Beta"]}], r"entry 1: 'query' must be a non-empty string"),
        ([{"query": "q", "tool": "alpha"}], r"entry 1: 'tool' must be a non-empty list"),
        ([{"query": "q", "tool": []}], r"entry 1: 'tool' must be a non-empty list"),
        ([{"query": "q", "tool": ["alpha", 3]}], r"entry 1: 'tool' holds 3"),
        ([{"query": "q", "tool": ["alpha", "alpha"]}], r"entry 1: tool 'alpha' is listed twice"),
        ({"query": "q", "tool": ["alpha"]}, r"multi\.json:1: expected a JSON array"),
        ([], r"multi\.json: no entries"),
        ('[\n {"query": "q", "tool": ["alpha", "Beta"]},\n {"query": \n', r"multi\.json:4: malformed JSON"),
        ('[{"query": "q", "tool": ["alpha", "Beta"]}] trailing', r"multi\.json:1: malformed JSON \(extra data"),
        ('[{"query": "q", "tool": ["alpha", "Beta"]},]', r"multi\.json:1: malformed JSON"),
    ],
)
def test_bad_input_names_file_line_and_entry(tmp_path: Path, entries: object, match: str) -> None:
    with pytest.raises(DataError, match=match):
        load_metatool_multi_files(*_write(tmp_path, entries))


def test_only_single_tool_entries_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no entry with at least 2 gold tools"):
        load_metatool_multi_files(*_write(tmp_path, [{"query": "q", "tool": ["alpha"]}]))


def test_not_utf8(tmp_path: Path) -> None:
    pd_, mq = _write(tmp_path, [])
    mq.write_bytes(b'[{"query": "\xff", "tool": ["alpha", "Beta"]}]')
    with pytest.raises(DataError, match="not UTF-8"):
        load_metatool_multi_files(pd_, mq)


# --- candidate sets ------------------------------------------------------------------------------


def test_multi_candidate_sets_reduce_to_single_rule() -> None:
    rng = np.random.default_rng(3)
    sim = rng.random((40, 40))
    sim = (sim + sim.T) / 2
    gold = np.array([5, 0, 39, 5])
    rule = CandidateRule(20, 6, 13)
    single = candidate_sets(gold, gold, 40, rule, sim, seed=7)
    multi = multi_candidate_sets([np.array([g]) for g in gold], 40, rule, sim, {i: i for i in range(40)}, seed=7)
    np.testing.assert_array_equal(multi, single)


def test_multi_candidate_sets_rule() -> None:
    rng = np.random.default_rng(0)
    sim = rng.random((30, 30))
    gold_sets = [np.array([3, 17]), np.array([0, 1, 2])]
    rule = CandidateRule(12, 4, 5)
    out = multi_candidate_sets(gold_sets, 30, rule, sim, {i: i for i in range(30)}, seed=1)
    assert out.shape == (2, 12)
    for row, gs in zip(out, gold_sets, strict=True):
        assert np.all(np.diff(row) > 0)  # registry order, no repeats
        assert set(gs) <= set(row)
        s = sim[gs].max(axis=0)
        others = [j for j in np.argsort(-s, kind="stable") if j not in set(gs)]
        assert set(others[:4]) <= set(row)  # the 4 most similar to any gold tool
    again = multi_candidate_sets(gold_sets, 30, rule, sim, {i: i for i in range(30)}, seed=1)
    np.testing.assert_array_equal(out, again)
    with pytest.raises(ValueError, match="repeats a tool"):
        multi_candidate_sets([np.array([1, 1])], 30, rule, sim, {i: i for i in range(30)}, seed=1)


def test_multi_variant_is_registered() -> None:
    rule = candidate_rule("metatool", "multi")
    assert (rule.n, rule.n_similar, rule.n_queries, rule.query_set) == (100, 24, None, "multi")
    assert "multi" in BENCHMARKS["metatool"][1]


# --- evaluation columns ----------------------------------------------------------------------------


def _q(ranks: list[int], qid: str, n_rel: int = -1, length: int = 10) -> RankedQuery:
    return RankedQuery(np.linspace(1, 0, length), np.array(ranks, dtype=np.int64), qid, 0, n_rel)


def test_score_depths_multi_columns_by_hand() -> None:
    qs = [_q([2, 5], "a"), _q([1], "b"), _q([3], "c", n_rel=2), _q([4, 6, 9], "d")]
    k = np.array([4, 1, 10, 9])
    rows = score_depths_multi(qs, k)
    base = score_depths(qs, k)
    pd.testing.assert_frame_equal(rows[list(base.columns)], base)
    assert list(rows.columns) == [*base.columns, *MULTI_COLUMNS]
    assert rows["hits"].tolist() == [1, 1, 1, 3]
    assert rows["recall"].tolist() == pytest.approx([0.5, 1.0, 0.5, 1.0])
    assert rows["last_rank"].tolist() == [5, 1, 0, 9]
    assert rows["complete"].tolist() == [0, 1, 0, 1]
    want_pa = [4 * 3 / (10 * 9), 1 / 10, 1.0, (9 * 8 * 7) / (10 * 9 * 8)]
    assert rows["p_random_all"].tolist() == pytest.approx(want_pa, rel=1e-12)
    assert rows["reward_all"].tolist() == pytest.approx([0.0, math.log2(10), 0.0, -math.log2(want_pa[3])], rel=1e-12)
    s = summary_row_multi(rows)
    assert s["complete_pct"] == 50.0
    assert s["mean_r"] == 2.0
    # "c" shows its whole list (K = N): chance is complete with certainty, so it counts as chance's
    # outcome (1), not as a miss, although one of its R = 2 relevant items is missing from the list
    assert s["bor_bits_all"] == pytest.approx(math.log2(0.75 / np.mean(want_pa)), rel=1e-12)
    assert s["mean_reward_all"] == pytest.approx(np.mean(rows["reward_all"]))
    summ = summarise(rows.assign(condition="x", method="m", seed=0))
    assert summ.loc[0, "complete_pct"] == 50.0 and summ.loc[0, "found_pct"] == 100.0


def test_single_gold_completeness_equals_found() -> None:
    qs = [_q([3], "a"), _q([1], "b"), _q([7], "c")]
    k = np.array([2, 1, 9])
    rows = score_depths_multi(qs, k)
    np.testing.assert_array_equal(rows["complete"], rows["found"])
    np.testing.assert_allclose(rows["p_random_all"], rows["p_random"], rtol=1e-13)
    np.testing.assert_allclose(rows["reward_all"], rows["reward"], rtol=1e-13)
