"""Train a DFlash draft (dflash_draft.py) for models/tiny on CPU, by self-distillation.

The draft is scored against the target's *greedy* output, so it is trained on that: prompts from
the tiny model's training data (Austen paragraph openings and chat prompts cut at the model turn,
training split only) are continued greedily by the target itself with boltrt, and the draft learns
to predict those continuations from the target's hidden states (shared/docs/dflash.md A2,
"Training facts": random anchors in the generated part, blocks [anchor, MASK x (B-1)] that see
context strictly before their anchor, CE weighted exp(-(k-1)/gamma) over block slot k).

  train_dflash.py gen    WORK --boltrt BIN --model tiny-q8_0.gguf [--n-austen N --n-chat M]
  train_dflash.py gen-real WORK --model tiny-f32.gguf     (warm-up data: real text)
  train_dflash.py taps   WORK --model tiny-f32.gguf         (target taps, PyTorch, f16 on disk)
  train_dflash.py train  WORK --model tiny-f32.gguf [--minutes 20] [--resume] [--init CKPT]
                                                            (checkpoints WORK/draft_ckpt.pt)
  train_dflash.py export WORK OUT.gguf --model tiny-f32.gguf [--type q8_0|f32]
  train_dflash.py eval   WORK --model tiny-f32.gguf         (greedy acceptance, in PyTorch)

WORK holds prepare_data.py's output (austen_train.txt, chat_train.jsonl, chat_heldout.jsonl).
Single-threaded; run it under `nice`. The shipped models/tiny/tiny-dflash.gguf was made by
(R, D1, D2: three copies of prepare_data.py's output; T = models/tiny/tiny-)
  gen-real R --model T f32.gguf;  taps R --model T f32.gguf
  train R --model T f32.gguf --minutes 8 --steps 300                       (warm-up, 79 steps)
  gen D1 --boltrt B --model T q8_0.gguf --n-austen 300 --n-chat 200;  taps D1 --model T f32.gguf
  gen D2 ... --n-austen 420 --n-chat 280 --seed 5678;  taps D2 --model T f32.gguf --bf16
  train D1 --extra D2 --model T f32.gguf --minutes 22 --batch 8 --anchors 16 --lr 2e-3
        --init R/draft_ckpt.pt                                             (1,500 steps)
  export D1 models/tiny/tiny-dflash.gguf --model T f32.gguf
(T f32.gguf meaning models/tiny/tiny-f32.gguf.) Training is not bit-reproducible across machines
(thread timing decides the warm-up's step count).
"""
import argparse
import json
import math
import os
import random
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

import gguf_io as G
import quants
from check_logits import load_model
from dflash_draft import DFlashDraft, DraftConfig
from tokenizer import Tokenizer

GEN_TOKENS = 128
END_TOKENS = (1, 106)    # <eos>, <turn|>
GAMMA = 4.0              # loss decay over block slots (dflash.md: gamma ~4 for B = 8)


# ---------------------------------------------------------------- prompts
def chat_prompt(conv):
    """Cuts a rendered training conversation at the model turn (as --chat renders the prompt):
    thinking on ends at '<|turn>model\\n', thinking off after the pre-filled empty thought."""
    cut = conv.index("<|turn>model\n") + len("<|turn>model\n")
    empty = "<|channel>thought\n<channel|>"
    if conv.startswith(empty, cut):
        cut += len(empty)
    text = conv[:cut]
    return text[len("<bos>"):] if text.startswith("<bos>") else text


def austen_prompts(path, rng, n):
    paras = [p for p in open(path).read().split("\n\n") if len(p.split()) >= 12]
    out = []
    for _ in range(n):
        words = rng.choice(paras).split()
        out.append(" ".join(words[:rng.randint(4, 30)]))
    return out


def cmd_gen_real(args):
    """Warm-up data without the target's help: real training text, the first 8 tokens as the
    'prompt' and the rest as the 'continuation' (train_dflash.py gen-real WORK --model M)."""
    rng = random.Random(4321)
    tok = Tokenizer.load(args.model)
    paras = [p for p in open(os.path.join(args.work, "austen_train.txt")).read().split("\n\n")
             if len(p.split()) >= 40]
    convs = [json.loads(line) for line in open(os.path.join(args.work, "chat_train.jsonl"))]
    with open(os.path.join(args.work, "draft_data.jsonl"), "w") as out:
        for i in range(args.n_austen + args.n_chat):
            if i < args.n_austen:
                ids = tok.encode(rng.choice(paras), add_bos=True)[:GEN_TOKENS + 8]
            else:
                ids = tok.encode(rng.choice(convs)[len("<bos>"):], add_bos=True)[:GEN_TOKENS + 8]
            out.write(json.dumps({"prompt": ids[:8], "gen": ids[8:]}) + "\n")


def cmd_gen(args):
    rng = random.Random(args.seed)
    tok = Tokenizer.load(args.model)
    prompts = austen_prompts(os.path.join(args.work, "austen_train.txt"), rng, args.n_austen)
    convs = [json.loads(line) for line in open(os.path.join(args.work, "chat_train.jsonl"))]
    prompts += [chat_prompt(c) for c in rng.sample(convs, args.n_chat)]
    rng.shuffle(prompts)
    out_path = os.path.join(args.work, "draft_data.jsonl")
    done = sum(1 for _ in open(out_path)) if os.path.exists(out_path) else 0
    t0, skipped = time.time(), 0
    with open(out_path, "a") as out:
        for i, p in enumerate(prompts[done:], start=done):
            r = subprocess.run([args.boltrt, "generate", "-m", args.model, "-p", p, "-n", str(GEN_TOKENS),
                                "--temp", "0", "--json", "-t", "1"], capture_output=True, text=True)
            if r.returncode != 0:
                sys.exit(f"boltrt failed on prompt {i}: {r.stderr}")
            res = json.loads(r.stdout)
            ids = tok.encode(p, add_bos=True)
            if len(ids) != res["n_prompt_tokens"]:  # tokenizers disagree: never train on it
                skipped += 1
                ids = None
            out.write(json.dumps({"prompt": ids, "gen": res["tokens"]}) + "\n")
            if i % 50 == 0:
                out.flush()
                print(f"{i + 1}/{len(prompts)} {time.time() - t0:.0f}s skipped {skipped}", flush=True)


# ---------------------------------------------------------------- target taps
@torch.no_grad()
def target_taps(model, tokens, layer_ids):
    """Residual stream after each target layer in layer_ids (HF ids): [N, T, len(ids), D].
    Same computation as Gemma4.forward (gemma4.py), stopping before the final norm."""
    cfg = model.cfg
    N, T = tokens.shape
    D, L, P = cfg.n_embd, cfg.n_layer, cfg.n_embd_per_layer
    pos = torch.arange(T)
    h = model.token_embd[tokens] * math.sqrt(D)
    t = (model.per_layer_token_embd[tokens] * math.sqrt(P)).view(N, T, L, P)
    c = (model.per_layer_model_proj(h) * (1.0 / math.sqrt(D))).view(N, T, L, P)
    c = (c * torch.rsqrt(c.pow(2).mean(-1, keepdim=True) + cfg.rms_eps)) * model.per_layer_proj_norm
    ple = (c + t) * (1.0 / math.sqrt(2.0))
    kv_store, taps = {}, {}
    for il, layer in enumerate(model.layers):
        if il > max(layer_ids):
            break
        h = layer(h, ple[:, :, il], pos, kv_store)
        taps[il] = h
    return torch.stack([taps[i] for i in layer_ids], dim=2)


def load_sequences(work):
    seqs = []
    for line in open(os.path.join(work, "draft_data.jsonl")):
        d = json.loads(line)
        if d["prompt"] is None or len(d["gen"]) < 2:
            continue
        seqs.append((len(d["prompt"]), d["prompt"] + d["gen"]))
    return seqs


def cmd_taps(args):
    torch.set_num_threads(1)
    cfg = DraftConfig()
    model = load_model(args.model)
    seqs = load_sequences(args.work)
    T = max(len(s) for _, s in seqs)
    taps = np.zeros((len(seqs), T, cfg.n_taps, cfg.n_embd), np.float16)
    tokens = np.zeros((len(seqs), T), np.int64)
    lens = np.array([len(s) for _, s in seqs])
    plens = np.array([p for p, _ in seqs])
    t0 = time.time()
    for b in range(0, len(seqs), 16):
        group = seqs[b:b + 16]
        t = max(len(s) for _, s in group)
        x = torch.zeros((len(group), t), dtype=torch.long)  # right padding: causal, never seen
        for i, (_, s) in enumerate(group):
            x[i, :len(s)] = torch.tensor(s)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=args.bf16):
            taps[b:b + len(group), :t] = target_taps(model, x, cfg.target_layer_ids).float().numpy()
        tokens[b:b + len(group), :t] = x.numpy()
        if b % 160 == 0:
            print(f"taps {b}/{len(seqs)} {time.time() - t0:.0f}s", flush=True)
    np.savez(os.path.join(args.work, "draft_taps.npz"), taps=taps, tokens=tokens, lens=lens, plens=plens)
    print(f"{len(seqs)} sequences, {lens.sum()} tokens, {lens.sum() - plens.sum()} generated")


# ---------------------------------------------------------------- training
# Words of the prompts acceptance is measured on (measure_dflash.py, the CLI test): training
# sequences whose prompt contains one are dropped, so the measurement is on unseen prompts.
MEASURED = ["truth universally", "Emma Woodhouse", "Wentworth had no fortune", "evening passed quietly",
            "garden", "347", "586", "excellent", "letter"]


def load_taps(works, tok):
    """draft_taps.npz of every WORK dir, concatenated (sequences padded to the longest)."""
    ds = [np.load(os.path.join(w, "draft_taps.npz")) for w in works]
    T = max(d["tokens"].shape[1] for d in ds)
    pad = lambda a: np.pad(a, [(0, 0), (0, T - a.shape[1])] + [(0, 0)] * (a.ndim - 2))
    taps = np.concatenate([pad(d["taps"]) for d in ds])
    tokens = np.concatenate([pad(d["tokens"]) for d in ds])
    lens = np.concatenate([d["lens"] for d in ds])
    plens = np.concatenate([d["plens"] for d in ds])
    keep = [i for i in range(len(lens))
            if not any(m in tok.decode(tokens[i, :plens[i]].tolist()) for m in MEASURED)]
    print(f"{len(lens)} sequences, {len(lens) - len(keep)} dropped (measured prompts)", flush=True)
    return taps[keep], tokens[keep], lens[keep], plens[keep]


def make_batch(rng, data, idx, cfg, n_anchor):
    """Blocks of the sequences idx: anchors p in [prompt length, len-2] (positions of generated
    tokens, as at inference the first anchor is the first generated token); block lengths are B
    for 60% of the sequences, else uniform in 2..B (the adaptive engine drafts short blocks)."""
    B = cfg.block_size
    taps, tokens, lens, plens = data
    T = int(lens[idx].max())
    anchors = np.zeros((len(idx), n_anchor), np.int64)
    blk_len = np.zeros((len(idx), n_anchor), np.int64)
    for i, s in enumerate(idx):
        lo, hi = int(plens[s]), int(lens[s]) - 2
        cand = list(range(lo, hi + 1))
        picks = rng.sample(cand, min(n_anchor, len(cand)))
        picks += [rng.choice(cand) for _ in range(n_anchor - len(picks))]
        anchors[i] = picks
        blk_len[i] = B if rng.random() < 0.6 else rng.randint(2, B)
    x = torch.from_numpy(tokens[idx, :T])
    pos = torch.from_numpy(anchors)[:, :, None] + torch.arange(B)           # [N, A, B]
    lab_pos = pos.clamp(max=T - 1)
    labels = torch.gather(x[:, None, :].expand(-1, n_anchor, -1), 2, lab_pos)
    valid = (pos < torch.from_numpy(lens[idx])[:, None, None]) & \
            (torch.arange(B) < torch.from_numpy(blk_len)[:, :, None]) & (torch.arange(B) >= 1)
    block = torch.full_like(labels, cfg.mask_token)
    block[:, :, 0] = labels[:, :, 0]
    t = torch.from_numpy(taps[idx, :T].astype(np.float32))
    return t, block, torch.from_numpy(anchors), torch.from_numpy(blk_len), labels, valid


def loss_fn(draft, embed, batch):
    t, block, anchors, blk_len, labels, valid = batch
    B = block.shape[-1]
    # Debian's PyTorch has no fast f32 BLAS, but its oneDNN bf16 matmul is ~15x faster: run the
    # matrices in bf16 (weights and optimizer stay f32), the loss in f32.
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = draft(t, block, anchors, embed, blk_len)                         # [N, A, B, D]
        logits = y @ embed.t()
    logits = logits.float()
    w = torch.exp(-(torch.arange(B, dtype=torch.float32) - 1).clamp(min=0) / GAMMA)
    w = (w * valid).float()
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), labels.reshape(-1), reduction="none")
    loss = (ce * w.reshape(-1)).sum() / w.sum()
    acc = ((logits.argmax(-1) == labels) & valid).sum().item() / valid.sum().item()
    return loss, acc


def split(n):
    """Last 5% of the (shuffled) sequences are a validation set."""
    cut = int(n * 0.95)
    return np.arange(cut), np.arange(cut, n)


def cmd_train(args):
    torch.set_num_threads(1)
    torch.manual_seed(1234)
    rng = random.Random(1234)
    cfg = DraftConfig()
    data = load_taps([args.work] + args.extra, Tokenizer.load(args.model))
    train_idx, val_idx = split(len(data[2]))
    embed = load_model(args.model).token_embd.detach()
    draft = DFlashDraft(cfg)
    print("draft params", sum(p.numel() for p in draft.parameters()), flush=True)
    decay = [p for p in draft.parameters() if p.dim() == 2]
    no_decay = [p for p in draft.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args.lr, betas=(0.9, 0.98))
    ckpt = os.path.join(args.work, "draft_ckpt.pt")
    step, elapsed_before = 0, 0.0
    if args.init:  # weights only (e.g. from the warm-up run on real text); fresh optimizer
        draft.load_state_dict(torch.load(args.init)["model"])
    if args.resume and os.path.exists(ckpt):
        st = torch.load(ckpt)
        draft.load_state_dict(st["model"])
        opt.load_state_dict(st["opt"])
        step, elapsed_before = st["step"], st["elapsed"]
        rng.setstate(st["rng"])
    vrng = random.Random(99)
    val_batches = [make_batch(vrng, data, val_idx[i:i + 16], cfg, 16) for i in range(0, len(val_idx), 16)]

    def validate():
        draft.eval()
        with torch.no_grad():
            r = [loss_fn(draft, embed, b) for b in val_batches]
        draft.train()
        return sum(x[0].item() for x in r) / len(r), sum(x[1] for x in r) / len(r)

    def save(elapsed):
        torch.save({"model": draft.state_dict(), "opt": opt.state_dict(), "step": step,
                    "elapsed": elapsed, "rng": rng.getstate(), "cfg": cfg.__dict__}, ckpt)

    log = open(os.path.join(args.work, "draft_train_log.tsv"), "a")
    t0, ema, warmup = time.time(), None, 30
    while True:
        elapsed = elapsed_before + time.time() - t0
        if elapsed > args.minutes * 60 or step >= args.steps:
            break
        progress = min(1.0, max(step / args.steps, elapsed / (args.minutes * 60)))
        lr = args.lr * (step / warmup if step < warmup else 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))
        for g in opt.param_groups:
            g["lr"] = lr
        idx = np.array(rng.sample(list(train_idx), args.batch))
        loss, acc = loss_fn(draft, embed, make_batch(rng, data, idx, cfg, args.anchors))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(draft.parameters(), 1.0)
        opt.step()
        step += 1
        ema = loss.item() if ema is None else 0.95 * ema + 0.05 * loss.item()
        if step % 25 == 0 or step == 1:
            msg = f"{step}\t{elapsed:.0f}\t{lr:.5f}\t{loss.item():.4f}\t{ema:.4f}\tacc={acc:.3f}"
            if step % 100 == 0:
                vl, va = validate()
                msg += f"\tval_loss={vl:.4f}\tval_acc={va:.3f}"
                save(elapsed)
            print(msg, flush=True)
            log.write(msg + "\n")
            log.flush()
    vl, va = validate()
    save(elapsed_before + time.time() - t0)
    msg = f"done step {step} elapsed {elapsed_before + time.time() - t0:.0f}s val_loss {vl:.4f} val_acc {va:.3f}"
    print(msg, flush=True)
    log.write("# " + msg + "\n")


# ---------------------------------------------------------------- export
TOKENIZER_KEYS = [("tokenizer.ggml.model", G.STRING, None), ("tokenizer.ggml.tokens", G.ARRAY, G.STRING),
                  ("tokenizer.ggml.scores", G.ARRAY, G.F32), ("tokenizer.ggml.token_type", G.ARRAY, G.I32),
                  ("tokenizer.ggml.merges", G.ARRAY, G.STRING), ("tokenizer.ggml.bos_token_id", G.U32, None),
                  ("tokenizer.ggml.eos_token_id", G.U32, None), ("tokenizer.ggml.unknown_token_id", G.U32, None),
                  ("tokenizer.ggml.padding_token_id", G.U32, None),
                  ("tokenizer.ggml.add_bos_token", G.BOOL, None), ("tokenizer.ggml.add_space_prefix", G.BOOL, None),
                  ("tokenizer.chat_template", G.STRING, None)]


def cmd_export(args):
    st = torch.load(os.path.join(args.work, "draft_ckpt.pt"), map_location="cpu")
    cfg = DraftConfig(**st["cfg"])
    s = {k: v.float().numpy() for k, v in st["model"].items()}
    meta, _ = G.read_gguf(args.model, want_tensors=False)
    w = G.GGUFWriter(args.out)
    a = "dflash."
    w.add("general.architecture", "dflash", G.STRING)
    w.add("general.name", "boltrt tiny gemma4 dflash draft", G.STRING)
    w.add("general.license", "MIT", G.STRING)
    w.add("general.file_type", {"f32": 0, "q8_0": 7}[args.type], G.U32)
    w.add("general.quantization_version", 2, G.U32)
    w.add(a + "context_length", meta["gemma4.context_length"], G.U32)
    w.add(a + "embedding_length", cfg.n_embd, G.U32)
    w.add(a + "block_count", cfg.n_layer, G.U32)
    w.add(a + "feed_forward_length", cfg.n_ff, G.U32)
    w.add(a + "attention.head_count", cfg.n_head, G.U32)
    w.add(a + "attention.head_count_kv", cfg.n_head_kv, G.U32)
    w.add(a + "attention.key_length", cfg.head_dim, G.U32)
    w.add(a + "attention.value_length", cfg.head_dim, G.U32)
    w.add(a + "attention.layer_norm_rms_epsilon", cfg.rms_eps, G.F32)
    w.add(a + "rope.freq_base", cfg.rope_base, G.F32)
    w.add(a + "block_size", cfg.block_size, G.U32)
    # llama.cpp taps the *input* of layer k = the output of layer k-1: HF ids + 1 (dflash.md A3.1)
    w.add(a + "target_layers", [i + 1 for i in cfg.target_layer_ids], G.ARRAY, G.I32)
    for key, vt, et in TOKENIZER_KEYS:  # the draft ships no tokenizer: copy the target's
        w.add(key, meta[key], vt, et)
    w.add("tokenizer.ggml.mask_token_id", cfg.mask_token, G.U32)
    qt = G.GGML_Q8_0 if args.type == "q8_0" else G.GGML_F32

    def add(name, arr, matrix):
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        ne = list(reversed(arr.shape))
        if matrix and qt == G.GGML_Q8_0:
            w.add_tensor(name, ne, qt, quants.QUANTIZERS["q8_0"](arr))
        else:
            w.add_tensor(name, ne, G.GGML_F32, arr.tobytes())

    add("fc.weight", s["fc.weight"], True)
    add("enc.output_norm.weight", s["hidden_norm"], False)
    add("output_norm.weight", s["output_norm"], False)
    for il in range(cfg.n_layer):
        p, q = f"blk.{il}.", f"layers.{il}."
        for name in ("attn_q", "attn_k", "attn_v", "attn_output", "ffn_gate", "ffn_up", "ffn_down"):
            add(p + name + ".weight", s[q + name + ".weight"], True)
        for name in ("attn_norm", "attn_q_norm", "attn_k_norm", "ffn_norm"):
            add(p + name + ".weight", s[q + name], False)
    w.write()
    print(f"{args.out}: {os.path.getsize(args.out) / 1e6:.3f} MB, step {st['step']}")


# ---------------------------------------------------------------- evaluation
@torch.no_grad()
def greedy_acceptance(model, draft, prompt, n_gen, n_draft):
    """Runs the speculative loop (dflash.md A5) greedily with full recomputation: returns
    (tokens, mean tokens committed per verify round incl. the bonus token)."""
    cfg = draft.cfg
    embed = model.token_embd
    seq = list(prompt)
    seq.append(int(model(torch.tensor([seq]))[0, -1].argmax()))
    rounds, gen = 0, 1
    while gen < n_gen:
        taps = target_taps(model, torch.tensor([seq[:-1]]), cfg.target_layer_ids)[0]
        k = min(n_draft, n_gen - gen)
        d = draft.propose(taps, seq[-1], k, embed) if k > 0 else []
        logits = model(torch.tensor([seq + d]))[0, len(seq) - 1:]
        pred = logits.argmax(-1).tolist()
        a = 0
        while a < len(d) and d[a] == pred[a]:
            a += 1
        seq += d[:a] + [pred[a]]
        gen += a + 1
        rounds += 1
        if any(t in END_TOKENS for t in seq[len(prompt):]):
            break
    return seq[len(prompt):], gen / max(rounds, 1)


def cmd_eval(args):
    torch.set_num_threads(1)
    st = torch.load(os.path.join(args.work, "draft_ckpt.pt"), map_location="cpu")
    cfg = DraftConfig(**st["cfg"])
    draft = DFlashDraft(cfg)
    draft.load_state_dict(st["model"])
    draft.eval()
    model = load_model(args.model)
    tok = Tokenizer.load(args.model)
    held = [p for p in open(os.path.join(args.work, "austen_heldout.txt")).read().split("\n\n")
            if len(p.split()) >= 12][:args.n]
    prompts = [" ".join(p.split()[:10]) for p in held]
    prompts += [chat_prompt(json.loads(l)) for l in open(os.path.join(args.work, "chat_heldout.jsonl"))][:args.n]
    taus = []
    for p in prompts:
        _, tau = greedy_acceptance(model, draft, tok.encode(p, add_bos=True), 64, cfg.block_size - 1)
        taus.append(tau)
        print(f"tau {tau:.2f}  {p[:60]!r}", flush=True)
    print(f"mean tau {np.mean(taus):.3f} over {len(taus)} prompts")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    g = sub.add_parser("gen")
    g.add_argument("work")
    g.add_argument("--boltrt", required=True)
    g.add_argument("--model", required=True)
    g.add_argument("--n-austen", type=int, default=360)
    g.add_argument("--n-chat", type=int, default=240)
    g.add_argument("--seed", type=int, default=1234)
    gr = sub.add_parser("gen-real")
    gr.add_argument("work")
    gr.add_argument("--model", required=True)
    gr.add_argument("--n-austen", type=int, default=200)
    gr.add_argument("--n-chat", type=int, default=100)
    t = sub.add_parser("taps")
    t.add_argument("work")
    t.add_argument("--model", required=True)
    t.add_argument("--bf16", action="store_true", help="bf16 matrices (~4x faster, ~1%% error)")
    tr = sub.add_parser("train")
    tr.add_argument("work")
    tr.add_argument("--model", required=True)
    tr.add_argument("--minutes", type=float, default=20)
    tr.add_argument("--steps", type=int, default=1500)
    tr.add_argument("--lr", type=float, default=2e-3)
    tr.add_argument("--batch", type=int, default=6)
    tr.add_argument("--anchors", type=int, default=8)
    tr.add_argument("--resume", action="store_true")
    tr.add_argument("--init", help="start from this checkpoint's weights")
    tr.add_argument("--extra", nargs="*", default=[], help="more WORK dirs with draft_taps.npz")
    e = sub.add_parser("export")
    e.add_argument("work")
    e.add_argument("out")
    e.add_argument("--model", required=True)
    e.add_argument("--type", default="q8_0", choices=["q8_0", "f32"])
    ev = sub.add_parser("eval")
    ev.add_argument("work")
    ev.add_argument("--model", required=True)
    ev.add_argument("--n", type=int, default=8)
    args = ap.parse_args()
    {"gen": cmd_gen, "gen-real": cmd_gen_real, "taps": cmd_taps, "train": cmd_train, "export": cmd_export, "eval": cmd_eval}[args.cmd](args)


if __name__ == "__main__":
    main()
