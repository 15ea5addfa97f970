"""The model zoo (ddpsim/trace/models/zoo.py): zoo:<name> through build_model, parameter counts
worked out by hand or published by torchvision, weight tying seen by DDP's parameter list."""

import pytest
import torch

from ddpsim.cli.main import main
from ddpsim.errors import InputError
from ddpsim.trace.models import build_model, ddp_params
from ddpsim.trace.models.zoo import ZOO, torchvision_available, zoo_names


def count_params(module):
    """Elements DDP reduces: its parameters, shared ones once (ddp_params)."""
    return sum(p.numel() for _, p, _ in ddp_params(module))


def _needs_torchvision():
    if not torchvision_available():
        pytest.skip("torchvision is not installed (the optional extra 'zoo')")


def _layer_params(d: int, ff: int) -> int:
    # nn.TransformerEncoderLayer: in_proj (3d x d + 3d), out_proj (d x d + d), linear1, linear2, two LayerNorms
    return (3 * d * d + 3 * d) + (d * d + d) + (d * ff + ff) + (ff * d + d) + 2 * 2 * d


def test_zoo_has_eight_models_or_more_of_both_sources():
    assert len(ZOO) >= 8
    assert {e.source for e in ZOO.values()} == {"torchvision", "torch"}
    assert zoo_names() == sorted("zoo:" + n for n in ZOO)


def test_tied_lm_shares_its_embedding_and_ddp_reduces_it_once():
    spec = build_model("zoo:tied_lm", seq_len=8)
    m = spec.module
    assert m.lm_head.weight is m.embed.weight
    names = [n for n, _, _ in ddp_params(m)]
    assert "embed.weight" in names and "lm_head.weight" not in names
    # embedding 8192 x 256 (once), positions 8 x 256, 4 layers of width 256 / ff 1024, final LayerNorm
    assert count_params(m) == 8192 * 256 + 8 * 256 + 4 * _layer_params(256, 1024) + 2 * 256
    out = m(spec.make_batch(2))
    assert out.shape == (2, 8, 8192)


def test_transformer_models_need_only_torch():
    enc = build_model("zoo:transformer_encoder", seq_len=16, num_classes=3)
    assert count_params(enc.module) == 8192 * 256 + 16 * 256 + 4 * _layer_params(256, 1024) + 256 * 3 + 3
    assert enc.module(enc.make_batch(2)).shape == (2, 3)
    s2s = build_model("zoo:transformer_seq2seq", input_shape=(12,))
    assert s2s.module(s2s.make_batch(2)).shape == (2, 12, 8192)
    assert s2s.info["seq_len"] == 12 and s2s.info["zoo_batch_size"] == ZOO["transformer_seq2seq"].batch_size


def test_same_seed_same_model_and_batch():
    a, b = build_model("zoo:tied_lm", seed=3, seq_len=8), build_model("zoo:tied_lm", seed=3, seq_len=8)
    assert torch.equal(a.make_batch(2), b.make_batch(2))
    assert all(torch.equal(p, q) for p, q in zip(a.module.parameters(), b.module.parameters()))


@pytest.mark.parametrize("name,kwargs,match", [
    ("zoo:nosuch", {}, "model: 'zoo:nosuch' is not a zoo model"),
    ("zoo:tied_lm", {"depth": 3}, "depth: 3 is not an option of model 'zoo:tied_lm'"),
    ("zoo:tied_lm", {"seq_len": 0}, "seq_len: 0 is not accepted"),
    ("zoo:transformer_encoder", {"input_shape": (3, 4)}, "input_shape: \\(3, 4\\) is not accepted"),
])
def test_bad_zoo_input(name, kwargs, match):
    with pytest.raises(InputError, match=match):
        build_model(name, **kwargs)


def test_list_models_prints_the_zoo(capsys):
    assert main(["trace", "--list-models"]) == 0
    out = capsys.readouterr().out.split()
    assert "zoo:tied_lm" in out and "zoo:resnet18" in out and "mlp" in out


def test_torchvision_resnet18_has_torchvisions_published_size():
    _needs_torchvision()
    spec = build_model("zoo:resnet18")
    # torchvision's model card: resnet18 has 11,689,512 parameters (62 tensors, BatchNorm affine included)
    assert count_params(spec.module) == 11_689_512 and len(ddp_params(spec.module)) == 62
    assert any(isinstance(m, torch.nn.BatchNorm2d) for m in spec.module.modules())
    assert spec.make_batch(2).shape == (2, 3, 128, 128)


def test_torchvision_zoo_builds_and_steps():
    _needs_torchvision()
    spec = build_model("zoo:mobilenet_v3_small", input_shape=(3, 32, 32), num_classes=5)
    # mobilenet_v3_small's depthwise convolutions: groups == in_channels
    assert any(isinstance(m, torch.nn.Conv2d) and m.groups > 1 and m.groups == m.in_channels for m in spec.module.modules())
    loss = spec.loss_fn(spec.module(spec.make_batch(2)))
    loss.backward()
    assert all(p.grad is not None for _, p, _ in ddp_params(spec.module))
    vit = build_model("zoo:vit_small", num_classes=4)
    assert vit.module(vit.make_batch(1)).shape == (1, 4)
    with pytest.raises(InputError, match="expected \\[3, 64, 64\\]"):
        build_model("zoo:vit_small", input_shape=(3, 32, 32))


def test_without_torchvision_its_models_say_so_and_the_torch_ones_build(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "torchvision.models", None)  # import fails as if not installed
    assert not torchvision_available()
    with pytest.raises(InputError, match="need torchvision.*ddpsim\\[zoo\\]"):
        build_model("zoo:resnet18")
    assert count_params(build_model("zoo:tied_lm", seq_len=4).module) > 0


def test_branchy_mlp_leaves_its_aux_head_without_gradient_and_its_scenario_finds_unused():
    from ddpsim.trace.capture import capture_trace
    from ddpsim.pipeline.scenario import scenario_from_dict
    from ddpsim.validation.zoo_driver import zoo_scenario_yaml

    import yaml

    spec = build_model("zoo:branchy_mlp", input_shape=(16,), num_classes=3)
    # 6 x Linear(16|1024 -> 1024), head and aux head 1024 -> 3
    assert count_params(spec.module) == (16 * 1024 + 1024) + 5 * (1024 * 1024 + 1024) + 2 * (1024 * 3 + 3)
    tr = capture_trace(spec, batch_size=2, num_iters=1, num_warmup=0, measure_hook_overhead=False)
    assert [p.name for p in tr.params if not p.has_grad] == ["aux_head.weight", "aux_head.bias"]
    data = yaml.safe_load(zoo_scenario_yaml("zoo:branchy_mlp", caps=[5.0, 25.0], iterations=20, warmup=5))
    assert data["ddp"]["find_unused_parameters"] is True and data["validation"]["model"] == "zoo:branchy_mlp"
    sc = scenario_from_dict(data)
    assert {5.0, 25.0} <= {p.bucket_cap_mb for p in sc.points()}
    assert all(p.find_unused_parameters for p in sc.points())
