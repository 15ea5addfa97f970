"""The executor's steps on 2 gloo ranks (CPU): collectives calibration, real DDP, replay, rounds, profiles.

Spawned runs are small (the bundled MLP, a few iterations). No timing is asserted: only
schemas, counts, bucket layouts worked out by hand, and exit behaviour. Every executor run
whose outputs a test reads shares ONE launch (the ``jobs`` fixture, tests/executor_jobs.py).
The lifecycle checks whose process itself is the point (no torchrun, a killed peer, a fresh
heap, an import blocker) are tests/test_executor_lifecycle.py's.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ddpsim.errors import InputError
from ddpsim.validation.launch import REPO_ROOT

pytestmark = pytest.mark.slow

MLP_TRACE = REPO_ROOT / "traces" / "mlp.cpu.json"

# Bundled MLP (width 256, depth 4, 10 classes), fp32, DDP order:
# 0 layers.0.weight 262144 B, 1 layers.0.bias 1024, 2/3, 4/5, 6/7 the same, 8 head.weight 10240, 9 head.bias 40.
# Gradients become ready in reverse order (9, 8, ..., 0). With bucket_cap_mb=0.1 (104857 B) the
# rebuild fills [9, 8, 7, 6] = 40+10240+1024+262144 = 273448 B, then [5, 4], [3, 2], [1, 0]
# = 1024+262144 = 263168 B each.
CAP_01_BUCKETS = [[9, 8, 7, 6], [5, 4], [3, 2], [1, 0]]
CAP_01_SIZES = [273448, 263168, 263168, 263168]


def _jobs(d: Path) -> dict[str, list[str]]:
    """Every executor run of this module's tests that shares the launch (:func:`jobs`), by
    job name; job ``name`` writes under ``d / name``, the factory models' traces lie in ``d``."""
    t = "--timeout-s", "60"
    ddp = "ddp", "--model", "mlp", *t
    return {
        "collectives": ["collectives", *t, "--out", str(d / "collectives" / "cal.json"), "--min-bytes", "4KiB",
                        "--max-bytes", "64KiB", "--repeats", "3", "--warmup", "1", "--interference-bytes", "64KiB",
                        "--interference-repeats", "3", "--ddp-overhead-rounds", "2", "--loop-ms", "2", "--probe-rounds", "1",
                        "--after-compute-max-bytes", "16KiB"],
        "collectives-gap": ["collectives", *t, "--out", str(d / "collectives-gap" / "cal.json"), "--min-bytes", "4KiB",
                            "--max-bytes", "16KiB", "--repeats", "3", "--warmup", "1", "--skip-interference",
                            "--ddp-overhead-rounds", "0", "--gap-ms", "2", "--ops", "allreduce", "--after-compute-ms", "0"],
        "collectives-bad-gap": ["collectives", *t, "--out", str(d / "collectives-bad-gap" / "c.json"), *COLLECTIVES_REFUSALS[0][0]],
        "ddp-rebuilt": [*ddp, "--batch-size", "32", "--bucket-cap-mb", "0.1", "--iterations", "3", "--warmup", "2",
                        "--trace", str(MLP_TRACE), "--timing-hook", "--out", str(d / "ddp-rebuilt" / "m.json")],
        "ddp-default-cap": [*ddp, "--batch-size", "8", "--iterations", "1", "--warmup", "2",
                            "--plan", str(d / "ddp-default-cap" / "plan.json"), "--out", str(d / "ddp-default-cap" / "m.json")],
        **{f"replay-{c}": ["replay", "--trace", str(MLP_TRACE), "--plan", str(d / f"replay-{c}" / "plan.json"), "--compute", c,
                           "--iterations", "3", "--warmup", "1", *t, "--out", str(d / f"replay-{c}" / "r.json"),
                           *(["--model", "mlp", "--batch-size", "32"] if c == "real" else [])] for c in ("real", "synthetic")},
        "round": ["round", "--model", "mlp", "--batch-size", "32", "--caps", f"0.1,{LIST_CAP},none", "--iterations", "2",
                  "--warmup", "2", "--trace-iters", "2", "--round", "3", *t, "--out-dir", str(d / "round" / "raw")],
        "round-bad": ["round", "--model", "mlp", "--caps", "1", "--trace-iters", "0", *t, "--out-dir", str(d / "round-bad")],
        "ddp-cap-list": [*ddp, "--batch-size", "8", "--bucket-cap-mb", "5", "--bucket-cap-mb-list", "0.2,0.5,0.3",
                         "--iterations", "1", "--warmup", "2", "--trace", str(MLP_TRACE), "--out", str(d / "ddp-cap-list" / "m.json")],
        "ddp-construction": ["ddp", "--model", "h1unused:build", "--batch-size", "4", "--options", '{"find_unused_parameters": true}',
                             "--iterations", "1", "--warmup", "2", "--trace", str(d / "h1unused.trace.json"), *t,
                             "--out", str(d / "ddp-construction" / "m.json")],
        "ddp-batched-grad-copy": [*ddp, "--batch-size", "8", "--bucket-cap-mb", "0.1", "--options", '{"batched_grad_copy": true}',
                                  "--iterations", "1", "--warmup", "2", "--trace", str(MLP_TRACE),
                                  "--out", str(d / "ddp-batched-grad-copy" / "m.json")],
        **{f"ddp-skip-{skip}": ["ddp", "--model", "h8unusedlast:build", "--batch-size", "4", "--bucket-cap-mb", "0.06", "--options",
                                json.dumps({"find_unused_parameters": True, "skip_all_reduce_unused_params": skip}), "--timing-hook",
                                "--iterations", "2", "--warmup", "2", "--trace", str(d / "h8unusedlast.trace.json"), *t,
                                "--out", str(d / f"ddp-skip-{skip}" / "m.json")] for skip in (False, True)},
        "ddp-mixed-precision": [*ddp, "--batch-size", "8", "--options", '{"mixed_precision": {"param_dtype": "bfloat16"}}',
                                "--iterations", "1", "--warmup", "2", "--out", str(d / "ddp-mixed-precision" / "m.json")],
        "measure-point-frees": ["python", str(d / "measure-point-frees" / "script.py")],
        "profile-bad-warmup": ["profile", "--model", "mlp", "--warmup", "1", *t, "--out-dir", str(d / "profile-bad-warmup" / "p")],
        "profile": ["profile", "--model", "mlp", "--batch-size", "8", "--warmup", "2", "--active", "2", "--bucket-cap-mb", "0.1",
                    *t, "--out-dir", str(d / "profile" / "prof")],
    }


#: the jobs each test reads (the launch runs those of the selected tests only)
TEST_JOBS = {
    "test_collectives_writes_the_calibration_schema": ["collectives"],
    "test_collectives_gap_mode_times_one_op_after_compute": ["collectives-gap"],
    "test_collectives_refuses_a_bad_gap_under_torchrun": ["collectives-bad-gap"],
    "test_ddp_rebuilt_buckets_equal_the_predicted_plan": ["ddp-rebuilt"],
    "test_ddp_default_cap_mismatch_is_reported": ["ddp-default-cap"],
    "test_replay_runs_any_plan_in_order": ["replay-real", "replay-synthetic"],
    "test_round_measures_every_cap_after_its_trace_slice_in_one_launch": ["round"],
    "test_round_refuses_bad_input_with_one_line": ["round-bad"],
    "test_ddp_bucket_cap_mb_list_rebuilds_the_planned_buckets": ["ddp-cap-list"],
    "test_plan_matches_the_construction_layout_when_ddp_never_rebuilds": ["ddp-construction"],
    "test_ddp_batched_grad_copy_is_in_force_and_the_buckets_are_the_planned_ones": ["ddp-batched-grad-copy"],
    "test_ddp_skip_all_reduce_unused_params_leaves_the_unused_bucket_out": ["ddp-skip-False", "ddp-skip-True"],
    "test_ddp_mixed_precision_on_gloo_is_refused_in_one_line": ["ddp-mixed-precision"],
    "test_profile_writes_one_torch_profiler_trace_per_rank": ["profile"],
    "test_measure_point_frees_its_reducer_so_the_next_wrapper_is_alone": ["measure-point-frees"],
    "test_profile_refuses_too_few_warmup_steps_in_one_line": ["profile-bad-warmup"],
}

#: the factory models of the unused-parameter tests, each beside its trace (h1unused.trace.json ...)
FACTORIES = {"h1unused": "UNUSED_FACTORY", "h8unusedlast": "UNUSED_LAST_FACTORY"}


def _save_factory_trace(d: Path, name: str) -> None:
    from ddpsim.trace.capture import capture_trace
    from ddpsim.trace.models import build_model
    from ddpsim.trace.records import save_trace

    (d / f"{name}.py").write_text(globals()[FACTORIES[name]])
    with pytest.MonkeyPatch.context() as mp:
        mp.syspath_prepend(str(d))
        trace = capture_trace(build_model(f"{name}:build"), batch_size=4, num_iters=1, num_warmup=0,
                              measure_hook_overhead=False)
    save_trace(trace, d / f"{name}.trace.json")


@pytest.fixture(scope="module")
def jobs(request, tmp_path_factory):
    """The executor runs of the selected tests, all in ONE launch of 2 gloo ranks
    (tests/executor_jobs.py: each job through the executor's own parser, step and exit statuses,
    in one process group): what each test asserts is read back from its job. The launch's
    start-up (torchrun, torch imported in every rank) is paid once instead of once per run."""
    from executor_jobs import launch_jobs

    selected_tests = request.node.listchain()[0].items  # the run's root node: the tests selected to run
    wanted = {job for item in selected_tests if item.module is request.module for job in TEST_JOBS.get(item.originalname, ())}
    d = tmp_path_factory.mktemp("executor-jobs")
    selected = {name: argv for name, argv in _jobs(d).items() if name in wanted}
    for name in selected:
        (d / name).mkdir()
    for name in FACTORIES:
        if any(f"{name}.trace.json" in a for argv in selected.values() for a in argv):
            _save_factory_trace(d, name)
    # a plan that is not DDP's (two buckets split differently); and, not one DDP would build,
    # the small head bucket last
    plans = {"ddp-default-cap": [[9, 8, 7], [6, 5, 4, 3, 2, 1, 0]],
             "replay-real": [[7, 6, 5, 4], [3, 2, 1, 0], [9, 8]], "replay-synthetic": [[7, 6, 5, 4], [3, 2, 1, 0], [9, 8]]}
    for name, buckets in plans.items():
        if name in selected:
            (d / name / "plan.json").write_text(json.dumps({"buckets": buckets}))
    if "measure-point-frees" in selected:
        (d / "measure-point-frees" / "script.py").write_text(ROUND_FREES_REDUCER)
    return launch_jobs(selected, d, pythonpath=[str(d)])


def _ok(job):
    assert job.returncode == 0, job.log()
    return job


def test_collectives_writes_the_calibration_schema(jobs):
    r = _ok(jobs["collectives"])
    out = r.dir / "cal.json"
    cal = json.loads(out.read_text())
    assert set(cal) == {"format", "version", "backend", "world_size", "device", "environment", "collectives",
                        "interference", "copy_bandwidth_bytes_per_s", "ddp_iteration_overhead_s", "ddp_overhead",
                        "interference_probe", "allreduce_after_compute", "broadcast_per_tensor_s", "buffer_broadcast",
                        "allreduce_queued", "comm_threads"}
    assert (cal["format"], cal["version"], cal["backend"], cal["world_size"], cal["device"]) == ("ddpsim-calibration", 1, "gloo", 2, "cpu")
    assert {"torch_version", "hostname_hash"} <= set(cal["environment"])
    assert cal["environment"]["num_threads"] == 1
    assert cal["environment"]["malloc"].startswith("steady (glibc mallopt")  # the CPU default, on this glibc host
    for op in ("allreduce", "broadcast"):
        pts = cal["collectives"][op]
        assert [p["size_bytes"] for p in pts] == [4096, 16384, 65536]  # 4 KiB x4 up to 64 KiB
        for p in pts:
            assert set(p) == {"size_bytes", "time_s", "median_s", "p10_s", "p90_s", "num_samples", "ops_per_sample"}
            assert p["num_samples"] == 3 and 0 < p["p10_s"] <= p["time_s"] <= p["p90_s"]
            assert 1 <= p["ops_per_sample"] <= 50  # a back-to-back run of ~2 ms per sample
    # and, by default on CPUs, the all-reduces up to --after-compute-max-bytes once more, one op
    # per sample launched after 2 ms of compute
    after = cal["allreduce_after_compute"]
    assert [(p["size_bytes"], p["ops_per_sample"], p["gap_ms"], p["num_samples"]) for p in after] == [(4096, 1, 2.0, 3), (16384, 1, 2.0, 3)]
    # and, by default on CPUs, 8 all-reduces queued at once per sample, at every size up to
    # 64 MiB, with gloo's worker threads beside them
    queued = cal["allreduce_queued"]
    assert [(p["size_bytes"], p["ops_per_sample"], p["num_samples"]) for p in queued] == [(s, 8, 10) for s in (4096, 16384, 65536)]
    assert all(p["time_s"] > 0 for p in queued) and cal["comm_threads"] == 2
    inter = cal["interference"]
    assert inter["compute_slowdown"] >= 1.0 and inter["comm_slowdown"] >= 1.0 and isinstance(inter["details"], dict)
    assert cal["copy_bandwidth_bytes_per_s"] > 0
    # DDP's per-iteration overhead: a tiny model with and without DDP, 2 rounds of 5 steps each
    ov = cal["ddp_overhead"]
    assert cal["ddp_iteration_overhead_s"] == max(0.0, ov["raw_overhead_s"]) and ov["num_steps"] == 10
    assert ov["raw_overhead_s"] == pytest.approx(ov["ddp_step_s"] - ov["bare_step_s"] - ov["allreduce_curve_s"] - ov["copy_s"])
    # DDP's buffer broadcast per buffer: 96 small tensors against one of their bytes, 30 rounds
    bb = cal["buffer_broadcast"]
    assert (bb["tensors"], bb["elements_per_tensor"], bb["rounds"]) == (96, 64, 30)
    assert bb["raw_per_tensor_s"] == pytest.approx((bb["many_s"] - bb["one_s"]) / 95)
    assert cal["broadcast_per_tensor_s"] == max(0.0, bb["raw_per_tensor_s"]) and bb["many_s"] > 0 and bb["one_s"] > 0
    # the interference probe: one round of 3 warm-up + 10 traced steps and 3 + 10 real DDP steps
    probe = cal["interference_probe"]
    assert (probe["model"], probe["model_args"], probe["batch_size"], probe["bucket_cap_mb"]) == ("mlp", {"width": 2048, "depth": 6}, 128, 25.0)
    assert len(probe["ddp_step_samples_s"]) == 10
    # its phases under DDP, per step (mean over ranks), kept beside the step
    ph = probe["ddp_phase_samples_s"]
    assert set(ph) == {"forward_s", "backward_s", "optimizer_s"} and all(len(v) == 10 for v in ph.values())
    assert all(sum(v[i] for v in ph.values()) <= probe["ddp_step_samples_s"][i] * 1.001 for i in range(10))
    assert probe["ddp_step_s"] > 0 and len(probe["trace"]["iterations"]) == 10
    from ddpsim.calibration.loader import load_calibration
    loaded = load_calibration(out)
    # the loader re-takes the residue against what the engine charges the tiny model's one
    # idle-launched all-reduce: the loop curve plus the idle-launch extra (ddpsim.calibration.loader)
    from ddpsim.network.collective_cost import build_comm_model
    from ddpsim.network.topology import build_preset
    assert loaded.ddp_iteration_overhead_measured_s == cal["ddp_iteration_overhead_s"]
    extra = build_comm_model(build_preset("cpu-gloo"), 2, calibration=loaded).idle_launch_extra_s(ov["gradient_bytes"])
    assert loaded.ddp_iteration_overhead_s == pytest.approx(max(0.0, ov["raw_overhead_s"] - extra), abs=1e-12)
    # ddpsim fits its compute slowdown to the probe; the microbenchmark's stays beside it
    assert loaded.interference_microbenchmark.compute_slowdown == inter["compute_slowdown"]
    assert loaded.interference.compute_slowdown == loaded.interference_fit["compute_slowdown"] >= 1.0
    assert loaded.interference_fit["measured_step_s"] == probe["ddp_step_s"]
    assert loaded.broadcast_per_tensor_s == cal["broadcast_per_tensor_s"]
    progress = json.loads((r.dir / "cal.progress.json").read_text())
    assert progress["format"] == "ddpsim-measurement" and progress["version"] == 1 and progress["complete"] is True
    assert len(progress["points"]) == 6
    # every finished stage is kept in the progress file as it completes (a later failure keeps it)
    assert progress["interference"] == inter and progress["ddp_overhead"]["ddp_iteration_overhead_s"] == cal["ddp_iteration_overhead_s"]
    assert progress["copy"]["copy_bandwidth_bytes_per_s"] == cal["copy_bandwidth_bytes_per_s"]
    assert progress["buffer_broadcast"]["broadcast_per_tensor_s"] == cal["broadcast_per_tensor_s"]
    assert "collectives: wrote" in r.stdout


def test_collectives_gap_mode_times_one_op_after_compute(jobs):
    cal = json.loads((_ok(jobs["collectives-gap"]).dir / "cal.json").read_text())
    assert "allreduce_after_compute" not in cal       # 0 = skipped
    pts = cal["collectives"]["allreduce"]
    assert [p["size_bytes"] for p in pts] == [4096, 16384]
    for p in pts:
        # one op per sample, launched after 2 ms of compute on every rank
        assert (p["ops_per_sample"], p["gap_ms"]) == (1, 2.0)
        assert p["num_samples"] == 3 and 0 < p["p10_s"] <= p["time_s"] <= p["p90_s"]  # the mean of 3 lies between


def _gap_refusals() -> list[tuple[list[str], str]]:
    ms = "is not accepted; expected a number of milliseconds in [0, 1000] (0 on GPUs)"
    return ([(["--gap-ms", bad], f"--gap-ms: {float(bad)!r} {ms}") for bad in ("-1", "1001", "nan")]
            + [(["--after-compute-ms", bad], f"--after-compute-ms: {float(bad)!r} {ms}") for bad in ("-1", "1001", "nan")]
            + [(["--buffer-tensors", "1"], "--buffer-tensors: 1 is not accepted; expected 0 (skip) or an integer >= 2"),
               (["--queued-ops", "1"], "--queued-ops: 1 is not accepted; expected 0 (skip) or an integer >= 2 (gloo only)")])


COLLECTIVES_REFUSALS = _gap_refusals()


def test_collectives_refuses_a_bad_gap_under_torchrun(jobs):
    """The refusal path end to end (2 gloo ranks, the executor's exit statuses): non-zero exit,
    the one line, no file; every other bad value takes the same path and is checked in-process below."""
    _, want = COLLECTIVES_REFUSALS[0]
    r = jobs["collectives-bad-gap"]
    assert r.returncode != 0 and not (r.dir / "c.json").exists()
    assert want in r.stderr


@pytest.mark.parametrize("argv, want", COLLECTIVES_REFUSALS, ids=[" ".join(a) for a, _ in COLLECTIVES_REFUSALS])
def test_collectives_refuses_bad_values_before_measuring(argv, want):
    """``executor collectives``' checks, on its own parser's arguments and a CPU gloo rank."""
    from types import SimpleNamespace

    from executor.__main__ import build_parser
    from executor.collectives_step import _plan

    args = build_parser().parse_args(["collectives", "--out", "c.json", *argv])
    with pytest.raises(InputError) as exc:
        _plan(SimpleNamespace(is_cuda=False, backend="gloo"), args)
    assert want in str(exc.value) and "\n" not in str(exc.value)


def test_ddp_rebuilt_buckets_equal_the_predicted_plan(jobs):
    from ddpsim.plan.planner import DDPOptions, plan_ddp
    from ddpsim.trace.records import load_trace

    r = _ok(jobs["ddp-rebuilt"])
    m = json.loads((r.dir / "m.json").read_text())
    assert (m["format"], m["version"], m["kind"]) == ("ddpsim-measurement", 1, "ddp")
    # the oracle: real DDP's own logging, against the hand-worked layout and against ddpsim's plan
    assert m["real_buckets"]["buckets"] == CAP_01_BUCKETS
    assert m["real_buckets"]["sizes"] == CAP_01_SIZES
    plan = plan_ddp(load_trace(MLP_TRACE), DDPOptions(bucket_cap_mb=0.1))
    assert [list(b.param_indices) for b in plan.steady] == CAP_01_BUCKETS
    assert m["plan_matches"] is True
    assert "ddp: plan_matches: true" in r.stdout
    assert m["ddp_logging"]["rebuilt_bucket_sizes"] == "273448, 263168, 263168, 263168"
    # iterations 3..5 measured on both ranks; the hook saw 4 buckets per measured iteration
    assert [it["iteration"] for it in m["ranks"][0]["iterations"]] == [3, 4, 5]
    assert len(m["summary"]["step_times_s"]) == 3
    hooked = [b for b in m["ranks"][0]["buckets"] if b["iteration"] == 4]
    assert [b["size_bytes"] for b in hooked] == CAP_01_SIZES
    assert all(b["end_s"] >= b["launch_s"] for b in hooked)
    # iteration 1 ran DDP's single initial bucket: all 1,062,952 bytes
    assert [b["size_bytes"] for b in m["ranks"][0]["buckets"] if b["iteration"] == 1] == [1062952]


def test_ddp_default_cap_mismatch_is_reported(jobs):
    # a plan that is not DDP's (two buckets split differently) -> plan_matches false
    r = _ok(jobs["ddp-default-cap"])
    assert json.loads((r.dir / "plan.json").read_text()) == {"buckets": [[9, 8, 7], [6, 5, 4, 3, 2, 1, 0]]}
    m = json.loads((r.dir / "m.json").read_text())
    # cap unset: the rebuilt first bucket is capped at 1 MiB (1,048,576 B); in ready order 9..1 the
    # bucket reaches 800,808 B, adding param 0 makes 1,062,952 >= 1 MiB: one bucket of everything
    assert m["real_buckets"]["sizes"] == [1062952]
    assert m["plan_matches"] is False
    assert "ddp: plan_matches: false" in r.stdout


@pytest.mark.parametrize("compute", ["real", "synthetic"])
def test_replay_runs_any_plan_in_order(jobs, compute):
    r = _ok(jobs[f"replay-{compute}"])
    # not a plan DDP would build: the small head bucket last
    assert json.loads((r.dir / "plan.json").read_text()) == {"buckets": [[7, 6, 5, 4], [3, 2, 1, 0], [9, 8]]}
    m = json.loads((r.dir / "r.json").read_text())
    assert (m["format"], m["kind"], m["compute"]) == ("ddpsim-measurement", "replay", compute)
    assert m["plan"]["sizes"] == [526336, 526336, 10280]
    for rank in m["ranks"]:
        assert [it["iteration"] for it in rank["iterations"]] == [2, 3, 4]
        for it in (2, 3, 4):
            bs = [b for b in rank["buckets"] if b["iteration"] == it]
            assert [b["bucket"] for b in bs] == [0, 1, 2]
            launches = [b["launch_s"] for b in bs]
            assert launches == sorted(launches)  # strict plan order
            assert all(b["end_s"] >= b["launch_s"] for b in bs)


def test_ddp_bucket_cap_parsing_shares_the_cli_rules():
    from executor.ddp_step import parse_cap
    assert [parse_cap(v) for v in (None, "", "none", "default", "25", "0.5")] == [None, None, None, None, 25, 0.5]
    for bad in ("0", "-1", "abc", "inf", "nan"):
        with pytest.raises(InputError, match=rf"^--bucket-cap-mb: '{bad}' is not accepted; expected a number of MiB > 0 or 'none'$"):
            parse_cap(bad)


def test_measured_step_time_is_the_mean_over_ranks():
    from ddpsim.formats import step_times, summarize

    # rank 0 is 0.5 s late after iteration 1's all-reduce; rank 1 waits for it in iteration 2:
    # both ranks' iterations add up to the wall time (2.5 s), so does the mean; the max says 3
    per_rank = [[{"iteration_s": 1.5, "forward_s": 0.2, "backward_s": 1.0, "optimizer_s": 0.3},
                 {"iteration_s": 1.0, "forward_s": 0.2, "backward_s": 0.5, "optimizer_s": 0.3}],
                [{"iteration_s": 1.0, "forward_s": 0.2, "backward_s": 0.5, "optimizer_s": 0.3},
                 {"iteration_s": 1.5, "forward_s": 0.2, "backward_s": 1.0, "optimizer_s": 0.3},
                 {"iteration_s": 9.0, "forward_s": 0.2, "backward_s": 8.5, "optimizer_s": 0.3}]]
    assert step_times(per_rank) == [1.25, 1.25]          # iterations both ranks measured
    s = summarize(per_rank)
    assert s["iteration_s"] == 1.25 and s["step_times_s"] == [1.25, 1.25] and s["backward_s"] == 0.75


# bucket_cap_mb_list [0.2, 0.5, 0.3] MiB = [209715, 524288, 314572] B on the MLP (ready 9..0):
# [9 8 7 6] = 273448 >= 209715; [5 4 3 2] = 526336 >= 524288; [1 0] = 263168 < 314572, left over.
LIST_BUCKETS = [[9, 8, 7, 6], [5, 4, 3, 2], [1, 0]]
LIST_SIZES = [273448, 526336, 263168]
LIST_CAP = "list=0.2+0.5+0.3"  # the same list as a point of a round


def test_round_measures_every_cap_after_its_trace_slice_in_one_launch(jobs):
    """One round of three points (a cap, a bucket_cap_mb_list, the cap unset), each after its
    slice of the trace, in one launch."""
    from ddpsim.trace.records import load_trace

    r = _ok(jobs["round"])
    out = r.dir / "raw"
    lst = LIST_CAP
    assert sorted(p.name for p in out.iterdir()) == ["cap=0.1.run3.json", "cap=default.run3.json", f"{lst}.run3.json",
                                                     "trace.round3.json"]
    a = json.loads((out / "cap=0.1.run3.json").read_text())
    b = json.loads((out / "cap=default.run3.json").read_text())
    c = json.loads((out / f"{lst}.run3.json").read_text())
    assert (a["format"], a["kind"], b["kind"], c["kind"]) == ("ddpsim-measurement", "ddp", "ddp", "ddp")
    # each point's own fresh DDP wrapper rebuilt its own buckets: the hand-worked four at cap 0.1,
    # the list's three, then, over the same module, one bucket of everything with the cap unset
    assert a["real_buckets"]["buckets"] == CAP_01_BUCKETS and a["real_buckets"]["sizes"] == CAP_01_SIZES
    assert c["real_buckets"]["buckets"] == LIST_BUCKETS and c["real_buckets"]["sizes"] == LIST_SIZES
    assert b["real_buckets"]["sizes"] == [1062952]
    assert a["plan_matches"] is True and b["plan_matches"] is True and c["plan_matches"] is True
    assert "round 3 cap=0.1: plan_matches: true" in r.stdout and "round 3 cap=default: plan_matches: true" in r.stdout
    assert f"round 3 {lst}: plan_matches: true" in r.stdout
    assert (a["options"]["bucket_cap_mb"], b["options"]["bucket_cap_mb"]) == (0.1, None)
    assert a["launch"] == {"kind": "round", "round": 3, "order": ["cap=0.1", lst, "cap=default"], "position": 1,
                           "trace": "trace.round3.json"}
    assert (c["launch"]["position"], b["launch"]["position"]) == (2, 3)
    assert [it["iteration"] for it in a["ranks"][0]["iterations"]] == [3, 4]
    assert len(b["summary"]["step_times_s"]) == 2
    # the trace: three slices of two recorded steps, the first one with the hook-overhead pairs
    t = load_trace(out / "trace.round3.json")
    assert len(t.iterations) == 6
    assert t.environment["slices"] == 3 and t.environment["interleaved_with"] == ["cap=0.1", lst, "cap=default"]
    assert t.environment["concurrent_ranks"] == 2 and t.environment["lockstep"] is True
    assert t.hook_overhead_frac is not None
    # every gradient became ready in every recorded step of every slice, in DDP's reverse order
    assert all(all(x is not None for x in it.grad_ready_s) for it in t.iterations)
    assert all(list(it.grad_ready_s) == sorted(it.grad_ready_s, reverse=True) for it in t.iterations)


def test_round_refuses_bad_input_with_one_line(jobs):
    """The refusal path end to end (2 gloo ranks, the executor's exit statuses): non-zero exit,
    the one line on every rank that printed it, no file; bad --caps are checked in-process below."""
    r = jobs["round-bad"]
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if "executor: error" in ln]
    assert len(lines) >= 1 and all("--trace-iters: 0 is not accepted; expected an integer >= 1" in ln for ln in lines)
    assert not list(r.dir.glob("*.json"))


@pytest.mark.parametrize("caps, want", [("1,1", "names a point twice"), ("1,-2", "--caps: '-2' is not accepted")])
def test_round_refuses_bad_caps_in_one_line(caps, want):
    from ddpsim.units import parse_caps  # what executor round and ddpsim validate read --caps with

    with pytest.raises(InputError) as exc:
        parse_caps(caps)
    assert want in str(exc.value) and "\n" not in str(exc.value)


# run as a job of the shared launch, ``rt`` its gloo group (tests/executor_jobs.py)
ROUND_FREES_REDUCER = """
import argparse, weakref
import torch.nn.parallel as par
from ddpsim.trace.models import build_model
from executor import ddp_step
from executor.workload import workload_from_spec

reducers = []

class Recorded(par.DistributedDataParallel):
    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        reducers.append(weakref.ref(self.reducer))

args = argparse.Namespace(find_unused_parameters=False, static_graph=False, gradient_as_bucket_view=False,
                          no_broadcast_buffers=False, timing_hook=False, lr=1e-3, momentum=0.9, warmup=2,
                          iterations=1, batch_size=8, model="mlp")
real, par.DistributedDataParallel = par.DistributedDataParallel, Recorded
try:
    wl = workload_from_spec(build_model("mlp"), 8, rt.device)
    recs = [ddp_step.measure_point(rt, args, wl, cap, None) for cap in (0.1, None)]
finally:
    par.DistributedDataParallel = real
if rt.rank == 0:
    print("RESULT", [r() is None for r in reducers], [rec["real_buckets"]["sizes"] for rec in recs])
"""


def test_measure_point_frees_its_reducer_so_the_next_wrapper_is_alone(jobs):
    # a Reducer left alive would keep its autograd hooks on the module's parameters; measure_point
    # must drop every reference to its DDP wrapper (2 gloo ranks, one module wrapped twice)
    r = _ok(jobs["measure-point-frees"])
    result = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT")]
    assert result == [f"RESULT [True, True] [{CAP_01_SIZES}, [1062952]]"]


def test_ddp_bucket_cap_mb_list_rebuilds_the_planned_buckets(jobs):
    r = _ok(jobs["ddp-cap-list"])
    m = json.loads((r.dir / "m.json").read_text())
    assert m["real_buckets"]["buckets"] == LIST_BUCKETS and m["real_buckets"]["sizes"] == LIST_SIZES
    assert m["real_buckets"]["layout"] == "rebuilt"
    assert m["options"]["bucket_cap_mb_list"] == [0.2, 0.5, 0.3] and m["options"]["bucket_cap_mb"] is None
    assert m["plan_matches"] is True
    assert "--bucket-cap-mb 5 is ignored" in r.stdout + r.stderr
    assert "list=0.2+0.5+0.3" in r.stdout


UNUSED_FACTORY = '''
import torch
import torch.nn as nn


class WithUnused(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(64, 128)
        self.skip = nn.Linear(128, 128)   # never used in forward
        self.out = nn.Linear(128, 10)

    def forward(self, x):
        return self.out(self.inp(x).relu())


def build():
    torch.manual_seed(0)
    return WithUnused(), torch.randn(4, 64)
'''


def test_plan_matches_the_construction_layout_when_ddp_never_rebuilds(jobs):
    """find_unused_parameters with a really unused parameter: DDP never rebuilds, its logged
    rebuilt fields stay empty, and the layout it uses is the construction one: limits [1 MiB,
    25 MiB] over params 0..5 (32768, 512, 65536, 512, 5120, 40 B = 104488 B < 1 MiB): one bucket.
    The launch ran on UNUSED_FACTORY's trace, captured in this process (:func:`_save_factory_trace`)."""
    from ddpsim.trace.records import load_trace

    r = _ok(jobs["ddp-construction"])
    trace = load_trace(r.dir.parent / "h1unused.trace.json")
    assert [p.has_grad for p in trace.params] == [True, True, False, False, True, True]
    m = json.loads((r.dir / "m.json").read_text())
    assert m["ddp_logging"].get("rebuilt_bucket_sizes") in ("", None)
    assert m["real_buckets"]["layout"] == "construction"
    assert m["real_buckets"]["buckets"] == [[0, 1, 2, 3, 4, 5]] and m["real_buckets"]["sizes"] == [104488]
    assert m["plan_matches"] is True
    assert "plan_matches: true (real DDP construction buckets" in r.stdout


def test_ddp_batched_grad_copy_is_in_force_and_the_buckets_are_the_planned_ones(jobs):
    r = _ok(jobs["ddp-batched-grad-copy"])
    m = json.loads((r.dir / "m.json").read_text())
    # torch's logging data has no field for it: the DDP object's own attribute says it ran
    assert m["ddp_in_force"]["batched_grad_copy"] is True and m["options"]["batched_grad_copy"] is True
    assert m["ddp_in_force"]["skip_all_reduce_unused_params"] is False
    # batched_grad_copy defers the copies; the buckets stay the hand-worked cap-0.1 layout
    assert m["real_buckets"]["buckets"] == CAP_01_BUCKETS and m["real_buckets"]["sizes"] == CAP_01_SIZES
    assert m["plan_matches"] is True
    assert "batched_grad_copy)" in r.stdout


UNUSED_LAST_FACTORY = '''
import torch
import torch.nn as nn


class UnusedLast(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(64, 128)
        self.out = nn.Linear(128, 10)
        self.skip = nn.Linear(128, 128)   # never used in forward

    def forward(self, x):
        return self.out(self.inp(x).relu())


def build():
    torch.manual_seed(0)
    return UnusedLast(), torch.randn(4, 64)
'''


@pytest.mark.parametrize("skip", [False, True])
def test_ddp_skip_all_reduce_unused_params_leaves_the_unused_bucket_out(jobs, skip):
    """find_unused_parameters, no rebuild: DDP's construction layout at bucket_cap_mb 0.06
    (62914 B) fills params in order 0..5 (32768, 512, 5120, 40, 65536, 512 B): 0..4 reach
    103976 B >= the cap, param 5 (skip.bias, 512 B) is left over; reversed, bucket 0 = [5],
    every parameter of it unused, bucket 1 = [0..4]. skip_all_reduce_unused_params all-reduces
    bucket 1 only (the timing hook sees what is all-reduced); without it both. The launch ran on
    UNUSED_LAST_FACTORY's trace, captured in this process (:func:`_save_factory_trace`)."""
    m = json.loads((_ok(jobs[f"ddp-skip-{skip}"]).dir / "m.json").read_text())
    assert m["real_buckets"]["layout"] == "construction"
    assert m["real_buckets"]["buckets"] == [[5], [0, 1, 2, 3, 4]] and m["real_buckets"]["sizes"] == [512, 103976]
    assert m["plan_matches"] is True
    assert m["ddp_in_force"]["skip_all_reduce_unused_params"] is skip
    for it in (3, 4):
        assert [b["bucket"] for b in m["ranks"][0]["buckets"] if b["iteration"] == it] == ([1] if skip else [0, 1])


def test_ddp_mixed_precision_on_gloo_is_refused_in_one_line(jobs):
    r = jobs["ddp-mixed-precision"]
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.splitlines() if "executor: error" in ln]
    # every rank that got to print it printed the same one line (under torchrun alone the other
    # rank is stopped once the first exits, sometimes before it prints)
    assert 1 <= len(lines) <= 2 and len(set(lines)) == 1
    assert ("--options: mixed_precision bfloat16/-/- is not accepted on a cpu device (gloo): torch's mixed-precision forward records "
            "device events, which the CPU backend lacks") in lines[0]
    # refused before DDP is built
    assert "cpu backend doesn't support events\n" not in r.stderr and not (r.dir / "m.json").exists()


def _args(**kw):
    """The executor's arguments with ``kw`` as its ``--options`` document."""
    import argparse

    return argparse.Namespace(options=json.dumps(kw))


def test_ddp_kwargs_use_torch_2_13_names_only_when_not_default():
    import inspect
    from types import SimpleNamespace

    import torch.nn as nn
    from torch.nn.parallel import DistributedDataParallel as DDP

    from executor.ddp_step import ddp_kwargs

    rt = SimpleNamespace(is_cuda=False)
    module = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2))
    assert ddp_kwargs(rt, _args(), None, module) == dict(find_unused_parameters=False, static_graph=False,
                                                         gradient_as_bucket_view=False)
    kw = ddp_kwargs(rt, _args(batched_grad_copy=True, skip_all_reduce_unused_params=True, forward_sync_buffers=False,
                              delay_all_reduce_named_params=["1.weight", "1.bias"], param_to_hook_all_reduce="0.weight"),
                    0.5, module)
    # every keyword is one of torch's DDP constructor parameters
    assert set(kw) <= set(inspect.signature(DDP.__init__).parameters)
    assert (kw["batched_grad_copy"], kw["skip_all_reduce_unused_params"], kw["forward_sync_buffers"]) == (True, True, False)
    params = dict(module.named_parameters())
    assert [(n, p is params[n]) for n, p in kw["delay_all_reduce_named_params"]] == [("1.weight", True), ("1.bias", True)]
    assert kw["param_to_hook_all_reduce"] is params["0.weight"] and kw["bucket_cap_mb"] == 0.5


@pytest.mark.parametrize("kw, want", [
    ({"forward_sync_buffers": "maybe"}, "forward_sync_buffers"),
    ({"static_graph": "yes"}, "--options: static_graph: 'yes' is not accepted; expected true or false"),
    ({"mixed_precision": {"param_dtype": "float8"}}, "mixed_precision.param_dtype: 'float8' is not accepted"),
    ({"bucket_cap_mb": 25}, "--options: bucket_cap_mb is not accepted in the document; expected it as --bucket-cap-mb"),
    ({"find_unused": True}, "--options: find_unused: unknown key; expected one of bucket_cap_mb"),
    ({"delay_all_reduce_named_params": ["1.weight"]}, "param_to_hook_all_reduce"),
    ({"delay_all_reduce_named_params": ["2.weight"], "param_to_hook_all_reduce": "0.weight"},
     "--options: delay_all_reduce_named_params: '2.weight' is not a parameter of this model; expected one of its parameter names"),
    ({"delay_all_reduce_named_params": ["1.weight"], "param_to_hook_all_reduce": "9.bias"},
     "--options: param_to_hook_all_reduce: '9.bias' is not a parameter of this model"),
])
def test_bad_torch_2_13_option_values_are_one_line_input_errors(kw, want):
    from types import SimpleNamespace

    import torch.nn as nn

    from executor.ddp_step import ddp_kwargs

    with pytest.raises(InputError) as exc:
        ddp_kwargs(SimpleNamespace(is_cuda=False), _args(**kw), None, nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)))
    assert want in str(exc.value) and "\n" not in str(exc.value)


def test_profile_writes_one_torch_profiler_trace_per_rank(jobs):
    """Two gloo ranks under real DDP: each writes rank<R>.json.gz with its ProfilerStep spans
    (wait 1 + warm-up 1 + 2 active: steps #2 and #3 recorded) and DDP's bucket all-reduces (four
    buckets of the mlp at a 0.1 MB cap, per step)."""
    import gzip

    out = _ok(jobs["profile"]).dir / "prof"
    assert sorted(p.name for p in out.iterdir()) == ["rank0.json.gz", "rank1.json.gz"]
    for rank in (0, 1):
        events = json.loads(gzip.decompress((out / f"rank{rank}.json.gz").read_bytes()))["traceEvents"]
        steps = sorted(e["name"] for e in events if e.get("name", "").startswith("ProfilerStep#"))
        assert steps == ["ProfilerStep#2", "ProfilerStep#3"]
        assert sum(e.get("name") == "c10d::allreduce_" for e in events) == 2 * len(CAP_01_SIZES)


def test_profile_refuses_too_few_warmup_steps_in_one_line(jobs):
    r = jobs["profile-bad-warmup"]
    assert r.returncode != 0 and not (r.dir / "p").exists()
    assert "--warmup: 1 is not accepted; expected an integer >= 2" in r.stderr


def test_options_document_is_read_inline_or_from_its_file(tmp_path):
    import argparse

    from executor.ddp_step import ddp_options

    doc = {"static_graph": True, "mixed_precision": {"param_dtype": "bfloat16", "reduce_dtype": None, "buffer_dtype": None}}
    f = tmp_path / "o.json"
    f.write_text(json.dumps(doc))
    inline, from_file = (ddp_options(argparse.Namespace(options=t)) for t in (json.dumps(doc), str(f)))
    assert inline == from_file and inline.static_graph and inline.mixed_precision.param_dtype == "bfloat16"
    assert ddp_options(argparse.Namespace(options=None)) == ddp_options(argparse.Namespace(options="{}"))
    with pytest.raises(InputError, match=r"^--options: .*expected a JSON object or its file$"):
        ddp_options(argparse.Namespace(options=str(tmp_path / "missing.json")))
