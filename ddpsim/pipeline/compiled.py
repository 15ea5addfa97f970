"""A scenario's ``compile`` block at a sweep point.

:func:`compiled_inputs` turns a point's eager (trace, plan) into what DDP under
``torch.compile`` sees (:func:`ddpsim.plan.compiled.compiled_point`: DDPOptimizer's subgraphs and
their grouped gradient-ready times with DDP's buckets over them, or compiled autograd's python
reducer). :mod:`ddpsim.pipeline.eager_comparison` runs a compiled scenario's points eagerly.
"""

from __future__ import annotations

from typing import Any

from ddpsim.errors import InputError
from ddpsim.plan.compiled import compiled_point


def compiled_inputs(scenario: Any, point: Any, trace: Any, plan: Any) -> tuple[Any, Any]:
    """``(trace, plan)`` of ``point`` under ``scenario.compile`` (``plan``: the eager plan, kept
    when the scenario gives an explicit plan file)."""
    options = scenario.ddp_options(point)
    try:
        return compiled_point(trace, options, scenario.compile,
                              plan=plan if scenario.plan_path is not None else None)
    except InputError as exc:
        raise InputError(f"{scenario.where()}{exc}") from None
