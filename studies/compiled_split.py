"""Does ddpsim's DDPOptimizer split equal torch's own for the bundled models, ResNet-50 included?

Runs ``tests/compiled_ddp_worker.py`` (one process, a 1-rank gloo group: ``torch.compile(DDP(model),
backend="aot_eager")`` with ``optimize_ddp=True``, DDPOptimizer's ``buckets`` read back, the same
Dynamo graph split again at each cap) for mlp, gpt2-124m and bert-base (2 blocks each) and
ResNet-50, and prints, per model and cap, DDPOptimizer's subgraph count and whether ddpsim's split
(:func:`ddpsim.plan.compiled.ddp_optimizer_buckets` on the recorded graph walk) is the same,
parameter for parameter and byte for byte. About a minute of CPU.

    python studies/compiled_split.py [--models mlp,resnet50]
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
    args = ap.parse_args()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "compiled_ddp_worker.py"), args.models],
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


if __name__ == "__main__":
    main()
