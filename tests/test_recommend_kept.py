"""The recommendation kept beside the points: a rerun whose points keep their resume keys reads
it back instead of simulating; a changed key, a stale file or none computes it again. The oracle
is the answer computed by the engine in the same test."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from ddpsim.engine.simulate import simulate
from ddpsim.pipeline import run as steps
from ddpsim.pipeline.scenario import scenario_from_dict
from ddpsim.pipeline.sweep import run_sweep


def _build(s, p, t):
    return s.build_point(p, trace=t)


def _refused(*_a, **_k):
    raise AssertionError("simulated although the answer is kept")


@pytest.fixture(scope="module")
def swept():
    sc = scenario_from_dict({"name": "t", "trace": "traces/mlp.cpu.json", "cluster": {"topology": "cpu-gloo"},
                             "world_size": 2, "simulation": {"iterations": 3, "jitter": "none"},
                             "sweep": {"bucket_cap_mb": [None, 1]}}, source="t")
    trace = sc.load_trace()
    return sc, trace, run_sweep(sc, trace=trace, progress=False, jobs=1)


def test_a_rerun_reads_the_kept_answer_without_simulating(swept, tmp_path):
    sc, trace, records = swept
    first = steps.recommend(sc, records, trace, _build, simulate, kept_dir=tmp_path)
    assert (tmp_path / steps.KEPT_FILE).is_file()
    again = steps.recommend(sc, records, trace, _build, _refused, kept_dir=tmp_path)
    assert json.dumps(again.info, sort_keys=True) == json.dumps(first.info, sort_keys=True)
    assert json.dumps(again.plan_doc, sort_keys=True) == json.dumps(first.plan_doc, sort_keys=True)
    assert again.inputs.point == first.inputs.point


def test_a_changed_point_key_or_a_broken_file_computes_again(swept, tmp_path):
    sc, trace, records = swept
    steps.recommend(sc, records, trace, _build, simulate, kept_dir=tmp_path)
    changed = [replace(records[0], key="0" * 20)] + list(records[1:])
    with pytest.raises(AssertionError, match="simulated although"):
        steps.recommend(sc, changed, trace, _build, _refused, kept_dir=tmp_path)
    (tmp_path / steps.KEPT_FILE).write_text("{not json")
    with pytest.raises(AssertionError, match="simulated although"):
        steps.recommend(sc, records, trace, _build, _refused, kept_dir=tmp_path)
    got = steps.recommend(sc, records, trace, _build, simulate, kept_dir=tmp_path)  # and writes it anew
    assert json.loads((tmp_path / steps.KEPT_FILE).read_text())["key"] == steps.kept_key(records)
    assert got.info["best_cap_point"] in {r.point_id for r in records}


def test_without_a_folder_nothing_is_kept(swept, tmp_path):
    sc, trace, records = swept
    a = steps.recommend(sc, records, trace, _build, simulate)
    b = steps.recommend(sc, records, trace, _build, simulate, kept_dir=None)
    assert a.info == b.info and list(tmp_path.iterdir()) == []
