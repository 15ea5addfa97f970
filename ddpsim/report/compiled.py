"""The summary's lines on compiled DDP: the best cap under ``torch.compile`` beside eager DDP.

Reads the ``compile`` figures of :func:`ddpsim.pipeline.compiled.eager_comparison` (every point
simulated again without ``compile``) and says which cap is best compiled, how many subgraphs
DDPOptimizer cuts there, and what eager DDP's best is on the same trace and cluster
(:mod:`ddpsim.plan.compiled` states the model and what is approximate).
"""

from __future__ import annotations

from typing import Any

from ddpsim.pipeline.sweep import fmt_s

#: optimize_ddp's modes in words
MODE_TEXT = {"ddp_optimizer": "Dynamo's DDPOptimizer splitting the graph at bucket boundaries",
             "no_optimization": "optimize_ddp=False: one compiled backward, every gradient ready at its end",
             "python_reducer": "compiled autograd's python reducer (inductor's fused all-reduces)"}


def _change(compiled_s: float, eager_s: float) -> str:
    """Compiled against eager, signed percent; a change under 0.05 % reads as none."""
    change = (compiled_s - eager_s) / eager_s
    return "0.0%" if abs(change) < 5e-4 else f"{100 * change:+.1f}%"


def answer_lines(s: dict[str, Any]) -> list[str]:
    """The ``## Answer`` bullet of a compiled scenario (none for an eager one)."""
    c = s.get("compile")
    if not c:
        return []
    best = s["best"]["point"]
    row = {r["point"]: r for r in c["points"]}
    here, eager_best = row[best], row[c["eager_best"]]
    cut = "" if here["subgraphs"] is None else f", {here['subgraphs']} compiled subgraph(s)"
    same = ("the same cap" if c["eager_best"] == best else
            f"`{c['eager_best']}` ({fmt_s(eager_best['eager_p50_s'])}; compiled there: {fmt_s(eager_best['compiled_p50_s'])})")
    change = _change(here["compiled_p50_s"], here["eager_p50_s"])
    return [f"- **Compiled, the best cap is `{best}`** (torch.compile with {MODE_TEXT[c['mode']]}{cut}): p50 step "
            f"{fmt_s(here['compiled_p50_s'])}, {change} against eager DDP at that cap ({fmt_s(here['eager_p50_s'])}); "
            f"eager DDP's best on this trace and cluster is {same}. Same per-op times as the trace: what compiling "
            "changes here is only when the gradients become ready."]


def compiled_table(s: dict[str, Any]) -> list[str]:
    """``## Compiled against eager``: every point's p50 both ways (none for an eager scenario)."""
    c = s.get("compile")
    if not c:
        return []
    L = ["## Compiled against eager", "", "| point | subgraphs | compiled p50 | eager p50 | compiled vs eager |",
         "|---|---|---|---|---|"]
    for r in c["points"]:
        L.append(f"| `{r['point']}` | {'-' if r['subgraphs'] is None else r['subgraphs']} | {fmt_s(r['compiled_p50_s'])} "
                 f"| {fmt_s(r['eager_p50_s'])} | {_change(r['compiled_p50_s'], r['eager_p50_s'])} |")
    return L + [""]
