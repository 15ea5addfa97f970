"""The report's tables written without pandas: the bytes pandas writes (its ``to_csv`` and
``to_markdown`` are the oracle), column by column as pandas types the column."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ddpsim.report.tables import CSV_FLOAT, md_table, to_csv_text

# one column per typing rule: ints; ints with a missing value (floats); ints and floats; floats
# with NaN; booleans (with a missing one: objects); strings that need quoting; numpy scalars;
# a key missing from the first row
ROWS = [
    {"point": "cap=default", "cap": None, "n": 3, "big": 12345678901, "f": 0.1, "b": True, "s": "a,b", "mix": 1,
     "bn": True, "nan": float("nan"), "q": 'say "x"', "neg": -0.0, "inf": float("inf"), "e": ""},
    {"point": "cap=1", "cap": 1, "n": 4, "big": None, "f": 2, "b": False, "s": None, "mix": 2.5, "bn": None,
     "nan": float("nan"), "q": "y", "neg": 1e-300, "inf": 1.0, "e": "x"},
    {"point": "cap=2", "cap": 25.5, "n": 5, "big": 3, "f": np.float64(1 / 3), "b": True, "s": "z", "mix": np.int64(7),
     "bn": False, "nan": None, "q": "\n", "neg": 5, "inf": 2, "e": None, "extra": 1},
]


def pandas_csv(rows):
    return pd.DataFrame(rows).to_csv(index=False, float_format=CSV_FLOAT, lineterminator="\n")


def test_rows_are_written_as_pandas_writes_their_dataframe():
    text = to_csv_text(ROWS)
    assert text == pandas_csv(ROWS)
    # a missing cap; ints as they are; ints with a gap as floats, 9 digits; a comma quoted
    assert text.splitlines()[1].startswith('cap=default,,3,1.23456789e+10,0.1,True,"a,b",1,True,,')


def test_a_dataframe_and_tuples_under_fields_write_the_same_bytes():
    fields = list(pd.DataFrame(ROWS).columns)
    assert to_csv_text(pd.DataFrame(ROWS)) == pandas_csv(ROWS)
    assert to_csv_text([tuple(r.get(k) for k in fields) for r in ROWS], fields) == pandas_csv(ROWS)


def test_without_a_float_format_every_value_is_written_as_str_writes_it():
    assert to_csv_text([{"a": 1, "b": 0.1 + 0.2, "c": None}]) == "a,b,c\n1,0.3,\n"
    assert to_csv_text([{"a": 1, "b": 0.1 + 0.2, "c": None}], float_format=None) == "a,b,c\n1,0.30000000000000004,\n"
    assert to_csv_text([]) == "" and to_csv_text([], ["a", "b"]) == "a,b\n"


def test_markdown_tables_are_pandas_to_markdown():
    rows = [{"": "x", "a b": "1.0", "c": "`q`"}, {"": "longer name", "a b": "22", "c": "\u2014\u00b5"}]
    for right in (0, 1, 3):
        align = ["left"] * (3 - right) + ["right"] * right
        assert md_table(rows, right) == pd.DataFrame(rows).to_markdown(index=False, disable_numparse=True,
                                                                       colalign=align).splitlines()


def test_a_run_writes_its_report_without_importing_pandas(tmp_path):
    import subprocess
    import sys

    code = ("import sys; from ddpsim.api import run_scenario; "
            "from ddpsim.pipeline.scenario import scenario_from_dict; "
            "sc = scenario_from_dict({'name': 't', 'trace': 'traces/mlp.cpu.json', 'cluster': {'topology': 'cpu-gloo'}, "
            "'world_size': 2, 'simulation': {'iterations': 3, 'jitter': 'none'}, "
            "'sweep': {'bucket_cap_mb': [None, 1]}}, source='t'); "
            "rep = run_scenario(sc, out_dir=sys.argv[1], jobs=1, progress=False); "
            "print(sorted(p.name for p in rep.out_dir.glob('*.csv')), 'pandas' in sys.modules)")
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True, cwd=root)
    assert out.stdout.split() == ["['buckets.csv',", "'sweep.csv']", "False"]
