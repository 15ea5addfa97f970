"""The hosts of a communicator, and the classes of identical hosts that share their search: hosts
whose elements, attributes, links, ranks and NICs match position by position (:func:`same_host`; a
preset's copies of host 0, :func:`ddpsim.network.graph_build.host_copies`, without comparing) form a
class whose own links' loads are computed once, on its representative, only the fabric walked host by
host (exact, linear in the hosts). Host 0 (its inbound hop closes the ring) and hosts with a link
between two of their NICs are walked one by one; a route leaving its host makes the search walk every
host (:func:`ddpsim.network.graph_search.search_graphs`).
"""

from __future__ import annotations

import math
import operator
from typing import Any

import networkx as nx

from ddpsim.errors import InputError
from ddpsim.network.comm_model import GBPS
from ddpsim.network.graph_build import host_copies
from ddpsim.network.link_loads import LinkIndex
from ddpsim.network.mesh_search import nvlink_mesh
from ddpsim.network.routing import Placement, Router, memo, nearest_first, nvlink_domains
from ddpsim.network.topology import BANDWIDTH, HOST, KIND, LOCAL_RANK, RAIL


class Hosts:
    """The ranks' hosts: ``devs[i]`` host i's devices in rank order, ``nodes[i]`` its elements, across
    hosts ``nics[i]`` its NICs in rail order; ``classes`` group identical hosts (positions ascending,
    the first the representative whose search they share), ``walked`` the others."""

    def __init__(self, graph: nx.Graph, placement: Placement, *, share: bool = True) -> None:
        self.graph = graph
        self.router = Router(graph)
        self.devs = placement.hosts
        self.count = len(placement.hosts)
        self.multi = self.count > 1
        by_host = self.router.host_nodes
        host_ids = [graph.nodes[h[0]][HOST] for h in placement.hosts]
        # an NVLink domain (MNNVL) is one NCCL node: the elements of all its hosts and its switches
        domains = nvlink_domains(graph)
        self.nodes = [by_host[h] if h not in domains else self.router.domain_nodes(domains[h]) for h in host_ids]
        copies = host_copies(graph)
        #: hosts (positions) built as renamed copies of host 0, outside any NVLink domain
        self.copies = frozenset(i for i, h in enumerate(host_ids)
                                if copies is not None and h in copies.hosts and h not in domains)
        self.nics: list[list] = self._all_nics() if self.multi else [[] for _ in self.nodes]
        if self.multi and any(not n for n in self.nics):
            raise InputError(f"topology {graph.graph.get('name')!r}: a host has no NIC; expected kind nic nodes on every "
                             "host for a multi-node communicator")
        self._nic_lcm = math.lcm(*{len(n) for n in self.nics}) if self.multi else 1
        #: class -> per position, that element in every member
        self._columns: dict[int, list[tuple]] = {}
        adj = graph._adj
        #: the searches' link index, capacities in GB/s
        self.links = LinkIndex(lambda e: adj[e[0]][e[1]][BANDWIDTH] / GBPS)
        self._routes: dict[tuple, tuple[dict[tuple, float], list[tuple[int, int]]]] = {}
        #: no route between hosts touches host 0's own links (no link between two of its NICs)
        self.fabric_apart = self.multi and self._shareable(0)
        self.classes, self.walked = self._classes() if share and self.multi else ([], list(range(self.count)))

    def _all_nics(self) -> list[list]:
        """Every host's NICs in rail order; a copy's at the positions of the first copy's."""
        attr, out, at = self.graph._node, [], None
        for i, ns in enumerate(self.nodes):
            if i in self.copies and at is not None:
                out.append([ns[p] for p in at])
                continue
            out.append(sorted([n for n in ns if attr[n][KIND] == "nic"],
                              key=lambda n: (attr[n].get(RAIL, 0), str(n))))
            if i in self.copies:
                pos = {n: k for k, n in enumerate(ns)}
                at = [pos[n] for n in out[-1]]
        return out

    def _classes(self) -> tuple[list[tuple[int, ...]], list[int]]:
        """Hosts 1.. grouped with the first earlier host they match (:func:`same_host`)."""
        members: list[list[int]] = []
        buckets: dict[tuple, list[int]] = {}
        walked = [0]
        copy_shareable = None  # every copy is shareable when one is
        for i in range(1, self.count):
            if i in self.copies and copy_shareable is not None:
                shareable = copy_shareable
            else:
                shareable = self._shareable(i)
                if i in self.copies:
                    copy_shareable = shareable
            if not shareable:
                walked.append(i)
                continue
            key = (len(self.nodes[i]), len(self.devs[i]), len(self.nics[i]))
            for k in buckets.get(key, ()):
                if same_host(self, members[k][0], i):
                    members[k].append(i)
                    break
            else:
                buckets.setdefault(key, []).append(len(members))
                members.append([i])
        return [tuple(m) for m in members], sorted(walked)

    def _shareable(self, i: int) -> bool:
        """False for a host with a link between two of its NICs (a route between hosts may take it)."""
        attr, adj, pos = self.graph._node, self.graph._adj, self.position(i)
        return not any(attr[m][KIND] == "nic" and m in pos for x in self.nics[i] for m in adj[x])

    @memo
    def shape(self, r: int) -> tuple[list[tuple], list[tuple[int]], list[tuple[int]]]:
        """What :func:`same_host` compares, from host r (a class's representative): per element a
        getter of its attributes but the host, their values and count, and its links (a NIC's on
        the host only); the positions of the ranks' devices and of the NICs."""
        pr, node_attr, adj = self.position(r), self.graph._node, self.graph._adj
        elements = []
        for a in self.nodes[r]:
            attr = node_attr[a]
            keys = [k for k in attr if k != HOST]
            get = operator.itemgetter(*keys) if keys else (lambda d: ())
            if attr[KIND] == "nic":
                links: list = [(pr[x], d) for x, d in adj[a].items() if x in pr]
                nbrs: list = []
            else:
                links, nbrs = list(adj[a].values()), list(map(pr.get, adj[a], adj[a]))
            elements.append((get, get(attr), len(attr), attr[KIND] == "nic", links, nbrs))
        return elements, [pr[d] for d in self.devs[r]], [pr[x] for x in self.nics[r]]

    @memo
    def position(self, i: int) -> dict[Any, tuple[int]]:
        """Host i's elements -> (their position in ``nodes[i]``,)."""
        return {n: (k,) for k, n in enumerate(self.nodes[i])}

    @memo
    def mesh(self, i: int) -> dict[tuple, float] | None:
        """Host i's direct GPU-to-GPU NVLinks (:func:`ddpsim.network.mesh_search.nvlink_mesh`)."""
        return nvlink_mesh(self.graph, self.devs[i]) if len(self.devs[i]) > 1 else None

    def add_route(self, loads: dict[tuple, float], i: int, c: int) -> None:
        """Channel c from host i's NIC ``c mod num_nics`` to the next host's NIC."""
        nxt = (i + 1) % self.count
        self.router.add_load(loads, self.nics[i][c % len(self.nics[i])], self.nics[nxt][c % len(self.nics[nxt])])

    def nic_assignment(self, c: int) -> int:
        """Channel c's NICs as a number: c mod the lcm of the hosts' NIC counts."""
        return c % self._nic_lcm if self.multi else 0

    def routes(self, c: int) -> tuple[dict[tuple, float], list[tuple[int, int]]]:
        """Channel c's routes from each host to the next, summed per link, and where each host's starts."""
        key = self.nic_assignment(c)
        if key not in self._routes:
            d: dict[tuple, float] = {}
            bounds = []
            for i in range(self.count):
                bounds.append((len(d), i))
                self.add_route(d, i, c)
            self._routes[key] = d, bounds
        return self._routes[key]

    def searched(self) -> list[int]:
        """The hosts whose own searches run: the walked ones and each class's representative."""
        return sorted(self.walked + [rep for rep, *_ in self.classes])

    @memo
    def entry(self, i: int) -> list[tuple[Any, Any]]:
        return nearest_first(self.router, self.nics[i], self.devs[i])

    def member_names(self, k: int, node: Any) -> list:
        """Class k's representative's element ``node`` in every member (one outside it keeps its name)."""
        members = self.classes[k]
        p = self.position(members[0]).get(node)
        if p is None:
            return [node] * len(members)
        if k not in self._columns:
            self._columns[k] = list(zip(*(self.nodes[m] for m in members)))
        return list(self._columns[k][p[0]])


def same_host(hosts: Hosts, r: int, i: int) -> bool:
    """Whether host i is host r up to names: element by element the same attributes but the host, the
    same links in order to the same positions or outside elements (NIC uplinks left out), and the
    ranks' devices and NICs at the same positions (two copies of host 0: the same local ranks)."""
    if r in hosts.copies and i in hosts.copies:
        ranks = [[hosts.graph._node[d][LOCAL_RANK] for d in hosts.devs[h]] for h in (r, i)]
        return ranks[0] == ranks[1]
    elements, devs, nics = hosts.shape(r)
    pi = hosts.position(i)
    nodes = hosts.nodes[i]
    if len(nodes) != len(elements):
        return False
    if devs != [pi[d] for d in hosts.devs[i]] or nics != [pi[x] for x in hosts.nics[i]]:
        return False
    node_attr, adj = hosts.graph._node, hosts.graph._adj
    for b, (get, values, size, is_nic, links, nbrs) in zip(nodes, elements):
        attr_b = node_attr[b]
        if len(attr_b) != size or HOST not in attr_b:
            return False
        try:
            if get(attr_b) != values:
                return False
        except KeyError:
            return False
        adj_b = adj[b]
        if is_nic:
            if [(pi[y], d) for y, d in adj_b.items() if y in pi] != links:
                return False
        elif list(adj_b.values()) != links or list(map(pi.get, adj_b, adj_b)) != nbrs:
            return False
    return True
