"""Shared test fixtures (kept small on purpose; other test files may use them), and the
hypothesis profiles: ``dev`` (the default: a small derandomized sample, the same inputs on every
run) and ``thorough`` (``pytest --hypothesis-profile=thorough``: five times the inputs, still
derandomized). ``python benchmarks/fuzz_inputs.py`` runs the same strategies by the ten thousand."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import settings

from ddpsim.trace.records import Trace, make_trace


MIB = 1024 * 1024

# NOTE: no example database: a run's inputs never depend on what an earlier run found
settings.register_profile("dev", max_examples=20, derandomize=True, database=None, deadline=None)
settings.register_profile("thorough", max_examples=100, derandomize=True, database=None, deadline=None)
settings.load_profile("dev")


def toy_trace() -> Trace:
    """Three 1 MiB fp32 parameters a, b, c, ready at 0.75, 0.5 and 0.25 s: numbers a hand-worked
    engine test can follow (forward 0.5 s, backward 1.125 s, optimizer 0.125 s)."""
    return make_trace(model="toy", params=[(n, (MIB // 4,), "float32") for n in "abc"], ready_s=[0.75, 0.5, 0.25],
                      forward_s=0.5, backward_s=1.125, optimizer_s=0.125)


def tiny_trace_obj() -> Trace:
    """Four fp32 Linear-like parameters; gradients ready in reverse order (as autograd does).

    Sizes: fc1.weight 64x32 -> 8192 B, fc1.bias 64 -> 256 B, fc2.weight 16x64 -> 4096 B,
    fc2.bias 16 -> 64 B; 12608 B in all.
    """
    return make_trace(
        model="tiny",
        params=[("fc1.weight", (64, 32), "float32"), ("fc1.bias", (64,), "float32"),
                ("fc2.weight", (16, 64), "float32"), ("fc2.bias", (16,), "float32")],
        ready_s=[0.004, 0.003, 0.002, 0.001],
        forward_s=0.01, backward_s=0.02, optimizer_s=0.005, num_iterations=2)


@pytest.fixture
def tmp_path(tmp_path_factory) -> Path:
    """A fresh folder per test, named ``t<N>`` under pytest's base folder (pytest's own is named
    after the test). Error messages cut a value past 80 characters (ddpsim.errors.VALUE_CHARS)
    and many tests check that the message names the file they wrote: a short folder keeps their
    paths whole under any base, a pytest-xdist worker's (``.../popen-gw0/``) included."""
    return tmp_path_factory.mktemp("t")


@pytest.fixture
def tiny_trace() -> Trace:
    return tiny_trace_obj()


@pytest.fixture
def tiny_trace_file(tmp_path, tiny_trace):
    from ddpsim.trace.records import save_trace

    return save_trace(tiny_trace, tmp_path / "tiny.trace.json")
