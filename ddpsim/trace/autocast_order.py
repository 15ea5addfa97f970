"""The order gradients become ready in under CUDA autocast, found on the meta device.

Autocast casts a lower-precision op's arguments above autograd (``cached_cast`` per argument in
``aten/src/ATen/autocast_mode.h``), right to left as GCC evaluates arguments, so each cast is a
``ToCopyBackward0`` node and a Linear's weight gradient becomes ready before its bias's: the
reverse of float32. The retime's dispatch-level emulation sits below autograd, so this module
replays one backward on ``meta`` with the casts made above autograd, in that order, and reads the
hooks' order. Checked against CPU autocast (``tests/test_retime.py``) and traces captured under
CUDA autocast on an H100 (docs/MODEL.md, "The order gradients become ready in").
"""

from __future__ import annotations

from typing import Any, Sequence

#: ``torch.nn.functional`` / ``torch`` functions CUDA autocast runs in lower precision (the
#: ``lower_precision_fp`` list of ``autocast_mode.cpp`` that reaches Python as these names)
_LOWER_NAMES = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
                "prelu", "scaled_dot_product_attention", "matmul", "mm", "mv", "bmm", "addmm", "addmv", "addr",
                "baddbmm", "addbmm", "einsum", "chain_matmul")


def _cast_mode(dtype: Any) -> Any:
    import torch
    import torch.nn.functional as F
    from torch.overrides import TorchFunctionMode

    lower = {getattr(mod, n) for mod in (F, torch) for n in _LOWER_NAMES if hasattr(mod, n)}
    lower |= {torch.Tensor.matmul, torch.Tensor.__matmul__, torch.Tensor.mm, torch.Tensor.bmm}

    class AutocastAboveAutograd(TorchFunctionMode):
        """Casts the floating-point arguments of autocast's lower-precision functions, last first."""

        def __init__(self) -> None:
            super().__init__()
            self.cached: dict[int, Any] = {}

        def cast(self, x: Any) -> Any:
            if not (isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != dtype):
                return x
            if x.is_leaf and x.requires_grad:
                if id(x) not in self.cached:
                    self.cached[id(x)] = x.to(dtype)
                return self.cached[id(x)]
            return x.to(dtype)

        def __torch_function__(self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            if func in lower:
                cast_kw = {k: self.cast(v) for k, v in reversed(list(kwargs.items()))}
                kwargs = {k: cast_kw[k] for k in kwargs}
                args = tuple(reversed([self.cast(a) for a in reversed(args)]))
            return func(*args, **kwargs)

    return AutocastAboveAutograd()


def autocast_ready_order(spec: Any, params: Sequence[Any], dtype: Any, device: Any,
                         input_dtype: Any = None) -> list[int] | None:
    """Indices of ``params`` in the order their post-accumulate-grad hooks fire in one backward
    of ``spec``'s module on a batch of 2 on ``device`` (float inputs as ``input_dtype``) under
    autocast to ``dtype`` (None: no autocast); None if the model cannot run so."""
    import contextlib

    from ddpsim.trace.models import default_loss, ready_hooks, run_forward, to_device

    fired: list[int] = []
    try:
        batch = to_device(spec.make_batch(2), device, input_dtype)
        with ready_hooks(params, fired.append):
            with _cast_mode(dtype) if dtype is not None else contextlib.nullcontext():
                loss = (spec.loss_fn or default_loss)(run_forward(spec.module, batch))
            loss.backward()
    except (RuntimeError, TypeError, ValueError, NotImplementedError):
        return None
    finally:
        for p in params:
            p.grad = None
    return fired


def reslot(ready_s: Sequence[float | None], fired: Sequence[int], order: Sequence[int]) -> tuple[float | None, ...]:
    """Ready times with the same time slots (the ``k``-th hook to fire keeps the ``k``-th time)
    given to the parameters in ``order`` instead of ``fired``; ``order`` must hold ``fired``'s indices."""
    out = list(ready_s)
    for slot, idx in zip(fired, order):
        out[idx] = ready_s[slot]
    return tuple(out)
