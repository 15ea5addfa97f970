"""GPT-2 decoder (nanoGPT layout): token + position embeddings, ``n_layer`` pre-LN blocks
(causal self-attention ``c_attn``/``c_proj``, MLP ``c_fc``/``c_proj``), final LN, LM head tied to
``wte`` (DDP sees it once, as ``transformer.wte.weight``). The published sizes (vocab 50257,
context 1024): 124M = 12 x d768, 350M = 24 x d1024, 1.5B = 48 x d1600. No dropout.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True, kw_only=True)
class GPT2Config:
    n_layer: int = 12
    n_embd: int = 768
    n_head: int = 12
    vocab_size: int = 50257
    block_size: int = 1024


class CausalSelfAttention(nn.Module):
    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.c_attn = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.c_proj = nn.Linear(cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.c_attn(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(cfg.n_embd)
        self.attn = CausalSelfAttention(cfg)
        self.ln_2 = nn.LayerNorm(cfg.n_embd)
        d = cfg.n_embd
        self.mlp = nn.Sequential(OrderedDict(c_fc=nn.Linear(d, 4 * d), gelu=nn.GELU(approximate="tanh"),
                                             c_proj=nn.Linear(4 * d, d)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT2(nn.Module):
    def __init__(self, cfg: GPT2Config) -> None:
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(cfg.vocab_size, cfg.n_embd),
            wpe=nn.Embedding(cfg.block_size, cfg.n_embd),
            h=nn.ModuleList([Block(cfg) for _ in range(cfg.n_layer)]),
            ln_f=nn.LayerNorm(cfg.n_embd),
        ))
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        self.lm_head.weight = self.transformer.wte.weight  # weight tying
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / (2 * cfg.n_layer) ** 0.5 if name.endswith("c_proj.weight") else 0.02
                nn.init.normal_(p, mean=0.0, std=std)
            elif name.endswith(".bias"):
                nn.init.zeros_(p)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        pos = torch.arange(t, dtype=torch.long, device=idx.device)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)
        for block in self.transformer.h:
            x = block(x)
        return self.lm_head(self.transformer.ln_f(x))
