"""On-disk cache of score matrices, keyed by everything the scores depend on.

The key is the sha256 of the scorer's ``identity()`` (implementation and version,
tokeniser or model-file digest) together with the exact query and tool texts, so
changing any of them never reuses a stale matrix. Matrices are ``.npy`` files
(read with ``allow_pickle=False``), written to a temporary name in the same
folder and renamed, so a reader never sees a partial file and two processes
filling the same entry at once both leave a complete, identical file.

Embeddings are computed on :data:`EMBED_THREADS` torch threads, whatever the machine or the calling process set:
float32 embeddings differ in their last bits with the thread count, and the count is part of the key of every
cached embedding and embedding score matrix.

Default location: ``<cache dir>/scores`` with the cache dir of :func:`benchmarks.data.resolve_cache_dir`
(``$SHORTLIST_CACHE_DIR`` or ``~/.cache/shortlist-depth/cache``). Embeddings (``emb-<model>-<key>.npy``)
sit in the same folder as score matrices: a text set is embedded once per cache dir, whether a score
matrix or the tool-tool similarity of the candidate sets (:func:`benchmarks.conditions.tool_similarity`)
asks for it first.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from benchmarks.atomic import atomic_path
from benchmarks.scorers import EmbeddingScorer, Scorer

EMBED_THREADS = 2
"""Torch threads every cached embedding is computed on (:func:`embedding_threads`). float32 embeddings differ in
their last bits with the number of threads: ToolBench's 3,406 tool texts embedded on 1, 2 and 4 threads give three
different matrices. Torch's default is the machine's core count, so without a fixed count a 4-core laptop, or a cache
an earlier 1-thread process filled, gave other scores than the committed results (made on 2 threads), and those
last bits moved learned cut-offs: on ToolBench with MiniLM, ``shortlist recommend``'s residual DQN had test net
reward 2.784 from 2-thread embeddings and 2.879 from 1-thread ones. Two is what every committed MiniLM number was
made with, so pinning it moves none of them."""


@contextlib.contextmanager
def embedding_threads(n: int | None = None) -> Iterator[None]:
    """Run the block on ``n`` torch threads (default :data:`EMBED_THREADS`), then restore the caller's count."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(EMBED_THREADS if n is None else n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _embedding_kind(kind: str) -> str:
    """The cache-key kind of an embedding-derived entry: the thread count it was computed on is part of it."""
    return f"{kind}@{EMBED_THREADS}threads"


def scores_dir(cache_dir: Path | None = None) -> Path:
    """``<cache dir>/scores``: the cache dir is ``cache_dir`` (``--cache-dir``), else
    :func:`benchmarks.data.resolve_cache_dir` (``$SHORTLIST_CACHE_DIR`` or the per-user cache), so
    ``--cache-dir X`` and ``SHORTLIST_CACHE_DIR=X`` use the same folder."""
    from benchmarks.data import resolve_cache_dir

    return resolve_cache_dir(cache_dir) / "scores"


def cache_key(identity: dict[str, str], queries: Sequence[str], tools: Sequence[str], kind: str = "scores") -> str:
    """sha256 naming one score matrix."""
    h = hashlib.sha256()
    h.update(json.dumps({"kind": kind, "identity": identity}, sort_keys=True).encode())
    for group in (queries, tools):
        h.update(b"\x00group\x00")
        for t in group:
            h.update(hashlib.sha256(t.encode("utf-8")).digest())
    return h.hexdigest()


def atomic_save_npy(path: Path, array: NDArray) -> None:
    """Write ``array`` to ``path`` atomically (:func:`benchmarks.atomic.atomic_path`), no pickles."""
    with atomic_path(path, ".npy") as tmp, open(tmp, "wb") as f:
        np.save(f, array, allow_pickle=False)


def _load_matrix(path: Path, shape: tuple[int | None, ...]) -> NDArray[np.float64] | None:
    """A cached finite numeric matrix of the expected shape (None = any size on that axis),
    or None when absent, corrupt or foreign (it is then recomputed and overwritten)."""
    if not path.exists():
        return None
    try:
        m = np.load(path, allow_pickle=False, mmap_mode="r")
    except (ValueError, OSError, EOFError, zipfile.BadZipFile, MemoryError, OverflowError):
        return None
    if not (isinstance(m, np.ndarray) and m.dtype.kind in "fiu" and m.ndim == len(shape)):
        return None
    if any(want is not None and got != want for got, want in zip(m.shape, shape, strict=True)):
        return None
    m = np.array(m)
    return m if np.all(np.isfinite(m)) else None


def cached_embeddings(
    scorer: EmbeddingScorer, texts: Sequence[str], cache_dir: Path | None = None
) -> NDArray[np.float32]:
    """L2-normalised embeddings of ``texts`` (one row per text), cached like score matrices."""
    folder = scores_dir(cache_dir)
    key = cache_key(scorer.identity(), texts, (), kind=_embedding_kind("embeddings"))
    path = folder / f"emb-{scorer.name.replace('/', '_')}-{key[:32]}.npy"
    cached = _load_matrix(path, (len(texts), None))
    if cached is not None:
        return cached.astype(np.float32)
    with embedding_threads():
        e = np.asarray(scorer.embed(texts), dtype=np.float32)
    if e.ndim != 2 or e.shape[0] != len(texts) or not np.all(np.isfinite(e)):
        raise ValueError(f"scorer {scorer.name} produced malformed or non-finite embeddings")
    atomic_save_npy(path, e)
    return e


def cached_scores(
    scorer: Scorer,
    queries: Sequence[str],
    tools: Sequence[str],
    cache_dir: Path | None = None,
) -> tuple[NDArray[np.float64], bool]:
    """Score matrix (Q, T) from the cache, computing and storing it on a miss.

    Returns:
        The matrix and whether it came from the cache.
    """
    folder = scores_dir(cache_dir)
    embedded = isinstance(scorer, EmbeddingScorer)
    key = cache_key(scorer.identity(), queries, tools, kind=_embedding_kind("scores") if embedded else "scores")
    path = folder / f"{scorer.name.replace('/', '_')}-{key[:32]}.npy"
    m = _load_matrix(path, (len(queries), len(tools)))
    if m is not None:
        return m.astype(np.float64), True
    if isinstance(scorer, EmbeddingScorer):  # embed each text set once, reuse across conditions and similarity
        emb_q, emb_t = cached_embeddings(scorer, queries, cache_dir), cached_embeddings(scorer, tools, cache_dir)
        m = (emb_q @ emb_t.T).astype(np.float64)
    else:
        m = np.asarray(scorer.score(queries, tools), dtype=np.float64)
    if m.shape != (len(queries), len(tools)):
        raise ValueError(f"scorer {scorer.name} returned shape {m.shape}, expected {(len(queries), len(tools))}")
    if not np.all(np.isfinite(m)):
        raise ValueError(f"scorer {scorer.name} produced NaN or infinite scores")
    atomic_save_npy(path, m)
    return m, False
