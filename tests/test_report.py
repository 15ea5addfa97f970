"""Report: summary figures from hand-worked sweep points, CSVs, reproducible PNGs."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
from test_sweep import fake_build, make_scenario

from analytic_model import analytic_simulate
from ddpsim.pipeline.scenario_run import ScenarioRun
from ddpsim.report.summary import BUCKET_FIELDS, bucket_rows, render_summary, summarize
from ddpsim.report.tables import to_csv_text
from ddpsim.pipeline.sweep import run_sweep, sweep_rows, sweep_table


@pytest.fixture
def records(tmp_path, tiny_trace_file):
    sc = make_scenario(tmp_path, tiny_trace_file)
    return sc, run_sweep(sc, jobs=1, progress=False, simulate=analytic_simulate, build=fake_build)


def test_summary_figures(records):
    sc, recs = records
    s = summarize(ScenarioRun(scenario=sc, out_dir=Path(), records=tuple(recs)))
    # worked in test_sweep: default 145.18 ms, cap 0.004 MiB 144.28 ms
    assert s["best"]["point"] == "cap=0.004" and s["default"]["point"] == "cap=default"
    assert s["gain_over_default"] == pytest.approx(0.0009 / 0.14518)
    assert s["saved_per_step_s"] == pytest.approx(0.0009)
    assert s["best"]["exposed_comm_p95_s"] == pytest.approx(0.10928)
    md = render_summary(s)
    for section in ("## Answer", "## Iteration-time breakdown", "## Sweep", "## First iteration and the bucket rebuild",
                    "## Overlap shown by the Perfetto traces"):
        assert section in md
    assert "**Best bucket_cap_mb: 0.004 MiB**" in md and "0.6% faster" in md
    assert "Exposed communication tail (p95 over steady iterations): 109.280 ms" in md
    best_row = next(ln for ln in md.split("## Sweep")[1].splitlines() if "**best**" in ln)
    cells = [c.strip() for c in best_row.strip("|").split("|")]
    assert cells[0] == "`cap=0.004` **best**" and cells[2] == "144.280 ms"  # point, buckets, p50 step


def test_summary_renders_from_typed_figures(records):
    """summary.md is rendered from the typed Summary read from summary.json's document: the same
    text from either, and a figure of the wrong type is refused rather than printed."""
    import json

    import pydantic

    from ddpsim.report.figures import Summary, typed

    sc, recs = records
    s = summarize(ScenarioRun(scenario=sc, out_dir=Path(), records=tuple(recs)))
    summ = typed(Summary, json.loads(json.dumps(s)))
    assert summ.best.point == "cap=0.004" and summ.points[0].point == "cap=default"
    assert summ.best.exposed_comm_p95_s == pytest.approx(0.10928) and summ.trace is None
    assert render_summary(summ) == render_summary(s)
    with pytest.raises(pydantic.ValidationError, match="iteration_p50_s"):
        typed(Summary, dict(s, best=dict(s["best"], iteration_p50_s="fast")))


def test_csvs(records):
    _, recs = records
    t = to_csv_text(sweep_rows(recs))
    assert t == to_csv_text(sweep_table(recs))  # the report's rows and the API's DataFrame
    assert t.splitlines()[0].startswith("point,bucket_cap_mb,world_size,num_buckets,iteration_p50_s")
    rows = list(csv.DictReader(io.StringIO(to_csv_text(bucket_rows(recs), BUCKET_FIELDS))))
    assert list(BUCKET_FIELDS) == ["point", "rank", "iteration", "bucket", "size_bytes", "num_params", "ready_s",
                                   "launch_s", "start_s", "end_s"]
    row = next(r for r in rows if (r["point"], r["iteration"], r["bucket"]) == ("cap=0.004", "2", "1"))
    # iteration 2 starts at 145.18 ms; backward at +10 ms; bucket 1 (8192 B) ready at +4 ms, starts at +47.26 ms
    assert row["size_bytes"] == "8192"
    assert float(row["start_s"]) == pytest.approx(0.14518 + 0.010 + 0.04726)


def test_pngs_reproducible(records, tmp_path):
    from ddpsim.report import plots

    _, recs = records
    t = sweep_table(recs)
    a = plots.save_figure(plots.sweep_figure(t), tmp_path / "a.png")
    b = plots.save_figure(plots.sweep_figure(t), tmp_path / "b.png")
    assert a.read_bytes() == b.read_bytes()
    c = plots.save_figure(plots.timeline_figure(recs[1].result), tmp_path / "c.png")
    d = plots.save_figure(plots.timeline_figure(recs[1].result), tmp_path / "d.png")
    assert c.read_bytes() == d.read_bytes() and c.read_bytes()[:4] == b"\x89PNG"


def test_run_scenario_writes_everything(tmp_path, tiny_trace_file):
    import json

    from ddpsim.api import run_scenario
    from ddpsim.plan.planner import load_plan
    from ddpsim.trace.records import load_trace

    sc = make_scenario(tmp_path, tiny_trace_file)
    rep = run_scenario(sc, out_dir=tmp_path / "out", jobs=1, plots=False, progress=False,
                       simulate_fn=analytic_simulate, build_fn=fake_build)
    d = tmp_path / "out" / "tiny"
    for n in ("summary.md", "summary.json", "sweep.csv", "buckets.csv", "recommended_plan.json",
              "trace_cap-default_rank0.json.gz", "trace_cap-0.004_rank0.json.gz", "points/cap-25.json"):
        assert (d / n).is_file(), n
    # explicit plan [3], [2], [1, 0]: last collective ends at 127.64 ms after backward start (test_recommend),
    # exposed 107.64 ms; step 10 + 20 + 107.64 + 5 = 142.64 ms vs 144.28 ms at the best cap
    rec = rep.summary["recommendation"]
    assert rec["better"] and rec["iteration_p50_s"] == pytest.approx(0.14264)
    assert rec["gain_over_best_cap"] == pytest.approx((0.14428 - 0.14264) / 0.14428)
    plan = load_plan(d / "recommended_plan.json", load_trace(tiny_trace_file))
    assert [list(b.param_indices) for b in plan.steady] == [[3], [2], [1, 0]]
    assert json.loads((d / "summary.json").read_text())["best"]["point"] == "cap=0.004"
    assert "1.1% faster than the best cap" in (d / "summary.md").read_text()
    # the list to paste (test_plan_cap_list): [3] = 64 B -> 6e-05 MiB (62 B), [2] = 4096 B -> 0.003
    # MiB (3145 B), [1 0] = 8448 B last -> 0.009 MiB >= it; DDP under it rebuilds [3] [2] [1 0], so its
    # steady steps are the explicit plan's
    cl = rec["cap_list"]
    assert cl["bucket_cap_mb_list"] == [6e-05, 0.003, 0.009] and cl["reproduces_recommended_plan"]
    assert cl["iteration_p50_s"] == pytest.approx(0.14264) and cl["best_cap_point"] == "cap=0.004"
    assert cl["gain_over_best_cap"] == pytest.approx((0.14428 - 0.14264) / 0.14428)
    p50_default = rep.summary["default"]["iteration_p50_s"]
    assert cl["gain_over_default"] == pytest.approx((p50_default - 0.14264) / p50_default)
    assert "`DDP(model, bucket_cap_mb_list=[6e-05, 0.003, 0.009])` - real DDP rebuilds exactly" in (d / "summary.md").read_text()
    doc = json.loads((d / "recommended_plan.json").read_text())
    assert doc["bucket_cap_mb_list"]["bucket_cap_mb_list"] == [6e-05, 0.003, 0.009]
    from ddpsim.plan.planner import DDPOptions, plan_ddp

    replanned = plan_ddp(load_trace(tiny_trace_file), DDPOptions(bucket_cap_mb_list=doc["bucket_cap_mb_list"]["bucket_cap_mb_list"]))
    assert [list(b.param_indices) for b in replanned.steady] == [b["param_indices"] for b in doc["buckets"]]


def test_paste_line_is_the_uniform_cap_when_no_list_is_faster():
    """A list predicted less than 1 % faster than the best uniform cap: the cap is what to paste (DDP's
    default spells as plain ``DDP(model)``), the list stays in recommended_plan.json."""
    from dataclasses import replace

    from ddpsim.report.figures import CapList, typed
    from ddpsim.report.summary import _cap_list_line

    cl = typed(CapList, {"bucket_cap_mb_list": [400, 600], "paste": "DDP(model, bucket_cap_mb_list=[400, 600])",
          "reproduces_recommended_plan": True, "reason": "", "iteration_p50_s": 0.240,
          "gain_over_default": 0.005, "gain_over_best_cap": -0.0001, "best_cap_point": "cap=400",
          "best_cap_mb": 400.0, "default_point": "cap=default"})
    assert _cap_list_line(cl, 0.02) == ("- **To paste**: `DDP(model, bucket_cap_mb=400)` (`cap=400`) - no bucket_cap_mb_list "
                                  "is predicted 1% or more faster than this uniform cap (the best list, -0.0%, is in "
                                  "`recommended_plan.json`).")
    # +0.5 %: a tie in practice, the cap stays the line to paste
    assert _cap_list_line(replace(cl, gain_over_best_cap=0.005), 0.02).startswith("- **To paste**: `DDP(model, bucket_cap_mb=400)`")
    assert _cap_list_line(replace(cl, best_cap_mb=None, best_cap_point="cap=default"), 0.0).startswith(
        "- **To paste**: `DDP(model)` (`cap=default`)")
    faster = replace(cl, gain_over_best_cap=0.02)
    assert _cap_list_line(faster, 0.0).startswith("- **To paste** (torch >= 2.13): `DDP(model, bucket_cap_mb_list=[400, 600])`")


def test_a_gain_at_rounding_level_prints_without_a_sign_but_a_real_one_keeps_it():
    """Two step times equal to rounding give a gain of about 1e-16, either sign: "+0.0%"; a real
    gain of -0.01 % still prints its sign."""
    from ddpsim.pipeline.sweep import fmt_pct

    assert fmt_pct(-1.7e-16) == fmt_pct(1.7e-16) == fmt_pct(0.0) == "+0.0%"
    assert fmt_pct(-0.0001) == "-0.0%" and fmt_pct(0.0123) == "+1.2%" and fmt_pct(None) == "-"
