"""``validation_timeline.png`` and ``validation.png`` of :mod:`ddpsim.validation.writer`, on a small
synthetic validation: the panels a reader needs, integral bucket ticks, legends clear of the axes'
labels, bucket labels clear of each other, and bars equal to ``validation.json``'s per-bucket errors."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

pytest.importorskip("matplotlib")

from ddpsim.validation.compare import PointOutcome
from ddpsim.validation.writer import bucket_errors, point_of_interest, timeline_figure, validation_figure, write_reports

# three buckets: (launch, start, end) from the iteration start, predicted
PREDICTED = [(0.100, 0.102, 0.120), (0.115, 0.121, 0.140), (0.150, 0.151, 0.170)]
# measured: rank 0's (launch, end) and rank 1's launch, the same in both measured iterations
MEASURED_RANK0 = [(0.105, 0.130), (0.118, 0.150), (0.160, 0.185)]
MEASURED_RANK1_LAUNCH = [0.107, 0.119, 0.158]
SIZE = 1 << 20


def _predicted(times: list[tuple[float, float, float]]) -> list[dict]:
    return [{"bucket": k, "size_bytes": SIZE, "launch_s": a, "start_s": b, "end_s": c} for k, (a, b, c) in enumerate(times)]


def _hooked() -> dict:
    """A timing-hook run of 2 ranks: 1 warm-up and 2 measured iterations with the times above."""
    def rank(times: list[tuple[float, float]]) -> dict:
        return {"buckets": [{"iteration": it, "bucket": k, "size_bytes": SIZE, "launch_s": a, "end_s": e}
                            for it in (1, 2, 3) for k, (a, e) in enumerate(times)]}
    return {"warmup": 1, "summary": {"iteration_s": 0.21},
            "ranks": [rank(MEASURED_RANK0), rank([(a, a + 0.01) for a in MEASURED_RANK1_LAUNCH])]}


def _run(step_s: float) -> dict:
    return {"summary": {"step_times_s": [step_s, step_s * 1.02], "iteration_s": step_s * 1.01},
            "real_buckets": {"sizes": [SIZE] * 3}, "plan_matches": True}


def _outcomes(*, hooked: bool) -> dict[str, PointOutcome]:
    """Two points: ``cap=1`` (predicted 5 % low; the hooked run when ``hooked``), ``cap=25``
    (predicted 20 % high, never hooked)."""
    a = PointOutcome("cap=1", 1.0, predicted_s=0.19, predicted_p50_s=0.19, predicted_buckets=_predicted(PREDICTED),
                     runs=[_run(0.2)], hooked=_hooked() if hooked else None)
    b = PointOutcome("cap=25", 25.0, predicted_s=0.24, predicted_p50_s=0.24,
                     predicted_buckets=_predicted([(0.15, 0.152, 0.19)]), runs=[_run(0.2)])
    return {"cap=1": a, "cap=25": b}


def _write(tmp_path, *, hooked: bool) -> dict:
    outcomes = _outcomes(hooked=hooked)
    cal = tmp_path / "cal.json"
    cal.write_text("{}")
    write_reports(SimpleNamespace(out=tmp_path, scenario=SimpleNamespace(name="synthetic"), model="mlp", batch_size=2,
                                  num_threads=1, world_size=2, iterations=2, warmup=1, repeats=1, outcomes=outcomes,
                                  cal_path=cal, cal=None, trace_path=tmp_path / "trace.json",
                                  trace=SimpleNamespace(environment=None), launch_mode=None, plots=True))
    return json.loads((tmp_path / "validation.json").read_text())


def test_validation_json_holds_the_per_bucket_errors_measured_minus_predicted(tmp_path):
    errors = _write(tmp_path, hooked=True)["buckets"]["cap=1"]["errors"]
    # completion: measured end - predicted end; own all-reduce time: end - max(start, previous end),
    # start = the last rank's launch (measured) or the collective's start (predicted)
    end_err = [0.130 - 0.120, 0.150 - 0.140, 0.185 - 0.170]
    p_svc = [0.120 - 0.102, 0.140 - 0.121, 0.170 - 0.151]
    m_svc = [0.130 - 0.107, 0.150 - 0.130, 0.185 - 0.160]
    assert [e["bucket"] for e in errors] == [0, 1, 2]
    assert [e["end_error_s"] for e in errors] == pytest.approx(end_err)
    assert [e["end_error_pct"] for e in errors] == pytest.approx([100 * e / p[2] for e, p in zip(end_err, PREDICTED)])
    assert [e["allreduce_error_s"] for e in errors] == pytest.approx([m - p for m, p in zip(m_svc, p_svc)])
    assert [e["allreduce_error_pct"] for e in errors] == pytest.approx([100 * (m - p) / p for m, p in zip(m_svc, p_svc)])
    assert (tmp_path / "validation.png").stat().st_size > 0 and (tmp_path / "validation_timeline.png").stat().st_size > 0


def test_bucket_errors_match_buckets_by_index_and_skip_a_missing_side():
    pred = _predicted(PREDICTED)
    meas = _predicted([(a + 0.01, b + 0.01, c + 0.02) for a, b, c in PREDICTED[:2]])
    errs = bucket_errors(pred, meas)
    assert [e["bucket"] for e in errs] == [0, 1]
    assert [e["end_error_s"] for e in errs] == pytest.approx([0.02, 0.02])
    assert bucket_errors(pred, []) == [] and bucket_errors([], meas) == []


def _bars(ax, gid: str) -> list[tuple[float, float]]:
    """(x, height) of the bars with ``gid``, left to right."""
    return sorted((p.get_x() + p.get_width() / 2, p.get_height()) for p in ax.patches if p.get_gid() == gid)


def _label_boxes(fig) -> list:
    """The window extents of every axis label, title and tick label of ``fig``."""
    r = fig.canvas.get_renderer()
    boxes = []
    for ax in fig.axes:
        texts = [ax.xaxis.label, ax.yaxis.label, ax.title, *ax.get_xticklabels(), *ax.get_yticklabels()]
        boxes += [t.get_window_extent(r) for t in texts if t.get_visible() and t.get_text()]
    return boxes


def _assert_legends_clear(fig) -> None:
    """Every legend lies outside every axes' data area and overlaps no label, title or tick label."""
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    assert legends
    for leg in legends:
        box = leg.get_window_extent(r)
        assert not any(box.overlaps(ax.get_window_extent(r)) for ax in fig.axes if ax.axison)
        assert not any(box.overlaps(b) for b in _label_boxes(fig))
        assert box.x1 <= fig.bbox.x1 and box.y0 >= fig.bbox.y0  # inside the figure: sized to its content


def test_timeline_figure_draws_predicted_over_measured_and_the_errors_of_the_json(tmp_path):
    data = _write(tmp_path, hooked=True)
    assert point_of_interest(data) == "cap=1"   # cap=25 is worse predicted, but has no measured bucket times
    fig = timeline_figure(data)
    pred, meas, err_ms, err_pct = fig.axes
    assert pred.get_title(loc="left") == "predicted" and meas.get_title(loc="left").startswith("measured")
    assert pred.get_xlim() == meas.get_xlim()   # one time axis
    assert "(ms)" in err_ms.get_ylabel() and "(%)" in err_pct.get_ylabel()
    errors = data["buckets"]["cap=1"]["errors"]
    for ax, scale, suffix in ((err_ms, 1e3, "_s"), (err_pct, 1.0, "_pct")):
        for key, dx in (("end_error", -0.2), ("allreduce_error", 0.2)):
            bars = _bars(ax, key + suffix)
            assert [x for x, _ in bars] == pytest.approx([e["bucket"] + dx for e in errors])
            assert [h for _, h in bars] == pytest.approx([e[key + suffix] * scale for e in errors])
        ticks = ax.get_xticks()
        assert list(ticks) == [0, 1, 2] and all(float(t).is_integer() for t in ticks)
        assert [t.get_text() for t in ax.get_xticklabels()] == ["0", "1", "2"]
    # each timeline labels every bucket by its index, here inside or above its bar
    for ax in (pred, meas):
        shown = [t.get_text() for t in ax.texts if t.get_gid() == "bucket-label" and t.get_visible()]
        assert sorted(shown) == ["0", "1", "2"]
    _assert_legends_clear(fig)


def test_timeline_figure_without_bucket_timing_says_so_instead_of_empty_panels(tmp_path):
    data = _write(tmp_path, hooked=False)
    assert point_of_interest(data) == "cap=25"   # the worst predicted of all, none having bucket times
    fig = timeline_figure(data)
    drawn = [ax for ax in fig.axes if ax.axison]
    assert len(drawn) == 1 and drawn[0].get_title(loc="left") == "predicted"
    notes = [t.get_text() for ax in fig.axes for t in ax.texts if t.get_gid() != "bucket-label"]
    assert len(notes) == 1 and "--no-bucket-timing" in notes[0]
    _assert_legends_clear(fig)


def test_bucket_labels_of_a_crowded_timeline_never_overlap(tmp_path):
    """40 buckets in 20 ms: labels that do not fit inside or above their bar are hidden, none overlap."""
    data = _write(tmp_path, hooked=True)
    times = [(0.1 + k * 5e-4, 0.1 + k * 5e-4, 0.1 + (k + 1) * 5e-4) for k in range(40)]
    data["buckets"]["cap=1"] = {"predicted": _predicted(times), "measured": _predicted(times),
                                "errors": bucket_errors(_predicted(times), _predicted(times))}
    fig = timeline_figure(data)
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    for ax in fig.axes[:2]:
        boxes = [t.get_window_extent(r) for t in ax.texts if t.get_gid() == "bucket-label" and t.get_visible()]
        assert 0 < len(boxes) < 40
        assert not any(a.overlaps(b) for i, a in enumerate(boxes) for b in boxes[i + 1:])
    ticks = fig.axes[2].get_xticks()
    assert all(float(t).is_integer() for t in ticks) and ticks[0] == 0 and ticks[-1] <= 39
    _assert_legends_clear(fig)


def test_validation_figure_has_integral_bucket_ticks_and_legends_outside(tmp_path):
    fig = validation_figure(_write(tmp_path, hooked=True))
    fig.canvas.draw()
    ax2 = fig.axes[1]
    lo, hi = ax2.get_xlim()
    assert all(float(t).is_integer() for t in ax2.get_xticks() if lo <= t <= hi)
    _assert_legends_clear(fig)
