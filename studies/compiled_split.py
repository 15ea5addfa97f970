"""Does ddpsim's DDPOptimizer split equal torch's own for the bundled models, ResNet-50 included?

Runs ``tests/compiled_ddp_worker.py`` (one process, a 1-rank gloo group: ``torch.compile(DDP(model),
backend="aot_eager")`` with ``optimize_ddp=True``, DDPOptimizer's ``buckets`` read back, the same
Dynamo graph split again at each cap) for mlp, gpt2-124m and bert-base (2 blocks each) and
ResNet-50, and prints, per model and cap, DDPOptimizer's subgraph count and whether ddpsim's split
(:func:`ddpsim.plan.compiled.ddp_optimizer_buckets` on the recorded graph walk) is the same,
parameter for parameter and byte for byte. About a minute of CPU.

Then, with ``--rebuild``: does DDP's Reducer, fed the compiled backward's ready times, rebuild the
buckets real compiled DDP rebuilds (5 MiB)? The worker runs 3 compiled steps and reports
``rebuilt_bucket_sizes`` and the order the hooks fired in; ddpsim plans the rebuild over its grouped
trace of the model (captured here, eager) twice: with its own order (the eager order within a
subgraph) and with the hooks' real order.

    python studies/compiled_split.py [--models mlp,resnet50] [--rebuild]
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
from ddpsim.trace.compiled_graph import compiled_graph_from_dict  # noqa: E402
from ddpsim.units import mb_to_bytes  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="mlp,gpt2-124m,bert-base,resnet50")
    ap.add_argument("--rebuild", action="store_true", help="also compare DDP's rebuilt buckets under compile")
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "compiled_ddp_worker.py"), args.models]
                         + (["--rebuild"] if args.rebuild else []),
                         capture_output=True, text=True, env=env, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    equal = total = 0
    print("model        cap      graphs  DDPOptimizer subgraphs  ddpsim's split")
    for name, case in result["models"].items():
        graph = compiled_graph_from_dict(case["graph"])
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
    """DDP's rebuilt bucket sizes under compile against ddpsim's, with its order and the real one."""
    from dataclasses import replace

    import torch

    from ddpsim.plan.compiled import CompileOptions, compiled_ready_trace, compiled_subgraphs
    from ddpsim.plan.planner import DDPOptions, plan_ddp
    from ddpsim.trace.capture import capture_trace
    from ddpsim.trace.models import build_model

    from tests.compiled_ddp_worker import BATCH, MODELS

    torch.set_num_threads(1)
    print("\nmodel        real rebuilt buckets  ddpsim (eager order in a subgraph)  ddpsim (the hooks' real order)")
    for name, case in result["rebuild"].items():
        spec = build_model(name, **MODELS[name])
        trace = capture_trace(spec, batch_size=BATCH.get(name, 2), num_iters=3, num_warmup=1, measure_hook_overhead=False)
        trace = replace(trace, compiled_graph=compiled_graph_from_dict(result["models"][name]["graph"]))
        options = DDPOptions(bucket_cap_mb=case["cap_mb"])
        grouped = compiled_ready_trace(trace, compiled_subgraphs(trace, options, CompileOptions()))
        real = [int(x) for x in case["rebuilt_bucket_sizes"].split(",")]
        own = [b.size_bytes for b in plan_ddp(grouped, options).steady]
        told = [b.size_bytes for b in plan_ddp(replace(grouped, grad_ready_order=tuple(case["hook_order"])), options).steady]
        print(f"{name:<12} {len(real):>20}  {'equal' if own == real else f'{len(own)} buckets, differ':>34}  "
              f"{'equal' if told == real else f'{len(told)} buckets, differ':>30}")


if __name__ == "__main__":
    main()
