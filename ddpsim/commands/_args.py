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


CAP_LIST_EXPECTED = "a comma list of numbers of MiB > 0, e.g. 1,4,8"


def parse_cap_list(text: Any, flag: str, sep: str = ",", expected: str = CAP_LIST_EXPECTED) -> tuple[float, ...] | None:
    """``"1,4,8"`` -> (1, 4, 8) for a ``bucket_cap_mb_list`` flag (``sep`` between the limits); None stays None.

    Raises:
        InputError: ``"<flag>: '<text>' is not accepted; expected <expected>"`` for an empty
            text, an empty item (``1,,2``) or an item that is not a finite number > 0.
    """
    if text is None:
        return None
    items = str(text).split(sep)
    try:
        values = tuple(parse_cap_value(x, flag, expected, allow_not_given=False) for x in items if x.strip())
    except InputError:
        values = ()
    if not values or len(values) != len(items):
        raise InputError(f"{flag}: {text!r} is not accepted; expected {expected}")
    return values


LIST_POINT_PREFIX = "list="


def parse_cap_point(item: str, flag: str, expected: str) -> float | tuple[float, ...] | None:
    """One point of a comma list of caps: a ``bucket_cap_mb`` (``none`` = not given) or a
    ``bucket_cap_mb_list`` spelt as its point id, ``list=1+4+8``."""
    text = str(item).strip()
    if text.startswith(LIST_POINT_PREFIX):
        try:
            return parse_cap_list(text[len(LIST_POINT_PREFIX):], flag, sep="+", expected=expected)
        except InputError:
            raise InputError(f"{flag}: {item!r} is not accepted; expected {expected}") from None
    return parse_cap_value(text, flag, expected)
