"""``## Which cost terms move the best cap``: the summary's lines from
:func:`ddpsim.pipeline.term_effects.term_effects` (the sweep simulated again with terms off)."""

from __future__ import annotations

from ddpsim.pipeline.sweep import fmt_s
from ddpsim.report.figures import TermEffects

NAMES = {"contention": "compute slowed while NCCL runs", "copy_kernels": "gradient copies as kernels",
         "host": "host costs"}


def _names(terms: tuple[str, ...]) -> str:
    return ", ".join(NAMES[t] for t in terms)


def section(f: TermEffects | None) -> list[str]:
    """The section (empty without the figures)."""
    if f is None:
        return []
    L = ["## Which cost terms move the best cap", "",
         f"The sweep simulated again (p50 step, no uncertainty samples) without the GPU cost terms "
         f"({_names(f.terms)}): where the best point lands, and what the full model's best, `{f.best}`, "
         "loses there against it.", ""]
    for w in f.without:
        where = "the same point" if w.best == f.best else f"`{w.best}`, {100 * w.lost:.2f} % faster than `{f.best}`"
        L.append(f"- without {_names(w.off)}: {where} (p50 {fmt_s(w.best_p50_s)})")
    if len(f.moved_by) == 1:
        verdict = f"The term that moves the best cap: {_names(f.moved_by)}."
    elif f.moved_by:
        verdict = f"Each of these moves the best cap on its own: {_names(f.moved_by)}."
    elif f.without[0].best != f.best:
        verdict = "No term alone moves the best cap; together they do."
    else:
        verdict = "None of the terms moves the best cap."
    return L + ["", verdict + " A move smaller than the uncertainty above is a tie, not a change of answer.", ""]
