"""`ddpsim run` / `ddpsim sweep` end to end on the default scenario (real engine), and exit-2 errors."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
import yaml

from ddpsim.cli.main import main

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(not (ROOT / "traces" / "mlp.cpu.json").is_file(), reason="bundled trace missing")


#: the default scenario's points the second run simulates again (its timelines' points); it
#: reuses the other finished points of the first run
RESIMULATED = ("cap-default.json", "cap-50.json")
#: what the run keeps beside its points for a rerun, not a point's file: the recommendation
#: (ddpsim.pipeline.run) and the report's files (ddpsim.report.kept_files), computed again
KEPT = ("recommend.json", "report.json")


def test_default_run_is_deterministic(tmp_path, capsys, monkeypatch):
    """The default scenario with points simulated in 2 worker processes, then again in this
    process with the other points resumed from the first run's files: the same bytes."""
    monkeypatch.chdir(ROOT)
    assert main(["run", "--out-dir", str(tmp_path / "a"), "--jobs", "2", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "Best bucket_cap_mb" in out and "summary.md" in out
    a, b = tmp_path / "a" / "default", tmp_path / "b" / "default"
    kept = sorted(p.name for p in (a / "points").glob("*.json") if p.name not in RESIMULATED + KEPT)
    assert len(kept) == 6
    (b / "points").mkdir(parents=True)
    for n in kept:
        (b / "points" / n).write_bytes((a / "points" / n).read_bytes())
    assert main(["run", "default", "--out-dir", str(tmp_path / "b"), "--jobs", "1", "--quiet"]) == 0
    assert sorted(p.name for p in (b / "points").glob("*.json")) == sorted([*kept, *RESIMULATED, *KEPT])
    names = sorted(p.relative_to(a).as_posix() for p in a.rglob("*") if p.is_file())
    for must in ("summary.md", "summary.json", "sweep.csv", "buckets.csv", "sweep.png", "bucket_sizes.png",
                 "recommended_plan.json", "trace_cap-default_rank0.json.gz", "timeline_cap-default.png"):
        assert must in names
    assert names == sorted(p.relative_to(b).as_posix() for p in b.rglob("*") if p.is_file())
    for n in names:
        assert (a / n).read_bytes() == (b / n).read_bytes(), n
    # the summary's overlap is the one computed from the written trace (HTA's algorithm)
    from ddpsim.report.perfetto import comm_comp_overlap

    s = json.loads((a / "summary.json").read_text())
    tr = json.loads(gzip.decompress((a / "trace_cap-default_rank0.json.gz").read_bytes()))
    assert s["overlaps"]["cap=default"]["0"] == pytest.approx(comm_comp_overlap(tr))
    # the recommended plan is accepted by `ddpsim plan --plan` on the scenario's trace
    from ddpsim.pipeline.scenario import load_scenario

    trace = str(load_scenario("default").trace_path)
    assert main(["plan", trace, "--plan", str(a / "recommended_plan.json")]) == 0


def _scenario(tmp_path, **over) -> Path:
    d = {"name": "keep", "trace": str(ROOT / "traces" / "mlp.cpu.json"), "cluster": {"topology": "cpu-gloo"},
         "world_size": 2, "simulation": {"iterations": 3}, "sweep": {"bucket_cap_mb": [1]}}
    d.update(over)
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(d))
    return p


@pytest.mark.parametrize("over, match", [
    ({"ddp": {"bucket_cap_mb": "abc"}}, "ddp.bucket_cap_mb: 'abc' is not accepted; expected a number > 0 or null"),
    ({"trace": "missing/none.json"}, "trace: 'missing/none.json' does not exist"),
    ({"world_size": 64}, "world_size: 64 is not accepted; expected at most"),
    ({"extra_key": 1}, "extra_key: unknown key"),
    ({"cost_model": {"enqueue_s": -1}}, "cost_model.enqueue_s: -1 is not accepted; expected a finite number of seconds >= 0"),
    ({"cost_model": {"memory_bound_fraction": 1.5}}, "cost_model.memory_bound_fraction: 1.5 is not accepted"),
])
def test_bad_scenario_exit_2_keeps_old_files(tmp_path, capsys, over, match):
    old = tmp_path / "out" / "keep" / "summary.md"
    old.parent.mkdir(parents=True)
    old.write_text("previous report\n")
    assert main(["run", str(_scenario(tmp_path, **over)), "--out-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("ddpsim: error: ") and match in err and err.count("\n") == 1
    assert old.read_text() == "previous report\n"


def test_unwritable_out_dir(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["run", str(_scenario(tmp_path)), "--out-dir", str(blocker)]) == 2
    assert "--out-dir: " in capsys.readouterr().err


def test_sweep_cli(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(["sweep", "--trace", "traces/mlp.cpu.json", "--set", "sweep.bucket_cap_mb=[0.25, 25]", "--set",
                 "simulation.iterations=3",
                 "--jobs", "1", "--format", "csv"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("point,bucket_cap_mb") and [x.split(",")[0] for x in lines[1:]] == ["cap=default", "cap=0.25", "cap=25"]


@pytest.mark.parametrize("argv, match", [
    (["--set", "sweep.bucket_cap_mb=[]"], "--set sweep.bucket_cap_mb: [] is not accepted; expected at least one point"),
    (["--set", "sweep.bucket_cap_mb=[x]"], "--set sweep.bucket_cap_mb[0]: 'x' is not accepted"),
    (["--jobs", "0"], "--jobs: 0 is not accepted; expected an integer in [1, 1024]"),
    (["--format", "xml"], "--format: 'xml' is not accepted"),
    (["--topology", "nope"], "topology: 'nope' is not a preset"),
])
def test_sweep_cli_errors(capsys, monkeypatch, argv, match):
    monkeypatch.chdir(ROOT)
    assert main(["sweep", "--trace", "traces/mlp.cpu.json", *argv]) == 2
    assert match in capsys.readouterr().err


CLAMPED = ROOT / "tests" / "data" / "calibration-probe-clamped.json"  # a disturbed probe run: the fit at its bound
UNCLAMPED = ROOT / "tests" / "data" / "calibration-probe-fit.json"


def test_a_calibration_with_a_clamped_probe_fit_is_called_out_by_every_predicting_command(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    head = ("WARNING: the calibration's probe fit hit its bound: compute_slowdown 16 gives a 435.2 ms probe step, "
            "the probe measured 497.2 ms (302.0 ms without interference)")
    assert main(["run", str(_scenario(tmp_path, calibration=str(CLAMPED))), "--out-dir", str(tmp_path / "out"),
                 "--quiet", "--no-plots", "--jobs", "1"]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"ddpsim run: {head}") and err.count("\n") == 1  # printed even with --quiet
    rdir = tmp_path / "out" / "keep"
    assert json.loads((rdir / "summary.json").read_text())["warnings"][0].startswith(head[len("WARNING: "):])
    assert any(line.startswith(f"**{head}") for line in (rdir / "summary.md").read_text().splitlines())
    assert main(["sweep", "--trace", "traces/mlp.cpu.json", "--set", "sweep.bucket_cap_mb=[1]", "--set",
                 "simulation.iterations=3", "--jobs", "1", "--format", "csv", "--set", f"calibration={CLAMPED}"]) == 0
    assert capsys.readouterr().err.startswith(f"ddpsim sweep: {head}")
    assert main(["simulate", "--trace", "traces/mlp.cpu.json", "--topology", "cpu-gloo", "--set", "world_size=2",
                 "--set", "simulation.iterations=3", "--set", f"calibration={CLAMPED}", "--format", "json"]) == 0
    assert capsys.readouterr().err.startswith(f"ddpsim simulate: {head}")
    # an undisturbed calibration: no warning anywhere
    assert main(["run", str(_scenario(tmp_path, calibration=str(UNCLAMPED))), "--out-dir", str(tmp_path / "out2"),
                 "--quiet", "--no-plots", "--jobs", "1"]) == 0
    assert "WARNING" not in capsys.readouterr().err
    assert "warnings" not in json.loads((tmp_path / "out2" / "keep" / "summary.json").read_text())


def test_bad_calibration_host_costs_exit_2(tmp_path, capsys):
    doc = json.loads(UNCLAMPED.read_text())
    doc["host_costs"] = {"hook_s_per_param": "8us"}
    cal = tmp_path / "cal.json"
    cal.write_text(json.dumps(doc))
    assert main(["run", str(_scenario(tmp_path, calibration=str(cal))), "--out-dir", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "host_costs.hook_s_per_param: '8us' is not accepted" in err and err.count("\n") == 1
