"""Reading and writing ddpsim's files: :func:`read_json` and :func:`read_yaml` turn any file a
user names into data or one :class:`~ddpsim.errors.InputError` line (missing, a folder, not
UTF-8, too large, too deep, YAML aliases or duplicate keys); every file is written atomically;
a report's floats keep :data:`FLOAT_DIGITS` significant digits, so that the last bits that
differ between numpy and libm builds never reach the bytes.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import math
import os
import tempfile
from pathlib import Path
from typing import Any

from ddpsim.errors import InputError, cut, shorten

#: deepest nesting of mappings / lists a document may have (ddpsim's own formats need < 10)
MAX_DEPTH = 64
#: largest YAML file read: scenarios and topologies are a few kB, and PyYAML's pure-Python
#: parser takes seconds per MB
MAX_YAML_BYTES = 256 << 10
#: largest JSON file read, after gunzip (a trace of a 10,000-tensor model is a few MB)
MAX_JSON_BYTES = 1 << 30
#: significant digits of every float a report writes (JSON and CSV)
FLOAT_DIGITS = 9


def read_bytes(path: str | Path, field: str, expected: str, max_bytes: int) -> bytes:
    """The bytes of ``path`` (gunzipped when it ends in ``.gz``), or InputError naming ``field``."""
    p = Path(path)
    if not os.path.isfile(p):
        raise InputError(f"{field}: {shorten(str(path))} does not exist or is not a file; expected {expected}")
    try:
        with (gzip.open(p, "rb") if p.suffix == ".gz" else open(p, "rb")) as f:
            data = f.read(max_bytes + 1)
    except (OSError, ValueError, EOFError, gzip.BadGzipFile) as exc:
        why = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
        raise InputError(f"{field}: {shorten(str(path))} cannot be read ({why}); expected {expected}") from None
    if len(data) > max_bytes:
        raise InputError(f"{field}: {shorten(str(path))} is larger than {max_bytes >> 20} MiB; expected {expected}")
    return data


def _text(data: bytes, path: str | Path, field: str, expected: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{field}: {shorten(str(path))} is not UTF-8 text (byte {exc.start}); expected {expected}") from None


def _depth(obj: Any) -> int:
    """Nesting depth of parsed data, iteratively (no recursion on hostile input)."""
    deepest, stack = 0, [(obj, 1)]
    while stack:
        o, d = stack.pop()
        if isinstance(o, dict):
            o = list(o.values())
        if isinstance(o, list):
            deepest = max(deepest, d)
            if d > MAX_DEPTH:
                return d
            stack.extend((x, d + 1) for x in o if isinstance(x, (dict, list)))
    return deepest


def read_json(path: str | Path, field: str, expected: str, max_bytes: int = MAX_JSON_BYTES) -> Any:
    """The parsed JSON (or ``.json.gz``) document at ``path``; every failure one InputError line naming ``field``."""
    text = _text(read_bytes(path, field, expected, max_bytes), path, field, expected)
    field = f"{field} {shorten(str(path))}"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{field}: not valid JSON ({exc.msg} at line {exc.lineno}); expected {expected}") from None
    except RecursionError:
        raise InputError(f"{field}: nested deeper than {MAX_DEPTH} levels; expected {expected}") from None
    except ValueError as exc:  # an integer literal longer than Python's int limit
        raise InputError(f"{field}: not accepted ({cut(str(exc), 120)}); expected {expected}") from None
    if _depth(data) > MAX_DEPTH:
        raise InputError(f"{field}: nested deeper than {MAX_DEPTH} levels; expected {expected}")
    return data


def _yaml_loader() -> type:
    import yaml

    class Loader(yaml.SafeLoader):
        """PyYAML's safe loader without anchors / aliases, duplicate keys or deep nesting."""

        depth = 0

        def compose_node(self, parent, index):  # noqa: ANN001 (PyYAML's signature)
            if self.check_event(yaml.AliasEvent):
                mark = self.peek_event().start_mark
                raise yaml.constructor.ConstructorError(None, None, "anchors and aliases are not accepted", mark)
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise yaml.constructor.ConstructorError(None, None, f"nested deeper than {MAX_DEPTH} levels",
                                                        self.peek_event().start_mark)
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1

        def construct_mapping(self, node, deep=False):  # noqa: ANN001
            seen = set()
            for key_node, _ in node.value:
                key = self.construct_object(key_node, deep=True)
                try:
                    dup = key in seen
                    seen.add(key)
                except TypeError:
                    raise yaml.constructor.ConstructorError(None, None, "a mapping key must be a scalar",
                                                            key_node.start_mark) from None
                if dup:
                    raise yaml.constructor.ConstructorError(None, None, f"duplicate key {shorten(key, 40)}",
                                                            key_node.start_mark)
            return super().construct_mapping(node, deep=deep)

    return Loader


def read_yaml(path: str | Path, field: str, expected: str, max_bytes: int = MAX_YAML_BYTES) -> Any:
    """The parsed YAML document at ``path`` (:func:`_yaml_loader`); every failure one InputError line naming ``field``."""
    import yaml

    text = _text(read_bytes(path, field, expected, max_bytes), path, field, expected)
    field = f"{field} {shorten(str(path))}"
    try:
        return yaml.load(text, Loader=_yaml_loader())  # noqa: S506 (a SafeLoader subclass)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{field}: not valid YAML{where} ({cut(str(problem), 120)}); expected {expected}") from None
    except RecursionError:
        raise InputError(f"{field}: nested deeper than {MAX_DEPTH} levels; expected {expected}") from None
    except ValueError as exc:  # an integer literal longer than Python's int limit
        raise InputError(f"{field}: not accepted ({cut(str(exc), 120)}); expected {expected}") from None


def ensure_dir(path: str | Path, field: str = "output folder") -> Path:
    """Create ``path`` (and parents); InputError naming the path if it cannot be written."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{field}: {shorten(str(p))} cannot be created ({exc.strerror}); expected a writable folder") from None
    if not os.access(p, os.W_OK):
        raise InputError(f"{field}: {shorten(str(p))} is not writable; expected a writable folder")
    return p


def write_bytes_atomic(path: str | Path, data: bytes, field: str = "output file") -> Path:
    """Write ``data`` to ``path`` via a temp file in the same folder and ``os.replace``."""
    p = Path(path)
    try:
        folder = p.is_dir()
    except (OSError, ValueError) as exc:
        raise InputError(f"{field}: {shorten(str(p))} cannot be written ({exc}); expected a file path") from None
    if folder:
        raise InputError(f"{field}: {shorten(str(p))} is a folder; expected a file path")
    ensure_dir(p.parent)
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name[:100]}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        # NOTE: mkstemp creates 0600; give the file the mode a plain open() would (0666 & ~umask)
        mask = os.umask(0)
        os.umask(mask)
        os.chmod(tmp, 0o666 & ~mask)
        os.replace(tmp, p)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return p


def write_text_atomic(path: str | Path, text: str, field: str = "output file") -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"), field)


def rounded(obj: Any) -> Any:
    """``obj`` with every finite float rounded to :data:`FLOAT_DIGITS` significant digits
    (mappings and sequences followed; tuples become lists, as JSON writes them)."""
    if isinstance(obj, float):
        return float(f"{obj:.{FLOAT_DIGITS}g}") if math.isfinite(obj) else obj
    if isinstance(obj, dict):
        return {k: rounded(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [rounded(v) for v in obj]
    return obj


def json_text(obj: Any, **dumps_kw: Any) -> str:
    """A report's JSON document: ``json.dumps`` of :func:`rounded` ``obj``, one final newline."""
    return json.dumps(rounded(obj), **dumps_kw) + "\n"


def file_id(point_id: str) -> str:
    """A point id as used in file names (point files, timelines, traces): ``cap=25,hook=fp16`` ->
    ``cap-25_hook-fp16``."""
    return point_id.replace("=", "-").replace(",", "_")
