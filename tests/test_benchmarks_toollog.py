"""An agent's logged requests over its registry (issue 38): the log's rules (unknown tools counted and named,
repeated requests merged, no-tool requests skipped, malformed lines named by file and line), the condition it
makes (the whole registry ranked by the tool search's own path), and that path's equality with the study's."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import numpy as np
import pytest
from test_toolsearch import openai_tools

from benchmarks.conditions import build_condition, data_notes
from benchmarks.corpus import DataError
from benchmarks.names import log_condition_name
from benchmarks.tool_ranking import RegistryRanker, identity_mismatch, rank_records, resolve_scorer
from benchmarks.toollog import SKIP_NO_TOOL, SKIP_UNKNOWN_TOOL, read_tool_log, request_id, usable_summary

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
        (request_id("book a flight"), "book a flight", ("book_flight", "search_flight")),
        (request_id("weather please"), "weather please", ("get_weather",)),
    ]
    assert request_id("book a flight") == "R" + hashlib.sha256(b"book a flight").hexdigest()[:12]
    assert read.skipped == {SKIP_UNKNOWN_TOOL: 2, SKIP_NO_TOOL: 1}
    assert read.unknown == {"order_pizza": 2} and read.duplicates == 2 and read.n_lines == 7
    notes = data_notes(
        {"skipped": read.skipped, "unknown_tools": list(read.unknown.items()), "duplicates_merged": 2}, 40
    )
    assert "note: tools the log names but the registry lacks: 'order_pizza' (2 lines)" in notes[1]
    assert notes[2].startswith("note: 2 log lines repeat an earlier request: merged")
    one = data_notes({"duplicates_merged": 1}, 40)
    assert one[0].startswith("note: 1 log line repeats an earlier request: merged")
    assert data_notes({}, 1)[0].startswith("warning: only 1 test query, under 30")  # one query, not "1 queries"


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
    few = [rows[0], rows[0], {"request": "pizza", "tools": ["order_pizza"]}, {"request": "hi", "tools": []}]
    message = (r"few\.jsonl: need at least 2 usable requests, got 1 \(4 lines read, 2 skipped \(1 line of a request "
               r"naming a tool not in the registry: 'order_pizza' \(1 line\); 1 line that called no tool\), 1 line "
               r"merged into an earlier request\)")  # fmt: skip
    with pytest.raises(ValueError, match=message):
        build_condition("log", "bm25", options={**options, "log": str(write_log(tmp_path / "few.jsonl", few))})
    with pytest.raises(ValueError, match="one variant, hybrid"):
        build_condition("log", "bm25", variant="top5", options=options)


def test_the_order_of_a_logs_lines_never_changes_its_condition(tmp_path: Path) -> None:
    """The house rule: the same log with its lines shuffled gives the same query ids, the same train/test split
    and the same relevant tools (a request logged twice with other tools first included)."""
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(openai_tools()))
    rows = [{"request": f"could you {v} the {t}", "tools": [f"{v}_{t}"]} for v in ("get", "book", "cancel")
            for t in ("weather", "flight", "hotel", "taxi", "music")]  # fmt: skip
    rows += [{"request": "could you get the flight", "tools": ["book_flight", "get_flight"]},  # merged, reordered
             {"request": "could you book the taxi", "tools": ["cancel_taxi"]}]  # fmt: skip
    shuffled = rows[:]
    random.Random(5).shuffle(shuffled)
    assert shuffled != rows
    got = []
    for name, lines in (("log.jsonl", rows), ("shuffled.jsonl", shuffled)):
        options = {"tools": str(tools), "log": str(write_log(tmp_path / name, lines))}
        cond = build_condition("log", "bm25", options=options)
        read = {r.qid: r.gold for r in read_tool_log(options["log"], NAMES).records}
        got.append((
            [q.qid for q in cond.queries], [q.qid for q in cond.train], [q.qid for q in cond.test],
            [read[q.qid] for q in cond.queries], [q.relevant_ranks.tolist() for q in cond.queries],
            cond.meta["test_qids_sha256"],
        ))  # fmt: skip
    assert got[0] == got[1]
    assert got[0][0] == sorted(got[0][0]) and len(got[0][0]) == 15
    assert read[request_id("could you get the flight")] == ("book_flight", "get_flight")


def test_two_requests_whose_ids_collide_are_named_by_their_lines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import benchmarks.toollog as toollog

    monkeypatch.setattr(toollog, "request_id", lambda text: "R000000000000")
    log = write_log(
        tmp_path / "log.jsonl", [{"request": "a", "tools": ["get_news"]}, {"request": "b", "tool": "get_news"}]
    )
    with pytest.raises(DataError, match=r"log\.jsonl:2: its request's id R000000000000 is also the id of line 1's"):
        read_tool_log(log, NAMES)


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


@pytest.mark.parametrize("unknown_first", [True, False], ids=["unknown-line-first", "unknown-line-last"])
def test_a_request_any_of_whose_lines_names_an_unknown_tool_is_skipped_whole(
    tmp_path: Path, unknown_first: bool
) -> None:
    """The same request logged once with known tools and once with a tool the registry lacks keeps no partial label:
    every line of it is skipped and counted, whichever comes first; a line of it that called no tool is counted as
    such; the other requests are kept as they were."""
    known = [{"request": "book a flight", "tools": ["book_flight"]}, {"request": "book a flight", "tool": "get_news"}]
    unknown = {"request": "  book a flight ", "tools": ["search_flight", "order_pizza"]}
    lines = [unknown, *known] if unknown_first else [*known, unknown]
    rows = [{"request": "weather please", "tool": "get_weather"}, *lines, {"request": "book a flight", "tools": []}]
    read = read_tool_log(write_log(tmp_path / "log.jsonl", rows), NAMES)
    assert [(r.text, r.gold) for r in read.records] == [("weather please", ("get_weather",))]
    assert read.skipped == {SKIP_UNKNOWN_TOOL: 3, SKIP_NO_TOOL: 1}  # lines, the no-tool line as such
    assert read.unknown == {"order_pizza": 1} and read.duplicates == 0 and read.n_lines == 5
    assert read.n_lines == len(read.records) + read.duplicates + sum(read.skipped.values())


def test_the_usable_summary_says_one_line_and_two_lines(tmp_path: Path) -> None:
    """Every count ``usable_summary`` prints agrees with its noun: one line, request or merge, and two of each; the
    reasons in one order, whichever line comes first."""
    one = [{"request": "hi", "tools": []}, {"request": "pizza", "tools": ["order_pizza"]}]
    one += [{"request": "news", "tools": ["get_news"]}] * 2
    read = read_tool_log(write_log(tmp_path / "one.jsonl", one[1:2]), NAMES)
    assert usable_summary(read) == (
        "1 line read, 1 skipped (1 line of a request naming a tool not in the registry: 'order_pizza' (1 line))"
    )
    read = read_tool_log(write_log(tmp_path / "each.jsonl", one), NAMES)
    assert usable_summary(read) == (
        "4 lines read, 2 skipped (1 line of a request naming a tool not in the registry: 'order_pizza' (1 line); "
        "1 line that called no tool), 1 line merged into an earlier request"
    )
    two = [*one, *one]
    read = read_tool_log(write_log(tmp_path / "two.jsonl", two), NAMES)
    assert usable_summary(read) == (
        "8 lines read, 4 skipped (2 lines of requests naming a tool not in the registry: 'order_pizza' (2 lines); "
        "2 lines that called no tool), 3 lines merged into an earlier request"
    )


def test_a_log_with_one_usable_request_says_request(tmp_path: Path) -> None:
    """``check_log_usable`` (before a command builds anything): its count, too, agrees with its noun."""
    from experiments.options import check_log_usable

    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(openai_tools()))
    log = write_log(tmp_path / "log.jsonl", [{"request": "news", "tools": ["get_news"]}])
    with pytest.raises(ValueError, match=r"log\.jsonl: 1 usable request, at least 2 needed \(1 line read, 0 skipped\)"):
        check_log_usable(str(tools), str(log))
