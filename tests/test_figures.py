"""The report's figures checked for what a reader relies on, from the figures' own artists and
layout boxes after a draw (never pixels): integral bucket ticks, labels that do not overlap,
a legend clear of the data and the axis labels, and an exposed time equal to the engine's."""

from __future__ import annotations

import itertools

import pytest

from ddpsim import api
from ddpsim.pipeline.sweep import fmt_s, point_metrics
from ddpsim.report import plots


@pytest.fixture(scope="module")
def result():
    # 2 gloo ranks, 3 iterations: DDP's first, the rebuild, one steady iteration
    return api.simulate("traces/mlp.cpu.json", topology="cpu-gloo", world_size=2, iterations=3)


def _boxes(fig, artists):
    r = fig.canvas.get_renderer()
    return [a.get_window_extent(r) for a in artists if a.get_visible() and a.get_text()]


def _clear(a, b) -> bool:
    return not a.overlaps(b)


def _check_layout(fig):
    """The legend clear of every data axes and axis label; the axis labels clear of each other."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    legend = fig.legends[0].get_window_extent(r) if fig.legends else None
    labels = []
    for ax in fig.axes:
        labels += _boxes(fig, [ax.xaxis.label, ax.yaxis.label, ax.title, ax._left_title, ax._right_title])
        if legend is not None:
            assert _clear(legend, ax.get_window_extent(r))
    for ax in fig.axes:
        for leg in [ax.get_legend()] if ax.get_legend() else []:
            labels.append(leg.get_window_extent(r))
    if legend is not None:
        labels.append(legend)
    for a, b in itertools.combinations(labels, 2):
        assert _clear(a, b), (a, b)


def test_timeline_figure(result):
    fig = plots.timeline_figure(result, warmup=True)
    _check_layout(fig)
    steady, warm = fig.axes
    k = plots.representative_iteration(result)
    assert k == 3 and [it.iteration for it in result.steady_iterations()] == [3, 3]
    # the title's exposed time is the summary's (p95 over the one steady iteration = its worst rank)
    assert fmt_s(point_metrics(result)["exposed_comm_p95_s"]) in steady.get_title(loc="left")
    # each rank's annotation is the engine's exposed time of that rank and iteration
    ranks = plots.timeline_ranks(result, k)
    notes = {t.get_gid(): t.get_text() for t in steady.texts if (t.get_gid() or "").startswith("exposed-rank")}
    assert sorted(notes) == sorted(f"exposed-rank{r}" for r in ranks) and ranks
    for r in ranks:
        st = next(it for it in result.iterations if it.rank == r and it.iteration == k)
        assert notes[f"exposed-rank{r}"].endswith(fmt_s(st.exposed_comm_s))
    # the exposed notes sit right of their data axes, clear of it
    r = fig.canvas.get_renderer()
    for ax in fig.axes:
        box = ax.get_window_extent(r)
        assert all(t.get_window_extent(r).x0 >= box.x1 for t in ax.texts if (t.get_gid() or "").startswith("exposed"))
    # bucket labels name an integral bucket index and do not overlap each other
    labels = [t for ax in fig.axes for t in ax.texts if t.get_gid() == "bucket-label"]
    assert labels and all(t.get_text().strip().split()[0][1:].isdigit() for t in labels)
    for a, b in itertools.combinations(_boxes(fig, labels), 2):
        assert _clear(a, b)
    # the warm-up panel holds iterations 1 and 2, and its rows are the steady panel's
    assert "iterations 1, 2" in warm.get_title(loc="left")
    assert [t.get_text() for t in warm.get_yticklabels()] == [t.get_text() for t in steady.get_yticklabels()]


def test_timeline_comparison_shares_the_time_axis(result):
    other = api.simulate("traces/mlp.cpu.json", topology="cpu-gloo", world_size=2, iterations=3, bucket_cap_mb=0.25)
    fig = plots.timeline_comparison_figure([("default", result), ("cap=0.25", other)])
    _check_layout(fig)
    a, b = fig.axes
    assert a.get_xlim() == b.get_xlim()
    assert a.get_xlim()[1] >= max(p["length_ms"] for p in (plots._panel(x, [3], [0], "") for x in (result, other)))


def test_bucket_sizes_figure():
    sizes = [3 * 2**20, 25 * 2**20, 26 * 2**20, 10 * 2**20]
    fig = plots.bucket_sizes_figure([("cap=25", sizes, [25]), ("default", sizes, [1, 25]), ("plan", [2**20] * 90, None)])
    _check_layout(fig)
    r = fig.canvas.get_renderer()
    for ax in fig.axes:  # integral bucket indices inside the drawn range
        lo, hi = ax.get_xlim()
        ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
        assert ticks and all(float(t).is_integer() for t in ticks)
    first, second, third = fig.axes
    assert [round(t) for t in first.get_xticks() if -0.6 <= t <= 3.6] == [0, 1, 2, 3]
    # the cap: a line at 25 MiB over every bucket; per bucket for a list; none without a cap
    cap = first.lines[0]
    assert set(cap.get_ydata()) == {25.0} and min(cap.get_xdata()) <= -0.5 and max(cap.get_xdata()) >= 3.5
    assert list(second.lines[0].get_ydata())[:3] == [1.0, 1.0, 25.0]
    assert not third.lines and "no cap" in third.get_title()
    # sizes written on the four wide bars, not on 90 narrow ones; clear of each other
    assert [t.get_text() for t in first.texts] == ["3", "25", "26", "10"] and not third.texts
    boxes = [t.get_window_extent(r) for t in first.texts]
    for a, b in itertools.combinations(boxes, 2):
        assert _clear(a, b)
    assert "launch order" in third.get_xlabel()


@pytest.mark.parametrize("dpi", [110, 73])
def test_saved_pixels_are_those_of_matplotlibs_png(result, tmp_path, dpi):
    # save_figure reads the raw pixels; the oracle is the PNG matplotlib writes, decoded
    import io

    import numpy as np
    from PIL import Image

    fig = plots.timeline_figure(result, title="t", warmup=True)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, metadata={"Software": None})
    want = Image.open(buf).convert("RGB").quantize(colors=256, method=Image.Quantize.FASTOCTREE,
                                                    dither=Image.Dither.NONE)
    got = Image.open(plots.save_figure(fig, tmp_path / "t.png", dpi=dpi))
    assert got.size == want.size and np.array_equal(np.asarray(got.convert("RGB")), np.asarray(want.convert("RGB")))
