"""An nccl-tests all_reduce_perf log as a calibration (ddpsim/calibration/nccl_tests.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ddpsim.calibration import nccl_tests
from ddpsim.calibration.loader import load_calibration
from ddpsim.cli.main import main
from ddpsim.errors import InputError
from ddpsim.network.collective_cost import build_comm_model
from ddpsim.network.topology import build_preset

LOG = Path(__file__).parent / "data" / "all_reduce_perf_2xa3mega_h100.txt"
#: the log's out-of-place times (us) per size (tests/data/README.profiles.md)
MEASURED_US = {8: 135.8, 1024: 147.1, 1 << 20: 203.2, 16 << 20: 977.6, 128 << 20: 1652.2, 1 << 30: 6759.0, 8 << 30: 47535.0}


def test_the_log_becomes_the_allreduce_curve_of_its_16_ranks():
    doc = nccl_tests.calibration_doc(LOG.read_text(), "log")
    assert (doc["backend"], doc["world_size"], doc["device"]) == ("nccl", 16, "cuda")
    assert doc["environment"]["devices"] == ["NVIDIA H100 80GB HBM3"]
    pts = doc["collectives"]["allreduce"]
    assert {p["size_bytes"]: p["time_s"] for p in pts} == pytest.approx({s: t * 1e-6 for s, t in MEASURED_US.items()})


def test_a_calibrated_model_gives_the_logged_time_at_each_logged_size():
    # the piecewise fit passes through every measured point; the log's run had 16 ranks, as here
    cal = load_calibration(LOG)
    m = build_comm_model(build_preset("dgx-h100", num_nodes=2), 16, calibration=cal)
    for size, us in MEASURED_US.items():
        assert m.estimate_allreduce(size).time_s == pytest.approx(us * 1e-6, rel=1e-9)


def test_collectives_cli_reads_the_log(capsys):
    assert main(["collectives", "--topology", "dgx-h100", "--nodes", "2", "--calibration", str(LOG),
                 "--sizes", "1GiB"]) == 0
    out = capsys.readouterr().out
    assert "calibrated" in out and "16 ranks" in out


def test_rows_with_and_without_the_root_column():
    # nccl-tests before 2.10 prints no root column: 12 fields instead of 13
    assert nccl_tests._row("  1048576  262144  float  sum  -1  203.2  5.16  9.68  0  207.2  5.06  9.49  0") == (
        1048576, "sum", pytest.approx(203.2e-6))
    assert nccl_tests._row("  1048576  262144  float  sum  203.2  5.16  9.68  0  207.2  5.06  9.49  0") == (
        1048576, "sum", pytest.approx(203.2e-6))
    assert nccl_tests._row("#  Rank  0 Group  0 Pid 1 on h device 0 [0x1] NVIDIA H100") is None


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace("  sum  ", "  none ").replace("float     sum", "float    none"), "redop: 'none' is not accepted"),
    (lambda t: "\n".join(ln for ln in t.splitlines() if "Rank  0" in ln or "Rank" not in ln), "'# Rank' lines: 1 found"),
    (lambda t: "\n".join(ln for ln in t.splitlines() if ln.startswith("#") or " 1024 " in ln), "rows: 1 message size"),
])
def test_bad_logs_get_one_line_naming_what_is_wrong(tmp_path, edit, message):
    p = tmp_path / "log.txt"
    p.write_text(edit(LOG.read_text()))
    with pytest.raises(InputError) as exc:
        load_calibration(p)
    assert message in str(exc.value) and "\n" not in str(exc.value)


def test_text_that_is_neither_json_nor_a_log_keeps_the_json_error(tmp_path):
    p = tmp_path / "notes.txt"
    p.write_text("not a calibration\n")
    with pytest.raises(InputError, match="calibration") as exc:
        load_calibration(p)
    assert "nccl-tests all_reduce_perf log" in str(exc.value)
