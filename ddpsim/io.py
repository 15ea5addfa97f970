"""File output helpers: every file ddpsim writes is written atomically, so a run that
fails halfway never leaves a truncated file and never destroys what was already there."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from ddpsim.errors import InputError


def ensure_dir(path: str | Path, field: str = "output folder") -> Path:
    """Create ``path`` (and parents); InputError naming the path if it cannot be written."""
    p = Path(path)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{field}: {str(p)!r} cannot be created ({exc.strerror}); expected a writable folder") from None
    if not os.access(p, os.W_OK):
        raise InputError(f"{field}: {str(p)!r} is not writable; expected a writable folder")
    return p


def write_bytes_atomic(path: str | Path, data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temp file in the same folder and ``os.replace``."""
    p = Path(path)
    ensure_dir(p.parent if str(p.parent) else Path("."))
    fd, tmp = tempfile.mkstemp(prefix=f".{p.name}.", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        # NOTE: mkstemp creates 0600; give the file the mode a plain open() would (0666 & ~umask)
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, p)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return p


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text_atomic(path: str | Path, text: str) -> Path:
    return write_bytes_atomic(path, text.encode("utf-8"))
