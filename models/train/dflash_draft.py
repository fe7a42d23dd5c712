"""DFlash block-diffusion draft in PyTorch, written from /work/shared/docs/dflash.md A2.

The draft has no embedding table or head of its own: block tokens are embedded with the target's
raw token_embd rows (no sqrt(D) scale, as llama.cpp v0.4.0 and boltrt run it) and decoded with the
target's tied output head. It is conditioned on the target through "KV injection":

  taps  [T, n_taps, D]  target residual stream at the tapped layers (HF layer outputs)
  c   = hidden_norm(fc(taps.flatten))                      [T, D]    context rows, static
  per layer: K/V = [k_norm(k_proj(c)) roped at the context positions ;
                    k_norm(k_proj(u)) roped at the block positions],  u = input_layernorm(h)
  attention without a causal mask: every block row sees all its context rows and its whole block
  logits of block slot i (i >= 1) = head(norm(h_i)) predict the token AT position p + i.

Training puts many blocks of one sequence into one forward: block a (anchor position p_a, tokens
[x[p_a], MASK x (B-1)] at positions p_a .. p_a+B-1) sees context rows j < p_a and its own rows only.
PyTorch weights are [out, in]; GGUF stores the same bytes as ne = [in, out].
"""
import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class DraftConfig:
    n_embd: int = 256            # D, equals the target's hidden size
    n_layer: int = 2
    n_head: int = 4
    n_head_kv: int = 2
    head_dim: int = 64
    n_ff: int = 256              # SwiGLU width
    block_size: int = 8          # B
    rope_base: float = 10000.0
    rms_eps: float = 1e-6
    mask_token: int = 4          # <mask> of the tiny vocabulary (a real row of token_embd)
    # HF target_layer_ids: outputs of target layers 1 and 2 (= inputs of layers 2 and 3, stored
    # +1 in the GGUF). See MODEL_CARD.md for why these two.
    target_layer_ids: list = field(default_factory=lambda: [1, 2])

    @property
    def n_taps(self):
        return len(self.target_layer_ids)


def rms_norm(x, weight, eps):
    x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x * weight if weight is not None else x


def rope_neox(x, pos, inv_freq):
    """x [..., T, heads, n]; pos [..., T] (broadcast); pairs (i, i + n/2)."""
    ang = pos[..., None].float() * inv_freq                       # [..., T, n/2]
    cos, sin = ang.cos()[..., None, :], ang.sin()[..., None, :]   # [..., T, 1, n/2]
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class DraftLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        D, H, Hkv, hd = cfg.n_embd, cfg.n_head, cfg.n_head_kv, cfg.head_dim
        self.cfg = cfg
        self.attn_norm = nn.Parameter(torch.ones(D))
        self.attn_q = nn.Linear(D, H * hd, bias=False)
        self.attn_k = nn.Linear(D, Hkv * hd, bias=False)
        self.attn_v = nn.Linear(D, Hkv * hd, bias=False)
        self.attn_output = nn.Linear(H * hd, D, bias=False)
        self.attn_q_norm = nn.Parameter(torch.ones(hd))
        self.attn_k_norm = nn.Parameter(torch.ones(hd))
        self.ffn_norm = nn.Parameter(torch.ones(D))
        self.ffn_gate = nn.Linear(D, cfg.n_ff, bias=False)
        self.ffn_up = nn.Linear(D, cfg.n_ff, bias=False)
        self.ffn_down = nn.Linear(cfg.n_ff, D, bias=False)

    def context_kv(self, c, ctx_pos, inv_freq):
        """c [N, T, D] -> K, V [N, T, Hkv, hd] of the context rows."""
        cfg = self.cfg
        N, T, _ = c.shape
        k = self.attn_k(c).view(N, T, cfg.n_head_kv, cfg.head_dim)
        v = self.attn_v(c).view(N, T, cfg.n_head_kv, cfg.head_dim)
        k = rope_neox(rms_norm(k, self.attn_k_norm, cfg.rms_eps), ctx_pos, inv_freq)
        return k, v

    def forward(self, h, blk_pos, ctx_k, ctx_v, allowed, inv_freq):
        """h [N, R, D] block rows; blk_pos [N, R]; ctx_k/v [N, T, Hkv, hd];
        allowed [N, R, T + R] bool (key visible to query)."""
        cfg = self.cfg
        N, R, _ = h.shape
        H, Hkv, hd = cfg.n_head, cfg.n_head_kv, cfg.head_dim
        u = rms_norm(h, self.attn_norm, cfg.rms_eps)
        q = self.attn_q(u).view(N, R, H, hd)
        k = self.attn_k(u).view(N, R, Hkv, hd)
        v = self.attn_v(u).view(N, R, Hkv, hd)
        q = rope_neox(rms_norm(q, self.attn_q_norm, cfg.rms_eps), blk_pos, inv_freq)
        k = rope_neox(rms_norm(k, self.attn_k_norm, cfg.rms_eps), blk_pos, inv_freq)
        k = torch.cat([ctx_k, k], dim=1)                             # [N, T+R, Hkv, hd]
        v = torch.cat([ctx_v, v], dim=1)
        rep = H // Hkv
        qh = q.transpose(1, 2)                                         # [N, H, R, hd]
        kh = k.transpose(1, 2).repeat_interleave(rep, dim=1)           # [N, H, T+R, hd]
        vh = v.transpose(1, 2).repeat_interleave(rep, dim=1)
        scores = (qh @ kh.transpose(-1, -2)) / math.sqrt(hd)
        scores = scores.masked_fill(~allowed[:, None], float("-inf"))
        o = (scores.softmax(-1) @ vh).transpose(1, 2).reshape(N, R, H * hd)
        h = h + self.attn_output(o)
        f = rms_norm(h, self.ffn_norm, cfg.rms_eps)
        return h + self.ffn_down(F.silu(self.ffn_gate(f)) * self.ffn_up(f))


class DFlashDraft(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        D = cfg.n_embd
        self.fc = nn.Linear(cfg.n_taps * D, D, bias=False)
        self.hidden_norm = nn.Parameter(torch.ones(D))   # GGUF enc.output_norm
        self.layers = nn.ModuleList(DraftLayer(cfg) for _ in range(cfg.n_layer))
        self.output_norm = nn.Parameter(torch.ones(D))
        inv = cfg.rope_base ** (-torch.arange(0, cfg.head_dim // 2, dtype=torch.float64) * 2 / cfg.head_dim)
        self.register_buffer("inv_freq", inv.float(), persistent=False)
        for p in self.parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=1.0 / math.sqrt(p.shape[1]))

    def forward(self, taps, block_tokens, anchors, embed, blk_len=None):
        """Hidden states of every block row.

        taps [N, T, n_taps, D]   target taps of positions 0..T-1 (padding rows are never seen)
        block_tokens [N, A, B]   [x[p_a], MASK, ...] per block
        anchors [N, A]           p_a: block a sits at positions p_a .. p_a+B-1 and sees context < p_a
        embed [V, D]             the target's token_embd (frozen)
        blk_len [N, A] or None   rows of each block that exist (2..B; the engine drafts shorter
                                 blocks when its adaptive length is below B-1): later rows are
                                 invisible as keys and their outputs meaningless
        returns y [N, A, B, D] = output_norm(h)
        """
        cfg = self.cfg
        N, T = taps.shape[:2]
        A, B = block_tokens.shape[1:]
        R = A * B
        c = rms_norm(self.fc(taps.reshape(N, T, -1)), self.hidden_norm, cfg.rms_eps)   # [N, T, D]
        ctx_pos = torch.arange(T, device=taps.device).expand(N, T)
        blk_pos = (anchors[:, :, None] + torch.arange(B, device=taps.device)).reshape(N, R)
        # visibility: context j < p_a; block rows of the same block only
        ctx_ok = torch.arange(T)[None, None, :] < anchors[:, :, None]                # [N, A, T]
        ctx_ok = ctx_ok[:, :, None, :].expand(N, A, B, T).reshape(N, R, T)
        blk_id = torch.arange(R) // B
        blk_ok = (blk_id[:, None] == blk_id[None, :]).expand(N, R, R)
        if blk_len is not None:
            slot = torch.arange(R) % B
            exists = slot[None, None, :] < blk_len.repeat_interleave(B, dim=1)[:, None, :]
            blk_ok = blk_ok & exists                                                   # [N, R, R]
        allowed = torch.cat([ctx_ok, blk_ok], dim=-1)
        h = embed[block_tokens.reshape(N, R)]                                          # [N, R, D]
        for layer in self.layers:
            ck, cv = layer.context_kv(c, ctx_pos, self.inv_freq)
            h = layer(h, blk_pos, ck, cv, allowed, self.inv_freq)
        return rms_norm(h, self.output_norm, cfg.rms_eps).view(N, A, B, -1)

    @torch.no_grad()
    def propose(self, taps, last_token, n, embed):
        """Greedy draft of n tokens after last_token (at position T) given taps [T, n_taps, D]."""
        block = torch.full((1, 1, n + 1), self.cfg.mask_token, dtype=torch.long)
        block[0, 0, 0] = last_token
        T = taps.shape[0]
        y = self.forward(taps[None], block, torch.tensor([[T]]), embed)[0, 0]          # [n+1, D]
        return (y[1:] @ embed.t()).argmax(-1).tolist()
