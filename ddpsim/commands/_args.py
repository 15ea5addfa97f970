"""Argument parsing shared by the subcommands (one place for one-line errors on flags)."""

from __future__ import annotations

import math
from typing import Any

from ddpsim.errors import InputError


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


NOT_GIVEN = ("none", "null", "default")


def parse_cap_value(item: str, flag: str, expected: str, *, allow_not_given: bool = True) -> float | None:
    """One ``bucket_cap_mb`` value in MiB: ``"25"`` -> 25, ``"0.5"`` -> 0.5; ``none``/``null``/``default``
    -> None (not given: DDP's default) when ``allow_not_given``.

    Raises:
        InputError: ``"<flag>: '<item>' is not accepted; expected <expected>"`` unless a finite number > 0.
    """
    text = str(item).strip()
    if allow_not_given and text.lower() in NOT_GIVEN:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise InputError(f"{flag}: {item!r} is not accepted; expected {expected}")
    return int(value) if value.is_integer() else value
