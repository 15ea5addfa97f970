"""How fast is the path users run, against a previous commit? One command, prints figures:

    python benchmarks/bench_default_path.py [--baseline REV_OR_DIR] [--jobs N] [--repeats 3]
        [--runs 1] [--explore-points 1000] [--parts 1,2,3]

The baseline is a git revision (default ``HEAD~1``), checked out with ``git worktree add`` into a
temporary folder and removed afterwards, or another checkout's root folder. Every figure is
measured in this one run, each step first with the baseline (``PYTHONPATH=<baseline>``) then
with this checkout, one after the other on the same machine, and printed with their ratio:

1. ``ddpsim run`` of the default scenario (``scenarios/default.yaml``: GPT-2 124M on 2 DGX H100
   nodes, 8 caps, the contention prior and the uncertainty band on) into a fresh folder, end to
   end with its plots, and the seconds it reports for simulating (``simulated N point(s) in X
   s``) and the rest of the first run (start-up, plan search, report: wall less simulation);
   then the rerun into the same folder (every point reused); and ``ddpsim run --help``, what
   every command pays before its work (Python, the imports, the parser). With ``--runs N`` the
   baseline and this checkout take turns N times and each figure is the least of its N (other
   jobs on the machine only ever add time). Targets: <= 5 s end to end, simulation <= 2 s, on 2
   cores.
2. One point of it (16 ranks, ``cap=default``, spans built) simulated with the contention prior
   and without it (``Interference()``): CPU seconds, the least of ``--repeats``, and the p50
   step of each. Target: with <= 2x without.
3. ``ddpsim explore`` of a design space of about ``--explore-points`` points with the contention
   prior on (GPT-2 1.5B on dgx-a100, dgx-h100 and pcie x 1-64 nodes x log-spaced caps x comm
   hook none/fp16): wall and CPU seconds end to end. Target: 1,000 points <= 30 s on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import yaml

ROOT = Path(__file__).resolve().parent.parent

POINT_PROBE = r"""
import dataclasses, json, sys, time
from ddpsim.engine import simulate as sim
from ddpsim.network.interference import Interference
from ddpsim.pipeline.scenario import load_scenario
sc = load_scenario("default")
inp = sc.build_point(sc.points()[0])
out = {}
for label, cfg in (("on", inp.config), ("off", dataclasses.replace(inp.config, interference=Interference()))):
    best = None
    for _ in range(int(sys.argv[1])):
        sim._MEMO.clear()
        c0 = time.process_time()
        res = sim.simulate(inp.trace, inp.plan, inp.comm, cfg)
        len(res.spans)
        c = time.process_time() - c0
        best = c if best is None else min(best, c)
    out[label] = {"cpu_s": best, "p50_s": res.summary()["iteration_p50_s"], "ranks": res.world_size}
print(json.dumps(out))
"""


def env_for(root: Path) -> dict:
    return {**os.environ, "PYTHONPATH": str(root)}


def children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def timed(cmd: list[str], root: Path) -> tuple[float, float, str]:
    """(wall s, CPU s of the command's processes, its stderr)."""
    w0, c0 = time.perf_counter(), children_cpu()
    out = subprocess.run(cmd, env=env_for(root), cwd=root, capture_output=True, text=True)
    wall, cpu = time.perf_counter() - w0, children_cpu() - c0
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} in {root} failed:\n{out.stderr[-2000:]}")
    return wall, cpu, out.stderr + out.stdout


def ratio(base: float, this: float) -> str:
    return f"{base / this:.2f}x" if this > 0 else "-"


def run_figures(root: Path, jobs: int | None) -> dict:
    """Part 1 with ``root``'s ddpsim: first run, its simulation seconds, rerun."""
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "ddpsim", "run", "--out-dir", tmp] + (["--jobs", str(jobs)] if jobs else [])
        wall1, cpu1, log1 = timed(cmd, root)
        m = re.search(r"simulated (\d+) point\(s\) in ([0-9.]+) s", log1)
        wall2, cpu2, _ = timed(cmd, root)
    sim = float(m.group(2)) if m else float("nan")
    return {"first_wall_s": wall1, "first_cpu_s": cpu1, "sim_s": sim, "rest_wall_s": wall1 - sim,
            "rerun_wall_s": wall2, "rerun_cpu_s": cpu2, **startup_figures(root)}


def startup_figures(root: Path) -> dict:
    """``ddpsim run --help``: Python, the imports and the parser, before any work."""
    wall, cpu, _ = timed([sys.executable, "-m", "ddpsim", "run", "--help"], root)
    return {"startup_wall_s": wall, "startup_cpu_s": cpu}


def least_of(runs: list[dict]) -> dict:
    """Each figure's least over ``runs`` (a figure missing from a run, NaN, is left out)."""
    return {k: min((r[k] for r in runs if r[k] == r[k]), default=float("nan")) for k in runs[0]}


PART1 = (("first_wall_s", "first run, wall s"), ("first_cpu_s", "first run, CPU s"),
         ("sim_s", "simulation, s (reported)"), ("rest_wall_s", "first run less simulation, wall s"),
         ("rerun_wall_s", "rerun, wall s"), ("rerun_cpu_s", "rerun, CPU s"),
         ("startup_wall_s", "run --help (start-up), wall s"), ("startup_cpu_s", "run --help (start-up), CPU s"))


def point_figures(root: Path, repeats: int) -> dict:
    out = subprocess.run([sys.executable, "-c", POINT_PROBE, str(repeats)], env=env_for(root), cwd=root,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-2000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def explore_axes(points: int) -> tuple[dict, int]:
    systems, nodes, hooks = ["dgx-a100", "dgx-h100", "pcie"], [1, 2, 4, 8, 16, 32, 64], ["none", "fp16"]
    n_caps = max(1, round(points / (len(systems) * len(nodes) * len(hooks))) - 1)
    caps = [None] + sorted({float(f"{c:.3g}") for c in np.geomspace(1, 512, n_caps)})
    axes = {"system": systems, "nodes": nodes, "bucket_cap_mb": caps, "comm_hook": hooks}
    return axes, len(systems) * len(nodes) * len(caps) * len(hooks)


def explore_figures(root: Path, axes: dict, jobs: int | None) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        f = Path(tmp) / "space.yaml"
        f.write_text(yaml.safe_dump({"name": "bench-default-space", "trace": str(root / "traces/gpt2-1.5b.h100.json"),
                                     "cluster": {"topology": "dgx-h100"}, "world_size": None,
                                     "simulation": {"iterations": 6, "seed": 0, "jitter": "trace"},
                                     "explore": {"axes": axes}}, sort_keys=False))
        cmd = [sys.executable, "-m", "ddpsim", "explore", str(f), "--out-dir", tmp, "--quiet", "--no-plots"]
        wall, cpu, _ = timed(cmd + (["--jobs", str(jobs)] if jobs else []), root)
    return {"wall_s": wall, "cpu_s": cpu}


def checkout(baseline: str, tmp: str) -> Path:
    """The baseline's root: a folder as given, else a worktree of the revision."""
    if Path(baseline).is_dir():
        return Path(baseline).resolve()
    dest = Path(tmp) / "baseline"
    subprocess.run(["git", "worktree", "add", "--detach", str(dest), baseline], cwd=ROOT, check=True,
                   capture_output=True, text=True)
    return dest


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", default="HEAD~1", help="a git revision or another checkout's root (default HEAD~1)")
    ap.add_argument("--jobs", type=int, default=None, help="processes for run and explore (default: theirs)")
    ap.add_argument("--repeats", type=int, default=3, help="simulations per figure of part 2, the least kept (default 3)")
    ap.add_argument("--runs", type=int, default=1,
                    help="part 1: turns of baseline then this checkout, each figure the least (default 1)")
    ap.add_argument("--explore-points", type=int, default=1000, help="design-space points of part 3 (default 1000)")
    ap.add_argument("--parts", default="1,2,3", help="which parts to run (default 1,2,3)")
    a = ap.parse_args(argv)
    parts = {int(p) for p in a.parts.split(",")}
    with tempfile.TemporaryDirectory() as tmp:
        base = checkout(a.baseline, tmp)
        try:
            rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=base, capture_output=True, text=True).stdout.strip()
            print(f"baseline {a.baseline} ({rev or base}) against this checkout ({ROOT}); CPUs: {os.cpu_count()}")
            if 1 in parts:
                turns = [(run_figures(base, a.jobs), run_figures(ROOT, a.jobs)) for _ in range(max(1, a.runs))]
                b, t = least_of([x for x, _ in turns]), least_of([y for _, y in turns])
                least = f", least of {len(turns)}" if len(turns) > 1 else ""
                print(f"\n[1] ddpsim run (default scenario{least})  baseline   this     ratio")
                for k, label in PART1:
                    print(f"    {label:32s} {b[k]:8.2f} {t[k]:8.2f}   {ratio(b[k], t[k])}")
            if 2 in parts:
                b, t = point_figures(base, a.repeats), point_figures(ROOT, a.repeats)
                print(f"\n[2] one default point ({t['on']['ranks']} ranks), CPU s    baseline   this     ratio")
                for k in ("on", "off"):
                    print(f"    contention {k:4s}                  {b[k]['cpu_s']:8.3f} {t[k]['cpu_s']:8.3f}   "
                          f"{ratio(b[k]['cpu_s'], t[k]['cpu_s'])}")
                print(f"    on / off                         {b['on']['cpu_s'] / b['off']['cpu_s']:8.2f} "
                      f"{t['on']['cpu_s'] / t['off']['cpu_s']:8.2f}   (target <= 2)")
                for k in ("on", "off"):
                    rel = abs(t[k]["p50_s"] / b[k]["p50_s"] - 1.0)
                    print(f"    p50 step, contention {k}: {b[k]['p50_s']!r} / {t[k]['p50_s']!r} (relative change {rel:.1e})")
            if 3 in parts:
                axes, total = explore_axes(a.explore_points)
                b, t = explore_figures(base, axes, a.jobs), explore_figures(ROOT, axes, a.jobs)
                print(f"\n[3] ddpsim explore, {total} points, contention on   baseline   this     ratio")
                for k, label in (("wall_s", "wall s"), ("cpu_s", "CPU s")):
                    print(f"    {label:32s} {b[k]:8.2f} {t[k]:8.2f}   {ratio(b[k], t[k])}")
        finally:
            if not Path(a.baseline).is_dir():
                subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, capture_output=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
