"""The import layering of ddpsim and the executor: every import, at module level or inside a
function, read with ``ast`` from the sources (nothing is imported), points down the pipeline,
and no ddpsim or executor modules import each other in a circle."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

ROOT = Path(__file__).resolve().parents[1]

#: ddpsim's layers from the bottom up, one folder each, in the order of the pipeline
#: (docs/ARCHITECTURE.md draws them): a module imports only modules of its own layer or
#: below (a package name covers its submodules)
LAYERS: dict[str, tuple[str, ...]] = {
    "foundation": ("ddpsim", "ddpsim.errors", "ddpsim.units", "ddpsim.io", "ddpsim.formats", "ddpsim.schema"),
    "hardware": ("ddpsim.hardware",),
    "trace": ("ddpsim.trace",),
    "plan": ("ddpsim.plan",),
    "network": ("ddpsim.network",),
    "engine": ("ddpsim.engine",),
    "calibration": ("ddpsim.calibration",),
    "pipeline": ("ddpsim.pipeline",),
    "report": ("ddpsim.report",),
    "api": ("ddpsim.api",),
    "validation": ("ddpsim.validation",),
    "cli": ("ddpsim.cli", "ddpsim.__main__"),
}
LAYER_NAMES = list(LAYERS)
#: the ddpsim layers the executor may import (it runs on nodes with torch only)
EXECUTOR_MAY_IMPORT = ("foundation", "hardware", "trace", "plan")
#: ... and this one module above them: the calibration curve its collectives step fits
EXECUTOR_MAY_IMPORT_MODULES = ("ddpsim.network.curve_fit",)


def _modules() -> dict[str, Path]:
    out = {}
    for top in ("ddpsim", "executor"):
        for path in sorted((ROOT / top).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            out[".".join(parts)] = path
    return out


MODULES = _modules()


def _imports(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` of every ddpsim/executor module ``path`` imports, function bodies included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # ``from ddpsim.network import gloo`` imports the module ddpsim.network.gloo; ``from ddpsim.x import f`` ddpsim.x
            names = [f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module
                     for a in node.names]
        else:
            assert not isinstance(node, ast.ImportFrom) or node.level == 0, f"{path}: relative import"
            continue
        for name in names:
            while name and name not in MODULES:  # ``import ddpsim.trace.models.mlp as m`` -> itself; a name in a module -> it
                name = name.rpartition(".")[0]
            if name and (node.lineno, name) not in found:
                found.append((node.lineno, name))
    return found


def _layer(module: str) -> str | None:
    """The layer of the longest name in LAYERS that is ``module`` or a package holding it."""
    owners = [(len(m), layer) for layer, members in LAYERS.items() for m in members
              if module == m or module.startswith(m + ".")]
    return max(owners)[1] if owners else None


def _edges() -> list[tuple[str, int, str]]:
    return [(src, line, dst) for src, path in MODULES.items() for line, dst in _imports(path) if dst != src]


def test_every_ddpsim_module_has_a_layer():
    unplaced = [m for m in MODULES if m.startswith("ddpsim") and _layer(m) is None]
    assert not unplaced, f"place these modules in a layer of tests/test_layering.py LAYERS: {unplaced}"


def test_ddpsim_imports_point_down_the_pipeline():
    rank = {name: i for i, name in enumerate(LAYER_NAMES)}
    upward = [f"{MODULES[src].relative_to(ROOT)}:{line} imports {dst} ({_layer(src)} -> {_layer(dst)})"
              for src, line, dst in _edges()
              if src.startswith("ddpsim") and dst.startswith("ddpsim") and rank[_layer(dst)] > rank[_layer(src)]]
    assert not upward, "imports up the layers:\n" + "\n".join(upward)


def test_cost_models_never_import_calibration():
    # the rule above, said for the case that once went the other way
    bad = [(src, dst) for src, _, dst in _edges()
           if _layer(src) == "network" and _layer(dst) == "calibration"]
    assert not bad


def test_the_executor_imports_only_the_low_layers():
    bad = [f"{MODULES[src].relative_to(ROOT)}:{line} imports {dst} ({_layer(dst)})"
           for src, line, dst in _edges()
           if src.startswith("executor") and dst.startswith("ddpsim") and _layer(dst) not in EXECUTOR_MAY_IMPORT
           and dst not in EXECUTOR_MAY_IMPORT_MODULES]
    assert not bad, "the executor imports above the trace and plan layers:\n" + "\n".join(bad)


def test_ddpsim_never_imports_the_executor():
    # ddpsim launches the executor as a program (ddpsim.validation.launch: torchrun -m executor) and
    # reads the files it writes (ddpsim.formats); the two packages never import each other both ways
    bad = [f"{MODULES[src].relative_to(ROOT)}:{line} imports {dst}" for src, line, dst in _edges()
           if src.startswith("ddpsim") and dst.startswith("executor")]
    assert not bad, "\n".join(bad)


def test_no_import_cycles():
    graph = nx.DiGraph((src, dst) for src, _, dst in _edges())
    cycles = sorted(sorted(c) for c in nx.simple_cycles(graph))
    assert cycles == [], f"modules importing each other in a circle: {cycles}"


def test_the_reader_finds_every_shape_of_import(tmp_path):
    src = tmp_path / "m.py"
    src.write_text("import json\n"
                   "from ddpsim.network import gloo, __doc__\n"
                   "import ddpsim.validation.compare as c\n"
                   "def f():\n"
                   "    from ddpsim.cli.args import parse_int\n"
                   "    from executor.ddp_step import summarize\n")
    assert _imports(src) == [(2, "ddpsim.network.gloo"), (2, "ddpsim.network"), (3, "ddpsim.validation.compare"),
                             (5, "ddpsim.cli.args"), (6, "executor.ddp_step")]
    assert [_layer(m) for _, m in _imports(src)] == ["network", "network", "validation", "cli", None]


#: the longest a module may grow (lines) before it is split by concern
MAX_MODULE_LINES = 800
#: modules at the top of ddpsim/: the foundation, the facade and the entry points; the rest lives in a stage's folder
MAX_TOP_MODULES = 10


def test_no_module_over_the_limit():
    long = {str(p.relative_to(ROOT)): n for p in MODULES.values()
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"split these modules by concern (over {MAX_MODULE_LINES} lines): {long}"


def test_few_modules_at_the_top_of_the_package():
    top = sorted(p.name for p in (ROOT / "ddpsim").glob("*.py"))
    assert len(top) <= MAX_TOP_MODULES, f"move modules into a stage's folder: {top}"


def test_every_folder_of_ddpsim_is_one_layer():
    folders = sorted(f"ddpsim.{p.name}" for p in (ROOT / "ddpsim").iterdir() if (p / "__init__.py").exists())
    layered = {m for members in LAYERS.values() for m in members}
    assert [f for f in folders if f not in layered] == []


#: the longest a function may grow (lines, docstring included) before it is cut into named steps
MAX_FUNCTION_LINES = 80


def test_no_function_over_the_limit():
    long = [f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({node.end_lineno - node.lineno + 1} lines)"
            for path in MODULES.values() for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES]
    assert not long, "cut these functions into named steps:\n" + "\n".join(long)
