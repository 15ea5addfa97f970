"""Plots of a sweep (matplotlib's object API, imported lazily: each figure is a
``matplotlib.figure.Figure`` drawn by its own Agg canvas, so no display is needed and pyplot's
global backend is never switched, a notebook's included).

Every function returns a matplotlib Figure; :func:`save_figure` writes it as PNG atomically
with no timestamp or version in the metadata, so the same data gives the same bytes.

* :func:`sweep_figure` - p50/p95 step time vs ``bucket_cap_mb`` and the stacked breakdown
  (forward, backward compute, exposed communication, optimizer, other) per point.
* :func:`timeline_figure` - the overlap timeline of one point: compute and communication
  streams per simulated rank, bucket ready (v) and launch (|) marks.
* :func:`bucket_sizes_figure` - bucket sizes in launch order for chosen points / plans.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Sequence

from ddpsim.io import write_bytes_atomic

_COLORS = {"forward": "#4c72b0", "backward": "#55a868", "copy_in": "#8172b2", "copy_out": "#8172b2",
           "optimizer": "#c44e52", "zero_grad": "#937860", "wait": "#dddddd", "allreduce": "#dd8452",
           "broadcast": "#da8bc3", "rebuild": "#8c8c8c", "graph_search": "#ccb974", "compress": "#64b5cd",
           "used_map_allreduce": "#da8bc3"}
_BREAKDOWN = (("forward_s", "forward", "#4c72b0"), ("backward_compute_s", "backward compute", "#55a868"),
              ("exposed_comm_s", "exposed comm", "#dd8452"), ("optimizer_s", "optimizer", "#c44e52"),
              ("other_s", "other", "#8c8c8c"))


def new_figure(**kwargs: Any) -> Any:
    """A ``matplotlib.figure.Figure(**kwargs)`` with an Agg canvas of its own (outside pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def _unit(max_s: float) -> tuple[float, str]:
    return (1e3, "ms") if max_s < 1 else (1.0, "s")


def save_figure(fig: Any, path: str | Path, dpi: int = 110) -> Path:
    """PNG, written atomically, with fixed metadata (reproducible bytes)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    return write_bytes_atomic(path, buf.getvalue())


def sweep_figure(table: Any, title: str = "") -> Any:
    """Step time and its breakdown per sweep point (``table`` = :func:`ddpsim.pipeline.sweep.sweep_table`)."""
    rows = table.to_dict("records")
    labels = [r["point"].replace("cap=", "") for r in rows]
    mult, unit = _unit(max(r["iteration_p95_s"] for r in rows))
    fig = new_figure(figsize=(max(6.5, 0.7 * len(rows) + 2), 7))
    ax1, ax2 = fig.subplots(2, 1, sharex=True)
    x = list(range(len(rows)))
    ax1.plot(x, [r["iteration_p50_s"] * mult for r in rows], "o-", label="p50 step time", color="#4c72b0")
    ax1.plot(x, [r["iteration_p95_s"] * mult for r in rows], "s--", label="p95 step time", color="#c44e52", alpha=0.7)
    if rows and rows[0].get("iteration_p50_lo_s") is not None:  # the uncertainty band (ddpsim.pipeline.resampling)
        ax1.fill_between(x, [r["iteration_p50_lo_s"] * mult for r in rows], [r["iteration_p50_hi_s"] * mult for r in rows],
                         color="#4c72b0", alpha=0.18, label="p50 under the model's uncertainty")
        robust = [i for i, r in enumerate(rows) if r.get("robust")]
        ax1.plot(robust, [rows[i]["iteration_p50_s"] * mult for i in robust], "o", ms=9, mfc="none", color="#55a868",
                 label="within 1 % of the best in every sample")
    best = min(range(len(rows)), key=lambda i: (rows[i]["iteration_p50_s"], i))
    ax1.plot([best], [rows[best]["iteration_p50_s"] * mult], "*", ms=16, color="#dd8452", label="best")
    ax1.set_ylabel(f"step time ({unit})")
    ax1.set_title(title or "step time vs bucket_cap_mb")
    ax1.grid(alpha=0.3)
    ax1.legend(loc="best", fontsize=8)
    bottom = [0.0] * len(rows)
    for key, lab, col in _BREAKDOWN:
        vals = [r[key] * mult for r in rows]
        ax2.bar(x, vals, bottom=bottom, label=lab, color=col)
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax2.set_ylabel(f"mean steady iteration ({unit})")
    ax2.set_xlabel("bucket_cap_mb (MiB; 'default' = not given)")
    ax2.set_xticks(x)
    ax2.set_xticklabels(labels, rotation=30, ha="right", fontsize=8)
    ax2.legend(loc="upper center", bbox_to_anchor=(0.5, -0.35), ncol=5, fontsize=8)
    ax2.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def timeline_figure(result: Any, title: str = "", iterations: Sequence[int] | None = None,
                    ranks: Sequence[int] | None = None) -> Any:
    """Compute and communication streams per rank (default: the representative ranks of
    :func:`ddpsim.report.perfetto.representative_ranks`, the ones whose traces are written)."""
    from ddpsim.report.perfetto import representative_ranks

    its = sorted({s.iteration for s in result.spans})
    keep = set(iterations if iterations is not None else its)
    ranks = list(representative_ranks(result) if ranks is None else ranks)
    spans = [s for s in result.spans if s.rank in ranks and s.iteration in keep]
    t_end = max((s.end_s for s in spans), default=1.0)
    t_start = min((s.start_s for s in spans), default=0.0)
    mult, unit = _unit(t_end - t_start)
    fig = new_figure(figsize=(12, 1.0 + 1.1 * len(ranks)))
    ax = fig.subplots()
    yticks, ylabels = [], []
    seen_kinds: dict[str, Any] = {}
    for k, r in enumerate(ranks):
        y_comp = k * 2.4 + 1.2
        y_comm = k * 2.4
        yticks += [y_comp, y_comm]
        ylabels += [f"rank {r} compute", f"rank {r} comm"]
        # NOTE: one broken_barh per (stream, kind): one call per span is very slow for big models
        groups: dict[tuple[str, str], list[tuple[float, float]]] = {}
        for s in spans:
            if s.rank == r:
                groups.setdefault((s.stream, s.kind), []).append(((s.start_s - t_start) * mult, (s.end_s - s.start_s) * mult))
        for (stream, kind), bars in sorted(groups.items()):
            y = y_comm if stream == "comm" else y_comp
            h = ax.broken_barh(bars, (y - 0.4, 0.8), facecolors=_COLORS.get(kind, "#999999"),
                               edgecolor="black" if stream == "comm" else "none", linewidth=0.3)
            seen_kinds.setdefault(kind, h)
        bs = [b for b in result.buckets if b.rank == r and b.iteration in keep]
        ax.plot([(b.ready_s - t_start) * mult for b in bs], [y_comm + 0.6] * len(bs), "v", color="#2ca02c", ms=4, ls="none")
        ax.plot([(b.launch_s - t_start) * mult for b in bs], [y_comm + 0.6] * len(bs), "|", color="black", ms=8, ls="none")
    ax.plot([], [], "v", color="#2ca02c", label="bucket ready")
    ax.plot([], [], "|", color="black", label="bucket launch")
    for kind, h in seen_kinds.items():
        h.set_label(kind)
    ax.set_yticks(yticks)
    ax.set_yticklabels(ylabels, fontsize=8)
    ax.set_xlabel(f"time ({unit})")
    ax.set_title(title or "overlap timeline")
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.25 if len(ranks) > 1 else -0.45), ncol=8, fontsize=7)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    return fig


def bucket_sizes_figure(plans: Sequence[tuple[str, Sequence[int]]], title: str = "") -> Any:
    """Bucket sizes (MiB) in launch order, one row per ``(label, sizes_bytes)``."""
    n = max(1, len(plans))
    fig = new_figure(figsize=(9, 1.2 + 1.5 * n))
    axes = fig.subplots(n, 1, squeeze=False)
    for ax, (label, sizes) in zip(axes[:, 0], plans):
        ax.bar(range(len(sizes)), [s / 2**20 for s in sizes], color="#4c72b0")
        ax.set_ylabel("MiB", fontsize=8)
        ax.set_title(f"{label}: {len(sizes)} buckets, {sum(sizes) / 2**20:.1f} MiB", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[-1, 0].set_xlabel("bucket (launch order)")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
