"""Built-in models and the ``package.module:factory`` loader (torch and stdlib only: the executor
imports it on GPU nodes). Built-in models have the published shapes (torchvision's ResNet-50,
BERT-base, GPT-2), randomly initialised from ``seed``; ``make_batch(batch_size)`` returns CPU
tensors from a seeded ``torch.Generator`` (same size and seed, same bytes); ``loss_fn`` is a
cross-entropy against class 0 (None: the output summed). ``zoo:<name>`` models
(:mod:`ddpsim.trace.models.zoo`) are outside the set ddpsim is tuned on.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

import torch

from ddpsim.errors import InputError, require, shorten

__all__ = ["BuiltModel", "list_models", "build_model", "ddp_params", "default_loss", "to_device",
           "run_forward", "ready_hooks", "make_optimizer"]


@dataclass(frozen=True, kw_only=True)
class BuiltModel:
    """A model ready to be traced or trained: its ``nn.Module`` (CPU), a deterministic
    ``make_batch(batch_size)``, its loss (None: :func:`default_loss`) and ``info`` for a trace's
    environment (seq_len, n_layer, input shape...)."""

    name: str
    module: torch.nn.Module
    make_batch: Callable[[int], Any]
    loss_fn: Callable[[Any], torch.Tensor] | None = None
    info: dict[str, Any] | None = None


def default_loss(output: Any) -> torch.Tensor:
    """The loss used when a spec has no ``loss_fn``: the output summed (first element of a tuple/list)."""
    if isinstance(output, (tuple, list)):
        output = output[0]
    if isinstance(output, dict):
        output = next(iter(output.values()))
    return output.float().sum()


def to_device(batch: Any, device: Any, dtype: Any = None) -> Any:
    """``batch`` (a tensor or a tuple of them) on ``device``, floating tensors cast to ``dtype`` (if any)."""
    if isinstance(batch, (tuple, list)):
        return tuple(to_device(b, device, dtype) for b in batch)
    if batch.dtype.is_floating_point and dtype is not None:
        return batch.to(device=device, dtype=dtype)
    return batch.to(device=device)


def run_forward(module: torch.nn.Module, batch: Any) -> Any:
    """``module`` called on ``batch`` (a tuple: its tensors as the arguments)."""
    return module(*batch) if isinstance(batch, tuple) else module(batch)


@contextlib.contextmanager
def ready_hooks(params: Sequence[torch.nn.Parameter], on_ready: Callable[[int], None]) -> Iterator[None]:
    """A post-accumulate-grad hook per parameter calling ``on_ready(index)`` when its gradient is
    ready, as DDP's reducer marks it (``Reducer::autograd_hook``); removed on exit."""
    handles = [p.register_post_accumulate_grad_hook(lambda _p, i=i: on_ready(i))
               for i, p in enumerate(params)]
    try:
        yield
    finally:
        for h in handles:
            h.remove()


def make_optimizer(name: str, params: Sequence[torch.nn.Parameter], sgd_foreach: bool | None = None) -> Any:
    """``"sgd"`` (lr 1e-3, momentum 0.9) or ``"adamw"`` (lr 1e-4, foreach) over ``params``."""
    if name == "sgd":
        return torch.optim.SGD(params, lr=1e-3, momentum=0.9, foreach=sgd_foreach)
    return torch.optim.AdamW(params, lr=1e-4, foreach=True)


def ddp_params(module: torch.nn.Module) -> list[tuple[str, torch.nn.Parameter, bool]]:
    """The parameters DDP's reducer gets, in DDP's order, as ``(name, param, expect_sparse)``.

    Mirrors ``DistributedDataParallel._build_params_for_reducer``: ``named_modules()``, then
    each module's ``named_parameters(recurse=False)`` that require grad, shared parameters
    once (first occurrence keeps its name); ``expect_sparse_gradient`` is ``module.sparse``
    for ``nn.Embedding`` / ``nn.EmbeddingBag``.
    """
    out: list[tuple[str, torch.nn.Parameter, bool]] = []
    seen: set[int] = set()
    for mod_name, mod in module.named_modules():
        for p_name, p in mod.named_parameters(recurse=False):
            if not p.requires_grad or id(p) in seen:
                continue
            seen.add(id(p))
            sparse = bool(mod.sparse) if isinstance(mod, (torch.nn.Embedding, torch.nn.EmbeddingBag)) else False
            out.append((f"{mod_name}.{p_name}" if mod_name else p_name, p, sparse))
    return out


# ---- batch makers ---------------------------------------------------------------------------

#: the dtypes of a model's inputs, by their names in ``torch``
_DTYPES = ("float32", "float64", "float16", "bfloat16", "int64", "int32", "int16", "int8", "uint8",
           "bool")


def _torch_dtype(name: str, field: str) -> torch.dtype:
    require(name in _DTYPES, field, name, f"one of {sorted(_DTYPES)}")
    return getattr(torch, name)


def _random_tensor(gen: torch.Generator, shape: tuple[int, ...], dtype: torch.dtype,
                   high: int) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.randn(shape, generator=gen, dtype=torch.float32).to(dtype)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=gen).bool()
    return torch.randint(0, max(1, high), shape, generator=gen, dtype=torch.int64).to(dtype)


def _batch(seed: int, leaves: Sequence[tuple[Sequence[int], torch.dtype, int]],
           as_tuple: bool = False) -> Callable[[int], Any]:
    """``batch_size ->`` one random tensor per ``(sample shape, dtype, high)`` (integers in ``[0, high)``),
    from one generator seeded with ``seed``: the same for every call; a tuple when ``as_tuple``."""
    def make_batch(batch_size: int) -> Any:
        gen = torch.Generator().manual_seed(seed)
        out = tuple(_random_tensor(gen, (batch_size, *shape), dtype, high) for shape, dtype, high in leaves)
        return out if as_tuple else out[0]
    return make_batch


def _ce_loss(output: Any) -> torch.Tensor:
    """Cross-entropy of every position (or sample) against class 0: the cost of a real LM or
    classification loss (ResNet-50's ImageNet loss)."""
    logits = output[0] if isinstance(output, (tuple, list)) else output
    flat = logits.reshape(-1, logits.shape[-1])
    target = torch.zeros(flat.shape[0], dtype=torch.int64, device=flat.device)
    return torch.nn.functional.cross_entropy(flat.float(), target)


def _pretrain_loss(output: Any) -> torch.Tensor:
    """BERT pre-training: MLM cross-entropy + next-sentence cross-entropy, both against class 0."""
    mlm, nsp = output
    return _ce_loss(mlm) + _ce_loss(nsp)


# ---- registry -------------------------------------------------------------------------------

def _options(kwargs: dict, model: str, defaults: dict[str, int]) -> dict[str, int]:
    """``defaults`` with the given options (each an integer > 0); InputError on an option not among them."""
    opts = {k: kwargs.pop(k, v) for k, v in defaults.items()}
    for k, v in opts.items():
        require(isinstance(v, int) and not isinstance(v, bool) and v > 0, k, v, "an integer > 0")
    if kwargs:
        key = sorted(kwargs)[0]
        raise InputError(f"{key}: {kwargs[key]!r} is not an option of model {model!r}; "
                         f"expected one of: {', '.join(defaults)}")
    return opts


def _tensor_model(name: str, seed: int, module: torch.nn.Module, shape: tuple[int, ...],
                  input_dtype: str | None, loss_fn: Callable[[Any], torch.Tensor] | None,
                  high: int = 2, **info: Any) -> BuiltModel:
    """A model fed random tensors of one sample's ``shape`` (``input_dtype``, float32 by default;
    integers in ``[0, high)``: a token model's vocabulary)."""
    dtype = _torch_dtype(input_dtype or "float32", "input_dtype")
    info = {"input_shape": list(shape), "input_dtype": str(dtype).removeprefix("torch."), **info}
    return BuiltModel(name=name, module=module, make_batch=_batch(seed, [(shape, dtype, high)]),
                      loss_fn=loss_fn, info=info)


def _build_mlp(seed: int, input_shape, input_dtype, kwargs) -> BuiltModel:
    from ddpsim.trace.models.mlp import MLP

    o = _options(kwargs, "mlp", {"width": 256, "depth": 4, "num_classes": 10})
    shape = _shape(input_shape, (o["width"],), "input_shape", rank=1)
    module = MLP(in_features=shape[0], width=o["width"], depth=o["depth"], num_classes=o["num_classes"])
    return _tensor_model("mlp", seed, module, shape, input_dtype, None, width=o["width"], depth=o["depth"])


def _build_resnet50(seed: int, input_shape, input_dtype, kwargs) -> BuiltModel:
    from ddpsim.trace.models.resnet import resnet50

    o = _options(kwargs, "resnet50", {"num_classes": 1000})
    shape = _shape(input_shape, (3, 224, 224), "input_shape", rank=3)
    module = resnet50(num_classes=o["num_classes"])
    return _tensor_model("resnet50", seed, module, shape, input_dtype, _ce_loss)


def _token_options(kwargs: dict, model: str, input_shape: Any, max_len: int, n_layer: int) -> dict[str, int]:
    """``seq_len`` (default: ``input_shape``'s, else 128; at most ``max_len``) and ``n_layer``."""
    if "seq_len" not in kwargs and input_shape is not None:
        kwargs["seq_len"] = _shape(input_shape, (128,), "input_shape", rank=1)[0]
    o = _options(kwargs, model, {"seq_len": 128, "n_layer": n_layer})
    if o["seq_len"] > max_len:
        raise InputError(f"seq_len: {o['seq_len']} is too long; expected an integer in [1, {max_len}]")
    return o


def _build_bert(seed: int, input_shape, input_dtype, kwargs) -> BuiltModel:
    from ddpsim.trace.models.bert import BertConfig, BertForPreTraining

    o = _token_options(kwargs, "bert-base", input_shape, 512, 12)
    cfg = BertConfig(n_layer=o["n_layer"])
    return _tensor_model("bert-base", seed, BertForPreTraining(cfg), (o["seq_len"],), "int64",
                         _pretrain_loss, cfg.vocab_size, **o)


_GPT2 = {"gpt2-124m": (12, 768, 12), "gpt2-350m": (24, 1024, 16), "gpt2-1.5b": (48, 1600, 25)}


def _gpt2_builder(name: str):
    def build(seed: int, input_shape, input_dtype, kwargs) -> BuiltModel:
        from ddpsim.trace.models.gpt2 import GPT2, GPT2Config

        n_layer, n_embd, n_head = _GPT2[name]
        o = _token_options(kwargs, name, input_shape, 1024, n_layer)
        cfg = GPT2Config(n_layer=o["n_layer"], n_embd=n_embd, n_head=n_head)
        return _tensor_model(name, seed, GPT2(cfg), (o["seq_len"],), "int64", _ce_loss,
                             cfg.vocab_size, **o)
    return build


_REGISTRY: dict[str, Callable[..., BuiltModel]] = {
    "mlp": _build_mlp,
    "resnet50": _build_resnet50,
    "bert-base": _build_bert,
    **{name: _gpt2_builder(name) for name in _GPT2},
}


def list_models() -> list[str]:
    return sorted(_REGISTRY)


def _shape(value: Any, default: tuple[int, ...], field: str, rank: int | None = None) -> tuple[int, ...]:
    if value is None:
        return default
    try:
        shape = tuple(value)
    except TypeError:
        shape = ()  # not a sequence
    ints = all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in shape)
    want = f"{rank} positive integers" if rank else "positive integers"
    require(ints and bool(shape) and rank in (None, len(shape)), field, value,
            f"{want} (one sample, without the batch dimension)")
    return shape


def build_model(name_or_factory: str, *, seed: int = 0, input_shape: tuple[int, ...] | None = None,
                input_dtype: str | None = None, **model_kwargs: Any) -> BuiltModel:
    """Build a built-in model (:func:`list_models`), a zoo model ``"zoo:<name>"``
    (:mod:`ddpsim.trace.models.zoo`) or call a ``"pkg.mod:factory"`` with ``model_kwargs``.

    A factory returns an ``nn.Module`` (then ``input_shape`` is required, ``input_dtype`` defaults to
    float32) or ``(module, example_input)`` (batches made like the example, first dim the batch;
    ``info["example_batch_size"]`` its first dim); its module's ``loss_fn`` is used if defined.
    ``seed`` seeds ``torch.manual_seed`` and the batch generator; ``input_shape`` is one sample's
    shape (resnet50 ``(3, H, W)``, mlp ``(features,)``, token models ``(seq_len,)``); built-in options:
    mlp width, depth, num_classes; resnet50 num_classes; bert-base and gpt2-* seq_len, n_layer.
    InputError: unknown name, a factory that fails to import or raises, a bad option, or a model
    without trainable parameters.
    """
    require(isinstance(seed, int) and not isinstance(seed, bool), "seed", seed, "an integer")
    if not isinstance(name_or_factory, str) or not name_or_factory:
        raise InputError(f"model: {shorten(name_or_factory)} is not accepted; expected one of {list_models()} or 'package.module:factory'")
    torch.manual_seed(seed)
    kwargs = dict(model_kwargs)
    if name_or_factory.startswith("zoo:"):
        from ddpsim.trace.models.zoo import build_zoo

        spec = build_zoo(name_or_factory, seed, input_shape, input_dtype, kwargs, sys.modules[__name__])
    elif ":" in name_or_factory:
        spec = _build_factory(name_or_factory, seed, input_shape, input_dtype, kwargs)
    else:
        try:
            builder = _REGISTRY[name_or_factory]
        except KeyError:
            raise InputError(f"model: {shorten(name_or_factory)} is not a built-in model; expected one of {list_models()} or 'package.module:factory'") from None
        spec = builder(seed, input_shape, input_dtype, kwargs)
    if not ddp_params(spec.module):
        raise InputError(f"model: {shorten(name_or_factory)} has no trainable parameters; expected at least one parameter with requires_grad=True")
    return spec


def _build_factory(path: str, seed: int, input_shape, input_dtype, kwargs: dict) -> BuiltModel:
    mod_name, _, attr = path.partition(":")
    require(bool(mod_name and attr), "model", path, "'package.module:factory'")
    try:
        mod = importlib.import_module(mod_name)
    except Exception as exc:  # NOTE: any import failure is the user's module's
        raise InputError(f"model: {shorten(path)} cannot be imported ({type(exc).__name__}: {exc}); expected an importable 'package.module:factory'") from None
    factory = getattr(mod, attr, None)
    if not callable(factory):
        raise InputError(f"model: {shorten(path)} has no callable {attr!r} in {mod_name}; expected 'package.module:factory'")
    try:
        made = factory(**kwargs)
    except Exception as exc:
        raise InputError(f"model: factory {shorten(path)} raised {type(exc).__name__}: {exc}") from None
    loss_fn = getattr(mod, "loss_fn", None)
    loss_fn = loss_fn if callable(loss_fn) else None  # a loss_fn that is no function: ignored
    if isinstance(made, torch.nn.Module):
        if input_shape is None:
            raise InputError(f"input_shape: None is not accepted for factory {shorten(path)} returning a module; expected one sample's shape, e.g. 3,224,224")
        return _tensor_model(path, seed, made, _shape(input_shape, (), "input_shape"), input_dtype, loss_fn,
                             factory_kwargs=_jsonable(kwargs))
    if isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], torch.nn.Module):
        module, example = made
        leaves = list(example) if isinstance(example, (tuple, list)) else [example]
        if not leaves or not all(isinstance(t, torch.Tensor) and t.dim() >= 1 for t in leaves):
            raise InputError(f"model: factory {shorten(path)} returned an example input that is not a tensor or tuple of tensors with a batch dimension")
        # integer inputs drawn in [0, max(example) + 1), so that embedding indices stay valid
        high = [2 if t.dtype.is_floating_point or not t.numel() else int(t.max()) + 1
                for t in leaves]
        make_batch = _batch(seed, [(t.shape[1:], t.dtype, h) for t, h in zip(leaves, high)],
                            isinstance(example, (tuple, list)))
        return BuiltModel(name=path, module=module, make_batch=make_batch, loss_fn=loss_fn,
                         info={"input_shape": [list(t.shape[1:]) for t in leaves] if len(leaves) > 1 else list(leaves[0].shape[1:]),
                               "input_dtype": str(leaves[0].dtype).removeprefix("torch."), "factory_kwargs": _jsonable(kwargs),
                               "example_batch_size": int(leaves[0].shape[0])})
    raise InputError(f"model: factory {shorten(path)} returned {type(made).__name__}; expected an nn.Module or (nn.Module, example_input)")


def _jsonable(d: dict) -> dict:
    return {k: (v if isinstance(v, (int, float, str, bool, type(None))) else repr(v)) for k, v in d.items()}
