"""benchmarks.toolbench: registry, archive streaming and safety, cache, queries, real data."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import tarfile
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from benchmarks import data, toolbench
from benchmarks.corpus import DataError, ToolCorpus
from benchmarks.toolbench import (
    ARCHIVE,
    QUERIES,
    REGISTRY,
    SKIP_AMBIGUOUS,
    SKIP_EMPTY_DESC,
    SKIP_GOLD_MISSING,
    SKIP_GOLD_NO_APIS,
    SKIP_NO_TOOL,
    SKIP_NOT_IN_ARCHIVE,
    SKIP_SEVERAL_TOOLS,
    archive_index,
    load_toolbench,
    load_toolbench_files,
    read_archive,
    tool_text,
)


def _real_data_dir() -> Path:
    env = os.environ.get("SHORTLIST_DATA_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "data"


REAL = _real_data_dir()
PREFIX = "tools/toolenv2404_filtered"

REGISTRY_FIXTURE = {
    "Alpha Tool": {"tool_description": "Alpha\n does   x.", "score": {"avgLatency": 1}},
    "Beta": {"tool_description": "", "score": None},
    "Gamma_X": {"tool_description": None, "score": {}},
    "Dup Tool": {"tool_description": "the real one", "score": {}},
    "Twin": {"tool_description": "same", "score": {}},
    "Absent": {"tool_description": "not in the archive", "score": {}},
}


def _tool_json(name: str, desc: str | None, apis: list[tuple[str, str | None]]) -> bytes:
    doc: dict[str, object] = {
        "tool_name": name,
        "tool_description": desc,
        "api_list": [{"name": a, "description": d, "required_parameters": []} for a, d in apis],
    }
    return json.dumps(doc).encode()


def _good_members() -> list[tuple[str, bytes]]:
    return [
        (
            f"{PREFIX}/Cat1/alpha_tool.json",
            _tool_json("Alpha Tool", "other text", [("get_alpha", "Gets\nalpha"), ("list_x", "")]),
        ),
        (f"{PREFIX}/Cat1/beta.json", _tool_json("Beta", None, [("b_api", "B does")])),
        (f"{PREFIX}/Cat1/gamma.json", _tool_json("Gamma_X", "g", [])),
        (f"{PREFIX}/Cat1/dup_tool.json", _tool_json("Dup Tool", "a fake", [("wrong", "no")])),
        (
            f"{PREFIX}/Cat2/dup_tool.json",
            _tool_json("Dup Tool", "the  real one", [("right", "yes")]),
        ),
        (f"{PREFIX}/Cat1/twin.json", _tool_json("Twin", "same", [("t1", "")])),
        (f"{PREFIX}/Cat2/twin.json", _tool_json("Twin", "same", [("t2", "")])),
        (f"{PREFIX}/Cat2/README.txt", b"ignored"),
    ]


def _write_archive(path: Path, members: list[tuple[str, bytes]], extra: Sequence[tarfile.TarInfo] = ()) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:xz") as tf:
        for d in (PREFIX, f"{PREFIX}/Cat1", f"{PREFIX}/Cat2"):
            ti = tarfile.TarInfo(d)
            ti.type = tarfile.DIRTYPE
            tf.addfile(ti)
        for name, raw in members:
            ti = tarfile.TarInfo(name)
            ti.size = len(raw)
            tf.addfile(ti, io.BytesIO(raw))
        for ti in extra:
            tf.addfile(ti)
    return path


QUERY_FIXTURE = {
    "G1_instruction": [
        {
            "query": " Use alpha ",
            "query_id": 1,
            "relevant APIs": [["Alpha Tool", "get_alpha"], ["Alpha Tool", "list_x"]],
            "api_list": [],
        },
        {
            "query": "two tools",
            "query_id": 2,
            "relevant APIs": [["Alpha Tool", "get_alpha"], ["Beta", "b_api"]],
            "api_list": [],
        },
    ],
    "G1_category": [
        {"query": "unknown gold", "query_id": 3, "relevant APIs": [["Nope", "x"]], "api_list": []},
        {"query": "no gold", "query_id": 4, "relevant APIs": [], "api_list": []},
        {"query": "twin please", "query_id": 5, "relevant APIs": [["Twin", "t1"]], "api_list": []},
    ],
    "G1_tool": [
        {
            "query": "dup tool please",
            "query_id": 1,
            "relevant APIs": [["Dup Tool", "right"]],
            "api_list": [],
        },
        {"query": "empty desc", "query_id": 7, "relevant APIs": [["Gamma_X", "x"]], "api_list": []},
    ],
}


def _write_fixture(root: Path) -> tuple[Path, list[Path], Path]:
    reg = root / REGISTRY
    reg.parent.mkdir(parents=True, exist_ok=True)
    reg.write_text(json.dumps(REGISTRY_FIXTURE, indent=1), encoding="utf-8")
    qfiles = []
    for rel in QUERIES:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(QUERY_FIXTURE[Path(rel).stem], indent=2), encoding="utf-8")
        qfiles.append(p)
    arch = _write_archive(root / ARCHIVE, _good_members())
    return reg, qfiles, arch


def _pin_fixture(mp: pytest.MonkeyPatch, root: Path) -> None:
    for rel in (REGISTRY, ARCHIVE, *QUERIES):
        entry = data.DATASETS["toolbench"][rel]
        mp.setitem(
            data.DATASETS["toolbench"],
            rel,
            dataclasses.replace(entry, sha256=data.file_sha256(root / rel)),
        )


FIXTURE_SKIPPED = {
    SKIP_EMPTY_DESC: 2,
    SKIP_NOT_IN_ARCHIVE: 1,
    SKIP_AMBIGUOUS: 1,
    SKIP_NO_TOOL: 1,
    SKIP_SEVERAL_TOOLS: 1,
    SKIP_GOLD_MISSING: 1,
    SKIP_GOLD_NO_APIS: 2,  # Twin (ambiguous) and Gamma_X (empty api_list)
}


# ------------------------------------------------------------------ fixture corpus


def test_fixture_corpus_texts_and_queries(tmp_path: Path) -> None:
    reg, qfiles, arch = _write_fixture(tmp_path / "data")
    c = load_toolbench_files(reg, qfiles, arch, cache_dir=tmp_path / "cache")
    assert c.name == "toolbench"
    assert c.tool_names == tuple(REGISTRY_FIXTURE)
    assert c.tool_texts == (
        "Alpha Tool. Alpha does x. APIs: get alpha: Gets alpha; list x",
        "Beta APIs: b api: B does",
        "Gamma X",
        "Dup Tool. the real one APIs: right: yes",
        "Twin. same",
        "Absent. not in the archive",
    )
    assert [(q.qid, q.text, q.gold) for q in c.queries] == [
        ("G1_instruction-1", "Use alpha", ("Alpha Tool",)),
        ("G1_category-5", "twin please", ("Twin",)),
        ("G1_tool-1", "dup tool please", ("Dup Tool",)),
        ("G1_tool-7", "empty desc", ("Gamma_X",)),
    ]
    assert c.skipped == FIXTURE_SKIPPED
    assert set(c.inputs_sha256) == {REGISTRY, ARCHIVE, *QUERIES}


def test_tool_text_format() -> None:
    assert tool_text("a_b", " d\n e ", [("x_y", "z"), ("", "only desc"), ("n", ""), ("", "")]) == (
        "a b. d e APIs: x y: z; only desc; n"
    )
    assert tool_text("T", "") == "T"
    assert tool_text("T", "D", []) == "T. D"


def test_load_through_ensure_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    root = tmp_path / "data"
    reg, qfiles, arch = _write_fixture(root)
    with pytest.raises(DataError, match="sha256 mismatch"):
        load_toolbench(root, tmp_path / "cache")
    _pin_fixture(monkeypatch, root)
    c = load_toolbench(root, tmp_path / "cache")
    assert c == load_toolbench_files(reg, qfiles, arch, tmp_path / "cache")


# ------------------------------------------------------------------ cache


def test_cache_written_atomically_and_reused(tmp_path: Path) -> None:
    arch = _write_archive(tmp_path / "a.tar.xz", _good_members())
    cache = tmp_path / "cache"
    first, hit1 = archive_index(arch, cache)
    second, hit2 = archive_index(arch, cache)
    assert (hit1, hit2) == (False, True)
    assert first == second and len(first) == 7
    files = sorted(p.name for p in cache.iterdir())
    assert files == [f"toolenv-index-{data.file_sha256(arch)}.json"]  # no temporary file left
    doc = json.loads((cache / files[0]).read_text(encoding="utf-8"))
    assert doc["archive_sha256"] == data.file_sha256(arch)
    (cache / files[0]).write_text("{not json", encoding="utf-8")  # corrupt cache -> rebuilt
    third, hit3 = archive_index(arch, cache)
    assert not hit3 and third == first
    assert archive_index(arch, cache)[1]


def test_cache_keyed_by_archive_digest(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    a = _write_archive(tmp_path / "a.tar.xz", _good_members())
    b = _write_archive(tmp_path / "b.tar.xz", _good_members()[:2])
    assert len(archive_index(a, cache)[0]) == 7
    tools_b, hit = archive_index(b, cache)
    assert not hit and len(tools_b) == 2
    assert len(list(cache.iterdir())) == 2


def test_unwritable_cache_only_warns(tmp_path: Path) -> None:
    arch = _write_archive(tmp_path / "a.tar.xz", _good_members())
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.warns(UserWarning, match="could not write"):
        tools, hit = archive_index(arch, blocker / "cache")
    assert len(tools) == 7 and not hit


# ------------------------------------------------------------------ archive safety


def test_truncated_archive(tmp_path: Path) -> None:
    arch = _write_archive(tmp_path / "a.tar.xz", _good_members() * 1)
    raw = arch.read_bytes()
    arch.write_bytes(raw[: len(raw) // 2])
    with pytest.raises(DataError, match="truncated or corrupt"):
        read_archive(arch)
    arch.write_bytes(b"this is not xz at all" * 10)
    with pytest.raises(DataError, match="truncated or corrupt"):
        read_archive(arch)


@pytest.mark.parametrize(
    ("name", "match"),
    [
        (f"{PREFIX}/Cat1/../../evil.json", "'..' component"),
        ("../evil.json", "'..' component"),
        ("/abs/evil.json", "absolute path"),
    ],
)
def test_unsafe_member_paths(tmp_path: Path, name: str, match: str) -> None:
    arch = _write_archive(tmp_path / "a.tar.xz", [*_good_members()[:1], (name, b"{}")])
    with pytest.raises(DataError, match=match):
        read_archive(arch)


@pytest.mark.parametrize(
    ("kind", "match"),
    [
        (tarfile.SYMTYPE, "is a link"),
        (tarfile.LNKTYPE, "is a link"),
        (tarfile.FIFOTYPE, "not a regular file"),
        (tarfile.CHRTYPE, "not a regular file"),
    ],
)
def test_non_regular_members(tmp_path: Path, kind: bytes, match: str) -> None:
    ti = tarfile.TarInfo(f"{PREFIX}/Cat1/special.json")
    ti.type = kind
    ti.linkname = "/etc/passwd" if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE) else ""
    arch = _write_archive(tmp_path / "a.tar.xz", _good_members()[:1], extra=[ti])
    with pytest.raises(DataError, match=match):
        read_archive(arch)


def test_bad_member_content(tmp_path: Path) -> None:
    arch = _write_archive(tmp_path / "a.tar.xz", [(f"{PREFIX}/Cat1/bad.json", b'{"tool_name": ')])
    with pytest.raises(DataError, match=r"Cat1/bad\.json:1: malformed JSON"):
        read_archive(arch)
    arch = _write_archive(tmp_path / "b.tar.xz", [(f"{PREFIX}/Cat1/bad.json", b'{"tool_name": "x", "api_list": {}}')])
    with pytest.raises(DataError, match="'api_list' must be a list"):
        read_archive(arch)
    dup = _good_members()[0]
    arch = _write_archive(tmp_path / "c.tar.xz", [dup, dup])
    with pytest.raises(DataError, match="appears twice"):
        read_archive(arch)
    arch = _write_archive(tmp_path / "d.tar.xz", [(f"{PREFIX}/Cat1/notes.txt", b"x")])
    with pytest.raises(DataError, match="no per-tool JSON members"):
        read_archive(arch)


# ------------------------------------------------------------------ registry and queries


def test_registry_errors(tmp_path: Path) -> None:
    reg, qfiles, arch = _write_fixture(tmp_path / "data")
    cache = tmp_path / "cache"
    reg.write_text('{\n "A": {"tool_description": "x"},\n "A": {"tool_description": "y"}\n}', encoding="utf-8")
    with pytest.raises(DataError, match="'A' appears twice"):
        load_toolbench_files(reg, qfiles, arch, cache)
    reg.write_text('{\n "A": {"tool_description": "x"},\n "B": {"tool_description": 5}\n}', encoding="utf-8")
    with pytest.raises(DataError, match=r"tool_details\.json:3: tool_description of 'B'"):
        load_toolbench_files(reg, qfiles, arch, cache)
    reg.write_text('{\n "A": [1, 2]\n}', encoding="utf-8")
    with pytest.raises(DataError, match="must be an object"):
        load_toolbench_files(reg, qfiles, arch, cache)
    reg.write_text('{"A": ', encoding="utf-8")
    with pytest.raises(DataError, match="malformed JSON"):
        load_toolbench_files(reg, qfiles, arch, cache)


def test_query_errors_name_file_and_line(tmp_path: Path) -> None:
    reg, qfiles, arch = _write_fixture(tmp_path / "data")
    cache = tmp_path / "cache"
    bad = [
        {"query": "ok", "query_id": 10, "relevant APIs": [["Beta", "b"]]},
        {"query": "bad", "query_id": 11, "relevant APIs": [["Beta"]]},
    ]
    qfiles[2].write_text(json.dumps(bad, indent=1), encoding="utf-8")
    line = next(i for i, s in enumerate(qfiles[2].read_text().splitlines(), 1) if '"query_id": 11' in s)
    with pytest.raises(DataError, match=rf"G1_tool\.json:{line} \(entry 1, query_id 11\): 'relevant APIs'"):
        load_toolbench_files(reg, qfiles, arch, cache)
    qfiles[2].write_text(json.dumps([{"query": "  ", "query_id": 1, "relevant APIs": []}]), encoding="utf-8")
    with pytest.raises(DataError, match="empty query text"):
        load_toolbench_files(reg, qfiles, arch, cache)
    dup = [
        {"query": "a", "query_id": 1, "relevant APIs": []},
        {"query": "b", "query_id": 1, "relevant APIs": []},
    ]
    qfiles[2].write_text(json.dumps(dup), encoding="utf-8")
    with pytest.raises(DataError, match="'G1_tool-1' already used"):
        load_toolbench_files(reg, qfiles, arch, cache)
    qfiles[2].write_text('{"not": "a list"}', encoding="utf-8")
    with pytest.raises(DataError, match="expected a JSON list"):
        load_toolbench_files(reg, qfiles, arch, cache)


# ------------------------------------------------------------------ full load (real data once)


@dataclasses.dataclass
class FullLoad:
    real: bool
    cold: ToolCorpus
    warm: ToolCorpus
    cold_s: float
    warm_s: float


@pytest.fixture(scope="module")
def full_load(tmp_path_factory: pytest.TempPathFactory) -> Iterator[FullLoad]:
    """Load the pinned ToolBench data once per session (cold cache, then warm); the
    synthetic fixture through the same path when the shared data folder is absent."""
    cache = tmp_path_factory.mktemp("toolbench-cache")
    with pytest.MonkeyPatch.context() as mp:
        if REAL.is_dir():
            root, real = REAL, True
        else:
            root, real = tmp_path_factory.mktemp("toolbench-data"), False
            _write_fixture(root)
            _pin_fixture(mp, root)
        t0 = time.perf_counter()
        cold = load_toolbench(root, cache)
        t1 = time.perf_counter()
        warm = load_toolbench(root, cache)
        t2 = time.perf_counter()
        kind = "real" if real else "fixture"
        print(f"\ntoolbench load ({kind}): cold {t1 - t0:.2f}s, warm {t2 - t1:.2f}s")
        yield FullLoad(real, cold, warm, t1 - t0, t2 - t1)


def test_full_load_counts(full_load: FullLoad) -> None:
    c = full_load.cold
    if full_load.real:
        assert len(c.tool_names) == 3406
        assert len(c.queries) == 474
        assert len({q.gold[0] for q in c.queries}) == 339
        assert c.skipped == {
            SKIP_EMPTY_DESC: 34,
            SKIP_NOT_IN_ARCHIVE: 684,
            SKIP_AMBIGUOUS: 29,
            SKIP_NO_TOOL: 0,
            SKIP_SEVERAL_TOOLS: 0,
            SKIP_GOLD_MISSING: 0,
            SKIP_GOLD_NO_APIS: 72,
        }
        with_apis = sum(" APIs: " in t for t in c.tool_texts)
        assert with_apis == 3406 - 684 - 29
        assert sum(q.qid.startswith(p) for q in c.queries for p in ("G1_instruction-",)) == 163
        assert sum(q.qid.startswith("G1_category-") for q in c.queries) == 153
        assert sum(q.qid.startswith("G1_tool-") for q in c.queries) == 158
        pinned = {rel: e.sha256 for rel, e in data.DATASETS["toolbench"].items()}
        assert c.inputs_sha256 == {k: pinned[k] for k in (REGISTRY, ARCHIVE, *QUERIES)}
    else:
        assert len(c.tool_names) == len(REGISTRY_FIXTURE) and len(c.queries) == 4
        assert c.skipped == FIXTURE_SKIPPED


def test_full_load_cache_is_transparent(full_load: FullLoad) -> None:
    assert full_load.warm == full_load.cold
    assert full_load.warm.fingerprint() == full_load.cold.fingerprint()


def test_module_constants() -> None:
    assert toolbench.QUERIES == tuple(
        f"toolbench/stabletoolbench/solvable_queries/test_instruction/G1_{k}.json"
        for k in ("instruction", "category", "tool")
    )
    for rel in (REGISTRY, ARCHIVE, *QUERIES):
        assert rel in data.DATASETS["toolbench"]
