"""The report files a rerun keeps instead of drawing them again. A report's PNGs and Perfetto
traces are functions of its points (their resume keys, :mod:`ddpsim.pipeline.fingerprint`), the
scenario's name and the plotting libraries' versions: :class:`KeptFiles` records, under one key of
those, each file's sha256 and what it was drawn from in
``<report>/points/report.json``; a rerun under the same key keeps a file still on disk with those
bytes. Nothing is kept without a key (a run with a stand-in engine).
"""

from __future__ import annotations

from importlib import metadata
from pathlib import Path
from typing import Any, Sequence

from ddpsim.pipeline.fingerprint import digest
from ddpsim.pipeline.method_error import file_sha256
from ddpsim.pipeline.sweep import jsonable, read_kept, write_kept

KEPT_FILE = "report.json"
KEPT_FORMAT = "ddpsim-report-files"
KEPT_VERSION = 1
#: the libraries whose versions the bytes of a figure depend on
_LIBRARIES = ("matplotlib", "Pillow", "numpy")


class KeptFiles:
    """The files of the report folder ``rdir`` kept by its last run under the key of ``points_key``
    (:func:`ddpsim.pipeline.run.kept_key`), the scenario's ``name`` and the plotting libraries'
    versions (module docstring); nothing kept without ``points_key``."""

    def __init__(self, rdir: Path, points_key: str | None, name: str) -> None:
        self.rdir, self.key, self.old = Path(rdir), None, {}
        self.path = self.rdir / "points" / KEPT_FILE
        if points_key is not None:
            versions = {lib: metadata.version(lib) for lib in _LIBRARIES}  # Pillow: matplotlib's dependency
            self.key = digest({"format": KEPT_FORMAT, "version": KEPT_VERSION, "points": points_key, "name": name,
                               "libraries": versions})[:20]
            d = read_kept(self.path, KEPT_FORMAT, KEPT_VERSION, key=self.key)
            self.old = d["entries"] if d is not None and isinstance(d.get("entries"), dict) else {}
        self.new: dict[str, Any] = {}

    def get(self, name: str, what: Any) -> dict[str, Any] | None:
        """Entry ``name`` (``{"files": {name: sha256}, "data": ...}``) if written from ``what`` and its
        files are in the folder with those bytes; else None."""
        e = self.old.get(name)
        if self.key is None or not isinstance(e, dict) or e.get("what") != jsonable(what):
            return None
        try:
            if not e["files"] or any(file_sha256(self.rdir / f) != h for f, h in e["files"].items()):
                return None
        except (OSError, KeyError, AttributeError, TypeError):
            return None
        self.new[name] = e
        return e

    def put(self, name: str, what: Any, paths: Sequence[Path], data: Any = None) -> None:
        """Record entry ``name``: its files just written in the folder, from ``what``, with ``data``."""
        if self.key is not None:
            files = {p.name: file_sha256(p) for p in paths}
            self.new[name] = {"what": jsonable(what), "files": files, "data": data}

    def save(self) -> None:
        """Write the entries got or put by this run (only those) under the key."""
        if self.key is not None and self.path.parent.is_dir():
            write_kept(self.path, {"format": KEPT_FORMAT, "version": KEPT_VERSION, "key": self.key,
                                   "entries": self.new})
