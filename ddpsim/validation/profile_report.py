"""The folder ``ddpsim compare`` writes, atomically and byte-for-byte the same for the same data:
``compare.json`` (:func:`ddpsim.validation.profile_compare.compare`'s data, in seconds),
``summary.md`` (setup, findings, the step's terms, the buckets) and ``compare.png`` (one steady
iteration predicted above measured, :func:`ddpsim.validation.writer.timeline_figure`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ddpsim.io import write_text_atomic
from ddpsim.validation.profile_findings import findings
from ddpsim.validation.writer import bucket_errors, timeline_figure

POINT = "profiled run"


def write_compare_report(data: dict[str, Any], out: Path, *, plots: bool = True) -> list[Path]:
    """Write the report of ``data`` into ``out``; the paths written."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [write_text_atomic(out / "compare.json", json.dumps(data, indent=1, sort_keys=True) + "\n"),
             write_text_atomic(out / "summary.md", markdown(data))]
    if plots and data["buckets"]:
        from ddpsim.report.plots import save_figure

        paths.append(save_figure(figure(data), out / "compare.png"))
    return paths


def figure(data: dict[str, Any]) -> Any:
    """``validate``'s timeline figure of ``data`` as one point, titled for a profile."""
    def records(side: str) -> list[dict[str, Any]]:  # one side's launch/start/end per bucket
        return [{"bucket": b["bucket"], "size_bytes": b["size_bytes"], "launch_s": b[f"{side}_launch_s"],
                 "start_s": b[f"{side}_start_s"], "end_s": b[f"{side}_start_s"] + b[f"{side}_duration_s"]}
                for b in data["buckets"]]

    pred, meas = records("predicted"), records("measured")
    p, m = data["predicted"]["step_s"], data["measured"]["mean"]["step_s"]
    row = {"point": POINT, "predicted_s": p, "measured_s": m, "measured_hooked_s": m, "error_pct": 100.0 * (p - m) / m}
    buckets = {POINT: {"predicted": pred, "measured": meas, "errors": bucket_errors(pred, meas)}}
    fig = timeline_figure({"scenario": data["name"], "rows": [row], "buckets": buckets})
    fig.axes[1].set_title(f"measured (the profile: medians over steps {', '.join(map(str, data['steps']))})", fontsize=9, loc="left")
    fig.suptitle(f"{data['name']}: {data['gpu']} x {data['world_size']} (mean step: predicted {p * 1e3:.1f} ms, measured "
                 f"{m * 1e3:.1f} ms, error {100 * (p - m) / m:+.1f} %)\none steady iteration from DDP's forward, buckets in "
                 "launch order", fontsize=10)
    return fig


def _ms(v: Any) -> str:
    return "" if v is None else f"{v * 1e3:.3f}"


def markdown(data: dict[str, Any]) -> str:
    """``summary.md``: setup, findings, the step's terms, the buckets."""
    cap = "default (25)" if data["bucket_cap_mb"] is None else data["bucket_cap_mb"]
    if data.get("cap_from_buckets"):
        cap = f"{cap} (read off the run's buckets: the largest cap they allow)"
    lines = [f"# ddpsim compare: {data['name']}", "",
             f"Profiles: {', '.join(f'`{Path(p).name}`' for p in data['profiles'])} (steps {', '.join(map(str, data['steps']))}). "
             f"GPU {data['gpu']}, world size {data['world_size']}; simulated on `{data['topology']}` x {data['nodes']} "
             f"({data['comm'].get('model', data['comm'].get('backend'))} model), bucket_cap_mb "
             f"{cap}, host costs measured "
             "from the profile's CPU timeline. Every time in ms; a step's terms add up to its step on both sides.", "",
             "## Where the prediction is off", ""]
    lines += [f"- {f}" for f in findings(data)]
    lines += ["", "## The step, term by term", "", "| term | predicted | measured | predicted - measured | share of the error |",
              "|---|---:|---:|---:|---:|"]
    for t in data["terms"]:
        share = "" if t["share_pct"] is None else f"{t['share_pct']:+.0f} %"
        lines.append(f"| {t['term']} | {_ms(t['predicted_s'])} | {_ms(t['measured_s'])} | {t['error_s'] * 1e3:+.3f} | {share} |")
    p, m = data["predicted"]["step_s"], data["measured"]["mean"]["step_s"]
    lines.append(f"| **step** | **{_ms(p)}** | **{_ms(m)}** | **{(p - m) * 1e3:+.3f}** | |")
    lines += ["", "## Buckets (launch order; times from the step's start, measured: medians over the steps)", "",
              "| bucket | MiB | launch pred / meas | start pred / meas | all-reduce pred | model (algo/proto) | model, profile's algo/proto "
              "| measured median | fastest | mean wait | ran |", "|---:|---:|---|---|---:|---|---:|---:|---:|---:|---|"]
    for b in data["buckets"]:
        lines.append(f"| {b['bucket']} | {b['size_bytes'] / 2**20:.1f} | {_ms(b['predicted_launch_s'])} / {_ms(b['measured_launch_s'])} "
                     f"| {_ms(b['predicted_start_s'])} / {_ms(b['measured_start_s'])} | {_ms(b['predicted_duration_s'])} "
                     f"| {_ms(b['model_s'])} ({b['model_algorithm']}/{b['model_protocol']}) | {_ms(b['model_as_run_s'])} "
                     f"| {_ms(b['measured_duration_s'])} | {_ms(b['measured_transfer_bound_s'])} | {_ms(b['measured_wait_mean_s'])} "
                     f"| {b['measured_ran']} |")
    delays = data["host_costs"]["launch_delays"]
    if delays:
        lines += ["", "Per bucket on the CPU (medians over the steps): from its last gradient's AccumulateGrad to the "
                  "`c10d::allreduce_` that launches it, and that op:", "", "| bucket | hook to launch | launch op |",
                  "|---:|---:|---:|"]
        lines += [f"| {d['bucket']} | {_ms(d['hook_to_launch_s'])} | {_ms(d['launch_op_s'])} |" for d in delays]
    host = data["host_costs"]["measured"]
    lines += ["", "## Host costs for a scenario", "", "DDP's host costs measured on this profile's CPU timeline, as a "
              "scenario's `cost_model` takes them (they include the profiler's own cost per op):", "", "```yaml",
              "cost_model:", "  host: true"] + [f"  {k}: {v:.6g}" for k, v in host.items()] + ["```"]
    lines += ["", "How each figure is taken and how the error is attributed: docs/MODEL.md, \"Comparing with a profile\".", ""]
    return "\n".join(lines)
