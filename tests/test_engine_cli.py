"""``ddpsim simulate``: output in each format, and one-line errors with exit status 2.

Trace: the toy of tests/test_engine.py (three 1 MiB fp32 parameters; forward 0.5 s,
backward 1.0 s, optimizer 0.125 s); network 4 MiB/s = 0.004194304 GB/s, no latency.
With ddp.bucket_cap_mb 1 every steady iteration is 0.5 + 1.0 + 0.125 = 1.625 s: the three
1 MiB all-reduces (0.25 s each) hide behind backward (see test_rebuild_in_iteration_2).
"""

from __future__ import annotations

import json

import pytest

from ddpsim.cli.main import main
from ddpsim.trace.records import save_trace

from test_engine import toy_trace

NET = ["--set", "cluster.latency_us=0", "--set", "cluster.bandwidth_gbps=0.004194304"]
#: cap 1 MiB, no jitter, 3 iterations
KNOBS = ["--set", "ddp.bucket_cap_mb=1", "--set", "simulation.jitter=none", "--set", "simulation.iterations=3"]


@pytest.fixture()
def trace_file(tmp_path):
    return str(save_trace(toy_trace(), tmp_path / "toy.json"))


def sim(capsys, *args):
    rc = main(["simulate", *args])
    out, err = capsys.readouterr()
    return rc, out, err


def test_table(trace_file, capsys):
    rc, out, err = sim(capsys, "--trace", trace_file, *NET, "--set", "world_size=2", *KNOBS)
    assert rc == 0 and err == ""
    assert "per iteration (slowest simulated rank):" in out
    assert "buckets of iteration 3, rank 0" in out
    assert "iteration_p50_ms       1625" in out  # 0.5 + 1.0 + 0.125 s


def test_json_and_csv(trace_file, capsys):
    rc, out, _ = sim(capsys, "--trace", trace_file, *NET, "--set", "world_size=2", *KNOBS, "--format", "json")
    doc = json.loads(out)
    assert rc == 0 and doc["summary"]["iteration_p50_s"] == 1.625
    assert [b["bucket"] for b in doc["buckets"] if b["rank"] == 0 and b["iteration"] == 3] == [0, 1, 2]
    assert doc["meta"]["plan"]["num_buckets_steady"] == 3
    rc, out, _ = sim(capsys, "--trace", trace_file, *NET, "--set", "world_size=2", "--set", "simulation.jitter=none",
                     "--format", "csv")
    lines = out.splitlines()
    assert rc == 0 and lines[0] == "# iterations" and lines[1].startswith("rank,iteration,start_s,end_s")
    assert "# buckets" in lines


@pytest.mark.parametrize("args,message", [
    (["--set", "world_size=0"], "--set world_size: 0 is not accepted"),
    (["--set", "ddp.comm_hook=zip"], "--set ddp.comm_hook: 'zip' is not accepted"),
    (["--set", "simulation.stragglers={1: x}"], "--set simulation.stragglers[1]: 'x' is not accepted"),
    (["--set", "simulation.stragglers={5: 2}"], "--set simulation.stragglers: 5 is not accepted; expected a rank in [0, 2)"),
    (["--set", "simulation.stragglers={1: 0.5}"], "--set simulation.stragglers[1]: 0.5 is not accepted"),
    (["--set", "simulation.jitter=-1"], "--set simulation.jitter: -1 is not accepted"),
    (["--set", "ddp.bucket_cap_mb=0"], "--set ddp.bucket_cap_mb: 0 is not accepted"),
    (["--set", "simulation.iterations=0"], "--set simulation.iterations: 0 is not accepted"),
    (["--set", "simulation.interference={compute_slowdown: 0.5}"],
     "--set simulation.interference.compute_slowdown: 0.5 is not accepted"),
    (["--set", "simulation.interference=2"], "--set simulation.interference: 2 is not accepted"),
    (["--set", "simulation.interference={weighting: bytes}"],
     "--set simulation.interference.weighting: 'bytes' is not accepted"),
    (["--set", "simulation.copy_bandwidth_gbps=-1"], "--set simulation.copy_bandwidth_gbps: -1 is not accepted"),
])
def test_bad_input_exits_2_with_one_line(trace_file, capsys, args, message):
    rc, out, err = sim(capsys, "--trace", trace_file, *NET, "--set", "world_size=2", *args)
    assert rc == 2 and out == ""
    assert err.startswith("ddpsim: error: ") and message in err and err.count("\n") == 1, err


def test_network_must_be_given_once(trace_file, capsys):
    rc, _, err = sim(capsys, "--trace", trace_file, "--set", "world_size=2")
    assert rc == 2 and "--topology: None is not accepted; expected a preset name" in err
    rc, _, err = sim(capsys, "--trace", trace_file, "--set", "world_size=2", "--set", "cluster.latency_us=5")
    assert rc == 2 and "bandwidth_gbps" in err and err.count("\n") == 1
    rc, _, err = sim(capsys, "--trace", trace_file, "--set", "world_size=2", "--topology", "cpu-gloo", *NET)
    assert rc == 2 and err.count("\n") == 1 and "latency_us" in err


def test_topology_path(trace_file, capsys):
    rc, out, err = sim(capsys, "--trace", trace_file, "--topology", "cpu-gloo", "--set", "world_size=2",
                       "--set", "simulation.jitter=none")
    assert rc == 0, err
    assert "summary (steady state):" in out
    rc, _, err = sim(capsys, "--trace", trace_file, "--topology", "cpu-gloo", "--set", "world_size=100000")
    assert rc == 2 and "--set world_size: 100000 is not accepted; expected at most" in err


def test_interference_and_copy_bandwidth_keys(trace_file, capsys):
    # same toy as test_interference_stretches_overlapped_work but DDP's own plan, cap 1 MiB:
    # only check that the knobs reach the engine
    rc, out, _ = sim(capsys, "--trace", trace_file, *NET, "--set", "world_size=2", *KNOBS, "--format", "json",
                     "--set", "simulation.interference={compute_slowdown: 2, comm_slowdown: 2, weighting: uniform}",
                     "--set", "simulation.copy_bandwidth_gbps=0.016777216")
    doc = json.loads(out)
    assert rc == 0
    assert doc["meta"]["config"]["interference"] == {"compute_slowdown": 2.0, "comm_slowdown": 2.0, "weighting": "uniform"}
    assert doc["meta"]["config"]["copy_bandwidth_bytes_per_s"] == 16 * 2**20
    assert doc["summary"]["iteration_p50_s"] > 1.625   # slower than without interference and copies
    rc, out, _ = sim(capsys, "--trace", trace_file, *NET, "--set", "world_size=2", *KNOBS, "--format", "json",
                     "--set", "simulation.interference={compute_slowdown: 2, comm_slowdown: 2, weighting: bandwidth}")
    assert rc == 0 and json.loads(out)["meta"]["config"]["interference"]["weighting"] == "bandwidth"
