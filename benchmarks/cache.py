"""On-disk cache of score matrices, keyed by everything the scores depend on.

The key is the sha256 of the scorer's ``identity()`` (implementation and version,
tokeniser or model-file digest) together with the exact query and tool texts, so
changing any of them never reuses a stale matrix. Matrices are ``.npy`` files
(read with ``allow_pickle=False``), written to a temporary name in the same
folder and renamed, so a reader never sees a partial file and two processes
filling the same entry at once both leave a complete, identical file.

Default location: ``<cache dir>/scores`` with the cache dir of :func:`benchmarks.data.resolve_cache_dir`
(``$SHORTLIST_CACHE_DIR`` or ``~/.cache/shortlist-depth/cache``).
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from numpy.typing import NDArray

from benchmarks.scorers import Scorer


def default_cache_dir() -> Path:
    """The package cache folder (:func:`benchmarks.data.resolve_cache_dir`) + ``/scores``."""
    from benchmarks.data import resolve_cache_dir

    return resolve_cache_dir() / "scores"


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
    """Write ``array`` to ``path`` via a temporary file and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            np.save(f, array, allow_pickle=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


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
    folder = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    key = cache_key(scorer.identity(), queries, tools)
    path = folder / f"{scorer.name.replace('/', '_')}-{key[:32]}.npy"
    if path.exists():
        try:
            m = np.load(path, allow_pickle=False)
            if (
                isinstance(m, np.ndarray)
                and m.dtype.kind in "fiu"
                and m.shape == (len(queries), len(tools))
                and np.all(np.isfinite(m))
            ):
                return m.astype(np.float64), True
        except (ValueError, OSError, EOFError, zipfile.BadZipFile):
            pass  # corrupt, truncated or foreign entry: recompute and overwrite
    m = np.asarray(scorer.score(queries, tools), dtype=np.float64)
    if m.shape != (len(queries), len(tools)):
        raise ValueError(f"scorer {scorer.name} returned shape {m.shape}, expected {(len(queries), len(tools))}")
    if not np.all(np.isfinite(m)):
        raise ValueError(f"scorer {scorer.name} produced NaN or infinite scores")
    atomic_save_npy(path, m)
    return m, False
