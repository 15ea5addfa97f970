"""Benchmark: what ``ddpsim compare`` costs per MB of profile and per simulated rank.

One command, prints figures; no assertions:

    python benchmarks/bench_compare.py [--scales 1,4] [--worlds 2,4,8,16] [--grads 500,2000] [--repeats 1]

Four tables, CPU seconds (``time.process_time``, the least of ``--repeats``; wall seconds on
a shared machine vary more) of the import alone (``import_profile``: read, steps, gradients,
buckets) and of the whole ``ddpsim compare`` (import, the critical-path measurement, the
simulation, the report without its plot):

1. every bundled profile (``tests/data/*.json.gz``) on its GPU's catalogue system, and the 2 x
   A100 profile's steps repeated ``--scales`` times (``bench_profile_memory.scaled_profile``):
   the cost per MB of profile (uncompressed JSON);
2. the 2 x A100 profile told it ran on ``--worlds`` ranks, on nodes of 8 GPUs described in a
   user catalogue (``tests/data/my-catalogue.yaml``'s system with 8 GPUs in an NVLink mesh): the
   cost per simulated rank;
3. the 8-rank synthetic profiles (``tests/synthetic_profiles.py`` ``late_rank_docs``: every rank's
   profile, one of them late) on that 8-GPU node: every rank's profile read and measured;
4. one step of a model with ``--grads`` gradients (``many_gradients_doc``, a bucket every 10), as
   rank 0's profile and as all 8 ranks' on that node: the cost per gradient.
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import io
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "benchmarks"), str(ROOT / "tests")]

A100 = ROOT / "tests/data/resnet50_ddp_2xA100_rank0.json.gz"
#: the smallest bundled trace: a scenario must name one (compare replaces it with the profile's)
ANY_TRACE = ROOT / "traces/mlp.cpu.json"


def cpu_s(fn: Callable[[], Any], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def json_mb(path: Path) -> float:
    data = path.read_bytes()
    return len(gzip.decompress(data) if path.suffix == ".gz" else data) / 2**20


def run_compare(paths: list[Path], out: Path, scenario: Path | None = None) -> None:
    from ddpsim.cli.main import main

    argv = ["compare", *map(str, paths), "--out-dir", str(out), "--name", "bench", "--no-plots"]
    if scenario is not None:
        argv += ["--scenario", str(scenario)]
    with contextlib.redirect_stdout(io.StringIO()):
        rc = main(argv)
    if rc != 0:
        raise SystemExit(f"ddpsim compare {' '.join(map(str, paths))} exited {rc}")


def user_node(tmp: Path, world: int) -> Path:
    """A scenario of ``world`` ranks on nodes of 8 GPUs from a user catalogue (module docstring)."""
    import yaml

    cat = yaml.safe_load((ROOT / "tests/data/my-catalogue.yaml").read_text())
    box = cat["systems"]["my-box"]
    box.update(description="8 x my-gpu in an NVLink mesh", gpus_per_node=8,
               nvlink_edges=[[i, j, 2] for i in range(8) for j in range(i + 1, 8)])
    (tmp / "cat8.yaml").write_text(yaml.safe_dump(cat))
    sc = tmp / f"node8-w{world}.yaml"
    sc.write_text(f"name: node8\ntrace: {ANY_TRACE}\nworld_size: {world}\n"
                  f"cluster: {{topology: my-box, nodes: {-(-world // 8)}, catalogue: cat8.yaml}}\n")
    return sc


def with_world(src: Path, world: int, out: Path, rank: int = 0) -> Path:
    with gzip.open(src, "rt") as f:
        doc = json.load(f)
    doc["distributedInfo"].update(world_size=world, rank=rank)
    with gzip.open(out, "wt", compresslevel=1) as f:
        json.dump(doc, f)
    return out


def per_mb(tmp: Path, scales: list[int], repeats: int) -> None:
    from bench_profile_memory import scaled_profile

    from ddpsim.trace.profile import import_profile

    print("profile                                   MB  steps  import_s  compare_s  import_s/MB  compare_s/MB")
    cases = [(p.name, p) for p in sorted((ROOT / "tests/data").glob("*.json.gz"))]
    cases += [(f"{A100.name} x{k}", scaled_profile(A100, k, tmp / f"a100x{k}.json", True)) for k in scales if k > 1]
    for name, path in cases:
        mb = json_mb(path)
        steps = len(import_profile(path).iterations)
        imp = cpu_s(lambda: import_profile(path), repeats)
        cmp = cpu_s(lambda: run_compare([path], tmp / "out"), repeats)
        print(f"{name:38s} {mb:6.1f}  {steps:5d}  {imp:8.2f}  {cmp:9.2f}  {imp / mb:11.2f}  {cmp / mb:12.2f}")


def per_rank(tmp: Path, worlds: list[int], repeats: int) -> None:
    print("\n2 x A100 profile as N ranks on 8-GPU user-catalogue nodes")
    print("ranks  nodes  compare_s  compare_s/rank")
    for w in worlds:
        path = with_world(A100, w, tmp / f"a100w{w}.json.gz")
        s = cpu_s(lambda: run_compare([path], tmp / "out", user_node(tmp, w)), repeats)
        print(f"{w:5d}  {-(-w // 8):5d}  {s:9.2f}  {s / w:14.3f}")


def every_rank(tmp: Path, repeats: int) -> None:
    from synthetic_profiles import late_rank_docs

    paths = []
    for r, doc in late_rank_docs():
        paths.append(tmp / f"late{r}.json")
        paths[-1].write_text(json.dumps(doc))
    one = cpu_s(lambda: run_compare(paths[:1], tmp / "out", user_node(tmp, 8)), repeats)
    all8 = cpu_s(lambda: run_compare(paths, tmp / "out", user_node(tmp, 8)), repeats)
    print("\n8-rank synthetic profiles (late_rank_docs) on one 8-GPU user-catalogue node")
    print(f"rank 0's profile only: {one:.2f} s; all 8 profiles: {all8:.2f} s ({(all8 - one) / 7:.3f} s per added profile)")


def many_gradients(tmp: Path, grads: list[int], repeats: int) -> None:
    from synthetic_profiles import many_gradients_doc

    print("\nmany_gradients_doc (a bucket every 10 gradients) on one 8-GPU user-catalogue node")
    print("grads     MB  rank0_compare_s  8_ranks_compare_s  ms/grad (8 ranks)")
    for g in grads:
        paths = []
        for r in range(8):
            paths.append(tmp / f"g{g}r{r}.json")
            paths[-1].write_text(json.dumps(many_gradients_doc(g, rank=r)))
        one = cpu_s(lambda: run_compare(paths[:1], tmp / "out", user_node(tmp, 8)), repeats)
        all8 = cpu_s(lambda: run_compare(paths, tmp / "out", user_node(tmp, 8)), repeats)
        print(f"{g:5d}  {json_mb(paths[0]):5.1f}  {one:15.2f}  {all8:17.2f}  {1e3 * all8 / g:17.2f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scales", default="1,4", help="repeats of the 2 x A100 profile's steps (default 1,4)")
    ap.add_argument("--worlds", default="2,4,8,16", help="simulated ranks (default 2,4,8,16)")
    ap.add_argument("--grads", default="500,2000", help="gradients of the many-gradient profiles (default 500,2000)")
    ap.add_argument("--repeats", type=int, default=1, help="runs per figure; the least CPU time is printed")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        run_compare([A100], Path(tmp) / "out")  # warm-up: lazy imports and cached catalogue reads are not the profile's cost
        run_compare([A100], Path(tmp) / "out", user_node(Path(tmp), 2))
        per_mb(Path(tmp), [int(s) for s in args.scales.split(",")], args.repeats)
        per_rank(Path(tmp), [int(s) for s in args.worlds.split(",")], args.repeats)
        every_rank(Path(tmp), args.repeats)
        many_gradients(Path(tmp), [int(g) for g in args.grads.split(",")], args.repeats)
    print("(CPU seconds in this process, imports of ddpsim and torch already paid; MB of JSON text)")


if __name__ == "__main__":
    main()
