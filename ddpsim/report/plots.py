"""Plots of a sweep, each a ``matplotlib.figure.Figure`` on an Agg canvas of its own (matplotlib's
object API, imported lazily: pyplot's backend never switched): step times and their breakdown per
point; the overlap timeline of a point's representative steady iteration and its warm-up (the
streams of its slowest and fastest rank, each bucket's ready -> launch -> all-reduce, the engine's
``IterationStats.exposed_comm_s`` shaded), alone or several points on one time axis; bucket sizes
in launch order against each row's cap. :func:`save_figure` writes reproducible PNGs.
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


def warm_up() -> None:
    """Draw and drop a tiny figure, so that processes forked afterwards find matplotlib's and
    Pillow's modules and tables ready (a fresh process's first figure costs about twice its next)."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch
    import PIL.PngImagePlugin  # noqa: F401

    fig = new_figure(figsize=(1, 1))
    ax = fig.subplots()
    ax.bar([0], [1])
    ax.broken_barh([(0, 1)], (0, 1))
    ax.plot([0, 1], [0, 1])
    ax.text(0, 0, "x")
    fig.legend(handles=[Patch(label="a"), Line2D([], [], label="b")])
    fig.suptitle("x")
    fig.savefig(io.BytesIO(), format="rgba", dpi=10)


def new_figure(**kwargs: Any) -> Any:
    """A ``matplotlib.figure.Figure(**kwargs)`` with an Agg canvas of its own (outside pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(**kwargs)
    FigureCanvasAgg(fig)
    return fig


def save_figure(fig: Any, path: str | Path, dpi: int = 110) -> Path:
    """PNG written atomically with fixed metadata (reproducible bytes), in a 256-colour palette
    (Pillow's fast octree, no dithering: a third of the bytes; zlib's default level)."""
    from PIL import Image

    buf = io.BytesIO()
    # the raw RGBA pixels (what the PNG would hold, neither encoded nor decoded again here)
    fig.savefig(buf, format="rgba", dpi=dpi)
    w, h = (int(x) for x in fig.get_size_inches() * dpi)  # RendererAgg's size at this dpi
    raw = buf.getvalue()
    if len(raw) == 4 * w * h:
        rgba = Image.frombuffer("RGBA", (w, h), raw, "raw", "RGBA", 0, 1)
    else:  # a size this arithmetic does not give: read the PNG matplotlib writes
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
        rgba = Image.open(buf)
    image = rgba.convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    out = io.BytesIO()
    image.save(out, format="png")
    return write_bytes_atomic(path, out.getvalue())


def sweep_figure(table: Any, title: str = "") -> Any:
    """Step time and its breakdown per sweep point (``table`` = :func:`ddpsim.pipeline.sweep.sweep_table`,
    or its rows: ``table.to_dict("records")``)."""
    rows = table.to_dict("records") if hasattr(table, "to_dict") else list(table)
    labels = [r["point"].replace("cap=", "") for r in rows]
    mult, unit = (1e3, "ms") if max(r["iteration_p95_s"] for r in rows) < 1 else (1.0, "s")
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


# ---- the overlap timeline --------------------------------------------------------------------
# Laid out by hand in inches (no tight/constrained layout): the data axes' width is known before
# drawing, so a bucket label is drawn only where its bar holds it, and the legend, the exposed
# time annotations and the axis labels each get a strip of their own.

_FIG_W, _LEFT, _RIGHT = 12.0, 1.35, 1.5    # figure width, y tick labels, exposed-time annotations
_ROW_IN = 0.3                              # one timeline row
_TITLE_IN, _XAXIS_IN, _SUPTITLE_IN = 0.3, 0.5, 0.4
_CHAR_EM = 0.64                            # DejaVu Sans: widest digit 0.636 em
_KIND_LABEL = {"copy_in": "copy in/out", "copy_out": "copy in/out", "backward": "backward compute",
               "allreduce": "all-reduce (bucket #, MiB)", "wait": "compute waits for comm"}
_EXPOSED_COLOR = "#dd8452"


def representative_iteration(result: Any) -> int:
    """The steady iteration whose step time is the median (the lower middle one, the earlier on a
    tie); the last iteration simulated when none is steady."""
    steady = sorted({it.iteration for it in result.steady_iterations()})
    if not steady:
        return max((it.iteration for it in result.iterations), default=max((s.iteration for s in result.spans), default=1))
    order = sorted(zip(result.step_times_s(), steady))
    return order[(len(order) - 1) // 2][1]


def timeline_ranks(result: Any, iteration: int) -> list[int]:
    """The slowest and the fastest rank of ``iteration`` (ranks with spans), slowest first; one
    rank when one is simulated or the two take the same time and exposed time."""
    with_spans = {s.rank for s in result.spans}
    its = [it for it in result.iterations if it.iteration == iteration and it.rank in with_spans]
    if not its:
        return sorted(with_spans)[:1]
    slow = max(its, key=lambda it: (it.iteration_s, -it.rank))
    fast = min(its, key=lambda it: (it.iteration_s, it.rank))
    alike = abs(slow.iteration_s - fast.iteration_s) <= 1e-12 and abs(slow.exposed_comm_s - fast.exposed_comm_s) <= 1e-12
    return [slow.rank] if alike else [slow.rank, fast.rank]


def _rows(ranks: Sequence[int], spans: Sequence[Any]) -> list[tuple[int, str, float]]:
    """``(rank, row, y)`` top down: per rank compute, other streams (a host/CPU timeline), buckets, comm."""
    other = sorted({s.stream for s in spans} - {"compute", "comm"})
    out, y = [], 0.0
    for r in ranks:
        for row in ("compute", *other, "buckets", "comm"):
            out.append((r, row, y))
            y -= 1.0
        y -= 0.5
    return out


def _mib(v: float) -> str:
    """A size in MiB to three significant digits, never in exponent form."""
    return f"{v:.3g}" if v < 1000 else f"{v:.0f}"


def _fits(text: str, width_in: float, fontsize: float) -> bool:
    return len(text) * fontsize * _CHAR_EM / 72 + 0.04 <= width_in


def _bucket_marks(ax: Any, bs: Sequence[Any], y: float, t0: float) -> None:
    """Each bucket's ready -> launch (green) and launch -> all-reduce start (dotted) on its lane."""
    from matplotlib.collections import LineCollection

    ys = [y + (0.17 if b.bucket % 2 else -0.17) for b in bs]
    ms = [((b.ready_s - t0) * 1e3, (b.launch_s - t0) * 1e3, (b.start_s - t0) * 1e3) for b in bs]
    ax.add_collection(LineCollection([((r, v), (l, v)) for (r, l, _), v in zip(ms, ys)], colors="#2ca02c", linewidths=1.6))
    ax.add_collection(LineCollection([((l, v), (s, v)) for (_, l, s), v in zip(ms, ys)], colors="#555555",
                                     linewidths=0.8, linestyles=(0, (1, 1.5))))
    ax.plot([m[0] for m in ms], ys, "v", color="#2ca02c", ms=3.5, ls="none")
    ax.plot([m[1] for m in ms], ys, "|", color="black", ms=6, ls="none")


def _bucket_labels(ax: Any, bs: Sequence[Any], starts: Sequence[float], y: float, t0: float, in_per_ms: float,
                   end_ms: float) -> None:
    """``#index MiB`` (else ``#index``) on each all-reduce bar where it fits, else from its start
    into the free row up to the next span (``starts``, s); never reaching the next label or span."""
    import bisect

    right = -float("inf")
    ordered = sorted(starts)
    for b in sorted(bs, key=lambda b: b.start_s):
        x0, x1 = (b.start_s - t0) * 1e3, (b.end_s - t0) * 1e3
        nxt = bisect.bisect_right(ordered, b.start_s)
        free = ((ordered[nxt] - t0) * 1e3 if nxt < len(ordered) else end_ms) - x0
        for text in (f"#{b.bucket} {_mib(b.size_bytes / 2**20)} MiB", f"#{b.bucket}"):
            if x0 < right:
                break
            if _fits(text, (x1 - x0) * in_per_ms, 6.5):
                ax.text((x0 + x1) / 2, y, text, ha="center", va="center", fontsize=6.5, gid="bucket-label")
                right = x1
                break
            if _fits(text, free * in_per_ms, 6.5):
                ax.text(x0, y, " " + text, ha="left", va="center", fontsize=6.5, gid="bucket-label")
                right = x0 + free
                break


def _panel(result: Any, iterations: Sequence[int], ranks: Sequence[int], title: str) -> dict[str, Any]:
    """One timeline panel's spans, buckets, per-rank iteration figures, rows and time origin ``t0``
    (the earliest start of its first iteration on the ranks shown)."""
    its, rs = set(iterations), set(ranks)
    spans = [s for s in result.spans if s.iteration in its and s.rank in rs]
    stats = {(it.rank, it.iteration): it for it in result.iterations if it.iteration in its and it.rank in rs}
    starts = [st.start_s for (_, k), st in stats.items() if k == min(its)] or [s.start_s for s in spans] or [0.0]
    t0 = min(starts)
    t1 = max([s.end_s for s in spans] + [st.end_s for st in stats.values()] + [t0 + 1e-6])
    return {"spans": spans, "stats": stats, "t0": t0, "length_ms": (t1 - t0) * 1e3, "title": title,
            "buckets": [b for b in result.buckets if b.iteration in its and b.rank in rs],
            "rows": _rows(ranks, spans), "ranks": list(ranks), "iterations": sorted(its)}


def _draw_panel(ax: Any, p: dict[str, Any], in_per_ms: float, end_ms: float, kinds: dict[str, str]) -> None:
    """One panel: span bars per stream row, bucket marks and labels, exposed communication shaded
    per rank and iteration, its length written right of the axes."""
    from matplotlib.patches import Rectangle
    from matplotlib.transforms import blended_transform_factory

    from ddpsim.pipeline.sweep import fmt_s

    t0, ys = p["t0"], {(r, row): y for r, row, y in p["rows"]}
    groups: dict[tuple[int, str, str], list[tuple[float, float]]] = {}
    for s in p["spans"]:  # one broken_barh per (rank, stream, kind): one call per span is slow for big models
        groups.setdefault((s.rank, s.stream, s.kind), []).append(((s.start_s - t0) * 1e3, (s.end_s - s.start_s) * 1e3))
    for (r, stream, kind), bars in sorted(groups.items()):
        color = _COLORS.get(kind, "#999999")
        ax.broken_barh(bars, (ys[(r, stream)] - 0.35, 0.7), facecolors=color,
                       edgecolor="black" if stream == "comm" else "none", linewidth=0.3)
        kinds.setdefault(_KIND_LABEL.get(kind, kind.replace("_", " ")), color)
    margin = blended_transform_factory(ax.transAxes, ax.transData)
    for r in p["ranks"]:
        bs = [b for b in p["buckets"] if b.rank == r]
        _bucket_marks(ax, bs, ys[(r, "buckets")], t0)
        starts = [s.start_s for s in p["spans"] if s.rank == r and s.stream == "comm"]
        _bucket_labels(ax, bs, starts, ys[(r, "comm")], t0, in_per_ms, end_ms)
        lines = []
        for k in p["iterations"]:
            st = p["stats"].get((r, k))
            if st is None:
                continue
            end = max((b.end_s for b in bs if b.iteration == k), default=st.end_s)
            x0, x1 = (end - st.exposed_comm_s - t0) * 1e3, (end - t0) * 1e3
            top, bottom = ys[(r, "compute")] + 0.45, ys[(r, "comm")] - 0.45
            ax.add_patch(Rectangle((x0, bottom), x1 - x0, top - bottom, facecolor=_EXPOSED_COLOR, alpha=0.22,
                                   edgecolor=_EXPOSED_COLOR, linewidth=0.8, zorder=0.5))
            lines.append((f"it {k}: " if len(p["iterations"]) > 1 else "") + fmt_s(st.exposed_comm_s))
        if lines:
            ax.text(1.01, ys[(r, "comm")], "exposed comm\n" + "\n".join(lines), transform=margin, ha="left",
                    va="center", fontsize=7.5, color="#a0522d", gid=f"exposed-rank{r}")
    ax.set_yticks([y for _, _, y in p["rows"]])
    ax.set_yticklabels([f"rank {r} {row}" for r, row, _ in p["rows"]], fontsize=7.5)
    ax.set_ylim(p["rows"][-1][2] - 0.6, 0.6)
    ax.set_title(p["title"], loc="left", fontsize=9)
    ax.grid(axis="x", alpha=0.3)


def _timeline(panels: Sequence[dict[str, Any]], title: str, shared_x: bool) -> Any:
    """Panels stacked top down, each as tall as its rows, x in ms from each panel's start (one axis
    with ``shared_x``), the legend under the last."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    legend_rows = 3
    heights = [(p["rows"][-1][2] * -1 + 1.2) * _ROW_IN for p in panels]
    fig_h = _SUPTITLE_IN + sum(h + _TITLE_IN + _XAXIS_IN for h in heights) + 0.15 + 0.2 * legend_rows
    fig = new_figure(figsize=(_FIG_W, fig_h))
    ax_w = _FIG_W - _LEFT - _RIGHT
    longest = max(p["length_ms"] for p in panels)
    kinds: dict[str, str] = {}
    top, first = fig_h - _SUPTITLE_IN, None
    for p, h in zip(panels, heights):
        top -= _TITLE_IN + h
        ax = fig.add_axes((_LEFT / _FIG_W, top / fig_h, ax_w / _FIG_W, h / fig_h))
        span = longest if shared_x else p["length_ms"]
        ax.set_xlim(-0.005 * span, 1.005 * span)
        if shared_x and first is not None:
            ax.sharex(first)
        first = first or ax
        _draw_panel(ax, p, ax_w / (1.01 * span), span, kinds)
        ax.set_xlabel("time from the iteration's start (ms)" if len(p["iterations"]) == 1
                      else f"time from iteration {p['iterations'][0]}'s start (ms)", fontsize=8)
        ax.tick_params(axis="x", labelsize=7.5)
        top -= _XAXIS_IN
    handles = [Patch(facecolor=c, label=k) for k, c in kinds.items()]
    handles += [Line2D([], [], marker="v", color="#2ca02c", ls="-", lw=1.6, ms=4, label="bucket ready -> launched"),
                Line2D([], [], marker="|", color="#555555", ls=":", lw=1, ms=6, label="launched -> all-reduce starts"),
                Patch(facecolor=_EXPOSED_COLOR, alpha=0.3, edgecolor=_EXPOSED_COLOR, label="exposed communication")]
    ncol = -(-len(handles) // legend_rows)
    fig.legend(handles=handles, loc="lower center", bbox_to_anchor=(0.5, 0.05 / fig_h), ncol=ncol, fontsize=7.5,
               frameon=False, columnspacing=1.2, handlelength=1.8)
    fig.suptitle(title or "overlap timeline", y=1 - 0.08 / fig_h, va="top", fontsize=10)
    return fig


def timeline_figure(result: Any, title: str = "", *, iteration: int | None = None, ranks: Sequence[int] | None = None,
                    warmup: bool = False) -> Any:
    """The overlap timeline of ``iteration`` (default :func:`representative_iteration`) on
    ``ranks`` (default :func:`timeline_ranks`), as the module docstring says; ``warmup``: a second
    panel with the warm-up iterations (the first iteration and the rebuild) on their own time axis."""
    k = representative_iteration(result) if iteration is None else iteration
    rs = timeline_ranks(result, k) if ranks is None else list(ranks)
    panels = [_panel(result, [k], rs, _iteration_title(result, k))]
    warm = sorted({it.iteration for it in result.iterations if it.warmup})
    if warmup and warm:
        panels.append(_panel(result, warm, rs, f"warm-up: iteration{'s' if len(warm) > 1 else ''} "
                             f"{', '.join(map(str, warm))} (DDP's first iteration and the bucket rebuild)"))
    return _timeline(panels, title, shared_x=False)


def timeline_comparison_figure(points: Sequence[tuple[str, Any]], title: str = "") -> Any:
    """Several ``(label, SimResult)`` points' :func:`timeline_figure` panels on one time axis."""
    ks = [representative_iteration(result) for _, result in points]
    panels = [_panel(result, [k], timeline_ranks(result, k), f"{label}: {_iteration_title(result, k)}")
              for (label, result), k in zip(points, ks)]
    return _timeline(panels, title or "overlap timelines on one time axis", shared_x=True)


def _iteration_title(result: Any, k: int) -> str:
    from ddpsim.pipeline.sweep import fmt_s

    steady = sorted({it.iteration for it in result.steady_iterations()})
    if k not in steady:
        head = f"iteration {k}"
    else:
        step = result.step_times_s()[steady.index(k)]
        median = k == representative_iteration(result)
        which = f"; the median of {len(steady)} steady steps" if len(steady) > 1 else "; the only steady step"
        head = f"iteration {k}: step {fmt_s(step)}" + (which if median else "")
    return f"{head}; exposed communication {fmt_s(result.exposed_comm_s(k))} on its worst rank"


def bucket_sizes_figure(plans: Sequence[tuple[str, Sequence[int], Any]], title: str = "") -> Any:
    """Bucket sizes (MiB) in launch order, one row per ``(label, sizes_bytes, cap_mb)``; ``cap_mb`` (the
    limit per bucket in MiB, the last reused; None: no cap) drawn as a dashed line."""
    from matplotlib.ticker import MaxNLocator

    n = max(1, len(plans))
    fig = new_figure(figsize=(9, 0.9 + 1.9 * n))
    axes = fig.subplots(n, 1, squeeze=False)
    for ax, (label, sizes, cap) in zip(axes[:, 0], plans):
        mib = [s / 2**20 for s in sizes]
        ax.bar(range(len(mib)), mib, color="#4c72b0", width=0.8)
        caps = [float(cap[min(i, len(cap) - 1)]) for i in range(len(mib))] if cap else []  # the last reused
        if caps:
            ax.step([-0.5, *[i + 0.5 for i in range(len(caps))]], [caps[0], *caps], where="pre", color="#c44e52",
                    lw=1.2, ls="--")
        top = max(mib + caps + [1e-9])
        ax.set_ylim(0, top * 1.22)
        ax.set_xlim(-0.6, max(len(mib), 1) - 0.4)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        bar_in = 0.8 * (9 - 1.3) / max(len(mib), 1)  # each bar's size above it where the bar holds it
        for i, text in enumerate(map(_mib, mib)):
            if _fits(text, bar_in, 7):
                ax.text(i, mib[i], text, ha="center", va="bottom", fontsize=7, gid="size-label")
        ax.set_ylabel("MiB", fontsize=8)
        listed = ", ".join(f"{c:g}" for c in cap or ())
        cap_words = ("; no cap" if not caps else f"; cap {listed} MiB (dashed)" if len(cap) == 1 else
                     f"; caps {listed} MiB (bucket by bucket, the last reused) (dashed)")
        ax.set_title(f"{label}: {len(sizes)} buckets, {sum(sizes) / 2**20:.1f} MiB{cap_words}", fontsize=9)
        ax.grid(axis="y", alpha=0.3)
    axes[-1, 0].set_xlabel("bucket index = launch order (bucket 0 is all-reduced first)", fontsize=8)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig

