"""Study: how far does the re-timed GPU trace move ddpsim's answers, against a trace measured on that GPU?

One command, prints figures, asserts nothing:

    python studies/retime_vs_measured.py [--gpu h100] [--nodes 2,8]

For GPT-2 1.5B (batch 8 x 1024 tokens, bf16 autocast, SGD), the same ``bucket_cap_mb`` sweep on
``dgx-<gpu>`` clusters is run twice through :func:`ddpsim.api.sweep`: once with the trace
re-timed from the CPU capture (``traces/gpt2-1.5b.<gpu>.json``: the roofline of
:mod:`ddpsim.trace.retime`) and once with the trace measured on the GPU itself
(``traces/gpt2-1.5b.measured.<gpu>.json``: ``ddpsim trace --device cuda``). Printed per cap: the
step (median), exposed communication and the best cap of each; then the step error the retime
brings and whether the choice of cap survives it. The re-timed trace must have been made at the
measured trace's batch (the script says when it was not and re-times one that matches).
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CAPS = (None, 5, 10, 25, 50, 100, 200, 400)


def matching_retime(gpu: str):
    """The bundled re-timed trace if it has the measured trace's batch, sequence and autocast; else a fresh retime."""
    from ddpsim.trace.records import load_trace
    from ddpsim.trace.retime import retime_trace_file

    meas = load_trace(ROOT / f"traces/gpt2-1.5b.measured.{gpu}.json")
    env = meas.environment
    want = (env["batch_size"], env.get("seq_len"), env.get("autocast"))
    bundled = ROOT / f"traces/gpt2-1.5b.{gpu}.json"
    if bundled.exists():
        tr = load_trace(bundled)
        if (tr.environment["batch_size"], tr.environment.get("seq_len"), tr.environment.get("autocast")) == want:
            return meas, tr, bundled.name
    tr = retime_trace_file(ROOT / "traces/gpt2-1.5b.cpu.json", gpu=gpu, batch_size=want[0], seq_len=want[1],
                           autocast=want[2] or "none")
    return meas, tr, f"retime at batch {want[0]} (the bundled one differs)"


def main() -> None:
    from ddpsim import api

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpu", default="h100", help="h100 or h200: a GPU with a measured GPT-2 1.5B trace")
    ap.add_argument("--nodes", default="2,8", help="cluster sizes in nodes, comma-separated")
    args = ap.parse_args()
    meas, ret, label = matching_retime(args.gpu)
    print(f"GPT-2 1.5B on dgx-{args.gpu}: re-timed ({label}) against measured ({meas.environment['device_name']})")
    for ph in ("forward", "backward", "optimizer"):
        r, m = ret.phase(ph).median_s, meas.phase(ph).median_s
        print(f"  {ph:9s} re-timed {r * 1e3:8.2f} ms, measured {m * 1e3:8.2f} ms ({100 * (r / m - 1):+.1f} %)")
    for nodes in (int(n) for n in args.nodes.split(",")):
        tables = {name: api.sweep(tr, topology=f"dgx-{args.gpu}", world_size=None, nodes=nodes, bucket_cap_mb=CAPS)
                  for name, tr in (("retimed", ret), ("measured", meas))}
        print(f"\n{nodes} node(s), {nodes * 8} GPUs: step p50 / exposed comm (ms) per cap")
        print(f"{'cap':>8s} {'re-timed':>18s} {'measured':>18s} {'step error':>10s}")
        rt, mt = tables["retimed"], tables["measured"]
        for (_, r), (_, m) in zip(rt.iterrows(), mt.iterrows()):
            err = 100 * (r.iteration_p50_s / m.iteration_p50_s - 1)
            print(f"{r.point.removeprefix('cap='):>8s} {r.iteration_p50_s * 1e3:9.1f} / {r.exposed_comm_s * 1e3:5.1f} "
                  f"{m.iteration_p50_s * 1e3:9.1f} / {m.exposed_comm_s * 1e3:5.1f} {err:+9.1f}%")
        best = {k: t.loc[t.iteration_p50_s.idxmin()] for k, t in tables.items()}
        at_retimed_best = mt.loc[mt.point == best["retimed"].point].iteration_p50_s.iloc[0]
        print(f"best cap: re-timed {best['retimed'].point}, measured {best['measured'].point}; the re-timed choice costs "
              f"{100 * (at_retimed_best / best['measured'].iteration_p50_s - 1):+.2f} % on the measured trace")


if __name__ == "__main__":
    main()
