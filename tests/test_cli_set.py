"""``--set KEY=VALUE`` reaches every key of the scenario file on every verb that builds a scenario
(run, sweep, simulate, explore): the keys are walked from the schema (:class:`ScenarioFile` and
every section model it nests), so a key added to the schema is covered without a new flag.

The oracle: the mapping the scenario's schema is handed holds the value ``--set`` gave, at the
dotted key's place, and nothing else moved; a key a flag on the same line sets (sweep's and
simulate's --trace) is refused, one owner per key. A value the schema refuses is named by its key."""

from __future__ import annotations

import copy
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel

import ddpsim.pipeline.scenario as scenario_module
from ddpsim.cli.run import SCENARIO_FLAGS
from ddpsim.cli.main import main
from ddpsim.errors import InputError
from ddpsim.pipeline.scenario_schema import ScenarioFile

ROOT = Path(__file__).resolve().parents[1]
MLP = str(ROOT / "traces" / "mlp.cpu.json")

#: verb -> the argv before the --set items (explore's scenario has an explore block)
VERBS = {"run": ["run", "cpu-gloo-mlp"], "sweep": ["sweep", "--trace", MLP], "simulate": ["simulate", "--trace", MLP, "--set", "world_size=2"],
         "explore": ["explore", "gpt2-1.5b-design-space"]}


def _models(annotation: typing.Any) -> list[type[BaseModel]]:
    """The section model an annotation holds (through Optional and Annotated), or none: a field
    that may also be a list or a scalar (``sweep.bucket_cap_mb``: a list or a range) is one key,
    as are the items of a list or mapping; --set replaces those whole."""
    if isinstance(annotation, type):
        return [annotation] if issubclass(annotation, BaseModel) else []
    if typing.get_origin(annotation) is typing.Annotated:
        return _models(typing.get_args(annotation)[0])
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) not in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return []
    found = [_models(a) for a in args]
    return found[0] if len(found) == 1 else []


def scenario_keys(model: type[BaseModel] = ScenarioFile, prefix: str = "") -> list[str]:
    """Every dotted key of ``model``: each field, and the fields of the sections it nests."""
    out = []
    for name, field in model.model_fields.items():
        out.append(prefix + name)
        for sub in _models(field.annotation):
            out += scenario_keys(sub, f"{prefix}{name}.")
    return out


def _get(data: dict, dotted: str) -> typing.Any:
    for part in dotted.split("."):
        data = data[part]
    return data


def _without(data: dict, dotted: str) -> dict:
    """``data`` without ``dotted`` (where it is) and without empty sections (--set creates those on
    its way to a nested key)."""
    out = copy.deepcopy(data)
    *parts, last = dotted.split(".")
    holder = out
    for part in parts:
        holder = holder.get(part) if isinstance(holder, dict) else None
    if isinstance(holder, dict):
        holder.pop(last, None)
    return _pruned(out)


def _pruned(data: typing.Any) -> typing.Any:
    if not isinstance(data, dict):
        return data
    out = {k: _pruned(v) for k, v in data.items()}
    return {k: v for k, v in out.items() if v != {}}


class _Handed(InputError):
    """Raised by the patched schema step with the mapping it was handed (the verb stops there)."""


@pytest.fixture
def handed(monkeypatch):
    """The mappings that ``--set`` produced, as the verbs hand them to the scenario's schema."""
    seen: list[dict] = []
    real = scenario_module.apply_overrides

    def capture(data, overrides):
        seen.append(real(data, overrides))
        raise _Handed("handed over")

    monkeypatch.setattr(scenario_module, "apply_overrides", capture)
    return seen


def test_the_walk_reaches_nested_sections():
    keys = scenario_keys()
    assert len(keys) == len(set(keys))
    for key in ("ddp.bucket_cap_mb", "ddp.powersgd.matrix_approximation_rank", "ddp.join.spread",
                "simulation.interference.comm_slowdown", "cluster.options", "sweep.bucket_cap_mb",
                "explore.sample.seed", "validation.iterations", "cost_model.enqueue_s", "compile.ddp_optimizer"):
        assert key in keys, key


@pytest.mark.parametrize("verb", VERBS)
def test_every_scenario_key_is_reachable_by_set(verb, handed, capsys):
    argv = VERBS[verb]
    assert main(argv) == 2 and capsys.readouterr().err == "ddpsim: error: handed over\n"
    base = handed.pop()
    missed = []
    owned = {k: f for k, f in SCENARIO_FLAGS.items() if f in argv}  # keys a flag on the line sets: its own
    for key in scenario_keys():
        value = f"set-{key}"
        assert main([*argv, "--set", f"{key}={value}"]) == 2
        if key in owned:
            assert capsys.readouterr().err.startswith(f"ddpsim: error: --set {key}: not accepted with {owned[key]} ")
            continue
        assert capsys.readouterr().err == "ddpsim: error: handed over\n"
        data = handed.pop()
        if _get(data, key) != value:
            missed.append(key)
            continue
        if _without(data, key) != _without(base, key):  # nothing else moved
            missed.append(key)
    assert not missed, f"'ddpsim {verb} --set' does not reach: {missed}"


@pytest.mark.parametrize("verb", VERBS)
def test_a_value_the_schema_refuses_names_its_key(verb, capsys):
    argv = [*VERBS[verb], *(["--topology", "cpu-gloo"] if verb == "simulate" else []),
            "--set", "simulation.interference.comm_slowdown=fast"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "simulation.interference.comm_slowdown: 'fast' is not accepted; expected" in err


@pytest.mark.parametrize("argv, line", [
    (["sweep", "--trace", MLP, "--set", "trace=traces/resnet50.cpu.json"],
     "--set trace: not accepted with --trace (both set trace); expected one of the two"),
    (["simulate", "--trace", MLP, "--topology", "cpu-gloo", "--set", "cluster={topology: dgx-a100}"],
     "--set cluster: not accepted with --topology (both set cluster.topology); expected one of the two"),
    (["sweep", "--trace", MLP, "--topology", "cpu-gloo", "--set", "cluster.topology=dgx-a100"],
     "--set cluster.topology: not accepted with --topology (both set cluster.topology); expected one of the two"),
])
def test_a_key_has_one_owner_on_a_command_line(argv, line, capsys):
    assert main(argv) == 2
    assert capsys.readouterr().err == f"ddpsim: error: {line}\n"


def test_a_flag_not_given_leaves_its_key_to_set(handed, capsys):
    """The verbs' defaults (topology, nodes; simulate's 2 ranks without a topology) apply only
    where --set does not give the key: a topology set with --set counts its devices."""
    for argv, cluster, world_size in (
            (["sweep", "--trace", MLP], {"topology": "cpu-gloo", "nodes": 1}, None),
            (["sweep", "--trace", MLP, "--set", "cluster.nodes=3"], {"topology": "cpu-gloo", "nodes": 3}, None),
            (["simulate", "--trace", MLP], {"topology": None, "nodes": 1}, 2),
            (["simulate", "--trace", MLP, "--set", "cluster.topology=dgx-a100"], {"topology": "dgx-a100", "nodes": 1}, None),
            (["simulate", "--trace", MLP, "--topology", "dgx-a100", "--set", "cluster.nodes=2"],
             {"topology": "dgx-a100", "nodes": 2}, None)):
        assert main(argv) == 2 and capsys.readouterr().err == "ddpsim: error: handed over\n"
        data = handed.pop()
        assert (data["cluster"], data["world_size"]) == (cluster, world_size), argv
