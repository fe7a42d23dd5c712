"""Train models/tiny on CPU (one thread). Deterministic given the seed and data.

train.py WORK_DIR [--minutes 40] [--steps N] [--resume]
WORK_DIR holds prepare_data.py output and tokenizer.json; writes ckpt.pt, train_log.tsv there.
Each batch: 16 sequences of 256 tokens; ~30% are packed chat conversations (aligned to a
conversation start), the rest <bos> + a random window of Austen text.
"""
import argparse
import json
import math
import os
import random
import time

import numpy as np
import torch
import torch.nn.functional as F

from gemma4 import Config, Gemma4
from tokenizer import Tokenizer

SEQ, BATCH, CHAT_FRACTION = 256, 16, 0.3


def load_streams(work, tok):
    cache = os.path.join(work, "tokens.npz")
    if os.path.exists(cache):
        d = np.load(cache)
        return d["austen"], d["chat"], d["chat_starts"], d["held"]
    austen = np.array(tok.encode(open(os.path.join(work, "austen_train.txt")).read(), add_bos=False),
                      dtype=np.int32)
    held = np.array(tok.encode(open(os.path.join(work, "austen_heldout.txt")).read(), add_bos=False),
                    dtype=np.int32)
    chat, starts = [], []
    for line in open(os.path.join(work, "chat_train.jsonl")):
        starts.append(len(chat))
        chat += tok.encode(json.loads(line), add_bos=False)
    chat = np.array(chat, dtype=np.int32)
    starts = np.array(starts, dtype=np.int64)
    np.savez(cache, austen=austen, chat=chat, chat_starts=starts, held=held)
    return austen, chat, starts, held


def make_batch(rng, austen, chat, starts, bos):
    rows = []
    for _ in range(BATCH):
        if rng.random() < CHAT_FRACTION:
            s = starts[rng.randrange(len(starts))]
            s = min(s, len(chat) - SEQ - 1)
            rows.append(chat[s:s + SEQ + 1])
        else:
            s = rng.randrange(len(austen) - SEQ)
            rows.append(np.concatenate([[bos], austen[s:s + SEQ]]))
    return torch.from_numpy(np.stack(rows).astype(np.int64))


@torch.no_grad()
def heldout_nats(model, held, bos, max_windows=24):
    """Mean loss per token on non-overlapping <bos>+255-token windows of held-out Austen."""
    model.eval()
    tot, n = 0.0, 0
    for w in range(min(max_windows, len(held) // (SEQ - 1))):
        x = torch.from_numpy(np.concatenate([[bos], held[w * (SEQ - 1):(w + 1) * (SEQ - 1)]]).astype(np.int64))[None]
        logits = model(x)
        tot += F.cross_entropy(logits[0, :-1], x[0, 1:], reduction="sum").item()
        n += x.shape[1] - 1
    model.train()
    return tot / n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("work")
    ap.add_argument("--minutes", type=float, default=40)
    ap.add_argument("--steps", type=int, default=1800, help="schedule length (cosine decay)")
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--resume", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(1234)
    rng = random.Random(1234)
    tok = Tokenizer.load(os.path.join(args.work, "tokenizer.json"))
    cfg = Config(vocab_size=len(tok.tokens))
    austen, chat, starts, held = load_streams(args.work, tok)
    print(f"austen tokens {len(austen)}, chat tokens {len(chat)}, held-out tokens {len(held)}", flush=True)
    model = Gemma4(cfg)
    print("params", sum(p.numel() for p in model.parameters()), flush=True)
    decay = [p for n, p in model.named_parameters() if p.dim() == 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.98))
    step, elapsed_before = 0, 0.0
    ckpt = os.path.join(args.work, "ckpt.pt")
    if args.resume and os.path.exists(ckpt):
        st = torch.load(ckpt)
        model.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step, elapsed_before = st["step"], st["elapsed"]
        rng.setstate(st["rng"])
    log = open(os.path.join(args.work, "train_log.tsv"), "a")
    t0 = time.time()
    warmup = 60
    ema = None
    while True:
        elapsed = elapsed_before + time.time() - t0
        if step >= args.steps or elapsed > args.minutes * 60:
            break
        # cosine to 10% over whichever budget (steps or wall time) runs out first
        progress = min(1.0, max(step / args.steps, elapsed / (args.minutes * 60)))
        lr = args.lr * (step / warmup if step < warmup else 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
        for g in opt.param_groups:
            g["lr"] = lr
        x = make_batch(rng, austen, chat, starts, tok.bos_id)
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, cfg.vocab_size), x[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % 25 == 0 or step == 1:
            msg = f"{step}\t{elapsed:.0f}\t{lr:.5f}\t{loss.item():.4f}\t{ema:.4f}"
            if step % 200 == 0:
                msg += f"\theld={heldout_nats(model, held, tok.bos_id):.4f}"
                torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                            "elapsed": elapsed, "rng": rng.getstate(), "cfg": cfg.__dict__}, ckpt)
            print(msg, flush=True)
            log.write(msg + "\n")
            log.flush()
    hn = heldout_nats(model, held, tok.bos_id, max_windows=10 ** 9)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                "elapsed": elapsed_before + time.time() - t0, "rng": rng.getstate(),
                "cfg": cfg.__dict__, "heldout_nats_per_token": hn}, ckpt)
    msg = f"done step {step} elapsed {elapsed_before + time.time() - t0:.0f}s heldout nats/token {hn:.4f}"
    print(msg, flush=True)
    log.write("# " + msg + "\n")


if __name__ == "__main__":
    main()
