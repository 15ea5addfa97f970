"""The uncertainty band's collective term is the residuals' spread, recomputed from the curves."""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

import pytest

from ddpsim.network import collective_residuals
from ddpsim.pipeline import resampling

ROOT = Path(__file__).resolve().parents[1]


def test_band_factors_are_the_quantiles_of_measured_over_model():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_collective_score as bench
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    meta, points = bench.load(bench.DATA)
    ratios = bench.mid_size_ratios(meta, points)
    deciles = statistics.quantiles(ratios, n=10, method="inclusive")
    assert collective_residuals.MID_SIZE_RATIOS == pytest.approx((deciles[0], deciles[-1]), abs=5e-4)
    assert (bench.BAND_LO, bench.BAND_HI) == (collective_residuals.MID_LO_BYTES, collective_residuals.MID_HI_BYTES)


def test_resampling_uses_the_residual_band():
    assert resampling.MID_FACTORS == collective_residuals.MID_SIZE_RATIOS
    lo, hi = resampling.MID_FACTORS
    assert lo < 1 < hi
