"""The report's traces and PNGs drawn side by side (ddpsim.report.workers): each piece runs in a
forked worker that inherits its data (nothing but its result is pickled), an error in a piece is
raised where its result is asked for, and a report written by two processes is the report
written by one, byte for byte (the oracle: the one-process run)."""

from __future__ import annotations

import os
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from functools import partial

import pytest

from ddpsim.errors import InputError
from ddpsim.pipeline.scenario import scenario_from_dict
from ddpsim.pipeline.scenario_run import run_scenario
from ddpsim.report.scenario_report import write_report
from ddpsim.report import workers
from ddpsim.report.workers import SideBySide

needs_fork = pytest.mark.skipif(not workers._FORK, reason="workers are forked on Linux only")


class Unpicklable:
    """Data a worker can only have inherited: pickling it fails."""

    def __init__(self, value):
        self.value = value

    def __reduce__(self):
        raise TypeError("not picklable")


def _double(x):
    return 2 * x


@needs_fork
def test_pieces_run_in_forked_workers_on_inherited_data():
    data = Unpicklable(21)
    work = [lambda: (os.getpid(), data.value), None, lambda: (os.getpid(), data.value + 1)]
    with SideBySide(work, workers=2) as side:
        later = side.submit(partial(_double, 5))  # after the fork: pickled
        first, nothing, third = side.result(0), side.result(1), side.result(2)
        assert side.result(later) == 10
    assert nothing is None
    assert (first[1], third[1]) == (21, 22)
    assert os.getpid() not in (first[0], third[0])


@needs_fork
def test_a_piece_submitted_with_none_before_it_still_goes_to_a_worker():
    with SideBySide([None], workers=1) as side:
        i = side.submit(os.getpid)
        assert side.result(i) != os.getpid() and side.result(0) is None


def test_no_worker_runs_each_piece_here_when_asked():
    ran = []
    side = SideBySide([lambda: ran.append("a") or "a", lambda: ran.append("b") or "b"], workers=0)
    assert ran == []
    assert side.result(1) == "b" and ran == ["b"]
    assert side.result(1) == "b" and ran == ["b"]  # once
    side.close()


@needs_fork
def test_an_error_in_a_worker_is_raised_where_its_result_is_asked():
    def bad():
        raise InputError("x: bad; expected good")

    with SideBySide([bad, lambda: 1], workers=1) as side:
        assert side.result(1) == 1
        with pytest.raises(InputError, match="x: bad"):
            side.result(0)


def _files(rdir):
    return {p.name: p.read_bytes() for p in rdir.iterdir() if p.is_file()}


def _scenario():
    return scenario_from_dict({"name": "t", "trace": "traces/mlp.cpu.json", "cluster": {"topology": "cpu-gloo"},
                               "world_size": 2, "simulation": {"iterations": 3, "jitter": "none"},
                               "sweep": {"bucket_cap_mb": [None, 1]}}, source="t")


@needs_fork
def test_a_report_drawn_side_by_side_is_the_one_drawn_in_turn(tmp_path):
    sc = _scenario()
    one = write_report(run_scenario(sc, out_dir=tmp_path / "one", progress=False, jobs=1))
    run = run_scenario(sc, out_dir=tmp_path / "two", progress=False, jobs=2)
    assert run.jobs == 2
    two = write_report(run)
    names = _files(one.out_dir)
    assert any(n.endswith(".png") for n in names) and any(n.startswith("trace_") for n in names)
    assert _files(two.out_dir) == _files(one.out_dir)
    assert [p.name for p in two.files] == [p.name for p in one.files]
    assert two.summary == one.summary and two.summary_md == one.summary_md
    again = write_report(replace(run, jobs=1))  # every piece kept: nothing drawn, the same report
    assert _files(again.out_dir) == _files(one.out_dir)


@needs_fork
def test_a_report_started_while_the_plan_is_searched_is_the_same_report(tmp_path):
    from ddpsim.api import run_scenario as api_run

    one = api_run(_scenario(), out_dir=tmp_path / "one", progress=False, jobs=1)
    two = api_run(_scenario(), out_dir=tmp_path / "two", progress=False, jobs=2)
    assert _files(two.out_dir) == _files(one.out_dir)
    assert [p.name for p in two.files] == [p.name for p in one.files]


def test_a_report_started_for_other_settings_is_not_the_one_written(tmp_path):
    from ddpsim.report.scenario_report import start_drawing

    run = run_scenario(_scenario(), out_dir=tmp_path / "r", progress=False, jobs=1,
                       start_report=partial(start_drawing, plots=True))
    written = write_report(run, plots=False)  # the PNGs started with plots=True are not this report's
    assert not any(n.endswith(".png") for n in _files(written.out_dir))
    assert not any(p.name.endswith(".png") for p in written.files)


def test_a_started_report_is_closed_when_the_rest_of_the_run_fails(tmp_path, monkeypatch):
    from ddpsim.pipeline import scenario_run

    closed = []

    class Started:
        def close(self):
            closed.append(True)

    def failing(*a, **k):
        raise InputError("recommend: stand-in failure")

    monkeypatch.setattr(scenario_run.steps, "recommend", failing)
    with pytest.raises(InputError, match="stand-in failure"):
        run_scenario(_scenario(), out_dir=tmp_path, progress=False, jobs=1, start_report=lambda *a: Started())
    assert closed == [True]


@needs_fork
def test_pieces_no_worker_has_started_are_run_here_the_last_first(tmp_path):
    # the worker is held in piece 0 until piece 3 has run: here, as nothing else could run it
    flag = tmp_path / "ran-here"

    def hold():
        while not flag.exists():
            pass
        return os.getpid()

    work = [hold, os.getpid, os.getpid, lambda: flag.write_text("x") and os.getpid()]
    with SideBySide(work, workers=1) as side:
        while not side.futures[0].running():  # given to the worker
            pass
        got = side.results()
    assert got[3] == os.getpid() and got[0] != os.getpid()



@needs_fork
def test_a_worker_gone_is_an_error_where_its_result_is_asked_not_a_hang():
    with SideBySide([lambda: os._exit(3), lambda: 1], workers=1) as side:
        with pytest.raises(BrokenProcessPool, match="terminated abruptly"):
            side.result(0)
        with pytest.raises(BrokenProcessPool):
            side.results()
