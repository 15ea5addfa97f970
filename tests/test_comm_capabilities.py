"""The comm model's declared capabilities (ddpsim.network.comm_model): their defaults, every
wrapper forwarding those of the model it wraps, and the engine reading them.

A wrapped model keeps its lanes, idle-launch extra, overheads and forward factor: a wrapper at
scale 1 simulates exactly as the model it wraps."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ddpsim.calibration.loader import calibration_from_dict
from ddpsim.engine.config import SimConfig
from ddpsim.engine.simulate import simulate
from ddpsim.errors import InputError
from ddpsim.network.collective_cost import build_comm_model
from ddpsim.network.comm_model import CAPABILITIES, AlphaBetaModel, CommModel, WrappedCommModel
from ddpsim.network.topology import build_preset
from ddpsim.pipeline.recommend import GridComm, ScaledComm
from ddpsim.pipeline.resampling import MID_HI_BYTES, MID_LO_BYTES
from ddpsim.plan.planner import explicit_plan
from ddpsim.trace.records import make_trace

MIB = 1024 * 1024
REQUIRED = ("backend", "num_ranks", "allreduce_s", "broadcast_s", "describe")


@dataclass(frozen=True)
class RichNet(CommModel):
    """1 MiB/s collectives declaring a value other than the default for every capability."""

    backend: str = "gloo"
    num_ranks: int = 4
    comm_lanes: int = 3
    ddp_forward_factor: float = 1.5
    iteration_overhead_s: float = 0.25
    broadcast_per_tensor_s: float = 0.0625

    def allreduce_s(self, size_bytes):
        return size_bytes / MIB

    def broadcast_s(self, size_bytes):
        return size_bytes / MIB

    def describe(self):
        return {"model": "rich-test"}

    @property
    def idle_launch_extra_s(self):
        return lambda size_bytes: 0.125

    def concurrent_rate(self, kind, size_bytes, n):
        return 0.75


def wrappers(base):
    return {"mid-size": ScaledComm(base, 1.25, lo_bytes=MID_LO_BYTES, hi_bytes=MID_HI_BYTES),
            "every size": ScaledComm(base, 1.25, 0.5),
            "GridComm": GridComm(base, 16 * MIB, num_points=16)}


def capabilities(m):
    return {"backend": m.backend, "num_ranks": m.num_ranks, "comm_lanes": m.comm_lanes,
            "ddp_forward_factor": m.ddp_forward_factor, "iteration_overhead_s": m.iteration_overhead_s,
            "broadcast_per_tensor_s": m.broadcast_per_tensor_s,
            "idle_launch_extra_s": None if m.idle_launch_extra_s is None else m.idle_launch_extra_s(4096),
            "concurrent_rate": m.concurrent_rate("allreduce", 4096, 2)}


def test_the_interface_lists_every_capability_and_the_defaults():
    members = {n for n in vars(CommModel) if not n.startswith("_")} | set(CommModel.__annotations__)
    assert members == set(REQUIRED) | set(CAPABILITIES)
    m = AlphaBetaModel(latency_s=0.0)
    assert capabilities(m) == {"backend": "alpha-beta", "num_ranks": 2, "comm_lanes": 1, "ddp_forward_factor": 1.0,
                               "iteration_overhead_s": 0.0, "broadcast_per_tensor_s": 0.0, "idle_launch_extra_s": None,
                               "concurrent_rate": 1.0}
    # every capability is forwarded by the wrappers' base
    assert all(name in vars(WrappedCommModel) for name in CAPABILITIES + ("backend", "num_ranks"))


@pytest.mark.parametrize("name", ["mid-size", "every size", "GridComm"])
def test_every_wrapper_forwards_every_capability(name):
    net = RichNet()
    w = wrappers(net)[name]
    assert isinstance(w, CommModel)
    assert capabilities(w) == capabilities(net) == {
        "backend": "gloo", "num_ranks": 4, "comm_lanes": 3, "ddp_forward_factor": 1.5, "iteration_overhead_s": 0.25,
        "broadcast_per_tensor_s": 0.0625, "idle_launch_extra_s": 0.125, "concurrent_rate": 0.75}
    assert w.broadcast_s(MIB) == net.broadcast_s(MIB)


def calibrated():
    """A gloo calibration with a queued curve (2 lanes) and a measured DDP overhead."""
    sizes = (4096, 65536, 1 << 20, 16 << 20)
    alpha, bw = 40e-6, 2.5e9
    doc = {"format": "ddpsim-calibration", "version": 1, "backend": "gloo", "world_size": 2, "device": "cpu",
           "environment": {"torch_version": "2.13.0+cpu", "hostname_hash": "abc"},
           "collectives": {"allreduce": [{"size_bytes": s, "time_s": alpha + s / bw, "num_samples": 20} for s in sizes],
                           "broadcast": []},
           "interference": {"compute_slowdown": 1.0, "comm_slowdown": 1.0, "details": {}},
           "allreduce_queued": [{"size_bytes": s, "time_s": 0.75 * (alpha + s / bw), "num_samples": 10} for s in sizes],
           "comm_threads": 2, "ddp_iteration_overhead_s": 2e-3}
    return build_comm_model(build_preset("cpu-gloo"), 2, calibration=calibration_from_dict(doc))


@pytest.mark.parametrize("name", ["mid-size", "every size", "GridComm"])
def test_a_wrapped_calibration_keeps_its_lanes_and_overhead(name):
    cal = calibrated()
    assert (cal.comm_lanes, cal.iteration_overhead_s) == (2, 2e-3)
    assert capabilities(wrappers(cal)[name]) == capabilities(cal)


def toy():
    return make_trace(model="toy", params=[(n, (MIB // 4,), "float32") for n in "abc"], ready_s=[0.75, 0.5, 0.25],
                      forward_s=0.5, backward_s=1.125, optimizer_s=0.125)


def figures(res):
    return res.spans, res.buckets, res.iterations


@pytest.mark.parametrize("net", [RichNet(), calibrated()], ids=["rich", "calibrated"])
def test_a_wrapper_at_scale_one_simulates_as_the_model_it_wraps(net):
    tr = toy()
    plan = explicit_plan(tr, [[2], [1], [0]])
    cfg = SimConfig(world_size=2, num_iterations=2, jitter="none")
    plain = simulate(tr, plan, net, cfg)
    for w in (ScaledComm(net, 1.0, lo_bytes=MID_LO_BYTES, hi_bytes=MID_HI_BYTES), ScaledComm(net, 1.0, 0.0)):
        assert figures(simulate(tr, plan, w, cfg)) == figures(plain)
    # the capabilities are in force: a plain model with the same times but the defaults differs
    if isinstance(net, RichNet):
        bare = AlphaBetaModel(latency_s=0.0, bandwidth_bytes_per_s=MIB, num_ranks=4, backend="gloo")
        assert figures(simulate(tr, plan, bare, cfg)) != figures(plain)
        assert any(s.name == "ddp overhead" for s in plain.spans)


@dataclass(frozen=True)
class DuckNet:
    """Answers collective times but declares no capabilities and does not subclass CommModel."""

    backend: str = "gloo"
    num_ranks: int = 2

    def allreduce_s(self, size_bytes):
        return 0.0

    def broadcast_s(self, size_bytes):
        return 0.0

    def describe(self):
        return {"model": "duck"}


def test_a_model_without_the_capabilities_is_refused_in_one_line():
    tr = toy()
    with pytest.raises(InputError, match=r"^comm: DuckNet is not accepted: it lacks comm_lanes, concurrent_rate, "
                                         r"idle_launch_extra_s, ddp_forward_factor, iteration_overhead_s, "
                                         r"broadcast_per_tensor_s; expected a ddpsim.network.comm_model.CommModel"):
        simulate(tr, explicit_plan(tr, [[2], [1], [0]]), DuckNet(), SimConfig(world_size=2, num_iterations=1, jitter="none"))
