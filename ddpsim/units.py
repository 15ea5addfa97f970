"""Units and their conversions, in one place. Internal time unit everywhere in ddpsim: **seconds,
as float** (names end in ``_s``). Sizes are integer **bytes** (``_bytes``). Bandwidth is **bytes
per second** inside the package (``_bytes_per_s``); GB/s (1e9 B/s, as NCCL and nccl-tests print)
only at the edges (``_gbps``). DDP's ``bucket_cap_mb`` is in MiB (2**20 bytes), as PyTorch has it.
"""

from __future__ import annotations

import math
import re
from typing import Any

from ddpsim.errors import InputError, require, shorten

MIB = 1024 * 1024
KIB = 1024

#: DDP's constants (torch/csrc/distributed/c10d/reducer.hpp, torch/nn/parallel/distributed.py)
DEFAULT_FIRST_BUCKET_BYTES = 1 * MIB
DEFAULT_BUCKET_CAP_MB = 25
SIZE_MAX = 9223372036854775807  # sys.maxsize, the "one bucket per dtype" limit

#: element size in bytes of every dtype name a trace may hold (torch's names without "torch.")
DTYPE_SIZE_BYTES = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "complex64": 8,
    "complex128": 16,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "bool": 1,
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
}

_SIZE_RE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([KMGT]i?B|B|)\s*$", re.IGNORECASE)
_SIZE_MULT = {"": 1, "b": 1, "kib": KIB, "mib": MIB, "gib": 1024**3, "tib": 1024**4,
              "kb": 1000, "mb": 1000**2, "gb": 1000**3, "tb": 1000**4}


#: the most hosts of a cluster anywhere (scenario, topology, flags): 32,768 GPUs at 8 per host;
#: building NCCL's model of a DGX H100 cluster that size takes about a minute
MAX_NODES = 4096
#: the most ranks of a world
MAX_WORLD_SIZE = 1 << 20
#: the most iterations simulated, captured or run (DDP's steady state starts at iteration 3)
MAX_ITERATIONS = 10_000
#: the largest seed anywhere (a scenario's jitter, a capture's weights and inputs): a signed 64-bit integer
MAX_SEED = 2**63 - 1
#: the most torch CPU threads a capture or a validated rank may ask for
MAX_THREADS = 4096
#: the most samples per rank (a batch size) and the longest dimension of an input shape
MAX_BATCH_SIZE = 1 << 20
#: the longest sequence a traced model takes (trace's --set seq_len)
MAX_SEQ_LEN = 1 << 20
#: the most blocks a traced model has (--set n_layer, --derive-depth-from)
MAX_LAYERS = 10_000
#: the most runs per validated point (validate --repeats)
MAX_REPEATS = 1000
#: the most worker processes of a sweep or explore (--jobs)
MAX_JOBS = 1024
#: the largest message a collective is timed at (collectives --sizes)
MAX_SIZE_BYTES = 1024**4
#: the longest limit of one executor run, seconds (validate --timeout-s): a week
MAX_TIMEOUT_S = 7 * 86400


def parse_size_bytes(text: str | int, field: str = "size") -> int:
    """``"1KiB"`` -> 1024, ``"4MiB"`` -> 4194304, ``"1MB"`` -> 1000000, ``"512"`` -> 512."""
    m = _SIZE_RE.match(str(text))
    if not m:
        raise InputError(f"{field}: {shorten(text)} is not a size; expected a number with an optional unit B, KiB, MiB, GiB, KB, MB or GB")
    out = float(m.group(1)) * _SIZE_MULT[m.group(2).lower()]
    if not math.isfinite(out) or out <= 0 or out != int(out):
        raise InputError(f"{field}: {shorten(text)} is not a positive whole number of bytes")
    return int(out)


def format_size(size_bytes: float) -> str:
    """Human-readable binary size: 1048576 -> '1 MiB', 1536 -> '1.5 KiB'."""
    for unit, mult in (("GiB", 1024**3), ("MiB", MIB), ("KiB", KIB)):
        if size_bytes >= mult:
            return f"{size_bytes / mult:.4g} {unit}"
    return f"{int(size_bytes)} B"


def mb_to_bytes(bucket_cap_mb: float) -> int:
    """DDP's conversion: ``int(bucket_cap_mb * 1024 * 1024)``."""
    return int(bucket_cap_mb * MIB)


def parse_cap_value(item: str, flag: str, expected: str, *, allow_not_given: bool = True) -> float | None:
    """One ``bucket_cap_mb`` value in MiB: ``"25"`` -> 25, ``"0.5"`` -> 0.5; ``none``/``null``/``default``
    -> None (not given: DDP's default) when ``allow_not_given``; InputError unless a finite number > 0."""
    text = str(item).strip()
    if allow_not_given and text.lower() in ("none", "null", "default"):
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    require(math.isfinite(value) and value > 0, flag, item, expected)
    return int(value) if value.is_integer() else value


CAP_LIST_EXPECTED = "a comma list of numbers of MiB > 0, e.g. 1,4,8"


def parse_cap_list(text: Any, flag: str, sep: str = ",", expected: str = CAP_LIST_EXPECTED) -> tuple[float, ...] | None:
    """``"1,4,8"`` -> (1, 4, 8) for a ``bucket_cap_mb_list`` flag (``sep`` between the limits); None stays None;
    InputError for an empty text, an empty item (``1,,2``) or an item that is not a finite number > 0."""
    if text is None:
        return None
    items = str(text).split(sep)
    try:
        values = tuple(parse_cap_value(x, flag, expected, allow_not_given=False) for x in items if x.strip())
    except InputError:
        values = ()
    require(bool(values) and len(values) == len(items), flag, text, expected)
    return values


LIST_POINT_PREFIX = "list="


def parse_caps(text: str, flag: str = "--caps") -> list[float | tuple[float, ...] | None]:
    """``none,5,list=1+4`` -> [None, 5, (1, 4)]: per item a ``bucket_cap_mb`` (``none`` = not given) or a
    ``bucket_cap_mb_list`` spelt as its point id; InputError for a bad or empty item, or a point named twice."""
    expected = "a comma list of MiB > 0, 'none', or list=X+Y+... (a bucket_cap_mb_list)"
    caps: list[float | tuple[float, ...] | None] = []
    for item in str(text).split(","):
        point = item.strip()
        if not point.startswith(LIST_POINT_PREFIX):
            caps.append(parse_cap_value(point, flag, expected))
            continue
        try:
            caps.append(parse_cap_list(point[len(LIST_POINT_PREFIX):], flag, sep="+", expected=expected))
        except InputError:
            raise InputError(f"{flag}: {shorten(item)} is not accepted; expected {expected}") from None
    if len(set(caps)) != len(caps):
        raise InputError(f"{flag}: {shorten(text)} names a point twice; expected distinct bucket_cap_mb values")
    return caps
