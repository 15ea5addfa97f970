"""``ddpsim trace --model pkg.mod:factory`` on user models: own dtypes kept, the example's batch
size, and a model that raises -> one line, exit 2."""

from __future__ import annotations

import json
import sys
import textwrap

import pytest

from ddpsim.cli.main import main

FACTORIES = textwrap.dedent("""
    import torch
    import torch.nn as nn


    class HalfBf16(nn.Module):
        # fc1 in float32, fc2 kept in bfloat16 (each layer gets its input in its own dtype)
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(8, 16)
            self.fc2 = nn.Linear(16, 4).to(torch.bfloat16)

        def forward(self, x):
            h = self.fc1(x.to(self.fc1.weight.dtype)).relu()
            return self.fc2(h.to(self.fc2.weight.dtype)).float()


    def mixed():
        return HalfBf16(), torch.randn(6, 8)


    class FailsForward(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 2)

        def forward(self, x):
            raise ValueError("shapes do not fit\\nsecond line")


    class NoBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            raise RuntimeError("backward is not implemented")


    class FailsBackward(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(8, 2)

        def forward(self, x):
            return NoBackward.apply(self.fc(x))


    def fails_forward():
        return FailsForward(), torch.randn(3, 8)


    def fails_backward():
        return FailsBackward(), torch.randn(3, 8)
""")


@pytest.fixture
def factories(tmp_path, monkeypatch):
    (tmp_path / "h1fac.py").write_text(FACTORIES)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "h1fac"
    sys.modules.pop("h1fac", None)


def trace_cli(tmp_path, *extra: str) -> tuple[int, dict]:
    out = tmp_path / "t.json"
    rc = main(["trace", *extra, "--iterations", "1", "--warmup", "0", "--no-hook-overhead", "--out", str(out)])
    return rc, (json.loads(out.read_text()) if out.exists() else {})


def test_factory_keeps_its_own_dtypes(tmp_path, factories, capsys):
    rc, t = trace_cli(tmp_path, "--model", "h1fac:mixed", "--batch-size", "3")
    assert rc == 0
    assert [(p["name"], p["dtype"], p["size_bytes"]) for p in t["params"]] == [
        ("fc1.weight", "float32", 8 * 16 * 4), ("fc1.bias", "float32", 16 * 4),
        ("fc2.weight", "bfloat16", 16 * 4 * 2), ("fc2.bias", "bfloat16", 4 * 2)]
    assert t["environment"]["dtype"] == "mixed"


def test_batch_size_defaults_to_the_examples(tmp_path, factories, capsys):
    rc, t = trace_cli(tmp_path, "--model", "h1fac:mixed")
    assert rc == 0
    assert t["environment"]["batch_size"] == 6 and t["environment"]["input_shape"] == [6, 8]


def test_dtype_flag_still_casts(tmp_path, factories, capsys):
    rc, t = trace_cli(tmp_path, "--model", "h1fac:mixed", "--set", "dtype=float32", "--batch-size", "2")
    assert rc == 0
    assert [p["dtype"] for p in t["params"]] == ["float32"] * 4 and t["environment"]["dtype"] == "float32"
    assert t["environment"]["batch_size"] == 2


@pytest.mark.parametrize("factory,line", [
    ("fails_forward", "model 'h1fac:fails_forward': forward raised ValueError: shapes do not fit; "
                      "expected a model that trains one step on its batch"),
    ("fails_backward", "model 'h1fac:fails_backward': backward raised RuntimeError: backward is not implemented; "
                       "expected a model that trains one step on its batch"),
])
def test_a_model_that_raises_is_one_line_exit_2(tmp_path, factories, capsys, factory, line):
    rc, t = trace_cli(tmp_path, "--model", f"h1fac:{factory}")
    out, err = capsys.readouterr()
    assert rc == 2 and t == {}
    assert err == f"ddpsim: error: {line}\n"
