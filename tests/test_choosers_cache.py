"""choosers base and cache: the protocol, the per-key cache, resuming, the factory,
and BFCL's tool schemas on the real data."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from benchmarks.bfcl import load_bfcl, load_bfcl_schemas, tool_text
from choosers import (
    CHOOSERS,
    BaseChooser,
    Choice,
    ChoiceCache,
    Chooser,
    Tool,
    bfcl_tools,
    make_chooser,
    tools_from_schemas,
)
from choosers.chooser import digest_of

TOOLS = [Tool(f"tool_{i}", f"Tool {i}.", {"type": "dict", "properties": {"x": {"type": "integer"}}}) for i in range(6)]


class Counting(BaseChooser):
    """Picks the last tool; fails on call number ``fail_at`` (1-based) to mimic an interrupted study."""

    def __init__(self, cache: ChoiceCache | None, fail_at: int = 0) -> None:
        super().__init__(cache)
        self.calls: list[int] = []
        self.fail_at = fail_at

    name = "counting"  # type: ignore[assignment]
    runtime_id = "test-runtime"  # type: ignore[assignment]
    model_id = "test-model"  # type: ignore[assignment]

    def request_digest(self, query: str, tools: Sequence[Tool]) -> str:
        return digest_of({"q": query, "tools": [t.spec() for t in tools]})

    def _choose_one(self, query: str, tools: Sequence[Tool]) -> Choice:
        self.calls.append(len(tools))
        if len(self.calls) == self.fail_at:
            raise KeyboardInterrupt
        return Choice(
            len(tools) - 1, "ok", tools[-1].name, raw="last", prompt_tokens=3 * len(tools), completion_tokens=1
        )


def test_protocol_and_choice_checks() -> None:
    assert isinstance(Counting(None), Chooser)
    with pytest.raises(ValueError, match="index is set iff ok"):
        Choice(None, "ok")
    with pytest.raises(ValueError, match="index is set iff ok"):
        Choice(1, "refused")
    with pytest.raises(ValueError, match="unknown status"):
        Choice(None, "maybe")  # type: ignore[arg-type]
    c = Counting(None)
    with pytest.raises(ValueError, match="depth 7 outside 1..6"):
        c.choose_prefixes("q", TOOLS, [1, 7])
    with pytest.raises(ValueError, match="appears twice"):
        c.choose_prefixes("q", [TOOLS[0], TOOLS[0]], [1])
    with pytest.raises(ValueError, match="empty query"):
        c.choose("  ", TOOLS)
    with pytest.raises(ValueError, match="empty"):
        c.choose("q", [])
    assert TOOLS[0].param_names == ["x"] and Tool("t", "d").param_names == []


def test_default_prefix_loop_and_cache_roundtrip(tmp_path: Path) -> None:
    cache = ChoiceCache(tmp_path / "choices")
    chooser = Counting(cache)
    got = chooser.choose_prefixes("find it", TOOLS, [5, 1, 3, 3])
    assert list(got) == [1, 3, 5] and chooser.calls == [1, 3, 5]
    assert got[3] == Choice(2, "ok", "tool_2", "last", 9, 1)
    again = Counting(cache).choose_prefixes("find it", TOOLS, [1, 3, 5])
    assert all(c.cached for c in again.values())
    assert {k: (c.index, c.name, c.prompt_tokens) for k, c in again.items()} == {
        k: (c.index, c.name, c.prompt_tokens) for k, c in got.items()
    }
    frame = cache.to_frame()
    assert list(frame.columns) == [
        "runtime", "model", "digest", "chooser", "query", "k", "tools", "index", "status", "name", "raw",
        "prompt_tokens", "completion_tokens", "error", "written_at",
    ]  # fmt: skip
    row = frame.set_index("k").loc[3]
    assert (row["tools"], row["index"], row["status"], row["query"]) == ("tool_0|tool_1|tool_2", 2, "ok", "find it")
    assert not [p for p in tmp_path.rglob("*") if p.name.startswith(".")]  # no temporaries left
    assert ChoiceCache(tmp_path / "absent").to_frame().empty


def test_key_covers_order_and_schema(tmp_path: Path) -> None:
    cache = ChoiceCache(tmp_path)
    chooser = Counting(cache)
    chooser.choose("q", TOOLS[:3])
    chooser.choose("q", [TOOLS[1], TOOLS[0], TOOLS[2]])  # another order
    changed = Tool("tool_2", "Tool 2.", {"type": "dict", "properties": {"y": {"type": "string"}}})
    chooser.choose("q", [*TOOLS[:2], changed])  # another schema
    chooser.choose("q2", TOOLS[:3])  # another query
    assert chooser.calls == [3, 3, 3, 3]
    scored = [Tool(t.name, t.description, t.parameters, score=1.0) for t in TOOLS[:3]]
    assert chooser.request_digest("q", scored) == chooser.request_digest("q", TOOLS[:3])  # scores are not sent


def test_interrupted_study_resumes_without_losing_answers(tmp_path: Path) -> None:
    cache = ChoiceCache(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        Counting(cache, fail_at=3).choose_prefixes("q", TOOLS, [1, 2, 3, 4])
    assert sorted(cache.to_frame()["k"]) == [1, 2]
    resumed = Counting(cache)
    resumed.choose_prefixes("q", TOOLS, [1, 2, 3, 4])
    assert resumed.calls == [3, 4]


def test_unreadable_or_foreign_record_is_a_miss(tmp_path: Path) -> None:
    cache = ChoiceCache(tmp_path)
    chooser = Counting(cache)
    chooser.choose("q", TOOLS[:2])
    (path,) = tmp_path.rglob("*.json")
    path.write_text("{ truncated")
    chooser.choose("q", TOOLS[:2])
    assert chooser.calls == [2, 2]
    rec = json.loads(path.read_text())
    rec["model"] = "another-model"
    path.write_text(json.dumps(rec))
    chooser.choose("q", TOOLS[:2])
    assert chooser.calls == [2, 2, 2]
    with pytest.raises(ValueError, match="64 lowercase hex"):
        cache.key("r", "m", "abc")


def test_factory_names_and_options() -> None:
    assert CHOOSERS == ("local", "openai", "simulated")
    with pytest.raises(ValueError) as e:
        make_chooser("gpt")
    assert str(e.value) == "unknown chooser 'gpt'; expected one of: local, openai, simulated"
    with pytest.raises(ValueError, match=r"needs option\(s\) base_url, model"):
        make_chooser("openai")
    with pytest.raises(ValueError, match="unknown option 'bogus'"):
        make_chooser("local", bogus=1)
    with pytest.raises(ValueError, match="base_url must start with http"):
        make_chooser("openai", base_url="localhost:8000", model="m", api_key_env="")


# --------------------------------------------------------------------------- BFCL schemas


def test_bfcl_schemas_real_data() -> None:
    corpus = load_bfcl()
    schemas = load_bfcl_schemas()
    assert len(schemas) == 370
    assert list(schemas) == list(corpus.tool_names)
    for (name, (desc, params)), text in zip(schemas.items(), corpus.tool_texts, strict=True):
        assert tool_text({"name": name, "description": desc, "parameters": params}) == text
        assert params["type"] == "dict" and isinstance(params["properties"], dict)
    tools = bfcl_tools()
    assert [t.name for t in tools] == list(corpus.tool_names)
    assert tools[0].name == "calculate_triangle_area" and tools[0].param_names == ["base", "height", "unit"]
    assert tools_from_schemas(["math.factorial"], schemas)[0].description == schemas["math.factorial"][0]
    with pytest.raises(ValueError, match="no schema for tool 'nope'"):
        tools_from_schemas(["nope"], schemas)


def test_drop_removes_one_record_so_it_is_asked_again(tmp_path: Path) -> None:
    cache = ChoiceCache(tmp_path)
    chooser = Counting(cache)
    chooser.choose("q", TOOLS[:2])
    chooser.choose("other", TOOLS[:2])
    (rec,) = [r for r in cache.records() if r["query"] == "q"]
    key = cache.key(rec["runtime"], rec["model"], rec["digest"])
    assert cache.drop(key) is True
    assert cache.drop(key) is False  # already gone
    assert cache.get(key) is None and len(list(cache.records())) == 1
    chooser.choose("q", TOOLS[:2])
    assert chooser.calls == [2, 2, 2]  # asked again; "other" stays cached
    chooser.choose("other", TOOLS[:2])
    assert chooser.calls == [2, 2, 2]
