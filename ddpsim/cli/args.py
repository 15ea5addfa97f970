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


def scenario_from_flags(data: dict[str, Any], command: str, flags: dict[str, str]):
    """A :class:`~ddpsim.pipeline.scenario.Scenario` from the mapping ``data`` a command built
    from its flags; an error names the flag (``flags``: scenario key -> flag) instead of the key."""
    from ddpsim.pipeline.scenario import scenario_from_dict

    try:
        return scenario_from_dict(data, source=command)
    except InputError as exc:
        raise InputError(flag_message(str(exc).replace(f"{command}: ", "", 1), flags)) from None


def flag_message(msg: str, flags: dict[str, str]) -> str:
    """``msg`` with its leading scenario key replaced by the flag that sets it."""
    for key in sorted(flags, key=len, reverse=True):
        if msg.startswith(key) and msg[len(key):len(key) + 1] in (":", ".", "["):
            return flags[key] + msg[len(key):]
    return msg
