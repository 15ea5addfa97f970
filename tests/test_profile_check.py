"""The run's buckets against ddpsim's plan when the run's bucket_cap_mb is not known."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from ddpsim.plan.planner import DDPOptions, plan_ddp
from ddpsim.plan.profile_check import check_recorded_buckets, run_cap_bound_mb
from ddpsim.trace.records import load_trace

ROOT = Path(__file__).resolve().parents[1]
TRACE = ROOT / "traces" / "resnet50.a100.json"
DATA = ROOT / "tests" / "data"


def _steady_numels(trace, cap_mb):
    return [b.size_bytes // 4 for b in plan_ddp(trace, DDPOptions(bucket_cap_mb=cap_mb)).steady]


def test_a_run_at_another_cap_matches_at_the_cap_its_buckets_allow():
    trace = load_trace(TRACE)
    recorded = _steady_numels(trace, 5)
    assert recorded != _steady_numels(trace, None)
    check = check_recorded_buckets(trace, recorded)
    assert check.matches
    assert check.planned_numels == tuple(recorded)
    bound = run_cap_bound_mb(trace, recorded)
    # every closed bucket reached the run's cap, and the smallest of them is the bound
    assert 5 <= bound == min(recorded[:-1]) * 4 / 2**20
    assert "read off its buckets" in check.message


def test_a_run_at_the_default_cap_says_so_and_a_stated_cap_is_not_second_guessed():
    trace = load_trace(TRACE)
    default = check_recorded_buckets(trace, _steady_numels(trace, None))
    assert default.matches and default.message.endswith("cap=default")
    stated = check_recorded_buckets(trace, _steady_numels(trace, 5), DDPOptions(bucket_cap_mb=25))
    assert not stated.matches and "differ" in stated.message


def test_buckets_no_cap_explains_stay_a_mismatch():
    trace = load_trace(TRACE)
    recorded = _steady_numels(trace, 5)
    recorded[1] += 1
    check = check_recorded_buckets(trace, recorded)
    assert not check.matches and check.options == DDPOptions()


def test_mixed_gradient_dtypes_give_no_bound():
    trace = load_trace(TRACE)
    params = list(trace.params)
    params[0] = replace(params[0], dtype="bfloat16", size_bytes=params[0].size_bytes // 2)
    mixed = replace(trace, params=tuple(params))
    assert run_cap_bound_mb(mixed, [10, 20, 30]) is None
    assert run_cap_bound_mb(trace, [10]) is None


@pytest.mark.parametrize("model,buckets", [("gpt2-124m", 50), ("resnet50", 35)])
def test_a_profile_at_a_1_mib_cap_matches_the_plan_its_buckets_allow(model, buckets):
    """Real DDP on an H200 at bucket_cap_mb=1 (tests/data/README.profiles.md): the recorded buckets
    are DDP's plan at the cap they allow, every one of them."""
    from ddpsim.trace.profile import import_profile

    imp = import_profile(DATA / f"{model}_ddp_1xH200_cap1_rank0.json.gz", model=model)
    numels = imp.recorded_bucket_numels()
    check = check_recorded_buckets(imp.trace, numels)
    assert len(numels) == buckets and check.matches, check.message
    assert 1 <= run_cap_bound_mb(imp.trace, numels) < 2.5


def test_compare_simulates_a_profile_at_the_cap_its_buckets_allow(tmp_path):
    """``ddpsim compare`` without --scenario: a run at a 1 MiB cap is simulated at the cap its
    buckets allow, so the plan matches the run's 50 buckets (at DDP's default it had 13)."""
    import json

    from ddpsim.cli.main import main

    prof = DATA / "gpt2-124m_ddp_1xH200_cap1_rank0.json.gz"
    assert main(["compare", str(prof), "--model", "gpt2-124m", "--out-dir", str(tmp_path), "--name", "c",
                 "--no-plots"]) == 0
    data = json.loads((tmp_path / "compare-c" / "compare.json").read_text())
    assert data["cap_from_buckets"] and 1 <= data["bucket_cap_mb"] < 2.5
    assert data["plan"]["predicted_numels"] == data["plan"]["recorded_numels"]
    assert len(data["plan"]["recorded_numels"]) == 50
