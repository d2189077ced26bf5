"""Fuzzing the loaders, the ranked-list type, the features and ``p_random`` with Hypothesis.

Every loader gets arbitrary (and near-valid) content and must either return a well-formed
result or raise :class:`~benchmarks.corpus.DataError`; any other exception is what a user
would see as a traceback. ``p_random`` is checked against a 60-digit mpmath reference for N
up to 10^12 and for its properties. Runs are derandomized (same examples on every CI run).

Failing examples found while writing this module are kept twice: as ``@example`` on the
property that found them, and as files under ``tests/fuzz_regressions/`` replayed by
:func:`test_fuzz_regression_file` (file name ``<target>__<what>.<ext>``).
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import mpmath
import numpy as np
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agents.tabular import TabularQ
from benchmarks import beir, bfcl, metatool, toolbench, trec
from benchmarks.corpus import DataError
from benchmarks.score_cache import _load_matrix
from envs import RankedQuery, feature_matrix
from envs.features import FEATURE_NAMES
from rewards import bor_aggregate, p_random

REGRESSIONS = Path(__file__).resolve().parent / "fuzz_regressions"

FUZZ = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
FUZZ_MANY = settings(FUZZ, max_examples=400)


@pytest.fixture(scope="module")
def fuzz_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def _write(folder: Path, name: str, content: bytes | str) -> Path:
    p = folder / name
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
    return p


T = TypeVar("T")


def _or_data_error(fn: Callable[[], T]) -> T | None:
    """Run a loader: its result, or None when it refused the input with a DataError."""
    try:
        return fn()
    except DataError as e:
        assert str(e), "an empty error message"
        return None


# --------------------------------------------------------------------------- strategies

json_scalars = st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=8)
any_json = st.recursive(
    json_scalars, lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=6), c, max_size=4), max_leaves=12
)


def maybe(valid: st.SearchStrategy) -> st.SearchStrategy:
    """Mostly valid values, sometimes any JSON value."""
    return st.one_of(valid, valid, valid, any_json)


def _dump(x: object) -> str:
    return json.dumps(x, allow_nan=True)


def lines_of(line: st.SearchStrategy[str]) -> st.SearchStrategy[bytes]:
    """Text made of generated lines, occasionally with raw (possibly invalid UTF-8) bytes."""
    text = st.lists(line, max_size=12).map(lambda ls: "\n".join(ls).encode("utf-8", "surrogatepass"))
    return st.one_of(text, text, text, st.binary(max_size=200))


# --------------------------------------------------------------------------- p_random

mpmath.mp.dps = 60


def mp_p_random(k: int, n: int, r: int) -> mpmath.mpf:
    """1 - C(n-r, k)/C(n, k) from 60-digit log-gamma differences."""
    if k == 0 or r == 0:
        return mpmath.mpf(0)
    if k > n - r:
        return mpmath.mpf(1)
    lg = mpmath.loggamma
    return -mpmath.expm1(lg(n - r + 1) - lg(n - r - k + 1) - lg(n + 1) + lg(n - k + 1))


@st.composite
def counts(draw: st.DrawFn, n_max: int = 10**12) -> tuple[int, int, int]:
    """(k, n, r): n log-uniform up to n_max; k and r small, near n, or anywhere in [0, n]."""
    e = draw(st.integers(0, int(math.log10(n_max))))
    n = draw(st.integers(1, max(1, min(n_max, 10**e))))

    def part() -> int:
        how = draw(st.sampled_from(["small", "near", "any", "half"]))
        if how == "small":
            return min(n, draw(st.integers(0, 200)))
        if how == "near":
            return max(0, n - draw(st.integers(0, 200)))
        if how == "half":
            return n // 2 + draw(st.integers(-3, 3)) if n > 6 else n // 2
        return draw(st.integers(0, n))

    return part(), n, part()


@FUZZ_MANY
@given(counts())
@example((65, 130, 65))  # K = N - R, saddle-point branch (was NaN, fixed upstream)
@example((1000, 8_841_823, 1))
@example((10**6, 10**12, 10**6))
def test_fuzz_p_random_matches_mpmath(c: tuple[int, int, int]) -> None:
    k, n, r = c
    got = p_random(k, n, r)
    want = mp_p_random(k, n, r)
    assert 0.0 <= got <= 1.0
    if want == 0:
        assert got == 0.0
    else:
        assert abs(mpmath.mpf(got) - want) / want <= 1e-9, (k, n, r, got, mpmath.nstr(want, 20))


@FUZZ
@given(counts())
def test_fuzz_p_random_properties(c: tuple[int, int, int]) -> None:
    k, n, r = c
    p = p_random(k, n, r)
    assert p == pytest.approx(p_random(r, n, k), rel=1e-12, abs=0)  # symmetric in k and r
    if k < n:
        assert p_random(k + 1, n, r) >= p  # monotone in k
    if r < n:
        assert p_random(k, n, r + 1) >= p  # monotone in r
    assert p_random(k, n, 1) == pytest.approx(k / n, rel=1e-14, abs=0)
    if r > 0 and n - r + 1 <= n:
        assert p_random(n - r + 1, n, r) == 1.0


bad_count = st.one_of(
    st.integers(-(10**6), -1),
    st.floats(allow_nan=True, allow_infinity=True).filter(
        lambda x: not (math.isfinite(x) and x == math.floor(x) and x >= 0)
    ),
    st.just(2**60),
    st.booleans(),
    st.text(max_size=3),
    st.none(),
)


@FUZZ
@given(st.data())
def test_fuzz_p_random_rejects_bad_counts_with_value_error(data: st.DataObject) -> None:
    k, n, r = data.draw(counts(10**6))
    which = data.draw(st.sampled_from(["k", "n", "r"]))
    bad = data.draw(bad_count)
    kw = {"k": k, "n": n, "r": r, which: bad}
    try:
        p_random(**kw)
    except ValueError:
        return
    # the only acceptable non-error: a value that is a valid count after all (e.g. True is not)
    pytest.fail(f"p_random accepted {which}={bad!r}")


@FUZZ
@given(st.lists(st.tuples(st.booleans(), counts(10**9)), min_size=1, max_size=30))
def test_fuzz_bor_aggregate_is_ratio_of_means(rows: list[tuple[bool, tuple[int, int, int]]]) -> None:
    found = np.array([f for f, _ in rows], dtype=float)
    k, n, r = (np.array([c[i] for _, c in rows]) for i in range(3))
    pr = np.asarray(p_random(k, n, r), dtype=float)
    if pr.mean() == 0:
        with pytest.raises(ValueError):
            bor_aggregate(found, k, n, r)
        return
    got = bor_aggregate(found, k, n, r)
    credited = np.where(k + r > n, 1.0, found)  # P_rand = 1 (k >= n - r + 1) counts as chance's success
    if credited.mean() == 0:
        assert got == -math.inf
    else:
        assert got == pytest.approx(math.log2(credited.mean() / pr.mean()), rel=1e-12, abs=1e-12)


# --------------------------------------------------------------------------- ranked lists and features

finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@FUZZ_MANY
@given(st.lists(finite, min_size=1, max_size=40), st.integers(0, 10**9), st.integers(1, 40))
@example([1e308, -1e308], 0, 2)  # regression: the z-score spread overflows to inf -> NaN features
@example([1.7e308, 1e308, 0.0], 0, 3)
@example([8.988465674311579e307, 8.98846567431158e307], 0, 1)  # found by Hypothesis: the mean overflows
def test_fuzz_features_finite_and_bounded(scores: list[float], n_extra: int, depth: int) -> None:
    """Any finite score list gives finite features inside the documented ranges."""
    s = np.sort(np.array(scores))[::-1]
    q = RankedQuery(s, np.array([1]), "q", n_candidates=len(s) + n_extra)
    depth = min(depth, len(s))
    with np.errstate(all="ignore"):
        f = feature_matrix(q, depth)
    assert f.shape == (depth, len(FEATURE_NAMES))
    assert np.all(np.isfinite(f)), dict(zip(FEATURE_NAMES, f[0], strict=True))
    lo = np.array([-1, -1, -1] + [0] * (len(FEATURE_NAMES) - 3))
    assert np.all(f >= lo) and np.all(f <= 1), f


@FUZZ
@given(
    st.lists(st.floats(allow_nan=True, allow_infinity=True), max_size=12),
    st.lists(st.one_of(st.integers(-3, 15), st.floats(-2, 15)), max_size=4),
    st.integers(-5, 30),
    st.integers(-5, 30),
)
def test_fuzz_ranked_query_valid_or_value_error_naming_qid(
    scores: list[float], ranks: list[float], n: int, r: int
) -> None:
    try:
        q = RankedQuery(np.array(scores, dtype=float), np.array(ranks), "fuzz-q", n_candidates=n, n_relevant=r)
    except ValueError as e:
        assert "fuzz-q" in str(e)
        return
    assert q.length >= 1 and np.all(np.isfinite(q.scores)) and np.all(np.diff(q.scores) <= 0)
    assert q.n_candidates >= q.length and q.relevant_ranks.size <= q.n_relevant <= q.n_candidates
    assert np.all((q.relevant_ranks >= 1) & (q.relevant_ranks <= q.length))


# --------------------------------------------------------------------------- TREC runs and qrels

ids = st.sampled_from(["q1", "q2", "d1", "d2", "d3", "x", "Q0"])
run_field = st.one_of(
    ids, st.sampled_from(["0", "1", "2.0", "1.5", "-1", "nan", "inf", "-inf", "1e400", "3", "", "tag", "0x10", "1_000"])
)
run_line = st.lists(run_field, max_size=8).map(" ".join) | st.tuples(ids, ids, ids, run_field, run_field, ids).map(
    " ".join
)
qrels_line = (
    st.lists(run_field, max_size=5).map(" ".join)
    | st.tuples(ids, run_field, ids, run_field).map(" ".join)
    | st.tuples(ids, ids, run_field).map("\t".join)
    | st.just("query-id\tcorpus-id\tscore")
)


@FUZZ_MANY
@given(content=lines_of(run_line))
def test_fuzz_read_run(content: bytes, fuzz_dir: Path) -> None:
    path = _write(fuzz_dir, "run.txt", content)
    run = _or_data_error(lambda: trec.read_run(path))
    if run is not None:
        assert run and all(docs for docs in run.values())
        for docs in run.values():
            assert all(math.isfinite(s) for _, s in docs)
            assert len({d for d, _ in docs}) == len(docs)


@FUZZ_MANY
@given(content=lines_of(qrels_line))
def test_fuzz_read_qrels(content: bytes, fuzz_dir: Path) -> None:
    path = _write(fuzz_dir, "qrels.txt", content)
    qrels = _or_data_error(lambda: trec.read_qrels(path))
    if qrels is not None:
        assert qrels and all(isinstance(v, int) for j in qrels.values() for v in j.values())


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(["q1", "q2", "q3"]),
        st.lists(st.tuples(st.sampled_from([f"d{i}" for i in range(8)]), finite), max_size=8),
        max_size=3,
    ),
    st.dictionaries(
        st.sampled_from(["q1", "q2", "q4"]),
        st.dictionaries(st.sampled_from([f"d{i}" for i in range(10)]), st.integers(-1, 2), max_size=6),
        max_size=3,
    ),
    st.one_of(st.none(), st.integers(1, 20)),
)
def test_fuzz_ranked_queries_from_run(run: dict, qrels: dict, n: int | None) -> None:
    try:
        queries, _ = trec.ranked_queries_from_run(run, qrels, n_candidates=n)
    except DataError:
        return
    for q in queries:
        docs = trec.rank_docs(run[q.qid])
        rel = [i for i, (d, _) in enumerate(docs, 1) if qrels[q.qid].get(d, 0) > 0]
        assert q.relevant_ranks.tolist() == rel
        assert q.n_relevant == sum(1 for v in qrels[q.qid].values() if v > 0)
        assert q.n_candidates == (n if n is not None else len(docs))


# --------------------------------------------------------------------------- BFCL

fn_name = st.sampled_from(["alpha", "beta", "gamma.delta", ""])
valid_fn = st.fixed_dictionaries(
    {
        "name": maybe(fn_name),
        "description": maybe(st.text(max_size=10)),
        "parameters": maybe(st.just({"type": "dict", "properties": {"x": {}}})),
    }
)
valid_question = st.fixed_dictionaries(
    {
        "id": maybe(st.sampled_from(["q0", "q1", "q2"])),
        "question": maybe(st.just([[{"role": "user", "content": "do alpha"}]])),
        "function": maybe(st.lists(maybe(valid_fn), min_size=1, max_size=2)),
    }
)
valid_answer = st.fixed_dictionaries(
    {
        "id": maybe(st.sampled_from(["q0", "q1", "q2"])),
        "ground_truth": maybe(
            st.lists(maybe(st.dictionaries(fn_name, st.just({}), min_size=1, max_size=1)), max_size=2)
        ),
    }
)


@FUZZ_MANY
@given(questions=lines_of(maybe(valid_question).map(_dump)), answers=lines_of(maybe(valid_answer).map(_dump)))
@example(
    questions=b'{"id": ["q0"], "question": [[{"role": "user", "content": "x"}]], "function": [{"name": "a"}]}',
    answers=b'{"id": "q0", "ground_truth": [{"a": {}}]}',
)  # regression: unhashable id -> TypeError
@example(
    questions=b'{"id": "q0", "question": [[{"role": "user", "content": "x"}]], "function": [{"name": "a"}]}',
    answers=b'{"id": [], "ground_truth": []}',
)  # found by Hypothesis: unhashable answer id -> TypeError
@example(
    questions=(REGRESSIONS / "bfcl_questions__parameters_not_object.json").read_bytes(),
    answers=(REGRESSIONS / "bfcl_questions__parameters_not_object.answers").read_bytes(),
)  # found by Hypothesis once ids are checked: 'parameters' not an object -> AttributeError
def test_fuzz_load_bfcl(questions: bytes, answers: bytes, fuzz_dir: Path) -> None:
    q = _write(fuzz_dir, "bfcl/q.json", questions)
    a = _write(fuzz_dir, "bfcl/a.json", answers)
    corpus = _or_data_error(lambda: bfcl.load_bfcl(q, a))
    if corpus is not None:
        assert corpus.queries and set(g for x in corpus.queries for g in x.gold) <= set(corpus.tool_names)


# --------------------------------------------------------------------------- MetaTool


@FUZZ_MANY
@given(
    content=st.one_of(
        any_json.map(_dump),
        maybe(st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=4)).map(_dump),
        st.binary(max_size=60),
    )
)
@example(content="[1, 2]")  # regression: TypeError
@example(content='[["alpha", "does a"]]')  # regression: a JSON array accepted as the registry
@example(content='[{"alpha": "does a"}]')  # regression: ValueError without the file name
@example(content="[null]")  # found by Hypothesis: TypeError
def test_fuzz_metatool_registry(content: str | bytes, fuzz_dir: Path) -> None:
    path = _write(fuzz_dir, "plugin_des.json", content)
    tools = _or_data_error(lambda: metatool.read_plugin_des(path))
    if tools is not None:
        parsed = json.loads(path.read_text(encoding="utf-8"))
        assert isinstance(parsed, dict), f"accepted a {type(parsed).__name__} as the registry"
        assert [n for n, _ in tools] == list(parsed) and all(isinstance(d, str) for _, d in tools)


csv_cell = st.sampled_from(["alpha", "beta", "q", "", " ", "a,b", '"', '"x"', "x\ny", "Query", "Tool", "\ufeff"])
csv_line = st.lists(csv_cell, max_size=4).map(",".join)


@FUZZ_MANY
@given(content=lines_of(csv_line))
def test_fuzz_metatool_queries(content: bytes, fuzz_dir: Path) -> None:
    reg = _write(fuzz_dir, "mt/plugin_des.json", json.dumps({"alpha": "does a", "beta": "does b"}))
    path = _write(fuzz_dir, "mt/all_clean_data.csv", content)
    corpus = _or_data_error(lambda: metatool.load_metatool_files(reg, path))
    if corpus is not None:
        rows = list(csv.reader(io.StringIO(path.read_text(encoding="utf-8-sig"))))
        assert rows[0] == ["Query", "Tool"] and all(len(r) == 2 for r in rows[1:])


# --------------------------------------------------------------------------- ToolBench

valid_registry = st.dictionaries(
    st.text(max_size=5),
    maybe(st.fixed_dictionaries({"tool_description": maybe(st.none() | st.text(max_size=5))})),
    max_size=4,
)
valid_tb_query = st.fixed_dictionaries(
    {
        "query_id": maybe(st.integers(0, 5) | st.sampled_from(["1", "a"])),
        "query": maybe(st.text(max_size=6)),
        "relevant APIs": maybe(st.lists(maybe(st.lists(st.text(max_size=3), min_size=2, max_size=2)), max_size=2)),
    }
)
valid_member = st.fixed_dictionaries(
    {
        "tool_name": maybe(st.text(max_size=5)),
        "tool_description": maybe(st.none() | st.text(max_size=5)),
        "api_list": maybe(
            st.lists(
                maybe(
                    st.fixed_dictionaries(
                        {"name": maybe(st.text(max_size=4)), "description": maybe(st.none() | st.text(max_size=4))}
                    )
                ),
                max_size=3,
            )
        ),
    }
)


@FUZZ
@given(content=st.one_of(maybe(valid_registry).map(_dump), st.binary(max_size=40)))
def test_fuzz_toolbench_registry(content: str | bytes, fuzz_dir: Path) -> None:
    path = _write(fuzz_dir, "tool_details.json", content)
    tools = _or_data_error(lambda: toolbench.read_registry(path))
    if tools is not None:
        assert all(isinstance(n, str) and n.strip() and isinstance(d, str) for n, d in tools)


@FUZZ
@given(
    content=st.one_of(
        st.lists(maybe(valid_tb_query), max_size=4).map(_dump), any_json.map(_dump), st.binary(max_size=40)
    )
)
def test_fuzz_toolbench_queries(content: str | bytes, fuzz_dir: Path) -> None:
    path = _write(fuzz_dir, "G1_tool.json", content)
    rows = _or_data_error(lambda: toolbench.read_queries(path))
    if rows is not None:
        assert all(text.strip() and all(isinstance(t, str) for t in tools) for _, _, text, tools in rows)


@FUZZ
@given(st.one_of(maybe(valid_member).map(_dump).map(str.encode), st.binary(max_size=60)))
def test_fuzz_toolbench_archive_member(raw: bytes) -> None:
    tool = _or_data_error(lambda: toolbench._parse_member(Path("a.tar.xz"), "m.json", raw))
    if tool is not None:
        assert tool.tool_name.strip() and all(isinstance(a, str) and isinstance(b, str) for a, b in tool.apis)


@FUZZ
@given(
    maybe(
        st.fixed_dictionaries(
            {
                "format": st.just(toolbench.CACHE_FORMAT),
                "archive_sha256": st.just("ab"),
                "tools": maybe(
                    st.lists(
                        maybe(
                            st.tuples(
                                st.text(max_size=3),
                                st.text(max_size=3),
                                st.text(max_size=3),
                                maybe(st.lists(st.lists(st.text(max_size=2), min_size=2, max_size=2), max_size=2)),
                            )
                        ),
                        max_size=3,
                    )
                ),
            }
        )
    ).map(_dump)
)
def test_fuzz_toolbench_index_cache_never_raises(content: str) -> None:
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        p = Path(d) / "index.json"
        p.write_text(content, encoding="utf-8")
        out = toolbench._load_cache(p, "ab")
    assert out is None or all(isinstance(t, toolbench.ArchiveTool) for t in out)


# --------------------------------------------------------------------------- BEIR

beir_doc = st.fixed_dictionaries(
    {
        "_id": maybe(st.sampled_from(["d1", "d2", 3, ""])),
        "title": maybe(st.text(max_size=4)),
        "text": maybe(st.text(max_size=6)),
    }
)
beir_query = st.fixed_dictionaries({"_id": maybe(st.sampled_from(["q1", "q2", 3])), "text": maybe(st.text(max_size=6))})
beir_qrel = st.tuples(st.sampled_from(["q1", "q2", "3", "x"]), st.sampled_from(["d1", "d2", "3", "y"]), run_field).map(
    "\t".join
)


@FUZZ_MANY
@given(
    docs=lines_of(maybe(beir_doc).map(_dump)),
    queries=lines_of(maybe(beir_query).map(_dump)),
    qrels=lines_of(beir_qrel).map(lambda b: b"query-id\tcorpus-id\tscore\n" + b),
)
def test_fuzz_load_beir(docs: bytes, queries: bytes, qrels: bytes, fuzz_dir: Path) -> None:
    folder = fuzz_dir / "beir"
    _write(folder, "corpus.jsonl", docs)
    _write(folder, "queries.jsonl", queries)
    _write(folder, "qrels/test.tsv", qrels)
    corpus = _or_data_error(lambda: beir.load_beir(folder))
    if corpus is not None:
        assert corpus.queries and all(q.text for q in corpus.queries)


# --------------------------------------------------------------------------- caches and saved agents

NPY_DESCR = ["<f8", "<i4", "|u1", "|O", "<U3", "|V8", "<c16", ">f8", "|b1", "<f2"]


@st.composite
def npy_files(draw: st.DrawFn) -> bytes:
    """A .npy header (version 1.0) with random dtype and shape, then random payload bytes."""
    descr = draw(st.sampled_from(NPY_DESCR))
    shape = tuple(draw(st.lists(st.integers(-2, 4) | st.just(2**40), max_size=3)))
    header = repr({"descr": descr, "fortran_order": draw(st.booleans()), "shape": shape}).encode()
    header += b" " * (-(len(header) + 11) % 64) + b"\n"
    payload = draw(st.binary(max_size=200))
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header + payload


@FUZZ_MANY
@given(raw=st.one_of(npy_files(), st.binary(max_size=100)))
@example(raw=(REGRESSIONS / "score_cache__huge_shape_header.npy").read_bytes())  # found: MemoryError (8 TiB)
@example(raw=(REGRESSIONS / "score_cache__negative_shape_header.npy").read_bytes())  # found: OverflowError with mmap
def test_fuzz_score_cache_entry_never_raises(raw: bytes, fuzz_dir: Path) -> None:
    p = _write(fuzz_dir, "entry.npy", raw)
    m = _load_matrix(p, (2, 3))
    assert m is None or (m.shape == (2, 3) and m.dtype.kind in "fiu" and np.all(np.isfinite(m)))


@FUZZ
@given(
    content=st.one_of(
        any_json,
        st.fixed_dictionaries(
            {
                "reward": maybe(st.sampled_from(["bor", "f1", "constant"])),
                "settings": maybe(
                    st.fixed_dictionaries(
                        {}, optional={"episodes": maybe(st.integers(0, 9)), "lr_power": maybe(st.floats(0, 1))}
                    )
                ),
                "q": maybe(st.just([[0.0, 0.0]] * 1456)),
                "q_coarse": maybe(st.just([[0.0, 0.0]] * 13)),
                "tried": maybe(st.just([0] * 1456)),
            }
        ),
    ).map(_dump)
)
@example(content="[]")  # regression: TypeError
@example(content="null")  # found by Hypothesis: TypeError
@example(content="{}")  # found by Hypothesis: KeyError
@example(content=(REGRESSIONS / "tabular_agent__reward_null.json").read_text())  # found: reward None accepted
@example(content='{"settings": {}, "q": [], "q_coarse": [], "tried": []}')  # regression: KeyError 'reward'
@example(
    content='{"reward": "bor", "settings": {"zzz": 1}, "q": [], "q_coarse": [], "tried": []}'
)  # regression: TypeError
def test_fuzz_tabular_agent_file(content: str, fuzz_dir: Path) -> None:
    """A saved tabular agent loads, or the error is a ValueError naming the file."""
    path = _write(fuzz_dir, "agent.json", content)
    try:
        agent = TabularQ.load(path)
    except ValueError as e:
        assert str(path) in str(e), f"the error does not name the file: {e}"
        return
    assert agent.reward in ("bor", "f1", "constant")
    assert np.all(np.isfinite(agent.q)) and np.all(np.isfinite(agent.q_coarse))


# --------------------------------------------------------------------------- regression files


def _replay(target: str, path: Path) -> Any:
    if target == "metatool_registry":
        tools = metatool.read_plugin_des(path)
        assert isinstance(json.loads(path.read_text(encoding="utf-8")), dict), "a non-object accepted as registry"
        return tools
    if target == "metatool_queries":
        reg = path.parent / "_reg.json"
        reg.write_text(json.dumps({"alpha": "does a", "beta": "does b"}))
        try:
            return metatool.load_metatool_files(reg, path)
        finally:
            reg.unlink()
    if target == "trec_run":
        return trec.read_run(path)
    if target == "trec_qrels":
        return trec.read_qrels(path)
    if target == "toolbench_registry":
        return toolbench.read_registry(path)
    if target == "toolbench_queries":
        return toolbench.read_queries(path)
    if target == "bfcl_questions":
        answers = path.with_suffix(".answers")
        return bfcl.load_bfcl(path, answers)
    if target == "score_cache":
        m = _load_matrix(path, (2, 3))
        assert m is None or m.shape == (2, 3)
        return m
    if target == "tabular_agent":
        try:
            agent = TabularQ.load(path)
        except ValueError as e:
            assert str(path) in str(e)
            return None
        assert agent.reward in ("bor", "f1", "constant"), f"loaded an agent with reward {agent.reward!r}"
        return agent
    if target == "features":
        scores = np.sort(np.array(json.loads(path.read_text()), dtype=float))[::-1]
        with np.errstate(all="ignore"):
            f = feature_matrix(RankedQuery(scores, np.array([1]), "q"))
        assert np.all(np.isfinite(f)), f
        return f
    raise AssertionError(f"unknown regression target {target!r} ({path.name})")


REGRESSION_FILES = (
    sorted(p for p in REGRESSIONS.glob("*__*") if not p.name.endswith(".answers")) if REGRESSIONS.is_dir() else []
)


@pytest.mark.parametrize("path", REGRESSION_FILES, ids=[p.name for p in REGRESSION_FILES])
def test_fuzz_regression_file(path: Path, tmp_path: Path) -> None:
    """Each kept failing example: the loader returns or raises DataError, nothing else."""
    target = path.name.split("__", 1)[0]
    copy = tmp_path / path.name
    copy.write_bytes(path.read_bytes())
    if path.with_suffix(".answers").exists():
        copy.with_suffix(".answers").write_bytes(path.with_suffix(".answers").read_bytes())
    _or_data_error(lambda: _replay(target, copy))


def test_regression_files_exist() -> None:
    assert len(REGRESSION_FILES) >= 5, "tests/fuzz_regressions/ is missing"
