"""``shortlist_depth.ToolSearch`` (issue 38): a tool registry in any agent's shape, ranked by the package's
scorers, the depth per request from a policy (the shipped default, or one trained); batching, pinned / excluded
tools, K bounds, a save / load round trip that refuses tampered files and policies of another scorer, and bad
input refused in one line."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import shortlist_depth as sd
from agents.trained import TrainedPolicy
from benchmarks.corpus import DataError
from benchmarks.tool_ranking import RegistryRanker, rank_candidates
from benchmarks.tools import parse_tools, read_tools_file, registry_digest, tool_text
from shortlist_depth.toolsearch import DEFAULT_POLICY_DIR, ToolSearch, policy_scorer

TOPICS = ("weather", "stock", "flight", "hotel", "recipe", "translation", "calendar", "email", "music", "news",
          "currency", "timezone", "map", "taxi", "movie", "book", "sports", "crypto", "fitness", "podcast")  # fmt: skip
VERBS = ("get", "search", "book", "cancel", "list")


def function_dicts() -> list[dict[str, Any]]:
    """100 bare function dicts ``{name, description, parameters}``: a verb and a topic each."""
    out = []
    for topic in TOPICS:
        for verb in VERBS:
            params = {"type": "object", "properties": {f"{topic}_id": {"type": "string"}, "limit": {"type": "integer"}}}
            desc = f"{verb.capitalize()} {topic} entries; {topic} service for the user."
            out.append({"name": f"{verb}_{topic}", "description": desc, "parameters": params})
    return out


def openai_tools() -> list[dict[str, Any]]:
    return [{"type": "function", "function": fn} for fn in function_dicts()]


def mcp_tools() -> dict[str, Any]:
    return {"tools": [{"name": f["name"], "description": f["description"], "inputSchema": f["parameters"]}
                      for f in function_dicts()]}  # fmt: skip


def requests(n: int = 40, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [f"please {VERBS[rng.integers(5)]} my {TOPICS[rng.integers(20)]} now" for _ in range(n)]


def labelled_lists(tools: Any, scorer: str = "bm25", n: int = 200) -> list[sd.RankedQuery]:
    """Ranked lists of generated requests over ``tools``, the request's own verb-topic tool relevant."""
    parsed = parse_tools(tools)
    ranker = RegistryRanker([t.text for t in parsed], scorer)
    names = [t.name for t in parsed]
    texts = requests(n, seed=1)
    primary, aux = ranker.scores(texts)
    everything = np.arange(len(parsed))
    out = []
    for i, text in enumerate(texts):
        gold = names.index(f"{text.split()[1]}_{text.split()[3]}")
        out.append(rank_candidates(primary[i], None if aux is None else aux[i], everything, [gold], f"q{i:03d}")[0])
    return out


@pytest.fixture(scope="module")
def fitted() -> TrainedPolicy:
    """A posterior fitted from Python on the searcher's own BM25 lists (it records no scorer)."""
    return sd.fit("posterior", labelled_lists(openai_tools()), seed=0)


@pytest.fixture(scope="module")
def search(fitted: TrainedPolicy) -> ToolSearch:
    return ToolSearch.from_tools(openai_tools(), policy=fitted)


# ------------------------------------------------------------------------------------------ input shapes


def test_every_input_shape_gives_the_same_search_and_returns_the_tools_as_given(
    fitted: TrainedPolicy, tmp_path: Path
) -> None:
    fns = function_dicts()
    flat = [{"type": "function", **fn} for fn in fns]  # OpenAI's Responses-API form
    (tmp_path / "tools.json").write_text(json.dumps(openai_tools()))
    (tmp_path / "mcp.json").write_text(json.dumps(mcp_tools()))
    (tmp_path / "tools.jsonl").write_text("".join(json.dumps(fn) + "\n" for fn in fns))
    shapes: list[Any] = [openai_tools(), fns, flat, mcp_tools(), mcp_tools()["tools"]]
    searchers = [ToolSearch.from_tools(s, policy=fitted) for s in shapes]
    searchers += [ToolSearch.from_file(tmp_path / f, policy=fitted) for f in ("tools.json", "mcp.json", "tools.jsonl")]
    texts = requests(12)
    reference = [(s.names, s.k, s.scores) for s in searchers[0].search_many(texts)]
    for searcher, given in zip(searchers, [*shapes, openai_tools(), mcp_tools(), fns], strict=True):
        assert [(s.names, s.k, s.scores) for s in searcher.search_many(texts)] == reference
        items = given["tools"] if isinstance(given, dict) else given
        shortlist = searcher.search(texts[0])
        by_name = {(i.get("function") or i)["name"]: i for i in items}
        assert list(shortlist.tools) == [by_name[n] for n in shortlist.names]  # the schemas as given
    assert {t.shape for t in parse_tools(openai_tools())} == {"openai"}
    assert {t.shape for t in parse_tools(mcp_tools())} == {"mcp"}
    assert {t.shape for t in parse_tools(fns)} == {"function"}


def test_tool_text_is_the_benchmarks_rule() -> None:
    """One rule: description, then the parameter names in schema order (SPEC); BFCL's loader reads it here."""
    from benchmarks import bfcl

    tool = parse_tools(mcp_tools())[0]
    assert tool.text == "Get weather entries; weather service for the user. Parameters: weather_id, limit"
    assert bfcl.tool_text is tool_text
    assert parse_tools([{"name": "bare"}])[0].text == "Parameters:"


# ------------------------------------------------------------------------------------------ search


def test_a_shortlist_is_the_top_k_of_the_ranking_with_the_policys_estimate(
    search: ToolSearch, fitted: TrainedPolicy
) -> None:
    text = "please book my flight now"
    shortlist = search.search(text)
    ranker = RegistryRanker([t.text for t in search.tools], "bm25")
    scores = ranker.scores([text])[0][0]
    query, order = rank_candidates(scores, None, np.arange(len(search.tools)), [], "x")
    assert shortlist.k == fitted.depth(query.scores) == shortlist.why["policy_k"] and shortlist.k >= 1
    assert shortlist.names == tuple(search.names[i] for i in order[: shortlist.k])
    assert shortlist.names[0] == "book_flight" and shortlist.scores == tuple(scores[order[: shortlist.k]])
    assert shortlist.why["method"] == "bor-posterior" and shortlist.why["n_ranked"] == 100
    assert 0 < shortlist.why["estimate"]["p_found"] <= 1
    assert shortlist.as_tool_references()[0] == {"type": "tool_reference", "tool_name": "book_flight"}
    assert json.loads(json.dumps(shortlist.to_json()))["names"] == list(shortlist.names)


def test_a_batch_is_one_scorer_call_and_one_policy_call(search: ToolSearch, monkeypatch: pytest.MonkeyPatch) -> None:
    texts = requests(25)
    one_by_one = [search.search(t) for t in texts]
    calls = {"scores": 0, "explain": 0}
    scores, explain = search.ranker.scores, search._explain
    assert explain is not None

    def counted_scores(*a: Any, **k: Any) -> Any:
        calls["scores"] += 1
        return scores(*a, **k)

    def counted_explain(*a: Any, **k: Any) -> Any:
        calls["explain"] += 1
        return explain(*a, **k)

    monkeypatch.setattr(search.ranker, "scores", counted_scores)
    monkeypatch.setattr(search, "_explain", counted_explain)
    assert search.search_many(texts) == one_by_one
    assert calls == {"scores": 1, "explain": 1}
    assert search.search_many([]) == []


def test_pinned_tools_come_first_besides_k_and_excluded_ones_never_show(search: ToolSearch) -> None:
    text = "please search my hotel now"
    plain = search.search(text)
    pinned = search.search(text, pinned=["get_email", plain.names[0]])
    assert pinned.names[:2] == ("get_email", plain.names[0]) and pinned.pinned == ("get_email", plain.names[0])
    assert pinned.k == len(pinned.names) - 2 and plain.names[0] not in pinned.names[2:]  # never twice
    assert pinned.why["n_ranked"] == 98  # the pinned tools are not ranked: K counts ranked tools only
    excluded = search.search(text, exclude=list(plain.names))
    assert not set(plain.names) & set(excluded.names) and excluded.why["n_ranked"] == 100 - plain.k
    everything = search.search(text, pinned=list(search.names[:50]), exclude=list(search.names[50:]))
    assert everything.names == search.names[:50] and everything.k == 0


def test_min_and_max_k_clip_the_policys_k(search: ToolSearch) -> None:
    text = "please search my hotel now"
    k = search.search(text).k
    low = search.search(text, max_k=1)
    assert low.k == 1 and low.why["policy_k"] == k and low.why["clipped"] == ("max_k" if k > 1 else None)
    high = search.search(text, min_k=k + 3)
    assert high.k == k + 3 and high.why["clipped"] == "min_k" and len(high.names) == k + 3
    assert search.search(text, min_k=200, max_k=None).k == 100  # never more than the tools left to rank
    for bad in ({"min_k": 0}, {"max_k": -1}, {"min_k": 3, "max_k": 2}, {"min_k": 1.5}):
        with pytest.raises(ValueError, match="min_k|max_k"):
            search.search(text, **bad)
    with pytest.raises(ValueError, match=r"min_k=21 exceeds max_k=20 \(the default bound: max_k=None lifts it\)"):
        search.search(text, min_k=21)


def test_the_default_bound_caps_k_at_20_says_so_and_lifts() -> None:
    from agents.base import FixedConfig

    assert sd.DEFAULT_MAX_K == 20
    wide = ToolSearch.from_tools(
        openai_tools(), policy=sd.fit("fixed", labelled_lists(openai_tools()), settings=FixedConfig(30))
    )
    text = "please book my flight now"
    capped = wide.search(text)
    assert capped.k == 20 and capped.why["policy_k"] == 30 and capped.why["max_k"] == 20
    assert capped.why["clipped"] == "max_k" and not capped.why["tied"]
    lifted = wide.search(text, max_k=None)
    assert lifted.k == 30 and lifted.why["clipped"] is None and lifted.why["max_k"] is None
    assert wide.search(text, max_k=25).k == 25 and wide.search_many([text, text])[1].k == 20


def test_a_list_with_no_ranking_information_shows_min_k() -> None:
    """A request that shares no word with any tool: every BM25 score is 0, the order is the registry's, and a
    longer shortlist would be a longer random draw. It shows min_k tools (1 unless said), whatever the policy."""
    from agents.base import FixedConfig

    wide = ToolSearch.from_tools(
        openai_tools(), policy=sd.fit("fixed", labelled_lists(openai_tools()), settings=FixedConfig(30))
    )
    tied = wide.search("zebra quokka xylophone")
    assert set(tied.scores) == {0.0} and tied.names == wide.names[:1] and tied.k == 1
    assert tied.why["policy_k"] == 30 and tied.why["tied"] and tied.why["clipped"] == "tied"
    assert wide.search("zebra quokka xylophone", min_k=3, max_k=None).k == 3
    assert not wide.search("please book my flight now").why["tied"]


def test_on_bfcl_the_shipped_bm25_default_shows_at_most_20_and_one_on_a_request_of_no_common_word() -> None:
    """The issue's cases: the shipped top-p showed all 370 tools on requests whose BM25 scores are all 0 and more than
    20 on others; with the default bound and the tie rule every request shows 1-20 tools."""
    from experiments.toolsearch import registry_tools

    tools, texts = registry_tools("bfcl", None, None)
    search = ToolSearch.from_tools(tools)
    shown = search.search_many(texts)
    unbounded = search.search_many(texts, max_k=None)
    assert max(s.k for s in shown) == 20 and min(s.k for s in shown) >= 1
    tied = [s for s in shown if s.why["tied"]]
    assert tied and all(s.k == 1 and s.why["policy_k"] == 370 and set(s.scores) == {0.0} for s in tied)
    over = [(a, b) for a, b in zip(shown, unbounded, strict=True) if b.k > 20 and not b.why["tied"]]
    assert over and all(a.k == 20 and a.why["clipped"] == "max_k" for a, _ in over)
    assert all(a.k == b.k for a, b in zip(shown, unbounded, strict=True) if b.k <= 20)


def test_with_tools_reuses_the_scorer_and_policy_and_a_repeated_registry_costs_nothing(search: ToolSearch) -> None:
    smaller = search.with_tools(openai_tools()[:30])
    assert smaller.policy is search.policy and smaller.scorer == search.scorer and len(smaller.names) == 30
    again = search.with_tools(openai_tools()[:30])
    assert again.ranker is smaller.ranker  # prepared once per registry (by digest)
    assert search.with_tools(openai_tools()).ranker is search.ranker
    assert smaller.digest == registry_digest(parse_tools(openai_tools()[:30])) != search.digest


# ------------------------------------------------------------------------------------------ save / load


def test_the_mcp_sdks_objects_are_read_as_their_json(fitted: TrainedPolicy) -> None:
    """``await session.list_tools()`` (a ListToolsResult) or its ``.tools`` given as they are: the same searcher as
    their JSON, the schemas shown as the wire format's dicts."""
    import mcp.types

    listed = mcp.types.ListToolsResult.model_validate(mcp_tools())
    texts = requests(8)
    reference = ToolSearch.from_tools(mcp_tools(), policy=fitted)
    for given in (listed, listed.tools, tuple(listed.tools)):
        searcher = ToolSearch.from_tools(given, policy=fitted)
        assert searcher.digest == reference.digest
        assert searcher.search_many(texts) == reference.search_many(texts)
    assert reference.with_tools(listed).digest == reference.digest


def test_save_and_load_give_the_same_shortlists(search: ToolSearch, tmp_path: Path) -> None:
    folder = search.save(tmp_path / "searcher")
    assert sorted(p.name for p in folder.iterdir()) == ["policy", "searcher.json", "tools.json"]
    back = ToolSearch.load(folder)
    texts = requests(20, seed=3)
    assert back.search_many(texts) == search.search_many(texts)
    assert back.record == search.record and policy_scorer(back.policy) == search.record
    assert json.loads((folder / "tools.json").read_text()) == openai_tools()
    with pytest.raises(FileExistsError, match="exists and is not empty"):
        search.save(folder)
    assert search.save(folder, overwrite=True) == folder


def test_a_saved_searcher_has_the_modes_the_umask_gives(search: ToolSearch, tmp_path: Path) -> None:
    """Not its owner's only (tempfile.mkdtemp's 0o700): a server running as another user reads it."""
    mask = os.umask(0o022)
    try:
        folder = search.save(tmp_path / "searcher")
    finally:
        os.umask(mask)
    for path in [folder, *folder.rglob("*")]:
        assert stat.S_IMODE(path.stat().st_mode) == (0o755 if path.is_dir() else 0o644), path


def test_a_tampered_or_incomplete_searcher_is_refused(search: ToolSearch, tmp_path: Path) -> None:
    folder = search.save(tmp_path / "s")
    tools = folder / "tools.json"
    tools.write_text(tools.read_text().replace("weather", "wether", 1))
    with pytest.raises(ValueError, match=r"tools\.json: changed after the searcher was saved"):
        ToolSearch.load(folder)
    folder = search.save(tmp_path / "s", overwrite=True)
    (folder / "policy" / "agent.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"policy/agent\.json: missing"):
        ToolSearch.load(folder)
    (folder / "searcher.json").unlink()
    with pytest.raises(FileNotFoundError, match="not a saved searcher"):
        ToolSearch.load(folder)
    folder = search.save(tmp_path / "s", overwrite=True)
    meta = json.loads((folder / "searcher.json").read_text())
    (folder / "searcher.json").write_text(json.dumps({**meta, "scorer": "minilm"}))
    with pytest.raises(ValueError, match=r"policy records another scorer than searcher.json \(policy: bm25, searche"):
        ToolSearch.load(folder)  # even with the files' sha256 as recorded: the policy was trained on bm25
    (folder / "searcher.json").write_text(json.dumps({**meta, "scorer": "hybrid"}))
    with pytest.raises(ValueError, match="malformed searcher file"):
        ToolSearch.load(folder)


def test_nothing_half_written_when_saving_fails(
    search: ToolSearch, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(path: Path) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(search.policy.policy, "save", broken)
    with pytest.raises(OSError, match="disk full"):
        search.save(tmp_path / "s")
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------------------------------ policies


def test_a_policy_of_another_scorer_or_observation_set_is_refused(search: ToolSearch, tmp_path: Path) -> None:
    folder = search.save(tmp_path / "bm25")
    bm25_policy = sd.load_policy(folder / "policy")  # records bm25 (the searcher stamped it)
    with pytest.raises(ValueError, match="trained on bm25 scores, not minilm"):
        ToolSearch.from_tools(openai_tools(), scorer="minilm", policy=bm25_policy)
    hybrid = sd.fit("posterior", labelled_lists(openai_tools(), "bm25-hybrid", 80), seed=0)  # records nothing
    with pytest.raises(ValueError, match="does not apply to bm25 searches"):
        ToolSearch.from_tools(openai_tools(), policy=hybrid)
    assert ToolSearch.from_tools(openai_tools(), scorer="hybrid", policy=hybrid).scorer == "bm25-hybrid"
    record = {**search.record, "identity": {**search.record["identity"]}}
    record["identity"]["rank"] = {**record["identity"]["rank"], "tokeniser_sha256": "0" * 64}
    other = TrainedPolicy(bm25_policy.policy, bm25_policy.episode, bm25_policy.method, None,
                          {**bm25_policy.config, "toolsearch": record})  # fmt: skip
    with pytest.raises(ValueError, match=r"another bm25 scorer \(differs in \['rank.tokeniser_sha256'\]\)"):
        ToolSearch.from_tools(openai_tools(), policy=other)
    oracle = sd.fit("oracle", labelled_lists(openai_tools(), n=20), seed=0)
    with pytest.raises(ValueError, match="reads the labels"):
        ToolSearch.from_tools(openai_tools(), policy=oracle)
    with pytest.raises(ValueError, match="unknown tool-search scorer 'bm99'"):
        ToolSearch.from_tools(openai_tools(), scorer="bm99", policy=bm25_policy)


def test_the_shipped_default_works_with_no_training() -> None:
    shipped = sorted(p.name for p in DEFAULT_POLICY_DIR.iterdir() if (p / "config.json").is_file())
    assert "bm25" in shipped
    search = ToolSearch.from_tools(openai_tools())
    shortlist = search.search("please cancel my taxi now")
    assert shortlist.names[0] == "cancel_taxi" and shortlist.k >= 1
    config = search.policy.config
    assert config["toolsearch"]["scorer"] == "bm25"
    assert config["provenance"]["command"].startswith("shortlist toolsearch default")
    assert set(config["provenance"]["data_sha256"]) and config["provenance"]["git_sha"]
    for scorer in shipped:  # each shipped policy serves its own scorer
        assert ToolSearch.from_tools(openai_tools(), scorer=scorer).search("please cancel my taxi now").k >= 1


def test_the_explanations_give_the_policys_own_depths() -> None:
    """Each kind's ``explain`` returns exactly the depths of its ``depths`` (the searcher reads them from it)."""
    train, test = labelled_lists(openai_tools(), n=120)[:80], labelled_lists(openai_tools(), n=120)[80:]
    for kind in ("posterior", "cutoff", "gap", "threshold", "topp", "auto"):
        policy = sd.fit(kind, train, seed=0, settings=_tiny(kind))
        depths, rows = policy.policy.explain(test, policy.episode)
        np.testing.assert_array_equal(depths, policy.policy.depths(test, policy.episode))
        assert len(rows) == len(test) and all(isinstance(v, float | str) for r in rows for v in r.values())


def _tiny(kind: str) -> Any:
    from agents.auto import AutoConfig
    from agents.cutoff import CutoffConfig

    return {"cutoff": CutoffConfig(epochs=20), "auto": AutoConfig(candidates=("gap", "threshold"))}.get(kind)


# ------------------------------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("tools", "match"),
    [
        ([], r"tools: no tools \(the registry is empty\)"),
        ({"tools": []}, "the registry is empty"),
        ([{"name": "a"}, {"name": "b"}, {"name": "a"}], r"tools\[2\] \('a'\): duplicate tool name \(first at tools\[0"),
        ([{"name": "a"}, {"description": "no name"}], r"tools\[1\]: no tool name"),
        ([{"name": "a", "parameters": [1]}], r"tools\[0\] \('a'\): 'parameters' must be an object"),
        ([{"name": "a", "inputSchema": {"properties": 3}}], r"tools\[0\] \('a'\): 'inputSchema.properties' must be"),
        ([{"type": "function", "function": "f"}], r"tools\[0\]: 'function' must be an object"),
        ([{"name": "a", "description": 5}], r"tools\[0\] \('a'\): 'description' must be a string"),
        (["a"], r"tools\[0\]: a tool must be a JSON object"),
        ({"no": "tools"}, "needs a 'tools' list"),
        ("tools", "expected a list of tools"),
    ],
)
def test_malformed_registries_are_refused_naming_the_tool(tools: Any, match: str, fitted: TrainedPolicy) -> None:
    with pytest.raises(DataError, match=match):
        ToolSearch.from_tools(tools, policy=fitted)


def test_anthropic_client_tools_are_read_with_their_input_schema(fitted: TrainedPolicy, tmp_path: Path) -> None:
    """Anthropic's ``{"name", "description", "input_schema"}`` (a ``custom`` type or none): the same text, so the
    same shortlists, as the OpenAI shape of the same functions, in the library, a file and the proxy alike (the
    proxy reads them through the library)."""
    fns = function_dicts()
    anthropic = [{"name": f["name"], "description": f["description"], "input_schema": f["parameters"]} for f in fns]
    anthropic[0] = {"type": "custom", **anthropic[0]}
    (tmp_path / "anthropic.json").write_text(json.dumps(anthropic, indent=2))
    parsed = parse_tools(anthropic)
    assert {t.shape for t in parsed} == {"anthropic"}
    assert [t.text for t in parsed] == [t.text for t in parse_tools(openai_tools())]
    assert "Parameters: " + next(iter(fns[0]["parameters"]["properties"])) in parsed[0].text
    texts = requests(12)
    reference = ToolSearch.from_tools(openai_tools(), policy=fitted).search_many(texts)
    for searcher in (ToolSearch.from_tools(anthropic, policy=fitted),
                     ToolSearch.from_file(tmp_path / "anthropic.json", policy=fitted)):  # fmt: skip
        got = searcher.search_many(texts)
        assert [(s.names, s.k, s.scores) for s in got] == [(s.names, s.k, s.scores) for s in reference]
        assert got[0].tools[0] == anthropic[[f["name"] for f in fns].index(got[0].names[0])]  # as given


def test_a_tools_file_is_refused_naming_the_line_or_the_tool(tmp_path: Path) -> None:
    """A pretty-printed file's syntax error at its own line (not line 1, as JSON lines would say); a NaN or an
    infinite number anywhere in a tool, from a file or from Python, naming the tool and where in it."""
    bad = tmp_path / "tools.json"
    lines = json.dumps(openai_tools()[:3], indent=2).splitlines()
    at = next(i for i, line in enumerate(lines) if '"required"' in line or '"limit"' in line)
    lines[at] = lines[at] + ","  # a stray comma
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(DataError, match=rf"tools\.json:{at + 1}: malformed JSON"):
        read_tools_file(bad)
    bad.write_text('[{"name": "a", "parameters": {"type": "object", "properties": {"x": {"default": NaN}}}}]')
    with pytest.raises(DataError, match=r"tools\.json\[0\] \('a'\): 'parameters\.properties\.x\.default' is nan"):
        read_tools_file(bad)
    tools = openai_tools()[:2]
    tools[1]["function"]["parameters"]["properties"]["limit"]["enum"] = [1, float("inf")]
    with pytest.raises(
        DataError, match=r"tools\[1\] \('search_weather'\): 'function\.parameters\.properties\.limit\.enum\[1\]' is inf"
    ):
        parse_tools(tools)
    bad.write_text("")
    with pytest.raises(DataError, match=r"tools\.json: no entries"):
        read_tools_file(bad)


def test_malformed_files_and_requests_are_refused(search: ToolSearch, tmp_path: Path) -> None:
    bad = tmp_path / "tools.jsonl"
    bad.write_text('{"name": "a"}\n{"name": "b", "parameters": 1}\n')
    with pytest.raises(DataError, match=r"tools\.jsonl:2 \('b'\): 'parameters' must be an object"):
        read_tools_file(bad)
    bad.write_text('{"name": "a"}\nnot json\n')
    with pytest.raises(DataError, match=r"tools\.jsonl:2: malformed JSON"):
        read_tools_file(bad)
    bad.write_text('{"name": "a"}\n{"name": "a"}\n')
    with pytest.raises(DataError, match=r"tools\.jsonl:2 \('a'\): duplicate tool name \(first at .*tools\.jsonl:1\)"):
        read_tools_file(bad)
    with pytest.raises(DataError, match="cannot read the tools file"):
        read_tools_file(tmp_path / "missing.json")
    for request in ("", "   \n", None):
        with pytest.raises(ValueError, match="request 0 has no text"):
            search.search(request)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="request 1 has no text"):
        search.search_many(["fine", ""])
    with pytest.raises(ValueError, match=r"pinned tool\(s\) not in the registry: \['nope'\]"):
        search.search("x y", pinned=["nope"])
    with pytest.raises(ValueError, match="both pinned and excluded"):
        search.search("x y", pinned=["get_stock"], exclude=["get_stock"])
    with pytest.raises(TypeError, match="list of names"):
        search.search("x y", exclude="get_stock")


def test_the_readme_tool_search_example_runs_as_written(tmp_path: Path) -> None:
    """The README's "In your agent" example, extracted from the README and run in a fresh folder as a user runs it
    (the installed package, the shipped default policy, no training), twice."""
    import re
    import subprocess
    import sys

    from conftest import REPO

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    (snippet,) = [b for b in re.findall(r"```python\n(.*?)```", readme, flags=re.S) if "ToolSearch.from_tools(" in b]
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}
    for _ in range(2):  # a second run, as a user reruns it, finds the searcher saved by the first
        done = subprocess.run([sys.executable, "-c", snippet], cwd=tmp_path, env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-1500:]
    names = done.stdout.splitlines()[0]
    assert names.startswith("('get_weather',"), done.stdout
    assert "{'type': 'tool_reference', 'tool_name': 'get_weather'}" in done.stdout
    back = ToolSearch.load(tmp_path / "my-searcher")
    assert back.search("What is the weather in Paris tomorrow?").names[0] == "get_weather"


def test_the_kinds_that_decide_without_torch_load_and_decide_where_torch_cannot_be_imported(tmp_path: Path) -> None:
    """``torch_at_inference`` is true exactly for the kinds whose saved policy needs torch to choose a depth: every
    other kind loads and decides in a process where importing torch raises (so a tool search serving it starts
    without torch), and each flagged kind fails there."""
    import subprocess
    import sys

    from conftest import TINY_BUDGETS, cli_env

    from agents import registry

    tiny = registry.parse_settings(TINY_BUDGETS)
    lists = labelled_lists(openai_tools(), n=40)
    kinds = [k for k, v in registry.KINDS.items() if not (v.reads_labels or v.only_benchmarks or v.name_field)]
    for kind in kinds:
        sd.fit(kind, lists, settings=tiny.get(kind), seed=0).save(tmp_path / kind)
    (tmp_path / "fake" / "torch").mkdir(parents=True)
    (tmp_path / "fake" / "torch" / "__init__.py").write_text("raise ImportError('torch was imported')\n")
    probe = (
        "import sys, shortlist_depth as sd\n"
        "for kind in sys.argv[1:]:\n"
        "    try:\n"
        f"        sd.load_policy({str(tmp_path)!r} + '/' + kind).depths([[3.0, 1.0, 0.5, 0.1]])\n"
        "        print(kind, 'ok')\n"
        "    except ImportError:\n"
        "        print(kind, 'torch')\n"
    )
    env = cli_env()
    env["PYTHONPATH"] = f"{tmp_path / 'fake'}:{env['PYTHONPATH']}"
    done = subprocess.run([sys.executable, "-c", probe, *kinds], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-1500:]
    seen = dict(line.split() for line in done.stdout.splitlines())
    assert seen == {k: "torch" if registry.KINDS[k].torch_at_inference else "ok" for k in kinds}
    torch_kinds = {"dqn", "cutoff", "choppy", "pfound", "fqi", "ppo", "residual"}
    assert {k for k, v in seen.items() if v == "torch"} == torch_kinds


def test_a_wheel_carries_the_shipped_default_policies(tmp_path: Path) -> None:
    """The default policies are package data (pyproject): a wheel built from this checkout holds every file of every
    shipped policy, so ``ToolSearch.from_tools(tools)`` works on a fresh install."""
    import subprocess
    import sys
    import zipfile

    from conftest import REPO

    command = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(tmp_path)]
    done = subprocess.run([*command, str(REPO)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-1500:]
    (wheel,) = tmp_path.glob("shortlist_depth-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    shipped = {
        f"shortlist_depth/{p.relative_to(DEFAULT_POLICY_DIR.parent)}" for p in DEFAULT_POLICY_DIR.rglob("*.json")
    }
    assert shipped and {f"shortlist_depth/default_policy/bm25/{f}" for f in ("config.json", "agent.json")} <= shipped
    assert shipped <= names
