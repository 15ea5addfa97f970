"""How the presets build their graphs: elements and links written straight into networkx's structure. A
cluster of N identical hosts is host 0 built once and renamed N - 1 times (``n0/`` -> ``n{h}/``). The
builder remembers which hosts are such copies, and keeps a host one only while nothing but a link from
one of its NICs to an element outside every copy is added after it (the fabric); :func:`host_copies`
hands that to the checks and searches that would otherwise compare every host with host 0
(:mod:`ddpsim.network.topology_check`, :mod:`ddpsim.network.host_classes`). Topologies are treated as
immutable once built.
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Iterator

import networkx as nx

from ddpsim.network.graph_attrs import HOST, KIND


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off: building a large topology, or searching it, allocates
    many small objects that all live on, and each full collection would walk them all again."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def new_graph(**attrs: Any) -> nx.Graph:
    # NOTE: nx.Graph(backend=...) is networkx's dispatch keyword; set graph attributes after.
    g = nx.Graph()
    g.graph.update(attrs)
    return g


@dataclass(frozen=True)
class HostCopies:
    """``hosts``: the hosts built as host 0's block renamed, linked to the rest only from their
    NICs to elements of no copy; ``connected``: host 0's block is connected on its own."""

    hosts: frozenset[int]
    connected: bool


#: per graph a builder made (graphs are treated as immutable once built)
_COPIES: "weakref.WeakKeyDictionary[nx.Graph, HostCopies]" = weakref.WeakKeyDictionary()


def host_copies(graph: nx.Graph) -> HostCopies | None:
    """The copies of host 0 in a graph :class:`Builder` made (None: none, or another graph)."""
    return _COPIES.get(graph)


class Builder:
    """A preset's elements and links written straight into a :class:`networkx.Graph`'s documented
    structure: the graph ``add_node``/``add_edge`` would give, in the same order, without their per-call work."""

    def __init__(self, **attrs: Any) -> None:
        self._g = new_graph(**attrs)
        self.graph = self._g.graph
        self._template: HostTemplate | None = None
        self._record: list[tuple[Any, Any, dict[str, Any]]] | None = None  # host 0's links, as added
        self._copies: set[int] = set()

    def __contains__(self, n: Any) -> bool:
        return n in self._g._node

    def add_node(self, n: Any, **attrs: Any) -> None:
        node = self._g._node
        d = node.get(n)
        if self._copies:  # an element of a copy changed, or one added to it: a copy no more
            self._copies.discard(attrs.get(HOST))
            if d is not None:
                self._copies.discard(d.get(HOST))
        if d is None:
            node[n] = attrs
            self._g._adj[n] = {}
        else:
            d.update(attrs)

    def add_edge(self, u: Any, v: Any, **attrs: Any) -> None:
        """networkx's ``add_edge``, ``attrs`` kept as the link's dict."""
        node, adj, copies = self._g._node, self._g._adj, self._copies
        for n in (u, v):
            if n not in node:
                node[n], adj[n] = {}, {}
        if copies and (node[u].get(HOST) in copies or node[v].get(HOST) in copies):
            self._link_after_copies(node[u], node[v])
        if self._record is not None:
            self._record.append((u, v, attrs))
        nbrs = adj[u]
        d = nbrs.get(v)
        if d is None:
            nbrs[v] = adj[v][u] = attrs
        else:
            d.update(attrs)

    def _link_after_copies(self, a: dict[str, Any], b: dict[str, Any]) -> None:
        """A copy stays one only for a link from one of its NICs to an element of no copy."""
        copies = self._copies
        ha, hb = a.get(HOST), b.get(HOST)
        in_a, in_b = ha in copies, hb in copies
        if in_a and (in_b or a.get(KIND) != "nic"):
            copies.discard(ha)
        if in_b and (in_a or b.get(KIND) != "nic"):
            copies.discard(hb)

    def host(self, h: int, add: Callable[[], list[str]]) -> list[str]:
        """Host ``h``'s elements and links, its NICs returned: ``add()`` for host 0, kept as a template; a
        later host is host 0 renamed (``n0/`` -> ``n{h}/``, ``host`` 0 -> h) when host 0 is
        self-contained (every element ``n0/...`` of host 0, its links between them), else ``add()``."""
        template = self._template
        if h > 0 and template is not None:
            return template.stamp(self, h)
        if h != 0:
            return add()
        n0, self._record = len(self._g._node), []
        nics = add()
        self._template = HostTemplate.of(self, n0, self._record, nics)
        self._record = None
        return nics

    def to_graph(self) -> nx.Graph:
        if self._copies and self._template is not None:
            _COPIES[self._g] = HostCopies(hosts=frozenset(self._copies), connected=self._template.connected)
        return self._g


class HostTemplate:
    """Host 0's elements (name suffixes after ``n0/``, attributes) and links as added (suffixes,
    attributes), its NICs' suffixes; for :meth:`Builder.host`'s stamps the links once each
    (``links``) and per element its neighbours in link order (element number, link number)."""

    PREFIX = "n0/"

    def __init__(self, nodes: list[tuple[str, dict[str, Any]]], edges: list[tuple[str, str, dict[str, Any]]],
                 nics: list[str]) -> None:
        self.nodes, self.nics = nodes, nics
        number = {s: i for i, (s, _) in enumerate(nodes)}
        nbrs: list[dict[int, int]] = [{} for _ in nodes]
        self.links: list[dict[str, Any]] = []  # each link's attributes, as repeated adds merge them
        for u, v, attrs in edges:
            i, j = number[u], number[v]
            k = nbrs[i].get(j)
            if k is None:
                k = nbrs[i][j] = nbrs[j][i] = len(self.links)
                self.links.append(dict(attrs))
            else:
                self.links[k].update(attrs)
        self.nbrs = [list(d.items()) for d in nbrs]
        block = nx.empty_graph([s for s, _ in nodes])
        block.add_edges_from((u, v) for u, v, _ in edges)
        self.connected = len(block) > 0 and nx.is_connected(block)

    @classmethod
    def of(cls, b: Builder, n0: int, edges: list[tuple[Any, Any, dict[str, Any]]],
           nics: list[str]) -> HostTemplate | None:
        """Host 0's block: the builder's elements after its first ``n0`` and the links ``edges`` added
        with them; None when it is not self-contained."""
        cut = len(cls.PREFIX)
        nodes = list(itertools.islice(b._g._node.items(), n0, None))
        names = {n for n, _ in nodes}
        if not all(isinstance(n, str) and n.startswith(cls.PREFIX) and a.get(HOST) == 0 for n, a in nodes):
            return None
        if not all(u in names and v in names for u, v, _ in edges) or not set(nics) <= names:
            return None
        return cls([(n[cut:], dict(a)) for n, a in nodes], [(u[cut:], v[cut:], a) for u, v, a in edges],
                   [n[cut:] for n in nics])

    def stamp(self, b: Builder, h: int) -> list[str]:
        """Host ``h`` (none of whose elements exist yet: hosts are built in order): the template
        renamed, as ``add_node``/``add_edge`` would add it; its NICs."""
        pre = f"n{h}/"
        node, adj = b._g._node, b._g._adj
        names = [pre + s for s, _ in self.nodes]
        links = [dict(a) for a in self.links]
        for name, (_, attrs), nbrs in zip(names, self.nodes, self.nbrs):
            node[name] = {**attrs, HOST: h}
            adj[name] = {names[j]: links[k] for j, k in nbrs}
        b._copies.add(h)
        return [pre + n for n in self.nics]
