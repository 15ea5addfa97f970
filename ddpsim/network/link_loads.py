"""The load channels put on every directed link, summed over channels, as the graph search needs it:
the most loaded link (per capacity) after each added channel, and whether a set of channels fits at
given speeds. A channel's loads (:class:`ChannelLoads`) are the walked links (the fabric and the
hosts walked one by one) in the order the channel reaches them, and per class of identical hosts
(:mod:`ddpsim.network.host_classes`) the representative's own links. Sums run in channel order (numpy
over the walked links), so every total is the float of a plain sum link by link; ties for the most
loaded link go to the link the channels reach first.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

Link = tuple[Any, Any]


@dataclass
class ChannelLoads:
    """One channel's load per directed link, in units of its speed: ``blocks`` the walked links in walk
    order (dicts over disjoint links, shareable by channels); ``bounds`` (first rank in the walk, host,
    part) where each part starts (0 a host's own links, 1 the route to the next host, 2 the next
    host's inbound hop); ``by_class[k]`` class k's representative's links, ``inbound_len[k]`` of them
    its inbound hop's, first."""

    blocks: list[dict[Link, float]] = field(default_factory=list)
    bounds: list[tuple[int, int, int]] = field(default_factory=list)
    by_class: list[dict[Link, float]] = field(default_factory=list)
    inbound_len: list[int] = field(default_factory=list)

    def walked_key(self, rank: int) -> tuple[int, int, int]:
        """(host, part, rank) of the ``rank``-th walked link: where the channel first reaches it."""
        i = bisect.bisect_right([b[0] for b in self.bounds], rank) - 1
        return self.bounds[i][1], self.bounds[i][2], rank

    def class_key(self, k: int, rank: int, rep: int) -> tuple[int, int, int]:
        """Where the channel first reaches class k's link ranked ``rank`` on its first member ``rep``."""
        n_in = self.inbound_len[k]
        return (rep - 1, 2, rank) if rank < n_in else (rep, 0, rank - n_in)


class LinkIndex:
    """Walked links numbered once for all of a communicator's searches, with their capacities (GB/s);
    a channel's walked loads as (link numbers, loads) arrays in walk order."""

    def __init__(self, cap: Callable[[Link], float]) -> None:
        self.cap_of = cap
        self.pos: dict[Link, int] = {}
        self.links: list[Link] = []
        self._caps: list[float] = []
        self._arrays: dict[int, tuple[dict, np.ndarray, np.ndarray]] = {}

    def _block(self, d: dict[Link, float]) -> tuple[np.ndarray, np.ndarray]:
        got = self._arrays.get(id(d))
        if got is None or got[0] is not d:
            pos, n0 = self.pos, len(self.links)
            fresh = pos.keys().isdisjoint(d)  # e.g. the fabric routes of one NIC assignment
            new = list(d) if fresh else [e for e in d if e not in pos]  # numbered in the order the block reaches them
            pos.update(zip(new, range(n0, n0 + len(new))))
            self.links.extend(new)
            self._caps.extend(map(self.cap_of, new))
            ids = np.arange(n0, n0 + len(d)) if fresh else np.fromiter(map(pos.__getitem__, d), np.int64, len(d))
            got = (d, ids, np.fromiter(d.values(), float, len(d)))
            self._arrays[id(d)] = got  # keeps d alive: its id stays its own
        return got[1], got[2]

    def arrays(self, ch: ChannelLoads) -> tuple[np.ndarray, np.ndarray]:
        """A channel's walked links (their numbers, in walk order) and loads."""
        parts = [self._block(d) for d in ch.blocks]
        if len(parts) == 1:
            return parts[0]
        if not parts:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def dense(self, ch: ChannelLoads, size: int) -> np.ndarray:
        ids, vals = self.arrays(ch)
        v = np.zeros(size)
        v[ids] = vals
        return v

    def caps(self, size: int) -> np.ndarray:
        return np.array(self._caps[:size], dtype=float)


def prefix_utilisation(channels: list[ChannelLoads], index: LinkIndex,
                       reps: list[int]) -> tuple[list[float], list[str]]:
    """``util[k]``: the largest load / capacity with the first k channels; ``worst[k]``: that link
    ("u -> v"), the first reached among equals (``reps[k]``: class k's first member)."""
    distinct = list({id(ch): ch for ch in channels}.values())
    walks = {id(ch): index.arrays(ch) for ch in distinct}
    size = len(index.links)
    cap = index.caps(size)
    vec = {id(ch): index.dense(ch, size) for ch in distinct}
    first_c = np.full(size, -1, dtype=np.int64)  # the first channel reaching each link, its rank there
    first_r = np.zeros(size, dtype=np.int64)
    for c, ch in enumerate(channels):
        ids, _ = walks[id(ch)]
        new = first_c[ids] == -1
        first_c[ids[new]] = c
        first_r[ids[new]] = np.flatnonzero(new)
    order = np.where(first_c >= 0, first_c * (size + 1) + first_r, np.iinfo(np.int64).max)
    acc = np.zeros(size)
    acc_cls: list[dict[Link, float]] = [{} for _ in reps]
    first_cls: list[dict[Link, tuple]] = [{} for _ in reps]
    util, worst = [0.0], [""]
    for c, ch in enumerate(channels):
        acc += vec[id(ch)]
        best_val, best_key, best_link = -np.inf, None, None
        if size:
            ratio = acc / cap
            m = ratio.max()
            ties = np.flatnonzero(ratio == m)
            i = int(ties[np.argmin(order[ties])])
            c0 = int(first_c[i])
            best_val, best_key, best_link = m, (c0, *channels[c0].walked_key(int(first_r[i]))), index.links[i]
        for k, d in enumerate(ch.by_class):
            a, f = acc_cls[k], first_cls[k]
            for r, (e, v) in enumerate(d.items()):
                a[e] = a.get(e, 0.0) + v
                if e not in f:
                    f[e] = (c, *ch.class_key(k, r, reps[k]))
            for e, v in a.items():
                x = v / index.cap_of(e)
                if x > best_val or (x == best_val and f[e] < best_key):
                    best_val, best_key, best_link = x, f[e], e
        util.append(float(best_val))
        worst.append(f"{best_link[0]} -> {best_link[1]}")
    return util, worst


class Totals:
    """Intra-node (at ``bwIntra``) and inter-node (at ``bwInter``) loads summed over a set of channels;
    ``member_names(k, element)`` names class k's representative's element in every member."""

    def __init__(self, intra: list[ChannelLoads], inter: list[ChannelLoads], index: LinkIndex,
                 member_names: Callable[[int, Any], list], num_classes: int) -> None:
        for ch in intra + inter:
            index.arrays(ch)
        size = len(index.links)
        self.index, self.cap = index, index.caps(size)
        self.li = sum((index.dense(ch, size) for ch in intra), np.zeros(size))
        self.le = sum((index.dense(ch, size) for ch in inter), np.zeros(size))
        self.present = (self.li > 0) | (self.le > 0)  # every load a channel puts on a link is > 0
        self.member_names = member_names
        self._firsts: dict[tuple[int, Any], list[int]] = {}  # (class, element) -> members that may name first
        # per class: its intra and inter loads summed over the channels (every load > 0)
        self.cls = [tuple(sum((Counter(ch.by_class[k]) for ch in chs), Counter())
                          for chs in (intra, inter)) for k in range(num_classes)]

    @staticmethod
    def _load(li: dict, le: dict, e: Link, s_intra: float, s_inter: float) -> float:
        return li.get(e, 0.0) * s_intra + le.get(e, 0.0) * s_inter

    def fits(self, s_intra: float, s_inter: float) -> bool:
        """Every link carries the channels at these speeds."""
        if len(self.cap) and not np.all(self.li * s_intra + self.le * s_inter <= self.cap * (1 + 1e-9)):
            return False
        cap = self.index.cap_of
        return all(self._load(li, le, e, s_intra, s_inter) <= cap(e) * (1 + 1e-9)
                   for li, le in self.cls for e in set(li) | set(le))

    def worst(self, s_intra: float, s_inter: float) -> str:
        """The most loaded link (per capacity) at these speeds, "u -> v", the first by name; "" with none."""
        cands: list[tuple[float, Callable[[], tuple[str, Link]]]] = []  # (load, its first link by name)
        if self.present.any():
            ratio = np.where(self.present, (self.li * s_intra + self.le * s_inter) / self.cap, -np.inf)
            m = ratio.max()
            ties = [self.index.links[i] for i in np.flatnonzero(ratio == m)]
            cands.append((m, lambda ties=ties: min(((str(e), e) for e in ties))))
        cap = self.index.cap_of
        for k, (li, le) in enumerate(self.cls):
            es = set(li) | set(le)
            if not es:
                continue
            vals = {e: self._load(li, le, e, s_intra, s_inter) / cap(e) for e in es}
            m = max(vals.values())
            cands.append((m, lambda k=k, ties=[e for e, v in vals.items() if v == m]: self._first_member_link(k, ties)))
        if not cands:
            return ""
        m = max(c[0] for c in cands)
        e = min(name() for x, name in cands if x == m)[1]
        return f"{e[0]} -> {e[1]}"

    def _first_member_link(self, k: int, links: list[Link]) -> tuple[str, Link]:
        """Of class k's representative's ``links`` in every member, the first by name (only the members
        whose ``repr(u)`` starts with the least of them can be: ``str((u, v))`` starts with it)."""
        best = []
        for u, v in links:
            us, vs = self.member_names(k, u), self.member_names(k, v)
            if (k, u) not in self._firsts:
                reprs = list(map(repr, us))
                least = min(reprs)
                self._firsts[k, u] = [m for m, r in enumerate(reprs) if r.startswith(least)]
            best.extend((str(e), e) for m in self._firsts[k, u] for e in [(us[m], vs[m])])
        return min(best)
