"""What each cache of the simulation path buys. One command, prints figures:

    python benchmarks/bench_caches.py [--explore-points 250] [--repeats 1]

Runs ``ddpsim run`` of the default scenario and ``ddpsim explore`` of the GPT-2 1.5B design
space of ``bench_default_path.py`` (about ``--explore-points`` points), both in one process
(``--jobs 1``, so every cache hit is counted), each in a fresh process with every cache and with
one cache switched off: the point inputs' cache (``pipeline.inputs._KEPT``: graphs, comm models,
plans) and the engine's memo of its last results (``engine.simulate.MEMO_SIZE``). Prints CPU seconds and what
the cache buys (CPU without it / with it): a cache that buys under 1.2x on both is a candidate
for removal. The least of ``--repeats`` runs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = r"""
import sys, tempfile, time
from pathlib import Path
import yaml
variant, job, points = sys.argv[1], sys.argv[2], int(sys.argv[3])
import ddpsim.engine.simulate as es
import ddpsim.pipeline.inputs as inputs
if variant == "point inputs":
    class PassThrough:
        def get(self, key, pins, build):
            return build()
    inputs._KEPT = PassThrough()
elif variant == "engine memo":
    es.MEMO_SIZE = 0
sys.path.insert(0, str(Path.cwd() / "benchmarks"))
from bench_default_path import explore_axes
from ddpsim.cli.main import main
with tempfile.TemporaryDirectory() as tmp:
    if job == "run":
        argv = ["run", "--out-dir", tmp, "--jobs", "1", "--quiet"]
    else:
        axes, _ = explore_axes(points)
        f = Path(tmp) / "space.yaml"
        f.write_text(yaml.safe_dump({"name": "bench-caches", "trace": "traces/gpt2-1.5b.h100.json",
                                     "cluster": {"topology": "dgx-h100"}, "world_size": None,
                                     "simulation": {"iterations": 6, "seed": 0, "jitter": "trace"},
                                     "explore": {"axes": axes}}, sort_keys=False))
        argv = ["explore", str(f), "--out-dir", tmp, "--quiet", "--no-plots", "--jobs", "1"]
    c0 = time.process_time()
    main(argv)
    print(time.process_time() - c0)
"""

VARIANTS = ("every cache", "point inputs", "engine memo")


def cpu_s(variant: str, job: str, points: int) -> float:
    out = subprocess.run([sys.executable, "-c", PROBE, variant, job, str(points)], cwd=ROOT,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(out.stderr[-2000:])
    return float(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--explore-points", type=int, default=250, help="design-space points (default 250)")
    ap.add_argument("--repeats", type=int, default=1, help="runs per figure, the least kept (default 1)")
    args = ap.parse_args()
    from bench_default_path import explore_axes
    n = explore_axes(args.explore_points)[1]
    jobs = (("run", "ddpsim run (default)"), ("explore", f"ddpsim explore ({n} points)"))
    print(f"{'cache switched off':<24}" + "".join(f"{label:>28}" for _, label in jobs))
    base = {}
    for v in VARIANTS:
        cells = []
        for job, _ in jobs:
            s = min(cpu_s(v, job, args.explore_points) for _ in range(args.repeats))
            base.setdefault(job, s)
            cells.append(f"{s:8.2f} CPU s" + ("" if v == VARIANTS[0] else f"  buys {s / base[job]:.2f}x"))
        print(f"{v if v != VARIANTS[0] else 'none':<24}" + "".join(f"{c:>28}" for c in cells))


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT / "benchmarks"))
    main()
