"""A zoo model under real DDP (2 gloo ranks): zoo:branchy_mlp's auxiliary head gets no gradient,
so DDP runs with find_unused_parameters and never rebuilds its buckets; the executor then
compares the sizes of the buckets DDP kept (its logging's ``bucket_sizes``) with ddpsim's plan."""

import json

import pytest

from ddpsim.trace.capture import capture_trace
from ddpsim.trace.models import build_model
from ddpsim.plan.planner import DDPOptions, plan_ddp
from ddpsim.trace.records import save_trace
from ddpsim.validation.launch import launch_local


@pytest.mark.slow
def test_branchy_mlp_under_find_unused_keeps_the_planned_buckets(tmp_path):
    spec = build_model("zoo:branchy_mlp", input_shape=(16,))
    trace = capture_trace(spec, batch_size=2, num_iters=1, num_warmup=0, measure_hook_overhead=False)
    tpath = save_trace(trace, tmp_path / "t.json")
    out = tmp_path / "m.json"
    r = launch_local(["ddp", "--model", "zoo:branchy_mlp", "--model-arg", "input_shape=[16]", "--batch-size", "2",
                      "--bucket-cap-mb", "5", "--options", '{"find_unused_parameters": true}', "--iterations", "2", "--warmup", "2",
                      "--trace", str(tpath), "--timeout-s", "120", "--out", str(out)], nproc=2, num_threads=1, timeout_s=240)
    assert r.returncode == 0, r.stdout + r.stderr
    m = json.loads(out.read_text())
    # the oracle: real DDP's own logging -- no rebuild, and the buckets it kept
    assert m["ddp_logging"]["has_rebuilt_buckets"] == 0
    kept = [int(x) for x in m["ddp_logging"]["bucket_sizes"].split(",")]
    plan = plan_ddp(trace, DDPOptions(bucket_cap_mb=5, find_unused_parameters=True))
    assert [b.size_bytes for b in plan.steady] == kept == m["real_buckets"]["sizes"]
    assert len(kept) > 1 and m["plan_matches"] is True
