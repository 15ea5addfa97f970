"""The hardware catalogue: ``catalogue.yaml`` beside this module describes the GPUs ddpsim models
and the systems its topology presets build (:mod:`ddpsim.network.topology`), every figure citing a
datasheet, user guide or source file under ``references``. A user's file in the same format
(:class:`~ddpsim.hardware.schema.CatalogueFile`; ``--catalogue FILE``, ``cluster.catalogue``) adds
GPUs, systems and references, never reusing a bundled name, so a name means one thing in every report.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Mapping

from ddpsim.errors import InputError, shorten
from ddpsim.hardware.schema import CatalogueFile, Gpu, Reference, System
from ddpsim.io import read_yaml
from ddpsim.schema import validate

#: what a catalogue file is, for error messages
EXPECTED = "a hardware catalogue YAML (version: 1, references, gpus, systems; see ddpsim/hardware/catalogue.yaml)"


def scaled(value: float, exponent: int) -> float:
    """``value`` x 10**exponent rounded once, as the literal ``<value>e<exponent>`` is
    (``scaled(989.4, 12) == 989.4e12``; ``989.4 * 1e12`` differs in the last bit)."""
    return float(f"{value!r}e{exponent}")


@dataclass(frozen=True)
class Catalogue:
    """References, GPUs and systems by name (the bundled ones first, then a user's), read-only."""

    references: Mapping[str, Reference]
    gpus: Mapping[str, Gpu]
    systems: Mapping[str, System]
    #: the user's file that extended the bundled catalogue, or None
    user_file: str | None = None


def _merged(base: Catalogue | None, path: str | Path, source: str) -> Catalogue:
    """The catalogue file at ``path`` added to ``base`` (None: the bundled file itself): new
    names only, every ``sources`` entry naming a reference, every system's GPU a GPU of the
    catalogue (references merged first, then GPUs, then systems)."""
    doc = validate(CatalogueFile, read_yaml(path, "catalogue", EXPECTED), source)
    refs, gpus, systems = ({}, {}, {}) if base is None else (dict(base.references), dict(base.gpus), dict(base.systems))
    for kind, ours, theirs in (("references", refs, doc.references), ("gpus", gpus, doc.gpus),
                               ("systems", systems, doc.systems)):
        for name, entry in theirs.items():
            if name in ours:
                raise InputError(f"{source}: {kind}.{name}: already in the bundled catalogue; expected a new name "
                                 "(a changed figure is a new entry under its own name)")
            ours[name] = entry
            for figure, ref in getattr(entry, "sources", {}).items():
                if ref not in refs:
                    raise InputError(f"{source}: {kind}.{name}.sources.{figure}: {ref!r} is not a reference; "
                                     f"expected one of the keys under references ({', '.join(refs) or 'none'})")
            gpu_keys = [] if kind != "systems" else [("gpu", entry.gpu)] + [
                (f"by_pcie_gen.{g}.gpu", v.gpu) for g, v in entry.by_pcie_gen.items()]
            for key, gpu in gpu_keys:
                if gpu not in gpus:
                    raise InputError(f"{source}: systems.{name}.{key}: {gpu!r} is not a GPU; "
                                     f"expected one of {', '.join(gpus)}")
    return Catalogue(MappingProxyType(refs), MappingProxyType(gpus), MappingProxyType(systems),
                     user_file=None if base is None else str(path))


@functools.cache
def bundled() -> Catalogue:
    """The catalogue shipped in the package, ``catalogue.yaml`` beside this module (read once)."""
    return _merged(None, Path(__file__).with_name("catalogue.yaml"), "catalogue (bundled)")


def load_catalogue(path: str | Path | None = None) -> Catalogue:
    """The bundled catalogue, extended by the user's file at ``path`` (None: the bundled one)."""
    if path is None:
        return bundled()
    return _merged(bundled(), path, f"catalogue {shorten(str(path))}")
