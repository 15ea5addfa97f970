"""Hostile inputs for ddpsim's six file loaders, its scenario schema and its CLI, as hypothesis
strategies; shared by tests/test_fuzz_inputs.py and benchmarks/fuzz_inputs.py.

Model: every input starts from a real bundled file (scenarios/*.yaml, traces/*.json, the
calibrations of tests/data and reports/, a recommended_plan.json, the zoo's method_error.json,
topology YAMLs in ``load_topology_yaml``'s format) and is mutated structurally (keys dropped,
added, renamed; values swapped for another type, an extreme number, a huge list, a long string,
1,000 levels of nesting, a 5,000-digit integer literal, YAML tags, a recursive alias), then
perhaps at the byte level (truncated, spliced with binary, re-encoded), or replaced whole
(empty, binary, gzip of garbage, a billion-laughs alias bomb), or given as a hostile path (a
folder, a 5,000-character path, a FIFO, a symlink loop). CLI inputs are argv lists of every
verb with hostile flag values; every output flag points into a per-input temporary folder,
which is also the working directory while the CLI runs. :func:`run_case` feeds one input to its
target under a per-input timer and classifies the outcome: ``ok``, ``input_error``, or a
failure of the contract (ddpsim/errors.py): ``escaped`` (another exception, or a CLI traceback),
``hang``, ``bad_message`` (an InputError message of several lines or over
:data:`MAX_MESSAGE_CHARS`), ``bad_exit`` (a CLI exit status other than 0 and 2).
"""

from __future__ import annotations

import contextlib
import copy
import datetime
import gc
import gzip
import io
import json
import math
import os
import shutil
import signal
import tempfile
import time
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable

import yaml
from hypothesis import strategies as st

REPO = Path(__file__).resolve().parents[1]
#: the longest InputError message the contract allows
MAX_MESSAGE_CHARS = 1000
#: outcomes that keep the contract
GOOD = ("ok", "input_error")

# --- seeds: the real files every input starts from ---------------------------------------------

TOPOLOGY_SEEDS = {
    "two-gpus.yaml": """\
name: two-gpus
backend: nccl
nodes:
  - {id: g0, kind: gpu, host: 0, local_rank: 0, device_model: A100, compute_capability: 80, memory_bandwidth_gbps: 2039, sm_count: 108}
  - {id: g1, kind: gpu, host: 0, local_rank: 1, device_model: A100, compute_capability: 80}
  - {id: sw, kind: nvswitch, host: 0, nvls: false}
links:
  - {a: g0, b: sw, bandwidth_gbps: 240, latency_us: 0.6, link_type: nvlink}
  - {a: g1, b: sw, bandwidth_gbps: 240, latency_us: 0.6, link_type: nvlink}
""",
    "two-pcie-hosts.yaml": """\
name: two-pcie-hosts
backend: nccl
cpu_vendor: amd
nodes:
  - {id: h0g0, kind: gpu, host: 0, local_rank: 0}
  - {id: h0sw, kind: pcie_switch, host: 0}
  - {id: h0nic, kind: nic, host: 0}
  - {id: h1g0, kind: gpu, host: 1, local_rank: 0}
  - {id: h1sw, kind: pcie_switch, host: 1}
  - {id: h1nic, kind: nic, host: 1}
  - {id: leaf, kind: leaf}
links:
  - {a: h0g0, b: h0sw, bandwidth_gbps: 24, latency_us: 1}
  - {a: h0nic, b: h0sw, bandwidth_gbps: 24, latency_us: 1}
  - {a: h1g0, b: h1sw, bandwidth_gbps: 24, latency_us: 1}
  - {a: h1nic, b: h1sw, bandwidth_gbps: 24, latency_us: 1}
  - {a: h0nic, b: leaf, bandwidth_gbps: 12.5, latency_us: 0.6, link_type: net}
  - {a: h1nic, b: leaf, bandwidth_gbps: 12.5, latency_us: 0.6, link_type: net}
""",
}

#: a user's hardware catalogue (a GPU and a node layout of their own), the seed of the catalogue target
CATALOGUE_SEEDS = {"my-catalogue.yaml": (REPO / "tests" / "data" / "my-catalogue.yaml").read_text()}

#: bundled files per target; the subset ``quick`` picks the cheap ones (a calibration with a probe
#: costs a fit of ~0.5 s per load), ``cli`` the scenarios whose run takes a second
SEED_FILES = {
    "scenario": ("scenarios/*.yaml",),
    "trace": ("traces/mlp.cpu.json", "traces/gpt2-124m.h100.json", "traces/resnet50.cpu.json", "traces/bert-base.a100.json"),
    "plan": ("reports/cpu-gloo-mlp/recommended_plan.json",),
    "calibration": ("tests/data/calibration-probe-clamped.json", "reports/cpu-gloo-calibration.json",
                    "tests/data/calibration-probe-fit.json", "reports/zoo/lanes/zoo/calibration.json"),
    "method_error": ("reports/zoo/lanes/zoo/method_error.json",),
    "profile": ("tests/data/resnet50_ddp_2xA100_rank0.json.gz", "tests/data/gpt2-124m_ddp_1xH100_rank0.json.gz"),
}
CLI_SEEDS = {"scenario": ("cpu-gloo-mlp.yaml", "default.yaml"), "trace": ("mlp.cpu.json", "gpt2-124m.h100.json"),
             "calibration": ("calibration-probe-clamped.json",)}
QUICK_SEEDS = {"scenario": ("cpu-gloo-mlp.yaml", "default.yaml", "gpt2-1.5b-h100-8n.yaml", "resnet50-a100-2n.yaml"),
               "trace": ("mlp.cpu.json", "gpt2-124m.h100.json"), "calibration": ("calibration-probe-clamped.json",),
               "profile": ("gpt2-124m_ddp_1xH100_rank0.json.gz",)}
FORMAT = {"scenario": "yaml", "topology": "yaml", "trace": "json", "plan": "json", "calibration": "json",
          "method_error": "json", "catalogue": "yaml", "profile": "json"}
#: the scenario keys that name a file, resolved to absolute paths in the seeds
SCENARIO_FILE_KEYS = ("trace", "calibration", "plan")


def _absolute_scenario(doc: dict, where: Path) -> dict:
    """A scenario mapping with its file keys absolute, so that a copy loads from any folder."""
    def fix(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        for base in (REPO, where):
            if (base / value).exists():
                return str(base / value)
        return value
    doc = dict(doc)
    for k in SCENARIO_FILE_KEYS:
        if k in doc:
            doc[k] = fix(doc[k])
    if isinstance(doc.get("cluster"), dict) and str(doc["cluster"].get("topology", "")).endswith((".yaml", ".yml")):
        doc["cluster"] = {**doc["cluster"], "topology": fix(doc["cluster"]["topology"])}
    return doc


@lru_cache(maxsize=None)
def seeds(target: str, subset: str = "all") -> tuple[tuple[str, Any], ...]:
    """``(name, parsed document)`` of the seed files of ``target``: all, quick or cli."""
    if target == "topology":
        return tuple((n, yaml.safe_load(t)) for n, t in TOPOLOGY_SEEDS.items())
    if target == "catalogue":
        return tuple((n, yaml.safe_load(t)) for n, t in CATALOGUE_SEEDS.items())
    if target == "plan" and subset == "all":
        from ddpsim.plan.planner import plan_ddp
        extra = (("ddp-plan(mlp)", plan_ddp(plan_trace()).to_dict()),)
    else:
        extra = ()
    files = sorted(p for pattern in SEED_FILES[target] for p in REPO.glob(pattern))
    chosen = {"quick": QUICK_SEEDS, "cli": CLI_SEEDS}.get(subset, {})
    if target in chosen:
        files = [p for p in files if p.name in chosen[target]]
    out = []
    for p in files:
        if FORMAT[target] == "json":
            text = gzip.decompress(p.read_bytes()).decode() if p.suffix == ".gz" else p.read_text()
            out.append((str(p.relative_to(REPO)), json.loads(text)))
        else:
            out.append((str(p.relative_to(REPO)), _absolute_scenario(yaml.safe_load(p.read_text()), p.parent)))
    assert out, f"no seed files for {target}"
    return tuple(out) + extra


@lru_cache(maxsize=None)
def plan_trace():
    """The trace the plan seeds were made for (bundled MLP)."""
    from ddpsim.trace.records import load_trace
    return load_trace(REPO / "traces" / "mlp.cpu.json")


# --- hostile values ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Raw:
    """A value written as raw text into a file (what ``json.dumps`` / ``yaml.safe_dump`` cannot
    write), and the Python value it stands for when a mapping is validated directly."""
    name: str
    json: str
    yaml: str
    make: Callable[[], Any] = field(compare=False, default=lambda: None)

    def __repr__(self) -> str:
        return f"<{self.name}>"


def _nested(depth: int, leaf: Any, as_dict: bool) -> Any:
    v = leaf
    for _ in range(depth):
        v = {"a": v} if as_dict else [v]
    return v


def _recursive_list() -> list:
    x: list = [1]
    x.append(x)
    return x


RAWS = (
    Raw("int-5000-digits", "1" + "0" * 5000, "1" + "0" * 5000, lambda: 10 ** 5000),
    Raw("list-nested-1000", "[" * 1000 + "]" * 1000, "[" * 1000 + "]" * 1000, lambda: _nested(999, [], False)),
    Raw("map-nested-1000", '{"a": ' * 1000 + "1" + "}" * 1000, "{a: " * 1000 + "1" + "}" * 1000,
        lambda: _nested(1000, 1, True)),
    Raw("float-overflow-literal", "1e999999", "1.0e+999999", lambda: math.inf),
    Raw("yaml-date", '"2001-12-14"', "2001-12-14", lambda: datetime.date(2001, 12, 14)),
    Raw("yaml-binary", '"aGVsbG8="', "!!binary aGVsbG8=", lambda: b"hello"),
    Raw("yaml-set", '["a", "b"]', "!!set {a: null, b: null}", lambda: {"a", "b"}),
    Raw("yaml-python-tag", '"os.getcwd"', "!!python/name:os.getcwd", lambda: os.getcwd),
    Raw("yaml-recursive-alias", "[1]", "&zz [1, *zz]", _recursive_list),
    Raw("yaml-undefined-alias", '"*nope"', "*nope", lambda: "*nope"),
)

LONG = 5000
HOSTILE_SCALARS: tuple[Any, ...] = (
    None, True, False, 0, -1, 1, 2, 1.7, -0.0, 0.5, 1e-300, 1e300, 1e308, -1e308, math.nan, math.inf, -math.inf,
    2 ** 70, -(2 ** 70), 2 ** 63, 2 ** 31, "", " ", "x", "null", "none", "nan", "inf", "-1", "0", "1e308", "\x00",
    "\u00e9\u2713", "\ud800", "/", ".", "..", "/dev/null", "a" * LONG, "x\ny", "{}", "[]", "default", "cpu-gloo",
    "dgx-h100", "float32", "bfloat16", "\u0661", "1_000",
)
HOSTILE_CONTAINERS: tuple[Any, ...] = ([], {}, [None], [[]], {"": None}, {"a": 1}, [1, "x", None], ["a"] * 3)


def hostile_values() -> st.SearchStrategy:
    """Extremes first (hypothesis shrinks to the first branch), then anything small."""
    small = st.one_of(st.integers(), st.floats(), st.text(max_size=20), st.booleans())
    # NOTE: a fresh copy of a container each draw, or a later mutation would change the pool
    return st.one_of(st.sampled_from(HOSTILE_SCALARS), st.sampled_from(HOSTILE_CONTAINERS).map(copy.deepcopy),
                     st.sampled_from(RAWS),
                     small, st.lists(small, max_size=4))


# --- structural mutation of a parsed document -------------------------------------------------

def node_paths(doc: Any, limit: int = 3000) -> list[tuple]:
    """Paths to nodes of ``doc`` (breadth first; of a long list only items 0-2 and the last)."""
    out, queue = [()], [((), doc)]
    while queue and len(out) < limit:
        path, node = queue.pop(0)
        if isinstance(node, dict):
            kids = list(node.items())
        elif isinstance(node, list):
            idx = sorted({*range(min(3, len(node))), len(node) - 1}) if node else []
            kids = [(i, node[i]) for i in idx]
        else:
            continue
        for k, v in kids:
            out.append(path + (k,))
            queue.append((path + (k,), v))
    return out


def path_text(path: tuple) -> str:
    return "".join(f"[{k}]" if isinstance(k, int) else f".{k}" for k in path) or "<root>"


def _get(doc: Any, path: tuple) -> Any:
    for k in path:
        doc = doc[k]
    return doc


RENAMES = (lambda k: k + "s", lambda k: k.upper(), lambda k: k[:-1], lambda k: "", lambda k: " " + k,
           lambda k: k + "\u200b", lambda k: k.replace("_", "-"))
NEW_KEYS = ("zz_unknown", "", "name", "format", "version", "__class__", "1", "null")
OPS = ("set", "drop", "add", "rename", "retype", "repeat", "empty", "wrap")


def _retyped(v: Any) -> list:
    out = [str(v), [v], {"value": v}, None, not v if isinstance(v, bool) else bool(v)]
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        out += [float(v), str(v) + "e0"]
        if isinstance(v, float) and math.isfinite(v):
            out.append(int(v))
    if isinstance(v, str):
        out += [v.encode("utf-8", "surrogatepass").hex(), len(v)]
    return out


@st.composite
def mutation(draw, doc: Any) -> tuple[Any, str]:
    """One structural change of (a copy of) ``doc`` and its one-line description."""
    paths = node_paths(doc)
    path = paths[draw(st.integers(0, len(paths) - 1))]
    op = draw(st.sampled_from(OPS))
    target = _get(doc, path)
    parent, key = (_get(doc, path[:-1]), path[-1]) if path else (None, None)

    def put(value: Any) -> Any:
        if parent is None:
            return value
        parent[key] = value
        return doc
    where = path_text(path)
    if op == "drop" and parent is not None:
        del parent[key]
        return doc, f"drop {where}"
    if op == "rename" and isinstance(parent, dict):
        new = draw(st.sampled_from(RENAMES))(str(key))
        parent[new] = parent.pop(key)
        return doc, f"rename {where} -> {new!r}"
    if op == "add" and isinstance(target, (dict, list)):
        v = draw(hostile_values())
        if isinstance(target, dict):
            k = draw(st.sampled_from(NEW_KEYS + tuple(map(str, target))[:5]))
            target[k] = v
            return doc, f"add {where}.{k} = {v!r:.80}"
        target.append(v)
        return doc, f"append to {where}: {v!r:.80}"
    if op == "retype":
        v = draw(st.sampled_from(_retyped(target)))
        return put(v), f"retype {where} = {v!r:.80}"
    if op == "repeat" and isinstance(target, (list, str)) and target:
        n = draw(st.sampled_from((2, 100, 10_000)))
        cap = 200_000 if isinstance(target, str) else 10_000
        v = (target * n)[:max(cap, len(target))]
        return put(v), f"repeat {where} x{n} ({len(v)} items)"
    if op == "empty" and isinstance(target, (list, dict, str)):
        return put(type(target)()), f"empty {where}"
    if op == "wrap":
        v = draw(st.sampled_from(([target], {"value": target})))
        return put(v), f"wrap {where} in a {type(v).__name__}"
    v = draw(hostile_values())
    return put(v), f"set {where} = {v!r:.80}"


@st.composite
def mutated_doc(draw, target: str, subset: str, max_ops: int = 3) -> tuple[Any, str]:
    """A seed of ``target`` after 1..max_ops structural mutations, and the recipe."""
    name, doc = draw(st.sampled_from(seeds(target, subset)))
    doc = copy.deepcopy(doc)
    steps = []
    for _ in range(draw(st.integers(1, max_ops))):
        doc, step = draw(mutation(doc))
        steps.append(step)
    return doc, f"{name}: " + "; ".join(steps)


def materialize(doc: Any) -> Any:
    """``doc`` with every :class:`Raw` replaced by the Python value it stands for."""
    if isinstance(doc, Raw):
        return doc.make()
    if isinstance(doc, dict):
        return {k: materialize(v) for k, v in doc.items()}
    if isinstance(doc, list):
        return [materialize(v) for v in doc]
    return doc


def dump(doc: Any, fmt: str) -> bytes:
    """``doc`` as JSON or YAML bytes, each :class:`Raw` written as its raw text."""
    raws: list[Raw] = []

    def sub(o: Any) -> Any:
        if isinstance(o, Raw):
            raws.append(o)
            return f"ZZRAW{len(raws) - 1}ZZ"
        if isinstance(o, dict):
            return {k: sub(v) for k, v in o.items()}
        if isinstance(o, list):
            return [sub(v) for v in o]
        return o
    data = sub(doc)
    if fmt == "json":
        text = json.dumps(data, indent=1)
    else:
        text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True, width=4096)
    for i, r in enumerate(raws):
        text = text.replace(f'"ZZRAW{i}ZZ"' if fmt == "json" else f"ZZRAW{i}ZZ", r.json if fmt == "json" else r.yaml)
    return text.encode("utf-8", "surrogatepass")


# --- whole files, byte-level damage, hostile paths ---------------------------------------------

def _laughs() -> bytes:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, 10)]
    return ("\n".join(lines) + "\n").encode()


WHOLE_FILES = {
    "empty": b"", "whitespace": b" \n\t\n", "null": b"null", "list": b"[]", "number": b"42", "string": b'"x"',
    "nul-bytes": b"\0" * 64, "binary": bytes(range(256)) * 4, "gzip-of-garbage": gzip.compress(bytes(range(256)) * 4),
    "non-utf8": b"\xff\xfe\x80 \xc3\x28 name: x", "billion-laughs": _laughs(),
    "list-nested-1000": b"[" * 1000 + b"]" * 1000, "map-nested-1000-yaml": b"{a: " * 1000 + b"1" + b"}" * 1000,
    "python-tag": b"!!python/object/apply:os.getcwd []\n", "huge-line": b"a" * 1_000_000,
    "list-500k": b"[" + b"0," * 500_000 + b"0]", "int-5000-digits": b"1" + b"0" * 5000,
}


@st.composite
def damaged(draw, data: bytes, fmt: str) -> tuple[bytes, str]:
    """``data`` damaged at the byte level, and how."""
    kind = draw(st.sampled_from(("truncate", "splice", "utf16", "bom", "gzip", "dup-key", "alias", "crlf")))
    at = draw(st.integers(0, max(0, len(data) - 1)))
    if kind == "truncate":
        return data[:at], f"truncated at byte {at}"
    if kind == "splice":
        junk = draw(st.sampled_from((b"\xff", b"\x00", b"\xc3", b"\xed\xa0\x80", b"\t", b"{", b"]", b"&x ", b"*x", b"!!", b"%")))
        return data[:at] + junk + data[at:], f"{junk!r} spliced at byte {at}"
    if kind == "utf16":
        return data.decode("utf-8", "surrogatepass").encode("utf-16", "surrogatepass"), "re-encoded as UTF-16"
    if kind == "bom":
        return b"\xef\xbb\xbf" + data, "UTF-8 byte-order mark prepended"
    if kind == "gzip":
        return gzip.compress(data), "gzip of the file under the same name"
    if kind == "crlf":
        return data.replace(b"\n", b"\r"), "line ends replaced by CR"
    if fmt == "json":
        if kind == "dup-key" and data.startswith(b"{"):
            return b'{"format": 1, ' + data[1:], 'duplicate key "format" first'
        return data, "unchanged"
    if kind == "dup-key":
        first = data.split(b":", 1)[0]
        return data + b"\n" + first + b": null\n", f"duplicate key {first[:40]!r} appended"
    return data + b"\nzz_anchor: &zz {a: 1}\nzz_alias: *zz\n", "anchor and alias appended"


PATH_KINDS = ("dir", "missing", "long", "fifo", "nul", "trailing-slash", "symlink-loop", "gz-suffix")


@dataclass(frozen=True)
class FileInput:
    """A hostile file: its bytes, how its path is made (``file`` or one of :data:`PATH_KINDS`),
    its name's suffix, and the recipe."""
    data: bytes
    suffix: str
    recipe: str
    path_kind: str = "file"

    def write(self, folder: Path, stem: str = "input") -> str:
        """Create the input under ``folder``; its path."""
        p = folder / (stem + self.suffix)
        kind = self.path_kind
        if kind == "missing":
            return str(p)
        if kind == "long":
            return str(folder / ("x" * LONG + self.suffix))
        if kind == "nul":
            return str(p) + "\0.json"
        if kind == "dir":
            p.mkdir()
            return str(p)
        if kind == "fifo":
            os.mkfifo(p)
            return str(p)
        if kind == "symlink-loop":
            p.symlink_to(p)
            return str(p)
        if kind == "gz-suffix":
            p = p.with_name(p.name + ".gz")
        p.write_bytes(self.data)
        return str(p) + ("/" if kind == "trailing-slash" else "")


@st.composite
def file_input(draw, target: str, subset: str = "all") -> FileInput:
    """A hostile file for the loader of ``target`` (``subset`` of the seeds: all, quick, cli)."""
    fmt = FORMAT[target]
    suffix = "." + fmt
    mode = draw(st.sampled_from(("mutate", "mutate", "mutate", "damage", "whole", "path")))
    if mode == "whole":
        name = draw(st.sampled_from(sorted(WHOLE_FILES)))
        return FileInput(WHOLE_FILES[name], suffix, f"whole file: {name}")
    if mode == "path":
        kind = draw(st.sampled_from(PATH_KINDS if subset != "cli" else tuple(k for k in PATH_KINDS if k != "nul")))
        name, doc = draw(st.sampled_from(seeds(target, subset)))
        return FileInput(dump(doc, fmt), suffix, f"{name} at a path of kind {kind!r}", kind)
    doc, recipe = draw(mutated_doc(target, subset, max_ops=3 if mode == "mutate" else 1))
    data = dump(doc, fmt)
    if mode == "damage":
        data, how = draw(damaged(data, fmt))
        recipe += f"; then {how}"
    return FileInput(data, suffix, recipe)


# --- running one input ------------------------------------------------------------------------

class Hang(BaseException):
    """The per-input timer fired (a BaseException, so ``except Exception`` does not swallow it)."""


@dataclass
class Outcome:
    kind: str            # ok | input_error | escaped | hang | bad_message | bad_exit
    error: str = ""      # the exception's type name
    message: str = ""    # the InputError line, the exception's text, or the CLI's stderr tail
    exit_code: int | None = None
    seconds: float = 0.0

    def describe(self, recipe: str) -> str:
        return (f"{self.kind} {self.error} after {self.seconds:.2f} s (exit {self.exit_code}): "
                f"{self.message[:300]!r}\n  input: {recipe[:600]}")


#: a hang is ``timeout_s`` of CPU time (busy) or this many times it of wall time (blocked), so
#: that a loaded machine does not turn a slow input into a hang
WALL_FACTOR = 5


@contextlib.contextmanager
def time_limit(seconds: float):
    """Raise :class:`Hang` in the main thread after ``seconds`` of the process's CPU time
    (``ITIMER_PROF``) or ``WALL_FACTOR * seconds`` of wall time (``ITIMER_REAL``)."""
    def fire(signum, frame):  # noqa: ANN001 (signal handler signature)
        if frame is not None and frame.f_code in {getattr(cb, "__code__", None) for cb in gc.callbacks}:
            return  # an exception raised in a gc callback is ignored: the next tick raises it
        raise Hang("CPU" if signum == signal.SIGPROF else "wall")
    old = {sig: signal.signal(sig, fire) for sig in (signal.SIGPROF, signal.SIGALRM)}
    # NOTE: repeating every 0.5 s, so that a tick skipped in a gc callback comes again
    signal.setitimer(signal.ITIMER_PROF, seconds, 0.5)
    signal.setitimer(signal.ITIMER_REAL, seconds * WALL_FACTOR, 0.5)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
        signal.setitimer(signal.ITIMER_REAL, 0)
        for sig, handler in old.items():
            signal.signal(sig, handler)


def guarded(fn: Callable[[], Any], timeout_s: float) -> Outcome:
    """Call ``fn`` under :func:`time_limit` and classify what comes out of it."""
    from ddpsim.errors import InputError

    t0 = time.perf_counter()
    try:
        with time_limit(timeout_s):
            fn()
        out = Outcome("ok")
    except Hang as exc:
        limit = timeout_s if exc.args[0] == "CPU" else timeout_s * WALL_FACTOR
        out = Outcome("hang", "Hang", f"no answer within {limit:g} s of {exc.args[0]} time")
    except InputError as exc:
        msg = _text(exc)
        bad = "\n" in msg or "\r" in msg or len(msg) > MAX_MESSAGE_CHARS
        out = Outcome("bad_message" if bad else "input_error", "InputError" if not bad else "InputError(format)", msg)
    except Exception as exc:  # noqa: BLE001 (the instrument records every escape)
        out = Outcome("escaped", type(exc).__name__, _text(exc))
    except SystemExit as exc:  # from a loader: an escape (the CLI's is handled by run_cli)
        out = Outcome("escaped", "SystemExit", _text(exc))
    out.seconds = time.perf_counter() - t0
    return out


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 (str() of a hostile value can fail itself)
        return f"<{type(exc).__name__}>"


def loaders() -> dict[str, Callable[[str], Any]]:
    """The loader of each file target, called with the input's path."""
    from ddpsim.calibration.loader import load_calibration
    from ddpsim.hardware.catalogue import load_catalogue
    from ddpsim.network.topology import resolve_topology
    from ddpsim.pipeline.method_error import load_method_error
    from ddpsim.pipeline.scenario import load_scenario
    from ddpsim.plan.planner import load_plan
    from ddpsim.trace.records import load_trace

    return {"scenario": load_scenario, "trace": load_trace, "plan": lambda p: load_plan(p, plan_trace()),
            "calibration": load_calibration, "topology": resolve_topology, "method_error": load_method_error,
            "catalogue": load_catalogue, "profile": _read_profile}


def _read_profile(path: str) -> Any:
    """A torch.profiler trace read as ``ddpsim trace --from-profile`` and ``ddpsim compare`` read it
    (one import: compare measures its steps)."""
    from ddpsim.trace.profile import import_profile

    return import_profile(path)


@contextlib.contextmanager
def scratch(root: str | None = None):
    """A fresh temporary folder, removed afterwards (a FIFO or a symlink loop included)."""
    d = Path(tempfile.mkdtemp(prefix="fuzz-", dir=root))
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def run_file(target: str, fi: FileInput, timeout_s: float, root: str | None = None) -> Outcome:
    """Feed ``fi`` to the loader of ``target``."""
    load = loaders()[target]
    with scratch(root) as d:
        path = fi.write(d)
        return guarded(lambda: load(path), timeout_s)


# --- the CLI -------------------------------------------------------------------------------------
# Flag values by the flag's argparse ``dest``: a valid one first (hypothesis shrinks to it), then
# for a file flag the hostile file, then the rest.
# ``{tmp}`` is the input's temporary folder (also the working directory; ``{tmp}/afile`` is a
# plain file in it); ``{<target>}`` is a hostile file of that target (a FileInput).

BIG = "1" + "0" * 5000
COUNT = ("1", "2", "0", "-1", "1.7", "", " ", "x", "1e3", "nan", "inf", str(2 ** 70), BIG, "\u0661", "0x10", "+1", "-0")
NUMBER = ("1", "0.5", "25", "0", "-1", "-0.0", "1e-300", "1e300", "1e308", "1e309", "nan", "inf", "-inf", "", "x",
          str(2 ** 70), BIG, "1,2", "0x1p3")
OUT_FILE = ("{tmp}/out/o.json", "{tmp}", "{tmp}/afile/x.json", "{tmp}/" + "x" * LONG, "{tmp}/o.json/", "{tmp}/n/e/w/o.json")
OUT_DIR = ("{tmp}/out", "{tmp}", "{tmp}/afile", "{tmp}/afile/sub", "{tmp}/" + "x" * LONG)


def _files(target: str, valid: str) -> tuple[str, ...]:
    return (str(REPO / valid), f"{{{target}}}", "{tmp}", "{tmp}/missing.json", "", "{tmp}/afile", "/dev/null",
            "{tmp}/" + "x" * LONG)


POOLS: dict[str, tuple[str, ...]] = {
    "trace": _files("trace", "traces/mlp.cpu.json"), "from_trace": _files("trace", "traces/mlp.cpu.json"),
    "plan": _files("plan", "reports/cpu-gloo-mlp/recommended_plan.json"),
    "calibration": _files("calibration", "tests/data/calibration-probe-clamped.json"),
    "method_error": _files("method_error", "reports/zoo/lanes/zoo/method_error.json"),
    "scenario": ("cpu-gloo-mlp", "{scenario}", "", "nope", "{tmp}", "{tmp}/afile", "a" * LONG, "-"),
    "topology": ("cpu-gloo", "{topology}", "dgx-a100", "pcie", "dgx-h100", "", "x", "{tmp}", "x.yaml", "/", "a" * LONG,
                 "DGX-A100", "{tmp}/afile"),
    "out_dir": OUT_DIR, "out": OUT_FILE, "draw": ("{tmp}/g.png",) + OUT_FILE, "jobs": ("1", "0", "-1", "1.7", "x", ""),
    "sizes": ("1KiB,1MiB", "1", "0", "-1", "", "1.5KiB", "1EiB", "1e308", "nanKiB", "inf", BIG, "1 KiB", "KiB",
              str(2 ** 70), "1,", "x", "1e308GiB"),
    "options": ("gpus_per_node=2", "fabric=fat-tree", "oversubscription=2", "gpus_per_node=0",
                f"gpus_per_node={2 ** 70}", "nic_gbit=nan", "nic_gbit=-1", "=", "x", "x=1", "fabric=", "pcie_gen=7",
                "loopback_gbps=inf", "ranks_per_host=1.7", "leaf_radix=1", "num_spines=0", "memory_gbps=1e308"),
    "caps": ("none,1", "list=0.2+0.5", "", ",", "x", "nan", "-1", "list=", "list=+", BIG, "none,none"),
    "straggler": ("1:1.25", "0:2", "-1:2", "99:2", "1:0", "1:-1", "1:nan", "1:inf", "x", ":", "1:", f"{2 ** 70}:2"),
    "interference": ("1.2:1.5", "2.5:3:bandwidth", "0.5:1", "nan:1", "inf:inf", "1:1:x", "1", "", "1:1:1:1", "1e308:1e308"),
    "jitter": ("trace", "none", "0.1", "0", "-1", "nan", "inf", "1e308", "x", ""),
    "mixed_precision": ("bfloat16:float32", "float16:-:float16", "-", "x", "", "float32:x", "::", "bfloat16:float32:float16:x"),
    "delay_all_reduce_params": ("layers.0.weight", "layers.0.weight,layers.0.bias", "", ",", "nope", "x" * LONG),
    "param_to_hook_all_reduce": ("layers.0.bias", "", "nope", "x" * LONG),
    "model": ("mlp", "zoo:nope", "nope", "", "os:getcwd", "math:pi", "json:loads", "zz_no_module:f", ":", "a:b:c",
              "ddpsim:__version__"),
    "zoo_models": ("tied_lm", "", ",", "nope", "x" * LONG), "models": ("tied_lm", "", ",", "nope", "x" * LONG),
    "input_shape": ("256", "3,224,224", "", "0", "-1", f"1,{2 ** 70}", "x", "1e3", ","),
    "input_dtype": ("float32", "x", "", "int8", "float64"), "launch": ("point", "round", "x", ""),
    "model_set": ("seq_len=8", "n_layer=0", "input_shape=3,224,224", "input_shape=,", "autocast=bf16", "dtype=float64",
                  "input_dtype=int8", "seq_len=", "x", "", "=1"),
    "assume": ("compute_efficiency=0.5", "channels_last=true", "channels_last=2", "min_kernel_s=nan", "seq_len=64",
               "autocast=fp8", "x=1", "", "="),
}
FLOAT_DESTS = ("latency_us", "bandwidth_gbps", "copy_bandwidth_gbps", "compute_efficiency", "memory_efficiency",
               "min_kernel_us", "timeout_s")
#: verbs that run real DDP (minutes): only with --reanalyze, which runs nothing
RUNS_REAL = ("validate",)
#: flags given on every input of a verb (fast and contained), when the verb has them
ALWAYS = {"run": ("--no-plots", "--quiet"), "validate": ("--reanalyze", "--no-plots"),
          "trace": ("--no-hook-overhead",)}
#: flags with a value given on every input of a verb: --jobs keeps worker processes out of the
#: test process; 'run' without a scenario runs the default one (seconds of CPU); 'simulate'
#: needs a network (a topology, or a latency and a bandwidth)
ALWAYS_VALUED = {"run": ("jobs", "scenario"), "sweep": ("jobs",), "simulate": ("topology",)}


def pool(verb: str, action: Any) -> tuple[str, ...]:
    """Hostile values for one flag."""
    if action.choices:
        return tuple(map(str, action.choices)) + ("", "x", "X" * LONG)
    if action.dest in POOLS:
        return POOLS[action.dest]
    return NUMBER if action.dest in FLOAT_DESTS else COUNT


@lru_cache(maxsize=None)
def cli_verbs() -> tuple[tuple[str, tuple], ...]:
    """``(verb, its argparse actions)`` from ddpsim's own parser; empty when it cannot be built
    (the CLI inputs then still run ``main`` and record why)."""
    try:
        from ddpsim.cli.main import build_parser
        parser = build_parser()
    except Exception:  # noqa: BLE001 (a tree mid-edit: the CLI target reports it)
        return ()
    sub = next(a for a in parser._actions if a.choices and isinstance(a.choices, dict))  # noqa: SLF001
    out = []
    for verb, sp in sub.choices.items():
        actions = tuple(a for a in sp._actions if a.dest != "help")  # noqa: SLF001
        real = verb in RUNS_REAL
        if real and not any("--reanalyze" in a.option_strings for a in actions):
            actions = ()  # nothing safe to run: --help only
        out.append((verb, actions))
    return tuple(out)


@dataclass(frozen=True)
class CliInput:
    """An argv with placeholders, the hostile files it names, and the recipe (the argv itself)."""
    argv: tuple[str, ...]
    files: tuple[tuple[str, FileInput], ...] = ()

    @property
    def recipe(self) -> str:
        shown = " ".join(a if len(a) <= 60 else f"{a[:40]}...({len(a)} chars)" for a in self.argv)
        files = "; ".join(f"{{{t}}} = {fi.recipe}" for t, fi in self.files)
        return f"ddpsim {shown}" + (f"  where {files}" if files else "")


TOP_LEVEL = ((), ("--help",), ("--version",), ("nope",), ("-h",), ("",), ("--" + "x" * LONG,))


@st.composite
def cli_input(draw) -> CliInput:
    """A hostile argv for one verb (its flags chosen and valued from :func:`pool`)."""
    verbs = cli_verbs()
    if not verbs or draw(st.integers(0, 19)) == 0:
        return CliInput(draw(st.sampled_from(TOP_LEVEL)))
    verb, actions = draw(st.sampled_from(verbs))
    if not actions or draw(st.integers(0, 29)) == 0:
        return CliInput((verb, "--help"))
    argv: list[str] = [verb] + [f for f in ALWAYS.get(verb, ()) if any(f in a.option_strings for a in actions)]
    rare = max(3, sum(not a.required for a in actions) // 2)  # about two optional flags per input
    for a in actions:
        if a.dest in ("version",) or any(o in ALWAYS.get(verb, ()) for o in a.option_strings):
            continue
        always = a.dest in ALWAYS_VALUED.get(verb, ())
        given_ = draw(st.sampled_from((True, True, True, False))) if a.required else draw(st.integers(0, rare)) == rare
        if not always and not given_:
            continue
        flag = draw(st.sampled_from(a.option_strings)) if a.option_strings else None
        if a.nargs == 0:
            argv.append(flag)
            continue
        values = pool(verb, a)
        for _ in range(draw(st.integers(1, 2)) if type(a).__name__ == "_AppendAction" else 1):
            value = draw(st.one_of(st.just(values[0]), st.sampled_from(values[:2]), st.sampled_from(values)))
            argv += [flag, value] if flag else [value]
    names = {t for t in FORMAT if any(f"{{{t}}}" in x for x in argv)}
    files = tuple((t, draw(file_input(t, "cli"))) for t in sorted(names))
    return CliInput(tuple(argv), files)


def run_cli(ci: CliInput, timeout_s: float, root: str | None = None) -> Outcome:
    """Run ``ddpsim.cli.main.main(argv)`` in a fresh folder (also the working directory), stdout
    strict UTF-8 and stderr backslash-replaced as a terminal's, and check exit status and stderr."""
    with scratch(root) as d:
        (d / "afile").write_text("a plain file\n")
        subst = {"{tmp}": str(d), **{f"{{{t}}}": fi.write(d, t) for t, fi in ci.files}}
        argv = [_substituted(a, subst) for a in ci.argv]
        err = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="backslashreplace")
        code: list[Any] = [None]

        def call() -> None:
            from ddpsim.cli.main import main
            out = io.TextIOWrapper(io.BytesIO(), encoding="utf-8", errors="strict")
            try:
                with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
                    code[0] = main(argv)
            except SystemExit as exc:
                code[0] = exc.code
        cwd = os.getcwd()
        os.chdir(d)
        try:
            outcome = guarded(call, timeout_s)
        finally:
            os.chdir(cwd)
        err.seek(0)
        return _cli_verdict(outcome, code[0], err.buffer.getvalue().decode("utf-8", "replace"))


def _substituted(arg: str, subst: dict[str, str]) -> str:
    for k, v in subst.items():
        arg = arg.replace(k, v)
    return arg


def _cli_verdict(outcome: Outcome, code: Any, stderr: str) -> Outcome:
    """The CLI's contract: exit 0 or 2, no traceback, exit 2 with one bounded ``error:`` line."""
    rc = 0 if code is None else code if isinstance(code, int) else 1
    outcome.exit_code = rc
    if outcome.kind != "ok":  # an exception escaped main: a real run prints a traceback
        return outcome
    errors = [ln for ln in stderr.splitlines() if ln.startswith("ddpsim") and ": error:" in ln]
    tail = stderr.strip()[-300:]
    if "Traceback (most recent call last)" in stderr:
        return Outcome("escaped", "Traceback in stderr", tail, rc, outcome.seconds)
    if rc not in (0, 2):
        return Outcome("bad_exit", f"exit {rc}", tail, rc, outcome.seconds)
    if rc == 2 and not errors:
        return Outcome("bad_message", "exit 2 without an error line", tail, rc, outcome.seconds)
    if any(len(ln) > MAX_MESSAGE_CHARS + len("ddpsim: error: ") for ln in errors):
        return Outcome("bad_message", "error line too long", max(errors, key=len)[:300], rc, outcome.seconds)
    return Outcome("input_error" if rc == 2 else "ok", "", errors[-1] if errors else "", rc, outcome.seconds)


# --- one entry point per target -------------------------------------------------------------------

TARGETS = ("scenario", "scenario_schema", "trace", "plan", "calibration", "topology", "method_error", "catalogue", "profile",
           "cli")


def inputs(target: str, quick: bool = False) -> st.SearchStrategy:
    """The strategy of hostile inputs of ``target``."""
    if target == "cli":
        return cli_input()
    if target == "scenario_schema":
        return mutated_doc("scenario", "quick" if quick else "all")
    return file_input(target, "quick" if quick else "all")


def recipe(target: str, case: Any) -> str:
    return case[1] if target == "scenario_schema" else case.recipe


def run_case(target: str, case: Any, timeout_s: float, root: str | None = None) -> Outcome:
    """Feed one input (drawn from :func:`inputs`) to its target; a scenario_schema input is a
    mutated mapping, validated (materialized) by ``scenario_from_dict``."""
    if target == "cli":
        return run_cli(case, timeout_s, root)
    if target == "scenario_schema":
        from ddpsim.pipeline.scenario import scenario_from_dict
        value = materialize(case[0])
        return guarded(lambda: scenario_from_dict(value, source="fuzz"), timeout_s)
    return run_file(target, case, timeout_s, root)


def warm_up() -> None:
    """Import what the targets import (torch, matplotlib, pandas) so no input pays for it."""
    import importlib
    for mod in ("torch", "matplotlib.pyplot", "pandas", "simpy", "networkx", "scipy.optimize"):
        with contextlib.suppress(Exception):
            importlib.import_module(mod)
    with contextlib.suppress(Exception):
        loaders()
        cli_verbs()
