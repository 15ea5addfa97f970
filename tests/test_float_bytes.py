"""A report's floats are written with 9 significant digits, so the last bits of floating point
(which differ between installations) never reach the bytes (ddpsim.io.json_text, CSV_FLOAT)."""

from __future__ import annotations

import json
import math

import pandas as pd

from ddpsim.io import FLOAT_DIGITS, json_text, rounded
from ddpsim.report.tables import to_csv_text


def test_floats_that_differ_in_their_last_bits_write_the_same_bytes():
    # the case: one figure on two installations
    a = {"backward": 0.04826527058760062, "steps": [0.08342532075006776, 1e-12]}
    b = {"backward": 0.048265270587600606, "steps": [0.08342532075006645, 1e-12]}
    assert json_text(a) == json_text(b)
    assert json.loads(json_text(a))["backward"] == 0.0482652706   # 9 significant digits


def test_rounding_keeps_nine_significant_digits_at_any_scale_and_leaves_the_rest():
    assert FLOAT_DIGITS == 9
    assert rounded(123456789.4) == 123456789.0
    assert rounded(1.23456789449e-10) == 1.23456789e-10   # a sub-nanosecond cost keeps its digits
    assert rounded({"k": (1, "x", None, True, 2.0)}) == {"k": [1, "x", None, True, 2.0]}
    assert math.isinf(rounded(float("inf"))) and math.isnan(rounded(float("nan")))


def test_csv_and_json_write_the_same_digits():
    x = 0.08342532075006776
    csv = to_csv_text(pd.DataFrame({"p50_s": [x]}))
    assert csv.splitlines()[1] == json_text(x).strip() == "0.0834253208"
