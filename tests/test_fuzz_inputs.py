"""Hostile input never breaks the error contract (ddpsim/errors.py): every loader, the scenario
schema and the CLI, fed mutated real files and hostile argv (tests/fuzz_strategies.py),
raise only InputError with one line of at most 1,000 characters, answer within a time limit,
and the CLI exits 0 or 2 without a traceback. Derandomized; the hypothesis profile (conftest.py)
sizes the sample: ``dev`` (the default) a fifth of :data:`EXAMPLES`, ``thorough`` all of them;
``python benchmarks/fuzz_inputs.py`` runs the same strategies by the ten thousand.
"""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, Phase, given, settings

import fuzz_strategies as fz

#: CPU seconds one input may take before it counts as a hang (the CLI's inputs run a small
#: simulation); fz.WALL_FACTOR times as much wall time
TIMEOUT_S = {"cli": 5.0, "profile": 10.0}
DEFAULT_TIMEOUT_S = 3.0
#: examples per target under the ``thorough`` profile (its max_examples, 100, is the scale): the
#: loaders are cheap, a calibration costs a fit, a profile an import (about a second), the CLI a
#: simulation
EXAMPLES = {"scenario": 80, "scenario_schema": 200, "trace": 100, "plan": 80, "calibration": 50, "topology": 80,
            "method_error": 100, "cli": 400, "catalogue": 80, "profile": 8}


def examples(target: str) -> int:
    """The target's examples scaled by the loaded profile's max_examples (dev 20, thorough 100)."""
    return max(2, EXAMPLES[target] * settings.default.max_examples // 100)


def fuzz_settings(target: str):
    # NOTE: no shrink phase: a hang costs a timeout per shrink step; the recipe says how the
    # input was made, and 'python benchmarks/fuzz_inputs.py --shrink' minimizes escapes
    return settings(max_examples=examples(target), deadline=None, derandomize=True, database=None,
                    phases=[Phase.explicit, Phase.generate],
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.large_base_example, HealthCheck.filter_too_much])


@pytest.fixture(scope="module", autouse=True)
def _imports_done():
    fz.warm_up()


def check(target: str, case) -> None:
    outcome = fz.run_case(target, case, TIMEOUT_S.get(target, DEFAULT_TIMEOUT_S))
    assert outcome.kind in fz.GOOD, outcome.describe(fz.recipe(target, case))


@fuzz_settings("scenario")
@given(fz.inputs("scenario", quick=True))
def test_scenario_loader(case):
    check("scenario", case)


@fuzz_settings("scenario_schema")
@given(fz.inputs("scenario_schema", quick=True))
def test_scenario_schema(case):
    check("scenario_schema", case)


@fuzz_settings("trace")
@given(fz.inputs("trace", quick=True))
def test_trace_loader(case):
    check("trace", case)


@fuzz_settings("plan")
@given(fz.inputs("plan", quick=True))
def test_plan_loader(case):
    check("plan", case)


@fuzz_settings("calibration")
@given(fz.inputs("calibration", quick=True))
def test_calibration_loader(case):
    check("calibration", case)


@fuzz_settings("topology")
@given(fz.inputs("topology", quick=True))
def test_topology_loader(case):
    check("topology", case)


@fuzz_settings("method_error")
@given(fz.inputs("method_error", quick=True))
def test_method_error_loader(case):
    check("method_error", case)


@fuzz_settings("catalogue")
@given(fz.inputs("catalogue", quick=True))
def test_catalogue_loader(case):
    check("catalogue", case)


@fuzz_settings("profile")
@given(fz.inputs("profile", quick=True))
def test_profile_reader(case):
    check("profile", case)


@fuzz_settings("cli")
@given(fz.inputs("cli", quick=True))
def test_cli(case):
    check("cli", case)


# --- the instrument itself ---------------------------------------------------------------------

@pytest.mark.parametrize("target", [t for t in fz.TARGETS if t not in ("cli", "scenario_schema")])
def test_every_seed_loads_unchanged(target):
    """The fuzzed files start from files the loaders accept, so mutations reach past the first check."""
    for name, doc in fz.seeds(target):
        fi = fz.FileInput(fz.dump(doc, fz.FORMAT[target]), "." + fz.FORMAT[target], name)
        outcome = fz.run_file(target, fi, 30.0)
        assert outcome.kind == "ok", outcome.describe(name)


def test_time_limit_turns_a_hang_into_a_failed_example():
    t0 = time.perf_counter()
    blocked = fz.guarded(lambda: time.sleep(5), 0.1)
    assert blocked.kind == "hang" and "wall" in blocked.message and time.perf_counter() - t0 < 2

    def busy():
        while True:
            pass
    assert "CPU" in fz.guarded(busy, 0.2).message


def test_dump_writes_raw_literals():
    data = fz.dump({"a": fz.RAWS[0], "b": [fz.RAWS[1]]}, "json").decode()
    assert '"a": 1' + "0" * 5000 in data and "[" * 1000 + "]" * 1000 in data


def test_cli_verdict_flags_a_traceback_and_an_exit_status_other_than_0_or_2():
    ok = fz.Outcome("ok")
    assert fz._cli_verdict(ok, 1, "").kind == "bad_exit"
    assert fz._cli_verdict(fz.Outcome("ok"), 0, "Traceback (most recent call last):\n  x").kind == "escaped"
    assert fz._cli_verdict(fz.Outcome("ok"), 2, "ddpsim: error: x: 1 is not accepted").kind == "input_error"
    assert fz._cli_verdict(fz.Outcome("ok"), 2, "something else").kind == "bad_message"
