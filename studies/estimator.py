"""Which statistic of the trace's iterations predicts committed real DDP runs' mean steps better: their
median or their mean (``SimConfig.compute_statistic``).

One command, prints figures; no assertions; nothing is run::

    python studies/estimator.py                  # every committed validation (raw runs unpacked), each with its own calibration
    python studies/estimator.py --no-stability   # errors only (seconds instead of about two minutes)

A validation scores the MEAN measured step. The engine reads each compute phase and each
gradient-ready time from the trace's iterations, by their median (robust to one outlying
iteration of a short capture) or by their mean (what a mean step adds up, slow iterations
included). Every committed validation (the whole-zoo runs under ``reports/zoo/*/zoo/``, each with the
calibration it recorded, and the four bundled ones with theirs) is predicted again both ways,
errors only: models within 5 % (median |error| over their points), the median of those medians,
the mean signed error; and, unless ``--no-stability``, the prediction's stability, per model the
median over its points of (max - min) / median of the predictions from each round's capture
alone, and how many models are within 3 %.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import io
import json
import os
import statistics
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from weighting import load_runs  # noqa: E402

STATISTICS = ("median", "mean")


def groups() -> list[tuple[str, list[str], str]]:
    """(label, validation folders, calibration) per committed validation set."""
    out = []
    for zoo in sorted(glob.glob("reports/zoo/*/zoo")):
        folders = sorted(glob.glob(os.path.join(zoo, "zoo-*")))
        recorded = {json.loads(Path(f, "validation.json").read_text()).get("calibration") for f in folders
                    if Path(f, "validation.json").is_file()}
        own = os.path.join(zoo, "calibration.json")  # the run's shared calibration (its first model recorded its own copy)
        if os.path.isfile(own):
            out.append((zoo, folders, own))
        elif len(recorded) == 1 and os.path.isfile(next(iter(recorded))):
            out.append((zoo, folders, next(iter(recorded))))
    bundled = [f"reports/cpu-gloo-{m}" for m in ("bert-base", "gpt2-124m", "mlp", "resnet50")]
    out.append(("bundled (reports/cpu-gloo-*)", [f for f in bundled if os.path.isdir(f)], "reports/cpu-gloo-calibration.json"))
    return out


def predict(scenario, point, trace, cal, statistic: str) -> float:
    from ddpsim.engine.simulate import simulate

    inputs = scenario.build_point(point, trace=trace, calibration=cal)
    cfg = replace(inputs.config, compute_statistic=statistic)
    return simulate(inputs.trace, inputs.plan, inputs.comm, cfg).summary()["iteration_mean_s"]


def main(argv: list[str]) -> int:
    from ddpsim.calibration.loader import load_calibration
    from ddpsim.validation.stability import spread_pct
    from ddpsim.validation.measure import round_traces

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-stability", action="store_true", help="errors only")
    args = ap.parse_args(argv)
    print(f"{'validations':44s} {'statistic':9s} {'within 5 %':>10s} {'median':>7s} {'signed':>7s}"
          + ("" if args.no_stability else f" {'stability':>9s} {'within 3 %':>10s}"))
    for label, folders, cal_path in groups():
        with contextlib.redirect_stdout(io.StringIO()):
            runs = load_runs(folders)
        cal = load_calibration(cal_path)
        for st in STATISTICS:
            meds, signed, stab = [], [], []
            for name, scenario, points, trace, measured in runs:
                errs = []
                for p in points:
                    m = measured[p.point_id]
                    errs.append(100 * (predict(scenario, p, trace, cal, st) - m) / m)
                meds.append(statistics.median(abs(e) for e in errs))
                signed += errs
                caps = [] if args.no_stability else round_traces(Path(name) / "validation", 3)
                if len(caps) > 1:
                    stab.append(statistics.median(spread_pct([predict(scenario, p, c, cal, st) for c in caps]) for p in points))
            line = (f"{label:44s} {st:9s} {sum(m <= 5 for m in meds):>5d}/{len(meds):<4d} {statistics.median(meds):6.1f}% "
                    f"{statistics.mean(signed):+6.1f}%")
            if stab:
                line += f" {statistics.median(stab):8.1f}% {sum(s <= 3 for s in stab):>5d}/{len(stab):<4d}"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
