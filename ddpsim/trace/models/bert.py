"""BERT-base for pre-training (HuggingFace ``BertForPreTraining`` layout and names).

Embeddings (word 30522, position 512, token type 2, LayerNorm), ``n_layer`` post-LN encoder
layers (``attention.self.{query,key,value}``, ``attention.output.{dense,LayerNorm}``,
``intermediate.dense``, ``output.{dense,LayerNorm}``), pooler, MLM head (transform + decoder
tied to the word embeddings, own bias) and next-sentence head. 12 layers d768:
110,106,428 parameters that DDP reduces (the tied decoder weight once). No dropout.
"""

from __future__ import annotations

from dataclasses import dataclass

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


class BertSelfOutput(nn.Module):
    def __init__(self, cfg: BertConfig, d_in: int) -> None:
        super().__init__()
        self.dense = nn.Linear(d_in, cfg.hidden)
        self.LayerNorm = nn.LayerNorm(cfg.hidden, eps=1e-12)

    def forward(self, h: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(self.dense(h) + residual)


class BertAttention(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.self = BertSelfAttention(cfg)
        self.output = BertSelfOutput(cfg, cfg.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output(self.self(x), x)


class BertIntermediate(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(cfg.hidden, cfg.intermediate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.gelu(self.dense(x))


class BertLayer(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.attention = BertAttention(cfg)
        self.intermediate = BertIntermediate(cfg)
        self.output = BertSelfOutput(cfg, cfg.intermediate)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.attention(x)
        return self.output(self.intermediate(a), a)


class BertEncoder(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.layer = nn.ModuleList([BertLayer(cfg) for _ in range(cfg.n_layer)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layer:
            x = layer(x)
        return x


class BertPooler(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(cfg.hidden, cfg.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.dense(x[:, 0]))


class BertModel(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.embeddings = BertEmbeddings(cfg)
        self.encoder = BertEncoder(cfg)
        self.pooler = BertPooler(cfg)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seq = self.encoder(self.embeddings(ids))
        return seq, self.pooler(seq)


class BertPredictionHeadTransform(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.dense = nn.Linear(cfg.hidden, cfg.hidden)
        self.LayerNorm = nn.LayerNorm(cfg.hidden, eps=1e-12)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.LayerNorm(F.gelu(self.dense(x)))


class BertLMPredictionHead(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.transform = BertPredictionHeadTransform(cfg)
        self.decoder = nn.Linear(cfg.hidden, cfg.vocab_size, bias=False)
        self.bias = nn.Parameter(torch.zeros(cfg.vocab_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.transform(x)) + self.bias


class BertPreTrainingHeads(nn.Module):
    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.predictions = BertLMPredictionHead(cfg)
        self.seq_relationship = nn.Linear(cfg.hidden, 2)

    def forward(self, seq: torch.Tensor, pooled: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.predictions(seq), self.seq_relationship(pooled)


class BertForPreTraining(nn.Module):
    """Returns ``(mlm_logits [B, T, vocab], nsp_logits [B, 2])``."""

    def __init__(self, cfg: BertConfig) -> None:
        super().__init__()
        self.bert = BertModel(cfg)
        self.cls = BertPreTrainingHeads(cfg)
        self.cls.predictions.decoder.weight = self.bert.embeddings.word_embeddings.weight  # tied
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, mean=0.0, std=0.02)
            if isinstance(m, nn.Linear) and m.bias is not None:
                nn.init.zeros_(m.bias)

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        seq, pooled = self.bert(ids)
        return self.cls(seq, pooled)
