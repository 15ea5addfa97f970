"""How far apart do two captures of one model predict? One command, prints figures:

    python benchmarks/bench_stability.py [--model zoo:resnet18] [--batch-size 4] [--captures 4]
        [--cap 25] [--calibration reports/zoo/calibration.json]

Captures the model ``--captures`` times the way ``ddpsim validate`` does (``executor trace`` on
2 gloo ranks at once, one thread each, in lockstep, 20 measured iterations after 3 warm-up),
then predicts each capture's mean step at one cap with one fixed calibration:

* on the wall clock (the trace as captured: what ``ddpsim validate`` predicts from);
* on the CPU clock (:func:`ddpsim.stability.cpu_clock_trace`: each phase scaled to the ranks'
  CPU time in it, the host's other load taken out).

Prints each capture's prediction, its backward time on both clocks, the ranks' median share
of a CPU, the hook overhead, and per clock the spread ``(max - min) / median`` and the
coefficient of variation of the predictions. On a shared host the captures' wall clocks move
with the other work; run it while the host is busy and while it is quiet.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def main(argv: list[str] | None = None) -> int:
    from ddpsim.calibration import load_calibration
    from ddpsim.interval import predict_mean
    from ddpsim.scenario import scenario_from_dict
    from ddpsim.stability import cpu_clock_trace, spread_pct
    from ddpsim.trace import load_trace
    from executor.launch import launch_local

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="zoo:resnet18")
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--captures", type=int, default=4)
    ap.add_argument("--cap", type=float, default=25.0, help="bucket_cap_mb of the predicted point (default 25)")
    ap.add_argument("--calibration", default=str(REPO / "reports" / "zoo" / "calibration.json"))
    args = ap.parse_args(argv)
    cal = load_calibration(args.calibration)
    preds: dict[str, list[float]] = {"wall": [], "cpu": []}
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.captures):
            path = Path(tmp) / f"trace{k}.json"
            t0 = time.perf_counter()
            r = launch_local(["trace", "--model", args.model, "--batch-size", str(args.batch_size), "--out", str(path),
                              "--iters", "20", "--warmup", "3"], nproc=2, num_threads=1, timeout_s=900)
            if r.returncode != 0:
                print(r.stderr[-2000:], file=sys.stderr)
                return 1
            tr = load_trace(path)
            sc = scenario_from_dict({"name": "stability", "trace": str(path), "cluster": {"topology": "cpu-gloo", "nodes": 1},
                                     "world_size": 2, "ddp": {"bucket_cap_mb": args.cap},
                                     "simulation": {"iterations": 10, "seed": 0, "jitter": "trace"}})
            predict = predict_mean(sc, sc.base_point(), cal)
            cpu = cpu_clock_trace(tr)
            pw, pc = predict(tr), predict(cpu)
            preds["wall"].append(pw)
            preds["cpu"].append(pc)
            print(f"capture {k}: predicted {pw * 1e3:7.1f} ms wall, {pc * 1e3:7.1f} ms CPU clock; backward "
                  f"{tr.phase('backward').median_s * 1e3:6.1f} / {cpu.phase('backward').median_s * 1e3:6.1f} ms; CPU share "
                  f"{cpu.synthetic['median_backward_cpu_share']:.2f}; hook overhead {tr.hook_overhead_frac:.3f}; "
                  f"load {tr.environment.get('load_average_1m')}; {time.perf_counter() - t0:.0f} s", flush=True)
    for clock, v in preds.items():
        cv = 100 * statistics.stdev(v) / statistics.fmean(v) if len(v) > 1 else 0.0
        spread = spread_pct(v)
        print(f"{args.model} {clock:4s} clock: {len(v)} captures, predictions {' '.join(f'{x * 1e3:.1f}' for x in v)} ms; "
              f"spread {'n/a' if spread is None else format(spread, '.1f') + ' %'}, cv {cv:.1f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
