"""The workload keys of ``ddpsim trace --set`` and ``ddpsim retime --set`` (how a model is built
and run), each with the ``type=`` function that parses it and its bound, declared once for both."""

from __future__ import annotations

from typing import Any

from ddpsim.errors import InputError, shorten
from ddpsim.units import MAX_BATCH_SIZE, MAX_LAYERS, MAX_SEQ_LEN


def parse_shape(text: str) -> tuple[int, ...]:
    """``3,224,224`` -> (3, 224, 224); InputError unless 1 to 8 integers in [1, 2**20]."""
    try:
        shape = tuple(int(x) for x in str(text).split(","))
    except ValueError:
        shape = ()
    if not 1 <= len(shape) <= 8 or not all(1 <= d <= MAX_BATCH_SIZE for d in shape):
        raise InputError(f"--set input_shape: {shorten(text)} is not accepted; expected 1 to 8 comma-separated "
                         f"integers in [1, {MAX_BATCH_SIZE}] like 3,224,224")
    return shape


def model_keys() -> dict[str, Any]:
    """The keys of ``ddpsim trace --set``, each with its ``type=`` (``--from-profile`` refuses them all)."""
    from ddpsim.cli.args import choice, from_parser, int_in, nonempty
    from ddpsim.trace.capture import AUTOCASTS, DTYPES, OPTIMIZERS

    return {"dtype": choice(DTYPES), "autocast": choice((*AUTOCASTS, "none")), "optimizer": choice(OPTIMIZERS),
            "seq_len": int_in(1, MAX_SEQ_LEN), "n_layer": int_in(1, MAX_LAYERS),
            "input_shape": from_parser(parse_shape), "input_dtype": nonempty}
