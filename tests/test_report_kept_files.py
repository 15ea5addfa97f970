"""A rerun keeps the report's traces and PNGs whose points are all the same and whose files are
unchanged, and writes the rest again. The oracle is the first run's files, byte for byte, and
which files get drawn (counted by stand-ins for the drawing functions)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from ddpsim.pipeline.scenario import scenario_from_dict
from ddpsim.pipeline.scenario_run import run_scenario
from ddpsim.report import perfetto
from ddpsim.report import plots as P
from ddpsim.report.kept_files import KEPT_FILE, KeptFiles
from ddpsim.report.scenario_report import write_report

def _products(rdir):
    return {p.name: p.read_bytes() for p in rdir.iterdir() if p.is_file() and p.name.startswith("trace_")
            or p.suffix == ".png"}


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    sc = scenario_from_dict({"name": "t", "trace": "traces/mlp.cpu.json", "cluster": {"topology": "cpu-gloo"},
                             "world_size": 2, "simulation": {"iterations": 3, "jitter": "none"},
                             "sweep": {"bucket_cap_mb": [None, 1]}}, source="t")
    run = run_scenario(sc, out_dir=tmp_path_factory.mktemp("kept"), progress=False, jobs=1)
    rep = write_report(run)
    return run, rep, _products(run.out_dir)


@pytest.fixture
def drawn(monkeypatch):
    """The names of the files drawn or written (the real functions still run)."""
    names = []
    save, traces = P.save_figure, perfetto.written_traces

    def counted_save(fig, path, *a, **k):
        names.append(path.name)
        return save(fig, path, *a, **k)

    def counted_traces(result, out_dir, point_id, **k):
        names.append(f"traces {point_id}")
        return traces(result, out_dir, point_id, **k)

    monkeypatch.setattr(P, "save_figure", counted_save)
    monkeypatch.setattr(perfetto, "written_traces", counted_traces)
    return names


def test_a_rerun_keeps_every_trace_and_png_and_the_same_report(first, drawn):
    run, rep, files = first
    assert any(n.endswith(".png") for n in files) and any(n.startswith("trace_") for n in files)
    again = write_report(run)
    assert drawn == []
    assert _products(run.out_dir) == files
    assert again.summary == rep.summary and again.summary_md == rep.summary_md
    assert sorted(p.name for p in again.files) == sorted(p.name for p in rep.files)


def test_a_changed_file_is_drawn_again_and_only_it(first, drawn):
    run, _, files = first
    (run.out_dir / "sweep.png").write_bytes(b"not the png")
    name = next(n for n in files if n.startswith("trace_"))
    (run.out_dir / name).unlink()
    write_report(run)
    point = next(r.point_id for r in run.records if f"trace_{r.point_id.replace('=', '-')}_rank" in name)
    assert sorted(drawn) == sorted(["sweep.png", f"traces {point}"])
    assert _products(run.out_dir) == files


def test_without_a_key_or_under_another_one_everything_is_drawn(first, drawn):
    run, _, files = first
    write_report(replace(run, kept_key=None))
    assert sorted(n for n in drawn if n.endswith(".png")) == sorted(n for n in files if n.endswith(".png"))
    assert len([n for n in drawn if n.startswith("traces")]) == len(run.scenario.timeline_points(run.best.point))
    drawn.clear()
    write_report(replace(run, kept_key="0" * 20))  # other points: the kept entries are not theirs
    assert "sweep.png" in drawn and any(n.startswith("traces") for n in drawn)
    assert _products(run.out_dir) == files
    assert (run.out_dir / "points" / KEPT_FILE).is_file()


def test_the_key_names_the_points_and_the_scenario(tmp_path):
    def report_key(points_key, name):
        return KeptFiles(tmp_path, points_key, name).key

    assert report_key(None, "t") is None
    assert report_key("a" * 20, "t") == report_key("a" * 20, "t")
    assert report_key("a" * 20, "t") != report_key("b" * 20, "t") != report_key("b" * 20, "u")
