"""Built-in models: published parameter counts, torchvision names, DDP order, factories, errors."""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch

from ddpsim.errors import InputError
from ddpsim.trace.models import build_model, ddp_params, list_models


def count_params(module):
    """Elements DDP reduces: its parameters, shared ones once (ddp_params)."""
    return sum(p.numel() for _, p, _ in ddp_params(module))


def _meta(name, **kw):
    with torch.device("meta"):
        return build_model(name, **kw)


def test_list_models():
    assert list_models() == ["bert-base", "gpt2-1.5b", "gpt2-124m", "gpt2-350m", "mlp", "resnet50"]


def test_resnet50_matches_torchvision_count_and_names():
    spec = _meta("resnet50")
    assert count_params(spec.module) == 25_557_032  # torchvision resnet50 docs: 25.6M params
    keys = list(spec.module.state_dict())
    # torchvision.models.resnet50().state_dict() keys (first ones, a downsample, the head)
    assert keys[:6] == ["conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var", "bn1.num_batches_tracked"]
    for k in ("layer1.0.downsample.0.weight", "layer1.0.downsample.1.running_var", "layer3.5.conv2.weight", "layer4.2.bn3.bias"):
        assert k in keys
    assert keys[-2:] == ["fc.weight", "fc.bias"]
    assert len(keys) == 320
    shapes = dict(spec.module.named_parameters())
    assert tuple(shapes["layer2.0.conv2.weight"].shape) == (128, 128, 3, 3)
    assert tuple(shapes["fc.weight"].shape) == (1000, 2048)
    assert len(ddp_params(spec.module)) == 161


@pytest.mark.parametrize("name,expected", [
    # GPT-2 with tied head: 124,439,808 (nanoGPT prints 123.65M + wpe 786,432); 1.5B: computed
    # by hand: wte 50257*1600 + wpe 1024*1600 + 48 * 30,740,800 + ln_f 3200
    ("gpt2-124m", 124_439_808),
    ("gpt2-350m", 354_823_168),
    ("gpt2-1.5b", 50257 * 1600 + 1024 * 1600 + 48 * (2 * 2 * 1600 + 1600 * 4800 + 4800 + 1600 * 1600 + 1600
                                                      + 1600 * 6400 + 6400 + 6400 * 1600 + 1600) + 3200),
    ("bert-base", 110_106_428),  # HF BertForPreTraining(bert-base-uncased) parameter count
])
def test_transformer_counts(name, expected):
    assert count_params(_meta(name).module) == expected


def test_gpt2_tied_head_seen_once_under_wte_name():
    spec = _meta("gpt2-124m", n_layer=2)
    names = [n for n, _, _ in ddp_params(spec.module)]
    assert names[0] == "transformer.wte.weight"
    assert "lm_head.weight" not in names
    assert names[-2:] == ["transformer.ln_f.weight", "transformer.ln_f.bias"]
    assert len(names) == 2 + 2 * 12 + 2


def _ddp_reference_order(module):
    # the body of DistributedDataParallel._build_params_for_reducer, verbatim in effect
    mp = [(m, p) for _, m in module.named_modules() for _, p in m.named_parameters(recurse=False) if p.requires_grad]
    memo = set()
    mp = [(m, p) for m, p in mp if p not in memo and not memo.add(p)]
    sparse = [m.sparse if isinstance(m, (torch.nn.Embedding, torch.nn.EmbeddingBag)) else False for m, _ in mp]
    return [p for _, p in mp], sparse


@pytest.mark.parametrize("name", ["mlp", "resnet50", "gpt2-124m", "bert-base"])
def test_ddp_order_equals_reducer_order(name):
    kw = {"n_layer": 2} if name in ("gpt2-124m", "bert-base") else {}
    module = _meta(name, **kw).module
    ours = ddp_params(module)
    ref, sparse = _ddp_reference_order(module)
    assert [id(p) for _, p, _ in ours] == [id(p) for p in ref]
    assert [s for _, _, s in ours] == sparse


def test_sparse_embedding_flag():
    m = torch.nn.Sequential(torch.nn.EmbeddingBag(10, 4, sparse=True), torch.nn.Linear(4, 2))
    assert [s for _, _, s in ddp_params(m)] == [True, False, False]


def test_make_batch_deterministic_and_shaped():
    spec = build_model("mlp", seed=3)
    a, b = spec.make_batch(4), spec.make_batch(4)
    assert a.shape == (4, 256) and torch.equal(a, b)
    g = build_model("gpt2-124m", n_layer=1, seq_len=16)
    x = g.make_batch(2)
    assert x.shape == (2, 16) and x.dtype == torch.int64 and int(x.max()) < 50257
    out = g.module(x)
    assert out.shape == (2, 16, 50257)
    assert g.loss_fn(out).dim() == 0


def test_same_seed_same_weights():
    a = build_model("mlp", seed=1).module.head.weight
    b = build_model("mlp", seed=1).module.head.weight
    c = build_model("mlp", seed=2).module.head.weight
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.fixture
def factory_module(tmp_path, monkeypatch):
    (tmp_path / "userfac.py").write_text(textwrap.dedent("""
        import torch
        def plain(width=8):
            return torch.nn.Linear(width, 3)
        def with_example():
            return torch.nn.Embedding(7, 3), torch.tensor([[1, 6], [2, 3]])
        def boom():
            raise RuntimeError("no GPU here")
        def frozen():
            m = torch.nn.Linear(2, 2)
            m.requires_grad_(False)
            return m
        def not_a_module():
            return 42
        def loss_fn(out):
            return out.float().pow(2).sum()
    """))
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "userfac"
    sys.modules.pop("userfac", None)


def test_factory_module_with_input_shape(factory_module):
    spec = build_model("userfac:plain", input_shape=(8,), width=8)
    assert spec.make_batch(5).shape == (5, 8)
    assert spec.loss_fn is not None and spec.loss_fn(torch.ones(2)).item() == 2.0  # the module's loss_fn


def test_factory_with_example(factory_module):
    spec = build_model("userfac:with_example")
    x = spec.make_batch(4)
    assert x.shape == (4, 2) and x.dtype == torch.int64 and int(x.max()) < 7


@pytest.mark.parametrize("name,kw,match", [
    ("vgg", {}, r"model: 'vgg' is not a built-in model; expected one of \['bert-base'"),
    ("nosuchpkg.mod:f", {}, r"cannot be imported \(ModuleNotFoundError"),
    ("userfac:missing", {}, r"has no callable 'missing'"),
    ("userfac:boom", {}, r"factory 'userfac:boom' raised RuntimeError: no GPU here"),
    ("userfac:frozen", {"input_shape": (2,)}, r"has no trainable parameters"),
    ("userfac:plain", {}, r"input_shape: None is not accepted"),
    ("userfac:not_a_module", {}, r"returned int; expected an nn.Module"),
    ("mlp", {"colour": "red"}, r"colour: 'red' is not an option of model 'mlp'"),
    ("gpt2-124m", {"seq_len": 4096}, r"seq_len: 4096 is too long"),
    ("resnet50", {"input_shape": (224, 224)}, r"input_shape: \(224, 224\) is not accepted; expected 3 positive"),
    ("mlp", {"input_dtype": "float7"}, r"input_dtype: 'float7' is not accepted"),
])
def test_errors(factory_module, name, kw, match):
    with pytest.raises(InputError, match=match):
        build_model(name, **kw)
