"""Benchmark: what each GPU cost term does to the bucket_cap_mb recommendation.

One command, prints figures; no assertions:

    python studies/gpu_terms.py [--scenarios gpt2-1.5b-h100-1n,...] [--jobs 2]

For every bundled GPU scenario (a topology other than cpu-gloo, no calibration): the best
cap and its robust set (the caps within 1 % of the best in every uncertainty sample,
ddpsim.pipeline.resampling) under the full prior, then one line per term switched off
(``cost_model.contention``, ``copy_kernels``, ``host``): its best cap, robust set and p50.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ddpsim.pipeline.scenario import load_scenario
from ddpsim.pipeline.sweep import best_record, run_sweep, uncertainty_summary

ROOT = Path(__file__).resolve().parent.parent
TERMS = ("contention", "copy_kernels", "host")


def gpu_scenarios() -> list[str]:
    out = []
    for p in sorted((ROOT / "scenarios").glob("*.yaml")):
        sc = load_scenario(p)
        if sc.cluster.topology != "cpu-gloo" and sc.calibration_path is None:
            out.append(p.stem)
    return out


def caps(points: list[str]) -> str:
    return ", ".join(p.replace("cap=", "") for p in points) or "none"


def line(label: str, sc, jobs: int) -> str:
    t0 = time.perf_counter()
    recs = run_sweep(sc, jobs=jobs, progress=False)
    best = best_record(recs)
    u = uncertainty_summary(recs)
    robust = caps(u["robust"]) if u else "-"
    if u and not u["robust"]:
        robust += f"; safest {u['safest'].replace('cap=', '')} (<= {100 * u['safest_regret_max']:.1f} % from the best)"
    most = u["most_sensitive"] if u else "-"
    return (f"  {label:<22} best {best.point_id.replace('cap=', ''):>8}  p50 {best.metrics['iteration_p50_s'] * 1e3:9.3f} ms"
            f"  robust [{robust}]  most sensitive: {most}  ({time.perf_counter() - t0:.1f} s)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenarios", default=None, help="comma-separated bundled names; default: every GPU scenario")
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    names = args.scenarios.split(",") if args.scenarios else gpu_scenarios()
    for name in names:
        sc = load_scenario(name)
        print(f"{name}:")
        print(line("all terms (prior)", sc, args.jobs), flush=True)
        for term in TERMS:
            off = sc.updated(cost_model={term: False})
            print(line(f"without {term}", off, args.jobs), flush=True)
        none = sc.updated(cost_model={t: False for t in TERMS})
        print(line("without all three", none, args.jobs), flush=True)


if __name__ == "__main__":
    main()
