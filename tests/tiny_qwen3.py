"""A tiny GGUF with Qwen3's architecture, tokenizer and chat template, and random weights.

What the tests need from Qwen3-0.6B is its code path, not its answers: the ``qwen3``
graph (per-head q/k norms, grouped KV heads, a head width that is not ``n_embd / heads``),
its 151,936-row vocabulary and its chat template with the ``<think>`` block. This writes
such a model in a few seconds (about 40 MB) with the ``gguf`` package (dev extra).

The vocabulary is typed the way llama.cpp's ``convert_hf_to_gguf.py`` types Qwen3's:
an added token that ``tokenizer.json`` marks special, or whose text looks special
(``<|...|>``), is CONTROL; every other added token (``<think>``, ``</think>``,
``<tool_call>``...) is USER_DEFINED; ids beyond the tokenizer's, up to the model's
``vocab_size``, are padding (UNUSED). That typing is what the real model file has, and
what makes llama.cpp match ``<think>`` even when asked for plain text.

Sources: ``assets/qwen3-tokenizer.json.gz`` (the tokenizer, Apache-2.0) and
``tests/data/qwen3-chat-template.jinja`` (the ``chat_template`` of the same package's
``tokenizer_config.json``; see ``assets/LICENSES/qwen3-tokenizer-SOURCE.md``).
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from triage.assets_path import asset

TEMPLATE = Path(__file__).with_name("data") / "qwen3-chat-template.jinja"
VOCAB_SIZE = 151_936  # Qwen3-0.6B's config.json: the embedding has more rows than the tokenizer has tokens


@dataclass(frozen=True)
class Shape:
    """The model's sizes. Defaults: 2 layers, width 64, 4 query heads sharing 2 KV heads of 32."""

    layers: int = 2
    width: int = 64
    heads: int = 4
    kv_heads: int = 2
    head_dim: int = 32  # heads * head_dim = 128 != width, as in Qwen3-0.6B (16 * 128 vs 1024)
    ffn: int = 128
    n_ctx_train: int = 4096


def _looks_special(text: str) -> bool:
    # convert_hf_to_gguf's does_token_look_special, for the tokens Qwen3 has.
    return text.startswith("<|") and text.endswith("|>")


def vocabulary(tok: dict, vocab_size: int = VOCAB_SIZE) -> tuple[list[str], list[int], list[str], dict[str, int]]:
    """(token texts, token types, merges, added token ids by text) for the GGUF, from ``tokenizer.json``."""
    import gguf

    texts = [""] * vocab_size
    types = [int(gguf.TokenType.UNUSED)] * vocab_size
    for text, i in tok["model"]["vocab"].items():
        texts[i], types[i] = text, int(gguf.TokenType.NORMAL)
    added: dict[str, int] = {}
    for a in tok["added_tokens"]:
        control = a.get("special", False) or _looks_special(a["content"])
        texts[a["id"]] = a["content"]
        types[a["id"]] = int(gguf.TokenType.CONTROL if control else gguf.TokenType.USER_DEFINED)
        added[a["content"]] = a["id"]
    for i, text in enumerate(texts):
        if not text:
            texts[i] = f"[PAD{i}]"
    merges = [" ".join(m) if isinstance(m, list) else m for m in tok["model"]["merges"]]
    return texts, types, merges, added


def write_tiny_qwen3(out: Path, shape: Shape = Shape(), seed: int = 0) -> Path:
    """Write the model to ``out`` and return it."""
    import gguf

    with gzip.open(asset("qwen3-tokenizer.json.gz"), "rt", encoding="utf-8") as fh:
        tok = json.load(fh)
    texts, types, merges, added = vocabulary(tok)
    s = shape
    w = gguf.GGUFWriter(str(out), "qwen3")
    w.add_name("tiny-random-qwen3")
    w.add_context_length(s.n_ctx_train)
    w.add_embedding_length(s.width)
    w.add_block_count(s.layers)
    w.add_feed_forward_length(s.ffn)
    w.add_head_count(s.heads)
    w.add_head_count_kv(s.kv_heads)
    w.add_key_length(s.head_dim)
    w.add_value_length(s.head_dim)
    w.add_rope_freq_base(1_000_000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(texts)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_eos_token_id(added["<|im_end|>"])
    w.add_pad_token_id(added["<|endoftext|>"])
    w.add_bos_token_id(added["<|endoftext|>"])
    w.add_add_bos_token(False)
    w.add_chat_template(TEMPLATE.read_text(encoding="utf-8"))

    rng = np.random.default_rng(seed)

    def weight(*dims: int) -> np.ndarray:
        return (rng.standard_normal(dims) * 0.02).astype(np.float32)

    def ones(n: int) -> np.ndarray:
        return np.ones(n, np.float32)

    q, kv = s.heads * s.head_dim, s.kv_heads * s.head_dim
    w.add_tensor("token_embd.weight", weight(len(texts), s.width))  # no output.weight: tied, as in Qwen3-0.6B
    w.add_tensor("output_norm.weight", ones(s.width))
    for b in range(s.layers):
        p = f"blk.{b}."
        w.add_tensor(p + "attn_norm.weight", ones(s.width))
        w.add_tensor(p + "attn_q.weight", weight(q, s.width))
        w.add_tensor(p + "attn_k.weight", weight(kv, s.width))
        w.add_tensor(p + "attn_v.weight", weight(kv, s.width))
        w.add_tensor(p + "attn_output.weight", weight(s.width, q))
        w.add_tensor(p + "attn_q_norm.weight", ones(s.head_dim))
        w.add_tensor(p + "attn_k_norm.weight", ones(s.head_dim))
        w.add_tensor(p + "ffn_norm.weight", ones(s.width))
        w.add_tensor(p + "ffn_gate.weight", weight(s.ffn, s.width))
        w.add_tensor(p + "ffn_up.weight", weight(s.ffn, s.width))
        w.add_tensor(p + "ffn_down.weight", weight(s.width, s.ffn))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


if __name__ == "__main__":
    import sys

    print(write_tiny_qwen3(Path(sys.argv[1])))
