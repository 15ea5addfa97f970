"""Reading a torch.profiler (Kineto) Chrome-trace JSON in one streaming pass: the format of
pytorch/kineto ``libkineto/src/output_json.cpp`` (a header and ``traceEvents`` of ``ph: "X"``
events in microseconds), parsed with ijson one event at a time into compact records; a
``.json.gz`` is decompressed as it is read. A file whose integers leave the signed 64-bit range
(Kineto's ``"Comms Id"`` hashes), which yajl refuses, is read again through
:func:`widen_integers`."""

from __future__ import annotations

import contextlib
import gzip
import io
import re
import sys
import zlib
from dataclasses import dataclass, field
from os.path import isfile
from pathlib import Path
from typing import IO, Any

import ijson

from ddpsim.errors import InputError, cut, require, shorten
from ddpsim.trace.profile.kernel_kinds import COMM, kernel_kind

#: the event categories kept, by what they are, as torch >= 1.9 names them and as torch 1.8's
#: Kineto did (``Operator``, ``Runtime``, ``Kernel``, ``Memcpy``, ``Memset``; compared lower-case)
CPU_CATS = frozenset({"cpu_op", "user_annotation", "python_function", "operator"})
RUNTIME_CATS = frozenset({"cuda_runtime", "cuda_driver", "runtime"})
GPU_CATS = frozenset({"kernel", "gpu_memcpy", "gpu_memset", "memcpy", "memset"})
#: the ``args`` of a CPU op or kernel that the import reads
KEPT_ARGS = ("In msg nelems", "dtype", "Group size", "Collective name", "Input Dims", "Input type", "Process Group Name")


@dataclass(slots=True, kw_only=True)
class Event:
    """A ``ph: "X"`` event of the trace (``ts``/``dur`` in microseconds, the profile's clock)."""

    name: str
    ts: float
    dur: float

    @property
    def end(self) -> float:
        return self.ts + self.dur


@dataclass(slots=True, kw_only=True)
class CpuOp(Event):
    """A CPU op or annotation."""

    cat: str
    tid: Any
    ext_id: int | None
    args: dict[str, Any] | None


@dataclass(slots=True, kw_only=True)
class RuntimeCall(Event):
    """A CUDA runtime/driver call on the CPU (``correlation`` ties it to the GPU work it launched)."""

    tid: Any
    correlation: int | None


@dataclass(slots=True, kw_only=True)
class GpuOp(Event):
    """A kernel, memcpy or memset on the GPU timeline."""

    cat: str
    stream: Any
    device: int | None
    correlation: int | None
    ext_id: int | None
    grid: tuple[int, ...] | None
    block: tuple[int, ...] | None
    args: dict[str, Any] | None

    @property
    def is_nccl(self) -> bool:
        """A communication kernel (NCCL's or RCCL's: :func:`~ddpsim.trace.profile.kernel_kinds.kernel_kind`)."""
        return kernel_kind(self.name) == COMM


@dataclass
class KinetoProfile:
    """The kept parts of one profile."""

    path: str
    device_properties: list[dict[str, Any]] = field(default_factory=list)
    distributed_info: dict[str, Any] = field(default_factory=dict)
    cpu_ops: list[CpuOp] = field(default_factory=list)
    runtime: list[RuntimeCall] = field(default_factory=list)
    gpu: list[GpuOp] = field(default_factory=list)


#: a JSON string (skipped whole) or an integer literal of 19 digits or more outside one
_TOKEN = re.compile(rb'"(?:[^"\\]|\\.)*"|(?<![\w.+-])-?\d{19,}(?![\d.eE])')
INT64 = 2 ** 63


def widen_integers(data: bytes) -> bytes:
    """JSON text ``data`` with each integer literal outside the signed 64-bit range made a float
    literal (``18446744073709551615`` -> ``18446744073709551615.0``), for yajl; strings and every
    other number unchanged."""
    def widen(m: re.Match[bytes]) -> bytes:
        tok = m.group(0)
        return tok if tok[:1] == b'"' or -INT64 <= int(tok) < INT64 else tok + b".0"
    return _TOKEN.sub(widen, data)


def _open(path: Path, wide: bool = False) -> IO[bytes]:
    with open(path, "rb") as f:
        gz = f.read(2) == b"\x1f\x8b"
    raw = gzip.open(path, "rb") if gz else open(path, "rb")
    if not wide:
        return raw
    with raw:
        return io.BytesIO(widen_integers(raw.read()))


def _source(path: str) -> str:
    return f"profile {cut(path, 200)}"


def int_or_none(value: Any) -> int | None:
    """``value`` if it is an integer (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _num(value: Any) -> float | None:
    """``value`` as a float where it is a number (or a numeric string), else None."""
    with contextlib.suppress(TypeError, ValueError):
        return None if isinstance(value, bool) else float(value)
    return None


def int_dims(value: Any) -> tuple[int, ...] | None:
    """``value`` as a tuple if it is a list of integers (dims, a launch grid), else None."""
    return tuple(value) if isinstance(value, list) and all(int_or_none(v) is not None for v in value) else None


def _kept_args(args: dict[str, Any]) -> dict[str, Any] | None:
    return {k: args[k] for k in KEPT_ARGS if k in args} or None


def _thread(value: Any, field: str, prof: KinetoProfile, name: str) -> Any:
    """A thread or stream id as the trace gives it (an integer or a string; absent: None);
    InputError otherwise."""
    require(value is None or isinstance(value, (int, float, str)),
            f"{_source(prof.path)}: event {cut(name, 80)!r}: {field}", value,
            "an integer or a string (the Chrome trace format's thread id)")
    return value


def _keep(event: Any, prof: KinetoProfile, intern: dict[str, str]) -> None:
    """Append the compact record of one trace event, if it is of a kind the import uses."""
    if not isinstance(event, dict) or event.get("ph") != "X":
        return
    cat, name = event.get("cat"), event.get("name")
    ts, dur = _num(event.get("ts")), _num(event.get("dur"))
    if not isinstance(cat, str) or not isinstance(name, str) or ts is None or dur is None:
        return
    name = intern.setdefault(name, sys.intern(name) if len(name) < 200 else name)
    args = event.get("args") if isinstance(event.get("args"), dict) else {}
    cat = cat.lower()
    ext_id = int_or_none(args.get("External id", args.get("external id")))
    if cat in CPU_CATS:
        prof.cpu_ops.append(CpuOp(name=name, cat=cat, ts=ts, dur=dur, tid=_thread(event.get("tid"), "tid", prof, name),
                                  ext_id=ext_id, args=_kept_args(args)))
    elif cat in RUNTIME_CATS:
        prof.runtime.append(RuntimeCall(name=name, ts=ts, dur=dur, tid=_thread(event.get("tid"), "tid", prof, name),
                                        correlation=int_or_none(args.get("correlation"))))
    elif cat in GPU_CATS:
        stream = _thread(args.get("stream", event.get("tid")), "stream", prof, name)
        prof.gpu.append(GpuOp(name=name, cat=cat, ts=ts, dur=dur, stream=stream,
                              device=int_or_none(args.get("device")), correlation=int_or_none(args.get("correlation")),
                              ext_id=ext_id, grid=int_dims(args.get("grid")),
                              block=int_dims(args.get("block")),
                              args=_kept_args(args) if kernel_kind(name) == COMM else None))


HEADER_KEYS = ("deviceProperties", "distributedInfo")


def _header(path: Path, prof: KinetoProfile, wide: bool = False) -> None:
    """``deviceProperties`` and ``distributedInfo``: read up to where ``traceEvents`` starts (the
    top of the file, where Kineto writes them); a key written after the events is then found by
    a scan of its own. InputError: no ``traceEvents`` list (an empty one is fine: the import says
    what is missing)."""
    builders: dict[str, Any] = {}
    with _open(path, wide) as f:
        for prefix, event, value in ijson.parse(f, use_float=True):
            if prefix == "traceEvents" and event == "start_array":
                break
            top = prefix.split(".", 1)[0]
            if top in HEADER_KEYS:
                builders.setdefault(top, ijson.ObjectBuilder()).event(event, value)
        else:
            raise InputError(f"{_source(prof.path)}: no traceEvents list; "
                             "expected the Chrome/Kineto JSON torch.profiler writes")
    header = {k: b.value for k, b in builders.items()}
    for key in HEADER_KEYS:
        if key not in header:
            with _open(path, wide) as f:
                header[key] = next(ijson.items(f, key, use_float=True), None)
    if isinstance(header["deviceProperties"], list):
        prof.device_properties = [d for d in header["deviceProperties"] if isinstance(d, dict)]
    if isinstance(header["distributedInfo"], dict):
        prof.distributed_info = header["distributedInfo"]


def read_profile(path: str | Path) -> KinetoProfile:
    """The kept events and header of the profile at ``path``; InputError: missing, bad gzip, not
    JSON, truncated, or no ``traceEvents`` list."""
    p = Path(path)
    if not isfile(p):  # False, not OSError, for a name the OS refuses (too long, NUL)
        raise InputError(f"{_source(str(path))}: no such file; expected a torch.profiler trace (.json or .json.gz)")
    try:
        try:
            return _read(p, str(path), wide=False)
        except ijson.JSONError as exc:
            if "integer overflow" not in str(exc):  # yajl refused an integer outside the signed 64-bit range
                raise
        return _read(p, str(path), wide=True)
    except InputError:
        raise
    except (ijson.JSONError, gzip.BadGzipFile, zlib.error, EOFError, UnicodeDecodeError, ValueError) as exc:
        src, what = _source(str(path)), f"{type(exc).__name__}: {shorten(str(exc))}"
        if isinstance(exc, (gzip.BadGzipFile, zlib.error, EOFError)):
            raise InputError(f"{src}: not a readable gzip stream ({what}); expected a "
                             "torch.profiler trace (.json or .json.gz), complete") from None
        low = str(exc).lower()
        if isinstance(exc, ijson.IncompleteJSONError) and ("incomplete" in low or "premature eof" in low):
            raise InputError(f"{src}: the JSON ends early (truncated); "
                             "expected a complete torch.profiler trace") from None
        raise InputError(f"{src}: not JSON ({what}); "
                         "expected the Chrome/Kineto JSON torch.profiler writes") from None
    except OSError as exc:
        raise InputError(f"{_source(str(path))}: cannot be read ({type(exc).__name__}: {shorten(str(exc))}); "
                         "expected a readable torch.profiler trace") from None


def _read(p: Path, path: str, *, wide: bool) -> KinetoProfile:
    prof = KinetoProfile(path=path)
    intern: dict[str, str] = {}
    with _open(p, wide) as f:
        # use_float: numbers as float, not Decimal (the C backend's fast path)
        for event in ijson.items(f, "traceEvents.item", use_float=True):
            _keep(event, prof, intern)
    _header(p, prof, wide)
    attach_comms(prof)
    return prof


#: the ``record_param_comms`` args a kernel takes from its launch when it lacks them
COMM_ARGS = ("Collective name", "In msg nelems", "dtype", "Group size")


def attach_comms(prof: KinetoProfile) -> None:
    """Give each communication kernel without a ``Collective name`` the :data:`COMM_ARGS` of the
    ``record_param_comms`` op that launched it: the op of the kernel's External id, else the
    innermost such op that holds the kernel's launch call on its thread (ROCm profiles)."""
    comms = [o for o in prof.cpu_ops if o.name == "record_param_comms" and o.args]
    by_ext = {o.ext_id: o for o in comms if o.ext_id is not None}
    calls = {r.correlation: r for r in prof.runtime if r.correlation is not None}
    for g in prof.gpu:
        if not g.is_nccl or (g.args or {}).get("Collective name"):
            continue
        op: CpuOp | None = by_ext.get(g.ext_id) if g.ext_id is not None else None
        call = calls.get(g.correlation)
        if op is None and call is not None:
            holders = [o for o in comms if o.tid == call.tid and o.ts <= call.ts <= o.end]
            op = min(holders, key=lambda o: o.dur, default=None)
        if op is not None:
            g.args = {**{k: op.args[k] for k in COMM_ARGS if k in op.args}, **(g.args or {})}

