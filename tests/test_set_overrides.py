"""``--set KEY=VALUE``: any scenario key from the command line, checked by the schema like the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from ddpsim.cli.main import main
from ddpsim.errors import InputError
from ddpsim.pipeline.scenario import apply_overrides, load_scenario

ROOT = Path(__file__).resolve().parents[1]
BASE = {"name": "s", "trace": str(ROOT / "traces/mlp.cpu.json"), "cluster": "cpu-gloo", "world_size": 2,
        "simulation": {"iterations": 4, "seed": 0}}


@pytest.fixture
def scenario(tmp_path: Path) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(yaml.safe_dump(BASE))
    return p


def test_values_are_yaml_and_keys_are_dotted():
    out = apply_overrides(BASE, ["ddp.bucket_cap_mb=50", "sweep.bucket_cap_mb=[null, 1]", "simulation.jitter=none",
                                 "simulation.interference={compute_slowdown: 2}", "calibration=null"])
    assert out["ddp"] == {"bucket_cap_mb": 50} and out["sweep"] == {"bucket_cap_mb": [None, 1]}
    assert out["simulation"] == {"iterations": 4, "seed": 0, "jitter": "none", "interference": {"compute_slowdown": 2}}
    assert out["calibration"] is None
    assert BASE["simulation"] == {"iterations": 4, "seed": 0}  # the file's mapping is left as read


def test_a_section_given_as_a_string_takes_a_key():
    assert apply_overrides(BASE, ["cluster.nodes=2"])["cluster"] == {"topology": "cpu-gloo", "nodes": 2}


def test_the_scenario_gets_the_overrides(scenario):
    sc = load_scenario(str(scenario), ["ddp.bucket_cap_mb=50", "simulation.seed=7", "name=other"])
    assert [p.point_id for p in sc.points()] == ["cap=default", "cap=50"]
    assert sc.simulation.seed == 7 and sc.name == "other"


@pytest.mark.parametrize("item, where", [("nokey", "--set"), ("=3", "--set"), ("ddp..x=1", "--set"),
                                         ("ddp.bucket_cap_mb=[1", "ddp.bucket_cap_mb"),
                                         ("trace.x=1", "trace.x")])
def test_a_bad_override_names_itself(item, where):
    with pytest.raises(InputError, match=r"^--set") as exc:
        apply_overrides(BASE, [item])
    assert where in str(exc.value)


def test_an_integer_too_long_for_python_is_one_line():
    """YAML reads 5,000 digits as an int, which Python refuses to convert (ValueError, not a
    YAMLError): one line naming the key, the value cut."""
    with pytest.raises(InputError, match=r"^--set world_size: '9{20,}.*characters\) is not a YAML value"):
        apply_overrides(BASE, ["world_size=" + "9" * 5000])


@pytest.mark.parametrize("item, key", [("ddp.bucket_cap_mb=-3", "ddp.bucket_cap_mb"), ("foo.bar=1", "foo"),
                                       ("simulation.seed=x", "simulation.seed")])
def test_the_schema_checks_the_value_and_the_key(scenario, item, key):
    with pytest.raises(InputError, match=rf": {key}: "):
        load_scenario(str(scenario), [item])


def test_run_takes_set_and_a_bad_one_exits_2(scenario, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["run", str(scenario), "--out-dir", str(out), "--jobs", "1", "--quiet", "--no-plots",
                 "--set", "sweep.bucket_cap_mb=[null, 0.01]", "--set", "name=swept"]) == 0
    summary = json.loads((out / "swept" / "summary.json").read_text())
    assert summary["num_points"] == 2 and [p["point"] for p in summary["points"]] == ["cap=default", "cap=0.01"]
    assert main(["run", str(scenario), "--out-dir", str(out), "--set", "simulation.iterations=0"]) == 2
    assert "simulation.iterations" in capsys.readouterr().err
