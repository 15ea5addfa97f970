"""How long does the NCCL model of a large cluster take to build? One command, prints figures:

    python benchmarks/bench_topology_build.py [--preset dgx-h100] [--nodes 64,512,1024,2048,4096]
        [--previous REV_OR_PATH] [--previous-max-nodes 1024]

For each node count, in a fresh process: the preset graph (``build_preset``) and the NCCL
model on every GPU (``build_comm_model``: placement, ring/tree/NVLS channel searches, tuning
model), wall and CPU seconds, and what writing the graph straight into networkx's dicts (the presets'
``Builder``, :mod:`ddpsim.network.graph_build`) buys: the same elements and links added through
networkx's API one call each against written into the dicts (CPU seconds), and the graph plus model
CPU time with API writes over that with direct ones (``API / direct``). With ``--previous`` (a git revision, e.g. ``HEAD~1``, or a
checkout directory) the same script runs against that code too, one process after the other
per node count, and the ratio previous / current of graph plus model (what ``ddpsim collectives
--topology P --nodes N`` builds; wall and CPU seconds) is printed, with whether both describe
the same model (``describe()`` and the all-reduce time of 1 MiB and 1 GiB). The previous code grows as the square of the nodes: ``--previous-max-nodes`` caps it.
The target: 4,096 nodes (32,768 GPUs) of dgx-h100 in <= 2 s on a quiet 2-core machine.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

PROBE = r"""
import json, sys, time
from ddpsim.network.topology import build_preset
from ddpsim.network.collective_cost import build_comm_model
preset, nodes = sys.argv[1], int(sys.argv[2])
t0, c0 = time.perf_counter(), time.process_time()
g = build_preset(preset, num_nodes=nodes)
t1, c1 = time.perf_counter(), time.process_time()
n = sum(1 for _, d in g.nodes(data=True) if d["kind"] == "gpu")
m = build_comm_model(g, n)
t2, c2 = time.perf_counter(), time.process_time()
same = [m.describe(), m.allreduce_s(1 << 20), m.allreduce_s(1 << 30)]
import networkx as nx
nodes, edges = list(g.nodes(data=True)), list(g.edges(data=True))
c3 = time.process_time()
h = nx.Graph()  # the same elements and links through networkx's API, one call each
for v, a in nodes:
    h.add_node(v, **a)
for u, v, a in edges:
    h.add_edge(u, v, **a)
c4 = time.process_time()
node, adj = {}, {}  # ... and written straight into the dicts, as the presets' Builder does
for v, a in nodes:
    node[v], adj[v] = a, {}
for u, v, a in edges:
    adj[u][v] = adj[v][u] = a
c5 = time.process_time()
print(json.dumps({"graph_s": t1 - t0, "graph_cpu_s": c1 - c0, "model_s": t2 - t1, "model_cpu_s": c2 - c1,
                  "api_cpu_s": c4 - c3, "direct_cpu_s": c5 - c4, "ranks": n, "same": same}))
"""


def probe(pythonpath: Path, preset: str, nodes: int) -> dict:
    env = dict(os.environ, PYTHONPATH=str(pythonpath))
    out = subprocess.run([sys.executable, "-c", PROBE, preset, str(nodes)], env=env, capture_output=True, text=True,
                         check=True, cwd=str(pythonpath))
    return json.loads(out.stdout.strip().splitlines()[-1])


def previous_tree(spec: str, tmp: Path) -> Path:
    """A checkout directory as it is, or a git revision's ``ddpsim`` package exported to ``tmp``."""
    if Path(spec).is_dir():
        return Path(spec).resolve()
    archive = subprocess.run(["git", "archive", spec, "ddpsim"], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tmp)], input=archive, check=True)
    return tmp


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="dgx-h100")
    ap.add_argument("--nodes", default="64,512,1024,2048,4096", help="comma-separated node counts")
    ap.add_argument("--previous", default=None, help="git revision or checkout directory to compare with")
    ap.add_argument("--previous-max-nodes", type=int, default=1024)
    args = ap.parse_args()
    counts = [int(x) for x in args.nodes.split(",")]
    with tempfile.TemporaryDirectory() as tmp:
        prev = previous_tree(args.previous, Path(tmp)) if args.previous else None
        print(f"# {args.preset}: wall (CPU) seconds per build, each in a fresh process"
              + (f"; previous code: {args.previous}" if prev else ""))
        print(f"{'nodes':>6} {'GPUs':>7} {'graph s':>14} {'model s':>14} {'total s':>14} {'API / direct writes':>20}"
              + (f" {'previous total s':>18} {'ratio wall (CPU)':>17} {'same':>5}" if prev else ""))
        for n in counts:
            cur = probe(ROOT, args.preset, n)
            line = (f"{n:>6} {cur['ranks']:>7} {cur['graph_s']:>7.2f} ({cur['graph_cpu_s']:4.2f})"
                    f" {cur['model_s']:>7.2f} ({cur['model_cpu_s']:4.2f}) {total(cur, ''):>7.2f} ({total(cur, 'cpu_'):4.2f})"
                    f" {api_ratio(cur):>19.2f}x")
            if prev is not None and n <= args.previous_max_nodes:
                old = probe(prev, args.preset, n)
                line += (f" {total(old, ''):>9.2f} ({total(old, 'cpu_'):6.2f})"
                         f" {total(old, '') / total(cur, ''):>7.1f}x ({total(old, 'cpu_') / total(cur, 'cpu_'):5.1f}x)"
                         f" {'yes' if old['same'] == cur['same'] else 'NO':>5}")
            print(line, flush=True)


def api_ratio(probed: dict) -> float:
    """Graph plus model CPU seconds with every element and link added through networkx's API, over
    those with the Builder's direct writes."""
    cpu = total(probed, "cpu_")
    return (cpu - probed["direct_cpu_s"] + probed["api_cpu_s"]) / cpu


def total(probed: dict, kind: str) -> float:
    """Graph plus model seconds (``kind`` '' for wall, 'cpu_' for CPU)."""
    return probed[f"graph_{kind}s"] + probed[f"model_{kind}s"]

if __name__ == "__main__":
    main()
