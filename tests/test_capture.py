"""Trace capture on a tiny model, the CLI, reduced-depth derivation, and the shipped traces."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from ddpsim.trace.capture import capture_trace, derive_depth
from ddpsim.cli.main import main
from ddpsim.errors import InputError
from ddpsim.trace.models import build_model, ddp_params
from ddpsim.trace.models.zoo import ZOO_PREFIX
from ddpsim.trace.records import load_trace, save_trace

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def mlp_trace():
    spec = build_model("mlp", width=32, depth=3, num_classes=4)
    return capture_trace(spec, batch_size=4, num_iters=3, num_warmup=1, num_threads=1, command="test")


def test_every_param_present_with_right_sizes(mlp_trace):
    spec = build_model("mlp", width=32, depth=3, num_classes=4)
    expected = [(n, tuple(p.shape), p.numel() * 4) for n, p, _ in ddp_params(spec.module)]
    assert [(p.name, p.shape, p.size_bytes) for p in mlp_trace.params] == expected
    assert mlp_trace.params[0].name == "layers.0.weight" and mlp_trace.params[0].size_bytes == 32 * 32 * 4
    assert all(p.has_grad for p in mlp_trace.params)
    assert len(mlp_trace.iterations) == 3
    env = mlp_trace.environment
    assert env["device"] == "cpu" and env["batch_size"] == 4 and env["num_threads"] == 1 and env["optimizer"] == "sgd"
    assert env["torch_version"] == torch.__version__
    assert mlp_trace.hook_overhead_frac is not None and mlp_trace.hook_overhead_frac >= 0


def test_ready_order_is_backward_order(mlp_trace):
    # the head's gradients are ready first, the first layer's last (weight/bias of one Linear adjacent)
    layer_of = [p.name.rsplit(".", 1)[0] for p in mlp_trace.params]
    order_layers = [layer_of[i] for i in mlp_trace.grad_ready_order]
    assert order_layers[0] == "head" and order_layers[-1] == "layers.0"
    seen = list(dict.fromkeys(order_layers))
    assert seen == ["head", "layers.4", "layers.2", "layers.0"]
    for it in mlp_trace.iterations:
        ts = [it.grad_ready_s[i] for i in mlp_trace.grad_ready_order]
        assert ts == sorted(ts) and ts[-1] <= it.backward_s


def test_round_trip(mlp_trace, tmp_path):
    p = save_trace(mlp_trace, tmp_path / "t.json")
    again = load_trace(p)
    assert again == mlp_trace


def test_unused_param_has_no_grad():
    class TwoHeads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.used = torch.nn.Linear(4, 4)
            self.unused = torch.nn.Linear(4, 4)

        def forward(self, x):
            return self.used(x)

    from ddpsim.trace.models import BuiltModel
    spec = BuiltModel(name="twoheads", module=TwoHeads(), make_batch=lambda b: torch.ones(b, 4))
    tr = capture_trace(spec, batch_size=2, num_iters=2, num_warmup=0, measure_hook_overhead=False)
    assert [p.has_grad for p in tr.params] == [True, True, False, False]
    assert tr.iterations[0].grad_ready_s[2:] == (None, None)
    assert sorted(tr.grad_ready_order) == [0, 1]
    assert tr.hook_overhead_frac is None


def test_step_barrier_runs_before_every_step_untimed(monkeypatch):
    """executor trace passes a barrier: called twice per warm-up and measured step (before the
    forward and before the optimizer), outside the clocks. The capture's clock is made to jump
    1,000 s inside each barrier call, so a barrier inside any timed phase would show as >= 1,000 s."""
    import time as _time

    import ddpsim.trace.capture as capture_mod
    from ddpsim.trace.models import build_model

    jump_ns = 1000 * 10 ** 9
    offset = [0]
    calls = []

    class Clock:  # the real clock plus the jumps, for ddpsim.trace.capture only
        def __getattr__(self, name):
            return getattr(_time, name)

        @staticmethod
        def perf_counter_ns():
            return _time.perf_counter_ns() + offset[0]

    def barrier():
        calls.append(offset[0])
        offset[0] += jump_ns

    monkeypatch.setattr(capture_mod, "time", Clock())
    tr = capture_trace(build_model("mlp", width=8, depth=1), batch_size=2, num_iters=3, num_warmup=2,
                       measure_hook_overhead=False, step_barrier=barrier)
    assert len(calls) == 10
    for it in tr.iterations:
        assert max(it.forward_s, it.backward_s, it.optimizer_s, it.zero_grad_s) < 1000
        assert all(0 <= r < 1000 for r in it.grad_ready_s)


@pytest.mark.parametrize("kw,match", [
    ({"batch_size": 0}, r"batch_size: 0 is not accepted; expected an integer >= 1"),
    ({"num_iters": -1}, r"num_iters: -1 is not accepted"),
    ({"num_warmup": -1}, r"num_warmup: -1 is not accepted"),
    ({"optimizer": "lamb"}, r"optimizer: 'lamb' is not accepted"),
    ({"dtype": "int8"}, r"dtype: 'int8' is not accepted"),
    ({"device": "tpu"}, r"device: 'tpu' is not accepted"),
    ({"num_threads": 0}, r"num_threads: 0 is not accepted"),
])
def test_capture_errors(kw, match):
    args = dict(batch_size=2, num_iters=1, num_warmup=0)
    args.update(kw)
    with pytest.raises(InputError, match=match):
        capture_trace(build_model("mlp", width=8, depth=1), **args)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error")
def test_cuda_without_cuda():
    with pytest.raises(InputError, match=r"device: 'cuda' is not available"):
        capture_trace(build_model("mlp", width=8, depth=1), device="cuda", batch_size=2, num_iters=1, num_warmup=0)


def test_cli_writes_loadable_trace(tmp_path, capsys):
    out = tmp_path / "mlp.json"
    rc = main(["trace", "--model", "mlp", "--batch-size", "8", "--iterations", "2", "--warmup", "1", "--num-threads", "1", "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    assert "model mlp: 10 parameter tensors, 265,738 elements" in text and "hook overhead" in text
    tr = load_trace(out)
    assert tr.command.startswith("ddpsim trace --model mlp") and "--batch-size 8" in tr.command
    assert tr.environment["batch_size"] == 8


def test_cli_list_models(capsys):
    assert main(["trace", "--list-models"]) == 0
    assert "gpt2-1.5b" in capsys.readouterr().out.split()


@pytest.mark.parametrize("argv,match", [
    (["--model", "nosuch", "--batch-size", "2"], "model: 'nosuch' is not a built-in model"),
    (["--model", "nosuchpkg:f", "--batch-size", "2"], "cannot be imported"),
    (["--model", "mlp", "--batch-size", "-3"], "--batch-size: -3 is not accepted"),
    (["--model", "mlp", "--batch-size", "2", "--iterations", "0"], "--iterations: 0 is not accepted"),
    (["--model", "mlp"], "--batch-size: missing"),
    (["--batch-size", "2"], "--model: missing"),
    (["--model", "mlp", "--batch-size", "2", "--device", "cuda"] if not torch.cuda.is_available() else ["--model", "mlp", "--batch-size", "2", "--device", "xpu"], "--device: 'cuda' is not available|--device: 'xpu'"),
    (["--model", "gpt2-124m", "--batch-size", "2", "--derive-depth-from", "2"], "--derive-depth-from: 2 is not accepted"),
    (["--model", "mlp", "--batch-size", "2", "--derive-depth-from", "3"], "model 'mlp' has no n_layer"),
])
def test_cli_errors_exit_2(tmp_path, capsys, argv, match):
    rc = main(["trace", *argv, "--out", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("ddpsim: error: ") and err.count("\n") == 1
    assert __import__("re").search(match, err), err


def test_cli_bad_shape_is_usage_error():
    r = subprocess.run([sys.executable, "-m", "ddpsim", "trace", "--model", "mlp", "--batch-size", "2",
                        "--set", "input_shape=3,x", "--out", "x.json"], capture_output=True, text=True)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert r.stderr.startswith("ddpsim: error: --set input_shape: '3,x' is not accepted; expected 1 to 8 ")


def test_derive_depth_gpt2():
    spec = build_model("gpt2-124m", n_layer=3, seq_len=8)
    # shrink the vocabulary cost: a 3-block capture of the real 124M shapes, 1 iteration
    tr = capture_trace(spec, batch_size=1, num_iters=1, num_warmup=0, num_threads=1, measure_hook_overhead=False)
    d = derive_depth(tr, num_blocks=7)
    with torch.device("meta"):
        full = build_model("gpt2-124m", n_layer=7)
    assert [p.name for p in d.params] == [n for n, _, _ in ddp_params(full.module)]
    assert [p.shape for p in d.params] == [tuple(p.shape) for _, p, _ in ddp_params(full.module)]
    assert d.synthetic["kind"] == "derived-depth" and d.synthetic["from_blocks"] == 3 and d.synthetic["to_blocks"] == 7
    it, src = d.iterations[0], tr.iterations[0]
    per_block = d.synthetic["per_block_backward_s"][0]
    assert math.isclose(it.backward_s, src.backward_s + 4 * per_block, rel_tol=0, abs_tol=1e-8)  # d is stored rounded to 1 ns
    # the embeddings are ready last in both, shifted by the 4 extra blocks
    assert math.isclose(it.grad_ready_s[0], src.grad_ready_s[0] + 4 * per_block, rel_tol=0, abs_tol=1e-8)
    assert d.grad_ready_order[-1] == 0
    assert set(d.grad_ready_order) == set(range(len(d.params)))


def test_derive_depth_errors(mlp_trace):
    with pytest.raises(InputError, match=r"no repeated blocks|expected at least 3"):
        derive_depth(mlp_trace, num_blocks=8)


def test_shipped_traces_load():
    files = sorted((ROOT / "traces").glob("*.json"))
    assert {f.name for f in files} >= {"mlp.cpu.json", "resnet50.cpu.json", "bert-base.cpu.json", "gpt2-124m.cpu.json",
                                       "gpt2-1.5b.cpu.json", "gpt2-1.5b.h100.json", "gpt2-124m.h100.json",
                                       "resnet50.a100.json", "resnet50.h100.json", "bert-base.a100.json"}
    for f in files:
        tr = load_trace(f)
        assert tr.command and tr.command.startswith(("ddpsim trace", "ddpsim retime"))
        assert f.stat().st_size < 8 * 2**20
        stem, device, _ = f.name.rsplit(".", 2)  # <model>[.<variant>].<device>.json
        named = tr.model.removeprefix(ZOO_PREFIX)  # a zoo model's file drops the prefix: no ':' in a file name
        assert stem == named or stem.startswith(named + ".")
        model = tr.model
        if stem.endswith(".measured"):  # captured on that GPU by 'ddpsim trace --device cuda'
            assert tr.synthetic is None and tr.environment["device"] == "cuda"
            assert device.upper() in tr.environment["device_name"].replace(" ", "")
        elif device != "cpu":  # re-timed for a GPU of the hardware catalogue
            assert tr.synthetic["kind"] == "retimed" and device.upper() in tr.synthetic["gpu"].replace("-", "")
        elif model == "gpt2-1.5b":
            assert tr.synthetic["kind"] == "derived-depth" and tr.synthetic["to_blocks"] == 48
        else:
            assert tr.synthetic is None and tr.environment["num_threads"] == 1
