"""What Dynamo's DDPOptimizer needs to know of a compiled model: its FX graphs, walked in reverse.

``DDPOptimizer.compile_fn`` (``torch/_dynamo/backends/distributed.py``) walks each Dynamo graph's
nodes in reverse, adds to the current bucket the storage bytes of the trainable parameters each
node uses (a tied weight twice), and starts a new bucket before a node once the current one is
full, if the current one has a node whose result is used outside it. Per graph this module
records exactly those facts, so that :mod:`ddpsim.plan.compiled` redoes the split for any cap
without torch: ``users[i]`` (the smallest walk index using node i's result; -1 the output, None
nothing), ``uses`` (``(node, param_index, nbytes)`` in DDPOptimizer's order), ``inputs[i]`` (a
node's trainable parameters and the nodes it reads, needing a gradient or not, in
``torch/fx/passes/split_module.py``'s order: a split subgraph's placeholders and its compiled
backward's next edges, :mod:`ddpsim.plan.autograd_order`)
and ``alias_of[i]`` (the node whose storage a view shares: aot_autograd regenerates such a result
outside its subgraph). The graphs are those of one forward of the bare module, in compile order;
``tests/test_compiled_ddp.py`` checks the split against DDPOptimizer's own buckets.
"""

from __future__ import annotations

from typing import Annotated, Any, Iterator, Sequence

from pydantic import Field

from ddpsim.errors import InputError, shorten
from ddpsim.schema import Int, Str, record

#: the graph's output uses this node's result (None: no node uses it)
OUTPUT_USER = -1

_Index = Annotated[Int, Field(ge=0)]
#: ``(node, param_index, nbytes)``
_Use = tuple[_Index, _Index, Annotated[Int, Field(ge=0, le=1 << 50)]]


@record("trace")
class GraphWalk:
    """One Dynamo graph as DDPOptimizer walks it (reverse node order)."""

    users: tuple[Annotated[Int, Field(ge=-1)] | None, ...]
    uses: tuple[_Use, ...]
    #: per node, its inputs in split_module's order: ("param", k) a trainable parameter, ("node", j)
    #: a node's result that needs a gradient, ("data", j) one that does not
    inputs: tuple[tuple[tuple[Str, Int], ...], ...] | None = Field(default=None,
                                                                   exclude_if=lambda v: v is None)
    #: per node, the node whose storage its view result shares (None: none, or not a view)
    alias_of: tuple[_Index | None, ...] | None = Field(default=None, exclude_if=lambda v: v is None)


@record("trace")
class CompiledGraph:
    """The Dynamo graphs of a model's forward, in compile order, and the torch that traced them."""

    torch_version: Str = ""
    graphs: Annotated[tuple[GraphWalk, ...], Field(min_length=1)]

    def check(self, num_params: int) -> "CompiledGraph":
        """Raise InputError unless every node and parameter index is in range."""
        for k, g in enumerate(self.graphs):
            for key, value, expected in _out_of_range(g, num_params):  # the first in key order
                raise InputError(f"compiled_graph.graphs[{k}].{key}: {value} is not accepted; "
                                 f"expected {expected}")
        return self


def _out_of_range(g: GraphWalk, num_params: int) -> Iterator[tuple[str, str, str]]:
    """Every index of ``g`` out of range, as ``(key, value, what is accepted)``, in key order."""
    n = len(g.users)
    for i, u in enumerate(g.users):
        if u is not None and not OUTPUT_USER <= u < i:
            yield f"users[{i}]", shorten(u), f"null, -1 (the output) or a node index in [0, {i})"
    for j, (node, index, nbytes) in enumerate(g.uses):
        if not 0 <= node < n or not 0 <= index < num_params:
            yield (f"uses[{j}]", shorten([node, index, nbytes]),
                   f"[node in [0, {n}), parameter in [0, {num_params}), bytes >= 0]")
    for i, b in enumerate(g.alias_of or ()):
        if b is not None and not (0 <= b < n and b != i):
            yield f"alias_of[{i}]", shorten(b), f"null or another node's index in [0, {n})"
    if g.inputs is not None and len(g.inputs) != n:
        yield "inputs", f"a list of {len(g.inputs)} rows", f"one row per node ({n})"
    for i, row in enumerate(g.inputs if g.inputs is not None and len(g.inputs) == n else ()):
        for kind, v in row:
            if not ((kind == "param" and 0 <= v < num_params)
                    or (kind in ("node", "data") and 0 <= v < n and v != i)):
                yield (f"inputs[{i}]", shorten([kind, v]), f"['param', index in [0, {num_params})] or "
                       f"['node' or 'data', another node's index in [0, {n})]")


# ---- capture (needs torch) ------------------------------------------------------------------

def _walk_graph(torch: Any, gm: Any, index_of: dict[int, int]) -> GraphWalk:
    """``gm``'s nodes in reverse, each with its earliest user and the DDP parameters it adds,
    by DDPOptimizer's rules (``add_param_args``, ``add_module_params_to_bucket``, ``get_attr``)."""
    nodes = [n for n in reversed(gm.graph.nodes) if n.op not in ("output", "placeholder")]
    position = {n: i for i, n in enumerate(nodes)}
    users: list[int | None] = []
    uses: list[tuple[int, int, int]] = []
    seen_modules: set[int] = set()

    def add(i: int, p: Any) -> None:
        if isinstance(p, torch.nn.Parameter) and p.requires_grad and not getattr(p, "_ddp_ignored", False) \
                and id(p) in index_of:
            uses.append((i, index_of[id(p)], p.untyped_storage().nbytes()))

    def add_args(i: int, node: Any) -> None:
        for arg in node.args:
            if isinstance(arg, torch.fx.Node) and arg.op == "placeholder" and "grapharg" in arg.meta:
                add(i, arg.meta["grapharg"].example)

    def add_module(i: int, target: str) -> None:
        try:
            mod = gm.get_submodule(target)
        except AttributeError:
            return
        if id(mod) not in seen_modules:
            seen_modules.add(id(mod))
            for _, p in mod.named_parameters():
                add(i, p)

    inputs = [_grad_inputs(torch, node, position, index_of) for node in nodes]
    for i, node in enumerate(nodes):
        idx = [OUTPUT_USER if u.op == "output" else position[u] for u in node.users if u.op == "output" or u in position]
        users.append(min(idx) if idx else None)
        if node.op == "call_function":
            add_args(i, node)
        elif node.op == "call_module":
            add_module(i, node.target)
        elif node.op == "call_method":
            if isinstance(getattr(node.args[0], "target", None), str):
                add_module(i, node.args[0].target)
            add_args(i, node)
        elif node.op == "get_attr":
            add(i, getattr(gm, node.target, None))
    return GraphWalk(users=tuple(users), uses=tuple(uses), inputs=tuple(inputs), alias_of=_alias_of(torch, nodes))


def _alias_of(torch: Any, nodes: Sequence[Any]) -> tuple[int | None, ...]:
    """Per node (walk order), the nearest earlier node in forward, not a view, whose storage its
    view result shares (Dynamo's fake ``example_value`` tensors keep storage identity)."""
    out: list[int | None] = []
    for i, node in enumerate(nodes):
        value = node.meta.get("example_value")
        base = None
        if isinstance(value, torch.Tensor) and value._is_view():
            storage = value.untyped_storage()._cdata
            base = next((j for j in range(i + 1, len(nodes))
                         if isinstance(o := nodes[j].meta.get("example_value"), torch.Tensor)
                         and not o._is_view() and o.untyped_storage()._cdata == storage), None)
        out.append(base)
    return tuple(out)


def _needs_grad(value: Any) -> bool:
    if isinstance(value, (tuple, list)):
        return any(_needs_grad(v) for v in value)
    return bool(getattr(value, "requires_grad", False))


def _grad_inputs(torch: Any, node: Any, position: dict, index_of: dict[int, int]) -> tuple[tuple[str, int], ...]:
    """``node``'s trainable parameters and node inputs (``GraphWalk.inputs``), in ``split_module``'s
    order (args, then kwargs; none for the global-state nodes it does not record: autocast's and
    grad mode's switches)."""
    if node.target in (torch.amp._enter_autocast, torch.amp._exit_autocast, torch._C._set_grad_enabled):
        return ()
    found: list[tuple[str, int]] = []

    def visit(arg: Any) -> Any:
        if arg.op == "placeholder":
            p = arg.meta["grapharg"].example if "grapharg" in arg.meta else None
            if isinstance(p, torch.nn.Parameter) and id(p) in index_of:
                found.append(("param", index_of[id(p)]))
        elif arg in position:
            found.append(("node" if _needs_grad(arg.meta.get("example_value")) else "data", position[arg]))
        return arg

    torch.fx.graph.map_arg(node.args, visit)
    torch.fx.graph.map_arg(node.kwargs, visit)
    return tuple(found)


def capture_compiled_graph(spec: Any, params: Sequence[Any], *, batch_size: int) -> CompiledGraph:
    """The graphs of one ``batch_size`` forward of ``spec.module`` compiled with a recording Dynamo
    backend, as DDPOptimizer walks them; ``params``: DDP's parameters in DDP's order."""
    import torch

    from ddpsim.trace.models import run_forward

    index_of = {id(p): i for i, p in enumerate(params)}
    graphs: list[GraphWalk] = []

    def record(gm: Any, example_inputs: Any) -> Any:
        graphs.append(_walk_graph(torch, gm, index_of))
        return gm.forward

    torch._dynamo.reset()
    try:
        run_forward(torch.compile(spec.module, backend=record), spec.make_batch(batch_size))
    except Exception as exc:  # noqa: BLE001 -- a model Dynamo cannot trace: one line
        raise InputError(f"model {spec.name!r}: torch.compile failed ({type(exc).__name__}: "
                         f"{shorten(str(exc).splitlines()[0] if str(exc) else '')}); expected a model Dynamo can "
                         "trace") from None
    finally:
        torch._dynamo.reset()
    if not graphs:
        raise InputError(f"model {spec.name!r}: Dynamo compiled no graph; expected a forward it can trace")
    return CompiledGraph(graphs=tuple(graphs), torch_version=torch.__version__)
