"""Declared file formats: the base of every schema and its one-line errors. Every file ddpsim reads
(scenario, trace, plan, calibration, topology, method error) is a pydantic v2 model derived from
:class:`Schema`, or a :func:`record` (a pydantic dataclass: the file's format and the type the code
uses at once): frozen, unknown keys refused, strict types (no ``"false"`` read as a bool, no
``1.7`` read as an integer), each default written once, on the field. :func:`validate` turns
pydantic's ``ValidationError`` into the project's one-line :class:`~ddpsim.errors.InputError`
(``<source>: <key path>: <value> is not accepted; expected ...``), the key path built from the
error's ``loc`` (pydantic's union-member tags dropped). A custom check raises
``ValueError("expected ...")``: its text becomes the line's ending.
"""

from __future__ import annotations

import functools
import math
import typing
from typing import Any, Callable, TypeVar

from pydantic import BaseModel, BeforeValidator, ConfigDict, Strict, TypeAdapter, ValidationError
from pydantic.dataclasses import dataclass, is_pydantic_dataclass

from ddpsim.errors import InputError, cut, shorten

M = TypeVar("M", bound=BaseModel)


class Schema(BaseModel):
    """Base of ddpsim's file schemas."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, populate_by_name=True)


#: strict scalars for :func:`record` fields (a record's config is lax, so that a mapping and a
#: list validate to a nested record and a tuple)
Int = typing.Annotated[int, Strict()]
Float = typing.Annotated[float, Strict()]
Str = typing.Annotated[str, Strict()]
Bool = typing.Annotated[bool, Strict()]


def record(source: str) -> Any:
    """A frozen, keyword-only pydantic dataclass of strict scalars (:data:`Int` ...): the file's
    format and the type the code uses at once; building one raises InputError lines (``source``,
    if not empty, first; one ending in "." prefixes the key), its ``__post_init__``'s own included."""

    def wrap(cls: type) -> type:
        cls = dataclass(frozen=True, kw_only=True, config=ConfigDict(extra="forbid", ser_json_inf_nan="constants"))(cls)
        init = cls.__init__

        @functools.wraps(init)
        def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
            try:
                init(self, *args, **kwargs)
            except ValidationError as exc:
                raise InputError(error_line(exc, cls, source)) from None

        cls.__init__ = __init__
        return cls

    return wrap


def is_num(v: Any) -> bool:
    """A finite int or float, not a bool (an int too large for a float is not)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return math.isfinite(v)
    except OverflowError:
        return False


def rule(expected: str, ok: Callable[[Any], bool]) -> BeforeValidator:
    """A field's check before pydantic's own, its error the accepted values in words (``expected ...``)."""
    def check(v: Any) -> Any:
        if not ok(v):
            raise ValueError(f"expected {expected}")
        return v
    return BeforeValidator(check)


def to_plain(rec: Any) -> Any:
    """A record as the JSON document it is read from (tuples as lists)."""
    return _adapter(type(rec)).dump_python(rec, mode="json")


@functools.cache
def _adapter(model: Any) -> TypeAdapter:
    return TypeAdapter(model)


def format_version(number: int) -> Any:
    """A format's ``version`` field: the integer ``number`` and nothing else (strict: not ``true``, not
    ``1.0``; another integer is told the one accepted)."""
    return typing.Annotated[int, Strict(), rule(str(number), lambda v: type(v) is not int or v == number)]


def models_in(tp: Any) -> list[type[BaseModel]]:
    """The models a type annotation can hold (through Optional, Union, list, tuple, dict)."""
    if isinstance(tp, type) and (issubclass(tp, BaseModel) or is_pydantic_dataclass(tp)):
        return [tp]
    out: list[type[BaseModel]] = []
    for arg in typing.get_args(tp):
        out.extend(models_in(arg))
    return out


def _walk(root: type[BaseModel], loc: tuple[Any, ...]) -> tuple[str, list[type[BaseModel]]]:
    """The user's key path of ``loc`` and the models that hold its last key."""
    path, models, holders, keyed = "", [root], [root], False
    for part in loc:
        if part == "[key]":
            continue
        if isinstance(part, int):
            path += f"[{part}]"
            continue
        named = ((name, f) for m in models for name, f in m.__pydantic_fields__.items())
        found = None if keyed else next((f for name, f in named if part in (name, f.alias)), None)
        holders = models
        if found is None and any(m.__pydantic_fields__ for m in models):
            # a key of a dict field (any text), an extra key, or a union member's tag
            tag = part.startswith(("function-", "json-")) or "[" in part
            if keyed or (part.isidentifier() and not tag):
                path += f".{cut(part, 64)}" if path else part
            keyed = False
            continue
        path += f".{part}" if path else part
        models = models_in(found.annotation) if found is not None else []
        tp = None if found is None else found.annotation
        keyed = dict in map(typing.get_origin, (tp, *typing.get_args(tp)))
    return path, holders


def _expected(err: dict[str, Any]) -> str:
    msg = err["msg"]
    for prefix in ("Value error, ", "Assertion failed, "):
        if msg.startswith(prefix):
            msg = msg[len(prefix):]
    if msg.startswith("expected "):
        return msg[len("expected "):]
    if msg.startswith("Input should be "):
        msg = msg[len("Input should be "):]
        if msg.startswith(("a valid dictionary", "a dictionary")):  # "... or instance of <Model>": name no class
            return "a mapping"
        msg = msg.replace("a valid tuple", "a valid list")  # a record's tuple is the file's list
        for words, sign in (("greater than or equal to ", ">= "), ("less than or equal to ", "<= "),
                            ("greater than ", "> "), ("less than ", "< ")):
            if msg.startswith(words):
                return "a value " + sign + msg[len(words):]
        return msg
    return msg[0].lower() + msg[1:]


def error_line(exc: ValidationError, root: type[BaseModel], source: str) -> str:
    """One line for the first failing key of ``exc`` (union alternatives joined with 'or')."""
    errors = exc.errors(include_url=False)
    first = errors[0]
    path, holders = _walk(root, tuple(first["loc"]))
    where = source + path if source.endswith(".") else ": ".join(x for x in (source, path) if x)
    if isinstance(err := first.get("ctx", {}).get("error"), InputError):  # a record's check across keys
        return f"{where}{err}" if where.endswith(".") else f"{where}: {err}" if where else str(err)
    if first["type"] in ("extra_forbidden", "unexpected_keyword_argument"):
        keys = [f.alias or n for m in holders for n, f in m.__pydantic_fields__.items()]
        return f"{where}: unknown key; expected one of {', '.join(dict.fromkeys(keys))}"
    if first["type"] == "missing":
        return f"{where}: missing; expected this key (it is required)"
    same = [e for e in errors if _walk(root, tuple(e["loc"]))[0] == path]
    expected = " or ".join(dict.fromkeys(_expected(e) for e in same))
    return f"{where}: {shorten(first.get('input'))} is not accepted; expected {expected}"


def validate(model: type[M], data: Any, source: str) -> M:
    """``model.model_validate(data)``, or InputError with :func:`error_line`."""
    try:
        return _adapter(model).validate_python(data)
    except ValidationError as exc:
        raise InputError(error_line(exc, model, source)) from None
    except RecursionError:
        raise InputError(f"{source}: nested too deeply; expected a document of the declared format") from None
