"""The model zoo: models none of ddpsim's constants or fits are chosen on, to check its accuracy:
torchvision's builders (``torchvision.models.<builder>(weights=None)``, the extra ``ddpsim[zoo]``),
torch's ``nn.Transformer`` family (an encoder classifier, an encoder-decoder, an LM with a tied
output projection) and an MLP with a head its forward never uses (``find_unused_parameters``).
Each has a CPU batch size and input shape (:data:`ZOO`); losses are a cross-entropy against class
or token 0. A torchvision built for another torch variant fails to load its C++ operators;
:func:`torchvision_models` then registers fakes of the two schemas its import needs.
"""

from __future__ import annotations

import importlib
import sys
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from ddpsim.errors import InputError, shorten
from ddpsim.trace.models.mlp import MLP

#: the prefix of a zoo model's name (``zoo:resnet18``)
ZOO_PREFIX = "zoo:"


@dataclass(frozen=True, kw_only=True)
class ZooEntry:
    """One zoo model (``name`` after ``zoo:``; ``source`` ``"torchvision"``, the ``zoo`` extra, or
    ``"torch"``), the per-rank CPU batch and one sample's shape it is validated with, a few words on
    what it exercises, and whether it needs ``find_unused_parameters=True`` (gradient-less parameters)."""

    name: str
    source: str
    batch_size: int
    input_shape: tuple[int, ...]
    shape: str
    find_unused_parameters: bool = False


ZOO: dict[str, ZooEntry] = {e.name: e for e in (
    ZooEntry(name="resnet18", source="torchvision", batch_size=4, input_shape=(3, 128, 128),
             shape="CNN with BatchNorm, 11.7 M parameters, 62 tensors"),
    ZooEntry(name="resnet50", source="torchvision", batch_size=2, input_shape=(3, 128, 128),
             shape="bottleneck CNN with BatchNorm, 25.6 M parameters, 161 tensors"),
    ZooEntry(name="mobilenet_v3_small", source="torchvision", batch_size=16, input_shape=(3, 128, 128),
             shape="depthwise convolutions, squeeze-excitation, 2.5 M parameters, 142 tensors"),
    ZooEntry(name="efficientnet_b0", source="torchvision", batch_size=4, input_shape=(3, 128, 128),
             shape="depthwise convolutions, squeeze-excitation, 5.3 M parameters, 213 tensors"),
    ZooEntry(name="convnext_tiny", source="torchvision", batch_size=2, input_shape=(3, 96, 96),
             shape="many small parameters (LayerScale, LayerNorm), 28.6 M parameters, 182 tensors"),
    ZooEntry(name="regnet_y_400mf", source="torchvision", batch_size=8, input_shape=(3, 128, 128),
             shape="grouped convolutions, squeeze-excitation, 4.3 M parameters, 225 tensors"),
    ZooEntry(name="vit_small", source="torchvision", batch_size=8, input_shape=(3, 64, 64),
             shape="attention: torchvision VisionTransformer, 6 layers, width 384, patch 8, 11.1 M parameters"),
    ZooEntry(name="transformer_encoder", source="torch", batch_size=8, input_shape=(128,),
             shape="nn.TransformerEncoder classifier, 4 layers, width 256, 5.3 M parameters"),
    ZooEntry(name="transformer_seq2seq", source="torch", batch_size=8, input_shape=(64,),
             shape="nn.Transformer encoder-decoder, 3+3 layers, width 256, separate embeddings, 11.9 M parameters"),
    ZooEntry(name="branchy_mlp", source="torch", batch_size=256, input_shape=(1024,),
             shape="MLP, 6 x 1024 wide, with an auxiliary head forward never uses (find_unused_parameters)",
             find_unused_parameters=True),
    ZooEntry(name="tied_lm", source="torch", batch_size=8, input_shape=(64,),
             shape="causal LM from nn.TransformerEncoder, 4 layers, width 256, output tied to the embedding, 5.3 M parameters"),
)}


def zoo_names() -> list[str]:
    return sorted(ZOO_PREFIX + n for n in ZOO)


def zoo_entry(name: str) -> ZooEntry:
    """The entry of ``zoo:<name>`` (or ``<name>``); InputError naming the model otherwise."""
    short = name.removeprefix(ZOO_PREFIX)
    try:
        return ZOO[short]
    except KeyError:
        raise InputError(f"model: {shorten(name)} is not a zoo model; expected one of {zoo_names()}") from None


# ---- torchvision --------------------------------------------------------------------------------

_OPS_SHIM: list[Any] = []  # keeps the torch.library.Library of the operator schemas alive


def torchvision_models() -> Any:
    """``torchvision.models``; InputError when torchvision is not installed (see the module
    docstring for the fallback when its C++ operators do not load)."""
    try:
        return importlib.import_module("torchvision.models")
    except ImportError:
        raise InputError("model: the torchvision zoo models need torchvision; expected it installed "
                         "(pip install \"ddpsim[zoo]\", the torchvision release matching your torch)") from None
    except RuntimeError as exc:
        if "torchvision::nms" not in str(exc) or _OPS_SHIM:
            raise
    for mod in [m for m in sys.modules if m == "torchvision" or m.startswith("torchvision.")]:
        del sys.modules[mod]
    lib = torch.library.Library("torchvision", "DEF")
    lib.define("nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    lib.define("qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _OPS_SHIM.append(lib)
    return importlib.import_module("torchvision.models")


def torchvision_available() -> bool:
    try:
        torchvision_models()
    except InputError:
        return False
    return True


# ---- torch's nn.Transformer family -------------------------------------------------------------

class TransformerClassifier(nn.Module):
    """Token embedding + learned positions -> ``nn.TransformerEncoder`` -> mean pool -> Linear."""

    def __init__(self, *, vocab_size: int, max_len: int, d_model: int, nhead: int, num_layers: int, num_classes: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Parameter(torch.zeros(1, max_len, d_model))
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=4 * d_model, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        x = self.embed(tokens) + self.pos[:, :tokens.shape[1]]
        return self.head(self.encoder(x).mean(dim=1))


class TiedTransformerLM(nn.Module):
    """A causal LM: ``nn.TransformerEncoder`` under a causal mask; the output projection's
    weight IS the token embedding (``self.lm_head.weight = self.embed.weight``)."""

    def __init__(self, *, vocab_size: int, max_len: int, d_model: int, nhead: int, num_layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(max_len, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=4 * d_model, dropout=0.0, batch_first=True,
                                           norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab_size, bias=False)
        self.lm_head.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        n = tokens.shape[1]
        x = self.embed(tokens) + self.pos(torch.arange(n, device=tokens.device))
        mask = nn.Transformer.generate_square_subsequent_mask(n, device=tokens.device)
        return self.lm_head(self.norm(self.encoder(x, mask=mask, is_causal=True)))


class Seq2Seq(nn.Module):
    """``nn.Transformer`` encoder-decoder; the source and the (shifted) target are the same
    tokens, embedded by two separate tables; a Linear projects to the vocabulary."""

    def __init__(self, *, vocab_size: int, max_len: int, d_model: int, nhead: int, num_layers: int) -> None:
        super().__init__()
        self.src_embed = nn.Embedding(vocab_size, d_model)
        self.tgt_embed = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Parameter(torch.zeros(1, max_len, d_model))
        self.transformer = nn.Transformer(d_model, nhead, num_encoder_layers=num_layers, num_decoder_layers=num_layers,
                                          dim_feedforward=4 * d_model, dropout=0.0, batch_first=True)
        self.out = nn.Linear(d_model, vocab_size)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        n = tokens.shape[1]
        src = self.src_embed(tokens) + self.pos[:, :n]
        tgt = self.tgt_embed(tokens) + self.pos[:, :n]
        mask = nn.Transformer.generate_square_subsequent_mask(n, device=tokens.device)
        return self.out(self.transformer(src, tgt, tgt_mask=mask, tgt_is_causal=True))


class BranchyMLP(MLP):
    """:class:`ddpsim.trace.models.mlp.MLP` with an auxiliary head that forward never calls: its
    parameters get no gradient (DDP needs ``find_unused_parameters=True``)."""

    def __init__(self, *, in_features: int, width: int, depth: int, num_classes: int) -> None:
        super().__init__(in_features=in_features, width=width, depth=depth, num_classes=num_classes)
        self.aux_head = nn.Linear(width, num_classes)


#: vocabulary of the token models
ZOO_VOCAB_SIZE = 8192


def _zoo_module(entry: ZooEntry, size: int, num_classes: int) -> nn.Module:
    """The module of ``entry``; ``size`` the token models' seq_len or the MLP's input features."""
    name = entry.name
    if entry.source == "torchvision":
        tvm = torchvision_models()
        if name == "vit_small":
            return tvm.VisionTransformer(image_size=64, patch_size=8, num_layers=6, num_heads=6, hidden_dim=384,
                                         mlp_dim=1536, num_classes=num_classes)
        return getattr(tvm, name)(weights=None, num_classes=num_classes)
    if name == "branchy_mlp":
        return BranchyMLP(in_features=size, width=1024, depth=6, num_classes=num_classes)
    if name == "transformer_encoder":
        return TransformerClassifier(vocab_size=ZOO_VOCAB_SIZE, max_len=size, d_model=256, nhead=8, num_layers=4,
                                     num_classes=num_classes)
    if name == "transformer_seq2seq":
        return Seq2Seq(vocab_size=ZOO_VOCAB_SIZE, max_len=size, d_model=256, nhead=8, num_layers=3)
    return TiedTransformerLM(vocab_size=ZOO_VOCAB_SIZE, max_len=size, d_model=256, nhead=8, num_layers=4)


# ---- the builder build_model calls --------------------------------------------------------------

def build_zoo(name: str, seed: int, input_shape: Any, input_dtype: str | None, kwargs: dict[str, Any],
              m: Any) -> Any:
    """The :class:`ddpsim.trace.models.BuiltModel` of ``zoo:<name>``; ``m`` is the package
    :mod:`ddpsim.trace.models` (its checks and batch makers), passed in: it imports this module."""
    entry = zoo_entry(name)
    tokens = entry.source == "torch" and entry.name != "branchy_mlp"
    if tokens and "seq_len" not in kwargs:
        kwargs["seq_len"] = m._shape(input_shape, entry.input_shape, "input_shape", rank=1)[0]
    o = m._options(kwargs, name, {"num_classes": 1000 if entry.source == "torchvision" else 10,
                                  **({"seq_len": entry.input_shape[0]} if tokens else {})})
    if tokens:
        n = o["seq_len"]
        module = _zoo_module(entry, n, o["num_classes"])
        return m._tensor_model(ZOO_PREFIX + entry.name, seed, module, (n,), "int64", m._ce_loss,
                               ZOO_VOCAB_SIZE, seq_len=n, zoo_batch_size=entry.batch_size)
    shape = m._shape(input_shape, entry.input_shape, "input_shape", rank=len(entry.input_shape))
    if entry.name == "vit_small" and shape[1:] != (64, 64):
        raise InputError(f"input_shape: {list(shape)} is not accepted for {shorten(name)}; expected [3, 64, 64] (its image_size)")
    m._torch_dtype(input_dtype or "float32", "input_dtype")  # refused before a model is built
    module = _zoo_module(entry, shape[0], o["num_classes"])
    return m._tensor_model(ZOO_PREFIX + entry.name, seed, module, shape, input_dtype, m._ce_loss,
                           zoo_batch_size=entry.batch_size)
