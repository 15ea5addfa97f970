"""Per-bucket host costs: the model's terms against the committed profiles, bucket by bucket.

The hand-worked case checks the measurement (what a hook, an enqueue and a bucket launch are in
a Kineto trace); the per-profile cases check the model (a bucket of ``n`` gradients costs
``n * hook + bucket launch + enqueue``) against every bucket of every committed profile.
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from ddpsim.network import host_cost_profiles as hp
from ddpsim.network import host_costs
from ddpsim.trace.profile.kineto import CpuOp, KinetoProfile, RuntimeCall

DATA = Path(__file__).parent / "data"
PROFILES = sorted(DATA.glob("*_ddp_*_rank0.json.gz"))


def _op(name: str, ts: float, dur: float) -> CpuOp:
    return CpuOp(name=name, cat="cpu_op", ts=ts, dur=dur, tid=1, ext_id=None, args=None)


def _call(name: str, ts: float, dur: float) -> RuntimeCall:
    return RuntimeCall(name=name, ts=ts, dur=dur, tid=1, correlation=None)


def _hand_worked() -> KinetoProfile:
    """One step, one bucket of two gradients. Probe op: 1 us per event.

    gradient 0 (t=100): span 30, AccumulateGrad 5, one mul_out (10) holding one 2 us launch:
        hook = (30 - 3 nested x 1) - (5 - 0) = 22 us
    gradient 1 (t=200): span 200, AccumulateGrad 5, a mul_out (10, one 2 us launch) and a
        c10d::allreduce_ (150) holding record_param_comms (100) holding a launch that took 52 us
        where the profile's launches take 2 us (50 us blocked on the launch queue):
        enqueue = 100 - 1 nested x 1 - 50 blocked = 49 us
        closing hook = (200 - 6 nested x 1 - 50) - 5 = 139 us
        bucket launch = 139 - 49 - 22 = 68 us
    """
    ev = hp.EVALUATE_ACCUMULATE
    cpu = [_op("ProfilerStep#1", 0, 1000), _op(hp.PROBE_OP, 10, 1), _op(hp.PROBE_OP, 20, 1), _op(hp.PROBE_OP, 30, 1),
           _op(ev, 100, 30), _op(hp.ACCUMULATE_GRAD, 101, 5), _op("mul_out", 110, 10),
           _op(ev, 200, 200), _op(hp.ACCUMULATE_GRAD, 201, 5), _op("mul_out", 210, 10),
           _op(hp.ALLREDUCE_OP, 230, 150), _op(hp.COMMS_OP, 240, 100)]
    rt = [_call("cudaLaunchKernel", 112, 2), _call("cudaLaunchKernel", 212, 2), _call("cudaLaunchKernel", 250, 52),
          _call("cudaLaunchKernel", 500, 2), _call("cudaLaunchKernel", 510, 2)]
    return KinetoProfile(path="hand-worked", cpu_ops=cpu, runtime=rt)


def test_hand_worked_bucket_terms():
    m = hp.measure(_hand_worked())
    (b,) = m.buckets
    assert b.num_params == 2
    assert b.hooks_s == pytest.approx((22e-6, 139e-6))
    assert b.enqueue_s == pytest.approx(49e-6)
    assert m.hook_s_per_param == pytest.approx(22e-6)
    assert m.bucket_launch_s == pytest.approx(68e-6)
    assert m.enqueue_s == pytest.approx(49e-6)
    # the model with the measured terms gives the bucket back exactly (one bucket: no spread)
    assert hp.model_bucket_s(m, 2) == pytest.approx(b.host_s)


def test_hand_worked_uncorrected_keeps_the_profiler_in():
    m = hp.measure(_hand_worked(), correct=False)
    assert m.buckets[0].hooks_s == pytest.approx((25e-6, 145e-6))  # 3 and 6 nested events back in


def test_host_bound_is_relative_to_the_other_profiles():
    assert hp.host_bound([0.5, 0.6, 0.4, 0.5, 10.0]) == [False, False, False, False, True]
    assert hp.host_bound([10.0, 12.0, 11.0]) == [False, False, False]  # all slow alike: none stands out


@pytest.fixture(scope="module")
def measured() -> dict[str, hp.ProfileHostCosts]:
    return {Path(m.source).name: m for m in hp.measure_all(PROFILES)}


@pytest.fixture(scope="module")
def bound(measured) -> dict[str, bool]:
    return dict(zip(measured, hp.host_bound([m.probe_op_s for m in measured.values()])))


def _checked(m: hp.ProfileHostCosts) -> list[hp.BucketHost]:
    """Every bucket but the first of the first profiled step: the profile's first hook and first
    enqueue pay one-time costs (first use of the reducer's and NCCL's paths in the process)."""
    first = m.buckets[0].step
    return [b for b in m.buckets if not (b.step == first and b.index == 0)]


def test_committed_defaults_are_the_derivation(measured):
    """host_costs' constants are derive_defaults over the committed profiles, rounded to 5 %."""
    d = hp.derive_defaults(list(measured.values()), host_costs.PRE_FORWARD_S)
    for k in ("hook_s_per_param", "bucket_launch_s", "enqueue_s", "copy_back_s_per_param"):
        assert getattr(host_costs.HostCosts(), k) == pytest.approx(getattr(d, k), rel=0.05), k


@pytest.fixture(scope="module")
def speed(measured) -> dict[str, float]:
    """Per profile, its host's speed against the defaults' host, read off the per-gradient hook
    (the profile's median plain hook over the default's): one factor per host."""
    return {k: m.hook_s_per_param / host_costs.HostCosts().hook_s_per_param for k, m in measured.items()}


#: a profile may catch its host in a hiccup (one bucket several times its neighbours): at most one
#: bucket in twenty may fall outside the band
HICCUPS = 1 / 20


def _outside(ratios: list[float]) -> list[float]:
    return [r for r in ratios if not 1 / hp.BAND <= r <= hp.BAND]


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.name.split("_rank")[0])
def test_profile_buckets_within_band(path, measured, bound, speed):
    """Each bucket's measured host time is within the defaults' band (x BAND either way) of the
    model with every default term scaled by one factor, the host's speed read off its per-gradient
    hook: the per-bucket terms (launch, enqueue) move with the per-gradient one from host to host.
    On a host-bound profile every bucket is above the unscaled model (a slower host, the same code
    path). The profile's own terms put each bucket within the band."""
    m = measured[path.name]
    checked = _checked(m)
    assert checked
    defaults = host_costs.HostCosts()
    ratios = [b.host_s / hp.model_bucket_s(defaults, b.num_params) for b in checked]
    if bound[path.name]:
        assert min(ratios) > hp.BAND
    else:
        scaled = [r / speed[path.name] for r in ratios]
        assert len(_outside(scaled)) <= len(scaled) * HICCUPS, scaled
    own_ratios = [b.host_s / hp.model_bucket_s(m, b.num_params) for b in checked]
    assert len(_outside(own_ratios)) <= len(own_ratios) * HICCUPS, own_ratios
    # the first bucket of the first step pays more than the model, never less
    assert m.buckets[0].host_s >= hp.model_bucket_s(m, m.buckets[0].num_params)


def test_host_speed_scales_with_the_probe_op():
    # a host's speed is its probe op over the median of them: 8 / 2 = 4 is not past HOST_BOUND_FACTOR, 8.2 / 2 is
    assert hp.HOST_BOUND_FACTOR == 4.0
    assert hp.host_bound([1.0, 2.0, 8.0]) == [False, False, False]
    assert hp.host_bound([1.0, 2.0, 8.2]) == hp.host_bound([10.0, 20.0, 82.0]) == [False, False, True]
    assert hp.host_bound([1.0, 1.0, 4.5]) == [False, False, True]


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.name.split("_rank")[0])
def test_profile_bucket_cost_grows_with_its_gradients(path, measured):
    """The per-gradient term: over a profile's buckets, host time against gradient count has a
    slope within BAND of the profile's own median hook (the hook is per gradient, the launch and
    the enqueue per bucket); profiles whose buckets all hold about as many gradients say nothing."""
    m = measured[path.name]
    pts = [(b.num_params, b.host_s) for b in _checked(m)]
    ns = [n for n, _ in pts]
    if max(ns) < 2 * min(ns):
        pytest.skip("buckets of similar gradient counts: no slope to measure")
    n_bar, t_bar = statistics.fmean(ns), statistics.fmean(t for _, t in pts)
    slope = sum((n - n_bar) * (t - t_bar) for n, t in pts) / sum((n - n_bar) ** 2 for n in ns)
    assert m.hook_s_per_param / hp.BAND <= slope <= m.hook_s_per_param * hp.BAND
    # and the per-bucket part (the intercept) is what the closing hook pays beyond a plain one
    intercept = t_bar - slope * n_bar
    assert intercept > 0


@pytest.mark.parametrize("path", PROFILES, ids=lambda p: p.name.split("_rank")[0])
def test_profile_copy_back_is_per_parameter_host_work(path, measured):
    """finalize's copy back (copy_bucket_to_grad, one per parameter) costs the host about as much as
    the hook's copy in: the engine charges it at finalize (see the module docstring)."""
    m = measured[path.name]
    assert m.copy_back_s_per_param > 0
    assert m.copy_back_s_per_param <= m.hook_s_per_param * hp.BAND
