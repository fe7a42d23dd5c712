"""Held-out numbers and greedy samples for a checkpoint (PyTorch).

evaluate.py CKPT WORK_DIR
Prints held-out Austen nats/token and nats/byte (every <bos>+255-token window of
austen_heldout.txt), the chat held-out loss on answer tokens, and greedy continuations.
"""
import json
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F

from gemma4 import Config, Gemma4
from tokenizer import Tokenizer

SEQ = 256


@torch.no_grad()
def greedy(model, tok, text, n=40, stop=("<turn|>", "<eos>")):
    ids = tok.encode(text)
    start = len(ids)
    for _ in range(n):
        nxt = int(model(torch.tensor([ids[-SEQ:]]))[0, -1].argmax())
        ids.append(nxt)
        if tok.tokens[nxt] in stop:
            break
    return tok.decode(ids[start:], render_special=True)


@torch.no_grad()
def main():
    ckpt, work = sys.argv[1:3]
    torch.set_num_threads(1)
    st = torch.load(ckpt, map_location="cpu")
    cfg = Config(**st["cfg"])
    model = Gemma4(cfg)
    model.load_state_dict(st["model"])
    model.eval()
    tok = Tokenizer.load(os.path.join(work, "tokenizer.json"))
    text = open(os.path.join(work, "austen_heldout.txt")).read()
    held = tok.encode(text, add_bos=False)
    nats, n_tok, n_bytes = 0.0, 0, 0
    for w in range(len(held) // (SEQ - 1)):
        chunk = held[w * (SEQ - 1):(w + 1) * (SEQ - 1)]
        x = torch.tensor([[tok.bos_id] + chunk])
        nats += F.cross_entropy(model(x)[0, :-1], x[0, 1:], reduction="sum").item()
        n_tok += len(chunk)
        n_bytes += len(tok.decode(chunk).encode("utf-8"))
    print(f"held-out Austen: {n_tok} tokens, {n_bytes} bytes, {nats / n_tok:.4f} nats/token, "
          f"{nats / n_bytes:.4f} nats/byte, {nats / n_bytes / np.log(2):.4f} bits/byte")
    prompts = ["It is a truth universally acknowledged, that",
               "Mr. Darcy", "Emma could not", "\"My dear Jane,\" said Elizabeth,"]
    for p in prompts:
        print(f"--- {p!r}\n{p}{greedy(model, tok, p, 48)}")
    chats = [json.loads(l) for l in open(os.path.join(work, "chat_heldout.jsonl"))][:6]
    for c in chats:
        cut = c.index("<|turn>model\n") + len("<|turn>model\n")
        if "<|channel>thought\n<channel|>" in c[cut:cut + 30]:
            cut += len("<|channel>thought\n<channel|>")
        prompt = c[:cut][len("<bos>"):]
        print(f"--- chat {prompt!r}\n    got: {greedy(model, tok, prompt, 120)!r}\n    ref: {c[cut:]!r}")


if __name__ == "__main__":
    main()
