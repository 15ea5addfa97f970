"""Benchmark: the memory ``ddpsim trace --from-profile`` needs per MB of torch.profiler trace.

One command, prints figures; no assertions:

    python benchmarks/bench_profile_memory.py [--profile tests/data/resnet50_ddp_2xA100_rank0.json.gz] [--scales 1,4,16] [--gzip]

A profile of hundreds of MB is made from a real one: the fixture's ``ProfilerStep`` iterations
are repeated ``scale`` times, each copy shifted in time and given fresh ids (External id,
correlation, flow ids, step numbers), so that the result reads as one long profile. For each
scale a child process reports its resident memory (``/proc/self/statm``) once ddpsim and its
dependencies are imported, and the highest it reaches during the import (sampled every 2 ms by
a thread: ``import_profile``, no ``--model``), and the same for ``json.load`` of the file (what a
non-streaming reader holds). Linux only. Prints the profile's
size, each reader's peak growth and their ratio to the size: the streaming import's MB per MB
of profile.
"""

from __future__ import annotations

import argparse
import copy
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ID_ARGS = ("External id", "correlation", "Record function id")
ID_STRIDE = 10_000_000

CHILD = r"""
import gc, gzip, json, os, sys, threading, time
mode, path = sys.argv[1], sys.argv[2]
from ddpsim.trace.profile import import_profile
PAGE = os.sysconf("SC_PAGE_SIZE")
def rss_mb():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20
gc.collect()
before = rss_mb()
peak = [before]
done = threading.Event()
def sample():
    while not done.is_set():
        peak[0] = max(peak[0], rss_mb())
        time.sleep(0.002)
t = threading.Thread(target=sample, daemon=True)
t.start()
if mode == "import":
    n = len(import_profile(path).iterations)
else:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        n = len(json.load(f)["traceEvents"])
peak[0] = max(peak[0], rss_mb())
done.set()
t.join()
print(json.dumps({"before_mb": before, "after_mb": peak[0], "n": n}))
"""


def scaled_profile(src: Path, scale: int, out: Path, compress: bool) -> Path:
    """``src``'s steps repeated ``scale`` times, written to ``out`` (plain JSON or gzip)."""
    with gzip.open(src, "rt") if src.suffix == ".gz" else open(src) as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    first = min(e["ts"] for e in steps)
    period = max(e["ts"] + e["dur"] for e in steps) - first + 1000.0
    last_step = max(int(e["name"].split("#")[1]) for e in steps)
    is_timed = [e.get("ph") != "M" and isinstance(e.get("ts"), (int, float)) for e in events]
    timed = [e for e, t in zip(events, is_timed) if t]
    others = [e for e, t in zip(events, is_timed) if not t]
    out_events = list(others)
    for c in range(scale):
        for e in timed:
            e2 = copy.deepcopy(e) if c else e
            if c:
                e2["ts"] = e["ts"] + c * period
                if "id" in e2 and isinstance(e2["id"], int):
                    e2["id"] += c * ID_STRIDE
                args = e2.get("args")
                if isinstance(args, dict):
                    for k in ID_ARGS:
                        if isinstance(args.get(k), int):
                            args[k] += c * ID_STRIDE
                name = str(e2.get("name", ""))
                if name.startswith("ProfilerStep#"):
                    e2["name"] = f"ProfilerStep#{int(name.split('#')[1]) + c * (last_step + 1)}"
            out_events.append(e2)
    doc["traceEvents"] = out_events
    text = json.dumps(doc)
    if compress:
        out = out.with_suffix(".json.gz")
        with gzip.open(out, "wt", compresslevel=1) as f:
            f.write(text)
    else:
        out.write_text(text)
    return out


def child(mode: str, path: Path) -> dict:
    r = subprocess.run([sys.executable, "-c", CHILD, mode, str(path)], capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", default="tests/data/resnet50_ddp_2xA100_rank0.json.gz")
    ap.add_argument("--scales", default="1,4,16", help="comma-separated repeat counts (default 1,4,16)")
    ap.add_argument("--gzip", action="store_true", help="write the scaled profiles gzip-compressed (.json.gz)")
    args = ap.parse_args()
    print("profile_mb  steps  import_peak_growth_mb  import_mb_per_profile_mb  json.load_peak_growth_mb  json.load_mb_per_profile_mb")
    with tempfile.TemporaryDirectory() as tmp:
        for scale in (int(s) for s in args.scales.split(",")):
            path = scaled_profile(Path(args.profile), scale, Path(tmp) / f"x{scale}.json", args.gzip)
            size_mb = (len(gzip.decompress(path.read_bytes())) if args.gzip else path.stat().st_size) / 2**20
            imp, raw = child("import", path), child("json", path)
            grow_imp = imp["after_mb"] - imp["before_mb"]
            grow_raw = raw["after_mb"] - raw["before_mb"]
            print(f"{size_mb:10.1f}  {imp['n']:5d}  {grow_imp:21.1f}  {grow_imp / size_mb:24.2f}  "
                  f"{grow_raw:24.1f}  {grow_raw / size_mb:27.2f}")
            path.unlink()
    print("(MB of JSON text; peak resident growth of a child process over its resident size after its imports; the import keeps "
          "compact records of the events it uses, json.load the whole decoded document)")


if __name__ == "__main__":
    main()
