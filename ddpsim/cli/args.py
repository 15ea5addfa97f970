"""Argument parsing shared by the subcommands (one place for one-line errors on flags)."""

from __future__ import annotations

from typing import Any

from ddpsim.errors import InputError
from ddpsim.units import (CAP_LIST_EXPECTED, LIST_POINT_PREFIX, NOT_GIVEN, parse_cap_list,  # noqa: F401  (re-exported;
                          parse_cap_point, parse_cap_value)  # they live low, for the executor)


def parse_int(text: Any, flag: str, minimum: int = 1) -> int | None:
    """``"4"`` -> 4 for ``flag``; None stays None (flag not given).

    Raises:
        InputError: ``"<flag>: '<text>' is not accepted; expected an integer >= <minimum>"``
            unless ``text`` is a plain integer (no sign, no decimals) >= ``minimum``.
    """
    if text is None:
        return None
    try:
        value = int(text)
    except (TypeError, ValueError):
        value = None
    if value is None or value < minimum or str(value) != str(text).strip():
        raise InputError(f"{flag}: {text!r} is not accepted; expected an integer >= {minimum}")
    return value
