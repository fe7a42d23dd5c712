"""Goldens for engine tests on models/tiny: greedy continuations and last-position top logits.

make_goldens.py MODELS_DIR OUT_JSON [LLAMA_LOGITS_BIN]
For 20 prompts (10 Austen openings, 10 chats with thinking on/off rendered by the embedded template):
  * f32: greedy continuation of up to 24 tokens (stops after an EOG token) from PyTorch (gemma4.py on
    the GGUF weights), checked against llama.cpp (llama_logits, F32 KV) by teacher forcing: llama.cpp's
    argmax at every position must equal PyTorch's token. min_margin = smallest top1-top2 logit gap
    seen (llama.cpp), so a test can tell a near-tie from a bug.
  * q8_0, q4_k: llama.cpp's own greedy continuation (token by token).
  * top8: llama.cpp's 8 largest logits (id, value) at the last prompt position, f32 file.
"""
import json
import os
import subprocess
import sys

import numpy as np
import torch

from chat_prompt import render
from check_logits import load_model
from tokenizer import Tokenizer

AUSTEN = ["It is a truth universally acknowledged, that a single man in possession of a good fortune,",
          "Emma Woodhouse, handsome, clever, and rich,", "Mr. Darcy", "\"My dear Jane,\" said Elizabeth,",
          "The family of Dashwood had long been settled in Sussex.", "Sir Walter Elliot, of Kellynch Hall,",
          "No one who had ever seen Catherine Morland in her infancy", "About thirty years ago, Miss Maria Ward,",
          "She was", "\n\nCHAPTER"]
CHATS = [("What is 347 + 586?", True), ("What is 347 + 586?", False), ("Reverse the word 'garden'.", True),
         ("Reverse the word 'garden'.", False), ("How many times does the letter 'e' appear in 'excellent'?", True),
         ("How many times does the letter 'e' appear in 'excellent'?", False),
         ("Continue this passage: It was a fine morning.", True),
         ("Continue this passage: It was a fine morning.", False), ("Add 58 and 64.", True), ("Hello", False)]
N_GEN = 24
EOG = {"<eos>", "<turn|>", "<|tool_response>"}


def llama(bin_, path, ids):
    out = subprocess.run([bin_, path, ",".join(map(str, ids)), "1", "f32"], capture_output=True, text=True,
                         check=True).stdout
    return np.array([[float(v) for v in l.split()[2:]] for l in out.strip().split("\n")])


def main():
    mdir, out = sys.argv[1:3]
    bin_ = sys.argv[3] if len(sys.argv) > 3 else os.path.expanduser("~/.cache/llama-ref/build/bin/llama_logits")
    torch.set_num_threads(1)
    f32 = os.path.join(mdir, "tiny-f32.gguf")
    tok = Tokenizer.load(f32)
    model = load_model(f32)
    prompts = [(p, None) for p in AUSTEN] + [(render(f32, q, t), t) for q, t in CHATS]
    goldens = []
    for text, thinking in prompts:
        ids = tok.encode(text)
        gen = []
        with torch.no_grad():
            for _ in range(N_GEN):
                nxt = int(model(torch.tensor([ids + gen]))[0, -1].argmax())
                gen.append(nxt)
                if tok.tokens[nxt] in EOG:
                    break
        ref = llama(bin_, f32, ids + gen)
        ref_arg = ref.argmax(-1)[len(ids) - 1:len(ids) - 1 + len(gen)]
        assert list(ref_arg) == gen, f"llama.cpp and PyTorch disagree on {text!r}: {list(ref_arg)} vs {gen}"
        srt = np.sort(ref[len(ids) - 1:len(ids) - 1 + len(gen)], axis=-1)
        margin = float((srt[:, -1] - srt[:, -2]).min())
        last = ref[len(ids) - 1]
        top = np.argsort(-last)[:8]
        g = {"prompt": text, "thinking": thinking, "prompt_ids": ids, "greedy_f32": gen,
             "min_margin_f32": round(margin, 5),
             "top8_f32": [[int(i), round(float(last[i]), 5)] for i in top]}
        for q in ("q8_0", "q4_k"):
            path = os.path.join(mdir, f"tiny-{q}.gguf")
            qgen = []
            for _ in range(N_GEN):
                nxt = int(llama(bin_, path, ids + qgen)[-1].argmax())
                qgen.append(nxt)
                if tok.tokens[nxt] in EOG:
                    break
            g[f"greedy_{q}"] = qgen
        goldens.append(g)
        print(f"{len(goldens):2d} margin {margin:.4f} {tok.decode(gen, render_special=True)!r}", flush=True)
    with open(out, "w") as f:
        json.dump({"model": "models/tiny", "llama_ref": "llama.cpp v0.4.0 llama_logits, F32 KV, 1 thread",
                   "n_gen": N_GEN, "goldens": goldens}, f, indent=0, ensure_ascii=False)


if __name__ == "__main__":
    main()
