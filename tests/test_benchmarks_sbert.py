"""The plain-torch MiniLM (issue 38): ``benchmarks.sbert.BertMeanEncoder`` gives sentence-transformers' float32
embeddings bit for bit (samples of BFCL's tool texts and queries, in the scorer's batches and one at a time;
ToolBench's longest tool texts, truncated at 256 tokens, and its queries), the package's scorer computes with it,
a folder it does not support is named with the reason, and a saved MiniLM searcher serves without importing
sentence-transformers or transformers. Every text of both benchmarks: ``shortlist toolsearch embeddings``."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import cli_env
from test_toolsearch import openai_tools

from benchmarks.bfcl import load_bfcl
from benchmarks.sbert import BertMeanEncoder, unsupported
from benchmarks.score_cache import embedding_threads
from benchmarks.scorers import EmbeddingScorer, _load_model, resolve_model
from benchmarks.toolbench import load_toolbench
from shortlist_depth.toolsearch import ToolSearch

MODEL = resolve_model("minilm")


@pytest.fixture(scope="module")
def both() -> Iterator[tuple[object, BertMeanEncoder]]:
    """sentence-transformers' model and the plain-torch encoder of the same folder, on one torch thread (the
    worker's own count restored afterwards: the module's tests share their process with others)."""
    with embedding_threads(1):
        yield _load_model(MODEL, "minilm", "sentence-transformers"), BertMeanEncoder(MODEL)


def st_embed(model: object, texts: list[str], batch_size: int = 64) -> np.ndarray:
    out = model.encode(texts, batch_size=batch_size, normalize_embeddings=True, show_progress_bar=False)  # type: ignore[attr-defined]
    return np.asarray(out, dtype=np.float32)


def test_bfcl_tools_and_queries_embed_bit_for_bit(both: tuple[object, BertMeanEncoder]) -> None:
    st, light = both
    corpus = load_bfcl()
    tools, queries = list(corpus.tool_texts), [q.text for q in corpus.queries]
    for texts in (sorted(tools, key=len)[-40:] + tools[:60], queries[::4]):  # two batches each, the longest tools
        expected = st_embed(st, texts)
        got = light.encode(texts, batch_size=64)
        assert got.dtype == np.float32 and got.shape == expected.shape == (len(texts), 384)
        assert np.array_equal(got, expected)  # bit for bit, padding and batch order included
    single = [q.text for q in corpus.queries[:20]]
    assert np.array_equal(light.encode(single[:1]), st_embed(st, single[:1]))
    one_by_one = np.stack([light.encode([t])[0] for t in single])
    assert np.array_equal(one_by_one, np.stack([st_embed(st, [t])[0] for t in single]))


def test_toolbench_long_tools_and_queries_embed_bit_for_bit(both: tuple[object, BertMeanEncoder]) -> None:
    st, light = both
    corpus = load_toolbench()
    longest = sorted(corpus.tool_texts, key=len)[-6:]  # far beyond 256 tokens: truncation must match
    assert len(light.tokenizer.encode(longest[0]).ids) == light.max_seq_length == 256
    queries = [q.text for q in corpus.queries[:24]]
    for texts in (longest, [*longest[:2], *queries]):  # mixed lengths: padding within a batch
        assert np.array_equal(light.encode(texts, batch_size=8), st_embed(st, texts, batch_size=8))


def test_the_scorer_computes_with_the_encoder_and_keeps_its_identity() -> None:
    scorer = EmbeddingScorer("minilm")
    assert isinstance(scorer._load(), BertMeanEncoder)
    assert scorer.identity() == EmbeddingScorer("minilm", backend="sentence-transformers").identity()
    assert scorer.identity()["impl"].startswith("sentence-transformers==")
    assert scorer.embed([]).shape == (0, 384)
    with pytest.raises(ValueError, match="unknown embedding backend 'onnx'"):
        EmbeddingScorer("minilm", backend="onnx")


def test_a_folder_it_cannot_encode_is_named_with_the_reason(tmp_path: Path) -> None:
    assert unsupported(MODEL) is None
    cls = tmp_path / "cls"
    shutil.copytree(MODEL, cls, ignore=shutil.ignore_patterns("model.safetensors"))
    (cls / "model.safetensors").symlink_to(Path(MODEL) / "model.safetensors")
    pooling = json.loads((cls / "1_Pooling" / "config.json").read_text())
    (cls / "1_Pooling" / "config.json").write_text(json.dumps({**pooling, "pooling_mode_cls_token": True}))
    assert "1_Pooling/config.json" in str(unsupported(cls)) and "pooling_mode_cls_token" in str(unsupported(cls))
    (cls / "tokenizer.json").unlink()
    assert unsupported(cls) == f"no tokenizer.json in {cls}"
    with pytest.raises(ValueError, match="without sentence-transformers: no tokenizer.json"):
        BertMeanEncoder(cls)
    modules = tmp_path / "modules"
    shutil.copytree(cls, modules, symlinks=True)
    (modules / "tokenizer.json").write_text("{}")
    (modules / "modules.json").write_text(json.dumps(json.loads((Path(MODEL) / "modules.json").read_text())[:2]))
    assert "modules.json is not Transformer -> Pooling -> Normalize" in str(unsupported(modules))


def test_a_saved_minilm_searcher_serves_without_sentence_transformers(tmp_path: Path) -> None:
    """Stand-ins that raise on import: a MiniLM search needs torch, tokenizers and safetensors only."""
    saved = ToolSearch.from_tools(openai_tools(), "minilm", cache_dir=tmp_path / "cache").save(tmp_path / "searcher")
    fake = tmp_path / "fake"
    for name in ("sentence_transformers", "transformers", "sklearn", "scipy", "pandas", "stable_baselines3"):
        (fake / name).mkdir(parents=True)
        (fake / name / "__init__.py").write_text(f"raise ImportError('{name} was imported')\n")
    env = cli_env()
    env["PYTHONPATH"] = f"{fake}:{env['PYTHONPATH']}"
    command = [sys.executable, "-m", "experiments.cli", "search", "--searcher", str(saved), "--cache-dir",
               str(tmp_path / "cache"), "please get my news now"]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-800:]
    expected = ToolSearch.load(saved, cache_dir=tmp_path / "cache").search("please get my news now")
    assert json.loads(done.stdout)["names"] == list(expected.names)
