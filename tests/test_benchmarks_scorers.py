"""benchmarks.scorers and benchmarks.score_cache: tokeniser, BM25, MiniLM, and the on-disk score cache."""

from __future__ import annotations

import math
import multiprocessing as mp
import os
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from benchmarks import scorers
from benchmarks.score_cache import atomic_save_npy, cache_key, cached_embeddings, cached_scores, scores_dir
from benchmarks.scorers import (
    STOPWORDS,
    TOKENISER_VERSION,
    BM25Scorer,
    EmbeddingScorer,
    make_scorer,
    tokenise,
)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# --------------------------------------------------------------------------- tokenise


@pytest.mark.parametrize(
    ("text", "tokens"),
    [
        ("calcUserID", ["calc", "user", "id"]),
        ("getUserID", ["user", "id"]),  # split, then "get" is a stop-word
        ("HTTPServerError", ["http", "server", "error"]),
        ("parseJSONFile", ["parse", "json", "file"]),
        ("calc_area_v2", ["calc", "area", "v2"]),
        ("math.hypot", ["math", "hypot"]),
        ("What is the area of a circle?", ["area", "circle"]),
        ("The THE the", []),
        ("radius 10.5 units", ["radius", "10", "5", "units"]),
        ("area2D", ["area2", "d"]),
        ("x2Y", ["x2", "y"]),
        ("", []),
        ("  ,;!  ", []),
    ],
)
def test_tokenise_examples(text: str, tokens: list[str]) -> None:
    assert tokenise(text) == tokens


def test_stopwords_are_lowercase_alnum() -> None:
    assert all(re.fullmatch(r"[a-z0-9]+", w) for w in STOPWORDS)
    assert {"the", "a", "of", "please"} <= STOPWORDS


@given(st.text(max_size=60))
def test_tokenise_properties(text: str) -> None:
    toks = tokenise(text)
    assert all(re.fullmatch(r"[a-z0-9]+", t) for t in toks)
    assert not set(toks) & STOPWORDS
    assert tokenise(" ".join(toks)) == toks  # idempotent on its own output


# --------------------------------------------------------------------------- BM25

TOOLS = [
    "calculate triangle area. Calculate the area of a triangle given its base and height. "
    "Parameters: base, height, unit",
    "get weather forecast. Retrieve the weather forecast for a city. Parameters: city, days",
    "send email. Send an email message to a recipient. Parameters: to, subject, body",
    "convert currency. Convert an amount between two currencies. Parameters: amount, from, to",
]


def _bm25_oracle(queries: Sequence[str], tools: Sequence[str], k1=1.5, b=0.75, eps=0.25) -> np.ndarray:
    """BM25Okapi by hand (rank-bm25's ATIRE idf with an epsilon floor for negative idf)."""
    docs = [tokenise(t) or ["<empty>"] for t in tools]
    n = len(docs)
    avgdl = sum(map(len, docs)) / n
    df = Counter(w for d in docs for w in set(d))
    idf = {w: math.log(n - f + 0.5) - math.log(f + 0.5) for w, f in df.items()}
    floor = eps * sum(idf.values()) / len(idf)
    idf = {w: (floor if v < 0 else v) for w, v in idf.items()}
    out = np.zeros((len(queries), n))
    for i, q in enumerate(queries):
        for w in tokenise(q):
            for j, d in enumerate(docs):
                f = d.count(w)
                out[i, j] += idf.get(w, 0.0) * f * (k1 + 1) / (f + k1 * (1 - b + b * len(d) / avgdl))
    return out


def test_bm25_shape_and_exact_match_first() -> None:
    queries = [
        "calculate triangle area",
        "weather forecast for a city",
        "send email",
        "convert currency",
        "nothing here matches zzz",
    ]
    s = BM25Scorer().score(queries, TOOLS)
    assert s.shape == (5, 4)
    assert s.dtype == np.float64
    assert np.all(np.isfinite(s))
    assert list(np.argmax(s[:4], axis=1)) == [0, 1, 2, 3]
    for i in range(4):
        assert s[i, i] > np.delete(s[i], i).max()
    assert np.all(s[4] == 0.0)


def test_bm25_matches_hand_oracle() -> None:
    queries = ["triangle area base", "email to recipient", "weather weather city", "the of"]
    np.testing.assert_allclose(BM25Scorer().score(queries, TOOLS), _bm25_oracle(queries, TOOLS), rtol=1e-12)


def _rank_bm25_scores(queries: Sequence[str], tools: Sequence[str]) -> np.ndarray:
    """rank-bm25's own ``BM25Okapi.get_scores`` over the package's tokens: the scores the study was trained on."""
    from rank_bm25 import BM25Okapi

    bm25 = BM25Okapi([scorers.tokenise(t) or ["<empty>"] for t in tools])
    return np.stack([np.asarray(bm25.get_scores(scorers.tokenise(q)), dtype=np.float64) for q in queries])


@given(
    st.lists(st.lists(st.sampled_from("alpha beta gamma delta the of x1 y2 zz".split()), max_size=12), min_size=1,
             max_size=30),
    st.lists(st.lists(st.sampled_from("alpha beta gamma delta the of x1 y2 qq".split()), max_size=8), min_size=1,
             max_size=5),
)  # fmt: skip
def test_bm25_index_equals_rank_bm25_bit_for_bit(tools: list[list[str]], queries: list[list[str]]) -> None:
    """The index (each token's terms precomputed) gives exactly rank-bm25's scores, repeated query tokens, tokens
    in every tool (rank-bm25's idf floor) and unknown tokens included: ``array_equal``, not a tolerance."""
    t, q = [" ".join(x) for x in tools], [" ".join(x) for x in queries]
    assert np.array_equal(BM25Scorer().score(q, t), _rank_bm25_scores(q, t))


def test_bm25_index_equals_rank_bm25_on_bfcl() -> None:
    """On BFCL's registry and its 400 queries (the scores of the study's bfcl-bm25 condition), bit for bit."""
    from benchmarks.bfcl import load_bfcl

    corpus = load_bfcl()
    texts = [q.text for q in corpus.queries]
    index = scorers.BM25Index(corpus.tool_texts)
    expected = _rank_bm25_scores(texts, corpus.tool_texts)
    assert np.array_equal(np.stack([index.scores(x) for x in texts]), expected)


def test_bm25_empty_tool_text_does_not_crash() -> None:
    s = BM25Scorer().score(["area"], ["", "the of a", "area"])
    assert s.shape == (1, 3)
    assert np.argmax(s[0]) == 2


def test_bm25_identity() -> None:
    ident = BM25Scorer().identity()
    assert ident["scorer"] == "bm25"
    assert ident["tokeniser"] == TOKENISER_VERSION
    assert ident["impl"].startswith("rank-bm25==")
    assert "unknown" not in ident["impl"]


def test_make_scorer() -> None:
    assert isinstance(make_scorer("bm25"), BM25Scorer)
    emb = make_scorer("minilm")
    assert isinstance(emb, EmbeddingScorer)
    assert emb.name == "minilm"
    assert emb._model is None  # lazy: constructing does not load the model


# --------------------------------------------------------------------------- MiniLM


@pytest.fixture(scope="module")
def minilm() -> EmbeddingScorer:
    sc = EmbeddingScorer("minilm")
    sc.embed(["warm up"])  # load once for the module
    return sc


def test_minilm_path_is_packaged_folder(minilm: EmbeddingScorer) -> None:
    assert Path(minilm.path).is_dir()
    ident = minilm.identity()
    assert ident["scorer"] == "embedding"
    assert ident["model"] == "minilm"
    assert re.fullmatch(r"[0-9a-f]{64}", ident["model_digest"])
    assert ident == EmbeddingScorer("minilm").identity()


def test_minilm_embeddings_are_normalised(minilm: EmbeddingScorer) -> None:
    e = minilm.embed(["Find the area of a triangle.", "", "weather in Paris"])
    assert e.shape == (3, 384)
    np.testing.assert_allclose(np.linalg.norm(e, axis=1), 1.0, atol=1e-5)


def test_minilm_cosine_and_paraphrases(minilm: EmbeddingScorer) -> None:
    queries = [
        "How big is a three-sided shape whose base is 4 cm and height 3 cm?",
        "Will it rain in Paris tomorrow?",
        "Write a message to bob@example.com telling him I am late.",
        "How many yen is 50 dollars?",
    ]
    s = minilm.score(queries, TOOLS)
    assert s.shape == (4, 4)
    assert s.dtype == np.float64
    assert np.all((s >= -1.0 - 1e-6) & (s <= 1.0 + 1e-6))
    assert list(np.argmax(s, axis=1)) == [0, 1, 2, 3]
    np.testing.assert_allclose(s, minilm.embed(queries) @ minilm.embed(TOOLS).T, atol=1e-6)
    # a text against itself has cosine 1
    np.testing.assert_allclose(np.diag(minilm.score(TOOLS, TOOLS)), 1.0, atol=1e-5)


@pytest.mark.parametrize("name", ["no-such-model-xyz", "__TMP__/missing-model-dir"])
def test_unknown_model_is_a_value_error_naming_it(name: str, tmp_path: Path) -> None:
    name = name.replace("__TMP__", str(tmp_path))
    sc = make_scorer(name)
    with pytest.raises(ValueError) as exc:
        sc.score(["q"], ["t"])
    assert name in str(exc.value)


# --------------------------------------------------------------------------- cache


class CountingScorer:
    """A deterministic fake scorer that counts its calls (and may wait on a barrier)."""

    def __init__(self, version: str = "v1", fill: float | None = None, barrier=None) -> None:  # noqa: ANN001
        self.name = "fake/scorer"
        self.version = version
        self.fill = fill
        self.barrier = barrier
        self.calls = 0

    def identity(self) -> dict[str, str]:
        return {"scorer": "fake", "version": self.version}

    def score(self, queries: Sequence[str], tools: Sequence[str]) -> np.ndarray:
        self.calls += 1
        if self.barrier is not None:
            self.barrier.wait(timeout=60)
        m = np.array([[len(q) * 10.0 + len(t) + 0.25 for t in tools] for q in queries])
        if self.fill is not None:
            m[0, 0] = self.fill
        return m


def _expected(queries: Sequence[str], tools: Sequence[str]) -> np.ndarray:
    return CountingScorer().score(queries, tools)


Q = ["first query", "second"]
T = ["tool a", "tool bb", "tool ccc"]


def _entries(folder: Path) -> list[Path]:
    """Score-cache entries of a cache dir (they live in its ``scores`` subfolder)."""
    return sorted(scores_dir(folder).glob("*.npy"))


def test_cache_hit_does_not_call_scorer(tmp_path: Path) -> None:
    sc = CountingScorer()
    m1, hit1 = cached_scores(sc, Q, T, tmp_path)
    m2, hit2 = cached_scores(sc, Q, T, tmp_path)
    assert (hit1, hit2) == (False, True)
    assert sc.calls == 1
    assert m2.dtype == np.float64
    np.testing.assert_array_equal(m1, m2)
    np.testing.assert_array_equal(m2, _expected(Q, T))
    (entry,) = _entries(tmp_path)
    assert "/" not in entry.name and entry.name.startswith("fake_scorer-")
    # a fresh scorer object with the same identity also hits
    other = CountingScorer()
    assert cached_scores(other, Q, T, tmp_path)[1] is True
    assert other.calls == 0


@pytest.mark.parametrize(
    ("queries", "tools", "version"),
    [
        (["first query", "second!"], T, "v1"),  # a query text changed
        (Q, ["tool a", "tool bb", "tool cccc"], "v1"),  # a tool text changed
        (Q, ["tool bb", "tool a", "tool ccc"], "v1"),  # tool order changed
        (Q[:1], T, "v1"),  # a query dropped
        (Q, T, "v2"),  # scorer identity changed
    ],
)
def test_cache_misses_on_any_change(tmp_path: Path, queries: list, tools: list, version: str) -> None:
    assert cached_scores(CountingScorer(), Q, T, tmp_path)[1] is False
    sc = CountingScorer(version=version)
    m, hit = cached_scores(sc, queries, tools, tmp_path)
    assert hit is False
    assert sc.calls == 1
    np.testing.assert_array_equal(m, _expected(queries, tools))
    assert len(_entries(tmp_path)) == 2


class CountingEmbedder(EmbeddingScorer):
    """An embedding scorer without a model: a text's vector is its length and its number of spaces,
    normalised; every embed() call is recorded."""

    def __init__(self) -> None:
        super().__init__("counting-embedder")
        self.embedded: list[list[str]] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.embedded.append(list(texts))
        v = np.array([[len(t) + 1.0, t.count(" ") + 1.0] for t in texts], dtype=np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_a_text_set_is_embedded_once_per_cache_dir(tmp_path: Path) -> None:
    """The tool embeddings the candidate-set similarity stores (conditions.tool_similarity) are the ones an
    embedding scorer's score matrix reads, and the reverse: one entry per text set, in ``<cache dir>/scores``
    beside the score matrices (a nested ``scores/scores`` folder once held a second copy, embedded again)."""
    first = CountingEmbedder()
    tools = cached_embeddings(first, T, tmp_path)
    m, hit = cached_scores(first, Q, T, tmp_path)
    assert not hit and first.embedded == [T, Q]  # the tools were not embedded a second time
    np.testing.assert_allclose(m, first.embed(Q) @ tools.T, rtol=1e-6)
    other_queries = CountingEmbedder()
    assert cached_scores(other_queries, ["a third query"], T, tmp_path)[1] is False
    assert other_queries.embedded == [["a third query"]]
    reverse = CountingEmbedder()
    cached_scores(reverse, Q, ["a new tool"], tmp_path / "b")
    cached_embeddings(reverse, ["a new tool"], tmp_path / "b")
    assert reverse.embedded == [Q, ["a new tool"]]
    assert all(p.is_file() for p in scores_dir(tmp_path).iterdir())  # no nested folder
    assert len([p for p in scores_dir(tmp_path).iterdir() if p.name.startswith("emb-")]) == 3


def test_cache_misses_when_tokeniser_version_changes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cached_scores(BM25Scorer(), ["area"], TOOLS, tmp_path)[1] is False
    assert cached_scores(BM25Scorer(), ["area"], TOOLS, tmp_path)[1] is True
    monkeypatch.setattr(scorers, "TOKENISER_VERSION", "v2-test")
    assert BM25Scorer().identity()["tokeniser"] == "v2-test"
    assert cached_scores(BM25Scorer(), ["area"], TOOLS, tmp_path)[1] is False


def test_cache_key_separates_groups_and_kinds() -> None:
    ident = {"scorer": "fake"}
    k = cache_key(ident, ["a", "b"], ["c"])
    assert re.fullmatch(r"[0-9a-f]{64}", k)
    assert k == cache_key(dict(ident), ["a", "b"], ["c"])
    assert k != cache_key(ident, ["a"], ["b", "c"])
    assert k != cache_key(ident, ["ab"], ["c"])
    assert k != cache_key(ident, ["a", "b"], ["c"], kind="other")
    assert k != cache_key({"scorer": "fake", "x": "1"}, ["a", "b"], ["c"])


def _truncated(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:-5])


def _header_only(path: Path) -> None:
    path.write_bytes(path.read_bytes()[:40])


def _empty(path: Path) -> None:
    path.write_bytes(b"")


def _garbage(path: Path) -> None:
    path.write_bytes(b"this is not a numpy file at all")


def _wrong_shape(path: Path) -> None:
    np.save(path, np.ones((3, 2)))


def _nan_inside(path: Path) -> None:
    m = np.load(path)
    m[1, 1] = np.nan
    np.save(path, m)


def _zip_magic(path: Path) -> None:
    path.write_bytes(b"PK\x03\x04" + b"\x00" * 40)


def _string_array(path: Path) -> None:
    np.save(path, np.full((len(Q), len(T)), "x"))


@pytest.mark.parametrize(
    "corrupt",
    [
        _truncated,
        _header_only,
        _empty,
        _garbage,
        _wrong_shape,
        _nan_inside,
        _zip_magic,
        _string_array,
    ],
)
def test_corrupt_entry_is_recomputed(tmp_path: Path, corrupt) -> None:  # noqa: ANN001
    cached_scores(CountingScorer(), Q, T, tmp_path)
    (entry,) = _entries(tmp_path)
    corrupt(entry)
    sc = CountingScorer()
    m, hit = cached_scores(sc, Q, T, tmp_path)
    assert hit is False
    assert sc.calls == 1
    np.testing.assert_array_equal(m, _expected(Q, T))
    assert _entries(tmp_path) == [entry]
    np.testing.assert_array_equal(np.load(entry, allow_pickle=False), _expected(Q, T))
    assert cached_scores(sc, Q, T, tmp_path)[1] is True


def _unpickle_marker(path: str) -> float:
    """Runs only if an object array is unpickled: leaves a marker file behind."""
    Path(path).write_text("unpickled")
    return 1.0


class _Sneaky:
    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):  # noqa: ANN204
        return (_unpickle_marker, (self.marker,))


def test_object_array_is_not_unpickled(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cached_scores(CountingScorer(), Q, T, cache)
    (entry,) = _entries(cache)
    marker = tmp_path / "marker"
    planted = np.empty((len(Q), len(T)), dtype=object)
    planted[...] = _Sneaky(str(marker))
    np.save(entry, planted, allow_pickle=True)
    assert not marker.exists()
    sc = CountingScorer()
    m, hit = cached_scores(sc, Q, T, cache)
    assert not marker.exists(), "cache entry was loaded with allow_pickle=True"
    assert hit is False
    assert sc.calls == 1
    np.testing.assert_array_equal(m, _expected(Q, T))
    assert np.load(entry, allow_pickle=False).dtype == np.float64


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_scores_raise_and_write_nothing(tmp_path: Path, bad: float) -> None:
    with pytest.raises(ValueError, match="NaN or infinite"):
        cached_scores(CountingScorer(fill=bad), Q, T, tmp_path / "cache")
    assert not any(p.is_file() for p in (tmp_path / "cache").rglob("*"))


def test_wrong_shape_from_scorer_raises_and_writes_nothing(tmp_path: Path) -> None:
    class Bad(CountingScorer):
        def score(self, queries: Sequence[str], tools: Sequence[str]) -> np.ndarray:
            return np.zeros((len(tools), len(queries)))

    with pytest.raises(ValueError, match="shape"):
        cached_scores(Bad(), Q, T, tmp_path)
    assert not any(tmp_path.iterdir())


def test_atomic_save_leaves_no_temp_on_failure(tmp_path: Path) -> None:
    path = tmp_path / "x.npy"
    with pytest.raises(ValueError):
        atomic_save_npy(path, np.array([object()], dtype=object))
    assert list(tmp_path.iterdir()) == []


def test_cache_dir_none_uses_default_under_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("SHORTLIST_CACHE_DIR", str(tmp_path / "envcache"))
    folder = scores_dir()
    assert folder == tmp_path / "envcache" / "scores"
    assert cached_scores(CountingScorer(), Q, T)[1] is False
    assert len(_entries(tmp_path / "envcache")) == 1
    assert cached_scores(CountingScorer(), Q, T)[1] is True


def test_cache_dir_flag_and_env_use_the_same_folder(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """--cache-dir X (the cache_dir argument) and SHORTLIST_CACHE_DIR=X share entries."""
    monkeypatch.setenv("SHORTLIST_CACHE_DIR", str(tmp_path / "shared"))
    assert cached_scores(CountingScorer(), Q, T)[1] is False
    monkeypatch.delenv("SHORTLIST_CACHE_DIR")
    assert cached_scores(CountingScorer(), Q, T, tmp_path / "shared")[1] is True
    assert scores_dir(tmp_path / "shared") == tmp_path / "shared" / "scores"


def _fill_entry(cache_dir: str, barrier, results) -> None:  # noqa: ANN001
    """Child process: both children miss, meet at the barrier inside score(), then both write."""
    try:
        m, hit = cached_scores(CountingScorer(barrier=barrier), Q, T, Path(cache_dir))
        results.put(("ok", hit, m.tolist()))
    except BaseException as e:  # noqa: BLE001 - report anything to the parent
        results.put(("error", repr(e), None))


def test_two_processes_fill_the_same_entry(tmp_path: Path) -> None:
    ctx = mp.get_context("spawn")
    barrier = ctx.Barrier(2)
    results = ctx.Queue()
    procs = [ctx.Process(target=_fill_entry, args=(str(tmp_path), barrier, results)) for _ in range(2)]
    for p in procs:
        p.start()
    got = [results.get(timeout=120) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert [g[0] for g in got] == ["ok", "ok"], got
    assert [g[1] for g in got] == [False, False]  # both really computed and wrote
    for g in got:
        np.testing.assert_array_equal(np.array(g[2]), _expected(Q, T))
    files = sorted(scores_dir(tmp_path).iterdir())
    assert len(files) == 1 and files[0].suffix == ".npy", files
    np.testing.assert_array_equal(np.load(files[0], allow_pickle=False), _expected(Q, T))
    assert cached_scores(CountingScorer(), Q, T, tmp_path)[1] is True


def test_cached_embeddings_are_made_on_the_pinned_thread_count_and_keyed_by_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """float32 embeddings differ in their last bits with torch's thread count (the default is the machine's cores):
    a cached embedding is computed on EMBED_THREADS threads whatever the caller set, the caller's count comes back
    after it, and an entry made under another count is a miss (the count is in the key)."""
    import torch

    from benchmarks import score_cache

    class ThreadRecorder(CountingEmbedder):
        def embed(self, texts: Sequence[str]) -> np.ndarray:
            self.threads = torch.get_num_threads()
            return super().embed(texts)

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        first = ThreadRecorder()
        cached_scores(first, Q, T, tmp_path)
        assert first.threads == score_cache.EMBED_THREADS == 2
        assert torch.get_num_threads() == 1
        assert cached_scores(ThreadRecorder(), Q, T, tmp_path)[1] is True
        monkeypatch.setattr(score_cache, "EMBED_THREADS", 3)
        again = ThreadRecorder()
        assert cached_scores(again, Q, T, tmp_path)[1] is False
        assert again.threads == 3 and again.embedded == [Q, T]  # neither the matrix nor the embeddings were reused
    finally:
        torch.set_num_threads(before)
