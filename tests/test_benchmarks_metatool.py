"""benchmarks.metatool: registry text, CSV parsing, counted skips, real data when available."""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import pytest

from benchmarks import data, metatool
from benchmarks.corpus import DataError
from benchmarks.metatool import (
    PLUGIN_DES,
    QUERIES,
    SKIP_DUP_OTHER,
    SKIP_DUP_SAME,
    SKIP_EMPTY_DESC,
    SKIP_UNKNOWN_TOOL,
    load_metatool,
    load_metatool_files,
)


def _real_data_dir() -> Path:
    env = os.environ.get("SHORTLIST_DATA_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "data"


REAL = _real_data_dir()

TOOLS = {"alpha_tool": "  Does alpha things. ", "Beta": "Beta stuff.", "gamma": ""}
CSV = (
    "Query,Tool\n"
    "find alpha,alpha_tool\n"
    '"a query, with a comma",Beta\n'
    "unknown one,NoSuchTool\n"
    "find alpha ,alpha_tool\n"
    "find alpha,Beta\n"
    '"two\nlines",gamma\n'
    "last,Beta\n"
)


def _write_fixture(root: Path, tools: dict[str, str] | None = None, csv_text: str = CSV) -> tuple[Path, Path]:
    pd = root / PLUGIN_DES
    qc = root / QUERIES
    pd.parent.mkdir(parents=True, exist_ok=True)
    qc.parent.mkdir(parents=True, exist_ok=True)
    pd.write_text(json.dumps(tools if tools is not None else TOOLS, indent=1), encoding="utf-8")
    qc.write_text(csv_text, encoding="utf-8")
    return pd, qc


def _pin_to(monkeypatch: pytest.MonkeyPatch, dataset: str, relpath: str, path: Path) -> None:
    """Make the pinned digest of ``relpath`` that of ``path`` (fixture files)."""
    entry = data.DATASETS[dataset][relpath]
    monkeypatch.setitem(data.DATASETS[dataset], relpath, dataclasses.replace(entry, sha256=data.file_sha256(path)))


def test_fixture_corpus(tmp_path: Path) -> None:
    pd, qc = _write_fixture(tmp_path)
    c = load_metatool_files(pd, qc)
    assert c.name == "metatool"
    assert c.tool_names == ("alpha_tool", "Beta", "gamma")
    assert c.tool_texts == ("alpha tool. Does alpha things.", "Beta. Beta stuff.", "gamma")
    assert [(q.qid, q.text, q.gold) for q in c.queries] == [
        ("metatool-1", "find alpha", ("alpha_tool",)),
        ("metatool-2", "a query, with a comma", ("Beta",)),
        ("metatool-6", "two\nlines", ("gamma",)),
        ("metatool-7", "last", ("Beta",)),
    ]
    assert c.skipped == {
        SKIP_UNKNOWN_TOOL: 1,
        SKIP_DUP_SAME: 1,
        SKIP_DUP_OTHER: 1,
        SKIP_EMPTY_DESC: 1,
    }
    assert c.inputs_sha256 == {PLUGIN_DES: data.file_sha256(pd), QUERIES: data.file_sha256(qc)}


def test_load_through_ensure_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    pd, qc = _write_fixture(tmp_path)
    with pytest.raises(DataError, match="sha256 mismatch"):  # fixture files are not the pinned ones
        load_metatool(tmp_path)
    _pin_to(monkeypatch, "metatool", PLUGIN_DES, pd)
    _pin_to(monkeypatch, "metatool", QUERIES, qc)
    c = load_metatool(tmp_path)
    assert c == load_metatool_files(pd, qc)


def test_wrong_header(tmp_path: Path) -> None:
    pd, qc = _write_fixture(tmp_path, csv_text="query,tool\nx,Beta\n")
    with pytest.raises(DataError, match=r"all_clean_data\.csv:1: expected the header Query,Tool"):
        load_metatool_files(pd, qc)


def test_wrong_column_count_names_line(tmp_path: Path) -> None:
    # the multi-line row occupies lines 2-3, so the bad row is on line 5
    pd, qc = _write_fixture(tmp_path, csv_text='Query,Tool\n"a\nb",Beta\nok,Beta\nbad,Beta,extra\n')
    with pytest.raises(DataError, match=r"all_clean_data\.csv:5: expected 2 columns"):
        load_metatool_files(pd, qc)
    pd, qc = _write_fixture(tmp_path, csv_text="Query,Tool\nok,Beta\nlonely\n")
    with pytest.raises(DataError, match=r"all_clean_data\.csv:3: expected 2 columns .* found 1"):
        load_metatool_files(pd, qc)


def test_empty_fields_and_csv_syntax(tmp_path: Path) -> None:
    pd, qc = _write_fixture(tmp_path, csv_text="Query,Tool\n  ,Beta\n")
    with pytest.raises(DataError, match=r":2: empty Query"):
        load_metatool_files(pd, qc)
    pd, qc = _write_fixture(tmp_path, csv_text='Query,Tool\nok,Beta\n"never closed,Beta\n')
    with pytest.raises(DataError, match="malformed CSV"):
        load_metatool_files(pd, qc)
    pd, qc = _write_fixture(tmp_path, csv_text="Query,Tool\n")
    with pytest.raises(DataError, match="no data rows"):
        load_metatool_files(pd, qc)


def test_only_unknown_tools(tmp_path: Path) -> None:
    pd, qc = _write_fixture(tmp_path, csv_text="Query,Tool\nx,Nope\n")
    with pytest.raises(DataError, match="no query names a tool"):
        load_metatool_files(pd, qc)


def test_registry_errors(tmp_path: Path) -> None:
    pd, qc = _write_fixture(tmp_path)
    pd.write_text('{\n "a": "x",\n "b": "y",\n "a": "z"\n}', encoding="utf-8")
    with pytest.raises(DataError, match="'a' appears twice"):
        load_metatool_files(pd, qc)
    pd.write_text('{\n "a": "x",\n "b": 3\n}', encoding="utf-8")
    with pytest.raises(DataError, match=r"plugin_des\.json:3: description of tool 'b'"):
        load_metatool_files(pd, qc)
    pd.write_text('{\n "a": "x",\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"plugin_des\.json:3: malformed JSON"):
        load_metatool_files(pd, qc)
    pd.write_text("[]", encoding="utf-8")
    with pytest.raises(DataError, match="non-empty JSON object"):
        load_metatool_files(pd, qc)


def test_real_data_or_fixture(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The pinned files when the shared data folder exists; otherwise the fixture, same path."""
    if REAL.is_dir():
        c = load_metatool(REAL)
        assert len(c.tool_names) == 199 and len(c.tool_texts) == 199
        assert len(c.queries) == 20_544
        assert c.skipped == {
            SKIP_UNKNOWN_TOOL: 0,
            SKIP_DUP_SAME: 54,
            SKIP_DUP_OTHER: 16,
            SKIP_EMPTY_DESC: 0,
        }
        assert len({q.gold[0] for q in c.queries}) == 199
        assert c.inputs_sha256 == {
            PLUGIN_DES: data.DATASETS["metatool"][PLUGIN_DES].sha256,
            QUERIES: data.DATASETS["metatool"][QUERIES].sha256,
        }
        assert c.tool_texts[c.tool_names.index("total_query_meta_search_engine")].startswith(
            "total query meta search engine. "
        )
        assert c.queries[0].qid == "metatool-1"
        assert len({q.text for q in c.queries}) == len(c.queries)
    else:
        pd, qc = _write_fixture(tmp_path)
        _pin_to(monkeypatch, "metatool", PLUGIN_DES, pd)
        _pin_to(monkeypatch, "metatool", QUERIES, qc)
        c = load_metatool(tmp_path)
        assert len(c.tool_names) == 3 and len(c.queries) == 4
        assert sum(c.skipped.values()) == 4
    assert metatool.tool_text("a_b_c", " d ") == "a b c. d"
