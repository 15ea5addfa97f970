"""Measured collective costs: the calibration file (``python -m executor collectives``; its keys in
:mod:`ddpsim.calibration.schema`, their meaning in docs/MODEL.md and docs/VALIDATION.md) read into a
comm model. Every curve is a piecewise alpha-beta between measured sizes
(:mod:`ddpsim.network.curve_fit`); measured at ``w`` ranks it applies to ``n`` the ring way: each
segment's latency scales with ``(n-1)/(w-1)``, its per-byte cost with ``((n-1)/n) / ((w-1)/w)``.
DDP's fixed cost per iteration is recomputed (:func:`consistent_ddp_overhead`), the probe's
compute slowdown fitted (:mod:`ddpsim.calibration.interference_fit`).
"""

from __future__ import annotations

import functools
import hashlib
import json
import math
import statistics
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping

from ddpsim.calibration import nccl_tests
from ddpsim.calibration.interference_fit import fit_probe
from ddpsim.calibration.schema import CalibrationDoc, ProbeDoc
from ddpsim.errors import InputError, require, shorten
from ddpsim.io import MAX_JSON_BYTES, read_bytes, read_json, write_text_atomic
from ddpsim.network.comm_model import CollectiveEstimate, EstimatingCommModel, make_estimate
from ddpsim.network.curve_fit import CalibratedCurve, fit_curve, idle_extra_between
from ddpsim.network.interference import Interference
from ddpsim.schema import validate

#: other load (% of the host's CPUs) above which a probe's fit is not this host's
PROBE_MAX_OTHER_PCT = 10.0


@dataclass(frozen=True, kw_only=True)
class Calibration:
    """A validated calibration file (``doc``) and the model ddpsim derives from it; the file's
    other figures read as its own (``cal.backend`` is ``cal.doc.backend``)."""

    doc: CalibrationDoc
    #: the engine's slowdowns: the file's microbenchmark, or with its compute slowdown fitted to the probe
    interference: Interference | None = None
    #: the executor's microbenchmark slowdowns, when ``interference`` was fitted to its DDP probe
    interference_microbenchmark: Interference | None = None
    #: how the probe fit went (:func:`ddpsim.calibration.interference_fit.fit_probe`'s record), or None
    interference_fit: Mapping[str, Any] | None = None
    #: DDP's fixed cost per iteration: the file's, or recomputed by :func:`consistent_ddp_overhead`
    ddp_iteration_overhead_s: float | None = None
    #: the file's ``ddp_iteration_overhead_s`` when :func:`consistent_ddp_overhead` recomputed it, else None
    ddp_iteration_overhead_measured_s: float | None = None
    #: the probe's forward under DDP / its trace's (:func:`probe_forward_factor`; the probe fit only), or None
    probe_forward_factor: float | None = None

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "doc":  # copy and pickle probe the class before ``doc`` is set
            raise AttributeError(name)
        return getattr(self.doc, name)

    @property
    def probe_host_other_pct(self) -> float | None:
        """The host's CPUs busy with other work during the probe's DDP steps (%, ``/proc/stat``), or None."""
        return None if self.interference_probe is None else self.interference_probe.host_other_pct

    @functools.cached_property
    def probe_round_fits(self) -> tuple[float, ...]:
        """The compute slowdown fitted to each probe round alone, as :func:`fit_probe` fits them
        pooled: how far the fit moves with the host's moment. Empty without the microbenchmark or
        two rounds."""
        probe, mb = self.interference_probe, self.interference_microbenchmark
        if mb is None or probe is None or (probe.rounds or 0) < 2 or not probe.ddp_step_samples_s:
            return ()
        its, samples, rounds = probe.trace.iterations, probe.ddp_step_samples_s, probe.rounds
        n, m = len(its) // rounds, len(samples) // rounds
        if n < 1 or m < 1:
            return ()
        return tuple(fit_probe(replace(probe.trace, iterations=its[k * n:(k + 1) * n]),
                               statistics.median(samples[k * m:(k + 1) * m]), self, probe.bucket_cap_mb,
                               mb)["compute_slowdown"] for k in range(rounds))

    def warning(self) -> str | None:
        """One line when this calibration should not be trusted, else None; every command predicting
        with it prints it: the probe fit hit its bound (:func:`clamped_fit_warning`), or other work held
        more than :data:`PROBE_MAX_OTHER_PCT` of the host's CPUs during the probe's DDP steps (its
        fitted slowdown inflated: docs/VALIDATION.md)."""
        warn, other = clamped_fit_warning(self.interference_fit), self.probe_host_other_pct
        if warn or other is None or other <= PROBE_MAX_OTHER_PCT:
            return warn
        return (f"the calibration's DDP probe ran while other work held {other:.0f} % of the host's CPUs (more than "
                f"{PROBE_MAX_OTHER_PCT:g} %): its fitted compute slowdown is that load's, not this host's; re-calibrate "
                f"(executor collectives) on a quiet host before trusting these predictions")

    def comm_model(self, base: Any, *, ddp_forward_factor: float = 1.0) -> "CalibratedCommModel":
        """``base`` (the analytical CommModel of the same topology) answering from this calibration's
        curves (:func:`ddpsim.network.collective_cost.build_comm_model` with a calibration)."""
        if self.backend != base.backend:
            raise InputError(f"calibration.backend: {self.backend!r} does not match the topology's backend "
                             f"{base.backend!r}; expected a calibration measured with {base.backend}")
        factor = float(ddp_forward_factor)
        return CalibratedCommModel(calibration=self, base=base, num_ranks=base.num_ranks,
                                   backend=base.backend, ddp_forward_factor=factor, **self.curves)

    @functools.cached_property
    def curves(self) -> dict[str, CalibratedCurve | None]:
        """Each measured curve fitted piecewise (:func:`fit_curve`), once per calibration."""
        curves = {"allreduce": self.collectives.allreduce, "broadcast": self.collectives.broadcast,
                  "allreduce_after_compute": self.allreduce_after_compute, "allreduce_queued": self.allreduce_queued}
        return {k: fit_curve(pts) if pts else None for k, pts in curves.items()}


def calibration_from_dict(data: Any, source: str = "calibration") -> Calibration:
    """Validate a parsed calibration JSON document (:class:`ddpsim.calibration.schema.CalibrationDoc`)
    and derive its model. InputError names ``source`` and the first bad key."""
    doc = validate(CalibrationDoc, data, source)
    mb = None if doc.interference is None else doc.interference.build()
    cal = Calibration(doc=doc, interference=mb, ddp_iteration_overhead_s=doc.ddp_iteration_overhead_s)
    recomputed = consistent_ddp_overhead(cal)
    if recomputed is not None:
        cal = replace(cal, ddp_iteration_overhead_s=recomputed,
                      ddp_iteration_overhead_measured_s=doc.ddp_iteration_overhead_s)
    probe = doc.interference_probe
    if probe is None:
        return cal
    cal = replace(cal, probe_forward_factor=probe_forward_factor(probe, cal.ddp_iteration_overhead_s or 0.0, source))
    if mb is not None:
        # the engine's compute slowdown, fitted to real DDP on the probe (ddpsim.calibration.interference_fit)
        fit = fit_probe(probe.trace, probe.ddp_step_s, cal, probe.bucket_cap_mb, mb)
        cal = replace(cal, interference=replace(mb, compute_slowdown=fit["compute_slowdown"]),
                      interference_microbenchmark=mb, interference_fit=fit)
    return cal


def consistent_ddp_overhead(cal: Calibration) -> float | None:
    """The DDP overhead at which the engine reproduces the executor's tiny-model DDP step:
    ``max(0, ddp_step_s - bare_step_s - copy_s - (loop(n) + extra(n)))`` at its ``gradient_bytes``
    n. That step's one all-reduce is launched onto an idle stream, so the engine charges it the
    idle-launch extra (:func:`idle_extra_between`) on top of the loop curve, which the executor's
    residue, taken against the loop curve alone, would count twice. None when there is nothing
    to recompute (no overhead, no after-compute curve, no step figures: ``ddp_overhead``)."""
    d = cal.ddp_overhead
    if (cal.ddp_iteration_overhead_s is None or not cal.allreduce_after_compute or d is None
            or None in (d.gradient_bytes, d.ddp_step_s, d.bare_step_s, d.copy_s)):
        return None
    loop, after = cal.curves["allreduce"], cal.curves["allreduce_after_compute"]
    charged = loop.time_s(d.gradient_bytes) + idle_extra_between(loop, after, d.gradient_bytes)
    return max(0.0, d.ddp_step_s - d.bare_step_s - d.copy_s - charged)


def probe_forward_factor(probe: ProbeDoc, overhead_s: float, source: str = "calibration") -> float | None:
    """How much slower the probe's forward runs under DDP than in its trace: ``(median DDP forward
    - the DDP overhead) / (median trace forward + zero_grad)`` (the executor's forward phase spans
    both), floored at 1; None without phase samples. Forward overlaps no all-reduce, so the probe
    fit stretches the probe's forward by it and leaves only the rest of the gap to
    ``compute_slowdown``; other models do not get it (it makes their predictions worse:
    docs/VALIDATION.md)."""
    if probe.ddp_phase_samples_s is None:  # a calibration without the probe's DDP phases
        return None
    fwd = probe.ddp_phase_samples_s.get("forward_s")
    require(bool(fwd), f"{source}: interference_probe.ddp_phase_samples_s.forward_s", fwd,
            "a non-empty list of seconds >= 0")
    tf = statistics.median(it.forward_s + it.zero_grad_s for it in probe.trace.iterations)
    if not tf > 0:
        return None
    return max(1.0, (statistics.median(fwd) - overhead_s) / tf)


def clamped_fit_warning(fit: Mapping[str, Any] | None) -> str | None:
    """One line when the probe fit ran into the bisection's bound (no fit: every overlapped
    all-reduce over-charged), else None."""
    if not fit or not fit.get("clamped"):
        return None
    return (f"the calibration's probe fit hit its bound: compute_slowdown {fit['compute_slowdown']:g} gives a "
            f"{fit['predicted_step_s'] * 1e3:.1f} ms probe step, the probe measured {fit['measured_step_s'] * 1e3:.1f} ms "
            f"({fit['predicted_without_interference_s'] * 1e3:.1f} ms without interference); the probe run was probably "
            f"disturbed: re-calibrate (executor collectives) before trusting these predictions")


def load_calibration(path: str | Path) -> Calibration:
    """Read and validate a calibration JSON file, or an nccl-tests ``all_reduce_perf`` log
    (:mod:`ddpsim.calibration.nccl_tests`)."""
    expected = "a ddpsim-calibration JSON file (executor collectives) or an nccl-tests all_reduce_perf log"
    try:
        data = read_json(path, "calibration", expected)
    except InputError:
        text = read_bytes(path, "calibration", expected, MAX_JSON_BYTES).decode("utf-8", errors="replace")
        if not nccl_tests.looks_like(text):
            raise
        data = nccl_tests.calibration_doc(text, f"calibration {shorten(str(path))}")
    # NOTE: a probe costs a fit (~40 simulations) per load, and a sweep loads once per point: keep
    # the (immutable) result per document
    key = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()
    if key not in _LOADED:
        _LOADED[key] = calibration_from_dict(data, source=f"calibration {shorten(str(path))}")
    return _LOADED[key]


_LOADED: dict[str, Calibration] = {}


def save_calibration(cal: Calibration, path: str | Path) -> Path:
    """Write ``cal``'s file (:attr:`Calibration.doc`) as JSON atomically."""
    return write_text_atomic(path, json.dumps(cal.doc.model_dump(mode="json"), indent=1) + "\n")


# ---- the comm model ----------------------------------------------------------------------

@dataclass(frozen=True, kw_only=True)
class CalibratedCommModel(EstimatingCommModel):
    """A CommModel answering from the calibration's curves, each fitted piecewise
    (:func:`ddpsim.network.curve_fit.fit_curve`); ``base`` (the analytical model of the same
    topology) answers what was not measured (broadcast when absent)."""

    calibration: Calibration
    base: Any
    num_ranks: int
    backend: str
    allreduce: CalibratedCurve
    broadcast: CalibratedCurve | None
    allreduce_after_compute: CalibratedCurve | None
    allreduce_queued: CalibratedCurve | None
    #: the engine multiplies every forward by it: 1, except in the probe fit's own prediction of
    #: the probe (:func:`ddpsim.calibration.interference_fit.predict_probe`)
    ddp_forward_factor: float = 1.0

    def _estimate(self, curve: CalibratedCurve, size: int, coll: str) -> CollectiveEstimate:
        """``curve`` at ``size``, rescaled from the calibration's rank count (module docstring)."""
        n, w = self.num_ranks, self.calibration.world_size
        a, per_byte = curve.segment(size) if n > 1 and size > 0 else (0.0, 0.0)
        if n != w:
            if coll == "allreduce":
                a *= (n - 1) / (w - 1)
                per_byte *= ((n - 1) / n) / ((w - 1) / w)
            else:
                a *= math.ceil(math.log2(n)) / math.ceil(math.log2(w))
        t = a + per_byte * size
        return make_estimate(size, t, n, "calibrated" if t > 0 else "none", "measured" if t > 0 else "none", coll=coll)

    @property
    def iteration_overhead_s(self) -> float:
        """DDP's measured fixed cost per synchronised step (0 when the calibration has none)."""
        return float(self.calibration.ddp_iteration_overhead_s or 0.0)

    @property
    def broadcast_per_tensor_s(self) -> float:
        """DDP's forward buffer broadcast per buffer beyond the broadcast (0 when not measured)."""
        return float(self.calibration.broadcast_per_tensor_s or 0.0)

    @property
    def idle_launch_extra_s(self):
        """``f(size_bytes) -> seconds`` an all-reduce launched after compute costs beyond the back-to-back
        curve (:func:`idle_extra_between`; not rescaled to other rank counts), or None without
        ``allreduce_after_compute``."""
        if self.allreduce_after_compute is None:
            return None
        if self.num_ranks < 2:
            return lambda size_bytes: 0.0
        return functools.partial(idle_extra_between, self.allreduce, self.allreduce_after_compute)

    @property
    def comm_lanes(self) -> int:
        """Collectives of the process group that progress at once: the calibration's
        ``comm_threads`` when it measured the queued curve (``allreduce_queued``), else 1."""
        if self.allreduce_queued is None or self.num_ranks < 2:
            return 1
        return int(self.calibration.comm_threads or 1)

    def concurrent_rate(self, kind: str | None, size_bytes: int, n: int) -> float:
        """The pace of one collective of ``size_bytes`` while ``n`` progress at once, as a
        fraction of its pace alone. ``lanes`` threads working a queue of all-reduces finish one
        every ``q(s)`` (the queued curve) where one alone takes ``b(s)`` (the loop curve); so each
        of ``n`` in progress runs at ``b / (n q)``, at least ``1/n`` (never slower than sharing one
        lane). It may exceed 1: a blocking op's ``b`` holds the wake-up of the threads that hand
        it over, which a queue worked back to back does not pay. The size is clamped to the queued curve's largest
        (beyond it the ratio stays that of the largest); every kind of collective paced as an
        all-reduce of its bytes. Measured at the calibration's rank count, used as is for any other."""
        queued = self.allreduce_queued
        if queued is None or n <= 1:
            return 1.0
        s = max(1, min(int(size_bytes), max(queued.sizes)))
        b, q = self.allreduce.time_s(s), queued.time_s(s)
        return max(1.0 / n, b / (n * q)) if q > 0 else 1.0

    def estimate_allreduce(self, size_bytes: int) -> CollectiveEstimate:
        return self._estimate(self.allreduce, size_bytes, "allreduce")

    def estimate_broadcast(self, size_bytes: int) -> CollectiveEstimate:
        if self.broadcast is None:
            return self.base.estimate_broadcast(size_bytes)
        return self._estimate(self.broadcast, size_bytes, "broadcast")

    def describe(self) -> dict[str, Any]:
        ar = self.allreduce
        extra = {} if self.allreduce_after_compute is None else {
            "allreduce_after_compute_points": len(self.allreduce_after_compute.sizes)}
        if self.allreduce_queued is not None:
            extra["allreduce_queued_points"] = len(self.allreduce_queued.sizes)
            extra["comm_lanes"] = self.comm_lanes
        measured = ("ddp_iteration_overhead_measured_s", "broadcast_per_tensor_s", "probe_forward_factor")
        extra.update({k: getattr(self.calibration, k) for k in measured if getattr(self.calibration, k) is not None})
        if self.ddp_forward_factor != 1.0:
            extra["ddp_forward_factor"] = self.ddp_forward_factor
        return {"model": "calibrated", "fit": "piecewise alpha-beta between measured sizes",
                "backend": self.backend, "num_ranks": self.num_ranks,
                "calibration_world_size": self.calibration.world_size,
                "rescaled_to_num_ranks": self.num_ranks != self.calibration.world_size,
                "allreduce_points": len(ar.sizes), "allreduce_alpha_s": ar.alpha_s,
                "allreduce_bandwidth_bytes_per_s": ar.bandwidth_bytes_per_s,
                "broadcast_points": len(self.broadcast.sizes) if self.broadcast else 0,
                "ddp_iteration_overhead_s": self.iteration_overhead_s, **extra,
                "environment": dict(self.calibration.environment), "base": self.base.describe()}
