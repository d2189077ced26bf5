"""sentence-transformers' pipeline for a mean-pooled BERT model, without sentence-transformers or transformers.

Importing sentence-transformers takes about 7 s (it imports transformers, scikit-learn and scipy); a tool search
that embeds one request needs none of it. :class:`BertMeanEncoder` computes the same embeddings from the same files
with torch, safetensors and the ``tokenizers`` library only (about 2 s of imports, torch's), for a model folder
whose ``modules.json`` is sentence-transformers' Transformer -> Pooling (mean) -> Normalize over a ``BertModel``
(all-MiniLM-L6-v2 is one; :func:`supported` checks every file it reads). Its pipeline is sentence-transformers'
``encode(texts, batch_size, normalize_embeddings=True)`` (version 6.3) on the CPU, step for step, with the same
torch operations in the same order, so the float32 embeddings are bit-identical
(``tests/test_benchmarks_sbert.py`` compares them on BFCL's and ToolBench's texts):

1. order the texts by length, longest first (``np.argsort`` of minus the character count), and cut that order
   into batches of ``batch_size``;
2. tokenise each batch with the model's ``tokenizer.json`` (WordPiece, lower-cased), truncated to the
   ``max_seq_length`` of ``sentence_bert_config.json`` ("longest first") and padded to the batch's longest;
3. the BERT encoder of transformers' ``BertModel`` (eval mode, ``sdpa`` attention): word + token-type, then +
   position embeddings, LayerNorm; per layer, self-attention by ``torch.nn.functional.scaled_dot_product_attention``
   (no mask when the batch has no padding, else transformers' 4-D boolean mask), dense, residual LayerNorm,
   the GELU (erf) feed-forward and its residual LayerNorm;
4. mean pooling over the attention mask (the sum divided by the token count, clamped at 1e-9);
5. L2 normalisation twice (the model's Normalize module, then ``normalize_embeddings=True``), exactly as
   ``encode`` does it.

Everything runs under ``torch.inference_mode`` on the calling thread's torch settings (the caller chooses the
number of threads: float32 results differ in the last bits with it, for sentence-transformers too).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from numpy.typing import NDArray

if TYPE_CHECKING:
    import torch

#: What the files of a supported model folder must say (file -> {key: value}).
REQUIRED_CONFIG: dict[str, dict[str, Any]] = {
    "config.json": {"model_type": "bert", "hidden_act": "gelu", "position_embedding_type": "absolute"},
    "1_Pooling/config.json": {
        "pooling_mode_mean_tokens": True,
        "pooling_mode_cls_token": False,
        "pooling_mode_max_tokens": False,
        "pooling_mode_mean_sqrt_len_tokens": False,
    },
}
#: sentence-transformers' module types, in the order the pipeline needs them.
MODULES = (
    ("", "sentence_transformers.models.Transformer"),
    ("1_Pooling", "sentence_transformers.models.Pooling"),
    (None, "sentence_transformers.models.Normalize"),
)


def _read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def unsupported(path: str | Path) -> str | None:
    """Why :class:`BertMeanEncoder` cannot compute the embeddings of the model folder ``path``, or None when it can
    (a local folder with the files it reads, a Transformer -> mean Pooling -> Normalize pipeline over BERT)."""
    folder = Path(path)
    need = ["modules.json", "config.json", "sentence_bert_config.json", "tokenizer.json", "model.safetensors"]
    missing = [n for n in need if not (folder / n).is_file()]
    if missing:
        return f"no {', '.join(missing)} in {folder}"
    try:
        modules = _read_json(folder / "modules.json")
        kinds = [(m.get("path"), m.get("type")) for m in modules]
        fits = len(kinds) == len(MODULES) and all(
            t == want and (where is None or p == where) for (p, t), (where, want) in zip(kinds, MODULES, strict=True)
        )
        if not fits:
            return f"modules.json is not Transformer -> Pooling -> Normalize: {[t for _, t in kinds]}"
        for name, wanted in REQUIRED_CONFIG.items():
            cfg = _read_json(folder / name)
            differ = {k: cfg.get(k) for k, v in wanted.items() if cfg.get(k, v if k == "hidden_act" else None) != v}
            if differ:
                return f"{name}: {differ} (supported: {wanted})"
        st = _read_json(folder / "sentence_bert_config.json")
        if st.get("do_lower_case") or not isinstance(st.get("max_seq_length"), int):
            return f"sentence_bert_config.json: {st} (supported: an integer max_seq_length, no do_lower_case)"
        if _read_json(folder / "config.json").get("architectures", ["BertModel"]) != ["BertModel"]:
            return "config.json: not a BertModel"
    except (OSError, ValueError, AttributeError, TypeError) as e:
        return f"unreadable model files in {folder}: {e}"
    return None


class BertMeanEncoder:
    """A mean-pooled, normalised BERT sentence encoder read from a sentence-transformers model folder (module
    docstring): ``encode(texts)`` gives sentence-transformers' embeddings, bit for bit.

    Args:
        path: the model folder (``unsupported(path)`` must be None).

    Raises:
        ValueError: the folder is not a supported model (the reason).
    """

    def __init__(self, path: str | Path) -> None:
        reason = unsupported(path)
        if reason is not None:
            raise ValueError(f"cannot encode with {path} without sentence-transformers: {reason}")
        import torch
        from safetensors.torch import load_file
        from tokenizers import Tokenizer

        folder = Path(path)
        config = _read_json(folder / "config.json")
        self.max_seq_length = int(_read_json(folder / "sentence_bert_config.json")["max_seq_length"])
        self.heads = int(config["num_attention_heads"])
        self.layers = int(config["num_hidden_layers"])
        self.eps = float(config["layer_norm_eps"])
        self.hidden = int(config["hidden_size"])
        self.head_size = self.hidden // self.heads
        self.scaling = self.head_size**-0.5
        tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
        tokenizer.enable_truncation(self.max_seq_length, strategy="longest_first", direction="right")
        pad_id = int(config.get("pad_token_id", 0))
        pad = tokenizer.id_to_token(pad_id) or "[PAD]"
        tokenizer.enable_padding(direction="right", pad_id=pad_id, pad_type_id=0, pad_token=pad)
        self.tokenizer = tokenizer
        weights = load_file(str(folder / "model.safetensors"))
        self.w: dict[str, torch.Tensor] = {k.removeprefix("bert."): v for k, v in weights.items()}
        self.position_ids = torch.arange(int(config["max_position_embeddings"])).expand((1, -1))

    def _tokens(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """input ids, token type ids and attention mask of one batch, (B, L) int64 each."""
        import torch

        enc = self.tokenizer.encode_batch(texts)
        ids = torch.tensor([e.ids for e in enc], dtype=torch.long)
        types = torch.tensor([e.type_ids for e in enc], dtype=torch.long)
        mask = torch.tensor([e.attention_mask for e in enc], dtype=torch.long)
        return ids, types, mask

    def _layer_norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        import torch.nn.functional as F  # noqa: N812

        return F.layer_norm(x, (self.hidden,), self.w[f"{name}.weight"], self.w[f"{name}.bias"], self.eps)

    def _linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        import torch.nn.functional as F  # noqa: N812

        return F.linear(x, self.w[f"{name}.weight"], self.w[f"{name}.bias"])

    def _layer(self, h: torch.Tensor, i: int, mask: torch.Tensor | None) -> torch.Tensor:
        """One encoder layer (transformers' ``BertLayer`` with ``sdpa`` attention, in eval mode)."""
        import torch.nn.functional as F  # noqa: N812

        p = f"encoder.layer.{i}"
        b, n = h.shape[:2]
        shape = (b, n, -1, self.head_size)
        q = self._linear(h, f"{p}.attention.self.query").view(*shape).transpose(1, 2)
        k = self._linear(h, f"{p}.attention.self.key").view(*shape).transpose(1, 2)
        v = self._linear(h, f"{p}.attention.self.value").view(*shape).transpose(1, 2)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=0.0, scale=self.scaling, is_causal=False)
        a = a.reshape(a.shape[0], -1, n, v.shape[-1]).transpose(1, 2).contiguous()
        a = a.reshape(b, n, -1).contiguous()
        h = self._layer_norm(self._linear(a, f"{p}.attention.output.dense") + h, f"{p}.attention.output.LayerNorm")
        x = F.gelu(self._linear(h, f"{p}.intermediate.dense"))
        return self._layer_norm(self._linear(x, f"{p}.output.dense") + h, f"{p}.output.LayerNorm")

    def _forward(self, ids: torch.Tensor, types: torch.Tensor, attention: torch.Tensor) -> torch.Tensor:
        """Sentence embeddings of one tokenised batch: the encoder, mean pooling, the two normalisations."""
        import torch
        import torch.nn.functional as F  # noqa: N812

        b, n = ids.shape
        emb = F.embedding(ids, self.w["embeddings.word_embeddings.weight"])
        emb = emb + F.embedding(types, self.w["embeddings.token_type_embeddings.weight"])
        emb = emb + F.embedding(self.position_ids[:, :n], self.w["embeddings.position_embeddings.weight"])
        h = self._layer_norm(emb, "embeddings.LayerNorm")
        mask = None
        if not bool(attention.all()):  # transformers' sdpa mask: (B, 1, L, L) booleans, the padding masked
            mask = attention.bool()[:, None, None, :].expand(b, 1, n, n)
        for i in range(self.layers):
            h = self._layer(h, i, mask)
        weights = attention.unsqueeze(-1).to(h.dtype)
        total = (h * weights).sum(dim=1, dtype=torch.float32)
        count = torch.clamp(weights.sum(dim=1, dtype=torch.float32), min=1e-9)
        pooled = (total / count).to(h.dtype)
        return F.normalize(F.normalize(pooled, p=2, dim=-1), p=2, dim=1)

    def encode(self, texts: Sequence[str], batch_size: int = 32) -> NDArray[np.float32]:
        """L2-normalised embeddings of ``texts``, (len(texts), hidden) float32, in the order given."""
        import torch

        texts = list(texts)
        if not texts:
            return np.zeros((0, self.hidden), dtype=np.float32)
        order = np.argsort([-len(t) for t in texts])
        out: list[torch.Tensor] = []
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                batch = [texts[i] for i in order[start : start + batch_size]]
                out.extend(self._forward(*self._tokens(batch)))
            stacked = torch.stack([out[i] for i in np.argsort(order)])
        return stacked.numpy().astype(np.float32, copy=False)
