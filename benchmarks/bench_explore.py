"""How fast are sweeps and design spaces, against another checkout? One command, prints figures:

    python benchmarks/bench_explore.py --baseline /path/to/other/checkout [--points 10000] [--jobs 2] [--quick]
        [--parts 1,2,3,4] [--nodes 4096]

Every figure is measured in this one run, the baseline's in a subprocess with
``PYTHONPATH=<baseline>`` and this checkout's with ``PYTHONPATH=<this checkout>``, one after
the other on the same machine:

1. bench_engine.py's 32-point ``bucket_cap_mb`` sweep of GPT-2 1.5B at 1,024 ranks (alpha-beta
   network, 3 iterations, jitter 0.05, spans on, each point's summary read): CPU and wall
   seconds, and whether both checkouts predict the same p50 step at every point
   (target: <= 1 s on 2 cores);
2. a design space of about ``--points`` points: GPT-2 1.5B (the bundled H100 trace) on
   dgx-a100, dgx-h100 and pcie x 1-64 nodes x log-spaced caps x comm hook none/fp16 x
   gradient_as_bucket_view, NCCL without the contention prior (``cost_model.contention: false``):
   ``ddpsim explore --jobs N`` end to end in both checkouts (target: 10,000 points <= 60 s),
   and the per-point path every verb took (``build_point_inputs`` + ``simulate``) on a seeded
   sample of it in both checkouts (the baseline has no ``explore``), extrapolated to the space;
3. the same sample with the contention prior on (the engine's interference path, the default
   for NCCL presets): CPU seconds per point in both checkouts;
4. the dgx-h100 preset graph and its NCCL model at ``--nodes`` (4,096) nodes, each checkout in a
   fresh process (``bench_topology_build.py``'s probe; target: <= 2 s).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "traces" / "gpt2-1.5b.h100.json"

SWEEP = r'''
import json, sys, time
sys.path.insert(0, sys.argv[1] + "/benchmarks")
import numpy as np
import bench_engine as b
from ddpsim.trace.records import load_trace
trace = load_trace(b.REAL_TRACE)
b.run(8, trace, None, iterations=1)
caps = [float(f"{c:.3g}") for c in np.geomspace(1, 512, 32)]
c0, w0 = time.process_time(), time.perf_counter()
p50 = [b.run(1024, trace, c, jitter=0.05, **({"fresh": False} if hasattr(b, "forget") else {}))[1].summary()["iteration_p50_s"]
       for c in caps]
print(json.dumps({"cpu_s": time.process_time() - c0, "wall_s": time.perf_counter() - w0, "p50": p50}))
'''

POINTS = r'''
import json, sys, time
from ddpsim.engine.simulate import simulate
from ddpsim.pipeline.scenario import scenario_from_dict
from ddpsim.trace.records import load_trace
spec = json.loads(sys.argv[1])
trace = load_trace(spec["trace"])
c0 = time.process_time()
p50 = []
for p in spec["points"]:
    sc = scenario_from_dict({"trace": spec["trace"], "cluster": {"topology": p["system"], "nodes": p["nodes"]},
                             "world_size": None, "simulation": {"iterations": 6, "seed": 0, "jitter": "trace"},
                             "cost_model": {"contention": spec["contention"]},
                             "ddp": {"bucket_cap_mb": p["cap"], "comm_hook": p["hook"],
                                     "gradient_as_bucket_view": p["gabv"]}})
    inputs = sc.build_point(sc.point_at(p["cap"]), trace=trace)
    p50.append(simulate(inputs.trace, inputs.plan, inputs.comm, inputs.config, spans=False).summary()["iteration_p50_s"])
print(json.dumps({"cpu_s": time.process_time() - c0, "p50": p50}))
'''


def run_py(root: Path, code: str, *args: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run([sys.executable, "-c", code, *args], env=env, capture_output=True, text=True, cwd=root)
    if out.returncode != 0:
        raise SystemExit(f"{root}: failed:\n{out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def space(points: int) -> tuple[dict, int]:
    """The design space's axes with about ``points`` points (the caps fill the rest)."""
    systems, nodes, hooks, gabv = ["dgx-a100", "dgx-h100", "pcie"], [1, 2, 4, 8, 16, 32, 64], ["none", "fp16"], [False, True]
    n_caps = max(1, round(points / (len(systems) * len(nodes) * len(hooks) * len(gabv))) - 1)
    caps = [None] + sorted({float(f"{c:.3g}") for c in np.geomspace(1, 512, n_caps)})
    axes = {"system": systems, "nodes": nodes, "bucket_cap_mb": caps, "comm_hook": hooks,
            "ddp.gradient_as_bucket_view": gabv}
    return axes, len(systems) * len(nodes) * len(caps) * len(hooks) * len(gabv)


def sample(axes: dict, n: int, seed: int = 0) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [{"system": str(rng.choice(axes["system"])), "nodes": int(rng.choice(axes["nodes"])),
             "cap": axes["bucket_cap_mb"][int(rng.integers(len(axes["bucket_cap_mb"])))],
             "hook": str(rng.choice(axes["comm_hook"])), "gabv": bool(rng.integers(2))} for _ in range(n)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", required=True, help="another ddpsim checkout (its root folder)")
    ap.add_argument("--points", type=int, default=10_000, help="design-space points (default 10000)")
    ap.add_argument("--jobs", type=int, default=2, help="explore's processes (default 2)")
    ap.add_argument("--sample", type=int, default=40, help="points of the per-point sample (default 40)")
    ap.add_argument("--quick", action="store_true", help="1,000 points and a 10-point sample")
    ap.add_argument("--parts", default="1,2,3,4", help="which of the figures 1, 2, 3, 4 to measure (default all)")
    ap.add_argument("--nodes", type=int, default=4096, help="figure 4's dgx-h100 node count (default 4096)")
    args = ap.parse_args(argv)
    base = Path(args.baseline).resolve()
    points, n_sample = (1000, 10) if args.quick else (args.points, args.sample)
    print(f"this checkout: {ROOT}; baseline: {base}; {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")

    parts = {int(x) for x in args.parts.split(",")}
    if 1 in parts:
        sweep_figures(base)
    if 2 in parts or 3 in parts:
        space_figures(base, points, n_sample, args.jobs, parts)
    if 4 in parts:
        build_figures(base, args.nodes)
    print(f"\nload average at the end {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    return 0


def sweep_figures(base: Path) -> None:
    """1. the 32-point sweep."""
    old, new = run_py(base, SWEEP, str(base)), run_py(ROOT, SWEEP, str(ROOT))
    print(f"\n[1] 32-point bucket_cap_mb sweep, GPT-2 1.5B x 1,024 ranks (target <= 1 s):\n"
          f"    baseline {old['cpu_s']:.2f} s CPU ({old['wall_s']:.2f} s wall); this checkout {new['cpu_s']:.2f} s CPU "
          f"({new['wall_s']:.2f} s wall): {old['cpu_s'] / new['cpu_s']:.1f}x; same p50 at every point: {old['p50'] == new['p50']}", flush=True)


def space_figures(base: Path, points: int, n_sample: int, jobs: int, parts: set[int]) -> None:
    """2. the design space, fast path; 3. the per-point cost with the contention prior."""
    axes, total = space(points)
    pts = sample(axes, n_sample)
    spec = {"trace": str(TRACE), "points": pts, "contention": False}
    if 2 in parts:
        explore_figures(base, axes, total, spec, n_sample, jobs)
    if 3 in parts:
        spec["contention"] = True
        spec["points"] = pts_c = pts[: max(4, n_sample // 4)]
        old, new = run_py(base, POINTS, json.dumps(spec)), run_py(ROOT, POINTS, json.dumps(spec))
        print(f"\n[3] the same points with the contention prior on (interference path), {len(pts_c)} points: baseline "
              f"{old['cpu_s'] / len(pts_c) * 1e3:.0f} ms CPU per point, this checkout {new['cpu_s'] / len(pts_c) * 1e3:.0f} "
              f"ms; same p50: {old['p50'] == new['p50']}")


def explore_figures(base: Path, axes: dict, total: int, spec: dict, n_sample: int, jobs: int) -> None:
    old, new = run_py(base, POINTS, json.dumps(spec)), run_py(ROOT, POINTS, json.dumps(spec))
    print(f"\n[2] design space of {total} points (3 systems x 7 node counts x {len(axes['bucket_cap_mb'])} caps x 2 hooks x "
          f"2 gradient_as_bucket_view; NCCL, contention prior off):\n"
          f"    per point, build_point_inputs + simulate on a {n_sample}-point sample: baseline "
          f"{old['cpu_s'] / n_sample * 1e3:.0f} ms CPU (the space: ~{old['cpu_s'] / n_sample * total / jobs:.0f} s "
          f"on {jobs} processes), this checkout {new['cpu_s'] / n_sample * 1e3:.0f} ms CPU; same p50: "
          f"{old['p50'] == new['p50']}", flush=True)
    for name, root in (("baseline", base), ("this checkout", ROOT)):
        wall, cpu = explore_run(root, axes, jobs)
        print(f"    ddpsim explore --jobs {jobs}, {name}: {wall:.1f} s wall end to end, {cpu:.1f} s CPU in all its "
              f"processes ({cpu / total * 1e3:.1f} ms CPU per point; {total / wall:.0f} points/s; target 10,000 points "
              f"<= 60 s)", flush=True)


def build_figures(base: Path, nodes: int) -> None:
    """4. the dgx-h100 graph and NCCL model at ``nodes`` nodes (bench_topology_build.py's probe)."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from bench_topology_build import probe, total

    old, new = probe(base, "dgx-h100", nodes), probe(ROOT, "dgx-h100", nodes)
    print(f"\n[4] dgx-h100 x {nodes} nodes ({new['ranks']} GPUs), preset graph + NCCL model, CPU s in a fresh process "
          f"(what ddpsim collectives --topology dgx-h100 --nodes {nodes} builds; target <= 2 s):\n"
          f"    baseline {old['graph_cpu_s']:.2f} + {old['model_cpu_s']:.2f} = {total(old, 'cpu_'):.2f} s; this checkout "
          f"{new['graph_cpu_s']:.2f} + {new['model_cpu_s']:.2f} = {total(new, 'cpu_'):.2f} s: "
          f"{total(old, 'cpu_') / total(new, 'cpu_'):.1f}x; same model: {old['same'] == new['same']}", flush=True)


def explore_run(root: Path, axes: dict, jobs: int) -> tuple[float, float]:
    """``ddpsim explore`` of the space with ``root``'s ddpsim: (wall s, CPU s of its processes)."""
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "space.yaml"
        f.write_text(yaml.safe_dump({"name": "bench-space", "trace": str(TRACE), "cluster": {"topology": "dgx-h100"},
                                     "world_size": None, "simulation": {"iterations": 6, "seed": 0, "jitter": "trace"},
                                     "cost_model": {"contention": False}, "explore": {"axes": axes}}, sort_keys=False))
        w0, c0 = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
        out = subprocess.run([sys.executable, "-m", "ddpsim", "explore", str(f), "--out-dir", tmp, "--jobs", str(jobs),
                              "--quiet", "--no-plots"], env={**os.environ, "PYTHONPATH": str(root)}, cwd=root,
                             capture_output=True, text=True)
        wall = time.perf_counter() - w0
        c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        if out.returncode != 0:
            raise SystemExit(out.stderr[-2000:])
    return wall, (c1.ru_utime + c1.ru_stime) - (c0.ru_utime + c0.ru_stime)


if __name__ == "__main__":
    sys.exit(main())
