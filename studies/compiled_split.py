"""Does ddpsim's DDPOptimizer split equal torch's own for the bundled models, ResNet-50 included?

Runs ``tests/compiled_ddp_worker.py`` (one process, a 1-rank gloo group: ``torch.compile(DDP(model),
backend="aot_eager")`` with ``optimize_ddp=True``, DDPOptimizer's ``buckets`` read back, the same
Dynamo graph split again at each cap) for mlp, gpt2-124m and bert-base (2 blocks each) and
ResNet-50, and prints, per model and cap, DDPOptimizer's subgraph count and whether ddpsim's split
(:func:`ddpsim.plan.compiled.ddp_optimizer_buckets` on the recorded graph walk) is the same,
parameter for parameter and byte for byte. About a minute of CPU.

Then, with ``--rebuild``: does DDP's Reducer, fed the compiled backward's ready times, rebuild the
buckets real compiled DDP rebuilds (``--caps``, MiB)? The worker runs 3 compiled steps and reports
``rebuilt_per_bucket_param_indices`` and the order the hooks fired in; ddpsim plans the rebuild
over its grouped trace of the model (captured here, eager) with the autograd engine's order of the
hooks within a subgraph (:mod:`ddpsim.plan.autograd_order`) and, for comparison, the eager order.

    python studies/compiled_split.py [--models mlp,resnet50] [--rebuild] [--caps 2.5,5,25]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ddpsim.plan.compiled import ddp_optimizer_buckets  # noqa: E402
from ddpsim.schema import validate  # noqa: E402
from ddpsim.trace.compiled_graph import CompiledGraph  # noqa: E402
from ddpsim.units import mb_to_bytes  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mlp,gpt2-124m,bert-base,resnet50")
    ap.add_argument("--rebuild", action="store_true", help="also compare DDP's rebuilt buckets under compile")
    ap.add_argument("--caps", default="2.5,5,25", help="the caps (MiB) of --rebuild, comma-separated")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "compiled_ddp_worker.py"), args.models]
                         + (["--rebuild", args.caps] if args.rebuild else []),
                         capture_output=True, text=True, env=env, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    equal = total = 0
    print("model        cap      graphs  DDPOptimizer subgraphs  ddpsim's split")
    for name, case in result["models"].items():
        graph = validate(CompiledGraph, case["graph"], "compiled_graph")
        for cap, real in case["buckets"].items():
            cap_bytes = mb_to_bytes(25 if cap == "null" else float(cap))
            mine = [[{"params": list(s.param_indices), "size": s.size_bytes} for s in ddp_optimizer_buckets(g, cap_bytes)]
                    for g in graph.graphs]
            same = mine == real
            equal, total = equal + same, total + 1
            print(f"{name:<12} {cap:<8} {len(real):>6}  {sum(len(g) for g in real):>22}  {'equal' if same else 'DIFFERENT'}")
    print(f"{equal}/{total} splits equal to DDPOptimizer's")
    if args.rebuild:
        rebuild(result)


def rebuild(result: dict) -> None:
    """DDP's rebuilt buckets under compile against ddpsim's: with the autograd engine's order of
    the hooks (:func:`ddpsim.plan.compiled.engine_hook_order`) and, for comparison, the eager order."""
    from dataclasses import replace

    import torch

    from ddpsim.plan.compiled import CompileOptions, compiled_ready_trace, compiled_subgraphs, engine_hook_order
    from ddpsim.plan.planner import DDPOptions, plan_ddp
    from ddpsim.trace.capture import capture_trace
    from ddpsim.trace.models import build_model

    from tests.compiled_ddp_worker import BATCH, MODELS

    torch.set_num_threads(1)
    print("\nmodel        cap  real rebuilt buckets  hook order  ddpsim's rebuilt buckets  with the eager order")
    equal = total = 0
    for name, cases in result["rebuild"].items():
        spec = build_model(name, **MODELS[name])
        trace = capture_trace(spec, batch_size=BATCH.get(name, 2), num_iters=3, num_warmup=1, measure_hook_overhead=False)
        trace = replace(trace, compiled_graph=validate(CompiledGraph, result["models"][name]["graph"], "compiled_graph"))
        eager = replace(trace, compiled_graph=replace(trace.compiled_graph, graphs=tuple(
            replace(g, inputs=None) for g in trace.compiled_graph.graphs)))
        for cap, case in cases.items():
            options = DDPOptions(bucket_cap_mb=float(cap))
            subgraphs = compiled_subgraphs(trace, options, CompileOptions())
            real = rebuilt_buckets(case)
            mine = [list(b.param_indices) for b in plan_ddp(compiled_ready_trace(trace, subgraphs), options).steady]
            old = [list(b.param_indices) for b in plan_ddp(compiled_ready_trace(eager, subgraphs), options).steady]
            same_order = engine_hook_order(trace, subgraphs) == case["hook_order"]
            equal, total = equal + (mine == real), total + 1
            print(f"{name:<12} {cap:>4}  {len(real):>20}  {'equal' if same_order else 'DIFFERENT':>10}  "
                  f"{'equal' if mine == real else f'{len(mine)}, DIFFERENT':>24}  "
                  f"{'equal' if old == real else f'{len(old)}, differ':>20}")
    print(f"{equal}/{total} rebuilt bucket plans equal to compiled DDP's, parameter for parameter")


def rebuilt_buckets(case: dict) -> list[list[int]]:
    """``rebuilt_per_bucket_param_indices`` of ``_get_ddp_logging_data`` as lists (DDP's order)."""
    return [[int(x) for x in b.split()] for b in case["rebuilt_per_bucket_param_indices"].split(",")]


if __name__ == "__main__":
    main()
