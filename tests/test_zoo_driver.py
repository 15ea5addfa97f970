"""The zoo driver (ddpsim/validation/zoo_driver.py) with a stand-in for ddpsim.validation.measure.validate that writes the
round traces a validation leaves and returns its rows: resumable, one summary row per model,
stability on both clocks worked out by hand."""

from dataclasses import replace

import pytest

from ddpsim.cli.main import main
from ddpsim.errors import InputError
from ddpsim.trace.records import IterationSample, make_trace, save_trace
from ddpsim.validation.zoo_driver import run_zoo, summary_row


def _round_trace(wall_backward_s):
    # the same CPU time (forward 10 ms, backward 20 ms) in every round; the wall clock grows with the load
    t = make_trace(model="toy", params=[("a", (1 << 16,), "float32"), ("b", (1 << 16,), "float32")], ready_s=[0.5, 0.25],
                   forward_s=0.01, backward_s=0.02, optimizer_s=0.001)
    f = wall_backward_s / 0.02
    its = tuple(IterationSample(forward_s=0.01 * f, backward_s=wall_backward_s, optimizer_s=0.001,
                                grad_ready_s=(0.5 * wall_backward_s, 0.25 * wall_backward_s)) for _ in range(4))
    return replace(t, iterations=its, environment={"num_threads": 1, "cpu_phase_s": [[0.01, 0.02, 0.001]] * 4})


def fake_validate(calls):
    def validate(scenario, *, out_dir, caps, repeats, **kw):
        name = scenario.rsplit("/", 1)[-1].removesuffix(".yaml")
        calls.append(name)
        raw = out_dir / name / "validation"
        raw.mkdir(parents=True, exist_ok=True)
        for k, b in zip(range(1, repeats + 1), (0.02, 0.04, 0.03)):
            save_trace(_round_trace(b), raw / f"trace.round{k}.json")
        rows = [{"point": f"cap{c:g}", "bucket_cap_mb": c, "measured_s": 0.05, "predicted_s": 0.055, "error_pct": 10.0, "host_other_pct": 50.0,
                 "run_spread_pct": 4.0, "num_runs": repeats} for c in caps]
        return {"rows": rows, "summary": {}, "out": out_dir / name}
    return validate


class Said:
    """The zoo driver's log lines (its ``ddpsim`` logger messages) as a list."""

    def __init__(self, caplog):
        caplog.set_level("INFO", logger="ddpsim")
        self.caplog = caplog

    def _lines(self):
        return [r.getMessage() for r in self.caplog.records if r.name == "ddpsim.validation.zoo_driver"]

    def __getitem__(self, i):
        return self._lines()[i]

    def __iter__(self):
        return iter(self._lines())

    def clear(self):
        self.caplog.clear()


def test_zoo_summary_resume_and_failure(tmp_path, monkeypatch, caplog):
    import ddpsim.validation.measure as measure

    calls, lines = [], Said(caplog)
    kw = dict(out_dir=tmp_path, caps=[1.0, 25.0], repeats=2, iterations=4, num_resamples=5)
    monkeypatch.setattr(measure, "validate", fake_validate(calls))
    res = run_zoo(models=["tied_lm", "zoo:transformer_encoder"], **kw)
    assert calls == ["zoo-tied_lm", "zoo-transformer_encoder"]
    rows = res["rows"]
    assert [r["model"] for r in rows] == ["zoo:tied_lm", "zoo:transformer_encoder"]
    for r in rows:
        assert r["status"] == "done" and r["points"] == 2 and r["median_abs_error_pct"] == 10.0
        assert r["median_run_spread_pct"] == 4.0
        # rounds captured 20 and 40 ms of wall-clock backward for the same CPU time: the wall-clock
        # predictions differ, the CPU-clock ones are the same
        assert r["stability_pct"] > 10.0 and r["stability_cpu_pct"] == 0.0
        assert r["coverage"].endswith("/2") and r["coverage_cpu"].endswith("/2")
    import json
    pts = json.loads((tmp_path / "zoo" / "zoo-tied_lm" / "zoo.json").read_text())["analysis"]["points"]
    import os
    for p in pts:  # 2 ranks on this host's CPUs beside 50 % other load: each rank holds min(1, cpus * 0.5 / 2)
        assert p["cpu_share"] == pytest.approx(min(1.0, (os.cpu_count() or 1) * 0.5 / 2))
        assert p["predicted_load_s"] == pytest.approx(p["predicted_cpu_s"] / p["cpu_share"])
    md = (tmp_path / "zoo" / "summary.md").read_text()
    assert "| zoo:tied_lm | done | 2 | 10.0 % |" in md
    assert (tmp_path / "zoo" / "summary.csv").read_text().splitlines()[0].startswith("model,status,points")
    assert any("[2/2] zoo:transformer_encoder: done in" in ln for ln in lines)

    # resumed: both done, nothing validated again; a third model's failure is a row, not an exception
    def failing(scenario, **kw):
        raise InputError("executor ddp: exit status 1 (boom)")
    lines.clear()
    monkeypatch.setattr(measure, "validate", failing)
    res2 = run_zoo(models=["tied_lm", "transformer_encoder", "transformer_seq2seq"], **kw)
    assert [r["status"] for r in res2["rows"][:2]] == ["done", "done"]
    assert res2["rows"][2]["status"].startswith("failed: executor ddp: exit status 1")
    assert sum("done earlier" in ln for ln in lines) == 2

    # analysed again from what the validation left (its validation.json), nothing run
    import json
    for name in ("tied_lm", "transformer_encoder"):
        mdir = tmp_path / "zoo" / f"zoo-{name}"
        rows = [{"point": f"cap{c:g}", "bucket_cap_mb": c, "measured_s": 0.05, "predicted_s": 0.055, "error_pct": 10.0,
                 "host_other_pct": 50.0, "run_spread_pct": 4.0, "num_runs": 2} for c in (1.0, 25.0)]
        (mdir / "validation.json").write_text(json.dumps({"calibration": str(tmp_path / "none.json"), "rows": rows}))
    lines.clear()
    res3 = run_zoo(models=["tied_lm", "transformer_encoder", "branchy_mlp"], reanalyze=True, **kw)
    assert [r["model"] for r in res3["rows"]] == ["zoo:tied_lm", "zoo:transformer_encoder"]
    assert [r["stability_cpu_pct"] for r in res3["rows"]] == [0.0, 0.0]
    assert sum("analysed again" in ln for ln in lines) == 2 and "zoo:branchy_mlp: not validated yet" in lines[-2]
    # the closing line: models within 5 %, coverage without and with the other models' method error
    # (two models of 2 points each: 2 residuals left for each, too few for a band)
    assert lines[-1] == ("zoo: 0 of 2 models within 5 % median |error|; 4/4 measured means inside their 80% interval, "
                         "no method-error band yet (too few residuals of other models)")
    assert sum("is gone: the recorded predictions are kept" in ln for ln in lines) == 2  # none.json does not exist

    # ... and with another calibration: every point predicted again with it over the same runs
    asked = []

    def reanalyze(scenario, *, calibration, out_dir, plots, intervals):
        asked.append((scenario.rsplit("/", 1)[-1], str(calibration), intervals))
        return {"rows": [{**r, "predicted_s": 0.05, "error_pct": 0.0} for r in rows]}
    monkeypatch.setattr(measure, "reanalyze", reanalyze)
    other = tmp_path / "other-cal.json"
    res4 = run_zoo(models=["tied_lm", "transformer_encoder"], reanalyze=True,
                   **{**kw, "calibration": str(other)})
    assert asked == [("zoo-tied_lm.yaml", str(other), False), ("zoo-transformer_encoder.yaml", str(other), False)]
    assert [r["median_abs_error_pct"] for r in res4["rows"]] == [0.0, 0.0]
    assert json.loads((tmp_path / "zoo" / "zoo-tied_lm" / "zoo.json").read_text())["calibration"] == str(other)

    # without --calibration, the calibration the validation recorded predicts every point again
    # (an engine changed since: the errors are the current engine's, not the recorded ones)
    import shutil
    from pathlib import Path
    recorded = tmp_path / "recorded-cal.json"
    shutil.copy(Path(__file__).parent / "data" / "calibration-probe-fit.json", recorded)
    for name in ("tied_lm", "transformer_encoder"):
        vpath = tmp_path / "zoo" / f"zoo-{name}" / "validation.json"
        vpath.write_text(json.dumps({**json.loads(vpath.read_text()), "calibration": str(recorded)}))
    asked.clear()
    res5 = run_zoo(models=["tied_lm", "transformer_encoder"], reanalyze=True, **kw)
    assert asked == [("zoo-tied_lm.yaml", str(recorded), False), ("zoo-transformer_encoder.yaml", str(recorded), False)]
    assert [r["median_abs_error_pct"] for r in res5["rows"]] == [0.0, 0.0]


def test_zoo_idle_host_other_load_below_zero_counts_as_none(tmp_path, monkeypatch):
    import ddpsim.validation.measure as measure

    base = fake_validate([])

    def validate(scenario, **kw):
        res = base(scenario, **kw)
        for r in res["rows"]:
            r["host_other_pct"] = -0.15  # /proc/stat's noise on an idle host
        return res
    monkeypatch.setattr(measure, "validate", validate)
    r = run_zoo(models=["tied_lm"], out_dir=tmp_path, caps=[25.0], repeats=2, iterations=4, num_resamples=3)["rows"][0]
    assert r["status"] == "done" and r["median_abs_error_load_pct"] == r["median_abs_error_cpu_pct"]


def test_zoo_captures_of_several_threads_have_no_cpu_clock(tmp_path, monkeypatch):
    import ddpsim.validation.measure as measure

    base = fake_validate([])

    def validate(scenario, **kw):
        res = base(scenario, **kw)
        for k, b in zip(range(1, kw["repeats"] + 1), (0.02, 0.04)):  # the same rounds, captured with 2 threads
            t = _round_trace(b)
            save_trace(replace(t, environment={**t.environment, "num_threads": 2}), res["out"] / "validation" / f"trace.round{k}.json")
        return res
    monkeypatch.setattr(measure, "validate", validate)
    r = run_zoo(models=["tied_lm"], out_dir=tmp_path, caps=[25.0], repeats=2, iterations=4, num_resamples=3)["rows"][0]
    assert r["status"] == "done" and r["median_abs_error_pct"] == 10.0 and r["stability_pct"] > 10.0
    assert (r["median_abs_error_cpu_pct"], r["stability_cpu_pct"], r["coverage_cpu"]) == (None, None, None)


def test_zoo_bad_input(tmp_path):
    with pytest.raises(InputError, match="model: 'zoo:nosuch' is not a zoo model"):
        run_zoo(models=["nosuch"], out_dir=tmp_path)
    with pytest.raises(InputError, match="--repeats: 0 is not accepted"):
        run_zoo(models=["tied_lm"], out_dir=tmp_path, repeats=0)
    assert summary_row("zoo:x", {"status": "skipped"})["points"] is None


def test_zoo_cli_flags(capsys):
    assert main(["validate", "zoo", "--repeats", "0"]) == 2
    assert capsys.readouterr().err == ("ddpsim: error: --repeats: 0 is not accepted; expected an integer in [1, 1000]\n")


def test_zoo_verb_runs_the_driver(tmp_path, monkeypatch, capsys):
    import ddpsim.validation.zoo_driver as zd

    asked = []
    monkeypatch.setattr(zd, "run_zoo", lambda **kw: asked.append(kw) or {"rows": [], "out": tmp_path / "zoo"})
    assert main(["validate", "zoo:tied_lm, resnet18", "--caps", "5,25", "--repeats", "2", "--out-dir", str(tmp_path),
                 "--quiet"]) == 0
    assert asked[0]["models"] == ["tied_lm", "resnet18"] and asked[0]["caps"] == [5, 25] and asked[0]["repeats"] == 2
    assert asked[0]["iterations"] == 20 and asked[0]["warmup"] == 5 and not asked[0]["reanalyze"]
    assert capsys.readouterr().out == f"zoo: wrote {tmp_path / 'zoo'}/summary.md, summary.csv, summary.json\n"


def test_zoo_with_one_round_has_no_stability_figure(tmp_path, monkeypatch, caplog):
    import ddpsim.validation.measure as measure

    lines = Said(caplog)
    monkeypatch.setattr(measure, "validate", fake_validate([]))
    res = run_zoo(models=["tied_lm"], out_dir=tmp_path, caps=[25.0], repeats=1, iterations=4, num_resamples=3)
    r = res["rows"][0]
    assert r["status"] == "done" and r["stability_pct"] is None and r["stability_cpu_pct"] is None
    assert r["coverage"].endswith("/1") and "stability" not in lines[-1]


def test_the_scenarios_in_every_committed_raw_run_archive_are_valid_scenarios():
    # `ddpsim validate zoo --reanalyze` reads the scenarios an archive holds: a schema change
    # that leaves them behind (a renamed key) would make the committed zoo report unreproducible
    import subprocess
    import tarfile

    import yaml

    from ddpsim.pipeline.scenario import scenario_from_dict
    from ddpsim.validation.launch import REPO_ROOT

    try:
        listed = subprocess.run(["git", "ls-files", "*.tar.xz"], cwd=REPO_ROOT, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    checked = 0
    for rel in listed.stdout.decode().split():
        with tarfile.open(REPO_ROOT / rel) as tar:
            for m in tar.getmembers():
                if m.name.startswith("scenarios/") and m.name.endswith(".yaml"):
                    sc = scenario_from_dict(yaml.safe_load(tar.extractfile(m)), source=f"{rel}:{m.name}")
                    assert sc.name == m.name.rpartition("/")[2].removesuffix(".yaml")
                    checked += 1
    assert checked >= 11  # the zoo's eleven models
