"""Error policy of ddpsim: wrong user input (a file, a flag, a scenario key) raises
:class:`InputError`, a ``ValueError`` subclass whose message is ONE line naming the field, the bad
value and what would be accepted, e.g.
``trace.params[3].size_bytes: -4 is negative; expected an integer >= 0``; the CLI prints it as
``ddpsim: error: <message>`` and exits with status 2. A broken internal invariant is an ``assert``:
a bug in ddpsim, never the user's fault.
"""

from __future__ import annotations


#: the longest error line
MAX_LINE = 1000


class InputError(ValueError):
    """User input is wrong. The message is one line: field, value, what is accepted."""

    def __init__(self, message: str) -> None:
        # NOTE: one line, always: the CLI prints it verbatim; a line a huge value made long keeps
        # its start (source, key path, value) and its end (what is accepted)
        line = " ".join(str(message).split())
        if len(line) > MAX_LINE:
            line = f"{line[:600]} ... ({len(line)} characters) ... {line[-300:]}"
        super().__init__(line)


def require(condition: bool, field: str, value: object, accepted: str) -> None:
    """Raise :class:`InputError` ``"<field>: <value!r> ...; expected <accepted>"`` unless ``condition``."""
    if not condition:
        raise InputError(f"{field}: {shorten(value)} is not accepted; expected {accepted}")


#: the longest value an error line repeats; longer values are cut with their length noted
VALUE_CHARS = 80


def cut(text: str, limit: int = VALUE_CHARS) -> str:
    """``text`` cut to ``limit`` characters, its full length noted when cut."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


def shorten(value: object, limit: int = VALUE_CHARS) -> str:
    """``repr(value)`` cut to ``limit`` characters (``'...' (<n> characters)`` when cut), so an
    error line never repeats a huge value in full."""
    try:
        text = repr(value)
    except (ValueError, RecursionError):  # a deeply nested or a 4,300-digit-plus value
        text = f"<{type(value).__name__}>"
    return cut(text, limit)
