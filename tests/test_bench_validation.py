"""``ddpsim.validation.summary`` (``python studies/validation_summary.py``): the accuracy summary
it prints from validation reports, checked on a report folder written here with figures worked
out by hand."""

from __future__ import annotations

import json

from ddpsim.validation.summary import print_summary, targets_met


def _summary(median, band, gap, **kw):
    return {"num_points": 5, "median_abs_error_pct": median, "max_abs_error_pct": median + 1.0,
            "num_in_band_or_within_10pct": band, "predicted_best_gap_pct": gap, "plan_matches_all": True,
            "median_run_spread_pct": 2.0, "best_cap_verdict": "met", **kw}


def test_targets_are_the_three_criteria_at_their_bounds():
    assert targets_met(_summary(5.0, 5, 2.0)) == (True, True, True)       # each bound is inclusive
    assert targets_met(_summary(5.01, 4, 2.01)) == (False, False, False)


def test_summary_prints_one_line_per_report_and_counts_those_meeting_all_targets(tmp_path, capsys):
    reports = {"a": _summary(1.3, 5, 0.0),
               "b": _summary(4.9, 5, 2.5, best_cap_verdict="unresolved", best_pair_gap_ci95_pct=[-1.16, 4.25],
                             best_pair_rounds_to_decide=49)}
    for name, s in reports.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "validation.json").write_text(json.dumps(
            {"scenario": name, "world_size": 2, "num_threads": 1, "calibration": "cal.json", "summary": s}))
    assert print_summary(tmp_path) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == ["a", "5", "1.3", "%", "2.3", "%", "5/5", "0.0", "%", "met", "true", "2.0", "%"]
    assert out[2].split() == ["b", "5", "4.9", "%", "5.9", "%", "5/5", "2.5", "%", "(-1.2..+4.2", "%)",
                              "unresolved,", "~49", "rounds", "true", "2.0", "%"]
    assert "all three targets (median <= 5 %, every point in band or within 10 %, best-cap gap <= 2 %): 1 of 2" in out[4]


def test_no_report_is_one_line_exit_2(tmp_path, capsys):
    assert print_summary(tmp_path) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1
