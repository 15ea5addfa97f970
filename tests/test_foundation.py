"""Units, config validation, atomic writes, the alpha-beta model and the CLI dispatcher."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest

from ddpsim.cli.main import COMMANDS, build_parser, main
from ddpsim.network.comm_model import AlphaBetaModel, CommModel
from ddpsim.errors import InputError
from ddpsim.io import write_text_atomic
from ddpsim.engine.config import SimConfig
from ddpsim.network.interference import Interference
from ddpsim.units import MIB, format_size, mb_to_bytes, parse_size_bytes


@pytest.mark.parametrize("text,expected", [
    ("1KiB", 1024), ("4MiB", 4 * 1024 * 1024), ("1MB", 1_000_000), ("512", 512),
    ("1.5KiB", 1536), ("2GiB", 2 * 1024**3), (64, 64),
])
def test_parse_size_bytes(text, expected):
    assert parse_size_bytes(text) == expected


@pytest.mark.parametrize("bad", ["", "abc", "-1KiB", "0", "0.3B", "1 parsec"])
def test_parse_size_bytes_rejects(bad):
    with pytest.raises(InputError, match=r"^sizes: .* expected|^sizes: .*not a positive"):
        parse_size_bytes(bad, field="sizes")


def test_mb_to_bytes_is_mib_like_ddp():
    # DDP: int(bucket_cap_mb * 1024 * 1024)
    assert mb_to_bytes(25) == 26_214_400
    assert mb_to_bytes(0.5) == 524_288
    assert format_size(MIB) == "1 MiB"


def test_alpha_beta_model_closed_form():
    m = AlphaBetaModel(latency_s=1e-3, bandwidth_bytes_per_s=1e9)
    # 1 ms + 1e6 B / 1e9 B/s = 2 ms
    assert m.allreduce_s(1_000_000) == pytest.approx(2e-3)
    assert m.broadcast_s(0) == pytest.approx(1e-3)
    assert isinstance(m, CommModel)
    with pytest.raises(InputError, match="bandwidth_bytes_per_s: 0"):
        AlphaBetaModel(latency_s=0.0, bandwidth_bytes_per_s=0)
    with pytest.raises(InputError, match="latency_s: nan"):
        AlphaBetaModel(latency_s=math.nan)


@pytest.mark.parametrize("kwargs,match", [
    ({"world_size": 0}, "world_size: 0"),
    ({"num_iterations": 0}, "num_iterations: 0"),
    ({"num_iterations": 3, "num_warmup_iterations": 3}, "num_warmup_iterations: 3"),
    ({"comm_hook": "zip"}, "comm_hook: 'zip'.*none, allreduce, fp16, bf16, powersgd"),
    ({"jitter": "lots"}, "jitter: 'lots'"),
    ({"jitter": -0.1}, "jitter: -0.1"),
    ({"world_size": 4, "stragglers": {4: 2.0}}, r"stragglers: rank 4 .*\[0, 4\)"),
    ({"stragglers": {0: 0.5}}, r"stragglers\[0\]: 0.5"),
    ({"copy_bandwidth_bytes_per_s": -1.0}, "copy_bandwidth_bytes_per_s: -1.0"),
    ({"powersgd": {"matrix_approximation_rank": 0}}, "powersgd.matrix_approximation_rank: 0"),
])
def test_simconfig_rejects(kwargs, match):
    with pytest.raises(InputError, match=match):
        SimConfig(**kwargs)


def test_interference_rejects_speedup():
    with pytest.raises(InputError, match="interference.compute_slowdown: 0.9"):
        Interference(compute_slowdown=0.9)


def test_write_text_atomic_keeps_old_file_on_failure(tmp_path, monkeypatch):
    target = tmp_path / "a.txt"
    write_text_atomic(target, "old")
    import ddpsim.io as io_mod

    def boom(*_a, **_k):
        raise OSError("disk full")

    monkeypatch.setattr(io_mod.os, "replace", boom)
    with pytest.raises(OSError):
        write_text_atomic(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.txt"]  # no temp file left behind


def test_every_verb_is_registered_with_help_and_examples():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert tuple(sub.choices) == COMMANDS
    for name, p in sub.choices.items():
        assert p.description, name
        assert p.epilog and "ddpsim " + name in p.epilog, f"{name} --help has no examples"


def test_cli_input_error_is_one_line_exit_2(capsys, tmp_path):
    rc = main(["plan", str(tmp_path / "missing.json")])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.startswith("ddpsim: error: ") and err.count("\n") == 1
    assert "missing.json" in err


def test_cli_subprocess_no_traceback(tmp_path):
    bad = tmp_path / "t.json"
    bad.write_text("{not json")
    proc = subprocess.run([sys.executable, "-m", "ddpsim", "plan", str(bad)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert "not valid JSON" in proc.stderr


def test_write_text_atomic_uses_umask_mode(tmp_path):
    import os

    old = os.umask(0o022)
    try:
        path = write_text_atomic(tmp_path / "r.md", "x")
    finally:
        os.umask(old)
    assert (path.stat().st_mode & 0o777) == 0o644


def test_interference_rejects_an_unknown_weighting():
    with pytest.raises(InputError, match=r"interference.weighting: 'bytes' is not accepted; expected one of uniform, bandwidth"):
        Interference(compute_slowdown=2.0, weighting="bytes")


def test_an_error_line_made_long_by_a_huge_value_keeps_its_start_and_end():
    from ddpsim.errors import MAX_LINE, InputError

    text = "ddp.delay_all_reduce_named_params: '" + "x" * 50_000 + "' is not accepted; expected names"
    line = str(InputError(text))
    assert len(line) <= MAX_LINE and "\n" not in line
    assert line.startswith("ddp.delay_all_reduce_named_params: 'xxx") and line.endswith("expected names")
    assert f"... ({len(text)} characters) ..." in line
