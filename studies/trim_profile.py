"""Trim a torch.profiler (Kineto) trace to one profiled step, for a test fixture.

    python studies/trim_profile.py PROFILE.json.gz STEP OUT.json.gz

Keeps the metadata events, every host event that starts inside ``ProfilerStep#STEP``'s CPU
annotation, the GPU events (kernels, copies, sets) those host launches correlate with, the step's
GPU annotation and the launch flows; the order of the events is the profile's. The output is
gzip with no time stamp, so the same input gives the same bytes.
"""

from __future__ import annotations

import argparse
import gzip
import json

GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation"}


def trim(doc: dict, step: int) -> dict:
    """``doc`` with only the events of ``ProfilerStep#<step>`` (module docstring)."""
    events = doc["traceEvents"]
    name = f"ProfilerStep#{step}"
    cpu = next(e for e in events if e.get("cat") == "user_annotation" and e.get("name") == name)
    start, end = cpu["ts"], cpu["ts"] + cpu["dur"]
    keep, launches = [], set()
    for e in events:
        cat = e.get("cat")
        if e.get("ph") == "M" or (cat in (None, "Trace") and e.get("ph") != "X"):
            keep.append(e)
        elif cat not in GPU_CATS and cat != "ac2g" and start <= e.get("ts", -1) <= end:
            keep.append(e)
            if cat in ("cuda_runtime", "cuda_driver"):
                launches.add(e["args"].get("correlation"))
    for e in events:
        cat = e.get("cat")
        if cat in GPU_CATS and (e.get("args", {}).get("correlation") in launches or e.get("name") == name):
            keep.append(e)
        elif cat == "ac2g" and e.get("id") in launches:
            keep.append(e)
    index = {id(e): i for i, e in enumerate(events)}
    keep.sort(key=lambda e: index[id(e)])
    return {**doc, "traceEvents": keep}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("profile", help="torch.profiler trace (.json.gz)")
    ap.add_argument("step", type=int, help="N of the ProfilerStep#N to keep")
    ap.add_argument("out", help="the trimmed trace to write (.json.gz)")
    a = ap.parse_args()
    with gzip.open(a.profile) as f:
        doc = json.load(f)
    with gzip.GzipFile(a.out, "wb", mtime=0) as f:
        f.write(json.dumps(trim(doc, a.step)).encode())


if __name__ == "__main__":
    main()
