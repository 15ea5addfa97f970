"""How far calibrations of one host lie apart, and how steady the probe fit is inside each.

One command, prints figures; no assertions::

    python studies/calibration_drift.py                       # the calibrations under reports/
    python studies/calibration_drift.py cal-a.json cal-b.json

Per calibration file: the compute slowdown fitted to the DDP probe and the microbenchmark's; the
fit of each probe round alone (``Calibration.probe_round_fits``); the p10..p90 of the fit over 20
bootstrap resamples of the probe's DDP steps (the same trace, the steps drawn with replacement);
the probe's DDP step and its lockstep trace's phases (medians); the host's other load during
the probe where recorded; a 64 MiB all-reduce and the copy bandwidth. What moves between files
and what moves inside one is what limits a prediction made with one calibration at another
moment (studies/zoo/README.md).
"""

from __future__ import annotations

import glob
import os
import random
import statistics
import sys
from dataclasses import replace

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

DEFAULT = [p for p in ["reports/cpu-gloo-calibration.json", "reports/zoo/calibration.json",
           *sorted(glob.glob("reports/zoo/calibrations/*.json")), *sorted(glob.glob("reports/zoo/self-calibrated/zoo/calibration.json")),
           *sorted(glob.glob("reports/zoo/lanes/zoo/calibration.json"))] if os.path.isfile(p)]
RESAMPLES = 20


def main(argv: list[str]) -> int:
    from ddpsim.calibration.loader import load_calibration
    from ddpsim.errors import InputError
    from ddpsim.calibration.interference_fit import fit_probe

    paths = argv or DEFAULT
    print(f"{'calibration':48s} {'fit':>5s} {'mb':>5s} {'rounds':18s} {'boot p10..p90':>13s} {'probe step':>10s} "
          f"{'trace f/b/o ms':>15s} {'other':>6s} {'64MiB':>7s} {'copy':>9s}")
    for path in paths:
        try:
            cal = load_calibration(path)
        except InputError as exc:
            print(f"{path}: {exc}")
            continue
        probe = cal.interference_probe
        if cal.interference is None or cal.interference_microbenchmark is None or probe is None:
            print(f"{path:48s} no probe fit")
            continue
        trace, step_s, cap_mb = probe.trace, probe.ddp_step_s, probe.bucket_cap_mb
        samples = probe.ddp_step_samples_s or [step_s]
        rng = random.Random(0)
        boot = sorted(fit_probe(trace, statistics.median(rng.choice(samples) for _ in samples), cal, cap_mb,
                                cal.interference_microbenchmark)["compute_slowdown"]
                      for _ in range(RESAMPLES))
        phases = "/".join(f"{statistics.median(getattr(it, k) for it in trace.iterations) * 1e3:.0f}"
                          for k in ("forward_s", "backward_s", "optimizer_s"))
        ar = {p.size_bytes: p.time_s for p in cal.collectives.allreduce}
        big = f"{ar[64 * 2 ** 20] * 1e3:.1f}ms" if 64 * 2 ** 20 in ar else "-"
        other = "-" if cal.probe_host_other_pct is None else f"{cal.probe_host_other_pct:.1f}%"
        copy = "-" if not cal.copy_bandwidth_bytes_per_s else f"{cal.copy_bandwidth_bytes_per_s / 1e9:.1f}GB/s"
        rounds = " ".join(f"{x:.2f}" for x in cal.probe_round_fits) or "-"
        print(f"{path:48s} {cal.interference.compute_slowdown:5.2f} {cal.interference_microbenchmark.compute_slowdown:5.2f} "
              f"{rounds:18s} {boot[RESAMPLES // 10]:6.2f}..{boot[RESAMPLES * 9 // 10 - 1]:.2f} {step_s * 1e3:8.0f}ms "
              f"{phases:>15s} {other:>6s} {big:>7s} {copy:>9s}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
