"""The report files a rerun keeps instead of drawing them again. A report's PNGs and Perfetto
traces are functions of its points (their resume keys, :mod:`ddpsim.pipeline.fingerprint`), the
scenario's name and the plotting libraries' versions: :class:`KeptFiles` records under one key of
those (:func:`report_key`) each file's sha256 and what it was drawn from in
``<report>/points/report.json``; a rerun under the same key keeps a file still on disk with those
bytes. Nothing is kept without a key (a run with a stand-in engine).
"""

from __future__ import annotations

import hashlib
import json
from importlib import metadata
from pathlib import Path
from typing import Any, Sequence

from ddpsim.io import write_text_atomic

KEPT_FILE = "report.json"
KEPT_FORMAT = "ddpsim-report-files"
KEPT_VERSION = 1
#: the libraries whose versions the bytes of a figure depend on
_LIBRARIES = ("matplotlib", "Pillow", "numpy")


def report_key(points_key: str | None, name: str) -> str | None:
    """The key of a report's files from ``points_key`` (:func:`ddpsim.pipeline.run.kept_key`), the
    scenario's ``name`` and the plotting libraries' versions; None without ``points_key``."""
    if points_key is None:
        return None
    versions = {lib: metadata.version(lib) for lib in _LIBRARIES}  # dependencies (Pillow: matplotlib's)
    blob = json.dumps({"format": KEPT_FORMAT, "version": KEPT_VERSION, "points": points_key, "name": name,
                       "libraries": versions}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class KeptFiles:
    """The files of the report folder ``rdir`` kept by its last run under ``key`` (module docstring)."""

    def __init__(self, rdir: Path, key: str | None) -> None:
        self.rdir, self.key = Path(rdir), key
        self.path = self.rdir / "points" / KEPT_FILE
        self.old = self._read() if key is not None else {}
        self.new: dict[str, Any] = {}

    def _read(self) -> dict[str, Any]:
        try:
            d = json.loads(self.path.read_text())
            if d.get("format") == KEPT_FORMAT and d.get("version") == KEPT_VERSION and d.get("key") == self.key \
                    and isinstance(d.get("entries"), dict):
                return d["entries"]
        except (OSError, ValueError, AttributeError):
            pass
        return {}

    def get(self, name: str, what: Any) -> dict[str, Any] | None:
        """Entry ``name`` (``{"files": {name: sha256}, "data": ...}``) if written from ``what`` and its
        files are in the folder with those bytes; else None."""
        e = self.old.get(name)
        if self.key is None or not isinstance(e, dict) or e.get("what") != _plain(what):
            return None
        try:
            if not e["files"] or any(_sha256(self.rdir / f) != h for f, h in e["files"].items()):
                return None
        except (OSError, KeyError, AttributeError, TypeError):
            return None
        self.new[name] = e
        return e

    def put(self, name: str, what: Any, paths: Sequence[Path], data: Any = None) -> None:
        """Record entry ``name``: its files just written in the folder, from ``what``, with ``data``."""
        if self.key is not None:
            self.new[name] = {"what": _plain(what), "files": {p.name: _sha256(p) for p in paths}, "data": data}

    def save(self) -> None:
        """Write the entries got or put by this run (only those) under the key."""
        if self.key is not None and self.path.parent.is_dir():
            doc = {"format": KEPT_FORMAT, "version": KEPT_VERSION, "key": self.key, "entries": self.new}
            write_text_atomic(self.path, json.dumps(doc, sort_keys=True) + "\n")


def _plain(x: Any) -> Any:
    """``x`` as JSON reads it back (tuples as lists), so that a kept ``what`` compares equal."""
    return json.loads(json.dumps(x))
