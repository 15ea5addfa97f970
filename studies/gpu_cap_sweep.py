"""Study: real DDP at several bucket_cap_mb on one GPU against ddpsim's prediction for each cap.

One command, prints a table and writes it to ``DIR/summary.md``; asserts nothing:

    python studies/gpu_cap_sweep.py [--dir reports/gpu-cap-sweep-1xh200] [--topology dgx-h200]

``DIR`` holds what ``bash studies/gpu_cap_sweep.sh DIR h200`` recorded on one GPU: per model two
rounds of ``executor round`` (one NCCL rank, fp32, SGD), each ONE launch that captures a slice of
the trace before every point and runs real DDP at each cap (``rounds-<model>/cap=<cap>.run<r>.json``,
``trace.round<r>.json``), the caps in opposite orders in the two rounds. Each round's trace is
simulated at world size 1 at every cap (:func:`ddpsim.api.sweep`); the table holds per cap the
real buckets and whether they equal ddpsim's plan (``plan_matches``, DDP's
``_get_ddp_logging_data()``), the predicted and measured step, and each cap's cost against DDP's
default cap, paired by round. One GPU cannot host two NCCL ranks: no all-reduce crosses a link,
so what a cap costs here is the Reducer's host work and the copies per bucket, not the network.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CAPS = ("default", "1", "5", "25", "100")


def measured(folder: Path, cap: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(folder.glob(f"cap={cap}.run*.json"))]


def predicted(folder: Path, topology: str) -> dict[str, list[float]]:
    """Per cap, the predicted step median of each round's own trace (seconds)."""
    from ddpsim import api

    out: dict[str, list[float]] = {c: [] for c in CAPS}
    for trace in sorted(folder.glob("trace.round*.json")):
        table = api.sweep(trace, topology=topology, world_size=1, nodes=1,
                          bucket_cap_mb=[None if c == "default" else float(c) for c in CAPS])
        for cap, step in zip(CAPS, table.iteration_p50_s):
            out[cap].append(float(step))
    return out


def host_ms(num_params: int, num_buckets: int) -> float:
    """The Reducer's host work per step that the engine charges (ddpsim/network/host_costs.py)."""
    from ddpsim.network.host_costs import HostCosts

    h = HostCosts()
    return 1e3 * (num_params * (h.hook_s_per_param + h.copy_back_s_per_param) + num_buckets * (h.bucket_launch_s + h.enqueue_s))


def model_rows(folder: Path, topology: str) -> list[dict]:
    pred = predicted(folder, topology)
    base = [m["summary"]["iteration_s"] for m in measured(folder, "default")]
    rows = []
    for cap in CAPS:
        runs = measured(folder, cap)
        meas = [m["summary"]["iteration_s"] for m in runs]
        n_buckets = len(runs[0]["real_buckets"]["sizes"])
        rows.append({"cap": cap, "buckets": n_buckets, "host_ms": host_ms(len(runs[0]["real_buckets"]["grad_ready_order"]), n_buckets),
                     "plan_matches": all(m["plan_matches"] for m in runs),
                     "pred_ms": 1e3 * statistics.fmean(pred[cap]), "meas_ms": [1e3 * x for x in meas],
                     "pred_cost_pct": 100 * (statistics.fmean(pred[cap]) / statistics.fmean(pred["default"]) - 1),
                     "meas_cost_pct": [100 * (x / b - 1) for x, b in zip(meas, base)]})
    return rows


def table(model: str, rows: list[dict], batch: int) -> list[str]:
    lines = [f"### {model} (batch {batch})", "",
             "| cap (MiB) | buckets | plan matches | host work (model) | predicted step | measured step, round 1 / 2 | error | "
             "cost vs default: predicted | measured, round 1 / 2 |", "|---|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        mean = statistics.fmean(r["meas_ms"])
        lines.append(f"| {r['cap']} | {r['buckets']} | {r['plan_matches']} | {r['host_ms']:.2f} | {r['pred_ms']:.2f} | "
                     f"{' / '.join(f'{x:.2f}' for x in r['meas_ms'])} | {100 * (r['pred_ms'] / mean - 1):+.1f} % | "
                     f"{r['pred_cost_pct']:+.2f} % | {' / '.join(f'{x:+.2f} %' for x in r['meas_cost_pct'])} |")
    spread = [abs(a - b) / statistics.fmean((a, b)) * 100 for r in rows for a, b in [r["meas_ms"][:2]]]
    worst = max(abs(statistics.fmean(r["meas_cost_pct"])) for r in rows)
    lines += ["", f"Run-to-run spread (the two rounds of one cap): median {statistics.median(spread):.1f} %, "
                  f"largest {max(spread):.1f} %. Largest measured cost of a cap, mean of the rounds: {worst:.2f} %"
                  + (" -- inside that spread." if worst <= max(spread) else "."), ""]
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=str(ROOT / "reports/gpu-cap-sweep-1xh200"))
    ap.add_argument("--topology", default="dgx-h200")
    args = ap.parse_args()
    folder = Path(args.dir)
    gpu = (folder / "gpu.txt").read_text().splitlines()
    lines = ["# Real DDP at five caps on one GPU: ddpsim against the runs", "",
             f"Made by `python studies/gpu_cap_sweep.py` from the runs in this folder (`bash studies/gpu_cap_sweep.sh`: "
             f"{gpu[1].split(',')[0]}, {gpu[2]}). One NCCL rank, fp32, SGD; per model two rounds, each one executor "
             "launch that runs every cap (caps in opposite orders) after a 2-step slice of the trace; 20 measured "
             "steps after 5. Predicted: each round's trace simulated at world size 1 on "
             f"`{args.topology}`, averaged over the rounds. Times in ms.", "",
             "One GPU cannot host two NCCL ranks, so no all-reduce crosses a link (NCCL runs a one-rank all-reduce "
             "in place, with no kernel): what a small cap costs here is the Reducer's host work per bucket "
             "(hook, launch, enqueue; `ddpsim/network/host_costs.py`) and the copies, on a CPU that runs ahead "
             "of the GPU. The host work column is what the engine charges the CPU per step for it (gradients x "
             "(hook + copy back) + buckets x (launch + enqueue)): at world size 1 it runs beside a backward of "
             "tens of ms, so the prediction is the same at every cap.", ""]
    for sub in sorted(folder.glob("rounds-*")):
        batch = measured(sub, "default")[0]["batch_size"]
        lines += table(sub.name.removeprefix("rounds-"), model_rows(sub, args.topology), batch)
    text = "\n".join(lines)
    print(text, end="")
    (folder / "summary.md").write_text(text)


if __name__ == "__main__":
    main()
