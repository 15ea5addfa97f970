"""Profiles as torch writes them today: ids that are unsigned 64-bit integers.

Kineto writes ``record_param_comms``' ``"Comms Id"`` (a hash) as an unsigned 64-bit integer;
ijson's C parser (yajl) refuses any integer outside the signed 64-bit range. The oracle is
Python's own ``json`` (arbitrary-precision integers) reading the same bytes."""

from __future__ import annotations

import gzip
import json
from pathlib import Path


from ddpsim.trace.profile import import_profile
from ddpsim.trace.profile.kineto import read_profile, widen_integers

DATA = Path(__file__).resolve().parent / "data"
A100 = DATA / "resnet50_ddp_2xA100_rank0.json.gz"
LARGE = DATA / "large_integer_ids.json"
U64 = 2 ** 64 - 59  # a value above 2^63, as Kineto's hashes are


def test_a_profile_with_unsigned_64_bit_ids_is_read():
    """The small fixture (a Comms Id above 2^63 on the CPU op and the kernel, a header hash, a
    sequence number below -2^63) is read: every event, and the kept fields as json reads them."""
    doc = json.loads(LARGE.read_text())
    prof = read_profile(LARGE)
    assert len(prof.cpu_ops) + len(prof.runtime) + len(prof.gpu) == len(doc["traceEvents"]) == 3
    (op,), (gpu,) = prof.cpu_ops, prof.gpu
    want = doc["traceEvents"][0]["args"]
    assert op.ext_id == want["External id"] and op.args["In msg nelems"] == want["In msg nelems"]
    assert gpu.correlation == 9 and gpu.grid == (2, 1, 1)
    assert prof.distributed_info["world_size"] == 2
    assert prof.distributed_info["comms_hash"] == float(doc["distributedInfo"]["comms_hash"])


def test_widen_integers_changes_only_integers_outside_int64():
    """Through widen_integers, the document is json's reading of the original with each integer
    outside [-2^63, 2^63) a float, and nothing else changed (an integer inside the range, digits
    inside a string, an escaped quote, a float, a near-limit value)."""
    doc = {"a": [U64, -(2 ** 63) - 1, 2 ** 63 - 1, -(2 ** 63), 12, 1.5e3],
           "s": "ids: 18446744073709551557, kept", "q": 'a\\" 18446744073709551557 "', "b": {"x": U64},
           "c": [[U64], 2 ** 70], "e": 1.8446744073709552e+19}
    got = json.loads(widen_integers(json.dumps(doc).encode()))

    def widen(v):
        if isinstance(v, bool) or not isinstance(v, int):
            return {k: widen(x) for k, x in v.items()} if isinstance(v, dict) else [widen(x) for x in v] \
                if isinstance(v, list) else v
        return v if -(2 ** 63) <= v < 2 ** 63 else float(v)

    assert got == widen(doc)
    assert isinstance(got["a"][2], int) and got["s"] == doc["s"] and got["q"] == doc["q"]


def test_a_current_profile_with_a_large_comms_id_imports_with_the_same_phases(tmp_path):
    """The A100 fixture with a Comms Id above 2^63 on every record_param_comms (as torch 2.x
    writes it) imports; its steps, phases, buckets and collectives are the original's."""
    with gzip.open(A100, "rt") as f:
        doc = json.load(f)
    n = 0
    for e in doc["traceEvents"]:
        if e.get("name") == "record_param_comms":
            e["args"]["Comms Id"] = U64 - n
            n += 1
    assert n > 0
    path = tmp_path / "large_ids.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    new, old = import_profile(path), import_profile(A100)
    assert new.iterations == old.iterations and new.collectives == old.collectives
    assert new.trace.iterations == old.trace.iterations


#: torch 1.8's Kineto categories (libkineto output_json.cpp of 2021) for today's
OLD_CATS = {"cpu_op": "Operator", "user_annotation": "Operator", "cuda_runtime": "Runtime", "kernel": "Kernel",
            "gpu_memcpy": "Memcpy", "gpu_memset": "Memset"}


def test_a_2021_format_profile_with_steps_16_to_18_imports_as_todays(tmp_path):
    """The A100 profile written in 2021's format (CPU ops and annotations ``Operator``, runtime
    calls ``Runtime``, ``Kernel``/``Memcpy``/``Memset``, device events' ``external id`` in lower
    case) with its steps renumbered #16-#18 imports with the same phases, step for step."""
    with gzip.open(A100, "rt") as f:
        doc = json.load(f)
    for e in doc["traceEvents"]:
        old = OLD_CATS.get(e.get("cat"))
        if old is None:
            continue
        if old in ("Runtime", "Kernel", "Memcpy", "Memset") and "External id" in e.get("args", {}):
            e["args"]["external id"] = e["args"].pop("External id")
        e["cat"] = old
        if e["name"].startswith("ProfilerStep#"):
            e["name"] = f"ProfilerStep#{int(e['name'][13:]) + 12}"
    path = tmp_path / "old.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    new, old = import_profile(path), import_profile(A100)
    assert [it.step for it in new.iterations] == [16, 17, 18]
    for a, b in zip(new.iterations, old.iterations, strict=True):
        assert (a.forward, a.backward, a.optimizer, a.buckets, a.grad_ready_s) == \
               (b.forward, b.backward, b.optimizer, b.buckets, b.grad_ready_s)


def test_a_factory_returning_a_bare_module_needs_no_input_shape(tmp_path, capsys):
    """``--model package.module:factory`` with ``--from-profile`` (as ``torchvision.models:resnet18``)
    names the parameters without ``--set input_shape``, which ``--from-profile`` refuses beside it:
    only the factory's parameters are read."""
    from ddpsim.cli.main import main
    from ddpsim.trace.records import load_trace

    out = tmp_path / "t.json"
    rc = main(["trace", "--from-profile", str(A100), "--model", "profile_factories:resnet50_module", "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    trace = load_trace(out)
    assert trace.num_params == 161 and trace.environment["param_mapping"]["method"] == "factory"


def test_a_step_without_a_backward_is_left_out_with_a_note(tmp_path):
    """A profile whose last ProfilerStep holds no backward (the trace ends inside it, as in HTA's
    MI250 example): the complete steps import, the partial one is named in a note; the comparison,
    which measures the import's steps, skips it likewise."""
    with gzip.open(A100, "rt") as f:
        doc = json.load(f)
    last = max((e for e in doc["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")), key=lambda e: e["ts"])
    end = last["ts"] + last["dur"]
    doc["traceEvents"].append({**last, "name": "ProfilerStep#7", "ts": end + 10, "dur": 50})
    path = tmp_path / "partial.json.gz"
    with gzip.open(path, "wt") as f:
        json.dump(doc, f)
    imp, old = import_profile(path), import_profile(A100)
    assert [it.step for it in imp.iterations] == [4, 5, 6] and imp.iterations == old.iterations
    assert any(n.startswith("ProfilerStep#7: no backward") for n in imp.notes)
