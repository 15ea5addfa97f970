"""An nccl-tests ``all_reduce_perf`` log read as a calibration: a cluster's own all-reduce curve.
nccl-tests (github.com/NVIDIA/nccl-tests, ``src/common.cu``) prints a line per ``# Rank`` (one per
GPU of the run: its world size) and, per message size, a row: size (B), count, type, redop, root
(absent before nccl-tests 2.10), then the out-of-place time (us), algbw, busbw and ``#wrong``, then
the same four in place. Each size's out-of-place time becomes a point of the calibration's
all-reduce curve (``collectives.allreduce``), which :mod:`ddpsim.calibration.loader` fits piecewise
and applies to other rank counts the ring way, as it does the executor's own measurements. A size
printed more than once (several runs in one log) takes the mean of its times.
"""

from __future__ import annotations

import re
import statistics
from typing import Any

from ddpsim.formats import CALIBRATION_FORMAT, CALIBRATION_VERSION
from ddpsim.errors import InputError

_RANK = re.compile(r"^#\s*Rank\s+(\d+)\b.*?\bdevice\s+\d+\s+\[[^\]]*\]\s+(.+?)\s*$")
_NCCL = re.compile(r"NCCL version (\d+\.\d+\.\d+)")


def _row(line: str) -> tuple[int, str, float] | None:
    """(size, redop, out-of-place time in s) of a table row, None for any other line: size and
    count integers, type and redop words, then 9 columns with the root or 8 without it."""
    t = line.split()
    if len(t) not in (12, 13) or not (t[0].isdigit() and t[1].isdigit() and t[2].isidentifier() and t[3].isalpha()):
        return None
    try:
        time_us = float(t[5] if len(t) == 13 else t[4])
    except ValueError:
        return None
    return int(t[0]), t[3], time_us * 1e-6


def looks_like(text: str) -> bool:
    """Whether ``text`` is an nccl-tests log: its table header and at least one row."""
    return "out-of-place" in text and any(_row(line) for line in text.splitlines())


def calibration_doc(text: str, source: str) -> dict[str, Any]:
    """The calibration document of an ``all_reduce_perf`` log; InputError naming what is wrong."""
    ranks: dict[int, str] = {}
    times: dict[int, list[float]] = {}
    redops = set()
    for line in text.splitlines():
        if m := _RANK.match(line):
            ranks.setdefault(int(m.group(1)), m.group(2))
        elif row := _row(line):
            redops.add(row[1])
            times.setdefault(row[0], []).append(row[2])
    if "none" in redops:
        raise InputError(f"{source}: redop: 'none' is not accepted; expected an all_reduce_perf log "
                         "(its rows name a reduction: sum, prod, max, min or avg)")
    if len(ranks) < 2:
        raise InputError(f"{source}: '# Rank' lines: {len(ranks)} found; expected the log of a run of 2 or more "
                         "GPUs (nccl-tests prints one line per rank)")
    points = [{"size_bytes": size, "time_s": statistics.fmean(ts), "num_samples": len(ts)}
              for size, ts in sorted(times.items()) if size > 0 and min(ts) > 0]
    if len(points) < 2:
        raise InputError(f"{source}: rows: {len(points)} message size(s) with a time; expected 2 or more "
                         "(all_reduce_perf -b MIN -e MAX -f 2)")
    version = _NCCL.search(text)
    return {"format": CALIBRATION_FORMAT, "version": CALIBRATION_VERSION, "backend": "nccl", "world_size": len(ranks), "device": "cuda",
            "environment": {"source": "nccl-tests all_reduce_perf log, out-of-place times",
                            "devices": sorted(set(ranks.values())),
                            "nccl_version": version.group(1) if version else None},
            "collectives": {"allreduce": points}}
