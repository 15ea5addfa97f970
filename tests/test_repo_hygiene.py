"""The repository speaks of the tool only, never of how or when it was developed: no tracked
file (path or text) uses the word that names a development sitting (:data:`WORD`), and
README.md stays a user's page (under 12 KB)."""

from __future__ import annotations

import re
import subprocess

import pytest

from executor.launch import REPO_ROOT

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
