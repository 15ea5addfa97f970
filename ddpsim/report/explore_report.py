"""The report of a design space (``ddpsim explore``), each file written atomically:
``table.parquet`` and ``table.csv`` (one row per point, :func:`ddpsim.pipeline.explore.explore_table`;
Parquet keeps the types, the CSV 9 significant digits), ``front.csv`` (the Pareto front of
throughput against cost per 1,000 samples, GPU-hours without prices, by cost), ``scaling.png``
(per system, the best throughput at each GPU count against linear scaling of one GPU without DDP),
``front.png`` (every point's cost and throughput, the front drawn through) and ``report.md``.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

from ddpsim.io import ensure_dir, write_bytes_atomic, write_text_atomic
from ddpsim.report.plots import new_figure, save_figure
from ddpsim.report.tables import md_table, to_csv_text

#: the front's rows shown in report.md
FRONT_ROWS = 20


def write_explore_report(table: Any, out_dir: str | Path, *, title: str, cost_label: str,
                         notes: list[str] | None = None, plots: bool = True) -> list[Path]:
    """Write the module docstring's files (the PNGs only with ``plots``) into ``out_dir``; their paths."""
    out = ensure_dir(out_dir, "--out-dir")
    cost_col = "cost_per_1k_samples" if cost_label != "GPU-hours" else "gpu_hours_per_1k_samples"
    front = table[table["on_front"]].sort_values([cost_col, "point"], kind="mergesort")
    parquet = io.BytesIO()  # pyarrow: the same bytes for the same table
    table.to_parquet(parquet, engine="pyarrow", index=False)
    paths = [write_bytes_atomic(out / "table.parquet", parquet.getvalue()),
             write_text_atomic(out / "table.csv", to_csv_text(table)),
             write_text_atomic(out / "front.csv", to_csv_text(front))]
    if plots:
        paths.append(save_figure(scaling_figure(table, title), out / "scaling.png"))
        paths.append(save_figure(front_figure(table, cost_col, cost_label, title), out / "front.png"))
    paths.append(write_text_atomic(out / "report.md", render_report(table, front, title, cost_col, cost_label,
                                                                    notes or [], plots=plots)))
    return paths


def _best(table: Any, by: list[str]) -> Any:
    """The row of highest throughput of each ``by`` group (the first on a tie), systems in order of appearance."""
    ok = table[table["throughput_samples_per_s"].notna()]
    return ok.loc[ok.groupby(by, sort=False)["throughput_samples_per_s"].idxmax()]


def scaling_figure(table: Any, title: str = "") -> Any:
    ax = new_figure(figsize=(7.5, 5)).add_subplot(1, 1, 1)
    best = _best(table, ["system", "world_size"])
    for system, rows in best.groupby("system", sort=False):
        rows = rows.sort_values("world_size", kind="mergesort")
        xs, ys = [int(w) for w in rows["world_size"]], [float(t) for t in rows["throughput_samples_per_s"]]
        line = ax.plot(xs, ys, marker="o", label=str(system))[0]
        rows = table[(table["system"] == system) & table["scaling_efficiency"].notna()]
        if len(rows):
            r = rows.iloc[0]
            one = r["throughput_samples_per_s"] / (r["world_size"] * r["scaling_efficiency"])
            ax.plot(xs, [one * w for w in xs], linestyle=":", color=line.get_color(), linewidth=1)
    ax.set_xscale("log", base=2)
    return _finish(ax, "GPUs (world size)", "throughput, samples/s (best point at each size)",
                   f"{title}: scaling per system (dotted: linear from one GPU without DDP)")


def front_figure(table: Any, cost_col: str, cost_label: str, title: str = "") -> Any:
    ax = new_figure(figsize=(7.5, 5)).add_subplot(1, 1, 1)
    ok = table[table["throughput_samples_per_s"].notna() & table[cost_col].notna()]
    for system, rows in ok.groupby("system", sort=False):
        ax.scatter(rows[cost_col], rows["throughput_samples_per_s"], s=10, alpha=0.5, label=str(system))
    front = ok[ok["on_front"]].sort_values(cost_col, kind="mergesort")
    ax.plot(front[cost_col], front["throughput_samples_per_s"], color="black", marker="o", markersize=4,
            linewidth=1.2, label="Pareto front")
    ax.set_xscale("log")
    return _finish(ax, f"cost per 1,000 samples ({cost_label})", "throughput, samples/s",
                   f"{title}: throughput against cost")


def _finish(ax: Any, xlabel: str, ylabel: str, title: str) -> Any:
    """Both explore plots' log y axis, labels, small title, grid and legend; the figure laid out."""
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.figure.tight_layout()
    return ax.figure


def _num(x: Any, digits: int = 4) -> str:
    return "-" if x is None or x != x else f"{x:.{digits}g}"  # None or NaN


def render_report(table: Any, front: Any, title: str, cost_col: str, cost_label: str, notes: list[str],
                  plots: bool = True) -> str:
    lines = [f"# {title}: design space", "",
             f"{len(table)} points over {table['system'].nunique()} system(s), "
             f"{table['world_size'].min()} to {table['world_size'].max()} GPUs. "
             "Throughput = samples per rank x world size / p50 step; scaling efficiency = throughput / "
             "(world size x one GPU's throughput without DDP); cost per 1,000 samples = GPUs x step / 3600 / "
             f"samples x 1,000 x price ({cost_label}). Files: table.parquet, table.csv, front.csv"
             f"{', scaling.png, front.png' if plots else ''}.", ""]
    lines += [f"- {n}" for n in notes] + ([""] if notes else [])
    best = [{"system": str(r["system"]), **_row(r, cost_col)} for _, r in _best(table, ["system"]).iterrows()]
    lines += ["## Best point per system", "", *md_table(best, 5),
              "", f"## Pareto front (throughput against cost; {len(front)} point(s), cheapest first)", ""]
    rows = [_row(r, cost_col, exposed=True) for _, r in front.head(FRONT_ROWS).iterrows()]
    if len(front) > FRONT_ROWS:
        rows.append(dict.fromkeys(rows[0], "") | {"point": f"... {len(front) - FRONT_ROWS} more in front.csv"})
    lines += md_table(rows, 6)
    lines += ["", "![scaling](scaling.png)", "", "![front](front.png)", ""] if plots else [""]
    return "\n".join(lines)


def _row(r: Any, cost_col: str, exposed: bool = False) -> dict[str, str]:
    """One point's cells in the report's tables (the exposed communication in the front's)."""
    return {"point": str(r["point"]), "GPUs": str(r["world_size"]), "step p50": f"{r['iteration_p50_s'] * 1e3:.1f} ms",
            **({"exposed comm": f"{r['exposed_comm_s'] * 1e3:.2f} ms"} if exposed else {}),
            "samples/s": _num(r["throughput_samples_per_s"]), "scaling eff.": _num(r["scaling_efficiency"], 3),
            "cost / 1k samples": _num(r[cost_col])}
