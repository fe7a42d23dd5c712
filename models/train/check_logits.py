"""Compare PyTorch (gemma4.py, weights read back from the GGUF) with llama.cpp's llama_logits.

check_logits.py MODEL.gguf TOKENIZER_JSON [LLAMA_LOGITS_BIN]
Prints, per prompt, max |dlogit| / max |logit| over all positions and whether argmaxes agree.
Exit 1 if any relative difference exceeds 2e-3 (llama.cpp's CPU GELU uses an f16 table, see
gemma4.md §5.11) for f32 files. Quantized files are dequantized with our own dequantizers.
"""
import os
import subprocess
import sys

import numpy as np
import torch

import gguf_io as G
import quants
from gemma4 import Config, Gemma4
from tokenizer import Tokenizer

PROMPTS = [
    "It is a truth universally acknowledged, that a single man in possession of a good fortune,",
    "<|turn>user\nWhat is 347 + 586?<turn|>\n<|turn>model\n<|channel>thought\n<channel|>",
    "Emma Woodhouse, handsome, clever, and rich",
]
DEQ = {G.GGML_Q8_0: "q8_0", G.GGML_Q4_0: "q4_0", G.GGML_Q4_K: "q4_k"}


def load_model(path):
    meta, tensors = G.read_gguf(path)
    a = "gemma4."
    cfg = Config(vocab_size=len(meta["tokenizer.ggml.tokens"]), n_embd=meta[a + "embedding_length"],
                 n_layer=meta[a + "block_count"], n_head=meta[a + "attention.head_count"],
                 n_head_kv=meta[a + "attention.head_count_kv"],
                 head_dim_swa=meta[a + "attention.key_length_swa"],
                 head_dim_full=meta[a + "attention.key_length"], n_ff=meta[a + "feed_forward_length"],
                 n_embd_per_layer=meta[a + "embedding_length_per_layer_input"],
                 swa_pattern=list(meta[a + "attention.sliding_window_pattern"]),
                 shared_kv_layers=meta[a + "attention.shared_kv_layers"],
                 sliding_window=meta[a + "attention.sliding_window"],
                 rope_base_swa=meta[a + "rope.freq_base_swa"], rope_base_full=meta[a + "rope.freq_base"],
                 rms_eps=meta[a + "attention.layer_norm_rms_epsilon"],
                 softcap=meta[a + "final_logit_softcapping"], context_length=meta[a + "context_length"])
    model = Gemma4(cfg)

    def get(name):
        ne, gt, raw = tensors[name]
        shape = list(reversed(ne))
        if gt == G.GGML_F32:
            arr = np.frombuffer(raw, np.float32).reshape(shape)
        else:
            arr = quants.DEQUANTIZERS[DEQ[gt]](raw, ne[0]).reshape(shape)
        return torch.from_numpy(arr.copy())

    rope = get("rope_freqs.weight").double()
    assert torch.allclose(rope, torch.tensor(cfg.rope_freq_factors(), dtype=torch.float64)), "rope_freqs"
    state = {"token_embd": get("token_embd.weight"),
             "per_layer_token_embd": get("per_layer_token_embd.weight"),
             "per_layer_model_proj.weight": get("per_layer_model_proj.weight"),
             "per_layer_proj_norm": get("per_layer_proj_norm.weight"),
             "output_norm": get("output_norm.weight")}
    for k in model.state_dict():
        if k.startswith("layers."):
            _, il, rest = k.split(".", 2)
            gname = rest.replace(".weight", "")
            state[k] = get(f"blk.{il}.{gname}.weight")
    model.load_state_dict(state)
    return model.eval()


def main():
    path, tok_json = sys.argv[1:3]
    bin_ = sys.argv[3] if len(sys.argv) > 3 else os.path.expanduser("~/.cache/llama-ref/build/bin/llama_logits")
    torch.set_num_threads(1)
    tok = Tokenizer.load(tok_json)
    model = load_model(path)
    prompts = list(PROMPTS)
    long_text = ("Sir Walter Elliot, of Kellynch Hall, in Somersetshire, was a man who, for his own amusement, "
                 "never took up any book but the Baronetage; there he found occupation for an idle hour, and "
                 "consolation in a distressed one; there his faculties were roused into admiration and respect, "
                 "by contemplating the limited remnant of the earliest patents; there any unwelcome sensations, "
                 "arising from domestic affairs changed naturally into pity and contempt as he turned over the "
                 "almost endless creations of the last century; and there, if every other leaf were powerless, "
                 "he could read his own history with an interest which never failed. ") * 3
    prompts.append(long_text)
    worst = 0.0
    for p in prompts:
        ids = tok.encode(p)
        out = subprocess.run([bin_, path, ",".join(map(str, ids)), "1", "f32"], capture_output=True,
                             text=True, check=True).stdout
        ref = np.array([[float(v) for v in line.split()[2:]] for line in out.strip().split("\n")])
        with torch.no_grad():
            ours = model(torch.tensor([ids]))[0].double().numpy()
        rel = np.abs(ours - ref).max() / np.abs(ref).max()
        agree = (ours.argmax(-1) == ref.argmax(-1)).mean()
        worst = max(worst, rel)
        print(f"{len(ids):4d} tokens  max|d|/max|ref| = {rel:.2e}  argmax agreement {agree * 100:.1f}%")
    print(f"worst relative difference {worst:.2e}")
    sys.exit(0 if worst < 2e-3 else 1)


if __name__ == "__main__":
    main()
