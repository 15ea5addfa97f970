"""torch 2.13's DDP options against real DDP (2 gloo ranks on this machine, tiny models).

The workers (this file run as a script, a FileStore) wrap small models in a real
``DistributedDataParallel`` with each option and report what DDP shows: which buckets it
all-reduced (a recording comm hook; ``skip_all_reduce_unused_params`` decides before the
hook runs) and ``num_buckets_reduced`` from ``_get_ddp_logging_data()``; the bucket layouts
with delayed parameters (in the reducer's own numbering); whether buffers were broadcast
before forward; mixed precision's buffer and bucket dtypes at construction (its forward
needs CUDA events, which the CPU lacks); and that the gradients equal the mean of the
ranks' local gradients with batched_grad_copy and for delayed parameters.
ddpsim's side: plan_ddp and the engine on the independent tracer's trace of the same model.
"""

from __future__ import annotations

import gc
import json
import os
import sys
from pathlib import Path

import pytest

from test_ddp_parity import WORLD_SIZE, collect_workers, start_workers

SKIP_CAP = 0.0001  # MiB (104 B): every parameter of the 'unused' model closes its own bucket
DELAY = {"delay_all_reduce_named_params": ["8.weight", "8.bias"], "param_to_hook_all_reduce": "0.weight"}
MP = {"param_dtype": "bfloat16", "reduce_dtype": "float32", "buffer_dtype": "float16"}

# (config id, model, DDP kwargs as ddpsim's DDPOptions spells them, iterations)
CONFIGS = [
    ("skip-find_unused", "unused", {"find_unused_parameters": True, "bucket_cap_mb": SKIP_CAP,
                                    "skip_all_reduce_unused_params": True}, 2),
    ("skip-static_graph", "unused", {"static_graph": True, "bucket_cap_mb": SKIP_CAP,
                                     "skip_all_reduce_unused_params": True}, 4),
    ("batched", "linears", {"bucket_cap_mb": 0.5, "batched_grad_copy": True}, 3),
    ("batched-gabv", "linears", {"bucket_cap_mb": 0.5, "batched_grad_copy": True, "gradient_as_bucket_view": True}, 3),
    ("delay", "linears", {"bucket_cap_mb": 0.5, **DELAY}, 3),
]
SYNC_CONFIGS = [
    ("sync-default", {}),
    ("sync-forward_false", {"forward_sync_buffers": False}),
    ("sync-broadcast_false", {"broadcast_buffers": False}),
    ("sync-broadcast_false-forward_true", {"broadcast_buffers": False, "forward_sync_buffers": True}),
]


def _buffer_module():
    import torch
    import torch.nn as nn

    class Scaled(nn.Module):
        """A buffer that forward reads and never writes: what a broadcast leaves is visible."""

        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)
            self.register_buffer("scale", torch.ones(4))

        def forward(self, x):
            return self.lin(x * self.scale)

    return Scaled()


def _mp_module():
    import torch.nn as nn

    return nn.Sequential(nn.Linear(8, 16), nn.BatchNorm1d(16), nn.Linear(16, 4))


def _ddp_kwargs(kwargs: dict, module) -> dict:
    out = dict(kwargs)
    if "delay_all_reduce_named_params" in out:
        named = dict(module.named_parameters())
        out["delay_all_reduce_named_params"] = [(n, named[n]) for n in out["delay_all_reduce_named_params"]]
        out["param_to_hook_all_reduce"] = named[out["param_to_hook_all_reduce"]]
    return out


def _mean_local_grads(module, rank_step) -> dict:
    """The reference: this rank's local gradients of a plain copy, all-reduced and averaged."""
    import copy

    import torch.distributed as dist

    ref = copy.deepcopy(module)
    rank_step(ref)
    out = {}
    for n, p in ref.named_parameters():
        if p.grad is not None:
            g = p.grad.clone()
            dist.all_reduce(g)
            out[n] = g / dist.get_world_size()
    return out


def worker_main(rank: int, world_size: int, store_path: str, out_path: str) -> None:
    from datetime import timedelta

    import torch
    import torch.distributed as dist
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.nn.parallel.distributed import _MixedPrecision

    from test_ddp_parity import _model_and_step

    torch.set_num_threads(1)
    store = dist.FileStore(store_path, world_size)
    dist.init_process_group("gloo", store=store, rank=rank, world_size=world_size, timeout=timedelta(seconds=120))
    res: dict = {}
    try:
        for cid, model, kwargs, iters in CONFIGS:
            module, step = _model_and_step(model)
            x = torch.randn(2, *next(module.parameters()).shape[1:], generator=torch.Generator().manual_seed(10 + rank))

            def rank_step(m, x=x):
                m(x).float().sum().backward()

            ref = _mean_local_grads(module, rank_step)
            index = {id(p): i for i, (_, p) in enumerate((n, p) for n, p in module.named_parameters())}
            ddp = DDP(module, **_ddp_kwargs(kwargs, module))
            reduced: list = []
            if kwargs.get("skip_all_reduce_unused_params"):
                def hook(state, bucket, reduced=reduced):
                    reduced[-1].append([index[id(p)] for p in bucket.parameters()])
                    return allreduce_hook(state, bucket)
                ddp.register_comm_hook(None, hook)
            grads_ok, unused_none = [], []
            for _ in range(iters):
                reduced.append([])
                rank_step(ddp)
                dist.barrier()   # the delayed all-reduce is never waited by DDP
                grads_ok.append(all(torch.allclose(p.grad, ref[n], rtol=1e-5, atol=1e-6)
                                    for n, p in module.named_parameters() if n in ref))
                unused_none.append(all(p.grad is None for n, p in module.named_parameters() if n not in ref))
                for p in module.parameters():
                    p.grad = None
            data = ddp._get_ddp_logging_data()
            res[cid] = {"reduced": reduced, "grads_ok": grads_ok, "unused_grad_none": unused_none,
                        **{k: data.get(k) for k in ("bucket_sizes", "rebuilt_bucket_sizes", "rebuilt_per_bucket_param_indices",
                                                    "num_buckets_reduced")}}
            del ddp, module
            gc.collect()  # free the Reducer while the process group lives (test_ddp_parity.worker_main)
            gc.freeze()   # ... and leave what lives to no later collection (test_ddp_parity.worker_main)
        for cid, kwargs in SYNC_CONFIGS:
            torch.manual_seed(0)
            module = _buffer_module()
            ddp = DDP(module, **kwargs)
            module.scale.fill_(rank + 1.0)      # after construction's init sync
            ddp(torch.ones(1, 4)).sum().backward()
            scales: list = [None] * world_size
            dist.all_gather_object(scales, module.scale.tolist())
            res[cid] = {"scale_after_forward": scales,
                        "broadcast_buffers": ddp._get_ddp_logging_data().get("broadcast_buffers")}
            del ddp, module
            gc.collect()  # free the Reducer while the process group lives (test_ddp_parity.worker_main)
            gc.freeze()   # ... and leave what lives to no later collection (test_ddp_parity.worker_main)
        torch.manual_seed(0)
        module = _mp_module()
        mp = _MixedPrecision(**{k: getattr(torch, v) for k, v in MP.items()})
        ddp = DDP(module, mixed_precision=mp)
        res["mp"] = {"buffers": [[n, str(b.dtype).removeprefix("torch."), b.numel() * b.element_size()]
                                 for n, b in module.named_buffers()],
                     "buckets": [[str(g.buffer().dtype).removeprefix("torch."), g.buffer().numel()]
                                 for g in ddp.reducer._get_zeros_like_grad_buckets()],
                     "bucket_sizes": ddp._get_ddp_logging_data().get("bucket_sizes")}
        del ddp, module
        gc.collect()
    finally:
        dist.destroy_process_group()
    if rank == 0:
        Path(out_path).write_text(json.dumps(res, indent=1))


# ---- the test ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ddp_options")
    store, out = tmp / "store", tmp / "out.json"
    here = str(Path(__file__).resolve().parent)
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONHASHSEED="0",
               PYTHONPATH=os.pathsep.join([here, os.environ.get("PYTHONPATH", "")]))
    collect_workers(start_workers(__file__, [str(store), str(out)], env))
    return json.loads(out.read_text())


def _ints(text):
    return [int(x) for x in text.split(",")] if text else []


def _groups(text):
    return [[int(x) for x in g.split()] for g in text.split(",")] if text else []


def _options(kwargs):
    from ddpsim.plan.planner import DDPOptions

    kw = dict(kwargs)
    if "delay_all_reduce_named_params" in kw:
        kw["delay_all_reduce_named_params"] = tuple(kw["delay_all_reduce_named_params"])
    return DDPOptions(**kw)


def _simulate(trace, opts, iters):
    from ddpsim.network.comm_model import AlphaBetaModel
    from ddpsim.engine.simulate import simulate
    from ddpsim.plan.planner import plan_ddp
    from ddpsim.engine.config import SimConfig

    plan = plan_ddp(trace, opts)
    res = simulate(trace, plan, AlphaBetaModel(latency_s=1e-5, bandwidth_bytes_per_s=1e9, num_ranks=2),
                   SimConfig(world_size=2, num_iterations=iters, jitter="none"))
    return plan, res


@pytest.mark.parametrize("cid", ["skip-find_unused", "skip-static_graph"])
def test_skip_all_reduce_unused_params_skips_the_buckets_ddp_skips(real, cid):
    from test_ddp_parity import local_trace

    _, model, kwargs, iters = next(c for c in CONFIGS if c[0] == cid)
    trace = local_trace(model)
    plan, res = _simulate(trace, _options(kwargs), iters)
    skipped = res.meta["skipped_buckets"]
    for k in range(1, iters + 1):
        layout = plan.layout_for_iteration(k)
        expected = [list(b.param_indices) for b in layout if b.index not in skipped.get(str(k), [])]
        assert real[cid]["reduced"][k - 1] == expected, f"iteration {k}"
    assert skipped  # the unused layer's buckets are skipped in some iteration
    last = plan.layout_for_iteration(iters)
    assert real[cid]["num_buckets_reduced"] == len(last) - len(skipped.get(str(iters), []))
    assert all(real[cid]["grads_ok"]) and all(real[cid]["unused_grad_none"])   # skipped grads stay None


@pytest.mark.parametrize("cid", ["batched", "batched-gabv"])
def test_batched_grad_copy_keeps_ddp_layout_and_gradients(real, cid):
    from ddpsim.plan.planner import plan_ddp
    from test_ddp_parity import local_trace

    _, model, kwargs, _ = next(c for c in CONFIGS if c[0] == cid)
    plan = plan_ddp(local_trace(model), _options(kwargs))
    assert _ints(real[cid]["bucket_sizes"]) == [b.size_bytes for b in plan.initial]
    assert _groups(real[cid]["rebuilt_per_bucket_param_indices"]) == [list(b.param_indices) for b in plan.steady]
    assert all(real[cid]["grads_ok"])


def test_delayed_params_leave_the_reducer_like_ddp(real):
    from ddpsim.plan.planner import reducer_param_indices
    from test_ddp_parity import local_trace

    _, model, kwargs, iters = next(c for c in CONFIGS if c[0] == "delay")
    trace = local_trace(model)
    opts = _options(kwargs)
    plan, res = _simulate(trace, opts, iters)
    keep = reducer_param_indices(trace, opts)
    assert [trace.params[i].name for i in range(trace.num_params) if i not in keep] == ["8.weight", "8.bias"]
    reducer_index = {t: j for j, t in enumerate(keep)}   # DDP numbers the reducer's parameters afresh
    assert _ints(real["delay"]["bucket_sizes"]) == [b.size_bytes for b in plan.initial]
    assert _ints(real["delay"]["rebuilt_bucket_sizes"]) == [b.size_bytes for b in plan.steady]
    assert _groups(real["delay"]["rebuilt_per_bucket_param_indices"]) == [
        [reducer_index[i] for i in b.param_indices] for b in plan.steady]
    assert all(real["delay"]["grads_ok"])   # the delayed gradients are averaged too
    delayed = [s for s in res.spans if s.rank == 0 and s.stream == "comm" and s.name == "delayed_all_reduce"]
    assert len(delayed) == iters and delayed[0].size_bytes == (700 * 10 + 10) * 4


@pytest.mark.parametrize("cid,kwargs", SYNC_CONFIGS, ids=[c[0] for c in SYNC_CONFIGS])
def test_forward_sync_buffers_like_ddp(real, cid, kwargs):
    from ddpsim.plan.planner import explicit_plan
    from ddpsim.trace.records import BufferRecord, make_trace

    # each rank set its buffer to rank + 1 after construction; a broadcast before forward
    # brings rank 0's 1.0 to rank 1
    scales = real[cid]["scale_after_forward"]
    synced = scales == [[1.0] * 4, [1.0] * 4]
    assert synced or scales == [[1.0] * 4, [2.0] * 4]
    opts = _options(kwargs)
    assert opts.syncs_buffers_in_forward == synced == bool(real[cid]["broadcast_buffers"])
    trace = make_trace(model="scaled", params=[("lin.weight", (4, 4), "float32"), ("lin.bias", (4,), "float32")],
                       ready_s=[0.002, 0.001], forward_s=0.01, backward_s=0.01, optimizer_s=0.0,
                       buffers=(BufferRecord(name="scale", dtype="float32", size_bytes=16),))
    _, res = _simulate(trace, opts, 1)
    broadcasts = [s for s in res.spans if s.rank == 0 and s.kind == "broadcast"]
    assert bool(broadcasts) == opts.syncs_buffers_in_forward


def test_forward_sync_buffers_configs_cover_both_outcomes(real):
    assert [real[c]["broadcast_buffers"] for c, _ in SYNC_CONFIGS] == [1, 0, 0, 1]


def test_mixed_precision_buffers_and_buckets_like_ddp(real):
    from ddpsim.network.kernel_costs import param_elem_bytes
    from ddpsim.plan.planner import MixedPrecision, plan_ddp
    from ddpsim.trace.records import BufferRecord, make_trace

    mp = MixedPrecision(**MP)
    # Linear(8,16), BatchNorm1d(16), Linear(16,4): DDP order 0.weight, 0.bias, 1.weight, 1.bias, 2.weight, 2.bias
    trace = make_trace(model="mp", params=[("0.weight", (16, 8), "float32"), ("0.bias", (16,), "float32"),
                                           ("1.weight", (16,), "float32"), ("1.bias", (16,), "float32"),
                                           ("2.weight", (4, 16), "float32"), ("2.bias", (4,), "float32")],
                       ready_s=[0.006, 0.005, 0.004, 0.003, 0.002, 0.001], forward_s=0.01, backward_s=0.01,
                       optimizer_s=0.0,
                       buffers=(BufferRecord(name="1.running_mean", dtype="float32", size_bytes=64),
                                BufferRecord(name="1.running_var", dtype="float32", size_bytes=64),
                                BufferRecord(name="1.num_batches_tracked", dtype="int64", size_bytes=8)))
    opts = _options({"mixed_precision": mp})
    plan, res = _simulate(trace, opts, 1)
    # DDP casts every buffer, the int64 counter included, to buffer_dtype
    assert real["mp"]["buffers"] == [["1.running_mean", "float16", 32], ["1.running_var", "float16", 32],
                                     ["1.num_batches_tracked", "float16", 2]]
    (bc,) = [s for s in res.spans if s.rank == 0 and s.kind == "broadcast"]
    assert bc.size_bytes == sum(b[2] for b in real["mp"]["buffers"])
    # buckets: laid out by the fp32 sizes, held in param_dtype
    assert _ints(real["mp"]["bucket_sizes"]) == [b.size_bytes for b in plan.initial]
    assert real["mp"]["buckets"] == [[mp.param_dtype, sum(trace.params[i].numel for i in b.param_indices)]
                                     for b in plan.initial]
    assert {param_elem_bytes(trace.params[i].dtype, mp)[1] for b in plan.initial for i in b.param_indices} == {2}


if __name__ == "__main__":
    worker_main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4])
