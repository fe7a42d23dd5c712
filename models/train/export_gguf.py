"""Export a train.py checkpoint to gemma4 GGUF files with our own writer and quantizers.

export_gguf.py CKPT TOKENIZER_JSON TEMPLATE_SOURCE_GGUF OUT_DIR [TYPES...]
  TYPES from f32 q8_0 q4_0 q4_k (default: f32 q8_0 q4_k); writes OUT_DIR/tiny-<type>.gguf.
  The chat template is copied from TEMPLATE_SOURCE_GGUF's tokenizer.chat_template (the real
  Gemma 4 vocabulary file fetched by tools/fetch-test-data.sh).
Quantized files quantize every 2-D weight (incl. token_embd and per_layer_token_embd) to the one
type ("pure"); norms, rope_freqs and layer_output_scale stay F32.
"""
import os
import sys

import numpy as np
import torch

import gguf_io as G
import quants
from gemma4 import Config
from tokenizer import Tokenizer

FILE_TYPE = {"f32": 0, "q4_0": 2, "q8_0": 7, "q4_k": 14}
GGML_TYPE = {"f32": G.GGML_F32, "q4_0": G.GGML_Q4_0, "q8_0": G.GGML_Q8_0, "q4_k": G.GGML_Q4_K}


def gguf_tensors(state, cfg):
    """Yields (gguf name, numpy array in PyTorch [out, in] order, is_matrix)."""
    yield "token_embd.weight", state["token_embd"], True
    yield "per_layer_token_embd.weight", state["per_layer_token_embd"], True
    yield "per_layer_model_proj.weight", state["per_layer_model_proj.weight"], True
    yield "per_layer_proj_norm.weight", state["per_layer_proj_norm"], False
    yield "rope_freqs.weight", np.array(cfg.rope_freq_factors(), np.float32), False
    yield "output_norm.weight", state["output_norm"], False
    names = [("attn_norm", "attn_norm"), ("attn_q", "attn_q.weight"), ("attn_q_norm", "attn_q_norm"),
             ("attn_k", "attn_k.weight"), ("attn_k_norm", "attn_k_norm"), ("attn_v", "attn_v.weight"),
             ("attn_output", "attn_output.weight"), ("post_attention_norm", "post_attention_norm"),
             ("ffn_norm", "ffn_norm"), ("ffn_gate", "ffn_gate.weight"), ("ffn_up", "ffn_up.weight"),
             ("ffn_down", "ffn_down.weight"), ("post_ffw_norm", "post_ffw_norm"),
             ("inp_gate", "inp_gate.weight"), ("proj", "proj.weight"), ("post_norm", "post_norm"),
             ("layer_output_scale", "layer_output_scale")]
    for il in range(cfg.n_layer):
        for gname, tname in names:
            key = f"layers.{il}.{tname}"
            if key in state:  # shared-KV layers carry no attn_k / attn_v / attn_k_norm
                yield f"blk.{il}.{gname}.weight", state[key], tname.endswith(".weight")


def write(path, qtype, state, cfg, tok, template):
    w = G.GGUFWriter(path)
    a = "gemma4."
    w.add("general.architecture", "gemma4", G.STRING)
    w.add("general.name", "boltrt tiny gemma4", G.STRING)
    w.add("general.license", "MIT", G.STRING)
    w.add("general.file_type", FILE_TYPE[qtype], G.U32)
    w.add("general.quantization_version", 2, G.U32)
    w.add(a + "context_length", cfg.context_length, G.U32)
    w.add(a + "embedding_length", cfg.n_embd, G.U32)
    w.add(a + "block_count", cfg.n_layer, G.U32)
    w.add(a + "feed_forward_length", cfg.n_ff, G.U32)
    w.add(a + "attention.head_count", cfg.n_head, G.U32)
    w.add(a + "attention.head_count_kv", cfg.n_head_kv, G.U32)
    w.add(a + "attention.key_length", cfg.head_dim_full, G.U32)
    w.add(a + "attention.value_length", cfg.head_dim_full, G.U32)
    w.add(a + "attention.key_length_swa", cfg.head_dim_swa, G.U32)
    w.add(a + "attention.value_length_swa", cfg.head_dim_swa, G.U32)
    w.add(a + "rope.dimension_count", cfg.head_dim_full, G.U32)
    w.add(a + "rope.dimension_count_swa", cfg.head_dim_swa, G.U32)
    w.add(a + "rope.freq_base", cfg.rope_base_full, G.F32)
    w.add(a + "rope.freq_base_swa", cfg.rope_base_swa, G.F32)
    w.add(a + "attention.layer_norm_rms_epsilon", cfg.rms_eps, G.F32)
    w.add(a + "attention.sliding_window", cfg.sliding_window, G.U32)
    w.add(a + "attention.sliding_window_pattern", list(cfg.swa_pattern), G.ARRAY, G.BOOL)
    w.add(a + "attention.shared_kv_layers", cfg.shared_kv_layers, G.U32)
    w.add(a + "embedding_length_per_layer_input", cfg.n_embd_per_layer, G.U32)
    w.add(a + "final_logit_softcapping", cfg.softcap, G.F32)
    w.add("tokenizer.ggml.model", "gemma4", G.STRING)
    w.add("tokenizer.ggml.tokens", tok.tokens, G.ARRAY, G.STRING)
    scores = [-1000.0 if i < 107 else 0.0 for i in range(len(tok.tokens))]
    w.add("tokenizer.ggml.scores", scores, G.ARRAY, G.F32)
    w.add("tokenizer.ggml.token_type", tok.types, G.ARRAY, G.I32)
    w.add("tokenizer.ggml.merges", tok.merges, G.ARRAY, G.STRING)
    w.add("tokenizer.ggml.bos_token_id", 2, G.U32)
    w.add("tokenizer.ggml.eos_token_id", 1, G.U32)
    w.add("tokenizer.ggml.unknown_token_id", 3, G.U32)
    w.add("tokenizer.ggml.padding_token_id", 0, G.U32)
    w.add("tokenizer.ggml.mask_token_id", 4, G.U32)
    w.add("tokenizer.ggml.add_bos_token", True, G.BOOL)
    w.add("tokenizer.ggml.add_space_prefix", False, G.BOOL)
    w.add("tokenizer.chat_template", template, G.STRING)
    for name, arr, is_matrix in gguf_tensors(state, cfg):
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        ne = list(reversed(arr.shape)) if arr.ndim > 0 else [1]
        if is_matrix and qtype != "f32":
            w.add_tensor(name, ne, GGML_TYPE[qtype], quants.QUANTIZERS[qtype](arr))
        else:
            w.add_tensor(name, ne, G.GGML_F32, arr.tobytes())
    w.write()


def main():
    ckpt, tok_json, template_src, out_dir = sys.argv[1:5]
    types = sys.argv[5:] or ["f32", "q8_0", "q4_k"]
    st = torch.load(ckpt, map_location="cpu")
    cfg = Config(**st["cfg"])
    state = {k: v.float().numpy() for k, v in st["model"].items()}
    tok = Tokenizer.load(tok_json)
    meta, _ = G.read_gguf(template_src, want_tensors=False)
    template = meta["tokenizer.chat_template"]
    os.makedirs(out_dir, exist_ok=True)
    for t in types:
        path = os.path.join(out_dir, f"tiny-{t}.gguf")
        write(path, t, state, cfg, tok, template)
        print(f"{path}: {os.path.getsize(path) / 1e6:.2f} MB")


if __name__ == "__main__":
    main()
