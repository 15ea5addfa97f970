"""The summary's lines on compiled DDP: the best cap under ``torch.compile`` (and DDPOptimizer's
subgraphs there) beside eager DDP's best on the same trace and cluster, from the ``compile`` figures
of :func:`ddpsim.pipeline.run.eager_comparison` (:mod:`ddpsim.plan.compiled` states the model).
"""

from __future__ import annotations

from ddpsim.pipeline.sweep import fmt_s
from ddpsim.report.figures import Compiled
from ddpsim.report.tables import md_table

#: optimize_ddp's modes in words
MODE_TEXT = {"ddp_optimizer": "Dynamo's DDPOptimizer splitting the graph at bucket boundaries",
             "no_optimization": "optimize_ddp=False: one compiled backward, every gradient ready at its end",
             "python_reducer": "compiled autograd's python reducer (inductor's fused all-reduces)"}


def _change(compiled_s: float, eager_s: float) -> str:
    """Compiled against eager, signed percent; a change under 0.05 % reads as none."""
    change = (compiled_s - eager_s) / eager_s
    return "0.0%" if abs(change) < 5e-4 else f"{100 * change:+.1f}%"


def answer_lines(c: Compiled | None, best: str) -> list[str]:
    """The ``## Answer`` bullet of a compiled scenario whose best point is ``best`` (none for an eager one)."""
    if c is None:
        return []
    row = {r.point: r for r in c.points}
    here, eager_best = row[best], row[c.eager_best]
    cut = "" if here.subgraphs is None else f", {here.subgraphs} compiled subgraph(s)"
    same = ("the same cap" if c.eager_best == best else
            f"`{c.eager_best}` ({fmt_s(eager_best.eager_p50_s)}; compiled there: {fmt_s(eager_best.compiled_p50_s)})")
    return [f"- **Compiled, the best cap is `{best}`** (torch.compile with {MODE_TEXT[c.mode]}{cut}): p50 step "
            f"{fmt_s(here.compiled_p50_s)}, {_change(here.compiled_p50_s, here.eager_p50_s)} against eager DDP at that "
            f"cap ({fmt_s(here.eager_p50_s)}); eager DDP's best on this trace and cluster is {same}. Same per-op times "
            "as the trace: what compiling changes here is only when the gradients become ready."]


def compiled_table(c: Compiled | None) -> list[str]:
    """``## Compiled against eager``: every point's p50 both ways (none for an eager scenario)."""
    if c is None:
        return []
    return ["## Compiled against eager", "", *md_table([
        {"point": f"`{r.point}`", "subgraphs": "-" if r.subgraphs is None else str(r.subgraphs),
         "compiled p50": fmt_s(r.compiled_p50_s), "eager p50": fmt_s(r.eager_p50_s),
         "compiled vs eager": _change(r.compiled_p50_s, r.eager_p50_s)} for r in c.points], right=4), ""]
