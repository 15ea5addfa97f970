"""Tables as text with the standard library and tabulate (a report needs no pandas): CSV
(:func:`to_csv_text`, writing what ``pandas.DataFrame(rows).to_csv(index=False,
float_format=CSV_FLOAT)`` writes: columns typed as pandas types them, floats with
:data:`ddpsim.io.FLOAT_DIGITS` significant digits, a missing value empty) and Markdown (:func:`md_table`).
"""

from __future__ import annotations

import csv
import io
from numbers import Integral, Real
from typing import Any, Sequence

from ddpsim.io import FLOAT_DIGITS

CSV_FLOAT = f"%.{FLOAT_DIGITS}g"


def _column_text(values: Sequence[Any], float_format: str | None) -> Sequence[Any]:
    """A column's values for the csv module (None: an empty field), typed as pandas types it."""
    types = set(map(type, values))
    nan = any(issubclass(t, float) for t in types) and any(v != v for v in values)
    missing = nan or type(None) in types
    given = types - {type(None)}
    if float_format and given and all(issubclass(t, Real) and not issubclass(t, bool) for t in given) \
            and (missing or not all(issubclass(t, Integral) for t in given)):
        return [float_format % v if v is not None and v == v else "" for v in values] if missing \
            else [float_format % v for v in values]
    return [None if v != v else v for v in values] if nan else values


def to_csv_text(rows: Any, fields: Sequence[str] | None = None, *, float_format: str | None = CSV_FLOAT) -> str:
    """``rows`` (dicts, tuples under ``fields``, or a DataFrame) as CSV under ``fields`` (None: the
    rows' keys); floats per ``float_format`` (None: every value as ``str`` writes it, untyped)."""
    if hasattr(rows, "to_dict"):  # a DataFrame: its columns, missing values as None
        frame = rows.astype(object).where(rows.notna(), None)
        fields, rows = [str(c) for c in frame.columns], list(frame.itertuples(index=False, name=None))
    rows = list(rows)
    if rows and isinstance(rows[0], dict):
        fields = list(fields or dict.fromkeys(k for r in rows for k in r))
        rows = [tuple(r.get(k) for k in fields) for r in rows]
    if fields is None:
        return ""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(fields)
    w.writerows(zip(*(_column_text(c, float_format) for c in zip(*rows))))
    return buf.getvalue()


def md_table(rows: list[dict[str, Any]], right: int = 0) -> list[str]:
    """A Markdown table of dicts (keys the header, cells as written), the last ``right`` columns right-aligned."""
    from tabulate import tabulate

    cols = len(rows[0]) if rows else 0
    align = ["left"] * (cols - right) + ["right"] * right
    return tabulate(rows, headers="keys", tablefmt="pipe", disable_numparse=True, colalign=align).splitlines()
