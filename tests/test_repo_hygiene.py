"""The repository speaks of the tool only, never of how or when it was developed: no tracked
file (path or text) uses the word that names a development sitting (:data:`WORD`), and
README.md stays a user's page (under 12 KB). Sizes of the checkout, and one definition per
top-level name in every module."""

from __future__ import annotations

import re
import subprocess

import pytest

from ddpsim.validation.launch import REPO_ROOT

WORD = "sess" + "ion"  # spelled in two so that this file passes its own test
# the one legitimate use: subprocess.Popen's keyword (a POSIX process group leader)
_ALLOWED = re.compile("start_new_" + WORD)
_WORD = re.compile(WORD, re.IGNORECASE)


def _tracked_files() -> list[str]:
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO_ROOT, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return [p for p in out.stdout.decode().split("\0") if p]


def test_no_tracked_file_speaks_of_development_sittings():
    hits = []
    for rel in _tracked_files():
        if _WORD.search(rel):
            hits.append(f"{rel} (path)")
            continue
        path = REPO_ROOT / rel
        if not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            if _WORD.search(_ALLOWED.sub("", line)):
                hits.append(f"{rel}:{n}: {line.strip()[:100]}")
    assert not hits, f"mentions of {WORD!r}:\n" + "\n".join(hits[:30])


def test_readme_stays_under_12_kb():
    assert (REPO_ROOT / "README.md").stat().st_size < 12 * 1024


# Phrases that tell the history of the project or of the machine it was developed on, where a
# user's page, docstring or comment should state what the code does and its sources.
HISTORY_PHRASES = (r"2-vCPU host", r"\bkept validations?\b", r"\bkept (?:whole-zoo )?runs?\b", r"\bas before\b",
                   r"\blast week\b", r"\bno longer\b", r"§\s?\d")
_HISTORY = re.compile("|".join(HISTORY_PHRASES), re.IGNORECASE)
# where the rule holds: the package, the executor, the docs, the scripts and the user's pages
HISTORY_SCOPE = ("ddpsim/", "executor/", "docs/", "benchmarks/", "studies/", "README.md", "traces/README.md")
MIB = 1 << 20


def _files(*extra: str) -> list[str]:
    """Tracked files, and with ``extra`` git options (``--others --exclude-standard``) new ones too."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", *extra], cwd=REPO_ROOT, capture_output=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    return sorted({p for p in out.stdout.decode().split("\0") if p and (REPO_ROOT / p).is_file()})


def _disk_bytes(paths: list[str]) -> int:
    """What ``du`` counts for ``paths``: allocated blocks (the file size where the OS gives none)."""
    total = 0
    for p in paths:
        st = (REPO_ROOT / p).stat()
        total += st.st_blocks * 512 if hasattr(st, "st_blocks") else st.st_size
    return total


def test_no_file_tells_the_history_of_the_project():
    hits = []
    for rel in _files("--others", "--exclude-standard"):
        if not rel.startswith(HISTORY_SCOPE) or rel.endswith((".gz", ".xz", ".png", ".pyc")):
            continue
        text = (REPO_ROOT / rel).read_bytes().decode("utf-8", errors="replace")
        for n, line in enumerate(text.splitlines(), 1):
            m = _HISTORY.search(line)
            if m:
                hits.append(f"{rel}:{n}: {m.group(0)!r}: {line.strip()[:100]}")
    assert not hits, "history phrases (say what the code does and its sources instead):\n" + "\n".join(hits)


#: figures measured on one particular machine: they belong in studies/ and docs/, never in the
#: package's code, docstrings or --help
MACHINE_PHRASES = re.compile(r"2-vCPU|2-core|host of 2 vCPUs", re.IGNORECASE)


def test_no_machine_figure_in_the_package_or_the_executor():
    hits = [f"{rel}:{n}: {line.strip()[:100]}"
            for rel in _files("--others", "--exclude-standard") if rel.startswith(("ddpsim/", "executor/"))
            and rel.endswith(".py")
            for n, line in enumerate((REPO_ROOT / rel).read_text(errors="replace").splitlines(), 1)
            if MACHINE_PHRASES.search(line)]
    assert not hits, "figures of one machine (move them to studies/ or docs/):\n" + "\n".join(hits)


def test_tracked_reports_stay_under_10_mib():
    """Generated reports: one per bundled scenario and the validations README.md quotes, raw runs
    packed (studies/raw_runs.py)."""
    reports = [p for p in _files() if p.startswith("reports/")]
    assert _disk_bytes(reports) < 10 * MIB, f"reports/: {_disk_bytes(reports) / MIB:.1f} MiB"


def test_tracked_checkout_stays_under_16_mib():
    """The package; its tests and their data (about 3 MiB, published GPU profiles most of it); the
    reports (under 10 MiB, above); the shipped traces (about 3 MiB, among them the traces measured
    on GPUs that the retime is scored against)."""
    assert _disk_bytes(_files()) < 16 * MIB, f"tracked files: {_disk_bytes(_files()) / MIB:.1f} MiB"


def test_no_module_defines_a_top_level_name_twice():
    """A second top-level ``def``/``class`` of one name silently replaces the first (a benchmark's
    table once crashed so): every Python file of the package, benchmarks, studies and executor
    defines each top-level function and class once."""
    import ast

    twice = []
    for folder in ("ddpsim", "benchmarks", "studies", "executor"):
        for path in sorted((REPO_ROOT / folder).rglob("*.py")):
            names = [n.name for n in ast.parse(path.read_text(encoding="utf-8")).body
                     if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
            twice += [f"{path.relative_to(REPO_ROOT)}: {n}" for n in sorted(set(names)) if names.count(n) > 1]
    assert twice == []
