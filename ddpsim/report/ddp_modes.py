"""Join and round-robin process groups in a scenario's summary: the figures (:func:`figures`: an
epoch under Join, :mod:`ddpsim.engine.join`; the p50 step per process-group count,
:mod:`ddpsim.engine.process_groups`), typed, and the bullets the answer leads with."""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Sequence

from ddpsim.pipeline.sweep import PointRecord, fmt_s
from ddpsim.plan.planner import cap_point_id

frozen = dataclass(frozen=True, kw_only=True)


@frozen
class JoinFigures:
    point: str
    world_size: int
    epoch_cost_pct: float
    epoch_s: float
    even_epoch_s: float
    loop_s: float
    exit_s: float
    epoch_iterations: int
    even_epoch_iterations: int
    per_iteration_cost_pct: float
    per_iteration_cost_s: float
    even_step_s: float
    epoch_mean_step_s: float
    tail_iterations: int
    batches_min: int
    batches_max: int


@frozen
class GroupCount:
    process_groups: int
    iteration_p50_s: float
    gain_over_one: float


@frozen
class ProcessGroupFigures:
    cap: str
    world_size: int
    best_process_groups: int
    gain_over_one: float
    by_count: tuple[GroupCount, ...]


@frozen
class DdpModeFields:
    """The summary's Join and process-group sections (None where the scenario has none)."""

    join: JoinFigures | None = None
    process_groups: ProcessGroupFigures | None = None


#: the figures of JoinFigures that Join's own (:mod:`ddpsim.engine.join`) give as they are
_JOIN_KEYS = tuple(f.name for f in fields(JoinFigures)
                   if f.name not in ("point", "world_size", "tail_iterations", "batches_min", "batches_max"))


def figures(records: Sequence[PointRecord], best: PointRecord) -> dict[str, Any]:
    """The summary's ``join`` entry (the ``best`` point's epoch under Join against the same
    samples dealt evenly, :mod:`ddpsim.engine.join`, where the scenario has ``ddp.join``) and
    ``process_groups`` entry (each round-robin process-group count's p50 step and gain over one at
    the best point's other values, :mod:`ddpsim.engine.process_groups`, where the sweep varies
    ``process_groups`` and has 1)."""
    out: dict[str, Any] = {}
    if j := best.metrics.get("join"):
        out["join"] = asdict(JoinFigures(
            point=best.point_id, world_size=best.world_size, **{k: j[k] for k in _JOIN_KEYS},
            tail_iterations=j["epoch_iterations"] - j["phases"][0]["epoch_iterations"],
            batches_min=min(j["batches_per_rank"]), batches_max=max(j["batches_per_rank"])))
    if "process_groups" not in dict(best.point.named):  # the sweep does not vary it
        return out
    others = best.point.with_value("process_groups", None)
    by_n = {r.point.value("process_groups"): r for r in records
            if r.point.with_value("process_groups", None) == others}
    if 1 in by_n:
        one = by_n[1].metrics["iteration_p50_s"]
        rows = [GroupCount(process_groups=n, iteration_p50_s=r.metrics["iteration_p50_s"],
                           gain_over_one=(one - r.metrics["iteration_p50_s"]) / one)
                for n, r in sorted(by_n.items())]
        top = max(rows, key=lambda x: (x.gain_over_one, -x.process_groups))
        out["process_groups"] = asdict(ProcessGroupFigures(
            cap=cap_point_id(*best.point.cap).partition("=")[2], world_size=best.world_size,
            best_process_groups=top.process_groups, gain_over_one=top.gain_over_one, by_count=tuple(rows)))
    return out


def answer_lines(s: DdpModeFields) -> list[str]:
    """The bullets a summary with these figures leads its answer with: an epoch under Join, then a
    sweep over round-robin process groups (:func:`figures`)."""
    j, pg = s.join, s.process_groups
    L: list[str] = []
    if j:
        L.append(f"- **Uneven inputs cost {j.epoch_cost_pct:.1f} % per epoch** (`{j.point}`, {j.world_size} "
                 f"ranks, {j.batches_min}-{j.batches_max} batches per rank): {fmt_s(j.epoch_s)} under "
                 f"`model.join()` vs {fmt_s(j.even_epoch_s)} for the same samples dealt evenly "
                 f"({j.even_epoch_iterations} steps of {fmt_s(j.even_step_s)}). Of it: Join's per-iteration "
                 f"collectives {j.per_iteration_cost_pct:+.2f} % per step ({fmt_s(j.per_iteration_cost_s)}), "
                 f"{j.tail_iterations} tail iterations after the first rank joins, and {fmt_s(j.exit_s)} "
                 "for the final model sync (`_sync_final_model`).")
    if pg:
        n, where = pg.best_process_groups, f"cap={pg.cap} on {pg.world_size} ranks"
        steps = ", ".join(f"{r.process_groups}: {fmt_s(r.iteration_p50_s)}" for r in pg.by_count)
        L.append(f"- **Round-robin process groups do not help here**: one communicator is fastest at {where} "
                 f"(p50 step by groups: {steps})." if n == 1 else
                 f"- **{n} round-robin process groups are {100 * pg.gain_over_one:.1f} % faster than 1** at "
                 f"{where} (p50 step by groups: {steps}). torch 2.13 has no `_round_robin_process_groups`: "
                 f"register a comm hook that all-reduces bucket k on the (k mod {n})-th of {n} "
                 "`dist.new_group()` groups.")
    return L
