"""Where a predicted profiled run is off and which term is responsible: the report's findings,
one paragraph each, from :func:`ddpsim.validation.profile_compare.compare`'s data."""

from __future__ import annotations

from typing import Any, Sequence


def _ms(v: float | None) -> str:
    return "n/a" if v is None else f"{v * 1e3:.2f} ms"


def _span(values: Any) -> str:
    """``<min> to <max>`` of ``values``, in ms."""
    xs = list(values)
    return f"{_ms(min(xs))} to {_ms(max(xs))}"


def transfer_line(buckets: Sequence[dict[str, Any]]) -> dict[str, float] | None:
    """A least-squares line ``seconds = fixed_s + bytes / bandwidth`` through the buckets'
    fastest measured kernels (None with fewer than two sizes): a transfer grows with the bytes,
    a wait for the peers does not."""
    import numpy as np

    pts = [(b["size_bytes"], b["measured_transfer_bound_s"]) for b in buckets]
    if len({x for x, _ in pts}) < 2:
        return None
    slope, fixed = np.polyfit([x for x, _ in pts], [y for _, y in pts], 1)
    return {"fixed_s": float(fixed), "bytes_per_s": float(1.0 / slope) if slope > 0 else None}


def _term_error(t: dict[str, Any]) -> str:
    """One term's error and its share of the step's (none where the terms' errors cancel to 0)."""
    share = "the terms' errors cancel" if t["share_pct"] is None else f"{t['share_pct']:+.0f} % of the error"
    return f"{t['term']} {t['error_s'] * 1e3:+.2f} ms ({share})"


def findings(data: dict[str, Any]) -> list[str]:
    """Where the prediction is off and which term is responsible, one paragraph each."""
    pred, meas = data["predicted"], data["measured"]["mean"]
    busy = data["host_costs"]["gpu_busy"]
    err = pred["step_s"] - meas["step_s"]
    bound = meas.get("bound", "host-bound")
    shares = meas.get("paced", {})
    terms = sorted((t for t in data["terms"] if t["error_s"]), key=lambda t: -abs(t["error_s"]))
    out = [f"Step: predicted {_ms(pred['step_s'])}, measured {_ms(meas['step_s'])} (mean of {data['num_steps']} steps), "
           f"error {100 * err / meas['step_s']:+.1f} %. The run is {bound} on its critical path (host "
           f"{_ms(shares.get('host_s', 0.0))}, device {_ms(shares.get('device_s', 0.0))}, exposed communication "
           f"{_ms(shares.get('comm_s', 0.0))} per step; {_ms(busy['gpu_busy_s'])} of device work, kernels, copies and "
           f"sets merged, per {_ms(busy['step_s'])} step). The prediction follows the step's critical "
           "path (a phase begins when the CPU reaches it and the device has finished the work before it), so the "
           "compute is the profile's and the error is "
           "what the simulation adds: " + ("; ".join(_term_error(t) for t in terms[:4]) or "nothing") + "."]
    if "grad_copies" in {t["term"] for t in terms}:
        out.append(f"grad_copies: the simulation charged DDP's gradient copies {_ms(pred['grad_copies_s'])} where the "
                   f"profile measured {_ms(meas['grad_copies_s'])} (the copy-in runs inside the measured backward; the "
                   "copy-back is the measured one, carried into the prediction).")
    if "slower_rank" in {t["term"] for t in terms}:
        out.append(f"slower_rank: the simulated step waits {_ms(pred['slower_rank_s'])} on average for the slower rank: every "
                   "rank's compute is drawn per step from the profile's step-to-step spread and the engine's CPU meets its "
                   "device once per step, so each step pays the larger of the ranks' draws. A rank whose CPU runs ahead "
                   "of its collectives (a host-bound run's) absorbs such fluctuations instead; one rank's profile cannot "
                   "say how much of this term the real run paid.")
    inherited = [(f["step"], f["inherited_s"]) for f in data["measured"]["steps"] if f.get("inherited_s", 0.0) > 0]
    if inherited:
        out.append("Inherited device work: " + ", ".join(f"ProfilerStep#{n} began {_ms(t)} before the device finished work "
                                                         "launched before the profile" for n, t in inherited)
                   + "; that work is left out (the step starts when the device freed), so it does not lengthen the step.")
    out.append(_plan_finding(data["plan"]))
    out += _comm_findings(data)
    out.append(_overlap_finding(pred, meas))
    out.append(_host_finding(data["host_costs"]))
    return out


def _plan_finding(plan: dict[str, Any]) -> str:
    if not plan["recorded_numels"]:
        return (f"Buckets: the profile does not record the run's bucket sizes (its record_param_comms ops carry no "
                f"'In msg nelems'); ddpsim's plan ({', '.join(f'{n:,}' for n in plan['predicted_numels'])} elements) is "
                "matched with the run's all-reduces by index below.")
    if plan["matches"] is None:
        return (f"Buckets: the run has {plan.get('ddp_modules', 2)} DDP modules, each with its own buckets; no split of the "
                "run's buckets among them is what each module's own plan gives, so the plan is not checked against the "
                "run's buckets, and buckets are matched by index below.")
    if plan.get("modules"):
        per = "; ".join(f"module {k} ({', '.join(f'{n:,}' for n in m['predicted_numels'])} elements"
                        f"{', process group ' + m['process_group'] if m['process_group'] is not None else ''})"
                        for k, m in enumerate(plan["modules"]))
        return (f"Buckets: the run's {len(plan['modules'])} DDP modules, each planned on its own parameters (found by "
                f"{plan['split']}), give the run's own {len(plan['recorded_numels'])} buckets: {per}.")
    if plan["matches"]:
        return (f"Buckets: ddpsim's plan equals the run's own {len(plan['recorded_numels'])} buckets "
                f"({', '.join(f'{n:,}' for n in plan['recorded_numels'])} elements, launch order).")
    return (f"Buckets: ddpsim's plan ({', '.join(f'{n:,}' for n in plan['predicted_numels'])} elements) differs from the run's "
            f"({', '.join(f'{n:,}' for n in plan['recorded_numels'])}): buckets are matched by index below.")


def _comm_findings(data: dict[str, Any]) -> list[str]:
    bs = data["buckets"]
    if not bs:
        return ["All-reduces: no NCCL all-reduce kernel was launched from the backward (one rank, no NCCL kernels in "
                "the profile, or all-reduces outside DDP's autograd hooks)."]
    model = f"{bs[0]['model_algorithm']}/{bs[0]['model_protocol']}"
    ran = {b["measured_ran"] for b in bs}
    forced = [b["model_as_run_s"] for b in bs if b["model_as_run_s"] is not None]
    line = transfer_line(bs)
    text = (f"All-reduce time: the NCCL model ({model}) predicts {_span(b['model_s'] for b in bs)} per "
            f"bucket; the profile's kernels took {_span(b['measured_duration_s'] for b in bs)} (median over "
            f"steps), the fastest "
            f"{_span(b['measured_transfer_bound_s'] for b in bs)}. "
            f"They ran {'; '.join(sorted(ran))} (from the kernels' names and block sizes"
            + ("; '?': not told apart)" if any("?" in r for r in ran) else ")"))
    if forced:
        text += f"; with that forced the model gives {_span(forced)}"
    text += "."
    waits = _span(b["predicted_start_s"] - b["predicted_launch_s"] for b in bs)
    text += (f" The simulated all-reduces wait {waits} after rank 0's launch for the other rank (its compute "
             "drawn from the steps' spread) and the previous bucket; the measured kernels ran "
             f"{_span(b['measured_wait_mean_s'] for b in bs)} longer on average than their fastest step.")
    ranks = data["measured"]["buckets"][0].get("ranks") if data["measured"]["buckets"] else None
    if line is not None:
        bw = "no growth with size" if line["bytes_per_s"] is None else f"bytes / {line['bytes_per_s'] / 1e9:.1f} GB/s"
        text += (f" A line through the fastest kernels: {_ms(line['fixed_s'])} + {bw}. A transfer grows with the bytes; "
                 "what does not is waiting: an NCCL kernel starts when its rank launches it and spins until the peers "
                 "arrive, so its duration holds the wait for the slowest rank.")
    if ranks:
        text += " " + _rank_text(data)
    else:
        text += (" With one rank's profile the wait cannot be separated from the transfer (the fastest kernel is an "
                 "upper bound on it): give every rank's profile to measure it. The gap between the model and the "
                 "fastest kernel is therefore the per-bucket collective term's upper bound, not its measured error.")
    return [text]


def _rank_text(data: dict[str, Any]) -> str:
    """Every rank's profile: the transfers (last arrival to last completion) against the model,
    and per rank whom it waited for."""
    bs = [b for b in data["buckets"] if b.get("measured_transfer_s") is not None]
    out = []
    if bs:
        out.append(f"With every rank's profile each all-reduce's transfer (the last rank's arrival to the last completion) "
                   f"is {_span(b['measured_transfer_s'] for b in bs)} (median over steps); the NCCL model "
                   "is off by "
                   f"{_span(b['model_s'] - b['measured_transfer_s'] for b in bs)} on the transfers alone.")
        lasts = sorted({b["measured_last_rank"] for b in bs if b.get("measured_last_rank") is not None})
        out.append(f"The last to arrive: rank {', '.join(map(str, lasts))}.")
    waiting = [r for r in data.get("ranks", []) if r["wait_mean_s"]]
    if waiting:
        out.append("Per rank, its mean wait per bucket and for whom: " + "; ".join(
            f"rank {r['rank']} {_ms(r['wait_mean_s'])}" + (f" (for rank {r['waited_for']})" if r["waited_for"] is not None else "")
            for r in waiting) + ".")
    return " ".join(out)


def _overlap_finding(pred: dict[str, Any], meas: dict[str, Any]) -> str:
    def pct(v: float | None) -> str:
        return "n/a" if v is None else f"{100 * v:.0f} %"

    if meas["overlap_ratio"] is None:
        return "Overlap: the profile has no communication kernels in its steps."
    return (f"Overlap (HTA's get_comm_comp_overlap: communication time under computation kernels / communication time): "
            f"measured {pct(meas['overlap_ratio'])}; the predicted all-reduces over the profile's computation kernels "
            f"{pct(pred['overlap_ratio'])}; the engine's own figure {pct(pred['overlap_ratio_engine'])} counts its compute "
            "stream busy for the whole of each phase, which the device is not where the CPU paces the step (it idles "
            "between launches).")


def _host_finding(h: dict[str, Any]) -> str:
    m, d = h["measured"], h["defaults"]
    delays = [x["hook_to_launch_s"] for x in h["launch_delays"] if x["hook_to_launch_s"] is not None]
    ops = [x["launch_op_s"] for x in h["launch_delays"] if x["launch_op_s"] is not None]
    per_bucket = "" if not delays else (
        f" Per bucket, from its last gradient's AccumulateGrad to its launch: {_span(delays)} "
        f"(the hook; the model's median {_ms(m['hook_s_per_param'])}), the launch op {_span(ops)} "
        f"(bucket launch + enqueue: {_ms(m['bucket_launch_s'] + m['enqueue_s'])}).")
    return (f"Host costs measured on the CPU timeline (they replace ddpsim's defaults in this prediction): pre-forward "
            f"{_ms(m['pre_forward_s'])} (default {_ms(d['pre_forward_s'])}; DDP's _pre_forward and _sync_buffers), hook "
            f"{m['hook_s_per_param'] * 1e6:.0f} us per parameter (default {d['hook_s_per_param'] * 1e6:.0f}), bucket launch "
            f"{m['bucket_launch_s'] * 1e6:.0f} us + enqueue {m['enqueue_s'] * 1e6:.0f} us (defaults "
            f"{d['bucket_launch_s'] * 1e6:.0f} + {d['enqueue_s'] * 1e6:.0f}), kernel launches "
            f"{(h['kernel_launch_s_per_call'] or 0) * 1e6:.1f} us x {h['kernel_launches_per_step']:.0f} per step." + per_bucket
            + " Every op of a profiled run carries the profiler's own cost, so these are upper bounds for the same run unprofiled.")
