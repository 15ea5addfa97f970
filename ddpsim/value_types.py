"""The value types of the configuration records (``DDPOptions``, ``SimConfig``) and of the scenario
schema (:mod:`ddpsim.pipeline.scenario_schema`), declared once for both: each checks its value
with the accepted values in words (the text of the one-line error), then hands it to pydantic's
strict type; the bounds on every count and size a scenario may name; and :func:`section_of`, a
scenario section made of a record's fields."""

from __future__ import annotations

from typing import Annotated, Any, Callable, Literal, Optional, Union
from pydantic import AfterValidator, BeforeValidator, Field, Strict, ValidationError, WithJsonSchema, create_model
from pydantic_core import PydanticCustomError
from ddpsim.schema import Schema, is_num, rule

# ---- bounds (far above any real use; each one is named in its key's error line) ----------
from ddpsim.units import MAX_WORLD_SIZE
#: ``bucket_cap_mb`` and every entry of a ``bucket_cap_mb_list``, MiB
MAX_CAP_MB = 1_000_000
#: points of a ``{min, max, points}`` cap range
MAX_POINTS = 10_000
#: entries of any list (sweep values, cap lists, timelines, parameter names)
MAX_LIST = 10_000
MAX_SLOWDOWN = 1000.0
MAX_JITTER = 100.0
MAX_LATENCY_US = 1e9
MAX_GBPS = 1e9
MAX_POWERSGD_RANK = 65536
MAX_NAME_CHARS = 200
#: round-robin communicators (the ``ddp`` section's and the sweep's count)
MAX_PROCESS_GROUPS = 64
#: ``ddp.join``: batches of one rank in one epoch
MAX_BATCHES = 10_000_000
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
#: DDP's comm hooks: none (the reducer's own all-reduce), allreduce, fp16 / bf16 (compression), powersgd
COMM_HOOKS = ("none", "allreduce", "fp16", "bf16", "powersgd")


# ---- value types: a check with the accepted values in words, then pydantic's strict type ----

def _fail(loc: tuple[Any, ...], value: Any, expected: str) -> None:
    """Raise the validation error of ``value`` at ``loc`` (inside the model being validated)."""
    error = PydanticCustomError("value_error", "expected {expected}", {"expected": expected})
    raise ValidationError.from_exception_data("scenario", [{"type": error, "loc": loc, "input": value}])


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def Int(lo: int, hi: int, *, null: bool = False) -> Any:
    """An integer in [lo, hi] (or null)."""
    base = Annotated[int, Field(ge=lo, le=hi)]
    text = f"an integer >= {lo} and <= {hi}" + (" or null" if null else "")
    return Annotated[Optional[base] if null else base,
                     rule(text, lambda v: (null and v is None) or (_is_int(v) and lo <= v <= hi))]


def Number(lo: float, hi: float, *, above: bool = False, unit: str = "", null: bool = False) -> Any:
    """A finite number in [lo, hi] (``above``: > lo), or null; read as a float."""
    base = Annotated[float, Field(gt=lo, le=hi) if above else Field(ge=lo, le=hi)]
    text = f"a number{unit} {'>' if above else '>='} {lo:g} and <= {hi:g}" + (" or null" if null else "")
    return Annotated[Optional[base] if null else base, rule(
        text, lambda v: (null and v is None) or (is_num(v) and (v > lo if above else v >= lo) and v <= hi))]


def _whole(v: Any) -> Any:
    """A number of MiB as written, an int when whole (``25.0`` -> 25: point ids say ``cap=25``)."""
    return int(v) if isinstance(v, float) and v.is_integer() else v


_CAP_TEXT = f"a number > 0 (MiB, at most {MAX_CAP_MB})"
_CAP_SCHEMA = {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_CAP_MB}


def _is_cap(v: Any) -> bool:
    return is_num(v) and 0 < v <= MAX_CAP_MB


#: ``bucket_cap_mb``: MiB, kept an int when whole
Cap = Annotated[Union[int, float], rule(_CAP_TEXT, _is_cap), AfterValidator(_whole), WithJsonSchema(_CAP_SCHEMA)]
#: ``bucket_cap_mb`` or null (DDP's default)
OptCap = Annotated[Optional[Union[int, float]], rule(f"a number > 0 or null (MiB, at most {MAX_CAP_MB}; null: DDP's default)",
                                                 lambda v: v is None or _is_cap(v)),
                   AfterValidator(_whole), WithJsonSchema({"anyOf": [_CAP_SCHEMA, {"type": "null"}]})]
_CAP_LIST_TEXT = f"a non-empty list of numbers of MiB > 0 and <= {MAX_CAP_MB} (at most {MAX_LIST}; e.g. [1, 4, 8])"
#: ``bucket_cap_mb_list``: per-bucket limits, MiB


def _is_cap_list(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and 0 < len(v) <= MAX_LIST and all(_is_cap(x) for x in v)


CapList = Annotated[tuple[Cap, ...], Field(min_length=1, max_length=MAX_LIST), Strict(False),
                    rule(_CAP_LIST_TEXT, _is_cap_list)]
OptCapList = Annotated[Optional[CapList], rule(f"{_CAP_LIST_TEXT}, or null", lambda v: v is None or _is_cap_list(v))]

Bool = Annotated[bool, rule("true or false", lambda v: isinstance(v, bool))]
OptBool = Annotated[Optional[bool], rule("true or false or null", lambda v: v is None or isinstance(v, bool))]
Text = Annotated[str, rule("a non-empty string", lambda v: isinstance(v, str) and v != "")]
OptText = Annotated[Optional[str], rule("a non-empty string or null",
                                         lambda v: v is None or (isinstance(v, str) and v != ""))]
Hook = Annotated[Literal[COMM_HOOKS], rule(f"one of {', '.join(COMM_HOOKS)}", lambda v: v in COMM_HOOKS)]
Fraction = Annotated[float, rule("a number in [0, 1]", lambda v: is_num(v) and 0 <= v <= 1)]
Seconds = Annotated[float, rule("a finite number of seconds >= 0", lambda v: is_num(v) and v >= 0)]
Slowdown = Number(1.0, MAX_SLOWDOWN)


def _rank_keys(v: Any) -> Any:
    """``{"3": 1.2}`` (a rank written as a string) -> ``{3: 1.2}``."""
    if not isinstance(v, dict):
        return v
    return {int(k) if isinstance(k, str) and k.isdigit() else k: f for k, f in v.items()}


#: ``simulation.stragglers``: rank -> its compute's slowdown
Stragglers = Annotated[
    dict[Int(0, MAX_WORLD_SIZE - 1), Slowdown],
    rule(f"a mapping rank -> slowdown factor >= 1 and <= {MAX_SLOWDOWN:g}", lambda v: v is None or isinstance(v, dict)),
    BeforeValidator(lambda v: {} if v is None else _rank_keys(v))]
#: ``simulation.jitter``: the trace's own spread, none, or a coefficient of variation
Jitter = Annotated[Union[Literal["trace", "none"], int, float], rule(
    f"'trace', 'none' or a coefficient of variation >= 0 and <= {MAX_JITTER:g}",
    lambda v: v in ("trace", "none") or (is_num(v) and 0 <= v <= MAX_JITTER)),
    WithJsonSchema({"anyOf": [{"enum": ["trace", "none"]}, {"type": "number", "minimum": 0, "maximum": MAX_JITTER}]})]
Options = Annotated[dict[str, Any], BeforeValidator(lambda v: {} if v is None else v)]


def Listed(item: Any, what: str = "values") -> Any:
    """A non-empty list of at most :data:`MAX_LIST` ``item``."""
    return Annotated[list[item], Field(min_length=1, max_length=MAX_LIST), rule(
        f"a non-empty list of at most {MAX_LIST} {what}", lambda v: isinstance(v, list) and 0 < len(v) <= MAX_LIST)]


def _mapping(model: type[Schema]) -> BeforeValidator:
    """A section: a mapping of ``model``'s keys; null gives every default."""
    keys = ", ".join(f.alias or k for k, f in model.model_fields.items())
    return rule(f"a mapping of {keys}", lambda v: v is None or isinstance(v, dict))


def _section(model: type[Schema]) -> Any:
    """A section field of ``model`` (null: every default)."""
    return Annotated[model, _mapping(model), BeforeValidator(lambda v: {} if v is None else v)]


def _with_shorthand(alternative: dict[str, Any]) -> Callable[[dict[str, Any]], None]:
    """A field's JSON Schema that also takes the shorthand ``alternative`` (the loader reads it so)."""
    def extra(schema: dict[str, Any]) -> None:
        given = [{"$ref": schema.pop("$ref")}] if "$ref" in schema else schema.pop("anyOf", [])
        schema["anyOf"] = [*given, alternative]
    return extra


def section_of(rec: type, *, skip: tuple[str, ...] = (), types: dict[str, Any] | None = None,
               flat: tuple[str, ...] = ()) -> type[Schema]:
    """A scenario section holding the record ``rec``'s fields but ``skip``, with their types,
    defaults and descriptions as the record declares them; ``types`` swaps a field's type (a
    nested record's own section, a narrower choice); a ``flat`` field, a nested record, gives
    its own fields in its place."""
    types = types or {}
    fields: dict[str, Any] = {}
    for k, f in rec.__pydantic_fields__.items():
        if k in flat:
            fields.update(section_of(f.annotation).model_fields.items())
        elif k in types:
            fields[k] = Field(f.default, description=f.description)
        elif k not in skip:
            fields[k] = f
    return create_model(f"{rec.__name__}Keys", __base__=Schema,
                        **{k: (types.get(k, f.annotation), f) for k, f in fields.items()})
