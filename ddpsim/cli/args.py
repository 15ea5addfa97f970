"""Argument parsing shared by the subcommands: the parser whose every error is one line, the
``type=`` functions of typed flags (each with its bounds), text output, and parser helpers. Every
bad flag value ends as ``ddpsim: error: <flag>: <value> is not accepted; expected ...`` and exit
status 2: a ``type=`` function raises :class:`argparse.ArgumentTypeError`, and
:meth:`ArgParser.error` rewrites argparse's own messages into the same one line.
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path
from typing import Any, Callable, Container, Sequence

from ddpsim.errors import InputError, cut, shorten

_CHOICE = re.compile(r"^argument (?P<flag>[^:/]+)[^:]*: invalid choice: (?P<value>.*) \(choose from (?P<choices>.*)\)$", re.S)
_ARGUMENT = re.compile(r"^argument (?P<flag>[^:/]+)[^:]*: (?P<rest>.*)$", re.S)


class ArgParser(argparse.ArgumentParser):
    """An ArgumentParser (its subcommands' too) whose errors raise a one-line :class:`InputError`."""

    def error(self, message: str):  # type: ignore[override]
        raise InputError(one_line_error(message))


def one_line_error(message: str) -> str:
    """argparse's error ``message`` as ``<flag>: <value> is not accepted; expected ...``."""
    m = _CHOICE.match(message)
    if m:
        choices = ", ".join(c.strip().strip("'") for c in m["choices"].split(","))
        return f"{m['flag']}: {cut(m['value'])} is not accepted; expected one of {choices}"
    m = _ARGUMENT.match(message)
    if m:
        flag, rest = m["flag"], m["rest"]
        if rest.startswith("expected ") and "argument" in rest:
            return f"{flag}: no value given; {rest.replace('argument', 'value')}"
        if rest.startswith("not allowed with argument "):
            return f"{flag}: not accepted with {rest[len('not allowed with argument '):]}; expected one of them"
        if rest.startswith("ignored explicit argument "):
            return f"{flag}: {cut(rest[len('ignored explicit argument '):])} is not accepted; expected no value"
        return f"{flag}: {cut(rest, 300)}"
    if message.startswith("the following arguments are required: "):
        return f"{message.split(': ', 1)[1]}: missing; expected a value (required)"
    if message.startswith("unrecognized arguments: "):
        return (f"arguments: {shorten(message.split(': ', 1)[1])} is not accepted; expected the flags and arguments "
                "'ddpsim COMMAND --help' lists")
    return cut(message, 300)


# ---- type= functions --------------------------------------------------------------------------


def refuse(text: Any, expected: str) -> argparse.ArgumentTypeError:
    """A ``type=`` function's error: ``<text> is not accepted; expected <expected>``."""
    return argparse.ArgumentTypeError(f"{shorten(text)} is not accepted; expected {expected}")


def int_in(minimum: int, maximum: int) -> Callable[[str], int]:
    """A ``type=`` for an integer flag in ``[minimum, maximum]`` (no sign, no decimals)."""
    expected = f"an integer in [{minimum}, {maximum}]"

    def parse(text: str) -> int:
        s = str(text).strip()
        if not re.fullmatch(r"-?[0-9]{1,19}", s):
            raise refuse(text, expected)
        value = int(s)
        if not minimum <= value <= maximum:
            raise refuse(value, expected)
        return value

    return parse


def float_in(minimum: float, *, above: bool = False, maximum: float = math.inf) -> Callable[[str], float]:
    """A ``type=`` for a finite number >= ``minimum`` (> with ``above``) and <= ``maximum``."""
    expected = f"a finite number {'>' if above else '>='} {minimum:g}" + ("" if maximum == math.inf else f" and <= {maximum:g}")

    def parse(text: str) -> float:
        try:
            value = float(str(text).strip())
        except ValueError:
            raise refuse(text, expected) from None
        if not (math.isfinite(value) and (value > minimum if above else value >= minimum) and value <= maximum):
            raise refuse(text, expected)
        return value

    return parse


def number(text: str) -> float:
    """A ``type=`` for a number (bounds are the caller's to check)."""
    try:
        return float(str(text).strip())
    except ValueError:
        raise refuse(text, "a number") from None


def from_parser(fn: Callable[[str], Any]) -> Callable[[str], Any]:
    """A ``type=`` from a parser raising ``InputError("<flag>: ...")``, its message without the flag."""

    def parse(text: str) -> Any:
        try:
            return fn(text)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc).split(": ", 1)[-1]) from None

    return parse


def lower(text: str) -> str:
    """A ``type=`` for case-insensitive ``choices=``."""
    return str(text).strip().lower()


def output_file(text: str) -> str:
    """A ``type=`` for a file to write: not empty, not a folder, a path the system can look up."""
    if not str(text).strip() or is_folder(text, "a file path"):
        raise refuse(text, "a file path, not a folder")
    return text


def is_folder(text: str, expected: str) -> bool:
    """Whether ``text`` names an existing folder; a path the system cannot look up is refused."""
    try:
        return Path(text).is_dir()
    except OSError as exc:
        raise refuse(text, f"{expected} ({exc.strerror})") from None


def nonempty(text: str) -> str:
    """A ``type=`` for a name or path that must not be empty."""
    if not str(text).strip():
        raise refuse(text, "a non-empty value")
    return text


def choice(values: Sequence[str]) -> Callable[[str], str]:
    """A ``type=`` for one of ``values`` (case-insensitive)."""

    def parse(text: str) -> str:
        value = lower(text)
        if value not in values:
            raise refuse(text, f"one of {', '.join(values)}")
        return value

    return parse


def boolean(text: str) -> bool:
    """A ``type=`` for ``true`` or ``false`` (case-insensitive)."""
    value = lower(text)
    if value not in ("true", "false"):
        raise refuse(text, "true or false")
    return value == "true"


def key_values(items: Sequence[str], table: dict[str, Callable[[str], Any]], flag: str = "--set") -> dict[str, Any]:
    """The ``KEY=VALUE`` items of a repeatable ``flag``, each parsed by ``table[KEY]`` (a ``type=``),
    the last of a key kept; InputError for an unknown key or a value its key refuses."""
    out: dict[str, Any] = {}
    for item in items:
        key, sep, text = str(item).partition("=")
        key = key.strip()
        if not sep or key not in table:
            raise InputError(f"{flag}: {shorten(item)} is not accepted; expected KEY=VALUE with KEY one of "
                             f"{', '.join(table)}")
        try:
            out[key] = table[key](text.strip())
        except argparse.ArgumentTypeError as exc:
            raise InputError(f"{flag} {key}: {exc}") from None
    return out


# ---- output ---------------------------------------------------------------------------------


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]], right: Container[int] | None = None) -> list[str]:
    """Aligned lines, columns two spaces apart, those in ``right`` (None: all) right-aligned."""
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(header)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if right is None or i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [line(header), *(line(r) for r in rows)]


def flag_words(args: argparse.Namespace, keys: Sequence[str]) -> list[str]:
    """The words of the flags ``keys`` as given in ``args`` (for a command line a file records): None
    and False left out, True a switch, a tuple joined by commas."""
    words = []
    for key in keys:
        value = getattr(args, key, None)
        if value is not None and value is not False:
            words += ["--" + key.replace("_", "-")] + ([] if value is True else [value_word(value)])
    return words


def value_word(value: Any) -> str:
    """A flag's value as a command line writes it (a tuple joined by commas)."""
    return ",".join(map(str, value)) if isinstance(value, tuple) else str(value)


# ---- parser helpers ---------------------------------------------------------------------------


def add_set(p: argparse.ArgumentParser) -> None:
    """``--set KEY=VALUE`` (repeatable): any scenario key, checked by the scenario's schema."""
    p.add_argument("--set", metavar="KEY=VALUE", action="append", default=[], dest="overrides",
                   help="override a scenario key before it is checked, e.g. --set ddp.bucket_cap_mb=50 --set "
                        "cluster.nodes=4 --set 'sweep.bucket_cap_mb=[null, 10, 50]' (dotted key, YAML value; repeatable)")


def add_format(p: argparse.ArgumentParser, *formats: str) -> None:
    """``--format``: one of ``formats``, the first by default."""
    p.add_argument("--format", choices=formats, default=formats[0], help=f"output format; default: {formats[0]}")


def add_verb(subparsers: Any, name: str, *, help: str, description: str, epilog: str) -> argparse.ArgumentParser:
    """A subcommand parser: ``description`` leads with its question, ``epilog`` holds its examples."""
    return subparsers.add_parser(name, help=help, description=description, epilog=epilog,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)


def require_torch(verb: str) -> None:
    """Refuse ``verb`` with one line when PyTorch cannot be imported (the ``capture`` extra)."""
    try:
        import torch  # noqa: F401
    except ImportError as exc:
        raise InputError(f"{verb} needs PyTorch: pip install \"ddpsim[capture]\" (or torch itself); "
                         f"import torch failed: {exc}") from None
