"""The accuracy summary of validation reports (``python studies/validation_summary.py``): one line
per ``<root>/<scenario>/validation.json`` with its error, band, best-cap and plan figures, and
how many scenarios meet the three targets (median |error| <= 5 %, every point in band or within
10 %, best-cap gap <= 2 %)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from ddpsim.validation.compare import BEST_CAP_TOLERANCE_PCT

TARGET_MEDIAN_PCT = 5.0      # median |error| of the mean step over the validated points


def targets_met(s: dict[str, Any]) -> tuple[bool, bool, bool]:
    """Which of the three targets a report's ``summary`` meets: median |error|, every point in
    band or within 10 %, the predicted-best cap within 2 % of the measured best."""
    return (s["median_abs_error_pct"] <= TARGET_MEDIAN_PCT, s["num_in_band_or_within_10pct"] == s["num_points"],
            s["predicted_best_gap_pct"] <= BEST_CAP_TOLERANCE_PCT)


def print_summary(root: Path) -> int:
    """Print the table of every ``root/<scenario>/validation.json`` with a summary and how many
    scenarios meet the three targets; 0, or 2 (one line on stderr) when there is none."""
    reports = [json.loads(p.read_text()) for p in sorted(root.glob("*/validation.json"))]
    reports = [d for d in reports if d.get("summary")]
    if not reports:
        print(f"validation_summary: no */validation.json with a summary under {str(root)!r}; "
              f"expected the folders 'ddpsim validate' writes", file=sys.stderr)
        return 2
    print(f"{'scenario':20s} {'points':>6s} {'med|err|':>9s} {'max|err|':>9s} {'band/10%':>9s} "
          f"{'best-cap gap (95 % CI)':>24s} {'verdict':>22s} {'plan':>6s} {'spread':>9s}")
    met = 0
    for d in reports:
        s = d["summary"]
        ci = s.get("best_pair_gap_ci95_pct")
        gap = f"{s['predicted_best_gap_pct']:.1f} %"
        gap += "" if ci is None else f" ({ci[0]:+.1f}..{ci[1]:+.1f} %)"
        verdict = s.get("best_cap_verdict") or "n/a"
        if s.get("best_pair_rounds_to_decide") is not None:
            verdict += f", ~{s['best_pair_rounds_to_decide']} rounds"
        spread = s.get("median_run_spread_pct")
        spread = "n/a" if spread is None else format(spread, "6.1f") + " %"
        print(f"{d['scenario']:20s} {s['num_points']:6d} {s['median_abs_error_pct']:7.1f} % "
              f"{s['max_abs_error_pct']:7.1f} % "
              f"{s['num_in_band_or_within_10pct']:>5d}/{s['num_points']:<3d} {gap:>24s} {verdict:>22s} "
              f"{str(s['plan_matches_all']).lower():>6s} {spread:>9s}")
        met += all(targets_met(s))
    print(f"\nscenarios meeting all three targets (median <= {TARGET_MEDIAN_PCT:g} %, every point in band or within 10 %, "
          f"best-cap gap <= {BEST_CAP_TOLERANCE_PCT:g} %): {met} of {len(reports)}")
    print(f"measured on {reports[0]['world_size']} gloo ranks x {reports[0]['num_threads']} thread(s), "
          f"one calibration: {reports[0]['calibration']}")
    return 0
