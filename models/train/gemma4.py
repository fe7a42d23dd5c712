"""Gemma 4 text decoder in PyTorch, written from /work/shared/docs/gemma4.md §5.

Covers what E2B/E4B use: per-layer embeddings (PLE), sliding-window and full layers with their own
head dims and RoPE (partial "proportional" rotation on full layers), shared-KV tail layers, Q/K norms
and a weightless V norm, attention scale 1.0, GELU-tanh gated MLP, sandwich norms, a per-layer
output scalar, the final logit soft-cap and a tied output head.

PyTorch weights are [out, in]; GGUF stores the same bytes as ne = [in, out].
"""
import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class Config:
    vocab_size: int = 1920
    n_embd: int = 256               # D
    n_layer: int = 4                # L
    n_head: int = 4                 # H (query heads)
    n_head_kv: int = 1              # Hkv
    head_dim_swa: int = 64          # SWA layers: H*64 = 256
    head_dim_full: int = 128        # full layers: H*128 = 512
    n_ff: int = 256
    n_embd_per_layer: int = 256     # P
    swa_pattern: list = field(default_factory=lambda: [True, False, True, False])
    shared_kv_layers: int = 2       # layers 2,3 reuse the KV of layers 0 (SWA) and 1 (full)
    sliding_window: int = 128
    rope_base_swa: float = 10000.0
    rope_base_full: float = 1000000.0
    partial_rotary_factor: float = 0.25  # full layers rotate 1/4 of the head dim
    rms_eps: float = 1e-6
    softcap: float = 30.0
    context_length: int = 512

    def head_dim(self, il):
        return self.head_dim_swa if self.swa_pattern[il] else self.head_dim_full

    @property
    def n_layer_kv_from_start(self):
        return self.n_layer - self.shared_kv_layers

    def kv_source(self, il):
        """llama.cpp rule (gemma4.md §5.5): shared SWA layers read n_kv-2, shared full n_kv-1."""
        if il < self.n_layer_kv_from_start:
            return il
        return self.n_layer_kv_from_start - (2 if self.swa_pattern[il] else 1)

    def rope_freq_factors(self):
        """rope_freqs for full layers: 1.0 for rotated pairs, 1e30 (= no rotation) for the rest."""
        half = self.head_dim_full // 2
        n_rot_pairs = int(self.partial_rotary_factor * self.head_dim_full / 2)
        return [1.0] * n_rot_pairs + [1e30] * (half - n_rot_pairs)


def rms_norm(x, weight, eps):
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x * weight if weight is not None else x


def gelu_tanh(x):
    return F.gelu(x, approximate="tanh")


def rope_neox(x, pos, inv_freq):
    """x [B, T, heads, n]; pairs (i, i + n/2); inv_freq [n/2] (0 = pair not rotated)."""
    ang = pos[:, None].float() * inv_freq[None, :]           # [T, n/2]
    cos, sin = ang.cos()[None, :, None, :], ang.sin()[None, :, None, :]
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Layer(nn.Module):
    def __init__(self, cfg, il):
        super().__init__()
        D, H, Hkv, hd, P = cfg.n_embd, cfg.n_head, cfg.n_head_kv, cfg.head_dim(il), cfg.n_embd_per_layer
        self.il, self.hd, self.cfg = il, hd, cfg
        self.is_swa = cfg.swa_pattern[il]
        self.has_kv = il < cfg.n_layer_kv_from_start
        self.attn_norm = nn.Parameter(torch.ones(D))
        self.attn_q = nn.Linear(D, H * hd, bias=False)
        # attention scale is 1.0, so start q/k norm weights at hd^-1/4 (logits ~ unit variance)
        self.attn_q_norm = nn.Parameter(torch.full((hd,), hd ** -0.25))
        if self.has_kv:
            self.attn_k = nn.Linear(D, Hkv * hd, bias=False)
            self.attn_v = nn.Linear(D, Hkv * hd, bias=False)
            self.attn_k_norm = nn.Parameter(torch.full((hd,), hd ** -0.25))
        self.attn_output = nn.Linear(H * hd, D, bias=False)
        self.post_attention_norm = nn.Parameter(torch.ones(D))
        self.ffn_norm = nn.Parameter(torch.ones(D))
        self.ffn_gate = nn.Linear(D, cfg.n_ff, bias=False)
        self.ffn_up = nn.Linear(D, cfg.n_ff, bias=False)
        self.ffn_down = nn.Linear(cfg.n_ff, D, bias=False)
        self.post_ffw_norm = nn.Parameter(torch.ones(D))
        self.inp_gate = nn.Linear(D, P, bias=False)
        self.proj = nn.Linear(P, D, bias=False)
        self.post_norm = nn.Parameter(torch.ones(D))
        self.layer_output_scale = nn.Parameter(torch.ones(1))
        if self.is_swa:
            inv = cfg.rope_base_swa ** (-torch.arange(0, hd // 2, dtype=torch.float64) * 2 / hd)
        else:
            inv = cfg.rope_base_full ** (-torch.arange(0, hd // 2, dtype=torch.float64) * 2 / hd)
            ff = torch.tensor(cfg.rope_freq_factors(), dtype=torch.float64)
            inv = torch.where(ff > 1e20, torch.zeros_like(inv), inv / ff)
        self.register_buffer("inv_freq", inv.float(), persistent=False)

    def forward(self, h, ple, pos, kv_store):
        cfg, B, T = self.cfg, h.shape[0], h.shape[1]
        eps = cfg.rms_eps
        a = rms_norm(h, self.attn_norm, eps)
        q = self.attn_q(a).view(B, T, cfg.n_head, self.hd)
        q = rope_neox(rms_norm(q, self.attn_q_norm, eps), pos, self.inv_freq)
        if self.has_kv:
            k = self.attn_k(a).view(B, T, cfg.n_head_kv, self.hd)
            v = self.attn_v(a).view(B, T, cfg.n_head_kv, self.hd)
            k = rope_neox(rms_norm(k, self.attn_k_norm, eps), pos, self.inv_freq)
            v = rms_norm(v, None, eps)
            kv_store[self.il] = (k, v)
        else:
            k, v = kv_store[cfg.kv_source(self.il)]
        rep = cfg.n_head // cfg.n_head_kv
        qh = q.transpose(1, 2)                                            # [B, H, T, hd]
        kh = k.transpose(1, 2).repeat_interleave(rep, dim=1)
        vh = v.transpose(1, 2).repeat_interleave(rep, dim=1)
        scores = qh @ kh.transpose(-1, -2)                                 # scale 1.0
        dist = pos[:, None] - pos[None, :]
        allowed = dist >= 0
        if self.is_swa:
            allowed = allowed & (dist < cfg.sliding_window)
        scores = scores.masked_fill(~allowed, float("-inf"))
        o = (scores.softmax(-1) @ vh).transpose(1, 2).reshape(B, T, -1)
        h = h + rms_norm(self.attn_output(o), self.post_attention_norm, eps)
        f = rms_norm(h, self.ffn_norm, eps)
        f = self.ffn_down(gelu_tanh(self.ffn_gate(f)) * self.ffn_up(f))
        h = h + rms_norm(f, self.post_ffw_norm, eps)
        g = gelu_tanh(self.inp_gate(h)) * ple
        h = h + rms_norm(self.proj(g), self.post_norm, eps)
        return h * self.layer_output_scale


class Gemma4(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        D, L, P, V = cfg.n_embd, cfg.n_layer, cfg.n_embd_per_layer, cfg.vocab_size
        self.token_embd = nn.Parameter(torch.randn(V, D) / math.sqrt(D))
        self.per_layer_token_embd = nn.Parameter(torch.randn(V, L * P) / math.sqrt(P))
        self.per_layer_model_proj = nn.Linear(D, L * P, bias=False)
        self.per_layer_proj_norm = nn.Parameter(torch.ones(P))
        self.layers = nn.ModuleList(Layer(cfg, il) for il in range(L))
        self.output_norm = nn.Parameter(torch.ones(D))
        for name, p in self.named_parameters():
            if p.dim() == 2 and "embd" not in name:
                nn.init.normal_(p, std=1.0 / math.sqrt(p.shape[1]))

    def forward(self, tokens):
        cfg = self.cfg
        B, T = tokens.shape
        D, L, P = cfg.n_embd, cfg.n_layer, cfg.n_embd_per_layer
        pos = torch.arange(T)
        h = self.token_embd[tokens] * math.sqrt(D)
        t = (self.per_layer_token_embd[tokens] * math.sqrt(P)).view(B, T, L, P)
        c = (self.per_layer_model_proj(h) * (1.0 / math.sqrt(D))).view(B, T, L, P)
        c = rms_norm(c, self.per_layer_proj_norm, cfg.rms_eps)
        ple = (c + t) * (1.0 / math.sqrt(2.0))
        kv_store = {}
        for il, layer in enumerate(self.layers):
            h = layer(h, ple[:, :, il], pos, kv_store)
        h = rms_norm(h, self.output_norm, cfg.rms_eps)
        logits = h @ self.token_embd.t()
        return cfg.softcap * torch.tanh(logits / cfg.softcap)
