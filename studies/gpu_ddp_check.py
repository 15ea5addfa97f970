"""Study: ddpsim's single-rank DDP step on a GPU against real DDP on that GPU.

One command, prints a table and writes it to ``DIR/summary.md``; asserts nothing:

    python studies/gpu_ddp_check.py [--dir reports/gpu-ddp-1xh100]

``DIR`` holds what ``bash studies/gpu_ddp_check.sh DIR h100`` recorded on one GPU: per model a
trace captured there (``<model>.fp32.measured.<gpu>.json``, ``ddpsim trace --device cuda``) and a
real DDP run of the same model and batch (``ddp-<model>.<gpu>.json``, ``executor ddp`` under
torchrun, one NCCL rank, 20 measured iterations after 5). The trace is simulated through
:func:`ddpsim.api.sweep` on ``dgx-<gpu>`` at world size 1 and DDP's default cap; the table holds
the predicted and measured step medians, the measured p10-p90 spread, and whether real DDP's
rebuilt buckets equal ddpsim's plan (``plan_matches``, from DDP's ``_get_ddp_logging_data()``).
One GPU cannot host two NCCL ranks, so no all-reduce crosses a link: this checks the trace, the
reducer's host and copy costs and the step composition, not the network.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def rows(folder: Path) -> list[dict]:
    from ddpsim import api

    out = []
    for ddp_file in sorted(folder.glob("ddp-*.json")):
        model, gpu = ddp_file.name.removeprefix("ddp-").removesuffix(".json").rsplit(".", 1)
        meas = json.loads(ddp_file.read_text())
        s = meas["summary"]
        table = api.sweep(folder / f"{model}.fp32.measured.{gpu}.json", topology=f"dgx-{gpu}", world_size=1, nodes=1,
                          bucket_cap_mb=[None])
        pred = table.iloc[0]
        out.append({"model": model, "gpu": gpu, "batch": meas["batch_size"],
                    "predicted_ms": pred.iteration_p50_s * 1e3, "measured_ms": s["iteration_s"] * 1e3,
                    "p10_ms": s["iteration_p10_s"] * 1e3, "p90_ms": s["iteration_p90_s"] * 1e3,
                    "forward_pred_ms": pred.forward_s * 1e3, "forward_meas_ms": s["forward_s"] * 1e3,
                    "plan_matches": meas.get("plan_matches")})
    return out


def other_captures(r: dict) -> list[str]:
    """The forward / backward of the bundled traces measured with the same model, batch and precision."""
    from ddpsim.trace.records import load_trace

    out = []
    for path in sorted((ROOT / "traces").glob(f"{r['model']}.*measured.{r['gpu']}.json")):
        tr = load_trace(path)
        env = tr.environment
        if env["batch_size"] == r["batch"] and not env.get("autocast"):
            out.append(f"`{path.name}` {tr.phase('forward').median_s * 1e3:.2f} / {tr.phase('backward').median_s * 1e3:.2f}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=str(ROOT / "reports/gpu-ddp-1xh100"))
    folder = Path(ap.parse_args().dir)
    lines = ["# Single-rank DDP on a GPU: ddpsim against real DDP", "",
             "Made by `python studies/gpu_ddp_check.py` from the runs in this folder (`bash studies/gpu_ddp_check.sh`; "
             "one NCCL rank, fp32, SGD, DDP's default cap). Times in ms; the measured step is the median of 20 "
             "iterations with its p10-p90 spread.", "",
             "| model | predicted step | measured step (p10-p90) | error | forward pred / meas | plan matches real DDP |",
             "|---|---:|---:|---:|---:|---|"]
    rows_ = rows(folder)
    for r in rows_:
        err = 100 * (r["predicted_ms"] / r["measured_ms"] - 1)
        inside = r["p10_ms"] <= r["predicted_ms"] <= r["p90_ms"]
        lines.append(f"| {r['model']} ({r['gpu']}, batch {r['batch']}) | {r['predicted_ms']:.2f} | {r['measured_ms']:.2f} "
                     f"({r['p10_ms']:.2f}-{r['p90_ms']:.2f}) | {err:+.1f} %{' (inside the spread)' if inside else ''} | "
                     f"{r['forward_pred_ms']:.2f} / {r['forward_meas_ms']:.2f} | {r['plan_matches']} |")
    lines += ["", "Other captures of the same model, batch and precision on the same kind of GPU (`traces/`), forward / "
                  "backward medians in ms: how far a host-bound model's own phases move from one capture to the next."]
    lines += [f"- {r['model']}: " + ", ".join(others) for r in rows_ if (others := other_captures(r))] or ["- none"]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    (folder / "summary.md").write_text(text)


if __name__ == "__main__":
    main()
