"""Rank-to-rank variation of compute speed, and which ranks the engine simulates explicitly.

Rank ``r`` runs its compute in iteration ``k`` ``factor[k, r] = exp(sigma * Z[k, r]) *
straggler[r]`` times the trace's median (``Z ~ N(0, 1)``, a lognormal of median 1), with
``sigma`` from ``SimConfig.jitter``: ``"trace"`` matches the trace's ``backward_s`` p90/p10
(``ln(p90 / p10) / (2 * 1.2815515655446004)``), ``"none"`` is 0, a float ``cv`` gives
``sqrt(ln(1 + cv**2))``. ``Z`` is drawn in bulk for all ranks from the seeded generator passed
in, so a rank's factor is the same whether it runs explicitly or folded. docs/MODEL.md,
"Jitter, stragglers and scale"."""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from ddpsim.trace.records import Trace

#: z-score of the 90th percentile of a standard normal
Z90 = 1.2815515655446004

#: world sizes up to this are simulated rank by rank (no representative)
EXACT_WORLD_SIZE = 8
#: jittered sample ranks simulated explicitly above EXACT_WORLD_SIZE (besides rank 0 and stragglers)
NUM_SAMPLE_RANKS = 8


def jitter_sigma(trace: Trace, jitter: str | float) -> float:
    """The lognormal ``sigma`` of the per-rank, per-iteration compute factor."""
    if jitter == "none":
        return 0.0
    if jitter == "trace":
        st = trace.phase("backward")
        if st.p10_s <= 0 or st.p90_s <= st.p10_s:
            return 0.0
        return math.log(st.p90_s / st.p10_s) / (2 * Z90)
    cv = float(jitter)
    return math.sqrt(math.log1p(cv * cv))


def draw_factors(rng: np.random.Generator, sigma: float, num_iterations: int, world_size: int,
                 stragglers: Mapping[int, float]) -> np.ndarray:
    """``factor[k, r]`` (iteration index ``k`` from 0) for every rank, drawn in one call."""
    if sigma > 0:
        f = np.exp(sigma * rng.standard_normal((num_iterations, world_size)))
    else:
        f = np.ones((num_iterations, world_size))
    for r, s in sorted(stragglers.items()):
        f[:, r] *= s
    return f


def choose_explicit_ranks(world_size: int, stragglers: Mapping[int, float], sigma: float,
                          rank_group_size: int | None) -> tuple[tuple[int, ...], bool]:
    """Ranks simulated as their own SimPy process, and whether a "rest" representative is needed:
    with ``rank_group_size=g`` ranks ``0, g, 2g, ...`` plus every straggler; otherwise every rank
    when ``world_size <= EXACT_WORLD_SIZE``; else rank 0, every straggler and ``NUM_SAMPLE_RANKS``
    evenly spaced ranks (only rank 0 and the stragglers when there is no jitter: the others behave
    exactly like rank 0). With jitter the remaining ranks are represented by one extra process
    (``simulate._make_ranks``)."""
    if rank_group_size is not None:
        base = set(range(0, world_size, rank_group_size))
    elif world_size <= EXACT_WORLD_SIZE:
        base = set(range(world_size))
    elif sigma == 0:
        base = {0}
    else:
        base = {i * world_size // NUM_SAMPLE_RANKS for i in range(NUM_SAMPLE_RANKS)}
    explicit = tuple(sorted(base | set(stragglers)))
    return explicit, len(explicit) < world_size and sigma > 0

