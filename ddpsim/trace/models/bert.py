"""BERT-base for pre-training (HuggingFace ``BertForPreTraining`` layout and names).

Embeddings (word 30522, position 512, token type 2, LayerNorm), ``n_layer`` post-LN encoder
layers (``attention.self.{query,key,value}``, ``attention.output.{dense,LayerNorm}``,
``intermediate.dense``, ``output.{dense,LayerNorm}``), pooler, MLM head (transform + decoder
tied to the word embeddings, own bias) and next-sentence head. 12 layers d768:
110,106,428 parameters that DDP reduces (the tied decoder weight once). No dropout.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True, kw_only=True)
class BertConfig:
    n_layer: int = 12
    hidden: int = 768
    n_head: int = 12
    intermediate: int = 3072
    vocab_size: int = 30522
    max_position: int = 512
    type_vocab: int = 2


class BertEmbeddings(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.word_embeddings = nn.Embedding(cfg.vocab_size, cfg.hidden)
        self.position_embeddings = nn.Embedding(cfg.max_position, cfg.hidden)
        self.token_type_embeddings = nn.Embedding(cfg.type_vocab, cfg.hidden)
        self.LayerNorm = nn.LayerNorm(cfg.hidden, eps=1e-12)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        types = torch.zeros_like(ids)
        return self.LayerNorm(self.word_embeddings(ids) + self.position_embeddings(pos) + self.token_type_embeddings(types))


class BertSelfAttention(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.query = nn.Linear(cfg.hidden, cfg.hidden)
        self.key = nn.Linear(cfg.hidden, cfg.hidden)
        self.value = nn.Linear(cfg.hidden, cfg.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (lin(x).view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for lin in (self.query, self.key, self.value))
        return F.scaled_dot_product_attention(q, k, v).transpose(1, 2).reshape(b, t, c)


class Dense(nn.Module):
    """HuggingFace's ``dense`` (+ ``LayerNorm``) blocks: ``LayerNorm(act(dense(x)) + residual)``,
    each part only where given (``BertSelfOutput``, ``BertIntermediate``, ``BertPooler``,
    ``BertPredictionHeadTransform``)."""

    def __init__(self, d_in: int, d_out: int, act: Callable[[torch.Tensor], torch.Tensor] | None = None,
                 norm: bool = False) -> None:
        super().__init__()
        self.dense = nn.Linear(d_in, d_out)
        self.act = act
        self.LayerNorm = nn.LayerNorm(d_out, eps=1e-12) if norm else None

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        y = self.dense(x)
        if self.act is not None:
            y = self.act(y)
        if residual is not None:
            y = y + residual
        return y if self.LayerNorm is None else self.LayerNorm(y)


class BertLayer(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.attention = nn.ModuleDict({"self": BertSelfAttention(cfg),
                                        "output": Dense(cfg.hidden, cfg.hidden, norm=True)})
        self.intermediate = Dense(cfg.hidden, cfg.intermediate, F.gelu)
        self.output = Dense(cfg.intermediate, cfg.hidden, norm=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.attention.output(self.attention.self(x), x)
        return self.output(self.intermediate(a), a)


class BertLMPredictionHead(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.transform = Dense(cfg.hidden, cfg.hidden, F.gelu, norm=True)
        self.decoder = nn.Linear(cfg.hidden, cfg.vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.transform(x)) + self.bias


class BertForPreTraining(nn.Module):
    """Returns ``(mlm_logits [B, T, vocab], nsp_logits [B, 2])``."""

    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.bert = nn.ModuleDict(dict(
            embeddings=BertEmbeddings(cfg),
            encoder=nn.ModuleDict(dict(layer=nn.ModuleList([BertLayer(cfg) for _ in range(cfg.n_layer)]))),
            pooler=Dense(cfg.hidden, cfg.hidden, torch.tanh),
        ))
        self.cls = nn.ModuleDict(dict(predictions=BertLMPredictionHead(cfg),
                                      seq_relationship=nn.Linear(cfg.hidden, 2)))
        self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight  # tied
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seq = self.bert.embeddings(ids)
        for layer in self.bert.encoder.layer:
            seq = layer(seq)
        pooled = self.bert.pooler(seq[:, 0])
        return self.cls.predictions(seq), self.cls.seq_relationship(pooled)
