"""Worker of ``tests/test_compiled_ddp.py``: DDPOptimizer's own buckets for the bundled models.

Run as a script (one process, a 1-rank gloo group over a HashStore): for each model, records
ddpsim's :class:`~ddpsim.trace.compiled_graph.CompiledGraph` (the bare module compiled with a
recording backend), then compiles ``DDP(model)`` with ``backend="aot_eager"`` and
``optimize_ddp=True``, runs one step, and reads back ``DDPOptimizer.buckets`` (parameters
mapped to DDP's indices through Dynamo's graph arguments) at the DDP's own cap (the first
``--rebuild`` cap, else DDP's default); the same Dynamo graph is then split again by
``DDPOptimizer(cap).compile_fn`` at each other cap.
Also fuses a list of gradient sizes with inductor's ``_bucket_size_fusion`` (the python
reducer's bucketing). With ``--rebuild [CAPS]``: DDP's rebuilt buckets under compile at each cap
(MiB, comma-separated; 5 by default) and the order its hooks fired in. Prints one JSON object.
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

MODELS = {"mlp": {"width": 512, "depth": 6}, "gpt2-124m": {"n_layer": 2, "seq_len": 16},
          "bert-base": {"n_layer": 2, "seq_len": 16}, "resnet50": {}}
CAPS_MB = (None, 1, 2.5, 5, 25)
BATCH = {"resnet50": 1}


def _buckets(opt, ids):
    return [{"params": [ids[id(t)] for t in b], "size": size} for size, b in opt]


def model_case(name, kwargs, rebuild_caps=()):
    """DDPOptimizer's buckets for ``name``: read back from a real compiled step at DDP's own cap
    (the first of ``rebuild_caps``, else DDP's default), split again at each other cap; with
    ``rebuild_caps``, DDP's rebuilt buckets at each (:func:`rebuild_case`), the first from that
    same compiled DDP run on (one Dynamo compilation of each model serves both oracles)."""
    import copy

    from torch._dynamo.backends import distributed as dd

    from ddpsim.schema import to_plain
    from ddpsim.trace.compiled_graph import capture_compiled_graph
    from ddpsim.trace.models import build_model, ddp_params

    spec = build_model(name, **kwargs)
    fresh = copy.deepcopy(spec.module)  # each DDP wraps an untouched copy, the model built once
    params = [p for _, p, _ in ddp_params(spec.module)]
    graph = capture_compiled_graph(spec, params, batch_size=BATCH.get(name, 2))
    module = copy.deepcopy(fresh)
    ids = {id(p): i for i, (_, p, _) in enumerate(ddp_params(module))}
    seen = []
    original = dd.DDPOptimizer.compile_fn

    def spy(self, gm, example_inputs, **kw):
        out = original(self, gm, example_inputs, **kw)
        real = {n.target: n.meta["grapharg"].example for n in gm.graph.nodes if n.op == "placeholder"}
        seen.append((gm, example_inputs, [(b.size, [real[p] for p in b.params]) for b in self.buckets], real))
        return out

    own_cap, *other_caps = rebuild_caps or (None,)
    first = []  # the graphs of the first step (a later step's recompilation, if any, left out)
    dd.DDPOptimizer.compile_fn = spy
    try:
        rebuilt = rebuild_case(spec, module, own_cap, iterations=3 if rebuild_caps else 1,
                               after_first=lambda: first.extend(seen))
    finally:
        dd.DDPOptimizer.compile_fn = original
    by_cap = {str(own_cap) if own_cap is not None else "null": [_buckets(s[2], ids) for s in first]}
    for cap in CAPS_MB:
        if cap == own_cap:
            continue
        per_graph = []
        for gm, example_inputs, _, real in first:
            cap_bytes = int((25 if cap is None else cap) * 1024 * 1024)
            opt = dd.DDPOptimizer(bucket_bytes_cap=cap_bytes, backend_compile_fn=lambda g, ex: g.forward)
            opt.compile_fn(gm, example_inputs)
            per_graph.append(_buckets([(b.size, [real[p] for p in b.params]) for b in opt.buckets], ids))
        by_cap["null" if cap is None else str(cap)] = per_graph
    case = {"num_params": len(params), "graph": to_plain(graph), "buckets": by_cap,
            "params": [[n, list(p.shape), str(p.dtype).removeprefix("torch.")] for n, p, _ in ddp_params(spec.module)]}
    if rebuild_caps:
        case["rebuild"] = {str(own_cap): rebuilt}
        for cap in other_caps:
            case["rebuild"][str(cap)] = rebuild_case(spec, copy.deepcopy(fresh), cap)
    return case


def rebuild_case(spec, module, cap_mb=5, iterations=3, after_first=lambda: None):
    """DDP's rebuilt buckets under ``torch.compile`` at ``cap_mb`` (``_get_ddp_logging_data``; DDP's
    default cap if None) and the order its parameters' post-accumulate-grad hooks fired in (the
    order the rebuild reads), ``module`` (``spec``'s model, untouched) run ``iterations`` steps."""
    import torch
    from torch.nn.parallel import DistributedDataParallel as DDP

    from ddpsim.trace.models import ddp_params, default_loss

    order: list[int] = []
    for i, (_, p, _) in enumerate(ddp_params(module)):
        p.register_post_accumulate_grad_hook(lambda _p, i=i: order.append(i))
    torch._dynamo.reset()
    torch._dynamo.config.optimize_ddp = True
    ddp = DDP(module, **({} if cap_mb is None else {"bucket_cap_mb": cap_mb}))
    model = torch.compile(ddp, backend="aot_eager")
    for k in range(iterations):
        order.clear()
        batch = spec.make_batch(BATCH.get(spec.name, 2))
        out = model(*batch) if isinstance(batch, tuple) else model(batch)
        (spec.loss_fn or default_loss)(out).backward()
        if k == 0:
            after_first()
    data = ddp._get_ddp_logging_data()
    torch._dynamo.reset()
    return {"cap_mb": cap_mb, "hook_order": order, "rebuilt_bucket_sizes": data.get("rebuilt_bucket_sizes"),
            "rebuilt_per_bucket_param_indices": data.get("rebuilt_per_bucket_param_indices")}


def python_reducer_case(sizes_bytes, caps_mb):
    """Groups of ``sizes_bytes`` (gradient order) by inductor's ``_bucket_size_fusion``."""
    import torch
    from torch._inductor.fx_passes import ddp_fusion

    def block(n):
        meta = {"tensor_meta": SimpleNamespace(dtype=torch.float32)}
        return SimpleNamespace(comm_node=SimpleNamespace(meta=meta), shape=torch.Size([n // 4]), n=n)

    out = {}
    for cap in caps_mb:
        blocks = [block(n) for n in sizes_bytes]
        groups = ddp_fusion._bucket_size_fusion(None, blocks, bucket_size_mb=cap)
        out[str(cap)] = [[blocks.index(b) for b in g] for g in groups]
    return out


def main() -> None:
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
    names = sys.argv[1].split(",") if len(sys.argv) > 1 else list(MODELS)
    caps = ()
    if "--rebuild" in sys.argv:
        caps = [float(c) for c in sys.argv[sys.argv.index("--rebuild") + 1].split(",")] \
            if len(sys.argv) > sys.argv.index("--rebuild") + 1 else [5.0]
        caps = [int(c) if c == int(c) else c for c in caps]  # keys "1", "2.5" as CAPS_MB's
    result = {"models": {n: model_case(n, MODELS[n], caps) for n in names}}
    if caps:
        result["rebuild"] = {n: result["models"][n].pop("rebuild") for n in names}
    sizes = json.loads(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].startswith("[") else []
    result["python_reducer"] = python_reducer_case(sizes, (0, 1, 2, 25)) if sizes else {}
    dist.destroy_process_group()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
