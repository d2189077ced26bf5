"""An agent's logged requests over its registry (issue 38): the log's rules (unknown tools counted and named,
repeated requests merged, no-tool requests skipped, malformed lines named by file and line), the condition it
makes (the whole registry ranked by the tool search's own path), and that path's equality with the study's."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_toolsearch import openai_tools

from benchmarks.conditions import build_condition, data_notes
from benchmarks.corpus import DataError
from benchmarks.names import log_condition_name
from benchmarks.tool_ranking import RegistryRanker, identity_mismatch, rank_records, resolve_scorer
from benchmarks.toollog import SKIP_NO_TOOL, SKIP_UNKNOWN_TOOL, read_tool_log

NAMES = [t["function"]["name"] for t in openai_tools()]


def write_log(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows), encoding="utf-8")
    return path


def test_the_rules_of_a_log(tmp_path: Path) -> None:
    log = write_log(tmp_path / "log.jsonl", [
        {"request": "book a flight", "tools": ["book_flight"]},
        {"request": "weather please", "tool": "get_weather"},          # a single tool
        {"request": "book a flight", "tools": ["search_flight"]},      # repeated: merged, union of the tools
        {"request": "order pizza", "tools": ["order_pizza"]},          # unknown tool: skipped, named
        {"request": "and a cola", "tools": ["order_pizza", "get_news"]},  # partly unknown: skipped too
        {"request": "just chatting", "tools": []},                     # no tool called: skipped
        {"request": "  weather please  ", "tools": ["get_weather"]},   # the same text once stripped
    ])  # fmt: skip
    read = read_tool_log(log, NAMES)
    assert [(r.qid, r.text, r.gold) for r in read.records] == [
        ("L1", "book a flight", ("book_flight", "search_flight")),
        ("L2", "weather please", ("get_weather",)),
    ]
    assert read.skipped == {SKIP_UNKNOWN_TOOL: 2, SKIP_NO_TOOL: 1}
    assert read.unknown == {"order_pizza": 2} and read.duplicates == 2 and read.n_lines == 7
    notes = data_notes(
        {"skipped": read.skipped, "unknown_tools": list(read.unknown.items()), "duplicates_merged": 2}, 40
    )
    assert "note: tools the log names but the registry lacks: 'order_pizza' (2 lines)" in notes[1]
    assert notes[2].startswith("note: 2 log lines repeat an earlier request: merged")


@pytest.mark.parametrize(
    ("line", "match"),
    [
        ("not json", r"log\.jsonl:2: malformed JSON"),
        ('["a list"]', r"log\.jsonl:2: expected a JSON object"),
        ('{"request": "", "tools": ["get_news"]}', r"log\.jsonl:2: 'request' must be a non-blank string"),
        ('{"tools": ["get_news"]}', r"log\.jsonl:2: 'request' must be a non-blank string"),
        ('{"request": "hi"}', r"log\.jsonl:2: no 'tools'"),
        ('{"request": "hi", "tools": "get_news"}', r"log\.jsonl:2: 'tools' must be a list of tool names"),
        ('{"request": "hi", "tools": [3]}', r"log\.jsonl:2: 'tools' must be a list of tool names"),
    ],
)
def test_a_malformed_line_is_named_by_file_and_line(tmp_path: Path, line: str, match: str) -> None:
    log = write_log(tmp_path / "log.jsonl", [{"request": "news", "tools": ["get_news"]}, line])
    with pytest.raises(DataError, match=match):
        read_tool_log(log, NAMES)
    with pytest.raises(DataError, match="no such log file"):
        read_tool_log(tmp_path / "none.jsonl", NAMES)


def test_the_condition_ranks_the_whole_registry_by_the_tool_search_path(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(openai_tools()))
    rows = [{"request": f"please {v} my {t} now", "tools": [f"{v}_{t}"]} for v in ("get", "book") for t in
            ("weather", "flight", "hotel", "taxi", "music", "news")]  # fmt: skip
    log = write_log(tmp_path / "log.jsonl", rows)
    options = {"tools": str(tools), "log": str(log), "train_frac": "0.5"}
    cond = build_condition("log", "bm25", variant="hybrid", options=options)
    assert len(cond.queries) == 12 and len(cond.train) == 6 and {q.length for q in cond.queries} == {100}
    assert all(q.hybrid for q in cond.queries) and cond.meta["toolsearch"]["scorer"] == "bm25-hybrid"
    shas = {"tools_sha256": cond.meta["inputs_sha256"][str(tools)], "log_sha256": cond.meta["inputs_sha256"][str(log)]}
    assert cond.name == log_condition_name("bm25", "hybrid", {**options, **shas})
    assert cond.name.startswith("log-bm25-hybrid-log-") and cond.name.endswith("-train0.5")
    assert [q.gold_rank for q in cond.queries] == [1] * 12  # each request names its own tool's words
    with pytest.raises(ValueError, match="need at least 2 usable requests"):
        build_condition("log", "bm25", options={**options, "log": str(write_log(tmp_path / "one.jsonl", rows[:1]))})
    with pytest.raises(ValueError, match="one variant, hybrid"):
        build_condition("log", "bm25", variant="top5", options=options)


def test_the_tool_search_ranks_bfcl_as_the_study_does() -> None:
    """The one path: BFCL's registry ranked for its 400 queries by the tool search's ranker gives the very lists of
    the study's ``bfcl-bm25`` condition (the same scores, the same tie rule, the same gold ranks)."""
    from benchmarks.bfcl import load_bfcl

    corpus = load_bfcl()
    mine = rank_records(RegistryRanker(corpus.tool_texts, "bm25"), corpus.queries, corpus.tool_index())
    study = build_condition("bfcl", "bm25")
    for a, b in zip(mine, study.queries, strict=True):
        assert a.qid == b.qid and np.array_equal(a.scores, b.scores)
        np.testing.assert_array_equal(a.relevant_ranks, b.relevant_ranks)


def test_scorer_names_and_identities() -> None:
    assert resolve_scorer("hybrid") == "bm25-hybrid" and resolve_scorer("minilm-hybrid") == "minilm-hybrid"
    with pytest.raises(ValueError, match="unknown tool-search scorer 'fused'"):
        resolve_scorer("fused")
    a = {"scorer": "bm25", "rank": {"impl": "rank-bm25==0.2.2", "tokeniser_sha256": "x"}}
    assert identity_mismatch(a, {"scorer": "bm25", "rank": {"impl": "rank-bm25==9", "tokeniser_sha256": "x"}}) == []
    assert identity_mismatch(a, {"scorer": "bm25", "rank": {"impl": "rank-bm25==0.2.2", "tokeniser_sha256": "y"}}) == [
        "rank.tokeniser_sha256"
    ]


def test_a_served_minilm_request_is_embedded_on_one_thread_and_the_threads_are_restored(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    ranker = RegistryRanker(["Current weather for a city. Parameters: city", "Send an email. Parameters: to"], "minilm")
    seen = []
    embed = ranker._embedder.embed  # type: ignore[union-attr]

    def spy(texts: list[str]) -> np.ndarray:
        seen.append(torch.get_num_threads())
        return embed(texts)

    monkeypatch.setattr(ranker._embedder, "embed", spy)
    before = torch.get_num_threads()
    served, _ = ranker.scores(["weather in Paris"])
    assert seen == [1] and torch.get_num_threads() == before
    cached, _ = ranker.scores(["weather in Paris"], cache_requests=True)  # a log's requests: batched, cached
    np.testing.assert_allclose(served, cached, atol=1e-6)
    assert int(np.argmax(served[0])) == 0
